"""Property-based tests (hypothesis) of the loader and the views.

Two kinds of generated input:

- *well-formed* traces built like Kineto writes them: ProfilerStep#N annotations holding
  nested cpu_ops, runtime / driver launches with correlation and External id, the kernels,
  memcpys and memsets they launched (with launch configuration args), `[memory]` instants
  inside the ops, ac2g flows, `M` metadata and counters;
- *damaged* traces: the same events with fields deleted or given wrong types, NaN, negative
  or huge values, odd strings, non-dict events and random JSON mixed in, wrong top levels,
  bare `NaN` in the text, truncated or random bytes, gzip or not.

Properties: `tb_plugin.load` raises nothing but `TraceError`; whatever loads answers every
view without an exception, and the views agree with each other and with the events
(step parts sum to the step, self <= total, kernel and memory counts match the raw events,
distributed parts sum to the step, a profile diffed with itself has zero deltas).

Runs are derandomized (the same examples every time, no example database), so CI is
reproducible; `TB_PLUGIN_HYPOTHESIS_EXAMPLES` raises the example count for a longer hunt.
"""

import gzip
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tb_plugin
from tb_plugin.store.cache import ModelCache
from tb_plugin.views.distributed import distributed

from .helpers import PREFIX, kernel, make_client, memory, op, runtime, wait_route

EXAMPLES = int(os.environ.get("TB_PLUGIN_HYPOTHESIS_EXAMPLES", "100"))
PROPERTY_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                    HealthCheck.large_base_example])

_SCRATCH = Path(tempfile.mkdtemp(prefix="tb_plugin_properties_"))

# --- names and odd values ---------------------------------------------------------------------

OP_NAMES = ["aten::conv2d", "aten::convolution", "aten::mm", "aten::addmm", "aten::relu", "aten::empty",
            "aten::add_", "aten::copy_", "nccl:all_reduce", "gloo:broadcast", "record_param_comms",
            "c10d::allreduce_", "Optimizer.step#SGD.step", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            "nn.Module: Conv2d_0", "<script>alert(1)</script>", "", "ünïcødé ✓", "a,b;\"c\"\n"]
KERNEL_NAMES = ["volta_sgemm_128x64_nn", "void at::native::elementwise_kernel<128, 4>()",
                "ncclKernel_AllReduce_RING_LL_Sum_float", "sm80_xmma_gemm_f16f16_f16f32", "triton_poi_fused_0",
                "<img src=x onerror=alert(1)>", ""]
ODD_STRINGS = st.sampled_from(["", " ", "NaN", "-1", "null", "\x00", "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
                               "x" * 5000, "ProfilerStep#", "ProfilerStep#-3", "ProfilerStep#99999999999999999999999",
                               "[memory]", "\\", "\"", "</script>"]) | st.text(max_size=20)
HUGE_INTS = st.sampled_from([2**63, 2**64 + 1, -(2**63) - 1, 10**30, -(10**30), 2**53 + 1])
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), HUGE_INTS, st.integers(-10**6, 10**6),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), -1.0, -1e300, 1e300, 0.5]),
    ODD_STRINGS, st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12,
)


# --- well-formed traces -----------------------------------------------------------------------

class _Ids:
    def __init__(self):
        self.external = 0
        self.correlation = 0

    def next_external(self):
        self.external += 1
        return self.external

    def next_correlation(self):
        self.correlation += 1
        return self.correlation


