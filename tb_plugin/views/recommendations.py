"""Performance recommendations: structured items derived from the other views' numbers."""

import re
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..trace.model import TraceModel
from .common import is_blocking_call, is_rocm, is_tc_eligible_name, kernel_flags, name_mask, operator_tree
from .compiled import has_regions, recompilations
from .cudagraphs import graph_launch_mask
from .gpu_idle import idle_time
from .launches import kernel_launches
from .step_causes import step_causes
from .sequences import SEPARATOR, is_fusible_kernel, kernel_sequences

# Thresholds (the old plugin's where it had one; see METRICS.md).
DATALOADER_SHARE = 0.05
COMMUNICATION_SHARE = 0.10
LOW_UTILIZATION_PCT = 50.0
MEMORY_NEAR_CAPACITY = 0.90
TENSOR_CORE_MIN_CAPABILITY = 7
# TF32 and bf16 Tensor Core math start with Ampere (compute capability 8.0); Volta and
# Turing (7.x) have fp16 Tensor Cores only.
TF32_BF16_MIN_CAPABILITY = 8
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
# Sequences searched for one of fusible kernels only (the most time-consuming first).
FUSION_SEARCH_TOP = 1000
# Blocking calls (the device idle while the CPU waits in them) worth an item of their own.
SYNC_SHARE = 0.05
# The PyTorch documentation of each recommendation's fix, as 0.4.3 linked it.
DOCS = {
    "input_pipeline_bound": "https://pytorch.org/docs/stable/data.html#multi-process-data-loading",
    "communication_heavy": "https://pytorch.org/docs/stable/notes/ddp.html",
    "host_synchronisation": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization",
    "low_gpu_utilization": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    "data_parallel": "https://pytorch.org/docs/stable/notes/cuda.html#use-nn-parallel-distributeddataparallel-instead-of-multiprocessing-or-nn-dataparallel",
    "ddp_without_nccl": "https://pytorch.org/docs/stable/distributed.html#which-backend-to-use",
    "tensor_cores_unused": "https://pytorch.org/docs/stable/amp.html",
    "memory_near_capacity": "https://pytorch.org/docs/stable/notes/cuda.html#memory-management",
    "launch_bound": "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs",
    "host_bound": "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
    "fusion_candidate": "https://pytorch.org/docs/stable/torch.compiler.html",
    "fsdp": "https://pytorch.org/docs/stable/distributed.fsdp.fully_shard.html",
    "tensor_parallel": "https://pytorch.org/docs/stable/distributed.tensor.parallel.html",
    "recompilations": "https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html",
}


@dataclass
class Recommendation:
    id: str
    severity: str  # "warning" or "info"
    text: str
    # What was tested, with the measured value and the threshold, in words.
    condition: str
    # An upper bound of the time per step following the advice could save (µs, a mean over
    # the profiled steps, never above the mean step), by the model the condition states; None
    # where no such bound can be defended (memory, a symptom such as low utilisation, compile
    # time, Tensor Cores whose speed-up the trace cannot tell).
    saving_us: float | None = None
    numbers: dict = field(default_factory=dict)
    # Where the page shows the events behind the numbers: {"view": ..., "params": {...},
    # "panel": ...} (page-URL parameters of that view, and the panel of it that shows them;
    # "kernels": the kernel names the text quotes, for the page to shorten); empty when no
    # view does.
    evidence: dict = field(default_factory=dict)
    # Where there is no saving: the measured time per step of what the item is about (µs),
    # shown instead of a saving; None when the item measures no time.
    measured_us: float | None = None
    # The PyTorch documentation of the fix, when it is not the id's (`DOCS`).
    docs: str = ""


@dataclass
class RunFacts:
    """What the run already does and the per-step means the rules share, computed once."""
    steps: int  # the steps every per-step figure is a mean over (1 for a trace without steps)
    step_mean_us: float
    dataloader_us: float
    # Device idle while the CPU runs runtime calls (launches) or operators, per step (the
    # diff's `host_launch`); blocking calls are not in it.
    host_work_us: float
    # Device idle while the CPU is blocked in a synchronising call, per step.
    sync_us: float
    uses_cuda_graphs: bool
    uses_compile: bool


