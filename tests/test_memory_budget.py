"""One memory budget for what the server holds, the loader pool, and files that could not be
read: the cases of issue 19 (items 4 to 6) reproduced against a `RunStore` (and, where the
issue saw them through TensorBoard, tests/test_tensorboard_server.py)."""

import gc
import gzip
import json
import os
import shutil
import threading
import time

import pytest

import tb_plugin.store.cache
import tb_plugin.python_api.profile
import tb_plugin.store.storage
from tb_plugin.server.accounting import REPLY_BYTES_PER_VALUE, ReplyCache, ReplyReservation
from tb_plugin.store.cache import ModelCache
from tb_plugin.errors import ReplyTooLargeError, TraceError
from tb_plugin.python_api.profile import Profile
from tb_plugin.python_api.snapshots import MemorySnapshot
from tb_plugin.server.loading import Loading, RunStore, estimate_parse_bytes, loader_count, ready

from .helpers import SAMPLES, make_client, op, wait_ready, write_trace


def store_of(logdir, **options):
    store = RunStore(str(logdir), **options)
    store.wait_for_scan(30)
    return store


def failure(store, run, worker="w", span=1, timeout=30):
    """The reason `store` gives for the span, waiting for its load to end."""
    with pytest.raises(TraceError) as caught:
        store.profile_blocking(run, worker, span, timeout=timeout)
    return caught.value.reason


# --- the loader pool ------------------------------------------------------------------------

def test_at_least_two_loaders_bounded_by_cores_and_budget():
    assert loader_count(4 << 30, cores=1) == 2
    assert loader_count(4 << 30, cores=16) == 4
    assert loader_count(512 << 20, cores=16) == 2


def test_a_small_trace_loads_while_a_large_one_is_still_loading(tmp_path, monkeypatch):
    """The issue's case: a 320 KB run waited 22 s behind a 1 GB parse. The large load is held
    (deterministically, at its read) until the small one has loaded beside it."""
    write_trace(tmp_path / "big" / "w.pt.trace.json", [op(f"aten::op{i}", i * 10, 5) for i in range(2000)])
    write_trace(tmp_path / "small" / "w.pt.trace.json", [op("ProfilerStep#4", 0, 50, cat="user_annotation")])
    gate, big_reading = threading.Event(), threading.Event()
    real_read = tb_plugin.store.storage.Storage.read_trace

    def held_read(self, rel, *args, **kwargs):
        if rel.startswith("big/"):
            big_reading.set()
            assert gate.wait(60)
        return real_read(self, rel, *args, **kwargs)

    monkeypatch.setattr(tb_plugin.store.storage.Storage, "read_trace", held_read)
    store = store_of(tmp_path)
    try:
        assert isinstance(store.profile("big", "w", 1), Loading)
        assert big_reading.wait(30)
        small = store.profile_blocking("small", "w", 1, timeout=60)
        assert small.model.steps["step"].tolist() == [4]
        assert isinstance(store.profile("big", "w", 1), Loading)  # still held: the small one did not wait for it
        gate.set()
        assert len(store.profile_blocking("big", "w", 1, timeout=60).model.ops) == 2000
    finally:
        gate.set()
        store.stop()


# --- the estimate, per event, and cancelling a load that does not fit -------------------------

