"""Critical path of a step (`Profile.critical_path`, route `critical_path`): hand-made traces
whose path was worked out on paper (one stream with a blocking sync, two streams, a CUDA
graph; event records and waits read from `cuda_sync` records, and the inference without
them; a thread waiting for another), and on the real traces the invariant that the path
tiles the step."""

import csv
import io

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.common import step_windows
from tb_plugin.views.critical_path import (CRITICAL_PATH, CRITICAL_PATH_CATEGORIES, CRITICAL_PATH_OPERATORS, _graph,
                                           _waited_for)

from .helpers import PREFIX, SAMPLES, SHARED_TRACES, kernel, op, runtime, write_trace
from .hta_reference import critical_path as hta_critical_path
from .hta_reference import critical_path_graph as hta_critical_path_graph
from .hta_reference import gpu_trace_files


def load(tmp_path, events):
    return tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events))


def segments(profile, step=1):
    path = profile.critical_path(step)
    CRITICAL_PATH.check(path)
    return [(r["category"], r["start_us"], r["end_us"], r["name"]) for r in path.to_dict("records")]


def cuda_sync(name, ts, correlation, stream, device=0, **args):
    """A Kineto `cuda_sync` record (written with enable_cuda_sync_events)."""
    return {"ph": "X", "cat": "cuda_sync", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": 0,
            "args": {"cuda_sync_kind": name, "stream": stream, "correlation": correlation, "device": device,
                     "External id": correlation, **args}}


def stream_wait(ts, correlation, stream, wait_on_stream, record_correlation):
    return cuda_sync("Stream Wait Event", ts, correlation, stream, wait_on_stream=wait_on_stream,
                     wait_on_cuda_event_record_corr_id=record_correlation, wait_on_cuda_event_id=1)


def test_one_stream_with_a_blocking_sync(tmp_path):
    """ProfilerStep#1 0-200; aten::mm 8-22 launches K1 (call 10-15, runs 20-120) and K2 (call
    16-20, runs 120-150); cudaDeviceSynchronize 25-152; aten::item 152-190.
    Backwards from 200: CPU 152-200 after the sync, which waited 150-152 for K2 (120-150),
    which followed K1 on the stream (20-120), which waited for its launch call (10-20),
    after CPU 0-10."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 200, cat="user_annotation"), op("aten::mm", 8, 14, **{"External id": 1}),
        runtime("cudaLaunchKernel", 10, 5, 1, 1), kernel("K1", 20, 100, 1),
        runtime("cudaLaunchKernel", 16, 4, 2, 1), kernel("K2", 120, 30, 2),
        runtime("cudaDeviceSynchronize", 25, 127, 3, 0), op("aten::item", 152, 38),
    ])
    assert segments(profile) == [("cpu", 0, 10, ""), ("launch", 10, 20, "cudaLaunchKernel"), ("kernel", 20, 120, "K1"),
                                 ("kernel", 120, 150, "K2"), ("sync", 150, 152, "cudaDeviceSynchronize"),
                                 ("cpu", 152, 200, "")]
    categories = profile.critical_path(1, "categories")
    CRITICAL_PATH_CATEGORIES.check(categories)
    times = dict(zip(categories["category"], categories["time_us"]))
    assert (times["cpu"], times["launch"], times["kernel"], times["sync"]) == (58, 10, 130, 2)
    assert categories["share_pct"].sum() == pytest.approx(100)
    operators = profile.critical_path(1, "operators")
    CRITICAL_PATH_OPERATORS.check(operators)
    # aten::mm: 2 µs of its own CPU time (8-10), the launch (10) and both kernels (130);
    # aten::item: 38; ProfilerStep#1: its own CPU time (8 + 10) and the sync it made (2).
    # segments: one for an operator's CPU time, plus its device, launch and sync segments
    assert operators[["operator", "time_us", "segments"]].values.tolist() == [
        ["aten::mm", 142, 4], ["aten::item", 38, 1], ["ProfilerStep#1", 20, 2]]


def test_two_streams(tmp_path):
    """K1 on stream 8 (call 5-8, runs 20-100); K2 on stream 7 launched at 10 but starting at
    100, when K1 ends (an event wait); the step's host range is 0-50, its window 0-130.
    Backwards: K2 (100-130) waited for K1 on the other stream (100-100, no gap), K1 for its
    launch (5-20), after CPU 0-5."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 50, cat="user_annotation"),
        runtime("cudaLaunchKernel", 5, 3, 1, 0), kernel("K1", 20, 80, 1, stream=8),
        runtime("cudaLaunchKernel", 10, 2, 2, 0), kernel("K2", 100, 30, 2, stream=7),
    ])
    assert segments(profile) == [("cpu", 0, 5, ""), ("launch", 5, 20, "cudaLaunchKernel"), ("kernel", 20, 100, "K1"),
                                 ("kernel", 100, 130, "K2")]
    assert profile.critical_path(1)["stream"].tolist() == [-1, -1, 8, 7]


