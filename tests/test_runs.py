"""`tb_plugin.python_api.runs`: a span of many ranks read, summarised and combined by the same functions
for the server and the Python API; over a preprocessed job the Python API reads the run
index from the disk cache and reads no trace at all.

The job is the CPU DDP sample (two workers, two spans); every number is checked against the
same views computed from the traces themselves (`load_run` without a cache)."""

import dataclasses
import json
import shutil

import pandas as pd
import pytest

import tb_plugin
from tb_plugin.python_api import runs
from tb_plugin.store import summaries
from tb_plugin.store.cache import ModelCache
from tb_plugin.python_api.preprocess import preprocess_file, write_run_index
from tb_plugin.store.storage import Storage

from .helpers import PREFIX, SAMPLES, make_client, wait_route

JOB_TABLES = ("verdict", "rank_steps", "stragglers", "kernels", "operators", "collectives", "clocks", "missing", "health")
DISTRIBUTED_TABLES = ("steps", "all_steps", "collectives", "collective_time", "calls", "groups", "fsdp", "devices",
                      "coverage", "missing")


@pytest.fixture(scope="module")
def preprocessed(tmp_path_factory):
    """(log directory, cache directory) of the DDP sample preprocessed in-process as
    `python -m tb_plugin preprocess` does per file and per span: models, summaries and one
    run index per summary and span."""
    root = tmp_path_factory.mktemp("runs")
    logdir, cache = root / "logs", root / "cache"
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", logdir / "ddp")
    rels = sorted(f"ddp/{p.name}" for p in (logdir / "ddp").iterdir())
    for rel in rels:
        assert preprocess_file(str(logdir), rel, str(cache))["error"] == ""
    for span in (1, 2):  # a worker's files in time order are its spans 1, 2
        members = [rels[worker * 2 + span - 1] for worker in range(2)]
        for name in runs.FILE_SUMMARIES:
            assert write_run_index(str(logdir), "ddp", span, members, name, str(cache)) == (2, "")
    return logdir, cache


@pytest.fixture(scope="module")
def from_the_traces(preprocessed):
    """The job and distributed views of both spans computed by parsing the traces."""
    logdir, _ = preprocessed
    run = tb_plugin.load_run(logdir / "ddp")  # named by its directory, where the server names it "ddp"
    return {span: (run.job(span), run.distributed(span)) for span in (1, 2)}


def _same_tables(got, expected, names):
    for name in names:
        pd.testing.assert_frame_equal(getattr(got, name), getattr(expected, name), obj=name)


def test_load_run_over_a_preprocessed_job_reads_its_run_index_and_no_trace(preprocessed, from_the_traces, monkeypatch):
    logdir, cache = preprocessed
    read = []
    monkeypatch.setattr(Storage, "read_trace", lambda self, rel, *a, **k: read.append(rel) or pytest.fail(
        f"{rel} was read (to be parsed) although the cache holds its summaries"))
    index_reads, entry_reads = [], []
    real_index, real_entry = ModelCache.get_summary_index, ModelCache.get_summary
    monkeypatch.setattr(ModelCache, "get_summary_index",
                        lambda self, *args: index_reads.append((args[0], args[1], args[2].name)) or real_index(self, *args))
    monkeypatch.setattr(ModelCache, "get_summary", lambda self, *args: entry_reads.append(args[0]) or real_entry(self, *args))

    run = tb_plugin.load_run(logdir / "ddp", cache_dir=cache)
    for span in (1, 2):
        job, distributed = from_the_traces[span]
        _same_tables(run.job(span), job, JOB_TABLES)
        _same_tables(run.distributed(span), distributed, DISTRIBUTED_TABLES)
    source = str(logdir / "ddp")
    assert sorted(index_reads) == sorted((source, span, name) for span in (1, 2) for name in ("job", "distributed"))
    assert entry_reads == []  # every worker was in the index: no file's own entry was looked at
    assert read == []


def test_a_file_changed_since_it_was_indexed_is_read_again(tmp_path, from_the_traces, monkeypatch):
    """The index serves a member only while its file's identity is the one stored: a file
    rewritten since (same bytes, a new inode and mtime) is read and parsed again, the others
    are not, and the answer is the same."""
    logdir, cache = tmp_path / "logs", tmp_path / "cache"
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", logdir / "ddp")
    first_spans = [f"ddp/{name}" for name in sorted(p.name for p in (logdir / "ddp").iterdir())][::2]
    for rel in first_spans:
        assert preprocess_file(str(logdir), rel, str(cache))["error"] == ""
    assert write_run_index(str(logdir), "ddp", 1, first_spans, "job", str(cache)) == (2, "")
    changed = logdir / first_spans[1]
    rewritten = changed.with_name("rewritten")
    rewritten.write_bytes(changed.read_bytes())
    rewritten.replace(changed)
    read = []
    real = Storage.read_trace
    monkeypatch.setattr(Storage, "read_trace", lambda self, rel, *a, **k: read.append(rel) or real(self, rel, *a, **k))
    job, _ = from_the_traces[1]
    _same_tables(tb_plugin.load_run(logdir / "ddp", cache_dir=cache).job(1), job, JOB_TABLES)
    assert read == [changed.name]


