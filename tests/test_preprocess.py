"""`python -m tb_plugin preprocess`: traces parsed as Dask tasks on a LocalCluster of worker
processes on loopback, into the disk cache; the server then answers the job and distributed
views from the stored summaries without parsing any trace, and loads one rank's model (from
the cache) only when a per-rank view asks.

The job is a real trace replicated per rank on its own clock with a planted straggler
(tests/job_traces.py), beside the CPU DDP sample; every number is checked against the same
views computed from the traces directly (`tb_plugin.load_run`), never through the cache."""

import contextlib
import json
import shutil
import socket
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("dask.distributed", reason="preprocess runs on dask.distributed (the [dask] extra)")

import tb_plugin  # noqa: E402
import tb_plugin.server.loading  # noqa: E402
import tb_plugin.python_api.preprocess  # noqa: E402
import tb_plugin.python_api.profile  # noqa: E402
from tb_plugin.__main__ import main  # noqa: E402
from tb_plugin.server.accounting import profile_bytes  # noqa: E402
from tb_plugin.store.cache import MANIFEST, ModelCache  # noqa: E402
from tb_plugin.server.loading import RunStore  # noqa: E402
from tb_plugin.python_api.preprocess import WORKER_ENV, entry_keys  # noqa: E402
from tb_plugin.python_api.runs import FILE_SUMMARIES  # noqa: E402
from tb_plugin.store.storage import Storage  # noqa: E402
from tb_plugin.views.job import RANK_PART, RankPart  # noqa: E402

from .helpers import (PREFIX, SAMPLES, count_model_loads, count_summary_reads, forbid_parsing, make_client, op,  # noqa: E402
                      run_preprocess, shared_trace, table_frame, wait_route, write_trace)
from .job_traces import write_job  # noqa: E402

RANKS = 6
STRAGGLER = (4, 552, 60_000.0)  # rank, step, extra compute (µs)


