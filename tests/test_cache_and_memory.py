"""Disk cache of parsed models, the memory budget and LRU eviction."""

import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tb_plugin
import tb_plugin.python_api.profile
from tb_plugin.store.cache import MANIFEST, ModelCache
from tb_plugin.store.cache_format import CACHE_FORMAT, summary_format
from tb_plugin.server.loading import RunStore
from tb_plugin.schema import NULLABLE, Column, Persisted, Table
from tb_plugin.store.storage import FileStat, Storage

from .helpers import PREFIX, SAMPLES, SHARED_TRACES, make_client, op, raw_events, wait_ready, wait_route, write_trace

REAL_TRACES = sorted(p for p in SHARED_TRACES.glob("*/*.json.gz") if not p.parent.name.startswith("reference"))


def cnn_logdir(tmp_path):
    shutil.copytree(SAMPLES / "cpu_cnn", tmp_path / "logs" / "cnn")
    return tmp_path / "logs"


def entries(cache_dir):
    return [p for p in Path(cache_dir).iterdir() if (p / MANIFEST).is_file()]


def identity(path):
    return Storage(path.parent).identity(path.name)


def test_second_store_loads_from_cache_without_parsing(tmp_path, monkeypatch):
    logdir = cnn_logdir(tmp_path)
    cache = ModelCache(tmp_path / "cache")
    first = RunStore(str(logdir), cache=cache)
    first.wait_for_scan(30)
    original = first.profile_blocking("cnn", "worker0", 2, timeout=60)
    first.stop()
    assert len(entries(tmp_path / "cache")) == 1
    monkeypatch.setattr(tb_plugin.python_api.profile, "profile_from_bytes", lambda *a, **k: pytest.fail("parsed although cached"))
    second = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))
    second.wait_for_scan(30)
    cached = second.profile_blocking("cnn", "worker0", 2, timeout=60)
    second.stop()
    assert cached.operators().equals(original.operators())
    assert cached.steps().equals(original.steps())


def counted_parses(monkeypatch):
    """The traces parsed from now on (`profile_from_bytes`, what every door's parse calls)."""
    parsed = []
    real = tb_plugin.python_api.profile.profile_from_bytes
    monkeypatch.setattr(tb_plugin.python_api.profile, "profile_from_bytes",
                        lambda stored, display, *a, **k: parsed.append(display) or real(stored, display, *a, **k))
    return parsed


def test_load_with_a_cache_dir_reads_the_cache_the_second_time(tmp_path, monkeypatch):
    trace = next(iter(sorted(cnn_logdir(tmp_path).glob("cnn/*.json.gz"))))
    parsed = counted_parses(monkeypatch)
    first = tb_plugin.load(trace, cache_dir=tmp_path / "cache")
    assert len(parsed) == 1 and len(entries(tmp_path / "cache")) == 1
    second = tb_plugin.load(trace, cache_dir=tmp_path / "cache")
    assert len(parsed) == 1  # read from the cache, not parsed
    uncached = tb_plugin.load(trace)
    assert len(parsed) == 2
    for answer in (second, first):
        assert answer.operators().equals(uncached.operators())
        assert answer.kernels().equals(uncached.kernels())
        assert answer.steps().equals(uncached.steps())


def test_load_run_with_a_cache_dir_stores_the_profiles_it_parses_for_the_next_reader(tmp_path, monkeypatch):
    run_dir = cnn_logdir(tmp_path) / "cnn"
    parsed = counted_parses(monkeypatch)
    first = tb_plugin.load_run(run_dir, cache_dir=tmp_path / "cache")
    original = first.profile(first.workers[0], 1)
    assert len(parsed) == 1 and len(entries(tmp_path / "cache")) == 1
    again = tb_plugin.load_run(run_dir, cache_dir=tmp_path / "cache")
    cached = again.profile(again.workers[0], 1)
    assert len(parsed) == 1  # read from the cache, not parsed
    assert cached.operators().equals(original.operators())
    assert cached.steps().equals(original.steps())


@pytest.mark.parametrize("trace", [*sorted(SAMPLES.glob("*/*.json.gz")), *REAL_TRACES], ids=lambda p: p.parent.name)
def test_cached_model_is_the_parsed_model(tmp_path, trace):
    """Every table (values, dtypes, shared category lists), the origin, metadata and anomalies
    come back from the Arrow entry as the parser made them."""
    model = tb_plugin.load(trace).model
    cache = ModelCache(tmp_path / "cache")
    cache.put(ModelCache.key(str(trace)), {"size": 1}, model)
    back = cache.get(ModelCache.key(str(trace)), {"size": 1})
    for name in (*model.TABLES, "threads", "devices"):
        pd.testing.assert_frame_equal(getattr(back, name), getattr(model, name), check_exact=True)
    assert (back.origin_us, back.metadata, back.anomalies) == (model.origin_us, model.metadata, model.anomalies)
    assert back.kernels["name"].cat.categories is back.ops["name"].cat.categories


