"""Trace health: what a trace gets wrong, stated, with the views each flaw can affect.

One row per finding that occurs, from three sources:

- ``torch_validator``: the six rules of ``torch.profiler._trace_validator`` (torch 2.13), under
  the same names and with the same counts as its ``validate_trace`` gives for the same file
  (one count per violation message it would print), computed over the model's tables;
- ``import``: what the reader repaired or dropped (`tb_plugin.trace.anomalies`), by key;
- ``model``: what the tables show once read: events outside the profiled window, kernels
  overlapping on one stream (kept: programmatic dependent launch), flows without their other
  end, device activity starting before the runtime call that launched it (clock skew).

Severities: ``violation`` (a validator rule), ``data_loss`` (events or values lost),
``warning`` (kept, but a view may read them wrongly), ``info`` (repaired or kept, no view
misled). A trace is *clean* when it has no finding but ``info`` ones (`is_clean`): the
Overview's card stays collapsed and ``python -m tb_plugin check`` exits 0.

Where torch reads a field the model does not keep, the model's nearest column stands in (the
counts agree on every trace Kineto writes; tests/test_health.py checks them against torch on
the samples, the shared real traces and hand-made traces that break each rule):

- a sync record's kind is its name (Kineto writes ``cuda_sync_kind`` equal to it);
- every row of the kernels table counts as ``cat: kernel`` (torch reads only that category);
- an args field absent, or written as the model's "absent" value (-1, ""), is absent.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..schema import declare, documented, route
from ..trace.anomalies import ANOMALIES, DATA_LOSS, TEXT_VALUED, describe
from ..trace.model import TraceModel
from .common import cached, name_mask, texts

VIOLATION = "violation"
WARNING = "warning"
INFO = "info"
# Severities that make a trace not clean, most serious first (the rows' order).
SEVERITIES = (VIOLATION, DATA_LOSS, WARNING, INFO)

HEALTH = declare(
    "health", "one flaw found in the trace: a validator rule it breaks, a repair or loss of the import, or an "
              "oddity of its events",
    ("finding", "str", "", "the finding's name (torch's rule name for validator rules, the anomaly key for the import's)"),
    ("source", "str", "", "torch_validator, import or model: who found it"),
    ("severity", "str", "", "violation, data_loss, warning or info (nothing lost nor misread)"),
    ("count", "int64", "count", "how many times it occurs (for a validator rule: the violations validate_trace reports)"),
    ("meaning", "str", "", "one line: what it is and why it matters"),
    ("affects", "str", "", "the views whose numbers it can change, comma-separated"),
    ("detail", "str", "", "one instance or the reason, as a sentence; empty when none"),
)

# Views, as the page names its tabs.
_TRACE = "Trace"
_ALL = "every view"


def _finding(key: str, source: str, severity: str, meaning: str, affects: Sequence[str]) -> dict[str, str]:
    return {"finding": key, "source": source, "severity": severity, "meaning": meaning, "affects": ", ".join(affects)}


_RULES = {
    "_check_gpu_kernel_causality": _finding(
        "_check_gpu_kernel_causality", "torch_validator", VIOLATION,
        "a kernel starts before the cudaLaunchKernel of its External id: host and device clocks disagree",
        ("Kernel (launch delays)", "GPU idle", "Trace", "critical path")),
    "_check_stream_wait_corr_id_populated": _finding(
        "_check_stream_wait_corr_id_populated", "torch_validator", VIOLATION,
        "a Stream Wait Event or Event Sync does not say which cudaEventRecord it waits for "
        "(wait_on_cuda_event_record_corr_id < 0)",
        ("critical path", "Trace (wait arrows)")),
    "_check_stream_sync_overlap": _finding(
        "_check_stream_sync_overlap", "torch_validator", VIOLATION,
        "a Stream Sync starts while a kernel of its stream is still running",
        ("GPU idle", "critical path")),
    "_check_stream_wait_corr_id_in_past": _finding(
        "_check_stream_wait_corr_id_in_past", "torch_validator", VIOLATION,
        "a Stream Wait Event waits for a cudaEventRecord the trace lacks, or one recorded after it",
        ("critical path", "Trace (wait arrows)")),
    "_check_nccl_metadata": _finding(
        "_check_nccl_metadata", "torch_validator", VIOLATION,
        "a record_param_comms lacks one of Collective name, dtype, In msg nelems, Out msg nelems, Group size",
        ("Distributed (collective sizes, bandwidth)", "Job")),
    "_check_backward_seq_id_uniqueness": _finding(
        "_check_backward_seq_id_uniqueness", "torch_validator", VIOLATION,
        "one autograd Sequence number names two or more different backward ops",
        ("Module (forward/backward pairing)", "Compiled", "FLOPs")),
}

_MODEL = {
    "events_outside_profiled_window": _finding(
        "events_outside_profiled_window", "model", WARNING,
        "events that start before or after the profiler's own span (its 'PyTorch Profiler' range): "
        "recorded out of the session (pytorch/pytorch#192021); an event the session's end cuts is not counted",
        ("Overview (step breakdown)", "Trace", "GPU idle")),
    "device_before_launch": _finding(
        "device_before_launch", "model", WARNING,
        "device activity that starts before the runtime call that launched it (by correlation): "
        "the host and device clocks are skewed",
        ("Kernel (launch delays)", "GPU idle (host wait)", "Trace", "critical path")),
    "overlapping_kernels_on_a_stream": _finding(
        "overlapping_kernels_on_a_stream", "model", INFO,
        "kernels that start before the previous kernel of their stream ends (programmatic dependent launch); "
        "kept and drawn in lanes, where some viewers drop them (google/perfetto#4280)",
        ("Trace (lanes)", "GPU utilization counts the overlap once")),
    "unpaired_flows": _finding(
        "unpaired_flows", "model", INFO,
        "flow events whose other end the trace lacks (Kineto writes ends on runtime calls that launched nothing)",
        ("Trace (flow arrows)",)),
}

# The views each import anomaly can affect (`trace.anomalies`); a key not listed here affects
# whatever its events would have fed.
_IMPORT_AFFECTS = {
    "malformed_events_dropped": (_ALL,),
    "malformed_args_replaced": ("Operator (shapes)", "Kernel (launch configuration)", "Memory", "Distributed"),
    "events_without_ts_dropped": (_ALL,),
    "events_far_from_the_trace_dropped": ("Overview", "Kernel", "GPU idle", _TRACE),
    "invalid_durations_zeroed": ("Overview", "Operator", "Kernel", _TRACE),
    "metadata_values_nulled": ("Overview (environment)", "Distributed"),
    "unsupported_events_skipped": (_TRACE,),
    "device_properties_mapped": ("Overview (GPU summary)", "Kernel (occupancy)"),
    "invalid_utf8_replaced": ("names in every view",),
    "lone_surrogates_replaced": ("names in every view",),
    "bare_words_nulled": ("the fields nulled, in the views reading them",),
}


@documented(HEALTH)
def health(model: TraceModel) -> pd.DataFrame:
    """The trace's findings, most severe first (validator rules, then losses, warnings, info);
    empty for a trace with nothing to say. See the module docstring for every finding.

    Notes
    -----
    Validator counts follow torch's rules exactly: causality counts External ids whose
    earliest kernel starts before their earliest cudaLaunchKernel; stream sync overlap counts
    (Stream Sync, kernel of its device and stream) pairs with kernel start < sync start <
    kernel end; the in-past rule pools the External ids and correlations of cudaEventRecord
    calls (cuda_runtime or cuda_driver) with their earliest start; the backward rule skips
    Sequence number 0, as torch's ``or`` does.
    """
    return cached(model, "health", lambda: _build(model))


def is_clean(findings: pd.DataFrame) -> bool:
    """Whether a `health` table has no finding but `info` ones."""
    return not (findings["severity"] != INFO).any()


def _build(model: TraceModel) -> pd.DataFrame:
    rows = []
    for key, (count, detail) in _validator_counts(model).items():
        if count:
            rows.append({**_RULES[key], "count": count, "detail": detail})
    for row in describe(model.anomalies):  # those this reader does not declare too, as info
        key, value = str(row["key"]), row["value"]
        counted = key in ANOMALIES and key not in TEXT_VALUED
        count = int(value) if counted else 1  # type: ignore[call-overload]  # (`describe` rows hold objects)
        rows.append({**_finding(key, "import", str(row["severity"]), str(row["meaning"]), _IMPORT_AFFECTS.get(key, (_ALL,))),
                     "count": count, "detail": "" if counted else str(value)})
    for key, (count, detail) in _model_counts(model).items():
        if count:
            rows.append({**_MODEL[key], "count": count, "detail": detail})
    if not rows:
        return HEALTH.empty()
    table = pd.DataFrame(rows)
    rank = table["severity"].map({s: i for i, s in enumerate(SEVERITIES)}).fillna(len(SEVERITIES))
    return HEALTH.frame(table.assign(rank=rank).sort_values("rank", kind="stable").reset_index(drop=True))


# --- torch's validator rules -------------------------------------------------------------------

_EVENT_RECORD_NAMES = ("cudaEventRecord", "cudaEventRecord_ptsz", "cudaEventRecordWithFlags",
                       "cudaEventRecordWithFlags_ptsz")
# (violations or findings, one of them as a sentence; empty when none)
Count = tuple[int, str]
_BACKWARD = "autograd::engine::evaluate_function:"


def _validator_counts(model: TraceModel) -> dict[str, Count]:
    """{rule: (violations, one of them as a sentence)} of torch's six rules."""
    return {
        "_check_gpu_kernel_causality": _kernel_causality(model),
        "_check_stream_wait_corr_id_populated": _wait_corr_id_populated(model),
        "_check_stream_sync_overlap": _stream_sync_overlap(model),
        "_check_stream_wait_corr_id_in_past": _wait_corr_id_in_past(model),
        "_check_nccl_metadata": _nccl_metadata(model),
        "_check_backward_seq_id_uniqueness": _backward_seq_ids(model),
    }


