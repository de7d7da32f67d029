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
    tb_plugin.show(profile_a, profile_b)                   # the Diff page in a notebook

Every loading problem raises `tb_plugin.TraceError`.
"""

import importlib

from .errors import TraceError
from .version import __version__

__all__ = ["MemorySnapshot", "Profile", "Run", "TraceError", "diff", "diff_ranks", "load", "load_run", "load_snapshot",
           "show", "__version__"]
_FROM_MODULE = {"Profile": "profile", "diff": "profile", "load": "profile", "Run": "runs", "diff_ranks": "runs",
                "load_run": "runs", "MemorySnapshot": "memory_snapshot", "load_snapshot": "memory_snapshot",
                "show": "report"}


def __getattr__(name):
    # The Python API's names come from `profile` and `runs` on first use (PEP 562), so that TensorBoard,
    # which imports this package at start-up for the plugin, does not load numpy, pandas,
    # polars and the views unless the plugin is used.
    if name in _FROM_MODULE:
        return getattr(importlib.import_module(f".{_FROM_MODULE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
