"""End-to-end fixtures: the real `tensorboard` on the sample runs, Debian's Chromium driven by
Playwright (system binary, headless; no browser is ever downloaded), and helpers that wait on
the page's ready signal (`body[data-ready=true]`), never on sleeps.

Screenshots of every view go to $TB_PLUGIN_SCREENSHOTS (or a fresh temp directory, printed at
the end of the run): look at them, blank or clipped charts are failures.
"""

import contextlib
import json
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("playwright", reason="the e2e tests need the playwright package (pip install -e '.[test]')")

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"Debian's Chromium is not installed at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import sync_playwright  # noqa: E402

from tb_plugin.__main__ import main  # noqa: E402
from tb_plugin.report import Shown, show  # noqa: E402

from ..helpers import PREFIX, SAMPLES, kernel, op, runtime  # noqa: E402
from ..helpers import tensorboard as _tensorboard  # noqa: E402
from .engines import with_first_script  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
READY = "body[data-ready='true']"
REPORT_RUN = SAMPLES / "gpu_resnet50_v100"
# names a trace can carry that are markup and script (`planted_trace`)
SCRIPT_NAME = "</script><script>alert(1)</script>"
QUOTED_NAME = "k\"ernel' <img src=x onerror=alert(2)> &amp;"
# a script of the file's own that throws before the page's
THROW_AT_BOOT = "throw new Error('planted at boot')"
_SCREENSHOTS = {}


@contextlib.contextmanager
def tensorboard(logdir, log_path):
    """The shared real-tensorboard helper, yielding once the runs are listed."""
    with _tensorboard(logdir, log_path) as base:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}{PREFIX}/runs", timeout=5) as response:
                    if json.loads(response.read())["runs"]:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            assert time.monotonic() < deadline, "tensorboard did not list the runs within 60 s"
            time.sleep(0.2)
        yield base


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    with tensorboard(SAMPLES, tmp_path_factory.mktemp("tb") / "tensorboard.log") as base:
        yield base


def api(base, route, raw=False, **params):
    """GET a plugin route, asking again while the profile is parsed (202); JSON or bytes."""
    url = f"{base}{PREFIX}/{route}?{urllib.parse.urlencode(params)}"
    deadline = time.monotonic() + 120
    while True:
        with urllib.request.urlopen(url, timeout=60) as response:
            body = response.read()
            if response.status == 200:
                return body if raw else json.loads(body)
        assert time.monotonic() < deadline, f"{url} still loading"
        time.sleep(0.2)


def rows(table):
    """A wire table as a list of dicts."""
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def format_duration(us):
    """Mirror of frontend/src/base/format.ts formatDuration."""
    if us is None:
        return "—"
    a = abs(us)
    if a < 999.95:
        text = f"{a:.1f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
        return f"{_signed(us, text)} µs"
    if a < 999_995:
        return f"{_signed(us, f'{a / 1e3:.2f}')} ms"
    return f"{_signed(us, f'{a / 1e6:.2f}')} s"


def _signed(value, text):
    """A minus only when the rounded text is not zero (never "-0 µs")."""
    return f"-{text}" if value < 0 and any(c in "123456789" for c in text) else text


def format_bytes(n):
    """Mirror of frontend/src/base/format.ts formatBytes."""
    if n is None:
        return "—"
    a = abs(n)
    if a < 1024:
        return f"{_signed(n, str(round(a)))} B"
    value, unit = a / 1024, 0
    units = ["KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{_signed(n, f'{value:.2f}')} {units[unit]}"


@pytest.fixture(scope="session")
def screenshot_dir():
    path = Path(os.environ.get("TB_PLUGIN_SCREENSHOTS") or tempfile.mkdtemp(prefix="tb_plugin_screenshots_"))
    path.mkdir(parents=True, exist_ok=True)
    _SCREENSHOTS["dir"] = path
    return path


def pytest_terminal_summary(terminalreporter):
    if "dir" in _SCREENSHOTS:
        terminalreporter.write_line(f"e2e screenshots: {_SCREENSHOTS['dir']}")


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Watch:
    """Console errors, page errors and every request of a page, checked at teardown."""

    def __init__(self, page):
        self.errors, self.requests = [], []
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text} @ {m.location}"))
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("request", lambda r: self.requests.append(r.url))

    def check(self):
        assert not self.errors, self.errors
        foreign = [u for u in self.requests
                   if urllib.parse.urlsplit(u).scheme not in ("data", "blob") and urllib.parse.urlsplit(u).hostname != "127.0.0.1"]
        assert not foreign, f"requests to other hosts: {foreign}"


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(60_000)
    watch = Watch(page)
    page.watch = watch
    yield page
    context.close()
    watch.check()


