"""FLOPs and model FLOPs utilisation: floating-point operations per operator, the rate they ran
at, and how far a step is from the GPU's peak.

Where an op's FLOPs come from, in order:

1. the ``flops`` arg the profiler writes with ``with_flops=True``;
2. else a formula over its ``Input Dims`` (``record_shapes=True``), the convention of
   ``torch.utils.flop_counter`` (a multiply-add is 2 FLOPs; bias additions not counted). The
   operands are taken by their position in the op's schema, so the ``out=`` forms that
   Inductor calls (``aten::addmm`` with six inputs, the output last; ``aten::mm`` with three)
   count the same as the plain ones:

   - ``aten::mm`` A[M,K] @ B[K,N], ``aten::addmm`` (bias, A, B), ``aten::_scaled_mm``: 2·M·K·N
   - ``aten::bmm`` [b,M,K] @ [b,K,N], ``aten::baddbmm``: 2·b·M·K·N
   - ``aten::matmul`` A[...,M,K] @ B[...,K,N] (a 1-d operand is a row / column vector, batch
     dimensions broadcast): 2·prod(batch)·M·K·N
   - ``aten::linear`` x[...,K], W[N,K]: 2·prod(x[:-1])·K·N
   - convolutions (``aten::conv{1,2,3}d``, ``convolution``, ``_convolution``,
     ``cudnn_convolution``, ``mkldnn_convolution``, ``miopen_convolution``) x[n,c_in,*s],
     W[c_out,c_in/g,*k]: 2·n·c_out·(c_in/g)·prod(k)·prod(o), the output size o_i =
     floor((s_i + 2·p_i - d_i·(k_i - 1) - 1) / stride_i) + 1 from stride, padding and
     dilation in ``Concrete Inputs`` (torch 2.x); traces before torch 2.0 record none, and
     there o is the shape of the output's gradient, the input of the convolution's autograd
     node (``CudnnConvolutionBackward``) of the same ``Sequence number`` (a forward-only
     trace leaves them uncounted). Transposed convolutions are not counted.
   - their backward (``aten::convolution_backward``, ``aten::cudnn_convolution_backward``):
     the forward's count for each of the input's and the weight's gradients it computes
     (``output_mask``; before torch 2.0 its ``_backward_input`` / ``_backward_weight``
     children). For a grouped convolution FlopCounterMode counts the weight's gradient g
     times over (it leaves the groups out); ours is the forward's count.
   - scaled-dot-product attention (``aten::scaled_dot_product_attention`` and its
     ``_scaled_dot_product_{flash,efficient,cudnn}_attention`` kernels) q[...,L,E],
     k[...,S,E], v[...,S,Ev]: 2·prod(batch)·L·S·(E + Ev), **halved when** ``is_causal``
     (only the lower triangle of q·kᵀ is work; TraceLens's convention, where torch's
     FlopCounterMode counts the full product and ``key_averages()`` none); their backward
     (``_scaled_dot_product_{flash,efficient,cudnn}_attention_backward``,
     ``..._flash_attention_for_cpu_backward``): 2·prod(batch)·L·S·(3E + 2Ev), FlopCounterMode's
     five products, halved the same way. The ops an
     attention op runs inside (the matmuls of its math fallback on CPU) are not counted
     apart: attention counts by this one convention however it ran.

torch 2.13's Kineto export does not write the ``flops`` arg (checked on CPU), nor does torch
2.11's on an H100 (``samples/gpu_h100_eager_nccl``), though ``prof.key_averages()`` counts
them: (2) is what counts there, and it equals ``key_averages()``' count for ``aten::mm`` and
``aten::addmm`` (tests/test_gpu_reference.py). Element-wise ops (``aten::add``,
``aten::mul``), which ``key_averages()`` counts one FLOP per element, are not counted: MFU is
matrix work. An op's FLOPs count once, at the innermost counted op (``aten::linear`` > ``aten::addmm``:
addmm's). Backward ops are counted where they are one of the above (the ``aten::mm`` of a
linear's gradient, ``convolution_backward``, attention's backward); fused kernels are not
(record with ``with_flops=True`` for the profiler's own count where it has one).

MFU is only as good as the share of the step's work the counted ops did: each step says how
much of its compute-kernel time they launched (``coverage_pct``), and its MFU is withheld
below `MFU_MIN_COVERAGE_PCT`.
"""

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import NULLABLE, declare, documented, route
from ..trace.model import TraceModel
from ..trace.linking import ancestor_where
from .collectives import element_bytes, input_bytes
from .cudagraphs import graph_launch_mask
from .common import cached, device_activity, kernel_flags, name_mask, operator_tree, step_windows, texts

