"""The level-of-detail timeline: merged blocks keep every event, queries match brute force,
tracks and lanes follow the trace, and the routes answer."""

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.timeline import (KINDS, counters, event_details, event_flows, merge_blocks, range_summary,
                                      search, timeline_index)

from .helpers import PREFIX, SAMPLES, kernel, make_client, op, runtime, shared_trace, wait_ready, write_trace


def random_trace(tmp_path, seed, n=3000):
    """Nested ops on two threads plus kernels on two streams, with many tiny events."""
    rng = np.random.default_rng(seed)
    events = []
    for tid in (1, 2):
        t = 0.0
        for _ in range(n // 6):
            parent_dur = float(rng.choice([0.3, 2.0, 50.0, 400.0]))
            events.append(op(f"outer{rng.integers(5)}", t, parent_dur, tid=tid))
            child_t = t
            for _ in range(2):
                d = parent_dur * float(rng.uniform(0.05, 0.4))
                events.append(op(f"inner{rng.integers(7)}", child_t, d, tid=tid))
                child_t += d
            t += parent_dur + float(rng.exponential(5.0))
    for stream in (7, 8):
        t = 0.0
        for i in range(n // 4):
            d = float(rng.choice([0.5, 1.5, 30.0]))
            events.append(kernel(f"k{i % 9}", t, d, correlation=100000 * stream + i, stream=stream))
            t += d + float(rng.exponential(3.0))
    return tb_plugin.load(write_trace(tmp_path / f"r{seed}.pt.trace.json", events))


def brute_force_check(index, t0, t1, resolution, result):
    """Every event overlapping [t0, t1] comes back as itself or inside a merged block of its
    own track and lane; only events shorter than (a level of) the resolution are merged."""
    s = index.slices
    ts, end = s["ts"].to_numpy(), (s["ts"] + s["dur"]).to_numpy()
    overlapping = np.flatnonzero((ts <= t1) & (end >= t0))
    event = np.asarray(result["event"])
    count = np.asarray(result["count"])
    start = np.asarray(result["start_us"])
    stop = start + np.asarray(result["dur_us"])
    singles = event[event >= 0]
    assert (count[event >= 0] == 1).all() and np.allclose(ts[singles], start[event >= 0])
    missing = np.setdiff1d(overlapping, singles)
    # merged blocks, sorted by (group, start); each missing event must sit inside one
    lanes = index.max_lanes
    shift = float(end.max() - ts.min()) * 4 + 10
    blocks = count > 1
    block_key = (np.asarray(result["track"]) * lanes + np.asarray(result["lane"]))[blocks] * shift + start[blocks]
    order = np.argsort(block_key)
    block_key, block_stop = block_key[order], stop[blocks][order]
    block_group = (np.asarray(result["track"]) * lanes + np.asarray(result["lane"]))[blocks][order]
    group = s["track"].to_numpy()[missing] * lanes + s["lane"].to_numpy()[missing]
    pos = np.searchsorted(block_key, group * shift + ts[missing] + 1e-9, side="right") - 1
    assert (pos >= 0).all(), "an event is in no block"
    assert (block_group[pos] == group).all(), "an event is in no block of its lane"
    assert (block_stop[pos] >= end[missing] - 1e-9).all(), "a block does not cover its event"
    assert (end[missing] - ts[missing] < resolution + 1e-9).all(), "an event a pixel long or more was merged"
    # counts add up to at least every overlapping event (blocks at the edges may hold more)
    assert count.sum() >= len(overlapping)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_queries_keep_every_event_at_every_zoom(tmp_path, seed):
    index = timeline_index(random_trace(tmp_path, seed).model)
    s = index.slices
    span0, span1 = float(s["ts"].min()), float((s["ts"] + s["dur"]).max())
    rng = np.random.default_rng(seed)
    for _ in range(12):
        width = (span1 - span0) * float(rng.choice([1.0, 0.3, 0.05, 0.005]))
        t0 = float(rng.uniform(span0 - width * 0.1, span1 - width))
        resolution = width / float(rng.choice([200, 1000, 3000]))
        result = index.query(t0, t0 + width, resolution)
        brute_force_check(index, t0, t0 + width, resolution, result)


def test_full_window_counts_and_busy_time_are_exact(tmp_path):
    index = timeline_index(random_trace(tmp_path, 5).model)
    s = index.slices
    t0, t1 = float(s["ts"].min()), float((s["ts"] + s["dur"]).max())
    for resolution in (0.1, 10.0, 1000.0, 1e6):
        result = index.query(t0, t1, resolution)
        assert sum(result["count"]) == len(s)
        assert sum(result["busy_us"]) == pytest.approx(float(s["dur"].sum()))


def test_merge_worked_on_paper():
    # one group: tiny events at 0,1,2 (0.5 long), a long one 10..30, tiny at 31, 40
    start = np.array([0.0, 1.0, 2.0, 10.0, 31.0, 40.0])
    end = start + np.array([0.5, 0.5, 0.5, 20.0, 0.5, 0.5])
    group = np.zeros(6, dtype=np.int64)
    out = merge_blocks(group, start, end, np.ones(6, np.int64), end - start, np.arange(6), np.arange(6), 2.0)
    g, s, e, count, busy, name, event = out
    assert s.tolist() == [0.0, 10.0, 31.0, 40.0]
    assert e.tolist() == [2.5, 30.0, 31.5, 40.5]
    assert count.tolist() == [3, 1, 1, 1]
    assert busy.tolist() == [1.5, 20.0, 0.5, 0.5]
    assert event.tolist() == [-1, 3, 4, 5]


def test_tracks_lanes_and_names_from_metadata(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("a", 0, 100, pid=5, tid=6), op("b", 10, 20, pid=5, tid=6), op("overlap", 90, 30, pid=5, tid=6),
        kernel("k", 5, 5, correlation=1, device=0, stream=7),
        {"ph": "M", "name": "process_name", "pid": 5, "tid": 0, "args": {"name": "trainer"}},
        {"ph": "M", "name": "thread_name", "pid": 5, "tid": 6, "args": {"name": "main"}},
    ])
    index = tb_plugin.load(path).timeline()
    tracks = index.tracks.set_index("thread")
    assert tracks.loc["main", "process"] == "trainer" and tracks.loc["main", "lanes"] == 2
    assert tracks.loc["stream 7", "kind"] == "device" and tracks.loc["stream 7", "device"] == 0
    assert index.tracks["kind"].tolist() == ["thread", "device"]  # CPU first, then GPUs


def test_details_flows_search_and_summary(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("aten::mm", 0, 20, **{"External id": 3}),
        runtime("cudaLaunchKernel", 2, 3, correlation=9, external_id=3),
        kernel("gemm_kernel", 30, 10, correlation=9, grid=[4, 1, 1]),
        op("aten::relu", 50, 5, pid=4242, tid=25738),
    ])
    index = tb_plugin.load(path).timeline()
    s = index.slices
    k = int(s.index[s["source"] == "kernels"][0])
    details = event_details(index, k)
    assert details["name"] == "gemm_kernel" and details["fields"]["grid"] == "[4, 1, 1]"
    # Threads are the trace's pid and tid, not the model's row numbers ("thread 0").
    relu = event_details(index, next(i for i in range(len(s)) if index.names[s["name"].iat[i]] == "aten::relu"))
    assert (relu["fields"]["pid"], relu["fields"]["tid"]) == ("4242", "25738") and "thread" not in relu["fields"]
    assert (details["fields"]["pid"], details["fields"]["tid"]) == ("0", "7")
    assert details["operator"]["name"] == "aten::mm" and details["kind"] == "kernel"
    arrows = event_flows(index, details["operator"]["event"])
    assert [(a["kind"], a["to"]["event"]) for a in arrows] == [("launch", k)]
    found = search(index, "RELU")
    assert found["total"] == 1 and found["match"]["name"] == "aten::relu"
    assert search(index, "aten", after_us=10)["match"]["name"] == "aten::relu"
    assert search(index, "aten", after_us=10, direction="prev")["match"]["name"] == "aten::mm"
    summary = range_summary(index, 0, 35).set_index("name")
    assert summary.loc["aten::mm", "total_us"] == 20 and summary.loc["gemm_kernel", "total_us"] == 5
    assert set(summary["kind"]) <= set(KINDS)