def _draw_ops(draw, ids, events, start, end, tid, depth):
    """Nested cpu_ops inside [start, end) on thread `tid`, each maybe launching device work
    and holding allocator records; appends to `events`."""
    if end - start < 4 or depth > 3:
        return
    count = draw(st.integers(0, 3 if depth < 2 else 1))
    cuts = sorted(draw(st.lists(st.integers(start, end), min_size=2 * count, max_size=2 * count)))
    for i in range(count):
        s, e = cuts[2 * i], cuts[2 * i + 1]
        ext = ids.next_external()
        args = {"External id": ext}
        if draw(st.booleans()):
            args["Input Dims"] = draw(st.lists(st.lists(st.integers(0, 64), max_size=3), max_size=3))
            args["Input type"] = draw(st.lists(st.sampled_from(["float", "c10::Half", "long int", "Scalar", ""]),
                                               min_size=len(args["Input Dims"]), max_size=len(args["Input Dims"])))
        if draw(st.booleans()):
            args["Call stack"] = draw(st.sampled_from(["model.py(12): forward;train.py(40): step", "x.py(1): f"]))
        name = draw(st.sampled_from(OP_NAMES))
        if name == "record_param_comms":
            args["Collective name"] = draw(st.sampled_from(["allreduce", "broadcast", "wait", ""]))
            args["In msg nelems"] = draw(st.integers(0, 1 << 20))
            args["dtype"] = "Float"
        events.append(op(name, s, e - s, tid=tid, cat=draw(st.sampled_from(["cpu_op", "cpu_op", "user_annotation"])), **args))
        if e - s >= 2 and draw(st.booleans()):  # a launch inside the op
            corr = ids.next_correlation()
            launch_ts = draw(st.integers(s, e - 1))
            cat, rt_name = draw(st.sampled_from([("cuda_runtime", "cudaLaunchKernel"), ("cuda_driver", "cuLaunchKernel"),
                                                 ("cuda_runtime", "cudaMemcpyAsync"), ("cuda_runtime", "cudaMemsetAsync")]))
            events.append(runtime(rt_name, launch_ts, draw(st.integers(0, max(0, e - launch_ts))), corr, ext, tid=tid, cat=cat))
            dev_ts = launch_ts + draw(st.integers(0, 50))
            dev_dur = draw(st.integers(0, 100))
            device = draw(st.integers(0, 1))
            if rt_name == "cudaMemcpyAsync":
                events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": device,
                               "tid": 7, "ts": dev_ts, "dur": dev_dur,
                               "args": {"device": device, "stream": 7, "correlation": corr, "bytes": draw(st.integers(0, 1 << 30)),
                                        "memory bandwidth (GB/s)": 1.5}})
            elif rt_name == "cudaMemsetAsync":
                events.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": device, "tid": 7,
                               "ts": dev_ts, "dur": dev_dur,
                               "args": {"device": device, "stream": 7, "correlation": corr, "bytes": 64}})
            else:
                kargs = {"External id": ext}
                if draw(st.booleans()):
                    kargs.update({"grid": [draw(st.integers(1, 512)), 1, 1], "block": [128, 1, 1],
                                  "registers per thread": draw(st.integers(0, 255)), "shared memory": 0,
                                  "blocks per SM": draw(st.floats(0, 8)), "warps per SM": 4.0,
                                  "est. achieved occupancy %": draw(st.integers(0, 100))})
                events.append(kernel(draw(st.sampled_from(KERNEL_NAMES)), dev_ts, dev_dur, corr, device=device,
                                     stream=draw(st.sampled_from([7, 13, 20])), **kargs))
            if draw(st.booleans()):  # the ac2g flow from launch to device work
                events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": tid, "ts": launch_ts})
                events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": device, "tid": 7, "ts": dev_ts,
                               "bp": "e"})
        for _ in range(draw(st.integers(0, 2))):  # allocator records inside the op
            nbytes = draw(st.sampled_from([512, 4096, -512, -4096, 1 << 20, 0]))
            events.append(memory(draw(st.integers(s, e)), nbytes, draw(st.integers(1, 8)) * 4096, 1 << 20, 1 << 21,
                                 device_type=draw(st.sampled_from([0, 1, 1])), device_id=draw(st.integers(0, 1)), tid=tid))
        _draw_ops(draw, ids, events, s, e, tid, depth + 1)


@st.composite
def wellformed_events(draw):
    """Events of one plausible Kineto trace (no particular order: Kineto does not sort)."""
    ids = _Ids()
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thread 1 (python3)"}},
        {"ph": "M", "name": "process_sort_index", "pid": 0, "tid": 0, "args": {"sort_index": 5000000}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]
    t = start = draw(st.integers(0, 10**12))
    for step in range(draw(st.integers(0, 3))):
        length = draw(st.integers(5, 400))
        events.append(op(f"ProfilerStep#{draw(st.integers(0, 20)) if step == 0 else step + 20}", t, length,
                         cat="user_annotation", **{"External id": ids.next_external()}))
        _draw_ops(draw, ids, events, t, t + length, 1, 1)
        t += length + draw(st.integers(0, 30))
    _draw_ops(draw, ids, events, t, t + draw(st.integers(0, 200)), draw(st.sampled_from([1, 2])), 1)  # outside steps
    for _ in range(draw(st.integers(0, 3))):  # records outside every op, and counters
        # within the trace's own window: one a day away is dropped as not part of it
        events.append(memory(draw(st.integers(start, t + 10)), draw(st.sampled_from([256, -256])), 4096, 0, 0,
                             device_type=draw(st.sampled_from([0, 1])), device_id=0, tid=3))
        events.append({"ph": "C", "name": "GPU utilization", "pid": 0, "tid": 0, "ts": draw(st.integers(start, t + 10)),
                       "args": {"value": draw(st.floats(0, 1))}})
    return draw(st.permutations(events))