def test_changed_file_is_not_served_from_cache(tmp_path):
    path = write_trace(tmp_path / "logs" / "run" / "w.pt.trace.json", [op("ProfilerStep#1", 0, 5, cat="user_annotation")])
    cache = ModelCache(tmp_path / "cache")
    store = RunStore(str(tmp_path / "logs"), cache=cache)
    store.wait_for_scan(30)
    assert store.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [1]
    write_trace(path, [op("ProfilerStep#2", 0, 5, cat="user_annotation"), op("ProfilerStep#3", 5, 5, cat="user_annotation")])
    assert store.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [2, 3]
    store.stop()


def same_size_trace(path, step):
    """A one-step trace whose JSON has the same length for any one-digit `step`."""
    return write_trace(path, [op(f"ProfilerStep#{step}", 0, 5, cat="user_annotation"), op("aten::mm", 1, 3)])


@pytest.mark.parametrize("how", ["in_place", "renamed_over"])
def test_same_size_replacement_with_mtime_kept_is_seen_in_memory_and_across_restarts(tmp_path, how):
    """`cp -p new old` (written in place) and `rsync -a` (a new file renamed over the old one)
    keep size and mtime: the store still sees the new content, and so does a restarted one
    that finds the old content's entry in the disk cache."""
    logdir = tmp_path / "logs"
    path = same_size_trace(logdir / "run" / "w.pt.trace.json", 1)
    store = RunStore(str(logdir))  # stays running: what it holds in memory is checked
    writer = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))  # leaves an entry of the old content
    for one in (store, writer):
        one.wait_for_scan(30)
        assert one.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [1]
    writer.stop()
    before = os.stat(path)
    replacement = same_size_trace(tmp_path / "new.json", 7)
    assert replacement.stat().st_size == before.st_size
    if how == "in_place":
        shutil.copyfile(replacement, path)  # same inode, as cp writes over an existing file
    else:
        os.replace(replacement, path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns and os.stat(path).st_size == before.st_size

    # the same store, still running: its profile in memory is of the old content
    assert store.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [7]
    store.stop()
    # a restart: the disk cache's entry is of the old content
    restarted = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))
    restarted.wait_for_scan(30)
    assert restarted.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [7]
    restarted.stop()


def test_same_size_replacement_with_inode_and_ctime_kept_is_caught_by_the_content_hash(tmp_path, monkeypatch):
    """Where ctime cannot be trusted (a file system that does not keep it, a restored copy),
    the hash of the file's head and tail still tells the content apart."""
    path = same_size_trace(tmp_path / "logs" / "run" / "w.pt.trace.json", 1)
    cache = ModelCache(tmp_path / "cache")
    key = ModelCache.key(str(path))
    cache.put(key, identity(path), tb_plugin.load(path).model)
    old = identity(path)
    same_size_trace(path, 7)
    monkeypatch.setattr(Storage, "stat", lambda self, rel: FileStat(old["size"], old["mtime"], old["version"]))
    new = identity(path)
    assert (new["size"], new["mtime"], new["version"]) == (old["size"], old["mtime"], old["version"])
    assert cache.get(key, new) is None


def test_flipped_bytes_in_an_entry_mean_a_reparse_and_right_numbers(tmp_path):
    """The issue's case: bytes flipped in the middle of an entry served wrong step times with
    HTTP 200. Every part carries its SHA-256: the damaged entry is parsed again."""
    logdir = cnn_logdir(tmp_path)
    store = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))
    store.wait_for_scan(30)
    expected = store.profile_blocking("cnn", "worker0", 1, timeout=60).steps()
    store.stop()
    (entry,) = entries(tmp_path / "cache")
    part = max(entry.glob("table-ops-*.arrow"), key=lambda p: p.stat().st_size)
    data = bytearray(part.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(b ^ 0xFF for b in data[middle:middle + 16])
    part.write_bytes(bytes(data))
    parsed = []
    real = tb_plugin.python_api.profile.profile_from_bytes
    again = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))
    again.wait_for_scan(30)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tb_plugin.python_api.profile, "profile_from_bytes", lambda *a, **k: parsed.append(1) or real(*a, **k))
        got = again.profile_blocking("cnn", "worker0", 1, timeout=60).steps()
    again.stop()
    assert parsed == [1]
    pd.testing.assert_frame_equal(got, expected)
    raw = raw_events(sorted((logdir / "cnn").glob("*.gz"))[0])
    steps = sorted((e for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    assert got["step"].tolist() == [int(e["name"].split("#")[1]) for e in steps]


@pytest.mark.parametrize("damage", ["empty_manifest", "manifest_not_json", "part_missing", "part_empty",
                                    "checksum_of_another_part", "part_outside_the_entry", "other_format"])
def test_damaged_cache_entry_is_discarded_and_rebuilt(tmp_path, damage):
    logdir = cnn_logdir(tmp_path)
    store = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))
    store.wait_for_scan(30)
    store.profile_blocking("cnn", "worker0", 1, timeout=60)
    store.stop()
    (entry,) = entries(tmp_path / "cache")
    manifest = json.loads((entry / MANIFEST).read_text())
    parts = sorted(entry.glob("table-*.arrow"))
    if damage == "empty_manifest":
        (entry / MANIFEST).write_bytes(b"")
    elif damage == "manifest_not_json":
        (entry / MANIFEST).write_bytes(b"\x80\x04not json")
    elif damage == "part_missing":
        parts[0].unlink()
    elif damage == "part_empty":
        parts[0].write_bytes(b"")
    elif damage == "checksum_of_another_part":
        names = list(manifest["parts"])
        manifest["parts"][names[0]][1] = manifest["parts"][names[1]][1]
        (entry / MANIFEST).write_text(json.dumps(manifest))
    elif damage == "part_outside_the_entry":  # with the right checksum of what it names
        outside = tmp_path / "outside.arrow"
        outside.write_bytes(parts[0].read_bytes())
        name = next(n for n, (file_name, _) in manifest["parts"].items() if file_name == parts[0].name)
        manifest["parts"][name][0] = os.path.relpath(outside, entry)
        (entry / MANIFEST).write_text(json.dumps(manifest))
    else:
        manifest["format"] = 1
        (entry / MANIFEST).write_text(json.dumps(manifest))
    again = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))
    again.wait_for_scan(30)
    assert again.profile_blocking("cnn", "worker0", 1, timeout=60).model.steps["step"].tolist() == [2, 3]
    again.stop()
    rebuilt = json.loads((entry / MANIFEST).read_text())
    assert rebuilt["format"] == CACHE_FORMAT
    assert all((entry / name).is_file() and "/" not in name for name, _ in rebuilt["parts"].values())


