"""Distributed view: computation / communication overlap per step, collective statistics with
data-transfer and synchronizing time, and the devices of every worker of one span.

One collective call is recorded by several nested host ops (``c10d::allreduce_`` >
``record_param_comms`` > ``nccl:all_reduce``); this module reduces each nest to one *call*
(see `collective_calls`), gives it a duration, and matches calls across workers.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..schema import NULLABLE, Column, Table, declare, documented
from ..trace.linking import ancestor_where
from ..trace.model import TraceModel
from .common import (BACKEND_OP_NAME, _cached, collective_op_mask, device_activity, kernel_flags, name_mask,
                     operator_tree, step_windows)
from .intervals import exclusive_time, union_length


# Bytes per element, keyed by the normalised spelling of a dtype (lower case, without
# `c10::` / `at::` / `torch.` prefixes and spaces): `Input type` writes C++ names ("float",
# "long int", "c10::Half"), `record_param_comms` writes ScalarType names ("Float", "Long").
_ELEMENT_BYTES = {
    **dict.fromkeys(["float", "float32"], 4),
    **dict.fromkeys(["double", "float64"], 8),
    **dict.fromkeys(["half", "float16"], 2),
    **dict.fromkeys(["bfloat16"], 2),
    **dict.fromkeys(["longint", "long", "int64", "int64_t", "longlong", "longlongint"], 8),
    **dict.fromkeys(["int", "int32", "int32_t"], 4),
    **dict.fromkeys(["short", "shortint", "int16", "int16_t"], 2),
    **dict.fromkeys(["signedchar", "char", "int8", "int8_t"], 1),
    **dict.fromkeys(["unsignedchar", "byte", "uint8", "uint8_t"], 1),
    **dict.fromkeys(["bool"], 1),
    **dict.fromkeys(["unsignedshort", "unsignedshortint", "uint16", "uint16_t"], 2),
    **dict.fromkeys(["unsignedint", "uint32", "uint32_t"], 4),
    **dict.fromkeys(["unsignedlong", "unsignedlongint", "unsignedlonglong", "uint64", "uint64_t"], 8),
    **dict.fromkeys(["complex<half>", "complexhalf", "complex32"], 4),
    **dict.fromkeys(["complex<float>", "complexfloat", "complex64"], 8),
    **dict.fromkeys(["complex<double>", "complexdouble", "complex128"], 16),
    **dict.fromkeys(["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"], 1),
}
_DTYPE_PREFIX = re.compile(r"c10::|at::|torch\.|std::|\s+")

_WORKER = ("worker", "str", "", "the worker (file name prefix)")
_STEP_PARTS = (
    ("computation_us", "float64", "us",
     "union of non-communication kernels; for a worker without kernels, of its operators (collectives excluded)"),
    ("overlap_us", "float64", "us", "time where computation and communication run at once"),
    ("communication_us", "float64", "us",
     "union of communication kernels and of collective calls' host intervals that launched none"),
    ("other_us", "float64", "us", "step - computation - communication + overlap (neither)"),
    ("total_us", "float64", "us", "the step window's length"),
)
DISTRIBUTED_STEPS = declare(
    "distributed_steps", "one step of one worker (`common.step_windows`)",
    _WORKER, ("step", "int64", "", "the ProfilerStep#N number (0 for a trace without steps)"), *_STEP_PARTS)
DISTRIBUTED_ALL_STEPS = declare(
    "distributed_all_steps", "one worker: the mean per step of its distributed_steps rows (the old plugin's \"All steps\")",
    _WORKER, ("steps", "int64", "count", "steps of the worker"), *_STEP_PARTS)
_SIZE = ("size_bytes", "float64", "bytes", "bytes sent by the call; null when unknown", NULLABLE)
COLLECTIVE_CALLS = declare(
    "collective_calls", "one collective call (a nest of collective ops) of one worker, before matching, by start",
    ("root", "int64", "", "row in ops of the nest's outermost op"),
    ("name", "str", "", "the backend op's name (nccl:all_reduce, gloo:broadcast), else the Collective name, else the root's"),
    ("start_us", "float64", "us", "host start of the root, relative to the trace origin"),
    ("end_us", "float64", "us", "host end of the root, relative to the trace origin"),
    ("device_us", "float64", "us", "summed duration of the communication kernels launched in the nest; 0 when none"),
    ("kernels", "int64", "count", "communication kernels launched in the nest"),
    ("on_device", "bool", "", "kernels > 0"),
    ("duration_us", "float64", "us", "device_us when on_device, else end_us - start_us"),
    _SIZE,
    ("process_group", "str", "", "the process group name; empty when absent"),
    ("seq", "int64", "", "the `Seq` arg; -1 when absent"),
    ("group_size", "int64", "count", "the `Group size` arg; -1 when absent"),
    ("device_start_us", "float64", "us", "start of the first communication kernel of the nest; null when none", NULLABLE),
    ("device_end_us", "float64", "us", "end of the last communication kernel of the nest; null when none", NULLABLE),
)
DISTRIBUTED_CALLS = declare(
    "distributed_calls", "one collective call of one worker with its match on the other workers",
    _WORKER,
    ("name", "str", "", "collective name (see collective_calls)"),
    ("start_us", "float64", "us", "host start relative to that worker's trace origin"),
    ("duration_us", "float64", "us", "the call's duration (Notes)"),
    ("on_device", "bool", "", "whether the duration is kernel time"),
    _SIZE,
    ("match_by", "str", "", "\"seq\" or \"order\""),
    ("match_group", "str", "", "the process group for seq; the name (|<size_bytes> for equal-size collectives) for order"),
    ("match_index", "int64", "", "`Seq`, or the occurrence index within match_group"),
    ("matched_workers", "int64", "count", "workers holding this collective"),
    ("transfer_us", "float64", "us", "the shortest duration of the matched calls: time moving data"),
    ("synchronizing_us", "float64", "us", "duration_us - transfer_us: time waiting for the other workers"),
)
DISTRIBUTED_COLLECTIVES = declare(
    "distributed_collectives", "one collective name of one worker, by worker then total time",
    _WORKER, ("name", "str", "", "collective name"),
    ("calls", "int64", "count", "calls"),
    ("size_bytes", "float64", "bytes", "total over the calls; null if any call's size is unknown", NULLABLE),
    ("mean_size_bytes", "float64", "bytes", "size_bytes / calls", NULLABLE),
    ("total_us", "float64", "us", "summed call duration"),
    ("mean_us", "float64", "us", "mean call duration"),
    ("transfer_us", "float64", "us", "summed data-transfer time"),
    ("synchronizing_us", "float64", "us", "summed synchronizing time (total_us - transfer_us)"),
)
DISTRIBUTED_DEVICES = declare(
    "distributed_devices", "one device a worker used (one row with device_id -1 when it used none)",
    _WORKER,
    ("backend", "str", "", "distributedInfo backend; empty if unknown"),
    ("rank", "int64", "", "distributedInfo rank; -1 if unknown"),
    ("world_size", "int64", "count", "distributedInfo world_size; -1 if unknown"),
    ("device_id", "int64", "", "device number; -1 for none"),
    ("device_name", "str", "", "deviceProperties name; empty if unknown"),
    ("memory_bytes", "float64", "bytes", "device memory", NULLABLE),
    ("compute_capability", "str", "", "\"major.minor\"; empty if unknown"),
    ("sm_count", "float64", "count", "streaming multiprocessors", NULLABLE),
)
DISTRIBUTED_COLLECTIVE_TIME = declare(
    "distributed_collective_time", "one worker that has collectives: its summed transfer and synchronizing time, by worker",
    _WORKER,
    ("transfer_us", "float64", "us", "summed data-transfer time of its collectives"),
    ("synchronizing_us", "float64", "us", "summed synchronizing time of its collectives"),
)
STEP_COLUMNS = DISTRIBUTED_STEPS.names
ALL_STEPS_COLUMNS = DISTRIBUTED_ALL_STEPS.names
CALL_COLUMNS = DISTRIBUTED_CALLS.names
COLLECTIVE_COLUMNS = DISTRIBUTED_COLLECTIVES.names
DEVICE_COLUMNS = DISTRIBUTED_DEVICES.names
COLLECTIVE_TIME_COLUMNS = DISTRIBUTED_COLLECTIVE_TIME.names


def element_bytes(dtype):
    """Bytes per element of a dtype spelled as in traces ("float", "c10::Half", "BFloat16",
    "long int", ...); NaN when unknown (e.g. "TensorList", "Scalar", "")."""
    key = _DTYPE_PREFIX.sub("", str(dtype)).lower()
    return float(_ELEMENT_BYTES.get(key, np.nan))


def _shape_elements(shape):
    """Elements of one input: a shape [d0, d1, ...] (0-d tensor: []) -> product."""
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        return np.nan
    return float(np.prod(shape, dtype=np.float64)) if shape else 1.0


def input_bytes(input_dims, input_type):
    """Bytes of an op's tensor inputs from its `Input Dims` / `Input type` JSON texts.

    Inputs typed "" or "Scalar" (non-tensors) count 0; the result is NaN when any tensor
    input has an unknown element type (TensorList, an unknown dtype) or shape, or when the op
    recorded no shapes at all.
    """
    try:
        dims = json.loads(input_dims) if input_dims else None
        types = json.loads(input_type) if input_type else None
    except ValueError:
        return np.nan
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types) or not dims:
        return np.nan
    total, tensors = 0.0, 0
    for shape, dtype in zip(dims, types):  # a handful of inputs per distinct (shape, type) pair
        if dtype in ("", "Scalar", None):
            continue
        tensors += 1
        total += _shape_elements(shape) * element_bytes(dtype)
    return total if tensors else np.nan


def _pair_bytes(dims, types):
    """`input_bytes` of categorical dims/types columns, evaluated once per distinct pair."""
    if not len(dims):
        return np.zeros(0)
    pairs = pd.DataFrame({"d": np.asarray(dims, dtype=object), "t": np.asarray(types, dtype=object)})
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(pairs))
    per_pair = np.array([input_bytes(d, t) for d, t in uniques], dtype=np.float64)
    return per_pair[codes]


def _outermost_collective(model, rows):
    """For op rows (-1 allowed): the outermost collective op among the row and its ancestors
    (-1 when there is none)."""
    rows = np.asarray(rows, dtype=np.int64)
    if not len(model.ops):
        return np.full(len(rows), -1, dtype=np.int64)
    outermost = ancestor_where(collective_op_mask(model), model.ops["parent"].to_numpy(), model.ops["depth"].to_numpy(),
                               outermost=True)
    return np.where(rows >= 0, outermost[np.clip(rows, 0, None)], -1)


@documented(COLLECTIVE_CALLS)
def collective_calls(model):
    """One row per collective call of one worker, before matching across workers.

    A call is a *nest* of collective ops (`common.collective_op_mask`) on one thread, named
    by its outermost collective op (the root), e.g. ``c10d::allreduce_`` >
    ``record_param_comms`` > ``nccl:all_reduce``.

    Returns
    -------
    DataFrame ordered by start_us.

    Notes
    -----
    - Size: ``In msg nelems`` x element size of ``dtype`` from the nest's
      ``record_param_comms``; otherwise the tensor inputs of the backend op (else of the root)
      from ``Input Dims`` x ``Input type``, summed over inputs (`input_bytes`).
    - When any nest of the trace holds a backend op (``nccl:*``, ``gloo:*``, ...), nests with
      neither a backend op nor communication kernels are front-end calls whose work is
      recorded elsewhere (gloo runs it as ``gloo:*`` on a worker thread) and are dropped, so
      that one collective is one call. ``record_param_comms`` nests named ``wait``
      (``Work.wait()``, 0 elements) without kernels are not collectives and are dropped too.
    - Communication kernels whose launching op is in no nest belong to no call (they still
      count as communication time in the step table).
    """
    return _cached(model, "distributed_calls", lambda: _build_calls(model))


def _categorical_values(column, rows):
    """Decoded strings of a categorical column at `rows` (decoding only those rows)."""
    categories = np.asarray(column.cat.categories, dtype=object)
    return categories[column.cat.codes.to_numpy()[rows]] if len(rows) else np.zeros(0, dtype=object)


def _build_calls(model):
    ops = model.ops
    coll_rows = np.flatnonzero(collective_op_mask(model))
    roots = _outermost_collective(model, coll_rows)
    members = pd.DataFrame({
        "row": coll_rows,
        "root": roots,
        "depth": ops["depth"].to_numpy()[coll_rows],
        "is_backend": name_mask(ops["name"], BACKEND_OP_NAME.match)[coll_rows],
        "is_rpc": (ops["name"] == "record_param_comms").to_numpy()[coll_rows],
    }).sort_values(["root", "depth", "row"], kind="stable")

    comm, _ = kernel_flags(model)
    k = model.kernels
    k_root = _outermost_collective(model, k["op"].to_numpy()[comm])
    linked = k_root >= 0
    k_ts = k["ts"].to_numpy()[comm][linked]
    k_dur = k["dur"].to_numpy()[comm][linked]
    kernel_time = pd.DataFrame({"dur": k_dur, "ts": k_ts, "end": k_ts + k_dur}).groupby(k_root[linked]).agg(
        sum=("dur", "sum"), size=("dur", "size"), first_start=("ts", "min"), last_end=("end", "max"))

    chain = pd.DataFrame(index=pd.Index(np.unique(roots), name="root"))
    backend = members[members["is_backend"]].drop_duplicates("root").set_index("root")["row"]
    rpc = members[members["is_rpc"]].drop_duplicates("root").set_index("root")["row"]
    chain["backend"] = backend.reindex(chain.index).fillna(-1).astype(np.int64)
    chain["rpc"] = rpc.reindex(chain.index).fillna(-1).astype(np.int64)
    chain["device_us"] = kernel_time["sum"].reindex(chain.index).fillna(0.0).astype(np.float64)
    chain["kernels"] = kernel_time["size"].reindex(chain.index).fillna(0).astype(np.int64)
    chain["device_start_us"] = kernel_time["first_start"].reindex(chain.index).astype(np.float64)
    chain["device_end_us"] = kernel_time["last_end"].reindex(chain.index).astype(np.float64)
    root = chain.index.to_numpy(dtype=np.int64)
    b, r = chain["backend"].to_numpy(), chain["rpc"].to_numpy()
    has_b, has_r = b >= 0, r >= 0
    safe_b, safe_r = np.where(has_b, b, root), np.where(has_r, r, root)
    name = np.where(has_b, _categorical_values(ops["name"], safe_b),
                    np.where(has_r, _categorical_values(ops["collective_name"], safe_r),
                             _categorical_values(ops["name"], root)))
    kernels = chain["kernels"].to_numpy()
    keep = (has_b | (kernels > 0) | ~has_b.any()) & ~((name == "wait") & (kernels == 0))
    chain, root, name, has_b, has_r, safe_b, safe_r, kernels = (
        chain[keep], root[keep], name[keep], has_b[keep], has_r[keep], safe_b[keep], safe_r[keep], kernels[keep])

    dims = ops["input_dims"].to_numpy()
    types = ops["input_type"].to_numpy()
    shape_bytes = _pair_bytes(dims[safe_b], types[safe_b])
    nelems = ops["in_msg_nelems"].to_numpy()[safe_r].astype(np.float64)
    dtype_codes, dtype_uniques = pd.factorize(ops["dtype"].to_numpy()[safe_r])
    rpc_element = np.array([element_bytes(u) for u in dtype_uniques], dtype=np.float64)[dtype_codes] \
        if len(root) else np.zeros(0)
    rpc_bytes = np.where(has_r & (nelems >= 0), nelems * rpc_element, np.nan)
    size = np.where(np.isfinite(rpc_bytes), rpc_bytes, shape_bytes)

    start = ops["ts"].to_numpy()[root]
    end = start + ops["dur"].to_numpy()[root]
    device_us = chain["device_us"].to_numpy()
    calls = pd.DataFrame({
        "root": root,
        "name": pd.array(name, dtype=object),
        "start_us": start,
        "end_us": end,
        "device_us": device_us,
        "kernels": kernels,
        "on_device": kernels > 0,
        "duration_us": np.where(kernels > 0, device_us, end - start),
        "size_bytes": size.astype(np.float64),
        "process_group": np.where(has_r, _categorical_values(ops["process_group_name"], safe_r), ""),
        "seq": np.where(has_r, ops["collective_seq"].to_numpy()[safe_r], -1).astype(np.int64),
        "group_size": np.where(has_r, ops["group_size"].to_numpy()[safe_r], -1).astype(np.int64),
        "device_start_us": chain["device_start_us"].to_numpy(),
        "device_end_us": chain["device_end_us"].to_numpy(),
    })
    calls["name"] = calls["name"].astype(str)
    calls["process_group"] = calls["process_group"].astype(str)
    return COLLECTIVE_CALLS.frame(calls.sort_values(["start_us", "end_us"], kind="stable"))


@dataclass
class DistributedView:
    """Tables of the distributed view; see `distributed` for their columns."""

    steps: pd.DataFrame
    all_steps: pd.DataFrame
    calls: pd.DataFrame
    collectives: pd.DataFrame
    collective_time: pd.DataFrame
    devices: pd.DataFrame


@documented(DISTRIBUTED_STEPS, DISTRIBUTED_ALL_STEPS, DISTRIBUTED_CALLS, DISTRIBUTED_COLLECTIVES,
            DISTRIBUTED_COLLECTIVE_TIME, DISTRIBUTED_DEVICES)
def distributed(models: Mapping[str, TraceModel]) -> DistributedView:
    """Computation/communication per step, collectives and devices of several workers.

    Parameters
    ----------
    models : dict[str, TraceModel]
        Worker name -> the model of one span of that worker (all the same span of one run).

    Returns
    -------
    DistributedView
        Its tables ``steps``, ``all_steps``, ``calls``, ``collectives``, ``collective_time``
        and ``devices`` are the ones declared below, in that order.

    Notes
    -----
    Duration of a call: the summed duration of the communication kernels launched inside its
    op nest when there are any (NCCL), else its host interval (gloo, or any call whose
    kernels are not linked).

    Matching a call across workers: by (process group, ``Seq``) when the call's
    ``record_param_comms`` carries ``Seq``; otherwise by (name, occurrence index), the index
    counting that worker's calls of that name in order of their host start. For
    collectives whose input size must be equal on every rank (all_reduce, broadcast,
    reduce, all_gather, reduce_scatter; see `same_size_on_every_rank`) the size is part of
    the name here: gloo runs collectives on several work threads, so two broadcasts issued
    back to back (80 floats, then 3 longs) may start in either order on different ranks,
    and calls of different sizes cannot be the same collective. Counts need not agree
    across workers: extra calls on one worker simply match fewer workers.

    Data transfer time of a call = the minimum duration of its matched calls over the
    workers holding it (the part every worker spent moving data); synchronizing time =
    duration - transfer time. A call no other worker holds has transfer = its own duration
    and synchronizing 0 (``matched_workers`` is 1).
    """
    return combine({worker: worker_part(model) for worker, model in models.items()})


@dataclass(eq=False)  # identity semantics: held weakly by the server's reply cache
class WorkerPart:
    """What the distributed view needs of one worker's model: small tables, so a view over
    many ranks never needs all their models in memory at once (see `combine`)."""

    steps: pd.DataFrame
    calls: pd.DataFrame
    devices: pd.DataFrame


def worker_part(model: TraceModel) -> "WorkerPart":
    """The `WorkerPart` of one worker's model (columns as in `distributed`, without `worker`)."""
    calls = collective_calls(model)
    return WorkerPart(steps=_worker_steps(model, calls), calls=calls, devices=_worker_devices(model))