def test_stream_wait_with_a_gap(tmp_path):
    """As above but K2 starts at 110: the 10 µs after K1 are a wait on the other stream."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 50, cat="user_annotation"),
        runtime("cudaLaunchKernel", 5, 3, 1, 0), kernel("K1", 20, 80, 1, stream=8),
        runtime("cudaLaunchKernel", 10, 2, 2, 0), kernel("K2", 110, 30, 2, stream=7),
    ])
    assert segments(profile)[-2:] == [("stream_wait", 100, 110, ""), ("kernel", 110, 140, "K2")]


def test_cuda_graph(tmp_path):
    """cudaGraphLaunch 10-20 launches G1 (30-50) and G2 (50-60) under one correlation id;
    cudaStreamSynchronize 21-61; step 0-70. Backwards: CPU 61-70, sync 60-61, G2, G1 after it
    on the stream, G1's launch by the graph (10-30), CPU 0-10."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 70, cat="user_annotation"),
        runtime("cudaGraphLaunch", 10, 10, 5, 0), kernel("G1", 30, 20, 5), kernel("G2", 50, 10, 5),
        runtime("cudaStreamSynchronize", 21, 40, 6, 0),
    ])
    assert segments(profile) == [("cpu", 0, 10, ""), ("launch", 10, 30, "cudaGraphLaunch"), ("kernel", 30, 50, "G1"),
                                 ("kernel", 50, 60, "G2"), ("sync", 60, 61, "cudaStreamSynchronize"), ("cpu", 61, 70, "")]


# K1 on stream 7 (call 5-8, corr 1, runs 20-50); cudaEventRecord (9-10, corr 2) records an
# event on stream 7 after it; K3 on stream 8 (call 11-13, corr 3, runs 30-58) is unrelated;
# cudaStreamWaitEvent (14-15, corr 4) makes stream 9 wait on the event; K2 on stream 9 (call
# 16-18, corr 5) runs 60-120. Step: host 0-100, window 0-120.
EVENT_WAIT_TRACE = [
    op("ProfilerStep#1", 0, 100, cat="user_annotation"),
    runtime("cudaLaunchKernel", 5, 3, 1, 0), kernel("K1", 20, 30, 1, stream=7),
    runtime("cudaEventRecord", 9, 1, 2, 0),
    runtime("cudaLaunchKernel", 11, 2, 3, 0), kernel("K3", 30, 28, 3, stream=8),
    runtime("cudaStreamWaitEvent", 14, 1, 4, 0),
    runtime("cudaLaunchKernel", 16, 2, 5, 0), kernel("K2", 60, 60, 5, stream=9),
]


def test_stream_wait_follows_the_recorded_event(tmp_path):
    """With the Stream Wait Event record (stream 9 waits on record corr 2, on stream 7), the
    event stands for the last work launched on stream 7 before the record: K1, not K3,
    which ended later (58) but on a stream nobody waited on. Backwards: K2 (60-120) waited
    for the event from 50 (K1's end) to 60, K1 for its launch (5-20), after CPU 0-5."""
    profile = load(tmp_path, EVENT_WAIT_TRACE + [stream_wait(15, 4, stream=9, wait_on_stream=7, record_correlation=2)])
    assert segments(profile) == [("cpu", 0, 5, ""), ("launch", 5, 20, "cudaLaunchKernel"), ("kernel", 20, 50, "K1"),
                                 ("stream_wait", 50, 60, ""), ("kernel", 60, 120, "K2")]
    path = profile.critical_path(1)
    assert path["evidence"].tolist() == ["recorded"] * 5
    assert profile.model.syncs[["wait_on_stream", "wait_on_event_record_correlation", "runtime"]].values.tolist() \
        == [[7, 2, 3]]  # the cudaStreamWaitEvent call is row 3 of the runtime table


