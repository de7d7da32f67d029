"""Facts every view shares: what is a collective, a Tensor Core kernel, a step; the operator
tree with self and total times. All computed once per model and cached on it."""

import re
import sys
import threading
from collections.abc import Callable, Hashable, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..errors import BadParameterError, NotFoundError
from ..schema import ROUTES, Param
from ..snapshot.model import SnapshotModel
from ..trace.linking import Nesting, ancestor_where, innermost_container, roll_up
from ..trace.model import TraceModel
from .intervals import exclusive_time

# Communication back-ends, as the prefix of the host ops that stand for a collective's work
# (`nccl:all_reduce`, `gloo:broadcast`, ...).
COLLECTIVE_BACKENDS = ("nccl", "gloo", "mpi", "ucc", "xccl", "hccl", "rccl")
BACKEND_OP_NAME = re.compile(rf"^({'|'.join(COLLECTIVE_BACKENDS)}):", re.I)
# Collective ops: backend annotations (nccl:*, gloo:*, ...), c10d's ops and the functional
# collectives DTensor / torch.compile issue (_c10d_functional::*), except the functional ops
# that only wait for or wrap an earlier collective's result.
_COLLECTIVE_NAME = re.compile(rf"^(({'|'.join((*COLLECTIVE_BACKENDS, 'c10d'))}):|"
                              r"_c10d_functional::(?!wait_tensor$|_wrap_tensor_autograd$))", re.I)
_COMM_KERNEL = re.compile(r"nccl|rccl|^ncclDev", re.I)
_DATALOADER = re.compile(r"^enumerate\((DataLoader|DataPipe)\)#")
# Ranges the operator table leaves out: they are structure, not work (as the old plugin did).
_NOT_AN_OPERATOR = re.compile(r"^(ProfilerStep#\d+|Optimizer\.|DataParallel\.forward|DistributedDataParallel\.forward|"
                              r"enumerate\((DataLoader|DataPipe)\)#)")
# Operators whose work can run on Tensor Cores (matmul family, convolutions, RNN cells).
_TC_ELIGIBLE = re.compile(
    r"^aten::(_?convolution|conv\d?d|conv_transpose\d?d|cudnn_convolution\w*|_convolution_mode|mkldnn_convolution|"
    r"miopen_convolution\w*|convolution_backward\w*|mm|bmm|addmm|addmv|addr|addbmm|baddbmm|matmul|linear|mv|"
    r"chain_matmul|linalg_multi_dot|prelu|_prelu_kernel\w*|(_thnn_fused_)?(lstm|gru|rnn)(_tanh|_relu)?(_cell)?\w*|"
    r"_cudnn_rnn\w*|miopen_rnn\w*|_scaled_mm|_scaled_dot_product\w*|scaled_dot_product_attention)$")
NO_STEP = 0  # step number used when the trace has no ProfilerStep markers
_CACHE_LOCK = threading.Lock()  # guards the creation of the per-key locks of `cached`
T = TypeVar("T")


def _marker_lines() -> tuple[str, ...]:
    text = resources.files(__package__).joinpath("tensor_core_markers.txt").read_text()
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


@lru_cache(maxsize=1)
def tensor_core_markers() -> tuple[str, ...]:
    """Substrings of kernel names that mark Tensor Core kernels."""
    return tuple(line for line in _marker_lines() if not line.startswith("!"))


@lru_cache(maxsize=1)
def cuda_core_markers() -> tuple[str, ...]:
    """Substrings that mark a kernel as running on the CUDA cores even when a Tensor Core
    marker matches (the lines starting with "!")."""
    return tuple(line[1:] for line in _marker_lines() if line.startswith("!"))


def name_mask(column: pd.Series, predicate: Callable[[str], object]) -> npt.NDArray[np.bool_]:
    """Boolean array: `predicate(name)` for each row of a categorical name column,
    evaluated once per distinct name; False for a row without a name."""
    categories = column.cat.categories
    per_category = np.fromiter((bool(predicate(str(c))) for c in categories), dtype=bool, count=len(categories))
    # a missing name's code is -1: it indexes the False appended last, not the last name's verdict
    return np.append(per_category, False)[column.cat.codes.to_numpy()]


def is_tensor_core_kernel(name: str) -> bool:
    return any(marker in name for marker in tensor_core_markers()) and \
        not any(marker in name for marker in cuda_core_markers())


