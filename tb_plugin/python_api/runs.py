"""Runs and spans of many ranks: the one place where a run's trace files and a span of several
workers are read, summarised and combined, for the server and the Python API alike.

A view over many ranks (Job, Distributed, the Trace view's ranks mode) never needs all their
models at once: each worker's trace gives a small summary (`FILE_SUMMARIES`) and the view
combines the summaries. Where a summary comes from is a `SpanSource`'s business: the server's
(`loading.RunStore.span`: a background load, answered 202 while it runs) or the Python API's
(`Run.span`: a parse); both hold, read, build and write the summaries through one
`summaries.SummaryStore` (memory, the disk cache's run index, each file's own entry, else
built from the profile and written back). The functions here take plain arguments (a source,
ranks, flags), never a request: `api.py` validates the request and calls them, `Run` calls
them for a notebook.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import pandas as pd

from ..store.budget import DEFAULT_MAX_MEMORY_BYTES
from ..store.cache import ModelCache
from ..store.discovery import RunFiles, TopLevelOnly, discover_runs, printable
from ..errors import NotFoundError, TraceError
from .snapshots import MemorySnapshot, read_snapshot, snapshot_through_cache
from .profile import Profile, answer_of, declared_routes, diff, load_through_cache
from ..schema import LOG_DIRECTORY, OFFERED, RANKS, RUN_SNAPSHOTS, SNAPSHOT_TRACES, SPAN, TWO_SPANS, Persisted
from ..store.storage import Storage
from ..store.summaries import SummaryStore
from ..views import diff as diff_view
from ..views import distributed as distributed_view
from ..views import job as job_view
from ..views import rank_timeline
from ..views.rank_timeline import RanksTimeline
from ..views import regression as regression_view
from ..views.coverage import MissingRank, rank_in_head

# The per-file summaries that the views over many ranks combine, by the name they are kept
# under: (their declaration, how a profile builds one). `python -m tb_plugin preprocess`
# stores each beside the model in the disk cache, and one run index per span; both sources
# read them back through that declaration.
FILE_SUMMARIES: dict[str, tuple[Persisted, Callable[[Profile], Any]]] = {
    "job": (job_view.RANK_PART, Profile.job_part),
    "distributed": (distributed_view.WORKER_PART, Profile.distributed_part),
    "rank_timeline": (rank_timeline.RANK_TIMELINE_PART, Profile.rank_timeline_part),
    "operator_names": (regression_view.OPERATOR_NAMES_PART, Profile.operator_names),
    "step_causes": (regression_view.STEP_CAUSES_PART, Profile.step_causes_part),
}
# {worker: why its trace did not load}: what a `SpanSource` leaves out of a view over many ranks
Failed = dict[str, MissingRank]
# A candidate B runs A's program when at least this share of the operator names either trace
# uses are used by both (names in common / names in either). On the bundled and shared traces
# the same program scores 0.87-1.00 (a CNN alone and under DDP, two copies of one ResNet run),
# different programs of one device type 0.00-0.50 (they share aten::add, aten::copy_, ...).
SAME_PROGRAM = 0.6


def _no_progress(stage: str, fraction: float | None) -> None:
    pass


class SpanSource(Protocol):
    """One span of every worker of a run that has it, as a view over many ranks reads it."""

    workers: list[str]

    def summaries(self, keys: Sequence[str], failed: Failed | None = None) -> dict[str, dict[str, Any]]:
        """{key: {worker: its summary `key` (a `FILE_SUMMARIES` dataclass)}} for every worker;
        all are asked for before any is awaited, so each worker's trace is read once. With
        `failed`, a worker whose trace does not load is left out and its `TraceError`'s
        reason put there ({worker: `MissingRank`}), unless no worker loads (the last worker's error
        is raised); without it, the first such error is raised."""

    def profiles(self, workers: Sequence[str]) -> dict[str, Profile]:
        """{worker: its `Profile`} of these workers (the ranks drawn in full)."""


def span_workers(files: RunFiles, span: int) -> list[str]:
    """The workers of a run that have span `span` (numbered from 1)."""
    workers = [w for w, spans in files.workers.items() if span <= len(spans)]
    if not workers:
        raise NotFoundError(f"no worker of run {files.name!r} has span {span}")
    return workers


def skip_failed(failed: Failed | None, worker: str, error: TraceError, loaded: int, left: int,
                storage: Storage, rel: str) -> None:
    """What a `SpanSource` does when `worker`'s trace (`rel` in `storage`) fails to load with
    `error`: record its reason in `failed`, with its rank where the start of the file gives
    it, or raise `error` when there is no `failed` or when no worker of the span has loaded
    (`loaded`) nor may still (`left`, the workers not asked yet)."""
    if failed is None or (not loaded and not left):
        raise error
    try:
        rank = rank_in_head(storage.json_sample(rel)[1])
    except TraceError:  # not even its start reads
        rank = None
    failed[worker] = MissingRank(error.reason, rank)


Held = TypeVar("Held")


def run_snapshots(files: RunFiles, read: Callable[[str], Held]) -> tuple[dict[str, Held], dict[str, TraceError]]:
    """({name: `read(name)`}, {name: its `TraceError`}) of every memory snapshot of the run
    `files` (`schema.RUN_SNAPSHOTS`): a snapshot whose `read` raises `TraceError` (a truncated
    pickle, one over the memory budget, a refused global) is left out with its error, and
    the others are still read; `NotFoundError` for a run without snapshots, the first
    snapshot's `TraceError` when none can be read."""
    if not files.snapshots:
        raise NotFoundError(f"run {files.name!r} has no memory snapshots (*.pickle, *.pickle.gz or JSON snapshots)")
    held: dict[str, Held] = {}
    failed: dict[str, TraceError] = {}
    for name in files.snapshots:
        try:
            held[name] = read(name)
        except TraceError as exc:
            failed[name] = exc
    if not held:
        raise next(iter(failed.values()))
    return held, failed


