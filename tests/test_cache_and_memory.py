"""Disk cache of parsed models, the memory budget and LRU eviction."""

import os
import pickle
import shutil
import threading

import pytest

import tb_plugin
import tb_plugin.profile
from tb_plugin.cache import ModelCache
from tb_plugin.loading import RunStore

from .conftest import SAMPLES, op, write_trace
from .test_api import make_client, wait_ready


def cnn_logdir(tmp_path):
    shutil.copytree(SAMPLES / "cpu_cnn", tmp_path / "logs" / "cnn")
    return tmp_path / "logs"


def test_second_store_loads_from_cache_without_parsing(tmp_path, monkeypatch):
    logdir = cnn_logdir(tmp_path)
    cache = ModelCache(tmp_path / "cache")
    first = RunStore(str(logdir), cache=cache)
    first.wait_for_scan(30)
    original = first.profile_blocking("cnn", "worker0", 2, timeout=60)
    first.stop()
    assert len(list((tmp_path / "cache").glob("*.tbpp"))) == 1
    monkeypatch.setattr(tb_plugin.profile, "profile_from_bytes", lambda *a: pytest.fail("parsed although cached"))
    second = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))
    second.wait_for_scan(30)
    cached = second.profile_blocking("cnn", "worker0", 2, timeout=60)
    second.stop()
    assert cached.operators().equals(original.operators())
    assert cached.steps().equals(original.steps())


def test_changed_file_is_not_served_from_cache(tmp_path):
    path = write_trace(tmp_path / "logs" / "run" / "w.pt.trace.json", [op("ProfilerStep#1", 0, 5, cat="user_annotation")])
    cache = ModelCache(tmp_path / "cache")
    store = RunStore(str(tmp_path / "logs"), cache=cache)
    store.wait_for_scan(30)
    assert store.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [1]
    write_trace(path, [op("ProfilerStep#2", 0, 5, cat="user_annotation"), op("ProfilerStep#3", 5, 5, cat="user_annotation")])
    assert store.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [2, 3]
    store.stop()


@pytest.mark.parametrize("damage", [b"", b"not a pickle", pickle.dumps({"a": 1})])
def test_corrupt_cache_entry_is_discarded_and_rebuilt(tmp_path, damage):
    logdir = cnn_logdir(tmp_path)
    store = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))
    store.wait_for_scan(30)
    store.profile_blocking("cnn", "worker0", 1, timeout=60)
    store.stop()
    (entry,) = (tmp_path / "cache").glob("*.tbpp")
    entry.write_bytes(damage)
    again = RunStore(str(logdir), cache=ModelCache(tmp_path / "cache"))
    again.wait_for_scan(30)
    assert again.profile_blocking("cnn", "worker0", 1, timeout=60).model.steps["step"].tolist() == [2, 3]
    again.stop()
    assert entry.exists() and entry.stat().st_size > 1000  # rebuilt


def test_two_processes_sharing_the_cache_never_read_partial_entries(tmp_path):
    """Writers rename complete files into place; concurrent readers see a whole entry or none."""
    model = tb_plugin.load(sorted((SAMPLES / "cpu_cnn").glob("*.gz"))[0]).model
    cache = ModelCache(tmp_path / "cache")
    key = ModelCache.key("x", 1, 2.0)
    errors = []

    def write():
        for _ in range(20):
            ModelCache(tmp_path / "cache").put(key, model)

    def read():
        for _ in range(200):
            got = cache.get(key)
            if got is not None and len(got.ops) != len(model.ops):
                errors.append("partial")

    threads = [threading.Thread(target=write), threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and cache.get(key) is not None
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def test_cache_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir()
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path / "cache").st_uid + 1)
    cache = ModelCache(tmp_path / "cache")
    assert cache.enabled is False and cache.get("k") is None


def test_cache_is_trimmed_to_its_size(tmp_path):
    model = tb_plugin.load(sorted((SAMPLES / "cpu_cnn").glob("*.gz"))[0]).model
    cache = ModelCache(tmp_path / "cache", max_bytes=1)
    cache.put(ModelCache.key("a", 1, 1.0), model)
    cache.put(ModelCache.key("b", 1, 1.0), model)
    assert len(list((tmp_path / "cache").glob("*.tbpp"))) <= 1


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
        assert sum(store._sizes.values()) <= store.max_memory_bytes
    kept = set(store._profiles)
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
    store._wanted[path] = {"k": lambda p: first}
    assert store._build_summaries(path, profile) == {"k": first}
    store._wanted[path] = {"k": lambda p: second}  # built again by another thread meanwhile
    assert store._build_summaries(path, profile) == {"k": first}
    assert store.summary("run", "w", 1, "k", lambda p: second) is first
    store.stop()
