"""The Python API over one trace file: `load` it into a `Profile` (a run directory and its
spans of many ranks are `runs.py`'s)."""

from __future__ import annotations  # annotations name views imported only where used

import importlib
import logging
import os
import pkgutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..store.budget import DEFAULT_MAX_MEMORY_BYTES, RAISE_IT, estimate_parse_bytes, events_in, json_limit
from ..store.discovery import printable
from ..errors import NotFoundError, TraceError
from ..schema import (PROFILE, ROUTES, RUN_SNAPSHOTS, SNAPSHOT, SNAPSHOT_TRACES, TWO_PROFILES, Offer, Route, Tab,
                      ordered_tabs)
from ..stages import STAGE_BUILDING, STAGE_PARSING, STAGE_READING
from ..store.storage import Storage, TraceBytes, open_single
from ..trace.anomalies import describe as describe_anomalies
from ..trace.build import build_model
from ..trace.model import TraceModel
from ..trace.parse import POLARS_REFUSED, parse_trace
from .. import views as views_package
# The views a load and its Overview need; the others are imported by the methods that use
# them: `tb_plugin.load(f).overview()` in a fresh process does not pay for them
# (benchmarks/fresh_bench.py, tests/test_imports.py).
from ..views import compiled as compiled_view
from ..views import cudagraphs as cudagraph_view
from ..views import gpu_idle, launches, memory, overview, sequences
from ..views.common import answer_route
from ..views.coverage import MissingRank
from ..views.listing import offered

if TYPE_CHECKING:  # the deferred views, and the disk cache a load may not use, for annotations
    from ..store.cache import ModelCache
    from ..views import diff as diff_view
    from ..views import distributed as distributed_view
    from ..views import job as job_view
    from ..views import rank_timeline, timeline
    from ..views import regression as regression_view

