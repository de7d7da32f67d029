"""FLOPs and model FLOPs utilisation: floating-point operations per operator, the rate they ran
at, and how far a step is from the GPU's peak.

Where an op's FLOPs come from, in order:

1. the ``flops`` arg the profiler writes with ``with_flops=True``;
2. else a formula over its ``Input Dims`` (``record_shapes=True``), the convention of
   ``torch.utils.flop_counter`` (a multiply-add is 2 FLOPs; bias additions not counted):

   - ``aten::mm`` A[M,K] @ B[K,N], ``aten::addmm`` (bias, A, B): 2·M·K·N
   - ``aten::bmm`` [b,M,K] @ [b,K,N], ``aten::baddbmm``: 2·b·M·K·N
   - ``aten::matmul`` A[...,M,K] @ B[...,K,N] (a 1-d operand is a row / column vector, batch
     dimensions broadcast): 2·prod(batch)·M·K·N
   - ``aten::linear`` x[...,K], W[N,K]: 2·prod(x[:-1])·K·N
   - convolutions ``aten::conv{1,2,3}d``, ``aten::convolution``, ``aten::_convolution``
     x[n,c_in,*s], W[c_out,c_in/g,*k] with stride, padding and dilation from
     ``Concrete Inputs``: 2·n·c_out·(c_in/g)·prod(k)·prod(o), o_i = floor((s_i + 2·p_i -
     d_i·(k_i - 1) - 1) / stride_i) + 1 (transposed convolutions are not counted)
   - scaled-dot-product attention (``aten::scaled_dot_product_attention`` and its
     ``_scaled_dot_product_{flash,efficient,cudnn}_attention`` kernels) q[...,L,E],
     k[...,S,E], v[...,S,Ev]: 2·prod(batch)·L·S·(E + Ev)

torch 2.13's Kineto export does not write the ``flops`` arg (checked on CPU), nor does torch
2.11's on an H100 (``samples/gpu_h100_eager_nccl``), though ``prof.key_averages()`` counts
them: (2) is what counts there, and it equals ``key_averages()``' count for ``aten::mm`` and
``aten::addmm`` (tests/test_gpu_reference.py). Element-wise ops (``aten::add``,
``aten::mul``), which ``key_averages()`` counts one FLOP per element, are not counted: MFU is
matrix work. An op's FLOPs count once, at the innermost counted op (``aten::linear`` > ``aten::addmm``:
addmm's). Backward ops are counted where they are one of the above (the ``aten::mm`` of a
linear's gradient); ``convolution_backward`` and fused kernels are not (record with
``with_flops=True`` for the profiler's own count where it has one).
"""

import json
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..schema import NULLABLE, declare
from ..trace.model import TraceModel
from .common import _cached, device_activity, name_mask, operator_tree, step_windows
from .distributed import element_bytes, input_bytes

_FORMULA = re.compile(r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|conv[123]d|convolution|_convolution|"
                      r"scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn)_attention)$")
_CONV = re.compile(r"^aten::(conv[123]d|convolution|_convolution)$")
_SDPA = re.compile(r"^aten::(scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn)_attention)$")
_DTYPES = {"float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16", "double": "fp64",
           "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
           "c10::Float8_e5m2fnuz": "fp8"}

