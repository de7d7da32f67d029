"""Performance recommendations: structured items derived from the other views' numbers."""

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..trace.model import TraceModel
from .common import is_tc_eligible_name, kernel_flags, name_mask, operator_tree, step_windows
from .compiled import compiled
from .gpu_idle import idle_time
from .launches import kernel_launches
from .sequences import kernel_sequences

# Thresholds (the old plugin's where it had one; see METRICS.md).
DATALOADER_SHARE = 0.05
COMMUNICATION_SHARE = 0.10
LOW_UTILIZATION_PCT = 50.0
MEMORY_NEAR_CAPACITY = 0.90
TENSOR_CORE_MIN_CAPABILITY = 7
TINY_KERNEL_US = 10.0
TINY_KERNEL_SHARE = 0.5
TINY_KERNELS_PER_STEP = 500
TC_ELIGIBLE_DEVICE_SHARE = 0.10
# GPU-wait rules (views/gpu_idle.py, launches.py): a fifth of the kernel launches shorter than
# their launch call, and at least this many of them; half the idle time waiting on the host
# while the streams idle a fifth of their span.
LAUNCH_BOUND_SHARE = 0.2
LAUNCH_BOUND_MIN = 100
HOST_WAIT_SHARE = 0.5
IDLE_SHARE = 0.2
# A sequence of three kernels repeating on a stream that takes a tenth of all kernel time.
FUSION_LENGTH = 3
FUSION_SHARE_PCT = 10.0
# The PyTorch documentation of each recommendation's fix, as 0.4.3 linked it.
DOCS = {
    "input_pipeline_bound": "https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
    "communication_heavy": "https://pytorch.org/docs/stable/notes/ddp.html",
    "low_gpu_utilization": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    "data_parallel": "https://pytorch.org/docs/stable/notes/cuda.html#use-nn-parallel-distributeddataparallel-instead-of-multiprocessing-or-nn-dataparallel",
    "ddp_without_nccl": "https://pytorch.org/docs/stable/distributed.html#which-backend-to-use",
    "tensor_cores_unused": "https://pytorch.org/docs/stable/amp.html",
    "memory_near_capacity": "https://pytorch.org/docs/stable/notes/cuda.html#memory-management",
    "many_tiny_kernels": "https://pytorch.org/docs/stable/torch.compiler.html",
    "launch_bound": "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs",
    "host_bound": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    "fusion_candidate": "https://pytorch.org/docs/stable/torch.compiler.html",
    "recompilations": "https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html",
}


@dataclass
class Recommendation:
    id: str
    severity: str  # "warning" or "info"
    text: str
    numbers: dict = field(default_factory=dict)
    # Where the page shows the events behind the numbers: {"view": ..., "params": {...},
    # "panel": ...} (page-URL parameters of that view, and the panel of it that shows them;
    # "kernels": the kernel names the text quotes, for the page to shorten); empty when no
    # view does.
    evidence: dict = field(default_factory=dict)


def recommendations(model: TraceModel, step_table: pd.DataFrame, gpus: pd.DataFrame) -> list[dict[str, Any]]:
    """Recommendations for one profile, most important first.

    Parameters are the results of `overview.steps(model)` and `overview.gpu_summary(model)`.
    Returns a list of dicts {id, severity, text, numbers, evidence, docs}; `numbers` holds
    the figures the text is based on (fractions in [0, 1], times in µs, sizes in bytes);
    `evidence` names the view (its URL parameters and panel) that shows the events behind
    them; `docs` the PyTorch documentation of the fix (`DOCS`).
    """
    items = []
    total = float(step_table["total_us"].sum())
    if total > 0:
        loader = float(step_table["dataloader_us"].sum()) / total
        if loader > DATALOADER_SHARE:
            items.append(Recommendation(
                "input_pipeline_bound", "warning",
                f"{loader:.1%} of the step time is spent waiting for the DataLoader. Try more DataLoader "
                "workers (num_workers), pin_memory=True, persistent_workers=True, or a faster input pipeline.",
                {"dataloader_share": loader, "dataloader_us": float(step_table["dataloader_us"].sum())}))
        comm = float(step_table["communication_us"].sum()) / total
        if comm > COMMUNICATION_SHARE:
            items.append(Recommendation(
                "communication_heavy", "warning",
                f"{comm:.1%} of the step time is communication not hidden behind computation. Consider "
                "gradient accumulation (fewer all-reduces), larger DDP buckets, or overlapping communication.",
                {"communication_share": comm}))
    for gpu in gpus.to_dict("records"):
        util = gpu["utilization_pct"]
        if util == util and util < LOW_UTILIZATION_PCT:
            items.append(Recommendation(
                "low_gpu_utilization", "warning",
                f"GPU {gpu['device']} is busy only {util:.1f}% of the step time. Look at the step breakdown for "
                "what the GPU waits on (input pipeline, CPU work, synchronisation); a larger batch size may help.",
                {"device": gpu["device"], "utilization_pct": util}))
    items += _data_parallel(model, gpus)
    items += _tensor_cores(model, gpus)
    items += _memory(model)
    items += _tiny_kernels(model)
    items += _gpu_waits(model)
    items += _recompilations(model)
    severity_rank = {"warning": 0, "info": 1}
    items.sort(key=lambda r: severity_rank[r.severity])
    return [{**asdict(r), "docs": DOCS.get(r.id, "")} for r in items]