@pytest.fixture(scope="module")
def scheduler():
    """A LocalCluster of two single-threaded worker processes on 127.0.0.1; its address."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, env=WORKER_ENV) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """Runs `job` (6 ranks of a real trace, rank 4 straggling in step 552), `ddp` (the CPU
    sample) and `broken` (one file that is no trace)."""
    root = tmp_path_factory.mktemp("logs")
    offsets = [r * 7_919.0 - 20_000.0 for r in range(RANKS)]
    write_job(shared_trace("sampled_128rank_job", "rank0.pt.trace.json.gz"), root / "job", RANKS, offsets,
              straggler=STRAGGLER)
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", root / "ddp")
    write_trace(root / "broken" / "worker0.pt.trace.json", []).write_bytes(b'{"traceEvents": [{"ph": "X"')
    return root


@pytest.fixture(scope="module")
def preprocessed(logdir, scheduler, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    status, err = run_preprocess(logdir, "--dask", scheduler, "--cache-dir", cache)
    return cache, status, err


def _job_view(run_dir):
    """The job view computed from the traces themselves, no cache involved."""
    return tb_plugin.load_run(str(run_dir)).job()


def test_preprocess_reports_progress_and_the_failure_and_goes_on(preprocessed, logdir):
    cache, status, err = preprocessed
    assert status == 1, err  # one file failed, the others were done
    total = RANKS + 4 + 1
    assert f"preprocessing {total} trace files" in err
    assert f"[{total}/{total}]" in err and "MB/s" in err
    assert f"done: {total - 1} of {total} files" in err
    assert "1 files failed:" in err and "broken/worker0.pt.trace.json:" in err.split("files failed:")[1]
    # every good file has its model and both summaries, of this very file
    storage = Storage(str(logdir))
    for path in sorted(logdir.glob("[jd]*/*.json.gz")):
        rel = path.relative_to(logdir).as_posix()
        keys = entry_keys(ModelCache(cache), storage.display(rel))
        for key, _ in keys.values():
            manifest = json.loads((cache / key / MANIFEST).read_text())
            assert manifest["identity"] == storage.identity(rel) and manifest["source"] == storage.display(rel)


def test_stored_model_and_summary_are_those_of_the_trace(preprocessed, logdir):
    cache, _, _ = preprocessed
    rel = "job/rank4.pt.trace.json.gz"
    storage, store = Storage(str(logdir)), ModelCache(cache)
    keys = entry_keys(store, storage.display(rel))
    model = store.get(keys["model"][0], storage.identity(rel))
    direct = tb_plugin.load(str(logdir / rel))
    for name in model.TABLES:
        pd.testing.assert_frame_equal(getattr(model, name), getattr(direct.model, name))
    part, expected = store.get_summary(keys["job"][0], storage.identity(rel), RANK_PART), direct.job_part()
    assert (part.rank, part.origin_us) == (expected.rank, expected.origin_us)
    for name in ("steps", "kernels", "operators", "calls"):
        # the values built, in the declared dtypes (text read back as pandas' strings)
        pd.testing.assert_frame_equal(getattr(part, name), getattr(expected, name), check_dtype=False)
        RANK_PART.tables[name].check(getattr(part, name))


def test_job_view_answers_from_summaries_without_parsing_and_finds_the_straggler(preprocessed, logdir, monkeypatch):
    cache, _, _ = preprocessed
    expected = _job_view(logdir / "job")
    expected_dist = tb_plugin.load_run(str(logdir / "ddp")).distributed(span=2)
    forbid_parsing(monkeypatch)
    model_loads = count_model_loads(monkeypatch)
    file_reads, index_reads = count_summary_reads(monkeypatch)
    plugin, client = make_client(logdir, profiler_cache_dir=str(cache))
    try:
        body = wait_route(client, f"{PREFIX}/job?run=job").get_json()
        distributed_answer = client.get(f"{PREFIX}/distributed?run=ddp&span=2")
        assert distributed_answer.status_code == 200  # the first ask: stored summaries need no wait
        assert model_loads == []  # no rank's model was loaded for either view
        # each view read its run's one index entry, no file's own summary entry
        assert index_reads == ["job", "distributed"] and file_reads == []
        stragglers = table_frame(body, "stragglers")
        worst = stragglers.iloc[0]
        assert (int(worst["rank"]), int(worst["step"]), worst["cause"]) == STRAGGLER[:2] + ("compute",)
        assert worst["excess_us"] == pytest.approx(STRAGGLER[2], rel=0.02)
        pd.testing.assert_frame_equal(table_frame(body, "rank_steps"), expected.rank_steps, check_dtype=False)
        pd.testing.assert_frame_equal(table_frame(distributed_answer.get_json(), "steps"), expected_dist.steps,
                                      check_dtype=False)
        assert plugin.store.held_bytes() <= plugin.store.max_memory_bytes
        # a per-rank view loads that one rank's model, from the cache
        overview = wait_route(client, f"{PREFIX}/overview?run=job&worker=rank2")
        assert overview.status_code == 200
        assert model_loads == [ModelCache.key(Storage(str(logdir)).display("job/rank2.pt.trace.json.gz"))]
    finally:
        plugin.store.stop()


def _flip_a_byte(entry):
    part = sorted(p for p in entry.iterdir() if p.suffix == ".arrow")[0]
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))


@pytest.mark.parametrize("damaged", ["summary", "summary and model"])
def test_a_damaged_summary_means_a_rebuild_never_wrong_numbers(preprocessed, logdir, tmp_path, monkeypatch, damaged):
    expected = _job_view(logdir / "job")
    cache = tmp_path / "cache"
    shutil.copytree(preprocessed[0], cache)
    storage = Storage(str(logdir))
    keys = entry_keys(ModelCache(cache), storage.display("job/rank4.pt.trace.json.gz"))
    # the run's index is damaged too, else it would serve rank 4 without its own entry
    _flip_a_byte(cache / ModelCache.summary_index_key(storage.display("job"), 1, RANK_PART))
    _flip_a_byte(cache / keys["job"][0])
    if damaged == "summary and model":
        _flip_a_byte(cache / keys["model"][0])
    parses = []
    real_parse = tb_plugin.python_api.profile.profile_from_bytes
    monkeypatch.setattr(tb_plugin.python_api.profile, "profile_from_bytes",
                        lambda data, path, *a, **k: parses.append(path) or real_parse(data, path, *a, **k))
    plugin, client = make_client(logdir, profiler_cache_dir=str(cache))
    try:
        body = wait_route(client, f"{PREFIX}/job?run=job").get_json()
    finally:
        plugin.store.stop()
    # only the damaged rank is rebuilt: from its model where that is whole, else parsed again
    assert parses == ([storage.display("job/rank4.pt.trace.json.gz")] if damaged != "summary" else [])
    pd.testing.assert_frame_equal(table_frame(body, "rank_steps"), expected.rank_steps, check_dtype=False)
    assert [int(r) for r in table_frame(body, "stragglers")["rank"].unique()] == [STRAGGLER[0]]


def test_a_second_run_skips_what_is_up_to_date_and_force_parses_again(preprocessed, logdir, scheduler, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(preprocessed[0], cache)
    ddp = logdir / "ddp"
    status, err = run_preprocess(ddp, "--dask", scheduler, "--cache-dir", cache)
    assert status == 0 and "done: 4 of 4 files (4 already up to date)" in err, err
    status, err = run_preprocess(ddp, "--dask", scheduler, "--cache-dir", cache, "--force")
    assert status == 0 and "(0 already up to date)" in err, err


def test_nothing_to_do_is_an_error(tmp_path, scheduler):
    status, err = run_preprocess(tmp_path, "--dask", scheduler, "--cache-dir", tmp_path / "cache")
    assert status == 2 and "no trace files" in err
    broken = tmp_path / "logs"
    write_trace(broken / "worker0.pt.trace.json", [op("x", 0, 1)]).write_bytes(b"{")
    status, err = run_preprocess(broken, "--dask", scheduler, "--cache-dir", tmp_path / "cache")
    assert status == 2 and "1 files failed" in err


def test_without_dask_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if not installed
    write_trace(tmp_path / "logs" / "worker0.pt.trace.json", [op("x", 0, 1)])
    status, err = run_preprocess(tmp_path / "logs", "--dask", "local", "--cache-dir", tmp_path / "cache")
    assert status == 2 and "dask.distributed, which is not installed" in err and "[dask]" in err


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(tb_plugin.python_api.preprocess, "CONNECT_TIMEOUT", "1s")
    write_trace(tmp_path / "logs" / "worker0.pt.trace.json", [op("x", 0, 1)])
    status, err = run_preprocess(tmp_path / "logs", "--dask", "tcp://127.0.0.1:9", "--cache-dir", tmp_path / "cache")
    assert status == 2 and "cannot connect to the Dask scheduler at tcp://127.0.0.1:9" in err


def test_local_cluster_of_the_command_line(tmp_path):
    """`--dask local` starts (and stops) its own LocalCluster of worker processes, with no
    dashboard and no word about Dask's dashboard port while another program holds it."""
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", tmp_path / "ddp")
    with _port_held(8787), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, err = run_preprocess(tmp_path / "ddp", "--dask", "local", "--workers", "1", "--cache-dir", tmp_path / "c")
    assert status == 0 and "done: 4 of 4 files" in err and "on 1 workers" in err
    said = err + "".join(str(w.message) for w in caught)
    assert "8787" not in said and "already in use" not in said, said
    # 2 workers x 2 spans: each file's model and summaries, and per span an index of each summary
    entries = len([p for p in Path(tmp_path / "c").iterdir() if (p / MANIFEST).is_file()])
    assert entries == 4 * (1 + len(FILE_SUMMARIES)) + 2 * len(FILE_SUMMARIES)
    assert f"{2 * len(FILE_SUMMARIES)} run summary indexes" in err
    assert np.isfinite(float(err.rsplit(" MB/s", 1)[0].rsplit(" ", 1)[1]))


