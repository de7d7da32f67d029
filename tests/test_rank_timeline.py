"""Several ranks on one time axis (views/rank_timeline.py, `Run.timeline_ranks`, routes
timeline_ranks / timeline_rank_slices), checked against hand-made ranks on planted clocks
whose true times are worked out on paper."""

import time

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.rank_timeline import RANK_TRACK_STRIDE

from .conftest import SAMPLES, kernel, op, runtime, write_trace
from .test_api import PREFIX, make_client

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


def _get(client, query, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(f"{PREFIX}/{query}")
        if response.status_code != 202:
            return response
        assert time.monotonic() < deadline, "ranks did not load in time"
        time.sleep(0.05)


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
        assert len(plugin.store._profiles) <= 1
        starts = {}
        for rank, start in zip(body["rank"], body["start_us"]):
            starts[rank] = min(start, starts.get(rank, np.inf))
        assert starts == pytest.approx(GEMM_AT)  # each rank busy from its gemm on, aligned
    finally:
        plugin.store.stop()
