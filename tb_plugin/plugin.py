"""The TensorBoard plugin: name, activity check, frontend entry and route table."""

import importlib.resources
import mimetypes

from tensorboard.plugins import base_plugin

from .api import Api, respond, route
from .loading import RunStore

PLUGIN_NAME = "pytorch_profiler"
_STATIC_TYPES = {".js": "text/javascript", ".html": "text/html", ".css": "text/css",
                 ".yaml": "text/yaml", ".svg": "image/svg+xml", ".png": "image/png"}


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
        self.store = RunStore(context.logdir or "", rescan_seconds=max(float(rescan), 1.0))
        self.api = Api(self.store)

    def is_active(self):
        # Called on every plugins listing: answers from memory and starts the scanner.
        return bool(self.store.logdir) and self.store.has_runs()

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="PyTorch Profiler",
                                            disable_reload=True)

    def get_plugin_apps(self):
        apps = {f"/{name}": _static_app(name, body) for name, body in _static_files().items()}
        apps.update(self.api.routes())
        return apps


def _static_app(name, body):
    suffix = "." + name.rsplit(".", 1)[-1]
    content_type = _STATIC_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    return route(lambda request: respond(body, content_type=content_type))
