"""Trace timeline served at the level of detail the viewer draws.

The viewer never receives the whole trace: it asks for the slices of some tracks in a time
window at a resolution (µs per pixel), and gets events at least one pixel long as they are,
and runs of shorter events merged into blocks that say how many events and how much busy
time they hold. Nothing is dropped: every event is either a slice or inside a block.

To answer any window quickly, `TimelineIndex` precomputes levels of detail: level 0 is the
events themselves, and level k merges level k-1 at a resolution 4x coarser. A query reads
the coarsest level still finer than the asked resolution, so the rows it touches are bounded
by the pixels drawn, not by the events in the window, and merges those once more.

Slices live in "groups", one per (track, lane); lanes are nesting depths (overlapping events
get their own lane). Within a group, rows are sorted by start time.
"""

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import choice, declare, documented, ids, integer, number, route, tab, text, window
from ..trace.linking import Nesting
from ..trace.model import TraceModel, first_int
from ..errors import NotFoundError
from .common import cached, known_step, step_windows
from .counters import counter_samples, device_pids
from .critical_path import CRITICAL_PATH, critical_path
from .intervals import union_length, weighted_level_integral
from .memory import full_curve, memory_devices
from .queues import memory_bandwidth, queue_length

# Slice kinds (the `kind` column), also what the viewer colours by.
KINDS = ("op", "annotation", "runtime", "python", "kernel", "memcpy", "memset", "gpu_annotation")
_KIND_CODE = {k: i for i, k in enumerate(KINDS)}

TIMELINE_TRACKS = declare(
    "timeline_tracks", "one track of the Trace view: a thread's ops, its Python frames, or a device stream, in display order",
    ("track", "int64", "", "track id, 0..n-1 in display order"),
    ("kind", "str", "", "\"thread\", \"python\" or \"device\""),
    ("process", "str", "", "process display name (metadata name and labels, else \"Process <pid>\" or \"GPU <n>\")"),
    ("thread", "str", "", "thread display name (metadata name, else \"thread <tid>\" or \"stream <n>\")"),
    ("pid", "str", "", "the events' pid as written"),
    ("tid", "str", "", "the events' tid as written"),
    ("device", "int64", "", "device number of a device track; -1 otherwise"),
    ("stream", "int64", "", "stream number of a device track; -1 otherwise"),
    ("sort_process", "float64", "", "process sort key (metadata sort index, else CPU processes before GPUs)"),
    ("sort_thread", "float64", "", "thread sort key within the process"),
    ("lanes", "int64", "count", "nesting depth of its slices (rows it takes)"),
    ("events", "int64", "count", "slices on the track"),
)
TIMELINE_STEPS = declare(
    "timeline_steps", "one step window, as the step breakdown uses it (`common.step_windows`)",
    ("step", "int64", "", "the ProfilerStep#N number; 0 when the trace has no step markers"),
    ("start_us", "float64", "us", "window start, relative to the trace origin"),
    ("end_us", "float64", "us", "window end (the step's device work included), relative to the trace origin"),
)
TIMELINE_CRITICAL_PATH = declare(
    "timeline_critical_path", "one segment of a step's critical path, in time order, with the Trace view track it is drawn on",
    *CRITICAL_PATH.columns,
    ("track", "int64", "", "the timeline_tracks track it lies on: the thread's for CPU time, launches and syncs, the device stream's for device activity and waits on it; -1 when the timeline has none"),
)
TIMELINE_SUMMARY = declare(
    "timeline_summary", "one slice name (and kind) with slices overlapping a time range, by total time",
    ("name", "str", "", "slice name"),
    ("kind", "str", "", "slice kind (one of KINDS)"),
    ("count", "int64", "count", "slices overlapping the range"),
    ("total_us", "float64", "us", "their time, clipped to the range"),
)

# The model tables drawn as slices: (table, slice kind, kind of track they are drawn on).
SLICE_SOURCES = (("ops", "op", "thread"), ("runtime", "runtime", "thread"), ("python", "python", "python"),
                 ("kernels", "kernel", "device"), ("memcpy", "memcpy", "device"), ("memset", "memset", "device"),
                 ("gpu_annotations", "gpu_annotation", "device"))
LEVEL_FACTOR = 4.0
# Lists per row of a `TimelineIndex.query` answer: track, lane, start_us, dur_us, name, count,
# busy_us, event, kind.
SLICE_FIELDS = 9
FINEST_RESOLUTION_US = 1.0


