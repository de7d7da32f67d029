"""Each allocation's lifetime, and each device's allocated and reserved bytes after every
entry: what the Active Memory Timeline reads. They are computed once, when a snapshot is
decoded, and kept with its tables (in the disk cache too), so the first timeline answer after
a load, fresh or cached, costs what later ones do. Vectorised: sorts and cumulative sums over
the entries, no Python work per entry.

Definitions (an allocation, allocated and reserved bytes): the module docstring of
`tb_plugin/views/memory_snapshot.py`, whose views read these tables.
"""

import numpy as np
import numpy.typing as npt
import pandas as pd

from .model import actions_in, held_blocks


def dense(devices: npt.NDArray[np.int64], device: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each of `device` (device indexes, as the file names them) as its place in `devices`
    (the sorted distinct indexes of a snapshot): arrays per device are sized by how many
    devices there are, never by an index read from the file."""
    return np.searchsorted(devices, device)


def device_bounds(entries: pd.DataFrame, devices: npt.NDArray[np.int64]) \
        -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(first row, one past the last row) of each device's entries, by place in `devices`."""
    ends = np.cumsum(np.bincount(dense(devices, entries["device"].to_numpy()), minlength=len(devices)))
    return np.concatenate([[0], ends[:-1]]).astype(np.int64), ends


def allocations_table(entries: pd.DataFrame, segments: pd.DataFrame, blocks: pd.DataFrame,
                      devices: npt.NDArray[np.int64]) -> pd.DataFrame:
    """One row per allocation: device, addr, size, stream, pool, stack, alloc_entry /
    free_entry (rows of `entries`; -1: before the trace / alive at the snapshot), alloc_us,
    free_us, alloc_pos / free_pos (positions in the device's trace; -1 / one past the end
    when unknown), requested (from the block at the snapshot, else the size), largest_first
    (the device's allocations largest first: the row of `allocations` at this row's rank among
    its device's rows, so the timeline's search for a window's largest allocations reads a
    prefix), sorted by device then by when they were made (those from before the trace first)."""
    e = entries
    device_of, addr_of = e["device"].to_numpy(), e["addr"].to_numpy()
    is_alloc = actions_in(e["action"], "alloc")
    is_free = actions_in(e["action"], "free_completed", "free")
    rows = np.flatnonzero(is_alloc | is_free)
    order = rows[np.lexsort((rows, addr_of[rows], device_of[rows]))]
    dev_o, addr_o, alloc_o = device_of[order], addr_of[order], is_alloc[order]
    same_next = np.zeros(len(order), bool)
    same_next[:-1] = (dev_o[1:] == dev_o[:-1]) & (addr_o[1:] == addr_o[:-1])
    freed_next = same_next.copy()
    freed_next[:-1] &= ~alloc_o[1:]
    # In trace: each alloc, with the free right after it (same device and address), if any.
    allocs = np.flatnonzero(alloc_o)
    free_of_alloc = np.where(freed_next[allocs], order[np.minimum(allocs + 1, len(order) - 1)], -1)
    # Before the trace: a free whose previous action on its address is not an alloc.
    prev_alloc = np.zeros(len(order), bool)
    prev_alloc[1:] = same_next[:-1] & alloc_o[:-1]
    orphan_frees = order[np.flatnonzero(~alloc_o & ~prev_alloc)]
    alloc_entry = np.concatenate([order[allocs], np.full(len(orphan_frees), -1, np.int64)])
    free_entry = np.concatenate([free_of_alloc, orphan_frees])
    source = np.where(alloc_entry >= 0, alloc_entry, free_entry)
    columns = {c: e[c].to_numpy()[source] for c in ("device", "addr", "size", "stream", "pool", "stack")}
    # Before the trace and still alive: blocks held at the snapshot that no open alloc explains.
    held = blocks[held_blocks(blocks)]
    still_open = free_entry < 0
    explained = pd.MultiIndex.from_arrays([held["device"].to_numpy(), held["address"].to_numpy()]).isin(
        pd.MultiIndex.from_arrays([columns["device"][still_open], columns["addr"][still_open]]))
    unexplained = held[~explained]
    segment_of = unexplained["segment"].to_numpy()
    extra = {"device": unexplained["device"].to_numpy(), "addr": unexplained["address"].to_numpy(),
             "size": unexplained["size"].to_numpy(), "stream": segments["stream"].to_numpy()[segment_of],
             "pool": segments["pool"].to_numpy()[segment_of], "stack": unexplained["stack"].to_numpy()}
    columns = {c: np.concatenate([v, extra[c]]).astype(np.int64) for c, v in columns.items()}
    alloc_entry = np.concatenate([alloc_entry, np.full(len(unexplained), -1, np.int64)])
    free_entry = np.concatenate([free_entry, np.full(len(unexplained), -1, np.int64)])
    # Entries name a pool only in newer versions: the others take their segment's at the snapshot.
    missing = columns["pool"] < 0
    if missing.any():
        columns["pool"][missing] = _segment_pool(segments, columns["device"][missing], columns["addr"][missing])
    # What callers asked for is known from the blocks held at the snapshot.
    asked = held.drop_duplicates(["device", "address"]).set_index(["device", "address"])["requested_size"]
    found = asked.reindex(pd.MultiIndex.from_arrays([columns["device"], columns["addr"]]))
    alive_at_snapshot = (free_entry < 0) & found.notna().to_numpy()
    requested = np.where(alive_at_snapshot, found.fillna(0).to_numpy(np.int64), columns["size"])
    time = e["time_us"].to_numpy()
    starts, ends = device_bounds(e, devices)
    pos_of = np.arange(len(e)) - starts[dense(devices, device_of)]
    has_entries = len(e) > 0
    dev = dense(devices, columns["device"])
    out = pd.DataFrame({
        **columns, "alloc_entry": alloc_entry, "free_entry": free_entry, "requested": requested,
        "alloc_us": np.where(alloc_entry >= 0, time[np.maximum(alloc_entry, 0)], np.nan) if has_entries else np.nan,
        "free_us": np.where(free_entry >= 0, time[np.maximum(free_entry, 0)], np.nan) if has_entries else np.nan,
        "alloc_pos": np.where(alloc_entry >= 0, pos_of[np.maximum(alloc_entry, 0)] if has_entries else -1, -1),
        "free_pos": np.where(free_entry >= 0, pos_of[np.maximum(free_entry, 0)] if has_entries else 0,
                             ends[dev] - starts[dev]),
    })
    out = out.sort_values(["device", "alloc_pos", "addr"], kind="stable", ignore_index=True)
    out["largest_first"] = np.lexsort((-out["size"].to_numpy(), out["device"].to_numpy())).astype(np.int64)
    return out


def _segment_pool(segments: pd.DataFrame, device: npt.NDArray[np.int64], addr: npt.NDArray[np.int64]) \
        -> npt.NDArray[np.int64]:
    """The pool of the segment holding each (device, addr); the default pool (0) outside any
    (older torch names no pool in its entries, and after `empty_cache()` a device may have
    no segment left)."""
    seg = segments.sort_values(["device", "address"], ignore_index=True)
    pools = np.full(len(addr), 0, dtype=np.int64)
    for d in np.intersect1d(device, seg["device"].to_numpy()):  # per device with segments: a handful
        s = seg[seg["device"] == d]
        pick = device == d
        i = np.searchsorted(s["address"].to_numpy(), addr[pick], side="right") - 1
        inside = (i >= 0) & (addr[pick] < s["address"].to_numpy()[np.maximum(i, 0)] + s["total_size"].to_numpy()[np.maximum(i, 0)])
        pools[pick] = np.where(inside, s["pool"].to_numpy()[np.maximum(i, 0)], 0)
    return pools


def running_bytes(entries: pd.DataFrame, segments: pd.DataFrame, allocations: pd.DataFrame,
                  devices: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(allocated, reserved): the bytes allocated and reserved on each entry's device after
    the entry. Reserved bytes are counted back from the segments held at the snapshot."""
    starts, ends = device_bounds(entries, devices)
    counts = ends - starts
    a_dev, size = dense(devices, allocations["device"].to_numpy()), allocations["size"].to_numpy()
    alloc_pos, free_pos = allocations["alloc_pos"].to_numpy(), allocations["free_pos"].to_numpy()
    # Each allocation adds its size at its alloc entry (one from before the trace: at its
    # device's first entry, as it is there already) and takes it back at its free entry.
    delta = np.zeros(len(entries), dtype=np.int64)
    in_trace = counts[a_dev] > 0
    np.add.at(delta, (starts[a_dev] + np.maximum(alloc_pos, 0))[in_trace], size[in_trace])
    freed = free_pos < counts[a_dev]
    np.add.at(delta, (starts[a_dev] + free_pos)[freed], -size[freed])
    sign = np.select([actions_in(entries["action"], "segment_alloc", "segment_map"),
                      actions_in(entries["action"], "segment_free", "segment_unmap")], [1, -1], 0)
    change = sign * entries["size"].to_numpy()
    held = np.zeros(len(devices), dtype=np.int64)
    np.add.at(held, dense(devices, segments["device"].to_numpy()), segments["total_size"].to_numpy())
    allocated = np.empty(len(entries), dtype=np.int64)
    reserved = np.empty(len(entries), dtype=np.int64)
    for device in np.flatnonzero(counts):  # per device: a handful
        rows = slice(int(starts[device]), int(starts[device] + counts[device]))
        allocated[rows] = np.cumsum(delta[rows])
        reserved_change = np.cumsum(change[rows])
        reserved[rows] = int(held[device]) - reserved_change[-1] + reserved_change
    return allocated, reserved