class _Planted:
    def __reduce__(self):
        return (os.system, (f"touch {PLANTED_MARK}",))


PLANTED_MARK = "/tmp/tb_plugin_planted_cache_entry_ran"


def _plant_entry(logdir, cache_dir):
    """A pickle under the old format's name and an entry of the new format whose parts are
    pickles, for the first trace of `logdir`'s cnn run; returns the entry's directory."""
    import hashlib

    trace = sorted((logdir / "cnn").glob("*.gz"))[0]
    source = Storage(logdir).display(f"cnn/{trace.name}")
    key = ModelCache.key(source)
    payload = pickle.dumps(_Planted())
    (cache_dir / f"{key}.tbpp").write_bytes(payload)  # the old format's name
    entry = cache_dir / key
    entry.mkdir()
    part_names = {f"table-{name}": [f"table-{name}.arrow", hashlib.sha256(payload).hexdigest()]
                  for name in ("ops", "threads")}
    for file_name, _ in part_names.values():
        (entry / file_name).write_bytes(payload)
    (entry / MANIFEST).write_text(json.dumps({
        "format": CACHE_FORMAT, "version": tb_plugin.__version__, "source": source,
        "identity": Storage(logdir).identity(f"cnn/{trace.name}"),
        "model": {"origin_us": 0, "metadata": {}, "anomalies": {}, "columns": {}, "categories": 0, "memory_bytes": 1},
        "parts": part_names}))
    return entry


def test_planted_entries_in_a_world_writable_cache_never_run(tmp_path, caplog):
    """The issue's attack: in a 0777 cache directory someone else plants entries. Such a
    directory is refused with its reason (anyone could plant or replace entries), and the
    trace is parsed; nothing in it is read, let alone run."""
    logdir = cnn_logdir(tmp_path)
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o777)
    Path(PLANTED_MARK).unlink(missing_ok=True)
    _plant_entry(logdir, cache_dir)
    store = RunStore(str(logdir), cache=ModelCache(cache_dir))
    store.wait_for_scan(30)
    assert store.profile_blocking("cnn", "worker0", 1, timeout=60).model.steps["step"].tolist() == [2, 3]
    store.stop()
    assert not Path(PLANTED_MARK).exists()
    assert store.cache.enabled is False and "is writable by other users (mode 777)" in caplog.text


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="planting as another user needs root")
def test_entries_another_user_planted_in_a_sticky_shared_cache_are_refused(tmp_path, caplog):
    """A sticky world-writable directory (as /tmp) lets others add entries, not replace
    ours: the cache is used, but an entry owned by another user is refused with its reason,
    sealed and well-formed or not, and the trace parsed."""
    logdir = cnn_logdir(tmp_path)
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o1777)
    # A real entry of this trace, written by this user, then handed over to another.
    store = RunStore(str(logdir), cache=ModelCache(cache_dir))
    store.wait_for_scan(30)
    store.profile_blocking("cnn", "worker0", 1, timeout=60)
    store.stop()
    (entry,) = entries(cache_dir)
    for path in (entry, *entry.iterdir()):
        os.chown(path, 4242, 4242)
    parsed = []
    real = tb_plugin.python_api.profile.profile_from_bytes
    again = RunStore(str(logdir), cache=ModelCache(cache_dir))
    again.wait_for_scan(30)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tb_plugin.python_api.profile, "profile_from_bytes", lambda *a, **k: parsed.append(1) or real(*a, **k))
        assert again.profile_blocking("cnn", "worker0", 1, timeout=60).model.steps["step"].tolist() == [2, 3]
    again.stop()
    assert again.cache.enabled and parsed == [1]
    assert f"{entry.name} belongs to another user (uid 4242)" in caplog.text
    assert all(path.stat().st_uid == 4242 for path in entry.iterdir())  # not written into, not deleted