@contextlib.contextmanager
def _port_held(port):
    """A listening socket on `port` of every interface (where Dask's dashboard would go);
    nothing when another program already holds it, which is the same case."""
    holder = socket.socket()
    try:
        holder.bind(("0.0.0.0", port))
        holder.listen()
    except OSError:
        pass
    try:
        yield
    finally:
        holder.close()


def test_local_cluster_workers_wake_rarely():
    """The workers of `--dask local` run with their housekeeping slowed (no statistical
    profiler, a 1 s event-loop tick), read inside the worker process itself; the workers of a
    cluster at an address keep dask's defaults."""
    import dask

    def worker_settings():
        return (dask.config.get("distributed.worker.profile.enabled"),
                dask.utils.parse_timedelta(dask.config.get("distributed.admin.tick.interval")),
                dask.utils.parse_timedelta(dask.config.get("distributed.worker.memory.monitor-interval")))

    client, cluster = tb_plugin.python_api.preprocess._client("local", 1)
    try:
        (profiling, tick, monitor), = client.run(worker_settings).values()
    finally:
        client.close()
        cluster.close()
    assert profiling is False and tick >= 1 and monitor >= 1
    assert worker_settings() == (True, 0.02, 0.1)  # the caller's configuration is left as it was


def test_a_trace_changed_since_preprocessing_is_parsed_again(logdir, scheduler, tmp_path, monkeypatch):
    """Rank 4 rewritten without its pause after preprocessing: its stored summary (of the old
    content) is never served, only that file is parsed, and the job has no straggler any more."""
    job = tmp_path / "logs" / "job"
    shutil.copytree(logdir / "job", job)
    status, err = run_preprocess(tmp_path / "logs", "--dask", scheduler, "--cache-dir", tmp_path / "cache")
    assert status == 0, err
    offsets = [r * 7_919.0 - 20_000.0 for r in range(RANKS)]
    fixed = write_job(shared_trace("sampled_128rank_job", "rank0.pt.trace.json.gz"), tmp_path / "fixed", 5, offsets)
    shutil.copyfile(fixed[4], job / "rank4.pt.trace.json.gz")
    expected = _job_view(job)
    parses = []
    real_parse = tb_plugin.python_api.profile.profile_from_bytes
    monkeypatch.setattr(tb_plugin.python_api.profile, "profile_from_bytes",
                        lambda data, path, *a, **k: parses.append(path) or real_parse(data, path, *a, **k))
    plugin, client = make_client(tmp_path / "logs", profiler_cache_dir=str(tmp_path / "cache"))
    try:
        body = wait_route(client, f"{PREFIX}/job?run=job").get_json()
    finally:
        plugin.store.stop()
    assert parses == [str(job / "rank4.pt.trace.json.gz")]
    assert len(body["stragglers"]["rows"]) == 0 and len(expected.stragglers) == 0
    pd.testing.assert_frame_equal(table_frame(body, "rank_steps"), expected.rank_steps, check_dtype=False)