def test_stream_wait_without_records_is_inferred(tmp_path):
    """The same trace without cuda_sync records (older traces): the work on another stream
    that ended last before K2 started stands for the event: K3 (58), wait 58-60, then K3's
    launch (11-30) and CPU 0-11; the wait is marked inferred."""
    profile = load(tmp_path, EVENT_WAIT_TRACE)
    assert segments(profile) == [("cpu", 0, 11, ""), ("launch", 11, 30, "cudaLaunchKernel"), ("kernel", 30, 58, "K3"),
                                 ("stream_wait", 58, 60, ""), ("kernel", 60, 120, "K2")]
    assert profile.critical_path(1)["evidence"].tolist() == ["recorded"] * 3 + ["inferred", "recorded"]


def test_stream_wait_whose_record_names_no_recording_call_is_inferred(tmp_path):
    """The record as torch 2.11's Kineto writes it with CUDA 13 (samples/gpu_h100_*): the
    event's id but no recording call (`wait_on_cuda_event_record_corr_id` -1, no stream). It
    says K2 waited, not for what: inferred as without records (K3), the wait marked so."""
    unnamed = stream_wait(15, 4, stream=9, wait_on_stream=-1, record_correlation=-1)
    profile = load(tmp_path, EVENT_WAIT_TRACE + [unnamed])
    assert segments(profile) == [("cpu", 0, 11, ""), ("launch", 11, 30, "cudaLaunchKernel"), ("kernel", 30, 58, "K3"),
                                 ("stream_wait", 58, 60, ""), ("kernel", 60, 120, "K2")]
    assert profile.critical_path(1)["evidence"].tolist() == ["recorded"] * 3 + ["inferred", "recorded"]


def test_stream_wait_on_a_cuda_graph(tmp_path):
    """cudaGraphLaunch (10-12, corr 1) runs G1 (20-40) and G2 (40-55) on stream 7; the event
    recorded after it (corr 2) stands for the graph's last kernel on stream 7, G2; stream 8
    waits on it (corr 3) before K (corr 4, call 14-16, runs 60-80). Backwards: K, the wait
    55-60, G2, G1 before it on the stream, the graph launch 10-20, CPU 0-10."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 30, cat="user_annotation"),
        runtime("cudaGraphLaunch", 10, 2, 1, 0), kernel("G1", 20, 20, 1), kernel("G2", 40, 15, 1),
        runtime("cudaEventRecord", 12, 1, 2, 0), runtime("cudaStreamWaitEvent", 13, 1, 3, 0),
        stream_wait(13, 3, stream=8, wait_on_stream=7, record_correlation=2),
        runtime("cudaLaunchKernel", 14, 2, 4, 0), kernel("K", 60, 20, 4, stream=8),
    ])
    assert segments(profile) == [("cpu", 0, 10, ""), ("launch", 10, 20, "cudaGraphLaunch"), ("kernel", 20, 40, "G1"),
                                 ("kernel", 40, 55, "G2"), ("stream_wait", 55, 60, ""), ("kernel", 60, 80, "K")]


def test_event_synchronize_waits_for_the_recorded_event(tmp_path):
    """cudaEventSynchronize (15-52, corr 4) with its Event Sync record on the event recorded
    (corr 2) after K1 (stream 7, 20-50): it waited for K1, not for K3 (stream 8, 30-51),
    which ended later while it blocked. Backwards from 60: CPU 52-60, the sync 50-52, K1,
    its launch 5-20, CPU 0-5. Without the record it is inferred to have waited for K3."""
    events = [op("ProfilerStep#1", 0, 60, cat="user_annotation"),
              runtime("cudaLaunchKernel", 5, 3, 1, 0), kernel("K1", 20, 30, 1, stream=7),
              runtime("cudaEventRecord", 9, 1, 2, 0),
              runtime("cudaLaunchKernel", 11, 2, 3, 0), kernel("K3", 30, 21, 3, stream=8),
              runtime("cudaEventSynchronize", 15, 37, 4, 0)]
    record = cuda_sync("Event Sync", 50, 4, stream=-1, wait_on_stream=7, wait_on_cuda_event_record_corr_id=2)
    recorded = load(tmp_path / "a", events + [record])
    assert segments(recorded) == [("cpu", 0, 5, ""), ("launch", 5, 20, "cudaLaunchKernel"), ("kernel", 20, 50, "K1"),
                                  ("sync", 50, 52, "cudaEventSynchronize"), ("cpu", 52, 60, "")]
    assert recorded.critical_path(1)["evidence"].tolist() == ["recorded"] * 5
    # without the record, or with one naming no recording call (CUDA 13's), it is inferred
    unnamed = cuda_sync("Event Sync", 50, 4, stream=-1, wait_on_stream=-1, wait_on_cuda_event_record_corr_id=-1)
    for where, extra in (("b", []), ("c", [unnamed])):
        inferred = load(tmp_path / where, events + extra)
        assert segments(inferred)[-3:] == [("kernel", 30, 51, "K3"), ("sync", 51, 52, "cudaEventSynchronize"),
                                           ("cpu", 52, 60, "")]
        assert inferred.critical_path(1)["evidence"].tolist()[-2] == "inferred"


def test_stream_sync_record_names_the_stream_waited_on(tmp_path):
    """cudaStreamSynchronize (15-60, corr 4) of stream 7, whose Stream Sync record says so:
    it waited for K1 (stream 7, 20-50), not for K3 (stream 8, 30-55). Backwards from 70:
    CPU 60-70, the sync 50-60, K1, its launch 5-20, CPU 0-5."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 70, cat="user_annotation"),
        runtime("cudaLaunchKernel", 5, 3, 1, 0), kernel("K1", 20, 30, 1, stream=7),
        runtime("cudaLaunchKernel", 11, 2, 3, 0), kernel("K3", 30, 25, 3, stream=8),
        runtime("cudaStreamSynchronize", 15, 45, 4, 0), cuda_sync("Stream Sync", 50, 4, stream=7),
    ])
    assert segments(profile) == [("cpu", 0, 5, ""), ("launch", 5, 20, "cudaLaunchKernel"), ("kernel", 20, 50, "K1"),
                                 ("sync", 50, 60, "cudaStreamSynchronize"), ("cpu", 60, 70, "")]


