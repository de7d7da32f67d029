"""Memory snapshot views: pure functions of a `SnapshotModel` (tb_plugin/snapshot/model.py),
their tables and their routes. What they share is computed once per model: each device's
bytes over time and the allocations alive at a moment (`snapshot_series`), and what the
stacks tell of an allocation (`snapshot_stacks`).

Definitions shared by every function here:

- **An allocation** lives from its `alloc` entry to the `free_completed` entry of the same
  address on the same device (the allocator can reuse the bytes from then on; memory_viz's
  Active Memory Timeline ends it there too). A `free_completed` with no `alloc` before it in
  the trace, and a block `active_*` in `segments` with no `alloc` left open at the end of the
  trace, are allocations made before the trace started (`_record_memory_history(max_entries)`
  keeps only the last actions): they are alive from the trace's start.
- **Allocated bytes** after an entry: the sizes of the allocations alive then (block sizes,
  rounded up as the allocator hands them out). **Reserved bytes**: the segments' total sizes,
  `segment_alloc`/`segment_map` adding and `segment_free`/`segment_unmap` removing, counted
  back from the segments held when the snapshot was taken.
- **A moment** is a position in one device's trace: `entry` is the row of `entries` after
  which the state is taken; -1 is the state before the device's first entry.
- **A library frame** is one whose file lies in an installed package (`site-packages`,
  `dist-packages`, `/torch/`, the standard library's `/lib/python3`) or is native code (no
  `.py` file): the user's own code is the rest, and blame folds each stack to its innermost
  user frame.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..errors import BadParameterError
from ..schema import (NULLABLE, RUN_SNAPSHOTS, SNAPSHOT, SNAPSHOT_TRACES, Persisted, choice, declare, documented, integer,
                      model_choice, number, route, tab)
from ..snapshot.model import SnapshotModel, SnapshotParts, held_blocks
from .coverage import COVERAGE, MissingRank, coverage
from .snapshot_series import (action_is, alive_after, allocation_columns, by_size, bytes_at, check_device, device_series,
                              entry_position, largest_alive, range_max)
from .snapshot_stacks import (CATEGORY_RULES, UNKNOWN_CATEGORY, category_names, described_columns, frame_texts,
                              library_frames, stack_categories, stack_texts, top_user_frames)

MAX_TIMELINE_BINS = 4000
DEFAULT_TIMELINE_BANDS = 100

# A snapshot's model as the disk cache stores it (`snapshot.model.to_parts`): its tables with
# their text as plain strings, its settings as JSON text.
_DEVICE = ("device", "int64", "", "CUDA device index")
_STACK = ("stack", "int64", "", "its stack (stack_frames.stack), -1 when none was recorded")
_POOL = ("pool", "int64", "", "its memory pool (pools.pool), -1 when none is named")
SNAPSHOT_PARTS = Persisted("memory_snapshot", SnapshotParts, {
    "entries": declare(
        "snapshot_part_entries", "one action of a device's allocator trace, in recorded order",
        ("entry", "int64", "", "row number"), _DEVICE,
        ("action", "str", "", "alloc, free_requested, free_completed, segment_alloc, ..., oom, snapshot"),
        ("addr", "int64", "", "the address acted on"), ("size", "int64", "bytes", "bytes acted on"),
        ("stream", "int64", "", "CUDA stream"),
        ("time_us", "float64", "us", "the allocator's clock (epoch us); null when not recorded", NULLABLE),
        _STACK, _POOL, ("device_free", "int64", "bytes", "bytes free on the device (oom entries), else -1"),
        ("allocated", "int64", "bytes", "bytes allocated on its device after it"),
        ("reserved", "int64", "bytes", "bytes reserved in segments on its device after it")),
    "segments": declare(
        "snapshot_part_segments", "one allocator segment when the snapshot was taken",
        _DEVICE, ("address", "int64", "", "its start"), ("total_size", "int64", "bytes", "its size"),
        ("stream", "int64", "", "CUDA stream"), ("segment_type", "str", "", "small or large"), _POOL,
        ("allocated_size", "int64", "bytes", "bytes of its allocated blocks"),
        ("active_size", "int64", "bytes", "bytes of its active blocks"),
        ("requested_size", "int64", "bytes", "bytes its blocks' callers asked for")),
    "blocks": declare(
        "snapshot_part_blocks", "one block of a segment when the snapshot was taken",
        ("segment", "int64", "", "its segment (row of the segments)"), _DEVICE, ("address", "int64", "", "its start"),
        ("size", "int64", "bytes", "its size, rounded up"), ("requested_size", "int64", "bytes", "what the caller asked for"),
        ("state", "str", "", "active_allocated, active_pending_free, active_awaiting_free or inactive"), _STACK),
    "frames": declare(
        "snapshot_part_frames", "one distinct stack frame",
        ("filename", "str", "", "its file"), ("line", "int64", "", "its line"), ("name", "str", "", "its function")),
    "stack_frames": declare(
        "snapshot_part_stack_frames", "one frame of one distinct stack",
        ("stack", "int64", "", "the stack"), ("depth", "int64", "", "0 for the innermost frame"),
        ("frame", "int64", "", "row of the frames")),
    "pools": declare(
        "snapshot_part_pools", "one memory pool",
        ("pool", "int64", "", "its code"), ("pool_id", "str", "", "the allocator's (a, b) id as a,b; 0,0 the default")),
    "allocations": declare(
        "snapshot_part_allocations", "one allocation with its lifetime (snapshot/lifetimes.py), by device then by when it was made",
        _DEVICE, ("addr", "int64", "", "its device address"), ("size", "int64", "bytes", "its block size"),
        ("stream", "int64", "", "CUDA stream"), _POOL, _STACK,
        ("alloc_entry", "int64", "", "the entry that made it; -1: before the trace"),
        ("free_entry", "int64", "", "the entry that freed it (free_completed); -1: alive at the snapshot"),
        ("requested", "int64", "bytes", "what the caller asked for (from its block at the snapshot), else its size"),
        ("alloc_us", "float64", "us", "when it was made (epoch us); null before the trace or unrecorded", NULLABLE),
        ("free_us", "float64", "us", "when it was freed (epoch us); null while alive or unrecorded", NULLABLE),
        ("alloc_pos", "int64", "", "position of alloc_entry in its device's trace; -1 before the trace"),
        ("free_pos", "int64", "", "position of free_entry in its device's trace; the trace's length while alive"),
        ("largest_first", "int64", "", "the row of its device's allocations at this row's rank by size, largest first")),
}, scalars=declare("snapshot_part", "one snapshot's settings",
                   ("device_count", "int64", "count", "devices the snapshot covers"),
                   ("allocator_settings", "str", "", "the allocator's settings as JSON text"),
                   ("anomalies", "str", "", "what the file held out of range, as JSON text {anomaly: count}")))

SNAPSHOT_PEAK = declare(
    "snapshot_peak", "one device of the snapshot: its peak allocated bytes in the recorded trace",
    ("device", "int64", "", "CUDA device index"),
    ("peak_allocated_bytes", "int64", "bytes", "most bytes allocated at once (module docstring), also before the first entry"),
    ("peak_time_us", "float64", "us", "the allocator's time of the entry that reached it (epoch us); null before the trace", NULLABLE),
    ("peak_entry", "int64", "", "row of the entries table that reached the peak; -1: already at the trace's start"),
    ("reserved_at_peak_bytes", "int64", "bytes", "bytes reserved in segments at that moment"),
    ("peak_reserved_bytes", "int64", "bytes", "most bytes reserved at once"),
    ("allocated_at_snapshot_bytes", "int64", "bytes", "bytes allocated when the snapshot was taken"),
    ("reserved_at_snapshot_bytes", "int64", "bytes", "bytes reserved when the snapshot was taken"),
    ("entries", "int64", "count", "entries of the device's trace"),
    ("ooms", "int64", "count", "`oom` entries of the device's trace"),
)
SNAPSHOT_OOM = declare(
    "snapshot_oom", "one device: the moment memory ran out (its last `oom` entry), or its peak when it has none",
    ("device", "int64", "", "CUDA device index"),
    ("kind", "str", "", "\"oom\" for an `oom` entry, \"peak\" for the peak of a device without one"),
    ("entry", "int64", "", "row of the entries table; -1: the state before the trace"),
    ("time_us", "float64", "us", "the allocator's time (epoch us); null before the trace", NULLABLE),
    ("requested_bytes", "int64", "bytes", "bytes the failed allocation asked for; 0 for a peak"),
    ("device_free_bytes", "int64", "bytes", "bytes CUDA reported free on the device at the OOM; -1 for a peak"),
    ("allocated_bytes", "int64", "bytes", "bytes allocated at that moment"),
    ("reserved_bytes", "int64", "bytes", "bytes reserved in segments at that moment"),
    ("fragmentation_bytes", "int64", "bytes", "reserved but not allocated: cached free space the request did not fit; "
     "null when the snapshot is inconsistent (anomaly)", NULLABLE),
    ("fragmentation_pct", "float64", "pct", "fragmentation_bytes / reserved_bytes; null with nothing reserved or an anomaly",
     NULLABLE),
    ("anomaly", "str", "", "why that moment's numbers do not add up (allocated above reserved: actions missing from "
     "the snapshot's trace); empty when they do"),
)
SNAPSHOT_LIVE = declare(
    "snapshot_live", "one allocation alive at the chosen moment, largest first",
    ("allocation", "int64", "", "row of the allocations (stable id for the timeline's bands)"),
    ("device", "int64", "", "CUDA device index"),
    ("addr", "int64", "", "device address"),
    ("size_bytes", "int64", "bytes", "block size"),
    ("alloc_us", "float64", "us", "when it was allocated (epoch us); null when before the trace", NULLABLE),
    ("free_us", "float64", "us", "when it was freed (free_completed); null when still alive at the snapshot", NULLABLE),
    ("pool_id", "str", "", "the allocator pool (\"0,0\": the default pool; others are private: CUDA graphs, MemPools)"),
    ("private_pool", "bool", "", "whether the pool is a private one"),
    ("category", "str", "", "what the memory is for, where its stack tells (see snapshot_categories)"),
    ("stack", "int64", "", "stack id (-1: none recorded)"),
    ("top_frame", "str", "", "the innermost frame of the user's own code, else the innermost frame (file:line:name)"),
)
SNAPSHOT_BLAME = declare(
    "snapshot_blame", "one frame of the user's code (or one whole stack): the bytes alive at the chosen moment that it holds",
    ("frame", "str", "", "file:line:name of the innermost user frame of the stacks (or the whole stack, innermost first)"),
    ("filename", "str", "", "its file (full path as recorded); empty for allocations without a stack"),
    ("line", "int64", "", "its line; -1 without a stack"),
    ("name", "str", "", "its function; empty without a stack"),
    ("live_bytes", "int64", "bytes", "block bytes alive then whose stack it is in"),
    ("requested_bytes", "int64", "bytes", "of which the callers asked for (the rest is rounding); from the blocks at the snapshot, else equal to live_bytes", ),
    ("allocations", "int64", "count", "allocations alive then"),
    ("share_pct", "float64", "pct", "live_bytes / all bytes alive then; null when none are", NULLABLE),
)
SNAPSHOT_CATEGORIES = declare(
    "snapshot_categories", "one category of memory alive at the chosen moment, and how it was decided",
    ("category", "str", "", "optimizer_state, backward, parameter, activation or unknown"),
    ("live_bytes", "int64", "bytes", "block bytes alive then in this category"),
    ("allocations", "int64", "count", "allocations alive then in this category"),
    ("rule", "str", "", "how a stack is put in this category: the first rule, in this table's order, one of whose frames matches"),
)
SNAPSHOT_FLAME = declare(
    "snapshot_flame", "one node of the flame graph of bytes alive at the chosen moment, outermost frames at the root",
    ("node", "int64", "", "node id (0 is the root, all live bytes)"),
    ("parent", "int64", "", "parent node; -1 for the root"),
    ("depth", "int64", "", "0 for the root"),
    ("frame", "str", "", "file:line:name, or \"[library] n frames\" for a collapsed run of library frames"),
    ("library", "bool", "", "whether the node is library code (a collapsed run, or one library frame)"),
    ("live_bytes", "int64", "bytes", "bytes alive then allocated under this call path"),
)
SNAPSHOT_STATE = declare(
    "snapshot_state", "one block of the allocator's segments at the chosen moment, in address order",
    ("segment_address", "int64", "", "the segment's device address"),
    ("segment_bytes", "int64", "bytes", "the segment's total size"),
    ("pool_id", "str", "", "the segment's pool (\"0,0\": default)"),
    ("stream", "int64", "", "the segment's stream"),
    ("address", "int64", "", "the block's device address"),
    ("size_bytes", "int64", "bytes", "the block's size"),
    ("allocated", "bool", "", "true for an allocation alive then, false for free space in the segment"),
    ("allocation", "int64", "", "row of the allocations; -1 for free space"),
    ("top_frame", "str", "", "for an allocation: its innermost user frame (file:line:name); empty for free space"),
)
TIMELINE_BANDS = declare(
    "snapshot_timeline_bands", "one band of the Active Memory Timeline in the window: one allocation, or all the others merged",
    ("band", "int64", "", "band id in this answer; 0 is the merged band of the allocations not drawn on their own"),
    ("allocation", "int64", "", "row of the allocations; -1 for the merged band"),
    ("size_bytes", "int64", "bytes", "the allocation's size; for the merged band the most it holds in the window"),
    ("alloc_us", "float64", "us", "when allocated (epoch us); null before the trace and for the merged band", NULLABLE),
    ("free_us", "float64", "us", "when freed (epoch us); null when alive at the snapshot and for the merged band", NULLABLE),
    ("pool_id", "str", "", "the allocation's pool (\"0,0\": default; empty for the merged band)"),
    ("private_pool", "bool", "", "whether that pool is a private one"),
    ("category", "str", "", "see snapshot_categories; empty for the merged band"),
    ("stack", "int64", "", "stack id; -1 for none and for the merged band"),
    ("top_frame", "str", "", "innermost user frame (file:line:name); empty for the merged band"),
)
TIMELINE_POINTS = declare(
    "snapshot_timeline_points", "one band at one drawn instant: where it lies in the stack of active memory",
    ("band", "int64", "", "band id (snapshot_timeline_bands)"),
    ("time_us", "float64", "us", "the instant (epoch us): in each pixel column the entry with the most allocated bytes, else its start"),
    ("low_bytes", "int64", "bytes", "the band's bottom: the merged band and the bands allocated before it that are still alive"),
    ("high_bytes", "int64", "bytes", "low_bytes + the band's size (the merged band: the bytes it holds then)"),
)
TIMELINE_TOTALS = declare(
    "snapshot_timeline_totals", "one pixel column of the window: the most allocated and reserved in it",
    ("time_us", "float64", "us", "the column's drawn instant (as snapshot_timeline_points)"),
    ("start_us", "float64", "us", "the column's start (epoch us)"),
    ("allocated_bytes", "int64", "bytes", "most bytes allocated at once in the column"),
    ("reserved_bytes", "int64", "bytes", "most bytes reserved at once in the column"),
    ("entry", "int64", "", "the entry drawn for the column (-1: the state before the trace)"),
)

def _held_blocks(model: SnapshotModel) -> npt.NDArray[np.bool_]:
    return held_blocks(model.blocks)



# --- views ---------------------------------------------------------------------------------

@documented(SNAPSHOT_PEAK)
def peak(model: SnapshotModel) -> pd.DataFrame:
    """The peak allocated bytes of each device, with its time and entry (module docstring)."""
    rows = []
    for device in model.devices():
        s = device_series(model, device)
        values = np.concatenate([[s.before_allocated], s.allocated])
        reserved = np.concatenate([[s.before_reserved], s.reserved])
        at = int(np.argmax(values))
        entry = s.start + at - 1 if at > 0 else -1
        ooms = action_is(model, "oom")[s.start:s.start + len(s.allocated)]
        rows.append({"device": device, "peak_allocated_bytes": int(values[at]),
                     "peak_time_us": s.time_us[at - 1] if at > 0 else np.nan, "peak_entry": entry,
                     "reserved_at_peak_bytes": int(reserved[at]), "peak_reserved_bytes": int(reserved.max()),
                     "allocated_at_snapshot_bytes": _allocated_at_snapshot(model, device),
                     "reserved_at_snapshot_bytes": int(model.segments["total_size"][model.segments["device"] == device].sum()),
                     "entries": len(s.allocated), "ooms": int(ooms.sum())})
    return SNAPSHOT_PEAK.frame(pd.DataFrame(rows, columns=SNAPSHOT_PEAK.names))


def _allocated_at_snapshot(model: SnapshotModel, device: int) -> int:
    b = model.blocks
    return int(b["size"][_held_blocks(model) & (b["device"].to_numpy() == device)].sum())


@documented(SNAPSHOT_OOM)
def oom(model: SnapshotModel) -> pd.DataFrame:
    """The moment memory ran out on each device: its last `oom` entry, or its peak."""
    peaks = peak(model).set_index("device")
    e = model.entries
    is_oom = action_is(model, "oom")
    rows = []
    for device in model.devices():
        s = device_series(model, device)
        ooms = np.flatnonzero(is_oom[s.start:s.start + len(s.allocated)])
        if len(ooms):
            pos = int(ooms[-1])
            entry, kind = s.start + pos, "oom"
            requested, free = int(e["size"].to_numpy()[entry]), int(e["device_free"].to_numpy()[entry])
        else:
            entry, kind, requested, free = int(peaks["peak_entry"].to_numpy()[peaks.index.get_loc(device)]), "peak", 0, -1
            pos = entry - s.start if entry >= 0 else -1
        allocated, reserved = bytes_at(s, pos)
        consistent = allocated <= reserved
        rows.append({"device": device, "kind": kind, "entry": entry,
                     "time_us": s.time_us[pos] if pos >= 0 else np.nan, "requested_bytes": requested,
                     "device_free_bytes": free, "allocated_bytes": allocated, "reserved_bytes": reserved,
                     "fragmentation_bytes": reserved - allocated if consistent else None,
                     "fragmentation_pct": 100.0 * (reserved - allocated) / reserved if consistent and reserved else np.nan,
                     "anomaly": "" if consistent else _ALLOCATED_ABOVE_RESERVED})
    return SNAPSHOT_OOM.frame(pd.DataFrame(rows, columns=SNAPSHOT_OOM.names))


# Blocks live inside segments, so allocated bytes above reserved ones mean the trace lacks
# actions: segment_alloc/segment_map entries dropped (a trace recorded from mid-run, whose
# ring buffer of `max_entries` wrapped) or frees of blocks it never saw allocated.
_ALLOCATED_ABOVE_RESERVED = ("more is allocated than reserved, which the allocator cannot reach: the snapshot's trace "
                             "lacks some of its segment or free actions, so fragmentation is not given")

@documented(SNAPSHOT_LIVE)
def live(model: SnapshotModel, device: int, entry: int | None = None, top: int | None = None) -> pd.DataFrame:
    """The allocations alive after `entry` (None: at the snapshot), largest first, `top` at most."""
    a = alive_after(model, device, entry).sort_values("size", ascending=False, kind="stable")
    if top is not None:
        a = a.head(top)
    return SNAPSHOT_LIVE.frame({"allocation": a.index.to_numpy(), "device": a["device"], "addr": a["addr"],
                                "size_bytes": a["size"], "alloc_us": a["alloc_us"], "free_us": a["free_us"],
                                "stack": a["stack"], **described_columns(model, a)})


@documented(SNAPSHOT_BLAME)
def blame(model: SnapshotModel, device: int, entry: int | None = None, by: str = "user_frame") -> pd.DataFrame:
    """Bytes alive after `entry` (None: at the snapshot) by the innermost user frame of their
    stacks (`by="user_frame"`, library frames folded into the user code that called them), or
    by whole stack (`by="stack"`, frames innermost first joined by " <- "); most bytes first."""
    if by not in ("user_frame", "stack"):
        raise BadParameterError(f"by must be 'user_frame' or 'stack', not {by!r}")
    a = alive_after(model, device, entry)
    total = int(a["size"].sum())
    if by == "user_frame":
        key = top_user_frames(model)[a["stack"].to_numpy()]
    else:
        key = a["stack"].to_numpy()
    g = pd.DataFrame({"key": key, "size": a["size"].to_numpy(), "requested": a["requested"].to_numpy()}).groupby("key")
    sums = g.agg(live_bytes=("size", "sum"), requested_bytes=("requested", "sum"), allocations=("size", "size")).reset_index()
    keys = sums["key"].to_numpy()
    if by == "user_frame":
        frames = model.frames
        f = np.append(np.arange(len(frames)), -1)[keys]
        has = f >= 0
        filename = np.where(has, np.append(frames["filename"].to_numpy(dtype=object), "")[f], "")
        line = np.where(has, np.append(frames["line"].to_numpy(), -1)[f], -1)
        name = np.where(has, np.append(frames["name"].to_numpy(dtype=object), "")[f], "")
        text = np.where(has, np.append(frame_texts(model), "")[f], "<no stack>")
    else:
        texts = stack_texts(model)
        text = np.array([texts[k] if k >= 0 else "<no stack>" for k in keys], dtype=object)
        top = top_user_frames(model)[keys]
        filename = np.append(model.frames["filename"].to_numpy(dtype=object), "")[top]
        line = np.append(model.frames["line"].to_numpy(), -1)[top]
        name = np.append(model.frames["name"].to_numpy(dtype=object), "")[top]
    out = SNAPSHOT_BLAME.frame({"frame": text, "filename": filename, "line": line, "name": name,
                                "live_bytes": sums["live_bytes"], "requested_bytes": sums["requested_bytes"],
                                "allocations": sums["allocations"],
                                "share_pct": 100.0 * sums["live_bytes"] / total if total else np.nan})
    return out.sort_values(["live_bytes", "frame"], ascending=[False, True], kind="stable", ignore_index=True)


@documented(SNAPSHOT_CATEGORIES)
def categories(model: SnapshotModel, device: int, entry: int | None = None) -> pd.DataFrame:
    """Bytes alive after `entry` (None: at the snapshot) by category: the first of
    `CATEGORY_RULES` one of whose frames matches a frame of the allocation's stack; every
    category is listed, with the rule that decides it."""
    a = alive_after(model, device, entry)
    cat = stack_categories(model)[a["stack"].to_numpy()]
    n = len(CATEGORY_RULES) + 1
    return SNAPSHOT_CATEGORIES.frame({
        "category": category_names(),
        "live_bytes": np.bincount(cat, a["size"].to_numpy(), minlength=n).astype(np.int64),
        "allocations": np.bincount(cat, minlength=n).astype(np.int64),
        "rule": [rule[1] for rule in CATEGORY_RULES] + [UNKNOWN_CATEGORY[1]]})


@documented(SNAPSHOT_FLAME)
def flame(model: SnapshotModel, device: int, entry: int | None = None, collapse_library: bool = True) -> pd.DataFrame:
    """Bytes alive after `entry` (None: at the snapshot) as a flame graph: paths from the
    outermost frame in; with `collapse_library`, each run of library frames is one node."""
    a = alive_after(model, device, entry)
    per_stack = pd.Series(a["size"].to_numpy()).groupby(a["stack"].to_numpy()).sum()
    sf = model.stack_frames
    sf = sf[sf["stack"].isin(per_stack.index)]
    # Outermost first; a collapsed run of library frames keeps one row (labelled by its length).
    sf = sf.sort_values(["stack", "depth"], ascending=[True, False], kind="stable")
    library = library_frames(model)[sf["frame"].to_numpy()]
    label = frame_texts(model)[sf["frame"].to_numpy()].copy()
    stack = sf["stack"].to_numpy()
    if collapse_library:
        new_run = np.ones(len(sf), bool)
        new_run[1:] = ~(library[1:] & library[:-1] & (stack[1:] == stack[:-1]))
        run_id = np.cumsum(new_run) - 1
        run_len = np.bincount(run_id)
        keep = new_run
        label = np.where(library, np.char.add("[library] ", run_len[run_id].astype(str)).astype(object) + " frames", label)[keep]
        library, stack = library[keep], stack[keep]
    # Each stack's path as a sequence of labels; nodes are distinct (parent, label) pairs.
    nodes = {(-1, "<all>"): 0}
    parents, labels, libs, depths = [-1], ["all live memory"], [False], [0]
    node_bytes = {0: int(a["size"].sum())}
    starts = np.flatnonzero(np.r_[True, stack[1:] != stack[:-1]]) if len(stack) else np.empty(0, int)
    bounds = np.r_[starts, len(stack)]
    for i in range(len(starts)):  # one pass per distinct stack (not per allocation)
        size = int(per_stack[stack[starts[i]]])
        parent = 0
        for j in range(bounds[i], bounds[i + 1]):
            key = (parent, label[j])
            node = nodes.get(key)
            if node is None:
                node = nodes[key] = len(parents)
                parents.append(parent)
                labels.append(label[j])
                libs.append(bool(library[j]))
                depths.append(depths[parent] + 1)
            node_bytes[node] = node_bytes.get(node, 0) + size
            parent = node
    return SNAPSHOT_FLAME.frame({"node": np.arange(len(parents)), "parent": parents, "depth": depths, "frame": labels,
                                 "library": libs, "live_bytes": [node_bytes.get(i, 0) for i in range(len(parents))]})


@documented(SNAPSHOT_STATE)
def state(model: SnapshotModel, device: int, entry: int | None = None) -> pd.DataFrame:
    """The allocator's segments after `entry` (None: at the snapshot), each as its
    allocations and the free space between them, in address order. Segments are those held
    then: the ones at the snapshot, minus those `segment_alloc`/`segment_map`ed after the
    moment, plus those `segment_free`/`segment_unmap`ed after it (the trace says where)."""
    alive = alive_after(model, device, entry)
    pos = entry_position(model, device, entry)
    series = device_series(model, device)
    rows_of_device = slice(series.start, series.start + len(series.allocated))
    e = model.entries.iloc[rows_of_device]
    seg = model.segments[model.segments["device"] == device]
    later = np.arange(len(e)) > pos
    added = later & action_is(model, "segment_alloc", "segment_map")[rows_of_device]
    removed = later & action_is(model, "segment_free", "segment_unmap")[rows_of_device]
    held = seg[~seg["address"].isin(e["addr"].to_numpy()[added])]
    gone = e[removed]
    pool_of = np.where(gone["pool"].to_numpy() >= 0, gone["pool"].to_numpy(), 0)
    segments = pd.concat([
        pd.DataFrame({"address": held["address"].to_numpy(), "size": held["total_size"].to_numpy(),
                      "pool": held["pool"].to_numpy(), "stream": held["stream"].to_numpy()}),
        pd.DataFrame({"address": gone["addr"].to_numpy(), "size": gone["size"].to_numpy(), "pool": pool_of,
                      "stream": gone["stream"].to_numpy()})], ignore_index=True).sort_values("address", ignore_index=True)
    a = alive.sort_values("addr")
    seg_addr, seg_size = segments["address"].to_numpy(), segments["size"].to_numpy()
    which = np.searchsorted(seg_addr, a["addr"].to_numpy(), side="right") - 1
    inside = (which >= 0) & (a["addr"].to_numpy() < seg_addr[np.maximum(which, 0)] + seg_size[np.maximum(which, 0)]) \
        if len(seg_addr) else np.zeros(len(a), bool)
    a, which = a[inside], which[inside]
    # Free space: before each allocation (from the previous one's end, or the segment's start)
    # and after each segment's last allocation (to the segment's end).
    addr, end = a["addr"].to_numpy(), a["addr"].to_numpy() + a["size"].to_numpy()
    first_in_segment = np.r_[True, which[1:] != which[:-1]] if len(a) else np.empty(0, bool)
    previous_end = np.where(first_in_segment, seg_addr[which] if len(a) else addr, np.r_[0, end[:-1]])
    last_end = seg_addr.copy()
    last_end[which] = end  # allocations are in address order: the last one written wins
    starts = np.concatenate([previous_end, last_end])
    ends = np.concatenate([addr, seg_addr + seg_size])
    owner = np.concatenate([which, np.arange(len(seg_addr))])
    gap = ends > starts
    pools = model.pools["pool_id"].to_numpy(dtype=object)
    described = described_columns(model, a)
    rows = pd.DataFrame({
        "segment": np.concatenate([which, owner[gap]]),
        "address": np.concatenate([a["addr"].to_numpy(), starts[gap]]),
        "size_bytes": np.concatenate([a["size"].to_numpy(), ends[gap] - starts[gap]]),
        "allocated": np.concatenate([np.ones(len(a), bool), np.zeros(int(gap.sum()), bool)]),
        "allocation": np.concatenate([a.index.to_numpy(), np.full(int(gap.sum()), -1)]),
        "top_frame": np.concatenate([described["top_frame"], np.full(int(gap.sum()), "", dtype=object)]),
    }).sort_values("address", kind="stable", ignore_index=True)
    s = rows["segment"].to_numpy()
    return SNAPSHOT_STATE.frame({"segment_address": seg_addr[s], "segment_bytes": seg_size[s],
                                 "pool_id": pools[segments["pool"].to_numpy()[s]], "stream": segments["stream"].to_numpy()[s],
                                 **{c: rows[c] for c in ("address", "size_bytes", "allocated", "allocation", "top_frame")}})


# --- the Active Memory Timeline, drawn at the zoom shown --------------------------------------

@dataclass
class SnapshotTimeline:
    """What the Active Memory Timeline draws for one device in one window (`timeline`)."""

    bands: pd.DataFrame
    points: pd.DataFrame
    totals: pd.DataFrame


@documented(TIMELINE_BANDS, TIMELINE_POINTS, TIMELINE_TOTALS)
def timeline(model: SnapshotModel, device: int, start_us: float | None = None, end_us: float | None = None,
             bins: int = 1000, bands: int = DEFAULT_TIMELINE_BANDS) -> SnapshotTimeline:
    """The allocations alive over `[start_us, end_us]` (the whole trace by default) as
    stacked bands, as memory_viz draws them, at the resolution of `bins` pixel columns: the
    `bands` largest allocations alive in the window each have a band, stacked in the order
    they were made, above one merged band of all the others. Each column is drawn at its
    entry with the most allocated bytes (its start when it has none), so no peak falls
    between columns however far out the view is zoomed; the work is one pass over the
    window's entries plus `bins` x `bands`, whatever the trace's length.

    Returns
    -------
    SnapshotTimeline with `bands`, `points` (only where a band is alive) and `totals`.
    """
    check_device(model, device)
    if not 1 <= bins <= MAX_TIMELINE_BINS:
        raise BadParameterError(f"bins must be 1..{MAX_TIMELINE_BINS}, not {bins}")
    if not 0 <= bands <= 1000:
        raise BadParameterError(f"bands must be 0..1000, not {bands}")
    s = device_series(model, device)
    t = s.time_us
    n = len(t)
    lo = float(t[0]) if n and start_us is None else float(start_us or 0.0)
    hi = float(t[-1]) if n and end_us is None else float(end_us if end_us is not None else lo)
    if hi < lo:
        raise BadParameterError(f"end_us ({hi}) is before start_us ({lo})")
    edges = lo + (hi - lo) * np.arange(bins + 1) / bins
    first = np.searchsorted(t, edges[:-1], side="left")
    last = np.searchsorted(t, edges[1:], side="right")
    last[:-1] = np.minimum(last[:-1], first[1:])  # an entry on an edge belongs to the later column
    has = last > first
    # The drawn entry of each column: its most allocated (first of equals), else the one before it.
    alloc_max, pos = range_max(s.allocated_blocks, first, last)
    resv_max, _ = range_max(s.reserved_blocks, first, last)
    pos = np.where(has, pos, first - 1)
    before = pos < 0
    alloc_at = np.where(before, s.before_allocated, s.allocated[np.maximum(pos, 0)] if n else s.before_allocated)
    resv_at = np.where(before, s.before_reserved, s.reserved[np.maximum(pos, 0)] if n else s.before_reserved)
    alloc_max = np.where(has, alloc_max, alloc_at)
    resv_max = np.where(has, resv_max, resv_at)
    time = np.where(has, t[np.maximum(pos, 0)] if n else edges[:-1], edges[:-1])

    chosen = largest_alive(model, device, int(pos.min()), int(pos.max()), bands)
    columns = allocation_columns(model)
    chosen = chosen[np.lexsort((columns["addr"][chosen], columns["alloc_pos"][chosen]))]  # stacked in the order made
    a = {c: v[chosen] for c, v in columns.items()}
    # Where each band is alive: per column (rows, C order), its bands in stacking order, so a
    # band's bottom is a running sum within the column; then ordered band by band.
    alive = (pos[:, None] >= a["alloc_pos"][None, :]) & (pos[:, None] < a["free_pos"][None, :])
    k, j = np.divmod(np.flatnonzero(alive), max(len(chosen), 1))
    size = a["size"][j]
    running = np.r_[0, np.cumsum(size)]
    column_end = np.cumsum(np.bincount(k, minlength=bins))
    column_start = np.r_[0, column_end[:-1]]
    merged = alloc_at - (running[column_end] - running[column_start])
    low = merged[k] + running[:-1] - running[column_start][k]
    by_band = np.argsort(j.astype(np.int16), kind="stable")  # bands <= 1000: a radix sort
    k, j, low, size = k[by_band], j[by_band], low[by_band], size[by_band]
    band_ids = np.arange(1, len(chosen) + 1)
    points = TIMELINE_POINTS.frame({
        "band": np.concatenate([np.zeros(bins, np.int64), band_ids[j]]),
        "time_us": np.concatenate([time, time[k]]),
        "low_bytes": np.concatenate([np.zeros(bins, np.int64), low]),
        "high_bytes": np.concatenate([merged, low + size])})
    described = described_columns(model, a)
    band_table = TIMELINE_BANDS.frame({
        "band": np.r_[0, band_ids], "allocation": np.r_[-1, chosen],
        "size_bytes": np.r_[merged.max() if bins else 0, a["size"]],
        "alloc_us": np.r_[np.nan, a["alloc_us"]], "free_us": np.r_[np.nan, a["free_us"]],
        "pool_id": _after_blank(described["pool_id"]), "private_pool": np.r_[False, described["private_pool"]],
        "category": _after_blank(described["category"]), "stack": np.r_[-1, a["stack"]],
        "top_frame": _after_blank(described["top_frame"])})
    totals = TIMELINE_TOTALS.frame({"time_us": time, "start_us": edges[:-1], "allocated_bytes": alloc_max,
                                    "reserved_bytes": resv_max, "entry": np.where(before, -1, s.start + pos)})
    return SnapshotTimeline(band_table, points, totals)


def _after_blank(texts: Sequence[str] | npt.NDArray[np.object_]) -> npt.NDArray[np.object_]:
    """The merged band's empty text, then the bands' `texts`, as an object array (as tables hold text)."""
    return np.concatenate([np.array([""], dtype=object), np.asarray(texts, dtype=object)])


def prepare_timeline(model: SnapshotModel, device: int) -> None:
    """Build the indexes `timeline` reads for `device` (cached on the model)."""
    device_series(model, device)
    by_size(model, device)
    allocation_columns(model)
    top_user_frames(model)
    stack_categories(model)


SNAPSHOT_RANKS = declare(
    "snapshot_ranks", "one device of one of the run's memory snapshots (one per rank), side by side",
    ("snapshot", "str", "", "the snapshot's name as listed with the run (rank0, ...)"),
    ("device", "int64", "", "CUDA device index"),
    ("peak_allocated_bytes", "int64", "bytes", "most bytes allocated at once (snapshot_peak)"),
    ("peak_time_us", "float64", "us", "when (epoch us); null when at the trace's start", NULLABLE),
    ("peak_reserved_bytes", "int64", "bytes", "most bytes reserved at once"),
    ("oom", "bool", "", "whether the device's trace has an `oom` entry"),
    ("oom_requested_bytes", "int64", "bytes", "bytes the last failed allocation asked for; 0 without an OOM"),
    ("oom_time_us", "float64", "us", "when memory ran out (epoch us); null without an OOM", NULLABLE),
    ("entries", "int64", "count", "entries of the device's trace"),
)


MISSING_SNAPSHOTS = declare(
    "missing_snapshots", "one memory snapshot of the run that could not be read, left out of the comparison",
    ("snapshot", "str", "", "the snapshot's name as listed with the run (rank0, ...)"),
    ("reason", "str", "", "why it could not be read: the loader's reason, without the file's path"),
)


@dataclass
class SnapshotRanks:
    """The run's memory snapshots side by side (`ranks`), how many of them that covers
    (`coverage`, one row) and those that could not be read (`missing`)."""

    ranks: pd.DataFrame
    coverage: pd.DataFrame
    missing: pd.DataFrame


@documented(SNAPSHOT_RANKS, COVERAGE, MISSING_SNAPSHOTS)
def ranks(models: dict[str, SnapshotModel], missing: Mapping[str, MissingRank] | None = None) -> SnapshotRanks:
    """Each snapshot's devices with their peak and OOM, snapshots in the order given; `missing`
    is {name: `coverage.MissingRank`} of the run's snapshots that could not be read (a
    truncated pickle, one over the memory budget, a refused global), named with their reason
    in ``coverage`` and ``missing`` and left out of ``ranks``: one bad file does not take the
    others' comparison away."""
    frames = []
    for name, model in models.items():
        p, o = peak(model), oom(model)
        is_oom = (o["kind"] == "oom").to_numpy()
        frames.append(pd.DataFrame({
            "snapshot": name, "device": p["device"], "peak_allocated_bytes": p["peak_allocated_bytes"],
            "peak_time_us": p["peak_time_us"], "peak_reserved_bytes": p["peak_reserved_bytes"], "oom": is_oom,
            "oom_requested_bytes": np.where(is_oom, o["requested_bytes"], 0),
            "oom_time_us": np.where(is_oom, o["time_us"], np.nan), "entries": p["entries"]}))
    missing = missing or {}
    names = sorted(missing)
    return SnapshotRanks(
        SNAPSHOT_RANKS.frame(pd.concat(frames, ignore_index=True) if frames else
                             pd.DataFrame({c: [] for c in SNAPSHOT_RANKS.names})),
        coverage(len(models), missing, "memory snapshots", "file could not be read"),
        MISSING_SNAPSHOTS.frame({"snapshot": names, "reason": [missing[n].reason for n in names]}))


