"""What the tests share: paths to the real traces, writers for hand-made tiny traces, the
plugin served in-process and over a real `tensorboard`, the OpenAPI file's routes with valid
queries, and the preprocessing and S3 helpers. Fixtures live in conftest.py; a test module
never imports another (tests/test_layering.py checks it)."""

import argparse
import collections
import contextlib
import gzip
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import yaml
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

import tb_plugin.python_api.profile
from tb_plugin import openapi_gen
from tb_plugin.store.cache import ModelCache
from tb_plugin.server.plugin import ProfilerPlugin

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
SHARED_TRACES = Path(os.environ.get("TB_PLUGIN_SHARED_TRACES", REPO.parent / "shared" / "traces"))


def shared_trace(run, name=None):
    """Path of a real trace in ../shared/traces; the test is skipped (with why) if absent."""
    folder = SHARED_TRACES / run
    if not folder.is_dir():
        pytest.skip(f"real trace folder {folder} is not available (../shared/traces missing)")
    files = sorted(folder.glob("*.json.gz")) if name is None else [folder / name]
    return files[0] if name is None else files[0]


def write_trace(path, events, gz=False, **top_level):
    """Write a hand-made trace: `events` list plus top-level keys; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = json.dumps({"schemaVersion": 1, **top_level, "traceEvents": events}).encode()
    path.write_bytes(gzip.compress(doc) if gz else doc)
    return path


def op(name, ts, dur, tid=1, pid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def runtime(name, ts, dur, correlation, external_id, tid=1, pid=1, cat="cuda_runtime"):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": correlation, "External id": external_id}}


def kernel(name, ts, dur, correlation, device=0, stream=7, cat="kernel", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": correlation, "device": device, "stream": stream, **args}}


def memory(ts, nbytes, addr, total_allocated, total_reserved, device_type=1, device_id=0, tid=1, pid=1):
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": pid, "tid": tid, "ts": ts,
            "args": {"Device Type": device_type, "Device Id": device_id, "Addr": addr, "Bytes": nbytes,
                     "Total Allocated": total_allocated, "Total Reserved": total_reserved}}


# Hardware counters as CUPTI PM sampling writes them (`helpers.counter_trace`; the sources and
# commits are named in tests/test_views_counters.py): one `C` event per sample under the pid
# "GPU N Counters", its args every metric's value.
PM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
PM_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
PM_DRAM = "dram__bytes_read.sum"
# GPU 0 sampled every 25 µs from ts 1000 to 1300 (13 samples; the one at 1300 is after the
# last step); four samples in each step of `counter_workload`:
PM_THROUGHPUT_VALUES = (10, 20, 30, 40, 50, 50, 60, 60, 0, 0, 0, 100, 77)  # step means 25, 55, 25
PM_OCCUPANCY_VALUES = (5, 5, 5, 5, 10, 20, 10, 20, 1, 2, 3, 4, 9)  # step means 5, 15, 2.5


def counter_workload():
    """Three steps of 100 µs from ts 1000, each launching one 50 µs kernel on GPU 0 stream 7
    (pid 0): step windows [1000, 1100), [1100, 1200), [1200, 1300)."""
    events = []
    for i, start in enumerate((1000, 1100, 1200)):
        events += [op(f"ProfilerStep#{i + 1}", start, 100, pid=100, tid=100),
                   runtime("cudaLaunchKernel", start + 10, 5, i + 1, i + 1, pid=100, tid=100),
                   kernel("gemm", start + 20, 50, i + 1)]
    return events


def pm_sample(ts, device, **metrics):
    return {"ph": "C", "cat": "hardware_counters", "name": "CUPTI PM Sampling", "pid": f"GPU {device} Counters",
            "tid": 0, "ts": ts, "args": metrics}


def counter_trace(path):
    """`counter_workload` with GPU 0's PM samples, and one throughput sample (99) of GPU 1,
    which ran nothing, in step 1."""
    events = counter_workload()
    for i, (throughput, occupancy) in enumerate(zip(PM_THROUGHPUT_VALUES, PM_OCCUPANCY_VALUES)):
        events.append(pm_sample(1000 + 25 * i, 0, **{PM_THROUGHPUT: throughput, PM_OCCUPANCY: occupancy,
                                                      PM_DRAM: 1000 * i}))
    events.append(pm_sample(1010, 1, **{PM_THROUGHPUT: 99.0}))
    return write_trace(path, events)


def raw_events(path):
    """The trace's events decoded by the standard library: an independent view of the file."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data)
    return doc if isinstance(doc, list) else doc["traceEvents"]


