"""The Python API: `load` one trace file into a `Profile`, `load_run` a run directory."""

import logging
import os
import time
from dataclasses import dataclass

import numpy as np

from .discovery import discover_runs
from .errors import TraceError
from .stages import STAGE_BUILDING, STAGE_PARSING
from .storage import Storage, TraceBytes, open_single
from .trace.model import build_model
from .trace.parse import POLARS_REFUSED, parse_trace
from .views import diff as diff_view
from .views import distributed as distributed_view
from .views import compiled as compiled_view
from .views import cudagraphs as cudagraph_view
from .views import flops as flops_view
from .views import lightning as lightning_view
from .views import kernels, memory, modules, operators, overview, recommendations, timeline

logger = logging.getLogger(__name__)


def _device_type(model):
    """"CUDA", "ROCm", another accelerator's runtime name, or "CPU"."""
    has_device_work = len(model.kernels) or len(model.memcpy) or len(model.memset)
    # Categoricals may list names of other tables too: look at the values present.
    runtime_names = [str(n) for n in model.runtime["name"].unique()]
    if any(n.startswith("hip") for n in runtime_names):
        return "ROCm"
    cats = {str(c) for c in model.runtime["cat"].unique()} - {"", "cuda_runtime", "cuda_driver", "runtime", "driver"}
    if cats:
        return sorted(cats)[0].rsplit("_", 1)[0].upper()
    return "CUDA" if has_device_work else "CPU"