# --- damage -----------------------------------------------------------------------------------

FIELDS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "args", "s"]
ARG_FIELDS = ["External id", "correlation", "device", "stream", "grid", "block", "Bytes", "Addr", "Device Type",
              "Device Id", "Total Allocated", "Total Reserved", "Input Dims", "Input type", "Call stack", "bytes",
              "blocks per SM", "est. achieved occupancy %", "registers per thread", "name", "sort_index", "value",
              "Sequence number", "Collective name", "In msg nelems", "Python id", "Python parent id"]


@st.composite
def damaged(draw, events):
    """`events` with some of them broken in the ways real files are."""
    events = [dict(e, args=dict(e["args"])) if isinstance(e.get("args"), dict) else dict(e) for e in events]
    for _ in range(draw(st.integers(1, 8))):
        action = draw(st.sampled_from(["drop_field", "odd_field", "odd_arg", "drop_arg", "replace", "insert",
                                       "duplicate", "args_not_dict", "nested_args", "huge_string"]))
        if action in ("insert",) or not events:
            events.insert(draw(st.integers(0, len(events))),
                          draw(st.one_of(JSON_VALUES, st.dictionaries(st.sampled_from(FIELDS), ODD_VALUES, max_size=8))))
            continue
        i = draw(st.integers(0, len(events) - 1))
        event = events[i]
        if not isinstance(event, dict):
            continue
        if action == "drop_field" and event:
            event.pop(draw(st.sampled_from(sorted(event))), None)
        elif action == "odd_field":
            event[draw(st.sampled_from(FIELDS))] = draw(ODD_VALUES)
        elif action == "odd_arg" and isinstance(event.get("args"), dict):
            event["args"][draw(st.sampled_from(ARG_FIELDS))] = draw(ODD_VALUES)
        elif action == "drop_arg" and isinstance(event.get("args"), dict) and event["args"]:
            event["args"].pop(draw(st.sampled_from(sorted(event["args"]))))
        elif action == "replace":
            events[i] = draw(JSON_VALUES)
        elif action == "duplicate":
            events.insert(i, dict(event))
        elif action == "args_not_dict":
            event["args"] = draw(ODD_VALUES)
        elif action == "nested_args":
            nested = 0
            for _ in range(draw(st.integers(10, 300))):
                nested = [nested]
            event.setdefault("args", {})
            if isinstance(event["args"], dict):
                event["args"]["deep"] = nested
        elif action == "huge_string":
            event[draw(st.sampled_from(["name", "cat"]))] = "n" * draw(st.integers(1000, 100_000))
    return events


def _dump(document, allow_nan):
    return json.dumps(document, allow_nan=allow_nan, ensure_ascii=False).encode("utf-8", "surrogatepass")


@st.composite
def trace_bytes(draw):
    """Bytes of a trace file: well-formed, damaged, or not a trace at all."""
    kind = draw(st.sampled_from(["good", "damaged", "damaged", "damaged", "top_level", "bytes", "truncated"]))
    events = draw(wellformed_events())
    if kind in ("damaged", "truncated"):
        events = draw(damaged(events))
    if kind == "bytes":
        data = draw(st.binary(max_size=200))
        return gzip.compress(data) if draw(st.booleans()) else data
    if kind == "top_level":
        document = draw(st.sampled_from([
            events, {"traceEvents": None}, {"traceEvents": {"0": events[:1]}}, {"events": events},
            {"traceEvents": events, "deviceProperties": "gpu"}, {"traceEvents": events, "distributedInfo": [1]},
            {"traceEvents": events, "deviceProperties": [{"id": "x", "totalGlobalMem": "big", "name": None}]},
            [1, 2, 3], "trace", 42, None]))
    else:
        document = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU 0", "totalGlobalMem": 16 << 30,
                                                              "computeMajor": 7, "computeMinor": 0, "numSms": 80}],
                    "traceEvents": events}
    try:
        data = _dump(document, allow_nan=True)  # bare NaN / Infinity, as real files contain
    except (ValueError, RecursionError):
        data = b"{"
    if kind == "truncated":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if draw(st.booleans()):
        data = gzip.compress(data)
        if kind == "truncated":
            data = data[: draw(st.integers(0, len(data)))]
    return data