SNAPSHOT_TRACE = declare(
    "snapshot_trace", "one device of a snapshot beside one span of a Kineto trace of the same rank: the time both cover and each one's peak in it",
    ("worker", "str", "", "the trace's worker"),
    ("span", "int64", "", "the trace's span"),
    ("device", "int64", "", "CUDA device index (the trace's GPU<device>)"),
    ("trace_origin_us", "float64", "us", "the trace's time 0 on the allocator's clock (epoch us): trace times + this = snapshot times"),
    ("overlap_start_us", "float64", "us", "start of the time both record (epoch us); null when they do not overlap", NULLABLE),
    ("overlap_end_us", "float64", "us", "end of that time (epoch us); null when they do not overlap", NULLABLE),
    ("snapshot_peak_bytes", "int64", "bytes", "most bytes the snapshot has allocated at once in the overlap; null without one", NULLABLE),
    ("trace_peak_bytes", "int64", "bytes", "most bytes the trace's allocator records have allocated in the overlap; null without one", NULLABLE),
)


@documented(SNAPSHOT_TRACE)
def beside_traces(model: SnapshotModel, traces: dict) -> pd.DataFrame:
    """Each device of the snapshot beside the same GPU of each trace in `traces` ({(worker,
    span): TraceModel}): both record the allocator's bytes, the snapshot on the allocator's
    clock (epoch us), the trace relative to its `origin_us` (epoch us in PyTorch 2.x traces),
    so one time axis is `origin_us + time_us`. Where they overlap, their peaks there are
    compared (they differ by what each records: the snapshot its last `max_entries` actions,
    the trace what happened while the profiler ran)."""
    from .memory import full_curve, memory_devices

    rows = []
    for (worker, span), trace in traces.items():
        gpus = set(memory_devices(trace))
        for device in model.devices():
            if f"GPU{device}" not in gpus:
                continue
            s = device_series(model, device)
            curve = full_curve(trace, f"GPU{device}")
            trace_t = trace.origin_us + curve["time_us"].to_numpy()
            lo = max(s.time_us[0], trace_t[0]) if len(s.time_us) and len(trace_t) else np.nan
            hi = min(s.time_us[-1], trace_t[-1]) if len(s.time_us) and len(trace_t) else np.nan
            overlap = bool(lo <= hi)
            in_snapshot = (s.time_us >= lo) & (s.time_us <= hi) if overlap else np.zeros(0, bool)
            in_trace = (trace_t >= lo) & (trace_t <= hi) if overlap else np.zeros(0, bool)
            rows.append({"worker": worker, "span": span, "device": device, "trace_origin_us": trace.origin_us,
                         "overlap_start_us": lo if overlap else np.nan, "overlap_end_us": hi if overlap else np.nan,
                         "snapshot_peak_bytes": s.allocated[in_snapshot].max() if in_snapshot.any() else None,
                         "trace_peak_bytes": curve["allocated_bytes"].to_numpy()[in_trace].max() if in_trace.any() else None})
    return SNAPSHOT_TRACE.frame(pd.DataFrame(rows, columns=SNAPSHOT_TRACE.names).astype(
        {"snapshot_peak_bytes": "Int64", "trace_peak_bytes": "Int64"}))


