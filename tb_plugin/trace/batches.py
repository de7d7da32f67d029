"""The builder's first pass: the events of a parsed trace (`parse`), read batch by batch on
helper threads into compact columns (`Batch`): strings coded per batch (`coding`), each
event's kind (`kinds`), and per kind only the args fields its table needs, read as numbers
or text value by value. `build` joins the batches and cuts the model's tables out of them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import compress
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import numpy as np
import pandas as pd
import polars as pl

from .anomalies import ARG_VALUES_UNREADABLE, EVENTS_WITHOUT_TS_DROPPED, MALFORMED_ARGS_REPLACED, record
from .coding import Interner, frame_codes
from . import accelerators
from .kinds import (KIND_CODE, KIND_COUNTER, KIND_FLOW, KIND_MEMORY, KIND_META, KIND_OTHER, KIND_SKIPPED, ARGS_TYPES, NAN,
                    classify, kind_code)
from .parse import POLARS_REFUSED, SLICE_FLOW_SCHEMA, anchored_times, events_frame, flow_columns

if TYPE_CHECKING:
    import numpy.typing as npt
    from msgspec import Raw
    from msgspec.structs import FieldInfo

    from .coding import Coded

    # An args field's column by name: coded text (`Coded`) for a text field, an int64 or
    # float64 array for a number field (`_NUMBER_FIELDS`), as the field's type says.
    ArgColumns = dict[str, Any]


# Events are read in batches of about this much JSON: large enough for polars' threads, small
# enough that a batch's text and its frame stay a small part of the peak memory.
_BATCH_BYTES = 6 << 20


def _batches(raws: list[Raw]) -> Iterator[tuple[list[Raw], int]]:
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


def read_batches(raws: list[Raw], release: Callable[..., None]) -> Iterator[Batch]:
    """`_read_batch` of each batch of `raws`, in order, on `_READERS` helper threads;
    `release` (see `ParsedTrace`) is called as batches are done, and once at the end."""
    with ThreadPoolExecutor(_READERS, thread_name_prefix="tb_plugin-read") as pool:
        pending: deque[tuple[Future[Batch], int]] = deque()  # (reading a batch, JSON bytes it consumed)
        for batch, consumed in _batches(raws):
            pending.append((pool.submit(_read_batch, batch), consumed))
            del batch
            if len(pending) > _READERS:
                yield _finished(*pending.popleft(), release)
        while pending:
            yield _finished(*pending.popleft(), release)
    release()


def _finished(future: Future[Batch], consumed: int, release: Callable[..., None]) -> Batch:
    batch = future.result()
    release(consumed)
    return batch


@dataclass
class Batch:
    """What one batch of events leaves behind: compact columns, strings coded per batch
    (`frame_codes`) until the builder maps them to codes for the whole trace."""

    coded: dict[str, Coded]  # "ph", "cat", "name", "pid", "tid" -> (codes, values)
    ts_anchor: int  # whole µs that `ts` is relative to (`parse.anchored_times`)
    ts: npt.NDArray[np.float64]
    dur: npt.NDArray[np.float64]
    kind: npt.NDArray[np.int8]
    args: dict[str, ArgColumns]  # kind -> {field: number column, or coded text}
    flows: pl.DataFrame | None  # (id, bp) of the flow events
    counter_args: list[Any] | None  # the counters' args, decoded (one value per counter event)
    slice_flows: pl.DataFrame | None  # (row in the batch, bind_id, flow_in, flow_out) of slices with a bind_id
    anomalies: dict[str, int]


TOP_LEVEL_TEXT = ("ph", "cat", "name", "pid", "tid")


def _read_batch(raws: list[Raw]) -> Batch:
    """One batch of event slices -> `Batch` (runs on a helper thread)."""
    anomalies: dict[str, int] = {}
    frame, lines = events_frame(raws, anomalies)
    del raws
    coded = frame_codes(frame, TOP_LEVEL_TEXT)
    ts_anchor, ts = anchored_times(lines, frame["ts"].to_numpy())
    dur = frame["dur"].to_numpy()
    kind = _classify(coded, ts, anomalies)
    counts = np.bincount(kind, minlength=len(KIND_CODE))
    present = [k for k in ARGS_TYPES if counts[KIND_CODE[k]]]
    frame = frame.with_columns(kind=pl.Series(kind))
    of_kind = {k: pl.col("kind") == KIND_CODE[k] for k in (*present, KIND_COUNTER)}
    # One args text per line: polars writes an args that is a JSON string as its bare text,
    # which may be empty or blank (the reader would skip that line, leaving a row short); an
    # args that is no object holds no field, so it reads as `{}` (counted).
    is_object = pl.col("args").str.starts_with("{")
    objects = pl.when(is_object).then(pl.col("args")).otherwise(pl.lit("{}"))
    # One polars call for every kind (each call has a fixed cost); the texts come back as bytes,
    # which the readers take as they are (a Python str would be decoded, then encoded again).
    *texts, not_objects = frame.select(
        *(objects.filter(of_kind[k]).str.join("\n").cast(pl.Binary).alias(k) for k in present),
        pl.col("args").filter(of_kind[KIND_COUNTER]).fill_null("null").str.join(",").cast(pl.Binary).alias(KIND_COUNTER),
        (~is_object & pl.col("kind").is_in([KIND_CODE[k] for k in present])).sum().alias("not_objects"),
    ).row(0)
    if not_objects:
        record(anomalies, MALFORMED_ARGS_REPLACED, not_objects)
    args = {k: _arg_columns(lines, ARGS_TYPES[k], anomalies) for k, lines in zip(present, texts)}
    flows = flow_columns(list(compress(lines, kind == KIND_CODE[KIND_FLOW]))) if counts[KIND_CODE[KIND_FLOW]] else None
    counter_args: list[Any] | None = None
    if counts[KIND_CODE[KIND_COUNTER]]:
        counter_args = _counter_values(texts[-1], frame, of_kind[KIND_COUNTER], counts[KIND_CODE[KIND_COUNTER]],
                                       anomalies)
    slice_flows = None
    if "bind_id" in frame.columns:
        slice_flows = frame.with_row_index("row").filter(pl.col("bind_id").is_not_null()).select(
            pl.col("row").cast(pl.Int64), *SLICE_FLOW_SCHEMA)
    return Batch(coded, ts_anchor, ts, dur, kind, args, flows, counter_args, slice_flows, anomalies)


def _counter_values(joined: bytes, frame: pl.DataFrame, is_counter: pl.Expr, count: int,
                    anomalies: dict[str, int]) -> list[Any]:
    """The args of a batch's `count` counter events, decoded, one value each in order, from
    their texts as polars writes them joined by ",". polars writes an args that is a JSON
    string as its bare text, which is not JSON (or is several values): then each is decoded
    alone, and one that is not JSON becomes None (counted)."""
    try:
        values = msgspec.json.decode(b"[" + joined + b"]")
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
            record(anomalies, MALFORMED_ARGS_REPLACED)
    return values


def _classify(coded: dict[str, Coded], ts: npt.NDArray[np.float64], anomalies: dict[str, int]) -> npt.NDArray[np.int8]:
    """Kind code (`KIND_CODE`) of each event of a batch: each distinct (ph, cat) classified
    once."""
    (ph_codes, ph_values), (cat_codes, cat_values), (name_codes, name_values) = (
        coded["ph"], coded["cat"], coded["name"])
    width = len(cat_values) + 1
    pair_codes, pairs = pd.factorize((ph_codes.astype(np.int64) + 1) * width + (cat_codes + 1))
    ph_or_none, cat_or_none = [None, *ph_values], [None, *cat_values]  # code -1 -> None
    kinds = [kind_code(ph_or_none[p // width], cat_or_none[p % width]) for p in pairs]
    kind = np.array(kinds, dtype=np.int8)[pair_codes] if len(pair_codes) else np.zeros(0, dtype=np.int8)
    # Device categories whose role is told by the event's name (MTIA's `mtia_ccp_events`).
    complete = np.isin(ph_codes, [i for i, v in enumerate(ph_values) if v == "X"])
    for code, cat in enumerate(cat_values):
        if (cat or "").lower() in accelerators.ROLE_BY_NAME:
            rows = complete & (cat_codes == code)
            names = [*name_values, None]  # code -1 (no name) -> last
            kind_of_name = np.array([KIND_CODE[classify("X", cat, n)] for n in names], dtype=np.int8)
            kind[rows] = kind_of_name[name_codes[rows]]
    # XPU's scope-profiler slices, written as kernels, are markers (`accelerators`).
    metric_names = [i for i, n in enumerate(name_values) if str(n).startswith(accelerators.SCOPE_METRICS_PREFIX)]
    if metric_names:
        kernel_cats = [i for i, c in enumerate(cat_values) if (c or "").lower() == "kernel"]
        kind[complete & np.isin(cat_codes, kernel_cats) & np.isin(name_codes, metric_names)] = KIND_CODE[KIND_OTHER]
    # Instant events are allocator records when named "[memory]".
    instant = np.isin(ph_codes, [i for i, v in enumerate(ph_values) if v in ("i", "I")])
    if "[memory]" in name_values:
        kind[instant & (name_codes == name_values.index("[memory]"))] = KIND_CODE[KIND_MEMORY]
    missing_ts = np.isin(kind, [KIND_CODE[KIND_META], KIND_CODE[KIND_SKIPPED]], invert=True) & ~np.isfinite(ts)
    if missing_ts.any():
        record(anomalies, EVENTS_WITHOUT_TS_DROPPED, int(missing_ts.sum()))
        kind[missing_ts] = KIND_CODE[KIND_SKIPPED]
    return kind


class _NumberField(NamedTuple):
    """How an args field of one number type is read (polars), held (numpy) and marked absent."""

    polars: type[pl.DataType]
    numpy: type[np.number[Any]]
    absent: float  # -1 for an int field, NaN for a float one


# Every args field of another type is text (`_is_text`).
_NUMBER_FIELDS = {int: _NumberField(pl.Int64, np.int64, -1), float: _NumberField(pl.Float64, np.float64, NAN)}


def _is_text(field: FieldInfo) -> bool:
    return field.type not in _NUMBER_FIELDS


def _arg_columns(lines: bytes, args_type: type[msgspec.Struct], anomalies: dict[str, int]) -> ArgColumns:
    """{field name: column} of the `args_type` fields of args JSON objects, one per line (as
    polars writes them: compact, `{}` where an event has none): int fields as int64 (-1 where
    absent), float fields as float64 (NaN), the others coded (`frame_codes`; -1 where
    absent; numbers, lists and objects as their JSON).

    Each value is read on its own: a number written as text (`"bytes": "1024"`, as older ROCm
    writers do) is that number, and a value that is no number where one goes is absent on its
    own (counted), never costing its event, or any other event, the rest of its args."""
    fields = msgspec.structs.fields(args_type)
    schema = {f.encode_name: pl.String if _is_text(f) else _NUMBER_FIELDS[f.type].polars for f in fields}
    try:
        decoded = pl.read_ndjson(lines, schema=schema)
    except POLARS_REFUSED:  # some value is not of its field's type: every field read as text, then converted
        decoded = _numbers_of_texts(_args_as_texts(lines, list(schema)), fields, anomalies)
    numbers = [pl.col(f.encode_name).fill_null(_NUMBER_FIELDS[f.type].absent) for f in fields if not _is_text(f)]
    columns = frame_codes(decoded, [f.encode_name for f in fields if _is_text(f)], also=numbers)
    return {f.name: columns[f.encode_name] for f in fields}


def _args_as_texts(lines: bytes, keys: list[str]) -> pl.DataFrame:
    """The args (a JSON object per line) as a DataFrame of String columns named `keys`, null
    where absent: polars writes a number, list or object read into a String column as its JSON.
    Where polars' reader cannot parse a number (`1e300`), msgspec reads the batch's objects."""
    schema = dict.fromkeys(keys, pl.String)
    try:
        return pl.read_ndjson(lines, schema=schema)
    except POLARS_REFUSED:
        pass
    objects = [msgspec.json.decode(line) for line in lines.split(b"\n")]  # only for such odd batches

    def text(value: Any) -> str | None:
        return value if value is None or isinstance(value, str) else msgspec.json.encode(value).decode()
    return pl.DataFrame({key: [text(o.get(key)) for o in objects] for key in keys}, schema=schema)


# What CUPTI-era Kineto writes for a copy's bandwidth at zero duration (`"N/A"`; newer Kineto
# omits the field, pytorch/kineto#1455): absent by design, not lost.
_NOT_APPLICABLE = "N/A"


def _numbers_of_texts(texts: pl.DataFrame, fields: Iterable[FieldInfo], anomalies: dict[str, int]) -> pl.DataFrame:
    """`texts` (`_args_as_texts`) with each number field's texts read as its numbers, value by
    value: a value that is no number (`true`, a list, a word) becomes null, counted as
    `ARG_VALUES_UNREADABLE` unless it is Kineto's `"N/A"`; text fields stay as they are."""
    converted, unreadable = [], []
    for f in fields:
        if _is_text(f):
            continue
        text = pl.col(f.encode_name).str.strip_chars()
        as_float = text.cast(pl.Float64, strict=False)
        if f.type is int:  # an integer's text, else a whole float's (`"12.0"`, `1e3`) within int64
            whole = (as_float == as_float.floor()) & (as_float.abs() < 2.0**63)
            number = pl.coalesce(text.cast(pl.Int64, strict=False), pl.when(whole).then(as_float.cast(pl.Int64)))
        else:
            number = as_float
        converted.append(number.alias(f.encode_name))
        unreadable.append((pl.col(f.encode_name).is_not_null() & number.is_null() & (text != _NOT_APPLICABLE)).sum())
    lost = sum(texts.select(*unreadable).row(0))
    if lost:
        record(anomalies, ARG_VALUES_UNREADABLE, lost)
    return texts.with_columns(converted)


def concat_columns(parts: list[dict[str, npt.NDArray[Any]]], args_type: type[msgspec.Struct],
                    interners: dict[str, Interner]) -> ArgColumns:
    """{field: column} of `_arg_columns` results, batch after batch; text fields as coded
    strings (`coded_series`)."""
    columns = {}
    for f in msgspec.structs.fields(args_type):
        pieces = [part[f.name] for part in parts]
        column = np.concatenate(pieces) if pieces else np.zeros(0, np.int32 if _is_text(f) else _NUMBER_FIELDS[f.type].numpy)
        columns[f.name] = (column, interners[f.name].values) if _is_text(f) else column
    return columns


def text_interners(args_type: type[msgspec.Struct]) -> dict[str, Interner]:
    return {f.name: Interner() for f in msgspec.structs.fields(args_type) if _is_text(f)}

