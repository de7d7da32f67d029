"""Critical path of a step: the chain of CPU work, launches, device activity and waits that
decides how long the step takes.

The path is found backwards from the step's end by following, from each point, the
dependency that was satisfied last (the "last-arriving predecessor"). Dependencies:

- a kernel, memcpy or memset waited for (a) the previous activity on its stream, (b) its
  launch call on the CPU (a CUDA graph's kernels share their cudaGraphLaunch's
  correlation), and (c) the work other streams' events stood for (cudaStreamWaitEvent).
  How (c) is found depends on the trace:

  * **recorded** (the trace has Kineto's `cuda_sync` records, the `syncs` table, e.g.
    `torch.profiler` with `enable_cuda_sync_events`): each `Stream Wait Event` names the
    correlation of the cudaEventRecord call that recorded the event and the stream it was
    recorded on (`wait_on_stream`). The event stands for the last activity launched on that
    stream before the record call (largest correlation below it: correlations number calls
    in issue order in one process); the wait holds back the first activity launched on the
    waiting stream after the cudaStreamWaitEvent call (smallest correlation above the
    wait's). The dependency that was satisfied last wins; within `READY_SLACK_US` of the
    activity's start, the stream first, then the event, then the launch. A record that
    names the event but not its recording call (`wait_on_cuda_event_record_corr_id` -1, as
    torch 2.11's Kineto writes with CUDA 13 on an H100: `samples/gpu_h100_*`) says which
    activity waited but not for what: that wait is inferred as below.
  * **inferred** (older traces without `cuda_sync`): the activity on another stream of its
    device that ended last before it started stands for the event. When the previous
    activity on the stream ended, or the launch call started, within `READY_SLACK_US` of its
    start, that is the dependency, the stream first; else another stream's work ending later
    than both is; else the later of the two.

- a point on a CPU thread is preceded by CPU work on that thread back to the latest of:

  * a blocking call (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize,
    synchronous cudaMemcpy, hipMemcpyWithStream, ...: `common.is_blocking_call`),
    which waited for device work: with a `cuda_sync` record of the call, the one the record names (Stream Sync: the last activity of that stream
    to end while it blocked; Event Sync: the recorded event's activity, as above; Context
    Sync: the last of its device); for a call that itself launched device work (a
    synchronous memcpy), that work; otherwise (inferred) the device activity, on any
    device, that ended last while it blocked (cudaStreamWaitEvent does not block the
    thread: it is the device-side wait above);
  * a wait on another thread (inferred, `THREAD_WAIT_MIN_US`): a stretch of at least that
    long in which the thread starts and ends nothing, is in no runtime call, and is
    outside every operator or inside one that has child operators or is a user annotation
    (the enclosing range is waiting, not computing: a leaf operator's time is its own
    work), while another thread of the same process ended an operator or runtime call in
    it. The thread is taken to have waited for the last such end: the stretch from it to
    the thread's resumption is `thread_wait`, and the path goes on on the other thread.
    This is the main thread inside `## backward ##` / `torch.autograd.backward` while the
    autograd engine's thread runs `autograd::engine::evaluate_function: ...`, and the
    engine's thread idle until the main thread handed it the graph;
  * the step's start.

Every instant of the step window is attributed to exactly one segment, so the categories
add up to the step's length (where activities overlap on a stream, the earlier one's segment
ends where the later one's starts: the path is never longer than its step); `evidence` says for each segment whether its dependency was
read from the trace or inferred by timing. The arrays (event producers and consumers, wait
stretches) are built vectorised (`merge_asof`, `searchsorted`); the walk loops once per
segment of the path.

Differences from HTA (`critical_path_analysis`), which builds a full event graph of one rank
and finds its longest path (tests/test_views_critical_path.py runs it, with two pandas-3
fixes in `tests/hta_reference.py`):

- Where both read the records they agree: on the A100 AlexNet trace the device-to-device
  waits followed here are exactly HTA's sync edges (`test_stream_waits_agree_with_hta`),
  and what a blocking call waited for has an HTA sync edge into it
  (`test_blocking_syncs_agree_with_hta`); on the H100 samples, whose records name no
  recording call, HTA draws no edge for those waits and here they are inferred.
- HTA also draws a sync edge from a stream's last activity into a Context / Stream Sync that
  began after that activity had ended; here the call waited for nothing (its `sync`
  segment is the call itself) (same test).
- HTA's graph has no edge between CPU threads: its path starts or ends on one thread where
  ours goes on through a `thread_wait`; HTA gives a sync edge no weight, the wait between
  producer and consumer is a `stream_wait` segment here
  (`test_hta_follows_the_same_event_and_has_no_edge_between_threads`).
- The consumer of a stream wait is, here, the next activity launched on the waiting stream
  by any thread (stream order is per stream); HTA takes the next launch of the same CPU
  thread. The producer is the last activity launched on the recorded stream before the
  record, here by correlation, in HTA by the launch calls' start times; both agree when
  one thread launches on the stream.
- Without `cuda_sync` records HTA follows no cross-stream dependency; here it is inferred.
- HTA's path is the longest in the rank's graph; here the path is the chain that decides
  the step's end, and it tiles the step window (CPU time before the first launch included).
- fwd/bwd flows (`fwdbwd`) are not followed: they link a forward operator to its backward
  one, a data dependency satisfied long before the backward runs (the engine's thread
  starts when the main thread hands it the graph, which the thread-wait rule follows).

Not followed: collectives' waits on other ranks (their kernels are device time).
"""