def combine(parts: Mapping[str, "WorkerPart"]) -> DistributedView:
    """The `DistributedView` of {worker name: `WorkerPart`}; `distributed` of their models."""
    step_parts, call_parts, device_parts = [], [], []
    for worker, part in parts.items():  # one iteration per worker
        step_parts.append(part.steps.assign(worker=worker))
        call_parts.append(part.calls.assign(worker=worker))
        device_parts.append(part.devices.assign(worker=worker))

    steps = _concat(step_parts, DISTRIBUTED_STEPS)
    all_steps = steps.groupby("worker", sort=False).agg(
        steps=("step", "size"),
        computation_us=("computation_us", "mean"),
        overlap_us=("overlap_us", "mean"),
        communication_us=("communication_us", "mean"),
        other_us=("other_us", "mean"),
        total_us=("total_us", "mean"),
    ).reset_index()

    calls = match_calls(_concat(call_parts, _WORKER_CALLS))
    collectives = _collectives(calls)
    collective_time = collectives.groupby("worker", sort=True)[["transfer_us", "synchronizing_us"]].sum().reset_index()
    return DistributedView(steps=steps, all_steps=DISTRIBUTED_ALL_STEPS.frame(all_steps),
                           calls=DISTRIBUTED_CALLS.frame(calls), collectives=collectives,
                           collective_time=DISTRIBUTED_COLLECTIVE_TIME.frame(collective_time),
                           devices=_concat(device_parts, DISTRIBUTED_DEVICES))


