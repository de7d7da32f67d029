"""The data routes: how each finds the input it reads from a request, and the three that are
written by hand. Validate parameters, call one function, serialise; nothing else.

A route declared with `schema.route` has no method here: `declared_route` answers it from its
declaration, the input of its kind (`schema.READS`) found by `READ_INPUTS` (a route that is a
pure function of some profiles names them first, so that `http.route` looks up an answer
computed before over the same profiles). Routes reach the data through `Profile`, `runs` and
the store only. The HTTP plumbing (replies, parameters, the wrapper) is `http`.
"""

import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any
from urllib.parse import quote
from wsgiref.types import WSGIApplication

import pandas as pd
from werkzeug import wrappers

from .accounting import REPLY_SHARE
from ..store.discovery import printable
from ..errors import NotFoundError, StillLoadingError, TraceError
from .http import (COMPUTING_AT_ONCE, Inputs, choice_param, fields_reply, ids_param, object_reply,
                   read_params, reads, reply_reservation, respond, respond_file, route, span_param, table_reply,
                   tables_reply, text_param)
from .loading import Loading, RunStore, ready
from ..python_api.snapshots import MemorySnapshot
from ..python_api.profile import Profile, answer_of, declared_routes
from ..python_api.runs import (FILE_SUMMARIES, Failed,
                               propose_comparison, ranks_frame, ranks_inputs, ranks_timeline, run_snapshots)
from .routes import API_ROUTES, HANDWRITTEN_ROUTES
from ..schema import (LOG_DIRECTORY, OFFERED, PROFILE, RANKS, RUN_SNAPSHOTS, SNAPSHOT, SNAPSHOT_TRACES, SPAN, TWO_PROFILES,
                      TWO_SPANS, Route)
from .sources import SourceResolver

logger = logging.getLogger(__name__)


def declared_route(declared: Route, api: "Api") -> Callable[..., wrappers.Response]:
    """The handler of a route declared with `schema.route`: the input it reads found from
    the request (`READ_INPUTS`), its parameters read and checked, its call made as the Python
    API makes it (`profile.answer_of`: `Profile.answer`, `MemorySnapshot.answer`,
    `Run.answer`, `profile.diff`), the answer served as its table or tables, or as the object
    it is. An answer over the log directory's listing or counts (`schema.LOG_DIRECTORY`,
    `schema.OFFERED`), which change with every scan, is not kept: the handler reads its input
    itself."""
    def answer(request: wrappers.Request, *inputs: Any) -> wrappers.Response:
        params = read_params(request, declared.params)
        context: dict[str, Any] = {}
        if declared.admits:
            context["admit"] = reply_reservation(request).admit
        if declared.frames is not None:
            context["resolve"] = partial(api.sources.with_paths, run_dir=api.run_directory(request))

        def build() -> Any:  # a table, a view of tables or an object, as the declaration says
            return answer_of(declared.reads, declared.name, inputs, params, **context)
        if declared.tables is not None:
            return tables_reply(request, build, tuple(declared.tables))
        if declared.alone:
            return fields_reply(request, build, declared.alone)
        if declared.fields is not None or declared.reply:
            return object_reply(request, build())
        return table_reply(request, build())

    def inputs(api_: "Api", request: wrappers.Request) -> Inputs:
        return READ_INPUTS[declared.reads](api_, request, declared)

    def afresh(request: wrappers.Request) -> wrappers.Response:
        return answer(request, *inputs(api, request).args)
    handler = afresh if declared.reads in (LOG_DIRECTORY, OFFERED) else reads(inputs)(answer)
    handler.__name__ = declared.name
    return handler


def _one_profile(api: "Api", request: wrappers.Request, route: Route | None = None) -> Inputs:
    profile = api.profile(request)
    return Inputs([profile], (profile,))


def _two_profiles(api: "Api", request: wrappers.Request, route: Route | None = None) -> Inputs:
    a, b = api.profile(request), api.profile(request, "_b")
    return Inputs([a, b], (a, b))