from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..errors import BadParameterError
from ..schema import choice, declare, integer, route
from ..trace.linking import Nesting
from ..trace.model import TraceModel
from .common import (cached, device_activity, is_blocking_call, known_step, name_mask, op_names, step_windows,
                     texts)
from .intervals import clip_to_windows

READY_SLACK_US = 1.0
# Shorter stretches without events on a thread are taken as its own work: Python between
# operators, the autograd engine picking the next node.
THREAD_WAIT_MIN_US = 50.0
CATEGORIES = ("cpu", "launch", "kernel", "memcpy", "memset", "sync", "stream_wait", "thread_wait", "gpu_idle")
RECORDED, INFERRED = "recorded", "inferred"
# Kineto's names of CUPTI's synchronisation records (`syncTypeString`).
_STREAM_WAIT_EVENT, _EVENT_SYNC, _STREAM_SYNC, _CONTEXT_SYNC = "Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync"

CRITICAL_PATH = declare(
    "critical_path", "one segment of a step's critical path, in time order",
    ("step", "int64", "", "step number"),
    ("category", "str", "", "cpu, launch (call start to device start), kernel, memcpy, memset, sync (CPU blocked on the device), stream_wait (on another stream's event), thread_wait (a CPU thread waiting for another thread), gpu_idle"),
    ("start_us", "float64", "us", "segment start"),
    ("end_us", "float64", "us", "segment end"),
    ("dur_us", "float64", "us", "segment length"),
    ("name", "str", "", "the device activity, launch call or blocking call; for thread_wait the operator or call of the other thread that ended; empty for CPU time"),
    ("operator", "str", "", "operator that launched the activity or made the call; empty for CPU time (see critical_path_operators)"),
    ("device", "int64", "", "device index; -1 on the CPU"),
    ("stream", "int64", "", "stream id; -1 on the CPU"),
    ("thread", "int64", "", "row of model.threads; -1 on the device"),
    ("evidence", "str", "", "recorded: the dependency is read from the trace (stream or thread order, a launch's correlation, a cuda_sync record); inferred: found by timing where the trace records none (a wait on another stream in a trace without cuda_sync records, what a blocking call waited for, a wait on another thread)"),
)
CRITICAL_PATH_CATEGORIES = declare(
    "critical_path_categories", "time of one category on a step's critical path",
    ("category", "str", "", "as in the critical_path table"),
    ("time_us", "float64", "us", "time on the path"),
    ("share_pct", "float64", "pct", "share of the step's length"),
)
CRITICAL_PATH_OPERATORS = declare(
    "critical_path_operators", "one operator's time on a step's critical path",
    ("operator", "str", "", "operator: its own CPU time on the path, plus the device, launch and sync segments it launched or called"),
    ("time_us", "float64", "us", "its time on the path"),
    ("share_pct", "float64", "pct", "share of the step's length"),
    ("segments", "int64", "count", "segments on the path"),
)