# The calls of every worker before matching: collective_calls with the worker.
_WORKER_CALLS = Table("worker_calls", "one collective call of one worker", (Column(*_WORKER), *COLLECTIVE_CALLS.columns))


def _concat(parts, table):
    """Per-worker tables stacked as `table` declares them (an empty one with no workers)."""
    return table.frame(pd.concat(parts, ignore_index=True) if parts else {name: [] for name in table.names})


def _worker_steps(model, calls):
    windows = step_windows(model)
    bounds = (windows["start_us"].to_numpy(), windows["end_us"].to_numpy())
    comm, _ = kernel_flags(model)
    k = model.kernels
    k_start = k["ts"].to_numpy()
    k_end = k_start + k["dur"].to_numpy()
    host = calls[~calls["on_device"]]
    comm_start = np.concatenate([k_start[comm], host["start_us"].to_numpy()])
    comm_end = np.concatenate([k_end[comm], host["end_us"].to_numpy()])
    if len(k):
        comp_start, comp_end = k_start[~comm], k_end[~comm]
    else:
        ops = model.ops
        compute = operator_tree(model)["is_operator"].to_numpy() & ~collective_op_mask(model)
        comp_start = ops["ts"].to_numpy()[compute]
        comp_end = comp_start + ops["dur"].to_numpy()[compute]
    parts = exclusive_time(bounds, [(comm_start, comm_end), (comp_start, comp_end)])
    communication, computation_only, neither = parts[:, 0], parts[:, 1], parts[:, 2]
    computation = union_length(comp_start, comp_end, bounds)
    overlap = np.clip(computation - computation_only, 0.0, None)
    return pd.DataFrame({
        "step": windows["step"].to_numpy(),
        "computation_us": computation,
        "overlap_us": overlap,
        "communication_us": communication,
        "other_us": neither,
        "total_us": bounds[1] - bounds[0],
    })


