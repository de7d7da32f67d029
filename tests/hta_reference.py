"""Holistic Trace Analysis (HolisticTraceAnalysis==0.5.0, the `test` extra) on a single trace
file: the outside reference for the GPU-wait views (idle time, launches, queues).

HTA reads a directory of per-rank files, so each file is linked alone into a temporary
directory. Each file is parsed once per test session and configuration (HTA is slow).
"""

import contextlib
import functools
import hashlib
import os
import tempfile
import types
from pathlib import Path

import numpy as np
import pytest

from .helpers import SAMPLES, SHARED_TRACES

# Real traces with device activity: every GPU run in samples/ and in ../shared/traces.
GPU_TRACES = [
    *(("samples", run) for run in ("gpu_a100_nccl", "gpu_resnet50_v100", "gpu_h100_compiled", "gpu_h100_eager_nccl")),
    *(("shared", run) for run in ("a100_alexnet", "a100_nccl_collectives", "old_format_inference",
                                  "resnet50_v100_2021", "rocm_mi250", "sampled_128rank_job", "triton_kernel",
                                  "v100_ddp_nccl_memory")),
]


def gpu_trace_files():
    """pytest params: (id, path) of each trace file of `GPU_TRACES` (every span, every rank),
    each content once: samples/ holds copies of two shared files (gpu_a100_nccl's rank0,
    gpu_resnet50_v100's first worker file), and HTA on the same bytes twice only costs time
    (a minute or more per test module on the 35 MB ResNet-50 file). The copy in samples/ is
    kept: it is there without ../shared."""
    params, seen = [], set()
    for where, run in GPU_TRACES:
        folder = (SHARED_TRACES if where == "shared" else SAMPLES) / run
        files = sorted(folder.glob("*.pt.trace.json.gz")) if folder.is_dir() else []
        if not files:
            params.append(pytest.param(None, id=f"{where}-{run}", marks=pytest.mark.skip(
                reason=f"{folder} is not available (../shared/traces missing)")))
        for i, path in enumerate(files):
            digest = hashlib.sha256(path.read_bytes()).digest()
            if digest not in seen:
                seen.add(digest)
                params.append(pytest.param(path, id=f"{where}-{run}-{path.name.split('.')[0]}-{i}"))
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