logger = logging.getLogger(__name__)


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
    model: TraceModel
    load_seconds: float = 0.0

    def __repr__(self) -> str:
        return f"Profile({self.source!r})"

    # --- overview ---------------------------------------------------------------------------

    def steps(self) -> pd.DataFrame:
        """Per-step time breakdown; see `tb_plugin.views.overview.steps`."""
        return overview.steps(self.model)

    def gpu_summary(self) -> pd.DataFrame:
        """Per-GPU utilization, SM efficiency, occupancy, Tensor Core share."""
        return overview.gpu_summary(self.model)

    def counters(self) -> pd.DataFrame:
        """Every value of the trace's hardware counter events (CUPTI PM sampling's `GPU N
        Counters`, MTIA's `mtia_counters`), on the device sampled; see
        `views.counters.counter_samples`."""
        from ..views import counters

        return counters.counter_samples(self.model)

    def step_counters(self) -> pd.DataFrame:
        """Mean per step of the SM throughput and occupancy counters (empty when the trace has
        none); see `views.counters.step_counters`."""
        from ..views import counters

        return counters.step_counters(self.model)

    def recommendations(self) -> list[dict[str, Any]]:
        """Structured performance recommendations: [{id, severity, text, numbers}] (`views.overview.advice`)."""
        return overview.advice(self.model)

    def environment(self) -> dict[str, Any]:
        return overview.environment(self.model)

    def overview(self) -> dict[str, Any]:
        """Everything the overview page shows, as one dict of plain data and DataFrames: the
        route "overview" (`views.overview.overview`)."""
        return overview.overview(self.model)

    # --- operators and kernels ---------------------------------------------------------------

    def operators(self, group_by: str = "name", scope: str = "all") -> pd.DataFrame:
        """Operator table grouped by "name" or "name_shape", of all ops or only those that ran
        inside torch.compile regions ("compiled") or outside ("eager"); see
        `views.operators.operators`."""
        from ..views import operators

        return operators.operators(self.model, group_by, scope)

    def answer(self, route: str, **params: Any) -> Any:
        """The answer of the declared route `route` (`schema.route`, e.g. "lightning") with its
        `params`: the table, or the object of tables, the HTTP API serves for it
        (`views.common.answer_route`)."""
        return answer_of(PROFILE, route, (self,), params)

    def operator_stacks(self, name: str, input_shape: str | None = None) -> list[dict[str, Any]]:
        """Call stacks of one operator, with frames (file, line, function)."""
        from ..views import operators

        return operators.operator_stacks(self.model, name, input_shape)

    def kernels(self, group_by: str = "name") -> pd.DataFrame:
        """Kernel table grouped by "name" or "name_op"; see `views.kernels.kernels`."""
        from ..views import kernels

        return kernels.kernels(self.model, group_by)

    def tensor_core_share(self) -> dict[str, float | str | None]:
        """Kernel time on / off Tensor Cores (matrix cores on AMD), with the vendor's name for them."""
        from ..views import kernels

        return kernels.tensor_core_share(self.model)

    # --- why the GPU waits --------------------------------------------------------------------

    def idle_time(self, by_step: bool = False,
                  kernel_wait_us: float = gpu_idle.KERNEL_WAIT_THRESHOLD_US) -> pd.DataFrame:
        """Idle time per device stream (by_step: per step too), split into host wait, kernel
        wait and other, as HTA's idle time breakdown; see `views.gpu_idle.idle_time`."""
        return gpu_idle.idle_time(self.model, by_step, kernel_wait_us)

    def kernel_launches(self, runtime_cutoff_us: float = launches.RUNTIME_CUTOFF_US,
                        launch_delay_cutoff_us: float = launches.LAUNCH_DELAY_CUTOFF_US,
                        flag: str | None = None) -> pd.DataFrame:
        """Per launch (keyed by correlation): runtime call and device durations, launch delays,
        launch-bound and outlier flags, as HTA's get_cuda_kernel_launch_stats (`flag`: only
        "launch_bound", "runtime_outlier" or "launch_delay_outlier" ones); see
        `views.launches.kernel_launches`."""
        return launches.kernel_launches(self.model, runtime_cutoff_us, launch_delay_cutoff_us, flag)

    def kernel_launch_summary(self, runtime_cutoff_us: float = launches.RUNTIME_CUTOFF_US,
                              launch_delay_cutoff_us: float = launches.LAUNCH_DELAY_CUTOFF_US) -> pd.DataFrame:
        """`kernel_launches` per device activity name: counts, means, flagged launches."""
        return launches.kernel_launch_summary(self.model, runtime_cutoff_us, launch_delay_cutoff_us)

    def queue_length(self) -> pd.DataFrame:
        """Launch queue per device stream over time (HTA's queue length, plus launched and
        not finished); see `views.queues.queue_length`."""
        from ..views import queues

        return queues.queue_length(self.model)

    def memory_bandwidth(self) -> pd.DataFrame:
        """Memcpy/memset bandwidth per device stream over time; see `views.queues`."""
        from ..views import queues

        return queues.memory_bandwidth(self.model)

    def kernel_sequences(self, length: int = sequences.DEFAULT_LENGTH, top: int = sequences.DEFAULT_TOP) -> pd.DataFrame:
        """The most time-consuming sequences of `length` kernels repeating back to back on a
        stream (fusion candidates), with the operators that launched them and time per step;
        see `views.sequences.kernel_sequences`."""
        return sequences.kernel_sequences(self.model, length, top)

    def gpu_annotations(self) -> pd.DataFrame:
        """Device time per GPU user annotation range, nested by path; see
        `views.gpu_annotations.gpu_annotations`."""
        from ..views import gpu_annotations

        return gpu_annotations.gpu_annotations(self.model)

    def critical_path(self, step: int | None = None, table: str = "segments") -> pd.DataFrame:
        """The chain of CPU work, launches, device activity and waits that decides `step`'s
        length (the first step when None): "segments" (in time order), "categories" (time per
        category) or "operators" (top operators on it); see `views.critical_path`."""
        from ..views import critical_path

        return critical_path.critical_path_table(self.model, step, table)

    def queue_length_summary(self) -> pd.DataFrame:
        """Per device stream: queue maximum, mean, time at zero, copy bytes and peak bandwidth."""
        from ..views import queues

        return queues.queue_length_summary(self.model)

    # --- memory ------------------------------------------------------------------------------

    def memory_devices(self) -> list[str]:
        """Devices with allocator records: "CPU", "GPU0", ..."""
        return memory.memory_devices(self.model)

    def memory_curve(self, device: str, start_us: float | None = None, end_us: float | None = None,
                     max_points: int = memory.MAX_CURVE_POINTS) -> pd.DataFrame:
        """Allocated / reserved bytes over time (downsampled keeping peaks)."""
        return memory.memory_curve(self.model, device, start_us, end_us, max_points)

    def memory_peaks(self, device: str, start_us: float | None = None, end_us: float | None = None) -> memory.MemoryPeaks:
        return memory.memory_peaks(self.model, device, start_us, end_us)

    def memory_events(self, device: str, start_us: float | None = None, end_us: float | None = None) -> pd.DataFrame:
        """Allocations paired with their frees: operator, size, alloc/free time, duration."""
        return memory.memory_events(self.model, device, start_us, end_us)

    def memory_stats(self, device: str, start_us: float | None = None, end_us: float | None = None) -> pd.DataFrame:
        """Per operator: calls, size increase and allocations, self and with children."""
        return memory.memory_stats(self.model, device, start_us, end_us)

    # --- modules -----------------------------------------------------------------------------

    def modules(self) -> pd.DataFrame:
        """The nn.Module tree with forward and backward times (needs with_stack + with_modules)."""
        from ..views import modules

        return modules.modules(self.model)

    def module_flame(self) -> dict[str, Any]:
        """The module tree as nested {name, value, children} for a flame graph."""
        from ..views import modules

        return modules.module_flame(self.model)

    # --- torch.compile -----------------------------------------------------------------------

    def compiled(self) -> pd.DataFrame:
        """One row per compiled region (Dynamo frame, AOTAutograd forward / backward); see
        `views.compiled.compiled`."""
        return compiled_view.compiled(self.model)

    def compiled_kernels(self) -> pd.DataFrame:
        """Inductor's generated kernels per compiled region; see `views.compiled.compiled_kernels`."""
        return compiled_view.compiled_kernels(self.model)

    def compiled_share(self) -> pd.DataFrame:
        """Step time inside compiled regions versus eager (one row); see
        `views.compiled.compiled_share`."""
        return compiled_view.compiled_share(self.model)

    def flops(self) -> pd.DataFrame:
        """Operators with FLOPs (from with_flops or shapes) and their TFLOP/s and share of the
        GPU's peak; see `views.flops.flops_operators`."""
        from ..views import flops as flops_view

        return flops_view.flops_operators(self.model)

    def mfu(self) -> pd.DataFrame:
        """FLOPs and model FLOPs utilisation per step; see `views.flops.flops_steps`."""
        from ..views import flops as flops_view

        return flops_view.flops_steps(self.model)

    def cuda_graph_launches(self) -> pd.DataFrame:
        """One row per CUDA graph replay with the kernels it ran; see
        `views.cudagraphs.graph_launches`."""
        return cudagraph_view.graph_launches(self.model)

    def cuda_graph_kernels(self) -> pd.DataFrame:
        """Per kernel name, the calls and time inside CUDA graph replays; see
        `views.cudagraphs.graph_kernels`."""
        return cudagraph_view.graph_kernels(self.model)

    def cuda_graph_annotations(self) -> pd.DataFrame:
        """Graph kernels per torch.cuda._graph_annotations label; see
        `views.cudagraphs.graph_annotations`."""
        return cudagraph_view.graph_annotations(self.model)

    def lightning(self) -> pd.DataFrame:
        """Time per PyTorch Lightning hook ([pl][profile] ranges); see
        `views.lightning.lightning_hooks`."""
        from ..views import lightning as lightning_view

        return lightning_view.lightning_hooks(self.model)

    # --- timeline ----------------------------------------------------------------------------

    def timeline(self) -> timeline.TimelineIndex:
        """The level-of-detail timeline index (tracks, slices, queries); see views.timeline."""
        from ..views import timeline

        return timeline.timeline_index(self.model)

    def timeline_tracks(self) -> dict[str, Any]:
        """The Trace view's frame: tracks, time span, origin, steps and slice kinds."""
        from ..views import timeline

        return timeline.tracks_view(self.model)

    def timeline_critical_path(self, step: int | None = None) -> pd.DataFrame:
        """The critical path of `step` (the first step when None) as `critical_path` gives its
        segments, each with the Trace view track it lies on (`views.timeline.critical_path_tracks`)."""
        from ..views import timeline

        return timeline.critical_path_tracks(self.model, step)

    def timeline_counters(self, start_us: float, end_us: float, points: int = 500) -> list[dict[str, Any]]:
        """Counter series (memory, ...) sampled at `points` times over [start_us, end_us]."""
        from ..views import timeline

        return timeline.counters(self.model, start_us, end_us, points)

    def timeline_event(self, event: int) -> dict[str, Any]:
        """Everything known about one slice (`views.timeline.event_details`)."""
        from ..views import timeline

        return timeline.event_details(self.timeline(), event)

    def timeline_flows(self, event: int) -> list[dict[str, Any]]:
        """Launch and forward -> backward arrows touching one slice."""
        from ..views import timeline

        return timeline.event_flows(self.timeline(), event)

    def timeline_search(self, text: str, after_us: float | None = None, direction: str = "next",
                        tracks: Sequence[int] | None = None, after_event: int | None = None) -> dict[str, Any]:
        """Slices whose name contains `text`, from a position on (`views.timeline.search`)."""
        from ..views import timeline

        return timeline.search(self.timeline(), text, after_us, direction, tracks, after_event=after_event)

    def timeline_summary(self, start_us: float, end_us: float, tracks: Sequence[int] | None = None) -> pd.DataFrame:
        """Per name: count and time inside [start_us, end_us] (`views.timeline.range_summary`)."""
        from ..views import timeline

        return timeline.range_summary(self.timeline(), start_us, end_us, tracks)

    # --- what the trace holds ----------------------------------------------------------------

    def table_names(self) -> tuple[str, ...]:
        """The names `table` takes: the event tables, `threads` and `devices`."""
        return self.model.TABLES + ("threads", "devices")

    def table(self, name: str) -> pd.DataFrame:
        """One raw event table of the model (see `tb_plugin.trace.model`)."""
        if name not in self.table_names():
            raise NotFoundError(f"no table {name!r}; tables: {', '.join(self.table_names())}")
        return getattr(self.model, name)

    def available_views(self, worker_count: int = 1, trace_file_count: int = 1) -> list[str]:
        """The views that have data for this profile: the run has `worker_count` workers and
        the log directory `trace_file_count` trace files (diff needs a second one); each view's
        tab says when it is offered (`schema.tab`)."""
        declared_tabs()  # every view imported, its tab declared
        return offered(self.offer(worker_count, trace_file_count))

    def offer(self, worker_count: int = 1, trace_file_count: int = 1) -> Offer:
        """What decides which tabs are offered for this profile (`schema.Offer`), its run having
        `worker_count` workers and the log directory `trace_file_count` trace files: the input of
        the views route (`schema.OFFERED`)."""
        return Offer(self.model, worker_count, trace_file_count)

    def distributed_part(self) -> distributed_view.WorkerPart:
        """What the distributed view needs of this worker (`views.distributed.worker_part`)."""
        from ..views import distributed as distributed_view

        return distributed_view.worker_part(self.model)

    def job_part(self) -> job_view.RankPart:
        """What the job view needs of this rank (`views.job.rank_part`)."""
        from ..views import job as job_view

        return job_view.rank_part(self.model)

    def step_causes_part(self) -> regression_view.StepCauses:
        """What a rank-by-rank comparison of two runs needs of this trace: each step's causes
        (`views.regression.step_causes`)."""
        from ..views import regression as regression_view

        return regression_view.step_causes_part(self.model)

    def operator_names(self) -> regression_view.OperatorNames:
        """Its operator names and device type: what proposing a B for a diff compares
        (`views.regression.operator_names`)."""
        from ..views import regression as regression_view

        return regression_view.operator_names(self.model, self.device_type)

    def rank_timeline_part(self) -> rank_timeline.RankTimelinePart:
        """What the Trace view's ranks mode draws of this rank while it is collapsed
        (`views.rank_timeline.rank_timeline_part`)."""
        from ..views import rank_timeline

        return rank_timeline.rank_timeline_part(self.model)

    @property
    def device_type(self) -> str:
        return self.model.device_type

    def anomalies(self) -> list[dict[str, object]]:
        """The repairs and losses of the import, as rows {key, severity ("data_loss" first,
        then "info"), meaning, value (the count)}; see `tb_plugin.trace.anomalies`."""
        return describe_anomalies(self.model.anomalies)

    def health(self) -> pd.DataFrame:
        """Trace health: torch's trace-validator rules it breaks (same names and counts as
        `torch.profiler._trace_validator.validate_trace`), the import's repairs and losses, and
        events outside the session, skewed, overlapping or unpaired; see `views.health.health`."""
        from ..views import health

        return health.health(self.model)

    def info(self) -> dict[str, Any]:
        """What the trace holds (`views.overview.trace_info`), with its file (`source`) and
        how long it took to load (`load_seconds`)."""
        return {"source": printable(self.source), **overview.trace_info(self.model),
                "load_seconds": round(self.load_seconds, 4)}