@dataclass(eq=False)  # identity semantics: a reloaded file is a new Profile
class Profile:
    """One trace file, parsed into a columnar `TraceModel`, and the views computed from it.

    The raw event tables are pandas DataFrames on `profile.model` (`ops`, `python`,
    `runtime`, `kernels`, `memcpy`, `memset`, `gpu_annotations`, `memory`, `flows`,
    `counters`, `other`, `steps`, `threads`, `devices`); see `tb_plugin.trace.model`.
    The methods below are the analysis views; each is a pure function of the model
    (computed on first use and cached on it), documented in `tb_plugin.views`.
    """

    source: str
    model: object
    load_seconds: float = 0.0

    def __repr__(self):
        return f"Profile({self.source!r})"

    # --- overview ---------------------------------------------------------------------------

    def steps(self):
        """Per-step time breakdown; see `tb_plugin.views.overview.steps`."""
        return overview.steps(self.model)

    def gpu_summary(self):
        """Per-GPU utilization, SM efficiency, occupancy, Tensor Core share."""
        return overview.gpu_summary(self.model)

    def recommendations(self):
        """Structured performance recommendations: [{id, severity, text, numbers}]."""
        return recommendations.recommendations(self.model, self.steps(), self.gpu_summary())

    def environment(self):
        return overview.environment(self.model, self.device_type)

    def overview(self):
        """Everything the overview page shows, as one dict of plain data and DataFrames."""
        step_table = self.steps()
        return {
            "environment": self.environment(),
            "steps": step_table,
            "step_mean": step_table.drop(columns="step").mean().to_dict() if len(step_table) else {},
            "gpu_summary": self.gpu_summary(),
            "recommendations": self.recommendations(),
        }

    # --- operators and kernels ---------------------------------------------------------------

    def operators(self, group_by="name", scope="all"):
        """Operator table grouped by "name" or "name_shape", of all ops or only those that ran
        inside torch.compile regions ("compiled") or outside ("eager"); see
        `views.operators.operators`."""
        return operators.operators(self.model, group_by, scope)

    def operator_stacks(self, name, input_shape=None):
        """Call stacks of one operator, with frames (file, line, function)."""
        return operators.operator_stacks(self.model, name, input_shape)

    def kernels(self, group_by="name"):
        """Kernel table grouped by "name" or "name_op"; see `views.kernels.kernels`."""
        return kernels.kernels(self.model, group_by)

    def tensor_core_share(self):
        """Kernel time on / off Tensor Cores."""
        return kernels.tensor_core_share(self.model)

    # --- memory ------------------------------------------------------------------------------

    def memory_devices(self):
        """Devices with allocator records: "CPU", "GPU0", ..."""
        return memory.memory_devices(self.model)

    def memory_curve(self, device, start_us=None, end_us=None, max_points=memory.MAX_CURVE_POINTS):
        """Allocated / reserved bytes over time (downsampled keeping peaks)."""
        return memory.memory_curve(self.model, device, start_us, end_us, max_points)

    def memory_peaks(self, device, start_us=None, end_us=None):
        return memory.memory_peaks(self.model, device, start_us, end_us)

    def memory_events(self, device, start_us=None, end_us=None):
        """Allocations paired with their frees: operator, size, alloc/free time, duration."""
        return memory.memory_events(self.model, device, start_us, end_us)

    def memory_stats(self, device, start_us=None, end_us=None):
        """Per operator: calls, size increase and allocations, self and with children."""
        return memory.memory_stats(self.model, device, start_us, end_us)

    # --- modules -----------------------------------------------------------------------------

    def modules(self):
        """The nn.Module tree with forward and backward times (needs with_stack + with_modules)."""
        return modules.modules(self.model)

    def module_flame(self):
        """The module tree as nested {name, value, children} for a flame graph."""
        return modules.module_flame(self.model)

    # --- torch.compile -----------------------------------------------------------------------

    def compiled(self):
        """One row per compiled region (Dynamo frame, AOTAutograd forward / backward); see
        `views.compiled.compiled`."""
        return compiled_view.compiled(self.model)

    def compiled_kernels(self):
        """Inductor's generated kernels per compiled region; see `views.compiled.compiled_kernels`."""
        return compiled_view.compiled_kernels(self.model)

    def compiled_share(self):
        """Step time inside compiled regions versus eager (one row); see
        `views.compiled.compiled_share`."""
        return compiled_view.compiled_share(self.model)

    def flops(self):
        """Operators with FLOPs (from with_flops or shapes) and their TFLOP/s and share of the
        GPU's peak; see `views.flops.flops_operators`."""
        return flops_view.flops_operators(self.model)

    def mfu(self):
        """FLOPs and model FLOPs utilisation per step; see `views.flops.flops_steps`."""
        return flops_view.flops_steps(self.model)

    def cuda_graph_launches(self):
        """One row per CUDA graph replay with the kernels it ran; see
        `views.cudagraphs.graph_launches`."""
        return cudagraph_view.graph_launches(self.model)

    def cuda_graph_kernels(self):
        """Per kernel name, the calls and time inside CUDA graph replays; see
        `views.cudagraphs.graph_kernels`."""
        return cudagraph_view.graph_kernels(self.model)

    def lightning(self):
        """Time per PyTorch Lightning hook ([pl][profile] ranges); see
        `views.lightning.lightning_hooks`."""
        return lightning_view.lightning_hooks(self.model)

    # --- timeline ----------------------------------------------------------------------------

    def timeline(self):
        """The level-of-detail timeline index (tracks, slices, queries); see views.timeline."""
        return timeline.timeline_index(self.model)

    @property
    def device_type(self):
        return _device_type(self.model)

    def info(self):
        """What the trace holds: device, steps, event counts per kind, time span, anomalies."""
        m = self.model
        start, end = m.span_us()
        devices = [
            {"id": int(d["id"]) if d["id"] == d["id"] else None, "name": str(d["name"]),
             "memory_bytes": int(d["totalGlobalMem"]) if d["totalGlobalMem"] == d["totalGlobalMem"] else None}
            for d in m.devices.to_dict("records")
        ]
        used_devices = sorted(set(np.concatenate([t["device"].to_numpy() for t in (m.kernels, m.memcpy, m.memset)]).tolist()))
        return {
            "source": self.source,
            "device_type": self.device_type,
            "devices": devices,
            "devices_used": [int(d) for d in used_devices],
            "distributed": m.distributed,
            "steps": [int(s) for s in m.steps["step"]],
            "event_counts": {name: int(len(getattr(m, name))) for name in m.TABLES if name != "steps"},
            "threads": int(len(m.threads)),
            "start_us": m.origin_us + start,
            "duration_us": end - start,
            "anomalies": m.anomalies,
            "load_seconds": round(self.load_seconds, 4),
        }


def _no_progress(stage, fraction):
    pass


