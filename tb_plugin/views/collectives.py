"""Collective calls as a library: what the Distributed, Job and FLOPs views share.

One collective call is recorded by several nested host ops (``c10d::allreduce_`` >
``record_param_comms`` > ``nccl:all_reduce``); this module reduces each nest to one *call*
(see `collective_calls`), gives it a duration and a message size (element bytes of a
tensor's dtype, `input_bytes`), matches calls across workers (`match_calls`) and names the
FSDP phase of an annotation (`fsdp_phase`). It declares no table and answers no route: the
views built on it do.
"""

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import NULLABLE, declare
from ..trace.model import TraceModel
from .common import BACKEND_OP_NAME, cached, collective_op_mask, enclosing_op_where, kernel_flags, name_mask, texts

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


FSDP_PHASES = ("unshard", "reduce_scatter", "reshard", "other")


# Words of a collective's name (lower case, underscores removed) -> the collective, most
# specific first: "allreduce" holds "reduce", "reducescatter" holds "scatter".
_KINDS = (("reducescatter", "reduce_scatter"), ("allgather", "all_gather"), ("allreduce", "all_reduce"),
          ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("barrier", "barrier"), ("reduce", "reduce"),
          ("gather", "gather"), ("scatter", "scatter"), ("send", "send"), ("recv", "recv"))
# Back-ends that run a collective on a host thread of their own: their op's interval there is
# the transfer (and the wait for the other ranks). A device back-end's host op (nccl:*) only
# issues the kernels: without one there is nothing that measured the transfer.
_HOST_BACKEND = re.compile(r"^(gloo|mpi):", re.I)
_ONE_RANK = "a group of one rank moves no data"
_NOT_MEASURED = "no communication kernel ran it: its host interval is when it was issued, not the transfer"



def element_bytes(dtype: str) -> float:
    """Bytes per element of a dtype spelled as in traces ("float", "c10::Half", "BFloat16",
    "long int", ...); NaN when unknown (e.g. "TensorList", "Scalar", "")."""
    key = _DTYPE_PREFIX.sub("", str(dtype)).lower()
    return float(_ELEMENT_BYTES.get(key, np.nan))


def _shape_elements(shape: object) -> float:
    """Elements of one input: a shape [d0, d1, ...] (0-d tensor: []) -> product."""
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        return np.nan
    return float(np.prod(shape, dtype=np.float64)) if shape else 1.0


def _tensor_inputs(input_dims: str, input_type: str) -> list[float] | None:
    """Bytes of each tensor input from `Input Dims` / `Input type` JSON texts; None when the op
    recorded no shapes or any tensor input has an unknown element type or shape (NaN kept)."""
    try:
        dims = json.loads(input_dims) if input_dims else None
        types = json.loads(input_type) if input_type else None
    except ValueError:
        return None
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types) or not dims:
        return None
    # inputs typed "" or "Scalar" are not tensors; a handful of inputs per distinct pair
    return [_shape_elements(shape) * element_bytes(dtype) for shape, dtype in zip(dims, types)
            if dtype not in ("", "Scalar", None)]


def input_bytes(input_dims: str, input_type: str) -> float:
    """Bytes of an op's tensor inputs from its `Input Dims` / `Input type` JSON texts.

    Inputs typed "" or "Scalar" (non-tensors) count 0; the result is NaN when any tensor
    input has an unknown element type (TensorList, an unknown dtype) or shape, or when the op
    recorded no shapes at all.
    """
    sizes = _tensor_inputs(input_dims, input_type)
    return float(sum(sizes)) if sizes else np.nan


def largest_input_bytes(input_dims: str, input_type: str) -> float:
    """Bytes of an op's largest tensor input (NaN as for `input_bytes`). For c10d's ops whose
    output tensor is an argument (``_allgather_base_(out, in)``,
    ``_reduce_scatter_base_(out, in)``) this is NCCL's message size S, the larger of the
    collective's input and output."""
    sizes = _tensor_inputs(input_dims, input_type)
    return float(max(sizes)) if sizes else np.nan


def _pair_bytes(dims: pd.Series, types: pd.Series, measure: Callable[[str, str], float] = input_bytes) \
        -> npt.NDArray[np.float64]:
    """`measure` of categorical dims/types columns, evaluated once per distinct pair."""
    if not len(dims):
        return np.zeros(0)
    pairs = pd.DataFrame({"d": np.asarray(dims, dtype=object), "t": np.asarray(types, dtype=object)})
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(pairs))
    per_pair = np.array([measure(d, t) for d, t in uniques], dtype=np.float64)
    return per_pair[codes]