def _import_views() -> None:
    """Import each module of `tb_plugin.views`, so that a new view's routes and tab are found
    without a list of them."""
    for module in pkgutil.iter_modules(views_package.__path__):
        importlib.import_module(f"{views_package.__name__}.{module.name}")


def declared_routes() -> dict[str, Route]:
    """Every route declared with `schema.route`."""
    _import_views()
    return ROUTES


def declared_tabs() -> list[Tab]:
    """Every tab declared with `schema.tab`, in their order."""
    _import_views()
    return ordered_tabs()


def _no_progress(stage: str, fraction: float | None) -> None:
    pass


def profile_from_bytes(data: bytes | TraceBytes, display_path: str,
                       progress: Callable[[str, float | None], None] = _no_progress,
                       admit: Callable[[int, int], None] | None = None) -> Profile:
    """Parse and model a trace's JSON (bytes, or a `TraceBytes` whose memory is given back as
    the events are read); every failure is a `TraceError`.

    `progress(stage, fraction)` hears how far the work is, from this thread: `STAGE_PARSING`
    with the fraction of the JSON read so far (0 to 1), then `STAGE_BUILDING` (fraction None)
    while the tables are made and linked. `admit(events, json_bytes)` is called once the
    events are counted, before the tables are built: it may raise a `TraceError` to stop a
    load that would not fit in memory (the loader's budget)."""
    started = time.perf_counter()
    trace = data if isinstance(data, TraceBytes) else TraceBytes(data)
    del data
    total = len(trace.data)
    progress(STAGE_PARSING, 0.0)
    parsed = parse_trace(trace.data, display_path)
    if admit is not None:
        admit(len(parsed.events), total)

    def release(upto: int | None = None, give_back: Callable[[int | None], None] = trace.release) -> None:
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


