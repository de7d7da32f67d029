"""S3 access against a real S3-compatible server on loopback (moto in server mode).

Nothing is mocked inside the process: a moto server listens on 127.0.0.1, s3fs talks HTTP to
it, and every result read through `s3://...` is compared with the same trace file read from
`samples/` on disk.

The endpoint reaches s3fs through `AWS_ENDPOINT_URL`, which botocore (under aiobotocore/s3fs)
honours. `FSSPEC_S3_ENDPOINT_URL` would not work here: fsspec reads `FSSPEC_*` variables once,
when it is imported.
"""

import os
import posixpath

import pytest

from .helpers import BUCKET, S3_NEEDS, S3_RUNS, SAMPLES, sample_traces

pytest.importorskip("moto.server", reason=S3_NEEDS)  # the `s3` fixture's server
pytest.importorskip("boto3", reason=S3_NEEDS)
s3fs = pytest.importorskip("s3fs", reason=S3_NEEDS)

import tb_plugin  # noqa: E402
import tb_plugin.python_api.profile  # noqa: E402
from tb_plugin.store.discovery import discover_runs  # noqa: E402
from tb_plugin.errors import PathOutsideLogdirError  # noqa: E402
from tb_plugin.server.loading import RunStore  # noqa: E402
from tb_plugin.store.storage import Storage  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_s3fs")


def _comparable(info):
    """The facts of `Profile.info()` that do not depend on where the file was read from."""
    return {k: info[k] for k in ("steps", "event_counts", "threads", "start_us", "duration_us",
                                 "device_type", "distributed")}


class _RecordingFS:
    """Wraps a file system object and records every method call with its arguments."""

    def __init__(self, fs):
        self._fs = fs
        self.calls = []

    def __getattr__(self, name):
        attr = getattr(self._fs, name)
        if not callable(attr):
            return attr

        def recorded(*args, **kwargs):
            self.calls.append((name, args))
            return attr(*args, **kwargs)

        return recorded


# 1 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel", [
    f"cnn/{os.path.basename(p)}" for p in sample_traces("cpu_cnn")
] + [f"ddp/{os.path.basename(sample_traces('cpu_ddp_gloo')[-1])}"])
def test_load_matches_local_for_s3_url(s3, rel):
    url = f"s3://{BUCKET}/logs/{rel}"
    remote = tb_plugin.load(url).info()
    local = tb_plugin.load(s3.local[rel]).info()

    assert remote["source"] == url
    assert remote["steps"], "the sample trace should have profiler steps"
    assert remote["steps"] == local["steps"]
    assert sum(remote["event_counts"].values()) > 0
    assert remote["event_counts"] == local["event_counts"]
    assert _comparable(remote) == _comparable(local)


def test_stat_reports_size_and_mtime_on_s3(s3):
    rel = next(iter(s3.local))
    st = Storage(f"s3://{BUCKET}/logs").stat(rel)
    assert st.size == os.path.getsize(s3.local[rel])
    # LastModified comes back as an aware datetime; it must become the upload's epoch seconds.
    assert abs(st.mtime - s3.uploaded_at) < 120


# 2 -----------------------------------------------------------------------------------------

def test_discover_runs_finds_cnn_and_ddp_on_s3(s3):
    runs = discover_runs(Storage(f"s3://{BUCKET}/logs"))
    local_runs = discover_runs(Storage(str(SAMPLES)))

    assert list(runs) == ["cnn", "ddp"]  # logs-old/ and the bucket-root file stay invisible
    assert list(runs["cnn"].workers) == ["worker0"]
    assert list(runs["ddp"].workers) == ["worker0", "worker1"]
    for prefix, local_run in S3_RUNS.items():
        run = runs[prefix]
        assert run.name == prefix
        assert list(run.workers) == list(local_runs[local_run].workers)
        for worker, spans in run.workers.items():
            assert [f.span for f in spans] == [1, 2]
            assert all(f.worker == worker for f in spans)
            stamps = [f.stamp for f in spans]
            assert stamps == sorted(stamps) and len(set(stamps)) == 2
            # Same files, same order as discovered on disk; paths relative to the log directory.
            local_spans = local_runs[local_run].workers[worker]
            assert stamps == [f.stamp for f in local_spans]
            assert [f.path for f in spans] == [f"{prefix}/{posixpath.basename(f.path)}" for f in local_spans]
            for f in spans:
                assert f.path.startswith(f"{prefix}/{worker}.{f.stamp}.")
                assert f.path in s3.local


# 3 -----------------------------------------------------------------------------------------

