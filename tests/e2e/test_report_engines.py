"""The report and `compare --html` files in Firefox's and WebKit's (Safari's) engines, as
test_report.py checks them in Chromium: opened from disk with every request but the file itself
refused and recorded, each tab renders with no console error (from the page's first byte on)
and the numbers the API gives for the same run; the page follows a light or dark theme; names
planted in a trace as markup and script show as text and run nothing; the page in a notebook
cell's sandboxed frame boots and switches tabs, and what goes wrong in that frame is seen
(report_checks.py; the drivers, how each reaches into a frame and what each sees in
engines.py)."""

import base64
import contextlib
import hashlib
import re

import pytest

import tb_plugin
from tb_plugin import load_run
from tb_plugin.__main__ import main
from tb_plugin.report import Shown

from ..helpers import SAMPLES
from .conftest import REPORT_RUN, THROW_AT_BOOT
from .engines import (COLLECTOR, FIREFOX, WEBKIT_DRIVER, XVFB, Firefox, WebKit, with_collector_in_frames,
                      with_first_script)
from .report_checks import (check_diff_page, check_frame_errors_seen, check_notebook_frame, check_planted_names,
                            check_report_tabs, check_theme, wait_ready)

CNN = SAMPLES / "cpu_cnn"  # one worker, two spans
DRIVERS = {"firefox": Firefox, "webkit": WebKit}


def _missing(engine):
    """Why `engine` cannot run here, or None."""
    if engine == "firefox":
        if not FIREFOX.exists():
            return f"Debian's Firefox is not installed at {FIREFOX} (apt-get install firefox-esr)"
        try:
            import websocket  # noqa: F401
        except ImportError:
            return "the Firefox tests need the websocket-client package (pip install -e '.[test]')"
    elif not WEBKIT_DRIVER.exists():
        return f"WebKitGTK's WebDriver is not installed at {WEBKIT_DRIVER} (apt-get install webkit2gtk-driver)"
    elif not XVFB.exists():
        return f"the WebKit tests need a display server and {XVFB} is not installed (apt-get install xvfb)"
    return None


@pytest.fixture(scope="module", params=list(DRIVERS))
def engine(request):
    """(name, driver) of an engine whose pages are in the light colour scheme."""
    reason = _missing(request.param)
    if reason:
        pytest.skip(reason)
    driver = DRIVERS[request.param](color_scheme="light")
    yield request.param, driver
    driver.close()


def test_report_tabs_show_the_apis_numbers_offline(engine, report, screenshot_dir):
    name, driver = engine
    tab = driver.open(report)
    check_report_tabs(tab, load_run(str(REPORT_RUN)).profile("worker0", 1), screenshot_dir, f"report_{name}")
    tab.close()


def test_compare_html_shows_the_apis_diff_offline(engine, tmp_path, screenshot_dir):
    name, driver = engine
    out = tmp_path / "diff.html"
    assert main(["compare", str(CNN), str(CNN), "--span-b", "2", "--html", str(out)]) == 0
    run = load_run(str(CNN))
    tab = driver.open(out)
    check_diff_page(tab, tb_plugin.diff(run.profile("worker0", 1), run.profile("worker0", 2)),
                    screenshot_dir / f"compare_html_{name}.png")
    tab.close()


def test_report_follows_the_readers_theme(engine, report, screenshot_dir):
    name, light = engine
    tab = light.open(report)
    check_theme(tab, "light", screenshot_dir / f"report_{name}_light.png")
    tab.close()
    dark = DRIVERS[name](color_scheme="dark")
    try:
        tab = dark.open(report)
        check_theme(tab, "dark", screenshot_dir / f"report_{name}_dark.png")
        tab.close()
    finally:
        dark.close()


def test_names_from_the_trace_are_text(engine, planted_report, screenshot_dir):
    # no prompt opened, no console error: the tab's close checks both
    name, driver = engine
    tab = driver.open(planted_report)
    check_planted_names(tab, screenshot_dir / f"report_planted_kernels_{name}.png")
    tab.close()