def check_trace(data: bytes, display_path: str) -> None:
    """Raise `TraceError` unless `data` parses as a Kineto trace; nothing is modelled (the
    server's check of a file it would serve from outside the log directory)."""
    parse_trace(data, display_path)


def _over_budget(display: str, need: str, max_memory_bytes: int, then: str = "") -> TraceError:
    return TraceError(display, f"too large to load: {need}, more than the {max_memory_bytes >> 20} MiB memory budget "
                               f"({RAISE_IT}){then}")


def read_profile(storage: Storage, name: str, max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
                 progress: Callable[[str, float | None], None] = _no_progress, *,
                 reserve: Callable[[int], None] | None = None, admit: Callable[[int, int], None] | None = None) -> Profile:
    """Parse the trace file `name` of `storage` within the memory budget `max_memory_bytes`:
    how every door parses a trace (TensorBoard's loader, `preprocess`, `load`, `load_run`,
    the command line), so each refuses what the others refuse, at the same cost.

    1. Before reading: the peak a parse adds is estimated (`budget.estimate_parse_bytes`) from
       the JSON's size (a gzip's trailer's claim) and the density of events in its first MB;
       beyond the budget the file is refused unread. `reserve(need)` then hears the estimate.
    2. The read inflates at most `budget.json_limit` bytes: a gzip bomb stops there (a 5 MB
       file of 5 GiB of whitespace is refused in about a second).
    3. Once the events are counted, the estimate is made again with their number: beyond the
       budget the load stops before the tables are built; else `admit(need)` hears it.

    `progress(stage, fraction)` hears how far the load is (`STAGE_READING`, then as
    `profile_from_bytes` says); `reserve` and `admit` may raise to stop the load."""
    display = storage.display(name)
    json_bytes, head = storage.json_sample(name)
    need = estimate_parse_bytes(json_bytes, events_in(json_bytes, head))
    if need > max_memory_bytes:
        raise _over_budget(display, f"parsing it needs about {need >> 20} MiB", max_memory_bytes)
    if reserve is not None:
        reserve(need)
    stored = storage.read_trace(name, lambda fraction: progress(STAGE_READING, fraction),
                                limit=json_limit(max_memory_bytes))

    def counted(events: int, json_bytes: int) -> None:
        need = estimate_parse_bytes(json_bytes, events)
        if need > max_memory_bytes:
            raise _over_budget(display, f"its {events:,} events need about {need >> 20} MiB", max_memory_bytes,
                               "; the load was cancelled")
        if admit is not None:
            admit(need, json_bytes)

    return profile_from_bytes(stored, display, progress, admit=counted)