def is_rocm(model: TraceModel) -> bool:
    """Whether the trace's runtime calls are HIP's (an AMD GPU; Kineto files them as cuda_runtime):
    the model's device type says so (`TraceModel.device_type`)."""
    return model.device_type == "ROCm"


def matrix_unit(model: TraceModel) -> str:
    """What the GPU's vendor calls the units `is_tensor_core_kernel` finds: Tensor Cores on
    NVIDIA, Matrix cores on AMD."""
    return "Matrix cores" if is_rocm(model) else "Tensor Cores"


# Blocking runtime calls are the host calls that return only when device
# work has finished: the host is synchronising with the device, not doing work of its own, so
# the diff counts them as `synchronisation`, the critical path as `sync`, and the advice never
# tells the user to "reduce CPU work" for them. By backend, as each runtime documents them:
#
# - CUDA (runtime `cuda*`, driver `cu*`): the `*Synchronize` calls (device, stream, event,
#   context; the old `cudaThreadSynchronize`) and the memcpys the runtime's "API
#   synchronization behavior" section calls synchronous, those without the `Async` suffix that
#   involve host memory (`cudaMemcpy`, `cudaMemcpy2D`/`3D`, `cudaMemcpy[2D]To/FromArray`,
#   `cudaMemcpyTo/FromSymbol`; the driver's `cuMemcpy`, `cuMemcpy2D[Unaligned]`/`3D`,
#   `cuMemcpyDtoH`, `cuMemcpyHtoD`, `cuMemcpyAtoH`, `cuMemcpyHtoA`, with their `_v2` names).
#   Device-to-device and peer copies (`cuMemcpyDtoD`, `cudaMemcpyPeer`) do not block the host.
# - HIP: the same `*Synchronize` calls, HIP's synchronous memcpys under the same names
#   (`hipMemcpy`, `hipMemcpyDtoH`, `hipMemcpyHtoD`, `hipMemcpy2D`/`3D`, `hipMemcpyParam2D`,
#   `hipMemcpyTo/FromSymbol`, ...) and `hipMemcpyWithStream`, which HIP documents as
#   `hipMemcpyAsync` followed by `hipStreamSynchronize` ("a sync API").
# - XPU (Unified Runtime): `urQueueFinish` and `urEventWait`, which block until the queue's
#   or the events' work is done.
_SYNCHRONIZE = r"(?:Device|Stream|Event|Ctx|Thread)Synchronize(?:_v2)?"
_SYNC_MEMCPY = (r"(?:cuda|hip)Memcpy(?:2D|3D)?(?:(?:To|From)(?:Array|Symbol))?"
                r"|(?:cu|hip)Memcpy(?:2DUnaligned|DtoH|HtoD|AtoH|HtoA|Param2D)?|hipMemcpyWithStream")
_BLOCKING = re.compile(rf"^(?:(?:cuda|cu|hip){_SYNCHRONIZE}|(?:{_SYNC_MEMCPY})(?:_v2)?|urQueueFinish|urEventWait)$")


def is_blocking_call(name: str | None) -> bool:
    """Whether a runtime call of this name blocks the host until device work is done (the
    list, backend by backend, is in the comment above)."""
    return bool(_BLOCKING.match(name or ""))


def is_comm_kernel(name: str) -> bool:
    return bool(_COMM_KERNEL.search(name))


def is_collective_op_name(name: str) -> bool:
    return bool(_COLLECTIVE_NAME.match(name)) or name == "record_param_comms"


def is_dataloader_name(name: str) -> bool:
    return bool(_DATALOADER.match(name))


def is_tc_eligible_name(name: str) -> bool:
    return bool(_TC_ELIGIBLE.match(name))


def cached(model: TraceModel | SnapshotModel, key: Hashable, build: Callable[[], T]) -> T:
    """`build()` computed once per model and key, however many request threads ask at once:
    the first computes while the others wait for its result (a lock per key, kept in the
    cache dict, which the disk cache never stores and a pickled model leaves out)."""
    cache = model.__dict__.setdefault("_view_cache", {})
    if key in cache:
        return cache[key]
    with _CACHE_LOCK:
        lock = cache.setdefault(("_lock", key), threading.RLock())
    with lock:
        if key not in cache:
            cache[key] = build()
        return cache[key]