# The operands of each op with a formula, by position in its schema (`Input Dims` lists every
# argument in schema order, an `out=` tensor last: Inductor calls `aten::addmm` with six, the
# output last, and `aten::mm` with three). Matrix products: (a, b) of a[..., M, K] @ b[..., K, N].
_MATRIX_OPERANDS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1), "aten::baddbmm": (1, 2),
                    "aten::_scaled_mm": (0, 1), "aten::matmul": (0, 1), "aten::linear": (0, 1)}
# Convolutions (input 0, weight 1): where stride, padding, dilation and `transposed` are among
# the arguments (None: the op has no transposed argument).
_CONV_ARGS = {"aten::conv1d": (3, 4, 5, None), "aten::conv2d": (3, 4, 5, None), "aten::conv3d": (3, 4, 5, None),
              "aten::convolution": (3, 4, 5, 6), "aten::_convolution": (3, 4, 5, 6),
              "aten::cudnn_convolution": (3, 2, 4, None), "aten::mkldnn_convolution": (4, 3, 5, None),
              "aten::miopen_convolution": (4, 3, 5, None)}
# Convolution backward: (grad_output, input, weight, transposed, output_mask) positions;
# cudnn_convolution_backward (before torch 2.0) records no output_mask: which gradients it
# computed is read from its _backward_input / _backward_weight children (see `_conv_hints`).
_CONV_BACKWARD_ARGS = {"aten::convolution_backward": (0, 1, 2, 7, 10),
                       "aten::cudnn_convolution_backward": (1, 0, 2, None, None)}
# Attention: q, k, v are arguments 0-2; where is_causal is, by the number of arguments recorded
# (the flash op's `quantized` overload has three more before it).
_SDPA_CAUSAL = {"aten::scaled_dot_product_attention": {8: 5, 7: 5},
                "aten::_scaled_dot_product_flash_attention": {7: 4, 10: 7},
                "aten::_scaled_dot_product_flash_attention_for_cpu": {7: 4},
                "aten::_scaled_dot_product_efficient_attention": {8: 6},
                "aten::_scaled_dot_product_cudnn_attention": {9: 6}}
# where an `out=` tensor is when a matrix product records one (one past its last argument)
_OUT_POSITION = {"aten::mm": 2, "aten::addmm": 5, "aten::bmm": 2, "aten::baddbmm": 5, "aten::matmul": 2,
                 "aten::_scaled_mm": 8, "aten::linear": 3}
# the operands' rank where the op takes no other
_MATRIX_RANK = {"aten::mm": 2, "aten::addmm": 2, "aten::_scaled_mm": 2, "aten::bmm": 3, "aten::baddbmm": 3}
# Attention's backward: grad_out is argument 0, q, k, v 1-3; where is_causal is.
_SDPA_BACKWARD_CAUSAL = {"aten::_scaled_dot_product_flash_attention_backward": {15: 11},
                         "aten::_scaled_dot_product_efficient_attention_backward": {13: 11},
                         "aten::_scaled_dot_product_cudnn_attention_backward": {16: 14},
                         "aten::_scaled_dot_product_flash_attention_for_cpu_backward": {10: 7}}