def test_two_processes_sharing_the_cache_never_read_partial_entries(tmp_path):
    """Writers rename complete parts into place and write the manifest last; concurrent
    readers see a whole entry or none."""
    model = tb_plugin.load(sorted((SAMPLES / "cpu_cnn").glob("*.gz"))[0]).model
    cache = ModelCache(tmp_path / "cache")
    key = ModelCache.key("x")
    errors = []

    def write():
        for _ in range(10):
            ModelCache(tmp_path / "cache").put(key, {"size": 1}, model)

    def read():
        for _ in range(100):
            got = cache.get(key, {"size": 1})
            if got is not None and len(got.ops) != len(model.ops):
                errors.append("partial")

    threads = [threading.Thread(target=write), threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and cache.get(key, {"size": 1}) is not None
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def test_two_processes_writing_the_same_entry_at_once(tmp_path):
    """Two real processes (as two TensorBoards, or `preprocess` workers) write one entry at
    the same time: the entry that remains reads back whole."""
    model_source = sorted((SAMPLES / "cpu_cnn").glob("*.gz"))[0]
    script = (f"import tb_plugin; from tb_plugin.store.cache import ModelCache; m = tb_plugin.load({str(model_source)!r}).model\n"
              f"for _ in range(5): ModelCache({str(tmp_path / 'cache')!r}).put(ModelCache.key('x'), {{'size': 1}}, m)")
    procs = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    back = ModelCache(tmp_path / "cache").get(ModelCache.key("x"), {"size": 1})
    assert back is not None and len(back.ops) == len(tb_plugin.load(model_source).model.ops)


def test_cache_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir()
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path / "cache").st_uid + 1)
    cache = ModelCache(tmp_path / "cache")
    assert cache.enabled is False and cache.get("k", {}) is None


def test_cache_is_trimmed_to_its_size(tmp_path):
    model = tb_plugin.load(sorted((SAMPLES / "cpu_cnn").glob("*.gz"))[0]).model
    cache = ModelCache(tmp_path / "cache", max_bytes=1)
    cache.put(ModelCache.key("a"), {"size": 1}, model)
    cache.put(ModelCache.key("b"), {"size": 1}, model)
    assert len(entries(tmp_path / "cache")) <= 1


def test_stale_temporary_files_are_removed_on_start_and_fresh_ones_count_toward_the_limit(tmp_path):
    """A write killed midway leaves a temporary file: one older than any write is removed
    when the cache is first used; a fresh one (maybe another process's write in progress)
    is kept but counts toward the size limit."""
    model = tb_plugin.load(sorted((SAMPLES / "cpu_cnn").glob("*.gz"))[0]).model
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    stale, fresh = cache_dir / ".tmp-killed", cache_dir / ".tmp-writing"
    stale.write_bytes(b"x" * 1000)
    old = os.stat(stale).st_mtime - 7200
    os.utime(stale, (old, old))
    probe = ModelCache(tmp_path / "probe")
    probe.put(ModelCache.key("a"), {"size": 1}, model)
    entry_size = sum(f.stat().st_size for f in entries(tmp_path / "probe")[0].iterdir())
    fresh.write_bytes(b"x" * entry_size)
    cache = ModelCache(cache_dir, max_bytes=int(entry_size * 1.5))
    assert cache.enabled and not stale.exists() and fresh.exists()
    cache.put(ModelCache.key("a"), {"size": 1}, model)
    assert entries(cache_dir) == []  # the entry and the fresh temporary file do not both fit


def test_least_recently_used_profiles_are_dropped_beyond_the_budget(tmp_path):
    logdir = cnn_logdir(tmp_path)
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", logdir / "ddp")
    one = tb_plugin.load(sorted((SAMPLES / "cpu_cnn").glob("*.gz"))[0]).model.nbytes()
    store = RunStore(str(logdir), max_memory_bytes=int(one * 2.5), max_parse_bytes=1 << 30,
                     cache=ModelCache(tmp_path / "cache"))
    store.wait_for_scan(30)
    order = [("cnn", "worker0", 1), ("cnn", "worker0", 2), ("ddp", "worker0", 1), ("ddp", "worker1", 1)]
    for run, worker, span in order:
        store.profile_blocking(run, worker, span, timeout=60)
        assert sum(store.budget.sizes.values()) <= store.max_memory_bytes
    kept = set(store.budget.loaded)
    last = store.span_file(*order[-1]).path
    first = store.span_file(*order[0]).path
    assert last in kept and first not in kept and len(kept) < len(order)
    # an evicted profile comes back (from the disk cache) when asked for again
    assert store.profile_blocking("cnn", "worker0", 1, timeout=60).model.steps["step"].tolist() == [2, 3]
    store.stop()


def test_trace_larger_than_the_budget_is_refused_with_a_message(tmp_path):
    logdir = cnn_logdir(tmp_path)
    plugin, client = make_client(logdir, profiler_max_memory_mb=1)
    plugin.store.wait_for_scan(30)
    response = wait_ready(client, "run=cnn&worker=worker0")
    assert response.status_code == 422
    assert "memory budget" in response.get_json()["reason"] and "--profiler_max_memory_mb" in response.get_json()["reason"]
    plugin.store.stop()


