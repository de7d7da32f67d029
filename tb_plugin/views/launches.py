"""Kernel launch statistics: how long each launch call took on the CPU, how long the GPU work
it launched ran, and how long it waited in between.

Definitions follow Holistic Trace Analysis 0.5.0 (`get_cuda_kernel_launch_stats` and the
charts it draws); where and why they differ is in `kernel_launches`' Notes, and each
difference is a test in tests/test_views_launches.py.
"""

import numpy as np
import pandas as pd

from ..schema import choice, declare, number, route
from ..trace.model import TraceModel
from .common import cached, device_activity, object_frame, op_names, texts

# HTA's defaults: a launch call longer than this is a runtime outlier, and GPU work that
# starts this long after its call ended is a launch-delay outlier.
RUNTIME_CUTOFF_US = 50.0
LAUNCH_DELAY_CUTOFF_US = 100.0
FLAGS = ("launch_bound", "runtime_outlier", "launch_delay_outlier")

KERNEL_LAUNCHES = declare(
    "kernel_launches", "one device activity (kernel, memcpy, memset) and the runtime call that launched it",
    ("correlation", "int64", "", "the trace's correlation id shared by the call and the device activity"),
    ("kind", "str", "", "kernel, memcpy or memset"),
    ("name", "str", "", "device activity name"),
    ("runtime", "str", "", "launching runtime call (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch, ...)"),
    ("operator", "str", "", "operator or annotation the call was made in; empty when none"),
    ("device", "int64", "", "device index"),
    ("stream", "int64", "", "stream id"),
    ("launch_start_us", "float64", "us", "start of the runtime call"),
    ("runtime_us", "float64", "us", "duration of the runtime call on the CPU"),
    ("device_start_us", "float64", "us", "start of the activity on the device"),
    ("device_us", "float64", "us", "duration of the activity on the device"),
    ("device_end_us", "float64", "us", "end of the activity on the device"),
    ("launch_delay_us", "float64", "us", "device start minus runtime call start"),
    ("delay_after_call_us", "float64", "us", "device start minus runtime call end, 0 when it started before the call returned (HTA's launch_delay)"),
    ("launch_bound", "bool", "", "the device ran it for less time than the call took to launch it (call within the runtime cutoff)"),
    ("runtime_outlier", "bool", "", "the runtime call took longer than the runtime cutoff"),
    ("launch_delay_outlier", "bool", "", "delay_after_call_us exceeds the launch-delay cutoff"),
)

KERNEL_LAUNCH_SUMMARY = declare(
    "kernel_launch_summary", "one device activity name (kernel, memcpy, memset) over all its launches",
    ("name", "str", "", "device activity name"),
    ("kind", "str", "", "kernel, memcpy or memset"),
    ("launches", "int64", "count", "launches of it"),
    ("device_total_us", "float64", "us", "device time of all its launches"),
    ("device_mean_us", "float64", "us", "mean device time per launch"),
    ("runtime_mean_us", "float64", "us", "mean runtime call duration"),
    ("launch_delay_mean_us", "float64", "us", "mean device start minus call start"),
    ("launch_delay_max_us", "float64", "us", "largest device start minus call start"),
    ("delay_after_call_mean_us", "float64", "us", "mean device start minus call end (0 when started before)"),
    ("launch_bound", "int64", "count", "launches shorter on the device than their runtime call"),
    ("runtime_outliers", "int64", "count", "launches whose call exceeded the runtime cutoff"),
    ("launch_delay_outliers", "int64", "count", "launches whose delay after the call exceeded the launch-delay cutoff"),
    ("first_launch_start_us", "float64", "us", "start of its first launch call (for the Trace view link)"),
    ("last_device_end_us", "float64", "us", "end of its last device activity (for the Trace view link)"),
)


def kernel_launches(model: TraceModel, runtime_cutoff_us: float = RUNTIME_CUTOFF_US,
                    launch_delay_cutoff_us: float = LAUNCH_DELAY_CUTOFF_US, flag: str | None = None) -> pd.DataFrame:
    """Every launched device activity with its runtime call, delays and flags (with `flag`,
    one of `FLAGS`, only the launches that have it).

    A launch is a kernel, memcpy or memset and the runtime call (cudaLaunchKernel,
    cudaMemcpyAsync, cuLaunchKernel, hipLaunchKernel, cudaGraphLaunch, ...) that shares its
    correlation id. `launch_delay_us` is the device start minus the call's start, as the
    issue's users read "launch delay"; `delay_after_call_us` is HTA's launch_delay: device
    start minus the call's end, clipped at 0. Flags, as HTA's charts draw them:

    - launch_bound: runtime_us <= runtime_cutoff_us and device_us < runtime_us: the GPU
      finishes the work faster than the CPU can launch it (CUDA graphs or torch.compile
      launch fewer, larger pieces);
    - runtime_outlier: runtime_us > runtime_cutoff_us;
    - launch_delay_outlier: delay_after_call_us > launch_delay_cutoff_us.

    Returns
    -------
    DataFrame declared as `KERNEL_LAUNCHES`, in launch order.

    Notes
    -----
    HTA's `get_cuda_kernel_launch_stats` gives, per correlation, cpu_duration, gpu_duration
    and launch_delay; they equal runtime_us, device_us and delay_after_call_us here
    (tests/test_views_launches.py). Deliberate differences:

    - HTA takes only cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync and
      cudaMemsetAsync; here every runtime or driver call linked to device activity counts
      (Triton's cuLaunchKernel, ROCm's hipLaunchKernel, cudaGraphLaunch, synchronous
      cudaMemcpy), so ROCm and Triton traces have launch statistics too.
    - A cudaGraphLaunch launches many kernels under one correlation id: each kernel is a
      row, all with that call's duration, as HTA's join on correlation also gives.
    - HTA drops the last ProfilerStep's launches by default; here every launch is kept.
    """
    table = cached(model, ("kernel_launches", float(runtime_cutoff_us), float(launch_delay_cutoff_us)),
                    lambda: _kernel_launches(model, runtime_cutoff_us, launch_delay_cutoff_us))
    if flag is None:
        return table
    if flag not in FLAGS:
        raise ValueError(f"flag must be one of {', '.join(FLAGS)}, not {flag!r}")
    return table[table[flag].to_numpy()].reset_index(drop=True)


