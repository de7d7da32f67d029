"""The page explains itself (issue 26), in Chromium on the bundled samples: kernel names a
reader can tell apart with the full name a click away, every column header and GPU metric
defined by its table declaration's own words, and tables that fit. Each test saves a
screenshot; look at them."""

import shutil

import pytest

from tb_plugin.openapi_gen import component, declared_tables

from ..helpers import SAMPLES
from .conftest import after, api, charts_drawn, full_kernel_name, open_page, rows, tensorboard

H100 = {"run": "gpu_h100_compiled", "worker": "worker0", "span": 1}


def declared_docs(table_name):
    """{column: the header definition the page must show}: the declaration's meaning with its
    unit, as the OpenAPI component writes it (tb_plugin/openapi_gen.py)."""
    cells = component(declared_tables()[table_name])["properties"]["rows"]["items"]["prefixItems"]
    return {cell["title"]: cell["description"] for cell in cells}


def test_kernel_names_differ_where_the_kernels_do_and_the_full_name_is_a_click_away(page, server, screenshot_dir):
    summary = rows(api(server, "kernel_launch_summary", **H100))
    open_page(page, server, **H100, view="gpu_idle")
    table = page.locator("[data-table=kernel-launch-summary]")
    shown = table.locator("tbody tr .kernel-name")
    texts = [t.removeprefix("▸ ") for t in shown.all_inner_texts()]
    full = [full_kernel_name(row) for row in table.locator("tbody tr").all()]
    assert len(texts) == min(len(summary), 50) and set(full) <= {r["name"] for r in summary}
    # as many different names on the page as different kernels; a C++ name in at most half its length
    assert len(set(texts)) == len(set(full)), sorted(texts)
    assert all(t == f or len(t) <= len(f) / 2 for t, f in zip(texts, full)), texts
    elementwise = [t for t, f in zip(texts, full) if "vectorized_elementwise_kernel" in f]
    assert len(elementwise) >= 5 and len(set(elementwise)) == len(elementwise)
    # one click shows the whole demangled name in place
    toggle = table.locator("[data-kernel-name]").first
    name = toggle.get_attribute("data-kernel-name")
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"
    assert table.locator(".kernel-name-full").first.inner_text() == name
    table.screenshot(path=str(screenshot_dir / "readable_kernel_names.png"))


def test_fusion_candidates_and_kernel_tables_shorten_every_kernel(page, server):
    sequences = rows(api(server, "kernel_sequences", **H100, length=3, top=50))
    open_page(page, server, **H100, view="gpu_idle")
    cell = page.locator("[data-table=kernel-sequences] tbody tr").first.locator(".kernel-name")
    assert " → " in cell.inner_text() and "void " not in cell.inner_text()
    assert len(cell.inner_text()) < len(sequences[0]["sequence"]) / 2
    open_page(page, server, **H100, view="kernel")
    names = page.locator("[data-table=kernels] tbody .kernel-name").all_inner_texts()
    assert names and not any(n.startswith("void ") or "at::native::" in n for n in names)


def test_every_header_and_gpu_metric_is_defined_by_its_declaration(page, server, screenshot_dir):
    open_page(page, server, **H100, view="gpu_idle")
    for table_id, declared in [("kernel-launch-summary", "kernel_launch_summary"), ("idle_time", "idle_time"),
                               ("kernel-sequences", "kernel_sequences")]:
        docs = declared_docs(declared)
        headers = page.locator(f"[data-table={table_id}] thead th[data-sort-key]")
        checked = 0
        for th in headers.all():
            key = th.get_attribute("data-sort-key")
            if key in docs:
                assert th.get_attribute("title").split("\n")[0] == docs[key], (table_id, key)
                checked += 1
        assert checked >= 4, table_id
    open_page(page, server, **H100, view="overview")
    gpu_docs = declared_docs("gpu_summary")
    terms = page.locator("[data-gpu] dt[data-definition]")
    assert terms.count() == 4
    for dt, column in zip(terms.all(), ["utilization_pct", "est_sm_efficiency_pct", "est_achieved_occupancy_pct",
                                        "tensor_core_kernel_pct"]):
        assert dt.get_attribute("title") == gpu_docs[column]
    step_docs = declared_docs("step_breakdown")
    categories = page.locator("[data-table=execution-summary] tbody td.first .defined")
    assert {c.get_attribute("title") for c in categories.all()} <= set(step_docs.values())
    assert categories.count() >= 3
    page.locator("[data-testid=overview]").screenshot(path=str(screenshot_dir / "readable_definitions.png"))


