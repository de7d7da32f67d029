"""Frequent kernel sequences: runs of kernels that repeat back to back on a stream, the
candidates for fusion (torch.compile, a fused or custom kernel)."""

import re

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import declare, integer, route
from ..trace.model import TraceModel
from .common import cached, is_comm_kernel, op_names, step_windows
from .compiled import is_inductor_kernel_name

SEPARATOR = " | "  # between kernel names of a sequence, as HTA writes its patterns
DEFAULT_LENGTH = 3
MAX_LENGTH = 32
DEFAULT_TOP = 50
# Kernels fusion can remove: element-wise and reduction kernels (ATen's, which ROCm names
# alike). Library kernels never are, whatever else their name says: cuDNN / MIOpen,
# cuBLAS / cuBLASLt / rocBLAS / hipBLASLt (Tensile's Cijk_), CUTLASS / CK, GEMMs,
# convolutions, attention, collectives, and Inductor's Triton or C++ kernels (fused already).
_LIBRARY_KERNEL = re.compile(
    r"cudnn|miopen|cublas|rocblas|hipblas|^Cijk_|cutlass|ck::|gemm|gemv|convol|conv[_\d]|fprop|dgrad|wgrad|winograd|implicit|xmma|"
    r"fmha|flash|attention|attn|^triton", re.I)
_ELEMENTWISE_OR_REDUCTION = re.compile(
    r"elementwise|reduce_kernel|reduction|multi_tensor_apply|batch_norm|layer_norm|group_norm|softmax|"
    r"CatArrayBatchedCopy|fill|index|scatter|gather|copy", re.I)
MAX_TOP = 10_000  # a reply of more sequences is no list to read

KERNEL_SEQUENCES = declare(
    "kernel_sequences", "a sequence of kernels that runs consecutively on one stream more than once",
    ("sequence", "str", "", "the kernel names in order, joined by ' | '"),
    ("operators", "str", "", "the distinct operators that launched its kernels (first occurrence), in order, joined by ' | '"),
    ("device", "int64", "", "device index"),
    ("stream", "int64", "", "stream id"),
    ("occurrences", "int64", "count", "places on the stream where the sequence starts"),
    ("device_us", "float64", "us", "device time of the kernels in its occurrences (a kernel in two overlapping occurrences counted once)"),
    ("device_per_step_us", "float64", "us", "device_us divided by the number of steps"),
    ("share_pct", "float64", "pct", "device_us as a share of all kernel time"),
    ("first_start_us", "float64", "us", "start of its first occurrence (for the Trace view link)"),
    ("first_end_us", "float64", "us", "end of its first occurrence"),
)


def kernel_sequences(model: TraceModel, length: int = DEFAULT_LENGTH, top: int = DEFAULT_TOP) -> pd.DataFrame:
    """The `top` most time-consuming sequences of `length` kernels that repeat.

    A sequence is `length` kernels with these names, in this order, consecutive on one
    stream (memcpys and memsets between them do not break it). Every start position counts
    as an occurrence; a sequence occurring once is not listed. Sorted by device_us.

    Notes
    -----
    HTA's `get_frequent_cuda_kernel_sequences(operator_name)` groups, per call of one named
    operator, the whole list of kernels its subtree launched. Here sequences are found
    without naming an operator first, across the operators that launched them (a fusion
    often spans operators: a convolution, its batch norm and its ReLU), and their time is
    given per step.
    """
    if not 2 <= length <= MAX_LENGTH:
        raise ValueError(f"length must be between 2 and {MAX_LENGTH}, not {length}")
    if top < 1:
        raise ValueError(f"top must be >= 1, not {top}")
    return cached(model, ("kernel_sequences", int(length), int(top)), lambda: _kernel_sequences(model, length, top))


def is_fusible_kernel(name: str) -> bool:
    """Whether fusion could remove a kernel of this name: an element-wise or reduction kernel,
    never a library one (cuDNN, cuBLAS, CUTLASS, GEMM, convolution, attention, collectives,
    Inductor's)."""
    return not (_LIBRARY_KERNEL.search(name) or is_comm_kernel(name) or is_inductor_kernel_name(name)) \
        and bool(_ELEMENTWISE_OR_REDUCTION.search(name))