def span_ranks(job_parts: Mapping[str, job_view.RankPart], ranks: Sequence[int] | None,
               expanded: bool = False) -> list[str]:
    """The workers of `ranks` (None: all) among {worker: `Profile.job_part()`}, in rank order;
    at most `views.rank_timeline.MAX_EXPANDED` when they are to be `expanded`."""
    if expanded:
        return rank_timeline.rank_workers(job_parts, ranks, most=rank_timeline.MAX_EXPANDED)
    return rank_timeline.rank_workers(job_parts, ranks)


def ranks_frame(job_parts: Mapping[str, job_view.RankPart], parts: Mapping[str, rank_timeline.RankTimelinePart],
                align_clocks: bool = True) -> pd.DataFrame:
    """The `timeline_ranks` table of {worker: `Profile.rank_timeline_part()`}: each rank's clock
    offset and shift onto the shared axis; `job_parts` (every worker of the span) give the
    offsets (`views.rank_timeline.rank_frame`)."""
    return rank_timeline.rank_frame(job_parts, parts, align_clocks)


@dataclass
class RanksInputs:
    """What the ranks of one span on one axis are computed from: every worker's job summary
    (the clock offsets), the shown ranks' timeline summaries (a collapsed rank's track) and
    the expanded ranks' profiles."""

    job_parts: dict[str, job_view.RankPart]
    parts: dict[str, rank_timeline.RankTimelinePart]
    expanded: dict[str, Profile]

    @property
    def used(self) -> list:
        """Every summary and profile read, in a fixed order (what an answer is a function of)."""
        return [*self.job_parts.values(), *self.parts.values(), *self.expanded.values()]


def ranks_inputs(source: SpanSource, ranks: Sequence[int] | None, expanded: Sequence[int]) -> RanksInputs:
    """Read what `ranks_timeline` needs of a span: `ranks` shown (None: all), `expanded` drawn
    in full. Both summaries of every worker are asked for in one pass, so each trace is read
    once; the expanded ranks' profiles after them."""
    asked = source.summaries(("job", "rank_timeline"))
    job_parts = asked["job"]
    parts = {w: asked["rank_timeline"][w] for w in span_ranks(job_parts, ranks)}
    opened = [w for w in span_ranks(job_parts, expanded, expanded=True) if w in parts]
    return RanksInputs(job_parts, parts, source.profiles(opened))


