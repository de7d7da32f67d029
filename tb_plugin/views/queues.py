"""Launch queues and copy bandwidth over time, per device stream: HTA's augmented counters.

Definitions follow Holistic Trace Analysis 0.5.0 (`TraceCounters.get_queue_length_time_series`,
`get_queue_length_summary`, `get_memory_bw_time_series`); where and why they differ is in the
Notes, and each difference is a test in tests/test_views_queues.py.
"""

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import declare, route
from ..trace.model import TraceModel
from .common import cached
from .launches import kernel_launches

QUEUE_LENGTH = declare(
    "queue_length", "a change of a device stream's launch queue (a step function: the value holds until the next row)",
    ("device", "int64", "", "device index"),
    ("stream", "int64", "", "stream id"),
    ("ts_us", "float64", "us", "when the value changes"),
    ("queue_length", "int64", "count", "launched and not yet started on the stream (HTA's queue length)"),
    ("outstanding", "int64", "count", "launched and not yet finished: the queue plus the running activity"),
)
MEMORY_BANDWIDTH = declare(
    "memory_bandwidth", "a change of a device stream's memcpy/memset bandwidth (a step function)",
    ("device", "int64", "", "device index"),
    ("stream", "int64", "", "stream id"),
    ("ts_us", "float64", "us", "when the value changes"),
    ("memory_bw_gbps", "float64", "gb/s", "summed bandwidth of the memcpys and memsets running on the stream"),
)
QUEUE_SUMMARY = declare(
    "queue_length_summary", "one device stream's launch queue and copy bandwidth over the trace",
    ("device", "int64", "", "device index"),
    ("stream", "int64", "", "stream id"),
    ("start_us", "float64", "us", "first launch call for the stream"),
    ("end_us", "float64", "us", "end of the stream's last launched activity"),
    ("launches", "int64", "count", "activities launched on the stream"),
    ("max_queue_length", "int64", "count", "most activities waiting at once (HTA's max)"),
    ("mean_queue_length", "float64", "count", "time-weighted mean of the queue length over start_us..end_us"),
    ("time_at_zero_us", "float64", "us", "time in start_us..end_us with nothing waiting: each launch started as soon as the CPU made it, or the stream was idle"),
    ("max_outstanding", "int64", "count", "most activities launched and not finished at once"),
    ("max_queue_at_us", "float64", "us", "when the queue first reached its maximum (for the Trace view link)"),
    ("memory_bytes", "int64", "bytes", "bytes copied or set by the stream's memcpys and memsets"),
    ("peak_memory_bw_gbps", "float64", "gb/s", "highest summed memcpy/memset bandwidth on the stream"),
)


def _stream_steps(device: npt.NDArray[np.int64], stream: npt.NDArray[np.int64], times: npt.NDArray[np.float64],
                  deltas: npt.NDArray[np.int64] | npt.NDArray[np.float64]) \
        -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[Any]]:
    """Step functions per (device, stream) from +/- changes: one row per distinct time, the
    value after every change at that time; at equal times decrements come first (a kernel
    that starts as another is launched never counts both). `deltas` is a 2-D array, one column
    per series. Returns (device, stream, ts, values)."""
    if not len(times):
        return device[:0], stream[:0], times[:0], deltas[:0].astype(np.int64)
    order = np.lexsort((deltas.sum(axis=1), times, stream, device))
    device, stream, times, deltas = device[order], stream[order], times[order], deltas[order]
    # Every + has its - on the same stream, so each stream's changes sum to 0 and one running
    # sum over all streams restarts at 0 on each.
    values = np.cumsum(deltas, axis=0)
    last = np.ones(len(times), dtype=bool)
    last[:-1] = (times[1:] != times[:-1]) | (stream[1:] != stream[:-1]) | (device[1:] != device[:-1])
    return device[last], stream[last], times[last], values[last]


def queue_length(model: TraceModel) -> pd.DataFrame:
    """Launch queue of each device stream over time (declared as `QUEUE_LENGTH`).

    Each launch (see `launches.kernel_launches`: a kernel, memcpy or memset and the runtime
    call with its correlation id) adds one to its stream's queue when the call starts and
    takes it off when the activity starts on the device (HTA's queue length) or, for
    `outstanding`, when it ends.

    Notes
    -----
    HTA's queue length time series counts the same changes; its maximum per stream agrees
    (tests/test_views_queues.py). Deliberate differences:

    - Launch calls: HTA counts cudaLaunchKernel(ExC), cuLaunchKernel, cudaMemcpyAsync,
      cudaMemsetAsync and their HIP twins; here every call linked to device activity
      (cudaGraphLaunch adds each kernel of the graph, synchronous cudaMemcpy its copy).
    - Changes at the same instant: HTA applies them in an unspecified order (one row per
      change); here a time has one row, with decrements applied first.
    - `outstanding` (launched and not finished) is not in HTA.
    """
    return cached(model, "queue_length", lambda: _queue_length(model))


def _queue_length(model: TraceModel) -> pd.DataFrame:
    launches = kernel_launches(model)
    n = len(launches)
    device = np.tile(launches["device"].to_numpy(), 3)
    stream = np.tile(launches["stream"].to_numpy(), 3)
    times = np.concatenate([launches["launch_start_us"].to_numpy(), launches["device_start_us"].to_numpy(),
                            launches["device_end_us"].to_numpy()])
    ones = np.ones(n, dtype=np.int64)
    deltas = np.concatenate([np.column_stack([ones, ones]), np.column_stack([-ones, 0 * ones]),
                             np.column_stack([0 * ones, -ones])])
    d, s, t, v = _stream_steps(device, stream, times, deltas)
    return QUEUE_LENGTH.frame({"device": d, "stream": s, "ts_us": t, "queue_length": v[:, 0], "outstanding": v[:, 1]})


