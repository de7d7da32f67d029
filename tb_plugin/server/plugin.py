"""The TensorBoard plugin: name, activity check, frontend entry and route table."""

import argparse
import gzip
import importlib.resources
import json
import logging
import mimetypes
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from tensorboard.plugins import base_plugin

from ..store.cache import ModelCache, default_cache_dir
from ..store.budget import DEFAULT_MAX_MEMORY_MB
from .loading import RunStore
from .routes import API_ROUTES

if TYPE_CHECKING:  # the HTTP layer is imported on the first request, not at start-up
    from werkzeug.wrappers import Request, Response

    from .api import Api

logger = logging.getLogger(__name__)

# How long the first plugins listing waits for the first scan of the log directory.
FIRST_LISTING_WAIT_SECONDS = 5.0

PLUGIN_NAME = "pytorch_profiler"
_STATIC_TYPES = {".js": "text/javascript", ".html": "text/html", ".css": "text/css",
                 ".yaml": "text/yaml", ".svg": "image/svg+xml", ".png": "image/png"}
# The page's Content-Security-Policy, sent as a header with the HTML (a <meta> tag alone made
# TensorBoard's security check log "Requires default-src" on every page load). Scripts,
# styles and data from this server only; inline style attributes for the charts' tooltips and
# sizes, data:/blob: images for canvases and downloads; no inline scripts.
PAGE_CSP = ("default-src 'self'; script-src 'self'; img-src 'self' data: blob:; "
            "style-src 'self' 'unsafe-inline'; connect-src 'self'")


def _static_files() -> dict[str, bytes]:
    """{file name: bytes} of the bundled frontend, read once: requests never build paths."""
    root = importlib.resources.files("tb_plugin")
    files = {}
    static = root / "static"
    for entry in static.iterdir():
        if entry.is_file():
            files[entry.name] = entry.read_bytes()
    files["openapi.yaml"] = (root / "openapi.yaml").read_bytes()
    return files