def texts(column: pd.Series, rows: npt.NDArray[np.int64] | npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.object_]:
    """A text column's values (at `rows` when given) as a numpy array of str, "" where a
    categorical has no value. pandas 3's `astype(str)` copies every value into its Arrow string
    type and `to_numpy` copies them back; a categorical's categories taken by its codes is one
    numpy take (the model's text columns are categoricals of object categories)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        if rows is not None:
            codes = codes[rows]
        categories = np.append(np.asarray(column.cat.categories, dtype=object), "")  # code -1 -> ""
        return categories[codes]
    values = column.to_numpy(dtype=object)
    return values if rows is None else values[rows]


def object_frame(columns: Mapping[str, Any]) -> pd.DataFrame:
    """`pd.DataFrame(columns)` with its text columns kept as numpy object arrays: pandas 3 would
    copy each into its Arrow string type, which every table's declaration (`schema.frame`)
    turns back into object. A str value stands for a column of it."""
    length = next(len(values) for values in columns.values() if not isinstance(values, str))
    index = pd.RangeIndex(length)

    def column(values: Any) -> Any:
        if isinstance(values, str):  # one string every row points at (np.full would copy it per row)
            text, values = values, np.empty(length, dtype=object)
            values.fill(text)
        return pd.Series(values, index=index, dtype=object) if getattr(values, "dtype", None) == object else values

    return pd.DataFrame({name: column(values) for name, values in columns.items()}, index=index)


def device_activity(model: TraceModel) -> pd.DataFrame:
    """Kernels, memcpys and memsets in one table: kind, name, device, stream, ts, dur, op, runtime,
    correlation."""
    def build() -> pd.DataFrame:
        parts = []
        for kind, table in (("kernel", model.kernels), ("memcpy", model.memcpy), ("memset", model.memset)):
            parts.append(object_frame({
                "kind": kind, "name": texts(table["name"]), "device": table["device"].to_numpy(),
                "stream": table["stream"].to_numpy(), "ts": table["ts"].to_numpy(), "dur": table["dur"].to_numpy(),
                "op": table["op"].to_numpy(), "runtime": table["runtime"].to_numpy(),
                "correlation": table["correlation"].to_numpy()}))
        return pd.concat(parts, ignore_index=True)
    return cached(model, "device_activity", build)


def kernel_flags(model: TraceModel) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per kernel: (is communication kernel, is Tensor Core kernel)."""
    return cached(model, "kernel_flags", lambda: (
        name_mask(model.kernels["name"], is_comm_kernel), name_mask(model.kernels["name"], is_tensor_core_kernel)))


def collective_op_mask(model: TraceModel) -> npt.NDArray[np.bool_]:
    def build() -> npt.NDArray[np.bool_]:
        named = name_mask(model.ops["name"], is_collective_op_name)
        # record_param_comms without a collective name, or for a "wait" on earlier work, is
        # bookkeeping, not a collective (the distributed view counts it the same way)
        rpc = (model.ops["name"] == "record_param_comms").to_numpy()
        bookkeeping = model.ops["collective_name"].isin(["", "wait"]).to_numpy()
        return named & ~(rpc & bookkeeping)
    return cached(model, "collective_ops", build)


def enclosing_op_where(model: TraceModel, rows: npt.NDArray[np.int64], mask: npt.NDArray[np.bool_],
                       outermost: bool = False) -> npt.NDArray[np.int64]:
    """For op `rows` (-1 allowed): the nearest op among each row and its ancestors where the
    per-op `mask` holds (the farthest with `outermost`); -1 where none does (and for row -1).
    The op tree's one ancestor walk (`trace.linking.ancestor_where`), read at the rows asked for."""
    rows = np.asarray(rows, dtype=np.int64)
    if not len(model.ops):
        return np.full(len(rows), -1, dtype=np.int64)
    nearest = ancestor_where(np.asarray(mask, dtype=bool), model.ops["parent"].to_numpy(), model.ops["depth"].to_numpy(),
                             outermost)
    return np.where(rows >= 0, nearest[np.clip(rows, 0, None)], -1)