def _data_parallel(model, gpus):
    out = []
    dp = name_mask(model.ops["name"], lambda n: n.startswith("DataParallel.forward"))
    if dp.any() and len(gpus) > 1:
        out.append(Recommendation(
            "data_parallel", "warning",
            "DataParallel is used on several GPUs: DistributedDataParallel is faster (one process per GPU, no "
            "per-step model replication).", {"gpus": int(len(gpus))}))
    backend = str(model.distributed.get("backend", "")).lower()
    if backend == "gloo" and len(model.kernels):
        out.append(Recommendation(
            "ddp_without_nccl", "warning",
            "Distributed training on GPUs uses the gloo backend: NCCL is much faster between GPUs.",
            {"backend": backend}))
    return out


def _tensor_cores(model, gpus):
    capable = [g for g in gpus.to_dict("records") if g["compute_capability"]
               and int(g["compute_capability"].split(".")[0]) >= TENSOR_CORE_MIN_CAPABILITY]
    if not capable:
        return []
    _, tc = kernel_flags(model)
    if tc.any():
        return []
    tree = operator_tree(model)
    leaf_eligible = name_mask(model.ops["name"], is_tc_eligible_name)
    eligible_time = float(tree["device_self_us"].to_numpy()[leaf_eligible].sum())
    device_time = float(model.kernels["dur"].sum())
    if device_time > 0 and eligible_time / device_time > TC_ELIGIBLE_DEVICE_SHARE:
        return [Recommendation(
            "tensor_cores_unused", "warning",
            f"{eligible_time / device_time:.1%} of kernel time is in operators that could use Tensor Cores "
            "(matmul, convolution), but no kernel did. Enable mixed precision (torch.autocast) or TF32.",
            {"eligible_share": eligible_time / device_time, "eligible_us": eligible_time})]
    return []


def _memory(model):
    mem = model.memory
    gpu = mem[(mem["device_type"] == 1) & np.isfinite(mem["total_allocated"].to_numpy())]
    if not len(gpu) or not len(model.devices):
        return []
    out = []
    peaks = gpu.groupby("device_id")["total_allocated"].max()
    capacity = model.devices.set_index("id")["totalGlobalMem"]
    for device, peak in peaks.items():
        cap = capacity.get(device)
        if cap and cap == cap and peak / cap > MEMORY_NEAR_CAPACITY:
            out.append(Recommendation(
                "memory_near_capacity", "warning",
                f"Peak allocated memory on GPU {device} is {peak / cap:.0%} of its capacity: close to out-of-memory. "
                "Consider activation checkpointing, a smaller batch, or mixed precision.",
                {"device": int(device), "peak_bytes": float(peak), "capacity_bytes": float(cap)}))
    return out


def _tiny_kernels(model):
    k = model.kernels
    if not len(k):
        return []
    n_steps = max(len(step_windows(model)), 1)
    tiny = float((k["dur"] < TINY_KERNEL_US).mean())
    per_step = len(k) / n_steps
    if tiny >= TINY_KERNEL_SHARE and per_step >= TINY_KERNELS_PER_STEP:
        return [Recommendation(
            "many_tiny_kernels", "info",
            f"{tiny:.0%} of the {per_step:.0f} kernels per step run under {TINY_KERNEL_US:.0f} µs: the step is likely "
            "launch-bound. torch.compile (kernel fusion) or CUDA Graphs cut the launch overhead.",
            {"tiny_kernel_share": tiny, "kernels_per_step": per_step})]
    return []