# --- helpers ----------------------------------------------------------------------------------

def _write(data, name="worker0.pt.trace.json"):
    path = _SCRATCH / name
    path.write_bytes(data)
    return path


def _close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6 * max(1.0, abs(a), abs(b)))


def check_invariants(profile):
    """Every view answers, and agrees with the others and with `profile.model`."""
    m = profile.model
    profile.info()
    overview = profile.overview()
    steps = overview["steps"]
    parts = [c for c in steps.columns if c.endswith("_us") and c != "total_us"]
    for _, row in steps.iterrows():  # a handful of steps
        assert _close(sum(row[c] for c in parts), row["total_us"]), row.to_dict()
        assert all(row[c] >= -1e-6 for c in parts + ["total_us"]), row.to_dict()
    profile.gpu_summary()
    for group_by in ("name", "name_shape"):
        ops = profile.operators(group_by)
        assert (ops["host_self_us"] <= ops["host_total_us"] + 1e-6).all()
        assert (ops["device_self_us"] <= ops["device_total_us"] + 1e-6).all()
        assert (ops[["host_self_us", "device_self_us"]] >= 0).all().all()
    for name in profile.operators("name")["name"].head(3):
        for stack in profile.operator_stacks(name):  # counts stay integers on the wire
            assert isinstance(stack["calls"], int) and stack["calls"] > 0
    raw_kernel_us = float(m.kernels["dur"].sum())
    assert (m.kernels["dur"] >= 0).all() and np.isfinite(m.kernels["dur"]).all()
    for group_by in ("name", "name_op"):
        table = profile.kernels(group_by)
        assert int(table["calls"].sum()) == len(m.kernels)
        assert _close(float(table["total_us"].sum()), raw_kernel_us)
    share = profile.tensor_core_share()
    assert _close(share["tensor_cores_us"] + share["other_us"], raw_kernel_us)
    for device in profile.memory_devices():
        profile.memory_curve(device)
        profile.memory_peaks(device)
        profile.memory_events(device)
        stats = profile.memory_stats(device)
        device_type = 0 if device == "CPU" else int(device[3:]) if device.startswith("GPU") else None
        records = m.memory[m.memory["device_type"] == (0 if device == "CPU" else 1)]
        if device.startswith("GPU"):
            records = records[records["device_id"] == device_type]
        if device_type is not None:
            assert int(stats["self_alloc_count"].sum()) == int((records["bytes"] > 0).sum())
            assert int(stats["self_size_increase_bytes"].sum()) == int(records["bytes"].sum())
    profile.modules()
    profile.module_flame()
    same = tb_plugin.diff(profile, profile)
    for table in (same.operators, same.kernels, same.steps):
        deltas = [c for c in table.columns if c.endswith("_delta")]
        assert (table[deltas].to_numpy() == 0).all(), table


# --- properties -------------------------------------------------------------------------------

@PROPERTY_SETTINGS
@given(trace_bytes())
def test_loader_raises_only_trace_error_and_loaded_views_hold(data):
    path = _write(data, "worker0.pt.trace.json.gz" if data[:2] == b"\x1f\x8b" else "worker0.pt.trace.json")
    try:
        profile = tb_plugin.load(path)
    except tb_plugin.TraceError as exc:
        assert exc.reason and str(path) in str(exc)
        return
    check_invariants(profile)