class _LastEnded:
    """Rows grouped by an integer key, by end time: "which row of this key ended last at or
    before t (and after `after`)", by two binary searches."""

    def __init__(self, key: npt.NDArray[np.int64], end: npt.NDArray[np.float64]) -> None:
        self.order = np.lexsort((end, key))
        self.key, self.end = key[self.order], end[self.order]

    def last(self, key: int, t: float, after: float) -> int:
        lo = np.searchsorted(self.key, key, side="left")
        hi = np.searchsorted(self.key, key, side="right")
        k = lo + np.searchsorted(self.end[lo:hi], t, side="right") - 1
        if k < lo or self.end[k] <= after:
            return -1
        return int(self.order[k])


def _nearest_by_correlation(activity: pd.DataFrame, device: npt.NDArray[np.int64], stream: npt.NDArray[np.int64],
                            correlation: npt.NDArray[np.int64], direction: Literal["backward", "forward"]) \
        -> npt.NDArray[np.int64]:
    """Per query (device, stream, correlation): the row of `activity` on that stream with
    the largest correlation below it (`direction` "backward": the last work the stream was
    given before that call) or the smallest above it ("forward": the next work it was given);
    among activities of one correlation (a CUDA graph's), the last, resp. first, in stream
    order. -1 where there is none."""
    out = np.full(len(correlation), -1, dtype=np.int64)
    queries = pd.DataFrame({"device": device, "stream": stream, "correlation": correlation,
                            "query": np.arange(len(correlation))})
    queries = queries[queries["correlation"] >= 0].sort_values("correlation", kind="stable")
    rows = activity[activity["correlation"] >= 0]
    if not len(queries) or not len(rows):
        return out
    found = pd.merge_asof(queries, rows, on="correlation", by=["device", "stream"], direction=direction,
                          allow_exact_matches=False)
    hit = found["row"].notna().to_numpy()
    out[found["query"].to_numpy()[hit]] = found["row"].to_numpy()[hit].astype(np.int64)
    return out