def requested_collective(name: str) -> str:
    """The collective a name stands for, in one spelling for every way traces write it:
    ``c10d::_reduce_scatter_base_``, ``reduce_scatter_tensor_coalesced`` (a
    ``Collective name``), ``_c10d_functional::reduce_scatter_tensor`` and
    ``nccl:reduce_scatter`` are all ``reduce_scatter``; "" for a name that is none."""
    text = str(name).rsplit(":", 1)[-1].lower().replace("_", "")
    return next((kind for word, kind in _KINDS if word in text), "")


def bus_factor(kind: str, group_size: float) -> float:
    """NCCL's bus-bandwidth factor (nccl-tests, doc/PERFORMANCE.md): busbw = algbw x factor,
    with n ranks: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
    broadcast, reduce, send, recv 1; NaN for other collectives or an unknown group size."""
    n = float(group_size)
    if n < 1:
        return np.nan
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "all_to_all": (n - 1) / n, "broadcast": 1.0, "reduce": 1.0, "send": 1.0, "recv": 1.0}.get(kind, np.nan)


def process_groups(model: TraceModel) -> pd.DataFrame:
    """The process groups a worker's trace lists in ``distributedInfo.pg_config``: columns
    pg_name, process_group (``pg_desc``), group_size (``pg_size``, -1 unknown), ranks (text
    like "0,2"); empty when the trace has no pg_config."""
    config = model.distributed.get("pg_config")
    rows = []
    for group in config if isinstance(config, list) else ():  # a handful of groups per job
        if not isinstance(group, dict):
            continue
        ranks = group.get("ranks")
        size = group.get("pg_size")
        rows.append({"pg_name": str(group.get("pg_name", "")), "process_group": str(group.get("pg_desc", "")),
                     "group_size": int(size) if isinstance(size, int) and not isinstance(size, bool) else -1,
                     "ranks": ",".join(str(r) for r in ranks) if isinstance(ranks, list) else ""})
    return pd.DataFrame(rows, columns=["pg_name", "process_group", "group_size", "ranks"]).astype(
        {"pg_name": str, "process_group": str, "group_size": np.int64, "ranks": str})


