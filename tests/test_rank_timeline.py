"""Several ranks on one time axis (views/rank_timeline.py, `Run.timeline_ranks`, routes
timeline_ranks / timeline_rank_slices / timeline_rank_search / timeline_rank_summary /
timeline_rank_counters), checked against hand-made ranks on planted clocks whose true times
are worked out on paper, and against raw event sums of a real trace replicated into ranks on
their own clocks."""

import csv
import io
from collections import defaultdict
from decimal import Decimal

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.rank_timeline import RANK_TRACK_STRIDE

from .helpers import PREFIX, SAMPLES, kernel, make_client, op, raw_events, runtime, wait_route, write_trace
from .job_traces import write_job

# Rank r's clock reads the true time plus CLOCK[r] (three hosts); its first event is at true
# time -EARLY[r], so the ranks' trace origins differ besides their clocks.
CLOCK = {0: 1_000_000.0, 1: 1_005_000.0, 2: 997_000.0}
EARLY = {0: 0.0, 1: 50.0, 2: 120.0}
GEMM_AT = {0: 100.0, 1: 150.0, 2: 100.0}  # true start of the step's gemm on each rank


def _rank_events(rank):
    """One step of true time 0..1000: a gemm at GEMM_AT of 200 µs, then an all_reduce whose
    NCCL kernel runs from the gemm's end to true time 800 on every rank (all leave together)."""
    c = CLOCK[rank]
    g0 = GEMM_AT[rank]
    return [
        op("early_setup", c - EARLY[rank], 5),
        op("ProfilerStep#1", c, 1000, cat="user_annotation", **{"External id": 1}),
        op("aten::mm", c + 10, 10, **{"External id": 2}),
        runtime("cudaLaunchKernel", c + 12, 2, correlation=2, external_id=2),
        kernel("sm80_gemm", c + g0, 200, correlation=2),
        op("record_param_comms", c + 30, 10, **{
            "External id": 3, "Collective name": "all_reduce", "In msg nelems": 1000, "Out msg nelems": 1000,
            "dtype": "Float", "Group size": 3, "Process Group Name": "0", "Seq": 1}),
        op("nccl:all_reduce", c + 31, 8, cat="user_annotation", **{"External id": 4}),
        runtime("cudaLaunchKernel", c + 32, 2, correlation=4, external_id=4),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", c + g0 + 200, 800 - g0 - 200, correlation=4, stream=20),
    ]


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks")
    for rank in CLOCK:
        write_trace(root / "job" / f"rank{rank}.pt.trace.json", _rank_events(rank),
                    distributedInfo={"backend": "nccl", "rank": rank, "world_size": 3})
    return root


def _gemm_starts(slices):
    """{rank: start on the shared axis of its sm80_gemm slice}."""
    names = slices["names"]
    out = {}
    for rank, name, start, event in zip(slices["rank"], slices["name"], slices["start_us"], slices["event"]):
        if names[name] == "sm80_gemm" and event >= 0:
            out[rank] = start
    return out


def test_aligned_times_are_the_true_times(job_dir):
    run = tb_plugin.load_run(job_dir / "job")
    view = run.timeline_ranks(expanded=[0, 1, 2])
    ranks = view.ranks.set_index("rank")
    # the shared axis counts from rank 0's first event (true time 0): shift = origin difference + offset
    for rank in CLOCK:
        assert ranks.loc[rank, "offset_us"] == pytest.approx(CLOCK[0] - CLOCK[rank])
        assert ranks.loc[rank, "shift_us"] == pytest.approx(-EARLY[rank])
        assert ranks.loc[rank, "start_us"] == pytest.approx(-EARLY[rank])
    slices = view.slices(-1000, 2000, 0.5)
    assert _gemm_starts(slices) == pytest.approx(GEMM_AT)
    assert {o["rank"]: o["offset_us"] for o in slices["offsets"]} == pytest.approx(
        {r: CLOCK[0] - CLOCK[r] for r in CLOCK})


def test_unaligned_times_are_the_raw_clocks(job_dir):
    run = tb_plugin.load_run(job_dir / "job")
    view = run.timeline_ranks(align_clocks=False, expanded=[1, 2])
    assert (view.ranks["offset_us"] == 0).all()
    slices = view.slices(-10_000, 10_000, 0.5)
    # each rank's own clock, from rank 0's origin (rank 0's clock at true time 0)
    assert _gemm_starts(slices) == pytest.approx({r: GEMM_AT[r] + CLOCK[r] - CLOCK[0] for r in (1, 2)})