def load_through_cache(storage: Storage, name: str, cache: ModelCache | None,
                       max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
                       progress: Callable[[str, float | None], None] = _no_progress, *,
                       reserve: Callable[[int], None] | None = None,
                       admit: Callable[[int, int], None] | None = None) -> tuple[Profile, dict | None]:
    """(the profile of the trace file `name` of `storage`, the identity of the file its entry
    in the disk cache `cache` is of, or None: no cache, or the file changed while it was
    parsed): the one cache-or-parse function of every door, `load(..., cache_dir=...)`,
    `runs.Run` and TensorBoard's loader (`loading.RunStore`).

    With `cache` (a `cache.ModelCache`), the model is read from it where it holds the file as
    it is (the file's identity: size, mtime, inode, ctime); tables that would take more than
    `max_memory_bytes` are refused before they are read (a `TraceError`), else `reserve(their
    bytes)` hears their size first. Otherwise the file is parsed (`read_profile`, which hears
    `progress`, `reserve` and `admit`, any of which may raise to stop the load) and its model
    stored in the cache, unless the file changed meanwhile. Without a cache, a parse."""
    if cache is None or not cache.enabled:
        return read_profile(storage, name, max_memory_bytes, progress, reserve=reserve, admit=admit), None
    display, identity = storage.display(name), storage.identity(name)
    key = cache.key(display)

    def admit_tables(memory_bytes: int) -> None:
        if memory_bytes > max_memory_bytes:
            raise _over_budget(display, f"its tables take {memory_bytes >> 20} MiB", max_memory_bytes)
        if reserve is not None:
            reserve(memory_bytes)

    model = cache.get(key, identity, admit=admit_tables)
    if model is not None:
        return Profile(display, model), identity
    profile = read_profile(storage, name, max_memory_bytes, progress, reserve=reserve, admit=admit)
    if storage.identity(name) != identity:  # changed while it was parsed: not stored
        return profile, None
    cache.put(key, identity, profile.model, display)
    return profile, identity


