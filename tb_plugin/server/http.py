"""The HTTP plumbing of the data routes: replies (JSON, CSV, gzip, streamed files), query
parameters checked into values, and `route`, the one wrapper turning a handler into a WSGI app
with uniform error replies, the reply's memory reservation, turns for computing and answers
reused while their inputs stay the ones served. What the routes are, and how each finds its
input, is `api`.

Every route answers JSON (or CSV with `format=csv` where it returns a table). Problems are
raised as `errors.PublicError`s (not found, bad parameter, still loading, bad trace) and turned
into their replies (`{"error": ..., "reason": ...}` with a 4xx code; 202 with the progress of a
profile still parsing) by `route`.
"""

import csv
import gzip
import io
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import wraps
from typing import Any, IO, Literal, NamedTuple, TypeVar, overload
from wsgiref.types import WSGIApplication

import numpy as np
import orjson
import pandas as pd
from werkzeug import wrappers, wsgi

from .accounting import ReplyCache, ReplyReservation
from ..store.discovery import printable
from ..errors import BadParameterError, PublicError, StillLoadingError
from ..schema import Param, number_text, parse_ids
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


def _json_default(value: object) -> object:
    if value is pd.NA or value is pd.NaT:  # a nullable column's missing value
        return None
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
    """A DataFrame as {"columns": [...], "rows": [[...], ...]}, for `respond`: a missing value
    serialises as null there (orjson writes NaN and infinities as null, `_json_default` pd.NA
    and NaT), so the rows are taken as they are, not cleaned first (four times the time)."""
    return {"columns": [str(c) for c in frame.columns], "rows": frame.to_numpy(dtype=object).tolist()}


def table_csv(frame: pd.DataFrame) -> str:
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, quoting=csv.QUOTE_MINIMAL)
    return buffer.getvalue()


class Inputs(NamedTuple):
    """What a route's answer is a pure function of (besides the request path): `used`, the
    profiles (or per-profile summaries) it reads, held weakly to reuse the answer while each
    is still the one served, and `args`, what its handler is given after the request.
    `reusable` is False for an answer that names files that did not load beside those that
    did: it is neither kept nor looked up, so a file fixed, removed or added since is seen
    at once (the answer's inputs, the files that load, stay the same objects meanwhile)."""

    used: list[object]
    args: tuple[object, ...]
    reusable: bool = True


def reads(inputs: Callable[[Any, wrappers.Request], Inputs]) -> Callable[[_Handler], _Handler]:
    """Mark an `api.Api` route as a pure function of `inputs(api, request) -> Inputs`: the route
    wrapper looks its answer up before calling `handler(request, *inputs.args)`."""

    def mark(handler: _Handler) -> _Handler:
        handler.inputs = inputs  # type: ignore[attr-defined]  # read back with getattr (`Api.routes`)
        return handler

    return mark


def route(handler: Callable[..., wrappers.Response], replies: ReplyCache | None = None,
          inputs: Callable[[wrappers.Request], Inputs] | None = None,
          remember: Callable[[list[object], str, tuple[bytes, str | None] | None], None] | None = None,
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
    included) is looked up first (unless `Inputs.reusable` is False); a successful answer is
    handed to `remember(used, path, (body, content type))`, which keeps it (and counts it in
    the memory budget), or `remember(used, path, None)` where it is not reusable (what computing
    it cached on its profiles is counted all the same).
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
            used, args, reusable = inputs(request)
            cached = replies.get(used, request.full_path) if replies is not None and reusable else None
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
                remember(used, request.full_path, (response.get_data(), response.content_type) if reusable else None)
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
    raw = text_param(request, name, required=required)
    if raw is None:
        return default
    try:
        value = int(number_text(name, raw, integer=True))
    except ValueError as exc:
        raise BadParameterError(str(exc)) from None
    if minimum is not None and value < minimum:
        raise BadParameterError(f"parameter {name!r} must be >= {minimum}, not {value}")
    return value


def span_param(request: wrappers.Request, suffix: str = "") -> int:
    """The `span` (or `span_b` with suffix "_b") a request names: a profiling cycle of a worker,
    numbered from 1, the first by default."""
    return int_param(request, "span" + suffix, required=False, default=1, minimum=1)


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
    # a number's declared default is a number (`schema.integer`, `schema.number`): `value` keeps it
    value = text_param(request, param.name, required=param.required, default=param.default)
    try:  # a number's or a text's parse and a number's bounds, as the Python entrances do (`views.common.answer_route`)
        value = param.value(value)
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
