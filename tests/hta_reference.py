"""Holistic Trace Analysis (HolisticTraceAnalysis==0.5.0, the `test` extra) on a single trace
file: the outside reference for the GPU-wait views (idle time, launches, queues).

HTA reads a directory of per-rank files, so each file is linked alone into a temporary
directory. Each file is parsed once per test session and configuration (HTA is slow).
"""

import contextlib
import functools
import os
import tempfile
from pathlib import Path

import pytest

from .conftest import SAMPLES, SHARED_TRACES

# Real traces with device activity: every GPU run in ../shared/traces and in samples/.
GPU_TRACES = [
    *(("shared", run) for run in ("a100_alexnet", "a100_nccl_collectives", "old_format_inference",
                                  "resnet50_v100_2021", "rocm_mi250", "sampled_128rank_job", "triton_kernel",
                                  "v100_ddp_nccl_memory")),
    *(("samples", run) for run in ("gpu_a100_nccl", "gpu_resnet50_v100")),
]


def gpu_trace_files():
    """pytest params: (id, path) of each trace file of `GPU_TRACES` (every span, every rank)."""
    params = []
    for where, run in GPU_TRACES:
        folder = (SHARED_TRACES if where == "shared" else SAMPLES) / run
        files = sorted(folder.glob("*.pt.trace.json.gz")) if folder.is_dir() else []
        if not files:
            params.append(pytest.param(None, id=f"{where}-{run}", marks=pytest.mark.skip(
                reason=f"{folder} is not available (../shared/traces missing)")))
        params += [pytest.param(f, id=f"{where}-{run}-{f.name.split('.')[0]}-{i}") for i, f in enumerate(files)]
    return params


@contextlib.contextmanager
def _env(name, value):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


@functools.lru_cache(maxsize=None)
def hta(path, include_last_profiler_step=True, round_ns=False):
    """(TraceAnalysis, rank) for one trace file, or a skip with HTA's reason.

    By default HTA keeps the last ProfilerStep's device work and the timestamps as recorded
    (HTA 0.5 drops the one and rounds the other unless told; the tests naming those
    differences ask for HTA's defaults).
    """
    trace_analysis = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is not installed")
    folder = Path(tempfile.mkdtemp(prefix="hta_"))
    (folder / Path(path).name).symlink_to(Path(path).resolve())
    try:
        with _env("HTA_DISABLE_NS_ROUNDING", "0" if round_ns else "1"):
            analysis = trace_analysis.TraceAnalysis(trace_dir=str(folder),
                                                    include_last_profiler_step=include_last_profiler_step)
    except Exception as exc:  # HTA's own parsing limits: the comparison cannot be made
        pytest.skip(f"HTA 0.5.0 cannot parse {path}: {exc!r}"[:300])
    return analysis, next(iter(analysis.t.traces))
