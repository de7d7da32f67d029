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
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..errors import BadParameterError, NotFoundError
from ..schema import declare, documented
from ..trace.model import TraceModel
from .common import device_activity
from .job import RankPart, clocks
from .timeline import KINDS, TIMELINE_TRACKS, TimelineIndex, merge_blocks

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


def _union(starts, ends):
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


def _ranges(values):
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
    """One row of a `TIMELINE_RANKS` frame, typed."""

    rank: int
    worker: str
    track: int
    offset_us: float
    shift_us: float
    summary: str


def _shown(frame: pd.DataFrame) -> list[_Shown]:
    return [_Shown(int(r), str(w), int(t), float(o), float(s), str(m)) for r, w, t, o, s, m in zip(
        frame["rank"].tolist(), frame["worker"].tolist(), frame["track"].tolist(), frame["offset_us"].tolist(),
        frame["shift_us"].tolist(), frame["summary"].tolist())]


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
                tracks: Sequence[int] | None = None) -> dict[str, Any]:
    """Slices of the shared axis in [start_us, end_us] at `resolution_us`, shaped as
    `TimelineIndex.query` answers (track ids of the shared axis, times on it), plus `rank`
    (the rank of each row: event ids are that rank's own) and `offsets` (per rank shown: rank,
    worker, shift_us, offset_us). Every rank's summary track answers from its summary (all
    ranks merged in one pass); a rank in `indexes` (expanded) also from its own index, the
    window moved by its shift."""
    wanted = None if tracks is None else np.asarray(tracks, dtype=np.int64)
    shown = _shown(frame)
    replies = [_summary_slices([r for r in shown if wanted is None or (wanted == r.track).any()], parts,
                               start_us, end_us, resolution_us)]
    for row in shown:  # one per rank shown
        index = indexes.get(row.worker)
        if index is None:
            continue
        own = None
        if wanted is not None:
            own = wanted[(wanted > row.track) & (wanted < row.track + RANK_TRACK_STRIDE)] - row.track - 1
            if not len(own):
                continue
        local = index.query(start_us - row.shift_us, end_us - row.shift_us, resolution_us, own)
        local["track"] = (np.asarray(local["track"], dtype=np.int64) + row.track + 1).tolist()
        local["start_us"] = (np.asarray(local["start_us"], dtype=np.float64) + row.shift_us).tolist()
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


def _summary_slices(rows, parts, start_us, end_us, resolution_us):
    """The summary blocks of the ranks `rows` overlapping the window, on the shared axis, each
    on its rank's summary track, merged at the resolution (one merge for all the ranks, each
    rank a group of its own); in `TimelineIndex.query`'s shape plus `rank`."""
    pieces = []
    for i, row in enumerate(rows):  # one mask per rank; the merge is one for all
        part = parts[row.worker]
        inside = (part.block_start <= end_us - row.shift_us) & (part.block_end >= start_us - row.shift_us)
        pieces.append((np.full(int(inside.sum()), i, dtype=np.int64), part.block_start[inside] + row.shift_us,
                       part.block_end[inside] + row.shift_us, part.block_count[inside], part.block_busy[inside]))
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
