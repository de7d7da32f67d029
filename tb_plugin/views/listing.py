"""What the log directory holds, as its last scan found it: the runs, each run's workers and
each worker's spans (the routes runs, workers and spans; `schema.LOG_DIRECTORY`), and the
tabs the page offers for a profile of a run (views; `schema.OFFERED`).

The listing is not a function of a model: it changes with every scan, so a route over it is
answered afresh each time (`api.declared_route` keeps no answer of it). The server's store
gives it (`loading.RunStore.listing`), and so does a `Run` of the Python API, a log directory of
that one run (`Run.answer("spans", worker=...)`).
"""

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..errors import NotFoundError
from ..schema import LOG_DIRECTORY, OFFERED, Offer, ordered_tabs, route, text


class Listing(Protocol):
    """The log directory's runs (`runs()`: each as /runs lists it), each run's spans by worker
    (`run_spans(run)`: {worker: [{span, stamp, file}, ...]}, `NotFoundError` for a run it does
    not hold), why the directory or parts of it were not scanned (`scan_error`, `scan_errors`:
    [{path, reason}]) and whether the server still warms up (`warming_up`)."""

    scan_error: str
    warming_up: bool

    @property
    def scan_errors(self) -> Sequence[Mapping[str, str]]: ...

    def runs(self) -> list[dict[str, Any]]: ...

    def run_spans(self, run: str) -> Mapping[str, Sequence[Mapping[str, Any]]]: ...


def run_listing(listing: Listing) -> dict[str, Any]:
    """The runs found, with what the scan could not look at and whether the server warms up."""
    return {"runs": listing.runs(), "scan_error": listing.scan_error, "scan_errors": list(listing.scan_errors),
            "warming_up": listing.warming_up}


def run_workers(listing: Listing, run: str) -> dict[str, Any]:
    """The workers of `run`, in the order the run lists them."""
    return {"run": run, "workers": list(listing.run_spans(run))}


def worker_spans(listing: Listing, run: str, worker: str) -> dict[str, Any]:
    """The spans of `worker` in `run`, numbered from 1 in time order."""
    spans = listing.run_spans(run).get(worker)
    if spans is None:
        raise NotFoundError(f"run {run!r} has no worker {worker!r}")
    return {"run": run, "worker": worker, "spans": list(spans)}


def offered(offer: Offer) -> list[str]:
    """The tabs with data for the profile of `offer` (each tab's `offered`, `schema.tab`), in
    their order (of the tabs whose views are imported)."""
    return [t.name for t in ordered_tabs() if t.offered is not None and t.offered(offer)]


def offered_tabs(offer: Offer, run: str) -> dict[str, Any]:
    """The tabs the page offers for `run`'s profile (`offered`)."""
    return {"run": run, "views": offered(offer)}


_RUN = text("run", 'Run name as listed by /runs ("." for the log directory itself).', required=True)

RUNS_ROUTE = route("runs", "Runs found under the log directory, with load progress and per-file errors.", run_listing,
                   reads=LOG_DIRECTORY, reply="Runs")
WORKERS_ROUTE = route("workers", "Workers of a run.", run_workers, params=(_RUN,), reads=LOG_DIRECTORY,
                      reply="Workers")
SPANS_ROUTE = route("spans", "Spans (profiling cycles) of one worker, numbered from 1 in time order.", worker_spans,
                    params=(_RUN, text("worker", "A worker of the run, as /workers lists it.", required=True)),
                    reads=LOG_DIRECTORY, reply="Spans")
VIEWS_ROUTE = route("views", "The views that have data for a run (for its first worker, or the given one).", offered_tabs,
                    reads=OFFERED, reply="Views")
