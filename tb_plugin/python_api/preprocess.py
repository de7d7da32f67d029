"""`python -m tb_plugin preprocess LOGDIR --dask ADDRESS|local`: parse every trace file of a
log directory as Dask tasks, ahead of TensorBoard.

Parsing is the cost that grows with a job: one task per trace file (largest first, so the
last task to finish is a small one) parses it on a `dask.distributed` worker and writes into
the disk cache, in the format TensorBoard reads (`tb_plugin.store.cache_format`), the parsed model and
the per-file summaries of `FILE_SUMMARIES` (what the job and distributed views combine).
Once every file is done, one task per span of a run of several workers and per summary
gathers that span's summaries into one index entry: TensorBoard reads one entry per view of
a 1,024-rank job instead of 1,024. TensorBoard started with the same cache (`--profiler_cache_dir`) then answers those views
from the summaries without parsing any trace, and loads one rank's model from the cache only
when a per-rank view asks for it.

Entries are keyed by the trace file's path as TensorBoard names it (the log directory's
absolute path or URL joined with the file's relative path) and carry its identity (size,
mtime, inode/ctime or ETag, a hash of its head and tail): the workers and the TensorBoard
host must see the traces under the same path or URL (a shared file system, or `s3://...`),
and the cache directory may be an fsspec URL shared by all of them.

A file that fails (not a trace, truncated, unreadable, a worker that died) is reported with
its reason and does not stop the others. A file whose model and summaries the cache already
holds for its current identity is skipped unless `force` is set.
"""

import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from ..store.budget import DEFAULT_MAX_MEMORY_MB
from ..store.cache import ModelCache, default_cache_dir
from ..store.discovery import Skipped, discover_runs, printable
from ..errors import TraceError
from ..store.storage import Storage, is_url

# The polars reader a parse uses is multi-threaded: one thread per worker process, so that N
# single-threaded Dask workers use N cores, not N x cores.
WORKER_ENV = {"POLARS_MAX_THREADS": "1"}
# A worker's housekeeping threads wake many times a second by default (the statistical
# profiler every 10 ms, the event loop's health tick every 20 ms, the memory monitor every
# 100 ms, the system monitor every 500 ms) and each wake takes the GIL from the one thread
# that parses: measured on 1 to 8 workers, a task in a worker then cost 15-25% more time than
# in a plain process. A local cluster exists only to parse, so its workers wake rarely
# (benchmarks/README.md); a cluster at an ADDRESS keeps its own configuration.
LOCAL_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}
# How long to try reaching a scheduler that does not answer.
CONNECT_TIMEOUT = "30s"
_INSTALL_HINT = "pip install 'tb-plugin-pytorch-profiler[dask]' (or pip install 'dask[distributed]')"
# One cache object per cache directory in each worker process: a new one cleans the directory.
_CACHES: dict[str, ModelCache] = {}


class PreprocessError(Exception):
    """Nothing could be preprocessed: no dask, no trace files, no usable cache, no cluster."""


@dataclass
class FileResult:
    """What one task did with one trace file."""

    path: str  # relative to the log directory, printable
    stored_bytes: int  # the file as stored (gzip or not)
    json_bytes: int = 0  # the JSON parsed (0 when skipped or failed before reading)
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # of the worker process meanwhile (its tasks run one at a time)
    up_to_date: bool = False  # the cache held its model and summaries already
    error: str = ""


def _cache(cache_dir: str) -> ModelCache:
    if cache_dir not in _CACHES:
        # Never trimmed here: a trim lists the whole cache after each write, and a job's cache
        # is as large as the job. TensorBoard's own cache bound applies to what it writes.
        _CACHES[cache_dir] = ModelCache(cache_dir, max_bytes=None)
    return _CACHES[cache_dir]


def entry_keys(cache: ModelCache, source: str) -> dict[str, tuple[str, int | str]]:
    """{"model" or a `FILE_SUMMARIES` name: (cache key, the entry's format)} of the trace file
    `source`."""
    from ..store.cache_format import CACHE_FORMAT, summary_format
    from .runs import FILE_SUMMARIES

    return {"model": (cache.key(source), CACHE_FORMAT),
            **{name: (cache.summary_key(source, declared), summary_format(declared))
               for name, (declared, _) in FILE_SUMMARIES.items()}}