def test_per_rank_views_of_every_rank_stay_within_the_budget(preprocessed, logdir, monkeypatch):
    """A budget of about two ranks' profiles with their overview (what the overview caches
    counts: issue 27): the job view from summaries, then every rank's overview one after
    another (each loaded from the cache, none parsed); what the server holds never exceeds
    the budget."""
    cache, _, _ = preprocessed
    one_profile = tb_plugin.load(str(logdir / "job" / "rank0.pt.trace.json.gz"))
    one_profile.overview()
    budget = 2 * profile_bytes(one_profile) + (1 << 20)
    forbid_parsing(monkeypatch)
    store = RunStore(str(logdir), max_memory_bytes=budget, max_parse_bytes=1 << 30, cache=ModelCache(cache))
    try:
        declared, build = FILE_SUMMARIES["job"]
        workers = list(store.run_files("job").workers)
        store.prefetch_summaries("job", workers, 1, "job", declared)
        parts = [store.summary("job", w, 1, "job", build, declared) for w in workers]
        assert all(isinstance(p, RankPart) for p in parts)
        for worker in workers:
            profile = store.profile_blocking("job", worker, 1, timeout=60)
            profile.overview()
            store.remeasure([profile])
            assert store.held_bytes() <= budget, worker
    finally:
        store.stop()