class _Graph:
    """The arrays the walk reads, built once per model."""

    def __init__(self, model: TraceModel) -> None:
        dev = device_activity(model)
        order = np.lexsort((dev["ts"].to_numpy(), dev["stream"].to_numpy(), dev["device"].to_numpy()))
        self.kind = dev["kind"].to_numpy()[order]
        self.name = dev["name"].to_numpy()[order]
        self.device = dev["device"].to_numpy()[order]
        self.stream = dev["stream"].to_numpy()[order]
        self.ts = dev["ts"].to_numpy()[order]
        self.end = self.ts + dev["dur"].to_numpy()[order]
        self.runtime = dev["runtime"].to_numpy()[order]
        self.correlation = dev["correlation"].to_numpy()[order]
        self.op = op_names(model, dev["op"].to_numpy()[order])
        same = np.zeros(len(order), dtype=bool)
        same[1:] = (self.device[1:] == self.device[:-1]) & (self.stream[1:] == self.stream[:-1])
        self.prev = np.where(same, np.arange(len(order)) - 1, -1)
        # "What ended last before t on this device / stream".
        self.on_device = _LastEnded(self.device, self.end)
        self.stream_code = np.cumsum(~same) - 1
        self.stream_codes = dict(zip(zip(self.device[~same].tolist(), self.stream[~same].tolist()),
                                     range(int((~same).sum()))))
        self.on_stream = _LastEnded(self.stream_code, self.end)
        rt = model.runtime
        self.rt_ts, self.rt_end = rt["ts"].to_numpy(), (rt["ts"] + rt["dur"]).to_numpy()
        self.rt_thread = rt["thread"].to_numpy()
        self.rt_name = texts(rt["name"])
        self.rt_op = op_names(model, rt["op"].to_numpy())
        self.blocking = np.flatnonzero(name_mask(rt["name"], is_blocking_call))
        self.syncs = _LastEnded(self.rt_thread[self.blocking], self.rt_end[self.blocking])
        # A blocking call's own device work (a synchronous memcpy): the last of it to end.
        launched = np.flatnonzero(self.runtime >= 0)
        launched = launched[np.argsort(-self.end[launched], kind="stable")]
        calls, latest = np.unique(self.runtime[launched], return_index=True)
        self.rt_own = np.full(len(rt), -1, dtype=np.int64)
        self.rt_own[calls] = launched[latest]
        self._read_sync_records(model.syncs, len(rt))
        ops = model.ops
        self.op_thread, self.op_ts = ops["thread"].to_numpy(), ops["ts"].to_numpy()
        self.op_end = self.op_ts + ops["dur"].to_numpy()
        self.op_parent = ops["parent"].to_numpy()
        self.op_name = texts(ops["name"])
        self._find_thread_waits(model)

    def _read_sync_records(self, syncs: pd.DataFrame, runtime_rows: int) -> None:
        """From the `cuda_sync` records: per device activity, the activity a recorded stream
        wait made it wait for (`wait_src`); per runtime call, its record (`rt_record`)."""
        self.recorded = bool(len(syncs) and (syncs["runtime"].to_numpy() >= 0).any())
        self.wait_src = np.full(len(self.ts), -1, dtype=np.int64)
        # Activities held back by a wait whose record names no recording call: inferred.
        self.wait_unnamed = np.zeros(len(self.ts), dtype=bool)
        self.rt_record = np.full(runtime_rows, -1, dtype=np.int64)
        if not self.recorded:
            return
        name = texts(syncs["name"])
        self.record_name = name
        self.record_device = syncs["device"].to_numpy()
        self.record_stream = syncs["stream"].to_numpy()
        record_call = syncs["wait_on_event_record_correlation"].to_numpy()
        self.record_names_call = record_call >= 0
        activity = pd.DataFrame({"device": self.device, "stream": self.stream, "correlation": self.correlation,
                                 "row": np.arange(len(self.ts))}).sort_values(["correlation", "row"], kind="stable")
        # The event's work: the last launched on the recorded stream before the record call.
        self.record_producer = _nearest_by_correlation(
            activity, self.record_device, syncs["wait_on_stream"].to_numpy(), record_call, "backward")
        # The waiting work: the first launched on the waiting stream after the wait call.
        is_wait = name == _STREAM_WAIT_EVENT
        consumer = _nearest_by_correlation(activity, self.record_device, self.record_stream,
                                           np.where(is_wait, syncs["correlation"].to_numpy(), -1), "forward")
        unnamed = consumer[(consumer >= 0) & ~self.record_names_call]
        self.wait_unnamed[unnamed] = True
        pairs = pd.DataFrame({"consumer": consumer, "producer": self.record_producer})
        pairs = pairs[(pairs["consumer"] >= 0) & (pairs["producer"] >= 0)]
        producer_end = self.end[pairs["producer"].to_numpy()]
        # A record that puts the producer's end after the consumer's start contradicts the
        # timeline: not followed. Several waits before one activity: the latest event counts.
        consistent = producer_end <= self.ts[pairs["consumer"].to_numpy()]
        pairs = pairs[consistent].assign(end=producer_end[consistent])
        pairs = pairs.sort_values("end", kind="stable").drop_duplicates("consumer", keep="last")
        self.wait_src[pairs["consumer"].to_numpy()] = pairs["producer"].to_numpy()
        linked = syncs["runtime"].to_numpy()
        # A call with several records (a Context Sync per device) keeps one: they name one wait.
        self.rt_record[linked[linked >= 0]] = np.flatnonzero(linked >= 0)

    def _find_thread_waits(self, model: TraceModel) -> None:
        """The stretches in which a CPU thread waited for another (see the module docstring),
        as arrays sorted for `last_thread_wait`: the thread, when it resumed, and the end on
        the other thread it waited for (time, thread, name)."""
        ops, rt = model.ops, model.runtime
        n_ops, n_rt = len(ops), len(rt)
        thread = np.concatenate([self.op_thread, self.op_thread, self.rt_thread, self.rt_thread]).astype(np.int64)
        time = np.concatenate([self.op_ts, self.op_end, self.rt_ts, self.rt_end])
        call_start = np.zeros(len(time), dtype=bool)
        call_start[2 * n_ops: 2 * n_ops + n_rt] = True
        # Among boundaries at one time a call's start comes last: the stretch after it is the call.
        order = np.lexsort((call_start, time, thread))
        thread, time, call_start = thread[order], time[order], call_start[order]
        first = np.ones(len(time), dtype=bool)
        first[1:] = thread[1:] != thread[:-1]
        before = np.where(first, -np.inf, np.roll(time, 1))
        in_call = ~first & np.roll(call_start, 1)
        gap = (time - before >= THREAD_WAIT_MIN_US) & ~in_call
        a, b, t_gap = before[gap], time[gap], thread[gap]
        inner = Nesting(self.op_thread, self.op_ts, self.op_end - self.op_ts).enclosing(
            t_gap, np.where(np.isfinite(a), (a + b) / 2, b - THREAD_WAIT_MIN_US / 2))
        # Waiting: outside every operator, or inside one with child operators or an annotation.
        encloser = (np.bincount(self.op_parent[self.op_parent >= 0], minlength=n_ops) > 0) \
            | (ops["cat"].astype(str) == "user_annotation").to_numpy()
        waiting = inner < 0
        waiting[~waiting] = encloser[inner[~waiting]]
        a, b, t_gap = a[waiting], b[waiting], t_gap[waiting]
        pid = pd.factorize(model.threads["pid"])[0].astype(np.int64)
        ends = pd.DataFrame({"pid": pid[np.concatenate([self.op_thread, self.rt_thread]).astype(np.int64)],
                             "end": np.concatenate([self.op_end, self.rt_end]),
                             "by": np.concatenate([self.op_thread, self.rt_thread]).astype(np.int64),
                             "what": np.arange(n_ops + n_rt)}).sort_values("end", kind="stable")
        stretches = pd.DataFrame({"pid": pid[t_gap], "end": b, "start": a, "thread": t_gap}).sort_values("end", kind="stable")
        # The last end on another thread of the process before the thread resumed (the
        # thread itself has no boundary inside the stretch).
        found = pd.merge_asof(stretches, ends.rename(columns={"end": "other_end"}), left_on="end",
                              right_on="other_end", by="pid", direction="backward", allow_exact_matches=False)
        found = found[found["other_end"].notna() & (found["other_end"] > found["start"])]
        self.wait_thread = found["thread"].to_numpy().astype(np.int64)
        self.wait_end = found["end"].to_numpy()
        self.wait_on_end = found["other_end"].to_numpy()
        self.wait_on_thread = found["by"].to_numpy().astype(np.int64)
        self.wait_on_name = np.concatenate([self.op_name, self.rt_name])[found["what"].to_numpy().astype(np.int64)]
        self.thread_waits = _LastEnded(self.wait_thread, self.wait_end)

    def last_on_device(self, device: int, t: float, after: float) -> int:
        """The activity on `device` that ended last at or before t (and after `after`), or -1."""
        return self.on_device.last(device, t, after)

    def last_sync(self, thread: int, t: float, after: float) -> int:
        """The blocking call on `thread` that returned last at or before t (after `after`), or -1."""
        k = self.syncs.last(thread, t, after)
        return int(self.blocking[k]) if k >= 0 else -1

    def last_thread_wait(self, thread: int, t: float, after: float) -> int:
        """The wait on another thread that `thread` resumed from last at or before t (after
        `after`), or -1."""
        return self.thread_waits.last(thread, t, after)

    def cpu_self_time(self, threads: npt.NDArray[np.int64], starts: npt.NDArray[np.float64],
                      ends: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.float64]]:
        """Per operator name, its self time (own time minus its children's) inside the given
        CPU segments, each on its thread: (names, µs)."""
        win, src, a, b = clip_to_windows(self.op_ts, self.op_end, starts, ends)
        keep = self.op_thread[src] == np.asarray(threads)[win]
        win, src, clipped = win[keep], src[keep], (b - a)[keep]
        own = np.zeros(len(self.op_ts))
        np.add.at(own, src, clipped)
        has_parent = self.op_parent[src] >= 0
        np.add.at(own, self.op_parent[src[has_parent]], -clipped[has_parent])
        rows = np.unique(src)
        return self.op_name[rows], np.maximum(own[rows], 0.0)