# Main thread (tid 1): ProfilerStep#1 0-300; "## backward ##" 10-250 calls aten::ones_like
# (12-20), then runs nothing until 250 while the autograd engine's thread (tid 2) runs
# "autograd::engine::evaluate_function: MmBackward0" 40-200 (MmBackward0 45-190 inside it,
# launching K at 50-55 -> 60-100); the main thread then runs Optimizer.step 255-290.
BACKWARD_ON_ANOTHER_THREAD = [
    op("ProfilerStep#1", 0, 300, cat="user_annotation"), op("## backward ##", 10, 240, cat="user_annotation"),
    op("aten::ones_like", 12, 8),
    op("autograd::engine::evaluate_function: MmBackward0", 40, 160, tid=2), op("MmBackward0", 45, 145, tid=2),
    runtime("cudaLaunchKernel", 50, 5, 1, 0, tid=2), kernel("K", 60, 40, 1),
    op("Optimizer.step", 255, 35),
]


def test_a_thread_waiting_for_another(tmp_path):
    """Backwards from 300 on the main thread: CPU 250-300; it had been waiting in ## backward
    ## (20-250, no event of its own) for the engine's thread, whose last end in that
    stretch is evaluate_function's at 200: thread_wait 200-250, then the engine thread's
    CPU 40-200 (MmBackward0's 145 µs are its own work, a leaf operator, not a wait); that
    thread idled until 40, after the main thread's last end before it, ones_like's at 20:
    thread_wait 20-40; then the main thread's CPU 0-20."""
    profile = load(tmp_path, BACKWARD_ON_ANOTHER_THREAD)
    main, engine = (int(np.flatnonzero(profile.model.threads["tid"].to_numpy() == tid)[0]) for tid in ("1", "2"))
    assert segments(profile) == [
        ("cpu", 0, 20, ""), ("thread_wait", 20, 40, "aten::ones_like"), ("cpu", 40, 200, ""),
        ("thread_wait", 200, 250, "autograd::engine::evaluate_function: MmBackward0"), ("cpu", 250, 300, "")]
    path = profile.critical_path(1)
    assert path["thread"].tolist() == [main, engine, engine, main, main]
    assert path["evidence"].tolist() == ["recorded", "inferred", "recorded", "inferred", "recorded"]
    times = profile.critical_path(1, "categories").set_index("category")["time_us"]
    assert (times["cpu"], times["thread_wait"]) == (20 + 160 + 50, 20 + 50)
    # the engine thread's operators' own time is on the path: 160 µs of evaluate_function
    # and MmBackward0 together (15 + 145), the launch call inside them included
    operators = profile.critical_path(1, "operators").set_index("operator")["time_us"]
    assert operators["autograd::engine::evaluate_function: MmBackward0"] + operators["MmBackward0"] == 160