def recommendations(model: TraceModel, step_table: pd.DataFrame, gpus: pd.DataFrame) -> list[dict[str, Any]]:
    """Recommendations for one profile, the largest possible saving first.

    Parameters are the results of `overview.steps(model)` and `overview.gpu_summary(model)`.
    Returns a list of dicts {id, severity, text, condition, saving_us, measured_us, steps,
    numbers, evidence, docs}:
    `condition` says what was tested (measured value against its threshold) and, for an item
    with a saving, the model that bounds it; `saving_us` is an upper bound of the time per
    step the advice could save (a mean over `steps` steps, never above the mean step), null
    where no bound can be defended; `measured_us` is then the measured time per step of
    what the item is about (null when it measures no time); `numbers` holds the figures the
    text is based on (fractions in [0, 1], times in µs per step, sizes in bytes);
    `evidence` names the view (its URL parameters and panel) that shows the events behind
    them; `docs` the PyTorch documentation of the fix.

    Items are ranked by `saving_us`, largest first; those without one follow, warnings
    before infos. Each rule is one function below and checks what the run already does
    (CUDA graphs, torch.compile, Tensor Cores, its parallelism) and what its GPU supports
    (TF32 and bf16 from compute capability 8.0) before advising it; blocking runtime calls
    are synchronisation, not host work; only element-wise and reduction kernels are fusion
    members (never a library kernel: cuDNN, cuBLAS, CUTLASS, GEMM, convolution, attention,
    collectives, Inductor's).
    """
    facts = _run_facts(model, step_table)
    items: list[Any] = [  # a rule's item, or None where it does not apply (left out below)
        _input_pipeline(facts), _communication(model, step_table, facts), *_low_utilization(gpus),
        _data_parallel(model, gpus), _gloo_on_gpus(model), _tensor_cores(model, gpus, facts), *_memory(model),
        _launch_bound(model, facts), _host_bound(model, facts), _host_synchronisation(model, facts),
        _fusion(model, facts), _recompilations(model),
    ]
    severity_rank = {"warning": 0, "info": 1}
    items = [r for r in items if r is not None]
    for r in items:  # a bound above the mean step is no bound: the step is
        if r.saving_us is not None:
            r.saving_us = min(r.saving_us, facts.step_mean_us)
    items.sort(key=lambda r: (r.saving_us is None, -(r.saving_us or 0.0), severity_rank[r.severity]))
    return [{**asdict(r), "steps": facts.steps, "docs": r.docs or DOCS.get(r.id, "")} for r in items]


def _run_facts(model: TraceModel, step_table: pd.DataFrame) -> RunFacts:
    steps = max(len(step_table), 1)
    means = step_table.sum(numeric_only=True) / steps
    causes = step_causes(model).sum(numeric_only=True) / steps
    return RunFacts(
        steps=steps,
        step_mean_us=float(means.get("total_us", 0.0)),
        dataloader_us=float(means.get("dataloader_us", 0.0)),
        host_work_us=float(causes.get("host_launch_us", 0.0)),
        sync_us=float(causes.get("synchronisation_us", 0.0)),
        uses_cuda_graphs=bool(graph_launch_mask(model).any()),
        uses_compile=has_regions(model),
    )


def _loader_dominates(facts: RunFacts) -> bool:
    """Whether the DataLoader takes more of the time the device waits on the host than all
    other host work together: then the host-bound advice is the input pipeline's."""
    return facts.dataloader_us > 0 and facts.dataloader_us >= facts.host_work_us


def _ms(us: float) -> str:
    return f"{us / 1e3:.2f} ms"


def _input_pipeline(facts: RunFacts) -> Recommendation | None:
    if facts.step_mean_us <= 0:
        return None
    share = facts.dataloader_us / facts.step_mean_us
    if share <= DATALOADER_SHARE:
        return None
    dominant = (f" It is the largest part of the time the GPU waits on the host ({_ms(facts.dataloader_us)} per step "
                f"against {_ms(facts.host_work_us)} of other CPU work)." if _loader_dominates(facts) else "")
    return Recommendation(
        "input_pipeline_bound", "warning",
        f"{share:.1%} of the step time is spent waiting for the DataLoader.{dominant} Try more DataLoader "
        "workers (num_workers), pin_memory=True, persistent_workers=True, or a faster input pipeline.",
        f"DataLoader time with no device work running / step time = {share:.1%} > {DATALOADER_SHARE:.0%}; "
        "a faster input pipeline saves at most that time",
        facts.dataloader_us,
        {"dataloader_share": share, "dataloader_us": facts.dataloader_us, "host_work_us": facts.host_work_us})