def _graph(model: TraceModel) -> _Graph:
    return cached(model, "critical_path_graph", lambda: _Graph(model))


def critical_path(model: TraceModel, step: int) -> pd.DataFrame:
    """The critical path of `step` (declared as `CRITICAL_PATH`), one row per segment in time
    order; see the module docstring for the dependencies followed. Raises KeyError for a
    step the trace does not have."""
    return cached(model, ("critical_path", int(step)), lambda: _critical_path(model, int(step)))


def _critical_path(model: TraceModel, step: int) -> pd.DataFrame:
    windows = step_windows(model)
    match = np.flatnonzero(windows["step"].to_numpy() == step)
    if not len(match):
        raise KeyError(f"no step {step}; steps: {', '.join(map(str, windows['step'].tolist())) or 'none'}")
    w = windows.iloc[int(match[0])]
    start, end = float(w["start_us"]), float(w["end_us"])
    g = _graph(model)
    main_thread = _step_thread(model, step)
    segments = []
    # Segments are found from the end backwards; each ends where the one after it starts.
    # Activities that overlap on a stream (a kernel starting before the previous one on its
    # stream ended, as some traces record) would otherwise both count the overlap, and the
    # path would run longer than its step.
    frontier = end

    def add(category: str, a: float, b: float, name: str = "", operator: str = "", device: int = -1, stream: int = -1,
            thread: int = -1, evidence: str = RECORDED) -> None:
        nonlocal frontier
        a, b = max(a, start), min(b, end, frontier)
        if b > a:
            segments.append((category, a, b, name, operator, device, stream, thread, evidence))
            frontier = a

    # Begin where the step ends: the device activity that finished last, else the CPU.
    at: tuple = ("cpu", main_thread, end)  # ("gpu", activity) or ("cpu", thread, time)
    last = np.flatnonzero((g.end >= end - 1e-9) & (g.end <= end + 1e-9) & (g.ts < end))
    if len(last):
        at = ("gpu", int(last[0]))
    for _ in range(4 * len(g.ts) + 2 * len(g.blocking) + 2 * len(g.wait_end) + 4):
        if at[0] == "gpu":
            i = at[1]
            add(g.kind[i], g.ts[i], g.end[i], g.name[i], g.op[i], g.device[i], g.stream[i])
            t = g.ts[i]
            if t <= start:
                break
            choice, before = _device_dependency(g, i, start)
            if choice == "stream":
                add("gpu_idle", g.end[before], t, device=g.device[i], stream=g.stream[i])
                at = ("gpu", before)
            elif choice == "launch":
                r = g.runtime[i]
                add("launch", g.rt_ts[r], t, g.rt_name[r], g.rt_op[r], thread=g.rt_thread[r])
                at = ("cpu", int(g.rt_thread[r]), g.rt_ts[r])
            elif choice in ("event", "other"):
                add("stream_wait", g.end[before], t, device=g.device[i], stream=g.stream[i],
                    evidence=RECORDED if choice == "event" else INFERRED)
                at = ("gpu", before)
            else:  # nothing before it in the step: the stream idled from the step's start
                add("gpu_idle", start, t, device=g.device[i], stream=g.stream[i])
                break
        else:
            _, thread, t = at
            if t <= start:
                break
            s = g.last_sync(thread, t, start)
            k = g.last_thread_wait(thread, t, start)
            if s < 0 and k < 0:
                add("cpu", start, t, thread=thread)
                break
            if k >= 0 and (s < 0 or g.wait_end[k] > g.rt_end[s]):
                add("cpu", g.wait_end[k], t, thread=thread)
                add("thread_wait", g.wait_on_end[k], g.wait_end[k], g.wait_on_name[k], thread=thread, evidence=INFERRED)
                at = ("cpu", int(g.wait_on_thread[k]), g.wait_on_end[k])
                continue
            add("cpu", g.rt_end[s], t, thread=thread)
            waited, evidence = _waited_for(g, s)
            if waited >= 0:
                add("sync", g.end[waited], g.rt_end[s], g.rt_name[s], g.rt_op[s], thread=thread, evidence=evidence)
                at = ("gpu", waited)
            else:
                add("sync", g.rt_ts[s], g.rt_end[s], g.rt_name[s], g.rt_op[s], thread=thread, evidence=evidence)
                at = ("cpu", thread, g.rt_ts[s])
    segments.reverse()
    frame = pd.DataFrame(segments, columns=["category", "start_us", "end_us", "name", "operator", "device", "stream",
                                            "thread", "evidence"])
    frame.insert(0, "step", step)
    frame["dur_us"] = frame["end_us"] - frame["start_us"]
    return CRITICAL_PATH.frame(frame)