# This view's tab of the page (see `schema.tab`): offered by the page for a run listed with
# memory snapshots (/runs), not by a profile.
MEMORY_SNAPSHOT_TAB = tab("memory_snapshot", 120, None)


# The routes answering with these tables over one memory snapshot (see `schema.route`).
def _devices(model: SnapshotModel) -> list[int]:
    return model.devices()


_DEVICE_PARAM = model_choice("device", _devices, "CUDA device index of the snapshot (default its first device).", "integer", 0)
_ENTRY = integer("entry", "The moment, as a row of the snapshot's entries (snapshot_peak's peak_entry, snapshot_oom's "
                 "entry); -1 before the trace; default the snapshot's own moment (the device's last entry).", minimum=-1)
SNAPSHOT_PEAK_ROUTE = route(
    "snapshot_peak", "A CUDA memory snapshot of the run (torch.cuda.memory._dump_snapshot): per device, the peak allocated "
    "bytes with its time and entry, reserved bytes then, at most and at the snapshot.", peak, table=SNAPSHOT_PEAK, reads=SNAPSHOT)
SNAPSHOT_OOM_ROUTE = route(
    "snapshot_oom", "Per device of a memory snapshot, the moment memory ran out (its last oom entry; its peak without one): "
    "bytes asked, free on the device, allocated, reserved, fragmentation.", oom, table=SNAPSHOT_OOM, reads=SNAPSHOT)