def covered_length(start, end, intervals):
    """Length of [start, end] covered by the union of `intervals` ((start, end) pairs sorted by
    start): a plain loop, independent of the package's sweeps."""
    covered, reach = 0.0, start
    for s, e in intervals:
        s, e = max(s, reach), min(e, end)
        if e > s:
            covered += e - s
            reach = e
    return covered


TENSORBOARD = Path(sys.executable).with_name("tensorboard")


def key_averages_counts(ops):
    """Calls per operator name in our ops table as `prof.key_averages()` counts them: it drops
    a child that has its parent's name and no sibling (torch's own merge of such pairs)."""
    parent = ops["parent"].to_numpy()
    names = ops["name"].astype(str).to_numpy()
    child_count = collections.Counter(parent[parent >= 0].tolist())
    counts = collections.Counter(names.tolist())
    for i in range(len(ops)):
        if parent[i] >= 0 and names[parent[i]] == names[i] and child_count[parent[i]] == 1:
            counts[names[i]] -= 1
    return counts


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tensorboard(logdir, log_path, path_prefix="", extra_args=()):
    """A real `tensorboard` on 127.0.0.1 at a free port, without the disk cache; yields its
    base URL once it answers; stopped by its pid (SIGTERM, then SIGKILL)."""
    if not TENSORBOARD.exists():
        pytest.skip(f"no tensorboard executable beside {sys.executable}")
    port = free_port()
    args = [str(TENSORBOARD), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port),
            "--profiler_cache_dir", "", *extra_args]
    if path_prefix:
        args += ["--path_prefix", path_prefix]
    log = open(log_path, "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}{path_prefix}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/data/plugins_listing", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                assert proc.poll() is None, Path(log_path).read_text(errors="replace")
                assert time.monotonic() < deadline, "tensorboard did not start within 60 s"
                time.sleep(0.2)
        yield base
    finally:
        stop_by_pid(proc, 15)
        log.close()


def stop_by_pid(proc, timeout):
    """Stop a server started with `subprocess.Popen` by its pid: SIGTERM, then SIGKILL when it
    has not exited within `timeout` seconds."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def deep_directory(parent, levels, name="d"):
    """`parent/name/name/...`, `levels` deep, made and removed one level at a time through
    directory descriptors: `os.makedirs` and `shutil.rmtree` recurse once per level and stop
    at Python's recursion limit (~1,000) on such a tree. Yields the top directory."""
    top = os.open(parent, os.O_RDONLY)
    current = top
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=current)
            below = os.open(name, os.O_RDONLY, dir_fd=current)
            if current != top:
                os.close(current)
            current = below
        if current != top:
            os.close(current)
        yield Path(parent) / name
    finally:
        os.close(top)
        # Bottom up, by path (2 characters a level: within PATH_MAX for a few thousand levels).
        for depth in range(levels, 0, -1):
            level = os.path.join(parent, *[name] * depth)
            with contextlib.suppress(FileNotFoundError):
                for entry in os.scandir(level):
                    if not entry.is_dir(follow_symlinks=False):
                        os.unlink(entry.path)
                os.rmdir(level)


def python_frame(name, ts, dur, python_id, parent_id, module_id=None):
    """A Python stack frame's event (`with_stack=True`), a module's call when `module_id` is given."""
    args = {"Python id": python_id, "Python parent id": parent_id}
    if module_id is not None:
        args["Python module id"] = module_id
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


# --- the plugin in-process -----------------------------------------------------------------------

PREFIX = "/data/plugin/pytorch_profiler"


