"""Memory view: allocator records per device as a curve, allocation lifetimes and per-operator
statistics.

Every function takes the `TraceModel` and a device name from `memory_devices` ("CPU", "GPU0",
...); an unknown device raises `NotFoundError` naming the valid ones. Optional `start_us` /
`end_us` (relative to the trace origin, inclusive) restrict the answer to a time range.

Attribution rule shared by `memory_events` and `memory_stats`: a `[memory]` record belongs to
the innermost op open on its thread at its time (`model.memory["op"]`), taken after torch's
duplicate-node merge (`common.operator_tree`) and then walked up past ranges that are
structure rather than operators (``ProfilerStep#N``, user annotations, ``Optimizer.*``,
DataLoader ranges: `is_operator` False). The operator a record ends on is its *owner*;
records with no owner (outside every operator) belong to the row ``""``.
"""

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import NULLABLE, declare, documented, integer, model_choice, number, route, tab
from ..errors import BadParameterError, NotFoundError
from ..trace.linking import ancestor_where, roll_up
from ..trace.model import TraceModel
from .common import cached, operator_tree

CPU_DEVICE_TYPE = 0
CUDA_DEVICE_TYPE = 1
MAX_CURVE_POINTS = 2000
# A curve bucket keeps at most this many points: first, last, max and min allocated, max reserved.
_POINTS_PER_BUCKET = 5
_EMPTY_OPS = "aten::empty"

MEMORY_CURVE = declare(
    "memory_curve", "one kept allocator record of the device, in time order; the value holds until the next point",
    ("time_us", "float64", "us", "the record's time, relative to the trace origin"),
    ("allocated_bytes", "float64", "bytes",
     "`Total Allocated` after the record; before PyTorch 1.10 the device's summed `Bytes` since the trace start"),
    ("reserved_bytes", "float64", "bytes",
     "`Total Reserved` after the record; null when the trace has none, and for the CPU (which writes 0)", NULLABLE),
)
MEMORY_EVENTS = declare(
    "memory_events", "one allocation (or one free of memory allocated before the trace, an unmatched free)",
    ("operator", "str", "",
     "owner operator (module docstring); an aten::empty* owner shows as \"<parent> (aten::empty...)\"; "
     "empty outside every operator and for unmatched frees"),
    ("size_bytes", "int64", "bytes", "bytes allocated (freed, for an unmatched free)"),
    ("alloc_us", "float64", "us", "allocation time, relative to the trace origin; null for an unmatched free",
     NULLABLE),
    ("free_us", "float64", "us", "the next free of the same address on the device; null when not freed in the trace",
     NULLABLE),
    ("duration_us", "float64", "us", "free_us - alloc_us; null when either is unknown", NULLABLE),
    ("free_known", "bool", "",
     "whether the record's address lets its free be found (false without `Addr`: null free_us is then unknown)"),
)
MEMORY_STATS = declare(
    "memory_stats", "one operator name that owns, directly or through its callees, a record of the device in range",
    ("operator", "str", "", "operator name; empty for the records no operator owns"),
    ("calls", "int64", "count", "instances (after the duplicate-node merge) overlapping the range; 0 for \"\""),
    ("size_increase_bytes", "int64", "bytes", "summed `Bytes` (allocations +, frees -) of its records and its callees'"),
    ("self_size_increase_bytes", "int64", "bytes", "summed `Bytes` of the records its instances own themselves"),
    ("alloc_count", "int64", "count", "allocation records (`Bytes` > 0), callees' included"),
    ("self_alloc_count", "int64", "count", "allocation records its instances own themselves"),
    ("alloc_bytes", "int64", "bytes", "bytes of those allocations, callees' included"),
    ("self_alloc_bytes", "int64", "bytes", "bytes of the allocations its instances own themselves"),
)
CURVE_COLUMNS = MEMORY_CURVE.names
EVENT_COLUMNS = MEMORY_EVENTS.names
STATS_COLUMNS = MEMORY_STATS.names