def same_size_on_every_rank(name):
    """Whether a collective's input has the same size on every rank (all_reduce, broadcast,
    reduce, all_gather, reduce_scatter, barrier ...), so the size identifies it; not for
    all_to_all, gather, scatter, send/recv or coalesced groups."""
    kind = name.lower().rsplit(":", 1)[-1].replace("_", "")
    if any(word in kind for word in ("alltoall", "send", "recv", "coalesced")):
        return False
    if "gather" in kind and "allgather" not in kind:
        return False
    return not ("scatter" in kind and "reducescatter" not in kind)


def match_calls(calls):
    """Add match keys, matched_workers, transfer_us and synchronizing_us (see `distributed`) to
    the collective calls of several workers (a `worker` column tells whose)."""
    calls = calls.sort_values(["worker", "start_us", "end_us"], kind="stable").reset_index(drop=True)
    names = calls["name"].to_numpy(dtype=object)
    codes, uniques = pd.factorize(names)
    invariant = np.array([same_size_on_every_rank(u) for u in uniques], dtype=bool)[codes] if len(names) else \
        np.zeros(0, dtype=bool)
    size = calls["size_bytes"]
    size_text = size.round().astype("Int64").astype(str).where(size.notna(), "?").to_numpy(dtype=object)
    order_group = np.where(invariant, names + "|" + size_text, names) if len(names) else np.zeros(0, dtype=object)
    by_seq = calls["seq"].to_numpy() >= 0
    calls["match_by"] = np.where(by_seq, "seq", "order")
    calls["match_group"] = np.where(by_seq, calls["process_group"].to_numpy(dtype=object), order_group).astype(str)
    occurrence = calls.groupby(["worker", "match_by", "match_group"], sort=False).cumcount().to_numpy()
    calls["match_index"] = np.where(by_seq, calls["seq"].to_numpy(), occurrence).astype(np.int64)
    groups = calls.groupby(["match_by", "match_group", "match_index"], sort=False)
    calls["matched_workers"] = groups["worker"].transform("nunique").astype(np.int64)
    calls["transfer_us"] = groups["duration_us"].transform("min").astype(np.float64)
    calls["synchronizing_us"] = calls["duration_us"] - calls["transfer_us"]
    return calls


