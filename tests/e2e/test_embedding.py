"""The page among other frames and other data: VS Code's jump to source (TensorBoard's page in
a foreign frame that filters messages as VS Code's webview does), trace names holding markup
(shown as text, never run), a broken run (its reason shown, the other runs unaffected), a
GPU the trace does not describe (no deviceProperties), and a log directory with a name that
is not UTF-8 and a tree too deep to scan."""

import functools
import http.server
import importlib.util
import json
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ..helpers import PREFIX, deep_directory, free_port, kernel, op, runtime, write_trace
from .conftest import READY, Watch, after, api, open_page, screenshot, tensorboard


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


SOURCE_RUN = "with_sources"
# Innermost first, as PyTorch writes them: paths relative to the sys.path entry of the module.
SOURCE_STACK = ["train.py(7): step", "torch/nn/modules/module.py(1782): _call_impl", "train.py(1): <module>"]


@pytest.fixture(scope="module")
def source_server(tmp_path_factory):
    """A real tensorboard over a run whose operator's stack names `train.py` (which lies in
    the run's directory, as a script saved beside its traces does) and a torch module."""
    root = tmp_path_factory.mktemp("source_logdir")
    events = [op("ProfilerStep#1", 0, 100, cat="user_annotation"),
              op("aten::mm", 10, 50, **{"External id": 1, "Call stack": ";".join(SOURCE_STACK)})]
    write_trace(root / SOURCE_RUN / "worker0.pt.trace.json", events)
    (root / SOURCE_RUN / "train.py").write_text("import torch\n")
    with tensorboard(root, root.parent / "source_tensorboard.log") as base:
        yield base, root / SOURCE_RUN


# The listener of VS Code's TensorBoard webview (microsoft/vscode-tensorboard src/session.ts,
# getHtml): messages from another origin than TensorBoard's, or without a filename or a
# truthy line, are dropped; the rest become {filename, line}.
_VSCODE_WEBVIEW = """<!doctype html><link rel=icon href='data:,'><title>webview</title><pre id=log></pre>
<script>
  window.accepted = []; window.dropped = [];
  addEventListener('message', (event) => {
    if (!%(tensorboard)s.startsWith(event.origin) || !event.data || !event.data.filename || !event.data.line) {
      window.dropped.push({data: event.data, origin: event.origin});
      return;
    }
    window.accepted.push({filename: event.data.filename, line: event.data.line});
    document.getElementById('log').textContent = JSON.stringify(window.accepted);
  });
</script>
<iframe id=tensorboard src=%(page)s style='width:1380px;height:900px;border:0'></iframe>"""


@pytest.fixture
def vscode_webview(tmp_path, source_server):
    """outer.html, from another origin, frames TensorBoard's own page (which frames the
    plugin's two frames) and listens as VS Code's webview does."""
    base = source_server[0]
    (tmp_path / "outer.html").write_text(_VSCODE_WEBVIEW % {"tensorboard": json.dumps(base + "/"),
                                                            "page": json.dumps(f"{base}/#pytorch_profiler")})
    handler = functools.partial(_QuietHandler, directory=str(tmp_path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/outer.html"
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)


def test_vscode_jump_to_source_lands_through_tensorboards_page(page, vscode_webview, source_server):
    """Each frame of a stack, clicked in the plugin inside TensorBoard's page inside a VS
    Code-like webview, reaches the webview's listener as `{filename, line}` that VS Code
    opens: an absolute path that exists (the trace's `train.py` and `torch/...` are relative
    and made VS Code ask the user for the file), and a line it does not drop (line 1 was
    sent as 0, which VS Code's `!event.data.line` drops)."""
    base, run_dir = source_server
    torch_root = Path(importlib.util.find_spec("torch").origin).parent.parent  # site-packages of this Python
    expected = [{"filename": str(run_dir / "train.py"), "line": 6},
                {"filename": str(torch_root / "torch/nn/modules/module.py"), "line": 1781},
                {"filename": str(run_dir / "train.py"), "line": 1}]  # line 1: the nearest VS Code selects
    page.goto(vscode_webview)
    tensorboard_page = page.frame_locator("#tensorboard")
    plugin = tensorboard_page.frame_locator("iframe").first.frame_locator("iframe").first
    plugin.locator(READY).wait_for(state="attached")
    plugin.locator(f".run-list li[data-run={SOURCE_RUN}] button").click()
    plugin.locator("[data-view=operator]").click()
    row = plugin.locator("[data-table=operators] tbody tr", has_text="aten::mm").first
    row.locator("button.expander").click()
    links = plugin.locator("[data-testid=stacks] .call-stack").first.locator("a.source-link")
    links.first.wait_for()  # the stacks arrive with their own request: all_inner_texts does not wait
    assert links.all_inner_texts() == SOURCE_STACK
    for i in range(len(SOURCE_STACK)):
        links.nth(i).click()
        page.wait_for_function(f"() => window.accepted.length + window.dropped.length > {i}")
    assert page.evaluate("() => window.dropped") == []
    accepted = page.evaluate("() => window.accepted")
    assert accepted == expected
    assert all(os.path.isfile(m["filename"]) for m in accepted)  # VS Code's fs.existsSync


MARKUP_OPS = ['<img src=x onerror="window.__xss=1">', "<script>window.__xss=2</script>"]
MARKUP_RUN = "<b>run</b>"
UNDESCRIBED_GPU_RUN = "undescribed_gpu"


@pytest.fixture(scope="module")
def odd_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("odd_logdir")
    events = [op(name, 10 * i, 5 + i) for i, name in enumerate(MARKUP_OPS * 3)]
    write_trace(root / MARKUP_RUN / "worker0.pt.trace.json", events)
    write_trace(root / "broken" / "worker0.pt.trace.json", []).write_bytes(b'{"traceEvents": [{"ph": "X"')
    # Kernels on GPU 0, but no deviceProperties (old traces): no name, no compute capability.
    gpu = [op("ProfilerStep#1", 0, 100), op("aten::mm", 10, 50, **{"External id": 1}),
           runtime("cudaLaunchKernel", 12, 5, correlation=7, external_id=1), kernel("gemm", 20, 30, correlation=7)]
    write_trace(root / UNDESCRIBED_GPU_RUN / "worker0.pt.trace.json", gpu)
    # A run directory named in Latin-1 (not UTF-8) and a tree deeper than the scan descends.
    write_trace(os.fsdecode(os.fsencode(root) + b"/caf\xe9/worker0.pt.trace.json"), gpu)
    with deep_directory(root, 100):
        with tensorboard(root, root.parent / "odd_tensorboard.log") as base:
            yield base


def test_trace_names_are_text_never_markup(browser, odd_server, screenshot_dir):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    watch = Watch(page)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        open_page(page, odd_server, run=MARKUP_RUN, view="operator")
        text = page.inner_text("[data-table=operators]")
        for name in MARKUP_OPS:
            assert name in text
        assert MARKUP_RUN in page.inner_text(".run-list")
        # Hover the pie so its tooltip shows a name: still text.
        box = page.locator("[data-chart='Host self time']").bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.52)
        page.wait_for_selector("[data-chart='Host self time'] div:has-text('window.__xss')")
        assert page.evaluate("() => window.__xss") is None
        assert page.evaluate("() => document.body.querySelectorAll('img, script').length") == 0
        assert page.evaluate("() => [...document.querySelectorAll('b')].filter((b) => b.textContent === 'run').length") == 0
        assert not dialogs
        screenshot(page, screenshot_dir, "markup_names_operator")
    finally:
        context.close()
    watch.check()


