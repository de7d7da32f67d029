"""Hostile requests: path traversal in every parameter, symlinks, content types and markup.

What is tested, and how:

- **Traversal in every parameter.** For every route of `openapi.yaml` and every query
  parameter it declares (run, worker, span, name, input_shape, device, table, group_by,
  format, run_b, worker_b, q, tracks, the numbers ...), each value of `TRAVERSALS` (``..``,
  ``%2e%2e``, double-encoded ``%252e``, ``..%2f``, ``%2f..``, backslashes, absolute POSIX and
  Windows paths, ``file://`` and ``s3://`` URLs, NUL bytes, overlong names, ...) is sent
  once as written in the URL and once percent-encoded, the other parameters valid. The
  answer must be a 4xx JSON error, except for the parameters that are search filters over
  names found in the trace (`name`, `input_shape` of /operator_stacks, `q` of
  /timeline_search), where "nothing matches" is a 200 with an empty result. Meanwhile
  `builtins.open`, `io.open`, `os.open` and the `Storage` read methods record every path
  opened: a hostile request must open nothing at all (every profile is loaded beforehand,
  so a request has no reason to read the disk). `Storage.stat` of a file discovery listed
  is allowed (a request for a valid profile checks whether its file changed); a stat of
  anything else is recorded too.
- **Static files.** Traversal attempts as file names under /data/plugin/pytorch_profiler/
  answer 404 and open nothing: the plugin serves its bundled files from memory by exact
  name and never builds a path from a URL.
- **Symlinks.** The log directory holds `escape -> <outside>` (a symlink to a directory
  outside it with a secret file and no trace). Requests reaching for it through run or
  worker names (`escape`, `escape/secret.txt`, `cpu_cnn/../escape`, ...) answer 404 and the
  secret is never opened. Discovery deliberately follows symlinked *run* directories the
  log directory's owner placed (`linked_run -> <outside run>` is listed and served); a
  request only ever names a run, worker and span from that listing, never a path.
- **Numbers out of range** (beyond int64 or float, `1_000`, `0x10`) in every parameter
  answer 2xx or 4xx, never 500.
- **Headers.** Every route (answers 200, 202, 400, 404 and 422) sets
  `X-Content-Type-Options: nosniff` and a content type from a fixed list: JSON or CSV for
  data, gzip/JSON for /trace_file, never `text/html`; only the bundled `index.html` is HTML,
  and it comes with its Content-Security-Policy as a header that TensorBoard's own check accepts.
- **Names from traces are data.** A run whose worker and operators are named with markup
  (`<img src=x onerror=alert(1)>`, `<script>`) answers them inside JSON strings or CSV
  cells under a non-HTML content type, and /trace_file quotes the file name in
  Content-Disposition.
"""

import builtins
import gzip
import io
import os
import shutil
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from tb_plugin.store.storage import Storage

from .helpers import (PREFIX, SAMPLES, SPEC, csv_table, kernel, make_client, memory, op, route_parameters, runtime, valid_query,
                      wait_route, write_trace)

MARKUP = "<img src=x onerror=alert(1)>"
SCRIPT_OP = "<script>alert('op')</script>"