# Peak dense TFLOP/s per GPU model and dtype, from the vendors' datasheets (dense: half of the
# "with sparsity" tensor-core figures). fp32 is the non-tensor-core FP32 rate: an fp32 matmul
# that TF32 ran may exceed it (NVIDIA's TF32 peaks are given as tf32 for reference).
# Matched by substring of deviceProperties' name, first match wins (PCIe before SXM).
#   H100: NVIDIA H100 Tensor Core GPU datasheet (SXM5 and PCIe columns)
#   H200: NVIDIA H200 Tensor Core GPU datasheet (SXM column)
#   A100: NVIDIA A100 Tensor Core GPU datasheet (SXM4 and PCIe share the peaks)
#   V100: NVIDIA Tesla V100 datasheet (SXM2 and PCIe columns)
#   MI300X, MI250X, MI250: AMD Instinct product pages (peak matrix rates)
PEAKS = (
    ("H100 PCIe", {"fp64": 26.0, "fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0}),
    ("H100", {"fp64": 34.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}),
    ("H200", {"fp64": 34.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}),
    ("A100", {"fp64": 9.7, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    ("V100-PCIE", {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0}),
    ("V100", {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}),
    ("MI300X", {"fp64": 163.4, "fp32": 163.4, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9}),
    ("MI250X", {"fp64": 95.7, "fp32": 95.7, "bf16": 383.0, "fp16": 383.0}),
    ("MI250", {"fp64": 90.5, "fp32": 90.5, "bf16": 362.1, "fp16": 362.1}),
)

# Peak memory bandwidth in GB/s (10^9 bytes/s), same datasheets as PEAKS; the roofline's
# slope. Matched like PEAKS (A100 80GB before the 40GB part).
BANDWIDTH = (
    ("H100 PCIe", 2000.0), ("H100", 3350.0), ("H200", 4800.0), ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIe", 1935.0), ("A100", 1555.0), ("V100", 900.0), ("MI300X", 5300.0), ("MI250", 3276.8),
)

OPERATORS = declare(
    "flops_operators", "one operator name with FLOPs: how many and at what rate they ran",
    ("name", "str", "", "operator name"),
    ("calls", "int64", "count", "calls"),
    ("flops", "float64", "flops", "FLOPs of the calls, their sub-operators included"),
    ("source", "str", "", "arg (the profiler's with_flops count), shapes (a formula over Input Dims), or both"),
    ("dtype", "str", "", "fp32, fp16, bf16, ... of the first tensor input of the counted op ('' unknown)"),
    ("host_total_us", "float64", "us", "summed host duration"),
    ("device_total_us", "float64", "us", "summed duration of device activity launched inside"),
    ("host_tflops_per_s", "float64", "tflop/s", "flops / host_total_us", NULLABLE),
    ("device_tflops_per_s", "float64", "tflop/s", "flops / device_total_us; null without device time", NULLABLE),
    ("peak_tflops_per_s", "float64", "tflop/s", "the GPU's dense peak for dtype (see PEAKS); null: peak unknown", NULLABLE),
    ("pct_of_peak", "float64", "pct", "device_tflops_per_s / peak_tflops_per_s; null: peak unknown", NULLABLE),
    ("bytes", "float64", "bytes", "tensor bytes the counted ops read and write at least once (shapes x dtypes); null unknown", NULLABLE),
    ("flop_per_byte", "float64", "flop/byte", "arithmetic intensity: flops / bytes, the roofline's x axis", NULLABLE),
    ("peak_bandwidth_gbps", "float64", "gb/s", "the GPU's peak memory bandwidth (see BANDWIDTH); null: unknown", NULLABLE),
)
STEPS = declare(
    "flops_steps", "one profiled step: its FLOPs and model FLOPs utilisation",
    ("step", "int64", "count", "the ProfilerStep#N number (0 for a trace without steps)"),
    ("flops", "float64", "flops", "FLOPs of the counted ops that started in the step"),
    ("step_us", "float64", "us", "the step window's length"),
    ("tflops_per_s", "float64", "tflop/s", "flops / step_us", NULLABLE),
    ("device_name", "str", "", "the GPU the peak is of, '' when the trace used none"),
    ("dtype", "str", "", "the dtype holding most of the step's FLOPs"),
    ("peak_tflops_per_s", "float64", "tflop/s", "dense peak of that GPU and dtype; null: peak unknown", NULLABLE),
    ("mfu_pct", "float64", "pct", "tflops_per_s / peak_tflops_per_s (model FLOPs utilisation); null: peak unknown", NULLABLE),
    ("uncounted_calls", "int64", "count", "calls in the step of ops with a formula but no count (shapes or arguments missing)"),
)


def peak_tflops(device_name, dtype):
    """Dense peak TFLOP/s of a GPU (deviceProperties' name) for a dtype ("fp32", "bf16", ...);
    NaN when the model or the dtype is not in `PEAKS` ("peak unknown")."""
    for marker, peaks in PEAKS:
        if marker.lower() in str(device_name).lower():
            return float(peaks.get(dtype, np.nan))
    return np.nan


def peak_bandwidth(device_name):
    """Peak memory bandwidth (GB/s) of a GPU from `BANDWIDTH`; NaN when unknown."""
    return next((float(gbps) for marker, gbps in BANDWIDTH if marker.lower() in str(device_name).lower()), np.nan)


def _prod(values):
    return float(math.prod(values)) if values else 1.0


def _conv(dims, concrete):
    """(FLOPs, output elements) of a convolution; NaNs when the arguments do not fit."""
    x, w = dims[0], dims[1]
    if len(x) < 3 or len(w) != len(x):
        return np.nan, np.nan
    spatial = len(x) - 2
    try:
        stride, padding, dilation = (json.loads(concrete[i]) for i in (3, 4, 5))
    except (ValueError, TypeError, IndexError):
        return np.nan, np.nan
    lists = [v if isinstance(v, list) else [v] * spatial for v in (stride, padding, dilation)]
    if any(len(v) != spatial for v in lists):
        return np.nan, np.nan
    out = [(x[2 + i] + 2 * lists[1][i] - lists[2][i] * (w[2 + i] - 1) - 1) // lists[0][i] + 1 for i in range(spatial)]
    return 2.0 * x[0] * _prod(w) * _prod(out), float(x[0] * w[0]) * _prod(out)


def _formula(name, dims, concrete):
    """(FLOPs, output elements) of one call (see the module docstring); NaNs when the op has
    no formula or the shapes do not fit it."""
    unknown = (np.nan, np.nan)
    if not isinstance(dims, list) or len(dims) < 2:
        return unknown
    # tensor inputs (scalars are recorded with an empty shape)
    tensors = [d for d in dims if isinstance(d, list) and d and all(isinstance(v, int) for v in d)]
    try:
        if name in ("aten::mm", "aten::addmm"):  # addmm(bias, a, b, beta, alpha)
            a, b = tensors[-2], tensors[-1]
            return (2.0 * a[0] * a[1] * b[1], float(a[0] * b[1])) if len(a) == 2 and len(b) == 2 else unknown
        if name in ("aten::bmm", "aten::baddbmm"):
            a, b = tensors[-2], tensors[-1]
            return (2.0 * a[0] * a[1] * a[2] * b[2], float(a[0] * a[1] * b[2])) if len(a) == 3 and len(b) == 3 \
                else unknown
        if name == "aten::matmul":
            a, b = dims[0], dims[1]
            if not a or not b:
                return unknown
            m, k = (1, a[0]) if len(a) == 1 else (a[-2], a[-1])
            n = 1 if len(b) == 1 else b[-1]
            batch = _prod(list(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))))
            return 2.0 * batch * m * k * n, batch * m * n
        if name == "aten::linear":
            x, w = dims[0], dims[1]
            return (2.0 * _prod(x[:-1]) * x[-1] * w[0], _prod(x[:-1]) * w[0]) if x and len(w) == 2 else unknown
        if _CONV.match(name):
            # convolution / _convolution take (input, weight, bias, stride, padding, dilation,
            # transposed, ...); conv{1,2,3}d have no transposed argument
            transposed = name in ("aten::convolution", "aten::_convolution") and len(concrete) > 6 and \
                str(concrete[6]) == "True"
            return unknown if transposed else _conv(dims, concrete)
        if _SDPA.match(name):
            q, k, v = tensors[0], tensors[1], tensors[2]
            return 2.0 * _prod(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1]), _prod(q[:-2]) * q[-2] * v[-1]
    except (IndexError, TypeError, ValueError):
        return unknown
    return unknown


def _parse(text, default):
    try:
        return json.loads(text) if text else default
    except ValueError:
        return None


def shape_flops(name, input_dims, concrete_inputs=""):
    """FLOPs of one call from its name, `Input Dims` and `Concrete Inputs` JSON texts (see the
    module docstring); NaN when the op has no formula or the shapes do not fit it."""
    return _formula(name, _parse(input_dims, None), _parse(concrete_inputs, []) or [])[0]


def shape_cost(name, input_dims, input_type, concrete_inputs=""):
    """(FLOPs, bytes) of one call: bytes are its tensor inputs (`Input Dims` x `Input type`)
    plus its output (elements from the formula, in the first input's dtype) -- what it reads
    and writes at least once, the denominator of arithmetic intensity; NaNs when unknown."""
    flops, out_elements = _formula(name, _parse(input_dims, None), _parse(concrete_inputs, []) or [])
    types = _parse(input_type, None)
    first = next((t for t in types if t not in ("", "Scalar", None)), "") if isinstance(types, list) else ""
    return flops, input_bytes(input_dims, input_type) + out_elements * element_bytes(first)


def op_flops(model):
    """Per op row: (flops counted at this op, float64, 0 when none; source code 0 none, 1 arg,
    2 shapes; dtype text; bytes it reads and writes per `shape_cost`, 0 when not counted, NaN
    when counted but unknown). An op counts only when no descendant counts (innermost wins)."""
    return _cached(model, "op_flops", lambda: _build_op_flops(model))


def _build_op_flops(model):
    ops = model.ops
    n = len(ops)
    arg = ops["flops"].to_numpy(dtype=np.float64)
    has_arg = np.isfinite(arg) & (arg > 0)
    keys = pd.DataFrame({"name": ops["name"].astype(str).to_numpy(), "dims": ops["input_dims"].astype(str).to_numpy(),
                         "types": ops["input_type"].astype(str).to_numpy(),
                         "concrete": ops["concrete_inputs"].astype(str).to_numpy()})
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(keys))
    per_key = np.array([shape_cost(*key) for key in uniques], dtype=np.float64).reshape(-1, 2)
    from_shapes = per_key[codes, 0] if n else np.zeros(0)
    moved = per_key[codes, 1] if n else np.zeros(0)
    flops = np.where(has_arg, arg, np.where(np.isfinite(from_shapes), from_shapes, 0.0))
    source = np.where(has_arg, 1, np.where(flops > 0, 2, 0))
    # innermost wins: an op with a counted descendant does not count itself
    counted = flops > 0
    parent = ops["parent"].to_numpy()
    covered = np.zeros(n, dtype=bool)
    cur = np.where(counted, parent, -1)
    while (cur >= 0).any():
        live = cur >= 0
        covered[cur[live]] = True
        cur = np.where(live, parent[np.where(live, cur, 0)], -1)
    flops = np.where(covered, 0.0, flops)
    source = np.where(covered, 0, source)
    moved = np.where(flops > 0, moved, 0.0)
    type_codes, type_uniques = pd.factorize(ops["input_type"].astype(str).to_numpy())
    first_dtype = np.array([_first_dtype(t) for t in type_uniques], dtype=object)
    dtype = first_dtype[type_codes] if n else np.zeros(0, dtype=object)
    return flops, source, dtype, moved


def _first_dtype(input_type):
    try:
        types = json.loads(input_type) if input_type else []
    except ValueError:
        return ""
    return next((_DTYPES[t] for t in types if t in _DTYPES), "") if isinstance(types, list) else ""


def _subtree_flops(model, flops):
    """Per op: the FLOPs counted at it and at its descendants (bottom-up, one step per level)."""
    ops = model.ops
    total = flops.copy()
    depth = ops["depth"].to_numpy()
    parent = ops["parent"].to_numpy()
    for level in range(int(depth.max()) if len(ops) else 0, 0, -1):
        rows = np.flatnonzero((depth == level) & (parent >= 0))
        np.add.at(total, parent[rows], total[rows])
    return total


def _gpu_name(model):
    """deviceProperties' name of the first GPU the trace used ("" when none)."""
    dev = device_activity(model)
    used = np.unique(dev["device"].to_numpy()[dev["device"].to_numpy() >= 0]) if len(dev) else []
    props = model.devices
    if not len(used) or not len(props) or "name" not in props:
        return ""
    ids = pd.to_numeric(props["id"], errors="coerce")
    match = props[ids == used[0]]
    return str(match["name"].iloc[0]) if len(match) else ""


def flops_operators(model: TraceModel) -> pd.DataFrame:
    """Operators with FLOPs, declared as `OPERATORS`, most FLOPs first; empty when no op has
    a count (the page then says to record shapes or FLOPs).

    Notes
    -----
    Rows are the operator view's (`common.operator_tree`'s is_operator rows), grouped by name;
    flops of a row is its subtree's, so ``aten::linear`` shows its ``aten::addmm``'s. The
    dtype and source are those of the counted ops below (the most frequent). Rates divide the
    FLOPs by the host or device total time (TFLOP/s = FLOPs / µs / 10^6); pct_of_peak
    compares the device rate with `peak_tflops` of the trace's GPU.
    """
    return _cached(model, "flops_operators", lambda: _build_operators(model))


def _build_operators(model):
    ops = model.ops
    flops, source, dtype, moved = op_flops(model)
    tree = operator_tree(model)
    total = _subtree_flops(model, flops)
    total_bytes = _subtree_flops(model, moved)  # NaN propagates: unknown when any part is
    keep = tree["is_operator"].to_numpy() & (total > 0)
    # the dtype / source of a row: of the innermost counted op under it (its own when counted)
    counted_rows = np.flatnonzero(flops > 0)
    parent = ops["parent"].to_numpy()
    label_dtype = np.full(len(ops), "", dtype=object)
    label_source = np.zeros(len(ops), dtype=np.int64)
    cur = counted_rows.copy()
    while len(cur):
        label_dtype[cur] = np.where(label_dtype[cur] == "", dtype[counted_rows], label_dtype[cur])
        label_source[cur] |= source[counted_rows]
        step = parent[cur] >= 0
        counted_rows, cur = counted_rows[step], parent[cur[step]]
    frame = pd.DataFrame({
        "name": ops["name"].astype(str).to_numpy()[keep], "flops": total[keep],
        "dtype": label_dtype[keep], "source_code": label_source[keep], "bytes": total_bytes[keep],
        "host_total_us": tree["host_total_us"].to_numpy()[keep], "device_total_us": tree["device_total_us"].to_numpy()[keep],
    })
    grouped = frame.groupby("name", sort=False).agg(
        calls=("flops", "size"), flops=("flops", "sum"), dtype=("dtype", lambda d: d.mode().iloc[0]),
        source_code=("source_code", lambda c: int(np.bitwise_or.reduce(c.to_numpy()))),
        bytes=("bytes", lambda b: b.sum(min_count=len(b)) if b.notna().all() else np.nan),
        host_total_us=("host_total_us", "sum"), device_total_us=("device_total_us", "sum")).reset_index()
    grouped["source"] = grouped["source_code"].map({1: "arg", 2: "shapes", 3: "arg+shapes"}).fillna("")
    grouped["host_tflops_per_s"] = grouped["flops"] / grouped["host_total_us"].where(grouped["host_total_us"] > 0) / 1e6
    grouped["device_tflops_per_s"] = grouped["flops"] / grouped["device_total_us"].where(grouped["device_total_us"] > 0) / 1e6
    gpu = _gpu_name(model)
    grouped["peak_tflops_per_s"] = [peak_tflops(gpu, d) if gpu else np.nan for d in grouped["dtype"]]  # per name
    grouped["pct_of_peak"] = 100.0 * grouped["device_tflops_per_s"] / grouped["peak_tflops_per_s"]
    grouped["flop_per_byte"] = grouped["flops"] / grouped["bytes"].where(grouped["bytes"] > 0)
    grouped["peak_bandwidth_gbps"] = peak_bandwidth(gpu) if gpu else np.nan
    return OPERATORS.frame(grouped.sort_values("flops", ascending=False, kind="stable"))


def flops_steps(model: TraceModel) -> pd.DataFrame:
    """FLOPs and model FLOPs utilisation per step, declared as `STEPS`.

    Notes
    -----
    A step's FLOPs are those counted at ops starting in its window (`common.step_windows`);
    MFU = FLOPs / step time / peak of the trace's first GPU for the dtype holding most of the
    step's FLOPs. Without a GPU, or a GPU or dtype missing from `PEAKS`, the peak and MFU are
    NaN: peak unknown, never a guessed number. uncounted_calls says how far the FLOPs
    understate the step: calls of ops that have a formula but could not be counted (traces
    before torch 2.x record no ``Concrete Inputs``, so their convolutions have no count).
    """
    return _cached(model, "flops_steps", lambda: _build_steps(model))


def _build_steps(model):
    ops = model.ops
    flops, _, dtype, _ = op_flops(model)
    windows = step_windows(model)
    start, end = windows["start_us"].to_numpy(), windows["end_us"].to_numpy()
    # ops with a formula that got no count, outermost only (conv2d > convolution > ...: one)
    candidate = name_mask(ops["name"], _FORMULA.match)
    subtree = _subtree_flops(model, flops)
    parent = ops["parent"].to_numpy()
    has_candidate_parent = np.zeros(len(ops), dtype=bool)
    with_parent = parent >= 0
    has_candidate_parent[with_parent] = candidate[parent[with_parent]]
    uncounted = np.flatnonzero(candidate & ~has_candidate_parent & (subtree == 0))
    u_ts = ops["ts"].to_numpy()[uncounted]
    u_index = np.searchsorted(start, u_ts, side="right") - 1
    u_inside = (u_index >= 0) & (u_ts < end[np.clip(u_index, 0, None)])
    uncounted_calls = np.bincount(u_index[u_inside], minlength=len(windows))[:len(windows)]
    counted = np.flatnonzero(flops > 0)
    ts = ops["ts"].to_numpy()[counted]
    index = np.searchsorted(start, ts, side="right") - 1
    inside = (index >= 0) & (ts < end[np.clip(index, 0, None)])
    per = pd.DataFrame({"step": index[inside], "dtype": dtype[counted][inside], "flops": flops[counted][inside]})
    step_flops = per.groupby("step")["flops"].sum().reindex(range(len(windows)), fill_value=0.0).to_numpy()
    by_dtype = per.groupby(["step", "dtype"])["flops"].sum().reset_index()
    top = by_dtype.sort_values("flops", ascending=False, kind="stable").drop_duplicates("step").set_index("step")
    step_dtype = top["dtype"].reindex(range(len(windows))).fillna("").to_numpy(dtype=object)
    gpu = _gpu_name(model)
    peak = np.array([peak_tflops(gpu, d) if gpu else np.nan for d in step_dtype], dtype=np.float64)  # per step
    step_us = end - start
    rate = step_flops / np.where(step_us > 0, step_us, np.nan) / 1e6
    return STEPS.frame({"step": windows["step"].to_numpy(), "flops": step_flops, "step_us": step_us,
                        "tflops_per_s": rate, "device_name": [gpu] * len(windows), "dtype": step_dtype,
                        "peak_tflops_per_s": peak, "mfu_pct": 100.0 * rate / peak,
                        "uncounted_calls": uncounted_calls.astype(np.int64)})


@dataclass
class FlopsView:
    """The FLOPs view's tables: `flops_operators` and `flops_steps`."""

    operators: pd.DataFrame
    steps: pd.DataFrame


def flops_view(model: TraceModel) -> FlopsView:
    return FlopsView(operators=flops_operators(model), steps=flops_steps(model))