def preprocess_file(logdir: str, rel: str, cache_dir: str, force: bool = False,
                    max_memory_mb: int = DEFAULT_MAX_MEMORY_MB) -> dict[str, Any]:
    """Parse the trace file `rel` of `logdir` and store its model and summaries in the cache
    `cache_dir` (the body of one Dask task; also callable in-process). A trace whose JSON
    inflates past what a parse may take within `max_memory_mb` (as TensorBoard's
    --profiler_max_memory_mb) fails as it would in TensorBoard, once that much is inflated.
    Returns a `FileResult` as a dict; failures are reported in it, never raised."""
    from .profile import read_profile
    from .runs import FILE_SUMMARIES

    started, cpu_started = time.perf_counter(), time.process_time()
    storage = Storage(logdir)
    result = FileResult(printable(rel), 0)
    try:
        result.stored_bytes = storage.stat(rel).size
        cache = _cache(cache_dir)
        if not cache.enabled:
            raise TraceError(cache_dir, "the cache directory cannot be used (see the worker's log)")
        source = storage.display(rel)
        identity = storage.identity(rel)
        keys = entry_keys(cache, source)
        if not force and all(cache.manifest(key, identity, entry_format) is not None
                             for key, entry_format in keys.values()):
            result.up_to_date = True
        else:
            profile = read_profile(storage, rel, max_memory_mb << 20,
                                   admit=lambda need, json_bytes: setattr(result, "json_bytes", json_bytes))
            summaries = {name: build(profile) for name, (_, build) in FILE_SUMMARIES.items()}

            def write() -> bool:
                written = cache.put(keys["model"][0], identity, profile.model, source)
                for name, (declared, _) in FILE_SUMMARIES.items():
                    written = cache.put_summary(keys[name][0], identity, summaries[name], declared, source) and written
                return written

            # Once more before the file is reported: another process sharing the cache (its
            # housekeeping, its write of the same entry) can make one write fail.
            if not (write() or write()):
                raise TraceError(source, "its cache entries could not be written, twice (see the worker's log)")
            if storage.identity(rel) != identity:  # the entries carry the old identity: never served
                raise TraceError(source, "the file changed while it was parsed")
    except TraceError as exc:
        result.error = exc.reason
    except Exception as exc:  # one file's failure never stops the others
        result.error = f"internal error: {type(exc).__name__}: {exc}"
    result.seconds = time.perf_counter() - started
    result.cpu_seconds = time.process_time() - cpu_started
    return asdict(result)


def write_run_index(logdir: str, run: str, span: int, rels: list[str], name: str, cache_dir: str) -> tuple[int, str]:
    """Gather the stored summaries `name` (a `FILE_SUMMARIES` name) of the trace files `rels`
    (one span of every worker of `run`) into the run's index entry (`put_summary_index`), so
    that TensorBoard reads one entry for the whole job (the body of one Dask task, run once
    every file's task is done). Returns (members indexed, error or "")."""
    from .runs import FILE_SUMMARIES

    declared = FILE_SUMMARIES[name][0]
    storage = Storage(logdir)
    try:
        cache = _cache(cache_dir)
        members = []
        for rel in rels:
            source = storage.display(rel)
            try:
                identity = storage.identity(rel)
            except TraceError:  # gone or unreadable since: TensorBoard reports it
                continue
            summary = cache.get_summary(cache.summary_key(source, declared), identity, declared)
            if summary is not None:  # a file that failed has none: TensorBoard reports it
                members.append((source, identity, summary))
        if len(members) < 2:
            return len(members), ""
        if not cache.put_summary_index(storage.display(run), span, declared, members):
            return 0, "the index could not be written (see the worker's log)"
        return len(members), ""
    except Exception as exc:  # an index is an optimisation: its failure never fails the run
        return 0, f"internal error: {type(exc).__name__}: {exc}"


