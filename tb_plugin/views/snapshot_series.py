"""A memory snapshot's devices over time, computed once per model for the views of
`memory_snapshot` (where allocations, allocated and reserved bytes and moments are defined):
each device's allocated and reserved bytes after each entry, indexed for the largest value
over any range of entries (`DeviceSeries`, `range_max`); the position of a moment in the
device's trace; the allocations alive at a moment, and the largest alive in a window.
"""

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..errors import BadParameterError, NotFoundError
from ..snapshot.model import SnapshotModel, actions_in
from .common import cached

# Allocations are searched for the largest alive in a window this many at a time (largest first).
_BAND_SEARCH_CHUNK = 1 << 16


def allocations(model: SnapshotModel) -> pd.DataFrame:
    """One row per allocation (`memory_snapshot`'s docstring) with its lifetime, made when
    the snapshot was decoded (`SnapshotModel.allocations`, columns in `snapshot/lifetimes.py`)."""
    return model.allocations



def action_is(model: SnapshotModel, *names: str) -> npt.NDArray[np.bool_]:
    return actions_in(model.entries["action"], *names)


@dataclass
class DeviceSeries:
    """One device's allocated and reserved bytes after each of its entries (`before_*`: at
    the trace's start), with the entries' times."""

    start: int  # row of the device's first entry
    time_us: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
    before_allocated: int
    before_reserved: int
    allocated_blocks: list  # _BlockMaxima of `allocated`, finest first
    reserved_blocks: list


# Block sizes of the maxima kept per series: a column of the timeline reads at most two
# partial blocks per level and the whole blocks of the coarsest, however many entries it spans.
_BLOCK_SIZES = (64, 4096)


@dataclass
class _BlockMaxima:
    """Per block of `size` consecutive entries: the largest value and the first position holding it."""

    size: int
    maxima: np.ndarray
    positions: np.ndarray