def _gpu_waits(model):
    """Launch-bound and host-bound, from the launch statistics and the idle time breakdown
    (HTA's definitions; see views/launches.py and views/gpu_idle.py)."""
    out = []
    launches = kernel_launches(model)
    kernels = launches[launches["kind"] == "kernel"]
    bound = kernels[kernels["launch_bound"]]
    if len(kernels) and len(bound) >= LAUNCH_BOUND_MIN and len(bound) / len(kernels) >= LAUNCH_BOUND_SHARE:
        out.append(Recommendation(
            "launch_bound", "warning",
            f"Launch-bound: {len(bound)} of {len(kernels)} kernels ({len(bound) / len(kernels):.0%}) ran for less time on "
            f"the GPU than their launch call took on the CPU ({bound['device_us'].sum() / 1e3:.1f} ms of GPU time against "
            f"{bound['runtime_us'].sum() / 1e3:.1f} ms of launch calls). Consider CUDA graphs or torch.compile to launch "
            "fewer, larger pieces of work.",
            {"launch_bound": int(len(bound)), "kernels": int(len(kernels)), "launch_bound_share": len(bound) / len(kernels),
             "launch_bound_device_us": float(bound["device_us"].sum()), "launch_bound_runtime_us": float(bound["runtime_us"].sum())},
            {"view": "gpu_idle", "params": {"launch_flag": "launch_bound"}, "panel": "launches"}))
    idle = idle_time(model)
    span = float((idle["end_us"] - idle["start_us"]).sum())
    idle_us = float(idle["idle_us"].sum())
    host_wait = float(idle["idle_host_wait_us"].sum())
    if span > 0 and idle_us / span >= IDLE_SHARE and host_wait / idle_us >= HOST_WAIT_SHARE:
        out.append(Recommendation(
            "host_bound", "warning",
            f"Host-bound: {host_wait / idle_us:.0%} of the GPU streams' idle time is host wait ({host_wait / 1e3:.1f} ms of "
            f"{idle_us / 1e3:.1f} ms idle): the GPU ran out of work because the CPU had not launched the next kernel yet. "
            "Reduce CPU work between launches (torch.compile, CUDA graphs, fewer Python-side operations, a faster "
            "input pipeline).",
            {"host_wait_share": host_wait / idle_us, "idle_host_wait_us": host_wait, "idle_us": idle_us,
             "idle_share": idle_us / span},
            {"view": "gpu_idle", "params": {}, "panel": "idle"}))
    top = kernel_sequences(model, FUSION_LENGTH, top=1)
    if len(top) and top.loc[0, "share_pct"] >= FUSION_SHARE_PCT:
        seq = top.iloc[0]
        launched_by = f" (launched by {seq['operators']})" if seq["operators"] else ""
        out.append(Recommendation(
            "fusion_candidate", "info",
            f"Fusion candidate: the kernel sequence {seq['sequence']}{launched_by} repeats {seq['occurrences']} times on "
            f"stream {seq['stream']}, {seq['device_us'] / 1e3:.1f} ms ({seq['share_pct']:.0f}% of kernel time, "
            f"{seq['device_per_step_us'] / 1e3:.2f} ms per step). Fusing it (torch.compile, a fused kernel) saves launches "
            "and memory traffic.",
            {"occurrences": int(seq["occurrences"]), "device_us": float(seq["device_us"]),
             "share_pct": float(seq["share_pct"]), "device_per_step_us": float(seq["device_per_step_us"])},
            {"view": "gpu_idle", "params": {"sequence_length": FUSION_LENGTH}, "panel": "sequences",
             "kernels": seq["sequence"].split(" | ")}))
    return out


def _recompilations(model):
    """A frame that ran a compilation other than its first (``Torch-Compiled Region: 0/1``)
    was compiled again: a guard failed (a new shape, dtype, Python value...)."""
    regions = compiled(model)
    frames = regions[(regions["kind"] == "frame") & (regions["compilation"] > 0)]
    if not len(frames):
        return []
    per_frame = frames.groupby("frame")["compilation"].max()
    listed = ", ".join(f"frame {f} ({c + 1} compilations)" for f, c in per_frame.items())  # a few frames
    return [Recommendation(
        "recompilations", "warning",
        f"torch.compile recompiled: {listed}. Each recompilation costs compile time and may hit the cache limit "
        "(then the frame runs eager). Run with TORCH_LOGS=recompiles to see which guard failed; mark changing "
        "sizes dynamic (torch._dynamo.mark_dynamic) or keep shapes and Python values fixed.",
        {"frames": int(len(per_frame)), "max_compilations": int(per_frame.max() + 1)},
        {"view": "compiled", "params": {}, "panel": "regions"})]