def _one_snapshot(api: "Api", request: wrappers.Request, route: Route | None = None) -> Inputs:
    snapshot = api.snapshot(request)
    return Inputs([snapshot], (snapshot,))


def _run_snapshots(api: "Api", request: wrappers.Request, route: Route | None = None) -> Inputs:
    """Every memory snapshot of the run, once all are read (202 with how many are, before),
    and {name: `TraceError`} of those that could not be (`runs.run_snapshots`: 422 only when
    none can)."""
    run = text_param(request, "run")
    files = api.store.run_files(run)
    results, failed = run_snapshots(files, partial(api.store.snapshot, run))
    loading = [r for r in results.values() if isinstance(r, Loading)]
    if loading:
        raise loading[0].error(len(files.snapshots) - len(loading), len(files.snapshots))
    return Inputs(list(results.values()), (results, failed), reusable=not failed)


def _snapshot_and_traces(api: "Api", request: wrappers.Request, route: Route | None = None) -> Inputs:
    """The snapshot and every span of the run's trace of the same name (rank0.pickle beside
    rank0's traces), or of its only worker."""
    snapshot = api.snapshot(request)
    run, name = text_param(request, "run"), text_param(request, "snapshot")
    profiles = {(worker, span): ready(api.store.profile(run, worker, span))
                for worker, span in api.store.run_files(run).snapshot_traces(name)}
    return Inputs([snapshot, *profiles.values()], (snapshot, profiles))


def _span_parts(api: "Api", request: wrappers.Request, route: Route) -> Inputs:
    """A span of ranks (`schema.SPAN`): the summary `route.part` of `runs.FILE_SUMMARIES`, a
    small part of the profile, of every worker of one span (the distributed view's
    `Profile.distributed_part`, the job view's `job_part`), read by the store's
    `runs.SpanSource` (the disk cache's run index where `preprocess` wrote one): a run of
    more ranks than the memory budget holds profiles still gets its view. A worker whose
    trace does not load is left out, its reason in the call's second argument ({worker:
    reason}); 422 only when none loads."""
    span = api.store.span(text_param(request, "run"), span_param(request))
    failed: Failed = {}
    parts = span.summaries((route.part,), failed)[route.part]
    return Inputs(list(parts.values()), (parts, failed), reusable=not failed)


def _two_spans(api: "Api", request: wrappers.Request, route: Route) -> Inputs:
    """Two spans of ranks (`schema.TWO_SPANS`): each rank's summary `route.part` of one span
    of run A and one of run B; both spans' loads are started before either is waited for."""
    spans = [api.store.span(text_param(request, "run" + suffix), span_param(request, suffix)) for suffix in ("", "_b")]
    parts, waiting = [], None
    for span in spans:
        try:
            parts.append(span.summaries((route.part,))[route.part])
        except StillLoadingError as exc:
            waiting = waiting or exc
    if waiting is not None:
        raise waiting
    return Inputs([*parts[0].values(), *parts[1].values()], tuple(parts))


def ranks_param(request: wrappers.Request, name: str, default: list[int] | None = None) -> list[int] | None:
    """Comma-separated rank numbers, or "all" (None)."""
    raw = text_param(request, name, required=False)
    if raw is None:
        return default
    return None if raw == "all" else ids_param(request, name, "ranks (or 'all')")


def _ranks_timeline(api: "Api", request: wrappers.Request, route: Route | None = None) -> Inputs:
    """The ranks of one span on one axis (`schema.RANKS`) (`runs.ranks_timeline`); the ranks'
    frame (clock offsets matched over every rank's collectives) is kept per job."""
    run = text_param(request, "run")
    span = span_param(request)
    ranks = ranks_param(request, "ranks")
    expanded = ranks_param(request, "expanded", default=[])
    align = choice_param(request, "align_clocks", ("true", "false")) == "true"
    # expanded=all is None, which `ranks_inputs` takes as every rank (up to its most) though typed Sequence[int]
    read = ranks_inputs(api.store.span(run, span), ranks, expanded)  # type: ignore[arg-type]
    summaries = [*read.job_parts.values(), *read.parts.values()]
    frame = api.rank_frames.get((run, span, align, tuple(read.parts)), summaries,
                                lambda: ranks_frame(read.job_parts, read.parts, align))
    return Inputs(read.used, (ranks_timeline(read, align, frame),))