@dataclass
class Level:
    """One level of detail: blocks sorted by (group, start)."""

    resolution_us: float
    group: np.ndarray  # int64
    start: np.ndarray  # float64 µs
    end: np.ndarray
    count: np.ndarray  # int64, events inside (1 for an event)
    busy: np.ndarray  # float64 µs, summed durations of those events
    name: np.ndarray  # int64 code of the longest event's name
    event: np.ndarray  # int64 slice id when the block is one event, else -1
    group_offsets: np.ndarray  # first row of each group, plus the total
    cummax_end: np.ndarray  # running max of `end` within each group

    @classmethod
    def build(cls, resolution_us: float, n_groups: int, group: npt.NDArray[np.int64], start: npt.NDArray[np.float64],
              end: npt.NDArray[np.float64], count: npt.NDArray[np.int64], busy: npt.NDArray[np.float64],
              name: npt.NDArray[np.int64], event: npt.NDArray[np.int64]) -> "Level":
        offsets = np.searchsorted(group, np.arange(n_groups + 1), side="left")
        # running max of end, restarted at each group: shift groups apart, accumulate, shift back
        shift = (np.nanmax(end) - np.nanmin(start) + 1.0) if len(end) else 1.0
        shifted = end - np.nanmin(start) + group * shift if len(end) else end
        cummax = np.maximum.accumulate(shifted) - group * shift + np.nanmin(start) if len(end) else end
        return cls(resolution_us, group, start, end, count, busy, name, event, offsets, cummax)

    def window(self, groups: npt.NDArray[np.int64], t0: float, t1: float) \
            -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Row ranges [lo, hi) of each of `groups` that may overlap [t0, t1]."""
        lo_rows, hi_rows = self.group_offsets[groups], self.group_offsets[groups + 1]
        lo = np.empty(len(groups), dtype=np.int64)
        hi = np.empty(len(groups), dtype=np.int64)
        for i, (a, b) in enumerate(zip(lo_rows, hi_rows)):  # one search per group, not per event
            lo[i] = a + np.searchsorted(self.cummax_end[a:b], t0, side="left")
            hi[i] = a + np.searchsorted(self.start[a:b], t1, side="right")
        return lo, np.maximum(hi, lo)


def merge_blocks(group: npt.NDArray[np.int64], start: npt.NDArray[np.float64], end: npt.NDArray[np.float64],
                 count: npt.NDArray[np.int64], busy: npt.NDArray[np.float64], name: npt.NDArray[np.int64],
                 event: npt.NDArray[np.int64], resolution_us: float) \
        -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[Any], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Merge runs of blocks shorter than `resolution_us` in the same group whose gaps are
    shorter than `resolution_us`; longer blocks stay as they are. Inputs sorted by (group,
    start). Counts and busy time add up; the name is the longest member's."""
    n = len(start)
    if not n:
        return group, start, end, count, busy, name, event
    small = (end - start) < resolution_us
    same_group = np.r_[False, group[1:] == group[:-1]]
    # end of everything before each row in its group: a running max restarted per group
    shift = end.max() - start.min() + 1.0
    running = np.maximum.accumulate(end - start.min() + group * shift) - group * shift + start.min()
    prev_end = np.r_[-np.inf, running[:-1]]
    prev_small = np.r_[False, small[:-1]]
    joins = same_group & small & prev_small & (start - prev_end < resolution_us)
    block = np.cumsum(~joins) - 1
    n_blocks = block[-1] + 1
    out_group = group[~joins]
    out_start = start[~joins]
    out_end = np.full(n_blocks, -np.inf)
    np.maximum.at(out_end, block, end)
    out_count = np.bincount(block, weights=count, minlength=n_blocks).astype(np.int64)
    out_busy = np.bincount(block, weights=busy, minlength=n_blocks)
    # the longest member names the block: sort by (block, duration) and take each block's last
    order = np.lexsort((end - start, block))
    last = np.r_[block[order][1:] != block[order][:-1], True]
    out_name = np.empty(n_blocks, dtype=np.int64)
    out_name[block[order][last]] = name[order][last]
    # a block made of one input row keeps that row's event id (-1 if it already was a block)
    out_event = np.full(n_blocks, -1, dtype=np.int64)
    singles = np.bincount(block, minlength=n_blocks) == 1
    out_event[singles] = event[~joins][singles]
    return out_group, out_start, out_end, out_count, out_busy, out_name, out_event