def test_a_load_whose_counted_events_exceed_the_budget_is_cancelled_before_its_tables(tmp_path, monkeypatch):
    """Many tiny events behind a long first stretch without any (a large metadata block): the
    first estimate, from the file's head, sees no events; once the events are counted the
    load no longer fits and stops before a table is built."""
    events = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(200_000)]
    path = tmp_path / "run" / "w.pt.trace.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schemaVersion": 1, "padding": "x" * (2 << 20), "traceEvents": events}))
    json_bytes = path.stat().st_size
    before_counting = estimate_parse_bytes(json_bytes, 0)
    counted = estimate_parse_bytes(json_bytes, len(events))
    assert counted > before_counting
    monkeypatch.setattr(tb_plugin.python_api.profile, "build_model", lambda parsed: pytest.fail("built although over budget"))
    store = store_of(tmp_path, max_memory_bytes=(before_counting + counted) // 2)
    try:
        reason = failure(store, "run")
    finally:
        store.stop()
    assert f"{len(events):,} events" in reason and "memory budget" in reason and "cancelled" in reason


def test_estimate_grows_with_events_not_only_with_bytes():
    """Same JSON size, ten times the events: a larger estimate (the old one was 3x the JSON)."""
    assert estimate_parse_bytes(100 << 20, 1_000_000) > estimate_parse_bytes(100 << 20, 100_000)


# --- gzip: inflated bytes are counted as they come -------------------------------------------

def gzip_claiming_less_than_it_holds(path, members):
    """A multi-member gzip of `{"traceEvents": [` and then blanks: each member inflates to 1 MB,
    and the trailer, which records only the last member's size, claims 1 MB in all."""
    blank = b" " * (1 << 20)
    head = b'{"traceEvents": [' + blank[17:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(head) + gzip.compress(blank) * (members - 1))
    return path


def test_gzip_inflating_past_its_claim_is_stopped_at_the_budget(tmp_path, monkeypatch):
    """The issue's bomb: a trailer's size claim (4 GiB wrapped to 64 MiB there) passed the
    budget check, and the loader inflated 4 GiB. The inflated bytes are counted as they
    come: the read stops once they pass what the budget allows for the JSON."""
    path = gzip_claiming_less_than_it_holds(tmp_path / "run" / "w.pt.trace.json.gz", 64)
    assert int.from_bytes(path.read_bytes()[-4:], "little") == 1 << 20  # what the trailer claims
    inflated = []
    real_pieces = tb_plugin.store.storage._read_pieces

    def counted(stream, view, progress):
        filled = real_pieces(stream, view, progress)
        inflated.append(filled)
        return filled

    monkeypatch.setattr(tb_plugin.store.storage, "_read_pieces", counted)
    budget = 64 << 20
    store = store_of(tmp_path, max_memory_bytes=budget)
    try:
        reason = failure(store, "run")
    finally:
        store.stop()
    assert "inflates to more than" in reason and "--profiler_max_memory_mb" in reason
    assert sum(inflated) <= budget // 2  # stopped long before the 64 MB it holds


def test_gzip_of_random_bytes_is_not_a_gzip_of_json_rather_than_too_large(tmp_path):
    """Item 8's gzip part: 200 KB of random bytes after the gzip magic were refused as "too
    large (590 MB)" from their last four bytes."""
    path = tmp_path / "run" / "w.pt.trace.json.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x1f\x8b" + os.urandom(200_000))
    store = store_of(tmp_path, max_memory_bytes=512 << 20)
    try:
        reason = failure(store, "run")
    finally:
        store.stop()
    assert "not a gzip of JSON" in reason and "too large" not in reason


# --- a cached model is admitted by its size ---------------------------------------------------