def _device_dependency(g: _Graph, i: int, start: float) -> tuple[str, int | None]:
    """(which dependency of device activity i was satisfied last, the activity it leads
    to): ("stream", previous on the stream), ("launch", None), ("event", the recorded event's
    activity), ("other", the inferred other stream's activity), or ("none", None)."""
    t = g.ts[i]
    p, r = g.prev[i], g.runtime[i]
    stream_ready = g.end[p] if p >= 0 else -np.inf
    launch_ready = g.rt_ts[r] if r >= 0 else -np.inf
    if g.recorded and not g.wait_unnamed[i]:
        e = g.wait_src[i]
        ready = (stream_ready, g.end[e] if e >= 0 else -np.inf, launch_ready)
        near = [x >= t - READY_SLACK_US for x in ready]
        pick = near.index(True) if any(near) else int(np.argmax(ready))
        if ready[pick] == -np.inf:
            return "none", None
        return (("stream", int(p)), ("event", int(e)), ("launch", None))[pick]
    other = g.last_on_device(g.device[i], t, max(stream_ready, launch_ready, start))
    if stream_ready >= t - READY_SLACK_US:
        choice = "stream"
    elif launch_ready >= t - READY_SLACK_US or other < 0:
        choice = "launch" if launch_ready >= stream_ready else "stream"
    else:
        return "other", other
    if choice == "stream":
        return ("stream", int(p)) if p >= 0 else ("none", None)
    return ("launch", None) if r >= 0 else ("none", None)