@dataclass
class TraceFiles:
    """What `trace_files` found: the log directory as the workers must see it, (relative path,
    stored size) of every trace file, largest first, the (run, span, [relative path]) of every
    span that several workers have, and what was skipped."""

    root: str
    files: list[tuple[str, int]]
    spans: list[tuple[str, int, list[str]]]
    skipped: list[Skipped]


def trace_files(logdir: str) -> TraceFiles:
    """The `TraceFiles` of `logdir`. Raises PreprocessError when there is none."""
    storage = Storage(logdir)
    skipped: list[Skipped] = []
    try:
        runs = discover_runs(storage, skipped=skipped)
    except (OSError, ValueError, TraceError) as exc:
        raise PreprocessError(f"cannot scan {logdir}: {exc}") from None
    files = []
    for run in runs.values():
        for span_file in run.files():
            try:
                files.append((span_file.path, storage.stat(span_file.path).size))
            except TraceError as exc:
                skipped.append(Skipped(printable(span_file.path), exc.reason))
    if not files:
        raise PreprocessError(f"no trace files (*.pt.trace.json[.gz]) under {storage.display(None)}")
    files.sort(key=lambda f: -f[1])
    spans = [(name, span, [spans[span - 1].path for spans in run.workers.values() if len(spans) >= span])
             for name, run in runs.items() for span in range(1, run.span_count() + 1)]
    return TraceFiles(storage.display(None), files, [s for s in spans if len(s[2]) >= 2], skipped)


def _import_parser() -> None:
    """Run on every worker before the clock starts: the parser's imports (numpy, pandas,
    polars, the views) cost each new worker process about a second, once."""
    import tb_plugin.python_api.profile  # noqa: F401