TRAVERSALS = [
    "..", "../..", "../../../../../../etc/passwd", "./../cpu_cnn", "cpu_cnn/..", "cpu_cnn/../..",
    "%2e%2e", "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", "%252e%252e%252f%252e%252e%252fetc%252fpasswd",
    "..%2f..%2fetc%2fpasswd", "%2f..%2f..%2fetc%2fpasswd", "%2e%2e/%2e%2e/", "..%252f..%252f",
    "%c0%ae%c0%ae%c0%af", "....//....//etc/passwd", "..\\..\\..\\windows\\win.ini", "..%5c..%5cetc",
    "\\\\server\\share", "/etc/passwd", "%2Fetc%2Fpasswd", "//etc/passwd", "C:\\Windows\\win.ini", "C:/Windows",
    "file:///etc/passwd", "s3://bucket/key", "~/.ssh/id_rsa", "%00", "cpu_cnn%00", "worker0%00.pt.trace.json",
    "..%00/", "a" * 5000, "../" * 2000, "escape", "escape/secret.txt", "cpu_cnn/../escape", "linked_run/../../escape",
    "cpu_cnn/worker0.1795299171544050927.pt.trace.json.gz", "worker0.pt.trace.json",
]
STATIC_ATTEMPTS = [
    "../../../etc/passwd", "..%2f..%2f..%2fetc%2fpasswd", "%2e%2e/%2e%2e/etc/passwd", "index.js/../../../../etc/passwd",
    "static/../../openapi.yaml", "..\\..\\etc\\passwd", "%2fetc%2fpasswd", "index.js%00.html", "....//....//etc/passwd",
    "escape/secret.txt", "..%252f..%252fetc%252fpasswd", "a" * 3000, "cpu_cnn/worker0.1795299171544050927.pt.trace.json.gz",
]
# Parameters that filter names found in the trace: a value matching nothing is a valid question.
FILTERS = {("/operator_stacks", "name"), ("/operator_stacks", "input_shape"), ("/timeline_search", "q"),
           ("/timeline_rank_search", "q")}
