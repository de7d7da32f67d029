"""The Diff tab explains a regression planted into a real trace: the causes with each side's
steps, the contributors opening both traces' Trace views at the matched calls, and the matched
operator tree drilled down."""

import shutil
import urllib.parse

import pytest

from ..helpers import SAMPLES, raw_events
from ..plants import stretched_kernels, write_gz
from .conftest import READY, after, api, format_duration, open_page, row_count, rows, screenshot, tensorboard

FAMILY = "cutlass_80_tensorop_s1688gemm_256x64"
A = {"run": "base", "worker": "rank0", "span": 1}
B = {"run_b": "slower", "worker_b": "rank0", "span_b": 1}


@pytest.fixture(scope="module")
def planted_server(tmp_path_factory):
    """Two runs: the A100 sample (`base`) and the same trace with one kernel family 20% longer
    (`slower`)."""
    logdir = tmp_path_factory.mktemp("planted")
    source = next((SAMPLES / "gpu_a100_nccl").glob("*.pt.trace.json.gz"))
    (logdir / "base").mkdir()
    shutil.copy(source, logdir / "base" / "rank0.pt.trace.json.gz")
    edited, _ = stretched_kernels(list(raw_events(source)), FAMILY, 1.2)
    write_gz(logdir / "slower", "rank0", edited)
    with tensorboard(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log") as base:
        yield base


def test_diff_explains_the_planted_regression(page, planted_server, screenshot_dir):
    data = api(planted_server, "diff", **A, **B, threshold_pct=0.1)
    causes = {r["cause"]: r for r in rows(data["explanation"])}
    open_page(page, planted_server, **A, **B, view="diff")
    headline = page.inner_text("[data-testid=diff-headline]")
    step = causes["step_time"]
    assert f"over {step['steps_a']} steps of A" in headline and f"over {step['steps_b']} steps of B" in headline
    assert format_duration(step["mean_us_a"]) in headline
    # the causes in the API's order, each with its change as the API gives it
    table = page.locator("[data-table=diff-explanation] tbody tr")
    assert table.count() == len(causes)
    compute = page.locator("[data-table=diff-explanation] tbody tr", has_text="Device compute").first
    assert format_duration(causes["device_compute"]["mean_us_delta"]).lstrip("-") in compute.inner_text()
    # 0.4% of the step: within noise at the default 5% threshold, a regression at 0.1%
    assert compute.locator("[data-verdict]").get_attribute("data-verdict") == "noise"
    after(page, lambda: page.select_option("[data-control=diff_threshold]", "0.1"))
    compute = page.locator("[data-table=diff-explanation] tbody tr", has_text="Device compute").first
    assert compute.locator("[data-verdict]").get_attribute("data-verdict") == causes["device_compute"]["verdict"] == "regression"
    step_row = page.locator("[data-table=diff-explanation] tbody tr", has_text="Step time").first
    assert step_row.locator("[data-verdict]").get_attribute("data-verdict") == causes["step_time"]["verdict"]
    screenshot(page, screenshot_dir, "diff_explained")
    page.locator("[data-table=diff-explanation]").screenshot(path=str(screenshot_dir / "diff_explained_causes.png"))
    page.locator("[data-table=diff-contributors]").screenshot(path=str(screenshot_dir / "diff_explained_contributors.png"))

    # the top contributor is the stretched family, and opens A's and B's Trace views there
    first = page.locator("[data-table=diff-contributors] tbody tr").first
    assert FAMILY in first.inner_text() and "slower kernels" in first.inner_text()
    top = rows(data["contributors"])[0]
    for side, params in (("a", A), ("b", {"run": "slower", "worker": "rank0", "span": 1})):
        with page.context.expect_page() as opened:
            first.locator(f"[data-testid=trace-link-{side}]").click()
        trace = opened.value
        trace.wait_for_selector(READY, state="attached", timeout=60_000)
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(trace.url).query))
        assert {k: query[k] for k in ("run", "worker", "span", "view")} == {**{k: str(v) for k, v in params.items()},
                                                                             "view": "trace"}
        assert float(query["trace_range_start_us"]) == pytest.approx(top[f"ts_us_{side}"], abs=1e-3)
        assert float(query["trace_range_end_us"]) == pytest.approx(top[f"ts_us_{side}"] + top[f"dur_us_{side}"], abs=1e-3)
        trace.wait_for_selector("canvas")
        screenshot(trace, screenshot_dir, f"diff_contributor_trace_{side}")
        trace.close()

    # the matched tree: every node shown expanded; a root collapses and expands again
    tree = page.locator("[data-table=diff-tree]")
    tree.locator("input[type=search]").fill("aten::cudnn_convolution")
    conv_rows = tree.locator("tbody tr", has_text="aten::cudnn_convolution")
    assert conv_rows.count() >= 1
    # a search shows the matches with their ancestors, the path from the root
    assert conv_rows.count() < tree.locator("tbody tr").count()
    tree.locator("input[type=search]").fill("")
    root = tree.locator("tbody tr").first
    shown = row_count(page, "diff-tree")
    root.locator("button.expander").click()
    assert row_count(page, "diff-tree") < shown
    root.locator("button.expander").click()
    assert row_count(page, "diff-tree") == shown
    tree.screenshot(path=str(screenshot_dir / "diff_explained_tree.png"))