def test_a_leaf_operator_is_work_not_a_wait(tmp_path):
    """As above, but the main thread runs one leaf operator (aten::copy_, 20-250) instead of
    waiting: its time is its own work, the path stays on the main thread."""
    events = [e for e in BACKWARD_ON_ANOTHER_THREAD if e["name"] != "## backward ##"] + [op("aten::copy_", 20, 230)]
    assert segments(load(tmp_path, events)) == [("cpu", 0, 300, "")]


# Both at once: the engine thread (tid 2) runs evaluate_function 40-200 around MmBackward0
# 45-190, which launches K1 (call 50-52, corr 1) on stream 7 at 60-100, records an event
# after it (53-54, corr 2), launches an unrelated K3 (55-56, corr 3) on stream 8 at 70-105,
# makes stream 9 wait on the event (57-58, corr 4) and launches K2 (59-60, corr 5) on stream
# 9 at 110-280. The main thread (tid 1) waits in ## backward ## (10-250, ones_like 12-20),
# then in Optimizer.step (255-290) for the device (cudaDeviceSynchronize 260-285, with its
# Context Sync record). Step: 0-300.
BOTH = [
    op("ProfilerStep#1", 0, 300, cat="user_annotation"), op("## backward ##", 10, 240, cat="user_annotation"),
    op("aten::ones_like", 12, 8),
    op("autograd::engine::evaluate_function: MmBackward0", 40, 160, tid=2), op("MmBackward0", 45, 145, tid=2),
    runtime("cudaLaunchKernel", 50, 2, 1, 0, tid=2), kernel("K1", 60, 40, 1, stream=7),
    runtime("cudaEventRecord", 53, 1, 2, 0, tid=2),
    runtime("cudaLaunchKernel", 55, 1, 3, 0, tid=2), kernel("K3", 70, 35, 3, stream=8),
    runtime("cudaStreamWaitEvent", 57, 1, 4, 0, tid=2), stream_wait(58, 4, stream=9, wait_on_stream=7, record_correlation=2),
    runtime("cudaLaunchKernel", 59, 1, 5, 0, tid=2), kernel("K2", 110, 170, 5, stream=9),
    op("Optimizer.step", 255, 35), runtime("cudaDeviceSynchronize", 260, 25, 6, 0),
    cuda_sync("Context Sync", 280, 6, stream=-1),
]


def test_event_wait_and_thread_wait_together(tmp_path):
    """Backwards from 300: CPU 285-300 on the main thread; its cudaDeviceSynchronize waited
    (Context Sync record) for the device's last work, K2 (110-280): sync 280-285; K2 waited
    for the recorded event, K1's end (100): stream_wait 100-110; K1 for its launch (50-60) on
    the engine thread; that thread's CPU 40-50; before 40 it idled, until after the main
    thread's last end (ones_like, 20): thread_wait 20-40; the main thread's CPU 0-20."""
    profile = load(tmp_path, BOTH)
    assert segments(profile) == [
        ("cpu", 0, 20, ""), ("thread_wait", 20, 40, "aten::ones_like"), ("cpu", 40, 50, ""),
        ("launch", 50, 60, "cudaLaunchKernel"), ("kernel", 60, 100, "K1"), ("stream_wait", 100, 110, ""),
        ("kernel", 110, 280, "K2"), ("sync", 280, 285, "cudaDeviceSynchronize"), ("cpu", 285, 300, "")]
    assert profile.critical_path(1)["evidence"].tolist() == ["recorded", "inferred"] + ["recorded"] * 7