def test_broken_run_shows_its_reason_and_others_still_work(browser, odd_server):
    reason = None
    while reason is None:  # 202 while the load is tried, then the failure
        try:
            with urllib.request.urlopen(f"{odd_server}{PREFIX}/views?run=broken&worker=worker0", timeout=60) as reply:
                assert reply.status == 202, "a truncated trace should not load"
        except urllib.error.HTTPError as error:
            assert error.code == 422
            reason = json.loads(error.read())["reason"]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    watch = Watch(page)
    try:
        open_page(page, odd_server, run="broken")
        assert reason in page.inner_text(".content .status.error")
        page.wait_for_selector(".run-list li[data-run=broken] .run-error")
        assert reason in page.inner_text(".run-list li[data-run=broken] .run-error")
        after(page, lambda: page.click(f".run-list li[data-run='{MARKUP_RUN}'] button"))
        assert page.get_attribute("[data-current-view]", "data-current-view") == "overview"
        assert not page.query_selector(".content .status.error")
    finally:
        context.close()
    # The browser reports the 422 reply itself; nothing else may go wrong.
    watch.errors = [e for e in watch.errors if "status of 422" not in e]
    watch.check()


def test_gpu_without_device_properties_shows_dashes_not_blanks(browser, odd_server):
    summary = api(odd_server, "overview", run=UNDESCRIBED_GPU_RUN, worker="worker0", span=1)["gpu_summary"]
    gpu = dict(zip(summary["columns"], summary["rows"][0]))
    assert gpu["name"] == "" and gpu["compute_capability"] == ""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    watch = Watch(page)
    try:
        open_page(page, odd_server, run=UNDESCRIBED_GPU_RUN, view="overview")
        card = page.locator("[data-gpu='0']")
        assert card.locator("strong").inner_text() == "GPU 0"  # not "GPU 0:"
        values = dict(zip(card.locator("dt").all_inner_texts(), card.locator("dd").all_inner_texts()))
        assert values["Compute capability"] == "—" and values["Memory"] == "—", values
        assert all(v.strip() for v in values.values()), values
    finally:
        context.close()
    watch.check()


def test_run_named_in_latin1_opens_and_skipped_paths_are_listed(browser, odd_server, screenshot_dir):
    """A directory name that is not UTF-8 emptied the run list (500); a tree too deep for
    the scan vanished without a word. The run shows with the byte escaped and opens; what
    the scan skipped is listed under the runs with its reason."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    watch = Watch(page)
    try:
        open_page(page, odd_server, run="caf\\xe9", view="overview")
        assert page.locator(".run-list li.selected .run-name").inner_text() == "caf\\xe9"
        assert page.locator("[data-gpu='0']").count() == 1
        skipped = page.locator("[data-testid=scan-skipped]")
        assert skipped.locator("summary").inner_text() == "1 path not scanned"
        skipped.locator("summary").click()
        entry = skipped.locator("li")
        assert entry.get_attribute("data-path") == "/".join(["d"] * 65)
        assert "more than 64 levels below the log directory: not scanned" in entry.inner_text()
        screenshot(page, screenshot_dir, "scan_skipped_run_list")
    finally:
        context.close()
    watch.check()