def test_load_run_lists_workers_and_spans_on_s3(s3):
    run = tb_plugin.load_run(f"s3://{BUCKET}/logs/ddp")
    assert run.workers == ["worker0", "worker1"]
    assert run.spans("worker0") == [1, 2]
    assert run.spans("worker1") == [1, 2]

    worker1_span2 = sorted(p for rel, p in s3.local.items() if rel.startswith("ddp/worker1."))[-1]
    remote = run.profile("worker1", 2).info()
    local = tb_plugin.load(worker1_span2).info()
    assert remote["source"] == f"s3://{BUCKET}/logs/ddp/{os.path.basename(worker1_span2)}"
    assert remote["steps"] == local["steps"] == [6, 7]
    assert remote["event_counts"] == local["event_counts"]
    assert _comparable(remote) == _comparable(local)
    # A different span of the same worker is a different file, not a cached copy.
    assert run.profile("worker1", 1).info()["steps"] == [2, 3]


# 4 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    f"s3://{BUCKET}/logs/cnn/worker0.1.pt.trace.json.gz",
    f"s3://{BUCKET}/logs/nowhere/worker0.pt.trace.json",
    "s3://no-such-bucket-here/logs/worker0.pt.trace.json.gz",
])
def test_load_missing_key_raises_trace_error_naming_url(s3, url):
    with pytest.raises(tb_plugin.TraceError) as info:
        tb_plugin.load(url)
    assert info.value.path == url
    assert url in str(info.value)
    # a load asks for the size first, to estimate its memory as TensorBoard's loader does
    assert info.value.reason == "cannot stat the file (FileNotFoundError)"


def test_load_run_missing_prefix_raises_trace_error_naming_url(s3):
    url = f"s3://{BUCKET}/logs/nowhere"
    with pytest.raises(tb_plugin.TraceError) as info:
        tb_plugin.load_run(url)
    assert info.value.path == url
    assert "no trace files" in info.value.reason


# 5 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel", [
    "../secret.pt.trace.json.gz",
    "..",
    "cnn/../../secret.pt.trace.json.gz",
    "../logs-old/cnn",
    "/bucket/secret.pt.trace.json.gz",
])
def test_resolve_outside_prefix_refused_on_s3(s3, rel):
    storage = Storage(f"s3://{BUCKET}/logs")
    spy = _RecordingFS(storage.fs)
    storage.fs = spy

    with pytest.raises(PathOutsideLogdirError) as info:
        storage.resolve(rel)
    assert isinstance(info.value, tb_plugin.TraceError)
    for method in (storage.read_bytes, storage.read_trace, storage.read_head, storage.stat):
        with pytest.raises(PathOutsideLogdirError):
            method(rel)
    assert spy.calls == [], "a refused path must not reach the file system"

    # The same storage still reads inside the prefix, and only there.
    inside = next(iter(s3.local))
    assert storage.read_bytes(inside) == s3.local[inside].read_bytes()
    runs = discover_runs(storage)
    assert list(runs) == ["cnn", "ddp"]
    touched = [args[0] for _, args in spy.calls]
    assert touched and all(p == f"{BUCKET}/logs" or p.startswith(f"{BUCKET}/logs/") for p in touched), touched


# 6 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_load_damaged_gzip_raises_trace_error_on_s3(s3, damage):
    data = sample_traces("cpu_cnn")[0].read_bytes()
    if damage == "truncated":
        broken = data[: len(data) // 2]
    else:  # flip the bytes of a stretch in the middle of the deflate stream
        mid = len(data) // 2
        broken = data[:mid] + bytes(b ^ 0xFF for b in data[mid:mid + 64]) + data[mid + 64:]
    key = f"broken-{damage}/worker0.7.pt.trace.json.gz"
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=broken)
    url = f"s3://{BUCKET}/{key}"

    assert Storage(f"s3://{BUCKET}/broken-{damage}").read_bytes(posixpath.basename(key)) == broken
    with pytest.raises(tb_plugin.TraceError) as info:
        tb_plugin.load(url)
    assert info.value.path == url
    assert "truncated" in info.value.reason or "corrupt" in info.value.reason

    run = tb_plugin.load_run(f"s3://{BUCKET}/broken-{damage}")
    assert run.workers == ["worker0"]
    with pytest.raises(tb_plugin.TraceError, match="corrupt|truncated"):
        run.profile("worker0", 1)


# S3 layouts that local directories cannot have -----------------------------------------------

def test_walk_ignores_folder_markers_on_s3(s3):
    """Zero-byte `key/` objects (what consoles create for "folders") are not files."""
    trace = sample_traces("cpu_cnn")[0]
    name = os.path.basename(trace)
    for key in ("markers/", "markers/run/", f"markers/run/{name}"):
        s3.client.put_object(Bucket=BUCKET, Key=key, Body=b"" if key.endswith("/") else trace.read_bytes())

    walked = dict(Storage(f"s3://{BUCKET}/markers").walk())
    assert walked == {"run": [name]}
    runs = discover_runs(Storage(f"s3://{BUCKET}/markers"))
    assert list(runs) == ["run"]
    assert [f.path for f in runs["run"].workers["worker0"]] == [f"run/{name}"]


