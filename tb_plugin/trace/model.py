"""The columnar trace model: one pandas table per event kind, links resolved once.

`build_model(parsed)` turns decoded events into a `TraceModel`. Conventions for every table:

- times are float64 microseconds relative to `TraceModel.origin_us` (the earliest event), so
  nanosecond fractions survive; `dur` is float64 microseconds, never negative;
- strings are pandas categoricals (interned names; all `name` columns share one category
  index, so `.cat.categories` may list names that occur only in other tables: use the codes
  or `.unique()` for what a table holds); integer ids use -1 for "absent";
- `thread` is a row index into `TraceModel.threads`; `op` / `runtime` are row indices into
  `ops` / `runtime` (-1 when there is none).
"""

import json
import re
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import compress
from operator import attrgetter
from typing import NamedTuple

import msgspec
import numpy as np
import pandas as pd
import polars as pl
from msgspec import Raw

from .linking import Nesting, lookup
from .parse import FLOW_SCHEMA, POLARS_REFUSED, decode_args, events_frame, flow_columns

_NO_RAW = Raw(b"null")


# Args Structs name the args fields each kind needs and their types: `int` fields become int64
# columns (-1 where absent), `float` fields float64 (NaN), all others text (numbers, lists and
# objects as their JSON). polars reads them (`_arg_columns`); when a value does not fit its
# type, msgspec decodes that kind's args event by event with these Structs and their defaults.
_NAN = float("nan")


def _i(name):
    return msgspec.field(name=name, default=-1)


def _x(name):
    return msgspec.field(name=name, default=_NAN)


def _s(name):
    return msgspec.field(name=name, default="")


def _r(name):
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
    bytes: float = _NAN
    memory_bandwidth_gbps: float = _x("memory bandwidth (GB/s)")


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
    sort_index: float = _NAN


# Event kinds, decided from `ph` and the lower-cased `cat`.
KIND_OP = "op"
KIND_PYTHON = "python"
KIND_RUNTIME = "runtime"
KIND_KERNEL = "kernel"
KIND_MEMCPY = "memcpy"
KIND_MEMSET = "memset"
KIND_GPU_ANNOTATION = "gpu_annotation"
KIND_MEMORY = "memory"
KIND_FLOW = "flow"
KIND_META = "meta"
KIND_COUNTER = "counter"
KIND_OTHER = "other"
KIND_SKIPPED = "skipped"
# The builder holds each event's kind as a small integer: comparing int8 codes is what makes
# a table's row mask cheap.
_KIND_CODE = {kind: code for code, kind in enumerate(
    (KIND_OP, KIND_PYTHON, KIND_RUNTIME, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_GPU_ANNOTATION, KIND_MEMORY,
     KIND_FLOW, KIND_META, KIND_COUNTER, KIND_OTHER, KIND_SKIPPED))}
_KIND_OF_CODE = {code: kind for kind, code in _KIND_CODE.items()}

_X_CATEGORIES = {
    "cpu_op": KIND_OP,
    "operator": KIND_OP,
    "user_annotation": KIND_OP,
    "python_function": KIND_PYTHON,
    "cuda_runtime": KIND_RUNTIME,
    "runtime": KIND_RUNTIME,
    "cuda_driver": KIND_RUNTIME,
    "driver": KIND_RUNTIME,
    "kernel": KIND_KERNEL,
    "gpu_memcpy": KIND_MEMCPY,
    "memcpy": KIND_MEMCPY,
    "gpu_memset": KIND_MEMSET,
    "memset": KIND_MEMSET,
    "gpu_user_annotation": KIND_GPU_ANNOTATION,
}
# Accelerators other than CUDA name their runtime category `<backend>_runtime`/`_driver`.
_RUNTIME_SUFFIXES = ("_runtime", "_driver")
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
_DIGITS = re.compile(r"(-?\d+)")


def classify(ph, cat, name):
    """Kind of one event from its `ph`, `cat` and `name` (applied to unique triples only)."""
    cat_l = (cat or "").lower()
    if ph == "X":
        kind = _X_CATEGORIES.get(cat_l)
        if kind:
            return kind
        if cat_l.endswith(_RUNTIME_SUFFIXES):
            return KIND_RUNTIME
        return KIND_OTHER
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


def _column(structs, attr):
    return list(map(attrgetter(attr), structs))


def _objects(values):
    """Object array of a list without numpy probing each item (bytes and msgspec.Raw expose
    the buffer protocol, which makes `np.array(..., dtype=object)` 50x slower)."""
    return np.fromiter(values, dtype=object, count=len(values))


def _int_field(structs, attr):
    """int64 column of one Struct field; -1 where absent or outside int64."""
    try:
        return np.fromiter(map(attrgetter(attr), structs), dtype=np.int64, count=len(structs))
    except (TypeError, ValueError, OverflowError):  # big or odd values: the careful path
        return _ints(_column(structs, attr))


def _float_field(structs, attr):
    """float64 column of one Struct field; NaN where absent."""
    try:
        return np.fromiter(map(attrgetter(attr), structs), dtype=np.float64, count=len(structs))
    except (TypeError, ValueError, OverflowError):
        return _floats(_column(structs, attr))


def _text_field(structs, attr):
    """String Series of one Struct field: text as is, JSON (`Raw`) as its text, numbers as
    text; null where absent."""
    def text(value):
        if isinstance(value, Raw):
            value = bytes(value)
            return None if value == b"null" else value.decode("utf-8", "replace")
        return value if value is None or isinstance(value, str) else str(value)
    return pl.Series([text(v) for v in _column(structs, attr)], dtype=pl.String)


