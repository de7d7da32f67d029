"""What spoils a new user's first hour, in Chromium: selections made on one profile leaking into
the next (the Trace window, the selected event, the Memory range, Diff's B), tables cut off or
hiding rows, pie legends that cannot name their slices, Diff comparing a GPU step with a CPU
one, and TensorBoard complaining about the page's Content-Security-Policy.

Every number checked comes from the API (or the sample's own files), never from the page's
code; screenshots land in the e2e screenshot directory at 1,280 and 1,920 px in both themes.
"""

import shutil
import urllib.parse

import pytest

from ..helpers import SAMPLES
from .conftest import READY, Watch, after, api, open_page, row_count, rows, screenshot, tensorboard

CPU = {"run": "cpu_cnn", "worker": "worker0", "span": 1}
GPU = {"run": "gpu_resnet50_v100", "worker": "worker0", "span": 1}
A100 = {"run": "gpu_a100_nccl", "worker": "rank0", "span": 1}
TIMELINE = "[data-testid=trace-timeline]"
SELECTIONS = ("trace_start_us", "trace_end_us", "trace_event", "start_us", "end_us", "run_b", "worker_b", "span_b")


def query(page):
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).items()}


def switch(page, control, value):
    """Pick `value` in a top-bar select and wait until the new profile's view is drawn."""
    after(page, lambda: page.select_option(f"[data-select={control}]", value))
    assert not page.query_selector(".status.error"), page.inner_text(".status.error")


def whole_trace_shown(page, server, q):
    page.wait_for_selector(f"{TIMELINE}[data-first-paint-ms]", state="attached")
    tracks = api(server, "timeline_tracks", **q)
    box = page.locator(TIMELINE)
    start, end = float(box.get_attribute("data-start-us")), float(box.get_attribute("data-end-us"))
    assert start <= tracks["start_us"] and end >= tracks["end_us"], (start, end, tracks["start_us"], tracks["end_us"])
    assert box.get_attribute("data-selected-event") in (None, "")
    page.wait_for_selector("[data-testid=trace-nothing-selected]")


@pytest.mark.parametrize("how", ["run", "span"])
def test_trace_window_and_selected_event_stay_with_their_profile(page, server, how):
    # An event id that does not exist in the GPU run, and a window of its first 8 ms: what the
    # user of issue 18 carried from the CPU run into every GPU run.
    found = api(server, "timeline_search", **CPU, q="aten::conv2d")["match"]
    assert found["event"] is not None
    open_page(page, server, **CPU, view="trace", trace_start_us=-400, trace_end_us=8260, trace_event=found["event"])
    page.wait_for_selector(f"{TIMELINE}[data-selected-event='{found['event']}']", state="attached")
    target = GPU if how == "run" else {**CPU, "span": 2}
    switch(page, "run" if how == "run" else "span", str(target["run"] if how == "run" else target["span"]))
    assert page.get_attribute("[data-current-view]", "data-current-view") == "trace"
    whole_trace_shown(page, server, target)
    assert "trace_event" not in query(page)
    # No request for the old event went out (a 404 would be a console error, checked at teardown).


def test_memory_range_stays_with_its_profile(page, server):
    open_page(page, server, **CPU, view="memory", start_us=2000, end_us=5000)
    label = page.locator("[data-testid=memory-range]")
    assert label.get_attribute("data-start-us") == "2000"
    switch(page, "run", GPU["run"])
    assert page.get_attribute("[data-current-view]", "data-current-view") == "memory"
    assert label.get_attribute("data-start-us") == "" and "start_us" not in query(page)
    device = next(d for d in api(server, "memory_devices", **GPU)["devices"] if d != "CPU")
    # The whole trace: every allocation event, and a curve with its peak.
    assert row_count(page, "memory-events") == len(api(server, "memory_events", **GPU, device=device)["rows"]) > 0
    assert page.inner_text("[data-field=peak_allocated]") != "—"
    assert not page.query_selector("text=No allocations in this range")


