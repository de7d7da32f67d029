"""HTTP routes: validate parameters, call one function, serialise. Nothing else.

Every route answers JSON (or CSV with `format=csv` where it returns a table). Problems are
raised as `ApiError`s and turned into `{"error": ..., "reason": ...}` replies with a 4xx code
by one wrapper; a profile still parsing answers 202 with its progress.
"""

import csv
import io
import logging
import math
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import asdict
from functools import wraps
from urllib.parse import quote

import numpy as np
import orjson
import pandas as pd
from werkzeug import wrappers, wsgi

from .errors import TraceError
from .loading import Loading, NotFound
from .routes import API_ROUTES
from .views import diff as diff_view
from .views import compiled as compiled_view
from .views import cudagraphs as cudagraph_view
from .views import flops as flops_view
from .views import distributed as distributed_view
from .views import timeline
from .views.common import step_windows

logger = logging.getLogger(__name__)

_COMMON_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}
_STREAM_CHUNK = 1 << 20


class StillLoading(Exception):
    """The profile asked for is being parsed: answered 202 with progress. A view over several
    profiles also says how many of them are `ready` of the `total` it needs."""

    def __init__(self, loading, ready=None, total=None):
        super().__init__(loading.path)
        self.loading, self.ready, self.total = loading, ready, total


class CachedReply(Exception):
    """The answer to this exact request over this exact profile was computed before."""

    def __init__(self, payload, content_type):
        super().__init__()
        self.payload, self.content_type = payload, content_type


class ReplyCache:
    """Serialised answers per request path (query string included) and the Profiles it used.

    Every view is a pure function of its profiles and the parameters, so an answer can be
    reused until a profile is replaced (a changed file loads as a new Profile). Entries live
    under the first profile, weakly keyed, so they go with it; an answer that used more
    profiles (diff, distributed) holds weak references to the others and is reused only while
    each is still the profile served. Bounded per first profile, LRU.
    """

    def __init__(self, per_profile=128):
        self.per_profile = per_profile
        self._entries = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, profiles, path):
        """The reply stored for `path` over exactly `profiles` (in order), or None."""
        first, others = profiles[0], profiles[1:]
        with self._lock:
            entries = self._entries.get(first)
            entry = entries.get(path) if entries is not None else None
            if entry is None:
                return None
            reply, used_others = entry
            if len(used_others) != len(others) or any(ref() is not p for ref, p in zip(used_others, others)):
                return None
            entries.move_to_end(path)
            return reply

    def put(self, profiles, path, reply):
        with self._lock:
            entries = self._entries.setdefault(profiles[0], OrderedDict())
            entries[path] = (reply, tuple(weakref.ref(p) for p in profiles[1:]))
            entries.move_to_end(path)
            while len(entries) > self.per_profile:
                entries.popitem(last=False)


_PROFILES_USED = "tb_plugin.profiles"


class ApiError(Exception):
    """A request that cannot be answered: HTTP `status`, short `error` code, `reason`."""

    def __init__(self, status, error, reason):
        super().__init__(reason)
        self.status, self.error, self.reason = status, error, reason


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return None if not math.isfinite(value) else float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, pd.DataFrame):
        return table_json(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def respond(body, status=200, content_type="application/json"):
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


def respond_file(request, stored, content_type):
    """A reply streaming an open binary file (closed when the reply is done), so a download
    of a large trace never holds the whole file in the server's memory."""
    body = wsgi.wrap_file(request.environ, stored, buffer_size=_STREAM_CHUNK)
    return wrappers.Response(body, content_type=content_type, headers=_COMMON_HEADERS, direct_passthrough=True)


def table_json(frame):
    """A DataFrame as {"columns": [...], "rows": [[...], ...]}; NaN becomes null."""
    clean = frame.astype(object).where(frame.notna(), None)
    return {"columns": [str(c) for c in frame.columns], "rows": clean.to_numpy().tolist()}


def table_csv(frame):
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, quoting=csv.QUOTE_MINIMAL)
    return buffer.getvalue()


