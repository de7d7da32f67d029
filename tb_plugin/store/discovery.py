"""Run, worker and span naming from file names under a log directory.

A run is a directory that directly holds trace files. `tensorboard_trace_handler` names them
`<worker>[.<digits>].pt.trace.json[.gz]`: the worker is the prefix, and the digit groups of
one worker (ordered numerically) are its spans, shown as 1, 2, ... . Plain `*.json[.gz]`
files count too when their first bytes look like a Kineto trace.

CUDA memory snapshots (`torch.cuda.memory._dump_snapshot`) in the same directories are listed
with the run: `<name>[.<digits>].pickle[.gz]` files, and plain `*.json[.gz]` files whose first
bytes are a snapshot's (`snapshot.sniff`), named per rank as traces are (`rank0.pickle` is
`rank0`; digit groups of one name are its spans). A directory holding only snapshots is a run
too.

Names come from the file system as `str`; bytes that are not UTF-8 arrive as lone surrogates
(Python's `surrogateescape`), which no JSON encoder accepts. Run and worker names are shown
with such bytes escaped (`\\xff`, see `printable`) and requests use that escaped name; file
paths keep the real name, so the file opens.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import NotFoundError, TraceError
from ..snapshot.sniff import looks_like_json_snapshot

if TYPE_CHECKING:
    from .storage import FileStat

# Any character in a name, newlines included (DOTALL), to the very end (\Z, where `$` would
# also accept a name that ends in a newline after ".json").
_TRACE_FILE = re.compile(r"(?P<worker>.+?)(?:\.(?P<stamp>\d+))?\.pt\.trace\.json(?:\.gz)?\Z", re.S)
_SNAPSHOT_FILE = re.compile(r"(?P<worker>.+?)(?:\.(?P<stamp>\d+))?\.pickle(?:\.gz)?\Z", re.S)
_PLAIN_JSON = re.compile(r"(?P<worker>.+?)\.json(?:\.gz)?\Z", re.S)
# What the first kilobytes of a Kineto trace contain, in either top-level layout.
_TRACE_SIGNATURE = re.compile(rb'"traceEvents"|^\s*\[\s*\{[^\]]{0,2000}?"ph"\s*:', re.S)
# Kineto writes its header before "traceEvents": `schemaVersion` first, then device
# properties and the process groups of a distributed job, which alone can exceed any head
# read (a gloo rank of a 300-rank job lists every rank of each group: 16 KB). A head that
# starts like that header is a trace even when "traceEvents" is further on.
_KINETO_HEADER = re.compile(rb'^\s*\{\s*"schemaVersion"\s*:\s*\d+\s*,.*?"(?:deviceProperties|distributedInfo)"\s*:', re.S)
# How much of a plain .json file is read to decide whether it is a trace.
SNIFF_BYTES = 64 << 10
# TensorBoard's own profile plugin (TensorFlow, JAX) keeps `<host>.trace.json.gz` files, Chrome
# traces too, under `plugins/profile/<session>/`: those are its runs, not ours.
_OTHER_PROFILER_DIR = re.compile(r"(^|/)plugins/profile(/|$)")


def printable(name: str) -> str:
    """`name` as shown and as requests name it: bytes that are not UTF-8 (decoded with
    `surrogateescape`, e.g. `\\udcff`) become `\\xff`; valid names are unchanged."""
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte (Windows names)
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class Skipped:
    """A directory or file under the log directory that discovery did not scan, and why."""

    path: str  # relative to the log directory, printable
    reason: str



class Tree(Protocol):
    """What discovery reads of a `storage.Storage`, or of a view of one that walks less
    (`TopLevelOnly`: a run's own directory; `OneFile`: one file of it)."""

    def walk(self, on_skip: Callable[[str, str], object] | None = None) -> Iterator[tuple[str, list[str]]]: ...

    def stat(self, rel: str) -> FileStat: ...

    def read_head(self, rel: str, size: int = 4096) -> bytes: ...


class _TreeView:
    """A storage seen through a narrower walk: everything but `walk` is the storage's own."""

    def __init__(self, storage: Tree) -> None:
        self._storage = storage

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._storage, attribute)


