"""The report file in Chromium, opened from disk with every request but the file itself
refused: each tab renders with no console error and the numbers the API gives for the same
run; names planted in a trace as markup and script show as text and run nothing."""

import json
import re
import shutil

import pytest

from tb_plugin import diff, load_run
from tb_plugin.__main__ import main

from ..helpers import SAMPLES, kernel, op, report_data, runtime
from .conftest import READY, full_kernel_name, screenshot
from .report_checks import check_diff_page, check_report_tabs, open_view

RUN = SAMPLES / "gpu_resnet50_v100"
CNN = SAMPLES / "cpu_cnn"  # one worker, two spans
SCRIPT_NAME = "</script><script>alert(1)</script>"
QUOTED_NAME = "k\"ernel' <img src=x onerror=alert(2)> &amp;"


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
        return self.page.evaluate(f"(args) => ({function})(...args)", list(args))

    def screenshot(self, path):
        self.page.screenshot(path=str(path), full_page=True)

    def open(self, view):
        open_view(self, view)
        return self.page

    def close(self):
        self.context.close()
        assert not self.errors, self.errors
        assert not self.refused, f"requests leaving the file: {self.refused}"
        assert not self.dialogs, f"script from the trace ran: {self.dialogs}"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "resnet50.html"
    assert main(["report", str(RUN), "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def profile():
    return load_run(str(RUN)).profile("worker0", 1)


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


def test_report_follows_a_dark_theme(browser, report):
    offline = Offline(browser, report, color_scheme="dark")
    light = Offline(browser, report, color_scheme="light")
    background = "() => getComputedStyle(document.body).backgroundColor"
    assert offline.page.evaluate(background) != light.page.evaluate(background)
    offline.close()
    light.close()


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


def test_names_from_the_trace_are_text(browser, tmp_path, screenshot_dir):
    trace = planted_trace(tmp_path / "run" / "worker0.pt.trace.json")
    out = tmp_path / "planted.html"
    assert main(["report", str(trace), "-o", str(out)]) == 0
    html = out.read_text("utf-8")
    assert SCRIPT_NAME not in html and "onerror=alert" not in html  # only base64 of them
    assert str(tmp_path) not in html
    assert len(re.findall(r"<script\b", html)) == 2  # the data block and the page's bundle
    offline = Offline(browser, out)
    page = offline.open("operator")
    assert SCRIPT_NAME in page.inner_text("[data-table=operators]")
    assert "bad \ufffd name" in page.inner_text("[data-table=operators]")
    page = offline.open("kernel")
    names = [full_kernel_name(row) for row in page.locator("[data-table=kernels] tbody tr").all()]
    assert sorted(names) == sorted([SCRIPT_NAME, QUOTED_NAME])
    assert not page.query_selector("img[src=x]")
    screenshot(page, screenshot_dir, "report_planted_kernels")
    offline.close()


def test_notebook_frame_renders_and_switches_tabs(browser, tmp_path):
    # what a notebook cell shows (`tb_plugin.show`): the page in a srcdoc frame, whose
    # about:srcdoc URL takes no query (the selection is kept in the page instead)
    import tb_plugin

    host = tmp_path / "notebook.html"
    host.write_text(f"<!doctype html><html><body>{tb_plugin.show(SAMPLES / 'cpu_cnn', view='operator')._repr_html_()}"
                    "</body></html>", "utf-8")
    offline = Offline(browser, host, ready=False)
    frame = offline.page.frame_locator("iframe")
    frame.locator(READY).wait_for(state="attached")
    assert frame.locator("[data-table=operators] tbody tr").count() > 0
    frame.locator("[data-view='memory']").click()
    frame.locator("[data-testid=memory]").wait_for()
    assert frame.locator("[data-view='memory']").get_attribute("aria-selected") == "true"
    offline.close()
