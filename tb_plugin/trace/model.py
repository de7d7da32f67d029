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
from dataclasses import dataclass, field
from operator import attrgetter

import msgspec
import numpy as np
import pandas as pd
from msgspec import Raw

from .linking import Nesting, lookup
from .parse import decode_args

_NO_RAW = Raw(b"null")


# Args Structs: absent fields take sentinel defaults (-1, NaN, "") rather than None, so columns
# come out of the Structs with one `np.fromiter` each. A value of the wrong type (or null)
# makes `decode_args` fall back to decoding that batch event by event.
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
    collective_seq: int = _i("Seq")


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
    sort_index: int | float | None = None


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


def _column(events, attr):
    return list(map(attrgetter(attr), events))


def _objects(values):
    """Object array of a list without numpy probing each item (bytes and msgspec.Raw expose
    the buffer protocol, which makes `np.array(..., dtype=object)` 50x slower)."""
    return np.fromiter(values, dtype=object, count=len(values))


def _object_column(events, attr):
    return np.fromiter(map(attrgetter(attr), events), dtype=object, count=len(events))


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


def _whole(values, missing=-1):
    """int64 from float64, `missing` where NaN."""
    return np.where(np.isfinite(values), values, missing).astype(np.int64)


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


def _intern(values):
    """(codes, categories) of strings: categories unique, always holding "" (None's code)."""
    codes, uniques = pd.factorize(_objects(values), use_na_sentinel=True)
    categories = [u if isinstance(u, str) else str(u) for u in uniques]
    categories_unique, remap = np.unique(np.array(categories + [""], dtype=object), return_inverse=True)
    remap = remap.astype(np.int64)
    codes = np.where(codes < 0, remap[len(categories)], remap[np.clip(codes, 0, None)])
    return codes, pd.Index(categories_unique, dtype=object)


def _categorical(values):
    """Interned strings as a pandas Categorical; None becomes the empty string."""
    codes, categories = _intern(values)
    return pd.Categorical.from_codes(codes, categories=categories, validate=False)


def _recode(coded, mask, transform):
    """Categorical of the rows in `mask` of factorized strings, each distinct value mapped
    through `transform` once (not once per row)."""
    codes, uniques = coded
    texts = [transform(u) for u in uniques] + [transform(None)]  # code -1 (missing) -> last
    new_codes, categories = _intern(texts)
    picked = codes[mask]
    return pd.Categorical.from_codes(new_codes[np.where(picked < 0, len(uniques), picked)], categories=categories,
                                     validate=False)


def _raw_json_categorical(raws):
    """Interned compact JSON text of `Raw` values (e.g. input shapes); absent -> ""."""
    codes, uniques = pd.factorize(_objects([bytes(r) for r in raws]))
    texts = []
    for u in uniques:
        try:
            value = msgspec.json.decode(u)
            texts.append("" if value is None else json.dumps(value, separators=(", ", ": ")) if not isinstance(value, str) else value)
        except msgspec.DecodeError:
            texts.append(u.decode("utf-8", "replace"))
    return _categorical([texts[c] for c in codes]) if len(uniques) < len(raws) // 2 + 1 else _categorical(texts and [texts[c] for c in codes])


def _first_valid(primary, secondary):
    return np.where(primary >= 0, primary, secondary)


def _device_from_fallback(values):
    """Device / stream numbers from pid/tid values like 0, "1" or "stream 7"."""
    codes, uniques = pd.factorize(_objects(values))
    parsed = []
    for u in uniques:
        m = _DIGITS.search(str(u))
        parsed.append(int(m.group(1)) if m else -1)
    return np.asarray(parsed, dtype=np.int64)[codes] if len(values) else np.zeros(0, np.int64)


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