_ATTENTION = frozenset((*_SDPA_CAUSAL, *_SDPA_BACKWARD_CAUSAL))
_FORMULA_NAMES = frozenset((*_MATRIX_OPERANDS, *_CONV_ARGS, *_CONV_BACKWARD_ARGS, *_ATTENTION))
# autograd's node of a convolution (CudnnConvolutionBackward, ConvolutionBackward0, ...):
# its one input is the gradient of the forward's output, so it has the output's shape
_CONV_GRAD_NODE = re.compile(r"^\w*Convolution\w*Backward\d*$")
_CONV_GRAD_PART = re.compile(r"^aten::cudnn_convolution_backward_(input|weight)$")
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
    ("device_us", "float64", "us", "summed duration of the compute kernels (not communication) that started in the step"),
    ("counted_device_us", "float64", "us", "the part of device_us launched by the ops whose FLOPs are counted"),
    ("coverage_pct", "float64", "pct", "counted_device_us / device_us: how much of the step's device work the FLOPs describe; null without kernels", NULLABLE),
    ("mfu_withheld", "str", "", "why mfu_pct is null although the FLOPs and the peak are known ('' when it is not withheld)"),
)
# Below this share of the step's compute-kernel time launched by counted ops, the step's MFU
# describes a small part of its work and is withheld (the 2021 ResNet-50 with only its 4
# matmuls counted: 0.2% of its kernel time, MFU 0.01%; 68% with its convolutions). Not
# higher: an eager step whose unfused optimizer and element-wise kernels take half the time
# (the H100 eager sample: 49% counted) is still described by its matrix work.
MFU_MIN_COVERAGE_PCT = 25.0


def peak_tflops(device_name: str, dtype: str) -> float:
    """Dense peak TFLOP/s of a GPU (deviceProperties' name) for a dtype ("fp32", "bf16", ...);
    NaN when the model or the dtype is not in `PEAKS` ("peak unknown")."""
    for marker, peaks in PEAKS:
        if marker.lower() in str(device_name).lower():
            return float(peaks.get(dtype, np.nan))
    return np.nan


def peak_bandwidth(device_name: str) -> float:
    """Peak memory bandwidth (GB/s) of a GPU from `BANDWIDTH`; NaN when unknown."""
    return next((float(gbps) for marker, gbps in BANDWIDTH if marker.lower() in str(device_name).lower()), np.nan)


def _prod(values: Sequence[float]) -> float:
    return float(math.prod(values)) if values else 1.0


def _int_list(value: Any, spatial: int) -> list[int] | None:
    """A stride / padding / dilation argument as `spatial` ints (a single int repeats); None
    when it is not one."""
    value = json.loads(value) if isinstance(value, str) else value
    value = value if isinstance(value, list) else [value] * spatial
    return value if len(value) == spatial and all(isinstance(v, int) for v in value) else None


