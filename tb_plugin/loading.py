"""Background discovery and loading of the runs under one log directory.

`RunStore` owns the run index and the parsed profiles. Requests never parse on their own
thread: they ask for a (run, worker, span), get the `Profile` if it is ready, and otherwise
a `Loading` answer with progress while one background thread parses it. Failures are
remembered with the file's size and mtime, so a file that changes (a trace still being
written, a fixed file) is tried again and a broken one is not reparsed on every request.
"""

import gzip
import logging
import os
import threading
import time
import zlib
from collections import OrderedDict
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import IO, TYPE_CHECKING, Any, TypeVar

from .discovery import SNIFF_BYTES, RunFiles, Skipped, SpanFile, discover_runs, looks_like_trace, printable
from .errors import NotFoundError, TraceError
from .stages import STAGE_QUEUED, STAGE_READING
from .storage import GZIP_MAGIC, Storage, inflate_head

if TYPE_CHECKING:  # not at run time: the profile module loads numpy, pandas and polars
    from .cache import ModelCache
    from .profile import Profile

logger = logging.getLogger(__name__)
Summary = TypeVar("Summary")

# Peak memory of a parse above what the process held before, as a multiple of the JSON size:
# benchmarks/README.md measures ~2x for a local 227 MB trace (plain or gzip) and ~2.6x when the
# text stays whole (remote files); smaller traces add a few tens of MB of batches in flight.
PARSE_PEAK_FACTOR = 3
# How long a request may wait for the first scan of the log directory after start-up.
_FIRST_SCAN_WAIT_SECONDS = 30.0
# A file modified this recently when it failed to parse may still have been being written:
# that failure is not final, the file is parsed again after `retry_seconds`.
_SETTLING_SECONDS = 10.0


@dataclass
class Loading:
    """A profile that is being (or about to be) parsed: since when, at which stage (one of
    the `STAGE_*` of `profile`), and for `STAGE_PARSING` the fraction of the JSON read."""

    path: str
    since: float
    stage: str = STAGE_QUEUED
    fraction: float | None = None