def parallelism(model: TraceModel) -> list[str]:
    """The parallelisms the run uses, as its operators and process groups show them: "ddp"
    (DistributedDataParallel.forward ranges), "fsdp" (FSDP2's `FSDP::*` annotations, FSDP1's
    FullyShardedDataParallel ranges), "tensor_parallel" (a process group described as a
    mesh's `tp` dimension, or functional collectives (`_c10d_functional::*`, DTensor's) in a
    run that is neither of the others)."""
    names = [str(n) for n in model.ops["name"].cat.categories]
    used = []
    if any(n.startswith(("DistributedDataParallel.forward", "nn.Module: DistributedDataParallel")) for n in names):
        used.append("ddp")
    if any(n.startswith("FSDP::") or "FullyShardedDataParallel" in n for n in names):
        used.append("fsdp")
    groups = model.distributed.get("pg_config") if isinstance(model.distributed, dict) else None
    descs = [str(g.get("pg_desc", "")) for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []
    if any(re.search(r"(^|_)tp($|_)|tensor_parallel", d) for d in descs) or \
            (not used and any(n.startswith("_c10d_functional::") for n in names)):
        used.append("tensor_parallel")
    return used


_OVERLAP_ADVICE = {
    "ddp": "for DDP, fewer all-reduces (gradient accumulation with no_sync) or larger buckets (bucket_cap_mb)",
    "fsdp": "for FSDP, prefetch the next all-gather (FSDP2's set_modules_to_forward_prefetch / "
            "set_modules_to_backward_prefetch), keep small layers unsharded after forward "
            "(reshard_after_forward=False), or fewer reduce-scatters (gradient accumulation)",
    "tensor_parallel": "for tensor parallelism, keep the tensor-parallel group within a node (NVLink) or overlap its "
                       "collectives with the matmuls (async tensor parallel)",
}


def _communication(model: TraceModel, step_table: pd.DataFrame, facts: RunFacts) -> Recommendation | None:
    exposed = float(step_table["communication_us"].sum()) / facts.steps
    if facts.step_mean_us <= 0 or exposed / facts.step_mean_us <= COMMUNICATION_SHARE:
        return None
    share = exposed / facts.step_mean_us
    used = parallelism(model)
    advice = "; ".join(_OVERLAP_ADVICE[p] for p in used) if used else \
        "fewer collectives (gradient accumulation) or overlapping them with computation"
    docs = {"fsdp": DOCS["fsdp"], "tensor_parallel": DOCS["tensor_parallel"]}.get(used[0], "") if used else ""
    return Recommendation(
        "communication_heavy", "warning",
        f"{share:.1%} of the step time ({_ms(exposed)} per step) is communication not hidden behind computation. "
        f"Consider: {advice}.",
        f"communication with no computation running / step time = {share:.1%} > {COMMUNICATION_SHARE:.0%}; "
        "hiding it behind computation saves at most that time",
        exposed, {"communication_share": share, "communication_us": exposed, **{p: p in used for p in _OVERLAP_ADVICE}},
        docs=docs)


def _low_utilization(gpus: pd.DataFrame) -> list[Recommendation]:
    out = []
    for gpu in gpus.to_dict("records"):
        util = gpu["utilization_pct"]
        if util == util and util < LOW_UTILIZATION_PCT:
            out.append(Recommendation(
                "low_gpu_utilization", "warning",
                f"GPU {gpu['device']} is busy only {util:.1f}% of the step time. What it waits on is in the step "
                "breakdown and the items with a saving, largest first. A larger batch size may help.",
                f"GPU {gpu['device']} utilization = {util:.1f}% < {LOW_UTILIZATION_PCT:.0f}%", None,
                {"device": gpu["device"], "utilization_pct": util}))
    return out


def _data_parallel(model: TraceModel, gpus: pd.DataFrame) -> Recommendation | None:
    dp = name_mask(model.ops["name"], lambda n: n.startswith("DataParallel.forward"))
    if not dp.any() or len(gpus) <= 1:
        return None
    return Recommendation(
        "data_parallel", "warning",
        "DataParallel is used on several GPUs: DistributedDataParallel is faster (one process per GPU, no "
        "per-step model replication).",
        f"DataParallel.forward ranges present and {len(gpus)} GPUs > 1", None, {"gpus": int(len(gpus))})


def _gloo_on_gpus(model: TraceModel) -> Recommendation | None:
    backend = str(model.distributed.get("backend", "")).lower()
    if backend != "gloo" or not len(model.kernels):
        return None
    return Recommendation(
        "ddp_without_nccl", "warning",
        "Distributed training on GPUs uses the gloo backend: NCCL is much faster between GPUs.",
        f"distributed backend = gloo and {len(model.kernels)} GPU kernels ran", None, {"backend": backend})


def _tensor_cores(model: TraceModel, gpus: pd.DataFrame, facts: RunFacts) -> Recommendation | None:
    """Matmul/convolution time in a run that used no Tensor Core: the advice is what the GPU
    supports (TF32 and bf16 from compute capability 8.0; fp16 autocast on 7.x, where a V100
    has no TF32; on ROCm autocast, its compute capability being the gfx architecture). No
    saving: how much faster those kernels would run is not in the trace; the eligible time
    per step is given as measured."""
    capable = [g for g in gpus.to_dict("records") if g["compute_capability"]
               and int(g["compute_capability"].split(".")[0]) >= TENSOR_CORE_MIN_CAPABILITY]
    if not capable:
        return None
    _, tc = kernel_flags(model)
    if tc.any():  # the run already uses them
        return None
    tree = operator_tree(model)
    leaf_eligible = name_mask(model.ops["name"], is_tc_eligible_name)
    eligible_time = float(tree["device_self_us"].to_numpy()[leaf_eligible].sum())
    device_time = float(model.kernels["dur"].sum())
    if device_time <= 0 or eligible_time / device_time <= TC_ELIGIBLE_DEVICE_SHARE:
        return None
    share = eligible_time / device_time
    capability = min(float(g["compute_capability"]) for g in capable)
    if is_rocm(model):
        unit, advice = "Matrix cores", "Enable mixed precision (torch.autocast with bf16 or fp16)."
    elif capability >= TF32_BF16_MIN_CAPABILITY:
        unit, advice = "Tensor Cores", ("Enable mixed precision (torch.autocast, bf16) or TF32 for fp32 matmuls "
                                        "(torch.backends.cuda.matmul.allow_tf32 = True, cudnn.allow_tf32 for convolutions).")
    else:
        unit, advice = "Tensor Cores", (f"Enable fp16 mixed precision (torch.autocast(dtype=torch.float16) with a "
                                        f"GradScaler): compute capability {capability:.1f} has fp16 Tensor Cores only.")
    per_step = eligible_time / facts.steps
    return Recommendation(
        "tensor_cores_unused", "warning",
        f"{share:.1%} of kernel time ({_ms(per_step)} per step) is in operators that could use {unit} "
        f"(matmul, convolution), but no kernel did. {advice}",
        f"no {unit} kernel ran, and matmul/convolution kernel time / all kernel time = {share:.1%} "
        f"> {TC_ELIGIBLE_DEVICE_SHARE:.0%} on a GPU of compute capability {capability:.1f} >= "
        f"{TENSOR_CORE_MIN_CAPABILITY}; no saving is given: the speed-up is not in the trace",
        None, {"eligible_share": share, "eligible_us": per_step, "compute_capability": capability},
        measured_us=per_step)


def _memory(model: TraceModel) -> list[Recommendation]:
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
                f"peak allocated / device memory = {peak / cap:.0%} > {MEMORY_NEAR_CAPACITY:.0%}", None,
                {"device": int(device), "peak_bytes": float(peak), "capacity_bytes": float(cap)}))
    return out