def _conv_output(name: str, x: list[int], w: list[int], concrete: list[Any], output: Any) -> list[int] | None:
    """Spatial sizes of a forward convolution's output: from its stride, padding and dilation
    (`Concrete Inputs`, torch 2.x), else from `output` (the shape its autograd node gives the
    output's gradient, see `_conv_hints`); None when neither is at hand."""
    spatial = len(x) - 2
    stride_at, padding_at, dilation_at, _ = _CONV_ARGS[name]
    try:
        stride, padding, dilation = (_int_list(concrete[i], spatial) for i in (stride_at, padding_at, dilation_at))
    except (ValueError, TypeError, IndexError):
        stride = padding = dilation = None
    if stride and padding and dilation:
        return [(x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(spatial)]
    if isinstance(output, list) and len(output) == len(x) and output[0] == x[0] and output[1] == w[0]:
        return output[2:]
    return None


def _conv_forward(name: str, dims: list[Any], concrete: list[Any], output: Any) -> tuple[float, float]:
    """(FLOPs, output elements) of a forward convolution: 2·n·c_out·(c_in/g)·prod(k)·prod(o)."""
    x, w = dims[0], dims[1]
    transposed_at = _CONV_ARGS[name][3]
    if transposed_at is not None and len(concrete) > transposed_at and str(concrete[transposed_at]) == "True":
        return np.nan, np.nan  # transposed convolutions are not counted
    if len(x) < 3 or len(w) != len(x):
        return np.nan, np.nan
    out = _conv_output(name, x, w, concrete, output)
    if out is None:
        return np.nan, np.nan
    return 2.0 * x[0] * _prod(w) * _prod(out), float(x[0] * w[0]) * _prod(out)


def _conv_backward(name: str, dims: list[Any], concrete: list[Any], mask: Any) -> tuple[float, float]:
    """(FLOPs, gradient elements written) of a convolution's backward: each of the input's and
    the weight's gradients costs what the forward did (`mask`, from the children when the op
    records no output_mask)."""
    grad_at, x_at, w_at, transposed_at, mask_at = _CONV_BACKWARD_ARGS[name]
    grad, x, w = dims[grad_at], dims[x_at], dims[w_at]
    if transposed_at is not None and len(concrete) > transposed_at and str(concrete[transposed_at]) == "True":
        return np.nan, np.nan
    if mask_at is not None and len(concrete) > mask_at and concrete[mask_at]:
        # written as a Python list: "[True, True, False]"
        mask = json.loads(concrete[mask_at].replace("True", "true").replace("False", "false")) \
            if isinstance(concrete[mask_at], str) else concrete[mask_at]
    if not isinstance(mask, list) or len(mask) < 2 or len(x) < 3 or not (len(x) == len(w) == len(grad)):
        return np.nan, np.nan
    forward = 2.0 * x[0] * _prod(w) * _prod(grad[2:])
    grads = int(bool(mask[0])) + int(bool(mask[1]))
    return (forward * grads, float(bool(mask[0])) * _prod(x) + float(bool(mask[1])) * _prod(w)) if grads \
        else (np.nan, np.nan)


def _sdpa(name: str, dims: list[Any], concrete: list[Any]) -> tuple[float, float]:
    """(FLOPs, output elements) of attention q[...,L,E], k[...,S,E], v[...,S,Ev]: the two
    products, 2·prod(batch)·L·S·(E + Ev); its backward the five products of
    `torch.utils.flop_counter.sdpa_backward_flop_count`, 2·prod(batch)·L·S·(3E + 2Ev) (its
    output: the gradients of q, k and v). Halved when is_causal (only the lower triangle of
    q·kᵀ is work: TraceLens's convention; torch's FlopCounterMode counts the full product)."""
    backward = name in _SDPA_BACKWARD_CAUSAL
    q, k, v = dims[1:4] if backward else dims[0:3]
    causal_at = (_SDPA_BACKWARD_CAUSAL if backward else _SDPA_CAUSAL)[name].get(len(dims))
    causal = causal_at is not None and len(concrete) > causal_at and str(concrete[causal_at]) == "True"
    batch = _prod(q[:-2])
    if backward:
        full, written = 2.0 * batch * q[-2] * k[-2] * (3 * q[-1] + 2 * v[-1]), _prod(q) + _prod(k) + _prod(v)
    else:
        full, written = 2.0 * batch * q[-2] * k[-2] * (q[-1] + v[-1]), batch * q[-2] * v[-1]
    return full / 2 if causal else full, written


def _matrix(name: str, dims: list[Any]) -> tuple[float, float]:
    """(FLOPs, output elements) of a matrix product a[..., M, K] @ b[..., K, N] (a 1-d a is a
    row, a 1-d b a column; batch dimensions broadcast): 2·prod(batch)·M·K·N."""
    first, second = _MATRIX_OPERANDS[name]
    a, b = dims[first], dims[second]
    if name == "aten::linear":  # x[..., K] @ W[N, K]^T
        return (2.0 * _prod(a[:-1]) * a[-1] * b[0], _prod(a[:-1]) * b[0]) if a and len(b) == 2 else (np.nan, np.nan)
    rank = _MATRIX_RANK.get(name)
    if not a or not b or (rank and not len(a) == len(b) == rank):
        return np.nan, np.nan
    m, k = (1, a[0]) if len(a) == 1 else (a[-2], a[-1])
    n = 1 if len(b) == 1 else b[-1]
    if (b[0] if len(b) == 1 else b[-2]) != k:
        return np.nan, np.nan
    batch = _prod(list(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))))
    return 2.0 * batch * m * k * n, batch * m * n