def test_a_summary_built_twice_at_once_is_one_object(tmp_path):
    """The loader thread and a request can both build a file's summary (a request asks while
    the profile finishes loading): both get the first one stored, so replies reused by the
    identity of the summaries they read stay valid."""
    write_trace(tmp_path / "run" / "w.pt.trace.json", [op("aten::add", 0, 5)])
    store = RunStore(str(tmp_path))
    store.wait_for_scan(30)
    profile = store.profile_blocking("run", "w", 1, timeout=60)
    path = store.span_file("run", "w", 1).path
    first, second = object(), object()
    store._wanted[path] = {"k": (lambda p: first, None)}
    assert store._build_summaries(path, profile) == {"k": first}
    store._wanted[path] = {"k": (lambda p: second, None)}  # built again by another thread meanwhile
    assert store._build_summaries(path, profile) == {"k": first}
    assert store.summary("run", "w", 1, "k", lambda p: second) is first
    store.stop()


@dataclasses.dataclass(eq=False)
class _Part:
    """A per-file summary as the views build them: tables, an array, scalars."""

    rank: int
    note: str | None
    calls: pd.DataFrame
    starts: np.ndarray


# `_Part`'s declarations, as a view declares its summary's (not registered: no route serves them).
_PART = Persisted("part", _Part, {
    "calls": Table("test_part_calls", "one call", (Column("name", "str", "", "its name"),
                                                   Column("us", "float64", "us", "its time"))),
    "starts": Table("test_part_starts", "one start", (Column("value", "int64", "us", "the start"),)),
}, scalars=Table("test_part", "one file", (Column("rank", "int64", "", "its rank"),
                                           Column("note", "str", "", "a note, or none", NULLABLE))),
    arrays=("starts",))


def _part(rank, rows):
    calls = pd.DataFrame({"name": [f"k{rank}.{i}" for i in range(rows)], "us": np.arange(rows, dtype=np.float64)})
    return _Part(rank, None if rank else "first", calls, np.arange(rows, dtype=np.int64) * rank)


def test_a_runs_summary_index_gives_back_each_member_as_stored(tmp_path):
    """Three workers' summaries in one index entry (one with no rows at all) come back, per
    member, equal to what was put in their declared dtypes, with each file's identity to
    check them against."""
    cache = ModelCache(tmp_path / "cache")
    members = [(f"/logs/job/rank{r}.json", {"size": r}, _part(r, rows)) for r, rows in enumerate([3, 0, 2])]
    assert cache.put_summary_index("/logs/job", 1, _PART, members)
    found = cache.get_summary_index("/logs/job", 1, _PART)
    assert list(found) == [source for source, _, _ in members]
    for source, identity, part in members:
        got_identity, got = found[source]
        assert got_identity == identity and (got.rank, got.note) == (part.rank, part.note)
        # the values put, with the declared dtypes (an empty member's text column was float64)
        pd.testing.assert_frame_equal(got.calls, part.calls, check_dtype=False)
        _PART.tables["calls"].check(got.calls)
        np.testing.assert_array_equal(got.starts, part.starts)
        assert got.starts.dtype == np.int64
    assert cache.get_summary_index("/logs/job", 2, _PART) is None  # another span: none
    assert cache.get_summary_index("/logs/other", 1, _PART) is None


def test_a_files_summary_entry_is_not_taken_for_another_files(tmp_path):
    """An entry whose manifest names the file but whose member is another file's (copied over
    by hand) is refused: the summary is built again, never served for the wrong file."""
    cache = ModelCache(tmp_path / "cache")
    assert cache.put_summary("k1", {"size": 1}, _part(1, 2), _PART, "/a")
    assert cache.get_summary("k1", {"size": 1}, _PART).rank == 1
    manifest_path = tmp_path / "cache" / "k1" / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["summary"]["members"][0]["identity"] = {"size": 2}
    manifest_path.write_text(json.dumps(manifest))
    assert cache.get_summary("k1", {"size": 1}, _PART) is None


def _changed(declared, field, column, **change):
    """A copy of `declared` whose table `field` (None: its scalars) has `column` changed
    (renamed, retyped)."""
    table = declared.scalars if field is None else declared.tables[field]
    changed = dataclasses.replace(table, columns=tuple(dataclasses.replace(c, **change) if c.name == column else c
                                                       for c in table.columns))
    if field is None:
        return dataclasses.replace(declared, scalars=changed)
    return dataclasses.replace(declared, tables={**declared.tables, field: changed})


def _persisted_parts():
    from tb_plugin.python_api.runs import FILE_SUMMARIES
    from tb_plugin.views.memory_snapshot import SNAPSHOT_PARTS

    return [declared for declared, _ in FILE_SUMMARIES.values()] + [SNAPSHOT_PARTS]


def _one_change(declared, change):
    """A copy of `declared` with one change to the layout of one of its tables."""
    field, table = next(iter(declared.tables.items()))
    if change == "a table renamed":
        return dataclasses.replace(declared, tables={**declared.tables, field: dataclasses.replace(table, name="renamed")})
    if change == "a column renamed":  # an array's one column is `value`: a table's
        field = next(f for f in declared.tables if f not in declared.arrays)
        return _changed(declared, field, declared.tables[field].columns[0].name, name="renamed")
    column = table.columns[0]
    if change == "a column retyped":
        return _changed(declared, field, column.name, dtype="str" if column.dtype != "str" else "float64")
    return _changed(declared, field, column.name, nullable=not column.nullable, dtype="float64")


