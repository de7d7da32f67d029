"""Answers for agents and scripts (issue 38): the MCP server started as a subprocess and asked
through the `mcp` SDK's own client, over stdio and over streamable HTTP on loopback; and
`python -m tb_plugin view`, its formats read back with pandas and pyarrow. Answers are checked
against the Python API (`tb_plugin.load(...).answer(route)`) and against the route
declarations (`schema.route`), never against constants taken from this code."""

import io
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

mcp = pytest.importorskip("mcp", reason="the MCP SDK (pip install '.[mcp]')")
import anyio  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

import tb_plugin  # noqa: E402
from tb_plugin.__main__ import main  # noqa: E402
from tb_plugin.openapi_gen import declared_routes, declared_tables  # noqa: E402
from tb_plugin.agents.answers import PAGING  # noqa: E402
from tb_plugin.schema import (LOG_DIRECTORY, OFFERED, PROFILE, RANKS, READS, RUN_SNAPSHOTS, SNAPSHOT,  # noqa: E402
                              SNAPSHOT_TRACES, SPAN, TWO_PROFILES, TWO_SPANS)

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"


def _run_async(function):
    """`anyio.run(function)` on a thread of its own: Playwright's sync API (the e2e tests, in
    the same pytest process) leaves an event loop running on the main thread, where a second
    one refuses to start ("Already running asyncio in this thread")."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, function).result()
RESNET = "gpu_resnet50_v100"
CNN = "cpu_cnn"


def _env(tmp_path):
    return {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache")}


def _first_file(run):
    return sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))[0]


@pytest.fixture(scope="module")
def python_api():
    """The Python API's profiles of the two sample runs the tests ask about (their first file)."""
    return {run: tb_plugin.load(str(_first_file(run))) for run in (RESNET, CNN)}


def _table(frame):
    """A DataFrame's rows as lists of Python values, NaN as None (what a JSON reply carries)."""
    return {"data": [[None if isinstance(v, float) and v != v else (v.item() if hasattr(v, "item") else v) for v in row]
                     for row in frame.astype(object).itertuples(index=False)]}


async def _session(client, calls):
    """Each (tool, arguments) of `calls` answered: (is_error, text, parsed JSON)."""
    out = []
    for name, arguments in calls:
        result = await client.call_tool(name, arguments)
        text = result.content[0].text
        out.append((result.is_error, text, json.loads(text)))
    return out


def _until_answered(client_factory, name, arguments, seconds=120):
    """Ask until the answer is no longer {"loading": true}."""
    async def ask():
        async with client_factory() as client:
            deadline = time.monotonic() + seconds
            while True:
                [(error, text, body)] = await _session(client, [(name, arguments)])
                if not body.get("loading") or time.monotonic() > deadline:
                    return error, text, body
                await anyio.sleep(0.2)
    return _run_async(ask)


@pytest.fixture(scope="module")
def stdio(tmp_path_factory):
    """A client factory over stdio: each client starts `python -m tb_plugin mcp samples`."""
    env = _env(tmp_path_factory.mktemp("stdio"))
    params = StdioServerParameters(command=sys.executable, args=["-m", "tb_plugin", "mcp", str(SAMPLES), "--wait", "60"],
                                   env=env, cwd=str(REPO))
    return lambda: Client(params, read_timeout_seconds=180)