def _formula(name: str, dims: Any, concrete: list[Any], related: Any = None) -> tuple[float, float]:
    """(FLOPs, output elements) of one call (see the module docstring); NaNs when the op has
    no formula or the shapes do not fit it. `related` is what other events say about the call:
    a forward convolution's output shape, an old convolution backward's gradient mask."""
    if name not in _FORMULA_NAMES or not isinstance(dims, list) or len(dims) < 2:
        return np.nan, np.nan
    try:
        if name in _MATRIX_OPERANDS:
            return _matrix(name, dims)
        if name in _CONV_ARGS:
            return _conv_forward(name, dims, concrete, related)
        if name in _CONV_BACKWARD_ARGS:
            return _conv_backward(name, dims, concrete, related)
        return _sdpa(name, dims, concrete)
    except (IndexError, TypeError, ValueError):
        return np.nan, np.nan


def _parse(text: str, default: Any) -> Any:
    try:
        return json.loads(text) if text else default
    except ValueError:
        return None


def shape_flops(name: str, input_dims: str, concrete_inputs: str = "", related: str = "") -> float:
    """FLOPs of one call from its name, `Input Dims` and `Concrete Inputs` JSON texts (and
    `related`, see `_formula`, as JSON); NaN when the op has no formula or the shapes do not
    fit it."""
    return _formula(name, _parse(input_dims, None), _parse(concrete_inputs, []) or [], _parse(related, None))[0]


def shape_cost(name: str, input_dims: str, input_type: str, concrete_inputs: str = "", related: str = "") \
        -> tuple[float, float]:
    """(FLOPs, bytes) of one call: bytes are its tensor inputs (`Input Dims` x `Input type`)
    plus its output (elements from the formula, in the first input's dtype) -- what it reads
    and writes at least once, the denominator of arithmetic intensity; NaNs when unknown. An
    `out=` tensor among the inputs is the output: it is not counted twice."""
    dims = _parse(input_dims, None)
    flops, out_elements = _formula(name, dims, _parse(concrete_inputs, []) or [], _parse(related, None))
    types = _parse(input_type, None)
    first = next((t for t in types if t not in ("", "Scalar", None)), "") if isinstance(types, list) else ""
    read = input_bytes(input_dims, input_type)
    if isinstance(dims, list) and isinstance(types, list) and len(dims) == len(types) == _OUT_POSITION.get(name, -1) + 1:
        read -= _prod(dims[-1]) * element_bytes(types[-1])
    return flops, read + out_elements * element_bytes(first)


def _first_shape(input_dims: str) -> str:
    """JSON text of the first shape of an `Input Dims` text ("" when there is none)."""
    dims = _parse(input_dims, None)
    return json.dumps(dims[0]) if isinstance(dims, list) and dims and isinstance(dims[0], list) else ""


def _conv_hints(model: TraceModel) -> npt.NDArray[np.object_]:
    """Per op row, JSON text of what other events say about a convolution ("" otherwise):
    a forward convolution's output shape, from the autograd node of the same sequence number
    (its input is the output's gradient; a sequence number that more than one such node has is
    left out), and for `cudnn_convolution_backward` (before torch 2.0, no output_mask recorded)
    which gradients its children computed, as [input, weight]."""
    ops = model.ops
    n = len(ops)
    hints = np.full(n, "", dtype=object)
    if not n:
        return hints
    names = texts(ops["name"])
    seq = ops["sequence_number"].to_numpy()
    node = name_mask(ops["name"], _CONV_GRAD_NODE.match) & (seq >= 0)
    grad_nodes = pd.DataFrame({"seq": seq[node], "dims": texts(ops["input_dims"], node)})
    grads = grad_nodes.drop_duplicates("seq", keep=False).set_index("seq")["dims"]
    forward = np.isin(names, list(_CONV_ARGS)) & (seq >= 0)
    codes, shape_texts = pd.factorize(pd.Series(seq[forward]).map(grads).fillna(""))
    first = np.array([_first_shape(t) for t in shape_texts], dtype=object)  # per distinct shape text
    hints[np.flatnonzero(forward)] = first[codes] if len(codes) else first[:0]
    parts = name_mask(ops["name"], _CONV_GRAD_PART.match)
    parent = ops["parent"].to_numpy()
    has_input = np.zeros(n, dtype=bool)
    has_weight = np.zeros(n, dtype=bool)
    part_rows = np.flatnonzero(parts & (parent >= 0))
    is_input = np.char.endswith(names[part_rows].astype(str), "_input")
    has_input[parent[part_rows[is_input]]] = True
    has_weight[parent[part_rows[~is_input]]] = True
    old_backward = (names == "aten::cudnn_convolution_backward") & (has_input | has_weight)
    hints[old_backward] = np.where(has_input[old_backward], "[true, ", "[false, ") + \
        np.where(has_weight[old_backward], "true]", "false]")
    return hints