def _earliest(keys: Any, ts: Any) -> pd.Series:
    """Per distinct key, its earliest ts, as a Series indexed by key."""
    return pd.Series(ts).groupby(keys).min()


def _kernel_causality(model: TraceModel) -> Count:
    rt, kernels = model.runtime, model.kernels
    launch = name_mask(rt["cat"], lambda c: c == "cuda_runtime") \
        & name_mask(rt["name"], lambda n: n == "cudaLaunchKernel") & (rt["external_id"].to_numpy() != -1)
    launches = _earliest(rt["external_id"].to_numpy()[launch], rt["ts"].to_numpy()[launch])
    with_id = kernels["external_id"].to_numpy() != -1
    firsts = _earliest(kernels["external_id"].to_numpy()[with_id], kernels["ts"].to_numpy()[with_id])
    both = firsts.index.intersection(launches.index)
    early = (firsts[both] < launches[both]).to_numpy()
    if not early.any():
        return 0, ""
    ext = both[early][0]
    return int(early.sum()), (f"the kernel of External id {ext} starts {launches[ext] - firsts[ext]:.1f} us "
                              f"before its cudaLaunchKernel")


def _syncs_of(model: TraceModel, *kinds: str) -> pd.DataFrame:
    syncs = model.syncs
    return syncs[name_mask(syncs["name"], lambda n: n in kinds)]


