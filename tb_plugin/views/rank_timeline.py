"""Several ranks of one span on one time axis: the Trace view's ranks mode.

Each rank's trace times count from its own origin (its first event) on its own host's clock.
The shared axis counts from the reference rank's origin (the lowest rank, as in the job
view's clock alignment), and rank r's times move onto it by

    shift_us = origin_r + offset_r - origin_reference

where offset_r is the job view's clock offset (`job.clocks`: the median difference of the
ends of collective calls matched with the reference rank; 0 with ``align_clocks=False``, when
the ranks' clocks are trusted as they are, e.g. all on one host).

The memory held never grows with the number of ranks shown. A rank is one collapsible group of
tracks; collapsed, it is drawn from a small per-rank summary (`RankTimelinePart`, kept by the
server after the rank's model is dropped): its busy time (device activity, or host operators
on a rank without device work) as at most about `SUMMARY_BLOCKS` blocks over its span
(gaps and events shorter than span / `SUMMARY_BLOCKS` merged, so zoomed in further a collapsed
rank shows those blocks, no finer; expand it for its events). Only an expanded rank's model is
loaded, and its own `TimelineIndex` answers with the window moved by the rank's shift, so
every rank costs what its pixels cost, as a single trace does.

Track ids on the shared axis: rank i of the listed ranks owns ids ``i * RANK_TRACK_STRIDE``
(its summary track) and ``i * RANK_TRACK_STRIDE + 1 + t`` (its own track t).

Over the expanded ranks, what one trace's timeline offers: search by name (`rank_search`),
per-name totals in a range (`rank_range_summary`) and counter series (`rank_counters`). Each
calls the single-trace function (`timeline.matching_slices` / `search_position`,
`timeline.range_summary`, `timeline.counters`) on the rank's own index with the window
moved onto its own clock, and moves the answer back; that move is `_Shown`'s, the one place
a rank's shift is applied. Collapsed ranks hold no events: the answers name them instead.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..errors import BadParameterError, NotFoundError
from ..schema import RANKS, Persisted, Table, choice, declare, documented, ids, integer, number, route, text, window
from ..trace.model import TraceModel
from .common import device_activity
from .job import RankPart, clocks
from .timeline import (COUNTER_POINTS, KINDS, MAX_COUNTER_POINTS, RESOLUTION, TIMELINE_SUMMARY, TIMELINE_TRACKS,
                       TimelineIndex, counters, matching_slices, merge_blocks, range_summary, search_position,
                       slice_endpoint)

SUMMARY_BLOCKS = 2048
RANK_TRACK_STRIDE = 1 << 20  # tracks of one rank; 2,047 ranks fit in the API's track ids
MAX_RANKS = (1 << 31) // RANK_TRACK_STRIDE - 1
# Each expanded rank holds its whole model while it is drawn: a bound, so that expanding
# never asks for more models at once than a server keeps within its memory budget.
MAX_EXPANDED = 16

TIMELINE_RANKS = declare(
    "timeline_ranks", "one rank on the shared time axis of the Trace view's ranks mode",
    ("rank", "int64", "", "the rank (as in the job view)"),
    ("worker", "str", "", "its worker"),
    ("track", "int64", "", "id of its summary track; its own track t has id track + 1 + t"),
    ("offset_us", "float64", "us", "clock offset applied (the job view's clocks; 0 with align_clocks=false)"),
    ("shift_us", "float64", "us", "added to its trace times: its origin minus the reference rank's, plus offset_us"),
    ("aligned", "bool", "", "whether a clock offset could be measured (the reference rank counts as aligned)"),
    ("matched_calls", "int64", "count", "collective calls shared with the reference rank that gave the offset"),
    ("start_us", "float64", "us", "its first event on the shared axis"),
    ("end_us", "float64", "us", "its last event's end on the shared axis"),
    ("summary", "str", "", "what its summary track shows: device activity, or host operators"),
)
TIMELINE_RANK_SUMMARY_BY_RANK = declare(
    "timeline_rank_summary_by_rank", "one slice name (and kind) of one rank in a time range of the shared axis",
    ("rank", "int64", "", "the rank"),
    ("worker", "str", "", "its worker"),
    *TIMELINE_SUMMARY.columns,
)
TIMELINE_RANK_SUMMARY = declare(
    "timeline_rank_summary", "one slice name (and kind) in a time range of the shared axis, over the ranks summed",
    *TIMELINE_SUMMARY.columns[:2],
    ("count", "int64", "count", "slices overlapping the range, on all the ranks summed"),
    ("total_us", "float64", "us", "their time clipped to the range, added over the ranks"),
    ("ranks", "int64", "count", "ranks with such a slice in the range"),
    ("min_rank_us", "float64", "us", "the smallest total of one of those ranks"),
    ("min_rank", "int64", "", "that rank (the lowest one on a tie)"),
    ("max_rank_us", "float64", "us", "the largest total of one rank"),
    ("max_rank", "int64", "", "that rank (the lowest one on a tie)"),
)


@dataclass(eq=False)  # identity semantics: held weakly by the server's reply cache
class RankTimelinePart:
    """What a collapsed rank needs of its model: its span and busy blocks (µs from its origin)."""

    start_us: float
    end_us: float
    summary: str
    block_start: np.ndarray
    block_end: np.ndarray
    block_count: np.ndarray  # events inside
    block_busy: np.ndarray  # µs when at least one of them ran


def _blocks(name: str, dtype: str, unit: str, doc: str) -> Table:
    return declare(f"rank_timeline_part_{name}", f"one busy block of a collapsed rank's summary track: its {name}",
                   ("value", dtype, unit, doc))


# A `RankTimelinePart` as the disk cache stores it: each array a table of one column.
RANK_TIMELINE_PART = Persisted("rank_timeline", RankTimelinePart, {
    "block_start": _blocks("start", "float64", "us", "the block's start, from the rank's origin"),
    "block_end": _blocks("end", "float64", "us", "the block's end, from the rank's origin"),
    "block_count": _blocks("count", "int64", "count", "events inside the block"),
    "block_busy": _blocks("busy", "float64", "us", "time in the block when at least one of them ran"),
}, scalars=declare("rank_timeline_part", "one rank's span and what its summary track shows",
                   ("start_us", "float64", "us", "the trace's first event, from its origin"),
                   ("end_us", "float64", "us", "the trace's last event's end, from its origin"),
                   ("summary", "str", "", "what its summary track shows: device activity, or host operators")),
   arrays=("block_start", "block_end", "block_count", "block_busy"))


def rank_timeline_part(model: TraceModel) -> RankTimelinePart:
    """The `RankTimelinePart` of one rank's model."""
    start, end = model.span_us()
    activity = device_activity(model)
    if len(activity):
        summary, ts, dur = "device activity", activity["ts"].to_numpy(), activity["dur"].to_numpy()
    else:
        summary, ts, dur = "host operators", model.ops["ts"].to_numpy(), model.ops["dur"].to_numpy()
    seg_start, seg_end, seg_count = _union(ts.astype(np.float64), (ts + dur).astype(np.float64))
    resolution = max((end - start) / SUMMARY_BLOCKS, 1e-9)
    zeros = np.zeros(len(seg_start), dtype=np.int64)
    _, b_start, b_end, b_count, b_busy, _, _ = merge_blocks(zeros, seg_start, seg_end, seg_count, seg_end - seg_start,
                                                            zeros, zeros - 1, resolution)
    return RankTimelinePart(float(start), float(end), summary, b_start, b_end, b_count, b_busy)