@pytest.mark.parametrize("change", ["a table renamed", "a column renamed", "a column retyped", "a column made nullable"])
def test_a_persisted_declaration_changed_is_another_cache_format(change):
    """Renaming or retyping one column (or table) of any summary the cache persists changes
    that summary's format, and so its entries' names, without an edit to `CACHE_FORMAT`."""
    for declared in _persisted_parts():
        if change == "a column renamed" and set(declared.tables) == set(declared.arrays):
            continue  # only arrays: each is a table of one column, `value`
        changed = _one_change(declared, change)
        assert summary_format(changed) != summary_format(declared), declared.name
        assert summary_format(changed).startswith(f"{CACHE_FORMAT}.")
        assert ModelCache.summary_key("/a", changed) != ModelCache.summary_key("/a", declared)
        assert ModelCache.summary_index_key("/r", 1, changed) != ModelCache.summary_index_key("/r", 1, declared)
        # what the stored bytes do not depend on leaves the format as it is
        field, table = next(iter(declared.tables.items()))
        assert summary_format(_changed(declared, field, table.columns[0].name, doc="reworded")) == \
            summary_format(declared)


def test_an_entry_written_under_the_old_declarations_is_never_read_as_the_new(tmp_path, monkeypatch):
    """An entry written before a column was retyped is missed under the new declaration: under
    its new name there is none, and read by its old name its format is refused; the old
    declaration still reads it."""
    cache = ModelCache(tmp_path / "cache")
    old_key = ModelCache.summary_key("/a", _PART)
    assert cache.put_summary(old_key, {"size": 1}, _part(2, 3), _PART, "/a")
    retyped = _changed(_PART, "starts", "value", dtype="float64")  # whole numbers would read as floats
    assert cache.get_summary(ModelCache.summary_key("/a", retyped), {"size": 1}, retyped) is None
    assert cache.get_summary(old_key, {"size": 1}, retyped) is None
    assert cache.put_summary_index("/r", 1, _PART, [("/a", {"size": 1}, _part(2, 3)), ("/b", {"size": 2}, _part(3, 1))])
    assert cache.get_summary_index("/r", 1, retyped) is None
    monkeypatch.setattr(ModelCache, "summary_index_key", staticmethod(lambda run, span, declared: ModelCache.key(
        f"summary-index:{summary_format(_PART)}:{declared.name}|{span}|{run}")))  # the old entry's name, asked anew
    assert cache.get_summary_index("/r", 1, retyped) is None
    assert cache.get_summary_index("/r", 1, _PART) is not None
    pd.testing.assert_frame_equal(cache.get_summary(old_key, {"size": 1}, _PART).calls, _part(2, 3).calls)


@pytest.mark.parametrize("shape", ["an extra column", "a missing column", "text where numbers are declared"])
def test_a_summary_unlike_its_declarations_is_not_cached(tmp_path, shape):
    """A summary whose table does not fit its declaration is not written (the view that made
    it has a bug): nothing is stored that could be read back as something else."""
    part = _part(1, 2)
    part.calls = {"an extra column": part.calls.assign(extra=1.0), "a missing column": part.calls[["name"]],
                  "text where numbers are declared": part.calls.assign(us=["a", "b"])}[shape]
    cache = ModelCache(tmp_path / "cache")
    assert not cache.put_summary("k", {"size": 1}, part, _PART, "/a")
    assert cache.get_summary("k", {"size": 1}, _PART) is None


# Routes answered from a run's models (info, overview, timeline_event) and from its per-rank
# summaries (job, distributed, timeline_ranks).
_ROUTES = ("info?run=fsdp&worker=worker0&span=1", "overview?run=fsdp&worker=worker0&span=1",
           "timeline_event?run=fsdp&worker=worker0&span=1&event=0", "job?run=fsdp", "distributed?run=fsdp",
           "timeline_ranks?run=fsdp")


def _answers(logdir, cache_dir, entries_expected=0):
    """{route: (status, body)} of a server on `cache_dir`, once it wrote `entries_expected`
    cache entries (summaries are written off the request path)."""
    plugin, client = make_client(logdir, profiler_cache_dir=str(cache_dir))
    try:
        answers = {}
        for route in _ROUTES:
            response = wait_route(client, f"{PREFIX}/{route}")
            body = response.get_json()
            if isinstance(body, dict):
                body.pop("load_seconds", None)
            answers[route] = (response.status_code, body)
        deadline = time.monotonic() + 60
        while len(entries(cache_dir)) < entries_expected:
            assert time.monotonic() < deadline, "the cache entries were not written"
            time.sleep(0.05)
    finally:
        plugin.store.stop()
    return answers


def _reseal(entry, manifest):
    """Write `manifest` into `entry` sealed as the cache seals it: a damaged manifest that
    only its schema can catch (as a writer with a bug would leave)."""
    from tb_plugin.store.cache_format import sealed_manifest

    manifest = sealed_manifest(entry.name, {k: v for k, v in manifest.items() if k != "seal"})
    (entry / MANIFEST).write_text(json.dumps(manifest))