def _kernel_sequences(model: TraceModel, length: int, top: int) -> pd.DataFrame:
    k = model.kernels
    empty = KERNEL_SEQUENCES.empty()
    if len(k) < 2 * length:
        return empty
    device, stream, ts = k["device"].to_numpy(), k["stream"].to_numpy(), k["ts"].to_numpy()
    order = np.lexsort((ts, stream, device))
    codes = k["name"].cat.codes.to_numpy().astype(np.int64)[order]
    device, stream, ts = device[order], stream[order], ts[order]
    dur = k["dur"].to_numpy()[order]
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = (device[1:] != device[:-1]) | (stream[1:] != stream[:-1])
    group = np.cumsum(new_group) - 1
    windows = np.lib.stride_tricks.sliding_window_view(codes, length)
    starts = np.flatnonzero(group[: len(windows)] == group[length - 1:])
    if not len(starts):
        return empty
    seq, counts = _identical_rows(np.column_stack([group[starts], windows[starts]]))
    repeated = counts[seq] >= 2
    starts, seq = starts[repeated], seq[repeated]
    if not len(starts):
        return empty
    # Kernels covered by each sequence's occurrences, each counted once per sequence.
    covered = (starts[:, None] + np.arange(length)).ravel()
    pairs = np.unique(np.repeat(seq, length) * len(order) + covered)
    device_us = np.bincount(pairs // len(order), weights=dur[pairs % len(order)], minlength=len(counts))
    first = np.full(len(counts), len(order), dtype=np.int64)
    np.minimum.at(first, seq, starts)
    chosen = np.flatnonzero(first < len(order))
    chosen = chosen[np.argsort(-device_us[chosen], kind="stable")][:top]
    first_at = first[chosen]
    rows = first_at[:, None] + np.arange(length)  # kernel positions of each first occurrence
    names = k["name"].cat.categories.astype(str).to_numpy()[codes[rows]]
    ops = op_names(model, k["op"].to_numpy()[order][rows].ravel()).reshape(rows.shape)
    total = float(dur.sum())
    steps = max(len(step_windows(model)), 1)
    end = ts + dur
    return KERNEL_SEQUENCES.frame({
        "sequence": [SEPARATOR.join(r) for r in names],
        "operators": [SEPARATOR.join(dict.fromkeys(o for o in r if o)) for r in ops],
        "device": device[first_at], "stream": stream[first_at],
        "occurrences": counts[chosen], "device_us": device_us[chosen],
        "device_per_step_us": device_us[chosen] / steps,
        "share_pct": 100 * device_us[chosen] / total if total else np.zeros(len(chosen)),
        "first_start_us": ts[first_at], "first_end_us": np.max(end[rows], axis=1),
    })


def _identical_rows(rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row -> class id, size of each class) for rows of small non-negative integers. Rows
    are packed into one int64 each when their bits fit (a 1-D unique is several times faster
    than np.unique(axis=0)), else compared as rows."""
    bits = [max(int(col.max()), 1).bit_length() for col in rows.T]
    if sum(bits) <= 62:
        packed = np.zeros(len(rows), dtype=np.int64)
        for col, width in zip(rows.T, bits):
            packed = (packed << width) | col
        _, seq, counts = np.unique(packed, return_inverse=True, return_counts=True)
    else:
        _, seq, counts = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    return seq.ravel(), counts


# The route answering with this table (see `schema.route`).
KERNEL_SEQUENCES_ROUTE = route(
    "kernel_sequences",
    "The most time-consuming sequences of `length` kernels repeating back to back on a stream (fusion candidates): "
    "sequence, operators, device, stream, occurrences, device_us, device_per_step_us, share_pct, first_start_us, "
    "first_end_us.",
    kernel_sequences,
    params=(integer("length", "How many kernels a sequence has.", default=DEFAULT_LENGTH, minimum=2, maximum=MAX_LENGTH),
            integer("top", f"How many sequences (at most {MAX_TOP}).", default=DEFAULT_TOP, minimum=1, maximum=MAX_TOP)),
    table=KERNEL_SEQUENCES)