def _union(starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64]) \
        -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Disjoint intervals covering the union of [starts, ends), and the events in each."""
    if not len(starts):
        return starts, ends, np.zeros(0, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    opens = np.r_[True, starts[1:] > reach[:-1]]
    segment = np.cumsum(opens) - 1
    seg_end = np.full(int(segment[-1]) + 1, -np.inf)
    np.maximum.at(seg_end, segment, ends)
    return starts[opens], seg_end, np.bincount(segment).astype(np.int64)


def rank_workers(job_parts: Mapping[str, RankPart], ranks: Sequence[int] | None, most: int = MAX_RANKS) -> list[str]:
    """The workers of `ranks` (None: every rank), in rank order; `NotFoundError` naming the
    job's ranks for one it lacks, `BadParameterError` for more than `most`."""
    table = clocks(job_parts, align_clocks=False)
    known = dict(zip(table["rank"].tolist(), table["worker"].tolist()))
    if ranks is None:
        wanted = sorted(known)
    else:
        missing = [r for r in ranks if r not in known]
        if missing:
            raise NotFoundError(f"no rank {missing[0]} in this span; ranks: {_ranges(sorted(known))}")
        wanted = sorted(set(ranks))
    if len(wanted) > most:
        raise BadParameterError(f"at most {most} ranks at once, not {len(wanted)}")
    return [known[r] for r in wanted]


