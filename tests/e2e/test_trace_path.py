"""A step's critical path drawn in the Trace view, in Chromium on the ResNet-50 GPU sample:
opened from the GPU idle tab's critical-path panel, the Trace view frames the step and draws
every segment `timeline_critical_path` lists on the track it names, an arrow wherever the path
changes track, and a legend with `critical_path`'s time per category; hovering a segment
tells its category, duration and operator, clicking selects it; the URL reproduces the view;
the Trace view's own control picks a step's path or turns it off. Screenshots land in the e2e
screenshot directory.

The page says what it drew on the timeline box (`data-path-step`, `data-path-segments-drawn`,
`data-path-arrows-drawn`) and, on the canvas, `traceDebug.path()`: the path's segments on
screen with the point at their middle, so a test can hover one.
"""

import pytest

from ..helpers import BOX, canvas_origin, canvas_pixels, wait_url_window, window
from .conftest import after, api, format_duration, open_page, rows, screenshot

Q = {"run": "gpu_resnet50_v100", "worker": "worker0", "span": 1}


def drawn(page):
    box = page.locator(BOX)
    return box.get_attribute("data-path-step"), int(box.get_attribute("data-path-segments-drawn") or 0), \
        int(box.get_attribute("data-path-arrows-drawn") or 0)


def wait_drawn(page, step):
    page.wait_for_function(
        """(step) => { const d = document.querySelector('[data-testid=trace-timeline]')?.dataset;
            return !!d && d.pathStep === step && Number(d.pathSegmentsDrawn) > 0; }""", arg=str(step))


def on_screen(page):
    return page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.path()")


def track_changes(path):
    return sum(1 for a, b in zip(path, path[1:]) if a["track"] != b["track"])


def test_gpu_idle_opens_the_steps_critical_path_in_the_trace_view(page, server, screenshot_dir):
    step = rows(api(server, "steps", **Q))[0]["step"]
    path = rows(api(server, "timeline_critical_path", **Q, step=step))
    assert track_changes(path) >= 1, "the sample's path should reach the GPU from the CPU"
    open_page(page, server, **Q, view="gpu_idle")
    page.wait_for_selector("[data-table=critical-path-segments]")
    panel = page.locator("section.card", has=page.locator("[data-control=path-open-trace]"))
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(screenshot_dir / "gpu_idle_critical_path_panel.png"))
    after(page, lambda: page.click("[data-control=path-open-trace]"))
    page.wait_for_selector("[data-current-view=trace] [data-testid=trace-path]")
    wait_drawn(page, step)

    # the step framed, every segment of the path drawn on its track, an arrow per track change
    w = next(r for r in rows(api(server, "timeline_tracks", **Q)["steps"]) if r["step"] == step)
    start, end = window(page)
    assert start <= w["start_us"] and end >= w["end_us"] and end - start < 1.1 * (w["end_us"] - w["start_us"])
    _, segments_drawn, arrows_drawn = drawn(page)
    assert segments_drawn == len(path)
    assert arrows_drawn == track_changes(path)
    card = page.locator("[data-testid=trace-path]")
    assert int(card.get_attribute("data-segments")) == len(path)
    assert int(card.get_attribute("data-arrows")) == track_changes(path)
    visible = on_screen(page)
    assert visible and all(path[s["segment"]]["track"] == s["track"] for s in visible)
    assert {s["category"] for s in visible} >= {"kernel", "cpu"}

    # the legend: the time of each category on the path, as the server sums it
    categories = [r for r in rows(api(server, "critical_path", **Q, step=step, table="categories")) if r["time_us"] > 0]
    legend = page.locator("[data-testid=trace-path-legend] [data-category]")
    assert legend.count() == len(categories)
    for r in categories:
        assert format_duration(r["time_us"]) in page.locator(f"[data-testid=trace-path-legend] [data-category={r['category']}]").inner_text()

    # the canvas is drawn (not blank), then a screenshot to look at
    painted, colours, total = canvas_pixels(page)
    assert painted > 0.05 * total and colours > 8
    screenshot(page, screenshot_dir, "trace_critical_path")

    # hover the longest kernel on screen: its category, duration and operator
    kernel = max((s for s in visible if s["category"] == "kernel"), key=lambda s: s["width"])
    segment = path[kernel["segment"]]
    x0, y0 = canvas_origin(page)
    page.mouse.move(x0 + kernel["x"], y0 + kernel["y"])
    tip = page.locator(".trace-tip").inner_text()
    assert "Kernel" in tip and format_duration(segment["dur_us"]) in tip and segment["operator"] in tip
    # a click selects it: the card names it, and the URL keeps it
    after(page, lambda: page.mouse.click(x0 + kernel["x"], y0 + kernel["y"]))
    chosen = page.locator("[data-testid=trace-path-segment]")
    assert chosen.get_attribute("data-segment") == str(kernel["segment"])
    assert format_duration(segment["dur_us"]) in chosen.inner_text() and segment["operator"] in chosen.inner_text()
    page.wait_for_function("(k) => new URLSearchParams(location.search).get('trace_path_segment') === k", arg=str(kernel["segment"]))
    # the next segment along the path
    page.click("[data-control=trace-path-next]")
    page.wait_for_selector(f"[data-testid=trace-path-segment][data-segment='{kernel['segment'] + 1}']")
    assert page.get_attribute("[data-testid=trace-path-segment]", "data-category") == path[kernel["segment"] + 1]["category"]

    # a link reproduces the view: the same path and window
    start, end = wait_url_window(page)
    page.goto(page.url)
    wait_drawn(page, step)
    assert window(page) == pytest.approx((start, end), abs=0.01)
    assert drawn(page)[2] == arrows_drawn