def route(handler, replies=None):
    """Wrap a `handler(request) -> reply` as a WSGI app with uniform error replies.

    With a `ReplyCache`, a successful answer computed from profiles is kept and served again
    for the same request path over the same profiles (see `Api._reuse`).
    """

    @wrappers.Request.application
    @wraps(handler)
    def app(request):
        try:
            if request.method not in ("GET", "HEAD"):
                raise ApiError(405, "method_not_allowed", f"{request.method} is not supported")
            response = handler(request)
            used = request.environ.get(_PROFILES_USED, [])
            if replies is not None and response.status_code == 200 and used:
                replies.put(used, request.full_path, (response.get_data(), response.content_type))
            return response
        except CachedReply as exc:
            return wrappers.Response(exc.payload, status=200, content_type=exc.content_type, headers=_COMMON_HEADERS)
        except StillLoading as exc:
            loading = exc.loading
            body = {"loading": True, "path": loading.path, "elapsed_seconds": round(time.time() - loading.since, 3),
                    "stage": loading.stage, "fraction": None if loading.fraction is None else round(loading.fraction, 4)}
            if exc.total is not None:
                body.update(ready=exc.ready, total=exc.total)
            return respond(body, status=202)
        except ApiError as exc:
            return respond({"error": exc.error, "reason": exc.reason}, status=exc.status)
        except NotFound as exc:
            return respond({"error": "not_found", "reason": str(exc)}, status=404)
        except TraceError as exc:
            return respond({"error": "bad_trace", "reason": exc.reason, "path": exc.path}, status=422)
        except Exception:  # logged with its traceback; the client gets no internals
            logger.exception("error answering %s", request.full_path)
            return respond({"error": "internal", "reason": "internal error; see the TensorBoard log"}, status=500)

    return app


def text_param(request, name, required=True, default=None):
    values = request.args.getlist(name)
    if len(values) > 1:
        raise ApiError(400, "bad_parameter", f"parameter {name!r} given {len(values)} times")
    if not values or values[0] == "":
        if required:
            raise ApiError(400, "missing_parameter", f"parameter {name!r} is required")
        return default
    if len(values[0]) > 4096 or "\x00" in values[0]:
        raise ApiError(400, "bad_parameter", f"parameter {name!r} is not a valid name")
    return values[0]