def ranks_timeline(inputs: RanksInputs, align_clocks: bool = True, frame: pd.DataFrame | None = None) -> RanksTimeline:
    """The ranks `inputs` hold on one time axis; `frame`, their `ranks_frame` when computed
    before (the server keeps it per job: matching every rank's collectives is the cost)."""
    if frame is None:
        frame = ranks_frame(inputs.job_parts, inputs.parts, align_clocks)
    return RanksTimeline(frame, inputs.parts, {w: p.timeline() for w, p in inputs.expanded.items()})


class Run:
    """The trace files of one run directory: workers x spans, each loaded on first use.

    `run.workers` lists worker names; `run.spans(worker)` the span numbers (1, 2, ...);
    `run.profile(worker, span)` (or `run[worker, span]`) the `Profile`. With a disk cache
    (`load_run(..., cache_dir=...)`), a profile is read from the cache where it holds the
    file's model, and the views over many ranks from the summaries `preprocess` (or the
    server) stored (the run index first), parsing only the files the cache holds nothing for
    and storing the summaries built from them. The run holds each file's summaries once read.
    Each file is loaded within `max_memory_bytes`, as TensorBoard loads it within
    --profiler_max_memory_mb (`profile.read_profile`).
    """

    def __init__(self, storage: Storage, files: RunFiles, cache: ModelCache | None = None,
                 max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES) -> None:
        self.storage = storage
        self.files = files
        self.max_memory_bytes = max_memory_bytes
        self.cache = cache if cache is not None and cache.enabled else None
        self._profiles: dict[tuple[str, int], Profile] = {}
        self.summaries = SummaryStore(self.cache)
        self._snapshots: dict[tuple[str, int], MemorySnapshot] = {}

    def __repr__(self) -> str:
        return f"Run({self.storage.display(None)!r}, workers={self.workers})"

    @property
    def workers(self) -> list[str]:
        return list(self.files.workers)

    def spans(self, worker: str) -> list[int]:
        self.files.trace_file(worker)  # NotFoundError for a worker the run does not have
        return [f.span for f in self.files.workers[worker]]

    def profile(self, worker: str, span: int = 1, progress: Callable[[str, float | None], None] = _no_progress,
                keep: bool = True) -> Profile:
        """The profile of `worker`'s `span`, loaded on first use (`progress` hears how far),
        and held by the run unless ``keep=False``."""
        path = self.files.trace_file(worker, span).path
        key = (worker, span)
        if key in self._profiles:
            return self._profiles[key]
        loaded = self._load(path, progress)
        if keep:
            self._profiles[key] = loaded
        return loaded

    def _load(self, rel: str, progress: Callable[[str, float | None], None] = _no_progress) -> Profile:
        return load_through_cache(self.storage, rel, self.cache, self.max_memory_bytes, progress)[0]

    def snapshots(self) -> list[str]:
        """Names of the run's CUDA memory snapshots (`rank0`, ...), as the server lists them."""
        return list(self.files.snapshots)

    def snapshot(self, name: str, span: int = 1, max_memory_bytes: int | None = None) -> MemorySnapshot:
        """The memory snapshot `name` (its `span`-th file where one name has several), loaded
        on first use (within `max_memory_bytes`, by default the run's) and held by the run:
        what `tb_plugin.load_snapshot` returns for its file.
        With the run's disk cache, read from it where it holds the file as it is (a server or an
        earlier session decoded it), and stored in it once decoded, as the server does."""
        path = self.files.snapshot_file(name, span).path
        key = (name, span)
        if key not in self._snapshots:
            self._snapshots[key] = self._read_snapshot(path, self.max_memory_bytes if max_memory_bytes is None
                                                       else max_memory_bytes)
        return self._snapshots[key]

    def _read_snapshot(self, rel: str, max_memory_bytes: int) -> MemorySnapshot:
        def decode() -> MemorySnapshot:
            return read_snapshot(self.storage, rel, max_memory_bytes)

        return decode() if self.cache is None else snapshot_through_cache(self.cache, self.storage, rel, decode)[0]

    def __getitem__(self, key: str | tuple[str, int]) -> Profile:
        worker, span = key if isinstance(key, tuple) else (key, 1)
        return self.profile(worker, span)

    def span(self, span: int = 1) -> RunSpan:
        """One span of every worker that has it, as the views over many ranks read it."""
        return RunSpan(self, span)

    def distributed(self, span: int = 1) -> distributed_view.DistributedView:
        """Computation / communication per worker and step, collectives and devices for one
        span of every worker that has it; see `tb_plugin.views.distributed.distributed`.

        Profiles not loaded yet are loaded one at a time and not kept: a job of many ranks
        never needs all its profiles in memory at once. A worker whose trace does not load
        (a truncated file) is left out and named with its reason in ``missing`` and
        ``coverage``; `TraceError` only when none loads."""
        return self.answer("distributed", span)

    def job(self, span: int = 1, align_clocks: bool = True) -> job_view.JobView:
        """Every rank of one span side by side: per rank and step where the time went,
        stragglers with their cause, kernels and operators across ranks, collectives matched
        across ranks with arrival spread and bandwidth, and each rank's clock offset; see
        `tb_plugin.views.job`. Loads like `distributed`: one profile at a time, and a rank
        whose trace does not load is left out, named with its reason in ``missing`` and in
        the verdict's coverage; `TraceError` only when none loads."""
        return self.answer("job", span, align_clocks=align_clocks)

    # The kinds of input `answer` reads over a run.
    READS = (SPAN, TWO_SPANS, RANKS, RUN_SNAPSHOTS, SNAPSHOT_TRACES, LOG_DIRECTORY, OFFERED)

    def answer(self, route: str, span: int = 1, run_b: Run | None = None, span_b: int = 1, **params: Any) -> Any:
        """The answer of the declared route `route` over a span of this run's ranks (`schema.SPAN`:
        "distributed", "job"), over it and run B's `span_b` (`schema.TWO_SPANS`: "diff_ranks",
        given `run_b`), or over its ranks on one axis (`schema.RANKS`: "timeline_ranks",
        "timeline_rank_slices", ...; `ranks`, `expanded` and `align_clocks` among `params` are
        `timeline_ranks`'s), over every memory snapshot of the run (`schema.RUN_SNAPSHOTS`:
        "snapshot_ranks") or over the snapshot `snapshot` (its `span`-th file) and the traces of
        its rank (`schema.SNAPSHOT_TRACES`: "snapshot_trace", `snapshot` among `params`), or over
        the run as a log directory of one run (`schema.LOG_DIRECTORY`: "runs", "workers",
        "spans"; `run` is this run's name unless given) and as its tabs are offered for one worker's
        profile (`schema.OFFERED`: "views", `worker` among `params`, else the first), with its
        `params`: what the HTTP API serves for it. Each worker's part is
        read as `span(span).summaries` reads it: one profile at a time, from the disk cache where
        it holds them; a worker that does not load is left out and named (`missing`)."""
        declared = declared_routes().get(route)
        reads = declared.reads if declared is not None and declared.reads in self.READS else SPAN
        if declared is None or declared.reads != reads:  # named with the routes that are
            return answer_of(reads, route, (), params)
        inputs: tuple[Any, ...]
        if reads == OFFERED:  # the log directory of this one run: its trace files counted
            worker = params.pop("worker", None) or next(iter(self.files.workers), None)
            if worker is None:
                raise NotFoundError(f"run {self.files.name!r} has no trace files, only memory snapshots")
            inputs = (self.profile(worker, span).offer(len(self.workers), len(self.files.files())), self.files.name)
        elif reads == LOG_DIRECTORY:  # the run's own name where a route asks for one
            inputs = (RunListing(self),)
            params = {**({"run": self.files.name} if any(p.name == "run" for p in declared.params) else {}), **params}
        elif reads == RUN_SNAPSHOTS:  # a snapshot that cannot be read is left out and named (`missing`)
            inputs = run_snapshots(self.files, self.snapshot)
        elif reads == SNAPSHOT_TRACES:
            name = params.pop("snapshot", None)
            if name is None:
                raise NotFoundError(f"route {route!r} reads a memory snapshot: give snapshot=NAME")
            traces = self.files.snapshot_traces(name)
            inputs = (self.snapshot(name, span), {(w, s): self.profile(w, s) for w, s in traces})
        elif reads == RANKS:
            shown = {name: params.pop(name) for name in ("ranks", "expanded", "align_clocks") if name in params}
            inputs = (self.timeline_ranks(span, **shown),)
        elif reads == SPAN:
            failed: Failed = {}
            inputs = (self.span(span).summaries((declared.part,), failed)[declared.part], failed)
        elif run_b is None:
            raise NotFoundError(f"route {route!r} compares two runs: give run_b")
        else:
            inputs = tuple(run.span(s).summaries((declared.part,))[declared.part] for run, s in ((self, span), (run_b, span_b)))
        return answer_of(reads, route, inputs, params)

    def timeline_ranks(self, span: int = 1, ranks: Sequence[int] | None = None, align_clocks: bool = True,
                       expanded: Sequence[int] = ()) -> RanksTimeline:
        """Several ranks of one span on one time axis (the Trace view's ranks mode): `ranks`
        (None: all), the clocks aligned by matched collectives unless ``align_clocks=False``,
        the ranks in `expanded` with their own tracks; see `tb_plugin.views.rank_timeline`.
        Loads like `job`; only the expanded ranks' profiles are kept."""
        return ranks_timeline(ranks_inputs(self.span(span), ranks, expanded), align_clocks)