def test_a_cpu_only_run_lists_only_categories_with_time(page, server, screenshot_dir):
    q = {"run": "cpu_cnn", "worker": "worker0", "span": 1}
    summary = rows(api(server, "overview", **q)["step_summary"])
    with_time = [r for r in summary if r["mean_us"] != 0]
    assert len(with_time) < len(summary)  # the CPU run has device categories at 0
    open_page(page, server, **q)
    shown = page.locator("[data-table=execution-summary] tbody tr")
    assert shown.count() == len(with_time)
    assert "0 µs" not in page.inner_text("[data-table=execution-summary] tbody")
    headers = page.locator("[data-table=execution-summary] thead th").all_inner_texts()
    assert any(h.startswith("Mean time") for h in headers)
    page.locator("[data-table=execution-summary]").screenshot(path=str(screenshot_dir / "readable_cpu_summary.png"))


def test_the_page_gets_its_tables_gzipped(page, server):
    encodings = {}
    page.on("response", lambda r: "/kernel_launch_summary?" in r.url and encodings.update(
        {r.url: (r.status, r.all_headers().get("content-encoding"))}))
    open_page(page, server, **H100, view="gpu_idle")
    assert encodings and set(encodings.values()) == {(200, "gzip")}
    # and the page rendered what the compressed replies held
    assert page.locator("[data-table=kernel-launch-summary] tbody tr").count() == 50


def test_a_single_rank_nccl_run_has_a_distributed_tab(page, server, screenshot_dir):
    q = {"run": "gpu_h100_eager_nccl", "worker": "worker0", "span": 1}
    collectives = rows(api(server, "distributed", run=q["run"], span=1, table="collectives"))
    # one rank: the collectives are listed, and each says why it has no bandwidth (issue 24)
    assert collectives and all(r["algbw_gbps"] is None and r["no_bandwidth_reason"] for r in collectives)
    open_page(page, server, **q)
    tabs = page.eval_on_selector_all("[role=tab]", "els => els.map((e) => e.dataset.view)")
    assert "distributed" in tabs and "job" not in tabs
    open_page(page, server, **q, view="distributed")
    table = page.locator("[data-table=collectives]")
    assert table.locator("tbody tr").count() == len(collectives)
    assert "all_reduce" in table.inner_text()
    more = table.locator("[data-control=more-columns]")
    if more.count():  # the reasons are long text: behind the toggle when the window is narrow
        more.click()
    # each reason shown, whole or cut in the middle with the whole text a click away
    shown = table.inner_text() + "\n".join(table.locator("[data-long-text]").evaluate_all("els => els.map((e) => e.dataset.longText)"))
    assert all(r["no_bandwidth_reason"] in shown for r in collectives)
    page.locator("[data-testid=distributed]").screenshot(path=str(screenshot_dir / "readable_single_rank_distributed.png"))


@pytest.fixture(scope="module")
def broken_server(tmp_path_factory):
    """The CPU sample beside a run whose only trace is cut short."""
    root = tmp_path_factory.mktemp("broken")
    shutil.copytree(SAMPLES / "cpu_cnn", root / "cpu_cnn")
    (root / "cut").mkdir()
    (root / "cut" / "worker0.pt.trace.json").write_bytes(b'{"traceEvents": [{"ph": "X", "name": "a"')
    with tensorboard(root, root.parent / "broken.log") as base:
        yield base


def test_a_failed_trace_is_not_counted_as_loaded(browser, broken_server, screenshot_dir):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        open_page(page, broken_server, run="cut")
        item = page.locator("[data-run=cut]")
        item.locator(".run-error").wait_for()
        assert "0/1 loaded" in item.inner_text() and "1/1" not in item.inner_text()
        cut = next(r for r in api(broken_server, "runs")["runs"] if r["name"] == "cut")
        assert (cut["loaded"], cut["files"], len(cut["errors"])) == (0, 1, 1)
        item.screenshot(path=str(screenshot_dir / "readable_failed_trace.png"))
    finally:
        context.close()