def _waited_for(g: _Graph, s: int) -> tuple[int, str]:
    """(the device activity blocking call s waited for, or -1; its evidence). From the
    call's `cuda_sync` record where it has one: Stream Sync, the last activity of that
    stream to end while it blocked; Event Sync, the recorded event's activity; Context
    Sync, the last of its device. Else from its own device work (a synchronous memcpy).
    Else inferred: the activity that ended last while it blocked, on any device (Kineto
    then does not say which stream a sync waited on, or, in an Event Sync that names no
    recording call, which work the event stood for)."""
    t, after = g.rt_end[s], g.rt_ts[s]
    k = g.rt_record[s]
    name = g.record_name[k] if k >= 0 else ""
    if name == _EVENT_SYNC and g.record_names_call[k]:
        p = g.record_producer[k]
        return (int(p) if p >= 0 and after < g.end[p] <= t else -1), RECORDED
    if name == _STREAM_SYNC:
        code = g.stream_codes.get((int(g.record_device[k]), int(g.record_stream[k])))
        return (g.on_stream.last(code, t, after) if code is not None else -1), RECORDED
    if name == _CONTEXT_SYNC:
        return g.last_on_device(g.record_device[k], t, after), RECORDED
    own = g.rt_own[s]
    if own >= 0:
        return (int(own) if after < g.end[own] <= t else -1), RECORDED
    best, best_end = -1, -np.inf
    for device in np.unique(g.device):  # devices of one trace: a handful
        k = g.last_on_device(device, t, after)
        if k >= 0 and g.end[k] > best_end:
            best, best_end = k, g.end[k]
    return best, INFERRED