def _wait_corr_id_populated(model: TraceModel) -> Count:
    waits = _syncs_of(model, "Stream Wait Event", "Event Sync")
    bad = waits[waits["wait_on_event_record_correlation"].to_numpy() < 0]
    if not len(bad):
        return 0, ""
    first = bad.iloc[0]
    return len(bad), f"'{first['name']}' at {first['ts']:.1f} us names no cudaEventRecord"


def _stream_sync_overlap(model: TraceModel) -> Count:
    syncs = _syncs_of(model, "Stream Sync")
    if not len(syncs):
        return 0, ""
    kernels = model.kernels[model.kernels["dur"].to_numpy() > 0]  # a kernel of no time holds no instant inside it
    count, detail = 0, ""
    # One pass per stream with a Stream Sync (a handful), vectorised over its kernels and syncs.
    for (device, stream), group in syncs.groupby(["device", "stream"], sort=False):
        on_stream = kernels[(kernels["device"].to_numpy() == device) & (kernels["stream"].to_numpy() == stream)]
        starts = np.sort(on_stream["ts"].to_numpy())
        ends = np.sort((on_stream["ts"] + on_stream["dur"]).to_numpy())
        at = group["ts"].to_numpy()
        # kernels started before the sync, less those ended by then (each of those started before it too)
        running = np.searchsorted(starts, at, side="left") - np.searchsorted(ends, at, side="right")
        count += int(running.sum())
        if not detail and running.any():
            detail = f"the Stream Sync at {at[np.argmax(running > 0)]:.1f} us on device {device} stream {stream} " \
                     f"starts while {int(running.max())} kernel(s) still run"
    return count, detail


