"""PyTorch Profiler plugin for TensorBoard: Kineto traces as columnar tables and views.

Python API::

    import tb_plugin
    profile = tb_plugin.load("worker0.pt.trace.json.gz")   # one trace file -> Profile
    profile.kernels                                        # a pandas DataFrame
    run = tb_plugin.load_run("log/resnet50")               # a run directory -> Run
    run.profile("worker0", span=1)
    run.distributed(span=1)                                # several workers of one run
    tb_plugin.diff(profile_a, profile_b)                   # two profiles side by side, and why
    tb_plugin.diff_ranks(run_a, run_b)                     # two runs of a job, rank by rank
    tb_plugin.load_snapshot("rank0.pickle")                # a CUDA memory snapshot -> MemorySnapshot
    tb_plugin.show(run, view="kernel")                     # the page in a notebook, offline
                                                           # (a Profile or Run shows as it too)
    tb_plugin.show(profile_a, profile_b)                   # the Diff page in a notebook

Every loading problem raises `tb_plugin.TraceError`.
"""

import importlib
import sys
from typing import Any

from .errors import TraceError
from .version import __version__

__all__ = ["MemorySnapshot", "Profile", "Run", "TraceError", "diff", "diff_ranks", "load", "load_run", "load_snapshot",
           "show", "__version__"]
_FROM_MODULE = {"Profile": "python_api.profile", "diff": "python_api.profile", "load": "python_api.profile",
                "Run": "python_api.runs", "diff_ranks": "python_api.runs", "load_run": "python_api.runs",
                "MemorySnapshot": "python_api.snapshots", "load_snapshot": "python_api.snapshots", "show": "report"}


def __getattr__(name: str) -> Any:
    # The Python API's names come from `profile` and `runs` on first use (PEP 562), so that TensorBoard,
    # which imports this package at start-up for the plugin, does not load numpy, pandas,
    # polars and the views unless the plugin is used.
    if name in _FROM_MODULE:
        return getattr(importlib.import_module(f".{_FROM_MODULE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _notebook_html(x: object) -> str:
    return importlib.import_module(".report", __name__).show(x)._repr_html_()


def _show_in_notebooks() -> None:
    """In IPython (Jupyter), a `Profile` or `Run` displays as the page (`show`): registered by
    the types' names, so nothing is imported until one is displayed."""
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if shell is None:
        return
    html = shell.display_formatter.formatters["text/html"]
    for module, name in (("tb_plugin.python_api.profile", "Profile"), ("tb_plugin.python_api.runs", "Run")):
        html.for_type_by_name(module, name, _notebook_html)


_show_in_notebooks()
