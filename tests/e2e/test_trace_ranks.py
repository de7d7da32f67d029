"""The Trace view's ranks mode in Chromium on the 2-rank gloo sample: both ranks' groups on one
axis with the offsets `timeline_ranks` applies, a rank expanded into its own tracks, one of its
events' details from that rank's own trace, clock alignment switched off. Screenshots land in the e2e screenshot directory."""

import urllib.parse

from ..helpers import BOX, canvas_origin
from .conftest import after, api, format_duration, open_page, row_count, rows, screenshot

RUN = "cpu_ddp_gloo"


def drawn_rows(page):
    return page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.rows()")


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
    # choosing "pick" shows its default list first, which refills the box: wait for that
    after(page, lambda: page.select_option("[data-control=trace-ranks]", "pick"))
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


def test_counters_search_and_range_totals_over_expanded_ranks(page, server, screenshot_dir):
    """Rank 1 expanded: its counters sit in its group; a search finds its matches only and says
    rank 0 was not searched, until rank 0 is expanded from that note; a result click selects
    and centres it; a shift+drag sums the range over both ranks as the route does."""
    open_page(page, server, run=RUN, worker="worker0", span=1, view="trace", trace_ranks="all", trace_rank_open="1")
    page.wait_for_selector("[data-testid=trace-ranks][data-open='1']")
    wait_drawn(page)
    s, e = (float(page.get_attribute(BOX, a)) for a in ("data-start-us", "data-end-us"))
    series = api(server, "timeline_rank_counters", run=RUN, span=1, ranks="all", expanded="1", start_us=s, end_us=e,
                 points=10)["counters"]
    assert series and {c["rank"] for c in series} == {1}
    page.wait_for_function("() => document.querySelector('.trace-canvas').traceDebug.rows()"
                           ".some((r) => r.type === 'counter')")
    drawn = drawn_rows(page)
    headers = [i for i, r in enumerate(drawn) if r["type"] == "header"]
    rank1 = drawn[headers[1] + 1:]
    counters = [r for r in rank1 if r["type"] == "counter"]
    assert [r["label"] for r in counters] == [c["name"] for c in series]  # in rank 1's group, before its tracks
    assert rank1[:len(counters)] == counters and all(r["type"] != "counter" for r in drawn[:headers[1]])
    screenshot(page, screenshot_dir, f"{RUN}_trace_ranks_counters")

    # search: rank 1's matches, rank 0 named as not searched
    page.fill("[data-control=trace-search]", "gloo")
    after(page, lambda: page.press("[data-control=trace-search]", "Enter"))
    found = api(server, "timeline_rank_search", run=RUN, span=1, ranks="all", expanded="1", q="gloo")
    assert found["total"] > 0 and found["not_searched"] == [0]
    status = page.locator("[data-testid=trace-search-status]")
    page.wait_for_function("(t) => document.querySelector('[data-testid=trace-search-status]').dataset.total === t",
                           arg=str(found["total"]))
    assert page.get_attribute("[data-testid=trace-ranks-left-out]", "data-ranks") == "0"
    assert row_count(page, "trace-rank-matches") == len(found["results"])
    assert status.get_attribute("data-match") == f"1:{found['match']['event']}"

    # expanding rank 0 from the note searches both ranks
    after(page, lambda: page.click("[data-control=trace-expand-left-out]"))
    page.wait_for_selector("[data-testid=trace-ranks][data-open='0,1']")
    both = api(server, "timeline_rank_search", run=RUN, span=1, ranks="all", expanded="0,1", q="gloo")
    assert both["total"] > found["total"] and both["not_searched"] == []
    page.wait_for_function("(t) => document.querySelector('[data-testid=trace-search-status]').dataset.total === t",
                           arg=str(both["total"]))
    assert page.locator("[data-testid=trace-ranks-left-out]").count() == 0
    # shift+drag across the tracks in sight: the totals of the ranks they belong to, as the
    # route answers them
    x0, y0 = canvas_origin(page)
    box = page.locator(".trace-canvas").bounding_box()
    tracks = [r for r in drawn_rows(page) if r["type"] == "track" and 30 < r["y"] < box["height"] - 10]
    gutter = 230
    xa, xb = x0 + gutter + 0.2 * (box["width"] - gutter), x0 + gutter + 0.7 * (box["width"] - gutter)

    def box_select():
        page.keyboard.down("Shift")
        page.mouse.move(xa, y0 + tracks[0]["y"])
        page.mouse.down()
        page.mouse.move(xb, y0 + tracks[-1]["y"], steps=6)
        page.mouse.up()
        page.keyboard.up("Shift")

    after(page, box_select)
    label = page.locator("[data-testid=trace-range]")
    page.wait_for_function("(s) => new URLSearchParams(location.search).get('trace_range_start_us') === String("
                           "Math.round(Number(s) * 1000) / 1000)", arg=label.get_attribute("data-start-us"))
    params = {"run": RUN, "span": 1, "ranks": "all", "expanded": "0,1",
              "start_us": label.get_attribute("data-start-us"), "end_us": label.get_attribute("data-end-us")}
    if label.get_attribute("data-tracks"):
        params["tracks"] = label.get_attribute("data-tracks")
    summary = api(server, "timeline_rank_summary", **params)
    assert summary["ranks"] and summary["combined"]["rows"] and summary["not_summed"] == []
    page.wait_for_selector(f"[data-testid=trace-range-ranks][data-ranks='{','.join(map(str, summary['ranks']))}']")
    assert row_count(page, "trace-rank-summary") == len(summary["combined"]["rows"])
    assert row_count(page, "trace-rank-summary-by-rank") == len(summary["by_rank"]["rows"])
    top = max(rows(summary["combined"]), key=lambda r: r["total_us"])
    first = page.locator("[data-table=trace-rank-summary] tbody tr").first.inner_text()
    assert top["name"] in first and format_duration(top["total_us"]) in first
    with page.expect_download() as info:
        page.click("[data-table=trace-rank-summary] button.csv")
    got = open(info.value.path(), encoding="utf-8").read()
    expected = api(server, "timeline_rank_summary", raw=True, **params, table="combined", format="csv").decode()
    assert got.splitlines()[0] == expected.splitlines()[0] and len(got.splitlines()) == len(expected.splitlines())
    page.locator("[data-testid=trace-range]").scroll_into_view_if_needed()
    screenshot(page, screenshot_dir, f"{RUN}_trace_ranks_range")

    # a click on a result selects that rank's event and centres the window on it
    hit = both["results"][min(3, len(both["results"]) - 1)]
    after(page, lambda: page.locator("[data-control=trace-rank-match]").nth(both["results"].index(hit)).click())
    page.wait_for_selector(f"[data-testid=trace-rank-selected][data-rank='{hit['rank']}']")
    assert page.get_attribute(BOX, "data-selected-event") == str(hit["event"])
    s, e = (float(page.get_attribute(BOX, a)) for a in ("data-start-us", "data-end-us"))
    assert s <= hit["ts_us"] <= e
    assert format_duration(hit["ts_us"]) in page.locator("[data-table=trace-rank-matches]").inner_text()
    screenshot(page, screenshot_dir, f"{RUN}_trace_ranks_search")

