"""Job view (views/job.py): every rank side by side, checked against traces worked out on paper
and raw event sums of real traces."""

import gzip
import json
from collections import defaultdict

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views import job as job_view

from .conftest import SAMPLES, SHARED_TRACES, kernel, op, raw_events, runtime, shared_trace, write_trace
from .job_traces import write_job

# Each rank's clock reads the true time plus this offset (as on three hosts).
CLOCK = {0: 1_000_000.0, 1: 1_005_000.0, 2: 997_000.0}


def _rank_trace(tmp_path, rank, gemm_us):
    """Rank `rank` of a 3-rank job, two steps of 1000 µs (true time 0..1000, 1000..2000).

    In step s (start S): aten::mm 10..20 launches (runtime 12..14) a gemm kernel at 100 of
    gemm_us[s]; record_param_comms 30..40 (all_reduce of 1000 floats, Seq s) > nccl:all_reduce
    31..39 launches (runtime 32..34) the NCCL kernel, which starts when the gemm ends (the
    rank arrives) and ends at 800 on every rank (all leave together).
    """
    c = CLOCK[rank]
    events = []
    for step, start in ((1, 0.0), (2, 1000.0)):
        s = start + c
        g = gemm_us[step]
        ext = 10 * step
        events += [
            op(f"ProfilerStep#{step}", s, 1000, cat="user_annotation", **{"External id": ext}),
            op("aten::mm", s + 10, 10, **{"External id": ext + 1}),
            runtime("cudaLaunchKernel", s + 12, 2, correlation=ext + 1, external_id=ext + 1),
            kernel("sm80_gemm", s + 100, g, correlation=ext + 1),
            op("record_param_comms", s + 30, 10, **{
                "External id": ext + 2, "Collective name": "all_reduce", "In msg nelems": 1000,
                "Out msg nelems": 1000, "dtype": "Float", "Group size": 3, "Process Group Name": "0", "Seq": step}),
            op("nccl:all_reduce", s + 31, 8, cat="user_annotation", **{"External id": ext + 3}),
            runtime("cudaLaunchKernel", s + 32, 2, correlation=ext + 3, external_id=ext + 3),
            kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", s + 100 + g, 700 - g, correlation=ext + 3, stream=20),
        ]
    path = write_trace(tmp_path / f"rank{rank}.pt.trace.json", events,
                       distributedInfo={"backend": "nccl", "rank": rank, "world_size": 3})
    return tb_plugin.load(str(path)).model


@pytest.fixture
def three_ranks(tmp_path):
    """Rank 1's gemm takes 600 µs instead of 300 in step 2: the straggler."""
    return {f"rank{r}": _rank_trace(tmp_path, r, {1: 300, 2: 600 if r == 1 else 300}) for r in range(3)}


def _row(table, **where):
    mask = np.ones(len(table), dtype=bool)
    for column, value in where.items():
        mask &= (table[column] == value).to_numpy()
    assert mask.sum() == 1, (where, table)
    return table[mask].iloc[0]


def test_rank_steps_worked_by_hand(three_ranks):
    view = job_view.job(three_ranks)
    table = view.rank_steps
    assert len(table) == 6
    for rank in range(3):
        for step in (1, 2):
            g = 600 if (rank, step) == (1, 2) else 300
            row = _row(table, rank=rank, step=step)
            # window 0..1000: gemm g; NCCL kernel 100+g..800 plus the collective's host 30..40;
            # runtime 12..14 (32..34 lies under the collective); aten::mm 10..20 less its launch
            assert row["step_us"] == pytest.approx(1000)
            assert row["compute_us"] == pytest.approx(g)
            assert row["exposed_comm_us"] == pytest.approx(10 + 700 - g)
            assert row["host_us"] == pytest.approx(2 + 8)
            assert row["dataloader_us"] == pytest.approx(0)
            assert row["idle_us"] == pytest.approx(1000 - 720)
            assert row["worker"] == f"rank{rank}"


