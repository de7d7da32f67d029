"""Hardware counters: the samples of a trace's counter events (`ph: "C"`), each placed on the
device it was sampled on, and the mean per step of the SM throughput and occupancy counters.

Where the writers put them (the importer reads every `C` event into the model's `counters`
table: one row per value, `series` the key in the event's args):

- Kineto's CUPTI PM sampling (`CuptiPMSamplingProfiler`, kineto#1527; written by kineto#1530)
  samples the metrics asked for (``sm__throughput.avg.pct_of_peak_sustained_elapsed``,
  ``sm__warps_active.avg.pct_of_peak_sustained_active``, ``dram__bytes_read.sum``, ...) at a
  fixed interval and writes each sample as one `C` event named "CUPTI PM Sampling", its
  args every metric's value, under the string pid ``"GPU N Counters"`` (N the device).
- MTIA (`mtia_counters`) and XPU (`xpu_scope_profiler`) counter events go through
  `ChromeTraceLogger::handleCounterEvent` (pytorch/pytorch third_party/kineto
  `libkineto/src/output_json.cpp` at 35d03b38e2acbc5c21d953f0738178c61aff7b20): pid the
  device id, the same pid as that device's activity.

So a counter's device is N for a ``"GPU N Counters"`` pid, the device whose activity has the
same pid for a device's pid, and -1 otherwise (a host process's own counters).
"""

import re

import numpy as np
import pandas as pd

from ..schema import NULLABLE, declare, documented, route
from ..trace.model import TraceModel
from .common import cached, object_frame, step_windows, texts

# The pid Kineto writes hardware counters under (kineto#1530), as written.
_COUNTERS_PID = re.compile(r"^GPU (\d+) Counters$")

# Counters whose mean per step the Overview shows beside the step breakdown: the metric
# families Nsight Compute and CUPTI name SM throughput and occupancy (achieved: warps active),
# in percent of the peak.
# {metric name prefix: what it measures, as the page names it}
STEP_COUNTER_PREFIXES = {"sm__throughput.avg.pct_of_peak_sustained": "SM throughput",
                         "sm__warps_active.avg.pct_of_peak_sustained": "achieved occupancy"}

COUNTER_SAMPLES = declare(
    "counter_samples", "one value of one counter series at one sample (a `C` event's args key)",
    ("device", "int64", "", "device sampled: N of a `GPU N Counters` pid, or the device whose activity shares the "
                            "pid; -1 for a host process's counters"),
    ("pid", "str", "", "the event's pid as written"),
    ("name", "str", "", "the counter event's name (CUPTI PM sampling: `CUPTI PM Sampling`)"),
    ("counter", "str", "", "the series: the key in the event's args, e.g. a CUPTI metric name"),
    ("time_us", "float64", "us", "when the sample was taken, from the trace origin"),
    ("value", "float64", "", "the value as written (unit the counter's own); null when not a number", NULLABLE),
)

STEP_COUNTERS = declare(
    "step_counters", "one SM throughput or occupancy counter on one device in one step: the mean of its samples",
    ("step", "int64", "", "the step, as in the step breakdown"),
    ("device", "int64", "", "device sampled, as in counter_samples"),
    ("counter", "str", "", "the counter (a `sm__throughput.avg.pct_of_peak_sustained*` or "
                           "`sm__warps_active.avg.pct_of_peak_sustained*` metric)"),
    ("quantity", "str", "", "what the counter measures: `SM throughput` or `achieved occupancy` (warps active)"),
    ("mean_pct", "float64", "pct", "mean of the samples taken in the step; null when none was", NULLABLE),
    ("samples", "int64", "count", "samples taken in [step start, step end)"),
)


def device_pids(model: TraceModel) -> dict[int, str]:
    """{device: the pid (as written) its streams' activity is written under}, for each device
    with activity."""
    def build() -> dict[int, str]:
        threads = model.threads["pid"].to_numpy(dtype=object)
        found: dict[int, str] = {}
        for table in (model.kernels, model.memcpy, model.memset, model.syncs):
            pairs = pd.DataFrame({"device": table["device"].to_numpy(), "thread": table["thread"].to_numpy()})
            for device, thread in pairs.drop_duplicates("device").itertuples(index=False):  # one per device
                found.setdefault(int(device), str(threads[thread]))
        return found
    return cached(model, "counter_device_pids", build)


@documented(COUNTER_SAMPLES)
def counter_samples(model: TraceModel) -> pd.DataFrame:
    """Every value of the trace's counter events, on the device it was sampled on.

    Returns
    -------
    DataFrame, one row per (event, args key), by device, counter, then time; empty for a trace
    without counter events.

    Notes
    -----
    A `C` event holds several series (one per args key) at one time: CUPTI PM sampling writes
    one event per sample with every metric asked for. Values are as written; a value that is
    no number (text, an object) is null.
    """
    return cached(model, "counter_samples", lambda: _samples(model))


