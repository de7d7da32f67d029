"""Run, worker and span naming from file names under a log directory.

A run is a directory that directly holds trace files. `tensorboard_trace_handler` names them
`<worker>[.<digits>].pt.trace.json[.gz]`: the worker is the prefix, and the digit groups of
one worker (ordered numerically) are its spans, shown as 1, 2, ... . Plain `*.json[.gz]`
files count too when their first bytes look like a Kineto trace.
"""

import re
from dataclasses import dataclass, field

from .errors import TraceError

_TRACE_FILE = re.compile(r"^(?P<worker>.+?)(?:\.(?P<stamp>\d+))?\.pt\.trace\.json(?:\.gz)?$")
_PLAIN_JSON = re.compile(r"^(?P<worker>.+?)\.json(?:\.gz)?$")
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


@dataclass(frozen=True)
class SpanFile:
    """One trace file: the `span` (1-based) of `worker` in a run."""

    worker: str
    span: int
    stamp: int | None
    path: str  # relative to the log directory


@dataclass
class RunFiles:
    """The trace files of one run, by worker, spans in order."""

    name: str
    workers: dict = field(default_factory=dict)  # worker -> [SpanFile, ...]

    def files(self):
        return [f for spans in self.workers.values() for f in spans]

    def span_count(self):
        return max((len(s) for s in self.workers.values()), default=0)


def parse_trace_file_name(name):
    """(worker, stamp or None) for a `tensorboard_trace_handler` file name, else None."""
    m = _TRACE_FILE.match(name)
    if not m:
        return None
    stamp = m.group("stamp")
    return m.group("worker"), int(stamp) if stamp is not None else None


def looks_like_trace(head):
    """True when the first bytes of a JSON file look like a Kineto trace."""
    return bool(_TRACE_SIGNATURE.search(head) or _KINETO_HEADER.match(head))


def _group(run_name, rel_dir, candidates):
    stamps = {}
    for worker, stamp, file_name in candidates:
        stamps.setdefault(worker, []).append((stamp, file_name))
    run = RunFiles(run_name)
    for worker in sorted(stamps):
        ordered = sorted(stamps[worker], key=lambda s: (s[0] is not None, s[0] or 0, s[1]))
        run.workers[worker] = [
            SpanFile(worker, i + 1, stamp, file_name if rel_dir == "." else f"{rel_dir}/{file_name}")
            for i, (stamp, file_name) in enumerate(ordered)
        ]
    return run


def discover_runs(storage, sniff_cache=None):
    """Every run under the storage root: {run name: RunFiles}, run names sorted.

    The run at the root itself is named "."; others by their relative directory. `sniff_cache`
    (a dict) remembers which plain `.json` files (by path and size) are traces, so rescans do
    not reread them.
    """
    sniff_cache = {} if sniff_cache is None else sniff_cache
    runs = {}
    for rel_dir, names in storage.walk():
        candidates = []
        for file_name in names:
            parsed = parse_trace_file_name(file_name)
            if parsed:
                candidates.append((parsed[0], parsed[1], file_name))
                continue
            plain = _PLAIN_JSON.match(file_name)
            if not plain or _OTHER_PROFILER_DIR.search(rel_dir):
                continue
            rel = file_name if rel_dir == "." else f"{rel_dir}/{file_name}"
            try:
                # Keyed by size too: a file still being written is sniffed again once it grows.
                key = (rel, storage.stat(rel).size)
                if key not in sniff_cache:
                    sniff_cache[key] = looks_like_trace(storage.read_head(rel, SNIFF_BYTES))
            except TraceError:
                continue
            if sniff_cache[key]:
                candidates.append((plain.group("worker"), None, file_name))
        if candidates:
            runs[rel_dir] = _group(rel_dir, rel_dir, candidates)
    return dict(sorted(runs.items()))