def device_name(device_type: int, device_id: int) -> str:
    """Display name of an allocator device: "CPU", "GPU<id>" (CUDA) or "Device<type>:<id>"."""
    if device_type == CPU_DEVICE_TYPE:
        return "CPU"
    if device_type == CUDA_DEVICE_TYPE:
        return f"GPU{device_id}"
    return f"Device{device_type}:{device_id}"


def _device_table(model: TraceModel) -> pd.DataFrame:
    """Distinct (device_type, device_id) pairs with records, display order, with their names."""
    def build() -> pd.DataFrame:
        mem = model.memory
        pairs = mem[["device_type", "device_id"]].drop_duplicates()
        # CPU records all count as one "CPU" device whatever their id.
        pairs = pairs.assign(device_id=np.where(pairs["device_type"] == CPU_DEVICE_TYPE, -1, pairs["device_id"]))
        pairs = pairs.drop_duplicates()
        rank = np.select([pairs["device_type"] == CPU_DEVICE_TYPE, pairs["device_type"] == CUDA_DEVICE_TYPE], [0, 1], 2)
        pairs = pairs.assign(rank=rank).sort_values(["rank", "device_type", "device_id"], kind="stable")
        names = [device_name(t, i) for t, i in zip(pairs["device_type"], pairs["device_id"])]  # per device
        return pd.DataFrame({"name": names, "device_type": pairs["device_type"].to_numpy(),
                             "device_id": pairs["device_id"].to_numpy()})
    return cached(model, "memory_devices", build)


def memory_devices(model: TraceModel) -> list[str]:
    """Devices that have allocator records, CPU first, then GPUs by id, then other types.

    Returns
    -------
    list of str
        "CPU" (device type 0, any id), "GPU<id>" (device type 1, CUDA), "Device<type>:<id>"
        for other device types.
    """
    return _device_table(model)["name"].tolist()


def _device_key(model: TraceModel, device: str) -> tuple[int, int]:
    """(device_type, device_id) of a device name from `memory_devices`; NotFoundError if unknown."""
    table = _device_table(model)
    match = np.flatnonzero(table["name"].to_numpy() == device)
    if not len(match):
        raise NotFoundError(f"unknown memory device {device!r}; devices with memory records: {table['name'].tolist()}")
    return int(table["device_type"].iloc[match[0]]), int(table["device_id"].iloc[match[0]])


def _device_records(model: TraceModel, device: str) -> pd.DataFrame:
    """Records of one device in time order (stable), with their row in `model.memory` as `row`."""
    device_type, device_id = _device_key(model, device)

    def build() -> pd.DataFrame:
        mem = model.memory
        mask = (mem["device_type"] == device_type).to_numpy()
        if device_type != CPU_DEVICE_TYPE:
            mask = mask & (mem["device_id"] == device_id).to_numpy()
        rows = np.flatnonzero(mask)
        rows = rows[np.argsort(mem["ts"].to_numpy()[rows], kind="stable")]
        return mem.iloc[rows].assign(row=rows).reset_index(drop=True)
    return cached(model, ("memory_records", device), build)


def _check_range(start_us: float | None, end_us: float | None) -> None:
    """A time range given the wrong way round is a mistake to report, not an empty answer."""
    if start_us is not None and end_us is not None and end_us < start_us:
        raise BadParameterError(f"end_us ({end_us}) is before start_us ({start_us})")


def _in_range(ts: npt.NDArray[np.float64], start_us: float | None, end_us: float | None) -> npt.NDArray[np.bool_]:
    keep = np.ones(len(ts), dtype=bool)
    if start_us is not None:
        keep &= ts >= start_us
    if end_us is not None:
        keep &= ts <= end_us
    return keep