def _wait_corr_id_in_past(model: TraceModel) -> Count:
    rt = model.runtime
    records = rt[name_mask(rt["cat"], lambda c: c in ("cuda_runtime", "cuda_driver"))
                 & name_mask(rt["name"], lambda n: n in _EVENT_RECORD_NAMES)]
    ids = np.concatenate([records["external_id"].to_numpy(), records["correlation"].to_numpy()])
    ts = np.concatenate([records["ts"].to_numpy(), records["ts"].to_numpy()])
    recorded = _earliest(ids[ids != -1], ts[ids != -1])
    waits = _syncs_of(model, "Stream Wait Event")
    ref = waits["wait_on_event_record_correlation"].to_numpy()
    waits, ref = waits[ref >= 0], ref[ref >= 0]
    record_ts = recorded.reindex(ref).to_numpy()
    missing = np.isnan(record_ts)
    future = ~missing & (record_ts > waits["ts"].to_numpy())
    bad = missing | future
    if not bad.any():
        return 0, ""
    i = int(np.argmax(bad))
    what = "no cudaEventRecord in the trace" if missing[i] else \
        f"a cudaEventRecord {record_ts[i] - waits['ts'].iloc[i]:.1f} us in its future"
    return int(bad.sum()), f"the Stream Wait Event at {waits['ts'].iloc[i]:.1f} us refers to correlation {ref[i]}: {what}"


def _nccl_metadata(model: TraceModel) -> Count:
    ops = model.ops
    comms = ops[name_mask(ops["name"], lambda n: n == "record_param_comms")]
    absent = {"Collective name": texts(comms["collective_name"]) == "", "dtype": texts(comms["dtype"]) == "",
              "In msg nelems": comms["in_msg_nelems"].to_numpy() == -1,
              "Out msg nelems": comms["out_msg_nelems"].to_numpy() == -1,
              "Group size": comms["group_size"].to_numpy() == -1}
    missing = np.logical_or.reduce(list(absent.values())) if len(comms) else np.zeros(0, bool)
    if not missing.any():
        return 0, ""
    i = int(np.argmax(missing))
    fields = sorted(name for name, flags in absent.items() if flags[i])
    return int(missing.sum()), f"the record_param_comms at {comms['ts'].iloc[i]:.1f} us lacks {', '.join(fields)}"


def _backward_seq_ids(model: TraceModel) -> Count:
    ops = model.ops
    seq = ops["sequence_number"].to_numpy()
    backward = name_mask(ops["name"], lambda n: _BACKWARD in n) & (seq != -1) & (seq != 0)  # torch's `or` skips 0
    per_seq = pd.Series(ops["name"].cat.codes.to_numpy()[backward]).groupby(seq[backward]).nunique()
    shared = per_seq[per_seq > 1]
    if not len(shared):
        return 0, ""
    return len(shared), f"Sequence number {shared.index[0]} is shared by {shared.iloc[0]} backward ops"