class TimelineIndex:
    """Tracks, slices and levels of detail of one trace; see the module docstring.

    Attributes
    ----------
    tracks : DataFrame
        The `timeline_tracks` table (`TIMELINE_TRACKS`).
    thread_tracks : DataFrame
        What each track draws: thread (row of model.threads), kind ("thread", "python" or
        "device"), track.
    slices : DataFrame
        One row per event: track, lane, kind (index into KINDS), name (code into `names`),
        ts, dur, source (table name), row (in that table).
    names : pandas Index of all names (slice `name` codes index it).
    """

    def __init__(self, model: TraceModel) -> None:
        self.model = model
        slices = []
        ops = model.ops
        is_annotation = (ops["cat"] == "user_annotation").to_numpy()
        names = ops["name"].cat.categories  # shared by every `name` column of the model
        self.names = names
        # A source's kind code, or one per row (ops are operators or annotations).
        kinds: dict[str, Any] = {source: _KIND_CODE[kind] for source, kind, _ in SLICE_SOURCES}
        kinds["ops"] = np.where(is_annotation, _KIND_CODE["annotation"], _KIND_CODE["op"])
        for source, _, track_kind in SLICE_SOURCES:
            table, kind = getattr(model, source), kinds[source]
            if not len(table):
                continue
            slices.append(pd.DataFrame({
                "thread": table["thread"].to_numpy(),
                "track_kind": track_kind,
                "kind": np.broadcast_to(kind, len(table)).astype(np.int64),
                "name": table["name"].cat.codes.to_numpy().astype(np.int64),
                "ts": table["ts"].to_numpy(),
                "dur": table["dur"].to_numpy(),
                "source": source,
                "row": np.arange(len(table)),
            }))
        frame = pd.concat(slices, ignore_index=True) if slices else pd.DataFrame(
            {"thread": [], "track_kind": [], "kind": [], "name": [], "ts": [], "dur": [], "source": [], "row": []})
        self.tracks, frame["track"], self.thread_tracks = self._tracks(frame)
        nesting = Nesting(frame["track"].to_numpy(), frame["ts"].to_numpy(), frame["dur"].to_numpy())
        frame["lane"] = nesting.depth.astype(np.int64)
        lanes = frame.groupby("track")["lane"].max() + 1 if len(frame) else pd.Series(dtype=np.int64)
        self.tracks["lanes"] = self.tracks["track"].map(lanes).fillna(0).astype(np.int64)
        self.tracks["events"] = self.tracks["track"].map(frame.groupby("track").size()).fillna(0).astype(np.int64)
        self.tracks = TIMELINE_TRACKS.frame(self.tracks)
        self.max_lanes = int(self.tracks["lanes"].max()) if len(self.tracks) else 1
        self.slices = frame.drop(columns=["thread", "track_kind"])
        self.levels = self._levels()

    def _tracks(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, npt.NDArray[np.int64], pd.DataFrame]:
        """One track per (thread, kind of track); named from the trace's metadata. Returns the
        tracks, each slice's track, and the key of each track: thread (row of model.threads),
        kind, track."""
        threads = self.model.threads
        keys = frame[["thread", "track_kind"]].drop_duplicates().reset_index(drop=True)
        rows = threads.iloc[keys["thread"].to_numpy()].reset_index(drop=True) if len(keys) else threads.iloc[0:0]
        device_kind = (keys["track_kind"] == "device").to_numpy()
        device = np.array([first_int(p) for p in rows["pid"]], dtype=np.int64) if len(rows) else np.zeros(0, np.int64)
        stream = np.array([first_int(t) for t in rows["tid"]], dtype=np.int64) if len(rows) else np.zeros(0, np.int64)
        named = rows["process_name"].to_numpy(dtype=object) != ""
        labels = rows["process_labels"].to_numpy(dtype=object)
        fallback = np.where(device_kind, [f"GPU {d}" for d in device], [f"Process {p}" for p in rows["pid"]])
        process = np.where(named, rows["process_name"].to_numpy(dtype=object), fallback).astype(object)
        # as chrome://tracing shows them: "python3.8 (GPU 1)"
        process = np.where(labels != "", [f"{p} ({lab})" for p, lab in zip(process, labels)], process)
        thread_named = rows["thread_name"].to_numpy(dtype=object)
        thread_named = np.array([str(t).strip() for t in thread_named], dtype=object)
        thread = np.where(thread_named != "", thread_named,
                          np.where(device_kind, [f"stream {s}" for s in stream], [f"thread {t}" for t in rows["tid"]]))
        python = (keys["track_kind"] == "python").to_numpy()
        thread = np.where(python, [f"{t} · Python frames" for t in thread], thread)
        process_sort = rows["process_sort_index"].to_numpy()
        thread_sort = rows["thread_sort_index"].to_numpy()
        tracks = pd.DataFrame({
            "kind": keys["track_kind"].to_numpy(),
            "process": process,
            "thread": thread.astype(object),
            "pid": rows["pid"].to_numpy(dtype=object),
            "tid": rows["tid"].to_numpy(dtype=object),
            "device": np.where(device_kind, device, -1),
            "stream": np.where(device_kind, stream, -1),
            # metadata order when the trace gives one; otherwise CPU processes before GPUs
            "sort_process": np.where(np.isfinite(process_sort), process_sort, np.where(device_kind, 1e12 + device, 0)),
            "sort_thread": np.where(np.isfinite(thread_sort), thread_sort, np.where(device_kind, stream, 0)) + python * 0.5,
        })
        tracks = tracks.sort_values(["sort_process", "process", "sort_thread", "thread"], kind="stable")
        order = tracks.index.to_numpy()
        tracks = tracks.reset_index(drop=True)
        tracks.insert(0, "track", np.arange(len(tracks)))
        track_of_key = np.empty(len(keys), dtype=np.int64)
        track_of_key[order] = np.arange(len(keys))
        key_index = pd.MultiIndex.from_frame(keys)
        slice_key = key_index.get_indexer(pd.MultiIndex.from_frame(frame[["thread", "track_kind"]]))
        thread_tracks = pd.DataFrame({"thread": keys["thread"].to_numpy().astype(np.int64),
                                      "kind": keys["track_kind"].to_numpy(), "track": track_of_key})
        return tracks, track_of_key[slice_key] if len(frame) else np.zeros(0, np.int64), thread_tracks

    def _levels(self) -> list[Level]:
        s = self.slices
        group = (s["track"].to_numpy() * self.max_lanes + s["lane"].to_numpy()).astype(np.int64)
        order = np.lexsort((s["ts"].to_numpy(), group))
        n_groups = max(len(self.tracks) * self.max_lanes, 1)
        args = (group[order], s["ts"].to_numpy()[order], (s["ts"] + s["dur"]).to_numpy()[order],
                np.ones(len(s), np.int64), s["dur"].to_numpy()[order], s["name"].to_numpy()[order], order.astype(np.int64))
        levels = [Level.build(0.0, n_groups, *args)]
        span = float(args[2].max() - args[1].min()) if len(s) else 0.0
        resolution = FINEST_RESOLUTION_US
        while len(args[1]) > 4 * n_groups and resolution < span:
            args = merge_blocks(*args, resolution)
            levels.append(Level.build(resolution, n_groups, *args))
            resolution *= LEVEL_FACTOR
        return levels

    def track_ids(self, tracks: npt.ArrayLike | None = None) -> npt.NDArray[np.int64]:
        """The existing tracks among `tracks` (None: all), each once and in order: a track
        named twice would be answered twice (2,000 repeats of one track made a 469 MB reply)."""
        if tracks is None:
            return self.tracks["track"].to_numpy()
        tracks = np.unique(np.asarray(tracks, dtype=np.int64))
        return tracks[(tracks >= 0) & (tracks < len(self.tracks))]

    def query(self, start_us: float, end_us: float, resolution_us: float, tracks: npt.ArrayLike | None = None,
              admit: Callable[[int, str], object] | None = None) -> dict[str, Any]:
        """Slices and merged blocks of `tracks` overlapping [start_us, end_us].

        Returns a dict of equal-length lists: track, lane, start_us, dur_us, name (index into
        the returned `names`), count (events inside; 1 for a single event), busy_us, event (the
        slice id of a single event, -1 for a merged block), kind (index into KINDS, -1 for a
        merged block), plus `names` and `kinds`. `admit(values, what)` (a
        `accounting.ReplyReservation`'s) is told how many values the rows the window touches
        could send before any is read, and may refuse them.
        """
        level = self.levels[0]
        for candidate in self.levels[1:]:
            if candidate.resolution_us <= resolution_us:
                level = candidate
        track_ids = self.track_ids(tracks)
        groups = (track_ids[:, None] * self.max_lanes + np.arange(self.max_lanes)[None, :]).ravel()
        lo, hi = level.window(groups, start_us, end_us)
        if admit is not None:
            admit(int((hi - lo).sum()) * SLICE_FIELDS, f"this window ({len(track_ids)} tracks at {resolution_us:g} us per pixel)")
        rows = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)]) if len(lo) else np.zeros(0, np.int64)
        rows = rows[level.end[rows] >= start_us]
        merged = merge_blocks(level.group[rows], level.start[rows], level.end[rows], level.count[rows],
                              level.busy[rows], level.name[rows], level.event[rows], resolution_us)
        group, start, end, count, busy, name, event = merged
        used, name_ids = np.unique(name, return_inverse=True)
        kind = np.where(event >= 0, self.slices["kind"].to_numpy()[np.clip(event, 0, None)], -1) if len(event) else event
        return {
            "track": (group // self.max_lanes).tolist(),
            "lane": (group % self.max_lanes).tolist(),
            "start_us": start.tolist(),
            "dur_us": (end - start).tolist(),
            "name": name_ids.tolist(),
            "count": count.tolist(),
            "busy_us": busy.tolist(),
            "event": event.tolist(),
            "kind": kind.tolist(),
            "names": [str(self.names[i]) for i in used],
            "kinds": list(KINDS),
        }


def timeline_index(model: TraceModel) -> TimelineIndex:
    """The model's `TimelineIndex`, built on first use and cached."""
    return cached(model, "timeline_index", lambda: TimelineIndex(model))


def has_slices(model: TraceModel) -> bool:
    """Whether the timeline has anything to draw, without building its index."""
    return any(len(getattr(model, source)) for source, _, _ in SLICE_SOURCES)


def tracks_view(model: TraceModel) -> dict[str, Any]:
    """What the Trace view is framed by: {tracks (`TimelineIndex.tracks`), start_us, end_us
    (the trace's span), origin_us, steps (step, start_us, end_us), kinds (slice kinds)}."""
    start, end = model.span_us()
    return {"tracks": timeline_index(model).tracks, "start_us": start, "end_us": end, "origin_us": model.origin_us,
            "steps": step_windows(model)[["step", "start_us", "end_us"]], "kinds": list(KINDS)}


@documented(TIMELINE_CRITICAL_PATH)
def critical_path_tracks(model: TraceModel, step: int | None = None) -> pd.DataFrame:
    """The critical path of `step` (the first step when None; `critical_path.critical_path`,
    same rows in the same order) with the Trace view track of each segment, so the page draws
    the path on the tracks of `tracks_view` without matching threads or streams itself.

    A segment on a CPU thread (`thread` >= 0: CPU time, launches, syncs) lies on that thread's
    track; one on a device stream (`device` >= 0: kernels, copies, sets, the stream idling or
    waiting on another stream) lies on the track of the stream's events, found through the
    device activity of that (device, stream), whose thread row the timeline groups by."""
    path = critical_path(model, known_step(model, step))
    keys = timeline_index(model).thread_tracks
    on_device = ((path["thread"] < 0) & (path["device"] >= 0)).to_numpy()
    stream_thread = path[["device", "stream"]].merge(_stream_threads(model), how="left", on=["device", "stream"])["thread"]
    thread = np.where(on_device, stream_thread.fillna(-1).to_numpy(), path["thread"].to_numpy()).astype(np.int64)
    kind = np.where(on_device, "device", "thread")
    found = pd.MultiIndex.from_frame(keys[["thread", "kind"]]).get_indexer(pd.MultiIndex.from_arrays([thread, kind]))
    return TIMELINE_CRITICAL_PATH.frame(path.assign(track=np.where(found >= 0, keys["track"].to_numpy()[found], -1)))


def _stream_threads(model: TraceModel) -> pd.DataFrame:
    """Per device stream with activity (the tables the critical path reads, as
    `common.device_activity`): the row of model.threads its events are written on."""
    def build() -> pd.DataFrame:
        parts = [getattr(model, source)[["device", "stream", "thread"]] for source in ("kernels", "memcpy", "memset")]
        return pd.concat(parts, ignore_index=True).drop_duplicates(["device", "stream"]).astype(np.int64)
    return cached(model, "timeline_stream_threads", build)


def counters(model: TraceModel, start_us: float, end_us: float, points: int = 500) -> list[dict[str, Any]]:
    """Counter series over [start_us, end_us] in about `points` buckets.

    Returns a list of {"name", "unit", "time_us": [...], "value": [...], "max": [...]}: GPU
    utilization and estimated SM efficiency per GPU (percent, computed from kernels, the
    bucket average), the launch queue (HTA's queue length) and memcpy/memset bandwidth of each
    device stream (`queues.queue_length`, `queues.memory_bandwidth`), allocated/reserved
    memory per device (bytes, bucket maximum so peaks survive), and the trace's own counter
    events (bucket maximum; `views.counters.counter_samples`). Each series also has "pid": the
    pid of the device's streams for a device's hardware counter (`GPU N <counter>`, drawn in
    that device's process group), "" for every other series (drawn in the Counters group).
    """
    points = max(int(points), 1)
    edges = np.linspace(start_us, end_us, points + 1)
    windows = (edges[:-1], edges[1:])
    width = np.maximum(edges[1:] - edges[:-1], 1e-12)
    series = []
    k = model.kernels
    devices = sorted(set(k["device"].tolist()))
    # which series exist depends on the whole trace, never on the window, so a viewer's
    # counter rows stay the same while it zooms
    with_blocks = set(k.loc[np.isfinite(k["blocks_per_sm"].to_numpy()), "device"].tolist())
    # only kernels touching the window matter: the sweeps below then cost what is drawn
    k = k[((k["ts"] <= end_us) & (k["ts"] + k["dur"] >= start_us)).to_numpy()]
    for device in devices:
        on = (k["device"] == device).to_numpy()
        ks, ke = k["ts"].to_numpy()[on], (k["ts"] + k["dur"]).to_numpy()[on]
        busy = union_length(ks, ke, windows)
        blocks = k["blocks_per_sm"].to_numpy()[on]
        has = np.isfinite(blocks)
        sm = weighted_level_integral(ks[has], ke[has], np.minimum(blocks[has], 1.0), windows, cap=1.0)
        series.append(_series(f"GPU {device} utilization", "%", edges, 100 * busy / width))
        if device in with_blocks:
            series.append(_series(f"GPU {device} est. SM efficiency", "%", edges, 100 * sm / width))
    for (device, stream), part in queue_length(model).groupby(["device", "stream"], sort=True):
        series.append(_step_series(f"GPU {device} stream {stream} queue length", "", edges, part["ts_us"].to_numpy(),
                                   part["queue_length"].to_numpy().astype(np.float64)))
    for (device, stream), part in memory_bandwidth(model).groupby(["device", "stream"], sort=True):
        series.append(_step_series(f"GPU {device} stream {stream} copy bandwidth", "GB/s", edges, part["ts_us"].to_numpy(),
                                   part["memory_bw_gbps"].to_numpy()))
    for device in memory_devices(model):
        curve = full_curve(model, device)
        times = curve["time_us"].to_numpy()
        # records in the window, plus the last one before it (the level at its start)
        first = max(int(np.searchsorted(times, start_us, side="right")) - 1, 0)
        last = int(np.searchsorted(times, end_us, side="right"))
        for what in ("allocated", "reserved"):
            values = curve[f"{what}_bytes"].to_numpy()
            if np.isfinite(values).any():  # decided over the whole trace, like every series
                series.append(_step_series(f"{device} memory {what}", "B", edges, times[first:last], values[first:last]))
    # the trace's own counters; a device's (hardware counters) is drawn in that device's
    # process group, under its streams' header: `pid` names the group ("" the Counters group)
    pids = device_pids(model)
    for (device, name, key), part in counter_samples(model).groupby(["device", "name", "counter"], sort=True):
        on_device = device >= 0
        drawn = _step_series(f"GPU {device} {key}" if on_device else f"{name} {key}", "", edges,
                             part["time_us"].to_numpy(), part["value"].to_numpy())
        series.append({**drawn, "pid": pids.get(device, "") if on_device else ""})
    return [{"pid": "", **one} for one in series]


def _series(name: str, unit: str, edges: npt.NDArray[np.float64], values: npt.NDArray[np.float64]) -> dict[str, Any]:
    return {"name": name, "unit": unit, "time_us": edges[:-1].tolist(), "value": np.round(values, 3).tolist(),
            "max": np.round(values, 3).tolist()}


def _step_series(name: str, unit: str, edges: npt.NDArray[np.float64], times: npt.NDArray[np.float64],
                 values: npt.NDArray[Any]) -> dict[str, Any]:
    """A step function sampled per bucket: the value at the bucket start and the bucket max."""
    order = np.argsort(times, kind="stable")
    times, values = times[order], values[order]
    ok = np.isfinite(values)
    times, values = times[ok], values[ok]
    if not len(times):
        return {"name": name, "unit": unit, "time_us": [], "value": [], "max": []}
    at_start_idx = np.searchsorted(times, edges[:-1], side="right") - 1
    at_start = np.where(at_start_idx >= 0, values[np.clip(at_start_idx, 0, None)], np.nan)
    bucket = np.searchsorted(edges, times, side="right") - 1
    inside = (bucket >= 0) & (bucket < len(edges) - 1)
    peak = at_start.copy()
    np.fmax.at(peak, bucket[inside], values[inside])
    keep = np.isfinite(peak)
    return {"name": name, "unit": unit, "time_us": edges[:-1][keep].tolist(),
            "value": at_start[keep].tolist(), "max": peak[keep].tolist()}


def _slice_ids(index: TimelineIndex) -> dict[Hashable, npt.NDArray[np.int64]]:
    """{source table: array mapping its rows to slice ids}."""
    def build() -> dict[Hashable, npt.NDArray[np.int64]]:
        s = index.slices
        out: dict[Hashable, npt.NDArray[np.int64]] = {}
        for source, part in s.groupby("source", sort=False):
            ids = np.full(int(part["row"].max()) + 1, -1, dtype=np.int64)
            ids[part["row"].to_numpy()] = part.index.to_numpy()
            out[source] = ids
        return out
    return cached(index.model, "timeline_slice_ids", build)


def _slice_of(index: TimelineIndex, source: str, rows: npt.ArrayLike) -> npt.NDArray[np.int64]:
    ids = _slice_ids(index).get(source)
    rows = np.asarray(rows, dtype=np.int64)
    if ids is None:
        return np.full(len(rows), -1, dtype=np.int64)
    ok = (rows >= 0) & (rows < len(ids))
    return np.where(ok, ids[np.clip(rows, 0, len(ids) - 1)], -1)


def _cell(frame: pd.DataFrame, column: str, row: int) -> Any:
    """`frame[column].iat[row]`, typed as what the caller converts it to: pandas' stubs type a
    cell as the union of every scalar type, which `int()` and `getattr()` refuse."""
    return frame[column].iat[row]


def slice_endpoint(index: TimelineIndex, slice_id: int) -> dict[str, Any]:
    """One slice as the page places it: {event, track, lane, ts_us, dur_us, name}."""
    s = index.slices
    return {"event": int(slice_id), "track": int(_cell(s, "track", slice_id)), "lane": int(_cell(s, "lane", slice_id)),
            "ts_us": float(_cell(s, "ts", slice_id)), "dur_us": float(_cell(s, "dur", slice_id)),
            "name": str(index.names[_cell(s, "name", slice_id)])}


def _plain(value: object) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    return value if isinstance(value, (int, str, bool)) or value is None else str(value)


def _check_event(slices: pd.DataFrame, event: int) -> None:
    """`NotFoundError` naming the valid event ids unless `event` is one."""
    if not 0 <= event < len(slices):
        valid = f"events are 0..{len(slices) - 1}" if len(slices) else "this trace has no events on its timeline"
        raise NotFoundError(f"no event {event}; {valid}")


def event_details(index: TimelineIndex, event: int) -> dict[str, Any]:
    """Everything the model holds about one slice: its table row, the operator that
    launched it (for runtime calls and device activity), and the op's call stack."""
    from .operators import frames_of_key, stack_key_of_ops

    s = index.slices
    _check_event(s, event)
    source, row = _cell(s, "source", event), int(_cell(s, "row", event))
    model = index.model
    table = getattr(model, source)
    fields = {column: _plain(table[column].iat[row]) for column in table.columns}
    if "thread" in fields:
        # The model's row in its threads table ("thread 0"), not an id from the trace: shown
        # as the trace's pid and tid, the numbers the track names and "Where" use.
        thread = model.threads.iloc[int(fields.pop("thread"))]
        fields = {"pid": str(thread["pid"]), "tid": str(thread["tid"]), **fields}
    details = {**slice_endpoint(index, event), "name": str(index.names[_cell(s, "name", event)]),
               "kind": KINDS[int(_cell(s, "kind", event))], "source": source, "row": row,
               "start_us_absolute": float(model.origin_us + _cell(s, "ts", event)), "fields": fields}
    op = row if source == "ops" else fields.get("op", -1)
    if op is not None and op >= 0:
        ops = model.ops
        details["operator"] = {"row": int(op), "name": str(_cell(ops, "name", op)),
                               "input_shape": str(_cell(ops, "input_dims", op)),
                               "event": int(_slice_of(index, "ops", [op])[0])}
        key = int(stack_key_of_ops(model)[op])
        details["call_stack"] = frames_of_key(model, key) if key >= 0 else []
    return details


def event_flows(index: TimelineIndex, event: int) -> list[dict[str, Any]]:
    """Arrows touching one slice: CPU launch -> device activity (correlation) and forward ->
    backward op (`fwdbwd` flow events). Each arrow: {"kind", "from": endpoint, "to": endpoint}."""
    s = index.slices
    _check_event(s, event)
    model = index.model
    source, row = _cell(s, "source", event), int(_cell(s, "row", event))
    pairs = []  # (kind, from slice, to slice)
    device_sources = ("kernels", "memcpy", "memset")
    runtime_rows = []
    if source == "runtime":
        runtime_rows = [row]
    elif source == "ops":
        runtime_rows = np.flatnonzero(model.runtime["op"].to_numpy() == row).tolist()
    elif source in device_sources:
        rt = int(_cell(getattr(model, source), "runtime", row))
        if rt >= 0:
            pairs.append(("launch", _slice_of(index, "runtime", [rt])[0], event))
    if runtime_rows:
        for dev in device_sources:
            table = getattr(model, dev)
            hit = np.flatnonzero(np.isin(table["runtime"].to_numpy(), runtime_rows))
            froms = _slice_of(index, "runtime", table["runtime"].to_numpy()[hit])
            tos = _slice_of(index, dev, hit)
            pairs += [("launch", f, t) for f, t in zip(froms, tos)]
    if source == "ops":
        pairs += _fwdbwd_pairs(index, row)
    return [{"kind": kind, "from": slice_endpoint(index, f), "to": slice_endpoint(index, t)}
            for kind, f, t in pairs if f >= 0 and t >= 0]


def _fwdbwd_pairs(index: TimelineIndex, op_row: int) -> list[tuple[str, int, int]]:
    """Forward/backward links of one op: flow start at the forward op, end at the backward op
    (paired when the model was built: the flows' `op` and `peer`)."""
    fl = index.model.flows
    op, peer = fl["op"].to_numpy(), fl["peer"].to_numpy()
    starts = np.flatnonzero((fl["cat"] == "fwdbwd").to_numpy() & (fl["phase"] == "s").to_numpy() & (peer >= 0))
    froms, tos = op[starts], op[peer[starts]]
    mine = ((froms == op_row) | (tos == op_row)) & (froms >= 0) & (tos >= 0)
    return [("fwdbwd", f, t) for f, t in zip(_slice_of(index, "ops", froms[mine]), _slice_of(index, "ops", tos[mine]))]


def matching_slices(index: TimelineIndex, text: str, tracks: Sequence[int] | None = None) -> np.ndarray:
    """Ids of the slices (on `tracks`, None: all) whose name contains `text`
    (case-insensitive), ordered by (start, id)."""
    needle = text.lower()
    names = pd.Series(index.names, dtype=object).astype(str).str.lower()
    wanted = np.flatnonzero(names.str.contains(needle, regex=False).to_numpy())
    s = index.slices
    mask = np.isin(s["name"].to_numpy(), wanted)
    if tracks is not None:
        mask &= np.isin(s["track"].to_numpy(), index.track_ids(tracks))
    ids = np.flatnonzero(mask)
    return ids[np.argsort(s["ts"].to_numpy()[ids], kind="stable")]  # ids ascend: ties by id


def search_position(ts: np.ndarray, keys: np.ndarray, after: tuple[float, int] | None, after_us: float | None,
                    direction: str) -> int:
    """Where a search goes next among matches ordered by (ts, keys) (both ascending in that
    order; none empty): past the match `after` = (its ts, its key), so that matches starting
    together are stepped through one by one, else past `after_us`; the previous one with
    direction="prev". Wraps around at either end."""
    n = len(ts)
    if after is not None:
        lo, hi = np.searchsorted(ts, after[0], side="left"), np.searchsorted(ts, after[0], side="right")
        rank = int(lo + np.searchsorted(keys[lo:hi], after[1], side="left"))
        if direction == "prev":
            return rank - 1 if rank > 0 else n - 1
        hit = rank < n and keys[rank] == after[1] and ts[rank] == after[0]
        pos = rank + 1 if hit else rank
        return pos if pos < n else 0
    if direction == "prev":
        pos = int(np.searchsorted(ts, np.inf if after_us is None else after_us, side="left")) - 1
        return pos if pos >= 0 else n - 1
    pos = int(np.searchsorted(ts, -np.inf if after_us is None else after_us, side="right"))
    return pos if pos < n else 0


def search(index: TimelineIndex, text: str, after_us: float | None = None, direction: str = "next",
           tracks: Sequence[int] | None = None, limit: int = 50, after_event: int | None = None) -> dict[str, Any]:
    """Slices whose name contains `text` (case-insensitive), ordered by (start, event id).

    Returns {"total": matches, "position": the match's rank in that order, "match": the next
    one after `after_event` (a slice id: ties in time are stepped through one by one) or else
    after `after_us` (or the previous one with direction="prev"; wraps around), "results": up
    to `limit` matches from there on, each an endpoint with its name}.
    """
    ids = matching_slices(index, text, tracks)
    if not len(ids):
        return {"total": 0, "position": -1, "match": None, "results": []}
    s = index.slices
    after = (float(_cell(s, "ts", after_event)), after_event) if after_event is not None and 0 <= after_event < len(s) \
        else None
    pos = search_position(s["ts"].to_numpy()[ids], ids, after, after_us, direction)
    window = ids[pos:pos + limit]
    return {"total": int(len(ids)), "position": int(pos), "match": slice_endpoint(index, int(ids[pos])),
            "results": [slice_endpoint(index, int(i)) for i in window]}


@documented(TIMELINE_SUMMARY)
def range_summary(index: TimelineIndex, start_us: float, end_us: float,
                  tracks: Sequence[int] | None = None) -> pd.DataFrame:
    """Per name, what lies inside [start_us, end_us] on `tracks`, sorted by total time."""
    s = index.slices
    ts, end = s["ts"].to_numpy(), (s["ts"] + s["dur"]).to_numpy()
    mask = (ts <= end_us) & (end >= start_us)
    if tracks is not None:
        mask &= np.isin(s["track"].to_numpy(), index.track_ids(tracks))
    clipped = np.minimum(end[mask], end_us) - np.maximum(ts[mask], start_us)
    frame = pd.DataFrame({"name": s["name"].to_numpy()[mask], "kind": s["kind"].to_numpy()[mask], "t": clipped})
    out = frame.groupby(["name", "kind"]).agg(count=("t", "size"), total_us=("t", "sum")).reset_index()
    out["name"] = [str(index.names[i]) for i in out["name"]]
    out["kind"] = [KINDS[k] for k in out["kind"]]
    return TIMELINE_SUMMARY.frame(out.sort_values("total_us", ascending=False, kind="stable"))


# --- the Trace view's routes (see `schema.route`): the timeline index's answers over one profile

# At most this many points per counter series are answered, whatever `points` asks: a series
# is drawn, a pixel a point at most.
MAX_COUNTER_POINTS = 5000
# The parameters the Trace view's routes share, over one trace or over ranks on one axis.
COUNTER_POINTS = integer("points", f"Points per series (at most {MAX_COUNTER_POINTS} are answered).", 500, minimum=1)
RESOLUTION = number("resolution_us", "The time one pixel spans (µs).", required=True, above=0)


def window_slices(model: TraceModel, start_us: float, end_us: float, resolution_us: float,
                  tracks: Sequence[int] | None = None, admit: Callable[[int, str], object] | None = None) -> dict[str, Any]:
    """The slices of `tracks` (None: every one) in [start_us, end_us] at `resolution_us`
    (`TimelineIndex.query`)."""
    return timeline_index(model).query(start_us, end_us, resolution_us, tracks, admit)


def window_counters(model: TraceModel, start_us: float, end_us: float, points: int = 500) -> dict[str, Any]:
    """{counters: the counter series over [start_us, end_us] (`counters`), in at most
    `MAX_COUNTER_POINTS` points}."""
    return {"counters": counters(model, start_us, end_us, min(points, MAX_COUNTER_POINTS))}


def slice_flows(model: TraceModel, event: int) -> dict[str, Any]:
    """{event, flows: the arrows touching slice `event` (`event_flows`)}."""
    return {"event": event, "flows": event_flows(timeline_index(model), event)}


def slice_details(model: TraceModel, event: int) -> dict[str, Any]:
    """Everything known about slice `event` (`event_details`)."""
    return event_details(timeline_index(model), event)


def with_call_stack(details: dict[str, Any], resolve: Callable[[Any], Any]) -> dict[str, Any]:
    """`slice_details`' answer with its operator's call stack resolved (`resolve(frames)`)."""
    return {**details, "call_stack": resolve(details["call_stack"])} if "call_stack" in details else details


def find_slices(model: TraceModel, q: str, after_us: float | None = None, after_event: int | None = None,
                direction: str = "next", tracks: Sequence[int] | None = None) -> dict[str, Any]:
    """The slices whose name holds `q`, from a position on (`search`)."""
    return search(timeline_index(model), q, after_us, direction, tracks, after_event=after_event)


def window_summary(model: TraceModel, start_us: float, end_us: float, tracks: Sequence[int] | None = None) -> pd.DataFrame:
    """Per name, what lies in [start_us, end_us] on `tracks` (`range_summary`)."""
    return range_summary(timeline_index(model), start_us, end_us, tracks)


_TRACKS = ids("tracks", "Comma-separated track ids of /timeline_tracks (default: every track).", "track ids")
_EVENT = integer("event", "A slice id (the `event` of /timeline_slices).", minimum=0, required=True)

TIMELINE_TRACKS_ROUTE = route(
    "timeline_tracks",
    "Timeline tracks (track, kind thread|python|device, process, thread, pid, tid, device, stream, sort_process, "
    "sort_thread, lanes, events), the trace's time span (µs from its start), and the steps.",
    tracks_view, reply="TimelineTracks")

TIMELINE_SLICES_ROUTE = route(
    "timeline_slices",
    "Slices of some tracks in a window at a resolution: events at least resolution_us long as they are, shorter "
    "ones merged into blocks with their event count and busy time. Columnar; names and kinds by index.",
    window_slices, reply="TimelineSlices", admits=True,
    params=(*window("the slices"), RESOLUTION, _TRACKS))

TIMELINE_COUNTERS_ROUTE = route(
    "timeline_counters",
    "Counter series in a window: GPU utilization and est. SM efficiency per GPU (%), allocated/reserved memory per "
    "device (bytes; bucket max keeps peaks), and the trace's own counters (a device's hardware counters named "
    f"`GPU N <counter>`, with the pid of that device's streams); at most {MAX_COUNTER_POINTS} points per series.",
    window_counters, reply="TimelineCounters",
    params=(*window("the series"), COUNTER_POINTS))

TIMELINE_FLOWS_ROUTE = route(
    "timeline_flows", "Arrows touching one slice (launch -> device activity, forward -> backward).",
    slice_flows, reply="TimelineFlows", params=(_EVENT,))

TIMELINE_EVENT_ROUTE = route(
    "timeline_event", "One slice's details: its table row, the operator that launched it, that operator's call stack.",
    slice_details, reply="TimelineEvent", params=(_EVENT,), frames=with_call_stack)

TIMELINE_SEARCH_ROUTE = route(
    "timeline_search",
    "Slices whose name contains q (case-insensitive); the next (or previous) match after after_us, and the matches "
    "from there on.",
    find_slices, reply="TimelineSearch",
    params=(text("q", "The text a slice's name holds (case-insensitive).", required=True),
            number("after_us", "Search from this time (µs, the trace's clock)."),
            integer("after_event", "step from this match (ties in time are visited one by one); takes precedence "
                                   "over after_us", minimum=0),
            choice("direction", ("next", "prev"), "The match after the position, or the one before it."),
            _TRACKS))

TIMELINE_SUMMARY_ROUTE = route(
    "timeline_summary", "Per slice name, what lies in a time range (time clipped to the range).",
    window_summary, table=TIMELINE_SUMMARY, params=(*window("the summary"), _TRACKS))

# The route answering with the critical path on the tracks.
TIMELINE_CRITICAL_PATH_ROUTE = route(
    "timeline_critical_path",
    "The critical path of a step as the Trace view draws it: the segments of /critical_path (table=segments), same "
    "rows in the same order, each with the track of /timeline_tracks it lies on (a CPU thread's for cpu, launch and "
    "sync; a device stream's for kernels, copies, sets, gpu_idle and stream_wait).",
    critical_path_tracks,
    params=(integer("step", "A step number from /steps (default the first)."),),
    table=TIMELINE_CRITICAL_PATH)


# The Trace view's tab of the page (see `schema.tab`).
TRACE_TAB = tab("trace", 60, lambda offer: has_slices(offer.model))