def test_collapsed_ranks_of_the_timeline_come_from_the_index(preprocessed, logdir, monkeypatch):
    """The Trace view's ranks mode with every rank collapsed: each rank's summary track is read
    from the run's index, no model loaded; its busy blocks are those built from the trace."""
    cache, _, _ = preprocessed
    expected = tb_plugin.load_run(str(logdir / "job")).timeline_ranks()
    forbid_parsing(monkeypatch)
    model_loads = count_model_loads(monkeypatch)
    file_reads, index_reads = count_summary_reads(monkeypatch)
    plugin, client = make_client(logdir, profiler_cache_dir=str(cache))
    try:
        body = wait_route(client, f"{PREFIX}/timeline_ranks?run=job").get_json()
    finally:
        plugin.store.stop()
    assert model_loads == [] and file_reads == [] and sorted(index_reads) == ["job", "rank_timeline"]
    pd.testing.assert_frame_equal(table_frame(body, "ranks"), expected.ranks, check_dtype=False)


def test_summaries_of_its_own_parse_are_stored_for_the_next_start(logdir, tmp_path, monkeypatch):
    """Without preprocess: the first server parses each rank and writes its summaries beside
    the model; a second server on the same cache answers the job view from them alone."""
    cache = tmp_path / "cache"
    expected = _job_view(logdir / "job")
    plugin, client = make_client(logdir, profiler_cache_dir=str(cache))
    try:
        wait_route(client, f"{PREFIX}/job?run=job")
        stored = [ModelCache.summary_key(Storage(str(logdir)).display(f"job/rank{r}.pt.trace.json.gz"), RANK_PART)
                  for r in range(RANKS)]
        deadline = time.monotonic() + 60  # written off the request path
        while not all((cache / key / MANIFEST).is_file() for key in stored):
            assert time.monotonic() < deadline, "the summaries were not written"
            time.sleep(0.05)
    finally:
        plugin.store.stop()
    forbid_parsing(monkeypatch)
    model_loads = count_model_loads(monkeypatch)
    plugin, client = make_client(logdir, profiler_cache_dir=str(cache))
    try:
        body = client.get(f"{PREFIX}/job?run=job")
    finally:
        plugin.store.stop()
    assert body.status_code == 200 and model_loads == []
    pd.testing.assert_frame_equal(table_frame(body.get_json(), "rank_steps"), expected.rank_steps, check_dtype=False)


def test_summaries_beyond_the_budget_are_dropped_once_not_in_use(preprocessed, logdir, monkeypatch):
    """Summaries count in the budget: a budget smaller than one run's summaries keeps those
    just used (a view combines all of them), and drops them for the next run's once they were
    not used for the pinning time; asked for again, they are read again."""
    cache, _, _ = preprocessed
    declared, build = FILE_SUMMARIES["job"]
    store = RunStore(str(logdir), max_parse_bytes=1 << 30, cache=ModelCache(cache))
    try:
        job_workers = list(store.run_files("job").workers)
        store.prefetch_summaries("job", job_workers, 1, "job", declared)
        parts = [store.summary("job", w, 1, "job", build, declared) for w in job_workers]
        assert all(isinstance(p, RankPart) for p in parts)
        store.max_memory_bytes = store.held_bytes() // 2  # now less than the job's summaries
        with store._lock:
            store.budget.enforce(keep=0)
        assert store.held_bytes() > store.max_memory_bytes  # pinned: all of them stay while in use
        monkeypatch.setattr(tb_plugin.store.summaries, "SUMMARY_PIN_SECONDS", 0.0)
        ddp_workers = list(store.run_files("ddp").workers)
        store.prefetch_summaries("ddp", ddp_workers, 1, "job", declared)
        job_paths = [store.span_file("job", w, 1).path for w in job_workers]
        held = {path for path in job_paths if store.summaries.held(path, "job") is not None}
        assert store.held_bytes() <= store.max_memory_bytes and held != set(job_paths)
        again = store.summary("job", job_workers[0], 1, "job", build, declared)  # read from the cache again
        pd.testing.assert_frame_equal(again.steps, parts[0].steps)
    finally:
        store.stop()