def test_trace_view_control_picks_a_steps_path_or_turns_it_off(page, server, screenshot_dir):
    steps = rows(api(server, "steps", **Q))
    step = steps[-1]["step"]
    path = rows(api(server, "timeline_critical_path", **Q, step=step))
    open_page(page, server, **Q, view="trace")
    assert drawn(page) == ("", 0, 0)
    after(page, lambda: page.select_option("[data-control=trace-path]", str(step)))
    wait_drawn(page, step)
    assert drawn(page)[1:] == (len(path), track_changes(path))
    assert f"trace_path={step}" in page.url
    screenshot(page, screenshot_dir, "trace_critical_path_control")
    page.select_option("[data-control=trace-path]", "")
    page.wait_for_function("() => document.querySelector('[data-testid=trace-timeline]').dataset.pathStep === ''")
    assert drawn(page) == ("", 0, 0) and page.query_selector("[data-testid=trace-path]") is None
    assert "trace_path=" not in page.url


def test_stepping_along_the_path_brings_each_segments_track_into_view(page, server):
    """Stepping to a segment on another track scrolls that track into view: in a window 500 px
    high the timeline shows part of the sample's tracks; they are scrolled away from the
    target's track first (to the other end of the list), then ▶ lands on it and the segment is
    on screen."""
    step = rows(api(server, "steps", **Q))[0]["step"]
    path = rows(api(server, "timeline_critical_path", **Q, step=step))
    j = next(i for i in range(1, len(path)) if path[i]["track"] != path[i - 1]["track"] and path[i]["track"] >= 0)
    page.set_viewport_size({"width": 1400, "height": 500})
    open_page(page, server, **Q, view="trace", trace_path=step, trace_path_segment=j - 1)
    wait_drawn(page, step)
    target = path[j]["track"]
    rows_now = page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.rows()")
    y = next(r["y"] for r in rows_now if r.get("track") == target)
    # away from the target's track: to the bottom when it is in the upper half, else the top
    page.evaluate("""(down) => { const el = document.querySelector('.trace-scroll');
        el.scrollTop = down ? el.scrollHeight : 0; el.dispatchEvent(new Event('scroll')); }""",
                  y < page.evaluate("() => document.querySelector('.trace-scroll').scrollHeight") / 2)
    page.wait_for_function("(t) => !document.querySelector('.trace-canvas').traceDebug.path().some((s) => s.track === t)",
                           arg=target)
    page.click("[data-control=trace-path-next]")
    page.wait_for_selector(f"[data-testid=trace-path-segment][data-segment='{j}']")
    page.wait_for_function("(j) => document.querySelector('.trace-canvas').traceDebug.path().some((s) => s.segment === j)",
                           arg=j)