@dataclass
class _FileState:
    stat: object = None
    status: str = "new"  # new | loading | ready | error
    error: str = ""
    failed_at: float = 0.0
    future: "futures.Future[None] | None" = None
    started: float = 0.0
    stage: str = STAGE_QUEUED
    fraction: float | None = None
    load_seconds: float = 0.0


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
        Memory budget: parsed profiles beyond it are dropped, least recently used first
        (reloaded from the disk cache when asked for again).
    max_parse_bytes : int or None
        A trace whose parse would need more memory than this is refused with a message
        (default: `max_memory_bytes`).
    cache : ModelCache or None
        On-disk cache of parsed models.
    retry_seconds : float
        How soon a trace that failed while it was still being written is parsed again.
    """

    def __init__(self, logdir: str, *, rescan_seconds: float = 30.0, max_profiles: int = 64,
                 max_memory_bytes: int = 4 << 30, max_parse_bytes: int | None = None,
                 cache: "ModelCache | None" = None, retry_seconds: float = 2.0) -> None:
        self.logdir = logdir
        self.rescan_seconds = rescan_seconds
        self.retry_seconds = retry_seconds
        self.max_profiles = max_profiles
        self.max_memory_bytes = max_memory_bytes
        self.max_parse_bytes = max_memory_bytes if max_parse_bytes is None else max_parse_bytes
        self.cache = cache
        self._sizes: dict[str, int] = {}
        self._storage: Storage | None = None
        self._runs: dict[str, RunFiles] = {}
        self._files: dict[str, _FileState] = {}
        self._profiles: OrderedDict[str, Profile] = OrderedDict()
        # Small results derived from one file's profile (`summary`), kept while the file is
        # unchanged even after its profile leaves memory, and those asked for but not built yet.
        self._summaries: dict[str, dict[str, Any]] = {}
        self._wanted: dict[str, dict[str, Callable[[Profile], Any]]] = {}
        self._sniff_cache: dict[Any, Any] = {}
        self._lock = threading.RLock()
        self._scan_lock = threading.Lock()
        self._scanned = threading.Event()
        self._started = False
        self._stop = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tb_plugin_load")
        self.scan_error = ""
        # What the last scan could not look at (`discovery.Skipped`): shown with the run list.
        self.scan_skipped: list[Skipped] = []

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
        self._executor.shutdown(wait=False, cancel_futures=True)

    def wait_for_scan(self, timeout: float | None = None) -> bool:
        """Block until the first scan finished (for tests and the CLI)."""
        self.start()
        return self._scanned.wait(timeout)

    def _rescan_forever(self):
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
                runs = discover_runs(self._storage, self._sniff_cache, skipped)
                self.scan_error = ""
                self.scan_skipped = skipped
            except Exception as exc:  # a broken logdir must not kill the thread
                logger.warning("scanning %s failed: %s", self.logdir, exc)
                self.scan_error = f"cannot scan the log directory: {exc}"
                self._scanned.set()
                return
            current = {f.path for run in runs.values() for f in run.files()}
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
                    "loaded": sum(s.status in ("ready", "error") for s in states),
                    "loading": any(s.status == "loading" for s in states),
                    "errors": [
                        {"worker": f.worker, "span": f.span, "path": printable(f.path), "reason": s.error}
                        for f, s in zip(files, states) if s.status == "error"
                    ],
                })
            return out

    def run_files(self, run: str) -> RunFiles:
        # Right after start-up the first scan may still run: "no such run" must mean it.
        self.wait_for_scan(_FIRST_SCAN_WAIT_SECONDS)
        with self._lock:
            if run not in self._runs:
                raise NotFoundError(f"no run named {run!r}")
            return self._runs[run]

    def span_file(self, run: str, worker: str, span: int) -> SpanFile:
        files = self.run_files(run)
        spans = files.workers.get(worker)
        if spans is None:
            raise NotFoundError(f"run {run!r} has no worker {worker!r}")
        if not 1 <= span <= len(spans):
            raise NotFoundError(f"worker {worker!r} of run {run!r} has spans 1..{len(spans)}, not {span}")
        return spans[span - 1]

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
                raise TraceError(path, f"cannot read the file ({exc})") from None
            raise
        return path, stored, is_gzip

    def _check_parses(self, path, stored, is_gzip):
        """Raise `TraceError` unless the whole of `stored` (from its start) parses as a trace
        within the memory budget."""
        from .trace.parse import parse_trace

        limit = self.max_parse_bytes // PARSE_PEAK_FACTOR
        stored.seek(0)
        # The inflated bytes are counted as they come: a gzip bomb stops at the limit.
        source = gzip.GzipFile(fileobj=stored) if is_gzip else stored
        data = source.read(limit + 1)
        if len(data) > limit:
            raise TraceError(path, f"not served: the file is outside the log directory and larger than the "
                                   f"{limit >> 20} MB it can be checked within (--profiler_max_memory_mb)")
        try:
            parse_trace(data, path)
        except TraceError as exc:
            raise TraceError(path, f"not served: the file is outside the log directory and not a trace: {exc.reason}") from None

    def profile(self, run: str, worker: str, span: int) -> "Profile | Loading":
        """The `Profile`, or a `Loading` while it is parsed; raises `NotFoundError`/`TraceError`."""
        path = self.span_file(run, worker, span).path
        self._refresh(path)
        return self._profile_of(path)

    def _profile_of(self, path):
        """`profile` of a file whose size and mtime were just checked (`_refresh`)."""
        with self._lock:
            if path in self._profiles:
                self._profiles.move_to_end(path)
                return self._profiles[path]
            state = self._files.setdefault(path, _FileState())
            if state.status == "error" and not self._retry_due(state):
                raise TraceError(path, state.error)
            if state.status != "loading":
                self._submit(path, state)
            return Loading(path, state.started, state.stage, state.fraction)

    def summary(self, run: str, worker: str, span: int, key: str,
                build: Callable[["Profile"], Summary]) -> Summary | Loading:
        """`build(profile)` of one span's profile, computed once per file version and kept
        after the profile itself is dropped from memory; a `Loading` while the profile loads.

        A view over many files (the distributed view of a 128-rank run) asks each file for a
        small summary: the profiles need not all fit in memory at once. A summary asked for
        while its profile loads is built on the loader thread right after the load, before
        the memory budget can drop that profile again."""
        path = self.span_file(run, worker, span).path
        self._refresh(path)
        with self._lock:
            done = self._summaries.get(path, {})
            if key in done:
                return done[key]
            self._wanted.setdefault(path, {})[key] = build
        result = self._profile_of(path)
        if isinstance(result, Loading):
            return result
        built = self._build_summaries(path, result)
        if key in built:
            return built[key]
        with self._lock:
            done = self._summaries.get(path, {})
            if key in done:
                return done[key]
        return build(result)  # built meanwhile by another thread and dropped since: once more

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

    def _forget(self, path):
        self._files.pop(path, None)
        self._profiles.pop(path, None)
        self._sizes.pop(path, None)
        self._summaries.pop(path, None)
        self._wanted.pop(path, None)

    def _build_summaries(self, path, profile):
        """Build the summaries asked of `path` (`summary`) from its `profile`; kept while
        `profile` is still the one of the file as it is. Returns {key: summary} built."""
        with self._lock:
            wanted = self._wanted.pop(path, {})
        built = {key: build(profile) for key, build in wanted.items()}
        with self._lock:
            if built and self._profiles.get(path) is profile:
                stored = self._summaries.setdefault(path, {})
                # The loader and a request may both have built one: the first stored stays, so
                # every caller gets the same object (answers are reused by identity).
                built = {key: stored.setdefault(key, value) for key, value in built.items()}
        return built

    def _refresh(self, path):
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
                self._profiles.pop(path, None)
                self._sizes.pop(path, None)
                self._summaries.pop(path, None)
                self._files[path] = _FileState(stat=stat)

    def _retry_due(self, state):
        """A failure seen while the file was fresh (maybe half-written) is retried later."""
        settling = state.stat is not None and state.failed_at - state.stat.mtime < _SETTLING_SECONDS
        return settling and time.time() - state.failed_at >= self.retry_seconds

    def _submit(self, path, state):
        state.status = "loading"
        state.started = time.time()
        state.stage, state.fraction = STAGE_QUEUED, None
        state.error = ""
        state.future = self._executor.submit(self._load, path)

    def _progress(self, path, stage, fraction):
        """Called from the loader thread as a load moves on; read by `profile`."""
        with self._lock:
            state = self._files.get(path)
            if state is not None and state.status == "loading":
                state.stage, state.fraction = stage, fraction

    def _parse_or_cached(self, path, stat):
        # Imported here, on the loader thread: numpy, pandas, polars and the views cost
        # TensorBoard ~0.5 s and ~60 MB at start-up, also where the plugin is never opened.
        from .profile import Profile, profile_from_bytes

        display = self._storage.display(path)
        self._progress(path, STAGE_READING, None)
        key = self.cache.key(display, stat.size, stat.mtime) if self.cache else None
        model = self.cache.get(key) if key else None
        if model is not None:
            return Profile(display, model)
        need = self._storage.json_size(path) * PARSE_PEAK_FACTOR
        if need > self.max_parse_bytes:
            raise TraceError(display, f"too large to load: parsing it needs about {need >> 20} MB, more than the "
                                      f"{self.max_parse_bytes >> 20} MB memory budget (--profiler_max_memory_mb)")
        stored = self._storage.read_trace(path, partial(self._progress, path, STAGE_READING))
        profile = profile_from_bytes(stored, display, partial(self._progress, path))
        if key:
            self.cache.put(key, profile.model)
        return profile

    def _load(self, path):
        started = time.perf_counter()
        try:
            stat = self._storage.stat(path)
            profile = self._parse_or_cached(path, stat)
        except TraceError as exc:
            with self._lock:
                state = self._files.setdefault(path, _FileState())
                state.status, state.error, state.failed_at = "error", exc.reason, time.time()
            logger.info("could not load %s: %s", path, exc.reason)
            return
        except Exception as exc:  # never let one file take the loader thread down
            logger.exception("unexpected failure loading %s", path)
            with self._lock:
                state = self._files.setdefault(path, _FileState())
                state.status, state.error = "error", f"internal error: {type(exc).__name__}: {exc}"
                state.failed_at = time.time()
            return
        size = profile.model.nbytes()
        with self._lock:
            state = self._files.setdefault(path, _FileState())
            state.status, state.stat = "ready", stat
            state.load_seconds = time.perf_counter() - started
            self._profiles[path] = profile
            self._sizes[path] = size
            self._profiles.move_to_end(path)
            # Least recently used go first; the profile just loaded always stays.
            # The timeline index is built next, off the request path, so the trace view's
            # first paint does not wait for it.
            self._executor.submit(profile.timeline)
            while len(self._profiles) > 1 and (len(self._profiles) > self.max_profiles
                                               or sum(self._sizes.values()) > self.max_memory_bytes):
                evicted, _ = self._profiles.popitem(last=False)
                self._sizes.pop(evicted, None)
                if evicted in self._files:
                    self._files[evicted].status = "new"
        try:  # summaries asked for while it loaded, before the budget can drop it again
            self._build_summaries(path, profile)
        except Exception:  # the request that asked builds it again and reports the failure
            logger.exception("summarising %s failed", path)