def test_requests_errors_and_prompts_are_seen(engine, tmp_path):
    # the harness itself: a page with no policy that asks the network for an image while it
    # loads, fetches over HTTPS, logs an error and a warning and opens a prompt once ready is
    # caught at each
    name, driver = engine
    page = tmp_path / "leaky.html"
    page.write_text('<!doctype html><html><body data-ready="true"><img src="http://leak.invalid/load.png">'
                    "</body></html>", "utf-8")
    tab = driver.open(page)
    tab.evaluate("() => fetch('https://leak.invalid/fetch').catch(() => null)")
    tab.evaluate("() => { console.error('planted error'); console.warn('planted warning'); }")
    refused, errors = tab.refused, tab.errors
    with contextlib.suppress(RuntimeError):  # classic WebDriver may answer a script that opens one with an error
        tab.evaluate("() => alert('planted prompt')")
    dialogs = tab.dialogs
    tab.close(check=False)
    assert len(refused) >= 2 and any("leak.invalid/load.png" in u for u in refused), refused
    assert any("planted error" in e for e in errors) and any("planted warning" in e for e in errors), errors
    assert any("planted prompt" in d for d in dialogs), dialogs


def test_notebook_frame_renders_and_switches_tabs(engine, notebook_page, screenshot_dir):
    # the frame is sandboxed without allow-same-origin: each engine's protocol reaches into it
    # (Firefox: its child browsing context; WebKit: switching into the frame), not the page
    name, driver = engine
    tab = driver.open(notebook_page)
    check_notebook_frame(tab.in_frame("iframe"), screenshot_dir / f"notebook_{name}.png")
    tab.close()


def test_errors_in_a_notebook_frame_are_seen(engine, broken_notebook_page):
    name, driver = engine
    tab = driver.open(broken_notebook_page)
    check_frame_errors_seen(tab.in_frame("iframe"), name)
    tab.close(check=False)


def test_the_collector_is_the_only_script_the_copy_adds(report):
    # WebKit's copy of the file: the collector first, its sha256 the one source its policy adds
    page = report.read_text("utf-8")
    copy = with_first_script(page)
    digest = base64.b64encode(hashlib.sha256(COLLECTOR.encode("utf-8")).digest()).decode()
    policy = re.compile(r'http-equiv="Content-Security-Policy" content="([^"]*)"')
    assert policy.search(copy).group(1) == policy.search(page).group(1).replace(
        "script-src ", f"script-src 'sha256-{digest}' ")
    assert copy.index("<script") == copy.index(f"<script>{COLLECTOR}</script>")  # the first script
    assert copy.replace(f"<script>{COLLECTOR}</script>", "").replace(f"'sha256-{digest}' ", "") == page


def test_the_collector_goes_into_a_notebook_frame_too(notebook_shown):
    # WebKit's copy of a page holding a notebook cell: the frame's page as the copy of the
    # report alone, the rest as it was
    cell = notebook_shown._repr_html_()
    planted = Shown(with_first_script(notebook_shown.page))._repr_html_()
    assert with_collector_in_frames(f"<p>{cell}</p>") == f"<p>{planted}</p>"


# What goes wrong while the page boots, before it is first ready: a script of the file's own
# that throws before the page's, or one whose promise fails unhandled.
BOOT_FAILURES = {
    "a throwing script": THROW_AT_BOOT,
    "an unhandled rejection": "Promise.reject(new Error('planted rejection at boot'))",
}


@pytest.mark.parametrize("failure", list(BOOT_FAILURES))
def test_errors_while_the_page_boots_are_seen(engine, report, tmp_path, failure):
    name, driver = engine
    broken = tmp_path / "broken.html"
    broken.write_text(with_first_script(report.read_text("utf-8"), BOOT_FAILURES[failure]), "utf-8")
    tab = driver.open(broken)
    wait_ready(tab)
    errors = tab.errors
    tab.close(check=False)
    # (WebKit names an uncaught error of a page from file:// "Script error." only, see engines.py)
    assert errors, f"{name} saw no error of a page with {failure}"


def test_a_damaged_report_says_so(engine, report, tmp_path):
    """A report whose embedded answers were mangled (a gzip stream starts with the bytes 1f 8b,
    "H4s" in base64) says the file is damaged and how to write it again, not that a server
    cannot be reached (Firefox also logs the failed stream itself: the page cannot stop that)."""
    name, driver = engine
    page, planted = re.subn(r'(id="tb-report-data">)H4s', r"\1AAA", report.read_text("utf-8"))
    assert planted == 1
    damaged = tmp_path / "damaged.html"
    damaged.write_text(page, "utf-8")
    tab = driver.open(damaged)
    wait_ready(tab)
    shown = tab.evaluate("() => document.body.innerText")
    tab.close(check=False)
    assert "This report file is damaged" in shown and "python -m tb_plugin report" in shown, shown[:500]
    assert "TensorBoard server" not in shown and "log directory" not in shown, f"{name}: {shown[:500]}"
