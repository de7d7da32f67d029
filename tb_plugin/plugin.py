"""The TensorBoard plugin: name, activity check, frontend entry and route table."""

import importlib.resources
import mimetypes
import threading

from tensorboard.plugins import base_plugin

from .cache import ModelCache, default_cache_dir
from .loading import RunStore
from .routes import API_ROUTES

DEFAULT_MAX_MEMORY_MB = 4096
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


def _static_files():
    """{file name: bytes} of the bundled frontend, read once: requests never build paths."""
    root = importlib.resources.files(__package__)
    files = {}
    static = root / "static"
    for entry in static.iterdir():
        if entry.is_file():
            files[entry.name] = entry.read_bytes()
    files["openapi.yaml"] = (root / "openapi.yaml").read_bytes()
    return files


class ProfilerPlugin(base_plugin.TBPlugin):
    """PyTorch Profiler views over the Kineto traces under TensorBoard's logdir."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context):
        flags = getattr(context, "flags", None)
        rescan = getattr(flags, "reload_interval", 30) or 30
        cache_dir = getattr(flags, "profiler_cache_dir", None)
        if cache_dir is None:
            cache_dir = default_cache_dir()
        max_memory_mb = getattr(flags, "profiler_max_memory_mb", None) or DEFAULT_MAX_MEMORY_MB
        self.store = RunStore(context.logdir or "", rescan_seconds=max(float(rescan), 1.0),
                              max_memory_bytes=int(max_memory_mb) << 20,
                              cache=ModelCache(cache_dir) if cache_dir else None)
        self._api = None
        self._apps = None
        self._apps_lock = threading.Lock()

    @property
    def api(self):
        """The `Api` answering the data routes, made on first use."""
        self._answering_apps()
        return self._api

    def is_active(self):
        # Called on every plugins listing: answers from memory and starts the scanner. The
        # first listing comes as the page opens, right after start-up: it waits (a moment for
        # a local logdir, at most a few seconds) for the first scan, which otherwise had not
        # finished and the tab showed as inactive until the page was reloaded.
        if not self.store.logdir:
            return False
        self.store.wait_for_scan(FIRST_LISTING_WAIT_SECONDS)
        return self.store.has_runs()

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="PyTorch Profiler",
                                            disable_reload=True)

    def get_plugin_apps(self):
        # TensorBoard asks for the routes at start-up: each is a stand-in that makes the real
        # apps on the first request, so numpy, pandas, polars and the views are imported only
        # once the plugin is used (~0.5 s and ~60 MB of every TensorBoard start otherwise).
        paths = [f"/{name}" for name in (*_static_files(), *API_ROUTES)]
        return {path: self._deferred_app(path) for path in paths}

    def _deferred_app(self, path):
        def app(environ, start_response):
            return self._answering_apps()[path](environ, start_response)
        return app

    def _answering_apps(self):
        with self._apps_lock:
            if self._apps is None:
                from .api import Api, respond, route

                def static_app(name, body):
                    suffix = "." + name.rsplit(".", 1)[-1]
                    content_type = _STATIC_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
                    headers = {"Content-Security-Policy": PAGE_CSP} if content_type == "text/html" else {}

                    def reply(request):
                        response = respond(body, content_type=content_type)
                        response.headers.update(headers)
                        return response
                    return route(reply)

                self._api = Api(self.store)
                self._apps = {f"/{name}": static_app(name, body) for name, body in _static_files().items()}
                self._apps.update(self._api.routes())
            return self._apps


class ProfilerPluginLoader(base_plugin.TBLoader):
    """Adds the plugin's command-line flags to `tensorboard` and builds the plugin."""

    def define_flags(self, parser):
        group = parser.add_argument_group("pytorch_profiler")
        group.add_argument(
            "--profiler_cache_dir", metavar="DIR", default=None,
            help="Where parsed traces are cached between runs (default: "
                 "$XDG_CACHE_HOME/tb_plugin_pytorch_profiler; empty string disables the cache).")
        group.add_argument(
            "--profiler_max_memory_mb", metavar="MB", type=int, default=DEFAULT_MAX_MEMORY_MB,
            help="Memory budget for parsed traces: least recently used ones are dropped beyond it, and a "
                 f"trace too large to parse within it is refused (default: {DEFAULT_MAX_MEMORY_MB}).")

    def load(self, context):
        return ProfilerPlugin(context)