def test_straggler_found_with_cause_and_excess(three_ranks):
    view = job_view.job(three_ranks)
    assert len(view.stragglers) == 1
    row = view.stragglers.iloc[0]
    # rank 1's work (step - exposed comm) is 290 + 600 = 890 against 590 on the other two
    assert (row["rank"], row["step"], row["cause"]) == (1, 2, "compute")
    assert row["excess_us"] == pytest.approx(300)
    assert "compute 600 µs vs median 300 µs" in row["detail"]
    assert view.verdict["stragglers"].tolist() == [1] and "Rank 1" in view.verdict["text"][0]


def test_no_straggler_is_said(tmp_path):
    models = {f"rank{r}": _rank_trace(tmp_path, r, {1: 300, 2: 300}) for r in range(3)}
    view = job_view.job(models)
    assert len(view.stragglers) == 0
    assert list(view.stragglers.columns) == job_view.STRAGGLERS.names
    assert view.verdict["text"][0].startswith("No straggler")


def test_clock_offsets_recover_the_planted_skew(three_ranks):
    clocks = job_view.job(three_ranks).clocks.set_index("rank")
    for rank in range(3):
        # rank r reads true + CLOCK[r]; aligning it to rank 0 adds CLOCK[0] - CLOCK[r]
        assert clocks.loc[rank, "offset_us"] == pytest.approx(CLOCK[0] - CLOCK[rank])
        assert clocks.loc[rank, "aligned"]
    assert clocks.loc[1, "matched_calls"] == 2


def test_collective_arrival_spread_last_rank_and_bandwidth(three_ranks):
    table = job_view.job(three_ranks).collectives
    assert len(table) == 2
    step1, step2 = table.iloc[0], table.iloc[1]
    assert step1["arrival_spread_us"] == pytest.approx(0)
    # step 2: ranks 0 and 2 arrive at 1000 + 400, rank 1 at 1000 + 700 (true time, rank 0's clock)
    assert step2["first_arrival_us"] == pytest.approx(1400)
    assert step2["arrival_spread_us"] == pytest.approx(300)
    assert (step2["first_rank"], step2["last_rank"], step2["ranks"]) == (0, 1, 3)
    # 1000 floats in the 100 µs of rank 1's kernel (the shortest): 40 bytes/µs = 0.04 GB/s
    assert step2["transfer_us"] == pytest.approx(100)
    assert step2["algbw_gbps"] == pytest.approx(0.04)
    assert step2["busbw_gbps"] == pytest.approx(0.04 * 2 * 2 / 3)


def test_unaligned_clocks_compare_raw_times(three_ranks):
    table = job_view.job(three_ranks, align_clocks=False).collectives
    # without alignment rank 2 (clock 3000 µs behind) seems to arrive first, 3000 µs early
    assert table.iloc[0]["first_rank"] == 2
    assert (job_view.job(three_ranks, align_clocks=False).clocks["offset_us"] == 0).all()


