"""Declarations of the trace model's tables (`TraceModel.ops`, `.kernels`, ...): one `Table`
per event table, its columns in the order the model builds them.

Light on purpose (pandas and numpy through `schema`, no polars or msgspec), so the cache,
the views and the docs generator read the model's columns without the parser.

Conventions (see `trace/model.py`): times are float64 µs relative to `TraceModel.origin_us`,
durations float64 µs; text columns are categoricals (one category index per column); -1
means "absent" in integer id columns; `thread` is a row of `threads`, `op` a row of `ops`,
`runtime` a row of `runtime`.
"""

import pandas as pd

from ..schema import NULLABLE, choice, declare, integer, route
from .model import TraceModel

_NAME = ("name", "str", "", "the event's name")
_THREAD = ("thread", "int64", "", "row of the threads table (its pid and tid)")
_TS = ("ts", "float64", "us", "start, relative to the trace origin")
_DUR = ("dur", "float64", "us", "duration (0 for instants; invalid values zeroed and counted as an anomaly)")
_CAT = ("cat", "str", "", "the event's category, lower-cased")
_EXTERNAL_ID = ("external_id", "int64", "", "`External id` arg linking host and device events; -1 when absent")
_CORRELATION = ("correlation", "int64", "", "`correlation` arg pairing a launch with its device activity; -1 when absent")
_DEVICE = ("device", "int64", "", "device number (`device` arg, else the number in the pid)")
_STREAM = ("stream", "int64", "", "stream number (`stream` arg, else the number in the tid)")
_RUNTIME = ("runtime", "int64", "", "row of the runtime call that launched it; -1 when unlinked")
_OP = ("op", "int64", "", "row of the operator that launched it; -1 when none")
_INTERVAL = (_NAME, _THREAD, _TS, _DUR)
_DEVICE_ACTIVITY = (*_INTERVAL, _DEVICE, _STREAM, _CORRELATION, _EXTERNAL_ID)
_TRANSFER = (("bytes", "int64", "bytes", "bytes copied or set; -1 when unknown"),
             ("memory_bandwidth_gbps", "float64", "gb/s", "bandwidth the trace records", NULLABLE))

OPS = declare(
    "ops", "one host operator or annotation (`cpu_op`, `user_annotation`, ...), nested by time per thread",
    *_INTERVAL, _CAT, _EXTERNAL_ID,
    ("sequence_number", "int64", "", "autograd `Sequence number` pairing forward and backward ops; -1 when absent"),
    ("fwd_thread_id", "int64", "", "`Fwd thread id` of a backward op; -1 when absent"),
    ("input_dims", "str", "", "input shapes as canonical JSON; empty when not recorded"),
    ("input_type", "str", "", "input dtypes as canonical JSON; empty when not recorded"),
    ("call_stack", "str", "", "`Call stack` arg (frames joined by ';'); empty when not recorded"),
    ("collective_name", "str", "", "`Collective name` of record_param_comms; empty when absent"),
    ("in_msg_nelems", "int64", "count", "`In msg nelems` of a collective; -1 when absent"),
    ("out_msg_nelems", "int64", "count", "`Out msg nelems` of a collective; -1 when absent"),
    ("group_size", "int64", "count", "`Group size` of a collective; -1 when absent"),
    ("dtype", "str", "", "`dtype` of a collective's data; empty when absent"),
    ("process_group_name", "str", "", "`Process Group Name` of a collective; empty when absent"),
    ("process_group_desc", "str", "", "`Process Group Description` of a collective (mesh_dp, default_pg); empty when absent"),
    ("collective_seq", "int64", "", "`Seq` of a collective in its process group; -1 when absent"),
    ("kernel_hash", "str", "", "Inductor's `kernel_hash` of the generated kernel an op launched; empty when absent"),
    ("kernel_file", "str", "", "Inductor's `kernel_file` (generated source) of that kernel; empty when absent"),
    ("kernel_backend", "str", "", "Inductor's `kernel_backend` (triton, cpp); empty when absent"),
    ("flops", "float64", "flops", "the profiler's FLOP count (with_flops=True); null when absent", NULLABLE),
    ("concrete_inputs", "str", "", "`Concrete Inputs` (non-tensor arguments) as JSON text; empty when absent"),
    ("depth", "int32", "", "nesting depth on its thread; 0 for outermost ops"),
    ("parent", "int64", "", "row of the innermost op enclosing it on its thread; -1 for outermost ops"),
)

