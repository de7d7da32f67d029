"""Interval arithmetic over many intervals at once, by sweeps over sorted boundaries.

All functions take plain numpy arrays of starts and ends (microseconds) and never loop in
Python per interval.
"""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def clip_to_windows(starts: npt.ArrayLike, ends: npt.ArrayLike, win_start: npt.ArrayLike, win_end: npt.ArrayLike) \
        -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Pieces of the intervals inside each window: (window, source interval, start, end).

    Windows must not overlap each other; an interval crossing window edges is cut.
    """
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    win_start = np.asarray(win_start, dtype=np.float64)
    win_end = np.asarray(win_end, dtype=np.float64)
    if not len(starts) or not len(win_start):
        empty = np.zeros(0)
        return np.zeros(0, np.int64), np.zeros(0, np.int64), empty, empty
    order = np.argsort(win_start)
    ws, we = win_start[order], win_end[order]
    first = np.clip(np.searchsorted(we, starts, side="right"), 0, len(ws))  # first window ending after start
    last = np.searchsorted(ws, ends, side="left") - 1  # last window starting before end
    count = np.clip(last - first + 1, 0, None)
    idx = np.repeat(np.arange(len(starts)), count)
    offsets = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    win = first[idx] + offsets
    s = np.maximum(starts[idx], ws[win])
    e = np.minimum(ends[idx], we[win])
    keep = e > s
    return order[win[keep]], idx[keep], s[keep], e[keep]


def exclusive_time(windows: tuple[npt.ArrayLike, npt.ArrayLike],
                   categories: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]]) -> npt.NDArray[np.float64]:
    """Time of each window claimed by each category, higher priority first.

    Parameters
    ----------
    windows : (starts, ends) arrays, non-overlapping.
    categories : list of (starts, ends) arrays, highest priority first.

    Returns
    -------
    ndarray (n_windows, n_categories + 1): per window, the time where each category is the
    highest-priority active one; the last column is time covered by no category. Rows sum
    exactly to the window lengths.
    """
    win_start, win_end = (np.asarray(a, dtype=np.float64) for a in windows)
    n_cat = len(categories)
    result = np.zeros((len(win_start), n_cat + 1))
    if not len(win_start):
        return result
    times, deltas, cats, wins = [], [], [], []
    for category, (starts, ends) in enumerate(categories):
        w, _, s, e = clip_to_windows(starts, ends, win_start, win_end)
        times += [s, e]
        deltas += [np.ones(len(s), np.int64), -np.ones(len(e), np.int64)]
        cats += [np.full(2 * len(s), category)]
        wins += [w, w]
    # Window edges are boundaries too, so no elementary segment straddles two windows.
    times += [win_start, win_end]
    deltas += [np.zeros(2 * len(win_start), np.int64)]
    cats += [np.full(2 * len(win_start), n_cat)]
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    c = np.concatenate(cats)
    order = np.argsort(t, kind="stable")
    t, d, c = t[order], d[order], c[order]
    segment = np.diff(t, append=t[-1])
    # The highest-priority active category of each segment; n_cat when none is active. One
    # running count per category (not a segments x categories matrix: that would take
    # hundreds of MB on a large trace), lowest priority first so higher ones overwrite.
    top = np.full(len(t), n_cat, dtype=np.int64)
    for category in range(n_cat - 1, -1, -1):
        top[np.cumsum(np.where(c == category, d, 0)) > 0] = category
    order_w = np.argsort(win_start)
    ws_sorted = win_start[order_w]
    seg_win = np.searchsorted(ws_sorted, t, side="right") - 1
    inside = (seg_win >= 0) & (segment > 0)
    seg_win_c = np.clip(seg_win, 0, None)
    inside &= t < win_end[order_w][seg_win_c]
    np.add.at(result, (order_w[seg_win_c[inside]], top[inside]), segment[inside])
    # The uncovered column is computed from the window length, so rows sum exactly.
    result[:, n_cat] = np.maximum(win_end - win_start - result[:, :n_cat].sum(axis=1), 0.0)
    return result


def union_length(starts: npt.ArrayLike, ends: npt.ArrayLike,
                 windows: tuple[npt.ArrayLike, npt.ArrayLike]) -> npt.NDArray[np.float64]:
    """Per window, the length of the union of the intervals inside it."""
    return exclusive_time(windows, [(starts, ends)])[:, 0]


def weighted_level_integral(starts: npt.ArrayLike, ends: npt.ArrayLike, weights: npt.ArrayLike,
                            windows: tuple[npt.ArrayLike, npt.ArrayLike], cap: float | None = None) \
        -> npt.NDArray[np.float64]:
    """Per window, the integral over time of the summed weights of active intervals.

    With `cap`, the summed level is capped at each instant (e.g. SM efficiency at 1).
    """
    win_start, win_end = (np.asarray(a, dtype=np.float64) for a in windows)
    result = np.zeros(len(win_start))
    _, src, s, e = clip_to_windows(starts, ends, win_start, win_end)
    if not len(s):
        return result
    wt = np.asarray(weights, dtype=np.float64)[src]
    t = np.concatenate([s, e, win_start, win_end])
    d = np.concatenate([wt, -wt, np.zeros(2 * len(win_start))])
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    level = np.cumsum(d)
    level = np.where(np.abs(level) < 1e-9, 0.0, level)
    if cap is not None:
        level = np.minimum(level, cap)
    segment = np.diff(t, append=t[-1])
    order_w = np.argsort(win_start)
    seg_win = np.searchsorted(win_start[order_w], t, side="right") - 1
    ok = (seg_win >= 0) & (segment > 0)
    seg_win_c = np.clip(seg_win, 0, None)
    ok &= t < win_end[order_w][seg_win_c]
    np.add.at(result, order_w[seg_win_c[ok]], (level * segment)[ok])
    return result