class RunListing:
    """A `Run` as a log directory of that one run (`views.listing.Listing`), for the routes
    over the log directory (runs, workers, spans): the run is named as `load_run` names it;
    a profile or snapshot is listed loaded when the run holds it (none loads for a listing)."""

    scan_error = ""
    scan_errors: tuple[dict[str, str], ...] = ()
    warming_up = False

    def __init__(self, run: Run) -> None:
        self.run = run

    def runs(self) -> list[dict[str, Any]]:
        files, run = self.run.files, self.run
        return [{"name": files.name, "workers": list(files.workers), "spans": files.span_count(),
                 "files": len(files.files()), "loaded": sum(key in run._profiles for key in self._keys()),
                 "loading": False, "errors": [],
                 "snapshots": [{"name": f.worker, "span": f.span, "path": printable(f.path), "reason": "",
                                "status": "ready" if (f.worker, f.span) in run._snapshots else "new"}
                               for f in files.snapshot_files()]}]

    def _keys(self) -> list[tuple[str, int]]:
        return [(f.worker, f.span) for f in self.run.files.files()]

    def run_spans(self, name: str) -> dict[str, list[dict[str, Any]]]:
        if name != self.run.files.name:
            raise NotFoundError(f"no run named {name!r}: this one is {self.run.files.name!r}")
        return self.run.files.listed_spans()