def _whole(values, missing=-1):
    """int64 from float64, `missing` where NaN or infinite or outside int64 (which the cast
    would turn into -2**63)."""
    return np.where(np.abs(values) < 2.0**63, values, missing).astype(np.int64)


def _floats(values):
    """float64 array; None / non-numbers become NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)


def _ints(values, missing=-1):
    """int64 array; None, NaN and values outside int64 become `missing`."""
    as_float = _floats(values)
    ok = np.isfinite(as_float) & (np.abs(as_float) < 2.0**63)
    out = np.full(len(as_float), missing, dtype=np.int64)
    if ok.all():
        try:  # exact for every int64 (floats lose precision above 2**53)
            return np.array(values, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            pass
    out[ok] = as_float[ok].astype(np.int64)
    return out


def _frame_codes(frame, names, also=()):
    """{name: (codes, values)} for String columns of a polars DataFrame: `values` the column's
    distinct strings in order of first appearance, `codes` an int32 row -> index into
    `values`, -1 where null. Hashing happens in polars, without a Python object per row, and
    all columns take two polars calls (each call has a fixed cost); `also` are more
    expressions for the second call, whose results are returned as numpy arrays by name."""
    distinct = frame.select(pl.col(n).drop_nulls().unique(maintain_order=True).implode() for n in names).row(0) if names else ()
    if not names and not also:
        return {}
    columns = frame.select(*(pl.col(n).cast(pl.Enum(values)).to_physical().cast(pl.Int32).fill_null(-1)
                             for n, values in zip(names, distinct)), *also)
    coded = {n: (columns[n].to_numpy(), values) for n, values in zip(names, distinct)}
    return {**coded, **{name: columns[name].to_numpy() for name in columns.columns if name not in coded}}


def _id_codes(series):
    """int64 code per row of a String Series of ids (-1 where null), equal ids sharing one.
    Ids are integers in nearly every trace: those are factorized as numbers (hashing many
    distinct strings is what `_frame_codes` is slow at); other texts get codes after them."""
    as_int = series.cast(pl.Int64, strict=False)
    is_int = as_int.is_not_null().to_numpy()
    codes = np.full(len(series), -1, dtype=np.int64)
    int_codes, distinct = pd.factorize(as_int.filter(is_int).to_numpy())
    codes[is_int] = int_codes
    text_codes, _ = _coded(series.filter(~is_int))
    codes[~is_int] = np.where(text_codes >= 0, text_codes + len(distinct), -1)
    return codes


def _coded(series):
    """(codes, values) of one String Series (see `_frame_codes`)."""
    return _frame_codes(series.rename("values").to_frame(), ("values",))["values"]


def _intern(values):
    """(codes, categories) of strings: categories unique, always holding "" (None's code)."""
    codes, uniques = pd.factorize(_objects(values), use_na_sentinel=True)
    categories = [u if isinstance(u, str) else str(u) for u in uniques]
    categories_unique, remap = np.unique(np.array(categories + [""], dtype=object), return_inverse=True)
    remap = remap.astype(np.int64)
    codes = np.where(codes < 0, remap[len(categories)], remap[np.clip(codes, 0, None)])
    return codes, pd.Index(categories_unique, dtype=object)


def _recode(coded, mask, transform):
    """Categorical of the rows in `mask` of coded strings (`_coded`), each distinct value
    mapped through `transform` once (not once per row)."""
    codes, uniques = coded
    texts = [transform(u) for u in uniques] + [transform(None)]  # code -1 (missing) -> last
    new_codes, categories = _intern(texts)
    picked = codes[mask]
    return pd.Categorical.from_codes(new_codes[np.where(picked < 0, len(uniques), picked)], categories=categories,
                                     validate=False)


_ALL = slice(None)


def _categorical(coded):
    """Coded strings (`_coded`) as a pandas Categorical; null becomes the empty string."""
    return _recode(coded, _ALL, lambda v: v or "")


def _canonical_json(text):
    """JSON text (e.g. input shapes) written one way whoever wrote it; absent -> ""."""
    if text is None:
        return ""
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))


def _json_categorical(coded):
    """Interned canonical JSON text of coded strings holding JSON; absent -> ""."""
    return _recode(coded, _ALL, _canonical_json)


def _texts(coded):
    """Coded strings back as a list of str (None where null); for small tables only."""
    codes, values = coded
    return [values[c] if c >= 0 else None for c in codes.tolist()]


def _first_valid(primary, secondary):
    return np.where(primary >= 0, primary, secondary)


def first_int(value):
    """The first integer in a pid/tid value (0, "1", "stream 7"); -1 when there is none, or
    when it does not fit an int64 column (a pid of 20 digits)."""
    m = _DIGITS.search("" if value is None else str(value))
    number = int(m.group(1)) if m else -1
    return number if -2**63 <= number < 2**63 else -1