def test_gpu_utilization_counter_matches_brute_force(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        kernel("a", 0, 10, correlation=1, **{"blocks per SM": 0.5}), kernel("b", 25, 50, correlation=2, **{"blocks per SM": 2}),
    ])
    series = {c["name"]: c for c in counters(tb_plugin.load(path).model, 0, 100, points=4)}
    util = series["GPU 0 utilization"]
    assert util["time_us"] == [0, 25, 50, 75] and util["value"] == [40.0, 100.0, 100.0, 0.0]
    assert series["GPU 0 est. SM efficiency"]["value"] == [20.0, 100.0, 100.0, 0.0]


def test_real_trace_queries_match_brute_force():
    index = tb_plugin.load(shared_trace("v100_ddp_nccl_memory")).timeline()
    s = index.slices
    t0 = float(s["ts"].min())
    for width, pixels in ((2e6, 1500), (1e5, 1500), (1e3, 1500)):
        result = index.query(t0 + 3e5, t0 + 3e5 + width, width / pixels)
        brute_force_check(index, t0 + 3e5, t0 + 3e5 + width, width / pixels, result)
        assert len(result["start_us"]) < 40 * pixels  # bounded by what is drawn, not by events


def test_timeline_routes(tmp_path):
    import shutil
    shutil.copytree(SAMPLES / "gpu_resnet50_v100", tmp_path / "resnet")
    plugin, client = make_client(tmp_path)
    plugin.store.wait_for_scan(30)
    q = "run=resnet&worker=worker0"
    wait_ready(client, q)
    tracks = client.get(f"{PREFIX}/timeline_tracks?{q}").get_json()
    assert tracks["end_us"] > tracks["start_us"] and len(tracks["steps"]["rows"]) == 6
    slices = client.get(f"{PREFIX}/timeline_slices?{q}&start_us={tracks['start_us']}&end_us={tracks['end_us']}"
                        f"&resolution_us=1000").get_json()
    n_events = sum(r[tracks["tracks"]["columns"].index("events")] for r in tracks["tracks"]["rows"])
    assert sum(slices["count"]) == n_events
    event = next(e for e in slices["event"] if e >= 0)
    assert client.get(f"{PREFIX}/timeline_event?{q}&event={event}").status_code == 200
    assert client.get(f"{PREFIX}/timeline_event?{q}&event=99999999").status_code == 404
    assert client.get(f"{PREFIX}/timeline_flows?{q}&event={event}").status_code == 200
    found = client.get(f"{PREFIX}/timeline_search?{q}&q=conv").get_json()
    assert found["total"] > 0 and "conv" in found["match"]["name"].lower()
    counters_body = client.get(f"{PREFIX}/timeline_counters?{q}&start_us=0&end_us={tracks['end_us']}&points=100").get_json()
    assert any(c["name"] == "GPU 0 utilization" for c in counters_body["counters"])
    summary = client.get(f"{PREFIX}/timeline_summary?{q}&start_us=0&end_us=1000&format=csv")
    assert summary.get_data(as_text=True).startswith("name,kind,count,total_us")
    assert client.get(f"{PREFIX}/timeline_slices?{q}&start_us=0&end_us=10&resolution_us=0").status_code == 400
    assert client.get(f"{PREFIX}/timeline_slices?{q}&start_us=0&end_us=10&resolution_us=1&tracks=a").status_code == 400
    download = client.get(f"{PREFIX}/trace_file?{q}")
    original = next((SAMPLES / "gpu_resnet50_v100").glob("*.gz")).read_bytes()
    assert download.data == original and "attachment" in download.headers["Content-Disposition"]
    plugin.store.stop()