def test_collapsed_ranks_draw_their_device_busy_time(job_dir):
    run = tb_plugin.load_run(job_dir / "job")
    view = run.timeline_ranks(ranks=[1, 2])
    assert view.ranks["rank"].tolist() == [1, 2]
    assert view.tracks["track"].tolist() == [0, RANK_TRACK_STRIDE]  # summary tracks only
    slices = view.slices(-1000, 2000, 1000.0)  # coarse: each rank's busy time is one block
    assert set(slices["track"]) == {0, RANK_TRACK_STRIDE}
    for rank in (1, 2):
        mine = [i for i, r in enumerate(slices["rank"]) if r == rank]
        # gemm then the NCCL kernel back to back: busy from GEMM_AT to 800 (true), 2 events
        assert sum(slices["busy_us"][i] for i in mine) == pytest.approx(800 - GEMM_AT[rank])
        assert sum(slices["count"][i] for i in mine) == 2
        assert min(slices["start_us"][i] for i in mine) == pytest.approx(GEMM_AT[rank])


def test_expanded_rank_tracks_are_its_own_renumbered(job_dir):
    run = tb_plugin.load_run(job_dir / "job")
    view = run.timeline_ranks(ranks=[0, 2], expanded=[2])
    own = run.profile("rank2").timeline().tracks
    tracks = view.tracks
    rank2 = tracks[(tracks["track"] > RANK_TRACK_STRIDE) & (tracks["track"] < 2 * RANK_TRACK_STRIDE)]
    assert rank2["track"].tolist() == (own["track"] + RANK_TRACK_STRIDE + 1).tolist()
    assert rank2["events"].tolist() == own["events"].tolist()
    assert set(tracks["process"]) == {"Rank 0 · rank0", "Rank 2 · rank2"}  # one group per rank
    # asking for one of rank 2's tracks answers that track only
    gemm_track = int(own.loc[own["kind"] == "device", "track"].iloc[0]) + RANK_TRACK_STRIDE + 1
    slices = view.slices(-1000, 2000, 0.5, [gemm_track])
    assert set(slices["track"]) == {gemm_track}


def _get(client, query):
    return wait_route(client, f"{PREFIX}/{query}")


def test_routes_answer_with_the_offsets_and_refuse_unknown_ranks(job_dir):
    plugin, client = make_client(job_dir)
    try:
        plugin.store.wait_for_scan(30)
        frame = _get(client, "timeline_ranks?run=job&ranks=all&expanded=1")
        assert frame.status_code == 200
        body = frame.get_json()
        columns = body["ranks"]["columns"]
        rows = {row[columns.index("rank")]: dict(zip(columns, row)) for row in body["ranks"]["rows"]}
        assert rows[1]["offset_us"] == pytest.approx(CLOCK[0] - CLOCK[1])
        assert body["start_us"] == pytest.approx(-max(EARLY.values()))
        slices = _get(client, "timeline_rank_slices?run=job&expanded=1&start_us=-1000&end_us=2000&resolution_us=0.5")
        assert _gemm_starts(slices.get_json())[1] == pytest.approx(GEMM_AT[1])
        raw = _get(client, "timeline_rank_slices?run=job&expanded=1&align_clocks=false"
                           "&start_us=-10000&end_us=10000&resolution_us=0.5")
        assert _gemm_starts(raw.get_json())[1] == pytest.approx(GEMM_AT[1] + CLOCK[1] - CLOCK[0])
        csv = _get(client, "timeline_ranks?run=job&format=csv").get_data(as_text=True).splitlines()
        assert csv[0].split(",") == columns and len(csv) == 1 + len(CLOCK)
        too_many = _get(client, "timeline_ranks?run=job&expanded=" + ",".join(map(str, range(40))))
        assert too_many.status_code in (400, 404)
        missing = _get(client, "timeline_ranks?run=job&ranks=0,7")
        assert missing.status_code == 404 and "0..2" in missing.get_json()["reason"]
        assert _get(client, "timeline_ranks?run=job&ranks=x").status_code == 400
    finally:
        plugin.store.stop()


