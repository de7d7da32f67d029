"""HTTP routes: validate parameters, call one function, serialise. Nothing else.

Every route answers JSON (or CSV with `format=csv` where it returns a table). Problems are
raised as `errors.PublicError`s (not found, bad parameter, still loading, bad trace) and turned
into their replies (`{"error": ..., "reason": ...}` with a 4xx code; 202 with the progress of a
profile still parsing) by one wrapper, `route`. Routes reach the data through `Profile` and
`runs` only; a route that is a pure function of some profiles names them first (`reads`), so
that the wrapper looks up an answer computed before over the same profiles. A route declared
with `schema.route` has no method here: `declared_route` answers it from its declaration.
"""

import csv
import gzip
import io
import logging
import math
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import partial, wraps
from typing import Any, IO, Literal, NamedTuple, TypeVar, cast, overload
from urllib.parse import quote
from wsgiref.types import WSGIApplication

import numpy as np
import orjson
import pandas as pd
from werkzeug import wrappers, wsgi

from .accounting import REPLY_SHARE, ReplyCache, ReplyReservation
from ..store.discovery import printable
from ..errors import BadParameterError, NotFoundError, PublicError, StillLoadingError, TraceError
from .loading import Loading, RunStore, ready
from ..python_api.snapshots import MemorySnapshot
from ..python_api.profile import Profile, answer_of, declared_routes
from ..python_api.runs import (FILE_SUMMARIES, Failed,
                               propose_comparison, ranks_frame, ranks_inputs, ranks_timeline)
from .routes import API_ROUTES, HANDWRITTEN_ROUTES
from ..schema import (LOG_DIRECTORY, OFFERED, PROFILE, RANKS, RUN_SNAPSHOTS, SNAPSHOT, SNAPSHOT_TRACES, SPAN, TWO_PROFILES,
                      TWO_SPANS, Param, Route, parse_ids)
from .sources import SourceResolver
from ..stages import STAGE_COMPUTING

logger = logging.getLogger(__name__)

ALLOWED_METHODS = ("GET", "HEAD")
_COMMON_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}
_STREAM_CHUNK = 1 << 20
# Where `route` puts the request's `ReplyReservation` (what its reply may hold in the budget).
_RESERVATION = "tb_plugin.reply_reservation"
# Answers computed at once (those not kept from before). Each holds the GIL most of its time,
# so more at once only share it: right after a trace loaded, 50 clients asking for every view
# computed them all together and each waited for the sum (8 s of CPU for the ResNet-50
# sample's 77 URLs on a busy machine; benchmarks/README.md, "Load test"). A request waits at
# most COMPUTE_WAIT_SECONDS for a turn, else answers 202 (stage "computing": ask again).
COMPUTING_AT_ONCE = 2
COMPUTE_WAIT_SECONDS = 0.25

# Replies gzipped when the client accepts it, as TensorBoard's own `http_util.Respond` does
# for its routes (same pattern: gzip, x-gzip or *, not with q=0; level 3; mtime 0, so one
# answer is always the same bytes): a 10,000-row table is a few MB of JSON and a tenth of that
# compressed. Stored trace files (`trace_file`) are streamed as they are, never recompressed.
_COMPRESSED_TYPES = ("application/json", "text/csv")
_ACCEPTS_GZIP = re.compile(r"(?:^|,|\s)(?:(?:x-)?gzip|\*)(?!;q=0)(?:\s|,|$)")

# A route handler (`reads` marks it, `route` wraps it), a parameter's default, a number's type.
_Handler = TypeVar("_Handler", bound=Callable[..., wrappers.Response])
_Default = TypeVar("_Default")
_Number = TypeVar("_Number", int, float)