def test_kernels_and_operators_across_ranks(three_ranks):
    view = job_view.job(three_ranks)
    gemm = _row(view.kernels, name="sm80_gemm")
    assert (gemm["min_us"], gemm["median_us"], gemm["max_us"]) == (600, 600, 900)
    assert gemm["spread_pct"] == pytest.approx(50) and gemm["slowest_rank"] == 1 and gemm["ranks"] == 3
    nccl = _row(view.kernels, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    assert (nccl["min_us"], nccl["median_us"], nccl["max_us"]) == (500, 800, 800)
    mm = _row(view.operators, name="aten::mm")
    assert mm["measure"] == "device_self" and mm["max_us"] == 900 and mm["slowest_rank"] == 1
    assert "record_param_comms" not in set(view.operators["name"])


def test_two_ranks_the_slower_is_the_straggler(tmp_path):
    models = {f"rank{r}": _rank_trace(tmp_path, r, {1: 300, 2: 600 if r == 1 else 300}) for r in range(2)}
    view = job_view.job(models)
    assert [(int(r), int(s)) for r, s in view.stragglers[["rank", "step"]].to_numpy()] == [(1, 2)]


@pytest.mark.parametrize("run", ["sampled_128rank_job"])
def test_real_job_parts_sum_and_kernel_totals_equal_raw_sums(run):
    folder = SHARED_TRACES / run
    shared_trace(run)
    files = sorted(folder.glob("*.json.gz"))
    models = {f.name.split(".")[0]: tb_plugin.load(str(f)).model for f in files}
    view = job_view.job(models)
    t = view.rank_steps
    parts = t["compute_us"] + t["exposed_comm_us"] + t["idle_us"] + t["dataloader_us"] + t["host_us"]
    np.testing.assert_allclose(parts, t["step_us"], rtol=1e-9, atol=1e-6)
    for table in ("rank_steps", "stragglers", "kernels", "operators", "collectives", "clocks"):
        getattr(job_view, {"rank_steps": "RANK_STEPS", "stragglers": "STRAGGLERS", "kernels": "KERNELS_ACROSS",
                           "operators": "OPERATORS_ACROSS", "collectives": "COLLECTIVES_ACROSS",
                           "clocks": "CLOCKS"}[table]).check(getattr(view, table))
    # per rank, each kernel name's total equals the raw JSON's sum of its durations
    raw = {}
    for f in files:
        sums = defaultdict(float)
        for e in raw_events(f):
            if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel":
                sums[e["name"]] += float(e["dur"])
        raw[json.loads(gzip.decompress(f.read_bytes()))["distributedInfo"]["rank"]] = sums
    for _, row in view.kernels.iterrows():
        totals = [raw[r].get(row["name"], 0.0) for r in raw if row["name"] in raw[r]]
        assert row["max_us"] == pytest.approx(max(totals))
        assert row["min_us"] == pytest.approx(min(totals))
        assert row["ranks"] == len(totals)


def test_planted_straggler_in_a_replicated_real_job(tmp_path):
    source = shared_trace("sampled_128rank_job", "rank0.pt.trace.json.gz")
    offsets = [r * 7_919.0 - 20_000.0 for r in range(8)]  # each rank on its own clock
    paths = write_job(source, tmp_path / "job", ranks=8, clock_offsets=offsets, straggler=(5, 552, 60_000.0))
    run = tb_plugin.load_run(str(tmp_path / "job"))
    assert len(run.workers) == 8 and len(paths) == 8
    view = run.job()
    worst = view.stragglers.iloc[0]
    assert (worst["rank"], worst["step"], worst["cause"]) == (5, 552, "compute")
    assert worst["excess_us"] == pytest.approx(60_000, rel=0.02)
    assert set(view.stragglers["rank"]) == {5}
    clocks = view.clocks.set_index("rank")
    # copies of one trace: aligning undoes the planted offsets exactly, except on the straggler,
    # whose later collectives the plant delays (in a real job the others would wait for it)
    for rank in (0, 1, 2, 3, 4, 6, 7):
        assert clocks.loc[rank, "offset_us"] == pytest.approx(offsets[0] - offsets[rank], abs=1.0)


def test_cpu_sample_job_view_has_every_rank_and_step():
    run = tb_plugin.load_run(str(SAMPLES / "cpu_ddp_gloo"))
    view = run.job()
    assert sorted(view.rank_steps["rank"].unique()) == [0, 1]
    steps = {w: list(run.profile(w, 1).steps()["step"]) for w in run.workers}
    for worker, expected in steps.items():
        assert list(view.rank_steps[view.rank_steps["worker"] == worker]["step"]) == expected


def test_empty_job():
    view = job_view.combine({})
    assert len(view.rank_steps) == 0 and len(view.stragglers) == 0 and len(view.collectives) == 0
    assert view.verdict["ranks"].tolist() == [0]