def _ranges(values: list[int]) -> str:
    return f"{values[0]}..{values[-1]}" if values and values == list(range(values[0], values[-1] + 1)) else \
        ", ".join(map(str, values))


@documented(TIMELINE_RANKS)
def rank_frame(job_parts: Mapping[str, RankPart], parts: Mapping[str, RankTimelinePart],
               align_clocks: bool = True) -> pd.DataFrame:
    """The ranks of {worker: `RankTimelinePart`} on the shared axis, by rank; `job_parts` holds
    every worker of the span (the clock offsets compare each rank with the reference)."""
    table = clocks(job_parts, align_clocks).set_index("worker")
    reference = job_parts[str(table["rank"].idxmin())] if len(table) else None
    workers = sorted(parts, key=lambda w: int(table.at[w, "rank"]))
    origin = np.array([job_parts[w].origin_us for w in workers], dtype=np.float64)
    offset = table.loc[workers, "offset_us"].to_numpy(dtype=np.float64)
    shift = origin + offset - (reference.origin_us if reference is not None else 0.0)
    return TIMELINE_RANKS.frame({
        "rank": table.loc[workers, "rank"].to_numpy(),
        "worker": workers,
        "track": np.arange(len(workers), dtype=np.int64) * RANK_TRACK_STRIDE,
        "offset_us": offset,
        "shift_us": shift,
        "aligned": table.loc[workers, "aligned"].to_numpy(),
        "matched_calls": table.loc[workers, "matched_calls"].to_numpy(),
        "start_us": np.array([parts[w].start_us for w in workers]) + shift,
        "end_us": np.array([parts[w].end_us for w in workers]) + shift,
        "summary": [parts[w].summary for w in workers],
    })


class _Shown(NamedTuple):
    """One row of a `TIMELINE_RANKS` frame, typed, and the one place where its shift moves
    times and track ids between the rank's own trace and the shared axis."""

    rank: int
    worker: str
    track: int
    offset_us: float
    shift_us: float
    summary: str

    def own_time(self, shared_us: float) -> float:
        """A time of the shared axis on this rank's own clock (µs from its origin)."""
        return shared_us - self.shift_us

    def shared_time(self, own_us: Any) -> Any:
        """Times of this rank's trace (a number or an array) on the shared axis."""
        return own_us + self.shift_us

    def own_tracks(self, wanted: np.ndarray | None) -> np.ndarray | None:
        """Which of this rank's own tracks the shared-axis track ids `wanted` name (None: all)."""
        if wanted is None:
            return None
        return wanted[(wanted > self.track) & (wanted < self.track + RANK_TRACK_STRIDE)] - self.track - 1

    def shared_tracks(self, own: Any) -> Any:
        """Track ids of the shared axis of this rank's own track ids (a number or an array)."""
        return own + self.track + 1

    def on_axis(self, endpoint: dict[str, Any]) -> dict[str, Any]:
        """An endpoint of this rank's index (`timeline.slice_endpoint`) on the shared axis,
        with its rank, worker and its time on its own clock (`own_ts_us`)."""
        return {**endpoint, "track": int(self.shared_tracks(endpoint["track"])),
                "ts_us": float(self.shared_time(endpoint["ts_us"])), "own_ts_us": endpoint["ts_us"],
                "rank": self.rank, "worker": self.worker}


def _shown(frame: pd.DataFrame) -> list[_Shown]:
    return [_Shown(int(r), str(w), int(t), float(o), float(s), str(m)) for r, w, t, o, s, m in zip(
        frame["rank"].tolist(), frame["worker"].tolist(), frame["track"].tolist(), frame["offset_us"].tolist(),
        frame["shift_us"].tolist(), frame["summary"].tolist())]


