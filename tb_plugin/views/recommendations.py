"""Performance recommendations: structured items derived from the other views' numbers."""

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..trace.model import TraceModel
from .common import is_comm_kernel, is_tc_eligible_name, kernel_flags, name_mask, operator_tree, step_windows
from .compiled import has_regions, is_inductor_kernel_name, recompilations
from .cudagraphs import graph_launch_mask
from .gpu_idle import idle_time
from .launches import kernel_launches
from .sequences import SEPARATOR, kernel_sequences

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
    # What was tested, with the measured value and the threshold, in words.
    condition: str
    # An upper bound of the time following the advice could save over the profiled steps
    # (µs); None where the advice saves no step time it could be measured by (memory,
    # a symptom such as low utilisation, compile time).
    saving_us: float | None = None
    numbers: dict = field(default_factory=dict)
    # Where the page shows the events behind the numbers: {"view": ..., "params": {...},
    # "panel": ...} (page-URL parameters of that view, and the panel of it that shows them;
    # "kernels": the kernel names the text quotes, for the page to shorten); empty when no
    # view does.
    evidence: dict = field(default_factory=dict)


@dataclass
class RunFacts:
    """What the run already does and the step totals the rules share, computed once."""
    step_total_us: float
    dataloader_us: float
    # Step time when no device work ran and the host was not in the DataLoader or a
    # collective: runtime calls, other CPU work and the rest (the step breakdown's parts).
    host_other_us: float
    uses_cuda_graphs: bool
    uses_compile: bool


def recommendations(model: TraceModel, step_table: pd.DataFrame, gpus: pd.DataFrame) -> list[dict[str, Any]]:
    """Recommendations for one profile, the largest possible saving first.

    Parameters are the results of `overview.steps(model)` and `overview.gpu_summary(model)`.
    Returns a list of dicts {id, severity, text, condition, saving_us, numbers, evidence,
    docs}:
    `condition` says what was tested (measured value against its threshold); `saving_us` is
    an upper bound of the step time the advice could save (the time of the cause it
    removes), null where none can be measured; `numbers` holds the figures the text is
    based on (fractions in [0, 1], times in µs, sizes in bytes); `evidence` names the view
    (its URL parameters and panel) that shows the events behind them; `docs` the PyTorch
    documentation of the fix (`DOCS`).

    Items are ranked by `saving_us`, largest first; those without one follow, warnings
    before infos. Each rule is one function below and checks what the run already does
    (CUDA graphs, torch.compile, Tensor Cores) before advising it; collective kernels are
    never fusion candidates.
    """
    facts = _run_facts(model, step_table)
    items = [
        _input_pipeline(facts), _communication(step_table), *_low_utilization(gpus),
        _data_parallel(model, gpus), _gloo_on_gpus(model), _tensor_cores(model, gpus), *_memory(model),
        _launch_bound(model, facts), _host_bound(model, facts), _fusion(model), _recompilations(model),
    ]
    severity_rank = {"warning": 0, "info": 1}
    items = [r for r in items if r is not None]
    items.sort(key=lambda r: (r.saving_us is None, -(r.saving_us or 0.0), severity_rank[r.severity]))
    return [{**asdict(r), "docs": DOCS.get(r.id, "")} for r in items]


def _run_facts(model, step_table):
    totals = step_table.sum(numeric_only=True)
    return RunFacts(
        step_total_us=float(totals.get("total_us", 0.0)),
        dataloader_us=float(totals.get("dataloader_us", 0.0)),
        host_other_us=float(totals.get("runtime_us", 0.0) + totals.get("cpu_exec_us", 0.0) + totals.get("other_us", 0.0)),
        uses_cuda_graphs=bool(graph_launch_mask(model).any()),
        uses_compile=has_regions(model),
    )


def _loader_dominates(facts):
    """Whether the DataLoader takes more of the time the device waits on the host than all
    other host work together: then the host-bound advice is the input pipeline's."""
    return facts.dataloader_us > 0 and facts.dataloader_us >= facts.host_other_us


def _input_pipeline(facts):
    if facts.step_total_us <= 0:
        return None
    share = facts.dataloader_us / facts.step_total_us
    if share <= DATALOADER_SHARE:
        return None
    dominant = (f" It is the largest part of the time the GPU waits on the host ({facts.dataloader_us / 1e3:.1f} ms "
                f"against {facts.host_other_us / 1e3:.1f} ms of other CPU work)." if _loader_dominates(facts) else "")
    return Recommendation(
        "input_pipeline_bound", "warning",
        f"{share:.1%} of the step time is spent waiting for the DataLoader.{dominant} Try more DataLoader "
        "workers (num_workers), pin_memory=True, persistent_workers=True, or a faster input pipeline.",
        f"DataLoader time with no device work running / step time = {share:.1%} > {DATALOADER_SHARE:.0%}",
        facts.dataloader_us,
        {"dataloader_share": share, "dataloader_us": facts.dataloader_us, "host_other_us": facts.host_other_us})