def test_the_server_and_the_python_api_read_a_span_through_the_same_function(preprocessed, monkeypatch):
    logdir, cache = preprocessed
    callers = []
    real = summaries.stored_summary

    def counted(*args, **kwargs):
        callers.append(args[1])  # the file's source
        return real(*args, **kwargs)

    monkeypatch.setattr(summaries, "stored_summary", counted)
    tb_plugin.load_run(logdir / "ddp", cache_dir=cache).job(1)
    python_api = sorted(callers)
    callers.clear()
    plugin, client = make_client(logdir, profiler_cache_dir=str(cache))
    try:
        body = json.loads(wait_route(client, f"{PREFIX}/job?run=ddp&span=1&table=rank_steps").get_data())
    finally:
        plugin.store.stop()
    assert len(body["rows"]) > 0
    assert sorted(callers) == python_api and len(python_api) == 2  # both workers, by both callers


def test_the_python_api_stores_the_summaries_it_builds_for_the_next_reader(tmp_path, from_the_traces, monkeypatch):
    """Over a cache that holds nothing, `job()` parses each worker's trace and writes its
    summary beside it, as the server does: the next run over the same cache reads no trace."""
    logdir, cache = tmp_path / "logs", tmp_path / "cache"
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", logdir / "ddp")
    job, _ = from_the_traces[1]
    _same_tables(tb_plugin.load_run(logdir / "ddp", cache_dir=cache).job(1), job, JOB_TABLES)
    monkeypatch.setattr(Storage, "read_trace", lambda self, rel, *a, **k: pytest.fail(
        f"{rel} was read (to be parsed) although the first run stored its summary"))
    _same_tables(tb_plugin.load_run(logdir / "ddp", cache_dir=cache).job(1), job, JOB_TABLES)


def test_summaries_stored_under_other_declarations_are_built_again(preprocessed, tmp_path, from_the_traces,
                                                                     monkeypatch):
    """The job summary's declaration changed since the cache was filled (a column retyped):
    its stored entries and run index are of another format, so every worker's summary is
    built again from its profile and the answer is the traces' own, never the old entries
    decoded as new."""
    logdir, cache = preprocessed
    copied = tmp_path / "cache"
    shutil.copytree(cache, copied)
    declared, build = runs.FILE_SUMMARIES["job"]
    steps = declared.tables["steps"]
    retyped = dataclasses.replace(steps, columns=tuple(
        dataclasses.replace(c, dtype="float64") if c.name == "step" else c for c in steps.columns))
    built = []
    monkeypatch.setitem(runs.FILE_SUMMARIES, "job", (
        dataclasses.replace(declared, tables={**declared.tables, "steps": retyped}),
        lambda profile: built.append(profile.source) or build(profile)))
    job, _ = from_the_traces[1]
    run = tb_plugin.load_run(logdir / "ddp", cache_dir=copied)
    _same_tables(run.job(1), job, JOB_TABLES)
    assert sorted(built) == sorted(run.storage.display(spans[0].path) for spans in run.files.workers.values())


def test_a_missing_worker_span_or_snapshot_reads_the_same_from_the_server_and_the_python_api(preprocessed):
    # One lookup (`RunFiles.trace_file` / `snapshot_file`) answers both: a 404's reason and
    # the Python API's NotFoundError name the run and what it has, in the same words
    from tb_plugin.errors import NotFoundError
    from tb_plugin.server.loading import RunStore

    logdir, _ = preprocessed
    run = tb_plugin.load_run(logdir / "ddp")
    store = RunStore(str(logdir), rescan_seconds=3600)
    try:
        asks = [(lambda: run.profile("worker9"), lambda: store.span_file("ddp", "worker9", 1)),
                (lambda: run.profile("worker0", span=3), lambda: store.span_file("ddp", "worker0", 3)),
                (lambda: run.snapshot("rank0"), lambda: store.snapshot_file("ddp", "rank0"))]
        said = []
        for python_api, server in asks:
            with pytest.raises(NotFoundError) as from_python:
                python_api()
            with pytest.raises(NotFoundError) as from_server:
                server()
            assert str(from_python.value) == str(from_server.value).replace("'ddp'", repr(str(logdir / "ddp")))
            said.append(str(from_server.value))
    finally:
        store.stop()
    assert said == ["run 'ddp' has no worker 'worker9'; it has ['worker0', 'worker1']",
                    "worker 'worker0' of run 'ddp' has spans 1..2, not 3",
                    "run 'ddp' has no memory snapshot 'rank0'; it has []"]
