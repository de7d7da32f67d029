"""What people do on the page: group, search, sort, download CSV, expand call stacks, select a
memory range, reopen a link; and the page inside TensorBoard itself."""

import csv
import io
import math
import urllib.parse

from .conftest import READY, after, api, open_page, row_count, rows, screenshot

CPU = {"run": "cpu_cnn", "worker": "worker0", "span": 1}
GPU = {"run": "gpu_resnet50_v100", "worker": "worker0", "span": 1}


def parse_csv(text):
    reader = list(csv.reader(io.StringIO(text)))
    return reader[0], reader[1:]


def same_cell(a, b):
    if a == b:
        return True
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    except ValueError:
        return False


def assert_same_csv(got, expected):
    header_got, rows_got = parse_csv(got)
    header_expected, rows_expected = parse_csv(expected)
    assert header_got == header_expected
    assert len(rows_got) == len(rows_expected)
    for g, e in zip(rows_got, rows_expected):
        assert all(same_cell(x, y) for x, y in zip(g, e)) and len(g) == len(e), (g, e)


def download(page, table_id):
    with page.expect_download() as info:
        page.click(f"[data-table='{table_id}'] button.csv")
    return open(info.value.path(), encoding="utf-8").read()


def test_operator_group_by_search_sort(page, server):
    open_page(page, server, **CPU, view="operator")
    after(page, lambda: page.select_option("[data-control=group_by]", "name_shape"))
    assert "group_by=name_shape" in page.url
    by_shape = rows(api(server, "operators", **CPU, group_by="name_shape"))
    assert row_count(page, "operators") == len(by_shape)
    assert "Input shape" in page.inner_text("[data-table=operators] thead")

    page.fill("[data-table=operators] input[type=search]", "conv 16")
    expected = [r for r in by_shape if all(w in f"{r['name']}\0{r['input_shape']}".lower() for w in ("conv", "16"))]
    assert 0 < len(expected) < len(by_shape)
    assert row_count(page, "operators") == len(expected)

    page.click("[data-table=operators] th[data-sort-key=calls]")
    first = page.locator("[data-table=operators] tbody tr").first.inner_text()
    assert str(max(r["calls"] for r in expected)) in first
    assert page.get_attribute("[data-table=operators] th[data-sort-key=calls]", "aria-sort") == "descending"


def test_csv_download_is_the_api_csv_then_exactly_the_rows_shown(page, server):
    open_page(page, server, **CPU, view="operator")
    expected = api(server, "operators", raw=True, **CPU, format="csv").decode()
    got = download(page, "operators")
    # Same columns and rows as the route's CSV (the table is sorted by host self time, as is the API).
    header, api_rows = parse_csv(expected)
    _, got_rows = parse_csv(got)
    key = header.index("host_self_us")
    api_rows.sort(key=lambda r: -float(r[key]))
    assert_same_csv(got, "\n".join(",".join(f'"{c}"' if "," in c else c for c in r) for r in [header] + api_rows))

    page.fill("[data-table=operators] input[type=search]", "backward")
    page.click("[data-table=operators] th[data-sort-key=name]")
    got = download(page, "operators")
    names = [r[0] for r in parse_csv(got)[1]]
    shown = page.eval_on_selector_all("[data-table=operators] tbody tr td.first", "els => els.map((e) => e.textContent)")
    assert names == shown and len(names) == row_count(page, "operators") > 0
    assert all("backward" in n.lower() for n in names) and names == sorted(names, key=str.lower)


def test_kernel_group_by_launch_config_and_search_by_operator(page, server):
    open_page(page, server, **GPU, view="kernel")
    after(page, lambda: page.select_option("[data-control=group_by]", "name_op"))
    table = rows(api(server, "kernels", **GPU, group_by="name_op"))
    assert row_count(page, "kernels") == len(table)
    page.fill("[data-table=kernels] input[aria-label='Search operators']", "cudnn_convolution_backward_input")
    expected = [r for r in table if "cudnn_convolution_backward_input" in r["operator"].lower()]
    assert row_count(page, "kernels") == len(expected) > 0
    page.fill("[data-table=kernels] input[aria-label='Search kernels']", "dgrad")
    assert row_count(page, "kernels") == len([r for r in expected if "dgrad" in r["name"].lower()])
    csv_rows = parse_csv(download(page, "kernels"))[1]
    assert len(csv_rows) == row_count(page, "kernels")


def test_call_stack_frames_are_copyable_text_outside_vscode(page, server):
    open_page(page, server, **CPU, view="operator")
    row = page.locator("[data-table=operators] tbody tr").first
    name = row.locator("td.first").inner_text()
    after(page, lambda: row.locator("button.expander").click())
    stacks = api(server, "operator_stacks", **CPU, name=name)["stacks"]
    text = page.inner_text("[data-testid=stacks]")
    for frame in stacks[0]["frames"]:
        assert frame["text"] in text
    assert page.query_selector("[data-testid=stacks] a.source-link") is None
    assert page.query_selector("[data-testid=stacks] code.source-text") is not None


