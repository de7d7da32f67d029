"""Launch queues and copy bandwidth per device stream (`Profile.queue_length`,
`memory_bandwidth`, `queue_length_summary`, routes of the same names): against Holistic Trace
Analysis's queue length summary on every real GPU trace, raw event sums, a hand-made trace
worked out on paper, and each deliberate difference named."""

import collections
import csv
import io

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.queues import MEMORY_BANDWIDTH, QUEUE_LENGTH, QUEUE_SUMMARY

from .helpers import PREFIX, kernel, raw_events, runtime, write_trace
from .hta_reference import gpu_trace_files, hta

# The launch calls HTA 0.5.0 counts in its queue length (get_runtime_launch_events_query).
HTA_QUEUE_CALLS = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync",
                   "cudaMemsetAsync", "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync",
                   "hipMemsetAsync", "hipMemcpyWithStream"}


@pytest.fixture(scope="module", params=gpu_trace_files())
def trace(request):
    return request.param


def test_max_queue_length_matches_hta(trace):
    profile = tb_plugin.load(trace)
    calls = set(profile.kernel_launches()["runtime"])
    if not calls <= HTA_QUEUE_CALLS:
        pytest.skip(f"launches by calls HTA does not count ({sorted(calls - HTA_QUEUE_CALLS)}): "
                    "test_difference_every_launch_call_counts")
    analysis, rank = hta(trace)
    summary = analysis.get_queue_length_summary(ranks=[rank])
    expected = {} if summary is None else {int(s): int(v) for s, v in summary[("queue_length", "max")].droplevel(0).items()}
    got = profile.queue_length_summary()
    QUEUE_SUMMARY.check(got)
    assert dict(zip(got["stream"].tolist(), got["max_queue_length"].tolist())) == expected


def test_queue_series_invariants(trace):
    profile = tb_plugin.load(trace)
    series = profile.queue_length()
    QUEUE_LENGTH.check(series)
    assert (series["queue_length"] >= 0).all() and (series["outstanding"] >= series["queue_length"]).all()
    last = series.groupby(["device", "stream"]).tail(1)
    assert (last["queue_length"] == 0).all() and (last["outstanding"] == 0).all()
    summary = profile.queue_length_summary()
    assert summary["launches"].sum() == len(profile.kernel_launches())
    assert ((summary["time_at_zero_us"] >= 0) & (summary["time_at_zero_us"] <= summary["end_us"] - summary["start_us"] + 1e-6)).all()


def test_bandwidth_integral_matches_raw_events(trace):
    """Per stream, the integral of the bandwidth series is the sum of bandwidth x duration of
    its memcpys and memsets in the JSON (those that report a bandwidth and last > 0 µs)."""
    expected = collections.defaultdict(float)
    for e in raw_events(trace):
        cat = str(e.get("cat", "")).lower()
        args = e.get("args") or {}
        if e.get("ph") == "X" and cat in ("gpu_memcpy", "memcpy", "gpu_memset", "memset") and e.get("dur", 0) > 0:
            bw = args.get("memory bandwidth (GB/s)")
            if isinstance(bw, (int, float)):
                expected[int(args.get("stream", e["tid"]))] += bw * e["dur"]
    series = tb_plugin.load(trace).memory_bandwidth()
    MEMORY_BANDWIDTH.check(series)
    held = series.groupby(["device", "stream"])["ts_us"].diff(-1).fillna(0).abs()
    got = (series["memory_bw_gbps"] * held).groupby(series["stream"]).sum()
    assert {int(s): v for s, v in got.items() if v} == pytest.approx({s: v for s, v in expected.items() if v}, rel=1e-6)


# --- hand-made trace, worked out on paper ---------------------------------------------------------

def paper_trace(tmp_path, extra=()):
    """Stream 7: K1 call 0-5 runs 10-20; K2 call 6-8 runs 20-30; K3 call 40-45 runs 50-60.
    Stream 8: copy A call 1-2 runs 5-15 at 0.1 GB/s; copy B call 3-4 runs 10-20 at 0.3 GB/s."""
    events = [
        runtime("cudaLaunchKernel", 0, 5, 1, 0), kernel("K1", 10, 10, 1),
        runtime("cudaLaunchKernel", 6, 2, 2, 0), kernel("K2", 20, 10, 2),
        runtime("cudaLaunchKernel", 40, 5, 3, 0), kernel("K3", 50, 10, 3),
        runtime("cudaMemcpyAsync", 1, 1, 4, 0),
        kernel("Memcpy HtoD", 5, 10, 4, stream=8, cat="gpu_memcpy", bytes=1000, **{"memory bandwidth (GB/s)": 0.1}),
        runtime("cudaMemcpyAsync", 3, 1, 5, 0),
        kernel("Memcpy HtoD", 10, 10, 5, stream=8, cat="gpu_memcpy", bytes=3000, **{"memory bandwidth (GB/s)": 0.3}),
        *extra,
    ]
    return write_trace(tmp_path / "w.pt.trace.json", events, distributedInfo={"rank": 0})