def test_hta_follows_the_same_event_and_has_no_edge_between_threads(tmp_path):
    """HTA's critical_path_analysis on the same trace (through `hta_reference.critical_path`):
    the same device work on the path, K1 then K2, joined by a sync edge (the recorded event;
    HTA gives it no weight, the 10 µs between them are our stream_wait), and the launch of
    K1. Deliberate difference: HTA's graph has no edge between CPU threads, so its path
    starts on the engine thread; ours goes on through the thread wait to the main thread."""
    path = write_trace(tmp_path / "w.pt.trace.json", BOTH, distributedInfo={"rank": 0})
    edges = hta_critical_path(path)
    on_device = edges[edges["stream"] >= 0]
    assert sorted(on_device["s_name"]) == ["K1", "K2"]
    assert "critical_path_sync_dependency" in set(edges["type"])
    assert "critical_path_kernel_launch_delay" in set(edges["type"])
    assert set(edges.loc[edges["stream"] < 0, "tid"].astype(int)) == {2}  # the engine thread only
    profile = tb_plugin.load(path)
    ours = profile.critical_path(1)
    assert sorted(ours.loc[ours["category"] == "kernel", "name"]) == ["K1", "K2"]
    assert set(profile.model.threads["tid"].to_numpy()[ours.loc[ours["thread"] >= 0, "thread"]]) == {"1", "2"}
    assert ours.loc[ours["category"] == "thread_wait", "start_us"].tolist() == [20]


ALEXNET = SHARED_TRACES / "a100_alexnet" / "worker0.pt.trace.json.gz"


def hta_sync_edges(path):
    """HTA's sync edges on the whole trace: (correlation, stream) of the device event an edge
    leaves -> (correlation, stream) of the device event or runtime call (stream -1) it enters."""
    graph = hta_critical_path_graph(path, "", None)
    trace = graph.full_trace_df.set_index("index")
    edges = set()
    for u, v, data in graph.edges(data=True):
        if data["object"].type.value == "critical_path_sync_dependency":
            a, b = (trace.loc[graph.node_list[n].ev_idx] for n in (u, v))
            edges.add(((int(a["correlation"]), int(a["stream"])), (int(b["correlation"]), int(b["stream"]))))
    return edges


# Real traces with cuda_sync records, and how many of their blocking syncs waited for device
# work: the A100 AlexNet benchmark (20 Stream Wait Events between streams 7 and 20-24, 16
# Stream Syncs and a Context Sync), and the H100 samples (a side stream's copy waited for by
# the compute stream, loss.item()'s Stream Syncs; CUDA graph replays in the compiled one).
# The samples' GPU mostly idles (host-bound), so their loss.item() syncs find the copy done.
SYNCED_TRACES = [(ALEXNET, 17), *((next(iter(sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))), None), 0)
                                  for run in ("gpu_h100_compiled", "gpu_h100_eager_nccl"))]


@pytest.fixture(scope="module", params=SYNCED_TRACES, ids=lambda p: p[0].parent.name if p[0] else "missing")
def synced(request):
    path, waited = request.param
    if path is None or not path.is_file():
        pytest.skip(f"{path} is not available (../shared/traces missing)")
    return path, tb_plugin.load(path).model, waited


def test_stream_waits_agree_with_hta(synced):
    """Each recorded wait we follow (producer -> the activity held back, by correlation) is a
    device-to-device sync edge of HTA's graph, and HTA has no other. The H100 samples' records
    name no recording call: neither follows one from them (we infer those waits by timing,
    HTA draws no edge)."""
    path, model, _ = synced
    g = _graph(model)
    consumers = np.flatnonzero(g.wait_src >= 0)
    ours = {((int(g.correlation[p]), int(g.stream[p])), (int(g.correlation[c]), int(g.stream[c])))
            for p, c in zip(g.wait_src[consumers], consumers)}
    waits = model.syncs[model.syncs["name"].astype(str) == "Stream Wait Event"]
    assert len(waits)
    named = (waits["wait_on_event_record_correlation"].to_numpy() >= 0).any()
    assert bool(ours) == named
    assert ours == {e for e in hta_sync_edges(path) if e[1][1] >= 0}
    assert g.wait_unnamed.sum() == (0 if named else len(waits))