def _number_param(request, name, convert, what, required, default):
    raw = text_param(request, name, required=required)
    if raw is None:
        return default
    try:
        value = convert(raw)
    except ValueError:
        raise ApiError(400, "bad_parameter", f"parameter {name!r} must be {what}, not {raw[:40]!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ApiError(400, "bad_parameter", f"parameter {name!r} must be finite")
    return value


def int_param(request, name, required=True, default=None, minimum=None):
    value = _number_param(request, name, int, "an integer", required, default)
    if value is not None and minimum is not None and value < minimum:
        raise ApiError(400, "bad_parameter", f"parameter {name!r} must be >= {minimum}, not {value}")
    return value


def float_param(request, name, required=True, default=None):
    return _number_param(request, name, float, "a number", required, default)


def tracks_param(request):
    """Optional comma-separated track ids; None means every track."""
    raw = text_param(request, "tracks", required=False)
    if raw is None:
        return None
    try:
        ids = [int(t) for t in raw.split(",") if t.strip()]
    except ValueError:
        raise ApiError(400, "bad_parameter", "parameter 'tracks' must be comma-separated track ids") from None
    if not all(0 <= t < 1 << 31 for t in ids):  # beyond int64 the views' arrays would overflow
        raise ApiError(400, "bad_parameter", "parameter 'tracks' holds a track id out of range")
    return ids


def choice_param(request, name, choices):
    """One of `choices` (the first is the default)."""
    value = text_param(request, name, required=False, default=choices[0])
    if value not in choices:
        raise ApiError(400, "bad_parameter", f"parameter {name!r} must be one of {', '.join(choices)}, not {value[:40]!r}")
    return value


def table_reply(request, frame):
    """A DataFrame as JSON, or as CSV with `format=csv` (same columns, same rows)."""
    if choice_param(request, "format", ("json", "csv")) == "csv":
        return respond(table_csv(frame), content_type="text/csv")
    return respond(table_json(frame))


def ready(result):
    """The Profile, or StillLoading (answered 202) while it is parsed."""
    if isinstance(result, Loading):
        raise StillLoading(result)
    return result


def tables_reply(request, build, names):
    """A view made of several tables: all as JSON, some (`tables=a,b`) as JSON, or one
    (`table=`) as JSON or CSV.

    `build()` computes the view; it is called only once `table`, `tables` and `format` are
    valid, so a bad request costs no computation.
    """
    name = text_param(request, "table", required=False)
    subset = text_param(request, "tables", required=False)
    as_csv = choice_param(request, "format", ("json", "csv")) == "csv"
    if name is not None and subset is not None:
        raise ApiError(400, "bad_parameter", "give 'table' (one table) or 'tables' (several), not both")
    if name is None and as_csv:
        raise ApiError(400, "bad_parameter", f"format=csv needs one table: table={'|'.join(names)}")
    if name is not None and name not in names:
        raise ApiError(400, "bad_parameter", f"parameter 'table' must be one of {', '.join(names)}")
    wanted = names if subset is None else subset.split(",")
    if not set(wanted) <= set(names):
        raise ApiError(400, "bad_parameter", f"parameter 'tables' takes names among {', '.join(names)}, comma-separated")
    view = build()
    if name is None:
        return respond({n: getattr(view, n) for n in names if n in wanted})
    return table_reply(request, getattr(view, name))


def _distributed_part(profile):
    """What the distributed view keeps of one worker's profile (`RunStore.summary`)."""
    return distributed_view.worker_part(profile.model)


def available_views(profile, worker_count, profile_count):
    """The views that have data for this profile (and run); `profile_count` is how many
    trace files the whole log directory holds (diff needs a second one)."""
    m = profile.model
    views = ["overview"]
    if len(m.ops):
        views.append("operator")
    if len(m.kernels):
        views.append("kernel")
    if len(m.memory):
        views.append("memory")
    if len(profile.modules()):
        views.append("module")
    if len(profile.timeline().slices):
        views.append("trace")
    if len(profile.compiled()):
        views.append("compiled")
    if len(profile.lightning()):
        views.append("lightning")
    if worker_count > 1:
        views.append("distributed")
    if profile_count > 1:
        views.append("diff")
    return views


class Api:
    """The plugin's data routes over a `RunStore`."""

    def __init__(self, store):
        self.store = store
        self.replies = ReplyCache()

    def _route(self, handler):
        return route(handler, self.replies)

    def routes(self):
        """{"/<name>": WSGI app} of every data route (`routes.API_ROUTES`)."""
        return {f"/{name}": self._route(getattr(self, name)) for name in API_ROUTES}

    def _profile(self, request, suffix=""):
        """The Profile named by run/worker/span (or run_b/worker_b/span_b with suffix "_b").

        Raises CachedReply when this request was answered from the profiles named so far.
        """
        run = text_param(request, "run" + suffix)
        worker = text_param(request, "worker" + suffix)
        span = int_param(request, "span" + suffix, required=False, default=1, minimum=1)
        profile = ready(self.store.profile(run, worker, span))
        self._reuse(request, [profile])
        return profile

    def _reuse(self, request, profiles):
        """Note that this request uses `profiles`; raise CachedReply when it was answered
        before from exactly the profiles it has used so far."""
        used = request.environ.setdefault(_PROFILES_USED, [])
        used.extend(profiles)
        cached = self.replies.get(used, request.full_path)
        if cached is not None:
            raise CachedReply(*cached)

    def runs(self, request):
        return respond({"runs": self.store.runs(), "scan_error": self.store.scan_error})

    def workers(self, request):
        run = text_param(request, "run")
        return respond({"run": run, "workers": list(self.store.run_files(run).workers)})

    def spans(self, request):
        run = text_param(request, "run")
        worker = text_param(request, "worker")
        spans = self.store.run_files(run).workers.get(worker)
        if spans is None:
            raise NotFound(f"run {run!r} has no worker {worker!r}")
        return respond({"run": run, "worker": worker,
                        "spans": [{"span": f.span, "stamp": f.stamp, "file": f.path.rsplit("/", 1)[-1]} for f in spans]})

    def info(self, request):
        return respond(self._profile(request).info())

    def views(self, request):
        run = text_param(request, "run")
        files = self.store.run_files(run)
        worker = text_param(request, "worker", required=False, default=next(iter(files.workers)))
        span = int_param(request, "span", required=False, default=1, minimum=1)
        profile = ready(self.store.profile(run, worker, span))
        profile_count = sum(r["files"] for r in self.store.runs())
        return respond({"run": run, "views": available_views(profile, len(files.workers), profile_count)})

    def overview(self, request):
        return respond(self._profile(request).overview())

    def steps(self, request):
        return table_reply(request, self._profile(request).steps())

    def gpu_summary(self, request):
        return table_reply(request, self._profile(request).gpu_summary())

    def operators(self, request):
        group_by = choice_param(request, "group_by", ("name", "name_shape"))
        scope = choice_param(request, "scope", ("all", "compiled", "eager"))
        return table_reply(request, self._profile(request).operators(group_by, scope))

    def operator_stacks(self, request):
        name = text_param(request, "name")
        input_shape = text_param(request, "input_shape", required=False)
        return respond({"name": name, "input_shape": input_shape,
                        "stacks": self._profile(request).operator_stacks(name, input_shape)})

    def kernels(self, request):
        group_by = choice_param(request, "group_by", ("name", "name_op"))
        return table_reply(request, self._profile(request).kernels(group_by))

    def kernel_tensor_cores(self, request):
        return respond(self._profile(request).tensor_core_share())

    def memory_devices(self, request):
        return respond({"devices": self._profile(request).memory_devices()})

    def _memory_query(self, request):
        """(profile, device, start_us, end_us) of a memory route, the device checked."""
        profile = self._profile(request)
        devices = profile.memory_devices()
        device = text_param(request, "device", required=False, default=devices[0] if devices else None)
        if device not in devices:
            raise ApiError(404, "not_found", f"no memory records for device {str(device)[:40]!r}; devices: {', '.join(devices) or 'none'}")
        start_us = float_param(request, "start_us", required=False)
        end_us = float_param(request, "end_us", required=False)
        if start_us is not None and end_us is not None and end_us < start_us:
            raise ApiError(400, "bad_parameter", f"end_us ({end_us}) is before start_us ({start_us})")
        return profile, device, start_us, end_us

    def memory_curve(self, request):
        profile, device, start_us, end_us = self._memory_query(request)
        max_points = int_param(request, "max_points", required=False, default=2000, minimum=10)
        return respond({"device": device, "peaks": asdict(profile.memory_peaks(device, start_us, end_us)),
                        "curve": profile.memory_curve(device, start_us, end_us, min(max_points, 100_000))})

    def memory_events(self, request):
        profile, device, start_us, end_us = self._memory_query(request)
        return table_reply(request, profile.memory_events(device, start_us, end_us))

    def memory_stats(self, request):
        profile, device, start_us, end_us = self._memory_query(request)
        return table_reply(request, profile.memory_stats(device, start_us, end_us))

    def modules(self, request):
        return table_reply(request, self._profile(request).modules())

    def module_flame(self, request):
        return respond(self._profile(request).module_flame())

    def distributed(self, request):
        run = text_param(request, "run")
        span = int_param(request, "span", required=False, default=1, minimum=1)
        files = self.store.run_files(run)
        workers = [w for w, spans in files.workers.items() if span <= len(spans)]
        if not workers:
            raise NotFound(f"no worker of run {run!r} has span {span}")
        # Each worker gives a small summary of its profile, so a run of more ranks than the
        # memory budget holds profiles still gets its view; every one is asked for before any
        # is awaited, so they load one after another without waiting for the next request.
        results = {w: self.store.summary(run, w, span, "distributed", _distributed_part) for w in workers}
        loading = [r for r in results.values() if isinstance(r, Loading)]
        if loading:
            raise StillLoading(loading[0], ready=len(results) - len(loading), total=len(results))
        self._reuse(request, list(results.values()))
        return tables_reply(request, lambda: distributed_view.combine(results),
                            ("steps", "all_steps", "collectives", "calls", "groups", "fsdp", "devices"))

    def diff(self, request):
        a, b = self._profile(request).model, self._profile(request, "_b").model
        return tables_reply(request, lambda: diff_view.diff(a, b), ("operators", "kernels", "steps"))

    def timeline_tracks(self, request):
        profile = self._profile(request)
        index = profile.timeline()
        start, end = profile.model.span_us()
        steps = step_windows(profile.model)[["step", "start_us", "end_us"]]
        return respond({"tracks": index.tracks, "start_us": start, "end_us": end, "origin_us": profile.model.origin_us,
                        "steps": steps, "kinds": list(timeline.KINDS)})

    def _window(self, request):
        start_us = float_param(request, "start_us")
        end_us = float_param(request, "end_us")
        if end_us < start_us:
            raise ApiError(400, "bad_parameter", f"end_us ({end_us}) is before start_us ({start_us})")
        if not math.isfinite(end_us - start_us):  # e.g. -1e308..1e308: bins of width inf, NaN times
            raise ApiError(400, "bad_parameter", "the window from start_us to end_us is too wide")
        return start_us, end_us

    def timeline_slices(self, request):
        index = self._profile(request).timeline()
        start_us, end_us = self._window(request)
        resolution = float_param(request, "resolution_us")
        if resolution <= 0:
            raise ApiError(400, "bad_parameter", "parameter 'resolution_us' must be > 0")
        return respond(index.query(start_us, end_us, resolution, tracks_param(request)))

    def timeline_counters(self, request):
        profile = self._profile(request)
        start_us, end_us = self._window(request)
        points = int_param(request, "points", required=False, default=500, minimum=1)
        return respond({"counters": timeline.counters(profile.model, start_us, end_us, min(points, 5000))})

    def timeline_event(self, request):
        index = self._profile(request).timeline()
        event = int_param(request, "event", minimum=0)
        try:
            return respond(timeline.event_details(index, event))
        except KeyError as exc:
            raise NotFound(exc.args[0]) from None

    def timeline_flows(self, request):
        index = self._profile(request).timeline()
        event = int_param(request, "event", minimum=0)
        try:
            return respond({"event": event, "flows": timeline.event_flows(index, event)})
        except KeyError as exc:
            raise NotFound(exc.args[0]) from None

    def timeline_search(self, request):
        index = self._profile(request).timeline()
        text = text_param(request, "q")
        after_us = float_param(request, "after_us", required=False)
        after_event = int_param(request, "after_event", required=False, minimum=0)
        direction = choice_param(request, "direction", ("next", "prev"))
        return respond(timeline.search(index, text, after_us, direction, tracks_param(request), after_event=after_event))

    def timeline_summary(self, request):
        index = self._profile(request).timeline()
        start_us, end_us = self._window(request)
        return table_reply(request, timeline.range_summary(index, start_us, end_us, tracks_param(request)))

    def trace_file(self, request):
        """The original trace file, as stored (gzip stays gzip), for other viewers."""
        run = text_param(request, "run")
        worker = text_param(request, "worker")
        span = int_param(request, "span", required=False, default=1, minimum=1)
        path, stored, is_gzip = self.store.open_file(run, worker, span)
        name = path.rsplit("/", 1)[-1]
        response = respond_file(request, stored, "application/gzip" if is_gzip else "application/json")
        response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(name)}"
        return response

    def tables(self, request):
        """One raw event table of a profile (`table=kernels` ...), JSON or CSV."""
        name = text_param(request, "table")
        limit = int_param(request, "limit", required=False, default=10000, minimum=0)
        profile = self._profile(request)
        allowed = profile.model.TABLES + ("threads", "devices")
        if name not in allowed:
            raise ApiError(400, "bad_parameter", f"parameter 'table' must be one of {', '.join(allowed)}")
        return table_reply(request, getattr(profile.model, name).head(limit))

    def compiled(self, request):
        """torch.compile: compiled regions, Inductor's kernels per region, compiled vs eager share."""
        model = self._profile(request).model
        return tables_reply(request, lambda: compiled_view.compiled_view(model), ("regions", "kernels", "share"))

    def lightning(self, request):
        """Time per PyTorch Lightning hook; an empty table for a trace without Lightning's ranges."""
        return table_reply(request, self._profile(request).lightning())

    def flops(self, request):
        """FLOPs per operator and model FLOPs utilisation per step."""
        model = self._profile(request).model
        return tables_reply(request, lambda: flops_view.flops_view(model), ("operators", "steps"))

    def cuda_graphs(self, request):
        """CUDA graph replays and the kernels that ran inside them."""
        model = self._profile(request).model
        return tables_reply(request, lambda: cudagraph_view.cuda_graph_view(model), ("launches", "kernels"))