def test_load_run_with_subdir_sorting_before_root_on_s3(s3):
    """A sub-folder whose name sorts before "." (`-old`, `#tmp`) must not hide the run's files."""
    traces = sample_traces("cpu_cnn")
    for path in traces:
        s3.client.put_object(Bucket=BUCKET, Key=f"sorted/run/{os.path.basename(path)}", Body=path.read_bytes())
    s3.client.put_object(Bucket=BUCKET, Key="sorted/run/-old/notes.txt", Body=b"not a trace")
    s3.client.put_object(Bucket=BUCKET, Key="sorted/run/#tmp/notes.txt", Body=b"not a trace")

    walked = list(Storage(f"s3://{BUCKET}/sorted/run").walk())
    assert walked[0] == (".", [os.path.basename(p) for p in traces])
    run = tb_plugin.load_run(f"s3://{BUCKET}/sorted/run")
    assert run.workers == ["worker0"]
    assert run.spans("worker0") == [1, 2]
    assert run.profile("worker0", 2).info()["steps"] == tb_plugin.load(traces[1]).info()["steps"]


# The disk cache on S3 ----------------------------------------------------------------------

def test_model_cache_on_s3_is_written_read_back_and_checked(s3, tmp_path):
    """`--profiler_cache_dir s3://...`: entries are written as objects (each appears whole),
    read back over fsspec into the same tables, and a damaged part means a parse again."""
    from tb_plugin.store.cache import ModelCache

    rel = next(r for r in s3.local if r.startswith("cnn/"))
    model = tb_plugin.load(s3.local[rel]).model
    cache = ModelCache(f"s3://{BUCKET}/cache")
    key, identity = ModelCache.key(rel), {"size": 1, "mtime": 2.0}
    cache.put(key, identity, model, rel)
    keys = [o["Key"] for o in s3.client.list_objects_v2(Bucket=BUCKET, Prefix=f"cache/{key}/")["Contents"]]
    assert f"cache/{key}/manifest.json" in keys and any(k.endswith(".arrow") for k in keys)

    s3fs.S3FileSystem.clear_instance_cache()
    back = ModelCache(f"s3://{BUCKET}/cache").get(key, identity)
    for name in (*model.TABLES, "threads", "devices"):
        assert getattr(back, name).equals(getattr(model, name)), name
    assert back.metadata == model.metadata
    assert ModelCache(f"s3://{BUCKET}/cache").get(key, {**identity, "size": 2}) is None  # another file

    part = next(k for k in keys if "table-ops-" in k)
    body = bytearray(s3.client.get_object(Bucket=BUCKET, Key=part)["Body"].read())
    body[len(body) // 2] ^= 0xFF
    s3.client.put_object(Bucket=BUCKET, Key=part, Body=bytes(body))
    s3fs.S3FileSystem.clear_instance_cache()
    assert ModelCache(f"s3://{BUCKET}/cache").get(key, identity) is None


def test_run_store_over_s3_with_an_s3_cache_loads_from_it(s3, monkeypatch):
    from tb_plugin.store.cache import ModelCache

    first = RunStore(f"s3://{BUCKET}/logs", cache=ModelCache(f"s3://{BUCKET}/store-cache"))
    first.wait_for_scan(30)
    steps = first.profile_blocking("cnn", next(iter(first.run_files("cnn").workers)), 1, timeout=60).steps()
    first.stop()
    monkeypatch.setattr(tb_plugin.python_api.profile, "profile_from_bytes", lambda *a, **k: pytest.fail("parsed although cached"))
    s3fs.S3FileSystem.clear_instance_cache()
    second = RunStore(f"s3://{BUCKET}/logs", cache=ModelCache(f"s3://{BUCKET}/store-cache"))
    second.wait_for_scan(30)
    again = second.profile_blocking("cnn", next(iter(second.run_files("cnn").workers)), 1, timeout=60).steps()
    second.stop()
    assert again.equals(steps)


def test_a_report_of_one_workers_file_on_s3_holds_that_worker_alone(s3, tmp_path):
    """`report s3://.../worker0...` of the two-worker DDP run: the report lists worker0's file
    alone and its Distributed tab covers worker0 only (a URL's file cannot be read through a
    link, as a local file's is); the directory's report holds both workers."""
    from tb_plugin.__main__ import main

    from .helpers import embedded_answer, report_data

    worker0 = next(rel for rel in sorted(s3.local) if rel.startswith("ddp/worker0"))
    for source, workers in ((f"s3://{BUCKET}/logs/{worker0}", ["worker0"]),
                            (f"s3://{BUCKET}/logs/ddp", ["worker0", "worker1"])):
        out = tmp_path / "report.html"
        assert main(["report", source, "-o", str(out)]) == 0, source
        data = report_data(out)
        [listed] = embedded_answer(data, "runs")["runs"]
        assert (listed["name"], listed["workers"]) == (".", workers), source
        tables = embedded_answer(data, "distributed", run=".", span=1,
                                 tables="steps,all_steps,collectives,collective_time,groups,fsdp,devices,coverage,missing")
        devices = dict(zip(tables["devices"]["columns"], zip(*tables["devices"]["rows"])))
        assert sorted(set(devices["worker"])) == workers, source