# --- what the model shows ----------------------------------------------------------------------

# Timed tables an event outside the profiled window may sit in.
_TIMED = ("ops", "python", "runtime", "kernels", "memcpy", "memset", "syncs", "gpu_annotations")
# Kineto's span of the whole session: `{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)"}`.
_SESSION_CATEGORY = "trace"
# Ends are sums of two floats: a nanosecond of slack keeps rounding from counting as overlap.
_SLACK_US = 1e-3


def _model_counts(model: TraceModel) -> dict[str, Count]:
    return {
        "events_outside_profiled_window": _outside_window(model),
        "device_before_launch": _device_before_launch(model),
        "overlapping_kernels_on_a_stream": _overlapping_kernels(model),
        "unpaired_flows": _unpaired_flows(model),
    }


def _outside_window(model: TraceModel) -> Count:
    other = model.other
    session = other[name_mask(other["cat"], lambda c: c.lower() == _SESSION_CATEGORY) & (other["dur"].to_numpy() > 0)]
    if not len(session):
        return 0, ""
    start, end = session["ts"].min(), (session["ts"] + session["dur"]).max()
    count, detail = 0, ""
    for name in _TIMED:
        table = getattr(model, name)
        ts = table["ts"].to_numpy()
        outside = (ts < start) | (ts > end)
        count += int(outside.sum())
        if not detail and outside.any():
            i = int(np.argmax(outside))
            detail = f"{name} '{table['name'].iloc[i]}' at {ts[i]:.1f} us lies outside the session " \
                     f"[{start:.1f}, {end:.1f}] us"
    return count, detail


def _device_before_launch(model: TraceModel) -> Count:
    launched_at = model.runtime["ts"].to_numpy()
    count, worst, detail = 0, 0.0, ""
    for name in ("kernels", "memcpy", "memset"):
        table = getattr(model, name)
        rt = table["runtime"].to_numpy()
        linked = rt >= 0
        lead = launched_at[rt[linked]] - table["ts"].to_numpy()[linked]
        early = lead > 0
        count += int(early.sum())
        if early.any() and lead.max() > worst:
            worst = float(lead.max())
            detail = f"the most: {name} '{table['name'].to_numpy()[linked][np.argmax(lead)]}' starts {worst:.1f} us " \
                     f"before its launch"
    return count, detail


def _overlapping_kernels(model: TraceModel) -> Count:
    kernels = model.kernels.sort_values(["device", "stream", "ts"], kind="stable")
    if not len(kernels):
        return 0, ""
    keys = [kernels["device"], kernels["stream"]]
    ends = (kernels["ts"] + kernels["dur"]).groupby(keys).cummax()
    previous_end = ends.groupby(keys).shift().to_numpy()
    overlap = kernels["ts"].to_numpy() < previous_end - _SLACK_US
    if not overlap.any():
        return 0, ""
    streams = kernels[overlap].groupby(["device", "stream"]).size()
    return int(overlap.sum()), ", ".join(f"device {d} stream {s}: {n}" for (d, s), n in zip(streams.index.tolist(), streams.tolist()))


def _unpaired_flows(model: TraceModel) -> Count:
    flows = model.flows
    unpaired = flows[(flows["peer"].to_numpy() < 0) & (flows["flow_id"].to_numpy() >= 0)]
    if not len(unpaired):
        return 0, ""
    by_kind = unpaired.groupby([unpaired["cat"].astype(str), unpaired["phase"].astype(str)]).size()
    return len(unpaired), ", ".join(f"{n} {cat} {'starts' if ph == 's' else 'ends'}" for (cat, ph), n in zip(by_kind.index.tolist(), by_kind.tolist()))


HEALTH_ROUTE = route(
    "health",
    "Trace health: torch's trace-validator rules the trace breaks (same names and counts as "
    "torch.profiler._trace_validator.validate_trace), what the import repaired or dropped, and events outside the "
    "session, skewed, overlapping or unpaired; each with its count, meaning and the views it can affect. Empty "
    "for a clean trace.",
    health,
    table=HEALTH)