def test_mcp_stdio_lists_every_declared_route_with_its_declared_parameters_and_answers_as_the_python_api(
        stdio, python_api):
    async def run():
        async with stdio() as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            progress = []  # the first call finds its trace loading: the load's progress is reported

            async def report(done, total, message):
                progress.append((done, total, message))

            await client.call_tool("kernels", {"run": RESNET, "limit": 1}, progress_callback=report)
            assert progress and all(0 <= done <= total == 1 and message.startswith("loading")
                                    for done, total, message in progress)
            answers = await _session(client, [
                ("kernels", {"run": RESNET, "limit": 5}),
                ("kernels", {"run": RESNET, "limit": 5}),
                ("kernels", {"run": RESNET, "limit": 4, "offset": 3, "sort": "-calls", "columns": "name,calls"}),
                ("operators", {"run": CNN, "group_by": "name_shape", "limit": 3}),
                ("kernels", {"run": RESNET, "group_by": "no_such_grouping"}),
                ("kernels", {"run": RESNET, "colour": "red"}),
                ("kernels", {"run": "../.."}),
                ("kernels", {"run": RESNET, "sort": "no_such_column"}),
                ("columns", {"route": "kernels"}),
                ("steps", {"run": CNN}),
                ("columns", {"route": "job", "table": "verdict"}),
                ("columns", {"route": "job", "table": "nothing"}),
            ])
            return tools, answers

    tools, answers = _run_async(run)
    # Every declared route is a tool with the declaration's parameters, choices and defaults.
    routes = declared_routes()
    assert set(routes) <= set(tools) and {"runs", "columns", "job", "diff", "snapshot_oom"} <= set(tools)
    for name, route in routes.items():
        schema = tools[name].input_schema
        # the parameters naming its input (`schema.READS`) that are required, but worker (the tool's first), then
        # the route's own required ones
        assert schema.get("required", []) == [p for p in ("run", "snapshot", "run_b", "worker_b") if p in READS[route.reads]
                                               ] + [p.name for p in route.params if p.required and p.name != "worker"
                                                    ], name
        for param in route.params:
            if param.name in PAGING:  # the raw table route's limit: the tool's paging argument stands for it
                continue
            spec = schema["properties"][param.name]
            assert spec["type"] == param.type, (name, param.name)
            assert spec.get("enum", []) == list(param.choices) and spec.get("default") == param.default, (name, param.name)
        assert {"limit", "offset", "sort", "columns", "max_bytes"} <= set(schema["properties"])
    assert tools["kernels"].input_schema["properties"]["limit"]["default"] == 20

    (error, text, first), (_, again, _), (_, _, paged), (_, _, by_input) = answers[:4]
    # Equal to the Python API, cut to `limit` rows with the count of the rest; the same bytes twice.
    frame = python_api[RESNET].answer("kernels")
    assert not error and text == again
    assert first["answer"]["columns"] == list(frame.columns)
    assert first["answer"]["rows"] == _table(frame.head(5))["data"]
    assert first["answer"]["rows_total"] == len(frame) and first["answer"]["rows_left_out"] == len(frame) - 5
    assert first["answer"]["next_offset"] == 5
    # sort (largest first, ties in the route's order), offset and columns as pandas does them
    expected = frame.sort_values("calls", ascending=False, kind="stable")[["name", "calls"]].iloc[3:7]
    assert paged["answer"]["rows"] == _table(expected)["data"]
    operators = python_api[CNN].answer("operators", group_by="name_shape")
    assert by_input["answer"]["rows"] == _table(operators.head(3))["data"]
    # Bad input: a tool error naming the argument and what it takes; the server keeps serving.
    bad_choice, unknown, outside, bad_sort = answers[4:8]
    assert bad_choice[0] and "group_by" in bad_choice[1] and "name_op" in bad_choice[1]
    assert unknown[0] and "colour" in unknown[1] and "group_by" in unknown[1]
    assert outside[0] and outside[2]["error"] == "not_found"
    assert bad_sort[0] and "no_such_column" in bad_sort[1] and "total_us" in bad_sort[1]
    columns, steps = answers[8], answers[9]
    declared = {c.name: c for t in routes["kernels"].answer_tables for c in t.columns}
    for table in columns[2]["tables"]:
        for column in table["columns"]:
            assert column["unit"] == declared[column["name"]].unit and column["doc"] == declared[column["name"]].doc
    assert not steps[0] and steps[2]["answer"]["rows"] == _table(python_api[CNN].answer("steps"))["data"][:20]
    # a table as the route's `table` argument names it: the declared table, and how to ask for it
    (_, _, verdict), (bad_table, reason, _) = answers[10:12]
    [described] = verdict["tables"]
    assert described["argument"] == "table=verdict" and described["table"] == "job_verdict"
    assert [c["name"] for c in described["columns"]] == declared_tables()["job_verdict"].names
    assert bad_table and "verdict" in reason and "stragglers" in reason


