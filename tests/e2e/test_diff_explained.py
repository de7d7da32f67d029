"""The Diff tab explains a regression planted into a real trace: the causes with each side's
steps, the contributors opening both traces' Trace views at the matched calls, the matched
operator tree drilled down, B proposed with its reason, and two runs of a two-rank job compared
rank by rank, each rank opening its own diff; on a trace recorded with modules, the tree's paths
run through the nn.Module frames."""

import re
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
    """Two runs of a two-rank job, each rank the A100 sample (`base`); in `slower`, rank0's
    kernels of one family are 20% longer, rank1 unchanged; `spans`, one run of both ranks
    whose second span is `slower`'s."""
    logdir = tmp_path_factory.mktemp("planted")
    source = next((SAMPLES / "gpu_a100_nccl").glob("*.pt.trace.json.gz"))
    (logdir / "base").mkdir()
    for rank in ("rank0", "rank1"):
        shutil.copy(source, logdir / "base" / f"{rank}.pt.trace.json.gz")
    edited, _ = stretched_kernels(list(raw_events(source)), FAMILY, 1.2)
    write_gz(logdir / "slower", "rank0", edited)
    shutil.copy(source, logdir / "slower" / "rank1.pt.trace.json.gz")
    # one run of two spans of both ranks, rank0's second span the slower one
    (logdir / "spans").mkdir()
    for rank in ("rank0", "rank1"):
        shutil.copy(source, logdir / "spans" / f"{rank}.1.pt.trace.json.gz")
    write_gz(logdir / "spans", "rank0.2", edited)
    shutil.copy(source, logdir / "spans" / "rank1.2.pt.trace.json.gz")
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


def test_b_is_proposed_with_its_reason_and_ranks_open_their_diff(page, planted_server, screenshot_dir):
    # No B in the URL: the run with A's two workers and every operator name in common.
    open_page(page, planted_server, **A, view="diff", diff_threshold="0.1")
    assert page.input_value("[data-control=run_b]") == "slower"
    assert page.input_value("[data-control=worker_b]") == "rank0"
    reason = page.inner_text("[data-testid=diff-default-reason]")
    assert "run slower: another CUDA run with the same 2 workers" in reason and "operator names in common" in reason
    # The rank card: the stretched rank first, as the API orders them, its change as the API's.
    ranks = rows(api(planted_server, "diff_ranks", run="base", run_b="slower", threshold_pct=0.1))
    assert [r["worker"] for r in ranks] == ["rank0", "rank1"]
    card = page.locator("[data-table=diff-ranks] tbody tr")
    assert card.count() == 2
    assert "rank0 (shown)" in card.nth(0).inner_text()
    assert format_duration(ranks[0]["mean_us_delta"]).lstrip("-") in card.nth(0).inner_text()
    screenshot(page, screenshot_dir, "diff_ranks")
    page.locator("[data-table=diff-ranks]").screenshot(path=str(screenshot_dir / "diff_ranks_card.png"))
    # rank1 opens its own diff: A and B both rank1, unchanged, so its step time is within noise.
    after(page, lambda: card.nth(1).locator("[data-testid=open-rank-diff]").click())
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(page.url).query))
    assert (query["worker"], query["run_b"], query["worker_b"]) == ("rank1", "slower", "rank1")
    step_row = page.locator("[data-table=diff-explanation] tbody tr", has_text="Step time").first
    assert step_row.locator("[data-verdict]").get_attribute("data-verdict") == ranks[1]["verdict"] == "noise"
    assert "rank1 (shown)" in page.locator("[data-table=diff-ranks] tbody tr").nth(1).inner_text()
    screenshot(page, screenshot_dir, "diff_rank1")


def test_tree_paths_run_through_module_frames(page, server, screenshot_dir):
    """cpu_cnn was recorded with modules; its two spans compare by default."""
    open_page(page, server, run="cpu_cnn", worker="worker0", span=1, view="diff")
    assert "the same run's span 2" in page.inner_text("[data-testid=diff-default-reason]")
    tree = page.locator("[data-table=diff-tree]")
    tree.locator("input[type=search]").fill("aten::conv2d")
    shown = tree.locator("tbody tr").all_inner_texts()
    # a search shows each match with its path: the modules around the convolution included
    assert any("nn.Module: Conv2d_0" in row for row in shown) and any("nn.Module: SmallCNN_0" in row for row in shown)
    tree.screenshot(path=str(screenshot_dir / "diff_module_tree.png"))
    # a contributor that ran under several module paths is one row; its paths one click away
    several = [r for r in rows(api(server, "diff", run="cpu_cnn", worker="worker0", span=1, run_b="cpu_cnn",
                                   worker_b="worker0", span_b=2, table="contributors")) if r["paths"] > 1]
    assert several
    row = page.locator("[data-table=diff-contributors] tbody tr",
                       has=page.locator("[data-testid=contributor-operators]")).first
    more = int(re.search(r"and (\d+) more", row.inner_text()).group(1))
    row.locator("button.expander").click()
    paths = page.locator("[data-testid=contributor-paths] li")
    assert paths.count() == more + 1
    assert all("nn.Module: SmallCNN_0" in text for text in paths.all_inner_texts())
    page.locator("[data-table=diff-contributors]").screenshot(path=str(screenshot_dir / "diff_contributor_paths.png"))


def test_warnings_show_above_the_verdict(page, planted_server, screenshot_dir):
    """The A100 sample has 3 steps: too few for a sharp verdict, which the API's warnings say
    and the page shows, in the API's words, above the verdict."""
    data = api(planted_server, "diff", **A, **B, table="warnings")
    said = rows(data)
    assert [w["kind"] for w in said] == ["few_steps"]
    open_page(page, planted_server, **A, **B, view="diff")
    shown = page.locator("[data-testid=diff-warnings] li")
    assert shown.count() == len(said)
    assert said[0]["warning"] in shown.first.inner_text()
    warnings_box = page.locator("[data-testid=diff-warnings]").bounding_box()
    headline_box = page.locator("[data-testid=diff-headline]").bounding_box()
    assert warnings_box["y"] + warnings_box["height"] <= headline_box["y"]
    screenshot(page, screenshot_dir, "diff_warnings")
    page.locator("section", has=page.locator("[data-testid=diff-warnings]")).first.screenshot(
        path=str(screenshot_dir / "diff_warnings_card.png"))


def test_two_spans_of_one_run_of_two_workers_get_the_rank_card(page, planted_server, screenshot_dir):
    """A run of two ranks with two spans each: B defaults to the other span, and the ranks of
    both spans are compared, rank0 (slower in span 2) first."""
    ranks = rows(api(planted_server, "diff_ranks", run="spans", span=1, run_b="spans", span_b=2, threshold_pct=0.1))
    assert [r["worker"] for r in ranks] == ["rank0", "rank1"]
    open_page(page, planted_server, run="spans", worker="rank0", span=1, view="diff", diff_threshold="0.1")
    assert "the same run's span 2" in page.inner_text("[data-testid=diff-default-reason]")
    card = page.locator("[data-table=diff-ranks] tbody tr")
    assert card.count() == 2 and "rank0 (shown)" in card.nth(0).inner_text()
    assert format_duration(ranks[0]["mean_us_delta"]).lstrip("-") in card.nth(0).inner_text()
    assert ranks[0]["top_cause_label"] in card.nth(0).inner_text()
    page.locator("[data-table=diff-ranks]").screenshot(path=str(screenshot_dir / "diff_ranks_two_spans.png"))