def test_clicking_a_run_low_in_the_list_shows_its_tabs(page, server, screenshot_dir):
    page.set_viewport_size({"width": 1280, "height": 420})
    open_page(page, server, run="cpu_cnn")
    last = page.locator(".run-list li").last
    last.scroll_into_view_if_needed()
    assert page.evaluate("window.scrollY") > 0
    name = last.get_attribute("data-run")
    after(page, lambda: last.locator(".run-name").click())
    page.wait_for_selector("[data-current-view]")
    assert page.evaluate("window.scrollY") == 0
    box = page.locator("[role=tablist]").bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 420
    assert f"run={name}" in page.url
    page.screenshot(path=str(screenshot_dir / "readable_run_click.png"))


def test_ranks_mode_says_how_clock_offset_and_shift_differ(page, server):
    open_page(page, server, run="cpu_ddp_gloo", worker="worker0", span=1, view="trace", trace_ranks="all")
    docs = declared_docs("timeline_ranks")
    text = page.inner_text("[data-testid=offset-vs-shift]")
    assert f"Clock offset: {docs['offset_us']}" in text and f"Shift: {docs['shift_us']}" in text


def test_compiled_kernels_are_labelled_by_origin(page, server, screenshot_dir):
    kernels = rows(api(server, "compiled", **H100, table="kernels"))
    open_page(page, server, **H100, view="compiled")
    table = page.locator("[data-table=compiled-kernels]")
    headers = table.locator("thead th").all_inner_texts()
    column = next(i for i, h in enumerate(headers) if h.startswith("Origin"))
    shown = {}
    for row in table.locator("tbody tr").all():
        shown[full_kernel_name(row)] = row.locator("td").nth(column).inner_text()
    assert shown == {r["kernel"]: r["origin"] for r in kernels[:50]}
    assert {"Inductor (Triton)", "cuBLAS", "ATen"} <= set(shown.values())
    table.screenshot(path=str(screenshot_dir / "readable_compiled_origin.png"))


def test_pies_have_legends_and_charts_say_mean_or_total(page, server, screenshot_dir):
    open_page(page, server, **H100, view="compiled")
    legend = page.locator("[data-legend='Compiled vs eager'] li")
    assert [t.split("\n")[0] for t in legend.all_inner_texts()] == ["Compiled", "Eager"]
    open_page(page, server, **H100, view="gpu_idle")
    step = rows(api(server, "steps", **H100))[0]["step"]
    categories = [r for r in rows(api(server, "critical_path", **H100, step=step, table="categories")) if r["time_us"] > 0]
    path_legend = page.locator("[data-legend='Critical path categories'] li")
    assert path_legend.count() == len(categories) > 1
    page.locator("[data-legend='Critical path categories']").screenshot(path=str(screenshot_dir / "readable_path_legend.png"))
    open_page(page, server, run="cpu_ddp_gloo", worker="worker0", span=1, view="distributed")
    titles = page.locator("[data-testid=distributed] .card > h2").all_inner_texts()
    assert "Computation / communication overlap per worker (mean per step)" in titles
    assert "Collectives: data transfer vs synchronizing (summed over the trace)" in titles
    page.locator("[data-testid=distributed] .grid.two").first.screenshot(path=str(screenshot_dir / "readable_distributed_charts.png"))


def test_lightning_chart_names_every_hook_and_time_axes_keep_one_unit(page, server, screenshot_dir):
    q = {"run": "cpu_lightning", "worker": "worker0", "span": 1}
    hooks = rows(api(server, "lightning", **q))
    open_page(page, server, **q, view="lightning")
    assert charts_drawn(page)["Time per Lightning hook"] > 2000
    page.locator("[data-chart='Time per Lightning hook']").screenshot(path=str(screenshot_dir / "readable_lightning_hooks.png"))
    assert len(hooks) >= 15
    open_page(page, server, **H100)
    page.locator("[data-testid=overview] .card", has_text="Step time breakdown").screenshot(
        path=str(screenshot_dir / "readable_step_axis.png"))