SNAPSHOT_TIMELINE_ROUTE = route(
    "snapshot_timeline", "The Active Memory Timeline of one device of a memory snapshot, drawn by the server at the zoom "
    "asked for: bands (the largest allocations alive in the window, one each, and the others merged into band 0), points "
    "(each band's bottom and top at each drawn instant, only where alive) and totals (per pixel column, the most allocated "
    "and reserved). With table=NAME, that one table (JSON or CSV); with tables=A,B, those (JSON).", timeline,
    params=(_DEVICE_PARAM,
            number("start_us", "Window start on the allocator's clock (epoch µs); default the trace's first entry."),
            number("end_us", "Window end (epoch µs); default the trace's last entry."),
            integer("bins", "Pixel columns to draw.", 1000, 1, MAX_TIMELINE_BINS),
            integer("bands", "Largest allocations drawn on their own.", DEFAULT_TIMELINE_BANDS, 0, 1000)),
    tables={"bands": TIMELINE_BANDS, "points": TIMELINE_POINTS, "totals": TIMELINE_TOTALS}, reads=SNAPSHOT)
SNAPSHOT_LIVE_ROUTE = route(
    "snapshot_live", "The allocations of one device alive at the chosen moment (entry; default the snapshot), largest first, "
    "with pool, category and innermost user frame.", live,
    params=(_DEVICE_PARAM, _ENTRY, integer("top", "The largest allocations answered.", 100, 1)), table=SNAPSHOT_LIVE, reads=SNAPSHOT)