def test_a_gzip_bomb_is_refused_as_tensorboard_refuses_it_and_never_cached(tmp_path):
    """The issue's case: preprocess inflated a 2 MB gzip to 2 GiB (2.6 GB of worker RSS) and
    cached it, and TensorBoard, which refuses the file itself, then served it from that
    cache. Preprocess stops inflating where TensorBoard does, for the same memory budget."""
    import gzip

    bomb = tmp_path / "logs" / "run" / "w0.pt.trace.json.gz"
    bomb.parent.mkdir(parents=True)
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (64 << 20) + b"]}", compresslevel=1))
    cache_dir = tmp_path / "cache"
    result = tb_plugin.python_api.preprocess.preprocess_file(str(tmp_path / "logs"), "run/w0.pt.trace.json.gz",
                                                  str(cache_dir), max_memory_mb=64)
    assert result["error"].startswith("too large to load: parsing it needs about")
    assert result["json_bytes"] == 0 and not list(cache_dir.glob(f"*/{MANIFEST}"))
    store = RunStore(str(tmp_path / "logs"), max_memory_bytes=64 << 20, cache=ModelCache(cache_dir))
    store.wait_for_scan(30)
    try:
        with pytest.raises(tb_plugin.TraceError) as refused:
            store.profile_blocking("run", "w0", 1, timeout=60)
    finally:
        store.stop()
    assert refused.value.reason == result["error"]


def test_preprocess_parses_within_tensorboards_default_budget(tmp_path, capsys):
    import argparse
    import inspect

    from tb_plugin.server.plugin import ProfilerPluginLoader

    parser = argparse.ArgumentParser()
    ProfilerPluginLoader().define_flags(parser)
    tensorboard_default = parser.parse_args([]).profiler_max_memory_mb
    for function in (tb_plugin.python_api.preprocess.preprocess_file, tb_plugin.python_api.preprocess.preprocess):
        assert inspect.signature(function).parameters["max_memory_mb"].default == tensorboard_default
    assert main(["preprocess", str(tmp_path), "--dask", "local", "--max-memory-mb", "10"]) == 2
    assert "--max-memory-mb takes megabytes, at least 64" in capsys.readouterr().err


def test_metadata_numbers_beyond_64_bits_are_preprocessed_with_the_repair_counted(tmp_path):
    """The issue's case: preprocess reported 'internal error' for a rank above 2^64."""
    write_trace(tmp_path / "logs" / "run" / "w0.pt.trace.json", [op("ProfilerStep#1", 0, 50)],
                distributedInfo={"rank": 2 ** 70, "world_size": 1})
    result = tb_plugin.python_api.preprocess.preprocess_file(str(tmp_path / "logs"), "run/w0.pt.trace.json", str(tmp_path / "cache"))
    assert result["error"] == ""
    storage = Storage(str(tmp_path / "logs"))
    model = ModelCache(tmp_path / "cache").get(ModelCache.key(storage.display("run/w0.pt.trace.json")),
                                               storage.identity("run/w0.pt.trace.json"))
    assert model.anomalies["metadata_values_nulled"] == 1 and model.distributed["rank"] is None


def test_a_failed_cache_write_is_tried_once_more_before_the_file_is_reported(tmp_path, monkeypatch):
    """One write lost to another process sharing the cache failed the file (issue 40's
    `job_bench.py --ranks 1024` run): it is written once more; two failures are reported."""
    write_trace(tmp_path / "logs" / "run" / "w0.pt.trace.json", [op("ProfilerStep#1", 0, 50)])
    real_put, calls = ModelCache.put, []

    def fails_first(self, *args, **kwargs):
        calls.append(1)
        return len(calls) > failures and real_put(self, *args, **kwargs)

    monkeypatch.setattr(ModelCache, "put", fails_first)
    failures = 1
    result = tb_plugin.python_api.preprocess.preprocess_file(str(tmp_path / "logs"), "run/w0.pt.trace.json", str(tmp_path / "cache"))
    assert result["error"] == "" and len(calls) == 2
    storage = Storage(str(tmp_path / "logs"))
    for key, entry_format in entry_keys(ModelCache(tmp_path / "cache"), storage.display("run/w0.pt.trace.json")).values():
        assert ModelCache(tmp_path / "cache").manifest(key, storage.identity("run/w0.pt.trace.json"), entry_format)
    calls.clear()
    failures = 2
    result = tb_plugin.python_api.preprocess.preprocess_file(str(tmp_path / "logs"), "run/w0.pt.trace.json",
                                                  str(tmp_path / "cache2"), force=True)
    assert result["error"].startswith("its cache entries could not be written, twice") and len(calls) == 2
