"""Overview: steps and their time breakdown, GPU summary, environment."""

from typing import Any

import numpy as np
import pandas as pd

from ..trace.model import TraceModel
from .common import kernel_flags, step_breakdown, step_windows
from .intervals import union_length, weighted_level_integral

STEP_COLUMNS = ["step", "kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us",
                "dataloader_us", "cpu_exec_us", "other_us", "total_us"]
GPU_COLUMNS = ["device", "name", "memory_bytes", "compute_capability", "utilization_pct",
               "est_sm_efficiency_pct", "est_achieved_occupancy_pct", "tensor_core_kernel_pct"]


def steps(model: TraceModel) -> pd.DataFrame:
    """Per step, wall time by category; the parts sum exactly to the step time.

    Returns
    -------
    DataFrame with columns step (int; 0 when the trace has no ProfilerStep markers and the
    whole trace is one step), kernel_us, memcpy_us, memset_us, communication_us, runtime_us,
    dataloader_us, cpu_exec_us, other_us, total_us (float µs).

    Notes
    -----
    Steps are the host-side `ProfilerStep#N` ranges, each extended to the end of the device
    work launched inside it (see `common.step_windows`). Each category's intervals are merged
    and a category only gets time no higher one claimed, in the priority Kernel > Memcpy >
    Memset > Communication > Runtime > DataLoader > CPU Exec > Other. Communication is
    collective kernels (NCCL/RCCL) plus host collective ops (`nccl:*`, `gloo:*`,
    `record_param_comms`); Kernel excludes the collective kernels. CPU Exec is every other host
    op or annotation except the ProfilerStep ranges themselves.
    """
    return step_breakdown(model)[STEP_COLUMNS]


def step_mean(step_table: pd.DataFrame) -> dict[str, float]:
    """The mean step: {column: mean over the steps} of each `*_us` column of `steps`
    (kernel_us, ..., other_us, total_us; float µs); {} without steps."""
    columns = [c for c in step_table.columns if c.endswith("_us")]
    return {c: float(step_table[c].mean()) for c in columns} if len(step_table) else {}


def step_summary(step_table: pd.DataFrame) -> pd.DataFrame:
    """The mean step by category, as the overview's execution summary shows it.

    Returns
    -------
    DataFrame with one row per category of `steps`, in its priority order, and columns
    category (str: kernel, memcpy, memset, communication, runtime, dataloader, cpu_exec,
    other), mean_us (float µs: mean over the steps), share_pct (float: mean_us / mean step
    time, in percent; NaN when the mean step lasts 0 µs).
    """
    means = step_mean(step_table)
    columns = [c for c in STEP_COLUMNS if c.endswith("_us") and c != "total_us"]
    mean_us = np.array([means.get(c, 0.0) for c in columns], dtype=np.float64)
    total = means.get("total_us", 0.0)
    return pd.DataFrame({"category": [c[: -len("_us")] for c in columns], "mean_us": mean_us,
                         "share_pct": 100 * mean_us / total if total > 0 else np.full(len(columns), np.nan)})


def _steps_span(model):
    windows = step_windows(model)
    return float(windows["start_us"].min()), float(windows["end_us"].max())


def gpu_summary(model: TraceModel) -> pd.DataFrame:
    """One row per GPU that ran kernels (or is described in the trace).

    Returns
    -------
    DataFrame with columns device (int), name (str), memory_bytes (float, NaN when unknown),
    compute_capability (str "major.minor" or ""), utilization_pct (kernel-busy time / all-steps
    time), est_sm_efficiency_pct (time integral of min(blocks per SM, 1) summed over concurrent
    kernels and capped at 1 per instant, / all-steps time), est_achieved_occupancy_pct
    (kernel-time-weighted mean of the kernels' estimate), tensor_core_kernel_pct (Tensor Core
    kernel time / time of kernels launched by operators); all float percentages, computed
    within [first step start, last step end].
    """
    k = model.kernels
    props = model.devices
    used = sorted(set(k["device"].tolist()))
    described = [int(d) for d in props["id"].dropna().tolist()] if len(props) else []
    devices = used or []
    start, end = _steps_span(model)
    window = ([start], [end])
    span = end - start
    _, tc = kernel_flags(model)
    rows = []
    for device in devices:  # a handful of GPUs per trace
        on = (k["device"] == device).to_numpy()
        ks, ke = k["ts"].to_numpy()[on], (k["ts"] + k["dur"]).to_numpy()[on]
        busy = union_length(ks, ke, window)[0]
        blocks = k["blocks_per_sm"].to_numpy()[on]
        has_blocks = np.isfinite(blocks)
        sm = weighted_level_integral(ks[has_blocks], ke[has_blocks], np.minimum(blocks[has_blocks], 1.0), window, cap=1.0)[0]
        occ = k["est_achieved_occupancy_pct"].to_numpy()[on]
        clipped = np.clip(np.minimum(ke, end) - np.maximum(ks, start), 0, None)
        has_occ = np.isfinite(occ) & (clipped > 0)
        occupancy = float((occ[has_occ] * clipped[has_occ]).sum() / clipped[has_occ].sum()) if has_occ.any() else np.nan
        launched = on & (k["op"].to_numpy() >= 0)
        launched_time = k["dur"].to_numpy()[launched].sum()
        tc_time = k["dur"].to_numpy()[launched & tc].sum()
        prop = props[props["id"] == device] if device in described else props.iloc[0:0]
        p = prop.iloc[0] if len(prop) else None
        rows.append({
            "device": int(device),
            "name": str(p["name"]) if p is not None else "",
            "memory_bytes": float(p["totalGlobalMem"]) if p is not None else np.nan,
            "compute_capability": f"{int(p['computeMajor'])}.{int(p['computeMinor'])}"
            if p is not None and pd.notna(p["computeMajor"]) and pd.notna(p["computeMinor"]) else "",
            "utilization_pct": 100 * busy / span if span > 0 else np.nan,
            "est_sm_efficiency_pct": 100 * sm / span if span > 0 and has_blocks.any() else np.nan,
            "est_achieved_occupancy_pct": occupancy,
            "tensor_core_kernel_pct": 100 * tc_time / launched_time if launched_time > 0 else np.nan,
        })
    return pd.DataFrame(rows, columns=GPU_COLUMNS)


def environment(model: TraceModel, device_type: str) -> dict[str, Any]:
    """What ran: device type, GPUs, distributed setup, versions the trace records."""
    meta = model.metadata
    keys = ("cuda_runtime_version", "cuda_driver_version", "cupti_version", "Framework", "host_name", "schemaVersion")
    env = {"device_type": device_type, "distributed": model.distributed}
    env.update({k: meta[k] for k in keys if k in meta})
    return env
