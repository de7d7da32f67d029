"""The trace view in Chromium on a GPU and a CPU sample: the canvas timeline draws what the
timeline routes return, W/S/A/D and the wheel move the visible window, clicking an event shows
the details `timeline_event` gives, search with next/previous follows `timeline_search`, flow
arrows are drawn for a kernel, its launch and a forward op, and a shift+drag range shows the
totals of `timeline_summary`. Screenshots land in the e2e screenshot directory.

The page exposes what it drew on the timeline box (`data-start-us`, `data-end-us`,
`data-slices-drawn`, `data-arrows`, ...) and, on the canvas, `traceDebug.slices()` (the single
events on screen with the point at their middle) so a test can click one.
"""

import csv
import io
import math
import urllib.parse

import pytest

from ..helpers import BOX, PREFIX, canvas_origin, canvas_pixels, wait_url_window, window
from .conftest import after, api, format_duration, open_page, row_count, rows, screenshot

RUNS = {"gpu_resnet50_v100": "worker0", "cpu_cnn": "worker0"}


def q(run):
    return {"run": run, "worker": RUNS[run], "span": 1}


def on_screen(page):
    return page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.slices()")


def click_slice(page, hit):
    x0, y0 = canvas_origin(page)
    after(page, lambda: page.mouse.click(x0 + hit["x"], y0 + hit["y"]))


def shoot(page, screenshot_dir, name):
    """A screenshot without the hover tooltip (volatile)."""
    page.mouse.move(1, 1)
    page.wait_for_selector(".trace-tip", state="detached")
    screenshot(page, screenshot_dir, name)


def open_trace(page, server, run, **extra):
    open_page(page, server, **q(run), view="trace", **extra)
    assert page.get_attribute("[data-current-view]", "data-current-view") == "trace"
    assert not page.query_selector(".status.error"), page.inner_text(".status.error")
    page.wait_for_selector(f"{BOX}[data-first-paint-ms]", state="attached")


def zoom_to_step(page, server, run, index=1):
    steps = rows(api(server, "timeline_tracks", **q(run))["steps"])
    step = steps[min(index, len(steps) - 1)]
    after(page, lambda: page.select_option("[data-control=trace-step]", str(step["step"])))
    start, end = window(page)
    assert start < step["start_us"] and step["end_us"] < end and (end - start) < 1.1 * (step["end_us"] - step["start_us"])
    return step


@pytest.mark.parametrize("run", sorted(RUNS))
def test_timeline_draws_tracks_counters_and_slices(page, server, screenshot_dir, run):
    tracks = api(server, "timeline_tracks", **q(run))
    open_trace(page, server, run)
    tabs = page.eval_on_selector_all("[role=tab]", "els => els.map((e) => e.dataset.view)")
    assert "trace" in tabs
    painted, colours, total = canvas_pixels(page)
    assert painted > 0.15 * total and colours >= 12, (painted, colours, total)
    box = page.locator(BOX)
    assert int(box.get_attribute("data-slices-drawn")) > 20
    assert int(box.get_attribute("data-colours-drawn")) >= 5
    # The whole trace is shown first; the track names are the API's, grouped by process.
    start, end = window(page)
    assert start <= tracks["start_us"] and end >= tracks["end_us"]
    drawn = page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.rows()")
    names = [r["label"] for r in drawn if r["type"] == "track"]
    assert names == [r["thread"] for r in rows(tracks["tracks"])]
    headers = [r["label"] for r in drawn if r["type"] == "header"]
    assert set(r["process"] for r in rows(tracks["tracks"])) <= set(headers)
    counters = api(server, "timeline_counters", **q(run), start_us=start, end_us=end)["counters"]
    assert [r["label"] for r in drawn if r["type"] == "counter"] == [c["name"] for c in counters] and counters
    # Merged blocks (events shorter than a pixel) are drawn, and say so.
    assert int(box.get_attribute("data-blocks-drawn")) > 0
    shoot(page, screenshot_dir, f"{run}_trace")