def _communication(step_table):
    total = float(step_table["total_us"].sum())
    exposed = float(step_table["communication_us"].sum())
    if total <= 0 or exposed / total <= COMMUNICATION_SHARE:
        return None
    return Recommendation(
        "communication_heavy", "warning",
        f"{exposed / total:.1%} of the step time is communication not hidden behind computation. Consider "
        "gradient accumulation (fewer all-reduces), larger DDP buckets, or overlapping communication.",
        f"communication with no computation running / step time = {exposed / total:.1%} > {COMMUNICATION_SHARE:.0%}",
        exposed, {"communication_share": exposed / total, "communication_us": exposed})


def _low_utilization(gpus):
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


def _data_parallel(model, gpus):
    dp = name_mask(model.ops["name"], lambda n: n.startswith("DataParallel.forward"))
    if not dp.any() or len(gpus) <= 1:
        return None
    return Recommendation(
        "data_parallel", "warning",
        "DataParallel is used on several GPUs: DistributedDataParallel is faster (one process per GPU, no "
        "per-step model replication).",
        f"DataParallel.forward ranges present and {len(gpus)} GPUs > 1", None, {"gpus": int(len(gpus))})


def _gloo_on_gpus(model):
    backend = str(model.distributed.get("backend", "")).lower()
    if backend != "gloo" or not len(model.kernels):
        return None
    return Recommendation(
        "ddp_without_nccl", "warning",
        "Distributed training on GPUs uses the gloo backend: NCCL is much faster between GPUs.",
        f"distributed backend = gloo and {len(model.kernels)} GPU kernels ran", None, {"backend": backend})


def _tensor_cores(model, gpus):
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
    return Recommendation(
        "tensor_cores_unused", "warning",
        f"{share:.1%} of kernel time is in operators that could use Tensor Cores "
        "(matmul, convolution), but no kernel did. Enable mixed precision (torch.autocast) or TF32.",
        f"no Tensor Core kernel ran, and matmul/convolution kernel time / all kernel time = {share:.1%} "
        f"> {TC_ELIGIBLE_DEVICE_SHARE:.0%} on a GPU of compute capability >= {TENSOR_CORE_MIN_CAPABILITY}",
        eligible_time, {"eligible_share": share, "eligible_us": eligible_time})


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
                f"peak allocated / device memory = {peak / cap:.0%} > {MEMORY_NEAR_CAPACITY:.0%}", None,
                {"device": int(device), "peak_bytes": float(peak), "capacity_bytes": float(cap)}))
    return out


def _launch_overhead_advice(facts, operators):
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


def _launch_bound(model, facts):
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
    n_steps = max(len(step_windows(model)), 1)
    tiny = float((kernels["device_us"] < TINY_KERNEL_US).mean()) if len(kernels) else 0.0
    per_step = len(kernels) / n_steps
    if tiny >= TINY_KERNEL_SHARE and per_step >= TINY_KERNELS_PER_STEP:
        tests.append(f"kernels under {TINY_KERNEL_US:.0f} µs = {tiny:.0%} >= {TINY_KERNEL_SHARE:.0%} of "
                     f"{per_step:.0f} per step >= {TINY_KERNELS_PER_STEP}")
    if not tests:
        return None
    device_us, runtime_us = float(bound["device_us"].sum()), float(bound["runtime_us"].sum())
    top = bound["operator"][bound["operator"] != ""].value_counts().head(3)
    text = (f"Launch-bound: {len(bound)} of {len(kernels)} kernels ({len(bound) / max(len(kernels), 1):.0%}) ran for less "
            f"time on the GPU than their launch call took on the CPU ({device_us / 1e3:.1f} ms of GPU time against "
            f"{runtime_us / 1e3:.1f} ms of launch calls); {tiny:.0%} of the {per_step:.0f} kernels per step run under "
            f"{TINY_KERNEL_US:.0f} µs. " + _launch_overhead_advice(facts, ", ".join(map(str, top.index))))
    return Recommendation(
        "launch_bound", "warning", text, "; ".join(tests), runtime_us - device_us,
        {"launch_bound": int(len(bound)), "kernels": int(len(kernels)), "launch_bound_share": len(bound) / max(len(kernels), 1),
         "launch_bound_device_us": device_us, "launch_bound_runtime_us": runtime_us,
         "tiny_kernel_share": tiny, "kernels_per_step": per_step,
         "uses_cuda_graphs": facts.uses_cuda_graphs, "uses_compile": facts.uses_compile},
        {"view": "gpu_idle", "params": {"launch_flag": "launch_bound"}, "panel": "launches"})


