"""A job with a bad rank in Chromium: the 4-rank mesh sample with worker2's trace cut in the
middle (as a crashed job leaves it). The Job and Distributed pages show the three ranks that
load, and say that they cover 3 of 4 ranks, naming worker2 and why it did not load. Screenshots
land in the e2e screenshot directory: look at them."""

import pytest

from ..helpers import SAMPLES
from ..job_traces import job_with_a_truncated_rank
from .conftest import api, open_page, row_count, rows, screenshot, tensorboard


@pytest.fixture(scope="module")
def bad_job_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("badjob")
    job_with_a_truncated_rank(SAMPLES / "cpu_mesh_2d_gloo", root / "logs", "worker2")
    with tensorboard(root / "logs", root / "tensorboard.log") as base:
        yield base


def test_job_page_names_the_rank_that_did_not_load(page, bad_job_server, screenshot_dir):
    data = api(bad_job_server, "job", run="bad", span=1)
    verdict = rows(data["verdict"])[0]
    missing = rows(data["missing"])
    assert [m["worker"] for m in missing] == ["worker2"] and missing[0]["reason"].startswith("truncated")
    open_page(page, bad_job_server, run="bad", worker="worker0", span=1, view="job")
    assert not page.query_selector(".status.error")
    assert page.inner_text("[data-testid=job-verdict]") == verdict["text"]
    assert page.inner_text("[data-testid=job-rule]") == f"Rule applied: {verdict['rule']}"
    coverage = page.locator("[data-testid=rank-coverage]")
    assert coverage.get_attribute("data-missing") == "1"
    text = coverage.inner_text()
    assert text == verdict["coverage"] and text.startswith("Covers 3 of 4 ranks")
    assert missing[0]["rank"] == 2 and f"worker2 (rank 2) — {missing[0]['reason']}" in text
    # the three ranks that loaded are all there
    assert row_count(page, "job-clocks") == 3
    assert "worker2" not in page.inner_text("[data-table=job-clocks]")
    screenshot(page, screenshot_dir, "bad_rank_job")


def test_distributed_page_names_the_rank_that_did_not_load(page, bad_job_server, screenshot_dir):
    data = api(bad_job_server, "distributed", run="bad", span=1)
    coverage = rows(data["coverage"])[0]
    assert (coverage["ranks"], coverage["ranks_total"]) == (3, 4)
    open_page(page, bad_job_server, run="bad", worker="worker0", span=1, view="distributed")
    assert not page.query_selector(".status.error")
    assert page.inner_text("[data-testid=rank-coverage]") == coverage["text"]
    assert sorted(r["worker"] for r in rows(data["devices"])) == ["worker0", "worker1", "worker3"]
    screenshot(page, screenshot_dir, "bad_rank_distributed")