def _warm_up_trace() -> bytes:
    """A small trace with every kind of event the loader handles (operators with shapes and
    stacks, a step, runtime calls launching kernels and copies, flows, memory records), so
    that a warm-up load runs every code path a real first load does."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 400}]
    for i in range(40):
        ts = 5 + i * 9
        events += [
            {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 5}", "pid": 1, "tid": 1, "ts": ts, "dur": 8,
             "args": {"External id": i + 1, "Input Dims": [[i, 3]], "Input type": ["float"], "Call stack": "a.py(1): f"}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 1, "dur": 2,
             "args": {"correlation": 100 + i, "External id": i + 1}},
            {"ph": "X", "cat": "kernel" if i % 4 else "gpu_memcpy", "name": f"kernel{i % 3}", "pid": 0, "tid": 7,
             "ts": ts + 4, "dur": 5, "args": {"correlation": 100 + i, "device": 0, "stream": 7, "grid": [1, 1, 1],
                                              "block": [32, 1, 1], "registers per thread": 8, "bytes": 64}},
            {"ph": "s", "cat": "ac2g", "id": 100 + i, "pid": 1, "tid": 1, "ts": ts + 1, "name": "ac2g"},
            {"ph": "f", "cat": "ac2g", "id": 100 + i, "pid": 0, "tid": 7, "ts": ts + 4, "name": "ac2g", "bp": "e"},
            {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts + 2,
             "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096 * (i % 3), "Bytes": 512 if i % 2 else -512,
                      "Total Allocated": 512 * (i % 2), "Total Reserved": 2048}},
        ]
    events += [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
               {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}]
    return json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "warm-up", "numSms": 80}],
                       "traceEvents": events}).encode()


def warm_up() -> None:
    """Import the libraries a load needs and run the load and the first views once on a small
    trace: the first trace a user opens then costs what later ones do (benchmarks/warm_up.py
    measures the difference). Goes through `profile`, the Python API, as a user's load does:
    the plugin reaches the trace model only through it."""
    from .api import Api  # noqa: F401  (numpy, pandas, orjson, werkzeug; the views)
    from ..python_api.profile import profile_from_bytes

    profile = profile_from_bytes(_warm_up_trace(), "<warm-up>")
    profile.overview()
    profile.operators()
    profile.kernels()
    profile.timeline()


# The warm-up waits for TensorBoard to serve (its first plugins listing) or this long after
# the plugin was loaded, whichever comes first: importing pandas and polars beside
# TensorBoard's own start-up slowed its first answer by ~0.6 s (benchmarks/warm_up.py), and
# on a busy machine TensorBoard's start takes several seconds.
WARM_UP_DELAY_SECONDS = 10.0


def _warm_up_quietly(plugin: "ProfilerPlugin") -> None:
    plugin.serving.wait(WARM_UP_DELAY_SECONDS)
    try:
        warm_up()
        plugin.warmed_up.set()
        # Then the profile the page opens first, with its Overview: the first click finds it
        # ready (benchmarks/click_bench.py). After the warm-up, not beside it: both would
        # compete for the interpreter.
        plugin.store.prefetch_first()
    except Exception:  # a warm-up is an optimisation: a failure only costs the first load its time
        logger.exception("warming up the trace loader failed")
    finally:
        plugin.store.warming_up = False


class ProfilerPlugin(base_plugin.TBPlugin):
    """PyTorch Profiler views over the Kineto traces under TensorBoard's logdir."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext) -> None:
        flags = getattr(context, "flags", None)
        rescan = getattr(flags, "reload_interval", 30) or 30
        cache_dir = getattr(flags, "profiler_cache_dir", None)
        if cache_dir is None:
            cache_dir = default_cache_dir()
        max_memory_mb = getattr(flags, "profiler_max_memory_mb", None) or DEFAULT_MAX_MEMORY_MB
        self.store = RunStore(context.logdir or "", rescan_seconds=max(float(rescan), 1.0),
                              max_memory_bytes=int(max_memory_mb) << 20,
                              cache=ModelCache(cache_dir) if cache_dir else None)
        self._api: "Api | None" = None
        self._apps: dict[str, WSGIApplication] | None = None
        self._apps_lock = threading.Lock()
        self.serving = threading.Event()  # set by the first plugins listing
        self.warmed_up = threading.Event()  # set once the background warm-up has loaded its trace

    @property
    def api(self) -> "Api":
        """The `Api` answering the data routes, made on first use."""
        self._answering_apps()
        return self._api  # type: ignore[return-value]  # (made by `_answering_apps`)

    def is_active(self) -> bool:
        # Called on every plugins listing: answers from memory and starts the scanner. The
        # first listing comes as the page opens, right after start-up: it waits (a moment for
        # a local logdir, at most a few seconds) for the first scan, which otherwise had not
        # finished and the tab showed as inactive until the page was reloaded.
        if not self.store.logdir:
            return False
        self.store.wait_for_scan(FIRST_LISTING_WAIT_SECONDS)
        active = self.store.has_runs()
        self.serving.set()
        return active

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="PyTorch Profiler",
                                            disable_reload=True)

    def get_plugin_apps(self) -> dict[str, WSGIApplication]:
        # TensorBoard asks for the routes at start-up: each is a stand-in that makes the real
        # apps on the first request, so numpy, pandas, polars and the views are imported only
        # once the plugin is used (~0.5 s and ~60 MB of every TensorBoard start otherwise).
        paths = [f"/{name}" for name in (*_static_files(), *API_ROUTES)]
        return {path: self._deferred_app(path) for path in paths}

    def _deferred_app(self, path: str) -> WSGIApplication:
        def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            return self._answering_apps()[path](environ, start_response)
        return app

    def _answering_apps(self) -> dict[str, WSGIApplication]:
        with self._apps_lock:
            if self._apps is None:
                from .api import Api
                from .http import gzipped, respond, route

                def static_app(name: str, body: bytes) -> WSGIApplication:
                    suffix = "." + name.rsplit(".", 1)[-1]
                    content_type = _STATIC_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
                    headers = {"Content-Security-Policy": PAGE_CSP} if content_type == "text/html" else {}
                    # text (the bundle, its styles, openapi.yaml, svg) compressed once, at the
                    # highest level; images are compressed already
                    textual = content_type.startswith("text/") or content_type.endswith("+xml")
                    packed = gzip.compress(body, compresslevel=9, mtime=0) if textual else None

                    def reply(request: "Request") -> "Response":
                        response = respond(body, content_type=content_type)
                        response.headers.update(headers)
                        return gzipped(request, response, packed)
                    return route(reply)

                self._api = Api(self.store)
                self._apps = {f"/{name}": static_app(name, body) for name, body in _static_files().items()}
                self._apps.update(self._api.routes())
            return self._apps


class ProfilerPluginLoader(base_plugin.TBLoader):
    """Adds the plugin's command-line flags to `tensorboard` and builds the plugin."""

    def define_flags(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("pytorch_profiler")
        group.add_argument(
            "--profiler_cache_dir", metavar="DIR", default=None,
            help="Where parsed traces are cached between runs, a local directory or an fsspec URL (default: "
                 "$XDG_CACHE_HOME/tb_plugin_pytorch_profiler; empty string disables the cache).")
        group.add_argument(
            "--profiler_max_memory_mb", metavar="MB", type=int, default=DEFAULT_MAX_MEMORY_MB,
            help="Memory budget for everything the plugin holds (parsed traces, their views, loads in flight, "
                 "cached replies): least recently used traces are dropped beyond it, and a trace too large to "
                 f"load within it is refused (default: {DEFAULT_MAX_MEMORY_MB}).")

    def load(self, context: base_plugin.TBContext) -> ProfilerPlugin:
        plugin = ProfilerPlugin(context)
        if plugin.store.logdir:
            plugin.store.warming_up = True
            # TensorBoard's start does not wait for it: the imports and the first load run on a
            # background thread once it serves, so the first trace a user opens loads as fast as
            # the next ones.
            threading.Thread(target=_warm_up_quietly, args=(plugin,), name="tb_plugin_warm_up",
                             daemon=True).start()
        return plugin