def _host_bound(model, facts):
    """Host-bound, from HTA's idle time breakdown (views/gpu_idle.py). When the DataLoader
    is most of the host time the GPU waits through, the input pipeline item says so and this
    one is not given: "reduce CPU work" would send the user to the wrong place."""
    idle = idle_time(model)
    span = float((idle["end_us"] - idle["start_us"]).sum())
    idle_us = float(idle["idle_us"].sum())
    host_wait = float(idle["idle_host_wait_us"].sum())
    if span <= 0 or idle_us / span < IDLE_SHARE or host_wait / idle_us < HOST_WAIT_SHARE or _loader_dominates(facts):
        return None
    if facts.uses_compile and facts.uses_cuda_graphs:
        remedy = "Reduce the eager CPU work between launches (the code outside the compiled, graph-replayed regions)"
    else:
        remedy = "Reduce CPU work between launches (torch.compile, CUDA graphs, fewer Python-side operations)"
    return Recommendation(
        "host_bound", "warning",
        f"Host-bound: {host_wait / idle_us:.0%} of the GPU streams' idle time is host wait ({host_wait / 1e3:.1f} ms of "
        f"{idle_us / 1e3:.1f} ms idle): the GPU ran out of work because the CPU had not launched the next kernel yet. "
        f"{remedy}.",
        f"stream idle time / stream span = {idle_us / span:.0%} >= {IDLE_SHARE:.0%}, host wait / idle time = "
        f"{host_wait / idle_us:.0%} >= {HOST_WAIT_SHARE:.0%}, and the DataLoader ({facts.dataloader_us / 1e3:.1f} ms) is "
        f"less than the other host time ({facts.host_other_us / 1e3:.1f} ms)",
        facts.host_other_us,
        {"host_wait_share": host_wait / idle_us, "idle_host_wait_us": host_wait, "idle_us": idle_us,
         "idle_share": idle_us / span, "host_other_us": facts.host_other_us},
        {"view": "gpu_idle", "params": {}, "panel": "idle"})


def _fusion(model):
    """The most time-consuming repeating kernel sequence (among the `kernel_sequences`
    default top 50) that fusion could help: not one with a collective kernel (communication
    is not fused into computation) and not one of kernels Inductor generated (torch.compile
    already fused them)."""
    sequences = kernel_sequences(model, FUSION_LENGTH)
    names = sequences["sequence"].str.split(SEPARATOR, regex=False)
    has_comm = names.map(lambda seq: any(is_comm_kernel(n) for n in seq))
    compiled_already = names.map(lambda seq: all(is_inductor_kernel_name(n) for n in seq))
    candidates = sequences[~has_comm & ~compiled_already]
    if not len(candidates) or candidates["share_pct"].iloc[0] < FUSION_SHARE_PCT:
        return None
    seq = candidates.iloc[0]
    launched_by = f" (launched by {seq['operators']})" if seq["operators"] else ""
    # Fused into one kernel as long as the sequence's average kernel, the rest is saved.
    saving = float(seq["device_us"]) * (FUSION_LENGTH - 1) / FUSION_LENGTH
    return Recommendation(
        "fusion_candidate", "info",
        f"Fusion candidate: the kernel sequence {seq['sequence']}{launched_by} repeats {seq['occurrences']} times on "
        f"stream {seq['stream']}, {seq['device_us'] / 1e3:.1f} ms ({seq['share_pct']:.0f}% of kernel time, "
        f"{seq['device_per_step_us'] / 1e3:.2f} ms per step). Fusing it (torch.compile, a fused kernel) saves launches "
        "and memory traffic.",
        f"the largest repeating sequence of {FUSION_LENGTH} kernels without collective or Inductor-generated kernels "
        f"takes {seq['share_pct']:.0f}% >= {FUSION_SHARE_PCT:.0f}% of kernel time",
        saving,
        {"occurrences": int(seq["occurrences"]), "device_us": float(seq["device_us"]),
         "share_pct": float(seq["share_pct"]), "device_per_step_us": float(seq["device_per_step_us"])},
        {"view": "gpu_idle", "params": {"sequence_length": FUSION_LENGTH}, "panel": "sequences",
         "kernels": seq["sequence"].split(SEPARATOR)})


def _recompilations(model):
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
