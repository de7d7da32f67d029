"""Overview: steps and their time breakdown, GPU summary, environment."""

from typing import Any

import numpy as np
import pandas as pd

from ..schema import NULLABLE, declare, documented, route, tab
from ..trace.anomalies import describe as describe_anomalies
from ..trace.model import TraceModel
from .health import health, is_clean
from .common import cached, kernel_flags, matrix_unit, step_breakdown, step_windows
from .intervals import union_length, weighted_level_integral

STEP_BREAKDOWN = declare(
    "step_breakdown", "one step: its wall time split by category; the parts sum exactly to total_us",
    ("step", "int64", "", "the ProfilerStep#N number; 0 when the trace has no step markers (one step over it all)"),
    ("kernel_us", "float64", "us", "time running kernels (collective kernels excluded)"),
    ("memcpy_us", "float64", "us", "time copying memory on a device, and no kernel ran"),
    ("memset_us", "float64", "us", "time setting memory on a device, and none of the above"),
    ("communication_us", "float64", "us", "collective kernels and host collective ops, and none of the above"),
    ("runtime_us", "float64", "us", "runtime calls on the host, and none of the above"),
    ("dataloader_us", "float64", "us", "DataLoader iteration on the host, and none of the above"),
    ("cpu_exec_us", "float64", "us", "other host ops and annotations, and none of the above"),
    ("other_us", "float64", "us", "none of the above"),
    ("total_us", "float64", "us", "the step's wall time"),
)
GPU_SUMMARY = declare(
    "gpu_summary", "one GPU that ran kernels, within [first step start, last step end]",
    ("device", "int64", "", "device number"),
    ("name", "str", "", "device name from the trace's deviceProperties; empty when not described"),
    ("memory_bytes", "int64", "bytes", "device memory; null when not described", NULLABLE),
    ("compute_capability", "str", "", "\"major.minor\"; empty when not described"),
    ("utilization_pct", "float64", "pct", "kernel-busy time / all-steps time", NULLABLE),
    ("est_sm_efficiency_pct", "float64", "pct",
     "time integral of min(blocks per SM, 1) over concurrent kernels, capped at 1 per instant, / all-steps time",
     NULLABLE),
    ("est_achieved_occupancy_pct", "float64", "pct", "kernel-time-weighted mean of the kernels' occupancy estimate",
     NULLABLE),
    ("tensor_core_kernel_pct", "float64", "pct", "Tensor Core kernel time / time of kernels launched by operators",
     NULLABLE),
)
STEP_COLUMNS = STEP_BREAKDOWN.names
GPU_COLUMNS = GPU_SUMMARY.names


@documented(STEP_BREAKDOWN)
def steps(model: TraceModel) -> pd.DataFrame:
    """Per step, wall time by category; the parts sum exactly to the step time.

    Returns
    -------
    DataFrame, one row per step in time order.

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
    # Computed once per model: the Overview, its recommendations and the steps route all ask
    return cached(model, "steps", lambda: STEP_BREAKDOWN.frame(step_breakdown(model)))


def step_mean(step_table: pd.DataFrame) -> dict[str, float]:
    """The mean step: {column: mean over the steps} of each `*_us` column of `steps`
    (kernel_us, ..., other_us, total_us; float µs); {} without steps."""
    columns = [c for c in step_table.columns if c.endswith("_us")]
    return {c: float(step_table[c].mean()) for c in columns} if len(step_table) else {}


STEP_SUMMARY = declare(
    "step_summary", "one step category (in priority order): its mean over the steps, as the execution summary shows it",
    ("category", "str", "", "kernel, memcpy, memset, communication, runtime, dataloader, cpu_exec or other"),
    ("mean_us", "float64", "us", "mean over the steps"),
    ("share_pct", "float64", "pct", "mean_us / the mean step time; null when the mean step lasts 0 us", NULLABLE),
)


@documented(STEP_SUMMARY)
def step_summary(step_table: pd.DataFrame) -> pd.DataFrame:
    """The mean step by category, as the overview's execution summary shows it."""
    means = step_mean(step_table)
    columns = [c for c in STEP_COLUMNS if c.endswith("_us") and c != "total_us"]
    mean_us = np.array([means.get(c, 0.0) for c in columns], dtype=np.float64)
    total = means.get("total_us", 0.0)
    return STEP_SUMMARY.frame({"category": [c[: -len("_us")] for c in columns], "mean_us": mean_us,
                               "share_pct": 100 * mean_us / total if total > 0 else np.full(len(columns), np.nan)})


def _steps_span(model: TraceModel) -> tuple[float, float]:
    windows = step_windows(model)
    return float(windows["start_us"].min()), float(windows["end_us"].max())


@documented(GPU_SUMMARY)
def gpu_summary(model: TraceModel) -> pd.DataFrame:
    """One row per GPU that ran kernels; percentages are null where their denominator is 0
    or unknown, and every time is within [first step start, last step end].

    Returns
    -------
    DataFrame, one row per GPU by device number.
    """
    return cached(model, "gpu_summary", lambda: _gpu_summary(model))