def test_memory_range_selection_filters_events_and_stats(page, server, screenshot_dir):
    open_page(page, server, **CPU, view="memory")
    full_events = row_count(page, "memory-events")
    box = page.locator("[data-testid=memory-curve]").bounding_box()
    left, width = box["x"] + 80, box["width"] - 80 - 32  # the chart's grid margins
    y = box["y"] + box["height"] / 2

    def drag():
        page.mouse.move(left + 0.25 * width, y)
        page.mouse.down()
        page.mouse.move(left + 0.45 * width, y, steps=8)
        page.mouse.move(left + 0.6 * width, y, steps=8)
        page.mouse.up()

    after(page, drag)
    label = page.locator("[data-testid=memory-range]")
    start, end = float(label.get_attribute("data-start-us")), float(label.get_attribute("data-end-us"))
    assert 0 < start < end
    assert f"start_us={start:g}" in urllib.parse.unquote(page.url) or "start_us=" in page.url
    q = {**CPU, "device": "CPU", "start_us": start, "end_us": end}
    events = api(server, "memory_events", **q)["rows"]
    assert row_count(page, "memory-events") == len(events) < full_events
    assert row_count(page, "memory-stats") == len(api(server, "memory_stats", **q)["rows"])
    curve = api(server, "memory_curve", **q)
    assert page.inner_text("[data-field=peak_allocated]") == format_bytes_of(curve)
    screenshot(page, screenshot_dir, "cpu_cnn_memory_range")

    page.fill("[data-control=min-size]", "64")
    assert row_count(page, "memory-events") == len([e for e in events if e[1] >= 64 * 1024])

    after(page, lambda: page.click("[data-control=reset-range]"))
    assert label.get_attribute("data-start-us") == ""
    assert "start_us" not in page.url


def format_bytes_of(curve):
    from .conftest import format_bytes
    return format_bytes(curve["peaks"]["peak_allocated_bytes"])


def test_link_reopens_the_same_selection(page, server):
    open_page(page, server, run="cpu_ddp_gloo", worker="worker1", span=2, view="memory")
    assert page.input_value("[data-select=worker]") == "worker1"
    assert page.input_value("[data-select=span]") == "2"
    after(page, lambda: page.click("[role=tab][data-view=operator]"))
    after(page, lambda: page.select_option("[data-control=group_by]", "name_shape"))
    link = page.url
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)
    assert query["run"] == ["cpu_ddp_gloo"] and query["worker"] == ["worker1"] and query["span"] == ["2"]
    assert query["view"] == ["operator"] and query["group_by"] == ["name_shape"]
    page.goto("about:blank")
    page.goto(link)
    page.wait_for_selector(READY, state="attached")
    assert page.get_attribute("[data-current-view]", "data-current-view") == "operator"
    assert page.input_value("[data-control=group_by]") == "name_shape"
    assert row_count(page, "operators") == len(api(server, "operators", run="cpu_ddp_gloo", worker="worker1", span=2,
                                                    group_by="name_shape")["rows"])


def test_run_list_shows_progress_and_switches_runs(page, server):
    open_page(page, server)
    runs = api(server, "runs")["runs"]
    listed = page.eval_on_selector_all(".run-list li", "els => els.map((e) => e.dataset.run)")
    assert listed == [r["name"] for r in runs]
    assert page.input_value("[data-select=run]") == runs[0]["name"]
    after(page, lambda: page.click(".run-list li[data-run=gpu_resnet50_v100] button"))
    assert "run=gpu_resnet50_v100" in page.url
    assert "Tesla V100" in page.inner_text("[data-testid=overview]")
    page.wait_for_selector(".run-list li[data-run=gpu_resnet50_v100] .run-meta:has-text('1/1 loaded')")


def test_inside_tensorboard_and_its_dark_theme(page, server, screenshot_dir):
    page.goto(f"{server}/#pytorch_profiler")
    # TensorBoard's plugin frame runs our index.js, whose render() embeds index.html.
    inner = page.frame_locator("iframe").first.frame_locator("iframe").first
    inner.locator(READY).wait_for(state="attached")
    frame = inner.locator("body").element_handle().owner_frame()
    assert frame.url.split("?")[0].endswith("/data/plugin/pytorch_profiler/index.html")
    assert frame.get_attribute("[data-current-view]", "data-current-view") == "overview"
    assert "cpu_cnn" in frame.inner_text(".run-list")
    assert frame.evaluate("() => document.documentElement.classList.contains('dark')") is False
    screenshot(page, screenshot_dir, "tensorboard_light")
    page.evaluate("() => document.body.classList.add('dark-mode')")
    frame.wait_for_selector("html.dark", state="attached")
    background = frame.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(32, 33, 36)"
    screenshot(page, screenshot_dir, "tensorboard_dark")
    page.evaluate("() => document.body.classList.remove('dark-mode')")
    frame.wait_for_selector("html:not(.dark)", state="attached")