@dataclass
class TraceModel:
    """Every event of one trace file, as columnar tables. See the module docstring."""

    origin_us: float
    threads: pd.DataFrame
    ops: pd.DataFrame
    python: pd.DataFrame
    runtime: pd.DataFrame
    kernels: pd.DataFrame
    memcpy: pd.DataFrame
    memset: pd.DataFrame
    gpu_annotations: pd.DataFrame
    memory: pd.DataFrame
    flows: pd.DataFrame
    counters: pd.DataFrame
    other: pd.DataFrame
    steps: pd.DataFrame
    devices: pd.DataFrame
    metadata: dict
    anomalies: dict = field(default_factory=dict)

    TABLES = ("ops", "python", "runtime", "kernels", "memcpy", "memset", "gpu_annotations",
              "memory", "flows", "counters", "other", "steps")

    def __getstate__(self):
        # Views cache their results on the model; a pickled model (disk cache) holds only data.
        return {k: v for k, v in self.__dict__.items() if k != "_view_cache"}

    def nbytes(self):
        """Approximate memory held by the tables, in bytes."""
        return int(sum(getattr(self, name).memory_usage(index=True, deep=False).sum()
                       for name in self.TABLES + ("threads", "devices")))

    @property
    def distributed(self):
        info = self.metadata.get("distributedInfo")
        return info if isinstance(info, dict) else {}

    def span_us(self):
        """(start, end) of all timed events, relative to the origin; (0, 0) when empty."""
        starts, ends = [], []
        for name in ("ops", "python", "runtime", "kernels", "memcpy", "memset", "gpu_annotations"):
            table = getattr(self, name)
            if len(table):
                starts.append(table["ts"].min())
                ends.append((table["ts"] + table["dur"]).max())
        if len(self.memory):
            starts.append(self.memory["ts"].min())
            ends.append(self.memory["ts"].max())
        if not starts:
            return 0.0, 0.0
        return float(min(starts)), float(max(ends))


# Longer than any profiling session (about 11.6 days): a duration beyond it is invalid.
_MAX_DURATION_US = 1e12

# Events are read in batches of about this much JSON: large enough for polars' threads, small
# enough that a batch's text and its frame stay a small part of the peak memory.
_BATCH_BYTES = 6 << 20

# An event further than this from the median of a trace's timestamps (a day and a bit) is not
# part of the profiled window: no profiling session writes one file over days.
_FAR_FROM_TRACE_US = 1e11


def _batches(raws):
    """Take `raws` (a list of event slices) apart into batches of about `_BATCH_BYTES` of JSON
    each, emptying the list as it goes (an event slice is freed once its batch is done).
    Yields (batch, total length of the slices up to the batch's end)."""
    sizes = np.cumsum(np.fromiter(map(len, raws), dtype=np.int64, count=len(raws)))
    total = int(sizes[-1]) if len(sizes) else 0
    ends = np.searchsorted(sizes, np.arange(_BATCH_BYTES, total, _BATCH_BYTES), side="right").tolist()
    bounds = sorted(set([0, *ends, len(raws)]))
    for end, count in zip(bounds[1:], np.diff(bounds).tolist()):
        batch = raws[:count]
        del raws[:count]
        yield batch, int(sizes[end - 1])


# Batches read at once, each on its own helper thread: while one waits for polars (which
# releases the GIL), the other runs its Python steps, so both cores stay busy.
_READERS = 3


def _read_batches(raws, release):
    """`_read_batch` of each batch of `raws`, in order, on `_READERS` helper threads;
    `release` (see `ParsedTrace`) is called as batches are done, and once at the end."""
    with ThreadPoolExecutor(_READERS, thread_name_prefix="tb_plugin-read") as pool:
        pending = deque()
        for batch, consumed in _batches(raws):
            pending.append((pool.submit(_read_batch, batch), consumed))
            del batch
            if len(pending) > _READERS:
                yield _finished(*pending.popleft(), release)
        while pending:
            yield _finished(*pending.popleft(), release)
    release()


def _finished(future, consumed, release):
    batch = future.result()
    release(consumed)
    return batch


@dataclass
class _Batch:
    """What one batch of events leaves behind: compact columns, strings coded per batch
    (`_frame_codes`) until the builder maps them to codes for the whole trace."""

    coded: dict  # "ph", "cat", "name", "pid", "tid" -> (codes, values)
    ts: np.ndarray
    dur: np.ndarray
    kind: np.ndarray
    args: dict  # kind -> {field: number column, or coded text}
    flows: object  # polars DataFrame (id, bp) of the flow events, or None
    counter_args: object  # the counters' args, decoded (a list, one value per counter event), or None
    anomalies: dict


_TOP_LEVEL_TEXT = ("ph", "cat", "name", "pid", "tid")


def _read_batch(raws):
    """One batch of event slices -> `_Batch` (runs on a helper thread)."""
    anomalies = {}
    frame, lines = events_frame(raws, anomalies)
    del raws
    coded = _frame_codes(frame, _TOP_LEVEL_TEXT)
    ts, dur = frame["ts"].to_numpy(), frame["dur"].to_numpy()
    kind = _classify(coded, ts, anomalies)
    counts = np.bincount(kind, minlength=len(_KIND_CODE))
    present = [k for k in _ARGS_TYPES if counts[_KIND_CODE[k]]]
    frame = frame.with_columns(kind=pl.Series(kind))
    of_kind = {k: pl.col("kind") == _KIND_CODE[k] for k in (*present, KIND_COUNTER)}
    # One args text per line: polars writes an args that is a JSON string as its bare text,
    # which may be empty or blank (the reader would skip that line, leaving a row short); an
    # args that is no object holds no field, so it reads as `{}` (counted).
    is_object = pl.col("args").str.starts_with("{")
    objects = pl.when(is_object).then(pl.col("args")).otherwise(pl.lit("{}"))
    *texts, not_objects = frame.select(  # one polars call for every kind: each call has a fixed cost
        *(objects.filter(of_kind[k]).str.join("\n").alias(k) for k in present),
        pl.col("args").filter(of_kind[KIND_COUNTER]).fill_null("null").str.join(",").alias(KIND_COUNTER),
        (~is_object & pl.col("kind").is_in([_KIND_CODE[k] for k in present])).sum().alias("not_objects"),
    ).row(0)
    if not_objects:
        anomalies["malformed_args_replaced"] = not_objects
    args = {k: _arg_columns(lines.encode(), _ARGS_TYPES[k], anomalies) for k, lines in zip(present, texts)}
    flows = flow_columns(list(compress(lines, kind == _KIND_CODE[KIND_FLOW]))) if counts[_KIND_CODE[KIND_FLOW]] else None
    counter_args = None
    if counts[_KIND_CODE[KIND_COUNTER]]:
        counter_args = _counter_values(texts[-1], frame, of_kind[KIND_COUNTER], counts[_KIND_CODE[KIND_COUNTER]],
                                       anomalies)
    return _Batch(coded, ts, dur, kind, args, flows, counter_args, anomalies)


