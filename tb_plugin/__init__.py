"""PyTorch Profiler plugin for TensorBoard: Kineto traces as columnar tables and views.

Python API::

    import tb_plugin
    profile = tb_plugin.load("worker0.pt.trace.json.gz")   # one trace file -> Profile
    profile.kernels                                        # a pandas DataFrame
    run = tb_plugin.load_run("log/resnet50")               # a run directory -> Run
    run.profile("worker0", span=1)
    run.distributed(span=1)                                # several workers of one run
    tb_plugin.diff(profile_a, profile_b)                   # two profiles side by side

Every loading problem raises `tb_plugin.TraceError`.
"""

__version__ = "0.1.0"  # first: modules imported below read it

from .errors import TraceError  # noqa: E402
from .profile import Profile, Run, diff, load, load_run  # noqa: E402
__all__ = ["Profile", "Run", "TraceError", "diff", "load", "load_run", "__version__"]
