"""Critical path of a step: the chain of CPU work, launches, device activity and waits that
decides how long the step takes.

The path is found backwards from the step's end by following, from each point, the
dependency that was satisfied last (the "last-arriving predecessor"):

- a kernel, memcpy or memset waited for (a) the previous activity on its stream, (b) its
  launch call on the CPU, or (c) work on another stream of its device
  (cudaStreamWaitEvent / event dependencies, which Kineto does not tie to a producer: the
  activity on another stream that ended last before it started stands for it). When the
  previous activity on the stream ended, or the launch call started, within
  `READY_SLACK_US` of its start, that is the dependency, the stream first; else another
  stream's work ending later than both is; else the later of the two.
- a point on a CPU thread is preceded by CPU work back to the last blocking call on the
  thread (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, synchronous
  cudaMemcpy, ...), which waited for the device activity that ended last before it
  returned, or back to the step's start.

Every instant of the step window is attributed to exactly one segment, so the categories
add up to the step's length. The arrays are built vectorised; the walk loops once per
segment of the path (a few per launched activity at most).

HTA (`critical_path_analysis`) builds a full event graph of one rank and finds its longest
path; here only the path is built (its length is the step's), with the same dependencies
where the trace records them (same thread or stream order, launch -> activity, blocking
syncs), and a cross-stream wait stands in for the event-record producer HTA reads from
`cuda_sync` events.

Not followed: dependencies between CPU threads (the main thread blocked in `backward` while
the autograd thread runs it shows as CPU time of the main thread's enclosing operator, e.g.
"## backward ##"), and collectives' waits on other ranks (their kernels are device time).
"""

import re

import numpy as np
import pandas as pd

from ..schema import declare
from ..trace.model import TraceModel
from .common import _cached, device_activity, op_names, step_windows
from .intervals import _clip_to_windows

READY_SLACK_US = 1.0
_BLOCKING_CALL = re.compile(r"(?:Device|Stream|Event|Ctx)Synchronize|^(?:cuda|hip|cu)Memcpy(?:2D|3D)?(?:_v2)?$|^cuMemcpyDtoH|^cuMemcpyHtoD")
CATEGORIES = ("cpu", "launch", "kernel", "memcpy", "memset", "sync", "stream_wait", "gpu_idle")