def _counter_values(joined, frame, is_counter, count, anomalies):
    """The args of a batch's `count` counter events, decoded, one value each in order, from
    their texts as polars writes them joined by ",". polars writes an args that is a JSON
    string as its bare text, which is not JSON (or is several values): then each is decoded
    alone, and one that is not JSON becomes None (counted)."""
    try:
        values = msgspec.json.decode(f"[{joined}]")
        if len(values) == count:
            return values
    except msgspec.DecodeError:
        pass
    values = []
    for text in frame.filter(is_counter)["args"].to_list():  # only for such odd batches
        try:
            values.append(None if text is None else msgspec.json.decode(text))
        except msgspec.DecodeError:
            values.append(None)
            anomalies["malformed_args_replaced"] = anomalies.get("malformed_args_replaced", 0) + 1
    return values


@lru_cache(maxsize=4096)
def _kind_code(ph, cat):
    return _KIND_CODE[classify(ph, cat, None)]


def _classify(coded, ts, anomalies):
    """Kind code (`_KIND_CODE`) of each event of a batch: each distinct (ph, cat) classified
    once."""
    (ph_codes, ph_values), (cat_codes, cat_values), (name_codes, name_values) = (
        coded["ph"], coded["cat"], coded["name"])
    width = len(cat_values) + 1
    pair_codes, pairs = pd.factorize((ph_codes.astype(np.int64) + 1) * width + (cat_codes + 1))
    ph_or_none, cat_or_none = [None, *ph_values], [None, *cat_values]  # code -1 -> None
    kinds = [_kind_code(ph_or_none[p // width], cat_or_none[p % width]) for p in pairs]
    kind = np.array(kinds, dtype=np.int8)[pair_codes] if len(pair_codes) else np.zeros(0, dtype=np.int8)
    # Instant events are allocator records when named "[memory]".
    instant = np.isin(ph_codes, [i for i, v in enumerate(ph_values) if v in ("i", "I")])
    if "[memory]" in name_values:
        kind[instant & (name_codes == name_values.index("[memory]"))] = _KIND_CODE[KIND_MEMORY]
    missing_ts = np.isin(kind, [_KIND_CODE[KIND_META], _KIND_CODE[KIND_SKIPPED]], invert=True) & ~np.isfinite(ts)
    if missing_ts.any():
        anomalies["events_without_ts_dropped"] = int(missing_ts.sum())
        kind[missing_ts] = _KIND_CODE[KIND_SKIPPED]
    return kind


class _NumberField(NamedTuple):
    """How an args field of one number type is read (polars), held (numpy) and marked absent."""

    polars: object
    numpy: object
    absent: object


# Every args field of another type is text (`_is_text`).
_NUMBER_FIELDS = {int: _NumberField(pl.Int64, np.int64, -1), float: _NumberField(pl.Float64, np.float64, _NAN)}


def _is_text(field):
    return field.type not in _NUMBER_FIELDS


def _arg_columns(lines, args_type, anomalies):
    """{field name: column} of the `args_type` fields of args JSON objects, one per line (as
    polars writes them: compact, `{}` where an event has none): int fields as int64 (-1 where
    absent), float fields as float64 (NaN), the others coded (`_frame_codes`; -1 where
    absent; numbers, lists and objects as their JSON)."""
    fields = msgspec.structs.fields(args_type)
    schema = {f.encode_name: pl.String if _is_text(f) else _NUMBER_FIELDS[f.type].polars for f in fields}
    try:
        decoded = pl.read_ndjson(lines, schema=schema)
    except POLARS_REFUSED:
        decoded = _arg_columns_repaired(lines.split(b"\n"), args_type, anomalies)
    numbers = [pl.col(f.encode_name).fill_null(_NUMBER_FIELDS[f.type].absent) for f in fields if not _is_text(f)]
    columns = _frame_codes(decoded, [f.encode_name for f in fields if _is_text(f)], also=numbers)
    return {f.name: columns[f.encode_name] for f in fields}


def _arg_columns_repaired(texts, args_type, anomalies):
    """The args as `_arg_columns` reads them (a DataFrame, a column per JSON key), through msgspec,
    event by event where needed: a value that does not fit its field's type makes that
    event's args the Struct's defaults (counted)."""
    structs, bad = decode_args(texts, args_type)
    if bad:
        anomalies["malformed_args_replaced"] = anomalies.get("malformed_args_replaced", 0) + bad
    read = {int: _int_field, float: _float_field}
    return pl.DataFrame({f.encode_name: pl.Series(read.get(f.type, _text_field)(structs, f.name))
                         for f in msgspec.structs.fields(args_type)})


class _Interner:
    """Global codes for the strings of one column met batch by batch: `values[code]`."""

    def __init__(self):
        self._index = {}
        self.values = []

    def remap(self, coded):
        """Codes for the whole trace of a batch's coded strings (`_frame_codes`); -1 where null."""
        batch_codes, batch_values = coded
        remap = np.empty(len(batch_values) + 1, dtype=np.int32)
        remap[-1] = -1  # batch code -1 (null) stays -1
        for i, value in enumerate(batch_values):  # distinct values only
            code = self._index.get(value)
            if code is None:
                code = self._index[value] = len(self.values)
                self.values.append(value)
            remap[i] = code
        return remap[batch_codes]


# The args fields each kind's table needs (counters keep their args whole: any series name).
_ARGS_TYPES = {KIND_OP: _OpArgs, KIND_PYTHON: _PythonArgs, KIND_RUNTIME: _RuntimeArgs, KIND_KERNEL: _DeviceArgs,
               KIND_MEMCPY: _DeviceArgs, KIND_MEMSET: _DeviceArgs, KIND_GPU_ANNOTATION: _DeviceArgs,
               KIND_MEMORY: _MemoryArgs, KIND_META: _MetaArgs}


def _concat_columns(parts, args_type, interners):
    """{field: column} of `_arg_columns` results, batch after batch; text fields as coded
    strings (`_coded`)."""
    columns = {}
    for f in msgspec.structs.fields(args_type):
        pieces = [part[f.name] for part in parts]
        column = np.concatenate(pieces) if pieces else np.zeros(0, np.int32 if _is_text(f) else _NUMBER_FIELDS[f.type].numpy)
        columns[f.name] = (column, interners[f.name].values) if _is_text(f) else column
    return columns


def _text_interners(args_type):
    return {f.name: _Interner() for f in msgspec.structs.fields(args_type) if _is_text(f)}


class _Builder:
    """Builds the tables of one `TraceModel`; one instance per trace.

    polars reads the events batch by batch into typed columns (`parse.events_frame`); from
    each batch only compact columns are kept: strings as integer codes, times as float64, and
    per kind just the args fields its table needs. So the JSON text of a batch lives only
    while the batch is read, and tables then take their rows by boolean masks.
    """

    def __init__(self, parsed):
        self.anomalies = dict(parsed.anomalies)
        raws, parsed.events = parsed.events, None
        self._interners = {key: _Interner() for key in _TOP_LEVEL_TEXT}
        parts = {key: [] for key in (*_TOP_LEVEL_TEXT, "ts", "dur", "kind")}
        self._arg_parts = {kind: [] for kind in _ARGS_TYPES}
        self._arg_interners = {kind: _text_interners(args_type) for kind, args_type in _ARGS_TYPES.items()}
        self._flow_parts, self._counter_args = [], []
        self._kept_of_kind = {}  # kind -> which of its events (as read) are kept
        for batch in _read_batches(raws, parsed.release):
            for key, interner in self._interners.items():
                parts[key].append(interner.remap(batch.coded[key]))
            parts["ts"].append(batch.ts)
            parts["dur"].append(batch.dur)
            parts["kind"].append(batch.kind)
            for kind, columns in batch.args.items():
                interners = self._arg_interners[kind]
                self._arg_parts[kind].append({name: interners[name].remap(column) if name in interners else column
                                              for name, column in columns.items()})
            if batch.flows is not None:
                self._flow_parts.append(batch.flows)
            if batch.counter_args is not None:
                self._counter_args.append(batch.counter_args)
            for key, count in batch.anomalies.items():
                self.anomalies[key] = self.anomalies.get(key, 0) + count
        del raws  # lets the input buffer go
        empty = {"kind": np.int8, "ts": np.float64, "dur": np.float64}
        joined = {key: np.concatenate(arrays) if arrays else np.zeros(0, empty.get(key, np.int32))
                  for key, arrays in parts.items()}
        del parts
        self.kind = joined["kind"]
        self.ts_all, self.dur_all = joined["ts"], joined["dur"]
        self.ph_coded = (joined["ph"], self._interners["ph"].values)
        self.cat_coded = (joined["cat"], self._interners["cat"].values)
        self.pid_coded = (joined["pid"], self._interners["pid"].values)
        self.tid_coded = (joined["tid"], self._interners["tid"].values)
        name_values = self._interners["name"].values
        self.name_categories = pd.Index(sorted(set(name_values) | {""}), dtype=object)
        name_remap = np.append(self.name_categories.get_indexer(name_values), self.name_categories.get_loc(""))
        self.name_codes = name_remap[joined["name"]]
        skipped = int(self.mask(KIND_SKIPPED).sum()) - self.anomalies.get("events_without_ts_dropped", 0)
        if skipped:
            self.anomalies["unsupported_events_skipped"] = skipped
        self._drop_far_from_the_trace()
        timed = ~self.mask(KIND_META, KIND_SKIPPED)
        # Flow / instant markers far outside the profiled window (e.g. "Record Window End")
        # must not move the origin; intervals define it.
        interval = self.mask(KIND_OP, KIND_RUNTIME, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET)
        base = self.ts_all[interval] if interval.any() else self.ts_all[timed & np.isfinite(self.ts_all)]
        self.origin = float(np.min(base)) if len(base) else 0.0
        self.thread_all, self.thread_keys = self._threads()

    def _drop_far_from_the_trace(self):
        """Skip (and count) the timed events whose ts is more than `_FAR_FROM_TRACE_US` from
        the median: Kineto has written kernels at ts 0 in epoch-µs traces (pytorch/kineto#109),
        which would stretch the trace over decades and round every other time (float64 holds
        µs to ~0.25 at 1.6e15). The median stands where nearly all events are."""
        timed = ~self.mask(KIND_META, KIND_SKIPPED) & np.isfinite(self.ts_all)
        if not timed.any():
            return
        ts = self.ts_all[timed]
        centre = np.partition(ts, len(ts) // 2)[len(ts) // 2]
        far = np.zeros(len(self.kind), dtype=bool)
        far[timed] = np.abs(ts - centre) > _FAR_FROM_TRACE_US
        if far.any():
            # The args, flow and counter columns hold a row per event of their kind as read:
            # they drop the same rows (`_kept`).
            for code in np.unique(self.kind[far]).tolist():
                self._kept_of_kind[_KIND_OF_CODE[code]] = ~far[self.kind == code]
            self.kind[far] = _KIND_CODE[KIND_SKIPPED]
            self.anomalies["events_far_from_the_trace_dropped"] = int(far.sum())

    def _kept(self, kind, rows):
        """`rows` (a row per event of `kind` as read: an array, a polars frame or a list) less
        the events `_drop_far_from_the_trace` skipped."""
        keep = self._kept_of_kind.get(kind)
        if keep is None:
            return rows
        if isinstance(rows, list):
            return [row for row, kept in zip(rows, keep) if kept]
        return rows.filter(pl.Series(keep)) if isinstance(rows, pl.DataFrame) else rows[keep]

    def _threads(self):
        """Thread table row of every event's (pid, tid), both normalised to stripped strings."""
        (pid_codes, pid_values), (tid_codes, tid_values) = self.pid_coded, self.tid_coded
        width = len(tid_values) + 1
        pair_codes, pairs = pd.factorize((pid_codes.astype(np.int64) + 1) * width + (tid_codes + 1))
        pid_text = ["", *(v.strip() for v in pid_values)]
        tid_text = ["", *(v.strip() for v in tid_values)]
        keys, rows = {}, np.empty(len(pairs), dtype=np.int64)
        for i, pair in enumerate(pairs):  # once per distinct (pid, tid), not per event
            rows[i] = keys.setdefault((pid_text[pair // width], tid_text[pair % width]), len(keys))
        return (rows[pair_codes] if len(pair_codes) else np.zeros(0, np.int64)), list(keys)

    def numbers(self, coded, mask):
        """Device / stream numbers from pid or tid values like 0, "1" or "stream 7"."""
        codes, values = coded
        parsed = np.array([first_int(v) for v in values] + [-1], dtype=np.int64)  # code -1 -> last
        return parsed[codes[mask]]

    def mask(self, *kinds):
        """Which events are of one of `kinds`."""
        if len(kinds) == 1:
            return self.kind == _KIND_CODE[kinds[0]]
        return np.isin(self.kind, [_KIND_CODE[k] for k in kinds])

    def names(self, mask):
        return pd.Categorical.from_codes(self.name_codes[mask], categories=self.name_categories, validate=False)

    def ts(self, mask):
        return self.ts_all[mask] - self.origin

    def intervals(self, mask, instants_allowed=False):
        """The columns every interval table starts with: name, thread, ts, dur."""
        return {"name": self.names(mask), "thread": self.thread_all[mask], "ts": self.ts(mask),
                "dur": self.durations(mask, instants_allowed)}

    def cat_lower(self, mask):
        return _recode(self.cat_coded, mask, lambda c: c.lower() if c else "")

    def phases(self, mask):
        return _recode(self.ph_coded, mask, lambda p: p or "")

    def durations(self, mask, instants_allowed=False):
        dur = self.dur_all[mask]
        if instants_allowed:  # instant events have no duration by design
            dur = np.where(np.isnan(dur), 0.0, dur)
        # No event lasts longer than `_MAX_DURATION_US`: a larger value (1e308) is garbage, and
        # would overflow the per-thread sort keys of `Nesting` (ts + thread * span) to inf/NaN.
        bad = ~(dur >= 0) | (dur > _MAX_DURATION_US)
        if bad.any():
            self.anomalies["invalid_durations_zeroed"] = self.anomalies.get("invalid_durations_zeroed", 0) + int(bad.sum())
            dur = np.where(bad, 0.0, dur)
        return dur

    def args(self, kind):
        """The args of the events of `kind` (in event order) as {field: column}."""
        columns = _concat_columns(self._arg_parts[kind], _ARGS_TYPES[kind], self._arg_interners[kind])
        return {name: (self._kept(kind, c[0]), c[1]) if isinstance(c, tuple) else self._kept(kind, c)
                for name, c in columns.items()}

    # --- tables -------------------------------------------------------------------------

    def ops(self):
        m = self.mask(KIND_OP)
        a = self.args(KIND_OP)
        (dims, dims_values), (old, old_values) = a["input_dims"], a["input_dims_old"]  # "Input dims" before 2.x
        input_dims = (np.where(dims >= 0, dims, np.where(old >= 0, old + len(dims_values), -1)), dims_values + old_values)
        return pd.DataFrame({
            **self.intervals(m),
            "cat": self.cat_lower(m),
            "external_id": _first_valid(a["external_id"], a["external_id_lower"]),
            "sequence_number": a["sequence_number"],
            "fwd_thread_id": a["fwd_thread_id"],
            "input_dims": _json_categorical(input_dims),
            "input_type": _json_categorical(a["input_type"]),
            "call_stack": _categorical(a["call_stack"]),
            "collective_name": _categorical(a["collective_name"]),
            "in_msg_nelems": a["in_msg_nelems"],
            "out_msg_nelems": a["out_msg_nelems"],
            "group_size": a["group_size"],
            "dtype": _categorical(a["dtype"]),
            "process_group_name": _categorical(a["process_group_name"]),
            "process_group_desc": _categorical(a["process_group_desc"]),
            "collective_seq": a["collective_seq"],
            "kernel_hash": _categorical(a["kernel_hash"]),
            "kernel_file": _categorical(a["kernel_file"]),
            "kernel_backend": _categorical(a["kernel_backend"]),
            "flops": a["flops"],
            "concrete_inputs": _json_categorical(a["concrete_inputs"]),
        })

    def python(self):
        m = self.mask(KIND_PYTHON)
        a = self.args(KIND_PYTHON)
        return pd.DataFrame({
            **self.intervals(m),
            "python_id": a["python_id"],
            "python_parent_id": a["python_parent_id"],
            "python_module_id": a["python_module_id"],
        })

    def runtime(self):
        m = self.mask(KIND_RUNTIME)
        a = self.args(KIND_RUNTIME)
        return pd.DataFrame({
            **self.intervals(m),
            "cat": self.cat_lower(m),
            "correlation": a["correlation"],
            "external_id": _first_valid(a["external_id"], a["external_id_lower"]),
            "cbid": a["cbid"],
        })

    def device_table(self, kind):
        m = self.mask(kind)
        a = self.args(kind)
        device = a["device"]
        stream = a["stream"]
        if m.any() and ((device < 0).any() or (stream < 0).any()):
            device = np.where(device >= 0, device, self.numbers(self.pid_coded, m))
            stream = np.where(stream >= 0, stream, self.numbers(self.tid_coded, m))
        columns = {
            **self.intervals(m),
            "device": device,
            "stream": stream,
            "correlation": a["correlation"],
            "external_id": _first_valid(a["external_id"], a["external_id_lower"]),
        }
        if kind == KIND_KERNEL:
            columns.update({
                "grid": _json_categorical(a["grid"]),
                "block": _json_categorical(a["block"]),
                "registers_per_thread": _whole(a["registers_per_thread"]),
                "shared_memory": _whole(a["shared_memory"]),
                "blocks_per_sm": a["blocks_per_sm"],
                "warps_per_sm": a["warps_per_sm"],
                "est_achieved_occupancy_pct": a["est_achieved_occupancy_pct"],
            })
        elif kind in (KIND_MEMCPY, KIND_MEMSET):
            columns["bytes"] = _whole(a["bytes"])
            columns["memory_bandwidth_gbps"] = a["memory_bandwidth_gbps"]
        return pd.DataFrame(columns)

    def memory(self):
        m = self.mask(KIND_MEMORY)
        a = self.args(KIND_MEMORY)
        return pd.DataFrame({
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "device_type": a["device_type"],
            "device_id": a["device_id"],
            "addr": a["addr"],
            "bytes": _whole(a["bytes"], missing=0),
            "total_allocated": a["total_allocated"],
            "total_reserved": a["total_reserved"],
        })

    def flows(self):
        m = self.mask(KIND_FLOW)
        flows = self._kept(KIND_FLOW, pl.concat(self._flow_parts) if self._flow_parts else pl.DataFrame(schema=FLOW_SCHEMA))
        flow_ids = _id_codes(flows["id"])
        coded = _frame_codes(flows, ("bp",))
        return pd.DataFrame({
            "flow_id": flow_ids,
            "phase": self.phases(m),
            "cat": self.cat_lower(m),
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "binding": _categorical(coded["bp"]),
        })

    def counters(self):
        m = self.mask(KIND_COUNTER)
        if not m.any():
            no_text = (np.zeros(0, np.int32), [])
            return pd.DataFrame({"name": _categorical(no_text), "thread": np.zeros(0, np.int64),
                                 "ts": np.zeros(0), "series": _categorical(no_text), "value": np.zeros(0)})
        values = self._kept(KIND_COUNTER, [value for part in self._counter_args for value in part])
        # Counter events are rare (one per sample of a few series): a loop over them is cheap.
        rows = [(i, k, v) for i, d in enumerate(values) if isinstance(d, dict) for k, v in d.items()]
        idx = np.array([r[0] for r in rows], dtype=np.int64)
        return pd.DataFrame({
            "name": self.names(m)[idx],
            "thread": self.thread_all[m][idx],
            "ts": self.ts(m)[idx],
            "series": _categorical(_coded(pl.Series([r[1] for r in rows], dtype=pl.String))),
            "value": _floats([r[2] if isinstance(r[2], (int, float)) else None for r in rows]),
        })

    def other(self):
        m = self.mask(KIND_OTHER)
        return pd.DataFrame({
            **self.intervals(m, instants_allowed=True),
            "cat": _recode(self.cat_coded, m, lambda c: c or ""),
            "phase": self.phases(m),
        })

    def threads(self):
        """Thread table with names and sort order from the `M` metadata events."""
        m = self.mask(KIND_META)
        rows = np.array(self.thread_keys, dtype=object).reshape(-1, 2)
        table = pd.DataFrame({"pid": rows[:, 0], "tid": rows[:, 1]})
        if not m.any():
            return table.assign(process_name="", process_labels="", process_sort_index=np.nan,
                                thread_name="", thread_sort_index=np.nan)
        a = self.args(KIND_META)
        meta = pd.DataFrame({
            "what": np.asarray(self.names(m).astype(str)),
            "pid": rows[self.thread_all[m], 0],
            "tid": rows[self.thread_all[m], 1],
            "name": _texts(a["name"]),
            "labels": _texts(a["labels"]),
            "sort_index": a["sort_index"],
        })

        def process_value(what, column):
            chosen = meta[meta["what"] == what].drop_duplicates("pid", keep="last").set_index("pid")[column]
            return table["pid"].map(chosen).astype(object)

        def thread_value(what, column):
            chosen = meta[meta["what"] == what].drop_duplicates(["pid", "tid"], keep="last")
            return table.merge(chosen[["pid", "tid", column]], on=["pid", "tid"], how="left")[column].to_numpy()

        return table.assign(
            process_name=process_value("process_name", "name").fillna("").to_numpy(),
            process_labels=process_value("process_labels", "labels").fillna("").to_numpy(),
            process_sort_index=process_value("process_sort_index", "sort_index").to_numpy(np.float64),
            thread_name=pd.Series(thread_value("thread_name", "name")).fillna("").to_numpy(),
            thread_sort_index=thread_value("thread_sort_index", "sort_index").astype(np.float64),
        )


def _devices(metadata):
    props = metadata.get("deviceProperties") or metadata.get("computeProperties") or []
    rows = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    columns = ["id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms",
               "maxThreadsPerMultiprocessor", "regsPerBlock", "sharedMemPerBlock", "warpSize"]
    table = pd.DataFrame(rows)
    for column in columns:
        if column not in table:
            table[column] = np.nan if column != "name" else ""
        elif column == "name":
            table[column] = [v if isinstance(v, str) else "" if v is None else str(v) for v in table[column]]
        else:  # numbers as float64, NaN where a file has a string, null or a non-finite value
            values = pd.to_numeric(table[column], errors="coerce").to_numpy(np.float64)
            table[column] = np.where(np.isfinite(values), values, np.nan)
    return table


def _link(ops, runtime, device_tables, memory):
    """Resolve op nesting, runtime -> op, device activity -> runtime/op, memory -> op."""
    nesting = Nesting(ops["thread"].to_numpy(), ops["ts"].to_numpy(), ops["dur"].to_numpy())
    ops["depth"] = nesting.depth
    ops["parent"] = nesting.parent
    # Where an External id repeats (a user annotation and the op inside it), the innermost wins.
    by_depth = np.lexsort((-nesting.depth,))
    op_ext = ops["external_id"].to_numpy()
    distinct_ext = pd.unique(op_ext[op_ext > 0])  # hashing: numpy's unique sorts (or is slower still)
    ext_index = by_depth[lookup(op_ext[by_depth], distinct_ext)] if len(ops) else np.zeros(0, np.int64)
    ext_keys = op_ext[ext_index] if len(ops) else np.zeros(0, np.int64)

    def op_of_external(ext):
        pos = lookup(ext_keys, np.where(ext > 0, ext, -1))
        return np.where(pos >= 0, ext_index[np.clip(pos, 0, None)] if len(ext_index) else -1, -1)

    rt_op = op_of_external(runtime["external_id"].to_numpy())
    # Runtime calls without an External id: the innermost op around them on their thread.
    missing = rt_op < 0
    if missing.any():
        rt_op[missing] = nesting.enclosing(runtime["thread"].to_numpy()[missing], runtime["ts"].to_numpy()[missing])
    runtime["op"] = rt_op
    for table in device_tables:
        rt = lookup(runtime["correlation"].to_numpy(), table["correlation"].to_numpy())
        table["runtime"] = rt
        from_runtime = np.where(rt >= 0, rt_op[np.clip(rt, 0, None)] if len(rt_op) else -1, -1)
        table["op"] = np.where(from_runtime >= 0, from_runtime, op_of_external(table["external_id"].to_numpy()))
    memory["op"] = nesting.enclosing(memory["thread"].to_numpy(), memory["ts"].to_numpy())
    return nesting


def _steps(ops):
    """Host-side `ProfilerStep#N` ranges (never the GPU copies), one row per step number."""
    names = pd.Series(ops["name"].cat.categories, dtype=object)
    step_numbers = names.str.extract(STEP_NAME, expand=False)
    step_numbers = step_numbers.where(step_numbers.str.len() <= 18)  # beyond int64 is no step number
    is_step_code = step_numbers.notna().to_numpy()
    codes = ops["name"].cat.codes.to_numpy()
    mask = is_step_code[codes] if len(codes) else np.zeros(0, bool)
    rows = ops[mask]
    steps = pd.DataFrame({
        "step": step_numbers.to_numpy()[codes[mask]].astype(np.int64) if mask.any() else np.zeros(0, np.int64),
        "ts": rows["ts"].to_numpy(),
        "dur": rows["dur"].to_numpy(),
        "op": np.flatnonzero(mask),
    })
    # A step recorded twice on the host (cpu_op and user_annotation): keep the longest.
    steps = steps.sort_values(["step", "dur"], ascending=[True, False]).drop_duplicates("step")
    return steps.sort_values("ts").reset_index(drop=True)


def build_model(parsed):
    """Build the `TraceModel` of one parsed trace."""
    b = _Builder(parsed)
    ops = b.ops()
    runtime = b.runtime()
    kernels = b.device_table(KIND_KERNEL)
    memcpy = b.device_table(KIND_MEMCPY)
    memset = b.device_table(KIND_MEMSET)
    memory = b.memory()
    _link(ops, runtime, (kernels, memcpy, memset), memory)
    model = TraceModel(
        origin_us=b.origin,
        threads=b.threads(),
        ops=ops,
        python=b.python(),
        runtime=runtime,
        kernels=kernels,
        memcpy=memcpy,
        memset=memset,
        gpu_annotations=b.device_table(KIND_GPU_ANNOTATION),
        memory=memory,
        flows=b.flows(),
        counters=b.counters(),
        other=b.other(),
        steps=_steps(ops),
        devices=_devices(parsed.metadata),
        metadata=parsed.metadata,
    )
    model.anomalies = b.anomalies
    return model