class RunSpan:
    """The Python API's `SpanSource`: one span of a `Run`. A worker's summary is the one the
    run holds, else built from a profile the run holds, else read from the disk cache (the
    span's run index, else the file's own entry, each only while the file's identity is the
    one stored), else built from its profile loaded for the occasion and not kept, and then
    written to the disk cache (`summaries.SummaryStore`)."""

    def __init__(self, run: Run, span: int) -> None:
        self.run = run
        self.span = span
        self.workers = span_workers(run.files, span)

    def _path(self, worker: str) -> str:
        return self.run.files.workers[worker][self.span - 1].path

    def summaries(self, keys: Sequence[str], failed: Failed | None = None) -> dict[str, dict[str, Any]]:
        run, store = self.run, self.run.summaries
        unloaded = [self._path(w) for w in self.workers if (w, self.span) not in run._profiles]
        for key in keys:
            store.prefetch(run.storage, run.storage.display("."), unloaded, self.span, key, FILE_SUMMARIES[key][0])
        found: dict[str, dict[str, Any]] = {key: {} for key in keys}
        for i, worker in enumerate(self.workers):
            path, held = self._path(worker), run._profiles.get((worker, self.span))
            for key in keys:
                summary = store.held(path, key)
                if summary is None and held is None:
                    summary = store.stored(run.storage, path, key, FILE_SUMMARIES[key][0])
                if summary is not None:
                    found[key][worker] = store.keep(path, key, summary)
            missing = [key for key in keys if worker not in found[key]]
            if missing:
                try:
                    profile = held or run._load(path)
                except TraceError as exc:
                    for key in keys:
                        found[key].pop(worker, None)
                    skip_failed(failed, worker, exc, len(found[keys[0]]), len(self.workers) - i - 1, run.storage, path)
                    continue
                built = {key: (store.keep(path, key, FILE_SUMMARIES[key][1](profile)), FILE_SUMMARIES[key][0])
                         for key in missing}
                identity, unstored = store.unstored(path, built)
                if unstored and identity is not None:
                    store.persist(run.storage, path, identity, unstored)
                for key in missing:
                    found[key][worker] = built[key][0]
        return found

    def profiles(self, workers: Sequence[str]) -> dict[str, Profile]:
        return {w: self.run.profile(w, self.span) for w in workers}


