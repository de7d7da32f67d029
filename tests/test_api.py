"""HTTP routes in-process, through TensorBoard's own WSGI app and werkzeug's test client."""

import csv
import gzip
import io
import os
import shutil
import threading
import time

import pytest
import yaml

import tb_plugin
from tb_plugin.errors import BadParameterError, NotFoundError
from tb_plugin.server import api, http
from tb_plugin.python_api import profile
from tb_plugin.store.storage import Storage
from tb_plugin.views import overview

from .helpers import PREFIX, SAMPLES, make_client, nested_modules_trace, op, wait_ready, wait_route, write_trace

@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("logdir")
    shutil.copytree(SAMPLES / "cpu_cnn", root / "cpu_cnn")
    write_trace(root / "broken" / "worker0.pt.trace.json", []).write_bytes(b'{"traceEvents": [{"ph": "X"')
    write_trace(root / "names" / "<img src=x onerror=alert(1)>.pt.trace.json", [op("<b>x</b>", 0, 1)])
    return root


@pytest.fixture(scope="module")
def served(logdir):
    plugin, client = make_client(logdir)
    plugin.store.wait_for_scan(30)
    yield plugin, client
    plugin.store.stop()


def test_runs_lists_runs_workers_and_spans(served):
    _, client = served
    response = client.get(f"{PREFIX}/runs")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    runs = {r["name"]: r for r in response.get_json()["runs"]}
    assert set(runs) == {"cpu_cnn", "broken", "names"}
    assert runs["cpu_cnn"]["workers"] == ["worker0"] and runs["cpu_cnn"]["spans"] == 2


def test_workers_and_spans(served, logdir):
    _, client = served
    assert client.get(f"{PREFIX}/workers?run=cpu_cnn").get_json()["workers"] == ["worker0"]
    spans = client.get(f"{PREFIX}/spans?run=cpu_cnn&worker=worker0").get_json()["spans"]
    assert [s["span"] for s in spans] == [1, 2]
    assert spans[0]["stamp"] < spans[1]["stamp"]
    assert client.get(f"{PREFIX}/spans?run=cpu_cnn&worker=nobody").status_code == 404
    # the Python entrance: a run loaded alone answers as a log directory of that one run
    run = tb_plugin.load_run(logdir / "cpu_cnn")
    assert run.answer("workers")["workers"] == ["worker0"] and run.answer("spans", worker="worker0")["spans"] == spans
    listed, = run.answer("runs")["runs"]
    assert (listed["workers"], listed["spans"], listed["files"]) == (["worker0"], 2, 2)
    with pytest.raises(NotFoundError, match="no worker 'nobody'"):
        run.answer("spans", worker="nobody")


def test_info_loads_in_background_then_answers(served):
    _, client = served
    response = wait_ready(client, "run=cpu_cnn&worker=worker0&span=2")
    assert response.status_code == 200
    info = response.get_json()
    assert info["steps"] == [6, 7] and info["device_type"] == "CPU"
    assert info["event_counts"]["ops"] > 100


def test_bad_trace_gives_422_with_reason_and_others_keep_working(served):
    plugin, client = served
    response = wait_ready(client, "run=broken&worker=worker0")
    assert response.status_code == 422
    body = response.get_json()
    assert body["error"] == "bad_trace" and "truncated" in body["reason"]
    runs = {r["name"]: r for r in client.get(f"{PREFIX}/runs").get_json()["runs"]}
    assert runs["broken"]["errors"][0]["reason"] == body["reason"]
    assert wait_ready(client, "run=cpu_cnn&worker=worker0").status_code == 200


def test_fixed_trace_is_retried(tmp_path):
    path = write_trace(tmp_path / "run" / "w.pt.trace.json", [])
    path.write_bytes(b"{")
    old = time.time() - 3600
    os.utime(path, (old, old))  # settled: its failure is final until it changes
    plugin, client = make_client(tmp_path)
    plugin.store.wait_for_scan(30)
    assert wait_ready(client, "run=run&worker=w").status_code == 422
    write_trace(path, [op("ProfilerStep#1", 0, 10, cat="user_annotation")])
    response = wait_ready(client, "run=run&worker=w")
    assert response.status_code == 200 and response.get_json()["steps"] == [1]
    plugin.store.stop()


def test_loading_reply_tells_the_stage_and_the_fraction_read(tmp_path, monkeypatch):
    write_trace(tmp_path / "run" / "w.pt.trace.json", [op("ProfilerStep#1", 0, 10, cat="user_annotation")])
    gate = threading.Event()
    real = profile.profile_from_bytes

    def held_while_parsing(data, display_path, progress, **kwargs):
        progress("parsing", 0.25)
        gate.wait(30)
        return real(data, display_path, progress, **kwargs)

    monkeypatch.setattr(profile, "profile_from_bytes", held_while_parsing)
    plugin, client = make_client(tmp_path)
    plugin.store.wait_for_scan(30)
    try:
        deadline = time.monotonic() + 30
        while (body := client.get(f"{PREFIX}/info?run=run&worker=w").get_json())["stage"] != "parsing":
            # reading tells the fraction of the file read once it knows it (1.0 when read,
            # just before parsing starts: seen when the prefetch after start-up began the load)
            assert body["loading"] is True and body["stage"] in ("queued", "reading")
            assert body["fraction"] is None or (body["stage"] == "reading" and 0 <= body["fraction"] <= 1)
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert body["fraction"] == 0.25 and body["elapsed_seconds"] >= 0
    finally:
        gate.set()
    assert wait_ready(client, "run=run&worker=w").status_code == 200
    plugin.store.stop()