def test_paper_trace_queue(tmp_path):
    series = tb_plugin.load(paper_trace(tmp_path)).queue_length()
    s7 = series[series["stream"] == 7]
    assert s7[["ts_us", "queue_length", "outstanding"]].values.tolist() == [
        [0, 1, 1], [6, 2, 2], [10, 1, 2], [20, 0, 1], [30, 0, 0], [40, 1, 1], [50, 0, 1], [60, 0, 0]]
    s8 = series[series["stream"] == 8]
    assert s8[["ts_us", "queue_length", "outstanding"]].values.tolist() == [
        [1, 1, 1], [3, 2, 2], [5, 1, 2], [10, 0, 2], [15, 0, 1], [20, 0, 0]]


def test_paper_trace_summary(tmp_path):
    summary = tb_plugin.load(paper_trace(tmp_path)).queue_length_summary().set_index("stream")
    s7 = summary.loc[7]
    assert (s7["start_us"], s7["end_us"], s7["launches"], s7["max_queue_length"], s7["max_queue_at_us"]) == (0, 60, 3, 2, 6)
    # queue 1 for 6 µs, 2 for 4, 1 for 10, 0 for 20, 1 for 10, 0 for 10: 34 / 60; zero for 30 µs
    assert s7["mean_queue_length"] == pytest.approx(34 / 60) and s7["time_at_zero_us"] == 30
    assert s7["max_outstanding"] == 2 and s7["memory_bytes"] == 0
    assert summary.loc[8, "memory_bytes"] == 4000 and summary.loc[8, "peak_memory_bw_gbps"] == pytest.approx(0.4)


def test_paper_trace_bandwidth(tmp_path):
    series = tb_plugin.load(paper_trace(tmp_path)).memory_bandwidth()
    assert series["stream"].tolist() == [8, 8, 8, 8]
    assert series["ts_us"].tolist() == [5, 10, 15, 20]
    assert series["memory_bw_gbps"].tolist() == pytest.approx([0.1, 0.4, 0.3, 0])


def test_paper_trace_matches_hta(tmp_path):
    analysis, rank = hta(paper_trace(tmp_path))
    summary = analysis.get_queue_length_summary(ranks=[rank])
    assert summary[("queue_length", "max")].droplevel(0).to_dict() == {7: 2, 8: 2}


# --- deliberate differences from HTA, each named --------------------------------------------------

def test_difference_every_launch_call_counts(tmp_path):
    """A cudaGraphLaunch (call 70-72) of two kernels (80-85, 85-90) puts both in the queue
    here; HTA does not count graph launches, so its stream-7 maximum stays that of K1-K3."""
    graph = [runtime("cudaGraphLaunch", 70, 2, 6, 0), kernel("G1", 80, 5, 6), kernel("G2", 85, 5, 6)]
    path = paper_trace(tmp_path, graph)
    series = tb_plugin.load(path).queue_length()
    s7 = series[(series["stream"] == 7) & (series["ts_us"] >= 70)]
    assert s7[["ts_us", "queue_length", "outstanding"]].values.tolist() == [[70, 2, 2], [80, 1, 2], [85, 0, 1], [90, 0, 0]]
    analysis, rank = hta(path)
    hta_series = analysis.get_queue_length_time_series(ranks=[rank])[rank]
    assert hta_series[hta_series["ts"] - hta_series["ts"].min() >= 70].empty


def test_difference_simultaneous_changes_are_one_row(tmp_path):
    """At 20 µs K1 ends and K2 starts: one row here, decrement applied; HTA has a row per
    change (only the queue's start events: its -1 for K2)."""
    series = tb_plugin.load(paper_trace(tmp_path)).queue_length()
    assert (series[(series["stream"] == 7)]["ts_us"] == 20).sum() == 1


# --- HTTP ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("route, table", [("queue_length", QUEUE_LENGTH), ("memory_bandwidth", MEMORY_BANDWIDTH),
                                          ("queue_length_summary", QUEUE_SUMMARY)])
def test_queue_routes_json_and_csv(a100_client, route, table):
    url = f"{PREFIX}/{route}?run=a100&worker=rank0"
    body = a100_client.get(url).get_json()
    assert body["columns"] == table.names and body["rows"]
    rows = list(csv.reader(io.StringIO(a100_client.get(url + "&format=csv").get_data(as_text=True))))
    assert rows[0] == body["columns"] and len(rows) - 1 == len(body["rows"])
    assert np.isfinite(np.array([r for row in body["rows"] for r in row if isinstance(r, float)])).all()


def test_trace_view_counters_draw_the_queue_and_bandwidth(tmp_path):
    """The Trace view's counter rows include each stream's queue and copy bandwidth; sampled
    in buckets [0,20) [20,40) [40,60): level at the bucket start, maximum within."""
    from tb_plugin.views.timeline import counters
    series = {c["name"]: c for c in counters(tb_plugin.load(paper_trace(tmp_path)).model, 0, 60, points=3)}
    queue = series["GPU 0 stream 7 queue length"]
    assert queue["time_us"] == [0, 20, 40] and queue["value"] == [1, 0, 1] and queue["max"] == [2, 0, 1]
    bandwidth = series["GPU 0 stream 8 copy bandwidth"]
    assert bandwidth["unit"] == "GB/s" and bandwidth["max"][0] == pytest.approx(0.4)