def _expanded(frame: pd.DataFrame, indexes: Mapping[str, TimelineIndex]) -> tuple[list[_Shown], list[int]]:
    """The ranks shown with an index (expanded), in rank order, and the ranks shown without."""
    shown = _shown(frame)
    return [r for r in shown if r.worker in indexes], [r.rank for r in shown if r.worker not in indexes]


def rank_tracks(frame: pd.DataFrame, indexes: Mapping[str, TimelineIndex]) -> pd.DataFrame:
    """The tracks of the shared axis (`TIMELINE_TRACKS` columns): per rank its summary track,
    then, for a rank in `indexes` (expanded), its own tracks; one process per rank, so that
    each rank is one group of tracks."""
    pieces = []
    for row in _shown(frame):  # one per rank shown
        label = f"Rank {row.rank} · {row.worker}"
        pid = f"rank {row.rank}"
        pieces.append(pd.DataFrame({
            "track": [row.track], "kind": ["rank"], "process": [label], "thread": [f"{row.summary} (summary)"],
            "pid": [pid], "tid": [""], "device": [-1], "stream": [-1], "sort_process": [float(row.rank)],
            "sort_thread": [-1.0], "lanes": [1], "events": [0]}))
        index = indexes.get(row.worker)
        if index is not None:
            own = index.tracks
            pieces.append(own.assign(track=own["track"] + row.track + 1, process=label, pid=pid,
                                     thread=own["process"] + " · " + own["thread"], sort_process=float(row.rank)))
    return TIMELINE_TRACKS.frame(pd.concat(pieces, ignore_index=True) if pieces else {c: [] for c in TIMELINE_TRACKS.names})


def rank_slices(frame: pd.DataFrame, parts: Mapping[str, RankTimelinePart], indexes: Mapping[str, TimelineIndex],
                start_us: float, end_us: float, resolution_us: float,
                tracks: Sequence[int] | None = None,
                admit: Callable[[int, str], None] | None = None) -> dict[str, Any]:
    """Slices of the shared axis in [start_us, end_us] at `resolution_us`, shaped as
    `TimelineIndex.query` answers (track ids of the shared axis, times on it), plus `rank`
    (the rank of each row: event ids are that rank's own) and `offsets` (per rank shown: rank,
    worker, shift_us, offset_us). Every rank's summary track answers from its summary (all
    ranks merged in one pass); a rank in `indexes` (expanded) also from its own index, the
    window moved by its shift; `admit` bounds each such query (`TimelineIndex.query`)."""
    wanted = None if tracks is None else np.unique(np.asarray(tracks, dtype=np.int64))
    shown = _shown(frame)
    replies = [_summary_slices([r for r in shown if wanted is None or (wanted == r.track).any()], parts,
                               start_us, end_us, resolution_us)]
    for row in shown:  # one per rank shown
        index = indexes.get(row.worker)
        if index is None:
            continue
        own = row.own_tracks(wanted)
        if own is not None and not len(own):
            continue
        local = index.query(row.own_time(start_us), row.own_time(end_us), resolution_us, own, admit)
        local["track"] = row.shared_tracks(np.asarray(local["track"], dtype=np.int64)).tolist()
        local["start_us"] = row.shared_time(np.asarray(local["start_us"], dtype=np.float64)).tolist()
        local["rank"] = [row.rank] * len(local["track"])
        replies.append(local)
    out: dict[str, Any] = {k: [] for k in ("track", "lane", "start_us", "dur_us", "name", "count", "busy_us", "event",
                                           "kind", "rank")}
    names: list[str] = []
    for reply in replies:
        out["name"] += (np.asarray(reply["name"], dtype=np.int64) + len(names)).tolist()
        for key in ("track", "start_us", "lane", "dur_us", "count", "busy_us", "event", "kind", "rank"):
            out[key] += reply[key]
        names += reply["names"]
    out["names"] = names
    out["kinds"] = list(KINDS)
    out["offsets"] = [{"rank": r.rank, "worker": r.worker, "shift_us": r.shift_us, "offset_us": r.offset_us}
                      for r in shown]
    return out