def test_cpu_sample_ranks_share_one_axis():
    run = tb_plugin.load_run(SAMPLES / "cpu_ddp_gloo")
    view = run.timeline_ranks()
    assert view.ranks["rank"].tolist() == [0, 1]
    assert set(view.ranks["summary"]) == {"host operators"}
    slices = view.slices(float(view.ranks["start_us"].min()), float(view.ranks["end_us"].max()), 100.0)
    # every host operator is inside some summary block: the blocks' counts add up to them
    total = sum(len(run.profile(w).model.ops) for w in view.ranks["worker"])
    assert sum(slices["count"]) == total
    assert np.isfinite(view.ranks["shift_us"]).all()


def test_more_ranks_than_profiles_kept_in_memory(job_dir):
    """Collapsed ranks are drawn from summaries: with the store keeping one parsed profile,
    all three ranks still answer, with the times of each rank's summary, and no more than
    one profile is held."""
    plugin, client = make_client(job_dir)
    try:
        plugin.store.max_profiles = 1
        plugin.store.wait_for_scan(30)
        body = _get(client, "timeline_rank_slices?run=job&start_us=-1000&end_us=2000&resolution_us=1000").get_json()
        assert len(plugin.store.budget.loaded) <= 1
        starts = {}
        for rank, start in zip(body["rank"], body["start_us"]):
            starts[rank] = min(start, starts.get(rank, np.inf))
        assert starts == pytest.approx(GEMM_AT)  # each rank busy from its gemm on, aligned
    finally:
        plugin.store.stop()


# --------------------------------------------------------------------------- search, range
# totals and counters over the expanded ranks

# A real GPU trace (DDP over NCCL) copied into three ranks on three clocks; rank 1 paused
# 20 ms in step 5 (so the ranks' totals in a range differ).
REPLICA_CLOCKS = [0.0, 5_000.0, -3_000.0]
REPLICA_STRAGGLER = (1, 5, 20_000.0)


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    root = tmp_path_factory.mktemp("replicated")
    paths = write_job(SAMPLES / "gpu_a100_nccl" / "rank0.pt.trace.json.gz", root / "job", ranks=3,
                      clock_offsets=REPLICA_CLOCKS, straggler=REPLICA_STRAGGLER)
    return root, {rank: list(raw_events(path)) for rank, path in enumerate(paths)}


# µs: the model's times are exact to the digits written; the raw side's are made relative
# to the origin in decimal, which leaves the origin's own float rounding
RAW_ABS = 0.005


def _since(ts, origin):
    """A raw epoch-scale timestamp minus `origin`, exactly as the digits written say."""
    return float(Decimal(repr(ts)) - Decimal(repr(origin)))


def _raw_kernels(events, origin, a, b):
    """{kernel name: [count, time clipped to [a, b]]} of the raw events; a, b in µs from `origin`."""
    out = defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        start = _since(e["ts"], origin)
        if start <= b and start + e["dur"] >= a:
            out[e["name"]][0] += 1
            out[e["name"]][1] += min(start + e["dur"], b) - max(start, a)
    return out


def _kernel_rows(table):
    rows = table[table["kind"] == "kernel"]
    return {r["name"]: r for _, r in rows.iterrows()}


def test_range_totals_per_rank_and_combined_equal_raw_sums_on_raw_clocks(replicated):
    """With clock alignment off the shared axis is every rank's raw clock, counted from rank
    0's origin: a range [a, b] is raw [origin + a, origin + b] in every rank's JSON."""
    root, raw = replicated
    run = tb_plugin.load_run(root / "job")
    view = run.timeline_ranks(align_clocks=False, expanded=[0, 1, 2])
    origin = run.profile("rank0").model.origin_us
    a, b = 150_000.25, 420_000.75
    summary = view.summary(a, b)
    assert summary.ranks == [0, 1, 2] and summary.not_summed == []
    expected = {rank: _raw_kernels(events, origin, a, b) for rank, events in raw.items()}
    for rank in raw:
        got = _kernel_rows(summary.by_rank[summary.by_rank["rank"] == rank])
        assert set(got) == set(expected[rank])
        for name, (count, total) in expected[rank].items():
            assert got[name]["count"] == count
            assert got[name]["total_us"] == pytest.approx(total, abs=RAW_ABS)
    combined = _kernel_rows(summary.combined)
    names = set().union(*expected.values())
    assert set(combined) == names
    for name in names:
        per_rank = {r: expected[r][name][1] for r in raw if name in expected[r]}
        row = combined[name]
        assert row["count"] == sum(expected[r][name][0] for r in per_rank)
        assert row["total_us"] == pytest.approx(sum(per_rank.values()), abs=RAW_ABS)
        assert row["ranks"] == len(per_rank)
        assert row["min_rank_us"] == pytest.approx(min(per_rank.values()), abs=RAW_ABS)
        assert row["max_rank_us"] == pytest.approx(max(per_rank.values()), abs=RAW_ABS)
        assert per_rank[row["max_rank"]] == pytest.approx(row["max_rank_us"], abs=RAW_ABS)
        assert per_rank[row["min_rank"]] == pytest.approx(row["min_rank_us"], abs=RAW_ABS)
    # the ranks do differ in this range (clocks 5 and 3 ms apart, rank 1 paused): min < max somewhere
    assert (summary.combined["min_rank_us"] < summary.combined["max_rank_us"] - 1).any()