PYTHON = declare(
    "python", "one Python function frame (`python_function`, recorded with with_stack=True)",
    *_INTERVAL,
    ("python_id", "int64", "", "`Python id` of the frame; -1 when absent"),
    ("python_parent_id", "int64", "", "`Python parent id`: the calling frame's python_id; -1 when absent"),
    ("python_module_id", "int64", "", "`Python module id` of an nn.Module frame; -1 when absent"),
)

RUNTIME = declare(
    "runtime", "one runtime or driver call on the host (cudaLaunchKernel, cudaMemcpyAsync, ...)",
    *_INTERVAL, _CAT, _CORRELATION, _EXTERNAL_ID,
    ("cbid", "int64", "", "CUPTI callback id; -1 when absent"),
    ("op", "int64", "", "row of the operator that made the call (by External id, else by time); -1 when none"),
)

KERNELS = declare(
    "kernels", "one kernel run on a device",
    *_DEVICE_ACTIVITY,
    ("grid", "str", "", "grid dimensions as JSON \"[x, y, z]\"; empty when unknown"),
    ("block", "str", "", "block dimensions as JSON \"[x, y, z]\"; empty when unknown"),
    ("registers_per_thread", "int64", "count", "registers per thread; -1 when unknown"),
    ("shared_memory", "int64", "bytes", "shared memory per block; -1 when unknown"),
    ("blocks_per_sm", "float64", "", "blocks per SM the trace records", NULLABLE),
    ("warps_per_sm", "float64", "", "warps per SM the trace records", NULLABLE),
    ("est_achieved_occupancy_pct", "float64", "pct", "estimated achieved occupancy the trace records", NULLABLE),
    ("graph_node_id", "str", "", "CUPTI's `graph node id` of a kernel a CUDA graph ran; empty when absent or 0"),
    ("graph_annotation", "str", "", "its torch.cuda._graph_annotations label (`annotation`, else `str`, else `name` "
     "arg, as torch's _annotate_cuda_graph_trace writes them); empty when none"),
    _RUNTIME, _OP,
)

MEMCPY = declare("memcpy", "one memory copy run on a device", *_DEVICE_ACTIVITY, *_TRANSFER, _RUNTIME, _OP)

MEMSET = declare("memset", "one memory set run on a device", *_DEVICE_ACTIVITY, *_TRANSFER, _RUNTIME, _OP)

SYNCS = declare(
    "syncs", "one device-side synchronisation record (CUDA's `cuda_sync`: a stream waiting on an event, a stream, event or context sync the host waited for; MTIA's event_record / event_wait)",
    *_DEVICE_ACTIVITY,
    ("wait_on_stream", "int64", "", "stream the waited-on event was recorded on (Stream Wait Event, Event Sync); -1 when absent"),
    ("wait_on_event_record_correlation", "int64", "", "`wait_on_cuda_event_record_corr_id`: correlation of the cudaEventRecord call that recorded the waited-on event; -1 when absent"),
    ("wait_on_event_id", "int64", "", "`wait_on_cuda_event_id` of the waited-on event; -1 when absent"),
    _RUNTIME, _OP,
)

GPU_ANNOTATIONS = declare("gpu_annotations", "one annotation range on a device stream", *_DEVICE_ACTIVITY)

MEMORY = declare(
    "memory", "one allocator record (`[memory]` instant): an allocation (bytes > 0) or a free (bytes < 0)",
    _THREAD, _TS,
    ("device_type", "int64", "", "allocator device type (0 CPU, 1 CUDA, ...); -1 when absent"),
    ("device_id", "int64", "", "allocator device index; -1 when absent"),
    ("addr", "int64", "", "address of the block; -1 when absent (before PyTorch 1.10)"),
    ("bytes", "int64", "bytes", "bytes allocated (> 0) or freed (< 0); 0 when absent"),
    ("total_allocated", "float64", "bytes", "allocator's `Total Allocated` after the record", NULLABLE),
    ("total_reserved", "float64", "bytes", "allocator's `Total Reserved` after the record", NULLABLE),
    ("op", "int64", "", "row of the innermost op enclosing the record on its thread; -1 when none"),
)