def test_search_steps_through_matches_that_start_together(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("aten::add", 0, 5, tid=1), op("aten::add", 0, 5, tid=2), op("aten::add", 0, 5, tid=3), op("aten::add", 9, 1)])
    index = tb_plugin.load(path).timeline()
    seen = []
    found = search(index, "add")
    for _ in range(5):
        seen.append((found["position"], found["match"]["event"]))
        found = search(index, "add", after_event=found["match"]["event"])
    assert [p for p, _ in seen] == [0, 1, 2, 3, 0] and len({e for _, e in seen[:4]}) == 4
    back = search(index, "add", after_event=seen[0][1], direction="prev")
    assert back["position"] == 3


def test_counters_of_a_window_match_the_whole_trace(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        kernel("a", 0, 10, correlation=1), kernel("b", 25, 50, correlation=2),
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5,
         "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": 8, "Total Allocated": 8, "Total Reserved": 16}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 60,
         "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": -8, "Total Allocated": 0, "Total Reserved": 16}},
    ])
    model = tb_plugin.load(path).model
    whole = {c["name"]: c for c in counters(model, 0, 100, points=4)}
    part = {c["name"]: c for c in counters(model, 50, 75, points=1)}
    assert part["GPU 0 utilization"]["value"] == whole["GPU 0 utilization"]["value"][2:3]
    # the level at the window start comes from the record before it
    assert part["GPU0 memory allocated"]["value"] == [8.0] and part["GPU0 memory allocated"]["max"] == [8.0]


def test_counter_series_do_not_depend_on_the_window(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        kernel("a", 0, 10, correlation=1, **{"blocks per SM": 0.5}), kernel("b", 60, 10, correlation=2),
    ])
    model = tb_plugin.load(path).model
    names = lambda a, b: [c["name"] for c in counters(model, a, b, points=2)]  # noqa: E731
    assert names(0, 100) == names(50, 100) == ["GPU 0 utilization", "GPU 0 est. SM efficiency"]