def test_memory_range_of_a_trace_without_addresses_lists_allocations_made_in_it(page, server, screenshot_dir):
    q = {"run": "gpu_resnet50_v100", "worker": "worker0", "span": 1}
    start, end = 314_000, 576_000
    everything = rows(api(server, "memory_events", **q, device="GPU0"))
    in_range = rows(api(server, "memory_events", **q, device="GPU0", start_us=start, end_us=end))
    assert not any(r["free_known"] for r in everything)
    assert 0 < len(in_range) < len([r for r in everything if r["alloc_us"] <= end])
    assert all(start <= r["alloc_us"] <= end for r in in_range)
    open_page(page, server, **q, view="memory", device="GPU0", start_us=start, end_us=end)
    assert int(page.get_attribute("[data-table=memory-events] .row-count", "data-row-count")) == len(in_range)
    first = page.locator("[data-table=memory-events] tbody tr").first.inner_text()
    assert "unknown" in first
    note = page.inner_text("[data-testid=memory-no-addresses]")
    assert "a selected range lists the allocations made in it" in note
    page.locator("[data-testid=memory-no-addresses]").screenshot(path=str(screenshot_dir / "readable_memory_no_addr.png"))


@pytest.mark.parametrize("run", ["gpu_h100_compiled", "gpu_h100_eager_nccl"])
def test_opening_a_critical_path_scrolls_its_tracks_into_view(page, server, screenshot_dir, run):
    """torch 2.x traces start with a background thread's Python frames (`threading._bootstrap`,
    14 lanes): the path's first track sits below them."""
    q = {"run": run, "worker": "worker0", "span": 1}
    page.set_viewport_size({"width": 1280, "height": 600})
    step = rows(api(server, "steps", **q))[0]["step"]
    path_tracks = {r["track"] for r in rows(api(server, "timeline_critical_path", **q, step=step))}
    tracks = rows(api(server, "timeline_tracks", **q)["tracks"])
    assert tracks[0]["kind"] != "thread" or tracks[1]["kind"] == "python"  # the Python frames come first
    open_page(page, server, **q, view="trace", trace_path=step)
    page.wait_for_function(
        """(step) => { const d = document.querySelector('[data-testid=trace-timeline]')?.dataset;
            return !!d && d.pathStep === step && Number(d.pathSegmentsDrawn) > 0; }""", arg=str(step))
    page.wait_for_timeout(300)
    scrolled = page.evaluate("() => document.querySelector('.trace-scroll').scrollTop")
    shown = page.evaluate("() => document.querySelector('.trace-canvas').traceDebug.path()")
    assert scrolled > 0
    assert min(path_tracks) in {s["track"] for s in shown}, (scrolled, shown[:3])
    page.locator("[data-testid=trace-timeline]").screenshot(path=str(screenshot_dir / f"readable_path_in_view_{run}.png"))


def test_recommendations_quote_short_kernel_names_link_the_docs_and_land_on_their_panel(page, server, screenshot_dir):
    recs = {r["id"]: r for r in api(server, "overview", **H100)["recommendations"]}
    fusion = recs["fusion_candidate"]
    assert len(fusion["evidence"]["kernels"]) == 3 and all(k in fusion["text"] for k in fusion["evidence"]["kernels"])
    open_page(page, server, **H100)
    block = page.locator("[data-recommendation=fusion_candidate]")
    assert "void at::native" not in block.inner_text() and "vectorized_elementwise_kernel<4, " in block.inner_text()
    assert block.locator(".kernel-name [data-kernel-name]").count() == 3
    # the text itself, without the saving and the condition tested that stand beside it
    beside = sum(len(block.locator(f"[data-field={field}]").inner_text()) for field in ("saving", "condition")
                 if block.locator(f"[data-field={field}]").count())
    assert len(block.inner_text()) - beside < len(fusion["text"]) / 2
    for rec in recs.values():
        assert page.get_attribute(f"[data-recommendation={rec['id']}] [data-control=recommendation-docs]", "href") == rec["docs"]
        assert rec["docs"].startswith("https://pytorch.org/")
    page.locator("[data-testid=overview] .card", has_text="Recommendations").screenshot(
        path=str(screenshot_dir / "readable_recommendations.png"))
    # each evidence link lands on its own panel, scrolled to and highlighted
    for rec_id, panel in [("fusion_candidate", "sequences"), ("launch_bound", "launches"), ("host_bound", "idle")]:
        open_page(page, server, **H100)
        after(page, lambda: page.click(f"[data-recommendation={rec_id}] [data-control=recommendation-evidence]"))
        target = page.locator(f"[data-current-view=gpu_idle] [data-panel={panel}]")
        page.wait_for_selector(f"[data-panel={panel}].landed")
        box = target.bounding_box()
        assert abs(box["y"]) < 5, (rec_id, box)  # its top at the window's top
        assert "panel=" not in page.url
        if rec_id == "fusion_candidate":
            page.screenshot(path=str(screenshot_dir / "readable_evidence_landed.png"))