FLOWS = declare(
    "flows", "one flow event: the start (s) or end (f) of an arrow between two events",
    ("flow_id", "int64", "", "the flow's id, the same at both ends"),
    ("phase", "str", "", "`s` start, `f` end (or `t` step)"),
    _CAT, _THREAD, _TS,
    ("binding", "str", "", "`bp` binding point (`e` enclosing slice); empty when absent"),
    ("op", "int64", "", "row of the innermost op around this end on its thread; -1 when none"),
    ("peer", "int64", "", "row of the arrow's other end (first start and first end of one id and category); -1 when none"),
)

COUNTERS = declare(
    "counters", "one value of one series of a counter event (`C`)",
    ("name", "str", "", "the counter's name"), _THREAD, _TS,
    ("series", "str", "", "the series (the key in the event's args)"),
    ("value", "float64", "", "the value; null when not a number", NULLABLE),
)

OTHER = declare(
    "other", "one event of a kind no other table holds (instants, unknown categories)",
    *_INTERVAL,
    ("cat", "str", "", "the event's category as written"),
    ("phase", "str", "", "the event's `ph`"),
)

STEPS = declare(
    "steps", "one host-side ProfilerStep#N range (the longest when a step is recorded twice), in time order",
    ("step", "int64", "", "the step number N"), _TS, _DUR,
    ("op", "int64", "", "row of the range in ops"),
)

THREADS = declare(
    "threads", "one (pid, tid) pair of the trace, with names and sort order from metadata events",
    ("pid", "str", "", "process id as written, stripped"),
    ("tid", "str", "", "thread id as written, stripped"),
    ("process_name", "str", "", "`process_name` metadata; empty when absent"),
    ("process_labels", "str", "", "`process_labels` metadata; empty when absent"),
    ("process_sort_index", "float64", "", "`process_sort_index` metadata", NULLABLE),
    ("thread_name", "str", "", "`thread_name` metadata; empty when absent"),
    ("thread_sort_index", "float64", "", "`thread_sort_index` metadata", NULLABLE),
)

DEVICES = declare(
    "devices", "one device of the trace's `deviceProperties` (names as Kineto writes them)",
    ("id", "float64", "", "device number", NULLABLE),
    ("name", "str", "", "device name; empty when absent"),
    ("totalGlobalMem", "float64", "bytes", "device memory", NULLABLE),
    ("computeMajor", "float64", "", "compute capability, major", NULLABLE),
    ("computeMinor", "float64", "", "compute capability, minor", NULLABLE),
    ("numSms", "float64", "count", "streaming multiprocessors", NULLABLE),
    ("maxThreadsPerMultiprocessor", "float64", "count", "threads per SM at most", NULLABLE),
    ("regsPerBlock", "float64", "count", "registers per block", NULLABLE),
    ("sharedMemPerBlock", "float64", "bytes", "shared memory per block", NULLABLE),
    ("warpSize", "float64", "count", "threads per warp", NULLABLE),
)

# The model's tables in `TraceModel` order (what `/tables` serves and `nbytes` counts).
MODEL_TABLES = (OPS, PYTHON, RUNTIME, KERNELS, MEMCPY, MEMSET, SYNCS, GPU_ANNOTATIONS, MEMORY, FLOWS, COUNTERS, OTHER,
                STEPS, THREADS, DEVICES)


def raw_table(model: TraceModel, table: str, limit: int = 10000) -> pd.DataFrame:
    """The first `limit` rows of the model's table `table` (one of `MODEL_TABLES`)."""
    frame: pd.DataFrame = getattr(model, table)
    return frame.head(limit)


# The route answering with a raw table of the model (see `schema.route`).
TABLES_ROUTE = route(
    "tables",
    "One event table of the trace model (first `limit` rows), as JSON or CSV.",
    raw_table, table=MODEL_TABLES,
    params=(choice("table", tuple(t.name for t in MODEL_TABLES), "The model's table (tb_plugin.trace.model).",
                   required=True),
            integer("limit", "At most this many rows, the first.", 10000, minimum=0)))