def memory_bandwidth(model: TraceModel) -> pd.DataFrame:
    """Memcpy/memset bandwidth of each device stream over time (declared as `MEMORY_BANDWIDTH`):
    the bandwidth each activity reports (Kineto's "memory bandwidth (GB/s)", else its bytes
    over its duration), summed over the activities running.

    Notes
    -----
    HTA's memory bandwidth time series sums per copy kind ("Memcpy HtoD", "Memset", ...)
    over the whole rank, and counts a 0 µs copy as 1 µs long; here the sum is per stream
    (where the copy ran, as the queue), and a 0 µs copy changes nothing.
    """
    return cached(model, "memory_bandwidth", lambda: _memory_bandwidth(model))


def _copies(model: TraceModel) -> pd.DataFrame:
    parts = [model.memcpy, model.memset]
    frame = pd.concat([p[["device", "stream", "ts", "dur", "bytes", "memory_bandwidth_gbps"]] for p in parts],
                      ignore_index=True)
    dur = frame["dur"].to_numpy()
    nbytes = frame["bytes"].to_numpy().astype(np.float64)
    reported = frame["memory_bandwidth_gbps"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        derived = np.where((dur > 0) & (nbytes >= 0), nbytes / dur / 1e3, 0.0)  # bytes/µs -> GB/s
    frame["gbps"] = np.where(np.isfinite(reported), reported, derived)
    return frame[dur > 0]


def _memory_bandwidth(model: TraceModel) -> pd.DataFrame:
    copies = _copies(model)
    start = copies["ts"].to_numpy()
    gbps = copies["gbps"].to_numpy()
    device = np.tile(copies["device"].to_numpy(), 2)
    stream = np.tile(copies["stream"].to_numpy(), 2)
    times = np.concatenate([start, start + copies["dur"].to_numpy()])
    deltas = np.concatenate([gbps, -gbps])[:, None]
    d, s, t, v = _stream_steps(device, stream, times, deltas)
    level = v[:, 0]
    level = np.where(np.abs(level) < 1e-9, 0.0, level)  # sums of floats back to zero
    return MEMORY_BANDWIDTH.frame({"device": d, "stream": s, "ts_us": t, "memory_bw_gbps": level})


def queue_length_summary(model: TraceModel) -> pd.DataFrame:
    """Per device stream (declared as `QUEUE_SUMMARY`): launches, the queue's maximum,
    time-weighted mean and time at zero over the stream's launch span, the most outstanding,
    and the stream's copied bytes and peak copy bandwidth; see `queue_length`."""
    series = queue_length(model)
    launches = kernel_launches(model)
    keys = ["device", "stream"]
    if not len(series):
        return QUEUE_SUMMARY.empty()
    ts = series["ts_us"].to_numpy()
    same_next = np.zeros(len(series), dtype=bool)
    same_next[:-1] = ((series["device"].to_numpy()[1:] == series["device"].to_numpy()[:-1])
                      & (series["stream"].to_numpy()[1:] == series["stream"].to_numpy()[:-1]))
    held = np.where(same_next, np.roll(ts, -1) - ts, 0.0)  # how long each value holds
    q = series["queue_length"].to_numpy()
    work = series.assign(held=held, weighted=held * q, at_zero=np.where(q == 0, held, 0.0),
                         at_max=np.where(q == series.groupby(keys)["queue_length"].transform("max").to_numpy(), ts, np.inf))
    g = work.groupby(keys, sort=True).agg(
        start_us=("ts_us", "min"), end_us=("ts_us", "max"), max_queue_length=("queue_length", "max"),
        weighted=("weighted", "sum"), held=("held", "sum"), time_at_zero_us=("at_zero", "sum"),
        max_outstanding=("outstanding", "max"), max_queue_at_us=("at_max", "min"))
    g["mean_queue_length"] = np.where(g["held"] > 0, g["weighted"] / g["held"].where(g["held"] > 0, 1), 0.0)
    g["launches"] = launches.groupby(keys).size().reindex(g.index, fill_value=0)
    copies = _copies(model)
    g["memory_bytes"] = copies.assign(b=copies["bytes"].clip(lower=0)).groupby(keys)["b"].sum().reindex(g.index, fill_value=0)
    g["peak_memory_bw_gbps"] = memory_bandwidth(model).groupby(keys)["memory_bw_gbps"].max().reindex(g.index, fill_value=0.0)
    return QUEUE_SUMMARY.frame(g.reset_index())


# The routes answering with these tables (see `schema.route`).
QUEUE_LENGTH_ROUTE = route(
    "queue_length",
    "Launch queue per device stream over time, one row per change (a step function): device, stream, "
    "ts_us, queue_length (launched, not started: Holistic Trace Analysis's queue length), outstanding"
    " (launched, not finished).",
    queue_length,
    table=QUEUE_LENGTH)
MEMORY_BANDWIDTH_ROUTE = route(
    "memory_bandwidth",
    "Memcpy/memset bandwidth per device stream over time, one row per change (a step function): "
    "device, stream, ts_us, memory_bw_gbps.",
    memory_bandwidth,
    table=MEMORY_BANDWIDTH)
QUEUE_LENGTH_SUMMARY_ROUTE = route(
    "queue_length_summary",
    "Per device stream: device, stream, start_us, end_us, launches, max_queue_length, "
    "mean_queue_length, time_at_zero_us, max_outstanding, max_queue_at_us, memory_bytes, "
    "peak_memory_bw_gbps.",
    queue_length_summary,
    table=QUEUE_SUMMARY)