def _outermost_collective(model: TraceModel, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For op rows (-1 allowed): the outermost collective op among the row and its ancestors
    (-1 when there is none)."""
    return enclosing_op_where(model, rows, collective_op_mask(model), outermost=True)


# One worker's calls before they are matched across workers: what the job and distributed
# views' per-file summaries keep of it (`views.job.RANK_PART`, `views.distributed.WORKER_PART`).
WORKER_CALLS = declare(
    "collective_calls", "one collective call of one worker, before matching across workers (`collective_calls`)",
    ("root", "int64", "", "row in the model's ops of the nest's outermost op"),
    ("request", "int64", "", "row of the front-end op that asked for it, -1 when the trace has none"),
    ("wait_us", "float64", "us", "host time in _c10d_functional::wait_tensor waiting for its result (0 none)"),
    ("name", "str", "", "the collective asked for (`requested_collective`)"),
    ("backend_name", "str", "", "the backend op's name such as gloo:all_reduce, '' when none"),
    ("process_group", "str", "", "process group description, '' when unknown"),
    ("group_size", "int64", "count", "ranks in the process group, -1 when unknown"),
    ("start_us", "float64", "us", "host start of the root, relative to the trace origin"),
    ("end_us", "float64", "us", "host end of the root, relative to the trace origin"),
    ("device_us", "float64", "us", "summed duration of the communication kernels launched inside the nest (0 none)"),
    ("kernels", "int64", "count", "those kernels"),
    ("on_device", "bool", "", "kernels > 0"),
    ("duration_us", "float64", "us", "device_us when on_device, else end_us - start_us"),
    ("size_bytes", "float64", "bytes", "input message size; null when unknown", NULLABLE),
    ("message_bytes", "float64", "bytes", "NCCL's message size S; null when unknown", NULLABLE),
    ("bus_factor", "float64", "", "NCCL's bus bandwidth factor of the collective that ran", NULLABLE),
    ("pg_name", "str", "", "the Process Group Name arg, '' when absent"),
    ("seq", "int64", "", "the Seq arg, -1 when absent"),
    ("device_start_us", "float64", "us", "first start of its communication kernels; null when none", NULLABLE),
    ("device_end_us", "float64", "us", "last end of its communication kernels; null when none", NULLABLE),
    ("transfer_measured", "bool", "", "what ran the transfer was recorded: communication kernels or a host back-end's op"),
)


def collective_calls(model: TraceModel) -> pd.DataFrame:
    """One row per collective call of one worker, before matching across workers.

    A call is a *nest* of collective ops (`common.collective_op_mask`) on one thread, its
    root the outermost, e.g. ``c10d::allreduce_`` > ``record_param_comms`` >
    ``nccl:all_reduce``. Where the backend runs the work on a thread of its own (gloo: the
    main thread records ``c10d::_reduce_scatter_base_``, a gloo thread ``gloo:all_reduce``),
    the two nests are paired into one call (see Notes).

    Returns
    -------
    DataFrame with columns
        root (int64, row in `model.ops`), request (int64, row of the front-end op that asked
        for it, -1 when the trace has none), name (str, the collective asked for, see
        `requested_collective`: from ``record_param_comms``' ``Collective name``, else the
        front-end op (``c10d::*``, ``_c10d_functional::*``), else the backend op),
        backend_name (str, the backend op's name such as ``gloo:all_reduce``, "" when none),
        process_group (str, description: ``Process Group Description``, else the
        ``distributedInfo.pg_config`` entry of ``Process Group Name``, else the only group
        pg_config lists; "" when unknown), group_size (int64, ``Group size``, else the
        group's pg_size; -1), start_us, end_us (float64 µs, host interval of the root,
        relative to the trace origin), device_us (float64 µs, summed duration of the
        communication kernels launched inside the nest; 0 when none), kernels (int64, count
        of those kernels), on_device (bool, kernels > 0), duration_us (float64 µs: device_us
        when on_device, else end_us - start_us), size_bytes (float64 bytes, NaN when
        unknown), message_bytes (float64 bytes, NCCL's S, NaN when unknown), bus_factor
        (float64, `bus_factor` of the collective that ran: the backend op's when there is
        one, since gloo runs FSDP2's reduce_scatter as a whole all_reduce), pg_name (str,
        ``Process Group Name``, "" when absent), seq (int64, the ``Seq`` arg, -1 when
        absent), wait_us (float64 µs, `_functional_waits`), device_start_us, device_end_us
        (float64 µs, first start and last end of its communication kernels; NaN when none);
        ordered by start_us.

    Notes
    -----
    - Size: ``In msg nelems`` x element size of ``dtype`` from the nest's
      ``record_param_comms``; otherwise the tensor inputs of the backend op (else of the root)
      from ``Input Dims`` x ``Input type``, summed over inputs (`input_bytes`). Message size
      S: max(``In msg nelems``, ``Out msg nelems``) x element size; otherwise the largest
      tensor input of the front-end op (its output tensor is an argument), else of the
      backend op (`largest_input_bytes`).
    - When any nest of the trace holds a backend op (``nccl:*``, ``gloo:*``, ...), nests with
      neither a backend op nor communication kernels are front-end calls whose work is
      recorded elsewhere. Each is paired with a backend-only nest: per collective, the i-th
      front-end call (by start) with the i-th backend op, counting only backend ops that
      start after the first front-end call (earlier ones were issued before the profiling
      window). gloo hands work to its threads in the order it was issued, so start order is
      issue order. A front-end ``reduce_scatter`` pairs with ``*:all_reduce`` ops when the
      backend has no reduce-scatter of its own (gloo). The front-end call then gives the
      name, and it is not a call of its own. ``record_param_comms`` nests named ``wait``
      (``Work.wait()``, 0 elements) without kernels are not collectives and are dropped too,
      as are ``_c10d_functional::wait_tensor`` (not a collective op).
    - Communication kernels whose launching op is in no nest belong to no call (they still
      count as communication time in the step table).
    """
    return cached(model, "distributed_calls", lambda: _build_calls(model))


def _kinds(names: npt.NDArray[Any]) -> npt.NDArray[np.object_]:
    """`requested_collective` of an array of names, once per distinct name."""
    codes, uniques = pd.factorize(np.asarray(names, dtype=object))
    per_name = np.array([requested_collective(u) for u in uniques], dtype=object)
    return per_name[codes] if len(codes) else np.zeros(0, dtype=object)


def _pair_front_ends(front: pd.DataFrame, backend: pd.DataFrame) -> dict[int, int]:
    """Pair front-end nests with backend-only nests (see `collective_calls`, Notes).

    `front` and `backend` are DataFrames with columns row (position in the nest table),
    kind (collective) and start; returns {backend row: front row}."""
    backend_kinds = set(backend["kind"])
    key = front["kind"].where(front["kind"].isin(backend_kinds) | (front["kind"] != "reduce_scatter"), "all_reduce")
    front = front.assign(key=key).sort_values("start", kind="stable")
    first = front.groupby("key")["start"].min()
    backend = backend.assign(key=backend["kind"]).sort_values("start", kind="stable")
    backend = backend[backend["start"].to_numpy() >= first.reindex(backend["key"]).to_numpy()]
    front["i"] = front.groupby("key").cumcount()
    backend["i"] = backend.groupby("key").cumcount()
    pairs = backend.merge(front, on=["key", "i"], suffixes=("_b", "_f"))
    return dict(zip(pairs["row_b"].to_numpy(), pairs["row_f"].to_numpy()))


_WAIT = "_c10d_functional::wait_tensor"


def _functional_waits(model: TraceModel, request: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Per call (its front-end op row in `request`, -1 none): the host time of the
    ``_c10d_functional::wait_tensor`` that waited for its result. A functional collective
    returns at once and the program waits for the result later, on the same thread, in issue
    order; so per thread the i-th functional collective pairs with the i-th wait that starts
    after it (waits before the first collective were for collectives issued before the
    profiling window)."""
    ops = model.ops
    waits = np.flatnonzero((ops["name"] == _WAIT).to_numpy())
    is_functional = name_mask(ops["name"], lambda n: n.startswith("_c10d_functional::"))
    out = np.zeros(len(request), dtype=np.float64)
    functional = (request >= 0) & is_functional[np.clip(request, 0, None)] if len(ops) else np.zeros(len(request), bool)
    if not len(waits) or not functional.any():
        return out
    thread = ops["thread"].to_numpy()
    calls = pd.DataFrame({"pos": np.flatnonzero(functional), "row": request[functional]})
    calls = calls.assign(thread=thread[calls["row"]], ts=ops["ts"].to_numpy()[calls["row"]]).sort_values("ts")
    wait = pd.DataFrame({"row": waits, "thread": thread[waits], "ts": ops["ts"].to_numpy()[waits],
                         "dur": ops["dur"].to_numpy()[waits]}).sort_values("ts")
    first = calls.groupby("thread")["ts"].min()
    wait = wait[wait["ts"].to_numpy() >= first.reindex(wait["thread"]).to_numpy()]
    calls["i"] = calls.groupby("thread").cumcount()
    wait["i"] = wait.groupby("thread").cumcount()
    pairs = calls.merge(wait, on=["thread", "i"], suffixes=("", "_wait"))
    out[pairs["pos"].to_numpy()] = pairs["dur"].to_numpy()
    return out


def _build_calls(model: TraceModel) -> pd.DataFrame:
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
    kernels = chain["kernels"].to_numpy()
    start = ops["ts"].to_numpy()[root]
    root_names = texts(ops["name"], root)
    rpc_names = np.where(has_r, texts(ops["collective_name"], np.where(has_r, r, root)), "")
    backend_names = np.where(has_b, texts(ops["name"], np.where(has_b, b, root)), "")
    rpc_kind, root_kind, backend_kind = _kinds(rpc_names), _kinds(root_names), _kinds(backend_names)
    own_kind = np.where(rpc_kind != "", rpc_kind, root_kind)

    # the op that asked for the collective (front end) and the record_param_comms describing
    # it: the nest's own, or those of the front-end nest a gloo-style backend nest pairs with
    is_front = ~has_b & (kernels == 0)
    is_backend_only = has_b & (b == root) & ~has_r & (kernels == 0)
    positions = np.arange(len(root))
    paired = _pair_front_ends(
        pd.DataFrame({"row": positions[is_front], "kind": own_kind[is_front], "start": start[is_front]}),
        pd.DataFrame({"row": positions[is_backend_only], "kind": backend_kind[is_backend_only],
                      "start": start[is_backend_only]}))
    partner = np.full(len(root), -1, dtype=np.int64)
    if paired:
        partner[np.fromiter(paired.keys(), np.int64)] = np.fromiter(paired.values(), np.int64)
    has_p = partner >= 0
    safe_p = np.where(has_p, partner, 0)
    request = np.where(has_p, root[safe_p], np.where(has_b & (b == root), -1, root))
    rpc_row = np.where(has_r, r, np.where(has_p, r[safe_p], -1))
    name = np.where(has_p, own_kind[safe_p], own_kind)
    name = np.where(name != "", name, backend_kind)
    name = np.where(name != "", name, root_names)

    keep = (has_b | (kernels > 0) | ~has_b.any()) & ~((rpc_names == "wait") & ~has_b & (kernels == 0))
    (root, name, backend_names, backend_kind, has_b, b, request, rpc_row, kernels, start) = (
        x[keep] for x in (root, name, backend_names, backend_kind, has_b, b, request, rpc_row, kernels, start))
    device_us = chain["device_us"].to_numpy()[keep]
    device_start = chain["device_start_us"].to_numpy()[keep]
    device_end = chain["device_end_us"].to_numpy()[keep]
    has_rpc = rpc_row >= 0
    safe_rpc = np.where(has_rpc, rpc_row, root)
    safe_request = np.where(request >= 0, request, root)
    safe_b = np.where(has_b, b, root)

    dims = ops["input_dims"].to_numpy()
    types = ops["input_type"].to_numpy()
    shape_bytes = _pair_bytes(dims[safe_b], types[safe_b])
    dtype_codes, dtype_uniques = pd.factorize(ops["dtype"].to_numpy()[safe_rpc])
    rpc_element = np.array([element_bytes(u) for u in dtype_uniques], dtype=np.float64)[dtype_codes] \
        if len(root) else np.zeros(0)
    in_nelems = ops["in_msg_nelems"].to_numpy()[safe_rpc].astype(np.float64)
    out_nelems = ops["out_msg_nelems"].to_numpy()[safe_rpc].astype(np.float64)
    rpc_bytes = np.where(has_rpc & (in_nelems >= 0), in_nelems * rpc_element, np.nan)
    rpc_message = np.where(has_rpc & (in_nelems >= 0), np.maximum(in_nelems, out_nelems) * rpc_element, np.nan)
    request_message = np.where(request >= 0, _pair_bytes(dims[safe_request], types[safe_request],
                                                          largest_input_bytes), np.nan)
    message = np.where(np.isfinite(rpc_message), rpc_message,
                       np.where(np.isfinite(request_message), request_message,
                                _pair_bytes(dims[safe_b], types[safe_b], largest_input_bytes)))

    groups = process_groups(model)
    pg_name = np.where(has_rpc, texts(ops["process_group_name"], safe_rpc), "").astype(str)
    pg_desc = np.where(has_rpc, texts(ops["process_group_desc"], safe_rpc), "").astype(str)
    by_name = groups.drop_duplicates("pg_name").set_index("pg_name")
    named_desc = by_name["process_group"].reindex(pg_name).fillna("").to_numpy(dtype=object)
    only_group = groups["process_group"].iloc[0] if len(groups) == 1 else ""
    process_group = np.where(pg_desc != "", pg_desc, np.where(named_desc != "", named_desc, only_group))
    by_desc = groups.drop_duplicates("process_group").set_index("process_group")["group_size"]
    rpc_size = np.where(has_rpc, ops["group_size"].to_numpy()[safe_rpc], -1)
    group_size = np.where(rpc_size > 0, rpc_size, by_desc.reindex(process_group).fillna(-1).to_numpy())
    ran = np.where(backend_kind != "", backend_kind, name)
    codes, uniques = pd.factorize(pd.MultiIndex.from_arrays([ran.astype(object), group_size.astype(np.int64)]))
    factor = np.array([bus_factor(kind, n) for kind, n in uniques], dtype=np.float64)[codes] \
        if len(root) else np.zeros(0)

    end = start + ops["dur"].to_numpy()[root]
    calls = pd.DataFrame({
        "root": root,
        "request": request,
        "wait_us": _functional_waits(model, request),
        "name": pd.array(name, dtype=object),
        "backend_name": pd.array(backend_names, dtype=object),
        "process_group": np.asarray(process_group, dtype=object),
        "group_size": group_size.astype(np.int64),
        "start_us": start,
        "end_us": end,
        "device_us": device_us,
        "kernels": kernels,
        "on_device": kernels > 0,
        "duration_us": np.where(kernels > 0, device_us, end - start),
        "size_bytes": np.where(np.isfinite(rpc_bytes), rpc_bytes, shape_bytes).astype(np.float64),
        "message_bytes": message.astype(np.float64),
        "bus_factor": factor,
        "pg_name": np.asarray(pg_name, dtype=object),
        "seq": np.where(has_rpc, ops["collective_seq"].to_numpy()[safe_rpc], -1).astype(np.int64),
        "device_start_us": device_start,
        "device_end_us": device_end,
        "transfer_measured": (kernels > 0) | (has_b & name_mask(pd.Series(backend_names, dtype="category"),
                                                                _HOST_BACKEND.match)),
    })
    for column in ("name", "backend_name", "process_group", "pg_name"):
        calls[column] = calls[column].astype(str)
    return calls.sort_values(["start_us", "end_us"], kind="stable").reset_index(drop=True)


def fsdp_phase(name: str) -> str:
    """The phase of an FSDP annotation (FSDP2 writes ``FSDP::<hook>[ (<module>)]``, FSDP1
    ``FullyShardedDataParallel.<hook>``), "" for any other name: ``unshard`` (all-gathers,
    their copy-out, prefetches), ``reduce_scatter`` (gradient reduction and its wait),
    ``reshard`` (freeing the unsharded parameters, which FSDP2 does in ``post_forward``),
    ``other`` (the remaining hooks: pre_forward, pre_backward, accumulate, root callbacks)."""
    text = str(name)
    if not text.startswith(("FSDP::", "FullyShardedDataParallel.")):
        return ""
    hook = text.split("::", 1)[-1].split(".", 1)[-1].split(" ", 1)[0].lower()
    if any(word in hook for word in ("all_gather", "unshard", "prefetch")):
        return "unshard"
    if "reduce" in hook or "rs_wait" in hook:
        return "reduce_scatter"
    if "reshard" in hook or hook == "post_forward":
        return "reshard"
    return "other"


def same_size_on_every_rank(name: str) -> bool:
    """Whether a collective's input has the same size on every rank (all_reduce, broadcast,
    reduce, all_gather, reduce_scatter, barrier ...), so the size identifies it; not for
    all_to_all, gather, scatter, send/recv or coalesced groups."""
    kind = name.lower().rsplit(":", 1)[-1].replace("_", "")
    if any(word in kind for word in ("alltoall", "send", "recv", "coalesced")):
        return False
    if "gather" in kind and "allgather" not in kind:
        return False
    return not ("scatter" in kind and "reducescatter" not in kind)


def match_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """Add match keys, matched_workers, transfer_us, synchronizing_us and bandwidths (see
    `distributed`) to the collective calls of several workers (a `worker` column tells whose)."""
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
    calls["match_group"] = np.where(by_seq, calls["pg_name"].to_numpy(dtype=object), order_group).astype(str)
    occurrence = calls.groupby(["worker", "match_by", "match_group"], sort=False).cumcount().to_numpy()
    calls["match_index"] = np.where(by_seq, calls["seq"].to_numpy(), occurrence).astype(np.int64)
    groups = calls.groupby(["match_by", "match_group", "match_index"], sort=False)
    calls["matched_workers"] = groups["worker"].transform("nunique").astype(np.int64)
    measured = calls["transfer_measured"].to_numpy(dtype=bool)
    shortest = calls["duration_us"].where(measured).groupby(
        [calls["match_by"], calls["match_group"], calls["match_index"]], sort=False).transform("min")
    calls["transfer_us"] = shortest.where(measured).astype(np.float64)
    calls["synchronizing_us"] = calls["duration_us"] - calls["transfer_us"]
    calls["bus_bytes"] = calls["message_bytes"] * calls["bus_factor"]
    one_rank = (calls["group_size"] == 1).to_numpy()
    calls["no_bandwidth_reason"] = np.where(~measured, _NOT_MEASURED, np.where(one_rank, _ONE_RANK, ""))
    moved = calls["transfer_us"].where(~one_rank)
    calls["algbw_gbps"] = gbps(calls["message_bytes"], moved)
    calls["busbw_gbps"] = gbps(calls["bus_bytes"], moved)
    return calls


def gbps(size_bytes: pd.Series, time_us: pd.Series) -> pd.Series:
    """Bytes over microseconds in GB/s (10^9 bytes/s = 10^3 bytes/µs); NaN for a zero time."""
    return (size_bytes / time_us.where(time_us > 0)) / 1e3