@pytest.mark.parametrize("run", sorted(RUNS))
def test_keys_and_wheel_zoom_and_pan(page, server, run):
    open_trace(page, server, run)
    s0, e0 = window(page)
    after(page, lambda: page.keyboard.press("w"))
    s1, e1 = window(page)
    assert (e1 - s1) < 0.85 * (e0 - s0)
    after(page, lambda: page.keyboard.press("w"))
    s2, e2 = window(page)
    assert (e2 - s2) < 0.85 * (e1 - s1)
    assert wait_url_window(page) == pytest.approx((s2, e2), abs=0.01)
    after(page, lambda: page.keyboard.press("s"))
    s3, e3 = window(page)
    assert (e3 - s3) == pytest.approx(e1 - s1, rel=1e-6)
    # A/D pan by a share of the width, keeping it.
    after(page, lambda: page.keyboard.press("d"))
    s4, e4 = window(page)
    assert s4 > s3 and (e4 - s4) == pytest.approx(e3 - s3, rel=1e-6)
    after(page, lambda: page.keyboard.press("a"))
    after(page, lambda: page.keyboard.press("a"))
    s5, _ = window(page)
    assert s5 < s4
    # The wheel zooms around the cursor: the time under it stays put.
    x0, y0 = canvas_origin(page)
    canvas = page.locator(".trace-canvas").bounding_box()
    gutter = 230
    x = x0 + gutter + 0.3 * (canvas["width"] - gutter)
    page.mouse.move(x, y0 + canvas["height"] / 2)
    s6, e6 = window(page)
    under = s6 + 0.3 * (e6 - s6)
    after(page, lambda: page.mouse.wheel(0, -240))
    s7, e7 = window(page)
    assert (e7 - s7) < 0.7 * (e6 - s6)
    assert s7 + 0.3 * (e7 - s7) == pytest.approx(under, abs=(e6 - s6) * 0.01)
    after(page, lambda: page.mouse.wheel(0, 240))
    s8, e8 = window(page)
    assert (e8 - s8) > 1.3 * (e7 - s7)
    # Drag pans.
    y = y0 + canvas["height"] - 10

    def drag():
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x - 100, y, steps=5)
        page.mouse.up()

    after(page, drag)
    s9, e9 = window(page)
    assert s9 > s8 and (e9 - s9) == pytest.approx(e8 - s8, rel=1e-6)
    # Requests are for the window asked, at one pixel's resolution; a link reopens it.
    link_start, link_end = wait_url_window(page)
    page.goto("about:blank")
    page.goto(f"{server}{PREFIX}/index.html?" + urllib.parse.urlencode(
        {**q(run), "view": "trace", "trace_start_us": link_start, "trace_end_us": link_end}))
    page.wait_for_selector(f"{BOX}[data-first-paint-ms]", state="attached")
    assert window(page) == pytest.approx((link_start, link_end), abs=0.01)


@pytest.mark.parametrize("run", sorted(RUNS))
def test_click_event_shows_details_of_timeline_event(page, server, screenshot_dir, run):
    open_trace(page, server, run)
    zoom_to_step(page, server, run)
    kind = "kernel" if run.startswith("gpu") else "op"
    if kind == "kernel":  # kernels are a few pixels wide at a step's zoom
        for _ in range(4):
            after(page, lambda: page.keyboard.press("w"))
    candidates = [s for s in on_screen(page) if s["kind"] == kind and s["width"] > 6]
    assert candidates, ("no event of that kind on screen", page.evaluate("() => ({...document.querySelector('[data-testid=trace-timeline]').dataset})"), sorted(set((s["kind"], round(s["width"])) for s in on_screen(page)))[:50])
    # An op with a call stack on the CPU run, the longest kernel on the GPU run.
    hit = max(candidates, key=lambda s: s["width"])
    if run == "cpu_cnn":
        conv = [s for s in candidates if "conv2d" in s["name"]]
        hit = conv[0] if conv else hit
    click_slice(page, hit)
    expected = api(server, "timeline_event", **q(run), event=hit["event"])
    details = page.locator("[data-testid=trace-details]")
    assert details.get_attribute("data-event") == str(hit["event"])
    assert page.inner_text("[data-field=event-name]") == expected["name"]
    assert page.inner_text("[data-field=event-duration]") == format_duration(expected["dur_us"])
    assert page.get_attribute(BOX, "data-selected-event") == str(hit["event"])
    fields = page.eval_on_selector_all("[data-testid=trace-fields] dt", "els => els.map((e) => e.textContent)")
    assert set(expected["fields"]) <= set(fields)
    # One thread id throughout: the track named under Where is the pid/tid of All fields
    # (the model's own row number showed as "thread 0" there).
    assert "thread" not in expected["fields"]
    assert expected["fields"]["tid"] in page.inner_text("[data-field=event-where]")
    if expected.get("call_stack"):
        text = page.inner_text("[data-testid=trace-stack]")
        for frame in expected["call_stack"]:
            assert frame["text"] in text
    shoot(page, screenshot_dir, f"{run}_trace_details")
    # The launching operator links to the Operator view, searching for it.
    assert expected.get("operator"), expected
    link = page.locator("[data-link=operator]")
    assert link.inner_text() == expected["operator"]["name"]
    href = urllib.parse.parse_qs(urllib.parse.urlsplit(link.get_attribute("href")).query)
    assert href["view"] == ["operator"] and href["op_search"] == [expected["operator"]["name"]]
    after(page, lambda: link.click())
    assert page.get_attribute("[data-current-view]", "data-current-view") == "operator"
    assert page.input_value("[data-table=operators] input[type=search]") == expected["operator"]["name"]
    names = page.eval_on_selector_all("[data-table=operators] tbody tr td.first", "els => els.map((e) => e.textContent)")
    assert expected["operator"]["name"] in names and all(expected["operator"]["name"].lower() in n.lower() for n in names)