SNAPSHOT_BLAME_ROUTE = route(
    "snapshot_blame", "Bytes of one device alive at the chosen moment by the innermost frame of the user's own code "
    "(by=user_frame; library frames folded into their caller) or by whole stack (by=stack), most first.", blame,
    params=(_DEVICE_PARAM, _ENTRY, choice("by", ("user_frame", "stack"), "What the bytes are summed by.")),
    table=SNAPSHOT_BLAME, reads=SNAPSHOT)
SNAPSHOT_CATEGORIES_ROUTE = route(
    "snapshot_categories", "Bytes of one device alive at the chosen moment by category (optimizer_state, backward, "
    "parameter, activation, unknown), each with the rule that decides it from the stack.", categories,
    params=(_DEVICE_PARAM, _ENTRY), table=SNAPSHOT_CATEGORIES, reads=SNAPSHOT)
SNAPSHOT_FLAME_ROUTE = route(
    "snapshot_flame", "Flame graph of the bytes of one device alive at the chosen moment: call paths from the outermost "
    "frame, each run of library frames one node unless library=expanded.", flame,
    params=(_DEVICE_PARAM, _ENTRY, choice("library", ("collapsed", "expanded"), "Library frames folded into one node or not.",
                                    {"collapsed": True, "expanded": False}, arg="collapse_library")),
    table=SNAPSHOT_FLAME, reads=SNAPSHOT)
