"""Which ranks a view over many ranks covers: the Job and Distributed views answer for the
ranks whose trace loaded, and name each one that did not, with its loader's reason (a
truncated file of a crashed job must not take the whole job away); the comparison of a run's
memory snapshots (`snapshot_ranks`) says the same of the snapshots it could not read.

A rank that did not load is named by its worker (the trace file's name up to its first dot,
as the run lists it) and, where the start of its file still says so, by the rank its
``distributedInfo`` gives (Kineto writes that object before the events, so a file cut later
still holds it).
"""

import re
from collections.abc import Mapping
from typing import NamedTuple

import pandas as pd

from ..schema import NULLABLE, declare

MISSING_RANKS = declare(
    "missing_ranks", "one worker of the span whose trace did not load, left out of the view",
    ("worker", "str", "", "the worker (its trace file's name up to the first dot)"),
    ("rank", "int64", "", "the rank its distributedInfo gives, read from the start of the file; null where the "
     "start does not say", NULLABLE),
    ("reason", "str", "", "why its trace did not load: the loader's reason, without the file's path"),
)
COVERAGE = declare(
    "rank_coverage", "how many of the span's ranks (or of the run's memory snapshots) the view covers, in one row",
    ("ranks", "int64", "count", "ranks whose trace (or memory snapshot) loaded: the view covers these"),
    ("ranks_total", "int64", "count", "workers of the span (or memory snapshots of the run): those loaded and those that did not"),
    ("text", "str", "", "the coverage in words, naming each rank that did not load and why"),
)

# `"distributedInfo": {..., "rank": N` before any nested object (pg_config comes after rank)
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')


class MissingRank(NamedTuple):
    """Why one worker's trace did not load, and its rank where the file's start gives it."""

    reason: str
    rank: int | None = None


def rank_in_head(head: bytes) -> int | None:
    """The distributedInfo rank in the first bytes of a trace's JSON, None where they hold none."""
    match = _RANK.search(head)
    return int(match[1]) if match else None


def missing_ranks(missing: Mapping[str, MissingRank]) -> pd.DataFrame:
    """The `MISSING_RANKS` table of {worker: `MissingRank`}, by worker."""
    workers = sorted(missing)
    return MISSING_RANKS.frame({"worker": workers, "rank": [missing[w].rank for w in workers],
                                "reason": [missing[w].reason for w in workers]})


def coverage_text(loaded: int, missing: Mapping[str, MissingRank], of: str = "ranks",
                  failure: str = "trace did not load") -> str:
    """`loaded` ranks covered of `loaded + len(missing)`, in words with each missing one named
    (`of` what, left out as its `failure`: the memory snapshots of a run are "memory
    snapshots" whose "file could not be read")."""
    text = f"Covers {loaded} of {loaded + len(missing)} {of}"
    if not missing:
        return text + "."
    named = "; ".join(f"{worker}{'' if m.rank is None else f' (rank {m.rank})'} — {m.reason}"
                      for worker, m in sorted(missing.items()))
    return f"{text}; left out as {'its' if len(missing) == 1 else 'their'} {failure}: {named}"


def coverage(loaded: int, missing: Mapping[str, MissingRank], of: str = "ranks",
             failure: str = "trace did not load") -> pd.DataFrame:
    """The `COVERAGE` row of a view over `loaded` ranks with {worker: `MissingRank`} `missing`
    (`of` and `failure` as `coverage_text` takes them)."""
    return COVERAGE.frame({"ranks": [loaded], "ranks_total": [loaded + len(missing)],
                           "text": [coverage_text(loaded, missing, of, failure)]})
