"""The Trace view's ranks mode in Chromium on the 2-rank gloo sample: both ranks' groups on one
axis with the offsets `timeline_ranks` applies, a rank expanded into its own tracks, one of its
events' details from that rank's own trace, clock alignment switched off. Screenshots land in the e2e screenshot directory."""

import urllib.parse

from .conftest import after, api, format_duration, open_page, rows, screenshot

RUN = "cpu_ddp_gloo"
BOX = "[data-testid=trace-timeline]"


def drawn_rows(page):
    return page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.rows()")


def canvas_origin(page):
    box = page.locator(".trace-canvas").bounding_box()
    return box["x"], box["y"]


def wait_drawn(page):
    page.wait_for_function("(sel) => Number(document.querySelector(sel)?.dataset.blocksDrawn || 0) + "
                           "Number(document.querySelector(sel)?.dataset.slicesDrawn || 0) > 0", arg=BOX)


def test_all_ranks_on_one_axis_expand_and_unalign(page, server, screenshot_dir):
    open_page(page, server, run=RUN, worker="worker0", span=1, view="trace")
    # a run of several workers offers the ranks control; choosing "all" draws one group per rank
    after(page, lambda: page.select_option("[data-control=trace-ranks]", "all"))
    page.wait_for_selector("[data-testid=trace-ranks]")
    wait_drawn(page)
    assert page.get_attribute("[data-testid=trace-ranks]", "data-ranks") == "0,1"
    frame = api(server, "timeline_ranks", run=RUN, span=1, ranks="all")
    ranks = {r["rank"]: r for r in rows(frame["ranks"])}
    headers = [r for r in drawn_rows(page) if r["type"] == "header"]
    assert [h["label"] for h in headers] == [f"Rank {r} · {ranks[r]['worker']}" for r in (0, 1)]
    assert all(h["collapsed"] for h in headers)
    # the offsets the server applied are on the page, per rank
    table = page.locator("[data-table=trace-rank-offsets]")
    for rank in (0, 1):
        assert format_duration(ranks[rank]["offset_us"]) in table.inner_text()
    assert "align_clocks" not in page.url or "align_clocks=true" in page.url
    screenshot(page, screenshot_dir, f"{RUN}_trace_ranks_collapsed")

    # expanding rank 1 (click its header) loads its own tracks under its group
    x0, y0 = canvas_origin(page)
    after(page, lambda: page.mouse.click(x0 + 40, y0 + headers[1]["y"]))
    page.wait_for_function("() => document.querySelector('[data-testid=trace-ranks]').dataset.open === '1'")
    page.wait_for_function("() => document.querySelector('.trace-canvas').traceDebug.slices().length > 0")
    expanded = api(server, "timeline_ranks", run=RUN, span=1, ranks="all", expanded="1")
    own = [t for t in rows(expanded["tracks"]) if t["pid"] == "rank 1" and t["kind"] != "rank"]
    tracks = [r for r in drawn_rows(page) if r["type"] == "track"]
    assert {t["thread"] for t in own} <= {r["label"] for r in tracks}
    events = page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.slices()")
    stride = next(r["track"] for r in rows(frame["ranks"]) if r["rank"] == 1)
    assert all(e["track"] > stride for e in events)  # only rank 1 has its own events drawn
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)["trace_rank_open"] == ["1"]
    # clicking one of rank 1's events shows its details from rank 1's own trace
    hit = max(events, key=lambda e: e["width"])
    after(page, lambda: page.mouse.click(x0 + hit["x"], y0 + hit["y"]))
    page.wait_for_selector("[data-testid=trace-rank-selected][data-rank='1'] [data-testid=trace-details]")
    details = api(server, "timeline_event", run=RUN, worker=ranks[1]["worker"], span=1, event=hit["event"])
    assert page.inner_text("[data-field=event-name]") == details["name"]
    screenshot(page, screenshot_dir, f"{RUN}_trace_ranks_expanded")

    # without alignment the offsets are 0 and the page says so
    after(page, lambda: page.uncheck("[data-control=trace-align]"))
    page.wait_for_function("() => new URLSearchParams(location.search).get('align_clocks') === 'false'")
    raw = api(server, "timeline_ranks", run=RUN, span=1, ranks="all", align_clocks="false")
    assert all(r["offset_us"] == 0 for r in rows(raw["ranks"]))
    page.wait_for_function("(t) => document.querySelector('[data-table=trace-rank-offsets]').innerText.includes(t)",
                           arg=format_duration(rows(raw["ranks"])[1]["shift_us"]))


def test_pick_ranks_and_back_to_this_worker(page, server, screenshot_dir):
    open_page(page, server, run=RUN, worker="worker0", span=1, view="trace", trace_ranks="all")
    page.wait_for_selector("[data-testid=trace-ranks][data-ranks='0,1']")
    page.select_option("[data-control=trace-ranks]", "pick")
    page.fill("[data-control=trace-rank-list]", "1")
    after(page, lambda: page.press("[data-control=trace-rank-list]", "Enter"))
    page.wait_for_selector("[data-testid=trace-ranks][data-ranks='1']")
    headers = [r["label"] for r in drawn_rows(page) if r["type"] == "header"]
    assert headers == ["Rank 1 · worker1"]
    screenshot(page, screenshot_dir, f"{RUN}_trace_ranks_picked")
    # an unknown rank is refused with the job's ranks named
    page.fill("[data-control=trace-rank-list]", "5")
    page.press("[data-control=trace-rank-list]", "Enter")
    page.wait_for_function("() => document.body.innerText.includes('ranks: 0..1')")
    # that 404 is the answer expected (the browser logs every 404 as an error)
    page.watch.errors = [e for e in page.watch.errors if "status of 404" not in e or "ranks=5" not in e]
    after(page, lambda: page.select_option("[data-control=trace-ranks]", "this"))
    page.wait_for_selector("[data-testid=trace-ranks]", state="detached")
    assert "trace_ranks" not in page.url
    wait_drawn(page)