def _samples(model: TraceModel) -> pd.DataFrame:
    c = model.counters
    if not len(c):
        return COUNTER_SAMPLES.empty()
    threads = model.threads
    pid_of_thread = threads["pid"].to_numpy(dtype=object)
    pids = pd.unique(pid_of_thread)
    by_pid = {pid: device for device, pid in device_pids(model).items()}
    device_of_pid = {}
    for pid in pids:  # one per process, not per event
        named = _COUNTERS_PID.match(str(pid))
        device_of_pid[pid] = int(named.group(1)) if named else by_pid.get(pid, -1)
    thread_device = np.array([device_of_pid[p] for p in pid_of_thread], dtype=np.int64)
    thread = c["thread"].to_numpy()
    frame = object_frame({
        "device": thread_device[thread], "pid": pid_of_thread[thread], "name": texts(c["name"]),
        "counter": texts(c["series"]), "time_us": c["ts"].to_numpy(), "value": c["value"].to_numpy()})
    return COUNTER_SAMPLES.frame(frame.sort_values(["device", "counter", "time_us"], kind="stable"))


@documented(STEP_COUNTERS)
def step_counters(model: TraceModel) -> pd.DataFrame:
    """The mean per step of the SM throughput and occupancy counters, beside the step breakdown.

    Returns
    -------
    DataFrame, one row per (step, device, counter) in step order, each step of the breakdown
    once per counter that has samples anywhere in the trace; empty when the trace has no such
    counter (the Overview then shows nothing for it).

    Notes
    -----
    Counters are those named ``sm__throughput.avg.pct_of_peak_sustained*`` (SM throughput) and
    ``sm__warps_active.avg.pct_of_peak_sustained*`` (achieved occupancy), as CUPTI and Nsight
    Compute name them. A step's mean is the plain mean of the samples whose time lies in
    [step start, step end) of `common.step_windows` (the breakdown's steps): PM sampling samples
    at a fixed interval, so it is the time average over the step.
    """
    return cached(model, "step_counters", lambda: _step_counters(model))


def _step_counters(model: TraceModel) -> pd.DataFrame:
    samples = counter_samples(model)
    # the prefix test once per distinct counter name, not per sample
    names, of_sample = np.unique(samples["counter"].to_numpy(dtype=object), return_inverse=True)
    chosen = np.array([name.startswith(tuple(STEP_COUNTER_PREFIXES)) for name in names], dtype=bool)[of_sample]
    samples = samples[chosen & samples["value"].notna().to_numpy()]
    if not len(samples):
        return STEP_COUNTERS.empty()
    windows = step_windows(model)
    starts, ends = windows["start_us"].to_numpy(), windows["end_us"].to_numpy()
    time = samples["time_us"].to_numpy()
    at = np.searchsorted(starts, time, side="right") - 1
    inside = (at >= 0) & (time < ends[np.clip(at, 0, None)])
    steps = windows["step"].to_numpy()
    taken = samples[inside].assign(step=steps[at[inside]])
    means = taken.groupby(["step", "device", "counter"], sort=False).agg(mean_pct=("value", "mean"),
                                                                          samples=("value", "size"))
    series = samples[["device", "counter"]].drop_duplicates()
    every = pd.MultiIndex.from_frame(series.merge(pd.DataFrame({"step": steps}), how="cross")[["step", "device", "counter"]])
    table = means.reindex(every).reset_index()
    quantity = {name: what for name in pd.unique(table["counter"])
                for prefix, what in STEP_COUNTER_PREFIXES.items() if name.startswith(prefix)}  # per counter
    table["quantity"] = table["counter"].map(quantity)
    table["samples"] = table["samples"].fillna(0).astype(np.int64)
    order = pd.Series(np.arange(len(steps)), index=steps)
    table = table.assign(_order=order.reindex(table["step"]).to_numpy())
    return STEP_COUNTERS.frame(table.sort_values(["_order", "device", "counter"], kind="stable"))


# The routes answering with these tables (see `schema.route`).
COUNTERS_ROUTE = route(
    "counters",
    "Hardware counters: one row per value of the trace's counter events (`ph: \"C\"`; CUPTI PM sampling's "
    "`GPU N Counters`, MTIA's `mtia_counters`): device, pid, name, counter, time_us, value. Empty for a trace "
    "without counter events.",
    counter_samples,
    table=COUNTER_SAMPLES)

STEP_COUNTERS_ROUTE = route(
    "step_counters",
    "Mean per step of the SM throughput (`sm__throughput...pct_of_peak...`) and occupancy "
    "(`sm__warps_active...pct_of_peak...`) counters: step, device, counter, quantity, mean_pct, samples. Empty when the "
    "trace has none.",
    step_counters,
    table=STEP_COUNTERS)
