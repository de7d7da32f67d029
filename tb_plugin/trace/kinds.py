"""Event kinds and the args schemas of each kind.

`classify` decides an event's kind from its `ph`, `cat` and `name`; the builder (`batches`,
`build`) holds kinds as small integer codes (`KIND_CODE`). The args Structs name the args
fields each kind's table needs, with their types and defaults (`ARGS_TYPES`).
"""

from functools import lru_cache

import msgspec
from msgspec import Raw

from . import accelerators


_NO_RAW = Raw(b"null")


# Args Structs name the args fields each kind needs and their types: `int` fields become int64
# columns (-1 where absent), `float` fields float64 (NaN), all others text (numbers, lists and
# objects as their JSON). polars reads them (`batches._arg_columns`); when a value does not fit its
# type, msgspec decodes that kind's args event by event with these Structs and their defaults.
NAN = float("nan")


def _i(name: str) -> int:
    return msgspec.field(name=name, default=-1)


def _x(name: str) -> float:
    return msgspec.field(name=name, default=NAN)


def _s(name: str) -> str:
    return msgspec.field(name=name, default="")


def _r(name: str) -> Raw:
    return msgspec.field(name=name, default=_NO_RAW)


class _OpArgs(msgspec.Struct, gc=False):
    external_id: int = _i("External id")
    external_id_lower: int = _i("external id")
    input_dims: Raw = _r("Input Dims")
    input_dims_old: Raw = _r("Input dims")
    input_type: Raw = _r("Input type")
    call_stack: str = _s("Call stack")
    sequence_number: int = _i("Sequence number")
    fwd_thread_id: int = _i("Fwd thread id")
    collective_name: str = _s("Collective name")
    in_msg_nelems: int = _i("In msg nelems")
    out_msg_nelems: int = _i("Out msg nelems")
    group_size: int = _i("Group size")
    dtype: str = _s("dtype")
    process_group_name: str | int = _s("Process Group Name")
    process_group_desc: str = _s("Process Group Description")
    collective_seq: int = _i("Seq")
    # Inductor's launch annotations (torch.compile): which generated kernel an op launched
    kernel_hash: str = _s("kernel_hash")
    kernel_file: str = _s("kernel_file")
    kernel_backend: str = _s("kernel_backend")
    # with_flops=True: the profiler's own FLOP count; Concrete Inputs: non-tensor arguments
    # (stride, padding, ...) that FLOP formulas of convolutions need
    flops: float = _x("flops")
    concrete_inputs: Raw = _r("Concrete Inputs")


class _PythonArgs(msgspec.Struct, gc=False):
    python_id: int = _i("Python id")
    python_parent_id: int = _i("Python parent id")
    python_module_id: int = _i("Python module id")


class _RuntimeArgs(msgspec.Struct, gc=False):
    correlation: int = -1
    external_id: int = _i("External id")
    external_id_lower: int = _i("external id")
    cbid: int = -1


class _DeviceArgs(msgspec.Struct, gc=False):
    correlation: int = -1
    external_id: int = _i("External id")
    external_id_lower: int = _i("external id")
    device: int = -1
    stream: int = -1
    grid: Raw = _NO_RAW
    block: Raw = _NO_RAW
    registers_per_thread: float = _x("registers per thread")
    shared_memory: float = _x("shared memory")
    blocks_per_sm: float = _x("blocks per SM")
    warps_per_sm: float = _x("warps per SM")
    est_achieved_occupancy_pct: float = _x("est. achieved occupancy %")
    bytes: float = NAN
    size: float = NAN  # MTIA's `dma_request` size in bytes
    memory_bandwidth_gbps: float = _x("memory bandwidth (GB/s)")
    # CUDA-graph kernels: CUPTI's node id, and what torch's `_annotate_cuda_graph_trace` merges
    # in from `torch.cuda._graph_annotations.mark_kernels` (torch 2.13): a non-dict annotation
    # as `annotation`, mark_kernels("x") as `str`, merged scopes' non-dict one as `name`. Text:
    # node ids are 64-bit tools ids, which need not fit int64.
    graph_node_id: str = _s("graph node id")
    graph_annotation: str = _s("annotation")
    graph_annotation_str: str = _s("str")
    graph_annotation_name: str = _s("name")
    # the hardware stream of graph work the Python exporter moved to an annotation's lane
    original_stream: int = _i("original_stream")


class _SyncArgs(msgspec.Struct, gc=False):
    correlation: int = -1
    external_id: int = _i("External id")
    external_id_lower: int = _i("external id")
    device: int = -1
    # a float so that absent (NaN) differs from a written -1: a context sync has no stream,
    # which newer Kineto writes as `"stream": -1` on tid 1 (kineto#1356's writer)
    stream: float = NAN
    # Kineto's `cuda_sync` records (Stream Wait Event, Event Sync): the event waited on
    wait_on_stream: int = -1
    wait_on_event_record_correlation: int = _i("wait_on_cuda_event_record_corr_id")
    wait_on_event_id: int = _i("wait_on_cuda_event_id")