def open_page(page, server, **query):
    """Open our page directly with a selection and wait until its view has rendered."""
    page.goto(f"{server}{PREFIX}/index.html?{urllib.parse.urlencode(query)}")
    page.wait_for_selector(READY, state="attached")
    return page


def after(page, action):
    """Run `action` (a click, a drag...) and wait for the next ready state it causes."""
    seq = page.evaluate("() => document.body.dataset.readySeq || '0'")
    action()
    page.wait_for_selector(f"body[data-ready='true']:not([data-ready-seq='{seq}'])", state="attached")


def charts_drawn(frame):
    """{chart label: painted pixels} of every ECharts canvas in the frame."""
    return frame.evaluate("""() => Object.fromEntries([...document.querySelectorAll('[data-chart]')].map((el) => {
        const canvas = el.querySelector('canvas');
        if (!canvas || !canvas.width || !canvas.height) return [el.dataset.chart, 0];
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let painted = 0;
        for (let i = 3; i < data.length; i += 4) if (data[i] > 0) painted += 1;
        return [el.dataset.chart, painted];
    }))""")


def assert_charts_drawn(frame, expected_count):
    drawn = charts_drawn(frame)
    assert len(drawn) == expected_count, drawn
    blank = {k: v for k, v in drawn.items() if v < 2000}
    assert not blank, f"charts without a picture: {blank} (all: {drawn})"


def row_count(page, table_id):
    return int(page.get_attribute(f"[data-table='{table_id}'] .row-count", "data-row-count"))


def screenshot(page, screenshot_dir, name):
    path = screenshot_dir / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def full_kernel_name(row):
    """The whole name of the first kernel named in a table row (a Playwright locator): the
    page shows a short form with the full name behind a click (components/KernelName.tsx),
    or the name itself where it has nothing to shorten."""
    name = row.locator(".kernel-name").first
    toggle = name.locator("[data-kernel-name]")
    return toggle.get_attribute("data-kernel-name") if toggle.count() else name.inner_text()


@pytest.fixture(scope="session")
def report(tmp_path_factory):
    """The report file of REPORT_RUN (`python -m tb_plugin report`), which every engine opens."""
    out = tmp_path_factory.mktemp("report") / "resnet50.html"
    assert main(["report", str(REPORT_RUN), "-o", str(out)]) == 0
    return out


def planted_trace(path):
    """A step of two operators and two kernels named as markup, script, quotes and a byte
    that is not UTF-8."""
    events = [op("ProfilerStep#1", 0, 100, cat="user_annotation"),
              op(SCRIPT_NAME, 5, 40), runtime("cudaLaunchKernel", 10, 5, 1, 1),
              op("bad \udcff name", 50, 40), runtime("cudaLaunchKernel", 55, 5, 2, 2),
              kernel(SCRIPT_NAME, 20, 30, 1), kernel(QUOTED_NAME, 62, 25, 2)]
    events[1]["args"]["External id"] = 1
    events[3]["args"]["External id"] = 2
    doc = json.dumps({"schemaVersion": 1, "traceEvents": events}, ensure_ascii=False)
    # "\udcff" (surrogateescape) becomes the lone byte 0xff: a name that is not UTF-8
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(doc.encode("utf-8", "surrogateescape"))
    return path


@pytest.fixture(scope="session")
def planted_report(tmp_path_factory):
    """The report file of `planted_trace`, written in a directory of its own (returned too,
    for checking that the file names no server path)."""
    directory = tmp_path_factory.mktemp("planted")
    out = directory / "planted.html"
    assert main(["report", str(planted_trace(directory / "run" / "worker0.pt.trace.json")), "-o", str(out)]) == 0
    return out


def _notebook_host(path, shown):
    """`path` written as a page holding `shown` (what `tb_plugin.show` returns) as a notebook
    cell does: its `_repr_html_`, the report in a sandboxed `srcdoc` frame."""
    path.write_text(f"<!doctype html><html><body>{shown._repr_html_()}</body></html>", "utf-8")
    return path


@pytest.fixture(scope="session")
def notebook_shown():
    return show(SAMPLES / "cpu_cnn", view="operator")


@pytest.fixture(scope="session")
def notebook_page(tmp_path_factory, notebook_shown):
    """A page on disk holding `tb_plugin.show(SAMPLES / "cpu_cnn", view="operator")` as a
    notebook cell shows it."""
    return _notebook_host(tmp_path_factory.mktemp("notebook") / "notebook.html", notebook_shown)


@pytest.fixture(scope="session")
def broken_notebook_page(tmp_path_factory, notebook_shown):
    """`notebook_page` whose frame's page runs a script that throws (THROW_AT_BOOT) before
    its own."""
    return _notebook_host(tmp_path_factory.mktemp("notebook") / "broken.html",
                          Shown(with_first_script(notebook_shown.page, THROW_AT_BOOT)))
