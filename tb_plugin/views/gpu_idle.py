"""Why the GPU waits: idle time per device stream, broken down by cause.

Definitions follow Holistic Trace Analysis 0.5.0 (`BreakdownAnalysis.get_idle_time_breakdown`);
where and why they differ is said in each function's Notes, and each difference is a test in
tests/test_views_gpu_idle.py.
"""

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import declare, flag, number, route, tab
from ..trace.model import TraceModel
from .common import cached, device_activity, step_windows
from .intervals import clip_to_windows

# HTA's default `consecutive_kernel_delay` (30). HTA's docstring calls it nanoseconds, but it
# compares it with the trace's timestamps, which are microseconds: gaps under 30 µs count.
KERNEL_WAIT_THRESHOLD_US = 30.0

_IDLE_CATEGORIES = ("idle_host_wait_us", "idle_kernel_wait_us", "idle_other_us")
_HOST_WAIT, _KERNEL_WAIT, _OTHER = range(3)

_IDLE_COLUMNS = (
    ("start_us", "float64", "us", "start of the measured span: the stream's first activity (by step: clipped to the step)"),
    ("end_us", "float64", "us", "end of the measured span: the stream's last activity ends (by step: clipped to the step)"),
    ("busy_us", "float64", "us", "time in the span with a kernel, memcpy or memset running on the stream"),
    ("idle_us", "float64", "us", "time in the span with nothing running on the stream (busy_us + idle_us = end_us - start_us)"),
    ("idle_host_wait_us", "float64", "us", "idle gaps whose next activity was launched after the previous one ended: the CPU was late"),
    ("idle_kernel_wait_us", "float64", "us", "other idle gaps shorter than the kernel-wait threshold: back-to-back launch overhead"),
    ("idle_other_us", "float64", "us", "the remaining idle gaps (waits on events, other streams, synchronisation)"),
    ("idle_pct", "float64", "pct", "idle_us as a share of the span"),
)
IDLE_TIME = declare(
    "idle_time", "one device stream over the whole trace",
    ("device", "int64", "", "device index"),
    ("stream", "int64", "", "stream id on that device"),
    *_IDLE_COLUMNS)
IDLE_TIME_BY_STEP = declare(
    "idle_time_by_step", "one device stream in one step",
    ("step", "int64", "", "step number (0 when the trace has no ProfilerStep markers)"),
    ("device", "int64", "", "device index"),
    ("stream", "int64", "", "stream id on that device"),
    *_IDLE_COLUMNS)