def _nested(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


# The damaged manifests, each sealed as if written so: how each entry's manifest is changed.
_OFF_SCHEMA = {
    "memory_bytes_infinity": lambda m: m.get("model") and m["model"].update(memory_bytes=float("inf")),
    "parts_a_list": lambda m: m.update(parts=list(m["parts"].items())),
    "parts_a_string": lambda m: m.update(parts="table-ops"),
    "metadata_a_list": lambda m: m.get("model") and m["model"].update(metadata=["distributedInfo"]),
    "rank_beyond_64_bits": lambda m: m.get("model") and m["model"]["metadata"].update(
        distributedInfo={"rank": 2 ** 70}),
    "metadata_nested_300_deep": lambda m: m.get("model") and m["model"]["metadata"].update(
        distributedInfo={"rank": 0, "pg_config": _nested(300)}),
    "undeclared_anomaly": lambda m: m.get("model") and m["model"].update(anomalies={"no_such_anomaly": 1}),
    "scalar_beyond_64_bits": lambda m: m.get("summary") and m["summary"]["members"][0]["scalars"].update(
        rank=2 ** 70),
}


@pytest.fixture(scope="module")
def fsdp_cached(tmp_path_factory):
    """A two-rank run, its answers and the cache entries (models and summaries) it leaves."""
    root = tmp_path_factory.mktemp("fsdp")
    shutil.copytree(SAMPLES / "cpu_fsdp2_gloo", root / "logs" / "fsdp")
    answers = _answers(root / "logs", root / "cache", entries_expected=8)  # 2 models, 2 x 3 summaries
    assert {status for status, _ in answers.values()} == {200}
    return root, answers


def _served_after_damage(fsdp_cached, tmp_path, damage):
    """The answers of a server on a copy of the cache in which `damage(entry, manifest)` was
    done to every entry, and the entries parsed again since."""
    root, _ = fsdp_cached
    cache_dir = tmp_path / "cache"
    shutil.copytree(root / "cache", cache_dir)
    damaged = {}
    for entry in entries(cache_dir):
        damage(entry, json.loads((entry / MANIFEST).read_bytes()))
        damaged[entry.name] = (entry / MANIFEST).read_bytes()
    answers = _answers(root / "logs", cache_dir)
    rewritten = [e for e in entries(cache_dir) if (e / MANIFEST).read_bytes() != damaged[e.name]]
    return answers, rewritten


@pytest.mark.parametrize("damage", _OFF_SCHEMA)
def test_a_manifest_off_its_schema_is_discarded_and_the_trace_parsed_again(fsdp_cached, tmp_path, damage):
    """The issue's cases answered 422 'internal error: OverflowError' or 500 on every request,
    across restarts, until the entry was deleted by hand."""
    def resealed(entry, manifest):
        if _OFF_SCHEMA[damage](manifest) is not False:
            _reseal(entry, manifest)

    answers, _ = _served_after_damage(fsdp_cached, tmp_path, resealed)
    assert answers == fsdp_cached[1]


def test_a_manifest_nested_past_the_recursion_limit_is_discarded(fsdp_cached, tmp_path):
    def deep(entry, manifest):
        (entry / MANIFEST).write_text('{"format": ' + "[" * 100_000 + "]" * 100_000 + "}")

    answers, rewritten = _served_after_damage(fsdp_cached, tmp_path, deep)
    assert answers == fsdp_cached[1] and len(rewritten) >= 2  # at least both models parsed again


# Edits that fit the schema, each of which served wrong numbers with HTTP 200.
_EDITS = {
    "origin_us": lambda m: m["model"].update(origin_us=m["model"]["origin_us"] + 1000.0),
    "metadata": lambda m: m["model"]["metadata"].update(distributedInfo={"rank": 7, "world_size": 8}),
    "anomalies": lambda m: m["model"]["anomalies"].update(invalid_durations_zeroed=5),
    "column_order": lambda m: m["model"]["columns"]["ops"].update(order=m["model"]["columns"]["ops"]["order"][::-1]),
    "part_of_another_rank_with_its_digest": None,  # worker1's steps in worker0's entry (see below)
}


@pytest.mark.parametrize("edit", _EDITS)
def test_an_edited_manifest_is_detected_and_the_entry_rebuilt(fsdp_cached, tmp_path, edit):
    original = fsdp_cached[0] / "cache"

    def edited(entry, manifest):
        if "model" not in manifest:
            return
        if _EDITS[edit] is None:
            other = next(json.loads((e / MANIFEST).read_text()) for e in entries(original)
                         if "model" in json.loads((e / MANIFEST).read_text()) and e.name != entry.name)
            file_name, digest = other["parts"]["table-steps"]
            shutil.copy(original / ModelCache.key(other["source"]) / file_name, entry / file_name)
            manifest["parts"]["table-steps"] = [file_name, digest]
        else:
            _EDITS[edit](manifest)
        (entry / MANIFEST).write_text(json.dumps(manifest))

    answers, rewritten = _served_after_damage(fsdp_cached, tmp_path, edited)
    assert answers == fsdp_cached[1]
    # worker0's model, the one these routes load, was parsed again (the others answer from summaries)
    assert len([e for e in rewritten if "model" in json.loads((e / MANIFEST).read_text())]) == 1


def _load_counting_parses(logdir, cache_dir):
    """Load the cnn run's first span from a new store on `cache_dir`: how many parses it took."""
    parsed = []
    real = tb_plugin.python_api.profile.profile_from_bytes
    store = RunStore(str(logdir), cache=ModelCache(cache_dir))
    store.wait_for_scan(30)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tb_plugin.python_api.profile, "profile_from_bytes", lambda *a, **k: parsed.append(1) or real(*a, **k))
        assert store.profile_blocking("cnn", "worker0", 1, timeout=60).model.steps["step"].tolist() == [2, 3]
    store.stop()
    return len(parsed)


