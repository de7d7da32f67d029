"""The server prepares what the page opens first (issue 30): once TensorBoard serves and the
warm-up is done, the first run's first profile is loaded and its Overview computed without
anyone asking, within the memory budget, and giving way to any load a user asks for."""

import argparse
import threading

from tensorboard.plugins import base_plugin

import tb_plugin.store.storage
from tb_plugin.server.loading import Loading, RunStore, estimate_parse_bytes, events_in
from tb_plugin.server.plugin import ProfilerPluginLoader

from .helpers import op, write_trace

STEP = op("ProfilerStep#3", 0, 5000, cat="user_annotation")


def two_runs(root):
    """Runs "a" (listed first) and "b", each one worker with one span."""
    for run in ("a", "b"):
        write_trace(root / run / "w.pt.trace.json", [STEP, *(op(f"aten::op{i}", i * 10, 5) for i in range(200))])
    return root


def hold_reads_of_a(monkeypatch):
    """(gate, a_reading): every read of run "a"'s file sets `a_reading` and waits until `gate`
    is set; reads after that, and of other runs, go through."""
    gate, a_reading = threading.Event(), threading.Event()
    real_read = tb_plugin.store.storage.Storage.read_trace

    def held_read(self, rel, *args, **kwargs):
        if rel.startswith("a/") and not gate.is_set():
            a_reading.set()
            assert gate.wait(60)
        return real_read(self, rel, *args, **kwargs)

    monkeypatch.setattr(tb_plugin.store.storage.Storage, "read_trace", held_read)
    return gate, a_reading


def prefetch_in_background(store):
    """(thread, results): `store.prefetch_first()` started on a thread, its answer appended
    to results when it returns."""
    prefetched = []
    prefetch = threading.Thread(target=lambda: prefetched.append(store.prefetch_first()))
    prefetch.start()
    return prefetch, prefetched


def loaded(store):
    return {run["name"]: run["loaded"] for run in store.runs()}


def test_after_the_warm_up_the_first_runs_profile_is_loaded_with_its_overview_unasked(tmp_path):
    two_runs(tmp_path)
    context = base_plugin.TBContext(logdir=str(tmp_path), flags=argparse.Namespace(
        reload_interval=3600, profiler_cache_dir="", profiler_max_memory_mb=1024))
    plugin = ProfilerPluginLoader().load(context)
    try:
        assert plugin.store.warming_up  # until the warm-up thread ends
        assert plugin.is_active()  # TensorBoard's first plugins listing: it serves, the warm-up starts
        (warm_up,) = [t for t in threading.enumerate() if t.name == "tb_plugin_warm_up"]
        warm_up.join(120)
        assert not warm_up.is_alive() and not plugin.store.warming_up
        assert plugin.store.runs()[0]["name"] == "a"  # the page opens the first run listed
        assert loaded(plugin.store) == {"a": 1, "b": 0}
        profile = plugin.store.profile("a", "w", 1)
        assert not isinstance(profile, Loading)
        assert "step_windows" in profile.model._view_cache  # the Overview's step breakdown is built
    finally:
        plugin.store.stop()


def test_a_prefetch_that_does_not_fit_beside_what_is_held_is_not_started(tmp_path):
    """It never drops a profile a user opened to make room for one no one asked for."""
    two_runs(tmp_path)
    store = RunStore(str(tmp_path))
    try:
        store.profile_blocking("b", "w", 1, timeout=60)
        head = (tmp_path / "a" / "w.pt.trace.json").read_bytes()
        need = estimate_parse_bytes(len(head), events_in(len(head), head))
        store.max_memory_bytes = store.held_bytes() + need - 1
        assert store.prefetch_first() is False
        assert loaded(store) == {"a": 0, "b": 1}
        assert store.held_bytes() <= store.max_memory_bytes
        store.max_memory_bytes = store.held_bytes() + need
        assert store.prefetch_first() is True
        assert loaded(store) == {"a": 1, "b": 1}
    finally:
        store.stop()


def test_a_users_load_of_another_run_does_not_wait_behind_the_prefetch(tmp_path, monkeypatch):
    """The prefetch of "a" is held at its read until "b", which a user asked for meanwhile,
    has loaded: "b" did not wait for it, and "a" gave way (it loads when asked for)."""
    two_runs(tmp_path)
    gate, a_reading = hold_reads_of_a(monkeypatch)
    store = RunStore(str(tmp_path))
    try:
        prefetch, prefetched = prefetch_in_background(store)
        assert a_reading.wait(60)
        store.profile_blocking("b", "w", 1, timeout=60)
        assert isinstance(store.profile("a", "w", 1), Loading)  # the user's ask makes it theirs: loading on
        gate.set()
        prefetch.join(60)
        assert prefetched == [True]
        assert loaded(store) == {"a": 1, "b": 1}
    finally:
        gate.set()
        store.stop()


def test_a_cancelled_prefetch_leaves_the_profile_to_load_when_asked(tmp_path, monkeypatch):
    two_runs(tmp_path)
    gate, a_reading = hold_reads_of_a(monkeypatch)
    store = RunStore(str(tmp_path))
    try:
        prefetch, prefetched = prefetch_in_background(store)
        assert a_reading.wait(60)
        store.profile_blocking("b", "w", 1, timeout=60)
        gate.set()
        prefetch.join(60)
        assert prefetched == [False]  # cancelled at its first progress report after the read began
        assert loaded(store) == {"a": 0, "b": 1}
        assert len(store.profile_blocking("a", "w", 1, timeout=60).model.ops) == 201
    finally:
        gate.set()
        store.stop()