def test_range_totals_with_aligned_clocks_mean_the_same_instant_on_every_rank(replicated):
    """Copies of one trace on other clocks: aligned, a range holds on ranks 0 and 2 (not the
    paused rank 1) exactly what rank 0's raw JSON holds in it."""
    root, raw = replicated
    run = tb_plugin.load_run(root / "job")
    view = run.timeline_ranks(expanded=[0, 2])
    origin = run.profile("rank0").model.origin_us
    a, b = 150_000.25, 420_000.75
    expected = _raw_kernels(raw[0], origin, a, b)
    summary = view.summary(a, b)
    assert summary.ranks == [0, 2] and summary.not_summed == [1]  # rank 1 collapsed: not summed
    for rank in (0, 2):
        got = _kernel_rows(summary.by_rank[summary.by_rank["rank"] == rank])
        assert {n: r["count"] for n, r in got.items()} == {n: c for n, (c, _) in expected.items()}
        assert {n: r["total_us"] for n, r in got.items()} == pytest.approx({n: t for n, (_, t) in expected.items()},
                                                                             abs=RAW_ABS)
    # tracks limit it: rank 2's summary track stands for all of rank 2, rank 0 is left out
    only_2 = view.summary(a, b, tracks=[2 * RANK_TRACK_STRIDE])
    assert only_2.ranks == [2] and set(only_2.by_rank["rank"]) == {2}


def test_search_across_ranks_finds_every_raw_match_in_time_order(replicated):
    root, raw = replicated
    run = tb_plugin.load_run(root / "job")
    origin = run.profile("rank0").model.origin_us
    view = run.timeline_ranks(align_clocks=False, expanded=[0, 1, 2])
    starts = sorted((_since(e["ts"], origin), rank) for rank, events in raw.items() for e in events
                    if e.get("ph") == "X" and "nccl" in e["name"].lower())
    found = view.search("NCCL", after_us=200_000.0)
    assert found["total"] == len(starts)
    assert {r["rank"]: r["matches"] for r in found["ranks"]} == {
        rank: sum(1 for _, r in starts if r == rank) for rank in raw}
    later = [s for s in starts if s[0] > 200_000.0]
    assert found["match"]["rank"] == later[0][1] and found["match"]["ts_us"] == pytest.approx(later[0][0], abs=RAW_ABS)
    assert [r["rank"] for r in found["results"]] == [rank for _, rank in later[:len(found["results"])]]
    assert [r["ts_us"] for r in found["results"]] == pytest.approx([t for t, _ in later[:len(found["results"])]],
                                                                   abs=RAW_ABS)
    assert all("nccl" in r["name"].lower() for r in found["results"])
    # stepping from a match by (rank, event) visits the next one, and back
    first, second = found["results"][0], found["results"][1]
    step = view.search("nccl", after_rank=first["rank"], after_event=first["event"])
    assert (step["match"]["rank"], step["match"]["event"]) == (second["rank"], second["event"])
    back = view.search("nccl", direction="prev", after_rank=second["rank"], after_event=second["event"])
    assert (back["match"]["rank"], back["match"]["event"]) == (first["rank"], first["event"])
    # a result is the rank's own event, on the shared axis: its own details say so
    details = run.profile(first["worker"]).timeline_event(first["event"])
    assert details["name"] == first["name"] and details["ts_us"] == pytest.approx(first["own_ts_us"])
    # collapsed ranks are not searched, and said to be
    partial = run.timeline_ranks(align_clocks=False, expanded=[2]).search("nccl")
    assert partial["not_searched"] == [0, 1] and [r["rank"] for r in partial["ranks"]] == [2]
    assert partial["total"] == sum(1 for _, r in starts if r == 2)
    assert run.timeline_ranks(expanded=[]).search("nccl")["match"] is None