def step_windows(model: TraceModel) -> pd.DataFrame:
    """Steps with their time windows, as `Profile.steps()` and every per-step view use them.

    A step is a host-side `ProfilerStep#N` range, extended to the end of the device work its
    launches caused, and starting no earlier than the previous step's end. The first step
    starts no earlier than the end of the device work that no step launched (launched before
    the profiler started, or outside every step) and that ended before the first step's own
    first device activity: such work is not counted in step 1 (torch-tb-profiler 0.4.3's rule).
    Without step markers there is one step (number 0) over the whole trace.

    When some step launched device work, the steps at the end of the trace that launched
    none are left out, and then the last step too when it launched fewer than 80% of the
    device activities of the step before it: those are steps the profiler stopped recording
    part-way (the stub `ProfilerStep#N` opened by the last `prof.step()`, or a step whose
    device work was not collected), whose breakdown would be mostly "Other" and would skew
    the mean step (torch-tb-profiler 0.4.3 drops them the same way).

    Columns: step (int), start_us, end_us (float, relative to the trace origin),
    host_start_us, host_end_us.
    """
    def build() -> pd.DataFrame:
        steps = model.steps
        if not len(steps):
            first_us, last_us = model.span_us()  # floats; `start` and `end` below are arrays
            return pd.DataFrame({"step": [NO_STEP], "start_us": [first_us], "end_us": [last_us],
                                 "host_start_us": [first_us], "host_end_us": [last_us]})
        host_start = steps["ts"].to_numpy()
        host_end = host_start + steps["dur"].to_numpy()
        end = host_end.copy()
        numbers = steps["step"].to_numpy()
        dev = device_activity(model)
        linked = dev[dev["runtime"] >= 0]
        if len(linked):
            launch_ts = model.runtime["ts"].to_numpy()[linked["runtime"].to_numpy()]
            k = np.searchsorted(host_start, launch_ts, side="right") - 1
            ok = (k >= 0) & (launch_ts < host_end[np.clip(k, 0, None)])
            dev_end = (linked["ts"] + linked["dur"]).to_numpy()
            ext = np.full(len(host_start), -np.inf)
            np.maximum.at(ext, k[ok], dev_end[ok])
            end = np.maximum(end, ext)
            launched = np.bincount(k[ok], minlength=len(host_start))
            if launched.any():  # incomplete steps at the end of a trace with device work
                kept = int(np.flatnonzero(launched)[-1]) + 1
                if kept >= 2 and launched[kept - 1] < 0.8 * launched[kept - 2]:
                    kept -= 1
                host_start, host_end, end, numbers = host_start[:kept], host_end[:kept], end[:kept], numbers[:kept]
        start = host_start.copy()
        if len(linked) and launched[0]:
            start[0] = max(start[0], _end_of_work_before_the_first_step(dev, linked.index[ok & (k == 0)],
                                                                        linked.index[ok]))
        start[1:] = np.maximum(host_start[1:], end[:-1])
        end = np.maximum(end, start)
        return pd.DataFrame({"step": numbers, "start_us": start, "end_us": end,
                             "host_start_us": host_start, "host_end_us": host_end})
    return cached(model, "step_windows", build)


def known_step(model: TraceModel, step: int | None) -> int:
    """`step` (the first step when None), or `NotFoundError` naming the trace's steps: the
    step a per-step view (the critical path) is asked for."""
    steps = step_windows(model)["step"].tolist()
    if step is None:
        step = steps[0]
    if step not in steps:
        raise NotFoundError(f"no step {step}; steps: {', '.join(map(str, steps))}")
    return step


def _end_of_work_before_the_first_step(dev: pd.DataFrame, first_step_rows: npt.NDArray[np.int64],
                                       in_step_rows: npt.NDArray[np.int64]) -> float:
    """End of the device work (rows of `device_activity`) that no step launched and that ended
    before the first device activity the first step launched (rows `first_step_rows`); -inf
    when there is none. Such work was launched before the profiler started or outside every
    step (torch-tb-profiler 0.4.3's `prev_step_end_time`)."""
    first_device_start = dev["ts"].to_numpy()[first_step_rows].min()
    orphan = np.ones(len(dev), dtype=bool)
    orphan[in_step_rows] = False
    ends = (dev["ts"] + dev["dur"]).to_numpy()[orphan]
    before = ends[ends < first_device_start]
    return float(before.max()) if len(before) else -np.inf


