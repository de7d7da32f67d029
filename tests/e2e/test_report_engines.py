"""The report and `compare --html` files in Firefox's and WebKit's (Safari's) engines, as
test_report.py checks them in Chromium: opened from disk with every request but the file itself
refused and recorded, each tab renders with no console error and the numbers the API gives for
the same run (report_checks.py; the drivers and what each sees in engines.py)."""

import pytest

import tb_plugin
from tb_plugin import load_run
from tb_plugin.__main__ import main

from ..helpers import SAMPLES
from .engines import FIREFOX, WEBKIT_DRIVER, XVFB, Firefox, WebKit
from .report_checks import check_diff_page, check_report_tabs

RUN = SAMPLES / "gpu_resnet50_v100"
CNN = SAMPLES / "cpu_cnn"  # one worker, two spans


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


@pytest.fixture(scope="module", params=["firefox", "webkit"])
def engine(request):
    reason = _missing(request.param)
    if reason:
        pytest.skip(reason)
    driver = Firefox() if request.param == "firefox" else WebKit()
    yield request.param, driver
    driver.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "resnet50.html"
    assert main(["report", str(RUN), "-o", str(out)]) == 0
    return out


def test_report_tabs_show_the_apis_numbers_offline(engine, report, screenshot_dir):
    name, driver = engine
    tab = driver.open(report)
    check_report_tabs(tab, load_run(str(RUN)).profile("worker0", 1), screenshot_dir, f"report_{name}")
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


def test_requests_and_errors_are_seen(engine, tmp_path):
    # the harness itself: a page with no policy that asks the network for an image while it
    # loads, fetches over HTTPS and logs an error once ready is caught at both
    name, driver = engine
    page = tmp_path / "leaky.html"
    page.write_text('<!doctype html><html><body data-ready="true"><img src="http://leak.invalid/load.png">'
                    "</body></html>", "utf-8")
    tab = driver.open(page)
    tab.evaluate("() => fetch('https://leak.invalid/fetch').catch(() => null)")
    tab.evaluate("() => console.error('planted error')")
    refused, errors = tab.refused, tab.errors
    tab.close(check=False)
    assert len(refused) >= 2 and any("leak.invalid/load.png" in u for u in refused), refused
    assert any("planted error" in e for e in errors), errors