def _launch_overhead_advice(facts: RunFacts, operators: str) -> str:
    """What to do about launch overhead, given what the run already uses; `operators` names
    the operators launching most of the launch-bound kernels ('' when none is known)."""
    mostly = f"mostly by {operators}" if operators else ""
    if facts.uses_cuda_graphs and facts.uses_compile:
        return ("The run already uses torch.compile and CUDA graphs; these kernels are launched outside them"
                f"{', ' + mostly if mostly else ''}: compile that code too (e.g. the optimizer step), or use fused "
                "implementations (fused=True optimizers).")
    if facts.uses_cuda_graphs:
        return ("The run already uses CUDA graphs; these kernels are launched outside them"
                f"{', ' + mostly if mostly else ''}: capture that code too, or torch.compile it.")
    if facts.uses_compile:
        return (f"The run already uses torch.compile{' (these kernels are launched ' + mostly + ')' if mostly else ''}: "
                "mode=\"reduce-overhead\" replays compiled code as CUDA graphs; compile the eager code that launches the rest.")
    return ("Consider CUDA graphs or torch.compile to launch fewer, larger pieces of work"
            f"{' (these kernels are launched ' + mostly + ')' if mostly else ''}.")


def _launch_bound(model: TraceModel, facts: RunFacts) -> Recommendation | None:
    """Launch-bound (HTA's flag: a kernel shorter on the device than its launch call), or
    failing that, many tiny kernels per step. One item either way: both say the same thing.
    Kernels a CUDA graph replay ran are left out: their launch is one call for the graph."""
    launches = kernel_launches(model)
    graph_calls = model.runtime["correlation"].to_numpy()[graph_launch_mask(model)]
    kernels = launches[(launches["kind"] == "kernel") & ~launches["correlation"].isin(graph_calls)]
    bound = kernels[kernels["launch_bound"]]
    tests = []
    if len(kernels) and len(bound) >= LAUNCH_BOUND_MIN and len(bound) / len(kernels) >= LAUNCH_BOUND_SHARE:
        tests.append(f"kernels shorter than their launch call = {len(bound)} of {len(kernels)} "
                     f"({len(bound) / len(kernels):.0%}) >= {LAUNCH_BOUND_SHARE:.0%} and >= {LAUNCH_BOUND_MIN}")
    tiny = float((kernels["device_us"] < TINY_KERNEL_US).mean()) if len(kernels) else 0.0
    per_step = len(kernels) / facts.steps
    if tiny >= TINY_KERNEL_SHARE and per_step >= TINY_KERNELS_PER_STEP:
        tests.append(f"kernels under {TINY_KERNEL_US:.0f} µs = {tiny:.0%} >= {TINY_KERNEL_SHARE:.0%} of "
                     f"{per_step:.0f} per step >= {TINY_KERNELS_PER_STEP}")
    if not tests:
        return None
    device_us = float(bound["device_us"].sum()) / facts.steps
    runtime_us = float(bound["runtime_us"].sum()) / facts.steps
    top = bound["operator"][bound["operator"] != ""].value_counts().head(3)
    text = (f"Launch-bound: {len(bound)} of {len(kernels)} kernels ({len(bound) / max(len(kernels), 1):.0%}) ran for less "
            f"time on the GPU than their launch call took on the CPU ({_ms(device_us)} of GPU time against "
            f"{_ms(runtime_us)} of launch calls per step); {tiny:.0%} of the {per_step:.0f} kernels per step run under "
            f"{TINY_KERNEL_US:.0f} µs. " + _launch_overhead_advice(facts, ", ".join(map(str, top.index))))
    tests.append("fewer launches save at most the launch calls' time beyond their kernels' and no more than the "
                 "time the GPU idles while the CPU works")
    return Recommendation(
        "launch_bound", "warning", text, "; ".join(tests), min(runtime_us - device_us, facts.host_work_us),
        {"launch_bound": int(len(bound)), "kernels": int(len(kernels)), "launch_bound_share": len(bound) / max(len(kernels), 1),
         "launch_bound_device_us": device_us, "launch_bound_runtime_us": runtime_us,
         "tiny_kernel_share": tiny, "kernels_per_step": per_step,
         "uses_cuda_graphs": facts.uses_cuda_graphs, "uses_compile": facts.uses_compile},
        {"view": "gpu_idle", "params": {"launch_flag": "launch_bound"}, "panel": "launches"})


