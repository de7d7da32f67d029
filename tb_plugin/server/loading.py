"""Background discovery and loading of the runs under one log directory.

`RunStore` owns the run index and the parsed profiles. Requests never parse on their own
thread: they ask for a (run, worker, span), get the `Profile` if it is ready, and otherwise
a `Loading` answer with progress while a small pool of loader threads parses it (a small
trace never waits behind a large one). Failures are remembered with the file's identity
(size, mtime, inode and ctime), so a file that changes (a trace still being written, a fixed
file, a `chmod`) is tried again and a broken one is not reparsed on every request; a file that
could not be read at all is tried again after `retry_seconds`.

One memory budget covers what the process holds (`accounting.MemoryBudget`, the store's
`budget`): parsed profiles and memory snapshots with what their views cached, the loads in
flight (reserved by their estimate before they start, re-estimated per event once the events
are counted, cancelled when that no longer fits), the summaries, the reply cache and the
replies being built. The store decides what to load and when; the budget counts and drops.

Memory snapshots listed with a run (`snapshot`) go through the same machinery (each kind of
file a `_Kind`: how it is read, what is built of it, and the budget's `Shelf` that holds it
under its own type), keyed by their path: loaded in the background, failures remembered,
held on the budget's shelf of snapshots in the same order as the profiles, counted (reserved
before the read by `snapshots.PEAK_BYTES_PER_SNAPSHOT_BYTE` per inflated byte), and
their decoded tables kept in the disk cache like a trace's (`_snapshot_or_cached`).
"""

import gzip
import logging
import os
import threading
import time
import zlib
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import IO, TYPE_CHECKING, Any, Generic, TypeVar

from .accounting import (Held, MemoryBudget, ReplyReservation, Shelf, cap_malloc_arenas, give_back_memory, held_bytes,
                         profile_bytes)
from ..store.budget import estimate_parse_bytes, events_in, json_limit
from ..store.discovery import SNIFF_BYTES, OneFile, RunFiles, Skipped, SpanFile, discover_runs, looks_like_trace, printable
from ..errors import FileAccessError, NotFoundError, StillLoadingError, TraceError, os_reason
from ..stages import STAGE_QUEUED, STAGE_READING
from ..store.summaries import SummaryStore
from ..store.storage import GZIP_MAGIC, FileStat, Storage, inflate_head

if TYPE_CHECKING:  # not at run time: the profile module loads numpy, pandas and polars
    from ..store.cache import ModelCache
    from ..python_api.snapshots import MemorySnapshot
    from ..python_api.profile import Profile
    from ..python_api.runs import Failed
    from ..schema import Persisted

logger = logging.getLogger(__name__)
Summary = TypeVar("Summary")

# How long a request may wait for the first scan of the log directory after start-up.
_FIRST_SCAN_WAIT_SECONDS = 30.0
# A file modified this recently when it failed to parse may still have been being written:
# that failure is not final, the file is parsed again after `retry_seconds`.
_SETTLING_SECONDS = 10.0