def operator_tree(model: TraceModel) -> pd.DataFrame:
    """Operators with self and total times, after the duplicate-node rule.

    Like torch's `key_averages()`, a child with its parent's name that is the parent's only
    child is merged into the parent (so call counts agree with torch); its children, runtime
    calls and device activity then belong to the parent.

    Columns (indexed like `model.ops`): node (the row that stands for this op after merging;
    itself unless merged), node_parent (-1 for roots), merged (bool), is_operator (bool: shown
    in operator tables), host_self_us, host_self_less_python_us (`_python_frame_correction`),
    host_total_us, device_self_us, device_total_us,
    tc_self_us, tc_total_us, launches_tc (bool).
    """
    return cached(model, "operator_tree", lambda: _build_operator_tree(model))


def _build_operator_tree(model: TraceModel) -> pd.DataFrame:
    ops = model.ops
    n = len(ops)
    parent = ops["parent"].to_numpy()
    depth = ops["depth"].to_numpy()
    names = ops["name"].cat.codes.to_numpy()
    has_parent = parent >= 0
    child_count = np.bincount(parent[has_parent], minlength=n) if n else np.zeros(0, np.int64)
    safe_parent = np.where(has_parent, parent, 0)
    merged = has_parent & (names == names[safe_parent]) & (child_count[safe_parent] == 1) if n else np.zeros(0, bool)
    # node: follow merged rows up to the row that survives (chains a -> a -> a resolve too)
    node = ancestor_where(~merged, parent, depth)
    node_parent = np.where(has_parent, node[safe_parent], -1)
    dur = ops["dur"].to_numpy()

    host_total = np.where(merged, 0.0, dur)
    children_time = np.zeros(n)
    live = ~merged & (node_parent >= 0)
    np.add.at(children_time, node_parent[live], dur[live])
    runtime_time = np.zeros(n)
    runtime = model.runtime
    rt_op = runtime["op"].to_numpy()
    # a runtime call inside another is time counted with it: XPU's driver calls (ze*), inside
    # the runtime call (ur*) that made them and sharing its correlation (pytorch/kineto#1467)
    outermost = Nesting(runtime["thread"].to_numpy(), runtime["ts"].to_numpy(), runtime["dur"].to_numpy()).depth == 0
    ok = (rt_op >= 0) & outermost
    np.add.at(runtime_time, node[rt_op[ok]], runtime["dur"].to_numpy()[ok])
    host_self = np.where(merged, 0.0, np.maximum(dur - children_time - runtime_time, 0.0))
    python_children = _python_frame_correction(model, node, node_parent, merged)
    host_self_less_python = np.where(merged, 0.0, np.maximum(dur - children_time - python_children - runtime_time, 0.0))

    dev = device_activity(model)
    comm, tc = kernel_flags(model)
    device_self = np.zeros(n)
    tc_self = np.zeros(n)
    dev_op = dev["op"].to_numpy()
    ok = dev_op >= 0
    np.add.at(device_self, node[dev_op[ok]], dev["dur"].to_numpy()[ok])
    k_op = model.kernels["op"].to_numpy()
    ok_tc = (k_op >= 0) & tc
    np.add.at(tc_self, node[k_op[ok_tc]], model.kernels["dur"].to_numpy()[ok_tc])
    launches_tc = tc_self > 0
    eligible = name_mask(ops["name"], is_tc_eligible_name)
    # Merged rows hold nothing of their own (it went to their node): they are left out.
    tree_parent = np.where(live, node_parent, -1)
    device_total, tc_total = roll_up(np.column_stack([device_self, tc_self]), tree_parent, depth).T
    subtree_eligible = roll_up(eligible | launches_tc, tree_parent, depth, np.logical_or)
    is_operator = ~merged & ~name_mask(ops["name"], _NOT_AN_OPERATOR.match) & (ops["cat"] != "user_annotation").to_numpy()
    return pd.DataFrame({
        "node": node, "node_parent": node_parent, "merged": merged, "is_operator": is_operator,
        "host_self_us": host_self, "host_self_less_python_us": host_self_less_python, "host_total_us": host_total,
        "device_self_us": device_self, "device_total_us": device_total,
        "tc_self_us": tc_self, "tc_total_us": tc_total,
        "launches_tc": launches_tc, "tc_eligible": subtree_eligible,
    }, index=ops.index)


