"""The builder: a parsed trace (`parse`) -> the tables of a `TraceModel`.

`build_model(parsed)` reads the events batch by batch on helper threads into compact
columns (`batches`: strings coded, see `coding`; args decoded per kind, see `kinds`), joins
the batches and cuts one table per event kind out of them (`_Builder`), then resolves the
links between the tables, the steps and the devices (`resolve`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd
import polars as pl

from .anomalies import (EVENTS_FAR_FROM_THE_TRACE_DROPPED, EVENTS_WITHOUT_TS_DROPPED, INVALID_DURATIONS_ZEROED,
                        UNSUPPORTED_EVENTS_SKIPPED, record)
from .batches import TOP_LEVEL_TEXT, concat_columns, read_batches, text_interners
from .coding import (Interner, as_floats, categorical_of, coded_series, decoded_texts, first_valid,
                     frame_codes, id_codes, json_categorical, recode, text_categorical, whole_ints)
from . import accelerators
from .kinds import (KIND_CANDIDATE, KIND_COUNTER, KIND_FLOW, KIND_GPU_ANNOTATION, KIND_KERNEL, KIND_MEMCPY,
                    KIND_MEMORY, KIND_MEMSET, KIND_META, KIND_OP, KIND_OTHER, KIND_PYTHON, KIND_RUNTIME, KIND_SKIPPED,
                    KIND_SYNC, ARGS_TYPES, KIND_CODE, KIND_OF_CANDIDATE_ROLE, KIND_OF_CODE)
from .linking import lookup
from .model import TraceModel, first_int
from .parse import FLOW_SCHEMA
from .resolve import devices_of, devices_used, link_tables, step_table

if TYPE_CHECKING:
    import numpy.typing as npt

    from .batches import ArgColumns
    from .coding import Coded
    from .parse import ParsedTrace

    # What `_Builder._kept` filters: a row per event of one kind, as an array, frame or list.
    _Rows = TypeVar("_Rows", npt.NDArray[Any], pl.DataFrame, list[Any])


# Longer than any profiling session (about 11.6 days): a duration beyond it is invalid.
_MAX_DURATION_US = 1e12

# An event further than this from the median of a trace's timestamps (a day and a bit) is not
# part of the profiled window: no profiling session writes one file over days.
_FAR_FROM_TRACE_US = 1e11


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
        self._interners = {key: Interner() for key in TOP_LEVEL_TEXT}
        parts: dict[str, list[npt.NDArray[Any]]] = {key: [] for key in (*TOP_LEVEL_TEXT, "ts", "dur", "kind")}
        self._arg_parts: dict[str, list[dict[str, npt.NDArray[Any]]]] = {kind: [] for kind in ARGS_TYPES}
        self._arg_interners = {kind: text_interners(args_type) for kind, args_type in ARGS_TYPES.items()}
        self._flow_parts: list[pl.DataFrame] = []
        self._counter_args: list[list[Any]] = []
        self._slice_flow_parts: list[pl.DataFrame] = []
        read = 0  # events of the batches before
        self._kept_of_kind: dict[str, npt.NDArray[np.bool_]] = {}  # kind -> which of its events (as read) are kept
        self._candidate_kinds: npt.NDArray[np.int8] | None = None  # see `candidate_kinds`
        # Times are held relative to the first batch's anchor (a whole µs): differences of
        # whole numbers and small fractions, exact where absolute floats would not be.
        self.anchor_us: int | None = None
        for batch in read_batches(raws, parsed.release):
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
        columns = concat_columns(self._arg_parts[kind], ARGS_TYPES[kind], self._arg_interners[kind])
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
    link_tables(ops, runtime, (kernels, memcpy, memset, syncs), memory, flows)
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
        steps=step_table(ops),
        devices=devices_used(devices_of(parsed.metadata), (kernels, memcpy, memset), b.anomalies),
        metadata=parsed.metadata,
    )
    model.anomalies = b.anomalies
    return model