def full_curve(model: TraceModel, device: str) -> pd.DataFrame:
    """The undownsampled curve of one device (`memory_curve`'s columns), cached: what the
    memory view and the Trace view's memory counters both draw."""
    def build() -> pd.DataFrame:
        rec = _device_records(model, device)
        total = rec["total_allocated"].to_numpy(np.float64)
        reserved = rec["total_reserved"].to_numpy(np.float64)
        if _device_key(model, device)[0] == CPU_DEVICE_TYPE:
            # PyTorch's CPU allocator caches nothing and writes 0 as its reserved total:
            # not a measurement, so it is shown as absent rather than as "0 B reserved".
            reserved = np.full(len(reserved), np.nan)
        if np.isfinite(total).any():
            keep = np.isfinite(total)
            time, allocated, reserved = rec["ts"].to_numpy()[keep], total[keep], reserved[keep]
        else:  # pre-1.10 traces: no totals, so integrate the records (relative to the trace start)
            time = rec["ts"].to_numpy()
            allocated = np.cumsum(rec["bytes"].to_numpy(np.int64)).astype(np.float64)
            reserved = np.full(len(time), np.nan)
        return pd.DataFrame({"time_us": time.astype(np.float64), "allocated_bytes": allocated,
                             "reserved_bytes": reserved})
    return cached(model, ("memory_curve", device), build)


def downsample_indices(time: npt.NDArray[np.float64], allocated: npt.NDArray[Any], reserved: npt.NDArray[Any],
                       max_points: int) -> npt.NDArray[np.int64]:
    """Rows to keep so a step curve of at most ~`max_points` points keeps every extreme.

    The time span is cut into `max_points // 5` equal buckets; each bucket keeps its first
    and last point, the points of its largest and smallest allocated value and of its
    largest reserved value (the earliest on ties). So the global peak and trough survive.
    Returns sorted row positions (all rows when there are at most `max_points`).
    """
    n = len(time)
    if n <= max_points:
        return np.arange(n)
    buckets = max(1, int(max_points) // _POINTS_PER_BUCKET)
    t0, span = float(time[0]), float(time[-1] - time[0])
    if span > 0:
        bucket = np.minimum(((time - t0) / span * buckets).astype(np.int64), buckets - 1)
    else:
        bucket = np.zeros(n, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])  # bucket is non-decreasing
    lasts = np.r_[starts[1:] - 1, n - 1]
    alloc = np.where(np.isnan(allocated), -np.inf, allocated)
    res = np.where(np.isnan(reserved), -np.inf, reserved)
    # lexsort is stable: within a bucket the earliest of equal values comes first.
    top_alloc = np.lexsort((-alloc, bucket))[starts]
    low_alloc = np.lexsort((np.where(np.isinf(alloc), np.inf, alloc), bucket))[starts]
    top_res = np.lexsort((-res, bucket))[starts]
    return np.unique(np.concatenate([starts, lasts, top_alloc, low_alloc, top_res]))


@documented(MEMORY_CURVE)
def memory_curve(model: TraceModel, device: str, start_us: float | None = None, end_us: float | None = None,
                 max_points: int = MAX_CURVE_POINTS) -> pd.DataFrame:
    """Allocated and reserved memory of one device over time, as a step curve.

    Parameters
    ----------
    model : TraceModel
    device : str
        A name from `memory_devices`.
    start_us, end_us : float, optional
        Keep points with ``start_us <= time_us <= end_us`` (µs relative to the trace origin).
    max_points : int
        Downsample to at most about this many points (see `downsample_indices`); the peak,
        the trough and each time bucket's first and last points are always kept.

    Returns
    -------
    DataFrame, one row per kept `[memory]` record of the device, in time order.

    Notes
    -----
    The value holds from one point until the next (draw it as a step). When the trace has
    totals, records without one are left out. The cumulative sum is taken over the whole
    trace before the time range is applied, so zooming does not change the values.
    """
    _check_range(start_us, end_us)
    curve = full_curve(model, device)
    keep = _in_range(curve["time_us"].to_numpy(), start_us, end_us)
    curve = curve[keep].reset_index(drop=True)
    rows = downsample_indices(curve["time_us"].to_numpy(), curve["allocated_bytes"].to_numpy(),
                              curve["reserved_bytes"].to_numpy(), max_points)
    return MEMORY_CURVE.frame(curve.iloc[rows])