def _side_progress(progress: Callable[[str, str, str, float | None], None] | None, side: str,
                   worker: str) -> Callable[[str, float | None], None]:
    if progress is None:
        return _no_progress
    return lambda stage, fraction: progress(side, worker, stage, fraction)


def diff_ranks(run_a: Run, run_b: Run, span_a: int = 1, span_b: int = 1,
               threshold_pct: float = diff_view.DEFAULT_THRESHOLD_PCT,
               progress: Callable[[str, str, str, float | None], None] | None = None,
               check: Callable[[Profile, Profile], None] | None = None
               ) -> tuple[pd.DataFrame, dict[str, diff_view.DiffView]]:
    """Two runs of a job compared rank by rank: every worker found in both, its `span_a` in
    `run_a` against its `span_b` in `run_b`. Returns the ranks table (`DIFF_RANKS`: each rank's
    mean step time in both and its largest cause, the rank that changed most first) and each
    rank's `diff`. One pair of profiles is loaded at a time and not kept, so a job of many
    ranks never needs them all in memory; `progress(side, worker, stage, fraction)` hears how
    far each load is; `check(profile_a, profile_b)` may refuse a rank's pair (raising) before
    it is compared."""
    common = [w for w in run_a.workers if w in run_b.workers]
    if not common:
        raise NotFoundError(f"the runs share no worker: {', '.join(run_a.workers)} against {', '.join(run_b.workers)}")
    views = {}
    for worker in common:
        profile_a, profile_b = (run.profile(worker, span, keep=False, progress=_side_progress(progress, side, worker))
                                for side, run, span in (("A", run_a, span_a), ("B", run_b, span_b)))
        if check is not None:
            check(profile_a, profile_b)
        views[worker] = diff(profile_a, profile_b, threshold_pct)
        del profile_a, profile_b
    return regression_view.rank_changes({w: v.explanation for w, v in views.items()}), views


@dataclass
class Proposal:
    """The B proposed for a diff of A (`propose_comparison`): run, worker, span (None when
    nothing is comparable), the reason in words, and the candidate runs still loading."""

    run: str | None
    worker: str | None
    span: int | None
    reason: str
    loading: list[str]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _names_bytes(names: regression_view.OperatorNames) -> int:
    return int(names.names.memory_usage(index=True, deep=True).sum())