def _host_bound(model: TraceModel, facts: RunFacts) -> Recommendation | None:
    """Host-bound, from HTA's idle time breakdown (views/gpu_idle.py). When the DataLoader
    is most of the host time the GPU waits through, the input pipeline item says so and this
    one is not given: "reduce CPU work" would send the user to the wrong place; nor when the
    CPU was mostly blocked in synchronising calls while the GPU idled (that is waiting, not
    work: `_host_synchronisation`). The saving is the time per step the GPU idles while the
    CPU runs launches or operators (the diff's `host_launch`): less CPU work saves at most
    that. The remedy names only what the run does not use yet."""
    idle = idle_time(model)
    span = float((idle["end_us"] - idle["start_us"]).sum())
    idle_us = float(idle["idle_us"].sum())
    host_wait = float(idle["idle_host_wait_us"].sum())
    if span <= 0 or idle_us / span < IDLE_SHARE or host_wait / idle_us < HOST_WAIT_SHARE or _loader_dominates(facts) \
            or facts.sync_us >= facts.host_work_us:
        return None
    missing = [name for name, used in (("torch.compile", facts.uses_compile), ("CUDA graphs", facts.uses_cuda_graphs))
               if not used]
    if missing:
        remedy = f"Reduce CPU work between launches ({', '.join(missing)}, fewer Python-side operations)"
    else:
        remedy = "Reduce the eager CPU work between launches (the code outside the compiled, graph-replayed regions)"
    return Recommendation(
        "host_bound", "warning",
        f"Host-bound: {host_wait / idle_us:.0%} of the GPU streams' idle time is host wait: the GPU ran out "
        f"of work because the CPU had not launched the next kernel yet; it idles {_ms(facts.host_work_us)} per step "
        f"while the CPU works. {remedy}.",
        f"stream idle time / stream span = {idle_us / span:.0%} >= {IDLE_SHARE:.0%}, host wait / idle time = "
        f"{host_wait / idle_us:.0%} >= {HOST_WAIT_SHARE:.0%}, the DataLoader ({_ms(facts.dataloader_us)} per step) "
        f"less than the other host work ({_ms(facts.host_work_us)}), and blocking calls ({_ms(facts.sync_us)}) less "
        "than it too; less CPU work saves at most the time the GPU idles while the CPU works",
        facts.host_work_us,
        {"host_wait_share": host_wait / idle_us, "idle_host_wait_us": host_wait / facts.steps,
         "idle_us": idle_us / facts.steps, "idle_share": idle_us / span, "host_work_us": facts.host_work_us,
         "sync_us": facts.sync_us},
        {"view": "gpu_idle", "params": {}, "panel": "idle"})