SNAPSHOT_STATE_ROUTE = route(
    "snapshot_state", "The allocator's segments of one device at the chosen moment, each as its allocations and the free "
    "space between them, in address order.", state, params=(_DEVICE_PARAM, _ENTRY), table=SNAPSHOT_STATE, reads=SNAPSHOT)
SNAPSHOT_RANKS_ROUTE = route(
    "snapshot_ranks", "Every memory snapshot of the run (one per rank) side by side: ranks (each device's peak and "
    "OOM), coverage (one row: snapshots read, ranks_total, text naming each that could not be read and why) and "
    "missing (snapshot, reason: each snapshot that could not be read, left out of ranks; the others are compared, "
    "422 with the first one's reason only when none can be read). 202 with ready/total while some are read. With "
    "table=NAME, that one table (JSON or CSV); with tables=A,B, those (JSON).", ranks,
    tables={"ranks": SNAPSHOT_RANKS, "coverage": COVERAGE, "missing": MISSING_SNAPSHOTS}, reads=RUN_SNAPSHOTS)
SNAPSHOT_TRACE_ROUTE = route(
    "snapshot_trace", "A memory snapshot beside the Kineto traces of the same rank in its run (the worker of the "
    "snapshot's name, or the run's only worker): per trace span and device, the trace's origin on the allocator's "
    "clock, the time both record and each one's peak allocated bytes in it. An empty table when the run has no such "
    "trace.", beside_traces, table=SNAPSHOT_TRACE, reads=SNAPSHOT_TRACES)