CRITICAL_PATH = declare(
    "critical_path", "one segment of a step's critical path, in time order",
    ("step", "int64", "", "step number"),
    ("category", "str", "", "cpu, launch (call start to device start), kernel, memcpy, memset, sync (CPU blocked on the device), stream_wait (on another stream), gpu_idle"),
    ("start_us", "float64", "us", "segment start"),
    ("end_us", "float64", "us", "segment end"),
    ("dur_us", "float64", "us", "segment length"),
    ("name", "str", "", "the device activity, launch call or blocking call; empty for CPU time"),
    ("operator", "str", "", "operator that launched the activity or made the call; empty for CPU time (see critical_path_operators)"),
    ("device", "int64", "", "device index; -1 on the CPU"),
    ("stream", "int64", "", "stream id; -1 on the CPU"),
    ("thread", "int64", "", "row of model.threads; -1 on the device"),
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


class _Graph:
    """The arrays the walk reads, built once per model."""

    def __init__(self, model):
        dev = device_activity(model)
        order = np.lexsort((dev["ts"].to_numpy(), dev["stream"].to_numpy(), dev["device"].to_numpy()))
        self.kind = dev["kind"].to_numpy()[order]
        self.name = dev["name"].to_numpy()[order]
        self.device = dev["device"].to_numpy()[order]
        self.stream = dev["stream"].to_numpy()[order]
        self.ts = dev["ts"].to_numpy()[order]
        self.end = self.ts + dev["dur"].to_numpy()[order]
        self.runtime = dev["runtime"].to_numpy()[order]
        self.op = op_names(model, dev["op"].to_numpy()[order])
        same = np.zeros(len(order), dtype=bool)
        same[1:] = (self.device[1:] == self.device[:-1]) & (self.stream[1:] == self.stream[:-1])
        self.prev = np.where(same, np.arange(len(order)) - 1, -1)
        # Per device, activities by end time: "what ended last before t on this device".
        self.by_device_end = np.lexsort((self.end, self.device))
        self.device_end_sorted = self.end[self.by_device_end]
        self.device_sorted = self.device[self.by_device_end]
        rt = model.runtime
        self.rt_ts, self.rt_end = rt["ts"].to_numpy(), (rt["ts"] + rt["dur"]).to_numpy()
        self.rt_thread = rt["thread"].to_numpy()
        self.rt_name = rt["name"].astype(str).to_numpy()
        self.rt_op = op_names(model, rt["op"].to_numpy())
        blocking = np.flatnonzero(rt["name"].astype(str).str.contains(_BLOCKING_CALL).to_numpy()) if len(rt) else np.zeros(0, int)
        border = np.lexsort((self.rt_end[blocking], self.rt_thread[blocking]))
        self.sync = blocking[border]
        self.sync_thread = self.rt_thread[self.sync]
        self.sync_end = self.rt_end[self.sync]
        ops = model.ops
        self.op_thread, self.op_ts = ops["thread"].to_numpy(), ops["ts"].to_numpy()
        self.op_end = self.op_ts + ops["dur"].to_numpy()
        self.op_parent = ops["parent"].to_numpy()
        self.op_name = ops["name"].astype(str).to_numpy()

    def last_on_device(self, device, t, after):
        """The activity on `device` that ended last at or before t (and after `after`), or -1."""
        lo = np.searchsorted(self.device_sorted, device, side="left")
        hi = np.searchsorted(self.device_sorted, device, side="right")
        k = lo + np.searchsorted(self.device_end_sorted[lo:hi], t, side="right") - 1
        if k < lo or self.device_end_sorted[k] <= after:
            return -1
        return int(self.by_device_end[k])

    def last_sync(self, thread, t, after):
        """The blocking call on `thread` that returned last at or before t (after `after`), or -1."""
        lo = np.searchsorted(self.sync_thread, thread, side="left")
        hi = np.searchsorted(self.sync_thread, thread, side="right")
        k = lo + np.searchsorted(self.sync_end[lo:hi], t, side="right") - 1
        if k < lo or self.sync_end[k] <= after:
            return -1
        return int(self.sync[k])

    def cpu_self_time(self, threads, starts, ends):
        """Per operator name, its self time (own time minus its children's) inside the given
        CPU segments, each on its thread: (names, µs)."""
        win, src, a, b = _clip_to_windows(self.op_ts, self.op_end, starts, ends)
        keep = self.op_thread[src] == np.asarray(threads)[win]
        win, src, clipped = win[keep], src[keep], (b - a)[keep]
        own = np.zeros(len(self.op_ts))
        np.add.at(own, src, clipped)
        has_parent = self.op_parent[src] >= 0
        np.add.at(own, self.op_parent[src[has_parent]], -clipped[has_parent])
        rows = np.unique(src)
        return self.op_name[rows], np.maximum(own[rows], 0.0)


def _graph(model):
    return _cached(model, "critical_path_graph", lambda: _Graph(model))


def critical_path(model: TraceModel, step: int) -> pd.DataFrame:
    """The critical path of `step` (declared as `CRITICAL_PATH`), one row per segment in time
    order; see the module docstring for the dependencies followed. Raises KeyError for a
    step the trace does not have."""
    return _cached(model, ("critical_path", int(step)), lambda: _critical_path(model, int(step)))


def _critical_path(model, step):
    windows = step_windows(model)
    match = np.flatnonzero(windows["step"].to_numpy() == step)
    if not len(match):
        raise KeyError(f"no step {step}; steps: {', '.join(map(str, windows['step'].tolist())) or 'none'}")
    w = windows.iloc[int(match[0])]
    start, end = float(w["start_us"]), float(w["end_us"])
    g = _graph(model)
    main_thread = _step_thread(model, step)
    segments = []

    def add(category, a, b, name="", operator="", device=-1, stream=-1, thread=-1):
        a, b = max(a, start), min(b, end)
        if b > a:
            segments.append((category, a, b, name, operator, device, stream, thread))

    # Begin where the step ends: the device activity that finished last, else the CPU.
    at = ("cpu", main_thread, end)
    last = np.flatnonzero((g.end >= end - 1e-9) & (g.end <= end + 1e-9) & (g.ts < end))
    if len(last):
        at = ("gpu", int(last[0]))
    for _ in range(4 * len(g.ts) + 2 * len(g.sync) + 4):
        if at[0] == "gpu":
            i = at[1]
            add(g.kind[i], g.ts[i], g.end[i], g.name[i], g.op[i], g.device[i], g.stream[i])
            t = g.ts[i]
            if t <= start:
                break
            p, r = g.prev[i], g.runtime[i]
            stream_ready = g.end[p] if p >= 0 else -np.inf
            launch_ready = g.rt_ts[r] if r >= 0 else -np.inf
            other = g.last_on_device(g.device[i], t, max(stream_ready, launch_ready, start))
            if stream_ready >= t - READY_SLACK_US:
                choice = "stream"
            elif launch_ready >= t - READY_SLACK_US or other < 0:
                choice = "launch" if launch_ready >= stream_ready else "stream"
            else:
                choice = "other"
            if choice == "stream" and p >= 0:
                add("gpu_idle", stream_ready, t, device=g.device[i], stream=g.stream[i])
                at = ("gpu", int(p))
            elif choice == "launch" and r >= 0:
                add("launch", launch_ready, t, g.rt_name[r], g.rt_op[r], thread=g.rt_thread[r])
                at = ("cpu", int(g.rt_thread[r]), launch_ready)
            elif choice == "other":
                add("stream_wait", g.end[other], t, device=g.device[i], stream=g.stream[i])
                at = ("gpu", other)
            else:  # nothing before it in the step: the stream idled from the step's start
                add("gpu_idle", start, t, device=g.device[i], stream=g.stream[i])
                break
        else:
            _, thread, t = at
            if t <= start:
                break
            s = g.last_sync(thread, t, start)
            if s < 0:
                add("cpu", start, t, thread=thread)
                break
            add("cpu", g.rt_end[s], t, thread=thread)
            waited = _waited_for(g, s)
            if waited >= 0:
                add("sync", g.end[waited], g.rt_end[s], g.rt_name[s], g.rt_op[s], thread=thread)
                at = ("gpu", waited)
            else:
                add("sync", g.rt_ts[s], g.rt_end[s], g.rt_name[s], g.rt_op[s], thread=thread)
                at = ("cpu", thread, g.rt_ts[s])
    segments.reverse()
    frame = pd.DataFrame(segments, columns=["category", "start_us", "end_us", "name", "operator", "device", "stream", "thread"])
    frame.insert(0, "step", step)
    frame["dur_us"] = frame["end_us"] - frame["start_us"]
    return CRITICAL_PATH.frame(frame)


def _waited_for(g, s):
    """The device activity a blocking call waited for: the one that ended last while it
    blocked (on any device: Kineto does not say which stream a sync waited on)."""
    t, after = g.rt_end[s], g.rt_ts[s]
    best, best_end = -1, -np.inf
    for device in np.unique(g.device):  # devices of one trace: a handful
        k = g.last_on_device(device, t, after)
        if k >= 0 and g.end[k] > best_end:
            best, best_end = k, g.end[k]
    return best


def _step_thread(model, step):
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
    length = float(windows.loc[step, "end_us"] - windows.loc[step, "start_us"])
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
    length = float(windows.loc[step, "end_us"] - windows.loc[step, "start_us"])
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