def test_overview_links_to_how_each_number_is_computed(page, server):
    open_page(page, server, **H100)
    href = page.get_attribute("[data-control=definitions-link]", "href")
    spec = page.evaluate("async (href) => (await fetch(href)).text()", href)
    docs = declared_docs("gpu_summary")
    assert f'"description": "{docs["utilization_pct"]}"' in spec


@pytest.mark.parametrize("run, view, table", [("cpu_ddp_gloo", "distributed", "collectives"),
                                              ("gpu_h100_compiled", "compiled", "compiled-kernels")])
def test_wide_tables_scroll_sideways_inside_their_card(page, server, run, view, table):
    page.set_viewport_size({"width": 1280, "height": 900})
    open_page(page, server, run=run, worker="worker0", span=1, view=view)
    box = f"[data-table={table}]"
    card = page.locator("section.card", has=page.locator(box)).first.bounding_box()
    assert card["x"] + card["width"] <= 1280
    scroller = page.locator(f"{box} .table-scroll")
    if page.get_attribute(f"{box} .side-scroll", "data-overflow") == "true":
        scroller.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
    last = page.locator(f"{box} thead th").last.bounding_box()
    edge = scroller.bounding_box()
    assert edge["x"] <= last["x"] and last["x"] + last["width"] <= edge["x"] + edge["width"] + 1
    assert edge["x"] + edge["width"] <= card["x"] + card["width"]


def test_threads_with_only_idle_python_frames_start_collapsed(page, server, screenshot_dir):
    q = {"run": "gpu_h100_eager_nccl", "worker": "worker0", "span": 1}
    tracks = rows(api(server, "timeline_tracks", **q)["tracks"])
    working = {(t["pid"], t["tid"]) for t in tracks if t["kind"] == "thread"}
    idle = [t for t in tracks if t["kind"] == "python" and (t["pid"], t["tid"]) not in working]
    assert [t["thread"] for t in idle] == ["thread 0 · Python frames"] and idle[0]["lanes"] == 14
    open_page(page, server, **q, view="trace")
    debug = "() => document.querySelector('.trace-canvas').traceDebug.rows()"
    drawn = page.evaluate(debug)
    folded = next(r for r in drawn if r["label"] == idle[0]["thread"])
    assert folded["type"] == "header" and folded["collapsed"]
    # the working threads' Python frames stay open
    assert {r["label"] for r in drawn if r["type"] == "track"} >= {t["thread"] for t in tracks if t["kind"] == "python"} - {idle[0]["thread"]}
    page.locator("[data-testid=trace-timeline]").screenshot(path=str(screenshot_dir / "readable_idle_python_folded.png"))
    x0, y0 = page.locator(".trace-canvas").bounding_box()["x"], page.locator(".trace-canvas").bounding_box()["y"]
    after(page, lambda: page.mouse.click(x0 + 40, y0 + folded["y"]))
    opened = next(r for r in page.evaluate(debug) if r["label"] == idle[0]["thread"])
    assert opened["type"] == "track"


def test_critical_path_segments_name_kernels_like_the_kernel_tables(page, server):
    q = {"run": "gpu_resnet50_v100", "worker": "worker0", "span": 1}
    step = rows(api(server, "steps", **q))[0]["step"]
    kernels = {r["name"] for r in rows(api(server, "critical_path", **q, step=step)) if r["category"] == "kernel"}
    assert kernels
    open_page(page, server, **q, view="gpu_idle")
    shown = [full_kernel_name(row) for row in page.locator("[data-table=critical-path-segments] tbody tr").all()
             if row.locator(".kernel-name").count()]
    assert shown and set(shown) <= kernels