@dataclass(frozen=True)
class MemoryPeaks:
    """Peak memory of one device (NaN where unknown).

    Attributes
    ----------
    device : str
    peak_allocated_bytes : float (bytes), the largest ``allocated_bytes`` of the curve
    peak_allocated_us : float (µs relative to the trace origin), its first time
    peak_reserved_bytes : float (bytes), the largest ``reserved_bytes`` (NaN without totals)
    total_memory_bytes : float (bytes), the GPU's ``totalGlobalMem`` from the trace's
        deviceProperties (NaN for the CPU, other devices, or when the trace has none)
    """

    device: str
    peak_allocated_bytes: float
    peak_allocated_us: float
    peak_reserved_bytes: float
    total_memory_bytes: float


def memory_peaks(model: TraceModel, device: str, start_us: float | None = None,
                 end_us: float | None = None) -> "MemoryPeaks":
    """Peak allocated (and when) and peak reserved memory of one device, with its capacity.

    Computed on the full curve of `memory_curve` (never on the downsampled one) within the
    optional time range. Returns a `MemoryPeaks`.
    """
    _check_range(start_us, end_us)
    curve = full_curve(model, device)
    curve = curve[_in_range(curve["time_us"].to_numpy(), start_us, end_us)]
    allocated = curve["allocated_bytes"].to_numpy()
    reserved = curve["reserved_bytes"].to_numpy()
    if len(allocated):
        top = int(np.argmax(allocated))
        peak, peak_us = float(allocated[top]), float(curve["time_us"].to_numpy()[top])
    else:
        peak = peak_us = float("nan")
    peak_reserved = float(np.nanmax(reserved)) if np.isfinite(reserved).any() else float("nan")
    total = float("nan")
    device_type, device_id = _device_key(model, device)
    if device_type == CUDA_DEVICE_TYPE and len(model.devices):
        ids = pd.to_numeric(model.devices["id"], errors="coerce").to_numpy()
        memory = pd.to_numeric(model.devices["totalGlobalMem"], errors="coerce").to_numpy(np.float64)
        hit = np.flatnonzero(ids == device_id)
        if len(hit):
            total = float(memory[hit[0]])
    return MemoryPeaks(device, peak, peak_us, peak_reserved, total)


def _op_owner(model: TraceModel) -> npt.NDArray[np.int64]:
    """Per op row: the row of the operator its records belong to (see the module docstring),
    -1 when neither it nor any ancestor is an operator."""
    def build() -> npt.NDArray[np.int64]:
        tree = operator_tree(model)
        n = len(model.ops)
        node = tree["node"].to_numpy()
        node_parent = tree["node_parent"].to_numpy()
        is_operator = tree["is_operator"].to_numpy()
        live = ~tree["merged"].to_numpy()
        owner = ancestor_where(is_operator, np.where(live, node_parent, -1), model.ops["depth"].to_numpy())
        return owner[node] if n else owner
    return cached(model, "memory_op_owner", build)