def _host_synchronisation(model: TraceModel, facts: RunFacts) -> Recommendation | None:
    """The GPU idles while the CPU is blocked in synchronising calls (cudaDeviceSynchronize,
    a synchronous cudaMemcpy, hipMemcpyWithStream, ...: `common.is_blocking_call`) for
    more than `SYNC_SHARE` of the step. Removing the synchronisation saves at most that idle
    time."""
    if facts.step_mean_us <= 0 or facts.sync_us / facts.step_mean_us <= SYNC_SHARE:
        return None
    share = facts.sync_us / facts.step_mean_us
    calls = model.runtime["name"][name_mask(model.runtime["name"], is_blocking_call)]
    top = calls.astype(str).value_counts().head(3)
    named = ", ".join(f"{name} ({count / facts.steps:g} per step)" for name, count in top.items())
    return Recommendation(
        "host_synchronisation", "warning",
        f"{share:.1%} of the step time ({_ms(facts.sync_us)} per step) the GPU idles while the CPU is blocked in "
        f"synchronising calls ({named}). Avoid synchronous copies and host reads of GPU values (.item(), .cpu(), "
        "printing tensors, torch.cuda.synchronize): copy with non_blocking=True from pinned memory, and read results "
        "once per step or less.",
        f"GPU idle while the CPU waits in a blocking runtime call / step time = {share:.1%} > {SYNC_SHARE:.0%}; "
        "removing the waits saves at most that time",
        facts.sync_us, {"sync_share": share, "sync_us": facts.sync_us})