def test_blocking_syncs_agree_with_hta(synced):
    """Each cudaStreamSynchronize / cudaDeviceSynchronize with its Stream Sync / Context Sync
    record: the device activity we say it waited for has an HTA sync edge into the call.
    Deliberate difference: HTA also draws an edge from each stream's last activity when that
    one had ended before the call began (a Context Sync on an idle device); it did not hold
    the call back, and we say the call waited for nothing (its sync segment is the call)."""
    path, model, waited_at_least = synced
    g = _graph(model)
    runtime_correlation = model.runtime["correlation"].to_numpy()
    hta_sources = {}
    for source, (call, stream) in hta_sync_edges(path):
        if stream < 0:
            hta_sources.setdefault(call, set()).add(source[0])
    checked = 0
    for s in g.blocking:
        waited, evidence = _waited_for(g, s)
        if evidence == "inferred":  # an Event Sync naming no recording call: HTA has no edge
            assert g.record_name[g.rt_record[s]] == "Event Sync" and not g.record_names_call[g.rt_record[s]]
            assert int(runtime_correlation[s]) not in hta_sources
            continue
        call = int(runtime_correlation[s])
        if waited >= 0:
            assert int(g.correlation[waited]) in hta_sources[call]
            checked += 1
        else:  # HTA's sources of the call had all ended before it began
            ended = [g.end[g.correlation == c].max() for c in hta_sources.get(call, ())]
            assert all(e <= g.rt_ts[s] for e in ended)
    assert checked >= waited_at_least


def test_unknown_step(tmp_path):
    profile = load(tmp_path, [op("ProfilerStep#1", 0, 70, cat="user_annotation")])
    with pytest.raises(KeyError, match="no step 9"):
        profile.critical_path(9)


@pytest.fixture(scope="module", params=gpu_trace_files())
def trace(request):
    return request.param


def test_path_tiles_every_step(trace):
    """On every real trace, the segments of each step's path follow each other without gap
    or overlap from the step's start to its end."""
    profile = tb_plugin.load(trace)
    for w in step_windows(profile.model).to_dict("records"):
        path = profile.critical_path(int(w["step"]))
        assert path["start_us"].iloc[0] == pytest.approx(w["start_us"]) and path["end_us"].iloc[-1] == pytest.approx(w["end_us"])
        np.testing.assert_allclose(path["start_us"].to_numpy()[1:], path["end_us"].to_numpy()[:-1])
        assert (path["dur_us"] > 0).all()


@pytest.mark.parametrize("table, declared", [("segments", CRITICAL_PATH), ("categories", CRITICAL_PATH_CATEGORIES),
                                             ("operators", CRITICAL_PATH_OPERATORS)])
def test_critical_path_route(a100_client, table, declared):
    url = f"{PREFIX}/critical_path?run=a100&worker=rank0&step=5&table={table}"
    body = a100_client.get(url).get_json()
    assert body["columns"] == declared.names and body["rows"]
    rows = list(csv.reader(io.StringIO(a100_client.get(url + "&format=csv").get_data(as_text=True))))
    assert rows[0] == body["columns"] and len(rows) - 1 == len(body["rows"])


@pytest.mark.parametrize("params, status, fragment", [("&step=99", 404, "steps: 4, 5, 6"), ("&table=x", 400, "segments")])
def test_critical_path_route_errors(a100_client, params, status, fragment):
    response = a100_client.get(f"{PREFIX}/critical_path?run=a100&worker=rank0{params}")
    assert response.status_code == status and fragment in response.get_json()["reason"]


def test_kernels_overlapping_on_a_stream_never_make_the_path_longer_than_the_step(tmp_path):
    """ProfilerStep#1 host 0-50; K1 (call 1-2) runs 10-60 and K2 (call 2-3) 40-100 on stream 7:
    the trace has them overlap by 20 µs. The step's window is 0-100. Backwards: K2 40-100, K1
    up to where K2 starts (10-40), its launch 1-10, CPU 0-1: 100 µs, the step's length."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 50, cat="user_annotation"),
        runtime("cudaLaunchKernel", 1, 1, 1, 0), kernel("K1", 10, 50, 1),
        runtime("cudaLaunchKernel", 2, 1, 2, 0), kernel("K2", 40, 60, 2),
    ])
    assert segments(profile) == [("cpu", 0, 1, ""), ("launch", 1, 10, "cudaLaunchKernel"), ("kernel", 10, 40, "K1"),
                                 ("kernel", 40, 100, "K2")]
    assert profile.critical_path(1)["dur_us"].sum() == 100
    assert profile.critical_path(1, "categories")["share_pct"].sum() == pytest.approx(100)