def _client(address: str, workers: int | None) -> tuple[Any, Any]:
    """A dask.distributed Client: of a new LocalCluster of `workers` processes on 127.0.0.1
    for "local", else of the scheduler at `address`. Returns (client, cluster or None)."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise PreprocessError(f"preprocess runs on dask.distributed, which is not installed: {_INSTALL_HINT}") from None
    if address == "local":
        import dask

        # No dashboard (nobody asked for one), and the scheduler's HTTP server, which it starts
        # anyway for its health routes, on a free loopback port: on Dask's default port 8787 it
        # warned "Port 8787 is already in use" whenever another cluster or Jupyter held it.
        with dask.config.set(LOCAL_CLUSTER_CONFIG):  # the nannies hand it to their workers
            cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=None, env=WORKER_ENV,
                                   scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
        return Client(cluster), cluster
    try:
        return Client(address, timeout=CONNECT_TIMEOUT), None
    except (OSError, TimeoutError, ValueError) as exc:
        raise PreprocessError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None


def _mb(n: float) -> float:
    return n / 1e6


def _write_run_indexes(client: Any, found: TraceFiles, cache_dir: str, out: TextIO) -> int:
    """One task per span of a run of several workers and per summary: its index entry.
    Returns how many indexes were written."""
    from dask.distributed import as_completed

    from .runs import FILE_SUMMARIES

    if not found.spans:
        return 0
    tasks = {client.submit(write_run_index, found.root, run, span, rels, name, cache_dir, pure=False,
                           key=f"tb-preprocess-index-{i}-{name}"): (run, span, name)
             for i, (run, span, rels) in enumerate(found.spans) for name in FILE_SUMMARIES}
    print(f"indexing the summaries of {len(found.spans)} runs' spans ({len(tasks)} index entries)", file=out, flush=True)
    written = 0
    for future in as_completed(tasks):
        run, span, name = tasks[future]
        try:
            members, error = future.result()
        except Exception as exc:  # the worker died: TensorBoard reads the files' own entries
            members, error = 0, f"the task failed: {type(exc).__name__}: {exc}"
        if error:
            print(f"index of {name} summaries of run {run} span {span} not written: {error}", file=out, flush=True)
        written += members >= 2 and not error
    return written


@dataclass
class Report:
    """What a preprocess run did: per-file results, wall time of the files' tasks (first
    submitted to last done), worker count, run indexes written and the wall time that took."""

    results: list[dict[str, Any]]
    seconds: float
    workers: int
    indexes: int = 0
    index_seconds: float = 0.0

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["error"]]

    @property
    def json_bytes(self) -> int:
        return sum(r["json_bytes"] for r in self.results)

    @property
    def cpu_seconds(self) -> float:
        return sum(r["cpu_seconds"] for r in self.results)

    def throughput(self) -> float:
        """MB of JSON parsed per second of wall time."""
        return _mb(self.json_bytes) / self.seconds if self.seconds > 0 else 0.0


def preprocess(logdir: str, address: str, cache_dir: str | None = None, workers: int | None = None, force: bool = False,
               out: TextIO | None = None, max_memory_mb: int = DEFAULT_MAX_MEMORY_MB) -> Report:
    """Preprocess every trace file of `logdir` on the Dask cluster `address` ("local" for a
    LocalCluster of `workers` processes) into the cache `cache_dir` (default: TensorBoard's
    default cache directory), each parse within `max_memory_mb` as TensorBoard's; progress
    and failures go to `out`. Returns a `Report`; raises PreprocessError when nothing can be done."""
    out = out or sys.stderr
    cache_dir = cache_dir or default_cache_dir()
    if not is_url(cache_dir):
        cache_dir = os.path.abspath(cache_dir.removeprefix("file://"))
    if not ModelCache(cache_dir, max_bytes=None).enabled:
        raise PreprocessError(f"cannot use the cache directory {cache_dir} (the warning above says why)")
    found = trace_files(logdir)
    root, files, skipped = found.root, found.files, found.skipped
    for item in skipped:
        print(f"skipped {item.path}: {item.reason}", file=out, flush=True)
    total_stored = sum(size for _, size in files)
    print(f"preprocessing {len(files)} trace files ({_mb(total_stored):.1f} MB stored) of {root} into {cache_dir}",
          file=out, flush=True)
    client, cluster = _client(address, workers)
    try:
        from dask.distributed import as_completed

        worker_count = len(client.scheduler_info(n_workers=-1)["workers"]) if cluster is None \
            else len(cluster.workers)
        client.run(_import_parser)
        started = time.perf_counter()
        tasks = {client.submit(preprocess_file, root, rel, cache_dir, force, max_memory_mb, pure=False,
                               key=f"tb-preprocess-{i}"):
                 (rel, size) for i, (rel, size) in enumerate(files)}
        results = []
        for future in as_completed(tasks):
            rel, size = tasks[future]
            try:
                result = future.result()
            except Exception as exc:  # the worker died or the task could not run
                result = asdict(FileResult(printable(rel), size, error=f"the task failed: {type(exc).__name__}: {exc}"))
            results.append(result)
            elapsed = time.perf_counter() - started
            parsed = sum(r["json_bytes"] for r in results)
            state = ("FAILED: " + result["error"]) if result["error"] else \
                ("up to date" if result["up_to_date"] else f"{_mb(result['json_bytes']):.1f} MB in {result['seconds']:.2f} s")
            print(f"[{len(results)}/{len(files)}] {result['path']}: {state} | {_mb(parsed) / elapsed:.1f} MB/s",
                  file=out, flush=True)
        parsed_at = time.perf_counter()
        indexed = _write_run_indexes(client, found, cache_dir, out)
        report = Report(results, parsed_at - started, worker_count, indexed, time.perf_counter() - parsed_at)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    done = [r for r in report.results if not r["error"]]
    print(f"done: {len(done)} of {len(files)} files ({sum(r['up_to_date'] for r in done)} already up to date), "
          f"{_mb(report.json_bytes):.1f} MB of JSON in {report.seconds:.1f} s, {report.throughput():.1f} MB/s "
          f"on {report.workers} workers; {report.indexes} run summary indexes in {report.index_seconds:.1f} s",
          file=out, flush=True)
    if report.failed:
        print(f"{len(report.failed)} files failed:", file=out)
        for r in report.failed:
            print(f"  {r['path']}: {r['error']}", file=out)
    return report