@pytest.mark.parametrize("run", sorted(RUNS))
def test_search_finds_centres_and_steps_through_matches(page, server, run):
    open_trace(page, server, run)
    after(page, lambda: page.keyboard.press("w"))
    page.fill("[data-control=trace-search]", "conv")
    after(page, lambda: page.press("[data-control=trace-search]", "Enter"))
    first = api(server, "timeline_search", **q(run), q="conv")
    assert first["total"] > 1
    status = page.locator("[data-testid=trace-search-status]")
    assert status.get_attribute("data-total") == str(first["total"])
    assert status.get_attribute("data-match") == str(first["match"]["event"])
    assert page.get_attribute(BOX, "data-selected-event") == str(first["match"]["event"])
    page.wait_for_selector(f"[data-testid=trace-details][data-event='{first['match']['event']}']")
    assert "conv" in page.inner_text("[data-field=event-name]").lower()
    # centred on the match (unless the window stops at the trace's edge)
    start, end = window(page)
    middle = first["match"]["ts_us"] + first["match"]["dur_us"] / 2
    assert start < first["match"]["ts_us"] and first["match"]["ts_us"] + first["match"]["dur_us"] < end
    tracks = api(server, "timeline_tracks", **q(run))
    at_edge = start <= tracks["start_us"] or end >= tracks["end_us"]
    assert at_edge or abs((start + end) / 2 - middle) < 0.01 * (end - start)
    # next: the following match in time order; previous: back to the first.
    after(page, lambda: page.click("[data-control=trace-next]"))
    second = first["results"][1]
    assert status.get_attribute("data-match") == str(second["event"])
    assert second["ts_us"] >= first["match"]["ts_us"]
    assert page.get_attribute(BOX, "data-selected-event") == str(second["event"])
    after(page, lambda: page.click("[data-control=trace-prev]"))
    assert status.get_attribute("data-match") == str(first["match"]["event"])
    # previous from the first match wraps around to the last one (the server's rule).
    after(page, lambda: page.click("[data-control=trace-prev]"))
    last = api(server, "timeline_search", **q(run), q="conv", after_us=first["match"]["ts_us"], direction="prev")
    assert status.get_attribute("data-match") == str(last["match"]["event"])
    start, end = window(page)
    assert start <= last["match"]["ts_us"] <= end


def test_flow_arrows_for_a_kernel_and_its_launch(page, server, screenshot_dir):
    run = "gpu_resnet50_v100"
    open_trace(page, server, run)
    zoom_to_step(page, server, run)
    for _ in range(4):
        after(page, lambda: page.keyboard.press("w"))
    kernel = max((s for s in on_screen(page) if s["kind"] == "kernel"), key=lambda s: s["width"])
    flows = api(server, "timeline_flows", **q(run), event=kernel["event"])["flows"]
    assert flows and flows[0]["kind"] == "launch"
    click_slice(page, kernel)
    page.wait_for_selector("[data-testid=trace-flows]")
    assert int(page.get_attribute(BOX, "data-arrows")) == len(flows)
    shoot(page, screenshot_dir, f"{run}_trace_flows")
    # Select the launch through the flow list: its arrow is drawn too.
    launch = flows[0]["from"]
    after(page, lambda: page.click("[data-testid=trace-flows] button"))
    assert page.get_attribute(BOX, "data-selected-event") == str(launch["event"])
    page.wait_for_selector(f"[data-testid=trace-details][data-event='{launch['event']}']")
    page.wait_for_selector("[data-testid=trace-flows]")
    back = api(server, "timeline_flows", **q(run), event=launch["event"])["flows"]
    assert int(page.get_attribute(BOX, "data-arrows")) == len(back) >= 1
    assert "launch" in page.inner_text("[data-field=event-name]").lower() or "cuda" in page.inner_text("[data-field=event-name]").lower()