class _NumpyWithNumericUnique(types.ModuleType):
    """numpy, but `unique` first casts an object array to float64 (see `_call_graph_shim`)."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def unique(array, *args, **kwargs):
        if isinstance(array, np.ndarray) and array.dtype == object:
            array = array.astype(np.float64)
        return np.unique(array, *args, **kwargs)


@contextlib.contextmanager
def _call_graph_shim():
    """Run HTA 0.5.0's call graph with this environment's pandas 3 / numpy 2.

    What fails: `CallStackGraph._construct_call_stack_graph` (hta/common/trace_call_stack.py)
    builds its array of operator starts and ends with
    `_df.melt(...).replace({"ts": -1, "end": 1}).sort_values("time").to_numpy()`. pandas 2,
    which HTA 0.5.0 was written for, downcast the replaced `kind` column to int64, so the
    array was numeric; pandas 3 keeps the column object, the array is object, and HTA's
    sanity check `if len(np.unique(events, axis=0)) != len(events): logger.error(...)`
    raises TypeError ("The axis argument to unique is not supported for dtype object").

    The shim: that module's `np` becomes numpy whose `unique` casts an object array to
    float64 first, the numeric array pandas 2 gave (the entries are ids, durations, -1/1 and
    times: numbers). Why HTA's answer cannot change: the result only decides whether HTA logs
    "BUG: the sorted array contains duplicates"; every other use of `np` in that module is
    numpy's own, and the events array itself is left as pandas 3 built it (the same values).

    Also, HTA builds the same `CallGraph` of a trace again on every call of
    `get_frequent_cuda_kernel_sequences` (25 s on the V100 trace); inside one use of the
    shim it is built once per trace and rank and handed back (HTA only reads it there).
    """
    call_stack = pytest.importorskip("hta.common.trace_call_stack", reason="HolisticTraceAnalysis is not installed")
    kernel_analysis = pytest.importorskip("hta.analyzers.cuda_kernel_analysis")
    built_by_hta, built = kernel_analysis.CallGraph, {}

    def call_graph(trace, ranks):
        key = (id(trace), tuple(ranks))  # the traces outlive the shim: their ids stay theirs
        if key not in built:
            built[key] = built_by_hta(trace, ranks=ranks)
        return built[key]

    numpy_of_hta = call_stack.np
    call_stack.np, kernel_analysis.CallGraph = _NumpyWithNumericUnique("numpy"), call_graph
    try:
        yield
    finally:
        call_stack.np, kernel_analysis.CallGraph = numpy_of_hta, built_by_hta


@functools.lru_cache(maxsize=None)
def frequent_sequences(path, operator_names):
    """HTA's `get_frequent_cuda_kernel_sequences(name, min_pattern_len=2)` on one file for
    each of `operator_names`, every pattern (`top_k` unbounded), through `_call_graph_shim`:
    {name: frame}, an empty frame where HTA finds none."""
    analysis, rank = hta(path)
    found = {}
    with _call_graph_shim():
        for name in operator_names:
            try:
                found[name] = analysis.get_frequent_cuda_kernel_sequences(
                    name, tempfile.mkdtemp(prefix="hta_seq_"), min_pattern_len=2, rank=rank, top_k=1 << 30,
                    visualize=False)
            except TypeError as exc:  # HTA's own limit: a call graph needs integer thread ids (not 2021's)
                pytest.skip(f"HTA 0.5.0's call graph fails on {path}: {exc!r}"[:300])
    return found


# HTA 0.5.0's critical_path_analysis.py, rewritten where pandas 3 changed what its code does:
# (pattern, replacement, how many times HTA 0.5.0 writes it).
_CRITICAL_PATH_REWRITES = (
    # `df.drop(axis=1, columns=[...])`: pandas 3 refuses both arguments together (ValueError);
    # with axis=1, `columns` names the same columns as alone.
    (r"\.drop\(\s*axis=1,\s*columns=", ".drop(columns=", 7),
    # `df.col.fillna(v, inplace=True)`: pandas 2 filled the column of `df`; pandas 3's
    # copy-on-write fills a temporary copy and `df` keeps its NaN, so every cudaEventRecord
    # loses its producer and HTA drops every stream wait without a word. Written as the
    # assignment pandas 2 performed.
    (r"(\w+)\.(\w+)\.fillna\(([^,()]+), inplace=True\)", r'\1["\2"] = \1["\2"].fillna(\3)', 4),
)


@functools.lru_cache(maxsize=1)
def _critical_path_module():
    """HTA's `hta.analyzers.critical_path_analysis` with `_CRITICAL_PATH_REWRITES` applied,
    as a module of its own (HTA's installed module is left as it is)."""
    import re

    original = pytest.importorskip("hta.analyzers.critical_path_analysis", reason="HolisticTraceAnalysis is not installed")
    source = Path(original.__file__).read_text(encoding="utf-8")
    for pattern, replacement, expected in _CRITICAL_PATH_REWRITES:
        source, found = re.subn(pattern, replacement, source)
        if found != expected:
            pytest.skip(f"not HTA 0.5.0's critical_path_analysis.py: {pattern!r} found {found} times, not {expected}")
    module = types.ModuleType("hta_critical_path_on_pandas_3")
    module.__file__ = original.__file__
    exec(compile(source, original.__file__, "exec"), module.__dict__)  # HTA's own code, two calls rewritten
    return module


@functools.lru_cache(maxsize=None)
def critical_path_graph(path, annotation="ProfilerStep", instance=0):
    """HTA's `critical_path_analysis(rank, annotation, instance)` on one file, through
    `_critical_path_module` (its call stacks come from `hta.common.call_stack`, which needs no
    shim): its `CPGraph`, the path found."""
    analysis, rank = hta(path)
    graph, succeeded = _critical_path_module().CriticalPathAnalysis.critical_path_analysis(
        analysis.t, rank, annotation, instance)
    assert succeeded, f"HTA found no critical path in {path}"
    return graph


def critical_path(path, annotation="ProfilerStep", instance=0):
    """`critical_path_graph(...).get_critical_path_breakdown()`: one row per edge of HTA's
    path (event_idx, duration, type, s_name, pid, tid, stream, ...)."""
    return critical_path_graph(path, annotation, instance).get_critical_path_breakdown()