def _fusion(model: TraceModel, facts: RunFacts) -> Recommendation | None:
    """The most time-consuming repeating kernel sequence (among the `FUSION_SEARCH_TOP`
    most time-consuming of `kernel_sequences`) that fusion could remove: every kernel an
    element-wise or reduction one (`sequences.is_fusible_kernel`), never a library kernel
    (cuDNN, cuBLAS, CUTLASS, GEMM, convolution, attention, collectives) or one Inductor
    generated (torch.compile fused it already).

    The bound: fused into one kernel, a sequence of n element-wise or reduction kernels
    keeps one kernel's launch and one pass over the memory; at most the other n - 1 of its
    n kernels' time is saved, (n - 1) / n of its device time per step when the fused kernel
    lasts as long as its average member."""
    sequences = kernel_sequences(model, FUSION_LENGTH, FUSION_SEARCH_TOP)
    kernels = sequences["sequence"].str.split(SEPARATOR, regex=False)
    # each distinct kernel name tested once: a thousand sequences share a few dozen names
    fusible_name = {name: is_fusible_kernel(name) for name in set().union(*kernels)} if len(kernels) else {}
    candidates = sequences[[all(fusible_name[name] for name in seq) for seq in kernels]]
    if not len(candidates) or candidates["share_pct"].iloc[0] < FUSION_SHARE_PCT:
        return None
    seq = candidates.iloc[0]
    launched_by = f" (launched by {seq['operators']})" if seq["operators"] else ""
    per_step = float(seq["device_us"]) / facts.steps
    saving = per_step * (FUSION_LENGTH - 1) / FUSION_LENGTH
    return Recommendation(
        "fusion_candidate", "info",
        f"Fusion candidate: the kernel sequence {seq['sequence']}{launched_by} repeats {seq['occurrences']} times on "
        f"stream {seq['stream']}, {_ms(per_step)} per step ({seq['share_pct']:.0f}% of kernel time), all element-wise "
        "or reduction kernels. Fusing them (torch.compile, a fused kernel) saves launches and memory traffic.",
        f"the largest repeating sequence of {FUSION_LENGTH} element-wise or reduction kernels (no library, collective "
        f"or Inductor-generated kernel) takes {seq['share_pct']:.0f}% >= {FUSION_SHARE_PCT:.0f}% of kernel time; fused "
        f"into one kernel as long as its average member, {FUSION_LENGTH - 1} of its {FUSION_LENGTH} kernels' time is "
        "saved at most",
        saving,
        {"occurrences": int(seq["occurrences"]), "device_us": per_step, "share_pct": float(seq["share_pct"])},
        {"view": "gpu_idle", "params": {"sequence_length": FUSION_LENGTH}, "panel": "sequences",
         "kernels": seq["sequence"].split(SEPARATOR)})


def _recompilations(model: TraceModel) -> Recommendation | None:
    """A frame that ran a compilation other than its first (``Torch-Compiled Region: 0/1``)
    was compiled again: a guard failed (a new shape, dtype, Python value...)."""
    per_frame = recompilations(model)
    if not len(per_frame):
        return None
    listed = ", ".join(f"frame {f} ({c + 1} compilations)" for f, c in per_frame.items())  # a few frames
    return Recommendation(
        "recompilations", "warning",
        f"torch.compile recompiled: {listed}. Each recompilation costs compile time and may hit the cache limit "
        "(then the frame runs eager). Run with TORCH_LOGS=recompiles to see which guard failed; mark changing "
        "sizes dynamic (torch._dynamo.mark_dynamic) or keep shapes and Python values fixed.",
        f"{len(per_frame)} frame(s) ran a compilation other than their first (Torch-Compiled Region: <frame>/1 or later)",
        None, {"frames": int(len(per_frame)), "max_compilations": int(per_frame.max() + 1)},
        {"view": "compiled", "params": {}, "panel": "regions"})