def test_forward_backward_arrows_on_the_cpu_run(page, server):
    run = "cpu_cnn"
    open_trace(page, server, run)
    zoom_to_step(page, server, run, index=0)
    for hit in sorted((s for s in on_screen(page) if s["kind"] == "op"), key=lambda s: -s["width"]):
        flows = api(server, "timeline_flows", **q(run), event=hit["event"])["flows"]
        if flows:
            break
    else:
        pytest.fail("no op on screen has a forward/backward flow")
    click_slice(page, hit)
    page.wait_for_selector("[data-testid=trace-flows]")
    assert {f["kind"] for f in flows} == {"fwdbwd"}
    assert int(page.get_attribute(BOX, "data-arrows")) == len(flows)


def test_call_stack_frames_jump_to_source_inside_vscode(page, server):
    run = "cpu_cnn"
    open_trace(page, server, run, vscode=1)
    zoom_to_step(page, server, run)
    hit = next(s for s in on_screen(page) if "conv2d" in s["name"] and s["kind"] == "op")
    click_slice(page, hit)
    stack = api(server, "timeline_event", **q(run), event=hit["event"])["call_stack"]
    linked = [f for f in stack if f["file"] and f["line"] is not None]
    links = page.locator("[data-testid=trace-stack] a.source-link")
    assert links.count() == len(linked) > 0
    # The absolute path the server found (torch/... under site-packages), else the file as written.
    assert links.first.get_attribute("data-file") == (linked[0]["path"] or linked[0]["file"])
    assert any(f["path"] for f in linked)
    assert links.first.get_attribute("data-line") == str(linked[0]["line"])


def parse_csv(text):
    reader = list(csv.reader(io.StringIO(text)))
    return reader[0], reader[1:]


@pytest.mark.parametrize("run", sorted(RUNS))
def test_box_select_shows_the_totals_of_timeline_summary(page, server, screenshot_dir, run):
    open_trace(page, server, run)
    zoom_to_step(page, server, run)
    x0, y0 = canvas_origin(page)
    canvas = page.locator(".trace-canvas").bounding_box()
    drawn = page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.rows()")
    track_rows = [r for r in drawn if r["type"] == "track"]
    top, bottom = track_rows[0]["y"], track_rows[-1]["y"] if len(track_rows) > 1 else track_rows[0]["y"] + 5
    gutter = 230
    xa, xb = x0 + gutter + 0.2 * (canvas["width"] - gutter), x0 + gutter + 0.6 * (canvas["width"] - gutter)

    def box_select():
        page.keyboard.down("Shift")
        page.mouse.move(xa, y0 + top)
        page.mouse.down()
        page.mouse.move((xa + xb) / 2, y0 + bottom, steps=4)
        page.mouse.move(xb, y0 + bottom, steps=4)
        page.mouse.up()
        page.keyboard.up("Shift")

    after(page, box_select)
    label = page.locator("[data-testid=trace-range]")
    start, end = float(label.get_attribute("data-start-us")), float(label.get_attribute("data-end-us"))
    s, e = window(page)
    assert s + 0.19 * (e - s) < start < end < s + 0.61 * (e - s)
    params = {**q(run), "start_us": start, "end_us": end}
    if label.get_attribute("data-tracks"):
        params["tracks"] = label.get_attribute("data-tracks")
    summary = rows(api(server, "timeline_summary", **params))
    assert summary and row_count(page, "trace-summary") == len(summary)
    first = page.locator("[data-table=trace-summary] tbody tr").first.inner_text()
    top_row = max(summary, key=lambda r: r["total_us"])
    assert top_row["name"] in first and format_duration(top_row["total_us"]) in first
    page_totals = page.eval_on_selector_all("[data-table=trace-summary] tbody tr td:nth-child(4)", "els => els.map((e) => e.textContent)")
    assert page_totals[:20] == [format_duration(r["total_us"]) for r in sorted(summary, key=lambda r: -r["total_us"])][:20]
    # The range is drawn, the CSV is the route's CSV.
    with page.expect_download() as info:
        page.click("[data-table=trace-summary] button.csv")
    got = open(info.value.path(), encoding="utf-8").read()
    expected = api(server, "timeline_summary", raw=True, **params, format="csv").decode()
    header_got, rows_got = parse_csv(got)
    header_expected, rows_expected = parse_csv(expected)
    assert header_got == header_expected and len(rows_got) == len(rows_expected)
    key = header_expected.index("total_us")
    for g, x in zip(sorted(rows_got, key=lambda r: -float(r[key])), sorted(rows_expected, key=lambda r: -float(r[key]))):
        assert g[0] == x[0] and math.isclose(float(g[key]), float(x[key]), rel_tol=1e-9, abs_tol=1e-9)
    shoot(page, screenshot_dir, f"{run}_trace_range")