def make_client(logdir, **flags):
    """The plugin in TensorBoard's WSGI app; no disk cache unless a test asks for one."""
    flags = {"reload_interval": 3600, "profiler_cache_dir": "", "profiler_max_memory_mb": 4096, **flags}
    context = base_plugin.TBContext(logdir=str(logdir), flags=argparse.Namespace(**flags))
    plugin = ProfilerPlugin(context)
    app = application.TensorBoardWSGI([plugin])
    return plugin, Client(app)


def wait_ready(client, query, timeout=60):
    """Ask until the profile is parsed (202 while loading)."""
    return wait_route(client, f"{PREFIX}/info?{query}", timeout)


def wait_route(client, url, timeout=60):
    """The first answer to `url` that is not a 202 (asked again while the server loads)."""
    deadline = time.monotonic() + timeout
    while (response := client.get(url)).status_code == 202:
        assert time.monotonic() < deadline, f"{url} still loading after {timeout} s"
        time.sleep(0.05)
    return response


def run_cli(*args):
    """`python -m tb_plugin ARGS` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "tb_plugin", *args], capture_output=True, text=True, timeout=120)


# --- the routes of the OpenAPI file, and a valid request to each ---------------------------------

SPEC = yaml.safe_load(openapi_gen.SPEC_PATH.read_text(encoding="utf-8"))
SNAPSHOT_RUNS = {"snapshots": ["rank0", "rank1"]}  # runs of memory snapshots (samples/gpu_memory_snapshot)

# Valid values of every query parameter, for requests that must reach the views: a declared
# route's from its declaration (`schema.route`), those below in their place (the sample's run
# and worker, where a declaration would give any text; the memory device, which the profile
# decides; a window holding the whole sample).
VALID = {**{p.name: value for r in openapi_gen.declared_routes().values() for p in r.params
            if (value := p.valid_value()) is not None},
         "run": "cpu_cnn", "worker": "worker0", "span": "1", "run_b": "cpu_cnn", "worker_b": "worker0", "span_b": "1",
         "name": "aten::conv2d", "device": "CPU", "start_us": "0", "end_us": "1000000", "resolution_us": "100",
         "event": "0", "q": "aten", "tracks": "0", "points": "10", "limit": "10", "max_points": "100",
         "format": "json", "group_by": "name", "after_us": "0", "direction": "next", "snapshot": "rank0"}
VALID_FOR_ROUTE = {("/tables", "table"): "ops", ("/distributed", "run"): "ddp",
                   # memory snapshots' routes: the run of samples/gpu_memory_snapshot, copied as "snapshots"
                   **{(path, "run"): next(iter(SNAPSHOT_RUNS)) for path in SPEC["paths"] if path.startswith("/snapshot_")}}


def route_parameters(path):
    """[(name, required)] of one route, from the spec."""
    shared = SPEC["components"]["parameters"]
    out = []
    for p in SPEC["paths"][path]["get"].get("parameters", []):
        p = shared[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p
        out.append((p["name"], bool(p.get("required"))))
    return out


def csv_table(path):
    """{"table": NAME} for a route made of several tables (its CSV is one of them: the first
    the spec lists), else {}."""
    shared = SPEC["components"]["parameters"]
    for p in SPEC["paths"][path]["get"].get("parameters", []):
        p = shared[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p
        if p["name"] == "table" and not p.get("required") and p.get("schema", {}).get("enum"):
            return {"table": p["schema"]["enum"][0]}
    return {}


def valid_query(path, skip=None):
    """The query string of a valid request to `path` (required parameters only), minus `skip`."""
    parts = []
    for name, required in route_parameters(path):
        if name == skip or not (required or name in ("span",)):
            continue
        parts.append(f"{name}={urllib.parse.quote(VALID_FOR_ROUTE.get((path, name), VALID.get(name, '')), safe='')}")
    return "&".join(parts)


# --- preprocessing into the disk cache -----------------------------------------------------------

def run_preprocess(*args):
    """(exit status, what went to stderr) of `python -m tb_plugin preprocess ARGS`, in-process."""
    from tb_plugin.__main__ import main  # loads the preprocessing command, which needs the [dask] extra

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["preprocess", *map(str, args)])
    return status, err.getvalue()


def forbid_parsing(monkeypatch):
    monkeypatch.setattr(tb_plugin.python_api.profile, "profile_from_bytes",
                        lambda *a, **k: pytest.fail("a trace was parsed although its summaries are cached"))


def count_model_loads(monkeypatch):
    """[keys of the models read from the disk cache], filled as they are read."""
    loads = []
    real = ModelCache.get

    def counted(self, key, identity, admit=None):
        loads.append(key)
        return real(self, key, identity, admit)

    monkeypatch.setattr(ModelCache, "get", counted)
    return loads


def count_summary_reads(monkeypatch):
    """([keys of files' own summary entries read], [names of the run indexes read])."""
    file_reads, index_reads = [], []
    real_file, real_index = ModelCache.get_summary, ModelCache.get_summary_index

    def file_read(self, key, identity, declared):
        file_reads.append(key)
        return real_file(self, key, identity, declared)

    def index_read(self, run_source, span, declared):
        index_reads.append(declared.name)
        return real_index(self, run_source, span, declared)

    monkeypatch.setattr(ModelCache, "get_summary", file_read)
    monkeypatch.setattr(ModelCache, "get_summary_index", index_read)
    return file_reads, index_reads


def table_frame(body, name):
    """Table `name` of a route's JSON answer as a DataFrame."""
    return pd.DataFrame(body[name]["rows"], columns=body[name]["columns"])


# --- S3 (the `s3` fixture's bucket) --------------------------------------------------------------

S3_NEEDS = "S3 tests need moto[server], boto3 and s3fs (pip install 'moto[server]' boto3 s3fs)"
BUCKET = "bucket"
S3_RUNS = {"cnn": "cpu_cnn", "ddp": "cpu_ddp_gloo"}  # S3 prefix -> local sample run directory


def sample_traces(local_run):
    """The trace files of one run of samples/, sorted."""
    files = sorted((SAMPLES / local_run).glob("*.pt.trace.json.gz"))
    assert files, f"no sample traces in {SAMPLES / local_run}"
    return files


# --- hand-made traces more than one test module reads ---------------------------------------------

def nested_modules_trace(path, levels=5000):
    """A ~1 MB trace of `levels` modules each called inside the one before (each frame's
    parent is the previous one), with one operator in the innermost."""
    events = [python_frame(f"nn.Module: Block_{i}", i, 2 * (levels - i) + 10, i + 1, i, module_id=1000 + i)
              for i in range(levels)]
    return write_trace(path, events + [op("aten::mm", levels, 1)])


ANNOTATED_NODES = [(5 << 32) | i for i in range(1, 5)]


def annotated_graph_trace(path):
    """Write a replay of four graph nodes, annotated by torch 2.13's own post-processor
    (`torch.cuda._annotate_cuda_graph_trace.annotate_trace`) from annotations in the form
    `torch.cuda._graph_annotations.get_kernel_annotations()` returns: node 1 and 2 marked
    `mark_kernels("attention")`, node 3 `mark_stream(s, "mlp")` (its stream id 61), node 4
    an object that is not a dict; and an eager gemm. Returns the path."""
    annotate = pytest.importorskip("torch.cuda._annotate_cuda_graph_trace", reason="needs torch >= 2.13")
    node = ANNOTATED_NODES
    events = [
        op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        op("Torch-Compiled Region: 0/0", 10, 50, **{"External id": 2}),
        runtime("cudaGraphLaunch", 20, 20, correlation=7, external_id=2),
        kernel("triton_qk", 100, 100, correlation=7, stream=3, **{"graph node id": node[0]}),
        kernel("triton_softmax_pv", 200, 200, correlation=7, stream=3, **{"graph node id": node[1]}),
        kernel("triton_mlp", 150, 300, correlation=7, stream=4, **{"graph node id": node[2]}),
        kernel("triton_norm", 500, 50, correlation=7, stream=3, **{"graph node id": node[3]}),
        kernel("gemm", 600, 40, correlation=9, stream=3),  # not a graph kernel
        runtime("cudaLaunchKernel", 590, 5, correlation=9, external_id=2),
    ]
    trace = {"schemaVersion": 1, "traceEvents": events}
    annotations = {node[0]: [{"str": "attention"}], node[1]: [{"str": "attention"}],
                   node[2]: [{"str": "mlp", "stream": 61}], node[3]: ["norm-object"]}
    assert annotate.annotate_trace(trace, annotations) == 4
    return write_trace(path, trace["traceEvents"])


def low_coverage_trace(path):
    """Write one V100 step 0..2000 us: an old-style aten::cudnn_convolution (no Concrete
    Inputs, no autograd node) whose kernel runs 900 us, and an aten::mm [64, 64] @ [64, 64]
    whose kernel runs 100 us. Returns the path."""
    events = [op("ProfilerStep#1", 0, 2000, cat="user_annotation"),
              op("aten::cudnn_convolution", 10, 50, **{"External id": 1, "Sequence number": 7,
                 "Input Dims": [[8, 3, 32, 32], [16, 3, 3, 3], [], [], [], [], [], [], []], "Input type": ["float"] * 2}),
              runtime("cudaLaunchKernel", 20, 5, correlation=1, external_id=1),
              kernel("implicit_convolve_sgemm", 100, 900, correlation=1),
              op("aten::mm", 1100, 20, **{"External id": 2, "Input Dims": [[64, 64], [64, 64]], "Input type": ["float"] * 2}),
              runtime("cudaLaunchKernel", 1105, 5, correlation=2, external_id=2),
              kernel("volta_sgemm_64x64_nn", 1200, 100, correlation=2)]
    props = [{"id": 0, "name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16e9, "computeMajor": 7, "computeMinor": 0}]
    return write_trace(path, events, deviceProperties=props)


# --- the Trace view's timeline canvas, in Chromium (tests/e2e) ---------------------------------------

BOX = "[data-testid=trace-timeline]"


def window(page):
    box = page.locator(BOX)
    return float(box.get_attribute("data-start-us")), float(box.get_attribute("data-end-us"))


def url_window(page):
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    return float(query["trace_start_us"][0]), float(query["trace_end_us"][0])


def wait_url_window(page):
    """The URL is written once the window settles (replaceState is rate-limited)."""
    start, end = window(page)
    page.wait_for_function(
        """([s, e]) => { const p = new URLSearchParams(location.search);
            return Math.abs(Number(p.get('trace_start_us')) - s) < 0.01 && Math.abs(Number(p.get('trace_end_us')) - e) < 0.01; }""",
        arg=[start, end])
    return url_window(page)


def canvas_origin(page):
    box = page.locator(".trace-canvas").bounding_box()
    return box["x"], box["y"]


def canvas_pixels(page):
    """(pixels differing from the background, distinct colours) of the timeline canvas."""
    return page.evaluate("""() => {
        const c = document.querySelector('.trace-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const bg = [d[d.length - 4], d[d.length - 3], d[d.length - 2]];
        let painted = 0;
        const colours = new Set();
        for (let i = 0; i < d.length; i += 4) {
            if (Math.abs(d[i] - bg[0]) + Math.abs(d[i + 1] - bg[1]) + Math.abs(d[i + 2] - bg[2]) > 30) painted += 1;
            colours.add((d[i] >> 4) << 8 | (d[i + 1] >> 4) << 4 | (d[i + 2] >> 4));
        }
        return [painted, colours.size, c.width * c.height];
    }""")


def report_data(path):
    """A report file's embedded data (`python -m tb_plugin report`): {answers: {key: [status,
    body]}, windows, location, notes}, read as a browser would: base64, then gzip."""
    import base64
    import re

    text = Path(path).read_text("utf-8")
    block = re.search(r'<script type="application/octet-stream" id="tb-report-data">([^<]*)</script>', text)
    assert block, "no embedded data block"
    return json.loads(gzip.decompress(base64.b64decode(block.group(1))))


def embedded_answer(data, route, **params):
    """The answer a report holds for `route` and `params` (asserting it answered 200)."""
    from tb_plugin.report import answer_key

    status, body = data["answers"][answer_key(route, {k: str(v) for k, v in params.items()})]
    assert status == 200, body
    return body