def _block_maxima(values: npt.NDArray[np.int64], step: int, positions: npt.NDArray[np.int64]) \
        -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(largest, first position holding it) of `values` (found at `positions`) per run of `step` of them."""
    whole = len(values) // step * step
    blocks = values[:whole].reshape(-1, step)
    first = np.argmax(blocks, axis=1) + np.arange(0, whole, step)  # argmax: the first of equals
    if whole < len(values):  # the last, shorter run
        first = np.append(first, whole + int(np.argmax(values[whole:])))
    return values[first], positions[first]


def _levels(values: npt.NDArray[np.int64]) -> list[_BlockMaxima]:
    """The entries themselves (block size 1), then the coarser block maxima, each built from the one below."""
    levels = [_BlockMaxima(1, values, np.arange(len(values)))]
    for size in _BLOCK_SIZES:
        below = levels[-1]
        levels.append(_BlockMaxima(size, *_block_maxima(below.maxima, size // below.size, below.positions)))
    return levels


def range_max(levels: list[_BlockMaxima], lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64]) \
        -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(largest value, first position holding it) over entries [lo, hi) of each column, from
    the coarsest whole blocks inward; columns with lo >= hi get (-1, -1)."""
    best = np.full(len(lo), np.iinfo(np.int64).min, dtype=np.int64)
    where = np.full(len(lo), -1, dtype=np.int64)
    pending = [(np.arange(len(lo)), lo.astype(np.int64), hi.astype(np.int64))]
    for level in reversed(levels):
        size, next_pending = level.size, []
        for cols, a, b in pending:
            first_block, end_block = -(-a // size), b // size
            whole = end_block > first_block
            if size > 1:  # what whole blocks leave on either side goes to the finer levels
                next_pending += [(cols[~whole], a[~whole], b[~whole]),
                                 (cols[whole], a[whole], first_block[whole] * size),
                                 (cols[whole], end_block[whole] * size, b[whole])]
            c, f, e = cols[whole], first_block[whole], end_block[whole]
            if not len(c):
                continue
            lengths = e - f
            offsets = np.cumsum(lengths) - lengths
            idx = np.arange(int(lengths.sum())) - np.repeat(offsets, lengths) + np.repeat(f, lengths)
            values = level.maxima[idx]
            top = np.maximum.reduceat(values, offsets)
            pos = np.minimum.reduceat(np.where(values == np.repeat(top, lengths), level.positions[idx], np.iinfo(np.int64).max), offsets)
            better = (top > best[c]) | ((top == best[c]) & (pos < where[c]))
            best[c[better]], where[c[better]] = top[better], pos[better]
        pending = [(c, a, b) for c, a, b in next_pending if len(c)]
    return best, where


def device_series(model: SnapshotModel, device: int) -> DeviceSeries:
    return cached(model, ("series", device), lambda: _build_series(model, device))


def _build_series(model: SnapshotModel, device: int) -> DeviceSeries:
    """Read from the entries' allocated and reserved columns (made when the snapshot was
    decoded); only the block maxima are built here, a few passes over the device's entries."""
    e = model.entries
    devices = e["device"].to_numpy()
    start, end = np.searchsorted(devices, device, side="left"), np.searchsorted(devices, device, side="right")
    n = end - start
    allocated, reserved = e["allocated"].to_numpy()[start:end], e["reserved"].to_numpy()[start:end]
    a = allocations(model)
    of_device = a["device"].to_numpy() == device
    before_allocated = int(a["size"].to_numpy()[of_device & (a["alloc_pos"].to_numpy() < 0)].sum())
    reserved_end = int(model.segments["total_size"][model.segments["device"] == device].sum())
    if n:  # what the first entry itself changed, taken back
        first = e["action"].iloc[start]
        sign = 1 if first in ("segment_alloc", "segment_map") else -1 if first in ("segment_free", "segment_unmap") else 0
        before_reserved = int(reserved[0]) - sign * int(e["size"].to_numpy()[start])
    else:
        before_reserved = reserved_end
    return DeviceSeries(int(start), e["time_us"].to_numpy()[start:end], allocated, reserved, before_allocated, before_reserved,
                   _levels(allocated), _levels(reserved))


def check_device(model: SnapshotModel, device: int) -> None:
    devices = model.devices()
    if device not in devices:
        raise NotFoundError(f"the snapshot has no device {device}; it has {devices}")


def entry_position(model: SnapshotModel, device: int, entry: int | None) -> int:
    """The position in the device's trace of `entry` (a row of `entries`; None: the last one)."""
    series = device_series(model, device)
    n = len(series.allocated)
    if entry is None:
        return n - 1
    pos = int(entry) - series.start
    if entry != -1 and not 0 <= pos < n:
        raise BadParameterError(f"entry {entry} is not one of device {device}'s: they are {series.start}..{series.start + n - 1} "
                                "(-1 for the state before the trace)")
    return -1 if entry == -1 else pos


def bytes_at(series: DeviceSeries, pos: int) -> tuple[int, int]:
    if pos < 0:
        return series.before_allocated, series.before_reserved
    return int(series.allocated[pos]), int(series.reserved[pos])



def alive_after(model: SnapshotModel, device: int, entry: int | None) -> pd.DataFrame:
    """The allocations alive after `entry` (`memory_snapshot`'s docstring) on `device`."""
    check_device(model, device)
    pos = entry_position(model, device, entry)
    a = allocations(model)
    a = a[a["device"].to_numpy() == device]
    return a[(a["alloc_pos"].to_numpy() <= pos) & (a["free_pos"].to_numpy() > pos)]


def allocation_columns(model: SnapshotModel) -> dict[Hashable, npt.NDArray[Any]]:
    """`allocations` as {column: numpy array}: a window's bands take a few rows of it, which
    costs a gather per column instead of a DataFrame's row selection."""
    return cached(model, "allocation_columns", lambda: {c: v.to_numpy() for c, v in allocations(model).items()})


def by_size(model: SnapshotModel, device: int) \
        -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The device's allocations, largest first (searched for the bands of a window): the
    decoded `largest_first` column's slice of the device."""
    def build() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        a = allocations(model)
        devices = a["device"].to_numpy()
        rows = slice(np.searchsorted(devices, device, side="left"), np.searchsorted(devices, device, side="right"))
        order = a["largest_first"].to_numpy()[rows]
        return order, a["alloc_pos"].to_numpy()[order], a["free_pos"].to_numpy()[order]
    return cached(model, ("by_size", device), build)


def largest_alive(model: SnapshotModel, device: int, first_pos: int, last_pos: int, count: int) \
        -> npt.NDArray[np.int64]:
    """Rows of `allocations` of the `count` largest alive at some position in [first_pos, last_pos]."""
    order, alloc_pos, free_pos = by_size(model, device)
    found = []
    for lo in range(0, len(order), _BAND_SEARCH_CHUNK):
        hi = lo + _BAND_SEARCH_CHUNK
        hit = (alloc_pos[lo:hi] <= last_pos) & (free_pos[lo:hi] > first_pos)
        found.append(order[lo:hi][hit])
        if sum(len(f) for f in found) >= count:
            break
    return np.concatenate(found)[:count] if found else np.empty(0, np.int64)