def op_flops(model: TraceModel) \
        -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.object_], npt.NDArray[np.float64]]:
    """Per op row: (flops counted at this op, float64, 0 when none; source code 0 none, 1 arg,
    2 shapes; dtype text; bytes it reads and writes per `shape_cost`, 0 when not counted, NaN
    when counted but unknown). An op counts only when no descendant counts (innermost wins)."""
    return cached(model, "op_flops", lambda: _build_op_flops(model))


def _build_op_flops(model: TraceModel) \
        -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.object_], npt.NDArray[np.float64]]:
    ops = model.ops
    n = len(ops)
    arg = ops["flops"].to_numpy(dtype=np.float64)
    has_arg = np.isfinite(arg) & (arg > 0)
    # One cost per distinct (name, shapes, types, concrete inputs, related shapes): the ops
    # grouped by their text columns' codes, the texts read only at each group's first op
    related = _conv_hints(model)
    text_columns = ("name", "input_dims", "input_type", "concrete_inputs")
    codes, first = _distinct_rows([ops[c].cat.codes.to_numpy() for c in text_columns] + [pd.factorize(related)[0]])
    keys = zip(*(texts(ops[c], first) for c in text_columns), related[first])
    per_key = np.array([shape_cost(*key) for key in keys], dtype=np.float64).reshape(-1, 2)
    from_shapes = per_key[codes, 0] if n else np.zeros(0)
    moved = per_key[codes, 1] if n else np.zeros(0)
    flops = np.where(has_arg, arg, np.where(np.isfinite(from_shapes), from_shapes, 0.0))
    # attention counts as attention (one convention, causal halved) however it ran: the
    # matmuls of its math fallback (CPU) are its implementation, not counted apart
    parent = ops["parent"].to_numpy()
    attention = name_mask(ops["name"], lambda name: name in _ATTENTION)
    nearest = ancestor_where(attention, parent, ops["depth"].to_numpy()) if n else np.zeros(0, dtype=np.int64)
    inside_attention = ~attention & (parent >= 0) & (nearest[np.clip(parent, 0, None)] >= 0) if n else attention
    flops = np.where(inside_attention, 0.0, flops)
    source = np.where(flops > 0, np.where(has_arg, 1, 2), 0)
    # innermost wins: an op with a counted descendant does not count itself
    counted = flops > 0
    covered = np.zeros(n, dtype=bool)
    cur = np.where(counted, parent, -1)
    while (cur >= 0).any():
        live = cur >= 0
        covered[cur[live]] = True
        cur = np.where(live, parent[np.where(live, cur, 0)], -1)
    flops = np.where(covered, 0.0, flops)
    source = np.where(covered, 0, source)
    moved = np.where(flops > 0, moved, 0.0)
    type_codes, type_uniques = pd.factorize(texts(ops["input_type"]))
    first_dtype = np.array([_first_dtype(t) for t in type_uniques], dtype=object)
    dtype = first_dtype[type_codes] if n else np.zeros(0, dtype=object)
    return flops, source, dtype, moved