@pytest.mark.parametrize("query, status, fragment", [
    ("run=nope&worker=worker0", 404, "no run named 'nope'"),
    ("run=cpu_cnn&worker=nobody", 404, "no worker 'nobody'"),
    ("run=cpu_cnn&worker=worker0&span=3", 404, "spans 1..2"),
    ("run=cpu_cnn&worker=worker0&span=0", 400, ">= 1"),
    ("run=cpu_cnn&worker=worker0&span=abc", 400, "must be an integer"),
    ("worker=worker0", 400, "'run' is required"),
    ("run=cpu_cnn&run=x&worker=worker0", 400, "given 2 times"),
])
def test_info_parameter_errors(served, query, status, fragment):
    _, client = served
    response = client.get(f"{PREFIX}/info?{query}")
    assert response.status_code == status
    assert fragment in response.get_json()["reason"]


@pytest.mark.parametrize("run", ["..", "../..", "%2e%2e", "..%2F..%2Fetc", "/etc", "%2Fetc%2Fpasswd", "cpu_cnn/..", "cpu_cnn%2F..%2F.."])
def test_path_traversal_never_reads_outside(served, monkeypatch, run):
    _, client = served
    opened = []
    real = Storage.read_bytes
    monkeypatch.setattr(Storage, "read_bytes", lambda self, rel, limit=None: opened.append(rel) or real(self, rel, limit))
    response = client.get(f"{PREFIX}/info?run={run}&worker=worker0")
    assert response.status_code == 404
    assert opened == []