def test_diff_comparison_is_chosen_again_for_the_next_run(page, server):
    open_page(page, server, **CPU, view="diff", run_b="cpu_ddp_gloo", worker_b="worker1", span_b=2)
    assert page.input_value("[data-control=run_b]") == "cpu_ddp_gloo"
    switch(page, "run", A100["run"])
    # A single-span GPU run whose program no other sample runs: the old B (a CPU run) is not
    # kept, and no unrelated program is proposed in its place; the page says why.
    nothing = page.inner_text("[data-testid=diff-nothing-comparable]")
    assert "no other CUDA run runs the same program" in nothing and "Choose B above" in nothing
    assert page.input_value("[data-control=run_b]") != "cpu_ddp_gloo"
    assert not any(k in query(page) for k in ("run_b", "worker_b", "span_b"))


def test_every_kind_of_selection_is_dropped_when_the_run_changes_and_kept_otherwise(page, server):
    open_page(page, server, **CPU, view="memory", start_us=2000, end_us=5000, trace_start_us=1, trace_end_us=9,
              trace_event=3, run_b="cpu_cnn", group_by="name_shape", top=5)
    # Another tab of the same profile: the selections stay (they are this profile's).
    after(page, lambda: page.click("[role=tab][data-view=operator]"))
    assert all(k in query(page) for k in ("start_us", "trace_event", "run_b"))
    switch(page, "run", GPU["run"])
    q = query(page)
    assert not [k for k in SELECTIONS if k in q], q
    # View settings are not selections: they carry over.
    assert q["group_by"] == "name_shape" and q["top"] == "5"
    assert page.input_value("[data-control=group_by]") == "name_shape"


def test_csp_is_a_header_and_tensorboard_does_not_complain(browser, tmp_path):
    """The page's policy arrives as a header (TensorBoard logged "Requires default-src for
    Content-Security-Policy" on every page load while it was a <meta> tag)."""
    log = tmp_path / "tb.log"
    with tensorboard(SAMPLES, log) as base:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        watch = Watch(page)
        headers = {}
        page.on("response", lambda r: r.url.split("?")[0].endswith("/index.html") and headers.update(r.headers))
        try:
            open_page(page, base, **CPU)
            page.reload()
            page.wait_for_selector(READY, state="attached")
        finally:
            context.close()
        watch.check()
    assert "default-src 'self'" in headers["content-security-policy"]
    assert "Content-Security-Policy" not in log.read_text(errors="replace")


@pytest.fixture(scope="module")
def lone_gpu_server(tmp_path_factory):
    """A single-span GPU run beside CPU runs only: nothing comparable for it."""
    root = tmp_path_factory.mktemp("lone_gpu")
    for run in ("cpu_cnn", "gpu_a100_nccl"):
        shutil.copytree(SAMPLES / run, root / run)
    with tensorboard(root, root.parent / "lone_gpu.log") as base:
        yield base


def test_diff_says_when_nothing_is_comparable(browser, lone_gpu_server, screenshot_dir):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    watch = Watch(page)
    try:
        open_page(page, lone_gpu_server, **A100, view="diff")
        page.wait_for_selector("[data-testid=diff-nothing-comparable]")
        assert "CUDA" in page.inner_text("[data-testid=diff-nothing-comparable]")
        assert page.input_value("[data-control=run_b]") == ""
        assert not page.query_selector("[data-table=diff-operators]")
        screenshot(page, screenshot_dir, "diff_nothing_comparable")
        # Choosing B anyway compares them.
        after(page, lambda: page.select_option("[data-control=run_b]", "cpu_cnn"))
        assert row_count(page, "diff-operators") > 0
    finally:
        context.close()
    watch.check()


def test_diff_rows_are_sorted_by_a_shown_column_with_its_arrow(page, server):
    page.set_viewport_size({"width": 1280, "height": 900})
    # Two GPU runs (device columns to sort by); no sample runs A100's program again, so B is chosen.
    open_page(page, server, **A100, view="diff", run_b=GPU["run"], worker_b=GPU["worker"], span_b=GPU["span"])
    b = {c: page.input_value(f"[data-control={c}]") for c in ("run_b", "worker_b", "span_b")}
    assert b == {"run_b": GPU["run"], "worker_b": GPU["worker"], "span_b": str(GPU["span"])}
    ops = rows(api(server, "diff", **A100, **b)["operators"])
    th = page.locator("[data-table=diff-operators] th[data-sort-key=device_total_us_delta]")
    assert th.get_attribute("aria-sort") == "descending" and "▼" in th.inner_text()
    box = page.locator("[data-table=diff-operators] .table-scroll").bounding_box()
    head = th.bounding_box()
    assert box["x"] <= head["x"] and head["x"] + head["width"] <= box["x"] + box["width"], "the sorted column is off screen"
    # The order shown is by the size of the change, either sign.
    shown = page.eval_on_selector_all("[data-table=diff-operators] tbody tr td.first", "els => els.map((e) => e.textContent)")
    by_size = sorted(ops, key=lambda r: -abs(r["device_total_us_delta"]))
    sizes = {r["name"]: abs(r["device_total_us_delta"]) for r in ops}
    assert [sizes[n] for n in shown] == [abs(r["device_total_us_delta"]) for r in by_size[:len(shown)]]
    assert page.locator("[data-table=diff-operators] [data-sort-note=device_total_us_delta]").is_visible()