def _summary_slices(rows: Sequence[_Shown], parts: Mapping[str, RankTimelinePart], start_us: float, end_us: float,
                    resolution_us: float) -> dict[str, Any]:
    """The summary blocks of the ranks `rows` overlapping the window, on the shared axis, each
    on its rank's summary track, merged at the resolution (one merge for all the ranks, each
    rank a group of its own); in `TimelineIndex.query`'s shape plus `rank`."""
    pieces = []
    for i, row in enumerate(rows):  # one mask per rank; the merge is one for all
        part = parts[row.worker]
        inside = (part.block_start <= row.own_time(end_us)) & (part.block_end >= row.own_time(start_us))
        pieces.append((np.full(int(inside.sum()), i, dtype=np.int64), row.shared_time(part.block_start[inside]),
                       row.shared_time(part.block_end[inside]), part.block_count[inside], part.block_busy[inside]))
    labels = sorted({f"{parts[r.worker].summary} busy" for r in rows})
    if not pieces:
        return {k: [] for k in ("track", "lane", "start_us", "dur_us", "name", "count", "busy_us", "event", "kind",
                                "rank", "names")}
    group, start, end, count, busy = (np.concatenate(column) for column in zip(*pieces))
    label_of = np.array([labels.index(f"{parts[r.worker].summary} busy") for r in rows], dtype=np.int64)
    group, start, end, count, busy, _, _ = merge_blocks(group, start, end, count, busy, label_of[group],
                                                        np.full(len(group), -1, dtype=np.int64), resolution_us)
    n = len(start)
    return {"track": np.array([r.track for r in rows], dtype=np.int64)[group].tolist(), "lane": [0] * n,
            "start_us": start.tolist(), "dur_us": (end - start).tolist(), "name": label_of[group].tolist(),
            "count": count.tolist(), "busy_us": busy.tolist(), "event": [-1] * n, "kind": [-1] * n,
            "rank": np.array([r.rank for r in rows], dtype=np.int64)[group].tolist(), "names": labels}


# A search orders matches of every expanded rank by (time on the shared axis, rank position,
# event id); the last two packed into one integer key.
_EVENT_BITS = 32


def rank_search(frame: pd.DataFrame, indexes: Mapping[str, TimelineIndex], text: str, after_us: float | None = None,
                direction: str = "next", after_rank: int | None = None, after_event: int | None = None,
                limit: int = 50) -> dict[str, Any]:
    """Slices of the expanded ranks (those in `indexes`) whose name contains `text`
    (case-insensitive, as `timeline.search`), ordered by their start on the shared axis.

    Returns {"total", "position", "match", "results"} as `timeline.search` answers them
    (the next match after the match (`after_rank`, `after_event`), else after `after_us`,
    or the previous one with direction="prev"; wraps around), each endpoint on the shared
    axis with its `rank`, `worker` and `own_ts_us` (its start on its own clock); plus
    "ranks": per rank searched {rank, worker, matches}, and "not_searched": the ranks shown
    collapsed, whose events are not loaded and so not searched.
    """
    rows, collapsed = _expanded(frame, indexes)
    times, keys, per_rank = [], [], []
    for i, row in enumerate(rows):  # one vectorised search per expanded rank
        index = indexes[row.worker]
        ids = matching_slices(index, text)
        times.append(row.shared_time(index.slices["ts"].to_numpy()[ids]))
        keys.append((np.int64(i) << _EVENT_BITS) + ids.astype(np.int64))
        per_rank.append({"rank": row.rank, "worker": row.worker, "matches": int(len(ids))})
    out: dict[str, Any] = {"total": 0, "position": -1, "match": None, "results": [], "ranks": per_rank,
                           "not_searched": collapsed}
    ts = np.concatenate(times) if times else np.zeros(0)
    key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    if not len(ts):
        return out
    order = np.lexsort((key, ts))
    ts, key = ts[order], key[order]
    after = None
    position_of = {row.rank: i for i, row in enumerate(rows)}
    if after_rank in position_of and after_event is not None:
        i = position_of[after_rank]
        slices = indexes[rows[i].worker].slices
        if 0 <= after_event < len(slices):
            after = (float(rows[i].shared_time(slices["ts"].iat[after_event])), (i << _EVENT_BITS) + after_event)
    pos = search_position(ts, key, after, after_us, direction)

    def endpoint(k: int) -> dict[str, Any]:
        row = rows[int(k >> _EVENT_BITS)]
        return row.on_axis(slice_endpoint(indexes[row.worker], int(k & ((1 << _EVENT_BITS) - 1))))

    return {**out, "total": int(len(ts)), "position": pos, "match": endpoint(key[pos]),
            "results": [endpoint(k) for k in key[pos:pos + limit]]}