@PROPERTY_SETTINGS
@given(trace_bytes())
def test_every_loaded_model_reads_back_from_the_disk_cache_exactly(data):
    """Whatever the loader accepts (odd names, repaired values, odd metadata) goes through the
    Arrow cache entry and comes back with the same tables, dtypes, metadata and anomalies."""
    path = _write(data, "worker0.pt.trace.json.gz" if data[:2] == b"\x1f\x8b" else "worker0.pt.trace.json")
    try:
        model = tb_plugin.load(path).model
    except tb_plugin.TraceError:
        return
    cache = ModelCache(_SCRATCH / "cache")
    cache.put(ModelCache.key(str(path)), {"size": len(data)}, model)
    back = cache.get(ModelCache.key(str(path)), {"size": len(data)})
    assert back is not None
    for name in (*model.TABLES, "threads", "devices"):
        pd.testing.assert_frame_equal(getattr(back, name), getattr(model, name), check_exact=True)
    assert back.origin_us == model.origin_us or (math.isnan(back.origin_us) and math.isnan(model.origin_us))
    # NaN is not equal to itself: compared as the JSON they are written as
    assert json.dumps([back.metadata, back.anomalies]) == json.dumps([model.metadata, model.anomalies])


def _kernel_like(event, cat):
    return isinstance(event, dict) and event.get("ph") == "X" and event.get("cat") == cat


@PROPERTY_SETTINGS
@given(wellformed_events())
def test_wellformed_views_match_the_raw_events(events):
    """Counts and sums of the views against the generated events themselves."""
    profile = tb_plugin.load(_write(_dump({"traceEvents": events}, allow_nan=False)))
    m = profile.model
    assert not m.anomalies
    kernels = [e for e in events if _kernel_like(e, "kernel")]
    assert len(m.kernels) == len(kernels)
    table = profile.kernels("name")
    assert int(table["calls"].sum()) == len(kernels)
    assert _close(float(table["total_us"].sum()), float(sum(e["dur"] for e in kernels)))
    assert len(m.memcpy) == sum(_kernel_like(e, "gpu_memcpy") for e in events)
    records = [e for e in events if e.get("name") == "[memory]"]
    for device in profile.memory_devices():
        want_type, want_id = (0, None) if device == "CPU" else (1, int(device[3:]))
        mine = [r["args"] for r in records if r["args"]["Device Type"] == want_type
                and (want_id is None or r["args"]["Device Id"] == want_id)]
        stats = profile.memory_stats(device)
        assert int(stats["self_alloc_count"].sum()) == sum(a["Bytes"] > 0 for a in mine)
        assert int(stats["self_alloc_bytes"].sum()) == sum(a["Bytes"] for a in mine if a["Bytes"] > 0)
    step_events = {int(e["name"].split("#")[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    host_steps = m.steps["step"].tolist() or [0]
    assert set(host_steps) == (step_events or {0})
    # the step table: the host steps in time order, less the trailing ones the profiler cut
    # short (`common.step_windows`)
    steps = profile.steps()
    assert len(steps) >= 1 and steps["step"].tolist() == host_steps[:len(steps)]
    check_invariants(profile)


@PROPERTY_SETTINGS
@given(wellformed_events(), wellformed_events())
def test_distributed_parts_sum_to_the_step(events0, events1):
    models = {f"worker{i}": tb_plugin.load(_write(_dump({"traceEvents": e, "distributedInfo": {"rank": i, "world_size": 2}},
                                                         allow_nan=False), f"worker{i}.pt.trace.json")).model
              for i, e in enumerate((events0, events1))}
    view = distributed(models)
    assert set(view.steps["worker"]) == set(models)
    for _, row in view.steps.iterrows():  # a few steps per worker
        parts = row["computation_us"] + row["communication_us"] - row["overlap_us"] + row["other_us"]
        assert _close(parts, row["total_us"]), row.to_dict()
        assert row["overlap_us"] <= min(row["computation_us"], row["communication_us"]) + 1e-6
        assert min(row["computation_us"], row["communication_us"], row["overlap_us"], row["other_us"]) >= -1e-6
    for worker, model in models.items():
        expected = tb_plugin.Profile("", model).steps()  # the worker's own step windows
        mine = view.steps[view.steps["worker"] == worker]
        assert list(mine["step"]) == list(expected["step"])
        assert np.allclose(mine["total_us"].to_numpy(), expected["total_us"].to_numpy())
    if len(view.calls):
        assert (view.calls["duration_us"] >= 0).all()


@pytest.mark.parametrize("text", [b"", b"   ", b"[]", b"{}", b"null", b'{"traceEvents": []}', b"[1, 2]",
                                  b'{"traceEvents": [NaN, Infinity, -Infinity]}', b"\xff\xfe{\x00",
                                  b'{"traceEvents": [{"ph": "X", "ts": 1e400, "dur": -1e400}]}',
                                  b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 184467440737095516160, "dur": 1}]}',
                                  # found by the search: non-numeric device properties made /info a 500
                                  b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1, "args": {"device": 0}}],'
                                  b' "deviceProperties": [{"id": "x", "totalGlobalMem": "big", "name": null, "numSms": [1]},'
                                  b' {"id": 1e400, "computeMajor": "inf"}, 7]}'])