def test_dark_system_preference_when_alone(browser, server, screenshot_dir):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    try:
        open_page(page, server, **GPU, view="overview")
        assert page.evaluate("() => document.documentElement.classList.contains('dark')")
        screenshot(page, screenshot_dir, "gpu_resnet50_v100_overview_dark")
    finally:
        context.close()


def test_diff_of_a_multi_worker_run_defaults_to_its_next_span(page, server, screenshot_dir):
    # cpu_ddp_gloo: 2 workers x 2 spans. B is the same worker's span 2, not another run.
    open_page(page, server, run="cpu_ddp_gloo", worker="worker0", span=1, view="diff")
    b = {c: page.input_value(f"[data-control={c}]") for c in ("run_b", "worker_b", "span_b")}
    assert b == {"run_b": "cpu_ddp_gloo", "worker_b": "worker0", "span_b": "2"}
    data = api(server, "diff", run="cpu_ddp_gloo", worker="worker0", span=1, **b)
    # Step categories are named as on the overview; the CSV keeps the API's ids.
    steps = page.locator("[data-table=diff-steps] tbody td.first").all_inner_texts()
    assert steps == ["Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec", "Other", "Total"]
    assert [r[0] for r in parse_csv(download(page, "diff-steps"))[1]] == [r["category"] for r in rows(data["steps"])]
    # Neither side ran on a device: no columns of zeros, as in the operator view.
    headers = page.locator("[data-table=diff-operators] thead th").all_inner_texts()
    assert any("Host self Δ" in h for h in headers) and not any("Device" in h for h in headers)
    assert "host times only" in page.inner_text("[data-testid=diff]")
    screenshot(page, screenshot_dir, "cpu_ddp_gloo_diff_default")


def test_diff_deltas_that_round_to_zero_have_no_sign_or_colour(page, server):
    # cpu_cnn span 1 vs 2: aten::linear's host self time differs by less than 0.05 µs.
    open_page(page, server, **CPU, view="diff")
    b = {c: page.input_value(f"[data-control={c}]") for c in ("run_b", "worker_b", "span_b")}
    ops = rows(api(server, "diff", **CPU, **b)["operators"])
    tiny = [r for r in ops if 0 < abs(r["host_self_us_delta"]) < 0.05]
    assert tiny, "the sample runs no longer have a delta that rounds to zero"
    page.fill("[data-table=diff-operators] input[type=search]", tiny[0]["name"])
    row = page.locator("[data-table=diff-operators] tbody tr", has_text=tiny[0]["name"]).first
    cells = row.locator("td").all_inner_texts()
    headers = page.locator("[data-table=diff-operators] thead th").all_inner_texts()
    cell = row.locator("td").nth([h.strip() for h in headers].index("Host self Δ"))
    assert cell.inner_text() == "0 µs", cells
    assert cell.locator(".pos, .neg").count() == 0


def test_four_operator_pies_are_two_by_two_in_a_narrow_window(page, server):
    def pie_rows():
        boxes = [page.locator(f"[data-chart='{n}']").bounding_box() for n in
                 ("Device self time", "Device total time", "Host self time", "Host total time")]
        tops = [round(b["y"]) for b in boxes]
        return sorted(tops.count(t) for t in set(tops)), [round(b["width"]) for b in boxes]

    open_page(page, server, **GPU, view="operator")
    per_row, widths = pie_rows()
    assert per_row == [4], per_row  # 1400 px: all four in a row
    for width in (1000, 800):
        page.set_viewport_size({"width": width, "height": 800})
        page.wait_for_function("() => document.querySelector('[data-chart]').getBoundingClientRect().width < 400")
        per_row, widths = pie_rows()
        assert per_row == [2, 2] and max(widths) - min(widths) <= 1, (width, per_row, widths)  # never 3 + 1
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def test_top_n_is_kept_in_the_url_and_shared_by_operator_and_kernel_views(page, server):
    open_page(page, server, **GPU, view="kernel")
    assert page.input_value("[data-control=top-n]") == "10"
    page.select_option("[data-control=top-n]", "5")  # charts only: no request, no new ready state
    page.wait_for_function("() => new URLSearchParams(location.search).get('top') === '5'")
    open_page(page, server, **GPU, view="operator", top=5)
    assert page.input_value("[data-control=top-n]") == "5"
    open_page(page, server, **GPU, view="operator", top=7)  # not a choice: the default
    assert page.input_value("[data-control=top-n]") == "10"