def _distinct_rows(code_columns: Sequence[npt.NDArray[Any]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(per row: the number of its distinct combination of codes, the first row of each
    combination) for equally long arrays of codes >= -1: one factorize per column, never a
    tuple per row."""
    key = np.zeros(len(code_columns[0]), dtype=np.int64)
    for codes in code_columns:  # key stays below the row count: the product cannot overflow
        width = int(codes.max()) + 2 if len(codes) else 1
        key, _ = pd.factorize(key * width + (codes.astype(np.int64) + 1))
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return inverse, first


def _first_dtype(input_type: str) -> str:
    try:
        types = json.loads(input_type) if input_type else []
    except ValueError:
        return ""
    return next((_DTYPES[t] for t in types if t in _DTYPES), "") if isinstance(types, list) else ""


def _subtree_flops(model: TraceModel, flops: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per op: the FLOPs counted at it and at its descendants (bottom-up, one step per level)."""
    ops = model.ops
    total = flops.copy()
    depth = ops["depth"].to_numpy()
    parent = ops["parent"].to_numpy()
    for level in range(int(depth.max()) if len(ops) else 0, 0, -1):
        rows = np.flatnonzero((depth == level) & (parent >= 0))
        np.add.at(total, parent[rows], total[rows])
    return total


def _gpu_name(model: TraceModel) -> str:
    """deviceProperties' name of the first GPU the trace used ("" when none)."""
    dev = device_activity(model)
    used = np.unique(dev["device"].to_numpy()[dev["device"].to_numpy() >= 0]) if len(dev) else np.zeros(0, np.int64)
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
    return cached(model, "flops_operators", lambda: _build_operators(model))


def _build_operators(model: TraceModel) -> pd.DataFrame:
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
        "name": texts(ops["name"], keep), "flops": total[keep],
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
    understate the step: calls of ops that have a formula but could not be counted (shapes
    not recorded; a forward-only trace before torch 2.0, whose convolutions' output sizes
    are unknown). coverage_pct is the share of the step's compute kernels (communication
    kernels left out; by their start) launched under a counted op; below
    `MFU_MIN_COVERAGE_PCT` mfu_pct is null and mfu_withheld says why.
    """
    return cached(model, "flops_steps", lambda: _build_steps(model))


def _build_steps(model: TraceModel) -> pd.DataFrame:
    ops = model.ops
    flops, _, dtype, _ = op_flops(model)
    windows = step_windows(model)
    start, end = windows["start_us"].to_numpy(), windows["end_us"].to_numpy()
    # ops with a formula that got no count, outermost only (conv2d > convolution > ...: one)
    candidate = name_mask(ops["name"], _FORMULA_NAMES.__contains__)
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
    device_us, counted_us = _kernel_coverage(model, flops, start, end)
    coverage = 100.0 * counted_us / np.where(device_us > 0, device_us, np.nan)
    mfu = 100.0 * rate / peak
    low = np.isfinite(mfu) & ~(coverage >= MFU_MIN_COVERAGE_PCT)
    withheld = np.where(low, [f"the ops whose FLOPs are counted ran {c:.1f}% of the step's kernel time, "
                              f"below {MFU_MIN_COVERAGE_PCT:.0f}%: most of its work has no FLOP count"
                              if np.isfinite(c) else "the step ran no compute kernels" for c in coverage], "")
    return STEPS.frame({"step": windows["step"].to_numpy(), "flops": step_flops, "step_us": step_us,
                        "tflops_per_s": rate, "device_name": [gpu] * len(windows), "dtype": step_dtype,
                        "peak_tflops_per_s": peak, "mfu_pct": np.where(low, np.nan, mfu),
                        "uncounted_calls": uncounted_calls.astype(np.int64), "device_us": device_us,
                        "counted_device_us": counted_us, "coverage_pct": coverage, "mfu_withheld": withheld})


def _kernel_coverage(model: TraceModel, flops: npt.NDArray[np.float64], start: npt.NDArray[np.float64],
                     end: npt.NDArray[np.float64]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Per step window: (summed duration of the compute kernels that started in it, the part
    of it launched by an op whose FLOPs are counted or by one of that op's sub-operators)."""
    ops = model.ops
    kernels = model.kernels
    comm, _ = kernel_flags(model)
    ts = kernels["ts"].to_numpy()
    index = np.searchsorted(start, ts, side="right") - 1
    inside = (index >= 0) & (ts < end[np.clip(index, 0, None)]) & ~comm
    counter = ancestor_where(flops > 0, ops["parent"].to_numpy(), ops["depth"].to_numpy()) if len(ops) \
        else np.zeros(0, dtype=np.int64)
    op = kernels["op"].to_numpy()
    counted = np.zeros(len(kernels), dtype=bool)
    counted[op >= 0] = counter[op[op >= 0]] >= 0
    dur = kernels["dur"].to_numpy(dtype=np.float64)
    device_us = np.bincount(index[inside], weights=dur[inside], minlength=len(start))[:len(start)]
    counted_us = np.bincount(index[inside & counted], weights=dur[inside & counted], minlength=len(start))[:len(start)]
    return device_us, counted_us


MISSING = declare(
    "flops_missing", "why no operator has a FLOP count: one row when none has one, no row otherwise",
    ("reason", "str", "", "what the trace lacks for a count, in the run's own terms, and what to record instead"),
)


@documented(MISSING)
def flops_missing(model: TraceModel) -> pd.DataFrame:
    """Why `flops_operators` is empty, by what the trace holds: calls the formulas count whose
    shapes are missing; else matrix work that ran only inside CUDA-graph replays (a replay is
    one runtime call whose kernels record no operator or shapes, so record_shapes cannot
    help); else no shapes recorded at all; else no operator the formulas count."""
    flops, *_ = op_flops(model)
    if (flops > 0).any():
        return MISSING.empty()
    return MISSING.frame({"reason": [_missing_reason(model)]})


def _missing_reason(model: TraceModel) -> str:
    ops = model.ops
    counted_kind = name_mask(ops["name"], lambda name: name in _FORMULA_NAMES)
    shaped = name_mask(ops["input_dims"], lambda dims: any(c.isdigit() for c in dims)).any()
    replays = int(graph_launch_mask(model).sum())
    if counted_kind.any():
        n = int(counted_kind.sum())
        calls = f"{n:,} call{'s' if n != 1 else ''} of matrix products, convolutions or attention"
        if not shaped:
            return (f"the trace records no input shapes, so its {calls} cannot be counted: record with "
                    "record_shapes=True, or with_flops=True")
        return f"none of the {calls} has input shapes that fit its formula (record_shapes=True records them; or with_flops=True)"
    if replays:
        return (f"the matrix work ran inside {replays:,} CUDA-graph replay{'s' if replays != 1 else ''} (cudaGraphLaunch), which the trace "
                f"records as kernels only, with no operators or shapes to count FLOPs from"
                f"{' (its other operators do have shapes)' if shaped else ''}: profile a step run without CUDA graphs "
                "(torch.compile without mode=\"reduce-overhead\") to count them")
    if not shaped:
        return ("the trace records no input shapes: record with record_shapes=True (matrix products, convolutions and "
                "attention are counted from their shapes), or with_flops=True")
    return ("no matrix product, convolution or attention ran (shapes are recorded): only these are counted, "
            "element-wise and fused kernels are not")


@dataclass
class FlopsView:
    """The FLOPs view's tables: `flops_operators`, `flops_steps` and `flops_missing`."""

    operators: pd.DataFrame
    steps: pd.DataFrame
    missing: pd.DataFrame


def flops_view(model: TraceModel) -> FlopsView:
    return FlopsView(operators=flops_operators(model), steps=flops_steps(model), missing=flops_missing(model))


# The routes answering with these tables (see `schema.route`).
FLOPS_ROUTE = route(
    "flops",
    "FLOPs: operators (name, calls, flops, source, dtype, host_total_us, device_total_us, "
    "host_tflops_per_s, device_tflops_per_s, peak_tflops_per_s, pct_of_peak; FLOPs from the "
    "with_flops arg, else from Input Dims for matrix products, convolutions and attention) and steps "
    "(step, flops, step_us, tflops_per_s, device_name, dtype, peak_tflops_per_s, mfu_pct). Peaks are "
    "dense TFLOP/s per GPU model and dtype from vendor datasheets; null (peak unknown) otherwise. missing (reason): "
    "why no operator has a count, one row when none has. "
    "With table=NAME, that one table (JSON or CSV); with tables=A,B, those (JSON).",
    flops_view,
    tables={"operators": OPERATORS, "steps": STEPS, "missing": MISSING})
