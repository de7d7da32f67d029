"""`python -m tb_plugin report` and `compare --html`: one HTML file holding the page and the
answers it asks for, gzipped and base64-encoded, that names no path of this machine and asks
for nothing outside itself. What the page does with it is tests/e2e/test_report.py's."""

import collections
import gzip
import json
import re
import shutil

import pytest

from tb_plugin.__main__ import main
from tb_plugin.report import answer_key, median_step

from .helpers import SAMPLES, embedded_answer as answer, op, report_data as embedded, shared_trace, write_trace

CNN = SAMPLES / "cpu_cnn"  # one worker, two spans, CPU only
GPU = SAMPLES / "gpu_h100_compiled"  # one GPU trace file


def rows(table):
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


@pytest.fixture(scope="module")
def cnn_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "cnn.html"
    assert main(["report", str(CNN), "-o", str(out)]) == 0
    return out


def test_answer_key_is_the_pages(tmp_path):
    # the same string frontend/src/api/report.test.ts expects of answerKey
    assert answer_key("kernels", {"worker": "w0", "run": ".", "span": "1", "top": ""}) == \
        '["kernels",[["run","."],["span","1"],["worker","w0"]]]'


def test_report_holds_every_tab_of_every_span(cnn_report):
    data = embedded(cnn_report)
    listing = answer(data, "runs")
    assert [r["name"] for r in listing["runs"]] == ["cpu_cnn"]  # the directory's name, as the page names a run
    spans = answer(data, "spans", run="cpu_cnn", worker="worker0")["spans"]
    assert [s["span"] for s in spans] == [1, 2]  # both files of the run
    for span in (1, 2):
        views = answer(data, "views", run="cpu_cnn", worker="worker0", span=span)["views"]
        assert {"overview", "operator", "trace"} <= set(views)
        base = {"run": "cpu_cnn", "worker": "worker0", "span": span}
        assert answer(data, "overview", **base)["environment"]["device_type"] == "CPU"
        for group_by in ("name", "name_shape"):
            assert rows(answer(data, "operators", **base, group_by=group_by, scope="all"))
        assert answer(data, "timeline_tracks", **base)["tracks"]