def propose_comparison(run: str, worker: str, span: int, spans: int, run_workers: Mapping[str, Sequence[str]],
                       names_of: Callable[[str, str], regression_view.OperatorNames | None],
                       budget_bytes: int) -> Proposal:
    """The default B for A (`worker`'s `span` in `run`; `spans`, how many spans that worker
    has): the same worker's first other span; else, among the other runs (`run_workers`:
    {run: its workers}, in run order), one with A's workers, else one without, of A's device
    type and running A's program (`SAME_PROGRAM`), with the most operator names in common with
    A (run order breaks ties); else none, with the reason. Never a run of another program:
    a proposal is a comparison the page makes without being asked.

    `names_of(run, worker)` gives a trace's `OperatorNames` (its first span), None while it
    loads; A's own are known. Every run is looked at until the names read pass `budget_bytes`;
    the runs left are named in the reason, with why. A candidate still loading is named in
    the reason; when none of the preferred kind is known yet but some load, the proposal is
    empty with those listed in `loading` (the caller waits for them)."""
    if spans > 1:
        other = 1 if span != 1 else 2
        return Proposal(run, worker, other, f"the same run's span {other}", [])
    own = names_of(run, worker)
    assert own is not None, "A's operator names are known before a B is proposed"
    mine = set(own.names["name"])
    workers_a = set(run_workers.get(run, [worker]))
    others = [r for r, workers in run_workers.items() if r != run and workers]
    same = [r for r in others if set(run_workers[r]) == workers_a]
    groups = (same, [r for r in others if r not in same])
    device = own.device_type
    held = _names_bytes(own)
    unread: list[str] = []

    def not_read() -> str:
        if not unread:
            return ""
        return (f"; {_plural(len(unread), 'run')} not looked at ({', '.join(unread[:5])}"
                f"{', ...' if len(unread) > 5 else ''}): their operator names would pass the "
                f"{budget_bytes >> 20} MiB of the memory budget a proposal may read")

    same_device, closest = 0, 0.0
    for kind, group in enumerate(groups):
        found = {}
        loading = []
        for candidate in group:
            if held > budget_bytes:
                unread.append(candidate)
                continue
            chosen = worker if worker in run_workers[candidate] else run_workers[candidate][0]
            names = names_of(candidate, chosen)
            if names is None:
                loading.append(candidate)
                continue
            held += _names_bytes(names)
            if names.device_type != device:
                continue
            same_device += 1
            theirs = set(names.names["name"])
            common = len(mine & theirs)
            share = common / len(mine | theirs) if mine | theirs else 0.0
            closest = max(closest, share)
            if share >= SAME_PROGRAM:
                found[candidate] = (common, chosen)
        if not found:
            if loading:
                return Proposal(None, None, None, f"{_plural(len(loading), 'run')} still loading", loading)
            continue
        best = max(found, key=lambda r: found[r][0])  # the first of the largest: run order breaks ties
        common, chosen = found[best]
        in_common = f"{common} of {_plural(len(mine), 'operator name')} in common"
        if kind == 0:
            reason = f"run {best}: another {device} run with the same {_plural(len(workers_a), 'worker')}, {in_common}"
        else:
            reason = (f"no run shares A's {_plural(len(workers_a), 'worker')}: run {best}, another {device} run "
                      f"(worker {chosen}), {in_common}")
        if loading:
            reason += f"; {_plural(len(loading), 'other run')} not loaded yet ({', '.join(loading)})"
        return Proposal(best, chosen, 1, reason + not_read(), loading)
    unlike = (f"no other {device} run runs the same program (at most {closest:.0%} of the operator names "
              f"either uses are in both; {SAME_PROGRAM:.0%} needed)" if same_device
              else f"no other run ran on {device}")
    return Proposal(None, None, None, f"this run has one span, and {unlike}{not_read()}", [])


def load_run(dir_or_url: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None,
             max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES) -> Run:
    """The run in one directory (local path or fsspec URL); trace files load lazily, each
    within `max_memory_bytes` (TensorBoard's default budget; see `profile.read_profile`).

    With `cache_dir` (a disk cache TensorBoard or `python -m tb_plugin preprocess` filled, a
    local path or fsspec URL), profiles, memory snapshots and the summaries of the views over
    many ranks are read from it where it holds them for the files as they are, so a
    preprocessed job's `job()` or `distributed()` reads its run index and parses nothing; the
    summaries and snapshots it computes are stored in it for the next reader.

    Raises
    ------
    TraceError
        When the directory holds no trace files and no memory snapshots.
    """
    storage = Storage(dir_or_url)
    if not storage.remote and not os.path.isdir(storage.root):  # not "no trace files in this directory"
        raise TraceError(storage.display(None), "not a directory (a run is the directory holding trace files)"
                         if os.path.exists(storage.root) else "no such directory")
    skipped: list = []
    runs = discover_runs(TopLevelOnly(storage), skipped=skipped)
    if "." not in runs:
        unlisted = next((s.reason for s in skipped if s.path == "."), None)  # unreachable, no credentials
        raise TraceError(storage.display(None), unlisted or "no trace files (*.pt.trace.json[.gz]) or memory "
                                                            "snapshots in this directory")
    # discovery names the run by its path under the directory it scanned ("."): a message of
    # the Python API names the directory the user gave
    files = replace(runs["."], name=storage.display(None))
    return Run(storage, files, ModelCache(cache_dir) if cache_dir is not None else None, max_memory_bytes)