def test_trace_file_streams_the_stored_file_and_closes_it(served, logdir, monkeypatch):
    """A download is sent in chunks straight from the file (a trace of hundreds of MB is
    never held whole in the server), byte for byte as stored, and the file is closed."""
    _, client = served
    monkeypatch.setattr(http, "_STREAM_CHUNK", 4096)
    handles = []
    real = Storage.open_stored
    monkeypatch.setattr(Storage, "open_stored", lambda self, rel, **kw: handles.append(real(self, rel, **kw)) or handles[-1])
    response = client.get(f"{PREFIX}/trace_file?run=cpu_cnn&worker=worker0&span=2", buffered=False)
    assert response.status_code == 200 and response.is_streamed
    assert response.headers["Content-Type"] == "application/gzip"
    chunks = list(response.response)
    response.close()
    stored = sorted((logdir / "cpu_cnn").glob("worker0.*.gz"), key=lambda p: int(p.name.split(".")[1]))[1].read_bytes()
    assert len(chunks) == -(-len(stored) // 4096) and max(map(len, chunks)) == 4096
    assert b"".join(chunks) == stored
    assert len(handles) == 1 and handles[0].closed


def test_tables_json_and_csv_agree(served):
    _, client = served
    wait_ready(client, "run=cpu_cnn&worker=worker0")
    base = f"{PREFIX}/tables?run=cpu_cnn&worker=worker0&table=ops&limit=50"
    as_json = client.get(base).get_json()
    as_csv = client.get(base + "&format=csv")
    assert as_csv.headers["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.reader(io.StringIO(as_csv.get_data(as_text=True))))
    assert rows[0] == as_json["columns"]
    assert len(rows) - 1 == len(as_json["rows"]) == 50
    assert client.get(base.replace("table=ops", "table=secrets")).status_code == 400


def test_trace_names_are_data_not_markup(served):
    _, client = served
    runs = client.get(f"{PREFIX}/runs").get_json()["runs"]
    names = [r for r in runs if r["name"] == "names"][0]
    assert names["workers"] == ["<img src=x onerror=alert(1)>"]
    response = client.get(f"{PREFIX}/runs")
    assert response.headers["Content-Type"].startswith("application/json")


def test_static_files_and_openapi_match_routes(served):
    plugin, client = served
    index = client.get(f"{PREFIX}/index.js")
    assert index.status_code == 200 and index.headers["Content-Type"].startswith("text/javascript")
    assert b"export function render" in index.data
    assert client.get(f"{PREFIX}/index.html").status_code == 200
    spec = yaml.safe_load(client.get(f"{PREFIX}/openapi.yaml").data)
    assert set(spec["paths"]) == set(plugin.api.routes())


def test_post_is_refused(served):
    _, client = served
    assert client.post(f"{PREFIX}/runs").status_code == 405


def test_is_active_turns_true_without_restart(tmp_path):
    plugin, client = make_client(tmp_path)
    plugin.store.wait_for_scan(30)
    assert plugin.is_active() is False
    write_trace(tmp_path / "new_run" / "w.pt.trace.json", [op("a", 0, 1)])
    plugin.store.rescan()
    assert plugin.is_active() is True
    listing = client.get("/data/plugins_listing").get_json()
    assert listing["pytorch_profiler"]["enabled"] is True
    assert listing["pytorch_profiler"]["tab_name"] == "PyTorch Profiler"
    plugin.store.stop()


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_replies_are_gzipped_when_the_client_accepts_it(served, fmt):
    """As TensorBoard's own replies: gzip where Accept-Encoding allows it, the same bytes
    inflated, nothing compressed for a client that refuses it, and the stored trace file
    streamed as it is."""
    _, client = served
    wait_ready(client, "run=cpu_cnn&worker=worker0")
    url = f"{PREFIX}/tables?run=cpu_cnn&worker=worker0&table=ops&limit=2000&format={fmt}"
    plain = client.get(url)
    packed = client.get(url, headers={"Accept-Encoding": "gzip, deflate, br"})
    refused = client.get(url, headers={"Accept-Encoding": "gzip;q=0, identity"})
    assert plain.status_code == packed.status_code == 200
    assert "Content-Encoding" not in plain.headers and "Content-Encoding" not in refused.headers
    assert packed.headers["Content-Encoding"] == "gzip" and packed.headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(packed.get_data()) == plain.get_data() == refused.get_data()
    assert int(packed.headers["Content-Length"]) == len(packed.get_data()) < len(plain.get_data()) / 3
    # an error reply (JSON) is compressed the same way; a stored trace file is not touched
    error = client.get(f"{PREFIX}/tables?run=cpu_cnn&worker=worker0&table=secrets", headers={"Accept-Encoding": "gzip"})
    assert error.status_code == 400 and b"reason" in gzip.decompress(error.get_data())
    stored = client.get(f"{PREFIX}/trace_file?run=cpu_cnn&worker=worker0&span=1", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in stored.headers and stored.headers["Content-Type"] == "application/gzip"


@pytest.fixture(scope="module")
def gpu_served(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu_logdir")
    shutil.copytree(SAMPLES / "gpu_resnet50_v100", root / "resnet")
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    assert wait_ready(client, "run=resnet&worker=worker0").status_code == 200
    yield plugin, client
    plugin.store.stop()


def test_views_lists_only_views_with_data(gpu_served, served):
    _, client = gpu_served
    # wait_route: run alone, the run is not loaded yet and /views answers 202 first
    assert wait_route(client, f"{PREFIX}/views?run=resnet").get_json()["views"] == \
        ["overview", "operator", "kernel", "gpu_idle", "memory", "trace"]
    _, cpu_client = served
    assert "kernel" not in wait_route(cpu_client, f"{PREFIX}/views?run=cpu_cnn").get_json()["views"]


def test_available_views_answer_without_building_the_timeline(tmp_path):
    trace = write_trace(tmp_path / "w.pt.trace.json", [op("aten::add", 0, 5)])
    loaded = profile.load(str(trace))
    assert loaded.available_views() == ["overview", "operator", "trace"]
    assert "timeline_index" not in loaded.model.__dict__.get("_view_cache", {})
    empty = profile.load(str(write_trace(tmp_path / "e.pt.trace.json", [{"ph": "M", "name": "process_name", "pid": 1,
                                                                          "tid": 0, "args": {"name": "p"}}])))
    assert empty.available_views(worker_count=2, trace_file_count=2) == ["overview", "job", "distributed", "diff"]


def test_overview_route(gpu_served):
    plugin, client = gpu_served
    body = client.get(f"{PREFIX}/overview?run=resnet&worker=worker0").get_json()
    assert body["steps"]["columns"][0] == "step" and len(body["steps"]["rows"]) == 6
    assert body["gpu_summary"]["rows"][0][1].startswith("Tesla V100")
    assert {r["id"] for r in body["recommendations"]} >= {"input_pipeline_bound"}
    assert body["environment"]["device_type"] == "CUDA"


def test_overview_summarises_the_mean_step_by_category(gpu_served):
    plugin, client = gpu_served
    body = client.get(f"{PREFIX}/overview?run=resnet&worker=worker0").get_json()
    steps, summary = body["steps"], body["step_summary"]
    assert summary["columns"] == ["category", "mean_us", "share_pct"]

    def mean(column):
        values = [r[steps["columns"].index(column)] for r in steps["rows"]]
        return sum(values) / len(values)

    categories = [c[:-3] for c in steps["columns"] if c.endswith("_us") and c != "total_us"]
    assert [r[0] for r in summary["rows"]] == categories
    for category, mean_us, share_pct in summary["rows"]:
        assert mean_us == pytest.approx(mean(f"{category}_us"))
        assert share_pct == pytest.approx(100 * mean_us / mean("total_us"))
    assert sum(r[2] for r in summary["rows"]) == pytest.approx(100)
    assert body["step_mean"]["total_us"] == pytest.approx(mean("total_us"))


@pytest.mark.parametrize("route, params, first_columns", [
    ("operators", "", ["name", "calls"]),
    ("operators", "&group_by=name_shape", ["name", "input_shape", "calls"]),
    ("kernels", "", ["name", "calls"]),
    ("kernels", "&group_by=name_op", ["name", "operator", "graph_annotation", "grid"]),
    ("steps", "", ["step", "kernel_us"]),
    ("gpu_summary", "", ["device", "name"]),
])
def test_table_routes_json_and_csv(gpu_served, route, params, first_columns):
    _, client = gpu_served
    url = f"{PREFIX}/{route}?run=resnet&worker=worker0{params}"
    as_json = client.get(url).get_json()
    assert as_json["columns"][: len(first_columns)] == first_columns
    rows = list(csv.reader(io.StringIO(client.get(url + "&format=csv").get_data(as_text=True))))
    assert rows[0] == as_json["columns"] and len(rows) - 1 == len(as_json["rows"])


def test_operator_stacks_route(gpu_served):
    _, client = gpu_served
    body = client.get(f"{PREFIX}/operator_stacks?run=resnet&worker=worker0&name=aten::cudnn_convolution").get_json()
    assert body["stacks"] and body["stacks"][0]["frames"][0]["line"] > 0
    assert sum(s["calls"] for s in body["stacks"]) <= 318


def test_overview_stacks_and_flame_answer_in_python_as_over_http(tmp_path):
    """`Profile.answer` serves overview, operator_stacks and module_flame as the HTTP API
    does (frames as the trace wrote them): a tiny trace of one module calling aten::mm."""
    stack = ["model.py(3): forward", "train.py(9): <module>"]
    trace = write_trace(tmp_path / "w.pt.trace.json", [
        op("nn.Module: Net_0", 0, 20, cat="python_function"), op("aten::mm", 2, 10, **{"Call stack": ";".join(stack)}),
        op("aten::mm", 30, 4)])
    loaded = profile.load(str(trace))
    assert loaded.answer("overview")["environment"]["device_type"] == "CPU" == loaded.device_type
    assert loaded.answer("overview")["steps"].equals(loaded.overview()["steps"])
    stacks = loaded.answer("operator_stacks", name="aten::mm")
    assert (stacks["name"], stacks["input_shape"]) == ("aten::mm", None)
    assert [(s["calls"], [f["text"] for f in s["frames"]]) for s in stacks["stacks"]] == [(1, stack)]
    assert loaded.answer("operator_stacks", name="aten::mm", input_shape="[[9]]")["stacks"] == []
    with pytest.raises(BadParameterError, match="name"):  # required
        loaded.answer("operator_stacks")
    assert loaded.answer("module_flame") == loaded.module_flame()


def test_numbers_given_as_query_text_answer_in_python_as_over_http(tmp_path):
    """`Profile.answer` takes a number as its query text (what `answer_route` promises), as
    HTTP reads it; text that is no number, or no finite one, is refused naming the parameter
    (it reached the view: a TypeError comparing the text with a bound)."""
    trace = write_trace(tmp_path / "w.pt.trace.json", [op("aten::mm", 0, 10), op("aten::relu", 12, 3)])
    loaded = profile.load(str(trace))
    assert loaded.answer("kernel_sequences", length="3", top="7").equals(loaded.kernel_sequences(length=3, top=7))
    summary = loaded.answer("timeline_summary", start_us="0", end_us="20")
    assert summary.equals(loaded.answer("timeline_summary", start_us=0.0, end_us=20.0))
    with pytest.raises(BadParameterError, match="'length' must be an integer, not 'three'"):
        loaded.answer("kernel_sequences", length="three")
    with pytest.raises(BadParameterError, match="'end_us' must be finite"):
        loaded.answer("timeline_summary", start_us="0", end_us="inf")
    with pytest.raises(BadParameterError, match="'length' must be >= 2"):  # the bound checked on the number
        loaded.answer("kernel_sequences", length="1")


def test_tables_answers_a_raw_table_in_python_and_needs_its_name(tmp_path, served):
    """The route "tables" is the model's table, its first `limit` rows; `table` has no default."""
    trace = write_trace(tmp_path / "w.pt.trace.json", [op("aten::add", 0, 5), op("aten::mm", 10, 2)])
    loaded = profile.load(str(trace))
    assert list(loaded.answer("tables", table="ops", limit=1)["name"]) == ["aten::add"]
    with pytest.raises(BadParameterError, match="table"):
        loaded.answer("tables")
    _, client = served
    wait_ready(client, "run=cpu_cnn&worker=worker0")
    missing = client.get(f"{PREFIX}/tables?run=cpu_cnn&worker=worker0")
    assert missing.status_code == 400 and missing.get_json()["error"] == "missing_parameter"


def test_group_by_must_be_known(gpu_served):
    _, client = gpu_served
    response = client.get(f"{PREFIX}/operators?run=resnet&worker=worker0&group_by=shape")
    assert response.status_code == 400 and "name_shape" in response.get_json()["reason"]


def test_memory_routes(served):
    _, client = served
    q = "run=cpu_cnn&worker=worker0"
    wait_ready(client, q)
    assert client.get(f"{PREFIX}/memory_devices?{q}").get_json()["devices"] == ["CPU"]
    curve = client.get(f"{PREFIX}/memory_curve?{q}&device=CPU").get_json()
    assert curve["curve"]["columns"] == ["time_us", "allocated_bytes", "reserved_bytes"]
    peak = curve["peaks"]["peak_allocated_bytes"]
    assert peak == max(r[1] for r in curve["curve"]["rows"])
    whole = client.get(f"{PREFIX}/memory_stats?{q}&device=CPU").get_json()["rows"]
    start, end = curve["curve"]["rows"][0][0], curve["curve"]["rows"][len(curve["curve"]["rows"]) // 2][0]
    part = client.get(f"{PREFIX}/memory_stats?{q}&device=CPU&start_us={start}&end_us={end}").get_json()["rows"]
    assert sum(r[4] for r in part) < sum(r[4] for r in whole)  # fewer allocations in half the range
    assert client.get(f"{PREFIX}/memory_curve?{q}&max_points=100001").status_code == 400  # a reply too large to draw
    events = client.get(f"{PREFIX}/memory_events?{q}&device=CPU&format=csv")
    assert events.get_data(as_text=True).splitlines()[0] == "operator,size_bytes,alloc_us,free_us,duration_us,free_known"


@pytest.mark.parametrize("route", ["memory_curve", "memory_events", "memory_stats"])
@pytest.mark.parametrize("params, status, reason", [("&device=GPU9", 404, "CPU"), ("&start_us=x", 400, "a number"),
                                                    ("&start_us=5&end_us=1", 400, "before"),
                                                    ("&start_us=nan", 400, "finite")])
def test_memory_parameter_errors(served, route, params, status, reason):
    _, client = served
    wait_ready(client, "run=cpu_cnn&worker=worker0")
    response = client.get(f"{PREFIX}/{route}?run=cpu_cnn&worker=worker0{params}")
    assert response.status_code == status and reason in response.get_json()["reason"]


def test_module_routes(served):
    _, client = served
    q = "run=cpu_cnn&worker=worker0"
    wait_ready(client, q)
    assert "module" in client.get(f"{PREFIX}/views?run=cpu_cnn").get_json()["views"]
    table = client.get(f"{PREFIX}/modules?{q}").get_json()
    rows = [dict(zip(table["columns"], r)) for r in table["rows"]]
    paths = []  # each row's path, from the parent ids (parents come first)
    for row in rows:
        paths.append(row["name"] if row["parent_id"] < 0 else f"{paths[row['parent_id']]} > {row['name']}")
    assert "SmallCNN_0 > Sequential_0 > ConvBlock_0 > Conv2d_0" in paths
    flame = client.get(f"{PREFIX}/module_flame?{q}").get_json()
    top = {c["name"] for c in flame["children"]}
    assert "SmallCNN_0" in top


@pytest.fixture(scope="module")
def ddp_served(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp_logdir")
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", root / "ddp")
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    yield client
    plugin.store.stop()


def test_distributed_route(ddp_served):
    body = wait_route(ddp_served, f"{PREFIX}/distributed?run=ddp&span=2").get_json()
    assert set(body) == {"steps", "all_steps", "collectives", "collective_time", "calls", "groups", "fsdp", "devices",
                         "coverage", "missing"}
    assert body["coverage"]["rows"] == [[2, 2, "Covers 2 of 2 ranks."]] and body["missing"]["rows"] == []
    # per worker, the data-transfer and synchronizing time of its collective calls, summed
    calls, per_worker = body["calls"], body["collective_time"]
    column = {name: calls["columns"].index(name) for name in ("worker", "transfer_us", "synchronizing_us")}
    for worker, transfer, sync in per_worker["rows"]:
        mine = [r for r in calls["rows"] if r[column["worker"]] == worker]
        assert transfer == pytest.approx(sum(r[column["transfer_us"]] for r in mine))
        assert sync == pytest.approx(sum(r[column["synchronizing_us"]] for r in mine))
    assert per_worker["columns"] == ["worker", "transfer_us", "synchronizing_us"] and len(per_worker["rows"]) == 2
    steps = body["steps"]
    workers = {r[steps["columns"].index("worker")] for r in steps["rows"]}
    assert workers == {"worker0", "worker1"}
    coll = body["collectives"]
    names = {r[coll["columns"].index("name")] for r in coll["rows"]}
    assert "all_reduce" in names  # what DDP asked for; gloo:all_reduce is its backend_name
    csv_text = ddp_served.get(f"{PREFIX}/distributed?run=ddp&span=2&table=collectives&format=csv").get_data(as_text=True)
    assert csv_text.splitlines()[0] == ",".join(coll["columns"])
    assert "distributed" in wait_route(ddp_served, f"{PREFIX}/views?run=ddp").get_json()["views"]
    # the Python entrance: the run as the log directory of that one run (2 workers, 4 trace files: diff offered too)
    offered = wait_route(ddp_served, f"{PREFIX}/views?run=ddp&worker=worker1&span=2").get_json()["views"]
    assert tb_plugin.load_run(SAMPLES / "cpu_ddp_gloo").answer("views", 2, worker="worker1")["views"] == offered
    assert {"distributed", "diff"} <= set(offered)
    assert ddp_served.get(f"{PREFIX}/distributed?run=ddp&span=3").status_code == 404


def test_diff_route(ddp_served):
    url = f"{PREFIX}/diff?run=ddp&worker=worker0&span=1&run_b=ddp&worker_b=worker0&span_b=1"
    body = wait_route(ddp_served, url).get_json()
    ops = body["operators"]
    deltas = [c for c in ops["columns"] if c.endswith("_delta")]
    assert deltas and all(r[ops["columns"].index(c)] == 0 for r in ops["rows"] for c in deltas)
    assert ddp_served.get(url.replace("worker_b=worker0", "worker_b=nobody")).status_code == 404
    steps = wait_route(ddp_served, url + "&table=steps&format=csv").get_data(as_text=True)
    assert steps.splitlines()[0].startswith("category,")
    # the same span twice: every cause unchanged and called noise
    why = body["explanation"]
    verdict, delta = why["columns"].index("verdict"), why["columns"].index("mean_us_delta")
    assert [r[0] for r in why["rows"]][:2] == ["step_time", "device_compute"]
    assert all(r[verdict] == "noise" and r[delta] == 0 for r in why["rows"])
    assert body["contributors"]["rows"] == [] and body["tree"]["rows"]
    csv_text = wait_route(ddp_served, url + "&table=explanation&format=csv&threshold_pct=1").get_data(as_text=True)
    assert csv_text.splitlines()[0].startswith("cause,steps_a,steps_b,")
    for bad in ("-1", "nan", "lots"):
        reply = ddp_served.get(url + f"&threshold_pct={bad}")
        assert reply.status_code == 400 and "threshold_pct" in reply.get_json()["reason"]


def test_answers_are_reused_until_the_file_changes(tmp_path, monkeypatch):
    path = write_trace(tmp_path / "run" / "w.pt.trace.json", [op("aten::add", 0, 5)])
    plugin, client = make_client(tmp_path)
    plugin.store.wait_for_scan(30)
    wait_ready(client, "run=run&worker=w")
    import tb_plugin.views.operators as operators_view
    calls = []
    real = operators_view.operators
    monkeypatch.setattr(operators_view, "operators", lambda *a: calls.append(1) or real(*a))
    first = client.get(f"{PREFIX}/operators?run=run&worker=w").get_json()
    again = client.get(f"{PREFIX}/operators?run=run&worker=w").get_json()
    assert first == again and len(calls) == 1
    assert client.get(f"{PREFIX}/operators?run=run&worker=w&format=csv").status_code == 200 and len(calls) == 2
    write_trace(path, [op("aten::mul", 0, 5), op("aten::mul", 10, 5)])
    changed = wait_route(client, f"{PREFIX}/operators?run=run&worker=w").get_json()
    assert [r[0] for r in changed["rows"]] == ["aten::mul"] and len(calls) == 3
    plugin.store.stop()


@pytest.mark.parametrize("route", ["diff", "distributed"])
def test_answers_over_several_profiles_are_reused_until_one_file_changes(tmp_path, monkeypatch, route):
    """diff and distributed read two or more profiles: reused while every one is the profile
    served, computed again when any of them (here the second) is reloaded."""
    from tb_plugin.views import diff as diff_view
    from tb_plugin.views import distributed as distributed_view
    write_trace(tmp_path / "run" / "w0.pt.trace.json", [op("ProfilerStep#1", 0, 20), op("aten::add", 1, 5)])
    second = write_trace(tmp_path / "run" / "w1.pt.trace.json", [op("ProfilerStep#1", 0, 20), op("aten::add", 1, 7)])
    plugin, client = make_client(tmp_path)
    plugin.store.wait_for_scan(30)
    module, name = (diff_view, "diff") if route == "diff" else (distributed_view, "combine")
    calls = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: calls.append(1) or real(*a))
    url = (f"{PREFIX}/diff?run=run&worker=w0&run_b=run&worker_b=w1&table=operators" if route == "diff"
           else f"{PREFIX}/distributed?run=run&table=steps")
    first = wait_route(client, url)
    assert first.status_code == 200, first.get_json()
    assert client.get(url).get_json() == first.get_json() and len(calls) == 1
    write_trace(second, [op("ProfilerStep#1", 0, 30), op("aten::add", 1, 9), op("aten::add", 11, 9)])
    deadline = time.monotonic() + 60  # the rescan notices the change, then the file loads again
    while (changed := wait_route(client, url).get_json()) == first.get_json():
        assert time.monotonic() < deadline, "the changed file was never reloaded"
        time.sleep(0.1)
    assert len(calls) == 2
    if route == "diff":
        (row,) = [dict(zip(changed["columns"], r)) for r in changed["rows"]]
        assert (row["name"], row["calls_a"], row["calls_b"], row["host_self_us_b"]) == ("aten::add", 1, 2, 18.0)
    else:
        totals = {r[changed["columns"].index("worker")]: r[changed["columns"].index("total_us")] for r in changed["rows"]}
        assert totals == {"w0": 20, "w1": 30}
    plugin.store.stop()


def test_distributed_view_of_more_ranks_than_profiles_kept_in_memory(tmp_path):
    """A 128-rank job has more workers than the store keeps parsed profiles (64, and fewer
    within the memory budget): each worker's profile is summarised as it loads, so the view
    completes, says how many workers are ready while it waits, and equals the view computed
    from all the models at once."""
    import tb_plugin
    from tb_plugin.views import distributed as distributed_view
    sample = sorted((SAMPLES / "cpu_ddp_gloo").glob("worker0.*.pt.trace.json.gz"))[0]
    (tmp_path / "run").mkdir()
    for rank in range(6):
        shutil.copy(sample, tmp_path / "run" / f"rank{rank}.pt.trace.json.gz")
    plugin, client = make_client(tmp_path)
    plugin.store.max_profiles = 2
    plugin.store.wait_for_scan(30)
    url = f"{PREFIX}/distributed?run=run&table=all_steps"
    first = client.get(url)
    assert first.status_code == 202
    progress = first.get_json()
    assert progress["total"] == 6 and 0 <= progress["ready"] < 6 and progress["stage"]
    body = wait_route(client, url, timeout=120)
    assert body.status_code == 200, body.get_json()
    assert len(plugin.store.budget.loaded) <= 2  # never more than the store may keep
    got = body.get_json()
    models = {f"rank{r}": tb_plugin.load(tmp_path / "run" / f"rank{r}.pt.trace.json.gz").model for r in range(6)}
    expected = distributed_view.distributed(models).all_steps
    assert got["columns"] == list(expected.columns)
    assert [r[0] for r in got["rows"]] == [f"rank{r}" for r in range(6)]
    for row, (_, want) in zip(got["rows"], expected.iterrows()):
        assert row[1] == want["steps"] and all(abs(a - b) < 1e-6 for a, b in zip(row[2:], want.iloc[2:]))
    plugin.store.stop()


def test_a_window_wider_than_a_float_is_refused(served):
    """-1e308..1e308 is finite at both ends but its width is not: /timeline_counters answered
    200 with NaN and infinite times (null in JSON); the timeline routes now refuse it."""
    _, client = served
    wait_ready(client, "run=cpu_cnn&worker=worker0")
    base = "run=cpu_cnn&worker=worker0&start_us=-1e308&end_us=1e308"
    for route in ("timeline_counters", "timeline_summary", "timeline_slices"):
        response = client.get(f"{PREFIX}/{route}?{base}&resolution_us=1")
        assert response.status_code == 400, route
        assert response.get_json() == {"error": "bad_parameter", "reason": "the window from start_us to end_us is too wide"}
    wide = client.get(f"{PREFIX}/timeline_counters?run=cpu_cnn&worker=worker0&start_us=-1e300&end_us=1e300&points=10")
    assert wide.status_code == 200
    times = wide.get_json()["counters"][0]["time_us"]
    assert times and all(isinstance(t, float) for t in times)


def test_first_plugins_listing_after_start_up_sees_the_runs(monkeypatch):
    """The page asks for the plugins listing as it opens, right after TensorBoard starts: the
    answer came before the first scan ended, so the tab showed as inactive over a logdir
    full of runs. A scan that takes a moment (a large or remote logdir) is waited for."""
    import tb_plugin.server.loading as loading_module

    real = loading_module.discover_runs

    def slow_discover(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(loading_module, "discover_runs", slow_discover)
    plugin, client = make_client(SAMPLES)
    try:
        listing = client.get("/data/plugins_listing").get_json()
        assert listing["pytorch_profiler"]["enabled"] is True
        # every folder of samples/ holding trace files or memory snapshots is a run
        folders = sorted({p.parent.name for pattern in ("*/*.pt.trace.json.gz", "*/*.pickle*") for p in SAMPLES.glob(pattern)})
        assert [r["name"] for r in client.get(f"{PREFIX}/runs").get_json()["runs"]] == folders
        assert {"cpu_cnn", "cpu_ddp_gloo", "cpu_fsdp2_gloo", "cpu_mesh_2d_gloo"} <= set(folders)
    finally:
        plugin.store.stop()


def test_views_of_several_tables_answer_the_ones_asked_for(ddp_served):
    url = f"{PREFIX}/distributed?run=ddp&span=2"
    everything = wait_route(ddp_served, url).get_json()
    some = ddp_served.get(f"{url}&tables=steps,devices").get_json()
    assert some == {"steps": everything["steps"], "devices": everything["devices"]}
    for bad in ("tables=steps,nope", "tables=steps,", "tables=steps&table=steps", "tables=steps&format=csv"):
        response = ddp_served.get(f"{url}&{bad}")
        assert response.status_code == 400 and response.get_json()["error"] == "bad_parameter", bad


# --- issue 27, item 1: a small request never builds a large reply ----------------------------

def test_repeated_track_ids_are_answered_once(served):
    """`tracks=0,0,0,...` (2,000 repeats, a 4 KB query) on the V100 run answered every slice of
    track 0 2,000 times: a 469 MB reply. Each id counts once, at the core as at the route."""
    _, client = served
    wait_ready(client, "run=cpu_cnn&worker=worker0")
    base = f"{PREFIX}/timeline_slices?run=cpu_cnn&worker=worker0&start_us=-1e9&end_us=1e12&resolution_us=1"
    once = client.get(f"{base}&tracks=0,1").get_json()
    repeated = client.get(f"{base}&tracks={','.join(['0', '1'] * 1000)}").get_json()
    assert once["track"] and repeated == once
    summary = f"{PREFIX}/timeline_summary?run=cpu_cnn&worker=worker0&start_us=-1e9&end_us=1e12"
    assert client.get(f"{summary}&tracks={','.join(['0'] * 2000)}").get_json() == client.get(f"{summary}&tracks=0").get_json()
    index = profile.load(str(SAMPLES / "cpu_cnn" / next(p.name for p in (SAMPLES / "cpu_cnn").iterdir()))).timeline()
    assert index.query(-1e9, 1e12, 1.0, [0] * 500) == index.query(-1e9, 1e12, 1.0, [0])


def test_a_reply_beyond_its_share_of_the_budget_is_refused_with_its_reason(served, monkeypatch):
    """One reply may hold 1/8 of --profiler_max_memory_mb while it is built (here made to hold
    about 50 values); a table or timeline window beyond it answers 413 with the reason, before
    it is built, and smaller answers are unchanged."""
    from tb_plugin.server import accounting

    _, client = served
    wait_ready(client, "run=cpu_cnn&worker=worker0")
    monkeypatch.setattr(accounting, "REPLY_BYTES_PER_VALUE", (4096 << 20) // 8 // 50)
    query = "run=cpu_cnn&worker=worker0"
    for url in (f"tables?{query}&table=ops&limit=1000000000", f"operators?{query}&format=csv",
                f"timeline_slices?{query}&start_us=-1e9&end_us=1e12&resolution_us=0.001"):
        response = client.get(f"{PREFIX}/{url}")
        assert response.status_code == 413, url
        body = response.get_json()
        assert body["error"] == "reply_too_large" and "more than the 50 one reply may hold" in body["reason"], body
    assert client.get(f"{PREFIX}/tables?{query}&table=ops&limit=1").status_code == 200


def test_deeply_nested_modules_answer_both_module_routes(tmp_path):
    """Issue 27 item 9: on 5,000 nested modules `module_flame` answered 500 and `modules`
    158 MB; both now answer, small (the flame graph folded, paths sent once as parent ids)."""
    nested_modules_trace(tmp_path / "deep" / "w.pt.trace.json")
    plugin, client = make_client(tmp_path)
    try:
        q = "run=deep&worker=w"
        assert wait_ready(client, q).status_code == 200
        flame = client.get(f"{PREFIX}/module_flame?{q}")
        assert flame.status_code == 200 and flame.get_json()["children"][0]["name"] == "Block_0"
        table = client.get(f"{PREFIX}/modules?{q}")
        assert table.status_code == 200 and len(table.get_data()) < 1e6
        assert "path" not in table.get_json()["columns"] and len(table.get_json()["rows"]) == 5000
    finally:
        plugin.store.stop()


def test_a_request_waits_for_a_turn_to_compute_at_most_a_bound_then_answers_202(tmp_path, monkeypatch):
    """Issue 27 item 10: right after a load, 50 clients asking for every view computed them
    all at once under one GIL, and each waited for all of them (p99 2.2 s, max 8.7 s). Views
    are computed COMPUTING_AT_ONCE at a time; a request that gets no turn within
    COMPUTE_WAIT_SECONDS answers 202 (stage "computing") and is answered when asked again."""
    monkeypatch.setattr(api, "COMPUTING_AT_ONCE", 1)
    monkeypatch.setattr(http, "COMPUTE_WAIT_SECONDS", 0.3)  # read by http.route
    shutil.copytree(SAMPLES / "cpu_cnn", tmp_path / "cnn")
    plugin, client = make_client(tmp_path)
    q = "run=cnn&worker=worker0"
    computing, finish = threading.Event(), threading.Event()
    real_steps = overview.steps  # what the declared route /steps calls (`Profile.answer`)

    def slow_steps(model):
        computing.set()
        assert finish.wait(30)
        return real_steps(model)

    monkeypatch.setattr(overview, "steps", slow_steps)
    try:
        assert wait_ready(client, q).status_code == 200
        slow = threading.Thread(target=lambda: client.get(f"{PREFIX}/steps?{q}"))
        slow.start()
        assert computing.wait(30)
        # answered while /steps still computes (it cannot finish before `finish` is set)
        waiting = client.get(f"{PREFIX}/operators?{q}")
        assert not finish.is_set() and waiting.status_code == 202 and waiting.get_json()["stage"] == "computing"
        finish.set()
        slow.join(30)
        assert client.get(f"{PREFIX}/operators?{q}").status_code == 200
    finally:
        finish.set()
        plugin.store.stop()