def loader_count(max_memory_bytes: int, cores: int | None = None) -> int:
    """Loader threads: at least two (a small trace never waits behind a large one), at most
    one per core, four, or one per 256 MB of budget."""
    cores = cores or os.cpu_count() or 2
    return max(2, min(cores, 4, max_memory_bytes // (256 << 20)))


class _Cancelled(TraceError):
    """A load stopped because the store stopped or the file changed meanwhile."""


@dataclass
class Loading:
    """A profile that is being (or about to be) parsed: since when, at which stage (one of
    the `STAGE_*` of `profile`), and for `STAGE_PARSING` the fraction of the JSON read."""

    path: str
    since: float
    stage: str = STAGE_QUEUED
    fraction: float | None = None

    def error(self, ready_count: int | None = None, total: int | None = None) -> StillLoadingError:
        """The `StillLoadingError` (answered 202) of this load; a view over several profiles
        says how many of them are ready of the total."""
        return StillLoadingError(self.path, self.since, self.stage, self.fraction, ready_count, total)


def ready(result: "Held | Loading") -> "Held":
    """The Profile (or MemorySnapshot), or `StillLoadingError` while it is read."""
    if isinstance(result, Loading):
        raise result.error()
    return result


class StoreSpan:
    """The server's `runs.SpanSource`: one span of a run of the store. Every worker's summary
    is looked up in memory, then in the disk cache (the run index first), else built after a
    background load; while any is still loading, `StillLoadingError` says how many are ready."""

    def __init__(self, store: "RunStore", run: str, span: int) -> None:
        from ..python_api.runs import span_workers

        self.store, self.run, self.span = store, run, span
        self.workers = span_workers(store.run_files(run), span)

    def summaries(self, keys: Sequence[str], failed: "Failed | None" = None) -> dict[str, dict[str, Any]]:
        from ..python_api.runs import FILE_SUMMARIES, skip_failed

        # Every one is asked for before any is awaited, so they load one after another
        # without waiting for the next request.
        for key in keys:
            self.store.prefetch_summaries(self.run, self.workers, self.span, key, FILE_SUMMARIES[key][0])
        asked: dict[str, dict[str, Any]] = {}
        for i, w in enumerate(self.workers):
            try:
                asked[w] = {key: self.store.summary(self.run, w, self.span, key, FILE_SUMMARIES[key][1],
                                                    FILE_SUMMARIES[key][0]) for key in keys}
            except TraceError as exc:  # with `failed`, the rank is named and the others answer
                assert self.store._storage is not None  # the run was found: the log directory was scanned
                skip_failed(failed, w, exc, len(asked), len(self.workers) - i - 1, self.store._storage,
                            self.store.span_file(self.run, w, self.span).path)
        loading = [r for per_key in asked.values() for r in per_key.values() if isinstance(r, Loading)]
        if loading:
            done = sum(not any(isinstance(r, Loading) for r in per_key.values()) for per_key in asked.values())
            raise loading[0].error(done, len(asked))
        return {key: {w: asked[w][key] for w in asked} for key in keys}

    def profiles(self, workers: Sequence[str]) -> dict[str, "Profile"]:
        return {w: ready(self.store.profile(self.run, w, self.span)) for w in workers}


@dataclass(frozen=True)
class _Kind(Generic[Held]):
    """One kind of file the store loads (a trace's `Profile`, a `MemorySnapshot`): the budget's
    shelf that holds it, how it is read (`read(path)` -> (it, from the disk cache or the file,
    and the identity of the file it is of, or None)), what is built of it on the indexer
    thread once it is loaded (`index`), and right after the load on the loader thread
    (`summarise(path, it)`, where summaries are asked of it)."""

    shelf: Shelf[Held]
    read: Callable[[str], "tuple[Held, dict | None]"]
    index: Callable[[Held], object]
    summarise: Callable[[str, Held], object] | None = None


@dataclass
class _FileState:
    stat: FileStat | None = None
    status: str = "new"  # new | loading | ready | error
    error: str = ""
    failed_at: float = 0.0
    future: "futures.Future[None] | None" = None
    started: float = 0.0
    stage: str = STAGE_QUEUED
    fraction: float | None = None
    load_seconds: float = 0.0
    transient: bool = False  # the error was the file system's (permissions, ...), not the trace's


class RunStore:
    """Runs, workers and spans under `logdir`, and their profiles, loaded in the background.

    Parameters
    ----------
    logdir : str
        Local path or fsspec URL.
    rescan_seconds : float
        How often the background thread looks for new, changed and removed files.
    max_profiles : int
        How many parsed profiles stay in memory at most.
    max_memory_bytes : int
        Memory budget for what the store holds: profiles with their views' cached results,
        summaries, loads in flight and cached replies (`replies`, at most 1/8 of it). Profiles
        beyond it are dropped, least recently used first (reloaded from the disk cache when
        asked for again); a load waits until its estimate fits beside the loads in flight.
        Also sets how many loader threads run (`loader_count`).
    max_parse_bytes : int or None
        A trace whose load would need more memory than this (by its estimate, its counted
        events, its inflated gzip, or its cached tables) is refused with a message
        (default: `max_memory_bytes`).
    cache : ModelCache or None
        On-disk cache of parsed models, and of the per-file summaries `preprocess` stores
        (served by `summary` without parsing).
    retry_seconds : float
        How soon a trace that failed while it was still being written, or could not be read
        (permissions, a network error), is tried again.
    only_file : str or None
        The name of one file at the top of `logdir`: the store's one run (".") is that file
        alone, and nothing is listed (a report of one remote trace file).
    """

    def __init__(self, logdir: str, *, rescan_seconds: float = 30.0, max_profiles: int = 64,
                 max_memory_bytes: int = 4 << 30, max_parse_bytes: int | None = None,
                 cache: "ModelCache | None" = None, retry_seconds: float = 2.0, only_file: str | None = None) -> None:
        self.logdir = logdir
        self.only_file = only_file
        self.rescan_seconds = rescan_seconds
        self.retry_seconds = retry_seconds
        self.max_parse_bytes = max_memory_bytes if max_parse_bytes is None else max_parse_bytes
        cap_malloc_arenas()  # before the loader and request threads allocate: the budget bounds the process
        self.cache = cache
        self._storage: Storage | None = None
        self._runs: dict[str, RunFiles] = {}
        self._files: dict[str, _FileState] = {}
        self._sniff_cache: dict[Any, Any] = {}
        self._lock = threading.RLock()
        # Small results derived from one file's profile (`summary`), kept while the file is
        # unchanged even after its profile leaves memory, their memory counted in the budget;
        # and those asked for but not built yet, with their declarations in the disk cache
        # (None: not stored there).
        self.summaries = SummaryStore(cache, self._lock, held_bytes)
        self._wanted: dict[str, dict[str, tuple[Callable[[Profile], Any], Persisted | None]]] = {}
        self._scan_lock = threading.Lock()
        self._scanned = threading.Event()
        self._started = False
        self._stop = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=loader_count(max_memory_bytes),
                                            thread_name_prefix="tb_plugin_load")
        # Timeline indexes are built after a load on a thread of their own: loads never queue
        # behind them.
        self._indexer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tb_plugin_index")
        # What the store holds, counted against the memory budget; a profile or snapshot it
        # drops is loaded again when asked for.
        self.budget = MemoryBudget(max_memory_bytes, max_profiles, self._lock, self.summaries, self._evicted,
                                   self._indexer.submit, self._stop)
        self.replies = self.budget.replies
        # What a trace file and a memory snapshot file load as, each held on its own shelf.
        self._traces: _Kind[Profile] = _Kind(self.budget.profiles, self._trace_or_cached, lambda p: p.timeline(),
                                             self._build_summaries)
        self._snapshots: _Kind[MemorySnapshot] = _Kind(self.budget.snapshots, self._snapshot_or_cached,
                                                       lambda s: s.index())  # its Active Memory Timeline's indexes
        self.scan_error = ""
        # What the last scan could not look at (`discovery.Skipped`): shown with the run list.
        self.scan_skipped: list[Skipped] = []
        # Loads started by `prefetch_first` that no one asked for yet, and those of them a
        # user's load cancelled (they stop at their next progress report).
        self._prefetching: set[str] = set()
        self._cancelled: set[str] = set()
        # Set by the plugin while its background warm-up (and `prefetch_first`) runs: the run
        # list says so, so that a client can tell a first click from one after the warm-up.
        self.warming_up = False

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background rescans (idempotent); the constructor does no I/O."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._rescan_forever, name="tb_plugin_rescan", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self.budget.changed.notify_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._indexer.shutdown(wait=False, cancel_futures=True)

    def wait_for_scan(self, timeout: float | None = None) -> bool:
        """Block until the first scan finished (for tests and the CLI)."""
        self.start()
        return self._scanned.wait(timeout)

    def _rescan_forever(self) -> None:
        while not self._stop.is_set():
            self.rescan()
            self._stop.wait(self.rescan_seconds)

    def rescan(self) -> None:
        """Discover runs now; forget profiles whose file changed or vanished."""
        with self._scan_lock:
            try:
                if self._storage is None:
                    self._storage = Storage(self.logdir)
                skipped: list[Skipped] = []
                tree = self._storage if self.only_file is None else OneFile(self._storage, self.only_file)
                runs = discover_runs(tree, self._sniff_cache, skipped)
                self.scan_error = ""
                self.scan_skipped = skipped
            except Exception as exc:  # a broken logdir must not kill the thread
                logger.warning("scanning %s failed: %s", self.logdir, exc)
                self.scan_error = f"cannot scan the log directory: {os_reason(exc)}"
                self._scanned.set()
                return
            current = {f.path for run in runs.values() for f in (*run.files(), *run.snapshot_files())}
            with self._lock:
                self._runs = runs
                for path in list(self._files):
                    if path not in current:
                        self._forget(path)
            for path in current:
                self._refresh(path)
            self._scanned.set()

    # --- queries --------------------------------------------------------------------------

    def has_runs(self) -> bool:
        """Cheap: whether any run is known (starts the scanner on first call)."""
        self.start()
        return bool(self._runs)

    def runs(self) -> list[dict[str, Any]]:
        """Run summaries: name, workers, span count, load status and errors."""
        self.wait_for_scan(_FIRST_SCAN_WAIT_SECONDS)
        with self._lock:
            out = []
            for name, run in self._runs.items():
                files = run.files()
                states = [self._files.get(f.path) or _FileState() for f in files]
                out.append({
                    "name": name,
                    "workers": list(run.workers),
                    "spans": run.span_count(),
                    "files": len(files),
                    # a file that failed is not loaded (it is in "errors"): "1/1 loaded" beside
                    # a trace's error said the opposite of the error
                    "loaded": sum(s.status == "ready" for s in states),
                    "loading": any(s.status == "loading" for s in states),
                    "errors": [
                        {"worker": f.worker, "span": f.span, "path": printable(f.path), "reason": s.error}
                        for f, s in zip(files, states) if s.status == "error"
                    ],
                    "snapshots": [self._snapshot_listing(f) for f in run.snapshot_files()],
                })
            return out

    @property
    def scan_errors(self) -> list[dict[str, str]]:
        """What the last scan did not look at, each {path, reason} (`views.listing.Listing`)."""
        return [asdict(s) for s in self.scan_skipped]

    def run_spans(self, run: str) -> dict[str, list[dict[str, Any]]]:
        """{worker: [{span, stamp, file}, ...]} of `run` (`views.listing.Listing`)."""
        return self.run_files(run).listed_spans()

    def _snapshot_listing(self, snapshot_file: SpanFile) -> dict[str, Any]:
        state = self._files.get(snapshot_file.path) or _FileState()
        return {"name": snapshot_file.worker, "span": snapshot_file.span, "path": printable(snapshot_file.path),
                "status": "ready" if snapshot_file.path in self.budget.snapshots else state.status,
                "reason": state.error if state.status == "error" else ""}

    def snapshot_file(self, run: str, name: str, span: int = 1) -> SpanFile:
        """The memory snapshot file `name` (as listed with the run) of `run`."""
        return self.run_files(run).snapshot_file(name, span)

    def snapshot(self, run: str, name: str, span: int = 1) -> "MemorySnapshot | Loading":
        """The `MemorySnapshot`, or a `Loading` while it is read; raises `NotFoundError`/`TraceError`."""
        path = self.snapshot_file(run, name, span).path
        self._refresh(path)
        return self._held_or_loading(path, self._snapshots)

    def run_files(self, run: str) -> RunFiles:
        # Right after start-up the first scan may still run: "no such run" must mean it.
        self.wait_for_scan(_FIRST_SCAN_WAIT_SECONDS)
        with self._lock:
            if run not in self._runs:
                raise NotFoundError(f"no run named {run!r}")
            return self._runs[run]

    def span_file(self, run: str, worker: str, span: int) -> SpanFile:
        return self.run_files(run).trace_file(worker, span)

    def run_directory(self, run: str, worker: str, span: int) -> str | None:
        """The local directory holding one span's trace file; None for a remote log directory."""
        path = self.span_file(run, worker, span).path
        assert self._storage is not None  # span_file found the run: the log directory was scanned
        return None if self._storage.remote else os.path.dirname(self._storage.resolve(path))

    def open_file(self, run: str, worker: str, span: int) -> tuple[str, IO[bytes], bool]:
        """(relative path, binary file object as stored, whether it is gzip) of one span's
        trace file, positioned at its start; the caller closes it. Errors name the file by its
        path relative to the log directory, as every reply does."""
        path = self.span_file(run, worker, span).path
        assert self._storage is not None  # span_file found the run: the log directory was scanned
        try:
            stored = self._storage.open_stored(path)
        except TraceError as exc:
            raise TraceError(path, exc.reason) from None
        try:
            head = stored.read(SNIFF_BYTES)
            is_gzip = head.startswith(GZIP_MAGIC)
            # Discovery follows symlinks, and a `*.pt.trace.json` name proves nothing: a link
            # to /etc/passwd named like a trace was streamed out verbatim. Only what looks like
            # a Kineto trace (judged on the handle that is sent) is handed out as one.
            if not looks_like_trace(inflate_head(head, SNIFF_BYTES)):
                raise TraceError(path, "not a Kineto trace: the file is not served")
            # A look at the head is not enough for a file from outside the log directory: a
            # `{"traceEvents": [SECRET...` file passed it. That one is served only once the
            # same handle parsed as a trace, as a load would parse it.
            if self._storage.leaves_root(path, stored):
                self._check_parses(path, stored, is_gzip)
            stored.seek(0)
        except BaseException as exc:
            stored.close()
            if isinstance(exc, (OSError, ValueError, EOFError, zlib.error)):
                raise TraceError(path, f"cannot read the file ({os_reason(exc)})") from None
            raise
        return path, stored, is_gzip

    def _json_limit(self) -> int:
        return json_limit(self.max_parse_bytes)

    def _check_parses(self, path: str, stored: IO[bytes], is_gzip: bool) -> None:
        """Raise `TraceError` unless the whole of `stored` (from its start) parses as a trace
        within the memory budget."""
        from ..python_api.profile import check_trace

        limit = self._json_limit()
        stored.seek(0)
        # The inflated bytes are counted as they come: a gzip bomb stops at the limit.
        source = gzip.GzipFile(fileobj=stored) if is_gzip else stored
        data = source.read(limit + 1)
        if len(data) > limit:
            raise TraceError(path, f"not served: the file is outside the log directory and larger than the "
                                   f"{limit >> 20} MiB it can be checked within (--profiler_max_memory_mb)")
        try:
            check_trace(data, path)
        except TraceError as exc:
            raise TraceError(path, f"not served: the file is outside the log directory and not a trace: {exc.reason}") from None

    def profile(self, run: str, worker: str, span: int) -> "Profile | Loading":
        """The `Profile`, or a `Loading` while it is parsed; raises `NotFoundError`/`TraceError`."""
        path = self.span_file(run, worker, span).path
        self._refresh(path)
        return self._held_or_loading(path, self._traces)

    def _held_or_loading(self, path: str, kind: _Kind[Held]) -> "Held | Loading":
        """What the store holds of a file of `kind` whose size and mtime were just checked
        (`_refresh`), or a `Loading` while it loads, for a user: a prefetch of another file
        gives way to its load, one of this file becomes its."""
        with self._lock:
            self._prefetching.discard(path)
            self._cancelled.discard(path)
            held = kind.shelf.use(path)
            if held is not None:
                return held
            state = self._files.setdefault(path, _FileState())
            if state.status == "error" and not self._retry_due(state):
                raise TraceError(path, state.error)
            if state.status != "loading":
                self._cancelled.update(self._prefetching)
                self._submit(path, state, kind)
            return Loading(path, state.started, state.stage, state.fraction)

    def prefetch_first(self) -> bool:
        """Load the profile the page opens first (the first run listed, its first worker,
        span 1) and compute what the page asks of it first (its views, its Overview),
        indexing its timeline as every load does, so that the first click only waits for what
        remains. For a server that just started, in the background; blocks until done and
        returns whether that profile is ready.

        Lowest priority: it starts only where its estimated peak fits beside what the store
        holds (it never drops anything to make room), and a user's load of any other file
        cancels it (the loader threads and the memory are theirs)."""
        self.wait_for_scan(_FIRST_SCAN_WAIT_SECONDS)
        with self._lock:
            run = next(iter(self._runs), "")
            workers = list(self._runs[run].workers) if run else []
        if not workers or self._storage is None:  # no run, or the first is of memory snapshots alone
            return False
        path = self.span_file(run, workers[0], 1).path
        self._refresh(path)
        try:
            json_bytes, head = self._storage.json_sample(path)
        except TraceError:  # a user's load reports why
            return False
        need = estimate_parse_bytes(json_bytes, events_in(json_bytes, head))
        with self._lock:
            if path not in self.budget.profiles:
                if self.held_bytes() + need > self.max_memory_bytes:
                    logger.info("not prefetching %s: its load needs about %d MiB, more than the memory budget has free",
                                path, need >> 20)
                    return False
                state = self._files.setdefault(path, _FileState())
                if state.status == "error":
                    return False
                if state.status != "loading":
                    self._prefetching.add(path)
                    self._submit(path, state, self._traces)
            future = self._files[path].future
        if future is not None:
            futures.wait([future])
        with self._lock:
            profile = self.budget.profiles.get(path)
        if profile is None:  # cancelled or failed
            return False
        profile.available_views()  # what the page asks first: the tabs, then the Overview
        profile.overview()
        self.remeasure([profile])
        try:
            self._indexer.submit(int).result()  # the timeline index `_load` queued is built by then
        except RuntimeError:  # the store stopped meanwhile
            return False
        return True

    def span(self, run: str, span: int) -> StoreSpan:
        """One span of every worker of `run` that has it, as the views over many ranks read it
        (`runs`); raises `NotFoundError` when no worker has it."""
        return StoreSpan(self, run, span)

    def summary(self, run: str, worker: str, span: int, key: str,
                build: Callable[["Profile"], Summary], declared: "Persisted | None" = None) -> Summary | Loading:
        """`build(profile)` of one span's profile, computed once per file version and kept
        after the profile itself is dropped from memory; a `Loading` while the profile loads.

        A view over many files (the distributed view of a 128-rank run) asks each file for a
        small summary: the profiles need not all fit in memory at once. A summary asked for
        while its profile loads is built on the loader thread right after the load, before
        the memory budget can drop that profile again.

        With `declared` (the `schema.Persisted` declaration of what `build` returns), a
        summary of this very file stored in the disk cache (as `python -m tb_plugin
        preprocess` writes them) is served first: nothing is parsed, and no model is loaded.
        A damaged or stale one is ignored; one built here is written there (`summaries`)."""
        path = self.span_file(run, worker, span).path
        self._refresh(path)
        held = self.summaries.held(path, key)
        if held is not None:
            return held
        with self._lock:
            self._wanted.setdefault(path, {})[key] = (build, declared)
        assert self._storage is not None  # span_file found the run: the log directory was scanned
        stored = self.summaries.stored(self._storage, path, key, declared) if declared is not None else None
        if stored is not None:
            with self._lock:
                self._wanted.get(path, {}).pop(key, None)
            return self.summaries.keep(path, key, stored)
        result = self._held_or_loading(path, self._traces)
        if isinstance(result, Loading):
            return result
        built = self._build_summaries(path, result)
        if key in built:
            return built[key]
        held = self.summaries.held(path, key)
        if held is not None:
            return held
        return build(result)  # built meanwhile by another thread and dropped since: once more

    def prefetch_summaries(self, run: str, workers: Sequence[str], span: int, key: str, declared: "Persisted") -> None:
        """Look up the stored summaries `key` (declared by `declared`) of these workers' span in
        the disk cache all at once (`SummaryStore.prefetch`), so that `summary` then finds
        them in memory; they count in the budget, profiles make room for them."""
        if self._storage is None:
            return
        paths = [self.span_file(run, worker, span).path for worker in workers]
        self.summaries.prefetch(self._storage, self._storage.display(run), paths, span, key, declared, self._refresh)
        with self._lock:
            self.budget.enforce(keep=0)

    def profile_blocking(self, run: str, worker: str, span: int, timeout: float | None = None) -> "Profile":
        """Wait for the profile (the CLI, tests and notebooks); raises like `profile`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            result = self.profile(run, worker, span)
            if not isinstance(result, Loading):
                return result
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"{result.path} is still loading")
            with self._lock:
                future = self._files[result.path].future
            assert future is not None  # a profile that is loading has its load submitted
            futures.wait([future], timeout=remaining)

    # --- internals ------------------------------------------------------------------------

    def _forget(self, path: str) -> None:
        self._files.pop(path, None)
        self.budget.forget(path)
        self.summaries.forget(path)
        self._wanted.pop(path, None)

    def _build_summaries(self, path: str, profile: "Profile") -> dict[str, Any]:
        """Build the summaries asked of `path` (`summary`) from its `profile`; kept while
        `profile` is still the one of the file as it is, and written to the disk cache (off the
        request path) where it was looked for there and missing, so that the next start serves
        them without loading the model. Returns {key: summary} built."""
        with self._lock:
            wanted = self._wanted.pop(path, {})
        built = {key: build(profile) for key, (build, _) in wanted.items()}
        with self._lock:
            if not built or self.budget.profiles.get(path) is not profile:
                return built
            built = {key: self.summaries.keep(path, key, value) for key, value in built.items()}
            identity, missing = self.summaries.unstored(
                path, {key: (built[key], declared) for key, (_, declared) in wanted.items() if declared is not None})
        if missing and identity is not None and self._storage is not None:
            self._indexer.submit(self.summaries.persist, self._storage, path, identity, missing)
        return built

    def _refresh(self, path: str) -> None:
        """Drop what is known about `path` when its size or mtime changed."""
        if self._storage is None:
            return
        try:
            stat = self._storage.stat(path)
        except TraceError:
            return
        with self._lock:
            state = self._files.get(path)
            if state is None:
                self._files[path] = _FileState(stat=stat)
            elif state.stat != stat and state.status != "loading":
                self.budget.forget(path)
                self.summaries.forget(path)
                self._files[path] = _FileState(stat=stat)

    def _retry_due(self, state: _FileState) -> bool:
        """A failure seen while the file was fresh (maybe half-written), or one of the file
        system (no permission, a network error), is retried later."""
        settling = state.stat is not None and state.failed_at - state.stat.mtime < _SETTLING_SECONDS
        return (settling or state.transient) and time.time() - state.failed_at >= self.retry_seconds

    def _submit(self, path: str, state: _FileState, kind: _Kind[Held]) -> None:
        state.status = "loading"
        state.started = time.time()
        state.stage, state.fraction = STAGE_QUEUED, None
        state.error = ""
        state.future = self._executor.submit(self._load, path, kind)

    def _progress(self, path: str, stage: str, fraction: float | None) -> None:
        """Called from the loader thread as a load moves on; read by `profile`."""
        with self._lock:
            state = self._files.get(path)
            if state is not None and state.status == "loading":
                state.stage, state.fraction = stage, fraction

    # --- memory budget (`accounting.MemoryBudget` counts; the store says which load) -------

    @property
    def max_memory_bytes(self) -> int:
        return self.budget.max_memory_bytes

    @max_memory_bytes.setter
    def max_memory_bytes(self, value: int) -> None:
        self.budget.max_memory_bytes = value

    @property
    def max_profiles(self) -> int:
        return self.budget.max_profiles

    @max_profiles.setter
    def max_profiles(self, value: int) -> None:
        self.budget.max_profiles = value

    def held_bytes(self) -> int:
        """Memory the store accounts for (`MemoryBudget.held_bytes`)."""
        return self.budget.held_bytes()

    def reply_reservation(self) -> ReplyReservation:
        """A `ReplyReservation` for one request's reply (`MemoryBudget.reply_reservation`)."""
        return self.budget.reply_reservation()

    def remeasure(self, profiles: Sequence[object]) -> None:
        """Count again what `profiles` hold (`MemoryBudget.remeasure`)."""
        self.budget.remeasure(profiles)

    def _evicted(self, path: str) -> None:
        """The budget dropped what was loaded of `path`: it is loaded again when asked for."""
        if path in self._files:
            self._files[path].status = "new"

    def _reserve(self, path: str, need: int) -> None:
        """Wait until `need` bytes fit beside the other loads in flight, then hold them for the
        load of `path`, unless it is to stop (`MemoryBudget.reserve`)."""
        self.budget.reserve(path, need, partial(self._progress, path, STAGE_QUEUED, None),
                            partial(self._check_going, path))

    def _check_going(self, path: str) -> None:
        if self._stop.is_set():
            raise _Cancelled(path, "the server is stopping")
        if path in self._cancelled:
            raise _Cancelled(path, "a prefetch gave way to a user's load")

    def _admit(self, path: str, need: int, json_bytes: int) -> None:
        """Once the events are counted (and the load fits the budget): its reservation is
        their estimate `need` (for its `json_bytes` of JSON)."""
        self._hold(path, need)

    def _hold(self, path: str, need: int) -> None:
        """Hold `need` bytes for the load of `path` from now on, unless it is to stop
        (`MemoryBudget.hold`)."""
        self.budget.hold(path, need, partial(self._check_going, path))

    def _checked_progress(self, path: str, stage: str, fraction: float | None) -> None:
        self._check_going(path)
        self._progress(path, stage, fraction)

    def _snapshot_or_cached(self, path: str) -> "tuple[MemorySnapshot, dict | None]":
        """(the memory snapshot of `path`, from the disk cache or read, and the identity its
        cache entry is of, or None), within the memory budget."""
        from ..python_api.snapshots import (PEAK_BYTES_PER_SNAPSHOT_BYTE, snapshot_from_bytes, snapshot_limit,
                                            snapshot_through_cache)

        storage = self._storage
        assert storage is not None  # a load is of a file the scan found
        display = storage.display(path)
        self._progress(path, STAGE_READING, None)

        def decode() -> "MemorySnapshot":
            limit = snapshot_limit(self.max_parse_bytes)
            size, _ = storage.json_sample(path, 0)  # the JSON's size; no head wanted
            if size > limit:
                raise TraceError(display, f"too large to load: reading its {size >> 20} MiB needs about "
                                          f"{size * PEAK_BYTES_PER_SNAPSHOT_BYTE >> 20} MiB, more than the "
                                          f"{self.max_parse_bytes >> 20} MiB memory budget (--profiler_max_memory_mb)")
            reading = size * PEAK_BYTES_PER_SNAPSHOT_BYTE
            self._reserve(path, reading)
            stored = storage.read_trace(path, partial(self._checked_progress, path, STAGE_READING), limit=limit)
            # Once its entries are counted (shared references included), what its tables take.
            return snapshot_from_bytes(stored, display, self.max_parse_bytes,
                                       admit=lambda tables: self._hold(path, max(reading, tables)))

        if self.cache and self.cache.enabled:
            return snapshot_through_cache(self.cache, storage, path, decode)
        return decode(), None

    def _trace_or_cached(self, path: str) -> "tuple[Profile, dict | None]":
        """(the trace file's profile, from the disk cache or parsed, and the identity of the file
        it is of, or None where unknown: no cache, or the file changed while it was parsed)."""
        # Imported here, on the loader thread: numpy, pandas, polars and the views cost
        # TensorBoard ~0.5 s and ~60 MB at start-up, also where the plugin is never opened.
        from ..python_api.profile import load_through_cache

        assert self._storage is not None  # a load is of a file the scan found
        self._progress(path, STAGE_READING, None)
        return load_through_cache(self._storage, path, self.cache, self.max_parse_bytes,
                                  partial(self._checked_progress, path), reserve=partial(self._reserve, path),
                                  admit=partial(self._admit, path))

    def _failed(self, path: str, reason: str, transient: bool = False) -> None:
        with self._lock:
            state = self._files.setdefault(path, _FileState())
            state.status, state.error, state.failed_at = "error", reason, time.time()
            state.transient = transient

    def _load(self, path: str, kind: _Kind[Held]) -> None:
        started = time.perf_counter()
        assert self._storage is not None  # a load is of a file the scan found
        try:
            stat = self._storage.stat(path)
            held, identity = kind.read(path)
        except _Cancelled as exc:
            logger.info("load of %s cancelled: %s", path, exc.reason)
            with self._lock:
                if path in self._files:
                    self._files[path].status = "new"
            return
        except TraceError as exc:
            self._failed(path, exc.reason, transient=isinstance(exc, FileAccessError))
            logger.info("could not load %s: %s", path, exc.reason)
            return
        except Exception as exc:  # never let one file take a loader thread down
            logger.exception("unexpected failure loading %s", path)
            self._failed(path, f"internal error: {type(exc).__name__}: {exc}")
            return
        finally:
            self.budget.unreserve(path)
            with self._lock:
                self._prefetching.discard(path)
                self._cancelled.discard(path)
        size = profile_bytes(held)
        with self._lock:
            state = self._files.setdefault(path, _FileState())
            state.status, state.stat = "ready", stat
            # Summaries built from this profile are written to the disk cache under it.
            self.summaries.loaded(path, identity)
            state.load_seconds = time.perf_counter() - started
            # Least recently used go first; the profile just loaded always stays.
            kind.shelf.keep(path, held, size)
            # The timeline index is built next, off the request path, so the trace view's
            # first paint does not wait for it; what it holds is then counted.
            self._indexer.submit(self._build_timeline, kind, held)
        if kind.summarise is None:
            return
        try:  # summaries asked for while it loaded, before the budget can drop it again
            kind.summarise(path, held)
        except Exception:  # the request that asked builds it again and reports the failure
            logger.exception("summarising %s failed", path)

    def _build_timeline(self, kind: _Kind[Held], held: Held) -> None:
        try:
            kind.index(held)
        except Exception:  # the request that asks for it reports the failure
            logger.exception("indexing the timeline of %s failed", held.source)
            return
        self.remeasure([held])
        give_back_memory()  # what the parse and the index built held at their peak
