"""The report file in Chromium, opened from disk with every request but the file itself
refused: each tab renders with no console error and the numbers the API gives for the same
run; it follows a dark theme; names planted in a trace as markup and script show as text and
run nothing; the page in a notebook cell's sandboxed frame boots and switches tabs, its errors
seen (report_checks.py; test_report_engines.py checks the same in Firefox and WebKit)."""

import json
import re
import shutil

import pytest

from tb_plugin import diff, load_run
from tb_plugin.__main__ import main

from ..helpers import SAMPLES, report_data
from .conftest import QUOTED_NAME, READY, REPORT_RUN, SCRIPT_NAME, screenshot
from .engines import Frame
from .report_checks import (check_diff_page, check_frame_errors_seen, check_notebook_frame, check_planted_names,
                            check_report_tabs, check_theme, open_view)

CNN = SAMPLES / "cpu_cnn"  # one worker, two spans


def _evaluate(frame, function, args):
    return frame.evaluate(f"(args) => ({function})(...args)", list(args))


class Offline:
    """A page in its own context where every request but `path` is refused, and console
    errors, dialogs and refused requests are recorded."""

    def __init__(self, browser, path, color_scheme="light", ready=True):
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme=color_scheme)
        self.refused, self.errors, self.dialogs = [], [], []
        url = path.as_uri()

        def only_the_file(route):
            if route.request.url.split("?")[0] == url:
                return route.continue_()
            self.refused.append(route.request.url)
            return route.abort()
        self.context.route("**/*", only_the_file)
        self.page = self.context.new_page()
        self.page.set_default_timeout(60_000)
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(url)
        if ready:
            self.page.wait_for_selector(READY, state="attached")

    def evaluate(self, function, *args):
        return _evaluate(self.page.main_frame, function, args)

    def in_frame(self, selector):
        """The page of the frame at `selector` (`<iframe>`), scripted through Playwright's frame
        (a sandboxed frame's page is out of the page's scripts' reach); its errors are the
        page's, which Playwright's console and page errors include."""
        frame = self.page.wait_for_selector(selector, state="attached").content_frame()
        return Frame(self, lambda function, args: _evaluate(frame, function, args), lambda: self.errors)

    def screenshot(self, path):
        self.page.screenshot(path=str(path), full_page=True)

    def open(self, view):
        open_view(self, view)
        return self.page

    def close(self, check=True):
        self.context.close()
        if not check:
            return
        assert not self.errors, self.errors
        assert not self.refused, f"requests leaving the file: {self.refused}"
        assert not self.dialogs, f"script from the trace ran: {self.dialogs}"


@pytest.fixture(scope="module")
def profile():
    return load_run(str(REPORT_RUN)).profile("worker0", 1)


def test_report_tabs_show_the_apis_numbers_offline(browser, report, profile, screenshot_dir):
    offline = Offline(browser, report)
    check_report_tabs(offline, profile, screenshot_dir, "report")
    offline.close()


def test_compare_html_shows_the_apis_diff_offline(browser, tmp_path, screenshot_dir):
    out = tmp_path / "diff.html"
    assert main(["compare", str(CNN), str(CNN), "--span-b", "2", "--html", str(out)]) == 0
    run = load_run(str(CNN))
    offline = Offline(browser, out)
    check_diff_page(offline, diff(run.profile("worker0", 1), run.profile("worker0", 2)), screenshot_dir / "compare_html.png")
    offline.close()


def test_a_critical_path_the_report_does_not_hold_says_which_it_holds(browser, report):
    data = report_data(report)
    held = sorted({int(dict(pairs)["step"]) for route, pairs in map(json.loads, data["answers"])
                   if route == "critical_path"})
    offline = Offline(browser, report)
    page = offline.open("gpu_idle")
    steps = page.eval_on_selector_all("[data-control=path_step] option", "els => els.map((e) => Number(e.value))")
    other = next(step for step in steps if step not in held)
    page.select_option("[data-control=path_step]", str(other))
    page.wait_for_selector("text=This report holds the critical path of")
    text = page.inner_text("main") if page.query_selector("main") else page.inner_text("body")
    assert f"the critical path of steps {held[0]} and {held[1]} only" in text and "report --step N" in text
    page.select_option("[data-control=path_step]", str(held[-1]))
    page.wait_for_selector("text=This report holds the critical path of", state="detached")
    offline.close()


def test_a_report_of_memory_snapshots_only_opens_on_their_tab(browser, tmp_path, screenshot_dir):
    run = tmp_path / "job"
    shutil.copytree(SAMPLES / "gpu_memory_snapshot", run)
    out = tmp_path / "snapshots.html"
    assert main(["report", str(run), "-o", str(out)]) == 0
    offline = Offline(browser, out, ready=False)
    page = offline.page
    page.wait_for_selector("[data-testid=memory-snapshot] canvas")
    rows = page.locator("[data-table=snapshot-ranks] tbody tr").all_inner_texts()
    assert sorted({row.split()[0] for row in rows}) == ["rank0", "rank1"]
    assert page.get_attribute("[data-view='memory_snapshot']", "aria-selected") == "true"
    screenshot(page, screenshot_dir, "report_memory_snapshot")
    offline.close()


@pytest.mark.parametrize("color_scheme", ["dark", "light"])
def test_report_follows_the_readers_theme(browser, report, color_scheme, screenshot_dir):
    offline = Offline(browser, report, color_scheme=color_scheme)
    check_theme(offline, color_scheme, screenshot_dir / f"report_{color_scheme}.png")
    offline.close()


def test_names_from_the_trace_are_text(browser, planted_report, screenshot_dir):
    html = planted_report.read_text("utf-8")
    assert SCRIPT_NAME not in html and "onerror=alert" not in html and QUOTED_NAME not in html  # only base64 of them
    assert str(planted_report.parent) not in html
    assert len(re.findall(r"<script\b", html)) == 2  # the data block and the page's bundle
    offline = Offline(browser, planted_report)
    check_planted_names(offline, screenshot_dir / "report_planted_kernels.png")
    offline.close()


def test_notebook_frame_renders_and_switches_tabs(browser, notebook_page, screenshot_dir):
    # what a notebook cell shows (`tb_plugin.show`): the page in a srcdoc frame, whose
    # about:srcdoc URL takes no query (the selection is kept in the page instead)
    offline = Offline(browser, notebook_page, ready=False)
    check_notebook_frame(offline.in_frame("iframe"), screenshot_dir / "notebook.png")
    offline.close()


def test_errors_in_a_notebook_frame_are_seen(browser, broken_notebook_page):
    offline = Offline(browser, broken_notebook_page, ready=False)
    check_frame_errors_seen(offline.in_frame("iframe"), "chromium")
    offline.close(check=False)