def test_a_linked_entry_directory_is_neither_read_nor_written_through(tmp_path):
    """The issue's case: an entry directory that is a symbolic link was written through, and
    every other file in the directory it pointed to deleted. It is now removed as a link (what
    it points to untouched, its entry there not read) and the entry written anew in its place."""
    logdir = cnn_logdir(tmp_path)
    cache_dir = tmp_path / "cache"
    assert _load_counting_parses(logdir, cache_dir) == 1
    (entry,) = entries(cache_dir)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(entry, elsewhere)  # a whole, valid entry, outside the cache
    (elsewhere / "precious.txt").write_text("not the cache's")
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    entry.symlink_to(elsewhere, target_is_directory=True)
    assert _load_counting_parses(logdir, cache_dir) == 1
    assert not entry.is_symlink() and (entry / MANIFEST).is_file()
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before
    assert _load_counting_parses(logdir, cache_dir) == 0  # the new entry serves


def test_a_linked_part_is_not_read_and_files_the_cache_did_not_write_stay(tmp_path):
    logdir = cnn_logdir(tmp_path)
    cache_dir = tmp_path / "cache"
    _load_counting_parses(logdir, cache_dir)
    (entry,) = entries(cache_dir)
    part = max(entry.glob("table-ops-*.arrow"), key=lambda p: p.stat().st_size)
    outside = tmp_path / "outside.arrow"
    shutil.move(part, outside)  # the part's exact bytes, reached through a link
    part.symlink_to(outside)
    (entry / "notes.txt").write_text("someone's notes")
    assert _load_counting_parses(logdir, cache_dir) == 1
    assert outside.is_file() and (entry / "notes.txt").read_text() == "someone's notes"
    assert not any(p.is_symlink() for p in entry.iterdir())
    trimmed = ModelCache(cache_dir, max_bytes=1)
    assert trimmed.enabled
    trimmed._trim()  # the entry trimmed away: its files, not the notes
    assert [p.name for p in entry.iterdir()] == ["notes.txt"]


def test_temporary_files_of_killed_writes_on_this_host_are_removed_on_start(tmp_path):
    """The README says so; they stayed until an hour old. A temporary file names its writer's
    host and process: one of a process here that is gone is removed on start, one of a live
    process (a write in progress) or of another host only once an hour old."""
    from tb_plugin.store.cache import _HOST

    cache_dir = tmp_path / "cache"
    cache_dir.mkdir(mode=0o700)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    killed = cache_dir / f".tmp-{_HOST}-{gone.pid}-{'a' * 32}"
    writing = cache_dir / f".tmp-{_HOST}-{os.getpid()}-{'b' * 32}"
    other_host = cache_dir / f".tmp-elsewhere-{gone.pid}-{'c' * 32}"
    for path in (killed, writing, other_host):
        path.write_bytes(b"x" * 100)
    assert ModelCache(cache_dir).enabled
    assert not killed.exists() and writing.exists() and other_host.exists()


def test_a_write_that_fails_on_a_full_disk_leaves_no_entry_and_the_next_one_succeeds(tmp_path, monkeypatch):
    """A full disk failed writes after some parts: the entry directories without a manifest
    stayed for good (counted in the size limit, never read). The failed write's parts are
    removed at once, and one a killed write left is removed on start once stale."""
    import errno

    model = tb_plugin.load(sorted((SAMPLES / "cpu_cnn").glob("*.gz"))[0]).model
    cache_dir = tmp_path / "cache"
    cache = ModelCache(cache_dir)
    real_write = ModelCache._write

    def full_at_the_manifest(self, path, data):
        if os.path.basename(path) == MANIFEST:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self, path, data)

    monkeypatch.setattr(ModelCache, "_write", full_at_the_manifest)
    assert cache.put(ModelCache.key("a"), {"size": 1}, model) is False
    assert list(cache_dir.iterdir()) == []
    monkeypatch.setattr(ModelCache, "_write", real_write)
    assert cache.put(ModelCache.key("a"), {"size": 1}, model) is True
    assert cache.get(ModelCache.key("a"), {"size": 1}) is not None
    # A killed write's parts, an hour old and fresh (a write in progress elsewhere):
    (entry,) = entries(cache_dir)
    old, fresh = cache_dir / ("0" * 64), cache_dir / ("1" * 64)
    for orphan in (old, fresh):
        shutil.copytree(entry, orphan)
        (orphan / MANIFEST).unlink()
    for path in (*old.iterdir(), old):
        os.utime(path, (time.time() - 7200,) * 2)
    assert ModelCache(cache_dir).enabled
    assert not old.exists() and fresh.exists() and (entry / MANIFEST).is_file()