def _kernel_launches(model: TraceModel, runtime_cutoff_us: float, launch_delay_cutoff_us: float) -> pd.DataFrame:
    dev = device_activity(model)
    launched = dev[dev["runtime"].to_numpy() >= 0]
    rt = model.runtime
    call = launched["runtime"].to_numpy()
    call_start = rt["ts"].to_numpy()[call]
    call_dur = rt["dur"].to_numpy()[call]
    start = launched["ts"].to_numpy()
    dur = launched["dur"].to_numpy()
    after_call = np.maximum(start - call_start - call_dur, 0.0)
    order = np.argsort(call_start, kind="stable")
    frame = object_frame({
        "correlation": rt["correlation"].to_numpy()[call],
        "kind": launched["kind"].to_numpy(),
        "name": launched["name"].to_numpy(),
        "runtime": texts(rt["name"], call),
        "operator": op_names(model, launched["op"].to_numpy()),
        "device": launched["device"].to_numpy(),
        "stream": launched["stream"].to_numpy(),
        "launch_start_us": call_start,
        "runtime_us": call_dur,
        "device_start_us": start,
        "device_us": dur,
        "device_end_us": start + dur,
        "launch_delay_us": start - call_start,
        "delay_after_call_us": after_call,
        "launch_bound": (call_dur <= runtime_cutoff_us) & (dur < call_dur),
        "runtime_outlier": call_dur > runtime_cutoff_us,
        "launch_delay_outlier": after_call > launch_delay_cutoff_us,
    }).iloc[order]
    return KERNEL_LAUNCHES.frame(frame)


def kernel_launch_summary(model: TraceModel, runtime_cutoff_us: float = RUNTIME_CUTOFF_US,
                          launch_delay_cutoff_us: float = LAUNCH_DELAY_CUTOFF_US) -> pd.DataFrame:
    """Launch statistics per device activity name (declared as `KERNEL_LAUNCH_SUMMARY`),
    most launch-bound launches first, then most launches; see `kernel_launches`."""
    launches = kernel_launches(model, runtime_cutoff_us, launch_delay_cutoff_us)
    g = launches.groupby(["name", "kind"], sort=False).agg(
        launches=("correlation", "size"),
        device_total_us=("device_us", "sum"), device_mean_us=("device_us", "mean"),
        runtime_mean_us=("runtime_us", "mean"),
        launch_delay_mean_us=("launch_delay_us", "mean"), launch_delay_max_us=("launch_delay_us", "max"),
        delay_after_call_mean_us=("delay_after_call_us", "mean"),
        launch_bound=("launch_bound", "sum"), runtime_outliers=("runtime_outlier", "sum"),
        launch_delay_outliers=("launch_delay_outlier", "sum"),
        first_launch_start_us=("launch_start_us", "min"), last_device_end_us=("device_end_us", "max"),
    ).reset_index()
    g = g.sort_values(["launch_bound", "launches"], ascending=False, kind="stable")
    return KERNEL_LAUNCH_SUMMARY.frame(g)


# The routes answering with these tables (see `schema.route`): the cutoffs in the views' order.
CUTOFFS = (
    number("runtime_cutoff_us", "A launch call longer than this (µs) is a runtime outlier; launch-bound needs one within it.",
           default=RUNTIME_CUTOFF_US, minimum=0),
    number("launch_delay_cutoff_us", "Device work starting more than this (µs) after its call returned is a "
           "launch-delay outlier.", default=LAUNCH_DELAY_CUTOFF_US, minimum=0))
KERNEL_LAUNCHES_ROUTE = route(
    "kernel_launches",
    "Per launch (a device activity and the runtime call with its correlation id): correlation, kind, name, runtime, "
    "operator, device, stream, launch_start_us, runtime_us, device_start_us, device_us, device_end_us, "
    "launch_delay_us, delay_after_call_us, launch_bound, runtime_outlier, launch_delay_outlier; as Holistic Trace "
    "Analysis's get_cuda_kernel_launch_stats.",
    kernel_launches,
    params=(*CUTOFFS, choice("flag", ("all", *FLAGS), "Only the launches with this flag set.", {"all": None})),
    table=KERNEL_LAUNCHES)
KERNEL_LAUNCH_SUMMARY_ROUTE = route(
    "kernel_launch_summary",
    "Launch statistics per device activity name: name, kind, launches, device_total_us, device_mean_us, "
    "runtime_mean_us, launch_delay_mean_us, launch_delay_max_us, delay_after_call_mean_us, launch_bound, "
    "runtime_outliers, launch_delay_outliers, first_launch_start_us, last_device_end_us.",
    kernel_launch_summary,
    params=CUTOFFS,
    table=KERNEL_LAUNCH_SUMMARY)