def _log_directory(api: "Api", request: wrappers.Request, route: Route | None = None) -> Inputs:
    """The log directory's listing (`schema.LOG_DIRECTORY`): the store's, as its last scan found it."""
    return Inputs([], (api.store,))


def _offered(api: "Api", request: wrappers.Request, route: Route | None = None) -> Inputs:
    """A profile as the page's tabs are offered for it (`schema.OFFERED`): the run's worker
    named by `worker`, else its first (404 for a run of memory snapshots alone), with how many
    workers the run and trace files the log directory have."""
    run = text_param(request, "run")
    files = api.store.run_files(run)
    worker = text_param(request, "worker", required=False)
    if worker is None:  # the run's first worker; a run of memory snapshots alone has none
        if not files.workers:
            raise NotFoundError(f"run {run!r} has no trace files, only memory snapshots")
        worker = next(iter(files.workers))
    profile = ready(api.store.profile(run, worker, span_param(request)))
    trace_files = sum(r["files"] for r in api.store.runs())
    return Inputs([profile], (profile.offer(len(files.workers), trace_files), run))


# The input of each kind a declared route reads (`schema.READS`), found from the request.
READ_INPUTS: dict[str, Callable[["Api", wrappers.Request, Route], Inputs]] = {
    PROFILE: _one_profile, SNAPSHOT: _one_snapshot, TWO_PROFILES: _two_profiles, SPAN: _span_parts,
    TWO_SPANS: _two_spans, RANKS: _ranks_timeline, RUN_SNAPSHOTS: _run_snapshots, SNAPSHOT_TRACES: _snapshot_and_traces,
    LOG_DIRECTORY: _log_directory, OFFERED: _offered}