def test_loader_edge_texts(text):
    """A few fixed texts next to the generated ones (hypothesis may not hit them every run)."""
    try:
        profile = tb_plugin.load(_write(text))
    except tb_plugin.TraceError:
        return
    check_invariants(profile)


ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)  # Cs: lone surrogates


@PROPERTY_SETTINGS
@given(name=ANY_TEXT, stack=ANY_TEXT, group=ANY_TEXT, indent=st.sampled_from([None, 1]),
       ascii_only=st.booleans())
def test_any_text_in_names_and_args_reads_back_exactly(name, stack, group, indent, ascii_only):
    """Whatever text an op's name and string args hold (quotes, backslashes, control
    characters, any script, escaped or not), the model holds the same text."""
    event = op(name, 0, 5, **{"External id": 1, "Call stack": stack, "Process Group Name": group})
    text = json.dumps({"traceEvents": [op("first", 0, 1), event]}, indent=indent, ensure_ascii=ascii_only)
    profile = tb_plugin.load(_write(text.encode()))
    ops = profile.model.ops
    [row] = ops[ops["external_id"] == 1].to_dict("records")
    assert (row["name"], row["call_stack"], row["process_group_name"]) == (name, stack, group)
    assert not profile.model.anomalies


# --- names on disk ------------------------------------------------------------------------------

# A name as Linux stores it: any bytes but "/" and NUL (UTF-8 or not: Latin-1, cut multi-byte
# sequences, lone continuation bytes ...). Worker names hold no "." (a ".<digits>" suffix is a
# span stamp).
_NAME_BYTES = st.one_of(st.binary(min_size=1, max_size=24), st.text(min_size=1, max_size=8).map(str.encode))
DIR_NAMES = _NAME_BYTES.filter(lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b".."))
WORKER_NAMES = _NAME_BYTES.filter(lambda b: not set(b) & set(b"/.\x00"))


@settings(PROPERTY_SETTINGS, max_examples=min(EXAMPLES, 40))
@given(run=DIR_NAMES, worker=WORKER_NAMES)
def test_any_bytes_in_run_and_worker_names_are_listed_and_served(run, worker):
    """Whatever bytes name a run directory and a trace file, /runs answers, the run and worker
    are listed as the bytes read as UTF-8 with the others escaped (`\\xff`), and that name
    opens the trace and downloads its file."""
    from urllib.parse import urlencode

    with tempfile.TemporaryDirectory(dir=_SCRATCH) as tmp:
        folder = os.path.join(os.fsencode(tmp), run)
        os.mkdir(folder)
        data = json.dumps({"traceEvents": [op("ProfilerStep#1", 0, 10, cat="user_annotation"), op("aten::mm", 1, 5)]}).encode()
        with open(os.path.join(folder, worker + b".pt.trace.json"), "wb") as fh:
            fh.write(data)
        plugin, client = make_client(tmp)
        try:
            listing = client.get(f"{PREFIX}/runs")
            assert listing.status_code == 200
            run_name, worker_name = run.decode("utf-8", "backslashreplace"), worker.decode("utf-8", "backslashreplace")
            assert [(r["name"], r["workers"]) for r in listing.get_json()["runs"]] == [(run_name, [worker_name])]
            query = urlencode({"run": run_name, "worker": worker_name})
            assert client.get(f"{PREFIX}/workers?{query}").get_json()["workers"] == [worker_name]
            info = wait_route(client, f"{PREFIX}/info?{query}")
            assert info.status_code == 200 and info.get_json()["steps"] == [1], (run, worker, info.get_json())
            download = client.get(f"{PREFIX}/trace_file?{query}")
            assert download.status_code == 200 and download.data == data
        finally:
            plugin.store.stop()
