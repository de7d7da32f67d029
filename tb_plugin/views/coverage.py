"""Which ranks a view over many ranks covers: the Job and Distributed views answer for the
ranks whose trace loaded, and name each one that did not, with its loader's reason (a
truncated file of a crashed job must not take the whole job away).

A rank that did not load is named by its worker (the trace file's name up to its first dot,
as the run lists it): its rank number is written inside the file that could not be read.
"""

from collections.abc import Mapping

import pandas as pd

from ..schema import declare

MISSING_RANKS = declare(
    "missing_ranks", "one worker of the span whose trace did not load, left out of the view",
    ("worker", "str", "", "the worker (its trace file's name up to the first dot)"),
    ("reason", "str", "", "why its trace did not load: the loader's reason, without the file's path"),
)
COVERAGE = declare(
    "rank_coverage", "how many of the span's ranks the view covers, in one row",
    ("ranks", "int64", "count", "ranks whose trace loaded: the view covers these"),
    ("ranks_total", "int64", "count", "workers of the span: those loaded and those that did not"),
    ("text", "str", "", "the coverage in words, naming each rank that did not load and why"),
)


def missing_ranks(missing: Mapping[str, str]) -> pd.DataFrame:
    """The `MISSING_RANKS` table of {worker: reason its trace did not load}, by worker."""
    return MISSING_RANKS.frame({"worker": list(missing), "reason": list(missing.values())}
                               ).sort_values("worker", kind="stable").reset_index(drop=True)


def coverage_text(loaded: int, missing: Mapping[str, str]) -> str:
    """`loaded` ranks covered of `loaded + len(missing)`, in words with each missing one named."""
    total = loaded + len(missing)
    text = f"Covers {loaded} of {total} ranks"
    if not missing:
        return text + "."
    named = "; ".join(f"{worker} — {reason}" for worker, reason in sorted(missing.items()))
    return f"{text}; left out as {'its' if len(missing) == 1 else 'their'} trace did not load: {named}"


def coverage(loaded: int, missing: Mapping[str, str]) -> pd.DataFrame:
    """The `COVERAGE` row of a view over `loaded` ranks with {worker: reason} `missing`."""
    return COVERAGE.frame({"ranks": [loaded], "ranks_total": [loaded + len(missing)],
                           "text": [coverage_text(loaded, missing)]})