def _json_default(value: object) -> object:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return None if not math.isfinite(value) else float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, pd.DataFrame):
        return table_json(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def respond(body: object, status: int = 200, content_type: str = "application/json") -> wrappers.Response:
    """The one place replies are built: serialisation, charset and safety headers.

    `bytes` are sent as they are (a stored trace file is already JSON); anything else is
    serialised as JSON, or encoded as UTF-8 text for other content types.
    """
    if content_type == "application/json" and not isinstance(body, bytes):
        payload = orjson.dumps(body, default=_json_default, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
        content_type = "application/json; charset=utf-8"
    else:
        payload = body if isinstance(body, bytes) else str(body).encode("utf-8")
        if content_type.startswith("text/") or content_type.endswith("javascript"):
            content_type += "; charset=utf-8"
    return wrappers.Response(payload, status=status, content_type=content_type, headers=_COMMON_HEADERS)


def gzipped(request: wrappers.Request, response: wrappers.Response, packed: bytes | None = None) -> wrappers.Response:
    """`response` gzipped when it is JSON or CSV held in memory, or comes with `packed` (its
    body gzipped beforehand: a static file, compressed once), and the request accepts gzip
    (`Vary: Accept-Encoding` either way, so no cache hands one client's encoding to another)."""
    if (response.direct_passthrough or response.content_encoding
            or (packed is None and response.mimetype not in _COMPRESSED_TYPES)):
        return response
    response.vary.add("Accept-Encoding")
    if _ACCEPTS_GZIP.search(request.headers.get("Accept-Encoding", "")):
        response.set_data(packed if packed is not None else gzip.compress(response.get_data(), compresslevel=3, mtime=0))
        response.content_encoding = "gzip"
    return response


def respond_file(request: wrappers.Request, stored: IO[bytes], content_type: str) -> wrappers.Response:
    """A reply streaming an open binary file (closed when the reply is done), so a download
    of a large trace never holds the whole file in the server's memory."""
    body = wsgi.wrap_file(request.environ, stored, buffer_size=_STREAM_CHUNK)
    return wrappers.Response(body, content_type=content_type, headers=_COMMON_HEADERS, direct_passthrough=True)


def table_json(frame: pd.DataFrame) -> dict[str, list[Any]]:
    """A DataFrame as {"columns": [...], "rows": [[...], ...]}; NaN becomes null."""
    clean = frame.astype(object).where(frame.notna(), None)
    return {"columns": [str(c) for c in frame.columns], "rows": clean.to_numpy().tolist()}


def table_csv(frame: pd.DataFrame) -> str:
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, quoting=csv.QUOTE_MINIMAL)
    return buffer.getvalue()


class Inputs(NamedTuple):
    """What a route's answer is a pure function of (besides the request path): `used`, the
    profiles (or per-profile summaries) it reads, held weakly to reuse the answer while each
    is still the one served, and `args`, what its handler is given after the request."""

    used: list[object]
    args: tuple[object, ...]


def reads(inputs: Callable[["Api", wrappers.Request], Inputs]) -> Callable[[_Handler], _Handler]:
    """Mark an `Api` route as a pure function of `inputs(api, request) -> Inputs`: the route
    wrapper looks its answer up before calling `handler(request, *inputs.args)`."""

    def mark(handler: _Handler) -> _Handler:
        handler.inputs = inputs  # type: ignore[attr-defined]  # read back with getattr (`Api.routes`)
        return handler

    return mark


def route(handler: Callable[..., wrappers.Response], replies: ReplyCache | None = None,
          inputs: Callable[[wrappers.Request], Inputs] | None = None,
          remember: Callable[[list[object], str, tuple[bytes, str | None]], None] | None = None,
          reservation: Callable[[], ReplyReservation] | None = None,
          turns: threading.Semaphore | None = None) -> WSGIApplication:
    """Wrap a `handler(request) -> reply` as a WSGI app with uniform error replies: every
    `PublicError` becomes its own reply (`PublicError.body`, with its status), anything else
    a logged 500. Every reply is gzipped where the client accepts it (`gzipped`).

    With `reservation() -> ReplyReservation`, what the handler builds is counted in the memory
    budget while it answers (`reply_reservation`), and a reply too large is refused (413).
    With `turns` (a semaphore of COMPUTING_AT_ONCE), an answer not found among the replies is
    computed only in a turn, waited for at most COMPUTE_WAIT_SECONDS, else answered 202.

    With `inputs(request) -> Inputs`, the handler is `handler(request, *args)`, and with a
    `ReplyCache` an answer over the same inputs to the same request path (query string
    included) is looked up first; a successful answer is handed to `remember(used, path,
    (body, content type))`, which keeps it (and counts it in the memory budget).
    """

    @wrappers.Request.application
    @wraps(handler)
    def app(request: wrappers.Request) -> wrappers.Response:
        return gzipped(request, answer(request))

    def answer(request: wrappers.Request) -> wrappers.Response:
        held = request.environ[_RESERVATION] = reservation() if reservation is not None else ReplyReservation()
        try:
            if request.method not in ALLOWED_METHODS:
                raise PublicError(f"{request.method} is not supported; use {', '.join(ALLOWED_METHODS)}", status=405,
                                  error="method_not_allowed")
            if inputs is None:
                return handler(request)
            asked = time.time()
            used, args = inputs(request)
            cached = replies.get(used, request.full_path) if replies is not None else None
            if cached is not None:
                payload, content_type = cached
                return wrappers.Response(payload, status=200, content_type=content_type, headers=_COMMON_HEADERS)
            if turns is not None and not turns.acquire(timeout=COMPUTE_WAIT_SECONDS):
                raise StillLoadingError(request.path, asked, STAGE_COMPUTING)
            try:
                response = handler(request, *args)
            finally:
                if turns is not None:
                    turns.release()
            if remember is not None and response.status_code == 200:
                remember(used, request.full_path, (response.get_data(), response.content_type))
            return response
        except PublicError as exc:
            body = exc.body()
            if "path" in body:  # relative to the log directory; bytes that are not UTF-8 escaped (\xff)
                body["path"] = printable(body["path"])
            response = respond(body, status=exc.status)
            if exc.status == 405:  # RFC 9110: a 405 lists the methods the resource supports
                response.headers["Allow"] = ", ".join(ALLOWED_METHODS)
            return response
        except Exception:  # logged with its traceback; the client gets no internals
            logger.exception("error answering %s", request.full_path)
            return respond({"error": "internal", "reason": "internal error; see the TensorBoard log"}, status=500)
        finally:
            held.release()

    return app


@overload
def text_param(request: wrappers.Request, name: str, required: Literal[True] = True) -> str: ...
@overload
def text_param(request: wrappers.Request, name: str, required: bool, default: _Default) -> str | _Default: ...
@overload
def text_param(request: wrappers.Request, name: str, required: bool = True, default: None = None) -> str | None: ...
def text_param(request: wrappers.Request, name: str, required: bool = True,
               default: _Default | None = None) -> str | _Default | None:
    values = request.args.getlist(name)
    if len(values) > 1:
        raise BadParameterError(f"parameter {name!r} given {len(values)} times")
    if not values or values[0] == "":
        if required:
            raise BadParameterError(error="missing_parameter", reason=f"parameter {name!r} is required")
        return default
    if len(values[0]) > 4096 or "\x00" in values[0]:
        raise BadParameterError(f"parameter {name!r} is not a valid name")
    return values[0]


def _number_param(request: wrappers.Request, name: str, convert: Callable[[str], _Number], what: str, required: bool,
                  default: _Number | None) -> _Number | None:
    raw = text_param(request, name, required=required)
    if raw is None:
        return default
    try:
        value = convert(raw)
    except ValueError:
        raise BadParameterError(f"parameter {name!r} must be {what}, not {raw[:40]!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise BadParameterError(f"parameter {name!r} must be finite")
    return value


@overload
def int_param(request: wrappers.Request, name: str, required: Literal[True] = True, default: int | None = None,
              minimum: float | None = None) -> int: ...
@overload
def int_param(request: wrappers.Request, name: str, required: bool, default: int,
              minimum: float | None = None) -> int: ...
@overload
def int_param(request: wrappers.Request, name: str, required: bool = True, default: int | None = None,
              minimum: float | None = None) -> int | None: ...
def int_param(request: wrappers.Request, name: str, required: bool = True, default: int | None = None,
              minimum: float | None = None) -> int | None:
    value = _number_param(request, name, int, "an integer", required, default)
    if value is not None and minimum is not None and value < minimum:
        raise BadParameterError(f"parameter {name!r} must be >= {minimum}, not {value}")
    return value


@overload
def float_param(request: wrappers.Request, name: str, required: Literal[True] = True,
                default: float | None = None) -> float: ...
@overload
def float_param(request: wrappers.Request, name: str, required: bool, default: float) -> float: ...
@overload
def float_param(request: wrappers.Request, name: str, required: bool = True,
                default: float | None = None) -> float | None: ...
def float_param(request: wrappers.Request, name: str, required: bool = True, default: float | None = None) -> float | None:
    return _number_param(request, name, float, "a number", required, default)


def reply_reservation(request: wrappers.Request) -> ReplyReservation:
    """The request's `ReplyReservation` (`route`): `admit(values, what)` before building them."""
    return request.environ.get(_RESERVATION) or ReplyReservation()


def ids_param(request: wrappers.Request, name: str, what: str) -> list[int] | None:
    """Optional comma-separated ids (`what`: "track ids", "ranks"), each once, in the order
    first given; None when absent. A repeated id would be answered once per repeat: 2,000
    repeats of one track in a 4 KB query built a 469 MB reply."""
    raw = text_param(request, name, required=False)
    if raw is None:
        return None
    try:
        return parse_ids(raw, what)
    except ValueError as exc:
        raise BadParameterError(f"parameter {name!r} {exc}") from None


def _resolution(request: wrappers.Request) -> float:
    """The Trace view's `resolution_us`: the time one pixel spans, above zero."""
    resolution = float_param(request, "resolution_us")
    if resolution <= 0:
        raise BadParameterError("parameter 'resolution_us' must be > 0")
    return resolution


def tracks_param(request: wrappers.Request) -> list[int] | None:
    """Optional comma-separated track ids; None means every track."""
    return ids_param(request, "tracks", "track ids")


def choice_param(request: wrappers.Request, name: str, choices: Sequence[str]) -> str:
    """One of `choices` (the first is the default)."""
    value = text_param(request, name, required=False, default=choices[0])
    if value not in choices:
        raise BadParameterError(f"parameter {name!r} must be one of {', '.join(choices)}, not {value[:40]!r}")
    return value


def table_reply(request: wrappers.Request, frame: pd.DataFrame) -> wrappers.Response:
    """A DataFrame as JSON, or as CSV with `format=csv` (same columns, same rows); refused
    (413) when more than one reply may hold."""
    as_csv = choice_param(request, "format", ("json", "csv")) == "csv"
    reply_reservation(request).admit(frame.size, f"a table of {len(frame):,} rows")
    if as_csv:
        return respond(table_csv(frame), content_type="text/csv")
    return respond(table_json(frame))


def tables_reply(request: wrappers.Request, build: Callable[[], object], names: Sequence[str]) -> wrappers.Response:
    """A view made of several tables: all as JSON, some (`tables=a,b`) as JSON, or one
    (`table=`) as JSON or CSV.

    `build()` computes the view; it is called only once `table`, `tables` and `format` are
    valid, so a bad request costs no computation.
    """
    name = text_param(request, "table", required=False)
    subset = text_param(request, "tables", required=False)
    as_csv = choice_param(request, "format", ("json", "csv")) == "csv"
    if name is not None and subset is not None:
        raise BadParameterError("give 'table' (one table) or 'tables' (several), not both")
    if name is None and as_csv:
        raise BadParameterError(f"format=csv needs one table: table={'|'.join(names)}")
    if name is not None and name not in names:
        raise BadParameterError(f"parameter 'table' must be one of {', '.join(names)}")
    wanted = names if subset is None else subset.split(",")
    if not set(wanted) <= set(names):
        raise BadParameterError(f"parameter 'tables' takes names among {', '.join(names)}, comma-separated")
    view = build()
    if name is None:
        chosen = {n: getattr(view, n) for n in names if n in wanted}
        reply_reservation(request).admit(sum(getattr(t, "size", 0) for t in chosen.values()),
                                         f"tables of {sum(len(t) for t in chosen.values()):,} rows")
        return respond(chosen)
    return table_reply(request, getattr(view, name))


def object_reply(request: wrappers.Request, answer: Mapping[str, object]) -> wrappers.Response:
    """An object of tables and plain values as JSON; refused (413) when its tables are more
    than one reply may hold."""
    frames = [value for value in answer.values() if isinstance(value, pd.DataFrame)]
    reply_reservation(request).admit(sum(f.size for f in frames), f"tables of {sum(len(f) for f in frames):,} rows")
    return respond(answer)


def fields_reply(request: wrappers.Request, build: Callable[[], Mapping[str, object]],
                 alone: Sequence[str]) -> wrappers.Response:
    """An object of tables and plain values as JSON, or one of its tables `alone`
    (`schema.route`): the first with format=csv, where there are several the one `table=`
    names (JSON or CSV). Both are checked before `build()` computes the answer."""
    as_csv = choice_param(request, "format", ("json", "csv")) == "csv"
    name = choice_param(request, "table", alone) if len(alone) > 1 else alone[0]
    if as_csv or (len(alone) > 1 and "table" in request.args):
        table = build()[name]
        assert isinstance(table, pd.DataFrame), f"{name} is a declared table"
        return table_reply(request, table)
    return object_reply(request, build())


def read_param(request: wrappers.Request, param: Param, earlier: Mapping[str, object]) -> object:
    """The value of a declared route's parameter (`schema.Param`), checked (`earlier`: the
    route's parameters read before it, by name); None where the request gives none and the
    declaration no default (the view's own default holds)."""
    if param.choices:
        if param.required:
            text_param(request, param.name)  # 400 when absent: no choice is the default
        return param.value(choice_param(request, param.name, param.choices))
    value: float | None
    if param.type == "integer":  # a number's declared default is a number (`schema.integer`, `schema.number`)
        value = int_param(request, param.name, required=param.required, default=cast("int | None", param.default))
    elif param.type == "number":
        value = float_param(request, param.name, required=param.required, default=cast("float | None", param.default))
    else:
        raw = text_param(request, param.name, required=param.required, default=param.default)
        try:
            return param.value(raw)
        except ValueError as exc:
            raise BadParameterError(f"parameter {param.name!r} {exc}") from None
    try:
        param.check(value, earlier)
    except ValueError as exc:
        raise BadParameterError(str(exc)) from None
    return value


def read_params(request: wrappers.Request, params: Sequence[Param]) -> dict[str, object]:
    """{name: value} of a declared route's parameters the request gives (or that have a
    default), each checked (`read_param`)."""
    values: dict[str, object] = {}
    for param in params:
        value = read_param(request, param, values)
        if value is not None:
            values[param.name] = value
    return values


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
    """Every memory snapshot of the run, once all are read (202 with how many are, before)."""
    run = text_param(request, "run")
    names = list(api.store.run_files(run).snapshots)
    if not names:
        raise NotFoundError(f"run {run!r} has no memory snapshots (*.pickle, *.pickle.gz or JSON snapshots)")
    results = {name: api.store.snapshot(run, name) for name in names}
    loading = [r for r in results.values() if isinstance(r, Loading)]
    if loading:
        raise loading[0].error(len(results) - len(loading), len(results))
    return Inputs(list(results.values()), (results,))




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
    span = api.store.span(text_param(request, "run"), int_param(request, "span", required=False, default=1, minimum=1))
    failed: Failed = {}
    parts = span.summaries((route.part,), failed)[route.part]
    # the answer changes with the parts: a failed file that loads later adds its part
    return Inputs(list(parts.values()), (parts, failed))


def _two_spans(api: "Api", request: wrappers.Request, route: Route) -> Inputs:
    """Two spans of ranks (`schema.TWO_SPANS`): each rank's summary `route.part` of one span
    of run A and one of run B; both spans' loads are started before either is waited for."""
    spans = [api.store.span(text_param(request, "run" + suffix),
                            int_param(request, "span" + suffix, required=False, default=1, minimum=1))
             for suffix in ("", "_b")]
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
    span = int_param(request, "span", required=False, default=1, minimum=1)
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
    profile = ready(api.store.profile(run, worker, int_param(request, "span", required=False, default=1, minimum=1)))
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

    def _remember(self, profiles: list[object], path: str, reply: tuple[bytes, str | None]) -> None:
        """Keep a reply for reuse and count, within the memory budget, what computing it left
        cached on its profiles (a timeline index, a view's tables)."""
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
        span = int_param(request, "span" + suffix, required=False, default=1, minimum=1)
        return ready(self.store.profile(run, worker, span))

    def snapshot(self, request: wrappers.Request) -> MemorySnapshot:
        """The MemorySnapshot named by run/snapshot/span."""
        run = text_param(request, "run")
        name = text_param(request, "snapshot")
        span = int_param(request, "span", required=False, default=1, minimum=1)
        return ready(self.store.snapshot(run, name, span))

    @reads(_one_profile)
    def info(self, request: wrappers.Request, profile: Profile) -> wrappers.Response:
        # The file as the log directory names it, as every reply does: not the server's path.
        source = self.store.span_file(text_param(request, "run"), text_param(request, "worker"),
                                      int_param(request, "span", required=False, default=1, minimum=1)).path
        return respond({**profile.info(), "source": printable(source)})


    def run_directory(self, request: wrappers.Request) -> str | None:
        """The local directory of the requested span's trace file (None when remote): where a
        stack frame's file is looked for besides TensorBoard's `sys.path` (`SourceResolver`)."""
        return self.store.run_directory(text_param(request, "run"), text_param(request, "worker"),
                                        int_param(request, "span", required=False, default=1, minimum=1))

    def diff_default(self, request: wrappers.Request) -> wrappers.Response:
        """The B the Diff tab compares A with when none is chosen (`runs.propose_comparison`),
        with the reason in words. Every run's operator names are read, within the share of
        the memory budget one reply may hold (those beyond it named in the reason). They come
        from memory or the disk cache; those not there load in the background (202 while none
        of the preferred kind is known yet)."""
        run, worker = text_param(request, "run"), text_param(request, "worker")
        span = int_param(request, "span", required=False, default=1, minimum=1)
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

    @staticmethod
    def _window(request: wrappers.Request) -> tuple[float, float]:
        start_us = float_param(request, "start_us")
        end_us = float_param(request, "end_us")
        if end_us < start_us:
            raise BadParameterError(f"end_us ({end_us}) is before start_us ({start_us})")
        if not math.isfinite(end_us - start_us):  # e.g. -1e308..1e308: bins of width inf, NaN times
            raise BadParameterError("the window from start_us to end_us is too wide")
        return start_us, end_us


    def trace_file(self, request: wrappers.Request) -> wrappers.Response:
        """The original trace file, as stored (gzip stays gzip), for other viewers."""
        run = text_param(request, "run")
        worker = text_param(request, "worker")
        span = int_param(request, "span", required=False, default=1, minimum=1)
        path, stored, is_gzip = self.store.open_file(run, worker, span)
        name = path.rsplit("/", 1)[-1]
        response = respond_file(request, stored, "application/gzip" if is_gzip else "application/json")
        # The name's bytes as stored: one that is not UTF-8 is percent-encoded byte for byte.
        response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(name, errors='surrogateescape')}"
        return response