class TopLevelOnly(_TreeView):
    """A storage view whose walk stops at the root: a run is one directory, not a tree."""

    def walk(self, on_skip: Callable[[str, str], object] | None = None) -> Iterator[tuple[str, list[str]]]:
        for rel_dir, names in self._storage.walk(on_skip):
            if rel_dir == ".":
                yield rel_dir, names
            return


class OneFile(_TreeView):
    """A storage view holding one file of its root alone (`name`), listing nothing: the run of
    a report of one remote trace file is that file, not its directory's other workers (a
    local file's report reads a link to it instead, `report._named_run`)."""

    def __init__(self, storage: Tree, name: str) -> None:
        super().__init__(storage)
        self._name = name

    def walk(self, on_skip: Callable[[str, str], object] | None = None) -> Iterator[tuple[str, list[str]]]:
        yield ".", [self._name]


@dataclass(frozen=True)
class SpanFile:
    """One trace file: the `span` (1-based) of `worker` in a run."""

    worker: str  # printable
    span: int
    stamp: int | None
    path: str  # relative to the log directory, as the file system names it


@dataclass
class RunFiles:
    """The trace files of one run, by worker, spans in order."""

    name: str  # printable
    workers: dict[str, list[SpanFile]] = field(default_factory=dict)  # worker -> [SpanFile, ...]
    snapshots: dict[str, list[SpanFile]] = field(default_factory=dict)  # memory snapshots: name -> [SpanFile, ...]

    def files(self) -> list[SpanFile]:
        return [f for spans in self.workers.values() for f in spans]

    def snapshot_files(self) -> list[SpanFile]:
        return [f for spans in self.snapshots.values() for f in spans]

    def listed_spans(self) -> dict[str, list[dict[str, Any]]]:
        """{worker: [{span, stamp, file}, ...]}: each worker's spans as /spans lists them, the
        file by its name alone (printable)."""
        return {worker: [{"span": f.span, "stamp": f.stamp, "file": printable(f.path.rsplit("/", 1)[-1])}
                         for f in spans] for worker, spans in self.workers.items()}

    def snapshot_traces(self, snapshot: str) -> list[tuple[str, int]]:
        """(worker, span) of every trace of the memory snapshot `snapshot`'s rank: the worker
        of the same name (rank0.pickle beside rank0's traces), else the run's only worker."""
        chosen = [snapshot] if snapshot in self.workers else list(self.workers) if len(self.workers) == 1 else []
        return [(worker, f.span) for worker in chosen for f in self.workers[worker]]

    def span_count(self) -> int:
        return max((len(s) for s in self.workers.values()), default=0)

    def trace_file(self, worker: str, span: int = 1) -> SpanFile:
        """The trace file of `worker`'s `span` (1-based); `NotFoundError` saying what the run has."""
        return _span_file(self.name, "worker", self.workers, worker, span)

    def snapshot_file(self, name: str, span: int = 1) -> SpanFile:
        """The `span`-th file of the memory snapshot `name`; `NotFoundError` saying what the run has."""
        return _span_file(self.name, "memory snapshot", self.snapshots, name, span)


def _span_file(run: str, kind: str, files: dict[str, list[SpanFile]], key: str, span: int) -> SpanFile:
    """One span of `files` ({worker or snapshot name: [SpanFile, ...]}): the one lookup the
    server's routes and the Python API share, so both say the same when it is missing."""
    spans = files.get(key)
    if spans is None:
        raise NotFoundError(f"run {run!r} has no {kind} {key!r}; it has {sorted(files)}")
    if not 1 <= span <= len(spans):
        raise NotFoundError(f"{kind} {key!r} of run {run!r} has spans 1..{len(spans)}, not {span}")
    return spans[span - 1]


def parse_trace_file_name(name: str) -> tuple[str, int | None] | None:
    """(worker, stamp or None) for a `tensorboard_trace_handler` file name, else None."""
    m = _TRACE_FILE.match(name)
    if not m:
        return None
    stamp = m.group("stamp")
    return m.group("worker"), int(stamp) if stamp is not None else None


def looks_like_trace(head: bytes) -> bool:
    """True when the first bytes of a JSON file look like a Kineto trace."""
    return bool(_TRACE_SIGNATURE.search(head) or _KINETO_HEADER.match(head))