def _gpu_summary(model: TraceModel) -> pd.DataFrame:
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
            "memory_bytes": int(p["totalGlobalMem"]) if p is not None and pd.notna(p["totalGlobalMem"]) else pd.NA,
            "compute_capability": f"{int(p['computeMajor'])}.{int(p['computeMinor'])}"
            if p is not None and pd.notna(p["computeMajor"]) and pd.notna(p["computeMinor"]) else "",
            "utilization_pct": 100 * busy / span if span > 0 else np.nan,
            "est_sm_efficiency_pct": 100 * sm / span if span > 0 and has_blocks.any() else np.nan,
            "est_achieved_occupancy_pct": occupancy,
            "tensor_core_kernel_pct": 100 * tc_time / launched_time if launched_time > 0 else np.nan,
        })
    return GPU_SUMMARY.frame(pd.DataFrame(rows, columns=GPU_SUMMARY.names))


# Where and as which job the run was recorded: Kineto writes the host's name and the
# `PT_PROFILER_JOB_*` environment variables set when profiling, as top-level text
# (libkineto's `getEnvMetadata`, 2026).
RUN_SETTINGS = ("host_name", "PT_PROFILER_JOB_NAME", "PT_PROFILER_JOB_VERSION", "PT_PROFILER_JOB_ATTEMPT_INDEX")


def run_settings(model: TraceModel) -> dict[str, Any]:
    """The `RUN_SETTINGS` the trace records, by name."""
    return {k: model.metadata[k] for k in RUN_SETTINGS if k in model.metadata}


def environment(model: TraceModel) -> dict[str, Any]:
    """What ran: device type, GPUs, distributed setup, versions and run settings the trace records."""
    meta = model.metadata
    keys = ("cuda_runtime_version", "cuda_driver_version", "cupti_version", "Framework", "schemaVersion")
    env = {"device_type": model.device_type, "distributed": model.distributed, "matrix_unit": matrix_unit(model)}
    env.update({k: meta[k] for k in keys if k in meta})
    return env | run_settings(model)


def advice(model: TraceModel) -> list[dict[str, Any]]:
    """Structured performance recommendations: [{id, severity, text, numbers}], computed
    once per model (most of the Overview's time: a reply asked for again, or after the
    server's prefetch, does not pay it twice); see `recommendations.recommendations`."""
    from .recommendations import recommendations

    return cached(model, "recommendations", lambda: recommendations(model, steps(model), gpu_summary(model)))


def overview(model: TraceModel) -> dict[str, Any]:
    """Everything the Overview tab shows, as one dict of plain data and DataFrames:
    environment, steps, step_mean, step_summary, gpu_summary, recommendations and the
    import's anomalies."""
    step_table = steps(model)
    return {
        "environment": environment(model),
        "steps": step_table,
        "step_mean": step_mean(step_table),
        "step_summary": step_summary(step_table),
        "gpu_summary": gpu_summary(model),
        "recommendations": advice(model),
        "anomalies": describe_anomalies(model.anomalies),
    }


def trace_info(model: TraceModel) -> dict[str, Any]:
    """What the trace holds: device, the GPUs it used (`devices`; `devices_on_host` counts
    every GPU the trace describes), `run_settings` (the host and `PT_PROFILER_JOB_*` settings
    it was recorded with), steps, event counts per kind, time span, anomalies, health
    findings (`health.health`) and whether none but info ones occur (`health_clean`)."""
    findings = health(model)
    start, end = model.span_us()
    tables = (model.kernels, model.memcpy, model.memset)
    used_devices = sorted(set(np.concatenate([t["device"].to_numpy() for t in tables]).tolist()))
    # deviceProperties lists every GPU on the host; only those the trace used are listed
    devices = [
        {"id": int(d["id"]), "name": str(d["name"]),
         "memory_bytes": int(d["totalGlobalMem"]) if d["totalGlobalMem"] == d["totalGlobalMem"] else None}
        for d in model.devices.to_dict("records") if d["id"] == d["id"] and int(d["id"]) in used_devices
    ]
    return {
        "device_type": model.device_type,
        "devices": devices,
        "devices_used": [int(d) for d in used_devices],
        "devices_on_host": int(len(model.devices)),
        "distributed": model.distributed,
        "run_settings": run_settings(model),
        "steps": [int(s) for s in model.steps["step"]],
        "event_counts": {name: int(len(getattr(model, name))) for name in model.TABLES if name != "steps"},
        "threads": int(len(model.threads)),
        "start_us": model.origin_us + start,
        "duration_us": end - start,
        "anomalies": model.anomalies,
        "anomaly_details": describe_anomalies(model.anomalies),
        "health": findings.to_dict("records"),
        "health_clean": is_clean(findings),
    }


# The routes answering with these tables (see `schema.route`).
STEPS_ROUTE = route(
    "steps",
    "Per step, its wall time by category (the parts sum to the step's time).",
    steps,
    table=STEP_BREAKDOWN)
GPU_SUMMARY_ROUTE = route(
    "gpu_summary",
    "Per GPU that ran kernels, its utilization, SM efficiency, occupancy and Tensor Core share.",
    gpu_summary,
    table=GPU_SUMMARY)
OVERVIEW_ROUTE = route(
    "overview",
    "Environment, step breakdown (table), mean step, the mean step by category (step_summary: category, mean_us, "
    "share_pct), GPU summary (table), recommendations.",
    overview, reply="Overview")


# This view's tab of the page (see `schema.tab`).
OVERVIEW_TAB = tab("overview", 0, lambda offer: True)