def test_mcp_answers_stay_within_max_bytes_and_say_what_was_cut(stdio, python_api):
    async def run():
        async with stdio() as client:
            return await _session(client, [
                ("kernel_launches", {"run": RESNET, "limit": 1000}),
                ("kernel_launches", {"run": RESNET, "limit": 1000, "max_bytes": 2048}),
                ("kernel_launches", {"run": RESNET, "limit": 1000, "max_bytes": 4_000_000}),
            ])

    (_, default_text, default), (_, small_text, small), (_, whole_text, whole) = _run_async(run)
    rows = len(python_api[RESNET].answer("kernel_launches"))
    assert len(whole_text.encode()) > 16 * 1024  # else this test shows nothing
    assert len(default_text.encode()) <= 16 * 1024 and "cut_to_fit" in default["paging"]
    assert len(small_text.encode()) <= 2048 and 0 < len(small["answer"]["rows"]) < len(default["answer"]["rows"])
    assert small["answer"]["rows_left_out"] == rows - len(small["answer"]["rows"])
    assert len(whole["answer"]["rows"]) == min(rows, 1000) and "cut_to_fit" not in whole["paging"]


def test_mcp_every_declared_route_answers_a_sample_within_the_default_bound(stdio):
    """Each route given the input it reads: a profile, the profile against itself (a diff), or a
    snapshot the run lacks (refused as not found), and a valid value of each parameter it
    requires (a window, an event, a name)."""
    declared = declared_routes()
    routes = sorted(declared)
    inputs = {PROFILE: {"run": RESNET}, TWO_PROFILES: {"run": RESNET, "run_b": RESNET, "worker_b": "worker0"},
              SNAPSHOT: {"run": RESNET, "snapshot": "none.pickle"}, SPAN: {"run": RESNET},
              TWO_SPANS: {"run": RESNET, "run_b": RESNET}, RANKS: {"run": RESNET},
              RUN_SNAPSHOTS: {"run": RESNET}, SNAPSHOT_TRACES: {"run": RESNET, "snapshot": "none.pickle"},
              LOG_DIRECTORY: {"run": RESNET}, OFFERED: {"run": RESNET}}  # the log directory's: the run where taken

    def given(route):  # the input, and a valid value of each parameter the route needs (a time window, a search)
        taken = {*READS[route.reads], *(p.name for p in route.params)}
        return {**{k: v for k, v in inputs[route.reads].items() if k in taken},
                **{p.name: p.valid_value() for p in route.params if p.required}}

    async def run():
        async with stdio() as client:
            return await _session(client, [(name, given(declared[name])) for name in routes])

    for name, (error, text, body) in zip(routes, _run_async(run)):
        assert len(text.encode()) <= 16 * 1024, name
        assert not error or body["error"] in ("not_found", "bad_parameter"), (name, body)  # a view this trace lacks


