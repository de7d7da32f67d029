"""The Trace health card (frontend/src/components/TraceHealth.tsx): open with the server's
findings on a sample that has some, folded to one line on a clean one, and per rank in the
Job view. Screenshots: overview_health_findings, overview_health_clean, job_health."""

import pytest

from ..helpers import op, write_trace
from .conftest import api, open_page, row_count, rows, screenshot


def _card(page):
    return page.locator("[data-testid=trace-health]")


def test_health_card_opens_with_the_findings_of_a_sample_that_has_some(page, server, screenshot_dir):
    q = {"run": "gpu_h100_eager_nccl", "worker": "worker0", "span": 1}
    findings = rows(api(server, "health", **q))
    serious = [f for f in findings if f["severity"] != "info"]
    assert serious, "the sample's Event Sync records name no cudaEventRecord: torch's validator counts them"
    open_page(page, server, **q, view="overview")
    card = _card(page)
    assert card.get_attribute("data-clean") == "false"
    assert card.locator("details").evaluate("d => d.open")
    headline = page.inner_text("[data-testid=trace-health-headline]")
    assert headline == "not clean: " + ", ".join(f"{f['finding']} × {f['count']:,}" for f in serious)
    assert row_count(page, "trace-health") == len(findings)
    table = page.inner_text("[data-table='trace-health']")
    for f in findings:
        assert f["finding"] in table and f"{f['count']:,}" in table and f["affects"] in table
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(screenshot_dir / "overview_health_findings.png"))
    screenshot(page, screenshot_dir, "overview_health_findings_page")


def test_health_card_is_one_folded_line_on_a_clean_sample(page, server, screenshot_dir):
    q = {"run": "cpu_cnn", "worker": "worker0", "span": 1}
    assert rows(api(server, "health", **q)) == []
    open_page(page, server, **q, view="overview")
    card = _card(page)
    assert card.get_attribute("data-clean") == "true"
    assert not card.locator("details").evaluate("d => d.open")
    assert page.inner_text("[data-testid=trace-health-headline]") == "clean"
    assert card.bounding_box()["height"] < 60  # one line: nothing of the card's body is shown
    card.screenshot(path=str(screenshot_dir / "overview_health_clean.png"))


@pytest.fixture(scope="module")
def job_server(tmp_path_factory):
    """tensorboard over a two-rank run whose rank 1 lacks a collective's metadata."""
    from .conftest import tensorboard

    root = tmp_path_factory.mktemp("health_job")
    comms = {"Collective name": "allreduce", "In msg nelems": 4, "Out msg nelems": 4, "Group size": 2}
    for rank, args in ((0, {**comms, "dtype": "Float"}), (1, comms)):
        write_trace(root / "job" / f"rank{rank}.pt.trace.json",
                    [op("ProfilerStep#1", 0, 100), op("record_param_comms", 10, 5, **args), op("aten::add", 20, 5)],
                    distributedInfo={"rank": rank, "world_size": 2, "backend": "gloo"})
    with tensorboard(root, root.parent / "health_tensorboard.log") as base:
        yield base


def test_job_view_states_each_ranks_health(page, job_server, screenshot_dir):
    q = {"run": "job", "span": 1}
    table = rows(api(job_server, "job", **q, table="health"))
    assert [(r["rank"], r["finding"], r["count"]) for r in table] == [(1, "_check_nccl_metadata", 1)]
    open_page(page, job_server, **q, worker="rank0", view="job")
    card = _card(page)
    assert card.get_attribute("data-clean") == "false"
    assert page.inner_text("[data-testid=trace-health-headline]") == "not clean on rank 1"
    assert row_count(page, "job-health") == 1
    assert "_check_nccl_metadata" in page.inner_text("[data-table='job-health']")
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(screenshot_dir / "job_health.png"))