def _record_owner(model: TraceModel, op_rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    owner = _op_owner(model)
    op_rows = np.asarray(op_rows, dtype=np.int64)
    if not len(owner):
        return np.full(len(op_rows), -1, dtype=np.int64)
    return np.where(op_rows >= 0, owner[np.clip(op_rows, 0, None)], -1)


def _event_operator_names(model: TraceModel, owner: npt.NDArray[np.int64]) -> npt.NDArray[np.object_]:
    """Operator label per allocation: the owner's name, or "<parent> (aten::empty...)" when the
    owner is an `aten::empty*` op (PyTorch's malloc) with a parent in the operator tree."""
    ops = model.ops
    codes = ops["name"].cat.codes.to_numpy()
    categories = pd.Index(ops["name"].cat.categories).astype(str)
    is_empty_name = np.asarray(categories.str.startswith(_EMPTY_OPS), dtype=bool)
    names = np.asarray(categories, dtype=object)
    node_parent = operator_tree(model)["node_parent"].to_numpy()
    label = np.full(len(owner), "", dtype=object)
    own = owner[owner >= 0]
    if len(own):
        parent = node_parent[own]
        own_names = names[codes[own]]
        parent_names = names[codes[np.clip(parent, 0, None)]]
        under_parent = is_empty_name[codes[own]] & (parent >= 0)
        label[owner >= 0] = np.where(under_parent, parent_names + " (" + own_names + ")", own_names)
    return label


@documented(MEMORY_EVENTS)
def memory_events(model: TraceModel, device: str, start_us: float | None = None,
                  end_us: float | None = None) -> pd.DataFrame:
    """Allocations of one device with their lifetimes.

    Parameters
    ----------
    model : TraceModel
    device : str
        A name from `memory_devices`.
    start_us, end_us : float, optional
        Keep events whose lifetime ``[alloc_us, free_us]`` overlaps ``[start_us, end_us]``; an
        allocation never freed lives to the end of the trace, a free of memory allocated
        before the trace lives from its start. An allocation whose free cannot be known
        (``free_known`` false: no ``Addr``, before PyTorch 1.10) is kept when it was made in
        the range: its lifetime is unknown, and counting it as alive to the end listed every
        earlier allocation in any later range.

    Returns
    -------
    DataFrame, one row per allocation (and per unmatched free), ordered by allocation time
    (unmatched frees first), then free time.

    Notes
    -----
    Pairing sorts the device's records by (address, time): an allocation pairs with the
    record right after it at its address when that record is a free. An allocation followed
    by another allocation of the same address (a lost free) stays unpaired. A free whose
    previous record at its address is not an allocation (memory allocated before profiling
    started) is an unmatched free: operator ``""``, ``alloc_us`` NaN. Traces without
    ``Addr`` (before PyTorch 1.10) cannot pair: their allocations come with NaN free times
    and their frees are left out.
    """
    _check_range(start_us, end_us)
    rec = _device_records(model, device)
    ts = rec["ts"].to_numpy(np.float64)
    addr = rec["addr"].to_numpy(np.int64)
    nbytes = rec["bytes"].to_numpy(np.int64)
    n = len(rec)
    order = np.lexsort((np.arange(n), ts, addr))  # by address, then time, then record order
    a_addr, a_bytes = addr[order], nbytes[order]
    known = a_addr >= 0
    same_next = np.r_[a_addr[1:] == a_addr[:-1], False] & known
    same_prev = np.r_[False, a_addr[1:] == a_addr[:-1]] & known
    is_alloc = a_bytes > 0
    is_free = a_bytes < 0
    next_is_free = same_next & np.r_[is_free[1:], False]
    prev_is_alloc = same_prev & np.r_[False, is_alloc[:-1]]
    allocs = np.flatnonzero(is_alloc)
    paired = next_is_free[allocs]
    free_pos = np.where(paired, allocs + 1, -1)
    alloc_rows = order[allocs]
    free_us = np.where(paired, ts[order[np.clip(free_pos, 0, None)]] if n else np.zeros(0), np.nan)
    orphans = order[np.flatnonzero(is_free & known & ~prev_is_alloc)]
    owner = _record_owner(model, rec["op"].to_numpy()[alloc_rows])
    labels = np.concatenate([np.full(len(orphans), "", dtype=object), _event_operator_names(model, owner)])
    events = pd.DataFrame({
        "operator": pd.array(labels, dtype=str),
        "size_bytes": np.concatenate([-nbytes[orphans], nbytes[alloc_rows]]).astype(np.int64),
        "alloc_us": np.concatenate([np.full(len(orphans), np.nan), ts[alloc_rows]]),
        "free_us": np.concatenate([ts[orphans], free_us]),
    })
    events["duration_us"] = events["free_us"] - events["alloc_us"]
    events["free_known"] = np.concatenate([np.ones(len(orphans), dtype=bool), known[allocs]])
    lo = events["alloc_us"].fillna(-np.inf).to_numpy()
    hi = np.where(events["free_known"].to_numpy(), events["free_us"].fillna(np.inf).to_numpy(), lo)
    keep = np.ones(len(events), dtype=bool)
    if start_us is not None:
        keep &= hi >= start_us
    if end_us is not None:
        keep &= lo <= end_us
    events = events[keep]
    sort = np.lexsort((events["free_us"].fillna(np.inf).to_numpy(), events["alloc_us"].fillna(-np.inf).to_numpy()))
    return MEMORY_EVENTS.frame(events.iloc[sort])


@documented(MEMORY_STATS)
def memory_stats(model: TraceModel, device: str, start_us: float | None = None,
                 end_us: float | None = None) -> pd.DataFrame:
    """Per operator name: calls and how much memory it (and its callees) allocated and freed.

    Parameters
    ----------
    model : TraceModel
    device : str
        A name from `memory_devices`.
    start_us, end_us : float, optional
        Count the records with ``start_us <= ts <= end_us`` and the operator instances that
        overlap the range.

    Returns
    -------
    DataFrame, one row per operator name that owns, directly or through its callees, at
    least one record of the device in the range, sorted by name, plus a last row ``""`` for
    records owned by no operator (when there are any).

    Notes
    -----
    Ownership is defined in the module docstring. Totals accumulate bottom-up along the
    operator tree (level by level), through structural ranges too, so an operator's total
    includes records of callees nested inside a user annotation. Instances are summed per
    name, so an operator nested in another of the same name (not merged) counts its
    callee's records twice, as torch-tb-profiler did. The self columns of all rows sum to
    the device's records in the range.
    """
    _check_range(start_us, end_us)
    rec = _device_records(model, device)
    keep = _in_range(rec["ts"].to_numpy(), start_us, end_us)
    nbytes = rec["bytes"].to_numpy(np.int64)[keep]
    owner = _record_owner(model, rec["op"].to_numpy()[keep])
    ops = model.ops
    n = len(ops)
    slot = np.where(owner >= 0, owner, n)  # slot n: records without an owner
    alloc = nbytes > 0
    # self metrics per op row: size increase, alloc count, alloc bytes, record count
    metrics = np.zeros((n + 1, 4), dtype=np.int64)
    np.add.at(metrics[:, 0], slot, nbytes)
    np.add.at(metrics[:, 1], slot[alloc], 1)
    np.add.at(metrics[:, 2], slot[alloc], nbytes[alloc])
    np.add.at(metrics[:, 3], slot, 1)
    self_metrics = metrics[:n]
    tree = operator_tree(model)
    node_parent = tree["node_parent"].to_numpy()
    total = roll_up(self_metrics, np.where(tree["merged"].to_numpy(), -1, node_parent), ops["depth"].to_numpy())
    is_operator = tree["is_operator"].to_numpy()
    start = ops["ts"].to_numpy()
    overlaps = _overlaps(start, start + ops["dur"].to_numpy(), start_us, end_us)
    frame = pd.DataFrame({
        "operator": ops["name"].to_numpy()[is_operator],
        "calls": overlaps[is_operator].astype(np.int64),
        "size_increase_bytes": total[is_operator, 0], "self_size_increase_bytes": self_metrics[is_operator, 0],
        "alloc_count": total[is_operator, 1], "self_alloc_count": self_metrics[is_operator, 1],
        "alloc_bytes": total[is_operator, 2], "self_alloc_bytes": self_metrics[is_operator, 2],
        "records": total[is_operator, 3],
    })
    grouped = frame.groupby("operator", observed=True, sort=False).sum()
    grouped = grouped[grouped["records"] > 0].reset_index()
    grouped["operator"] = grouped["operator"].astype(str)
    grouped = grouped.sort_values("operator", kind="stable")
    outside = metrics[n]
    if outside[3]:
        row = pd.DataFrame({"operator": [""], "calls": [0],
                            "size_increase_bytes": [outside[0]], "self_size_increase_bytes": [outside[0]],
                            "alloc_count": [outside[1]], "self_alloc_count": [outside[1]],
                            "alloc_bytes": [outside[2]], "self_alloc_bytes": [outside[2]]})
        grouped = pd.concat([grouped, row], ignore_index=True)
    return MEMORY_STATS.frame(grouped.astype({"operator": str}))


def _overlaps(start: npt.NDArray[np.float64], end: npt.NDArray[np.float64], start_us: float | None, end_us: float | None) \
        -> npt.NDArray[np.bool_]:
    keep = np.ones(len(start), dtype=bool)
    if start_us is not None:
        keep &= end >= start_us
    if end_us is not None:
        keep &= start <= end_us
    return keep


# The routes answering with these tables (see `schema.route`): a device of the profile and an
# optional time range.
MEMORY_QUERY = (model_choice("device", memory_devices, "A device from /memory_devices (default the first)."),
                number("start_us", "Start of the time range, µs relative to the trace start."),
                number("end_us", "End of the time range, µs relative to the trace start."))
def device_list(model: TraceModel) -> dict[str, list[str]]:
    """{"devices": `memory_devices`}: what the memory_devices route answers."""
    return {"devices": memory_devices(model)}


def curve_with_peaks(model: TraceModel, device: str, start_us: float | None = None, end_us: float | None = None,
                     max_points: int = MAX_CURVE_POINTS) -> dict[str, object]:
    """One device's `memory_curve` with its `memory_peaks` (the full curve's, not the
    downsampled one's): what the memory view draws, and the memory_curve route answers."""
    return {"device": device, "peaks": asdict(memory_peaks(model, device, start_us, end_us)),
            "curve": memory_curve(model, device, start_us, end_us, max_points)}


MEMORY_DEVICES_ROUTE = route(
    "memory_devices",
    'Devices with allocator records ("CPU", "GPU0", ...).',
    device_list,
    fields={"devices": {"type": "array", "items": {"type": "string"}}})
MEMORY_CURVE_ROUTE = route(
    "memory_curve",
    "Allocated and reserved bytes over time for one device (time_us, allocated_bytes, reserved_bytes), downsampled "
    "keeping peaks, with the peaks.",
    curve_with_peaks,
    params=(*MEMORY_QUERY, integer("max_points", "At most this many points of the curve (its peaks kept).",
                                   default=MAX_CURVE_POINTS, minimum=10, maximum=100_000)),
    fields={"device": {"type": "string"},
            "peaks": {"type": "object", "description": "The device's peaks in the range (`memory_peaks`).",
                      "properties": {name: {"type": "string"} if name == "device" else {"type": ["number", "null"]}
                                     for name in MemoryPeaks.__dataclass_fields__}},
            "curve": MEMORY_CURVE})
MEMORY_EVENTS_ROUTE = route(
    "memory_events",
    "Allocations of one device paired with their frees, overlapping the time range.",
    memory_events,
    params=MEMORY_QUERY,
    table=MEMORY_EVENTS)
MEMORY_STATS_ROUTE = route(
    "memory_stats",
    "Per operator, the memory it (and its callees) allocated and freed on one device in the time range.",
    memory_stats,
    params=MEMORY_QUERY,
    table=MEMORY_STATS)


# This view's tab of the page (see `schema.tab`).
MEMORY_TAB = tab("memory", 40, lambda offer: len(offer.model.memory))