def _step_thread(model: TraceModel, step: int) -> int:
    """The thread of the step's ProfilerStep range (the main training thread)."""
    steps = model.steps
    if len(steps):
        row = steps[steps["step"] == step]
        if len(row) and row["op"].iloc[0] >= 0:
            return int(model.ops["thread"].iloc[int(row["op"].iloc[0])])
    ops = model.ops
    return int(ops["thread"].value_counts().index[0]) if len(ops) else 0


def critical_path_categories(model: TraceModel, step: int) -> pd.DataFrame:
    """Time per category on the step's critical path (declared as `CRITICAL_PATH_CATEGORIES`)."""
    path = critical_path(model, step)
    windows = step_windows(model).set_index("step")
    length = float(windows.loc[step, "end_us"] - windows.loc[step, "start_us"])  # type: ignore[operator, arg-type]  # (pandas-stubs: a cell is any scalar)
    time = path.groupby("category")["dur_us"].sum().reindex(list(CATEGORIES), fill_value=0.0)
    return CRITICAL_PATH_CATEGORIES.frame({"category": time.index.astype(object), "time_us": time.to_numpy(),
                                           "share_pct": 100 * time.to_numpy() / length if length else 0 * time.to_numpy()})


def critical_path_operators(model: TraceModel, step: int, top: int = 20) -> pd.DataFrame:
    """The operators with the most time on the step's critical path (declared as
    `CRITICAL_PATH_OPERATORS`): each operator's self time inside the path's CPU segments,
    plus the device, launch and sync segments it launched or called. `segments` counts the
    latter (and 1 for CPU time)."""
    path = critical_path(model, step)
    windows = step_windows(model).set_index("step")
    length = float(windows.loc[step, "end_us"] - windows.loc[step, "start_us"])  # type: ignore[operator, arg-type]  # (pandas-stubs: a cell is any scalar)
    cpu = path[path["category"] == "cpu"]
    names, self_us = _graph(model).cpu_self_time(cpu["thread"].to_numpy(), cpu["start_us"].to_numpy(), cpu["end_us"].to_numpy())
    named = path[path["operator"] != ""]
    parts = pd.concat([pd.DataFrame({"operator": names, "dur_us": self_us, "n": 1}),
                       named.assign(n=1)[["operator", "dur_us", "n"]]], ignore_index=True)
    parts = parts[parts["dur_us"] > 0]
    g = parts.groupby("operator").agg(time_us=("dur_us", "sum"), segments=("n", "sum")).reset_index()
    g = g.sort_values("time_us", ascending=False, kind="stable").head(top)
    g["share_pct"] = 100 * g["time_us"] / length if length else 0.0
    return CRITICAL_PATH_OPERATORS.frame(g)


# Each table of a step's critical path, by the name the route's `table` parameter gives it.
PATH_TABLES = {"segments": critical_path, "categories": critical_path_categories, "operators": critical_path_operators}


def critical_path_table(model: TraceModel, step: int | None = None, table: str = "segments") -> pd.DataFrame:
    """One table of `step`'s critical path (the first step when None): "segments" (in time
    order), "categories" (time per category) or "operators" (top operators on it)."""
    if table not in PATH_TABLES:
        raise BadParameterError(f"table must be one of {', '.join(PATH_TABLES)}, not {table!r}")
    return PATH_TABLES[table](model, known_step(model, step))


# The route answering with these tables (see `schema.route`).
CRITICAL_PATH_ROUTE = route(
    "critical_path",
    "Critical path of a step. table=segments: step, category, start_us, end_us, dur_us, name, operator, device, "
    "stream, thread, evidence (in time order; they tile the step; evidence: recorded, read from the trace, or "
    "inferred by timing); table=categories: category, time_us, share_pct; table=operators: operator, time_us, "
    "share_pct, segments.",
    critical_path_table,
    params=(integer("step", "A step number from /steps (default the first)."),
            choice("table", tuple(PATH_TABLES), "the path's segments, its time per category, or its top operators")),
    table=(CRITICAL_PATH, CRITICAL_PATH_CATEGORIES, CRITICAL_PATH_OPERATORS))