def test_collapse_a_process_and_download_the_trace(page, server):
    run = "gpu_resnet50_v100"
    open_trace(page, server, run)
    drawn = page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.rows()")
    header = next(r for r in drawn if r["type"] == "header" and r["label"] != "Counters")
    x0, y0 = canvas_origin(page)
    after(page, lambda: page.mouse.click(x0 + 40, y0 + header["y"]))
    after_rows = page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.rows()")
    assert next(r for r in after_rows if r["label"] == header["label"])["collapsed"]
    assert len([r for r in after_rows if r["type"] == "track"]) < len([r for r in drawn if r["type"] == "track"])
    # the next requests ask for the open tracks only
    assert any("tracks=" in u for u in page.watch.requests if "timeline_slices" in u)
    href = page.get_attribute("[data-link=trace-file]", "href")
    assert "trace_file" in href and "run=gpu_resnet50_v100" in href
    body = page.evaluate("async (u) => (await fetch(u)).arrayBuffer().then((b) => b.byteLength)", href)
    assert body == len(api(server, "trace_file", raw=True, **q(run)))
    assert "ui.perfetto.dev" in page.inner_text(".trace-help")


def test_dark_theme(browser, server, screenshot_dir):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    try:
        open_trace(page, server, "gpu_resnet50_v100")
        painted, colours, total = canvas_pixels(page)
        assert painted > 0.1 * total and colours >= 12
        background = page.evaluate("""() => { const d = document.querySelector('.trace-canvas').getContext('2d')
            .getImageData(2, 300, 1, 1).data; return [d[0], d[1], d[2]]; }""")
        assert sum(background) < 3 * 80, background
        shoot(page, screenshot_dir, "gpu_resnet50_v100_trace_dark")
    finally:
        context.close()


def test_python_frames_can_be_hidden_and_the_choice_is_kept_in_the_url(page, server, screenshot_dir):
    run = "cpu_cnn"
    python_tracks = [r["thread"] for r in rows(api(server, "timeline_tracks", **q(run))["tracks"]) if r["kind"] == "python"]
    assert python_tracks  # the sample is recorded with with_stack=True
    open_trace(page, server, run)

    def drawn_tracks():
        return [r["label"] for r in page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.rows()")
                if r["type"] == "track"]
    shown = drawn_tracks()
    assert set(python_tracks) <= set(shown)
    after(page, lambda: page.uncheck("[data-control=trace-python]"))
    hidden = drawn_tracks()
    assert hidden == [t for t in shown if t not in python_tracks] and hidden
    assert "trace_python=0" in page.url
    shoot(page, screenshot_dir, f"{run}_trace_without_python")
    # a link with the choice opens the same way; ticking the box brings the tracks back
    open_page(page, server, **q(run), view="trace", trace_python=0)
    page.wait_for_selector(f"{BOX}[data-first-paint-ms]", state="attached")
    assert drawn_tracks() == hidden and not page.is_checked("[data-control=trace-python]")
    after(page, lambda: page.check("[data-control=trace-python]"))
    assert drawn_tracks() == shown and "trace_python" not in page.url


def test_no_python_frames_toggle_without_python_frames(page, server):
    run = "gpu_resnet50_v100"
    assert not [r for r in rows(api(server, "timeline_tracks", **q(run))["tracks"]) if r["kind"] == "python"]
    open_trace(page, server, run)
    assert page.query_selector("[data-control=trace-python]") is None