def _memory_record(ts, device_type, total_allocated, total_reserved, bytes_=8):
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Device Type": device_type, "Device Id": 0, "Addr": 1, "Bytes": bytes_,
                     "Total Allocated": total_allocated, "Total Reserved": total_reserved}}


def test_memory_counters_follow_the_memory_view(tmp_path):
    """The Trace view's memory rows are the memory view's curves: the CPU's reserved total
    (PyTorch writes 0, its allocator reserves nothing) has no row, and which rows exist does
    not depend on the window, even one before every record."""
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        _memory_record(50, 0, 8, 0), _memory_record(60, 0, 24, 0, bytes_=16),
        _memory_record(70, 1, 32, 64, bytes_=32),
    ])
    model = tb_plugin.load(path).model
    names = lambda a, b: [c["name"] for c in counters(model, a, b, points=2)]  # noqa: E731
    expected = ["CPU memory allocated", "GPU0 memory allocated", "GPU0 memory reserved"]
    assert names(0, 100) == names(0, 10) == names(80, 100) == expected
    whole = {c["name"]: c for c in counters(model, 0, 100, points=4)}
    # buckets [0,25) [25,50) [50,75) [75,100): level at the start, maximum within
    assert whole["CPU memory allocated"]["time_us"] == [50.0, 75.0]
    assert whole["CPU memory allocated"]["max"] == [24.0, 24.0]
    assert whole["GPU0 memory reserved"]["max"] == [64.0, 64.0]
    early = {c["name"]: c for c in counters(model, 0, 10, points=2)}
    assert early["GPU0 memory allocated"]["time_us"] == []


def test_event_of_a_trace_without_timeline_events_is_refused_plainly(tmp_path):
    from tb_plugin.views.timeline import event_details, event_flows
    index = tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", [])).timeline()
    for lookup in (event_details, event_flows):
        with pytest.raises(KeyError, match="no event 0; this trace has no events on its timeline"):
            lookup(index, 0)


def test_the_trace_views_routes_answer_in_python_as_declared(tmp_path):
    """`Profile.answer` serves the Trace view's routes with their declared parameters: a tiny
    trace worked out on paper (aten::mm 0-10 µs, aten::add 20-25 µs, one kernel)."""
    from tb_plugin.errors import BadParameterError

    events = [op("aten::mm", 1000, 10, **{"External id": 1}), runtime("cudaLaunchKernel", 1002, 4, 7, 1),
              op("aten::add", 1020, 5, **{"External id": 2}), kernel("gemm", 1008, 6, 7)]
    profile = tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events))
    found = profile.answer("timeline_search", q="MM")  # case-insensitive: aten::mm and gemm
    assert (found["total"], found["match"]["name"]) == (2, "aten::mm")
    assert profile.answer("timeline_search", q="aten", direction="prev", after_us=15)["match"]["name"] == "aten::mm"
    summary = profile.answer("timeline_summary", start_us=0, end_us=22)  # aten::add clipped to 20-22
    rows = {name: (count, total) for name, count, total in summary[["name", "count", "total_us"]].itertuples(index=False)}
    assert rows["aten::add"] == (1, 2) and rows["aten::mm"] == (1, 10) and rows["gemm"] == (1, 6)
    with pytest.raises(BadParameterError, match="resolution_us"):  # required: no default
        profile.answer("timeline_slices", start_us=0, end_us=25)
    # the declared bounds hold in Python as over HTTP: a pixel spans more than 0 µs, a window ends after it starts
    with pytest.raises(BadParameterError, match="'resolution_us' must be > 0"):
        profile.answer("timeline_slices", start_us=0, end_us=25, resolution_us=0)
    with pytest.raises(BadParameterError, match=r"end_us \(5\) is before start_us \(9\)"):
        profile.answer("timeline_summary", start_us=9, end_us=5)
    with pytest.raises(BadParameterError, match="too wide"):
        profile.answer("timeline_counters", start_us=-1e308, end_us=1e308)
    slices = profile.answer("timeline_slices", start_us=0, end_us=25, resolution_us=1)
    assert sorted(slices["names"][n] for n in slices["name"]) == ["aten::add", "aten::mm", "cudaLaunchKernel", "gemm"]
    event = next(e for e, n in zip(slices["event"], slices["name"]) if slices["names"][n] == "gemm")
    assert profile.answer("timeline_event", event=event)["operator"]["name"] == "aten::mm"
    assert [f["kind"] for f in profile.answer("timeline_flows", event=event)["flows"]] == ["launch"]
    counted = profile.answer("timeline_counters", start_us=0, end_us=25, points=10**6)["counters"]
    assert counted and max(len(c["time_us"]) for c in counted) <= 5000  # answered at most 5000 as over HTTP