def _by_worker(rel_dir: str, candidates: Iterable[tuple[str, int | None, str]]) -> dict[str, list[SpanFile]]:
    """{worker: [SpanFile, ...] in span order} of the (worker, stamp, file name) `candidates` in `rel_dir`."""
    stamps: dict[str, list[tuple[int | None, str]]] = {}
    for worker, stamp, file_name in candidates:
        stamps.setdefault(printable(worker), []).append((stamp, file_name))
    out = {}
    for worker in sorted(stamps):
        ordered = sorted(stamps[worker], key=lambda s: (s[0] is not None, s[0] or 0, s[1]))
        out[worker] = [
            SpanFile(worker, i + 1, stamp, file_name if rel_dir == "." else f"{rel_dir}/{file_name}")
            for i, (stamp, file_name) in enumerate(ordered)
        ]
    return out


def _group(run_name: str, rel_dir: str, candidates: Iterable[tuple[str, int | None, str]],
           snapshots: Iterable[tuple[str, int | None, str]] = ()) -> RunFiles:
    """A RunFiles named `run_name` of the trace and snapshot (worker, stamp, file name)
    `candidates` in `rel_dir`."""
    return RunFiles(run_name, _by_worker(rel_dir, candidates), _by_worker(rel_dir, snapshots))


def _plain_json_kind(head: bytes) -> str | None:
    """"trace", "snapshot" or None for the first bytes of a plain `.json` file."""
    if looks_like_trace(head):
        return "trace"
    return "snapshot" if looks_like_json_snapshot(head) else None


def discover_runs(storage: Tree, sniff_cache: dict[tuple[str, int], str | None] | None = None,
                  skipped: list[Skipped] | None = None) -> dict[str, RunFiles]:
    """Every run under the storage root: {run name: RunFiles}, run names sorted.

    The run at the root itself is named "."; others by their relative directory (`printable`).
    `sniff_cache` (a dict) remembers which plain `.json` files (by path and size) are traces
    or memory snapshots,
    so rescans do not reread them. What is not scanned (a directory that cannot be listed or
    is too deep, a plain `.json` that cannot be read, a name that collides with another once
    escaped) is appended to the list `skipped` as a `Skipped`; the rest is still discovered.
    """
    sniff_cache = {} if sniff_cache is None else sniff_cache
    skipped = [] if skipped is None else skipped
    runs = {}

    def skip(rel: str, reason: str) -> None:
        skipped.append(Skipped(printable(rel), reason))

    for rel_dir, names in storage.walk(on_skip=skip):
        candidates, snapshots = [], []
        for file_name in names:
            parsed = parse_trace_file_name(file_name)
            if parsed:
                candidates.append((parsed[0], parsed[1], file_name))
                continue
            snapshot = _SNAPSHOT_FILE.match(file_name)
            if snapshot and not _OTHER_PROFILER_DIR.search(rel_dir):
                stamp = snapshot.group("stamp")
                snapshots.append((snapshot.group("worker"), int(stamp) if stamp is not None else None, file_name))
                continue
            plain = _PLAIN_JSON.match(file_name)
            if not plain or _OTHER_PROFILER_DIR.search(rel_dir):
                continue
            rel = file_name if rel_dir == "." else f"{rel_dir}/{file_name}"
            try:
                # Keyed by size too: a file still being written is sniffed again once it grows.
                key = (rel, storage.stat(rel).size)
                if key not in sniff_cache:
                    sniff_cache[key] = _plain_json_kind(storage.read_head(rel, SNIFF_BYTES))
            except TraceError as exc:
                skip(rel, exc.reason)
                continue
            if sniff_cache[key] == "trace":
                candidates.append((plain.group("worker"), None, file_name))
            elif sniff_cache[key] == "snapshot":
                snapshots.append((plain.group("worker"), None, file_name))
        if not candidates and not snapshots:
            continue
        name = printable(rel_dir)
        if name in runs:  # `a\\xff` spelled out and `a` + byte 0xff: one name, two directories
            skip(rel_dir, f"its name shown escaped, {name!r}, is also another directory's: not listed")
            continue
        runs[name] = _group(name, rel_dir, candidates, snapshots)
    return dict(sorted(runs.items()))