@dataclass
class RankRangeSummary:
    """Per name, what a time range of the shared axis holds on the expanded ranks."""

    combined: pd.DataFrame  # `TIMELINE_RANK_SUMMARY`
    by_rank: pd.DataFrame  # `TIMELINE_RANK_SUMMARY_BY_RANK`
    ranks: list[int]  # the ranks summed
    not_summed: list[int]  # ranks the range touches that are collapsed: their events are not loaded


@documented(TIMELINE_RANK_SUMMARY, TIMELINE_RANK_SUMMARY_BY_RANK)
def rank_range_summary(frame: pd.DataFrame, indexes: Mapping[str, TimelineIndex], start_us: float, end_us: float,
                       tracks: Sequence[int] | None = None) -> RankRangeSummary:
    """Per name and kind, the slices inside [start_us, end_us] of the shared axis on the
    expanded ranks (those in `indexes`), per rank and over the ranks: each rank's
    `timeline.range_summary` of the same range on its own clock (the range moved by the
    rank's shift), so a range means the same instant on every rank when the clocks are
    aligned. `tracks` (ids of the shared axis; None: all) limits it to those tracks; a rank's
    summary track stands for all of its tracks. Collapsed ranks the range touches are listed
    in `not_summed`."""
    wanted = None if tracks is None else np.asarray(tracks, dtype=np.int64)
    rows, _ = _expanded(frame, indexes)
    pieces, summed = [], []
    for row in rows:  # each rank's own range summary, on its own clock
        whole = wanted is None or bool((wanted == row.track).any())
        own = None if whole else row.own_tracks(wanted)
        if own is not None and not len(own):
            continue
        mine = range_summary(indexes[row.worker], row.own_time(start_us), row.own_time(end_us), own)
        pieces.append(mine.assign(rank=row.rank, worker=row.worker))
        summed.append(row.rank)
    not_summed = [r.rank for r in _shown(frame) if r.worker not in indexes and (wanted is None or (
        (wanted >= r.track) & (wanted < r.track + RANK_TRACK_STRIDE)).any())]
    by_rank = pd.concat(pieces, ignore_index=True) if pieces else pd.DataFrame(
        {c: [] for c in TIMELINE_RANK_SUMMARY_BY_RANK.names})
    keys = ["name", "kind"]
    grouped = by_rank.groupby(keys, sort=False)
    combined = grouped.agg(count=("count", "sum"), total_us=("total_us", "sum"), ranks=("rank", "nunique"))
    lowest = by_rank.sort_values(["total_us", "rank"], kind="stable").groupby(keys, sort=False).first()
    highest = by_rank.sort_values(["total_us", "rank"], ascending=[False, True], kind="stable").groupby(
        keys, sort=False).first()
    combined = combined.assign(min_rank_us=lowest["total_us"], min_rank=lowest["rank"], max_rank_us=highest["total_us"],
                               max_rank=highest["rank"]).reset_index()
    return RankRangeSummary(
        TIMELINE_RANK_SUMMARY.frame(combined.sort_values(["total_us", "name"], ascending=[False, True], kind="stable")),
        TIMELINE_RANK_SUMMARY_BY_RANK.frame(by_rank), summed, not_summed)


def rank_counters(frame: pd.DataFrame, indexes: Mapping[str, TimelineIndex], start_us: float, end_us: float,
                  points: int = 500) -> list[dict[str, Any]]:
    """The counter series of each expanded rank (those in `indexes`) over [start_us, end_us]
    of the shared axis: its `timeline.counters` over the same range on its own clock, the
    times moved onto the shared axis; each series with its `rank` and `worker`."""
    rows, _ = _expanded(frame, indexes)
    out = []
    for row in rows:  # each expanded rank's own series
        model = indexes[row.worker].model
        for series in counters(model, row.own_time(start_us), row.own_time(end_us), points):
            out.append({**series, "rank": row.rank, "worker": row.worker,
                        "time_us": row.shared_time(np.asarray(series["time_us"], dtype=np.float64)).tolist()})
    return out