def test_report_operators_are_the_traces(cnn_report):
    # the embedded operator table against the raw trace: calls per name of cpu_op events
    data = embedded(cnn_report)
    trace_file = sorted(CNN.glob("*.pt.trace.json.gz"))[0]
    events = json.loads(gzip.decompress(trace_file.read_bytes()))["traceEvents"]
    calls = collections.Counter(e["name"] for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    table = {r["name"]: r for r in rows(answer(data, "operators", run="cpu_cnn", worker="worker0", span=1,
                                                group_by="name", scope="all"))}
    for name, count in calls.most_common(5):
        assert table[name]["calls"] == count


def test_report_trace_is_whole_and_its_median_step_in_detail(cnn_report):
    data = embedded(cnn_report)
    base = {"run": "cpu_cnn", "worker": "worker0", "span": 1}
    tracks = answer(data, "timeline_tracks", **base)
    steps = rows(tracks["steps"])
    slices = [w for w in data["windows"] if w["route"] == "timeline_slices" and w["scope"] == answer_key(
        "timeline_slices", {k: str(v) for k, v in base.items()})]
    whole, detail = sorted(slices, key=lambda w: -w["resolution_us"])
    assert whole["start_us"] <= tracks["start_us"] and whole["end_us"] >= tracks["end_us"]
    # the median of the steps' durations, worked out here
    durations = sorted((s["end_us"] - s["start_us"], s["step"]) for s in steps)
    step = durations[(len(durations) - 1) // 2][1]
    chosen = next(s for s in steps if s["step"] == step)
    assert detail["start_us"] <= chosen["start_us"] and detail["end_us"] >= chosen["end_us"]
    assert detail["resolution_us"] < 0.01
    assert data["notes"][answer_key("timeline", {k: str(v) for k, v in base.items()})] == f"step {step}"
    assert data["answers"][detail["key"]][0] == 200


def test_median_step_is_a_step():
    steps = [{"step": n, "start_us": 0, "end_us": d} for n, d in ((1, 30), (2, 10), (3, 20), (4, 40))]
    assert median_step(steps)["step"] == 3  # durations 10, 20, 30, 40: the lower median
    assert median_step([]) is None


def test_report_holds_no_path_and_loads_nothing(cnn_report, tmp_path):
    html = cnn_report.read_text("utf-8")
    assert str(CNN.resolve()) not in html and str(SAMPLES.resolve()) not in html
    assert not re.search(r'<(?:script|link|img|iframe)[^>]*\b(?:src|href)="(?!data:)', html)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    assert "default-src 'none'" in policy and "connect-src data: blob:" in policy


def test_report_of_a_gpu_trace_file_holds_its_gpu_tabs(tmp_path):
    trace = next(GPU.glob("*.pt.trace.json.gz"))
    out = tmp_path / "one.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    data = embedded(out)
    [listed] = answer(data, "runs")["runs"]
    assert listed["name"] == trace.name  # the file's own name
    base = {"run": trace.name, "worker": listed["workers"][0], "span": 1}
    assert {"kernel", "gpu_idle"} <= set(answer(data, "views", **base)["views"])
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    sums = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            sums[e["name"]] += e["dur"]
    top, total = sums.most_common(1)[0]
    kernels = {r["name"]: r for r in rows(answer(data, "kernels", **base, group_by="name"))}
    assert kernels[top]["total_us"] == pytest.approx(total)
    # critical paths: of the first step (the tab opens on it) and the Trace view's detailed one;
    # another step's says which the report holds
    steps = [r["step"] for r in rows(answer(data, "steps", **base))]
    query = {k: str(v) for k, v in base.items()}
    detail = int(data["notes"][answer_key("timeline", query)].removeprefix("step "))
    held = sorted({steps[0], detail})
    paths = {dict(pairs)["step"] for route, pairs in map(json.loads, data["answers"]) if route == "critical_path"}
    assert len(steps) == 3 and paths == {str(n) for n in held}
    note = data["notes"][answer_key("critical_path", query)]
    assert note.startswith(f"the critical path of {'steps' if len(held) == 2 else 'step'} "
                           f"{' and '.join(map(str, held))} only") and "report --step N" in note


def test_report_of_one_file_holds_its_worker_and_span(tmp_path, capsys):
    """The second span's file of a worker: the report's run is that file alone (its one span),
    the first span's file is not in it. The command says where it wrote how much."""
    run = tmp_path / "run"
    shutil.copytree(CNN, run)
    second = sorted(run.glob("*.pt.trace.json.gz"))[1]
    out = tmp_path / "second.html"
    assert main(["report", str(second), "-o", str(out)]) == 0
    said = capsys.readouterr().err.splitlines()[-1]
    assert re.fullmatch(rf"report: wrote {re.escape(str(out))} \(([0-9.]+) MB\) in [0-9.]+ s", said), said
    assert float(re.search(r"\(([0-9.]+) MB", said).group(1)) == round(out.stat().st_size / 1e6, 1)
    data = embedded(out)
    assert [s["file"] for s in answer(data, "spans", run=second.name, worker="worker0")["spans"]] == [second.name]
    assert data["location"] == {"run": second.name, "worker": "worker0", "span": "1"}
    assert answer_key("overview", {"run": second.name, "worker": "worker0", "span": "2"}) not in data["answers"]


def test_report_of_one_workers_file_holds_that_worker_alone(tmp_path):
    """worker0's file of a two-worker DDP run: the report lists worker0 alone, offers no Job
    tab, and its Distributed tab (offered for the file's own collectives) covers worker0 only;
    the directory's report still combines both (the test below)."""
    trace = sorted((SAMPLES / "cpu_ddp_gloo").glob("worker0.*.pt.trace.json.gz"))[0]
    out = tmp_path / "worker0.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    data = embedded(out)
    [listed] = answer(data, "runs")["runs"]
    assert (listed["name"], listed["workers"], listed["files"]) == (trace.name, ["worker0"], 1)
    base = {"run": trace.name, "span": 1}
    assert "job" not in answer(data, "views", **base, worker="worker0")["views"]
    assert not [route for route, _ in map(json.loads, data["answers"]) if route == "job"]
    tables = answer(data, "distributed", **base,
                    tables="steps,all_steps,collectives,collective_time,groups,fsdp,devices,coverage,missing")
    assert {r["worker"] for r in rows(tables["devices"])} == {"worker0"}
    assert [(r["ranks"], r["ranks_total"]) for r in rows(tables["coverage"])] == [(1, 1)]


@pytest.mark.parametrize("argv, reason", [
    (["--step", "999"], "no step 999"),
    (["--worker", "nobody"], "no worker 'nobody'"),
    (["--span", "7"], "no span 7"),
])
def test_report_refuses_what_the_run_lacks(tmp_path, capsys, argv, reason):
    assert main(["report", str(CNN), "-o", str(tmp_path / "r.html"), *argv]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("report: ")]  # progress
    assert len(errors) == 1 and errors[0].startswith("error: ") and reason in errors[0], errors
    assert not (tmp_path / "r.html").exists()


def test_report_is_not_written_through_a_link_nor_made_for_nowhere(tmp_path, capsys):
    """Its output is checked before the report is made, as compare's are: a link to another
    file is refused (that file untouched), and so is a directory that does not exist."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    (tmp_path / "r.html").symlink_to(target)
    assert main(["report", str(CNN), "-o", str(tmp_path / "r.html")]) == 2
    assert "symbolic link" in capsys.readouterr().err and target.read_text() == "keep"
    assert main(["report", str(CNN), "-o", str(tmp_path / "no" / "r.html")]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [f"error: cannot write {tmp_path / 'no' / 'r.html'}: no directory {tmp_path / 'no'}"]


def test_a_report_of_traces_that_cannot_load_is_refused_with_the_reason(tmp_path, capsys):
    """An empty trace is no report (exit 2, the loader's reason, no file); a run where one
    worker loads is reported, the other's reason shown in its place."""
    empty = tmp_path / "run" / "worker1.pt.trace.json"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    assert main(["report", str(empty), "-o", str(tmp_path / "r.html")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("report: ")]
    assert errors == ["error: worker1.pt.trace.json: the file is empty"] and not (tmp_path / "r.html").exists()
    write_trace(tmp_path / "run" / "worker0.pt.trace.json", [op("aten::add", 10, 5)])
    assert main(["report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html")]) == 0
    answers = embedded(tmp_path / "r.html")["answers"]
    status, body = answers[answer_key("views", {"run": "run", "worker": "worker1", "span": "1"})]
    assert status == 422 and "the file is empty" in body["reason"]
    assert answer(embedded(tmp_path / "r.html"), "views", run="run", worker="worker0", span=1)["views"]


def test_report_of_nothing(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "r.html")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_compare_html_is_the_diff_page(tmp_path, capsys):
    out = tmp_path / "diff.html"
    assert main(["compare", str(CNN), str(CNN), "--span-b", "2", "--html", str(out)]) == 0
    data = embedded(out)
    location = data["location"]
    assert location["view"] == "diff" and location["span_b"] == "2"
    reply = answer(data, "diff", run=location["run"], worker="worker0", span=1, run_b=location["run_b"],
                   worker_b="worker0", span_b=2, threshold_pct="5")
    assert reply["explanation"]["rows"]
    assert answer(data, "views", run=location["run"], worker="worker0", span=1)["views"] == ["diff"]
    assert str(tmp_path) not in out.read_text("utf-8")


def test_report_of_the_35_mb_resnet50_trace_fits_10_mb(tmp_path):
    trace = shared_trace("resnet50_v100_2021")
    out = tmp_path / "resnet50.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    assert out.stat().st_size <= 10_000_000
    data = embedded(out)
    assert {"kernel", "gpu_idle", "trace", "memory"} <= set(
        answer(data, "views", run=trace.name, worker="worker0", span=1)["views"])


def test_compare_html_refuses_a_path_another_output_names(tmp_path, capsys):
    out = tmp_path / "same"
    assert main(["compare", str(CNN), str(CNN), "--markdown", str(out), "--html", str(tmp_path / "." / "same")]) == 2
    assert capsys.readouterr().err == "error: --markdown and --html name the same file\n"
    assert not out.exists()


def test_report_of_several_workers_holds_each_and_the_run_wide_tabs(tmp_path):
    out = tmp_path / "ddp.html"
    assert main(["report", str(SAMPLES / "cpu_ddp_gloo"), "--span", "1", "-o", str(out)]) == 0
    data = embedded(out)
    workers = answer(data, "runs")["runs"][0]["workers"]
    assert workers == ["worker0", "worker1"]  # the files' workers, as the page lists them
    for worker in workers:
        views = answer(data, "views", run="cpu_ddp_gloo", worker=worker, span=1)["views"]
        assert {"distributed", "job"} <= set(views)
        assert answer(data, "overview", run="cpu_ddp_gloo", worker=worker, span=1)
    assert answer(data, "job", run="cpu_ddp_gloo", span=1, align_clocks="true")
    assert answer(data, "distributed", run="cpu_ddp_gloo", span=1,
                  tables="steps,all_steps,collectives,collective_time,groups,fsdp,devices,coverage,missing")


def test_a_report_names_its_run_as_the_user_named_it(tmp_path, monkeypatch):
    """The run is the directory's (or file's) own name, never "." (the name a server gives the
    log directory itself), also for the working directory given as "."."""
    run = tmp_path / "resnet_sweep_3"
    shutil.copytree(CNN, run)
    monkeypatch.chdir(run)
    assert main(["report", ".", "-o", str(tmp_path / "r.html")]) == 0
    data = embedded(tmp_path / "r.html")
    assert [r["name"] for r in answer(data, "runs")["runs"]] == ["resnet_sweep_3"]
    assert data["location"]["run"] == "resnet_sweep_3"
    files = [s["file"] for s in answer(data, "spans", run="resnet_sweep_3", worker="worker0")["spans"]]
    assert files == [p.name for p in sorted(run.glob("*.pt.trace.json.gz"))]
    assert "PyTorch Profiler report: resnet_sweep_3<" in (tmp_path / "r.html").read_text("utf-8")


def test_a_report_of_memory_snapshots_only_holds_their_tab_as_the_api_answers_it(tmp_path):
    """A run holding only memory snapshots (the page offers their tab from the run listing) is
    reported, opening on that tab: every answer it embeds is the HTTP API's for the same run
    (TensorBoard's plugin over the same files), and each snapshot's devices and entries are
    the pickle's own."""
    import pickle
    import urllib.parse

    from .helpers import PREFIX, make_client, wait_route

    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "gpu_memory_snapshot", logdir / "job")
    out = tmp_path / "snapshots.html"
    assert main(["report", str(logdir / "job"), "-o", str(out)]) == 0
    data = embedded(out)
    assert data["location"] == {"run": "job", "view": "memory_snapshot"}
    [listed] = answer(data, "runs")["runs"]
    assert listed["workers"] == [] and [s["name"] for s in listed["snapshots"]] == ["rank0", "rank1"]
    raw = pickle.loads((logdir / "job" / "rank0.pickle").read_bytes())
    peak = rows(answer(data, "snapshot_peak", run="job", snapshot="rank0"))
    assert [(r["device"], r["entries"]) for r in peak] == [(d, len(t)) for d, t in enumerate(raw["device_traces"])]
    keys = [json.loads(key) for key in data["answers"]]
    routes = collections.Counter(route for route, _ in keys)
    # per device of each snapshot (rank0: 2, rank1: 1): its timeline and its first moment's four
    # tables (the flame graph with library frames collapsed and expanded)
    assert routes["snapshot_timeline"] == routes["snapshot_blame"] == routes["snapshot_state"] == 3
    assert routes["snapshot_flame"] == 6 and routes["snapshot_peak"] == routes["snapshot_oom"] == 2
    plugin, client = make_client(logdir)
    try:
        for (route, pairs), (status, body) in zip(keys, data["answers"].values()):
            if route == "runs":
                continue
            reply = wait_route(client, f"{PREFIX}/{route}?{urllib.parse.urlencode(dict(pairs))}")
            assert (status, body) == (reply.status_code, reply.get_json()), route
    finally:
        plugin.store.stop()


def test_a_report_of_snapshots_leaves_out_one_that_cannot_be_read_and_refuses_when_none_can(tmp_path, capsys):
    """rank0 cut in half: the report holds rank1's answers, names rank0 in the comparison with
    its reason, and asks nothing of rank0 (the page shows none); with rank1 cut too, there is
    no report and the CLI says why, naming the first (exit 2)."""
    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "gpu_memory_snapshot", logdir / "job")
    first = logdir / "job" / "rank0.pickle"
    first.write_bytes(first.read_bytes()[: first.stat().st_size // 2])
    out = tmp_path / "snapshots.html"
    assert main(["report", str(logdir / "job"), "-o", str(out)]) == 0
    data = embedded(out)
    [missing] = rows(answer(data, "snapshot_ranks", run="job")["missing"])
    assert missing["snapshot"] == "rank0" and "truncated" in missing["reason"]
    asked = {dict(pairs).get("snapshot") for route, pairs in map(json.loads, data["answers"]) if route != "snapshot_ranks"}
    assert "rank1" in asked and "rank0" not in asked
    second = logdir / "job" / "rank1.pickle.gz"
    second.write_bytes(second.read_bytes()[: second.stat().st_size // 2])
    capsys.readouterr()
    assert main(["report", str(logdir / "job"), "-o", str(tmp_path / "none.html")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: rank0.pickle") and "truncated" in error and str(tmp_path) not in error