def _collectives(calls):
    unknown = calls["size_bytes"].isna()
    grouped = calls.assign(unknown_size=unknown).groupby(["worker", "name"], sort=False).agg(
        calls=("duration_us", "size"),
        size_bytes=("size_bytes", "sum"),
        unknown_size=("unknown_size", "any"),
        total_us=("duration_us", "sum"),
        transfer_us=("transfer_us", "sum"),
        synchronizing_us=("synchronizing_us", "sum"),
    ).reset_index()
    grouped["calls"] = grouped["calls"].astype(np.int64)
    grouped["size_bytes"] = np.where(grouped["unknown_size"], np.nan, grouped["size_bytes"]).astype(np.float64)
    grouped["mean_size_bytes"] = grouped["size_bytes"] / grouped["calls"].where(grouped["calls"] > 0)
    grouped["mean_us"] = grouped["total_us"] / grouped["calls"].where(grouped["calls"] > 0)
    grouped = grouped.astype({"worker": str, "name": str})
    return DISTRIBUTED_COLLECTIVES.frame(grouped.sort_values(["worker", "total_us"], ascending=[True, False], kind="stable"))


def _worker_devices(model):
    info = model.distributed

    def int_or_missing(value):
        try:
            return int(value)
        except (TypeError, ValueError):
            return -1

    dev = device_activity(model)
    used = np.unique(dev["device"].to_numpy()[dev["device"].to_numpy() >= 0]) if len(dev) else np.zeros(0, np.int64)
    ids = used.astype(np.int64) if len(used) else np.array([-1], dtype=np.int64)
    props = model.devices
    prop_ids = pd.to_numeric(props["id"], errors="coerce") if len(props) else pd.Series(dtype=np.float64)
    table = None
    if len(props):
        table = props.assign(id=prop_ids).dropna(subset=["id"]).drop_duplicates("id").set_index("id")

    def prop(column, default):
        if table is None or column not in table:
            return np.full(len(ids), default, dtype=object)
        return table[column].reindex(ids.astype(np.float64)).to_numpy(dtype=object)

    major = pd.to_numeric(pd.Series(prop("computeMajor", np.nan)), errors="coerce")
    minor = pd.to_numeric(pd.Series(prop("computeMinor", np.nan)), errors="coerce")
    as_text = lambda numbers: numbers.fillna(0).astype(np.int64).astype(str)  # noqa: E731
    capability = np.where(major.notna() & minor.notna(), as_text(major) + "." + as_text(minor), "")
    names = pd.Series(prop("name", "")).fillna("").astype(str).to_numpy()
    return pd.DataFrame({
        "backend": str(info.get("backend") or ""),
        "rank": int_or_missing(info.get("rank")),
        "world_size": int_or_missing(info.get("world_size")),
        "device_id": ids,
        "device_name": names,
        "memory_bytes": pd.to_numeric(pd.Series(prop("totalGlobalMem", np.nan)), errors="coerce").to_numpy(np.float64),
        "compute_capability": capability.astype(str),
        "sm_count": pd.to_numeric(pd.Series(prop("numSms", np.nan)), errors="coerce").to_numpy(np.float64),
    })