@dataclass
class RanksTimeline:
    """Ranks on one time axis: `ranks` (the `timeline_ranks` table), `tracks` (per rank its
    summary track and, expanded, its own), `slices(start_us, end_us, resolution_us, tracks)`;
    over the expanded ranks, `search(text)`, `summary(start_us, end_us)` (range totals) and
    `counters(start_us, end_us)`, all in the shared axis' times."""

    ranks: pd.DataFrame
    parts: Mapping[str, RankTimelinePart]
    indexes: Mapping[str, TimelineIndex]

    @property
    def tracks(self) -> pd.DataFrame:
        return rank_tracks(self.ranks, self.indexes)

    def slices(self, start_us: float, end_us: float, resolution_us: float,
               tracks: Sequence[int] | None = None,
               admit: Callable[[int, str], None] | None = None) -> dict[str, Any]:
        """`views.rank_slices` of these ranks."""
        return rank_slices(self.ranks, self.parts, self.indexes, start_us, end_us, resolution_us, tracks, admit)

    def search(self, text: str, after_us: float | None = None, direction: str = "next",
               after_rank: int | None = None, after_event: int | None = None, limit: int = 50) -> dict[str, Any]:
        """Events of the expanded ranks whose name contains `text`, on the shared axis, and the
        ranks not searched (collapsed); `views.rank_search`."""
        return rank_search(self.ranks, self.indexes, text, after_us, direction, after_rank, after_event, limit)

    def summary(self, start_us: float, end_us: float,
                tracks: Sequence[int] | None = None) -> RankRangeSummary:
        """Per name: count and time inside [start_us, end_us] of the shared axis on the expanded
        ranks, per rank (`by_rank`) and over them (`combined`: total, ranks, min/max rank);
        `views.rank_range_summary`."""
        return rank_range_summary(self.ranks, self.indexes, start_us, end_us, tracks)

    def counters(self, start_us: float, end_us: float, points: int = 500) -> list[dict[str, Any]]:
        """Each expanded rank's counter series (as `Profile.timeline_counters`) on the shared
        axis, with its rank; `views.rank_counters`."""
        return rank_counters(self.ranks, self.indexes, start_us, end_us, points)


# The routes over the ranks of one span on one axis (`schema.RANKS`: the server's
# `api._ranks_timeline`, `Run.answer` in Python), each a call on `RanksTimeline`.
def ranks_axis(ranks: RanksTimeline) -> dict[str, Any]:
    """The ranks on the shared axis, their tracks and the axis' extent (µs from the reference
    rank's origin; 0 to 0 without ranks)."""
    shown = ranks.ranks
    return {"ranks": shown, "tracks": ranks.tracks,
            "start_us": float(shown["start_us"].min()) if len(shown) else 0.0,
            "end_us": float(shown["end_us"].max()) if len(shown) else 0.0}


def axis_slices(ranks: RanksTimeline, start_us: float, end_us: float, resolution_us: float,
                tracks: Sequence[int] | None = None, admit: Callable[[int, str], None] | None = None) -> dict[str, Any]:
    """`RanksTimeline.slices` (a route's call is a function of its module)."""
    return ranks.slices(start_us, end_us, resolution_us, tracks, admit)


def axis_search(ranks: RanksTimeline, text: str, after_us: float | None = None, direction: str = "next",
                after_rank: int | None = None, after_event: int | None = None) -> dict[str, Any]:
    """`RanksTimeline.search` (a route's call is a function of its module)."""
    return ranks.search(text, after_us, direction, after_rank, after_event)


def range_totals(ranks: RanksTimeline, start_us: float, end_us: float,
                 tracks: Sequence[int] | None = None) -> dict[str, Any]:
    """`RanksTimeline.summary` as an object: combined, by_rank, ranks, not_summed."""
    summary = ranks.summary(start_us, end_us, tracks)
    return {"combined": summary.combined, "by_rank": summary.by_rank, "ranks": summary.ranks,
            "not_summed": summary.not_summed}


def rank_counter_series(ranks: RanksTimeline, start_us: float, end_us: float, points: int = 500) -> dict[str, Any]:
    """{"counters": `RanksTimeline.counters`}, at most `MAX_COUNTER_POINTS` points a series."""
    return {"counters": ranks.counters(start_us, end_us, min(points, MAX_COUNTER_POINTS))}