def test_mcp_applies_the_memory_budget_and_names_no_server_path(tmp_path, python_api):
    """At 64 MB the ResNet-50 sample (35 MB of JSON) is refused with the budget's reason, its file
    named relative to the log directory; a small trace is still answered."""
    params = StdioServerParameters(command=sys.executable, cwd=str(REPO), env=_env(tmp_path), args=[
        "-m", "tb_plugin", "mcp", str(SAMPLES), "--wait", "120", "--max-memory-mb", "64", "--cache-dir", ""])

    async def run():
        async with Client(params, read_timeout_seconds=180) as client:
            return await _session(client, [("kernels", {"run": RESNET}), ("steps", {"run": CNN, "limit": 3})])

    (refused, text, body), (error, _, steps) = _run_async(run)
    assert refused and "memory budget" in body["reason"] and str(SAMPLES) not in text
    assert body["path"].startswith(f"{RESNET}/")
    assert not error and steps["answer"]["rows"] == _table(python_api[CNN].answer("steps").head(3))["data"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    """`python -m tb_plugin mcp samples --http PORT --wait 0` with no disk cache: a first call
    finds its trace loading."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "tb_plugin", "mcp", str(SAMPLES), "--http", str(port),
                                "--wait", "0", "--cache-dir", ""], env=_env(tmp_path_factory.mktemp("http")),
                               cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None:
                pytest.fail(process.stderr.read().decode())
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=30)


def test_mcp_http_reports_a_load_in_progress_without_blocking_other_calls(http_server, python_api):
    def client():
        return Client(http_server, read_timeout_seconds=180)

    async def first_calls():
        async with client() as c:
            tools = (await c.list_tools()).tools
            return tools, await _session(c, [("operators", {"run": CNN, "limit": 5}), ("runs", {})])

    tools, [(error, _, loading), (runs_error, _, runs)] = _run_async(first_calls)
    assert "operators" in {t.name for t in tools}
    assert not error and loading["loading"] is True and loading["stage"] and "call again" in loading["retry"]
    assert not runs_error and CNN in [r["name"] for r in runs["answer"]["runs"]]  # answered while it loads
    error, _, done = _until_answered(client, "operators", {"run": CNN, "limit": 5})
    assert not error and done["answer"]["rows"] == _table(python_api[CNN].answer("operators").head(5))["data"]


def test_the_http_server_binds_loopback_only(http_server):
    port = int(http_server.rsplit(":", 1)[1].split("/")[0])
    addresses = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
    for address in addresses:
        with pytest.raises(OSError):
            socket.create_connection((address, port), timeout=1).close()


def _view(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "tb_plugin", "view", *args], capture_output=True,
                          env=_env(tmp_path), cwd=str(REPO), timeout=300)


def test_view_prints_a_route_as_csv_parquet_json_and_markdown_read_back_as_the_python_api(tmp_path, python_api):
    run = str(SAMPLES / CNN)
    frame = python_api[CNN].answer("operators", group_by="name_shape")
    out = tmp_path / "operators.parquet"
    csv = _view(tmp_path, run, "operators", "--group_by", "name_shape", "--format", "csv")
    assert csv.returncode == 0, csv.stderr
    pd.testing.assert_frame_equal(pd.read_csv(io.BytesIO(csv.stdout), keep_default_na=False, na_values=[""]),
                                  pd.read_csv(io.StringIO(frame.to_csv(index=False)), keep_default_na=False,
                                              na_values=[""]))
    parquet = _view(tmp_path, run, "operators", "--group_by", "name_shape", "--format", "parquet", "-o", str(out))
    assert parquet.returncode == 0, parquet.stderr
    table = pq.read_table(out)
    read = table.to_pandas()
    assert list(read.columns) == list(frame.columns) and len(read) == len(frame)
    declared = next(t for t in declared_routes()["operators"].answer_tables if t.names == list(frame.columns))
    arrow = {"str": ("string", "large_string"), "int64": ("int64",), "int32": ("int32",), "float64": ("double",),
             "bool": ("bool",)}
    for column in declared.columns:  # each column keeps its declared type
        assert str(table.schema.field(column.name).type) in arrow[column.dtype], column.name
    pd.testing.assert_frame_equal(read, frame.reset_index(drop=True), check_dtype=False)
    many = _view(tmp_path, run, "steps", "--format", "json", "--limit", "2")
    assert many.returncode == 0, many.stderr
    body = json.loads(many.stdout)
    assert body["rows"] == _table(python_api[CNN].answer("steps"))["data"][:2]
    markdown = _view(tmp_path, run, "steps", "--format", "markdown")
    lines = markdown.stdout.decode().splitlines()
    assert lines[0] == "| " + " | ".join(python_api[CNN].answer("steps").columns) + " |"
    assert len(lines) == 2 + len(python_api[CNN].answer("steps"))


def test_view_refuses_bad_input_with_exit_2_and_one_reason(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = str(SAMPLES / CNN)
    for args, words in [((run, "no_such_route"), "no route"),
                        ((run, "operators", "--group_by", "nothing"), "invalid choice"),
                        ((run, "steps", "--columns", "step,nothing"), "no column 'nothing'"),
                        ((run, "memory_curve", "--format", "csv"), "--format json"),
                        (("no_such_run", "operators", "--logdir", str(SAMPLES)), "no run"),
                        ((str(SAMPLES), "steps"), f"give --logdir {SAMPLES} and one of them"),
                        ((str(_first_file(CNN)), "steps"), "not a run directory")]:
        try:
            status = main(["view", *args])
        except SystemExit as exc:  # argparse's own refusal of a choice
            status = exc.code
        assert status == 2 and words in capsys.readouterr().err, args


def test_view_prints_a_text_table_with_the_python_api_rows(tmp_path, monkeypatch, capsysbinary, python_api):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["view", str(SAMPLES / CNN), "steps", "--columns", "step,total_us", "--sort=-total_us"]) == 0
    lines = capsysbinary.readouterr().out.decode().splitlines()
    steps = python_api[CNN].answer("steps").sort_values("total_us", ascending=False, kind="stable")
    assert lines[0].split() == ["step", "total_us"] and len(lines) == 1 + len(steps)
    assert [int(line.split()[0]) for line in lines[1:]] == steps["step"].tolist()


def test_page_orders_cuts_and_counts_a_hand_made_answer():
    from tb_plugin.agents.answers import Paging, ToolError, encode, page

    table = {"columns": ["name", "total_us"], "rows": [["a", 3.0], ["b", None], ["c", 5.0], ["d", 3.0]]}
    # sort: largest first, ties in the route's order, nulls last; offset and limit after it
    body = page("r", table, Paging(limit=2, offset=1, sort="-total_us"))["answer"]
    assert body["rows"] == [["a", 3.0], ["d", 3.0]] and body["rows_total"] == 4
    assert body["rows_left_out"] == 2 and body["next_offset"] == 3
    assert page("r", table, Paging(limit=9, sort="total_us", columns=("name",)))["answer"]["rows"] == \
        [["a"], ["d"], ["c"], ["b"]]
    # two tables: each paged; sort needs one of them
    both = {"x": table, "y": {"columns": ["n"], "rows": [[1], [2], [3]]}, "note": "kept"}
    paged = page("r", both, Paging(limit=1))
    assert paged["answer"]["y"]["rows"] == [[1]] and paged["answer"]["note"] == "kept"
    with pytest.raises(ToolError, match="one table"):
        page("r", both, Paging(sort="n"))
    # max_bytes: as many rows as fit, said so; a list beyond it cut with a count of the rest
    wide = {"columns": ["text"], "rows": [["x" * 100] for _ in range(50)]}
    cut = page("r", wide, Paging(limit=50, max_bytes=1024))
    assert len(encode(cut)) <= 1024 and 0 < len(cut["answer"]["rows"]) < 50 and "cut_to_fit" in cut["paging"]
    listed = page("r", {"names": ["y" * 50] * 100}, Paging(max_bytes=1024))
    assert len(encode(listed)) <= 1024 and listed["answer"]["names"][-1].endswith("more items left out")
    with pytest.raises(ToolError, match="max_bytes"):
        page("r", {"one": "z" * 5000}, Paging(max_bytes=1024))