def load(path_or_url: str | os.PathLike[str],
         progress: Callable[[str, float | None], None] = _no_progress,
         max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
         cache_dir: str | os.PathLike[str] | None = None) -> Profile:
    """Load one trace file (`.json` or `.json.gz`, local path or fsspec URL) into a `Profile`;
    `progress(stage, fraction)` hears how far the load is (see `profile_from_bytes`). The
    parse stays within `max_memory_bytes`, as TensorBoard's does within
    --profiler_max_memory_mb (same default; see `read_profile`).

    With `cache_dir` (a local path or fsspec URL of a disk cache), the model is read from it
    where it holds the file as it is, else parsed and stored there: the second load of an
    unchanged file reads the cache, as TensorBoard does (`load_through_cache`).

    Raises
    ------
    TraceError
        When the file cannot be read, is not a usable Kineto trace or would take more than
        `max_memory_bytes` to load; the message names the file and the reason.
    """
    storage, name = open_single(path_or_url)
    cache = None
    if cache_dir is not None:  # imported only then: a load without a cache does not pay for it
        from ..store.cache import ModelCache

        cache = ModelCache(cache_dir)
    return load_through_cache(storage, name, cache, max_memory_bytes, progress)[0]


def answer_of(reads: str, route: str, inputs: tuple[Any, ...], params: dict[str, Any],
              admit: Callable[[int, str], None] | None = None, resolve: Callable[[Any], Any] | None = None) -> Any:
    """The answer of the declared route `route` over `inputs` of the kind `reads` (one
    `Profile`, A and B or one `MemorySnapshot`, whose models the views are given; {name:
    `MemorySnapshot`} of a run, a snapshot and {(worker, span): `Profile`}, their models too;
    the parts of a span, ...; `schema.READS`): what the HTTP API serves for it, its parameters
    read (`views.common.answer_route`, which says what `admit` and `resolve` are)."""
    declared_routes()  # the views imported, their routes declared
    models: tuple[Any, ...] = inputs
    if reads in (PROFILE, SNAPSHOT, TWO_PROFILES):
        models = tuple(i.model for i in inputs)
    elif reads == RUN_SNAPSHOTS:  # ({name: held}, {name: TraceError}): the held ones' models, the others' reasons
        models = ({k: v.model for k, v in inputs[0].items()}, {k: MissingRank(e.reason) for k, e in inputs[1].items()})
    elif reads == SNAPSHOT_TRACES:  # (snapshot, {(worker, span): profile}): their models
        models = (inputs[0].model, {k: v.model for k, v in inputs[1].items()})
    return answer_route(route, reads, models, params, admit, resolve)


def diff(a: Profile, b: Profile, threshold_pct: float | None = None) -> diff_view.DiffView:
    """Compare two profiles (runs, workers or spans): operators, kernels and the step
    breakdown side by side, per step, deltas = b - a; why the mean step time changed
    (`explanation`, `contributors`) and the matched operator trees (`tree`), with changes
    under `threshold_pct` of a's mean step time (default 5, the route's) called noise; the
    route "diff" (`views.diff.DIFF_ROUTE`); see `tb_plugin.views.diff.diff`."""
    return answer_of(TWO_PROFILES, "diff", (a, b), {} if threshold_pct is None else {"threshold_pct": threshold_pct})