_TRACKS = ids("tracks", "Comma-separated track ids of the shared axis (default all tracks).", "track ids")
_SEARCH = (replace(text("q", "The text searched for in slice names (case-insensitive).", required=True), arg="text"),
           number("after_us", "A time of the shared axis: the match after (or before) it."),
           choice("direction", ("next", "prev"), "The next match or the previous one."),
           integer("after_rank", "With after_event: step from this rank's match (matches starting together are "
                   "visited one by one); takes precedence over after_us.", minimum=0),
           integer("after_event", "The event id (in its rank's own trace) of the match to step from.", minimum=0))

TIMELINE_RANKS_ROUTE = route(
    "timeline_ranks",
    "Several ranks of one span on one time axis (the Trace view's ranks mode): ranks (rank, worker, track, "
    "offset_us, shift_us, aligned, matched_calls, start_us, end_us, summary; shift_us is added to a rank's own "
    "trace times: its origin minus the reference rank's, plus the clock offset), tracks (per rank its summary "
    "track, and for an expanded rank its own tracks renumbered track + 1 + t, the rank as their process), and "
    "the shared axis' start_us and end_us (µs from the reference rank's origin). With format=csv, the ranks "
    "table alone.",
    ranks_axis, reads=RANKS, alone=("ranks",),
    fields={"ranks": TIMELINE_RANKS, "tracks": TIMELINE_TRACKS,
            "start_us": {"type": "number", "description": "The shared axis' first event (µs)."},
            "end_us": {"type": "number", "description": "The shared axis' last event's end (µs)."}})
TIMELINE_RANK_SLICES_ROUTE = route(
    "timeline_rank_slices",
    "Slices of several ranks on one time axis in a window at a resolution, as /timeline_slices answers them "
    "(track ids and times of the shared axis), plus rank (each row's rank: event ids are that rank's own) and "
    "offsets (per rank shown: rank, worker, shift_us, offset_us). A collapsed rank answers from its busy "
    "summary; an expanded one from its own index.",
    axis_slices, reads=RANKS, reply="TimelineRankSlices", admits=True,
    params=(*window("the shared axis"), RESOLUTION, _TRACKS))
TIMELINE_RANK_SEARCH_ROUTE = route(
    "timeline_rank_search",
    "Events of the expanded ranks whose name contains q (case-insensitive), ordered by their start on the "
    "shared axis: the next (or previous) match after after_rank/after_event or after_us, and up to 50 matches "
    "from there on, each with its rank, worker, times on the shared axis (ts_us) and on its own clock "
    "(own_ts_us); ranks lists the ranks searched with their matches, not_searched the collapsed ranks (their "
    "events are not loaded).",
    axis_search, reads=RANKS, reply="TimelineRankSearch", params=_SEARCH)
TIMELINE_RANK_SUMMARY_ROUTE = route(
    "timeline_rank_summary",
    "Per slice name, what a range of the shared axis holds on the expanded ranks: each rank's range totals of "
    "the same range on its own clock (moved by its shift), as by_rank (rank, worker, name, kind, count, "
    "total_us), and over the ranks as combined (name, kind, count, total_us, ranks, min_rank_us, min_rank, "
    "max_rank_us, max_rank); ranks lists the ranks summed, not_summed the collapsed ranks the range touches. "
    "With table=NAME, that one table (JSON or CSV); CSV without table is combined.",
    range_totals, reads=RANKS, params=(*window("the shared axis"), _TRACKS), alone=("combined", "by_rank"),
    fields={"combined": TIMELINE_RANK_SUMMARY, "by_rank": TIMELINE_RANK_SUMMARY_BY_RANK,
            "ranks": {"type": "array", "items": {"type": "integer"}, "description": "The ranks summed."},
            "not_summed": {"type": "array", "items": {"type": "integer"},
                           "description": "Collapsed ranks the range touches (their events are not loaded)."}})
TIMELINE_RANK_COUNTERS_ROUTE = route(
    "timeline_rank_counters",
    "Counter series of each expanded rank (as /timeline_counters answers them for its trace) over a window of "
    "the shared axis, times on that axis, each series with its rank and worker.",
    rank_counter_series, reads=RANKS, reply="TimelineRankCounters",
    params=(*window("the shared axis"), COUNTER_POINTS))
