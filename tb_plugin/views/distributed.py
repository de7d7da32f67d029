"""Distributed view: computation / communication overlap per step, collective statistics with
data-transfer and synchronizing time, and the devices of every worker of one span.

The collective calls it counts, their sizes and their matching across workers come from
`collectives` (shared with the Job and FLOPs views).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import NULLABLE, SPAN, Persisted, declare, documented, route, tab
from ..trace.model import TraceModel
from .collectives import FSDP_PHASES, WORKER_CALLS, collective_calls, fsdp_phase, gbps, match_calls, process_groups
from .common import (cached, collective_op_mask, device_activity, enclosing_op_where, kernel_flags, operator_tree,
                     step_windows)
from .coverage import COVERAGE, MISSING_RANKS, MissingRank, coverage, missing_ranks
from .intervals import exclusive_time, union_length


_WORKER = ("worker", "str", "", "the worker (rank) the row belongs to")
_NAME = ("name", "str", "", "the collective the program asked for: all_reduce, all_gather, reduce_scatter, ...")
_BACKEND = ("backend_name", "str", "", "the backend's own op that ran it (gloo:all_reduce, nccl:all_reduce), '' if none")
_GROUP = ("process_group", "str", "", "process group description (default_pg, mesh_dp, ...), '' if the trace does not say")
_GROUP_SIZE = ("group_size", "int64", "count", "ranks in the process group, -1 when unknown")
_ALGBW = ("algbw_gbps", "float64", "gb/s", "algorithm bandwidth: message_bytes / transfer time (NCCL's algbw); null if unknown",
          NULLABLE)
_BUSBW = ("busbw_gbps", "float64", "gb/s", "bus bandwidth: algbw x NCCL's factor for the collective and group size",
          NULLABLE)

CALLS = declare(
    "distributed_calls", "one collective call of one worker, matched with the same call on the other workers",
    _WORKER, _NAME, _BACKEND, _GROUP, _GROUP_SIZE,
    ("start_us", "float64", "us", "host start, relative to that worker's trace origin"),
    ("duration_us", "float64", "us", "device time of its kernels when on_device, else its host interval"),
    ("on_device", "bool", "", "duration is the summed time of communication kernels"),
    ("size_bytes", "float64", "bytes", "input message size (In msg nelems x dtype, else input shapes); null if unknown",
     NULLABLE),
    ("message_bytes", "float64", "bytes", "NCCL's message size S: the larger of input and output; null if unknown",
     NULLABLE),
    ("match_by", "str", "", "how it was matched across workers: seq or order"),
    ("match_group", "str", "", "the process group (seq) or the name, with |size when every rank's size is equal"),
    ("match_index", "int64", "count", "Seq, or the occurrence index within match_group"),
    ("matched_workers", "int64", "count", "workers holding this collective"),
    ("transfer_measured", "bool", "", "what ran the transfer was recorded: communication kernels, or a host back-end's "
     "(gloo, mpi) own op; else duration_us is only when the call was issued"),
    ("transfer_us", "float64", "us", "data-transfer time: the shortest measured duration over the matched workers; "
     "null when this call's transfer was not measured", NULLABLE),
    ("synchronizing_us", "float64", "us", "duration - transfer_us: time spent waiting for other ranks; null with transfer_us",
     NULLABLE),
    _ALGBW, _BUSBW,
    ("no_bandwidth_reason", "str", "", "why the bandwidths are null though the size may be known ('' when they are not)"),
    ("wait_us", "float64", "us", "host time in _c10d_functional::wait_tensor waiting for this call's result (0 none)"),
)
COLLECTIVES = declare(
    "distributed_collectives", "one worker's calls of one collective in one process group",
    _WORKER, _GROUP, _NAME, _BACKEND, _GROUP_SIZE,
    ("calls", "int64", "count", "calls"),
    ("size_bytes", "float64", "bytes", "summed input size; null if any call's size is unknown", NULLABLE),
    ("mean_size_bytes", "float64", "bytes", "size_bytes / calls", NULLABLE),
    ("message_bytes", "float64", "bytes", "summed NCCL message size S; null if any call's is unknown", NULLABLE),
    ("total_us", "float64", "us", "summed call duration"),
    ("mean_us", "float64", "us", "total_us / calls"),
    ("transfer_us", "float64", "us", "summed data-transfer time of the calls whose transfer was measured; null when none was",
     NULLABLE),
    ("synchronizing_us", "float64", "us", "summed synchronizing time of those calls; null when none was measured", NULLABLE),
    _ALGBW, _BUSBW,
    ("no_bandwidth_reason", "str", "", "why the bandwidths are null though the size may be known ('' when they are not)"),
    ("wait_us", "float64", "us", "summed host time in wait_tensor for these calls"),
)
GROUPS = declare(
    "distributed_groups", "one process group of one worker: the communication time spent in it",
    _WORKER, _GROUP, _GROUP_SIZE,
    ("ranks", "str", "", "global ranks of the group as distributedInfo.pg_config lists them, '' if unknown"),
    ("calls", "int64", "count", "collective calls in the group"),
    ("total_us", "float64", "us", "summed call duration"),
    ("transfer_us", "float64", "us", "summed data-transfer time of the calls whose transfer was measured"),
    ("synchronizing_us", "float64", "us", "summed synchronizing time of those calls"),
    ("share_pct", "float64", "pct", "total_us as a share of the worker's summed collective time", NULLABLE),
)
FSDP = declare(
    "distributed_fsdp", "one worker's time in one FSDP phase during one step, from FSDP's own annotations",
    _WORKER,
    ("step", "int64", "count", "the ProfilerStep#N number (0 for a trace without steps)"),
    ("phase", "str", "", "unshard, reduce_scatter, reshard or other (see `fsdp_phase`)"),
    ("annotations", "int64", "count", "FSDP:: annotations of the phase that start in the step"),
    ("host_us", "float64", "us", "host time inside the phase's annotations (nested phases counted once, in order)"),
    ("communication_us", "float64", "us", "union of the communication its collectives ran (kernels, else host ops)"),
    ("exposed_us", "float64", "us", "the part of communication_us that overlapped no computation"),
)
_STEP_PARTS = (
    ("computation_us", "float64", "us",
     "union of non-communication kernels; for a worker without kernels, of its operators (collectives excluded)"),
    ("overlap_us", "float64", "us", "time where computation and communication run at once"),
    ("communication_us", "float64", "us",
     "union of communication kernels and of the host intervals of a host back-end's (gloo, mpi) collective work"),
    ("other_us", "float64", "us", "step - computation - communication + overlap (neither)"),
    ("total_us", "float64", "us", "the step window's length"),
)
DISTRIBUTED_STEPS = declare(
    "distributed_steps", "one step of one worker (`common.step_windows`)",
    _WORKER, ("step", "int64", "", "the ProfilerStep#N number (0 for a trace without steps)"), *_STEP_PARTS)
DISTRIBUTED_ALL_STEPS = declare(
    "distributed_all_steps", "one worker: the mean per step of its distributed_steps rows (the old plugin's \"All steps\")",
    _WORKER, ("steps", "int64", "count", "steps of the worker"), *_STEP_PARTS)
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
    ("transfer_us", "float64", "us", "summed data-transfer time of its collectives whose transfer was measured"),
    ("synchronizing_us", "float64", "us", "summed synchronizing time of those collectives"),
)
STEP_COLUMNS = DISTRIBUTED_STEPS.names
ALL_STEPS_COLUMNS = DISTRIBUTED_ALL_STEPS.names
DEVICE_COLUMNS = DISTRIBUTED_DEVICES.names
CALL_COLUMNS = CALLS.names
COLLECTIVE_COLUMNS = COLLECTIVES.names
GROUP_COLUMNS = GROUPS.names
_CALL_TABLE_COLUMNS = ["worker", "root", "request", "name", "backend_name", "process_group", "group_size", "start_us", "end_us",
                       "device_us", "kernels", "on_device", "duration_us", "size_bytes", "message_bytes", "bus_factor",
                       "pg_name", "seq", "wait_us", "device_start_us", "device_end_us", "transfer_measured"]


@dataclass
class DistributedView:
    """Tables of the distributed view; see `distributed` for their columns."""

    steps: pd.DataFrame
    all_steps: pd.DataFrame
    calls: pd.DataFrame
    collectives: pd.DataFrame
    collective_time: pd.DataFrame
    groups: pd.DataFrame
    fsdp: pd.DataFrame
    devices: pd.DataFrame
    coverage: pd.DataFrame
    missing: pd.DataFrame


@documented(DISTRIBUTED_STEPS, DISTRIBUTED_ALL_STEPS, CALLS, COLLECTIVES, DISTRIBUTED_COLLECTIVE_TIME, GROUPS, FSDP,
            DISTRIBUTED_DEVICES, COVERAGE, MISSING_RANKS)
def distributed(models: Mapping[str, TraceModel]) -> DistributedView:
    """Computation/communication per step, collectives, process groups and devices of several
    workers.

    Parameters
    ----------
    models : dict[str, TraceModel]
        Worker name -> the model of one span of that worker (all the same span of one run).

    Returns
    -------
    DistributedView
        ``steps`` (declared as `DISTRIBUTED_STEPS`) -- one row per worker per step
        (`common.step_windows`); ``all_steps`` (`DISTRIBUTED_ALL_STEPS`) -- one row per
        worker, the mean per step of those (as the old plugin's "All steps").

        ``calls`` -- one row per collective call (`collective_calls`) with its matching
        (declared as `CALLS`).

        ``collectives`` -- one row per worker, process group, collective and backend op
        (declared as `COLLECTIVES`): counts, sizes, durations, transfer and synchronizing
        time summed over the calls, and the bandwidths of the sums.

        ``collective_time`` (`DISTRIBUTED_COLLECTIVE_TIME`) -- one row per worker that has
        collectives: its summed transfer and synchronizing time.

        ``groups`` -- one row per worker per process group (declared as `GROUPS`): every
        group the worker's ``distributedInfo.pg_config`` lists (with 0 calls when none ran
        in it) and "" for calls whose group the trace does not say.

        ``fsdp`` -- one row per worker, step and FSDP phase, for workers whose trace holds
        FSDP's ``FSDP::*`` annotations (declared as `FSDP`; see `fsdp_breakdown`).

        ``devices`` (`DISTRIBUTED_DEVICES`) -- one row per worker per device it used (one row
        with device_id -1 when it used none), from ``distributedInfo`` and ``deviceProperties``.

        ``coverage`` (`COVERAGE`, one row) -- how many of the span's workers the view covers;
        ``missing`` (`MISSING_RANKS`) -- each worker whose trace did not load, with its reason
        (`combine`'s ``missing``; none here, where every model is given).

    Notes
    -----
    Duration of a call: the summed duration of the communication kernels launched inside its
    op nest when there are any (NCCL), else its host interval (gloo, or any call whose
    kernels are not linked).

    Matching a call across workers: by (``Process Group Name``, ``Seq``) when the call's
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
    and synchronizing 0 (``matched_workers`` is 1). Only what ran the transfer measures it:
    communication kernels, or the op a host back-end (gloo, mpi) runs the collective in on
    a thread of its own. A call with neither (a one-rank NCCL group launches no kernel; a
    trace whose back-end work was not recorded) has only the host interval in which it was
    issued: its transfer, synchronizing time and bandwidths are null
    (``transfer_measured`` false, ``no_bandwidth_reason`` says so), and that interval is not
    communication in ``steps`` either, so it overlaps nothing. A group of one rank moves no
    data: no bandwidth, whatever its kernels took.

    Bandwidths follow NCCL's definitions (nccl-tests, doc/PERFORMANCE.md), with the data
    transfer time as the collective's time: algbw = S / transfer time, S the message size
    (``message_bytes``: the larger of the collective's input and output, so the whole
    gathered tensor of an all_gather, the whole input of a reduce_scatter); busbw = algbw x
    `bus_factor` (2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and
    all_to_all, 1 for broadcast, reduce, send and recv), which compares with the link's
    bandwidth whatever the collective. GB/s are 10^9 bytes per second. Sums in
    ``collectives`` divide summed S (and summed S x factor) by summed transfer time. NaN
    where S, the group size or the factor is unknown.
    """
    return combine({worker: worker_part(model) for worker, model in models.items()})


@dataclass(eq=False)  # identity semantics: held weakly by the server's reply cache
class WorkerPart:
    """What the distributed view needs of one worker's model: small tables, so a view over
    many ranks never needs all their models in memory at once (see `combine`)."""

    steps: pd.DataFrame
    calls: pd.DataFrame
    devices: pd.DataFrame
    groups: pd.DataFrame
    fsdp: pd.DataFrame


# A `WorkerPart` as the disk cache stores it (one row per worker's step, call, ...).
WORKER_PART = Persisted("distributed", WorkerPart, {
    "steps": declare("distributed_part_steps", "one step of one worker, before its worker is named",
                     *DISTRIBUTED_STEPS.columns_named(*STEP_COLUMNS[1:])),
    "calls": WORKER_CALLS,
    "devices": declare("distributed_part_devices", "one device of one worker, before its worker is named",
                       *DISTRIBUTED_DEVICES.columns_named(*DISTRIBUTED_DEVICES.names[1:])),
    "groups": declare("distributed_part_groups", "one process group distributedInfo.pg_config lists",
                      *WORKER_CALLS.columns_named("pg_name", "process_group", "group_size"), GROUPS.column("ranks")),
    "fsdp": FSDP,
})


def worker_part(model: TraceModel) -> WorkerPart:
    """The `WorkerPart` of one worker's model (columns as in `distributed`, without `worker`)."""
    calls = collective_calls(model)
    return WorkerPart(steps=_worker_steps(model, calls), calls=calls, devices=_worker_devices(model),
                      groups=process_groups(model), fsdp=fsdp_breakdown(model))


def combine(parts: Mapping[str, WorkerPart], missing: Mapping[str, MissingRank] | None = None) -> DistributedView:
    """The `DistributedView` of {worker name: `WorkerPart`}, `distributed` of their models;
    `missing` is {worker: `coverage.MissingRank`} of the span's workers whose trace did not load, named in
    ``coverage`` and ``missing`` and left out of every other table."""
    step_parts, call_parts, device_parts, group_parts, fsdp_parts = [], [], [], [], []
    for worker, part in parts.items():  # one iteration per worker
        step_parts.append(part.steps.assign(worker=worker))
        call_parts.append(part.calls.assign(worker=worker))
        device_parts.append(part.devices.assign(worker=worker))
        group_parts.append(part.groups.assign(worker=worker))
        fsdp_parts.append(part.fsdp.assign(worker=worker))

    steps = _concat(step_parts, STEP_COLUMNS)
    steps["worker"] = steps["worker"].astype(str)
    steps["step"] = steps["step"].astype(np.int64)
    all_steps = steps.groupby("worker", sort=False).agg(
        steps=("step", "size"),
        computation_us=("computation_us", "mean"),
        overlap_us=("overlap_us", "mean"),
        communication_us=("communication_us", "mean"),
        other_us=("other_us", "mean"),
        total_us=("total_us", "mean"),
    ).reset_index()[ALL_STEPS_COLUMNS]
    all_steps["steps"] = all_steps["steps"].astype(np.int64)

    calls = match_calls(_concat(call_parts, _CALL_TABLE_COLUMNS))
    configured = _concat(group_parts, ["worker", "process_group", "group_size", "ranks"])
    collectives = _collectives(calls)
    collective_time = collectives.groupby("worker", sort=True)[["transfer_us", "synchronizing_us"]].sum().reset_index()
    return DistributedView(steps=DISTRIBUTED_STEPS.frame(steps), all_steps=DISTRIBUTED_ALL_STEPS.frame(all_steps),
                           calls=CALLS.frame(calls), collectives=collectives,
                           collective_time=DISTRIBUTED_COLLECTIVE_TIME.frame(collective_time),
                           groups=_groups(calls, configured), fsdp=FSDP.frame(_concat(fsdp_parts, FSDP.names)),
                           devices=DISTRIBUTED_DEVICES.frame(_concat(device_parts, DEVICE_COLUMNS)),
                           coverage=coverage(len(parts), missing or {}), missing=missing_ranks(missing or {}))


_TEXT_COLUMNS = {"worker", "phase", "name", "backend_name", "process_group", "pg_name", "ranks", "backend", "device_name",
                 "compute_capability"}
_INT_COLUMNS = {"step", "root", "request", "annotations", "kernels", "seq", "rank", "world_size", "device_id", "group_size"}


def _concat(parts: Sequence[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """Per-worker tables stacked; with no workers, an empty table of the same columns and dtypes."""
    if not parts:
        dtype = lambda c: str if c in _TEXT_COLUMNS else np.int64 if c in _INT_COLUMNS else bool if c == "on_device" \
            else np.float64  # noqa: E731
        return pd.DataFrame({c: pd.Series(dtype=dtype(c)) for c in columns})
    return pd.concat(parts, ignore_index=True)[columns]


def _communication_intervals(model: TraceModel, calls: pd.DataFrame) \
        -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(start, end) of communication: communication kernels, and the host intervals of the
    calls a host back-end (gloo, mpi) ran; a call that launched no kernel on a device
    back-end (a one-rank NCCL group) was only issued, and is no communication time."""
    comm, _ = kernel_flags(model)
    k_start = model.kernels["ts"].to_numpy()
    k_end = k_start + model.kernels["dur"].to_numpy()
    host = calls[~calls["on_device"] & calls["transfer_measured"]]
    return (np.concatenate([k_start[comm], host["start_us"].to_numpy()]),
            np.concatenate([k_end[comm], host["end_us"].to_numpy()]))


def _computation_intervals(model: TraceModel) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(start, end) of computation: non-communication kernels; for a worker without kernels,
    its operators (the rows the operator view lists) that are not collectives."""
    k = model.kernels
    if len(k):
        comm, _ = kernel_flags(model)
        k_start = k["ts"].to_numpy()
        return k_start[~comm], (k_start + k["dur"].to_numpy())[~comm]
    ops = model.ops
    compute = operator_tree(model)["is_operator"].to_numpy() & ~collective_op_mask(model)
    start = ops["ts"].to_numpy()[compute]
    return start, start + ops["dur"].to_numpy()[compute]


def _worker_steps(model: TraceModel, calls: pd.DataFrame) -> pd.DataFrame:
    windows = step_windows(model)
    bounds = (windows["start_us"].to_numpy(), windows["end_us"].to_numpy())
    comm_start, comm_end = _communication_intervals(model, calls)
    comp_start, comp_end = _computation_intervals(model)
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


def _innermost_phase(model: TraceModel, rows: npt.NDArray[np.int64], phase: npt.NDArray[np.int64]) \
        -> npt.NDArray[np.int64]:
    """For op rows (-1 allowed): the phase index of the innermost ancestor-or-self with an FSDP
    phase (index into FSDP_PHASES, -1 when none)."""
    around = enclosing_op_where(model, rows, phase >= 0)
    return np.where(around >= 0, phase[np.clip(around, 0, None)], -1) if len(phase) else around


def fsdp_breakdown(model: TraceModel) -> pd.DataFrame:
    """Per step and FSDP phase (`fsdp_phase`): the host time in FSDP's annotations, the
    communication of the collectives issued inside them, and how much of it was exposed.

    Columns as declared in `FSDP` (without worker); empty when the trace has no FSDP
    annotations.

    Notes
    -----
    host_us: the step window's time covered by annotations of each phase, each instant
    counted once, for the first phase in `FSDP_PHASES` order that covers it (FSDP2 nests its
    ``FSDP::all_gather`` inside ``FSDP::pre_forward``: that time is unshard, not other).
    communication_us: union, within the step, of the communication kernels launched inside
    the phase's annotations and of the host intervals of its collective calls that launched
    none (for gloo, the ``gloo:*`` op on gloo's thread paired with the front-end call made
    inside the annotation; see `collective_calls`). exposed_us: the part of that union
    that no computation (as in the ``steps`` table) overlapped -- time the step waited
    for FSDP's communication.
    """
    return cached(model, "distributed_fsdp", lambda: _build_fsdp(model))


def _build_fsdp(model: TraceModel) -> pd.DataFrame:
    ops = model.ops
    codes, uniques = pd.factorize(np.asarray(ops["name"].cat.categories, dtype=object))
    per_category = np.array([FSDP_PHASES.index(p) if p else -1 for p in map(fsdp_phase, uniques)], dtype=np.int64)
    phase = per_category[codes][ops["name"].cat.codes.to_numpy()] if len(ops) else np.zeros(0, np.int64)
    annotated = phase >= 0
    if not annotated.any():
        return FSDP.frame(pd.DataFrame(columns=[c for c in FSDP.names if c != "worker"] + ["worker"]))
    windows = step_windows(model)
    bounds = (windows["start_us"].to_numpy(), windows["end_us"].to_numpy())
    a_start = ops["ts"].to_numpy()
    a_end = a_start + ops["dur"].to_numpy()
    host = exclusive_time(bounds, [(a_start[annotated & (phase == i)], a_end[annotated & (phase == i)])
                                   for i in range(len(FSDP_PHASES))])

    comm, _ = kernel_flags(model)
    k = model.kernels
    k_start = k["ts"].to_numpy()[comm]
    k_end = k_start + k["dur"].to_numpy()[comm]
    k_phase = _innermost_phase(model, k["op"].to_numpy()[comm], phase)
    calls = collective_calls(model)
    on_host = calls[~calls["on_device"]]
    c_phase = _innermost_phase(model, np.where(on_host["request"] >= 0, on_host["request"], on_host["root"]), phase)
    c_start = np.concatenate([k_start, on_host["start_us"].to_numpy()])
    c_end = np.concatenate([k_end, on_host["end_us"].to_numpy()])
    c_phase = np.concatenate([k_phase, c_phase])
    computation = _computation_intervals(model)

    starts = np.searchsorted(bounds[0], a_start[annotated], side="right") - 1
    inside = (starts >= 0) & (a_start[annotated] < bounds[1][np.clip(starts, 0, None)])
    counts = np.zeros((len(bounds[0]), len(FSDP_PHASES)), dtype=np.int64)
    np.add.at(counts, (starts[inside], phase[annotated][inside]), 1)
    rows = []
    for i, name in enumerate(FSDP_PHASES):  # four phases
        mine = c_phase == i
        communication = union_length(c_start[mine], c_end[mine], bounds)
        exposed = exclusive_time(bounds, [computation, (c_start[mine], c_end[mine])])[:, 1]
        rows.append(pd.DataFrame({"step": windows["step"].to_numpy(), "phase": name, "annotations": counts[:, i],
                                  "host_us": host[:, i], "communication_us": communication,
                                  "exposed_us": exposed}))
    table = pd.concat(rows, ignore_index=True).assign(worker="")
    return FSDP.frame(table.sort_values(["step", "phase"], key=lambda c: c.map(FSDP_PHASES.index)
                                        if c.name == "phase" else c, kind="stable"))


def _sum_or_nan(calls: pd.DataFrame, column: str, keys: list[str]) -> pd.Series:
    """Per group of `keys`: the sum of `column`, NaN when any value is NaN."""
    grouped = calls.assign(_unknown=calls[column].isna()).groupby(keys, sort=False)
    return grouped[column].sum().where(~grouped["_unknown"].any())


def _collectives(calls: pd.DataFrame) -> pd.DataFrame:
    keys = ["worker", "process_group", "name", "backend_name"]
    grouped = calls.groupby(keys, sort=False).agg(
        group_size=("group_size", "max"),
        calls=("duration_us", "size"),
        total_us=("duration_us", "sum"),
        transfer_us=("transfer_us", lambda t: t.sum(min_count=1)),
        synchronizing_us=("synchronizing_us", lambda t: t.sum(min_count=1)),
        wait_us=("wait_us", "sum"),
        no_bandwidth_reason=("no_bandwidth_reason", "max"),
    )
    for column in ("size_bytes", "message_bytes", "bus_bytes"):
        grouped[column] = _sum_or_nan(calls, column, keys)
    # bandwidth over the calls that have one: their bytes over their transfer time
    with_bandwidth = calls[calls["no_bandwidth_reason"] == ""]
    moved = with_bandwidth.groupby(keys, sort=False)["transfer_us"].sum().reindex(grouped.index)
    for column in ("message_bytes", "bus_bytes"):
        grouped[f"moved_{column}"] = _sum_or_nan(with_bandwidth, column, keys).reindex(grouped.index)
    grouped["moved_us"] = moved
    grouped["no_bandwidth_reason"] = grouped["no_bandwidth_reason"].where(moved.isna(), "")
    grouped = grouped.reset_index()
    grouped["mean_size_bytes"] = grouped["size_bytes"] / grouped["calls"].where(grouped["calls"] > 0)
    grouped["mean_us"] = grouped["total_us"] / grouped["calls"].where(grouped["calls"] > 0)
    grouped["algbw_gbps"] = gbps(grouped["moved_message_bytes"], grouped["moved_us"])
    grouped["busbw_gbps"] = gbps(grouped["moved_bus_bytes"], grouped["moved_us"])
    out = COLLECTIVES.frame(grouped)
    return out.sort_values(["worker", "total_us"], ascending=[True, False], kind="stable").reset_index(drop=True)


def _groups(calls: pd.DataFrame, configured: pd.DataFrame) -> pd.DataFrame:
    """Communication time per worker per process group, over the groups pg_config lists and
    the groups the calls name ("" when unknown)."""
    per_group = calls.groupby(["worker", "process_group"], sort=False).agg(
        call_size=("group_size", "max"),
        calls=("duration_us", "size"),
        total_us=("duration_us", "sum"),
        transfer_us=("transfer_us", "sum"),
        synchronizing_us=("synchronizing_us", "sum"),
    ).reset_index()
    listed = configured.drop_duplicates(["worker", "process_group"])
    table = listed.merge(per_group, on=["worker", "process_group"], how="outer")
    table["group_size"] = table["group_size"].fillna(table["call_size"]).fillna(-1)
    table["ranks"] = table["ranks"].fillna("")
    table[["calls", "total_us", "transfer_us", "synchronizing_us"]] = \
        table[["calls", "total_us", "transfer_us", "synchronizing_us"]].fillna(0)
    worker_total = table.groupby("worker")["total_us"].transform("sum")
    table["share_pct"] = 100.0 * table["total_us"] / worker_total.where(worker_total > 0)
    table = table.astype({"calls": np.int64, "group_size": np.int64})
    out = GROUPS.frame(table)
    return out.sort_values(["worker", "total_us"], ascending=[True, False], kind="stable").reset_index(drop=True)


def _worker_devices(model: TraceModel) -> pd.DataFrame:
    info = model.distributed

    def int_or_missing(value: Any) -> int:
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

    def prop(column: str, default: object) -> npt.NDArray[np.object_]:
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


# This view's tab of the page (see `schema.tab`): for a run of several workers, and for one
# rank's collectives and bandwidths too (a single-rank NCCL job, or one rank's trace of a
# larger one), as 0.4.3 had.
DISTRIBUTED_TAB = tab("distributed", 100, lambda offer: offer.worker_count > 1 or collective_op_mask(offer.model).any())


DISTRIBUTED_ROUTE = route(
    "distributed",
    'Several workers of one run, one span: steps (worker, step, computation_us, overlap_us, '
    'communication_us, other_us, total_us), all_steps (mean per step), collective_time (worker, '
    'transfer_us, synchronizing_us), collectives (worker, process_group, name, backend_name, group_size, '
    'calls, size_bytes, mean_size_bytes, message_bytes, total_us, mean_us, transfer_us, synchronizing_us,'
    ' algbw_gbps, busbw_gbps, wait_us), calls (one row per collective call, same naming, with its '
    'matching), groups (worker, process_group, group_size, ranks, calls, total_us, transfer_us, '
    'synchronizing_us, share_pct), fsdp (worker, step, phase, annotations, host_us, communication_us, '
    'exposed_us; empty without FSDP:: annotations), devices, coverage (one row: ranks loaded, '
    'ranks_total, text naming each rank that did not load and why) and missing (worker, rank where the '
    'start of its file gives it, reason: each worker whose trace did not load, left out of the other '
    "tables; the view answers for the others, 422 only when none loads). A collective's name is what the "
    "program asked for (all_reduce, all_gather, reduce_scatter, ...), backend_name the backend's op that "
    "ran it (gloo runs FSDP2's reduce_scatter as gloo:all_reduce); process_group is the group's "
    "description, '' when the trace does not say (gloo on CPU writes no record_param_comms). algbw/busbw "
    "follow nccl-tests' definitions over the data-transfer time. With table=NAME, that one table (JSON or"
    ' CSV); with tables=A,B, those (JSON).',
    combine, tables={"steps": DISTRIBUTED_STEPS, "all_steps": DISTRIBUTED_ALL_STEPS, "collectives": COLLECTIVES,
                     "collective_time": DISTRIBUTED_COLLECTIVE_TIME, "calls": CALLS, "groups": GROUPS, "fsdp": FSDP,
                     "devices": DISTRIBUTED_DEVICES, "coverage": COVERAGE, "missing": MISSING_RANKS},
    reads=SPAN, part="distributed")
