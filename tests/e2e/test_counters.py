"""Hardware counters in Chromium (issue 39, item 2): on a trace with CUPTI PM sampling counters
(`helpers.counter_trace`), the Trace view draws a device's counter track in that device's
group, right under its header, and the Overview shows the SM counters' mean per step beside
the step breakdown; a trace without counters shows no such card. Screenshots:
`counters_trace.png`, `counters_overview.png`."""

import pytest

from ..helpers import BOX, PM_OCCUPANCY, PM_THROUGHPUT, counter_trace, counter_workload, write_trace
from .conftest import api, open_page, rows, screenshot, tensorboard


@pytest.fixture(scope="module")
def counters_server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("counters")
    counter_trace(logdir / "hw" / "worker0.pt.trace.json")
    write_trace(logdir / "plain" / "worker0.pt.trace.json", counter_workload())
    with tensorboard(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log") as base:
        yield base


def _band_pixels(page, y, half=12):
    """Pixels differing from the background in the canvas band [y - half, y + half] (CSS px),
    right of the gutter: what a counter row drew."""
    return page.evaluate("""([y, half]) => {
        const c = document.querySelector('.trace-canvas');
        const scale = c.width / c.getBoundingClientRect().width;
        const top = Math.max(0, Math.round((y - half) * scale)), h = Math.round(2 * half * scale);
        const left = Math.round(200 * scale);
        const d = c.getContext('2d').getImageData(left, top, c.width - left, h).data;
        const all = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const bg = [all[all.length - 4], all[all.length - 3], all[all.length - 2]];
        let painted = 0;
        for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - bg[0]) + Math.abs(d[i + 1] - bg[1]) + Math.abs(d[i + 2] - bg[2]) > 30) painted += 1;
        return painted;
    }""", [y, half])


def test_trace_view_draws_a_counter_track_under_its_device(page, counters_server, screenshot_dir):
    open_page(page, counters_server, run="hw", worker="worker0", span=1, view="trace")
    page.wait_for_selector(f"{BOX}[data-first-paint-ms]", state="attached")
    drawn = page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.rows()")
    header = next(i for i, r in enumerate(drawn) if r["type"] == "header" and r["label"] == "GPU 0")
    # right under GPU 0's header, before its stream: GPU 0's counters (names sorted)
    own = [r["label"] for r in drawn[header + 1:] if r["type"] == "counter"][:3]
    assert own == ["GPU 0 dram__bytes_read.sum", f"GPU 0 {PM_THROUGHPUT}", f"GPU 0 {PM_OCCUPANCY}"]
    assert drawn[header + 1]["type"] == "counter" and drawn[header + 4]["type"] == "track"
    # GPU 1 ran nothing here (no group): its counter is in the Counters group on top
    top = [r["label"] for r in drawn[:header] if r["type"] == "counter"]
    assert f"GPU 1 {PM_THROUGHPUT}" in top
    throughput = next(r for r in drawn if r.get("label") == f"GPU 0 {PM_THROUGHPUT}")
    assert _band_pixels(page, throughput["y"]) > 500
    screenshot(page, screenshot_dir, "counters_trace")


def test_overview_shows_sm_counters_per_step(page, counters_server, screenshot_dir):
    expected = rows(api(counters_server, "step_counters", run="hw", worker="worker0", span=1))
    open_page(page, counters_server, run="hw", worker="worker0", span=1, view="overview")
    table = page.locator("[data-table='step-counters']")
    table.wait_for()
    text = table.inner_text()
    assert "SM throughput" in text and "achieved occupancy" in text
    # each row names its metric as written (on hover)
    names = table.locator("[data-counter]").evaluate_all("els => els.map((e) => e.dataset.counter)")
    assert set(names) == {PM_THROUGHPUT, PM_OCCUPANCY}
    # step 2 of GPU 0: throughput 55 %, occupancy 15 % (worked out in helpers.counter_trace)
    assert "55" in text and "15" in text
    assert int(page.get_attribute("[data-table='step-counters'] .row-count", "data-row-count")) == len(expected) == 9
    screenshot(page, screenshot_dir, "counters_overview")
    open_page(page, counters_server, run="plain", worker="worker0", span=1, view="overview")
    page.wait_for_selector("[data-table='execution-summary']")
    assert page.locator("[data-table='step-counters']").count() == 0