def test_tables_page_and_scroll_sideways_with_a_visible_rail(page, server, screenshot_dir):
    page.set_viewport_size({"width": 1280, "height": 900})
    open_page(page, server, **GPU, view="kernel", group_by="name_op")
    table = "[data-table=kernels]"
    total = len(api(server, "kernels", **GPU, group_by="name_op")["rows"])
    assert row_count(page, "kernels") == total > 50
    # Paging only: no inner vertical scroll box, no "show more".
    assert page.eval_on_selector(f"{table} .table-scroll", "el => getComputedStyle(el).maxHeight") == "none"
    assert page.locator(f"{table} tbody tr").count() == 50
    assert not page.query_selector("button.more")
    page.click(f"{table} .table-tools:not(.bottom) [data-page=next]")  # no request: the rows are here
    assert page.get_attribute(f"{table} tbody tr >> nth=0", "data-row-index") == "50"
    page.click(f"{table} .table-tools:not(.bottom) [data-page=last]")
    assert page.locator(f"{table} tbody tr").count() == total - 50 * ((total - 1) // 50)
    # Too wide for 1,280 px with every column shown (the toggle brings back those hidden to
    # fit): the rail is on screen (stuck to the window's bottom edge) while the table is, and
    # scrolling with it brings the last column into view.
    page.click(f"{table} [data-control=more-columns]")
    page.wait_for_function(f"() => document.querySelector('{table} .side-scroll').dataset.overflow === 'true'")
    page.locator(f"{table} thead").scroll_into_view_if_needed()
    rail = page.locator(f"{table} .scroll-rail")
    rail_box = rail.bounding_box()
    assert rail_box["height"] >= 10 and rail_box["y"] + rail_box["height"] <= 900 + 1, rail_box
    last = page.locator(f"{table} thead th").last
    scroller = page.locator(f"{table} .table-scroll")
    right = lambda: scroller.bounding_box()["x"] + scroller.bounding_box()["width"]  # noqa: E731
    assert last.bounding_box()["x"] > right()
    screenshot(page, screenshot_dir, "kernel_table_wide_1280_before")
    for _ in range(6):
        page.mouse.click(rail_box["x"] + rail_box["width"] - 4, rail_box["y"] + rail_box["height"] / 2)
    page.wait_for_function("() => { const b = document.querySelector('[data-table=kernels] .table-scroll'); return b.scrollLeft + b.clientWidth >= b.scrollWidth - 1; }")
    head = last.bounding_box()
    assert head["x"] + head["width"] <= right() + 1
    assert int(rail.get_attribute("data-scroll-left")) > 0


def test_every_table_of_every_view_pages_the_same_way(page, server):
    for view, q in (("operator", GPU), ("kernel", GPU), ("memory", GPU), ("module", CPU), ("overview", GPU), ("diff", CPU)):
        open_page(page, server, **q, view=view)
        for table in page.query_selector_all("[data-table]"):
            assert table.eval_on_selector(".table-scroll", "el => getComputedStyle(el).maxHeight") == "none"
            shown = len(table.query_selector_all("tbody tr:not(.details-row)"))
            count = int(table.query_selector(".row-count").get_attribute("data-row-count"))
            assert shown == min(count, 50), (view, table.get_attribute("data-table"), shown, count)
            assert bool(table.query_selector("[data-pager]")) == (count > 50)


def top_slices(values, n):
    """The pies' rule, worked out here: the n largest positive values, the rest as "Other"."""
    positive = sorted(((name, v) for name, v in values if v > 0), key=lambda s: -s[1])
    rest = sum(v for _, v in positive[n:])
    return [name for name, _ in positive[:n]] + (["Other"] if rest > 0 else [])


@pytest.mark.parametrize("width", [1280, 1920])
def test_pie_legends_name_every_slice(page, server, screenshot_dir, width):
    page.set_viewport_size({"width": width, "height": 900})
    open_page(page, server, **GPU, view="operator", top=10)
    table = rows(api(server, "operators", **GPU))
    for key, title in (("device_self_us", "Device self time"), ("host_total_us", "Host total time")):
        names = page.eval_on_selector_all(f"[data-legend='{title}'] .legend-name", "els => els.map((e) => e.textContent)")
        assert names == top_slices([(r["name"], r[key]) for r in table], 10)
        # Every entry is on screen with at least a line of its name, none paged away.
        heights = page.eval_on_selector_all(f"[data-legend='{title}'] .legend-name", "els => els.map((e) => e.getBoundingClientRect().height)")
        assert all(h >= 12 for h in heights), heights
    screenshot(page, screenshot_dir, f"operator_pies_{width}")
    # Kernels by launch configuration: the operator comes first, so same-named kernels differ.
    open_page(page, server, **GPU, view="kernel", group_by="name_op", top=20)
    kernels = rows(api(server, "kernels", **GPU, group_by="name_op"))
    names = page.eval_on_selector_all("[data-legend='Kernel time pie'] .legend-name", "els => els.map((e) => e.textContent)")
    expected = top_slices([(f"{r['operator']} · grid {r['grid']} block {r['block']} · {r['name']}", r["total_us"]) for r in kernels], 20)
    # kernel names in their short form (frontend/src/base/names.ts), which tells them apart too
    assert len(names) == len(expected) and len(set(names)) == len(names)
    for shown, full in zip(names, expected):
        if full == "Other":
            assert shown == "Other"
            continue
        config, kernel = full.rsplit(" · ", 1)
        assert shown.startswith(f"{config} · ") and len(shown) - len(config) <= len(kernel) + 3


def test_input_shapes_get_room(page, server):
    page.set_viewport_size({"width": 1280, "height": 900})
    open_page(page, server, **GPU, view="operator", group_by="name_shape")
    cell = page.locator("[data-table=operators] tbody tr >> nth=0").locator("td.wide")
    assert cell.bounding_box()["width"] >= 240  # was ~80 px, shapes wrapping to 6-7 lines


def test_span_names_are_not_cut_and_a_lone_rank_says_what_the_distributed_view_lacks(page, server):
    page.set_viewport_size({"width": 1280, "height": 900})
    open_page(page, server, **CPU)
    fits = page.eval_on_selector("[data-select=span]", """el => {
        const ctx = document.createElement('canvas').getContext('2d');
        ctx.font = getComputedStyle(el).font;
        return ctx.measureText(el.selectedOptions[0].textContent).width <= el.clientWidth;
    }""")
    assert fits
    assert not page.query_selector("[data-testid=missing-ranks]")
    # The A100 trace says it was rank 0 of 2; the run holds that one rank's trace only.
    world = api(server, "overview", **A100)["environment"]["distributed"]["world_size"]
    workers = next(r["workers"] for r in api(server, "runs")["runs"] if r["name"] == A100["run"])
    assert world > len(workers) == 1
    switch(page, "run", A100["run"])
    assert "Only this rank’s trace is in this run: the Distributed view shows its collectives" in page.inner_text(
        "[data-testid=missing-ranks]")
    # its collectives are a view of their own (issue 26), the Job view needs two ranks
    tabs = page.eval_on_selector_all("[role=tab]", "els => els.map((e) => e.dataset.view)")
    assert "distributed" in tabs and "job" not in tabs


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 1920])
def test_screenshots_of_the_changed_views(browser, server, screenshot_dir, width, theme):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    watch = Watch(page)
    try:
        for name, q in (("overview", {**A100, "view": "overview"}), ("operator", {**GPU, "view": "operator"}),
                        ("kernel", {**GPU, "view": "kernel", "group_by": "name_op"}), ("memory", {**GPU, "view": "memory"}),
                        ("diff", {**A100, "view": "diff"}), ("module", {**CPU, "view": "module"})):
            open_page(page, server, **q, theme=theme)
            assert not page.query_selector(".status.error")
            page.mouse.move(1, 1)
            page.screenshot(path=str(screenshot_dir / f"first_hour_{name}_{width}_{theme}.png"))
    finally:
        context.close()
    watch.check()