def profile_from_bytes(data, display_path, progress=_no_progress):
    """Parse and model a trace's JSON (bytes, or a `TraceBytes` whose memory is given back as
    the events are read); every failure is a `TraceError`.

    `progress(stage, fraction)` hears how far the work is, from this thread: `STAGE_PARSING`
    with the fraction of the JSON read so far (0 to 1), then `STAGE_BUILDING` (fraction None)
    while the tables are made and linked."""
    started = time.perf_counter()
    trace = data if isinstance(data, TraceBytes) else TraceBytes(data)
    del data
    total = len(trace.data)
    progress(STAGE_PARSING, 0.0)
    parsed = parse_trace(trace.data, display_path)

    def release(upto=None, give_back=trace.release):
        # The loader releases the input in order as batches finish, and once more at the end.
        give_back(upto)
        if upto is None:
            progress(STAGE_BUILDING, None)
        else:
            progress(STAGE_PARSING, min(upto / total, 1.0))

    parsed.release = release
    del trace
    try:
        model = build_model(parsed)
    except TraceError:
        raise
    # A trace our model cannot hold must not escape as anything else (polars panics included).
    except (Exception, *POLARS_REFUSED) as exc:
        logger.exception("building the model of %s failed", display_path)
        raise TraceError(display_path, f"the events could not be analysed ({type(exc).__name__}: {exc})") from None
    return Profile(display_path, model, time.perf_counter() - started)


def load(path_or_url):
    """Load one trace file (`.json` or `.json.gz`, local path or fsspec URL) into a `Profile`.

    Raises
    ------
    TraceError
        When the file cannot be read or is not a usable Kineto trace; the message names the
        file and the reason.
    """
    storage, name = open_single(path_or_url)
    return profile_from_bytes(storage.read_trace(name), storage.display(name))


class Run:
    """The trace files of one run directory: workers x spans, each loaded on first use.

    `run.workers` lists worker names; `run.spans(worker)` the span numbers (1, 2, ...);
    `run.profile(worker, span)` (or `run[worker, span]`) the `Profile`.
    """

    def __init__(self, storage, files):
        self.storage = storage
        self.files = files
        self._profiles = {}

    def __repr__(self):
        return f"Run({self.storage.display(None)!r}, workers={self.workers})"

    @property
    def workers(self):
        return list(self.files.workers)

    def spans(self, worker):
        return [f.span for f in self._worker_files(worker)]

    def _worker_files(self, worker):
        try:
            return self.files.workers[worker]
        except KeyError:
            raise KeyError(f"no worker {worker!r} in this run; workers: {self.workers}") from None

    def profile(self, worker, span=1):
        files = self._worker_files(worker)
        if not 1 <= span <= len(files):
            raise KeyError(f"worker {worker!r} has spans 1..{len(files)}, not {span}")
        key = (worker, span)
        if key not in self._profiles:
            self._profiles[key] = self._load(files[span - 1].path)
        return self._profiles[key]

    def _load(self, rel):
        return profile_from_bytes(self.storage.read_trace(rel), self.storage.display(rel))

    def __getitem__(self, key):
        worker, span = key if isinstance(key, tuple) else (key, 1)
        return self.profile(worker, span)

    def distributed(self, span=1):
        """Computation / communication per worker and step, collectives and devices for one
        span of every worker that has it; see `tb_plugin.views.distributed.distributed`.

        Profiles not loaded yet are loaded one at a time and not kept: a job of many ranks
        never needs all its profiles in memory at once."""
        workers = [w for w in self.workers if span <= len(self.files.workers[w])]
        if not workers:
            raise KeyError(f"no worker of this run has span {span}")

        def model(worker):
            loaded = self._profiles.get((worker, span))
            return (loaded or self._load(self.files.workers[worker][span - 1].path)).model
        return distributed_view.combine({w: distributed_view.worker_part(model(w)) for w in workers})


def diff(a, b):
    """Compare two profiles (runs, workers or spans): operators, kernels and the step
    breakdown side by side, deltas = b - a; see `tb_plugin.views.diff.diff`."""
    return diff_view.diff(a.model, b.model)


def load_run(dir_or_url):
    """The run in one directory (local path or fsspec URL); trace files load lazily.

    Raises
    ------
    TraceError
        When the directory holds no trace files.
    """
    storage = Storage(dir_or_url)
    if not storage.remote and not os.path.isdir(storage.root):  # not "no trace files in this directory"
        raise TraceError(storage.display(None), "not a directory (a run is the directory holding trace files)"
                         if os.path.exists(storage.root) else "no such directory")
    runs = discover_runs(_TopLevelOnly(storage))
    if "." not in runs:
        raise TraceError(storage.display(None), "no trace files (*.pt.trace.json[.gz]) in this directory")
    return Run(storage, runs["."])


class _TopLevelOnly:
    """A storage view whose walk stops at the root: a run is one directory, not a tree."""

    def __init__(self, storage):
        self._storage = storage

    def __getattr__(self, name):
        return getattr(self._storage, name)

    def walk(self):
        for rel_dir, names in self._storage.walk():
            if rel_dir == ".":
                yield rel_dir, names
            return
