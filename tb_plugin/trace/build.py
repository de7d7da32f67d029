"""The builder: a parsed trace (`parse`) -> the tables of a `TraceModel`.

`build_model(parsed)` reads the events batch by batch on helper threads, keeping compact
columns (strings coded, see `coding`; args decoded per kind, see `kinds`), then cuts one
table per event kind out of them and resolves the links between the tables (`linking`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import compress
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import msgspec
import numpy as np
import pandas as pd
import polars as pl

from .anomalies import (ARG_VALUES_UNREADABLE, DEVICE_PROPERTIES_MAPPED, EVENTS_FAR_FROM_THE_TRACE_DROPPED, EVENTS_WITHOUT_TS_DROPPED, INVALID_DURATIONS_ZEROED,
                        MALFORMED_ARGS_REPLACED, UNSUPPORTED_EVENTS_SKIPPED, record)
from .coding import (Interner, as_floats, categorical_of, coded_series, decoded_texts, first_valid,
                     frame_codes, id_codes, json_categorical, recode, text_categorical, whole_ints)
from . import accelerators
from .kinds import (KIND_CANDIDATE, KIND_COUNTER, KIND_FLOW, KIND_GPU_ANNOTATION, KIND_KERNEL, KIND_MEMCPY,
                    KIND_MEMORY, KIND_MEMSET, KIND_META, KIND_OP, KIND_OTHER, KIND_PYTHON, KIND_RUNTIME, KIND_SKIPPED,
                    KIND_SYNC, ARGS_TYPES, KIND_CODE, KIND_OF_CANDIDATE_ROLE, KIND_OF_CODE, NAN, classify, kind_code)
from .linking import Nesting, flow_peers, lookup
from .model import TraceModel, first_int
from .parse import FLOW_SCHEMA, POLARS_REFUSED, SLICE_FLOW_SCHEMA, anchored_times, events_frame, flow_columns
from .tables import DEVICES

if TYPE_CHECKING:
    import numpy.typing as npt
    from msgspec import Raw
    from msgspec.structs import FieldInfo

    from .coding import Coded
    from .parse import ParsedTrace

    # An args field's column by name: coded text (`Coded`) for a text field, an int64 or
    # float64 array for a number field (`_NUMBER_FIELDS`), as the field's type says.
    ArgColumns = dict[str, Any]
    # What `_Builder._kept` filters: a row per event of one kind, as an array, frame or list.
    _Rows = TypeVar("_Rows", npt.NDArray[Any], pl.DataFrame, list[Any])


STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


# Longer than any profiling session (about 11.6 days): a duration beyond it is invalid.
_MAX_DURATION_US = 1e12

# Events are read in batches of about this much JSON: large enough for polars' threads, small
# enough that a batch's text and its frame stay a small part of the peak memory.
_BATCH_BYTES = 6 << 20

# An event further than this from the median of a trace's timestamps (a day and a bit) is not
# part of the profiled window: no profiling session writes one file over days.
_FAR_FROM_TRACE_US = 1e11


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


def _read_batches(raws: list[Raw], release: Callable[..., None]) -> Iterator[_Batch]:
    """`_read_batch` of each batch of `raws`, in order, on `_READERS` helper threads;
    `release` (see `ParsedTrace`) is called as batches are done, and once at the end."""
    with ThreadPoolExecutor(_READERS, thread_name_prefix="tb_plugin-read") as pool:
        pending: deque[tuple[Future[_Batch], int]] = deque()  # (reading a batch, JSON bytes it consumed)
        for batch, consumed in _batches(raws):
            pending.append((pool.submit(_read_batch, batch), consumed))
            del batch
            if len(pending) > _READERS:
                yield _finished(*pending.popleft(), release)
        while pending:
            yield _finished(*pending.popleft(), release)
    release()


def _finished(future: Future[_Batch], consumed: int, release: Callable[..., None]) -> _Batch:
    batch = future.result()
    release(consumed)
    return batch


@dataclass
class _Batch:
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


_TOP_LEVEL_TEXT = ("ph", "cat", "name", "pid", "tid")


def _read_batch(raws: list[Raw]) -> _Batch:
    """One batch of event slices -> `_Batch` (runs on a helper thread)."""
    anomalies: dict[str, int] = {}
    frame, lines = events_frame(raws, anomalies)
    del raws
    coded = frame_codes(frame, _TOP_LEVEL_TEXT)
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
    return _Batch(coded, ts_anchor, ts, dur, kind, args, flows, counter_args, slice_flows, anomalies)


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


def _concat_columns(parts: list[dict[str, npt.NDArray[Any]]], args_type: type[msgspec.Struct],
                    interners: dict[str, Interner]) -> ArgColumns:
    """{field: column} of `_arg_columns` results, batch after batch; text fields as coded
    strings (`coded_series`)."""
    columns = {}
    for f in msgspec.structs.fields(args_type):
        pieces = [part[f.name] for part in parts]
        column = np.concatenate(pieces) if pieces else np.zeros(0, np.int32 if _is_text(f) else _NUMBER_FIELDS[f.type].numpy)
        columns[f.name] = (column, interners[f.name].values) if _is_text(f) else column
    return columns


def _text_interners(args_type: type[msgspec.Struct]) -> dict[str, Interner]:
    return {f.name: Interner() for f in msgspec.structs.fields(args_type) if _is_text(f)}


def _graph_annotation(args: ArgColumns) -> pd.Categorical:
    """Per kernel: its CUDA-graph annotation text, the first of the `annotation`, `str` and
    `name` args that it has ("" none; see `kinds._DeviceArgs`)."""
    # (astype(str) gives a pandas string array, which pandas-stubs types as "or an ndarray")
    texts = [categorical_of(args[key]).astype(str).to_numpy() for key in  # type: ignore[union-attr]
             ("graph_annotation", "graph_annotation_str", "graph_annotation_name")]
    chosen = np.where(texts[0] != "", texts[0], np.where(texts[1] != "", texts[1], texts[2])).astype(object)
    categories, codes = np.unique(chosen, return_inverse=True) if len(chosen) else (np.array([""], dtype=object), [])
    # object categories, as every text column of the model (the disk cache stores only those)
    return pd.Categorical.from_codes(np.asarray(codes, dtype=np.int64),
                                     categories=pd.Index(categories.astype(object), dtype=object))


class _Builder:
    """Builds the tables of one `TraceModel`; one instance per trace.

    polars reads the events batch by batch into typed columns (`parse.events_frame`); from
    each batch only compact columns are kept: strings as integer codes, times as float64, and
    per kind just the args fields its table needs. So the JSON text of a batch lives only
    while the batch is read, and tables then take their rows by boolean masks.
    """

    def __init__(self, parsed: ParsedTrace) -> None:
        self.anomalies = dict(parsed.anomalies)
        # the builder takes the slices and drops the list (so the input buffer can go), which
        # `ParsedTrace.events`, a list to every other reader, does not say
        raws, parsed.events = parsed.events, None  # type: ignore[assignment]
        self._interners = {key: Interner() for key in _TOP_LEVEL_TEXT}
        parts: dict[str, list[npt.NDArray[Any]]] = {key: [] for key in (*_TOP_LEVEL_TEXT, "ts", "dur", "kind")}
        self._arg_parts: dict[str, list[dict[str, npt.NDArray[Any]]]] = {kind: [] for kind in ARGS_TYPES}
        self._arg_interners = {kind: _text_interners(args_type) for kind, args_type in ARGS_TYPES.items()}
        self._flow_parts: list[pl.DataFrame] = []
        self._counter_args: list[list[Any]] = []
        self._slice_flow_parts: list[pl.DataFrame] = []
        read = 0  # events of the batches before
        self._kept_of_kind: dict[str, npt.NDArray[np.bool_]] = {}  # kind -> which of its events (as read) are kept
        self._candidate_kinds: npt.NDArray[np.int8] | None = None  # see `candidate_kinds`
        # Times are held relative to the first batch's anchor (a whole µs): differences of
        # whole numbers and small fractions, exact where absolute floats would not be.
        self.anchor_us: int | None = None
        for batch in _read_batches(raws, parsed.release):
            for key, interner in self._interners.items():
                parts[key].append(interner.remap(batch.coded[key]))
            if self.anchor_us is None:
                self.anchor_us = batch.ts_anchor
            parts["ts"].append(batch.ts + float(batch.ts_anchor - self.anchor_us))
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
            if batch.slice_flows is not None:
                self._slice_flow_parts.append(batch.slice_flows.with_columns(pl.col("row") + read))
            read += len(batch.kind)
            for key, n in batch.anomalies.items():
                record(self.anomalies, key, n)
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
        name_remap = np.append(self.name_categories.get_indexer(pd.Index(name_values, dtype=object)),
                               self.name_categories.get_indexer(pd.Index([""], dtype=object)))
        self.name_codes = name_remap[joined["name"]]
        skipped = int(self.mask(KIND_SKIPPED).sum()) - self.anomalies.get(EVENTS_WITHOUT_TS_DROPPED, 0)
        if skipped:
            record(self.anomalies, UNSUPPORTED_EVENTS_SKIPPED, skipped)
        self._drop_far_from_the_trace()
        timed = ~self.mask(KIND_META, KIND_SKIPPED)
        # Flow / instant markers far outside the profiled window (e.g. "Record Window End")
        # must not move the origin; intervals define it.
        interval = self.mask(KIND_OP, KIND_RUNTIME, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET)
        base = self.ts_all[interval] if interval.any() else self.ts_all[timed & np.isfinite(self.ts_all)]
        self._origin_offset = float(np.min(base)) if len(base) else 0.0
        # The origin as an absolute float (rounded where float64 cannot hold it); every table's
        # times are exact offsets from it (`ts`).
        self.origin = (self.anchor_us or 0) + self._origin_offset
        self.thread_all, self.thread_keys = self._threads()

    def _drop_far_from_the_trace(self) -> None:
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
                self._kept_of_kind[KIND_OF_CODE[code]] = ~far[self.kind == code]
            self.kind[far] = KIND_CODE[KIND_SKIPPED]
            record(self.anomalies, EVENTS_FAR_FROM_THE_TRACE_DROPPED, int(far.sum()))

    def _kept(self, kind: str, rows: _Rows) -> _Rows:
        """`rows` (a row per event of `kind` as read: an array, a polars frame or a list) less
        the events `_drop_far_from_the_trace` skipped."""
        keep = self._kept_of_kind.get(kind)
        if keep is None:
            return rows
        if isinstance(rows, list):
            return [row for row, kept in zip(rows, keep) if kept]
        return rows.filter(pl.Series(keep)) if isinstance(rows, pl.DataFrame) else rows[keep]

    def _threads(self) -> tuple[npt.NDArray[np.int64], list[tuple[str, str]]]:
        """Thread table row of every event's (pid, tid), both normalised to stripped strings."""
        (pid_codes, pid_values), (tid_codes, tid_values) = self.pid_coded, self.tid_coded
        width = len(tid_values) + 1
        pair_codes, pairs = pd.factorize((pid_codes.astype(np.int64) + 1) * width + (tid_codes + 1))
        pid_text = ["", *(v.strip() for v in pid_values)]
        tid_text = ["", *(v.strip() for v in tid_values)]
        keys: dict[tuple[str, str], int] = {}
        rows = np.empty(len(pairs), dtype=np.int64)
        for i, pair in enumerate(pairs):  # once per distinct (pid, tid), not per event
            rows[i] = keys.setdefault((pid_text[pair // width], tid_text[pair % width]), len(keys))
        return (rows[pair_codes] if len(pair_codes) else np.zeros(0, np.int64)), list(keys)

    def numbers(self, coded: Coded, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Device / stream numbers from pid or tid values like 0, "1" or "stream 7"."""
        codes, values = coded
        parsed = np.array([first_int(v) for v in values] + [-1], dtype=np.int64)  # code -1 -> last
        return parsed[codes[mask]]

    def mask(self, *kinds: str) -> npt.NDArray[np.bool_]:
        """Which events are of one of `kinds`."""
        if len(kinds) == 1:
            return self.kind == KIND_CODE[kinds[0]]
        return np.isin(self.kind, [KIND_CODE[k] for k in kinds])

    def names(self, mask: npt.NDArray[np.bool_]) -> pd.Categorical:
        return pd.Categorical.from_codes(self.name_codes[mask], categories=self.name_categories, validate=False)

    def ts(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
        return self.ts_all[mask] - self._origin_offset

    def intervals(self, mask: npt.NDArray[np.bool_], instants_allowed: bool = False) -> dict[str, pd.Categorical | npt.NDArray[Any]]:
        """The columns every interval table starts with: name, thread, ts, dur."""
        return {"name": self.names(mask), "thread": self.thread_all[mask], "ts": self.ts(mask),
                "dur": self.durations(mask, instants_allowed)}

    def cat_lower(self, mask: npt.NDArray[np.bool_]) -> pd.Categorical:
        return recode(self.cat_coded, mask, lambda c: c.lower() if c else "")

    def phases(self, mask: npt.NDArray[np.bool_]) -> pd.Categorical:
        return recode(self.ph_coded, mask, lambda p: p or "")

    def durations(self, mask: npt.NDArray[np.bool_], instants_allowed: bool = False) -> npt.NDArray[np.float64]:
        dur = self.dur_all[mask]
        if instants_allowed:  # instant events have no duration by design
            dur = np.where(np.isnan(dur), 0.0, dur)
        # No event lasts longer than `_MAX_DURATION_US`: a larger value (1e308) is garbage, and
        # would overflow the per-thread sort keys of `Nesting` (ts + thread * span) to inf/NaN.
        bad = ~(dur >= 0) | (dur > _MAX_DURATION_US)
        if bad.any():
            record(self.anomalies, INVALID_DURATIONS_ZEROED, int(bad.sum()))
            dur = np.where(bad, 0.0, dur)
        return dur

    def args(self, kind: str) -> ArgColumns:
        """The args of the events of `kind` (in event order) as {field: column}."""
        columns = _concat_columns(self._arg_parts[kind], ARGS_TYPES[kind], self._arg_interners[kind])
        return {name: (self._kept(kind, c[0]), c[1]) if isinstance(c, tuple) else self._kept(kind, c)
                for name, c in columns.items()}

    # --- tables -------------------------------------------------------------------------

    def ops(self) -> pd.DataFrame:
        m = self.mask(KIND_OP)
        a = self.args(KIND_OP)
        (dims, dims_values), (old, old_values) = a["input_dims"], a["input_dims_old"]  # "Input dims" before 2.x
        input_dims = (np.where(dims >= 0, dims, np.where(old >= 0, old + len(dims_values), -1)), dims_values + old_values)
        return pd.DataFrame({
            **self.intervals(m),
            "cat": self.cat_lower(m),
            "external_id": first_valid(a["external_id"], a["external_id_lower"]),
            "sequence_number": a["sequence_number"],
            "fwd_thread_id": a["fwd_thread_id"],
            "input_dims": json_categorical(input_dims),
            "input_type": json_categorical(a["input_type"]),
            "call_stack": categorical_of(a["call_stack"]),
            "collective_name": categorical_of(a["collective_name"]),
            "in_msg_nelems": a["in_msg_nelems"],
            "out_msg_nelems": a["out_msg_nelems"],
            "group_size": a["group_size"],
            "dtype": categorical_of(a["dtype"]),
            "process_group_name": categorical_of(a["process_group_name"]),
            "process_group_desc": categorical_of(a["process_group_desc"]),
            "collective_seq": a["collective_seq"],
            "kernel_hash": categorical_of(a["kernel_hash"]),
            "kernel_file": categorical_of(a["kernel_file"]),
            "kernel_backend": categorical_of(a["kernel_backend"]),
            "flops": a["flops"],
            "concrete_inputs": json_categorical(a["concrete_inputs"]),
        })

    def python(self) -> pd.DataFrame:
        m = self.mask(KIND_PYTHON)
        a = self.args(KIND_PYTHON)
        return pd.DataFrame({
            **self.intervals(m),
            "python_id": a["python_id"],
            "python_parent_id": a["python_parent_id"],
            "python_module_id": a["python_module_id"],
        })

    def runtime(self) -> pd.DataFrame:
        m = self.mask(KIND_RUNTIME)
        a = self.args(KIND_RUNTIME)
        return pd.DataFrame({
            **self.intervals(m),
            "cat": self.cat_lower(m),
            "correlation": a["correlation"],
            "external_id": first_valid(a["external_id"], a["external_id_lower"]),
            "cbid": a["cbid"],
        })

    def candidate_kinds(self) -> npt.NDArray[np.int8]:
        """Kind code of each `KIND_CANDIDATE` event (in event order): its role's kind
        (`accelerators.generic_role` of its name) where it runs on a device, i.e. on a pid
        with no host event (operator, Python, runtime call, allocation), and a runtime call
        in the trace has its `correlation`; else `KIND_OTHER`."""
        m = self.mask(KIND_CANDIDATE)
        if not m.any():
            return np.zeros(0, np.int8)
        if self._candidate_kinds is None:
            host = self.mask(KIND_OP, KIND_PYTHON, KIND_RUNTIME, KIND_MEMORY)
            on_device = ~np.isin(self.pid_coded[0][m], np.unique(self.pid_coded[0][host]))
            launched = lookup(self.args(KIND_RUNTIME)["correlation"], self.args(KIND_CANDIDATE)["correlation"]) >= 0
            codes, of_event = np.unique(self.name_codes[m], return_inverse=True)  # each distinct name once
            kind_of_name = np.array([KIND_CODE[KIND_OF_CANDIDATE_ROLE[accelerators.generic_role(self.name_categories[c])]]
                                     for c in codes], dtype=np.int8)
            self._candidate_kinds = np.where(on_device & launched, kind_of_name[of_event],
                                             KIND_CODE[KIND_OTHER]).astype(np.int8)
        return self._candidate_kinds

    def device_table(self, kind: str) -> pd.DataFrame:
        """The table of device activity of `kind`: the events of that kind, then the
        candidates recognised as such (`candidate_kinds`)."""
        table = self._device_columns(kind, self.mask(kind), self.args(kind))
        recognised = self.candidate_kinds() == KIND_CODE[kind]
        if not recognised.any():
            return table
        rows = self.mask(KIND_CANDIDATE)
        rows[rows] = recognised
        args = {name: (c[0][recognised], c[1]) if isinstance(c, tuple) else c[recognised]
                for name, c in self.args(KIND_CANDIDATE).items()}
        return _concat_tables(table, self._device_columns(kind, rows, args))

    def _device_columns(self, kind: str, m: npt.NDArray[np.bool_], a: ArgColumns) -> pd.DataFrame:
        device = a["device"]
        stream = a["stream"]
        # an absent stream is read from the tid; a sync's written -1 is its having none
        no_stream = np.isnan(stream) if kind == KIND_SYNC else stream < 0
        if m.any() and ((device < 0).any() or no_stream.any()):
            device = np.where(device >= 0, device, self.numbers(self.pid_coded, m))
            stream = np.where(no_stream, self.numbers(self.tid_coded, m), stream)
        moved = a["original_stream"] >= 0 if "original_stream" in a else np.zeros(0, bool)  # syncs have none
        if moved.any():
            # CUDA-graph work the exporter moved to an annotation's lane (pytorch#194854): its
            # args repeat `stream`, the lane last (the last of a repeated key wins, as in JSON
            # viewers), which is also its tid; the hardware stream is `original_stream`
            stream = np.where(moved, self.numbers(self.tid_coded, m), stream)
        columns = {
            **self.intervals(m),
            "device": device,
            "stream": stream,
            "correlation": a["correlation"],
            "external_id": first_valid(a["external_id"], a["external_id_lower"]),
        }
        if kind == KIND_KERNEL:
            columns.update({
                "grid": json_categorical(a["grid"]),
                "block": json_categorical(a["block"]),
                "registers_per_thread": whole_ints(a["registers_per_thread"]),
                "shared_memory": whole_ints(a["shared_memory"]),
                "blocks_per_sm": a["blocks_per_sm"],
                "warps_per_sm": a["warps_per_sm"],
                "est_achieved_occupancy_pct": a["est_achieved_occupancy_pct"],
                "graph_node_id": recode(a["graph_node_id"], slice(None), lambda v: "" if v in (None, "0") else v),
                "graph_annotation": _graph_annotation(a),
            })
        elif kind in (KIND_MEMCPY, KIND_MEMSET):
            # (numpy's stub takes np.where of `Any` columns for its one-argument form)
            columns["bytes"] = whole_ints(np.where(np.isnan(a["bytes"]), a["size"], a["bytes"]))  # type: ignore[arg-type]
            columns["memory_bandwidth_gbps"] = a["memory_bandwidth_gbps"]
        elif kind == KIND_SYNC:
            # Context and device syncs name no stream: CUPTI's invalid value, -1 as uint32
            columns["stream"] = np.where(stream == 0xFFFFFFFF, -1, stream).astype(np.int64)
            columns["wait_on_stream"] = a["wait_on_stream"]
            columns["wait_on_event_record_correlation"] = a["wait_on_event_record_correlation"]
            columns["wait_on_event_id"] = a["wait_on_event_id"]
        return pd.DataFrame(columns)

    def memory(self) -> pd.DataFrame:
        m = self.mask(KIND_MEMORY)
        a = self.args(KIND_MEMORY)
        return pd.DataFrame({
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "device_type": a["device_type"],
            "device_id": a["device_id"],
            "addr": a["addr"],
            "bytes": whole_ints(a["bytes"], missing=0),
            "total_allocated": a["total_allocated"],
            "total_reserved": a["total_reserved"],
        })

    def flows(self) -> pd.DataFrame:
        m = self.mask(KIND_FLOW)
        flows = self._kept(KIND_FLOW, pl.concat(self._flow_parts) if self._flow_parts else pl.DataFrame(schema=FLOW_SCHEMA))
        rows, phase, cat = np.flatnonzero(m), np.asarray(self.phases(m), dtype=object), np.asarray(self.cat_lower(m), dtype=object)
        if self._slice_flow_parts:
            ends, end_rows, end_phase, end_cat = self._slice_flow_ends()
            flows, rows = pl.concat([flows, ends]), np.concatenate([rows, end_rows])
            phase, cat = np.concatenate([phase, end_phase]), np.concatenate([cat, end_cat])
        coded = frame_codes(flows, ("bp",))
        return pd.DataFrame({
            "flow_id": id_codes(flows["id"]),
            "phase": text_categorical(phase),
            "cat": text_categorical(cat),
            "thread": self.thread_all[rows],
            "ts": self.ts_all[rows] - self._origin_offset,
            "binding": categorical_of(coded["bp"]),
        })

    def _slice_flow_ends(self) -> tuple[pl.DataFrame, npt.NDArray[np.int64], npt.NDArray[np.object_], npt.NDArray[np.object_]]:
        """The flow ends that slices carry (`SLICE_FLOW_SCHEMA`) as `s` / `f` flow events would
        be: ({id, bp} frame, event rows, phases, categories). A flow is Kineto's `ac2g` when it
        starts at a runtime call, else `fwdbwd` (Kineto's two flow types, output_json.cpp)."""
        slices = pl.concat(self._slice_flow_parts)
        slices = slices.filter(pl.Series(self.kind[slices["row"].to_numpy()] != KIND_CODE[KIND_SKIPPED]))
        starts, ends = slices.filter(pl.col("flow_out").fill_null(False)), slices.filter(pl.col("flow_in").fill_null(False))
        runtime_ids = starts.filter(pl.Series(self.kind[starts["row"].to_numpy()] == KIND_CODE[KIND_RUNTIME]))["bind_id"]
        both = pl.concat([starts.with_columns(bp=pl.lit(None, pl.String)), ends.with_columns(bp=pl.lit("e"))])
        phase = np.array(["s"] * len(starts) + ["f"] * len(ends), dtype=object)
        cat = np.where(both["bind_id"].is_in(runtime_ids.implode()).to_numpy(), "ac2g", "fwdbwd").astype(object)
        return both.select(pl.col("bind_id").alias("id"), "bp"), both["row"].to_numpy(), phase, cat

    def counters(self) -> pd.DataFrame:
        m = self.mask(KIND_COUNTER)
        if not m.any():
            no_text: tuple[np.ndarray, list[str]] = (np.zeros(0, np.int32), [])
            return pd.DataFrame({"name": categorical_of(no_text), "thread": np.zeros(0, np.int64),
                                 "ts": np.zeros(0), "series": categorical_of(no_text), "value": np.zeros(0)})
        values = self._kept(KIND_COUNTER, [value for part in self._counter_args for value in part])
        # Counter events are rare (one per sample of a few series): a loop over them is cheap.
        rows = [(i, k, v) for i, d in enumerate(values) if isinstance(d, dict) for k, v in d.items()]
        idx = np.array([r[0] for r in rows], dtype=np.int64)
        return pd.DataFrame({
            "name": self.names(m)[idx],
            "thread": self.thread_all[m][idx],
            "ts": self.ts(m)[idx],
            "series": categorical_of(coded_series(pl.Series([r[1] for r in rows], dtype=pl.String))),
            "value": as_floats([r[2] if isinstance(r[2], (int, float)) else None for r in rows]),
        })

    def other(self) -> pd.DataFrame:
        m = self.mask(KIND_OTHER)
        candidates = self.mask(KIND_CANDIDATE)
        m[candidates] = self.candidate_kinds() == KIND_CODE[KIND_OTHER]
        return pd.DataFrame({
            **self.intervals(m, instants_allowed=True),
            "cat": recode(self.cat_coded, m, lambda c: c or ""),
            "phase": self.phases(m),
        })

    def threads(self) -> pd.DataFrame:
        """Thread table with names and sort order from the `M` metadata events."""
        m = self.mask(KIND_META)
        rows = np.array(self.thread_keys, dtype=object).reshape(-1, 2)
        table = pd.DataFrame({"pid": rows[:, 0], "tid": rows[:, 1]})
        if not m.any():
            return table.assign(process_name="", process_labels="", process_sort_index=np.nan,
                                thread_name="", thread_sort_index=np.nan)
        a = self.args(KIND_META)
        what = np.asarray(self.names(m), dtype=object)
        meta_key = self.thread_all[m]  # row of the thread table
        meta_pid = rows[meta_key, 0]
        values = {"name": np.asarray(decoded_texts(a["name"]), dtype=object),
                  "labels": np.asarray(decoded_texts(a["labels"]), dtype=object), "sort_index": a["sort_index"]}

        # Per row of the thread table, the value of the last metadata event of a kind for its
        # process (keyed by pid) or its thread (keyed by row): a dict keeps the last value given
        # to a key. A few events per thread, read at C speed.
        by_process, by_thread = (meta_pid, rows[:, 0].tolist()), (meta_key, range(len(rows)))

        def last_value(kind: str, column: str, keyed_by: tuple[npt.NDArray[Any], Iterable[Any]],
                       dtype: npt.DTypeLike, missing: object) -> npt.NDArray[Any]:
            meta_keys, table_keys = keyed_by
            chosen = what == kind
            last = dict(zip(meta_keys[chosen].tolist(), values[column][chosen].tolist()))
            return np.asarray([missing if (v := last.get(key)) is None else v for key in table_keys], dtype=dtype)

        return table.assign(
            process_name=last_value("process_name", "name", by_process, object, ""),
            process_labels=last_value("process_labels", "labels", by_process, object, ""),
            process_sort_index=last_value("process_sort_index", "sort_index", by_process, np.float64, np.nan),
            thread_name=last_value("thread_name", "name", by_thread, object, ""),
            thread_sort_index=last_value("thread_sort_index", "sort_index", by_thread, np.float64, np.nan),
        )


def _concat_tables(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """Rows of `first`, then of `second` (same columns); categorical columns stay categorical."""
    joined = pd.concat([first, second], ignore_index=True)
    for column in first.columns:
        categorical = isinstance(first[column].dtype, pd.CategoricalDtype)
        if categorical and not isinstance(joined[column].dtype, pd.CategoricalDtype):
            joined[column] = pd.api.types.union_categoricals([first[column], second[column]])
    return joined


# The keys only Kineto's own writer gives a device (libkineto/src/CudaDeviceProperties.cpp):
# torch's Python exporter (`export_chrome_trace(..., use_python_export=True)`,
# torch/profiler/_chrome_trace_export.py in torch 2.13) writes neither, and puts the SM count
# (`multi_processor_count`) under `maxThreadsPerMultiprocessor`.
_KINETO_ONLY_DEVICE_KEYS = ("numSms", "regsPerBlock")


def _as_written_by_kineto(entry: dict[str, Any]) -> dict[str, Any]:
    """A deviceProperties entry with the Python exporter's SM count where Kineto puts it."""
    if "maxThreadsPerMultiprocessor" in entry and not any(k in entry for k in _KINETO_ONLY_DEVICE_KEYS) \
            and "regsPerMultiprocessor" in entry:
        entry = {**entry, "numSms": entry["maxThreadsPerMultiprocessor"]}
        del entry["maxThreadsPerMultiprocessor"]
    return entry


def _devices(metadata: dict[str, Any]) -> pd.DataFrame:
    props = metadata.get("deviceProperties") or metadata.get("computeProperties") or []
    rows = [_as_written_by_kineto(p) for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    table = pd.DataFrame(rows)
    for column in DEVICES.names:
        if column not in table:
            table[column] = np.nan if column != "name" else ""
        elif column == "name":
            table[column] = [v if isinstance(v, str) else "" if v is None else str(v) for v in table[column]]
        else:  # numbers as float64, NaN where a file has a string, null or a non-finite value
            values = pd.to_numeric(table[column], errors="coerce").to_numpy(np.float64)
            table[column] = np.where(np.isfinite(values), values, np.nan)
    return table[DEVICES.names]  # the declared properties; others a file has are not kept


def _devices_used(devices: pd.DataFrame, device_tables: Sequence[pd.DataFrame], anomalies: dict[str, Any]) -> pd.DataFrame:
    """`devices`, with the one entry of deviceProperties given the id of the one device the
    trace's device work ran on when the two differ (recorded as `DEVICE_PROPERTIES_MAPPED`):
    single-GPU ROCm traces run their kernels on device 2 or 9 (the node's numbering) while
    deviceProperties lists the one visible GPU as id 0. Several devices, or several
    entries, are left as written: which entry is which device is then unknown."""
    used = pd.unique(np.concatenate([t["device"].to_numpy() for t in device_tables]))
    used = used[used >= 0]
    if len(used) != 1 or len(devices) != 1 or devices["id"].iloc[0] == used[0]:
        return devices
    listed = devices["id"].iloc[0]
    anomalies[DEVICE_PROPERTIES_MAPPED] = \
        f"deviceProperties id {int(listed) if listed == listed else 'none'} taken as device {int(used[0])}"
    return devices.assign(id=float(used[0]))


def _link(ops: pd.DataFrame, runtime: pd.DataFrame, device_tables: Sequence[pd.DataFrame], memory: pd.DataFrame, flows: pd.DataFrame) -> Nesting:
    """Resolve op nesting, runtime -> op, device activity -> runtime/op, memory -> op, flow
    endpoint -> op and -> the other end of its arrow."""
    nesting = Nesting(ops["thread"].to_numpy(), ops["ts"].to_numpy(), ops["dur"].to_numpy())
    ops["depth"] = nesting.depth
    ops["parent"] = nesting.parent
    # Where an External id repeats (a user annotation and the op inside it), the innermost wins.
    by_depth = np.lexsort((-nesting.depth,))
    op_ext = ops["external_id"].to_numpy()
    distinct_ext = pd.unique(op_ext[op_ext > 0])  # hashing: numpy's unique sorts (or is slower still)
    ext_index = by_depth[lookup(op_ext[by_depth], distinct_ext)] if len(ops) else np.zeros(0, np.int64)
    ext_keys = op_ext[ext_index] if len(ops) else np.zeros(0, np.int64)

    def op_of_external(ext: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        pos = lookup(ext_keys, np.where(ext > 0, ext, -1))
        return np.where(pos >= 0, ext_index[np.clip(pos, 0, None)] if len(ext_index) else -1, -1)

    rt_op = op_of_external(runtime["external_id"].to_numpy())
    # Runtime calls without an External id: the innermost op around them on their thread.
    missing = rt_op < 0
    if missing.any():
        rt_op[missing] = nesting.enclosing(runtime["thread"].to_numpy()[missing], runtime["ts"].to_numpy()[missing])
    runtime["op"] = rt_op
    # Where a correlation repeats (XPU's driver call inside the runtime call that made it,
    # pytorch/kineto#1467), the outermost call is the launch.
    rt_nesting = Nesting(runtime["thread"].to_numpy(), runtime["ts"].to_numpy(), runtime["dur"].to_numpy())
    rt_by_depth = np.lexsort((rt_nesting.depth,))
    rt_correlation = runtime["correlation"].to_numpy()[rt_by_depth]
    for table in device_tables:
        rt = lookup(rt_correlation, table["correlation"].to_numpy())
        rt = np.where(rt >= 0, rt_by_depth[np.clip(rt, 0, None)] if len(rt_by_depth) else -1, -1)
        table["runtime"] = rt
        from_runtime = np.where(rt >= 0, rt_op[np.clip(rt, 0, None)] if len(rt_op) else -1, -1)
        table["op"] = np.where(from_runtime >= 0, from_runtime, op_of_external(table["external_id"].to_numpy()))
    memory["op"] = nesting.enclosing(memory["thread"].to_numpy(), memory["ts"].to_numpy())
    flows["op"] = nesting.enclosing(flows["thread"].to_numpy(), flows["ts"].to_numpy())
    # Flow ids are unique only within a category (ac2g and fwdbwd ids overlap): keyed by both.
    flow_id, phase = flows["flow_id"].to_numpy(), flows["phase"].to_numpy()
    key = flows["cat"].cat.codes.to_numpy().astype(np.int64) * (len(flows) + 1) + flow_id
    flows["peer"] = flow_peers(key, (phase == "s") & (flow_id >= 0), (phase == "f") & (flow_id >= 0))
    return nesting


def _steps(ops: pd.DataFrame) -> pd.DataFrame:
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


def build_model(parsed: ParsedTrace) -> TraceModel:
    """Build the `TraceModel` of one parsed trace."""
    b = _Builder(parsed)
    ops = b.ops()
    runtime = b.runtime()
    kernels = b.device_table(KIND_KERNEL)
    memcpy = b.device_table(KIND_MEMCPY)
    memset = b.device_table(KIND_MEMSET)
    syncs = b.device_table(KIND_SYNC)
    memory = b.memory()
    flows = b.flows()
    _link(ops, runtime, (kernels, memcpy, memset, syncs), memory, flows)
    model = TraceModel(
        origin_us=b.origin,
        threads=b.threads(),
        ops=ops,
        python=b.python(),
        runtime=runtime,
        kernels=kernels,
        memcpy=memcpy,
        memset=memset,
        syncs=syncs,
        gpu_annotations=b.device_table(KIND_GPU_ANNOTATION),
        memory=memory,
        flows=flows,
        counters=b.counters(),
        other=b.other(),
        steps=_steps(ops),
        devices=_devices_used(_devices(parsed.metadata), (kernels, memcpy, memset), b.anomalies),
        metadata=parsed.metadata,
    )
    model.anomalies = b.anomalies
    return model