def test_counters_of_an_expanded_rank_sit_on_the_shared_axis(job_dir):
    """GPU utilization on the aligned axis, worked out by hand: rank 1's device is busy from
    its gemm (true 150) to the NCCL kernel's end (true 800)."""
    run = tb_plugin.load_run(job_dir / "job")
    view = run.timeline_ranks(expanded=[1, 2])
    series = {(s["rank"], s["name"]): s for s in view.counters(0.0, 1000.0, points=10)}
    assert {rank for rank, _ in series} == {1, 2}
    for rank in (1, 2):
        util = series[(rank, "GPU 0 utilization")]
        assert util["time_us"] == pytest.approx([100.0 * i for i in range(10)])
        busy = [min(max(min(t + 100, 800) - max(t, GEMM_AT[rank]), 0), 100) for t in util["time_us"]]
        assert util["value"] == pytest.approx(busy, abs=1e-3)


def test_rank_search_summary_and_counters_routes(replicated):
    root, _ = replicated
    plugin, client = make_client(root)
    try:
        plugin.store.wait_for_scan(30)
        run = tb_plugin.load_run(root / "job")
        view = run.timeline_ranks(expanded=[0, 2])
        query = "run=job&expanded=0,2&start_us=150000&end_us=420000"
        body = _get(client, f"timeline_rank_summary?{query}").get_json()
        assert body["ranks"] == [0, 2] and body["not_summed"] == [1]
        expected = view.summary(150_000, 420_000)
        assert body["combined"]["columns"] == expected.combined.columns.tolist()
        assert len(body["combined"]["rows"]) == len(expected.combined)
        text = _get(client, f"timeline_rank_summary?{query}&table=by_rank&format=csv").get_data(as_text=True)
        rows = list(csv.DictReader(io.StringIO(text)))
        assert len(rows) == len(expected.by_rank) and set(rows[0]) == set(expected.by_rank.columns)
        one = _get(client, f"timeline_rank_summary?{query}&table=combined").get_json()
        assert one["columns"] == body["combined"]["columns"]
        found = _get(client, "timeline_rank_search?run=job&expanded=0,2&q=nccl").get_json()
        assert found["total"] == view.search("nccl")["total"] and found["not_searched"] == [1]
        counters = _get(client, "timeline_rank_counters?run=job&expanded=2&start_us=0&end_us=500000&points=20")
        assert {s["rank"] for s in counters.get_json()["counters"]} == {2}
        # Run.answer, the routes' Python entrance, answers as HTTP does (the ranks on one axis as keywords)
        assert run.answer("timeline_rank_search", expanded=[0, 2], q="nccl") == found
        totals = run.answer("timeline_rank_summary", expanded=[0, 2], start_us=150_000, end_us=420_000)
        assert (totals["ranks"], totals["not_summed"]) == ([0, 2], [1]) and totals["combined"].equals(expected.combined)
        series = run.answer("timeline_rank_counters", expanded=[2], start_us=0, end_us=500_000, points=20)
        assert [(s["name"], s["time_us"]) for s in series["counters"]] == [
            (s["name"], s["time_us"]) for s in counters.get_json()["counters"]]
        axis = run.answer("timeline_ranks", ranks=[0, 2], align_clocks=False)
        assert list(axis["ranks"]["rank"]) == [0, 2] and axis["ranks"]["offset_us"].eq(0).all()
        assert axis["end_us"] == axis["ranks"]["end_us"].max()
        assert _get(client, f"timeline_rank_summary?{query}&table=x").status_code == 400
        assert _get(client, "timeline_rank_search?run=job&expanded=0").status_code == 400  # no q
        assert _get(client, "timeline_rank_counters?run=job&start_us=5&end_us=1").status_code == 400
    finally:
        plugin.store.stop()