def stream_gaps(model: TraceModel, kernel_wait_us: float = KERNEL_WAIT_THRESHOLD_US) \
        -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every device stream's span and idle gaps, computed once per model and threshold.

    Returns (spans, gaps): spans, one row per device stream sorted by device and stream,
    with device, stream, start_us, end_us; gaps, one row per idle gap of non-zero length,
    with group (the row of `spans`), start_us, end_us and category (0 host wait, 1 kernel
    wait, 2 other).
    """
    return cached(model, ("stream_gaps", float(kernel_wait_us)), lambda: _stream_gaps(model, kernel_wait_us))


def _stream_gaps(model: TraceModel, kernel_wait_us: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    dev = device_activity(model)
    device = dev["device"].to_numpy()
    stream = dev["stream"].to_numpy()
    ts = dev["ts"].to_numpy()
    end = ts + dev["dur"].to_numpy()
    order = np.lexsort((ts, stream, device))
    device, stream, ts, end = device[order], stream[order], ts[order], end[order]
    runtime = dev["runtime"].to_numpy()[order]
    n = len(ts)
    first = np.ones(n, dtype=bool)
    first[1:] = (device[1:] != device[:-1]) | (stream[1:] != stream[:-1])
    group = np.cumsum(first) - 1
    # The stream is busy until the latest end so far, not the previous activity's end: an
    # activity nested in a longer one (HTA would count a negative gap) leaves no idle time.
    busy_until = pd.Series(end).groupby(group).cummax().to_numpy()
    prev_end = np.empty(n)
    if n:
        prev_end[1:] = busy_until[:-1]
    is_gap = ~first & (ts > prev_end)
    rt_ts = model.runtime["ts"].to_numpy()
    launch_ts = np.where(runtime >= 0, rt_ts[np.clip(runtime, 0, None)] if len(rt_ts) else np.nan, np.nan)
    # Host wait: the activity after the gap was launched only after the stream had run dry.
    host_wait = launch_ts > prev_end
    gap_len = ts - prev_end
    category = np.where(host_wait, _HOST_WAIT, np.where(gap_len < kernel_wait_us, _KERNEL_WAIT, _OTHER))
    starts = np.flatnonzero(first)
    spans = pd.DataFrame({
        "device": device[starts], "stream": stream[starts], "start_us": ts[starts],
        "end_us": np.maximum.reduceat(end, starts) if n else np.zeros(0),
    })
    gaps = pd.DataFrame({"group": group[is_gap], "start_us": prev_end[is_gap], "end_us": ts[is_gap],
                         "category": category[is_gap]})
    return spans, gaps


def idle_time(model: TraceModel, by_step: bool = False,
              kernel_wait_us: float = KERNEL_WAIT_THRESHOLD_US) -> pd.DataFrame:
    """Idle time of each device stream, broken down by cause.

    A stream is measured from the start of its first kernel, memcpy or memset to the end of
    its last one (by step: that span clipped to each step's window, see
    `common.step_windows`). Inside it, the stream is idle wherever none of its activities
    runs. Each idle gap ends at an activity A, and is

    - host wait when A's runtime launch call (cudaLaunchKernel, cudaMemcpyAsync, ...)
      started after the stream's previous work ended: the queue was empty because the CPU
      had not launched A yet;
    - kernel wait, otherwise, when the gap is shorter than `kernel_wait_us` (default 30 µs):
      the overhead between back-to-back launched kernels;
    - other, otherwise: the stream waited on something else (an event recorded on another
      stream, a synchronisation, a collective's peer).

    Parameters
    ----------
    by_step : bool
        False: one row per device stream over the whole trace. True: one row per step and
        device stream (gaps crossing a step boundary are split between the steps).
    kernel_wait_us : float
        The kernel-wait threshold in microseconds.

    Returns
    -------
    DataFrame, declared as `IDLE_TIME` (by_step: `IDLE_TIME_BY_STEP`), sorted by step,
    device and stream.

    Notes
    -----
    HTA's `get_idle_time_breakdown(consecutive_kernel_delay=30)` computes the same three sums
    per stream of a rank (categories host_wait, kernel_wait, other); they agree per stream
    (tests/test_views_gpu_idle.py). Deliberate differences:

    - Overlapping activities on one stream (an activity starting before the previous one
      ended, seen with CUDA graphs and clock adjustments): HTA takes each gap from the
      previous activity's end, so an activity nested in a longer one makes a negative gap
      that is subtracted from idle time, and the gap after it is measured from the short
      activity's end. Here a gap starts where all earlier activity has ended, so idle time
      is never negative and busy + idle is the span.
    - HTA's threshold is documented in nanoseconds but compared with microsecond
      timestamps; here it is microseconds, and its default (30) matches what HTA computes.
    - Timestamps with fractions of a microsecond: HTA 0.5 rounds event starts up and ends
      down to whole microseconds by default (unless HTA_DISABLE_NS_ROUNDING=1), which
      lengthens every gap; here times are kept as recorded.
    - HTA looks at one rank's trace; here every device in the trace has its rows.
    """
    spans, gaps = stream_gaps(model, kernel_wait_us)
    g = gaps["group"].to_numpy()
    cat = gaps["category"].to_numpy()
    if not by_step:
        idle = np.zeros((len(spans), 3))
        np.add.at(idle, (g, cat), (gaps["end_us"] - gaps["start_us"]).to_numpy())
        return IDLE_TIME.frame(_finish(spans.copy(), idle))
    windows = step_windows(model)
    ws, we = windows["start_us"].to_numpy(), windows["end_us"].to_numpy()
    win, src, s, e = clip_to_windows(spans["start_us"], spans["end_us"], ws, we)
    # One row per (step window, stream) that the stream's span reaches.
    keys = win * max(len(spans), 1) + src
    idle = np.zeros((len(keys), 3))
    gw, gsrc, gs, ge = clip_to_windows(gaps["start_us"], gaps["end_us"], ws, we)
    row_of = pd.Series(np.arange(len(keys)), index=keys)
    gap_keys = gw * max(len(spans), 1) + g[gsrc]
    np.add.at(idle, (row_of.reindex(gap_keys).to_numpy(dtype=np.int64), cat[gsrc]), ge - gs)
    out = pd.DataFrame({"step": windows["step"].to_numpy()[win], "device": spans["device"].to_numpy()[src],
                        "stream": spans["stream"].to_numpy()[src], "start_us": s, "end_us": e})
    out = _finish(out, idle).sort_values(["step", "device", "stream"], kind="stable")
    return IDLE_TIME_BY_STEP.frame(out)


def _finish(out: pd.DataFrame, idle: npt.NDArray[np.float64]) -> pd.DataFrame:
    span = (out["end_us"] - out["start_us"]).to_numpy()
    for i, name in enumerate(_IDLE_CATEGORIES):
        out[name] = idle[:, i]
    out["idle_us"] = idle.sum(axis=1)
    out["busy_us"] = np.maximum(span - out["idle_us"].to_numpy(), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["idle_pct"] = np.where(span > 0, 100 * out["idle_us"].to_numpy() / span, 0.0)
    return out


# The route answering with these tables (see `schema.route`).
IDLE_TIME_ROUTE = route(
    "idle_time",
    "Idle time per device stream (by_step=true: per step and stream): [step], device, stream, start_us, end_us, "
    "busy_us, idle_us, idle_host_wait_us, idle_kernel_wait_us, idle_other_us, idle_pct; categories as Holistic "
    "Trace Analysis's idle time breakdown.",
    idle_time,
    params=(flag("by_step", "one row per step and stream, instead of per stream"),
            number("kernel_wait_us", "Idle gaps shorter than this (µs) that are not host waits are kernel waits.",
                   default=KERNEL_WAIT_THRESHOLD_US, minimum=0)),
    table=(IDLE_TIME, IDLE_TIME_BY_STEP))


# This view's tab of the page (see `schema.tab`): for any device activity (a trace of copies
# alone still has streams that idle).
GPU_IDLE_TAB = tab("gpu_idle", 30,
                   lambda offer: len(offer.model.kernels) or len(offer.model.memcpy) or len(offer.model.memset))