def _python_frame_correction(model: TraceModel, node: npt.NDArray[np.int64], node_parent: npt.NDArray[np.int64],
                             merged: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """Per op row (its surviving node): what torch 2.13's self time subtracts beyond the op's
    child ops and runtime calls when with_stack recorded Python frames (`model.python`).

    torch 2.13's `key_averages()` nests every host event of a thread, Python frames included
    (torch 2.11's leaves them out: the H100 samples' saved key_averages), and an event's self
    time is its duration less its direct children's. A Python frame running inside an op (the
    Python body of a `CompiledFunction` or a custom op) is such a child: its whole duration
    is subtracted, and the ops and runtime calls inside the frame are not children of the op
    any more. So: + the frames whose innermost enclosing event is the op, - the child ops and
    runtime calls whose innermost enclosing event is a frame (they were counted as the op's
    children). Zeros without Python frames."""
    n = len(model.ops)
    correction = np.zeros(n)
    py, rt = model.python, model.runtime
    if not len(py) or not n:
        return correction
    ops = model.ops
    n_py = len(py)
    dur = np.concatenate([ops["dur"].to_numpy(), py["dur"].to_numpy(), rt["dur"].to_numpy()]).astype(np.float64)
    parent = innermost_container(
        np.concatenate([ops["thread"].to_numpy(), py["thread"].to_numpy(), rt["thread"].to_numpy()]),
        np.concatenate([ops["ts"].to_numpy(), py["ts"].to_numpy(), rt["ts"].to_numpy()]), dur)
    is_frame = (parent >= n) & (parent < n + n_py)
    # frames directly inside an op
    frame_rows = np.arange(n, n + n_py)
    in_op = (parent[frame_rows] >= 0) & (parent[frame_rows] < n)
    np.add.at(correction, node[parent[frame_rows[in_op]]], dur[frame_rows[in_op]])
    # child ops and runtime calls under such a frame: no longer the op's direct children
    op_rows = np.arange(n)
    hidden_ops = is_frame[op_rows] & ~merged & (node_parent >= 0)
    np.subtract.at(correction, node_parent[hidden_ops], dur[op_rows[hidden_ops]])
    rt_op = rt["op"].to_numpy()
    rt_rows = np.arange(n + n_py, n + n_py + len(rt))
    hidden_rt = is_frame[rt_rows] & (rt_op >= 0)
    np.subtract.at(correction, node[rt_op[hidden_rt]], dur[rt_rows[hidden_rt]])
    return correction


def breakdown_categories(model: TraceModel) -> list[tuple[str, npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
    """Interval sets of the step-time categories, in priority order (see `Profile.steps`)."""
    def build() -> list[tuple[str, npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
        ops = model.ops
        comm_k, _ = kernel_flags(model)
        k = model.kernels
        k_start, k_end = k["ts"].to_numpy(), (k["ts"] + k["dur"]).to_numpy()
        coll = collective_op_mask(model)
        o_start, o_end = ops["ts"].to_numpy(), (ops["ts"] + ops["dur"]).to_numpy()
        loader = name_mask(ops["name"], is_dataloader_name)
        steps = name_mask(ops["name"], lambda n: n.startswith("ProfilerStep#"))
        cpu = ~coll & ~loader & ~steps
        rt = model.runtime
        return [
            ("kernel", k_start[~comm_k], k_end[~comm_k]),
            ("memcpy", model.memcpy["ts"].to_numpy(), (model.memcpy["ts"] + model.memcpy["dur"]).to_numpy()),
            ("memset", model.memset["ts"].to_numpy(), (model.memset["ts"] + model.memset["dur"]).to_numpy()),
            ("communication", np.concatenate([k_start[comm_k], o_start[coll]]), np.concatenate([k_end[comm_k], o_end[coll]])),
            ("runtime", rt["ts"].to_numpy(), (rt["ts"] + rt["dur"]).to_numpy()),
            ("dataloader", o_start[loader], o_end[loader]),
            ("cpu_exec", o_start[cpu], o_end[cpu]),
        ]
    return cached(model, "breakdown_categories", build)


def step_breakdown(model: TraceModel) -> pd.DataFrame:
    """Per step, exclusive time per category (priority order) plus `other`; see Profile.steps."""
    windows = step_windows(model)
    cats = breakdown_categories(model)
    table = exclusive_time((windows["start_us"], windows["end_us"]), [(s, e) for _, s, e in cats])
    out = pd.DataFrame(table, columns=[f"{name}_us" for name, _, _ in cats] + ["other_us"])
    out.insert(0, "step", windows["step"].to_numpy())
    out["total_us"] = (windows["end_us"] - windows["start_us"]).to_numpy()
    return out


def op_names(model: TraceModel, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.object_]:
    """Names of ops at row indices `rows` (-1 gives "")."""
    rows = np.asarray(rows, dtype=np.int64)
    names = texts(model.ops["name"], np.clip(rows, 0, None)) if len(model.ops) else np.zeros(len(rows), dtype=object)
    return np.where(rows >= 0, names, "").astype(object, copy=False)




def answer_route(name: str, reads: str, models: tuple[Any, ...], params: dict[str, Any],
                 admit: Callable[[int, str], None] | None = None,
                 resolve: Callable[[Any], Any] | None = None) -> Any:
    """The answer of the declared route `name` (`schema.ROUTES`: the caller has imported the
    modules declaring it) over `models`, the model(s) of an input of the kind `reads` (a
    profile's, a snapshot's, A's and B's), with the route's `params` by their query names (each as the
    view takes it, or as its query text; the declared default where not given): the table, or the object of
    tables, the HTTP API serves for it. What `Profile.answer` and `MemorySnapshot.answer`
    are (and `profile.diff`). `NotFoundError` for a route that reads no such input, or a choice the input does
    not hold; `BadParameterError` for a parameter the route does not take (or a value it
    refuses). `admit(values, what)`, given to a route declared `admits`, may refuse a reply
    too large for the memory budget (the HTTP layer's); `resolve(frames)`, where the route
    declares `frames`, gives its stack frames their files on this machine (the HTTP layer's
    `sources.SourceResolver`; without it the frames are as the trace wrote them)."""
    routes = ROUTES
    declared = routes.get(name)
    if declared is None or declared.reads != reads:
        names = sorted(n for n, r in routes.items() if r.reads == reads)
        raise NotFoundError(f"no route {name!r} over a {reads}; routes: {', '.join(names)}")
    # Looked up by name in its module (imported: it declared the route) when called: the
    # function the module holds now runs (one a test or a profiler wrapped).
    call = getattr(sys.modules[declared.call.__module__], declared.call.__name__)
    unknown = set(params) - {p.name for p in declared.params}
    if unknown:
        raise BadParameterError(f"route {name!r} takes no {', '.join(sorted(unknown))}")
    # the declared defaults, stated once: the same answer as the HTTP API's with no value given
    # a choice given as its query text ("expanded") is what it means to the view (False), as over HTTP
    given: dict[str, Any] = {}
    try:
        for p in declared.params:  # in order: a window's end is checked against its start
            if p.name in params:
                given[p.name] = p.value(params[p.name])
                p.check(given[p.name], given)
    except ValueError as exc:  # text a parameter's `parse` refuses, a number out of its bounds
        raise BadParameterError(f"route {name!r}: {exc}") from None
    missing = [p.name for p in declared.params if p.required and p.name not in given]
    if missing:
        raise BadParameterError(f"route {name!r} needs {', '.join(missing)}")
    params = {**{p.name: p.value(p.default) for p in declared.params if p.default is not None}, **given}
    params.update({p.name: _chosen(p, params.get(p.name), models[0], reads)
                   for p in declared.params if p.choices_of is not None})
    # In declaration order, which is the view function's; positionally up to the first
    # one not given (the view's own default holds for it), by name after it.
    first_missing = next((i for i, p in enumerate(declared.params) if p.name not in params), len(declared.params))
    answer = call(*models, *(params[p.name] for p in declared.params[:first_missing]),
                  **{p.argument: params[p.name] for p in declared.params[first_missing:] if p.name in params},
                  **({"admit": admit} if declared.admits and admit is not None else {}))
    return declared.frames(answer, resolve) if declared.frames is not None and resolve is not None else answer


def _chosen(param: Param, value: Any, model: Any, reads: str) -> Any:
    """`value` of a parameter whose choices the input decides (`schema.model_choice`), the
    first of them when None; `NotFoundError` naming them when it is not one."""
    assert param.choices_of is not None  # `answer_route` asks only for such parameters
    choices = list(param.choices_of(model))
    if value is None and choices:
        return choices[0]
    if value is None:
        raise NotFoundError(f"this {reads} holds no {param.name} to choose")
    if value not in choices:
        shown = repr(value[:40]) if isinstance(value, str) else value
        raise NotFoundError(f"this {reads} has no {param.name} {shown}; {param.name} choices: "
                            f"{', '.join(map(str, choices)) or 'none'}")
    return value