DATA_TYPES = {"application/json; charset=utf-8", "text/csv; charset=utf-8"}
STATIC_TYPES = {"text/javascript; charset=utf-8", "text/css; charset=utf-8", "text/html; charset=utf-8",
                "text/yaml; charset=utf-8", "image/svg+xml", "image/png", "application/octet-stream"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(logdir, outside dir, plugin, client): every profile loaded before the tests."""
    base = tmp_path_factory.mktemp("security")
    root, outside = base / "logdir", base / "outside"
    shutil.copytree(SAMPLES / "cpu_cnn", root / "cpu_cnn")
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", root / "ddp")
    shutil.copytree(SAMPLES / "gpu_memory_snapshot", root / "snapshots")  # the snapshot_* routes' run
    events = [op("ProfilerStep#1", 0, 100, cat="user_annotation"), op(SCRIPT_OP, 5, 50, **{"External id": 1}),
              op("aten::conv2d", 10, 40, **{"External id": 2}), runtime("cudaLaunchKernel", 12, 2, 1, 2),
              kernel(MARKUP, 20, 10, 1), memory(15, 512, 4096, 512, 1024), memory(60, -512, 4096, 0, 1024)]
    write_trace(root / "names" / f"{MARKUP}.pt.trace.json", events)
    (outside / "secret").mkdir(parents=True)
    (outside / "secret" / "secret.txt").write_text("the secret\n")
    write_trace(outside / "run" / "worker0.pt.trace.json", [op("ProfilerStep#1", 0, 10, cat="user_annotation")])
    os.symlink(outside / "secret", root / "escape")
    os.symlink(outside / "run", root / "linked_run")
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    for run, worker in (("cpu_cnn", "worker0"), ("ddp", "worker0"), ("ddp", "worker1"), ("names", MARKUP),
                        ("linked_run", "worker0")):
        for span in (1, 2):
            wait_route(client, f"{PREFIX}/info?run={quote(run)}&worker={quote(worker)}&span={span}")
    for path in SPEC["paths"]:  # views computed once, so later requests touch no disk
        wait_route(client, f"{PREFIX}{path}?{valid_query(path)}")
    yield root, outside, plugin, client
    plugin.store.stop()


@pytest.fixture
def opened(monkeypatch, world):
    """Paths opened while the test runs (library files of the interpreter left out)."""
    store = world[2].store
    listed = {f.path for run in store.runs() for files in [store.run_files(run["name"])]
              for f in (*files.files(), *files.snapshot_files())}  # traces and memory snapshots
    paths = []
    real_open, real_os_open = builtins.open, os.open
    library = tuple(str(Path(p).resolve()) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})

    def record(file):
        if isinstance(file, (str, bytes, os.PathLike)):
            path = os.fsdecode(file)
            if not os.path.realpath(path).startswith(library):
                paths.append(path)

    def fake_open(file, *args, **kwargs):
        record(file)
        return real_open(file, *args, **kwargs)

    def fake_os_open(file, *args, **kwargs):
        record(file)
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    for method in ("open_stored", "read_bytes", "read_trace", "read_head", "json_sample"):
        real = getattr(Storage, method)
        monkeypatch.setattr(Storage, method, lambda self, rel, *a, _real=real, _m=method, **k:
                            paths.append(f"Storage.{_m}({rel})") or _real(self, rel, *a, **k))
    real_stat = Storage.stat

    def stat(self, rel):
        # A request for a valid profile (or snapshot) stats its listed file (to notice changes): allowed.
        if rel not in listed:
            paths.append(f"Storage.stat({rel})")
        return real_stat(self, rel)

    monkeypatch.setattr(Storage, "stat", stat)
    return paths


def test_spec_lists_every_route(world):
    _, _, plugin, _ = world
    assert set(SPEC["paths"]) == set(plugin.api.routes())


@pytest.mark.parametrize("path", sorted(p for p in SPEC["paths"] if route_parameters(p)))
def test_traversal_in_every_parameter_is_refused_and_opens_nothing(world, opened, path):
    _, _, _, client = world
    checked = 0
    for name, _ in route_parameters(path):
        rest = valid_query(path, skip=name)
        for value in TRAVERSALS:
            for sent in {value, quote(value, safe="")}:
                url = f"{PREFIX}{path}?{rest}&{name}={sent}" if rest else f"{PREFIX}{path}?{name}={sent}"
                response = client.get(url)
                status = response.status_code
                allowed = (status == 200) if (path, name) in FILTERS and len(value) <= 4096 else 400 <= status < 500
                assert allowed or (400 <= status < 500), (url[:200], status, response.data[:200])
                assert response.headers["Content-Type"] in DATA_TYPES, (url[:200], response.headers["Content-Type"])
                assert response.headers["X-Content-Type-Options"] == "nosniff"
                if status >= 400:
                    assert set(response.get_json()) >= {"error", "reason"}
                checked += 1
        assert opened == [], (name, opened[:5])
    assert checked >= len(TRAVERSALS)


OUT_OF_RANGE = ["99999999999999999999999999", "-99999999999999999999", "9223372036854775808", "-9223372036854775809",
                "1e308", "-1e308", "1e-320", "-0", "1" + "0" * 400, "0x10", "1_000", " 1", "1,99999999999999999999999"]


@pytest.mark.parametrize("path", sorted(p for p in SPEC["paths"] if route_parameters(p)))
def test_out_of_range_numbers_never_fail_the_server(world, path):
    """Numbers beyond int64 / float range in any parameter: 2xx or 4xx, never a 500 (huge
    track ids overflowed the timeline's int64 arrays before)."""
    _, _, _, client = world
    for name, _ in route_parameters(path):
        rest = valid_query(path, skip=name)
        for value in OUT_OF_RANGE:
            response = client.get(f"{PREFIX}{path}?{rest}&{name}={quote(value, safe='')}")
            assert response.status_code < 500, (path, name, value[:40], response.status_code)


def test_filter_parameters_answer_empty_results_for_paths(world):
    """The three filters answer 200 with nothing found for a path: no file is behind a name."""
    _, _, _, client = world
    body = client.get(f"{PREFIX}/operator_stacks?{valid_query('/operator_stacks', skip='name')}&name=../../etc/passwd")
    assert body.status_code == 200 and body.get_json()["stacks"] == []
    found = client.get(f"{PREFIX}/timeline_search?{valid_query('/timeline_search', skip='q')}&q=%2e%2e%2fetc%2fpasswd")
    assert found.status_code == 200 and found.get_json()["total"] == 0


@pytest.mark.parametrize("name", STATIC_ATTEMPTS)
def test_static_paths_never_leave_the_bundle(world, opened, name):
    _, _, _, client = world
    for url in (f"{PREFIX}/{name}", f"{PREFIX}/static/{name}", f"{PREFIX}/{quote(name, safe='')}"):
        response = client.get(url)
        assert 400 <= response.status_code < 500, (url[:200], response.status_code)
        assert b"root:" not in response.data and b"the secret" not in response.data
    assert opened == []


def test_static_files_have_their_types_and_nosniff(world):
    _, _, plugin, client = world
    statics = sorted(set(plugin.get_plugin_apps()) - set(plugin.api.routes()))
    assert "/index.js" in statics and "/openapi.yaml" in statics
    for path in statics:
        response = client.get(PREFIX + path)
        assert response.status_code == 200, path
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Content-Type"] in STATIC_TYPES, (path, response.headers["Content-Type"])
        if response.headers["Content-Type"].startswith("text/html"):
            assert path.endswith(".html"), path


def test_page_sends_its_csp_as_a_header_tensorboard_accepts(world, monkeypatch):
    """TensorBoard's own response check (the one that logged "Requires default-src for
    Content-Security-Policy" on every page load while the policy was only a <meta> tag)
    finds nothing to say about the page or any other static file."""
    from tensorboard.backend import security_validator

    _, _, plugin, client = world
    complaints = []
    monkeypatch.setattr(security_validator, "_maybe_raise_value_error", complaints.append)
    validator = security_validator.SecurityValidatorMiddleware(None)
    for path in sorted(set(plugin.get_plugin_apps()) - set(plugin.api.routes())):
        validator._validate_headers(list(client.get(PREFIX + path).headers.items()))
    assert complaints == []
    page = client.get(f"{PREFIX}/index.html")
    policy = dict(part.strip().split(" ", 1) for part in page.headers["Content-Security-Policy"].split(";"))
    assert policy["default-src"] == "'self'" and policy["script-src"] == "'self'"
    assert b"http-equiv" not in page.data


def test_symlink_out_of_the_logdir_is_not_reachable_by_requests(world, opened):
    root, outside, _, client = world
    runs = {r["name"] for r in client.get(f"{PREFIX}/runs").get_json()["runs"]}
    assert "escape" not in runs  # a symlinked directory without traces is no run
    assert "linked_run" in runs  # a symlinked run directory the owner placed is (by design)
    attempts = [("escape", "secret"), ("escape", "secret.txt"), ("cpu_cnn/../escape", "secret"),
                ("linked_run/..", "escape/secret"), ("linked_run", "../escape/secret"), ("linked_run", "../../outside/secret/secret"),
                ("cpu_cnn", "../escape/secret"), (str(outside / "secret"), "secret"), (".", "escape/secret")]
    for run, worker in attempts:
        for route in ("info", "trace_file", "spans", "overview"):
            response = client.get(f"{PREFIX}/{route}?run={quote(run, safe='')}&worker={quote(worker, safe='')}")
            assert response.status_code == 404, (route, run, worker, response.status_code)
            assert b"the secret" not in response.data
    assert not [p for p in opened if "secret" in p], opened
    assert opened == []


def test_linked_run_serves_only_its_discovered_file(world, opened):
    """The owner's symlinked run is served by name; what is opened is its listed trace file."""
    _, outside, _, client = world
    response = client.get(f"{PREFIX}/trace_file?run=linked_run&worker=worker0")
    assert response.status_code == 200 and response.headers["Content-Type"] == "application/json"
    assert opened == ["Storage.read_bytes(linked_run/worker0.pt.trace.json)"] or \
        all("linked_run/worker0.pt.trace.json" in p for p in opened), opened


def test_every_route_sets_nosniff_and_a_data_content_type(world):
    """200, 202, 400, 404 and 422 answers alike; never text/html from a data route."""
    root, _, plugin, client = world
    write_trace(root / "slow" / "worker0.pt.trace.json", [op("a", 0, 1)])
    (root / "bad").mkdir()
    (root / "bad" / "worker0.pt.trace.json").write_bytes(b'{"traceEvents": [')
    plugin.store.rescan()
    seen = set()
    for path in SPEC["paths"]:
        queries = [valid_query(path), "", valid_query(path).replace("worker=worker0", "worker=nobody"),
                   valid_query(path).replace("run=cpu_cnn", "run=bad"), valid_query(path).replace("run=cpu_cnn", "run=slow"),
                   valid_query(path) + "&span=x"]
        for query in queries:
            response = client.get(f"{PREFIX}{path}?{query}")
            seen.add(response.status_code)
            assert response.status_code < 500, (path, query, response.status_code)
            assert response.headers["X-Content-Type-Options"] == "nosniff", (path, query)
            content_type = response.headers["Content-Type"]
            allowed = DATA_TYPES | ({"application/json", "application/gzip"} if path == "/trace_file" else set())
            assert content_type in allowed, (path, query, content_type)
        if "format" in dict(route_parameters(path)):
            one_table = "".join(f"&table={t}" for t in csv_table(path).values())  # CSV is one table
            response = client.get(f"{PREFIX}{path}?{valid_query(path)}{one_table}&format=csv")
            assert response.status_code == 200 and response.headers["Content-Type"] == "text/csv; charset=utf-8", path
    assert {200, 400, 404, 422} <= seen


def test_every_route_answers_other_methods_405_with_allow(world):
    """RFC 9110: a 405 says which methods the resource supports; data and static routes alike."""
    _, _, plugin, client = world
    for path in sorted(plugin.get_plugin_apps()):
        for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
            response = client.open(f"{PREFIX}{path}", method=method)
            assert response.status_code == 405, (path, method, response.status_code)
            assert response.headers["Allow"] == "GET, HEAD", (path, method)
            assert response.get_json()["error"] == "method_not_allowed"


def test_error_paths_are_relative_to_the_logdir_in_every_route(world):
    """A reply naming a file gives its path under the log directory, never the server's
    absolute path (trace_file gave it)."""
    root, _, plugin, client = world
    (root / "unreadable").mkdir(exist_ok=True)
    os.symlink(root / "unreadable" / "missing.json", root / "unreadable" / "worker0.pt.trace.json")  # dangling
    plugin.store.rescan()
    try:
        named = []
        for path in SPEC["paths"]:
            if "run" not in dict(route_parameters(path)):
                continue
            response = wait_route(client, f"{PREFIX}{path}?{valid_query(path).replace('run=cpu_cnn', 'run=unreadable')}")
            if response.status_code == 422:
                named.append((path, response.get_json()["path"]))
        assert len(named) > 10 and {p for _, p in named} == {"unreadable/worker0.pt.trace.json"}, named
        trace_file = client.get(f"{PREFIX}/trace_file?run=unreadable&worker=worker0")
        assert trace_file.status_code == 422 and trace_file.get_json()["path"] == "unreadable/worker0.pt.trace.json"
    finally:
        (root / "unreadable" / "worker0.pt.trace.json").unlink()
        plugin.store.rescan()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_no_reply_shows_a_server_path(world):
    """The README promises paths relative to the log directory, but error reasons (an OSError's
    text), scan_errors and /info's `source` gave the server's absolute paths."""
    root, _, plugin, client = world
    server_paths = str(root.parent)  # the log directory's and the outside directory's parent
    (root / "pipes").mkdir(exist_ok=True)
    os.symlink(root / "pipes" / "missing.json", root / "pipes" / "dangling.pt.trace.json")
    os.mkfifo(root / "pipes" / "fifo.pt.trace.json")
    os.mkfifo(root / "pipes" / "export.json")  # a plain .json the scan reads a head of
    plugin.store.rescan()
    try:
        runs = client.get(f"{PREFIX}/runs")
        errors = {worker: wait_route(client, f"{PREFIX}/info?run=pipes&worker={worker}")
                  for worker in ("dangling", "fifo")}
        info = client.get(f"{PREFIX}/info?run=cpu_cnn&worker=worker0&span=1")
        assert {r.status_code for r in errors.values()} == {422} and info.status_code == 200
        assert [e["path"] for e in runs.get_json()["scan_errors"]] == ["pipes/export.json"]
        assert errors["fifo"].get_json()["reason"] == "cannot read the file (not a regular file but a pipe)"
        assert info.get_json()["source"] == f"cpu_cnn/{sorted((root / 'cpu_cnn').iterdir())[0].name}"
        for reply in (runs, info, *errors.values()):
            assert server_paths not in reply.get_data(as_text=True), reply.get_data(as_text=True)
    finally:
        shutil.rmtree(root / "pipes")
        plugin.store.rescan()


def test_names_from_traces_come_back_as_data(world):
    _, _, _, client = world
    worker = quote(MARKUP, safe="")
    runs = client.get(f"{PREFIX}/runs")
    assert MARKUP in runs.get_json()["runs"][[r["name"] for r in runs.get_json()["runs"]].index("names")]["workers"]
    query = f"run=names&worker={worker}"
    operators = client.get(f"{PREFIX}/operators?{query}")
    assert operators.headers["Content-Type"] == "application/json; charset=utf-8"
    assert SCRIPT_OP in [row[0] for row in operators.get_json()["rows"]]
    kernels_csv = client.get(f"{PREFIX}/kernels?{query}&format=csv")
    assert kernels_csv.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert MARKUP in kernels_csv.get_data(as_text=True)
    for path in SPEC["paths"]:
        response = client.get(f"{PREFIX}{path}?{valid_query(path).replace('run=cpu_cnn', 'run=names').replace('worker=worker0', f'worker={worker}')}")
        assert not response.headers["Content-Type"].startswith("text/html"), path
        assert response.headers["X-Content-Type-Options"] == "nosniff", path
    download = client.get(f"{PREFIX}/trace_file?{query}")
    assert download.status_code == 200 and download.headers["Content-Type"] == "application/json"
    disposition = download.headers["Content-Disposition"]
    assert disposition.startswith("attachment;") and "<" not in disposition and '"' not in disposition
    assert download.data == (world[0] / "names" / f"{MARKUP}.pt.trace.json").read_bytes()


def test_trace_named_symlink_to_a_file_outside_is_not_served(tmp_path):
    """Symlinks are followed (runs linked in by the owner are served), so a link named like a
    trace can point anywhere; /trace_file streamed such a link to any file verbatim (a
    `worker0.pt.trace.json -> /etc/passwd` came back whole). What is not a Kineto trace is
    refused with a 422, both plain and gzip; real traces still download byte for byte."""
    root, outside = tmp_path / "logdir", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("root:x:0:0:the secret\n")
    (outside / "secret.gz").write_bytes(gzip.compress(b'{"token": "the secret"}'))
    good = write_trace(root / "run" / "good.pt.trace.json.gz", [op("a", 0, 1)], gz=True)
    os.symlink(outside / "secret.txt", root / "run" / "leak.pt.trace.json")
    os.symlink(outside / "secret.gz", root / "run" / "leakgz.pt.trace.json.gz")
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    try:
        assert client.get(f"{PREFIX}/workers?run=run").get_json()["workers"] == ["good", "leak", "leakgz"]
        for worker in ("leak", "leakgz"):
            response = client.get(f"{PREFIX}/trace_file?run=run&worker={worker}")
            assert response.status_code == 422, worker
            assert b"the secret" not in response.data
            assert response.get_json()["reason"] == "not a Kineto trace: the file is not served"
            assert response.get_json()["path"] == f"run/{worker}.pt.trace.json" + (".gz" if worker == "leakgz" else "")
        download = client.get(f"{PREFIX}/trace_file?run=run&worker=good")
        assert download.status_code == 200 and download.headers["Content-Type"] == "application/gzip"
        assert download.data == good.read_bytes()
    finally:
        plugin.store.stop()