class _MemoryArgs(msgspec.Struct, gc=False):
    device_type: int = _i("Device Type")
    device_id: int = _i("Device Id")
    addr: int = _i("Addr")
    bytes: float = _x("Bytes")
    total_allocated: float = _x("Total Allocated")
    total_reserved: float = _x("Total Reserved")


class _MetaArgs(msgspec.Struct, gc=False):
    name: str | int | None = None
    labels: str | None = None
    sort_index: float = NAN


# Event kinds, decided from `ph` and the lower-cased `cat`.
KIND_OP = "op"
KIND_PYTHON = "python"
KIND_RUNTIME = "runtime"
KIND_KERNEL = "kernel"
KIND_MEMCPY = "memcpy"
KIND_MEMSET = "memset"
KIND_SYNC = "sync"
KIND_GPU_ANNOTATION = "gpu_annotation"
KIND_MEMORY = "memory"
KIND_FLOW = "flow"
KIND_META = "meta"
KIND_COUNTER = "counter"
KIND_OTHER = "other"
# An `X` event of a category no backend of `accelerators` lists: device activity when it runs
# on a device's pid and a runtime call launched it (`_Builder.candidate_kinds`), else other.
KIND_CANDIDATE = "candidate"
KIND_SKIPPED = "skipped"
# The builder holds each event's kind as a small integer: comparing int8 codes is what makes
# a table's row mask cheap.
KIND_CODE = {kind: code for code, kind in enumerate(
    (KIND_OP, KIND_PYTHON, KIND_RUNTIME, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_SYNC, KIND_GPU_ANNOTATION,
     KIND_MEMORY, KIND_FLOW, KIND_META, KIND_COUNTER, KIND_OTHER, KIND_CANDIDATE, KIND_SKIPPED))}
KIND_OF_CODE = {code: kind for kind, code in KIND_CODE.items()}

# Categories (lower case) of host calls into CUDA's runtime or driver, and the generic 2021
# names: they do not name the device (`Profile.device_type`). Every backend's runtime and
# device categories are in `accelerators`.
RUNTIME_CATEGORIES = accelerators.CUDA.runtime_categories
# Host-side categories; runtime calls and device activity are told by `accelerators`.
_X_CATEGORIES = {
    "cpu_op": KIND_OP,
    "operator": KIND_OP,
    "user_annotation": KIND_OP,
    "python_function": KIND_PYTHON,
    "gpu_user_annotation": KIND_GPU_ANNOTATION,
}
# Device activity by role (`accelerators`): a sync is no work; a listed backend's syncs get
# their own table (the critical path reads their waits), a sync-like event of an unlisted
# category (`KIND_CANDIDATE`, whose args nobody documents) stays in `other`.
_KIND_OF_ROLE = {accelerators.COMPUTE: KIND_KERNEL, accelerators.TRANSFER: KIND_MEMCPY,
                 accelerators.FILL: KIND_MEMSET, accelerators.SYNC: KIND_SYNC, accelerators.MARKER: KIND_OTHER}
KIND_OF_CANDIDATE_ROLE = {**_KIND_OF_ROLE, accelerators.SYNC: KIND_OTHER}


def classify(ph: str | None, cat: str | None, name: str | None) -> str:
    """Kind of one event from its `ph`, `cat` and `name` (applied to unique triples only)."""
    cat_l = (cat or "").lower()
    if ph == "X":
        kind = _X_CATEGORIES.get(cat_l)
        if kind:
            return kind
        if accelerators.is_runtime_category(cat_l):
            return KIND_RUNTIME
        role = accelerators.device_role(cat_l, name)
        return _KIND_OF_ROLE[role] if role else KIND_CANDIDATE
    if ph in ("i", "I") and name == "[memory]":
        return KIND_MEMORY
    if ph in ("s", "f", "t"):
        return KIND_FLOW
    if ph == "M":
        return KIND_META
    if ph == "C":
        return KIND_COUNTER
    if ph in ("i", "I"):
        return KIND_OTHER
    return KIND_SKIPPED


@lru_cache(maxsize=4096)
def kind_code(ph: str | None, cat: str | None) -> int:
    return KIND_CODE[classify(ph, cat, None)]


# The args fields each kind's table needs (counters keep their args whole: any series name).
ARGS_TYPES: dict[str, type[msgspec.Struct]] = {KIND_OP: _OpArgs, KIND_PYTHON: _PythonArgs, KIND_RUNTIME: _RuntimeArgs, KIND_KERNEL: _DeviceArgs,
               KIND_MEMCPY: _DeviceArgs, KIND_MEMSET: _DeviceArgs, KIND_SYNC: _SyncArgs, KIND_GPU_ANNOTATION: _DeviceArgs,
               KIND_CANDIDATE: _DeviceArgs,
               KIND_MEMORY: _MemoryArgs, KIND_META: _MetaArgs}