class DerivedCache:
    """Small results derived from some summaries, per key, reused while each summary is still
    the one served (held weakly, as `ReplyCache` holds profiles); bounded, LRU. The ranks'
    frame (clock offsets matched over every rank's collectives) is computed once per job,
    not once per pan of the timeline."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._entries: OrderedDict[Hashable, tuple[tuple[weakref.ref[object], ...], pd.DataFrame]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, used: Sequence[object], build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and len(entry[0]) == len(used) and all(r() is u for r, u in zip(entry[0], used)):
                self._entries.move_to_end(key)
                return entry[1]
        value = build()
        with self._lock:
            self._entries[key] = (tuple(weakref.ref(u) for u in used), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value


class Api:
    """The plugin's data routes over a `RunStore`."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.replies = store.replies
        self.rank_frames = DerivedCache()
        self.sources = SourceResolver()
        self.computing_turns = threading.BoundedSemaphore(COMPUTING_AT_ONCE)

    def _remember(self, profiles: list[object], path: str, reply: tuple[bytes, str | None] | None) -> None:
        """Keep a reply for reuse (unless None: not reusable) and count, within the memory
        budget, what computing it left cached on its profiles (a timeline index, a view's tables)."""
        if reply is not None:
            self.replies.put(profiles, path, reply)
        self.store.remeasure(profiles)

    def routes(self) -> dict[str, WSGIApplication]:
        """{"/<name>": WSGI app} of every data route (`routes.API_ROUTES`): a hand-written one is
        the method of its name, a declared one (`schema.route`) answered by `declared_route`."""
        apps = {}
        declared = declared_routes()
        for name in API_ROUTES:
            handler = getattr(self, name) if name in HANDWRITTEN_ROUTES else declared_route(declared[name], self)
            inputs = getattr(handler, "inputs", None)
            apps[f"/{name}"] = route(handler, self.replies, inputs and partial(inputs, self), self._remember,
                                     self.store.reply_reservation, self.computing_turns)
        return apps

    def profile(self, request: wrappers.Request, suffix: str = "") -> Profile:
        """The Profile named by run/worker/span (or run_b/worker_b/span_b with suffix "_b")."""
        run = text_param(request, "run" + suffix)
        worker = text_param(request, "worker" + suffix)
        span = span_param(request, suffix)
        return ready(self.store.profile(run, worker, span))

    def snapshot(self, request: wrappers.Request) -> MemorySnapshot:
        """The MemorySnapshot named by run/snapshot/span."""
        run = text_param(request, "run")
        name = text_param(request, "snapshot")
        span = span_param(request)
        return ready(self.store.snapshot(run, name, span))

    @reads(_one_profile)
    def info(self, request: wrappers.Request, profile: Profile) -> wrappers.Response:
        # The file as the log directory names it, as every reply does: not the server's path.
        source = self.store.span_file(text_param(request, "run"), text_param(request, "worker"),
                                      span_param(request)).path
        return respond({**profile.info(), "source": printable(source)})

    def run_directory(self, request: wrappers.Request) -> str | None:
        """The local directory of the requested span's trace file (None when remote): where a
        stack frame's file is looked for besides TensorBoard's `sys.path` (`SourceResolver`)."""
        return self.store.run_directory(text_param(request, "run"), text_param(request, "worker"),
                                        span_param(request))

    def diff_default(self, request: wrappers.Request) -> wrappers.Response:
        """The B the Diff tab compares A with when none is chosen (`runs.propose_comparison`),
        with the reason in words. Every run's operator names are read, within the share of
        the memory budget one reply may hold (those beyond it named in the reason). They come
        from memory or the disk cache; those not there load in the background (202 while none
        of the preferred kind is known yet)."""
        run, worker = text_param(request, "run"), text_param(request, "worker")
        span = span_param(request)
        self.store.span_file(run, worker, span)  # 404 for a worker or span the run does not have
        spans = len(self.store.run_files(run).workers[worker])
        declared, build = FILE_SUMMARIES["operator_names"]
        loads = {}

        # an `OperatorNames` (a views' type, which the HTTP layer does not import), None while it loads
        def names_of(name: str, chosen: str) -> Any:
            try:
                found = self.store.summary(name, chosen, span if name == run else 1, "operator_names", build, declared)
            except (NotFoundError, TraceError):  # a trace that cannot be read shares nothing with A
                return declared.kind(names=pd.DataFrame({"name": pd.Series([], dtype=object)}), device_type="")
            if isinstance(found, Loading):
                loads[name] = found
                return None
            return found

        if spans == 1 and names_of(run, worker) is None:
            raise loads[run].error()
        run_workers = {r["name"]: r["workers"] for r in self.store.runs()}
        proposal = propose_comparison(run, worker, span, spans, run_workers, names_of,
                                      self.store.max_memory_bytes // REPLY_SHARE)
        if proposal.run is None and proposal.loading:
            raise loads[proposal.loading[0]].error()
        return respond({"run_b": proposal.run, "worker_b": proposal.worker, "span_b": proposal.span,
                        "reason": proposal.reason, "loading": proposal.loading})

    def trace_file(self, request: wrappers.Request) -> wrappers.Response:
        """The original trace file, as stored (gzip stays gzip), for other viewers."""
        run = text_param(request, "run")
        worker = text_param(request, "worker")
        span = span_param(request)
        path, stored, is_gzip = self.store.open_file(run, worker, span)
        name = path.rsplit("/", 1)[-1]
        response = respond_file(request, stored, "application/gzip" if is_gzip else "application/json")
        # The name's bytes as stored: one that is not UTF-8 is percent-encoded byte for byte.
        response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(name, errors='surrogateescape')}"
        return response