def test_a_cached_model_larger_than_the_budget_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """The issue's case: a 1 GB trace in the disk cache loaded with no budget check at all."""
    shutil.copytree(SAMPLES / "cpu_cnn", tmp_path / "logs" / "cnn")
    writer = store_of(tmp_path / "logs", cache=ModelCache(tmp_path / "cache"))
    held = writer.profile_blocking("cnn", "worker0", 1, timeout=60).model.nbytes()
    writer.stop()
    monkeypatch.setattr(tb_plugin.store.cache, "decode_model", lambda *a: pytest.fail("read although too large"))
    store = store_of(tmp_path / "logs", cache=ModelCache(tmp_path / "cache"), max_memory_bytes=held // 2)
    try:
        reason = failure(store, "cnn", "worker0")
    finally:
        store.stop()
    assert f"its tables take {held >> 20} MiB" in reason and "memory budget" in reason


# --- replies are bounded in bytes and counted in the budget ------------------------------------

class _Profile:
    """Anything weakly referenceable stands in for a Profile here."""


def test_reply_cache_is_bounded_in_bytes_and_forgets_replies_of_dropped_profiles():
    replies = ReplyCache(max_bytes=20_000)
    first, second = _Profile(), _Profile()
    for i in range(100):
        replies.put([first], f"/q?i={i}", (b"x" * 1000, "application/json"))
    assert replies.nbytes <= 20_000
    assert replies.get([first], "/q?i=99") is not None and replies.get([first], "/q?i=0") is None
    replies.put([second], "/q?i=0", (b"y" * 1000, "application/json"))
    kept = replies.nbytes
    del first
    gc.collect()
    assert replies.get([second], "/q?i=0") == (b"y" * 1000, "application/json")
    assert 1000 < replies.nbytes < kept and replies.nbytes < 2000
    assert replies.get([second], "/none") is None


def test_cached_replies_count_in_the_memory_budget(tmp_path):
    shutil.copytree(SAMPLES / "cpu_cnn", tmp_path / "cnn")
    plugin, client = make_client(tmp_path)
    store = plugin.store
    try:
        store.wait_for_scan(30)
        assert wait_ready(client, "run=cnn&worker=worker0").status_code == 200
        held = store.held_bytes()
        body = client.get("/data/plugin/pytorch_profiler/timeline_slices?run=cnn&worker=worker0&start_us=0"
                          "&end_us=1e9&resolution_us=1").get_data()
        assert store.replies.nbytes >= len(body) and store.held_bytes() >= held + len(body)
        assert store.replies.max_bytes <= store.max_memory_bytes
    finally:
        store.stop()


def test_a_reply_being_built_counts_in_the_budget_and_makes_room(tmp_path):
    """Issue 27 item 1: a 469 MB reply was built beside the budget, uncounted. What a request
    admits is held in the budget until it is released; beyond the budget it drops the least
    recently used profiles (not the one being answered from), and past its share it is refused."""
    for run in ("a", "b"):
        write_trace(tmp_path / run / "w.pt.trace.json", [op(f"aten::op{i}", i * 10, 5) for i in range(200)])
    store = store_of(tmp_path)
    try:
        store.profile_blocking("a", "w", 1, timeout=30)
        store.profile_blocking("b", "w", 1, timeout=30)
        held = store.held_bytes()
        store.max_memory_bytes = held + 1000 * REPLY_BYTES_PER_VALUE
        reservation = ReplyReservation(store.budget)  # counted, without the share's limit
        reservation.admit(900, "a table")
        assert store.held_bytes() == held + 900 * REPLY_BYTES_PER_VALUE
        assert len(store.budget.loaded) == 2  # both still fit
        reservation.admit(200, "more rows")  # beyond the budget: "a" (least recently used) goes
        assert list(store.budget.loaded) == ["b/w.pt.trace.json"]
        reservation.release()
        assert store.held_bytes() < held
        with pytest.raises(ReplyTooLargeError, match="more than the"):
            store.reply_reservation().admit(store.max_memory_bytes // REPLY_BYTES_PER_VALUE, "a huge table")
        assert store.budget.building_bytes == 0
    finally:
        store.stop()


def _snapshot_blocking(store, run, name, timeout=30):
    deadline = time.monotonic() + timeout
    while isinstance(result := store.snapshot(run, name), Loading):
        assert time.monotonic() < deadline, f"{name} still loading"
        time.sleep(0.02)
    return result


def test_profiles_and_snapshots_are_held_apart_in_one_least_recently_used_order(tmp_path):
    """Issue 36 item 6: the store held memory snapshots in its list of profiles, typed as
    profiles. Each is now held under its own type (`budget.profiles`, `budget.snapshots`), and
    both still share one order and one count: the least recently used goes, whichever its kind."""
    for run in ("a", "b"):
        write_trace(tmp_path / run / "w.pt.trace.json", [op(f"aten::op{i}", i * 10, 5) for i in range(50)])
    shutil.copytree(SAMPLES / "gpu_memory_snapshot", tmp_path / "snapshots")
    store = store_of(tmp_path, max_profiles=2)
    try:
        a = store.profile_blocking("a", "w", 1, timeout=30)
        snapshot = _snapshot_blocking(store, "snapshots", "rank0")
        snapshot_path = store.snapshot_file("snapshots", "rank0").path
        assert isinstance(a, Profile) and isinstance(snapshot, MemorySnapshot)
        assert store.budget.profiles.get("a/w.pt.trace.json") is a
        assert store.budget.snapshots.get(snapshot_path) is snapshot
        assert snapshot_path not in store.budget.profiles and "a/w.pt.trace.json" not in store.budget.snapshots

        store.profile_blocking("b", "w", 1, timeout=30)  # a third: "a", used least recently, goes
        assert list(store.budget.loaded) == [snapshot_path, "b/w.pt.trace.json"]
        assert "a/w.pt.trace.json" not in store.budget.profiles and set(store.budget.sizes) == set(store.budget.loaded)

        assert ready(store.snapshot("snapshots", "rank0")) is snapshot  # used now: "b" is the oldest
        store.profile_blocking("a", "w", 1, timeout=30)
        assert list(store.budget.loaded) == [snapshot_path, "a/w.pt.trace.json"]
        assert list(store.budget.profiles.held) == ["a/w.pt.trace.json"]
        assert list(store.budget.snapshots.held) == [snapshot_path]
    finally:
        store.stop()


# --- a file that could not be read is tried again ---------------------------------------------

@pytest.fixture
def old_trace(tmp_path):
    """A trace last written an hour ago: its failures are not those of a file being written."""
    path = write_trace(tmp_path / "run" / "w.pt.trace.json", [op("ProfilerStep#3", 0, 9, cat="user_annotation")])
    an_hour_ago = time.time() - 3600
    os.utime(path, (an_hour_ago, an_hour_ago))
    return path


def deny_reading(monkeypatch, path):
    """Opening `path` fails with EACCES while the returned flag is set (root reads any file,
    so mode bits alone cannot make it fail)."""
    denied = threading.Event()
    denied.set()
    real_open = tb_plugin.store.storage._open_regular

    def guarded(full):
        if denied.is_set() and os.path.samefile(full, path):
            raise PermissionError(13, "Permission denied", full)
        return real_open(full)

    monkeypatch.setattr(tb_plugin.store.storage, "_open_regular", guarded)
    return denied


def test_permission_error_is_retried_once_chmod_fixed_it(tmp_path, old_trace, monkeypatch):
    """The issue's case: the error stayed until the file's size or mtime changed. `chmod`
    changes the file's ctime, part of its identity: the next request loads it."""
    denied = deny_reading(monkeypatch, old_trace)
    store = store_of(tmp_path, retry_seconds=3600)
    try:
        assert "Permission denied" in failure(store, "run")
        denied.clear()
        os.chmod(old_trace, 0o644)
        assert store.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [3]
    finally:
        store.stop()


def test_permission_error_is_retried_even_without_a_change_to_the_file(tmp_path, old_trace, monkeypatch):
    """Access given back another way (a group membership, a remount) changes nothing of the
    file: a failure to read it is retried after `retry_seconds`, not remembered."""
    denied = deny_reading(monkeypatch, old_trace)
    store = store_of(tmp_path, retry_seconds=0.2)
    try:
        assert "Permission denied" in failure(store, "run")
        denied.clear()
        deadline = time.monotonic() + 30
        while True:
            try:
                assert store.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [3]
                break
            except TraceError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        store.stop()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_loads_after_chmod(tmp_path, old_trace):
    os.chmod(old_trace, 0)
    store = store_of(tmp_path, retry_seconds=3600)
    try:
        assert "Permission denied" in failure(store, "run")
        os.chmod(old_trace, 0o644)
        assert store.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [3]
    finally:
        store.stop()


def test_a_trace_error_is_still_remembered(tmp_path, old_trace, monkeypatch):
    """Only the file system's errors are retried: a broken trace is not parsed again on every
    request while it is unchanged."""
    old_trace.write_text('{"traceEvents": [')
    an_hour_ago = time.time() - 3600
    os.utime(old_trace, (an_hour_ago, an_hour_ago))
    store = store_of(tmp_path, retry_seconds=0)
    try:
        failure(store, "run")
        monkeypatch.setattr(tb_plugin.python_api.profile, "profile_from_bytes", lambda *a, **k: pytest.fail("parsed again"))
        with pytest.raises(TraceError):
            store.profile("run", "w", 1)
    finally:
        store.stop()


# --- issue 27, item 2: the budget counts what a profile really holds --------------------------

_GROWTH_SCRIPT = r"""
import ctypes, gc, json, sys
import tb_plugin
from tb_plugin.server.accounting import cap_malloc_arenas, profile_bytes

def rss():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) << 10 for line in fh if line.startswith("VmRSS:"))

def settled():
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss()

def opened(path):  # the views a user clicks through first, each cached on the model
    profile = tb_plugin.load(path)
    profile.overview(); profile.operators(); profile.kernels(); profile.steps(); profile.gpu_summary()
    profile.modules(); profile.module_flame(); profile.timeline(); profile.timeline_tracks()
    for device in profile.memory_devices():
        profile.memory_curve(device); profile.memory_events(device); profile.memory_stats(device)
    return profile

path, copies = sys.argv[1], int(sys.argv[2])
cap_malloc_arenas()  # as the server's RunStore does: the same allocator the budget is measured for
opened(path)  # dropped at once: imports, and the allocator's pools grown to a parse's peak once
# the first profile kept settles in what the dropped one freed, so it is measured from after it
held = [opened(path)]
before = settled()
held += [opened(path) for _ in range(copies)]
print(json.dumps({"growth": settled() - before, "counted": sum(profile_bytes(p) for p in held[1:])}))
"""


def test_text_that_many_rows_point_at_is_counted_once():
    # A view's text column points at the few strings of a category list (`views.common.texts`):
    # one string per row would count the same string thousands of times
    import sys

    import numpy as np
    import pandas as pd

    from tb_plugin.server.accounting import held_bytes

    name = "aten::convolution_backward" * 4
    shared = np.array([name] * 10_000, dtype=object)  # 10,000 pointers at one string
    assert held_bytes(shared) == shared.nbytes + sys.getsizeof(name)
    assert held_bytes(pd.Series(shared, dtype=object)) == shared.nbytes + sys.getsizeof(name)
    apart = np.array([f"{name}#{i}" for i in range(10_000)], dtype=object)  # as many strings as rows
    assert held_bytes(apart) == apart.nbytes + sum(sys.getsizeof(text) for text in apart)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RSS from /proc")
def test_the_budget_counts_a_profile_within_a_quarter_of_what_it_makes_the_process_grow(tmp_path):
    """Issue 27: the plugin counted 40-46% of a profile's real growth (a 54 MB trace: 46 MB
    counted, ~100 MB held after the main views), so 40 runs at a 512 MB budget held 2.2 GB.
    In a fresh process (imports and one load done first), nine copies of the ResNet-50 sample
    trace are loaded and their main views opened: the RSS they add (after a collection and
    malloc_trim) and what `profile_bytes` counts for them agree within 25%; measured over eight
    loads after the first one kept, as a process's growth varies by tens of MB with the
    allocator's reuse (over four, the ratio ranged 0.97-1.28 from run to run; over eight,
    0.93-1.09)."""
    import subprocess
    import sys

    trace = sorted((SAMPLES / "gpu_resnet50_v100").glob("*.pt.trace.json.gz"))[0]
    env = {**os.environ, "PYTHONPATH": str(SAMPLES.parent)}
    done = subprocess.run([sys.executable, "-c", _GROWTH_SCRIPT, str(trace), "8"], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["growth"] > 0
    assert 0.75 <= measured["counted"] / measured["growth"] <= 1.25, measured


_DROP_SCRIPT = r"""
import json, shutil, sys, tempfile
from pathlib import Path
from tb_plugin.server.loading import RunStore

def rss():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) << 10 for line in fh if line.startswith("VmRSS:"))

trace = Path(sys.argv[1])
root = Path(tempfile.mkdtemp())
for run in ("a", "b", "c"):
    (root / run).mkdir()
    shutil.copy(trace, root / run / trace.name)
store = RunStore(str(root), max_memory_bytes=4 << 30)
store.wait_for_scan(30)

def opened(run):
    profile = store.profile_blocking(run, trace.name.split(".")[0], 1, timeout=300)
    profile.overview(); profile.operators(); profile.kernels(); profile.modules()
    store.remeasure([profile])
    store._indexer.submit(lambda: None).result()  # the timeline index built, what was freed given back

opened("a")
before = rss()
opened("b"); opened("c")
full = rss()
store.max_memory_bytes = 1
store.remeasure([])  # the budget drops every profile but the most recent
store._indexer.submit(lambda: None).result()
print(json.dumps({"before": before, "full": full, "after": rss()}))
store.stop()
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RSS from /proc")
def test_profiles_dropped_for_the_budget_give_their_memory_back(tmp_path):
    """Issue 27: at 512 MB, RSS stayed at 2,173 MB once idle: freed tables stayed in the
    allocator's arenas. Three copies of the ResNet-50 trace loaded, two dropped for the
    budget: the process shrinks by at least a third of what the last two loads added (it
    did not shrink at all before; it shrinks by about 60% now)."""
    import subprocess
    import sys

    trace = sorted((SAMPLES / "gpu_resnet50_v100").glob("*.pt.trace.json.gz"))[0]
    env = {**os.environ, "PYTHONPATH": str(SAMPLES.parent)}
    done = subprocess.run([sys.executable, "-c", _DROP_SCRIPT, str(trace)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    rss = json.loads(done.stdout.strip().splitlines()[-1])
    assert rss["full"] - rss["after"] >= (rss["full"] - rss["before"]) / 3, rss
