"""Vectorised structure over interval tables: nesting on a thread, point -> enclosing interval,
and the two walks every tree view needs (`roll_up` totals, `ancestor_where` look-ups).

Intervals on one thread nest by time containment. Both functions work on all threads at once:
times are shifted by `thread * stride` (stride larger than the trace) so one sorted array
holds every thread, and a `searchsorted` answers per-thread questions without a Python loop
per event. The only Python loops run once per nesting level (tens at most).

A tree (the op tree, the module tree) is given as `parent` (row of each node's parent, -1 for
a root or a node left out) and `depth` (any level number larger for a child than for its
parent, such as a nesting depth).
"""

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt


def _stride(ts: npt.NDArray[np.float64], end: npt.NDArray[np.float64]) -> float:
    span = float(np.nanmax(end)) if len(end) else 0.0
    low = float(np.nanmin(ts)) if len(ts) else 0.0
    return 2.0 * (abs(span) + abs(low)) + 10.0


class Nesting:
    """Depth and parent of each interval among intervals on the same thread.

    Rule for real traces, whose events are not always well nested: intervals are ordered by
    (start, longer first, input order); an interval's depth is the number of earlier ones on
    its thread still open at its start (an interval ending exactly at another's start is
    closed), and its parent is the latest earlier interval one level up, if that one contains
    it. Overlapping or duplicated events therefore land on extra depth levels ("lanes") instead
    of being dropped.

    Attributes (all indexed like the input): `depth` (int32), `parent` (int64, -1 for roots).
    """

    def __init__(self, thread: npt.ArrayLike, ts: npt.ArrayLike, dur: npt.ArrayLike) -> None:
        thread = np.asarray(thread, dtype=np.int64)
        ts = np.asarray(ts, dtype=np.float64)
        dur = np.nan_to_num(np.asarray(dur, dtype=np.float64), nan=0.0).clip(min=0.0)
        end = ts + dur
        n = len(ts)
        self.thread, self.ts, self.end = thread, ts, end
        self.stride = _stride(ts, end)
        self.order = np.lexsort((-dur, ts, thread))
        th_sorted = thread[self.order]
        self.global_start = th_sorted * self.stride + ts[self.order]
        self.thread_sorted = th_sorted
        depth_sorted = np.zeros(n, dtype=np.int64)
        parent_sorted = np.full(n, -1, dtype=np.int64)
        if n:
            first_of_thread = np.searchsorted(th_sorted, th_sorted, side="left")
            rank_in_thread = np.arange(n) - first_of_thread
            global_end_sorted = np.sort(th_sorted * self.stride + end[self.order])
            closed = np.searchsorted(global_end_sorted, self.global_start, side="right") - first_of_thread
            # Zero-length intervals at i's start, i itself and those sorted after it, "end"
            # by i's start without being earlier than i: take them out of i's closed count.
            zero = dur[self.order] == 0
            group_last = np.searchsorted(self.global_start, self.global_start, side="right")
            zero_cum = np.concatenate(([0], np.cumsum(zero)))
            closed -= zero_cum[group_last] - zero_cum[np.arange(n)]
            depth_sorted = np.maximum(rank_in_thread - closed, 0)
            end_sorted = end[self.order]
            positions = np.arange(n)
            for level in range(1, int(depth_sorted.max()) + 1):
                here = positions[depth_sorted == level]
                above = positions[depth_sorted == level - 1]
                if not len(here) or not len(above):
                    continue
                k = np.searchsorted(above, here) - 1
                ok = k >= 0
                cand = np.where(ok, above[np.clip(k, 0, None)], -1)
                ok &= th_sorted[cand] == th_sorted[here]
                ok &= end_sorted[cand] >= end_sorted[here]
                parent_sorted[here[ok]] = cand[ok]
        self.depth = np.empty(n, dtype=np.int32)
        self.depth[self.order] = depth_sorted
        self.parent = np.full(n, -1, dtype=np.int64)
        has_parent = parent_sorted >= 0
        self.parent[self.order[has_parent]] = self.order[parent_sorted[has_parent]]

    def enclosing(self, thread: npt.ArrayLike, t: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Index of the innermost interval on `thread` that contains time `t` (-1 if none).

        Vectorised over query points; an interval contains `t` when start <= t <= end.
        """
        thread = np.asarray(thread, dtype=np.int64)
        t = np.asarray(t, dtype=np.float64)
        result = np.full(len(t), -1, dtype=np.int64)
        if not len(self.order) or not len(t):
            return result
        pos = np.searchsorted(self.global_start, thread * self.stride + t, side="right") - 1
        valid = pos >= 0
        pos = np.clip(pos, 0, None)
        valid &= self.thread_sorted[pos] == thread
        cand = np.where(valid, self.order[pos], -1)
        # Walk up parents until the candidate contains t; at most max-depth rounds.
        for _ in range(int(self.depth.max()) + 2 if len(self.depth) else 0):
            pending = (cand >= 0) & (self.end[np.clip(cand, 0, None)] < t)
            if not pending.any():
                break
            cand[pending] = self.parent[cand[pending]]
        return cand


def innermost_container(thread: npt.ArrayLike, ts: npt.ArrayLike, dur: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Per interval: the interval on its thread that most tightly contains it (the latest to
    start among those starting no later and ending no earlier, the longer first on a tie,
    ending after its start); -1 if none.

    This is the parent torch's profiler gives an event (`EventList._populate_cpu_children`
    keeps a stack and pops any interval the next one is not inside): an interval that only
    partly overlaps another is not its child, nor are the intervals inside it. Vectorised as
    "nearest earlier interval in start order that ends no earlier", found for all intervals
    at once by binary lifting over a table of range maxima of the ends (log2(n) numpy steps).
    """
    thread = np.asarray(thread, dtype=np.int64)
    ts = np.asarray(ts, dtype=np.float64)
    end = ts + np.nan_to_num(np.asarray(dur, dtype=np.float64), nan=0.0).clip(min=0.0)
    n = len(ts)
    result = np.full(n, -1, dtype=np.int64)
    if not n:
        return result
    order = np.lexsort((np.arange(n), -end, ts, thread))
    s_thread, s_ts, s_end = thread[order], ts[order], end[order]
    first = np.searchsorted(s_thread, s_thread, side="left")  # first position of each thread
    # Only the order of the ends matters: their ranks as int32 halve the table's memory
    # (log2(n) arrays of n). maxima[k][j] = max(rank[j : j + 2**k])
    # (equal ends get equal ranks: the position of the first of them in sorted order)
    rank = np.searchsorted(np.sort(s_end), s_end, side="left").astype(np.int32)
    maxima = [rank]
    while (1 << len(maxima)) <= n:
        prev, half = maxima[-1], 1 << (len(maxima) - 1)
        maxima.append(np.maximum(prev[:-half], prev[half:]))
    # from each position, step left over blocks that all end before it ends
    pos = np.arange(n)
    for k in range(len(maxima) - 1, -1, -1):
        width = 1 << k
        start = pos - width
        can = start >= first
        safe = np.clip(start, 0, len(maxima[k]) - 1)
        step = can & (maxima[k][safe] < rank)
        pos = np.where(step, start, pos)
    found = pos - 1
    ok = found >= first
    found_safe = np.clip(found, 0, None)
    ok &= s_end[found_safe] > s_ts  # an interval ending at the other's start is closed
    result[order[ok]] = order[found_safe[ok]]
    return result


def lookup(keys: npt.ArrayLike, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Position in `keys` of each of `values` (-1 where absent or the value is negative).

    Where a key repeats, its first position wins.
    """
    keys = np.asarray(keys, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    if not len(keys) or not len(values):
        return np.full(len(values), -1, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    pos = np.searchsorted(sorted_keys, values, side="left")
    pos_clipped = np.clip(pos, 0, len(keys) - 1)
    found = (pos < len(keys)) & (sorted_keys[pos_clipped] == values) & (values >= 0)
    return np.where(found, order[pos_clipped], -1)


def flow_peers(key: npt.NDArray[np.int64], is_start: npt.NDArray[np.bool_], is_end: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Row of the other end of each flow arrow: the first start of each `key` and the first
    end of the same key point at each other; every other row gets -1. `key` tells flows
    apart (flow ids are only unique within a flow category)."""
    peer = np.full(len(key), -1, dtype=np.int64)
    key = np.asarray(key, dtype=np.int64)

    def first_of_key(mask: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        rows = np.flatnonzero(mask)
        keys, first = np.unique(key[rows], return_index=True)
        return keys, rows[first]

    start_keys, start_rows = first_of_key(is_start)
    end_keys, end_rows = first_of_key(is_end)
    _, at_start, at_end = np.intersect1d(start_keys, end_keys, assume_unique=True, return_indices=True)
    peer[start_rows[at_start]] = end_rows[at_end]
    peer[end_rows[at_end]] = start_rows[at_start]
    return peer


def _levels(parent: npt.ArrayLike, depth: npt.ArrayLike, shallowest_first: bool) -> Iterator[npt.NDArray[np.int64]]:
    """(level, rows of that level that have a parent) for each level, in the order asked."""
    linked = np.asarray(parent) >= 0
    levels = np.unique(np.asarray(depth)[linked])
    for level in levels if shallowest_first else levels[::-1]:
        yield np.flatnonzero(linked & (depth == level))


def roll_up(values: npt.ArrayLike, parent: npt.ArrayLike, depth: npt.ArrayLike,
            combine: np.ufunc = np.add) -> npt.NDArray[Any]:
    """Bottom-up totals over a tree: each node's `values` combined with those of every
    descendant, by `combine` (a numpy ufunc: `np.add` for sums, `np.logical_or` for "any
    below"). `values` has one row per node (shape (n,) or (n, k)); a new array is returned.
    One numpy step per level, deepest first."""
    out = np.array(values, copy=True)
    parent = np.asarray(parent)
    for rows in _levels(parent, depth, shallowest_first=False):
        combine.at(out, parent[rows], out[rows])
    return out


def ancestor_where(mask: npt.NDArray[np.bool_], parent: npt.ArrayLike, depth: npt.ArrayLike,
                   outermost: bool = False) -> npt.NDArray[np.int64]:
    """Per node: the nearest node among itself and its ancestors where `mask` holds (the
    farthest one with `outermost`); -1 where none does. One numpy step per level, shallowest
    first."""
    if not mask.any():  # no such node (no compiled region, no module): no walk up the levels
        return np.full(len(mask), -1, dtype=np.int64)
    out = np.where(mask, np.arange(len(mask)), -1)
    parent = np.asarray(parent)
    for rows in _levels(parent, depth, shallowest_first=True):
        above = out[parent[rows]]
        out[rows] = np.where(above >= 0, above, out[rows]) if outermost else np.where(out[rows] >= 0, out[rows], above)
    return out


def tree_depth(parent: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Depth of each node of a tree given by `parent` alone (0 for roots); one numpy step per
    level. Nodes on a cycle of parents stop growing after as many steps as there are nodes."""
    parent = np.asarray(parent, dtype=np.int64)
    depth = np.zeros(len(parent), dtype=np.int64)
    has_parent = parent >= 0
    for _ in range(len(parent)):
        deeper = np.where(has_parent, depth[np.clip(parent, 0, None)] + 1, 0)
        if np.array_equal(deeper, depth):
            break
        depth = deeper
    return depth