class _Builder:
    """Builds the tables of one `TraceModel`; one instance per trace.

    Each top-level field is pulled out of the event Structs once, for all events (one pass
    per field, in C through `attrgetter`); tables then take their rows by boolean masks.
    """

    def __init__(self, parsed):
        self.anomalies = dict(parsed.anomalies)
        events = parsed.events
        n = len(events)
        ph = _object_column(events, "ph")
        cat = _object_column(events, "cat")
        self.name_codes, self.name_categories = _intern(_column(events, "name"))
        self.kind = self._classify(ph, cat)
        self.ts_all = _float_field(events, "ts")
        self.dur_all = _float_field(events, "dur")
        self.id_all = _object_column(events, "id")
        self.bp_all = _object_column(events, "bp")
        self.args_all = _object_column(events, "args")
        self.pid_all = _object_column(events, "pid")
        self.tid_all = _object_column(events, "tid")
        skipped = int((self.kind == KIND_SKIPPED).sum())
        if skipped:
            self.anomalies["unsupported_events_skipped"] = skipped
        timed = np.isin(self.kind, [KIND_META, KIND_SKIPPED], invert=True)
        missing_ts = timed & ~np.isfinite(self.ts_all)
        if missing_ts.any():
            self.anomalies["events_without_ts_dropped"] = int(missing_ts.sum())
            self.kind[missing_ts] = KIND_SKIPPED
        # Flow / instant markers far outside the profiled window (e.g. "Record Window End")
        # must not move the origin; intervals define it.
        interval = np.isin(self.kind, [KIND_OP, KIND_RUNTIME, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET])
        base = self.ts_all[interval] if interval.any() else self.ts_all[timed & np.isfinite(self.ts_all)]
        self.origin = float(np.min(base)) if len(base) else 0.0
        self.thread_all, self.thread_keys = self._threads(timed)

    def _classify(self, ph, cat):
        """Kind of every event: classify each distinct (ph, cat) once, broadcast by code."""
        ph_codes, ph_uniques = pd.factorize(ph)
        cat_codes, cat_uniques = pd.factorize(cat)
        self.ph_coded, self.cat_coded = (ph_codes, list(ph_uniques)), (cat_codes, list(cat_uniques))
        width = len(cat_uniques) + 1
        pair_codes, pairs = pd.factorize(ph_codes.astype(np.int64) * width + cat_codes + 1)
        kinds = np.array([classify(ph_uniques[p // width] if p // width >= 0 else None,
                                   cat_uniques[p % width - 1] if p % width else None, None) for p in pairs], dtype=object)
        kind = kinds[pair_codes] if len(ph) else np.zeros(0, dtype=object)
        # Instant events are allocator records when named "[memory]".
        instant = (ph == "i") | (ph == "I")
        memory_code = self.name_categories.get_indexer(["[memory]"])[0]
        kind[instant & (self.name_codes == memory_code)] = KIND_MEMORY
        return kind

    def _threads(self, timed):
        """Thread table row of every event's (pid, tid), both normalised to stripped strings."""
        pid_codes, pid_uniques = pd.factorize(self.pid_all)
        tid_codes, tid_uniques = pd.factorize(self.tid_all)
        width = len(tid_uniques) + 1
        pair_codes, pairs = pd.factorize(pid_codes.astype(np.int64) * width + tid_codes + 1)
        pid_text = [str(u).strip() for u in pid_uniques]
        tid_text = [str(u).strip() for u in tid_uniques]
        keys, rows = {}, np.empty(len(pairs), dtype=np.int64)
        for i, pair in enumerate(pairs):  # once per distinct (pid, tid), not per event
            p, t = pair // width, pair % width - 1
            key = (pid_text[p] if p >= 0 else "", tid_text[t] if t >= 0 else "")
            rows[i] = keys.setdefault(key, len(keys))
        return (rows[pair_codes] if len(pair_codes) else np.zeros(0, np.int64)), list(keys)

    def mask(self, kind):
        return self.kind == kind

    def names(self, mask):
        return pd.Categorical.from_codes(self.name_codes[mask], categories=self.name_categories, validate=False)

    def ts(self, mask):
        return self.ts_all[mask] - self.origin

    def cat_lower(self, mask):
        return _recode(self.cat_coded, mask, lambda c: c.lower() if c else "")

    def phases(self, mask):
        return _recode(self.ph_coded, mask, lambda p: p or "")

    def durations(self, mask, instants_allowed=False):
        dur = self.dur_all[mask]
        if instants_allowed:  # instant events have no duration by design
            dur = np.where(np.isnan(dur), 0.0, dur)
        bad = ~np.isfinite(dur) | (dur < 0)
        if bad.any():
            self.anomalies["invalid_durations_zeroed"] = self.anomalies.get("invalid_durations_zeroed", 0) + int(bad.sum())
            dur = np.where(bad, 0.0, dur)
        return dur

    def args(self, mask, args_type):
        structs, bad = decode_args(list(self.args_all[mask]), args_type)
        if bad:
            self.anomalies["malformed_args_replaced"] = self.anomalies.get("malformed_args_replaced", 0) + bad
        return structs

    # --- tables -------------------------------------------------------------------------

    def ops(self):
        m = self.mask(KIND_OP)
        a = self.args(m, _OpArgs)
        input_dims = [d if bytes(d) != b"null" else o for d, o in zip(_column(a, "input_dims"), _column(a, "input_dims_old"))]
        return pd.DataFrame({
            "name": self.names(m),
            "cat": self.cat_lower(m),
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "dur": self.durations(m),
            "external_id": _first_valid(_int_field(a, "external_id"), _int_field(a, "external_id_lower")),
            "sequence_number": _int_field(a, "sequence_number"),
            "fwd_thread_id": _int_field(a, "fwd_thread_id"),
            "input_dims": _raw_json_categorical(input_dims),
            "input_type": _raw_json_categorical(_column(a, "input_type")),
            "call_stack": _categorical(_column(a, "call_stack")),
            "collective_name": _categorical(_column(a, "collective_name")),
            "in_msg_nelems": _int_field(a, "in_msg_nelems"),
            "out_msg_nelems": _int_field(a, "out_msg_nelems"),
            "group_size": _int_field(a, "group_size"),
            "dtype": _categorical(_column(a, "dtype")),
            "process_group_name": _categorical(_column(a, "process_group_name")),
            "collective_seq": _int_field(a, "collective_seq"),
        })

    def python(self):
        m = self.mask(KIND_PYTHON)
        a = self.args(m, _PythonArgs)
        return pd.DataFrame({
            "name": self.names(m),
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "dur": self.durations(m),
            "python_id": _int_field(a, "python_id"),
            "python_parent_id": _int_field(a, "python_parent_id"),
            "python_module_id": _int_field(a, "python_module_id"),
        })

    def runtime(self):
        m = self.mask(KIND_RUNTIME)
        a = self.args(m, _RuntimeArgs)
        return pd.DataFrame({
            "name": self.names(m),
            "cat": self.cat_lower(m),
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "dur": self.durations(m),
            "correlation": _int_field(a, "correlation"),
            "external_id": _first_valid(_int_field(a, "external_id"), _int_field(a, "external_id_lower")),
            "cbid": _int_field(a, "cbid"),
        })

    def device_table(self, kind):
        m = self.mask(kind)
        a = self.args(m, _DeviceArgs)
        device = _int_field(a, "device")
        stream = _int_field(a, "stream")
        if m.any() and ((device < 0).any() or (stream < 0).any()):
            device = np.where(device >= 0, device, _device_from_fallback(self.pid_all[m]))
            stream = np.where(stream >= 0, stream, _device_from_fallback(self.tid_all[m]))
        columns = {
            "name": self.names(m),
            "device": device,
            "stream": stream,
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "dur": self.durations(m),
            "correlation": _int_field(a, "correlation"),
            "external_id": _first_valid(_int_field(a, "external_id"), _int_field(a, "external_id_lower")),
        }
        if kind == KIND_KERNEL:
            columns.update({
                "grid": _raw_json_categorical(_column(a, "grid")),
                "block": _raw_json_categorical(_column(a, "block")),
                "registers_per_thread": _whole(_float_field(a, "registers_per_thread")),
                "shared_memory": _whole(_float_field(a, "shared_memory")),
                "blocks_per_sm": _float_field(a, "blocks_per_sm"),
                "warps_per_sm": _float_field(a, "warps_per_sm"),
                "est_achieved_occupancy_pct": _float_field(a, "est_achieved_occupancy_pct"),
            })
        elif kind in (KIND_MEMCPY, KIND_MEMSET):
            columns["bytes"] = _whole(_float_field(a, "bytes"))
            columns["memory_bandwidth_gbps"] = _float_field(a, "memory_bandwidth_gbps")
        return pd.DataFrame(columns)

    def memory(self):
        m = self.mask(KIND_MEMORY)
        a = self.args(m, _MemoryArgs)
        return pd.DataFrame({
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "device_type": _int_field(a, "device_type"),
            "device_id": _int_field(a, "device_id"),
            "addr": _int_field(a, "addr"),
            "bytes": _whole(_float_field(a, "bytes"), missing=0),
            "total_allocated": _float_field(a, "total_allocated"),
            "total_reserved": _float_field(a, "total_reserved"),
        })

    def flows(self):
        m = self.mask(KIND_FLOW)
        id_codes, _ = pd.factorize(_objects([str(i) for i in self.id_all[m]]))
        return pd.DataFrame({
            "flow_id": np.asarray(id_codes, dtype=np.int64),
            "phase": self.phases(m),
            "cat": self.cat_lower(m),
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "binding": _categorical(self.bp_all[m]),
        })

    def counters(self):
        m = self.mask(KIND_COUNTER)
        if not m.any():
            return pd.DataFrame({"name": _categorical([]), "thread": np.zeros(0, np.int64),
                                 "ts": np.zeros(0), "series": _categorical([]), "value": np.zeros(0)})
        values = msgspec.json.decode(b"[" + b",".join(self.args_all[m]) + b"]")
        # Counter events are rare (one per sample of a few series): a loop over them is cheap.
        rows = [(i, k, v) for i, d in enumerate(values) if isinstance(d, dict) for k, v in d.items()]
        idx = np.array([r[0] for r in rows], dtype=np.int64)
        return pd.DataFrame({
            "name": self.names(m)[idx],
            "thread": self.thread_all[m][idx],
            "ts": self.ts(m)[idx],
            "series": _categorical([r[1] for r in rows]),
            "value": _floats([r[2] if isinstance(r[2], (int, float)) else None for r in rows]),
        })

    def other(self):
        m = self.mask(KIND_OTHER)
        return pd.DataFrame({
            "name": self.names(m),
            "cat": _recode(self.cat_coded, m, lambda c: c or ""),
            "phase": self.phases(m),
            "thread": self.thread_all[m],
            "ts": self.ts(m),
            "dur": self.durations(m, instants_allowed=True),
        })

    def threads(self):
        """Thread table with names and sort order from the `M` metadata events."""
        m = self.mask(KIND_META)
        rows = np.array(self.thread_keys, dtype=object).reshape(-1, 2)
        table = pd.DataFrame({"pid": rows[:, 0], "tid": rows[:, 1]})
        if not m.any():
            return table.assign(process_name="", process_labels="", process_sort_index=np.nan,
                                thread_name="", thread_sort_index=np.nan)
        a = self.args(m, _MetaArgs)
        meta = pd.DataFrame({
            "what": np.asarray(self.names(m).astype(str)),
            "pid": rows[self.thread_all[m], 0],
            "tid": rows[self.thread_all[m], 1],
            "name": [None if n is None else str(n) for n in _column(a, "name")],
            "labels": _column(a, "labels"),
            "sort_index": _float_field(a, "sort_index"),
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
    ext_index = by_depth[lookup(op_ext[by_depth], np.unique(op_ext[op_ext > 0]))] if len(ops) else np.zeros(0, np.int64)
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
