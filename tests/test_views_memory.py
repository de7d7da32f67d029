"""Memory view: curve, allocation lifetimes and per-operator statistics.

Expected values come from tiny hand-made traces worked out on paper, from the raw JSON of real
traces read with the standard library, and from torch-tb-profiler 0.4.3's answers for the
2021 ResNet-50 trace; never from this module's own output.
"""

import gzip
import json
import math

import numpy as np
import pandas as pd
import pytest

import tb_plugin
from tb_plugin.errors import NotFoundError
from tb_plugin.views.memory import (CURVE_COLUMNS, EVENT_COLUMNS, STATS_COLUMNS, downsample_indices, memory_curve,
                                    memory_devices, memory_events, memory_peaks, memory_stats)
from tb_plugin.views.operators import operators

from .helpers import SAMPLES, SHARED_TRACES, memory, op, raw_events, shared_trace, write_trace

REFERENCE = SHARED_TRACES / "reference_torch_tb_profiler_0.4.3"


def annotation(name, ts, dur, tid=1):
    return op(name, ts, dur, tid=tid, cat="user_annotation")


def old_memory(ts, nbytes, device_type=1, device_id=0, tid=1):
    """A `[memory]` record as PyTorch < 1.10 wrote it: no Addr, no totals."""
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": tid, "ts": ts,
            "args": {"Device Type": device_type, "Device Id": device_id, "Bytes": nbytes}}


def rows(frame):
    """DataFrame rows as tuples, NaN replaced by None so rows compare with ==."""
    return [tuple(None if isinstance(v, float) and math.isnan(v) else v for v in row)
            for row in frame.itertuples(index=False, name=None)]


# --- a hand-made GPU trace ---------------------------------------------------------------
#
# thread 1:  ProfilerStep#1 [0, 1000] (user annotation: structure, not an operator)
#              aten::ones [10, 50]
#                aten::empty [12, 17]          r1  t=14   +100 @1000
#                aten::fill_ [20, 30]          (CPU record t=25 +16 @7000)
#              aten::conv [100, 300]
#                aten::conv_impl [110, 210]    r3  t=150  +400 @2000  (never freed)
#                  aten::empty [120, 130]      r2  t=125  +50  @3000
#                                              r4  t=250  -50  @3000  (in aten::conv itself)
#                                              r5  t=400  -100 @1000  (no operator: owner "")
#              aten::add [500, 550]
#                aten::add [505, 545]          (only child, same name: merged into its parent)
#                                              r6  t=510  +100 @1000  (address reused)
#                                              r7  t=540  +8   @4000  (never freed)
#                                              r8  t=600  -100 @1000  (no operator)
#            outside every op:                 r9  t=1100 -64  @5000  (allocated before the trace)
#
# Total Allocated starts at 1000 (memory allocated before profiling); reserved 2048, then 4096.
GPU_RECORDS = [  # ts, bytes, addr, total allocated, total reserved
    (14, 100, 1000, 1100, 2048), (125, 50, 3000, 1150, 2048), (150, 400, 2000, 1550, 4096),
    (250, -50, 3000, 1500, 4096), (400, -100, 1000, 1400, 4096), (510, 100, 1000, 1500, 4096),
    (540, 8, 4000, 1508, 4096), (600, -100, 1000, 1408, 4096), (1100, -64, 5000, 1344, 4096)]


@pytest.fixture(scope="module")
def hand_model(tmp_path_factory):
    events = [
        annotation("ProfilerStep#1", 0, 1000),
        op("aten::ones", 10, 40), op("aten::empty", 12, 5), op("aten::fill_", 20, 10),
        op("aten::conv", 100, 200), op("aten::conv_impl", 110, 100), op("aten::empty", 120, 10),
        op("aten::add", 500, 50), op("aten::add", 505, 40),
        memory(25, 16, 7000, 16, 0, device_type=0, device_id=-1),
    ]
    # Written out of time order on purpose: the view must sort.
    events += [memory(*record) for record in reversed(GPU_RECORDS)]
    path = write_trace(tmp_path_factory.mktemp("memory") / "hand.pt.trace.json", events,
                       deviceProperties=[{"id": 0, "name": "Test GPU", "totalGlobalMem": 8000}])
    return tb_plugin.load(path).model


def test_devices_hand_trace_cpu_first(hand_model):
    assert memory_devices(hand_model) == ["CPU", "GPU0"]


def test_devices_naming_cpu_gpus_and_other_types(tmp_path):
    events = [op("aten::x", 0, 100),
              memory(10, 8, 1, 8, 8, device_type=1, device_id=1),
              memory(11, 8, 2, 8, 8, device_type=8, device_id=0),
              memory(12, 8, 3, 8, 8, device_type=1, device_id=0),
              memory(13, 8, 4, 8, 0, device_type=0, device_id=-1)]
    model = tb_plugin.load(write_trace(tmp_path / "d.pt.trace.json", events)).model
    assert memory_devices(model) == ["CPU", "GPU0", "GPU1", "Device8:0"]


def test_devices_unknown_raises_naming_valid_ones(hand_model):
    for view in (memory_curve, memory_events, memory_stats, memory_peaks):
        with pytest.raises(NotFoundError, match=r"GPU7.*\['CPU', 'GPU0'\]"):
            view(hand_model, "GPU7")


def test_curve_hand_trace_one_point_per_record(hand_model):
    curve = memory_curve(hand_model, "GPU0")
    assert list(curve.columns) == CURVE_COLUMNS
    assert rows(curve) == [(float(ts), float(total), float(reserved)) for ts, _, _, total, reserved in GPU_RECORDS]
    assert all(curve[c].dtype == np.float64 for c in CURVE_COLUMNS)


def test_curve_time_range_keeps_points_inside(hand_model):
    curve = memory_curve(hand_model, "GPU0", start_us=140, end_us=560)
    assert curve["time_us"].tolist() == [150, 250, 400, 510, 540]
    assert curve["allocated_bytes"].tolist() == [1550, 1500, 1400, 1500, 1508]


def test_peaks_hand_trace(hand_model):
    peaks = memory_peaks(hand_model, "GPU0")
    assert (peaks.peak_allocated_bytes, peaks.peak_allocated_us, peaks.peak_reserved_bytes,
            peaks.total_memory_bytes) == (1550, 150, 4096, 8000)
    later = memory_peaks(hand_model, "GPU0", start_us=300)
    assert (later.peak_allocated_bytes, later.peak_allocated_us) == (1508, 540)
    cpu = memory_peaks(hand_model, "CPU")
    assert cpu.peak_allocated_bytes == 16 and math.isnan(cpu.total_memory_bytes)


def test_events_pairing_by_address_with_reuse_and_never_freed(hand_model):
    events = memory_events(hand_model, "GPU0")
    assert list(events.columns) == EVENT_COLUMNS
    assert rows(events) == [
        ("", 64, None, 1100.0, None, True),                                  # r9: allocated before the trace
        ("aten::ones (aten::empty)", 100, 14.0, 400.0, 386.0, True),          # r1 freed by r5
        ("aten::conv_impl (aten::empty)", 50, 125.0, 250.0, 125.0, True),     # r2 freed by r4
        ("aten::conv_impl", 400, 150.0, None, None, True),                    # r3 never freed
        ("aten::add", 100, 510.0, 600.0, 90.0, True),                         # r6 reuses @1000, freed by r8
        ("aten::add", 8, 540.0, None, None, True),                            # r7 never freed
    ]
    assert events["size_bytes"].dtype == np.int64
    assert all(events[c].dtype == np.float64 for c in ("alloc_us", "free_us", "duration_us"))
    assert events["free_known"].dtype == bool


def test_events_time_range_keeps_overlapping_lifetimes(hand_model):
    events = memory_events(hand_model, "GPU0", start_us=420, end_us=505)
    # r1 ended at 400, r2 at 250; r6 and r7 start after 505; r3 and r9's memory is live.
    assert events["size_bytes"].tolist() == [64, 400]
    assert memory_events(hand_model, "GPU0", start_us=200, end_us=520)["size_bytes"].tolist() == [64, 100, 50, 400, 100]


def test_events_allocation_without_free_before_next_allocation_stays_unpaired(tmp_path):
    events = [op("aten::a", 0, 100), memory(10, 32, 9, 32, 64), memory(20, 32, 9, 64, 64), memory(30, -32, 9, 32, 64)]
    model = tb_plugin.load(write_trace(tmp_path / "lost.pt.trace.json", events)).model
    assert rows(memory_events(model, "GPU0")) == [("aten::a", 32, 10.0, None, None, True),
                                                  ("aten::a", 32, 20.0, 30.0, 10.0, True)]


def test_stats_self_and_total_with_nested_ops(hand_model):
    stats = memory_stats(hand_model, "GPU0")
    assert list(stats.columns) == STATS_COLUMNS
    assert all(stats[c].dtype == np.int64 for c in STATS_COLUMNS[1:])
    # operator, calls, size increase, self, alloc count, self, alloc bytes, self
    assert rows(stats) == [
        ("aten::add", 1, 108, 108, 2, 2, 108, 108),       # two nested aten::add merged: one call
        ("aten::conv", 1, 400, -50, 2, 0, 450, 0),        # r2 + r3 + its own free r4
        ("aten::conv_impl", 1, 450, 400, 2, 1, 450, 400),
        ("aten::empty", 2, 150, 150, 2, 2, 150, 150),
        ("aten::ones", 1, 100, 0, 1, 0, 100, 0),
        ("", 0, -264, -264, 0, 0, 0, 0),                  # r5, r8, r9: no operator around them
    ]
    assert stats["self_size_increase_bytes"].sum() == sum(r[1] for r in GPU_RECORDS)


def test_stats_time_range_restricts_records_and_calls(hand_model):
    stats = memory_stats(hand_model, "GPU0", start_us=100, end_us=300)
    assert rows(stats) == [
        ("aten::conv", 1, 400, -50, 2, 0, 450, 0),
        ("aten::conv_impl", 1, 450, 400, 2, 1, 450, 400),
        ("aten::empty", 1, 50, 50, 1, 1, 50, 50),          # only the instance inside the range
    ]


def test_stats_cpu_device_only_counts_cpu_records(hand_model):
    assert rows(memory_stats(hand_model, "CPU")) == [("aten::fill_", 1, 16, 16, 1, 1, 16, 16),
                                                     ("aten::ones", 1, 16, 0, 1, 0, 16, 0)]


def test_stats_record_in_user_annotation_belongs_to_enclosing_operator(tmp_path):
    events = [op("aten::linear", 0, 100), annotation("block", 10, 50), op("aten::empty", 30, 5),
              memory(20, 32, 1, 32, 64), memory(32, 16, 2, 48, 64)]
    model = tb_plugin.load(write_trace(tmp_path / "annot.pt.trace.json", events)).model
    assert rows(memory_stats(model, "GPU0")) == [("aten::empty", 1, 16, 16, 1, 1, 16, 16),
                                                 ("aten::linear", 1, 48, 32, 2, 1, 48, 32)]
    # The empty op is shown under its direct parent, here the annotation.
    assert memory_events(model, "GPU0")["operator"].tolist() == ["aten::linear", "block (aten::empty)"]


# --- traces without Addr / totals (PyTorch < 1.10) ----------------------------------------

@pytest.fixture(scope="module")
def no_addr_model(tmp_path_factory):
    events = [op("aten::x", 0, 100), old_memory(10, 100), old_memory(20, 50), old_memory(30, -100),
              op("aten::y", 200, 10), old_memory(205, 8)]
    path = write_trace(tmp_path_factory.mktemp("old") / "old.pt.trace.json", events)
    return tb_plugin.load(path).model


def test_curve_without_totals_is_cumulative_bytes(no_addr_model):
    curve = memory_curve(no_addr_model, "GPU0")
    assert rows(curve) == [(10.0, 100.0, None), (20.0, 150.0, None), (30.0, 50.0, None), (205.0, 58.0, None)]
    # Zooming keeps the values of the whole-trace sum.
    assert memory_curve(no_addr_model, "GPU0", start_us=25)["allocated_bytes"].tolist() == [50.0, 58.0]


def test_events_without_addr_are_unpaired_allocations(no_addr_model):
    """Without addresses no free can be found: free_known says free_us is unknown, so the
    page does not claim "not freed" (the x's 100 bytes were freed at 30)."""
    assert rows(memory_events(no_addr_model, "GPU0")) == [("aten::x", 100, 10.0, None, None, False),
                                                          ("aten::x", 50, 20.0, None, None, False),
                                                          ("aten::y", 8, 205.0, None, None, False)]


def test_events_without_addr_in_a_range_are_those_allocated_in_it(no_addr_model):
    """Their lifetimes are unknown: a range lists the allocations made in it, not every
    earlier one as if still alive (x's 100 bytes, freed at 30, are not in 200..210)."""
    assert rows(memory_events(no_addr_model, "GPU0", start_us=200, end_us=210)) == [("aten::y", 8, 205.0, None, None, False)]
    assert [r[2] for r in rows(memory_events(no_addr_model, "GPU0", start_us=15, end_us=25))] == [20.0]


def test_stats_without_addr(no_addr_model):
    assert rows(memory_stats(no_addr_model, "GPU0")) == [("aten::x", 1, 50, 50, 2, 2, 150, 150),
                                                         ("aten::y", 1, 8, 8, 1, 1, 8, 8)]


# --- downsampling ---------------------------------------------------------------------------

def test_downsample_keeps_global_peak_and_trough_of_100k_points():
    rng = np.random.default_rng(7)
    n = 100_000
    time = np.cumsum(rng.uniform(0.5, 1.5, n))
    allocated = 1e6 + rng.normal(0, 1e3, n)
    reserved = np.full(n, 2e6)
    allocated[73_211] = 5e6       # one narrow spike
    allocated[12_345] = 1.0       # one narrow dip
    reserved[50_000:] = 3e6
    kept = downsample_indices(time, allocated, reserved, 2000)
    assert len(kept) <= 2000
    assert np.all(np.diff(kept) > 0)
    assert {0, n - 1, 73_211, 12_345, 50_000} <= set(kept.tolist())
    assert downsample_indices(time[:1500], allocated[:1500], reserved[:1500], 2000).tolist() == list(range(1500))


def test_curve_downsampled_keeps_peak_of_100k_records(tmp_path):
    rng = np.random.default_rng(3)
    n = 100_000
    sizes = rng.integers(1, 1000, n) * np.where(rng.random(n) < 0.5, 1, -1)
    totals = 10_000_000 + np.cumsum(sizes)
    peak_at = int(np.argmax(totals))
    events = [op("aten::train", 0, 2 * n)]
    events += [memory(i, int(s), i, int(t), 20_000_000) for i, (s, t) in enumerate(zip(sizes, totals), start=1)]
    model = tb_plugin.load(write_trace(tmp_path / "big.pt.trace.json", events)).model
    curve = memory_curve(model, "GPU0", max_points=500)
    assert len(curve) <= 500
    assert curve["allocated_bytes"].max() == totals.max()
    assert curve["time_us"].iloc[int(curve["allocated_bytes"].argmax())] == peak_at + 1
    assert curve["allocated_bytes"].min() == totals.min()
    assert curve["time_us"].is_monotonic_increasing
    # Each kept point is an original record.
    assert np.array_equal(totals[curve["time_us"].to_numpy().astype(int) - 1], curve["allocated_bytes"].to_numpy())
    assert memory_peaks(model, "GPU0").peak_allocated_bytes == totals.max()


# --- real traces ----------------------------------------------------------------------------

_INTERVAL_CATS = ("cpu_op", "operator", "user_annotation", "cuda_runtime", "runtime", "cuda_driver", "kernel",
                  "gpu_memcpy", "memcpy", "gpu_memset", "memset")


def _raw_memory(events):
    """The `[memory]` records of raw events, and the trace origin (earliest interval start)."""
    origin = min(e["ts"] for e in events if e.get("ph") == "X" and e.get("cat", "").lower() in _INTERVAL_CATS)
    return [e for e in events if e.get("ph") == "i" and e.get("name") == "[memory]"], origin


def _pair_with_dict(records):
    """Allocation lifetimes by a plain sweep in time order: {addr: open allocation}."""
    open_allocs, paired, unpaired, orphans = {}, [], [], []
    for r in sorted(records, key=lambda r: r["ts"]):
        a, b = r["args"]["Addr"], r["args"]["Bytes"]
        if b > 0:
            if a in open_allocs:
                unpaired.append(open_allocs[a])
            open_allocs[a] = r
        elif a in open_allocs:
            paired.append((open_allocs.pop(a), r))
        else:
            orphans.append(r)
    return paired, unpaired + list(open_allocs.values()), orphans


@pytest.fixture(scope="module")
def ddp():
    path = shared_trace("v100_ddp_nccl_memory")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    records, origin = _raw_memory(doc["traceEvents"])
    return tb_plugin.load(path).model, records, origin, doc


def test_devices_real_ddp_trace(ddp):
    model, records, _, _ = ddp
    gpu_ids = sorted({r["args"]["Device Id"] for r in records if r["args"]["Device Type"] == 1})
    assert memory_devices(model) == ["CPU"] + [f"GPU{i}" for i in gpu_ids]


def test_curve_peak_equals_raw_total_allocated_max(ddp):
    model, records, origin, doc = ddp
    gpu = [r for r in records if r["args"]["Device Type"] == 1 and r["args"]["Device Id"] == 1]
    raw_peak = max(r["args"]["Total Allocated"] for r in gpu)
    curve = memory_curve(model, "GPU1")
    assert len(curve) <= 2000 < len(gpu)
    assert curve["allocated_bytes"].max() == raw_peak
    assert curve["reserved_bytes"].max() == max(r["args"]["Total Reserved"] for r in gpu)
    peaks = memory_peaks(model, "GPU1")
    first_peak = min(r["ts"] for r in gpu if r["args"]["Total Allocated"] == raw_peak)
    assert peaks.peak_allocated_bytes == raw_peak
    assert peaks.peak_allocated_us == pytest.approx(first_peak - origin)
    assert peaks.total_memory_bytes == next(d["totalGlobalMem"] for d in doc["deviceProperties"] if d["id"] == 1)


def test_cpu_reserved_is_absent_not_zero(ddp):
    """The CPU allocator writes "Total Reserved": 0 on every record: not a measurement."""
    model, records, _, _ = ddp
    cpu = [r for r in records if r["args"]["Device Type"] == 0]
    assert cpu and {r["args"]["Total Reserved"] for r in cpu} == {0}
    curve = memory_curve(model, "CPU", max_points=10**9)
    assert len(curve) == len(cpu) and curve["reserved_bytes"].isna().all()
    assert curve["allocated_bytes"].max() == max(r["args"]["Total Allocated"] for r in cpu)
    assert np.isnan(memory_peaks(model, "CPU").peak_reserved_bytes)


def test_events_real_ddp_trace_match_dict_sweep(ddp):
    model, records, origin, _ = ddp
    gpu = [r for r in records if r["args"]["Device Type"] == 1]
    paired, unpaired, orphans = _pair_with_dict(gpu)
    events = memory_events(model, "GPU1")
    assert len(events) == len(paired) + len(unpaired) + len(orphans)
    assert events["free_us"].isna().sum() == len(unpaired) and events["alloc_us"].isna().sum() == len(orphans)
    done = events.dropna(subset=["alloc_us", "free_us"])
    expected = sorted((a["args"]["Bytes"], a["ts"] - origin, f["ts"] - origin) for a, f in paired)
    ours = sorted(zip(done["size_bytes"], done["alloc_us"], done["free_us"]))
    assert len(ours) == len(expected)
    assert all(o[0] == e[0] and o[1] == pytest.approx(e[1]) and o[2] == pytest.approx(e[2]) for o, e in zip(ours, expected))


def test_stats_real_ddp_trace_self_sums_and_calls(ddp):
    model, records, _, _ = ddp
    gpu = [r["args"]["Bytes"] for r in records if r["args"]["Device Type"] == 1]
    stats = memory_stats(model, "GPU1")
    assert stats["self_size_increase_bytes"].sum() == sum(gpu)
    assert stats["self_alloc_count"].sum() == sum(1 for b in gpu if b > 0)
    assert stats["self_alloc_bytes"].sum() == sum(b for b in gpu if b > 0)
    assert (stats["alloc_count"] >= stats["self_alloc_count"]).all()
    # Calls agree with the operator view (same duplicate-node rule, whole trace).
    calls = operators(model).set_index("name")["calls"]
    named = stats[stats["operator"] != ""]
    assert named["calls"].tolist() == calls.loc[named["operator"]].tolist()


@pytest.fixture(scope="module")
def resnet():
    """Span number -> (path, model) of the 2021 ResNet-50 run; the reference's span s<N> is
    the N-th file of the run by name."""
    paths = sorted(shared_trace("resnet50_v100_2021").parent.glob("*.json.gz"))
    models = {}

    def get(span):
        if span not in models:
            models[span] = paths[span - 1], tb_plugin.load(paths[span - 1]).model
        return models[span]
    return get


@pytest.mark.parametrize("span", [1, 2])
def test_stats_resnet50_2021_match_torch_tb_profiler(resnet, span):
    _, model = resnet(span)
    reference = json.loads((REFERENCE / f"resnet50_num_workers_0_s{span}_memory.json").read_text())
    assert sorted(reference["rows"]) == memory_devices(model)
    for device, ref_rows in reference["rows"].items():
        ours = memory_stats(model, device)
        # Ours adds a "" row for records outside every operator, which 0.4.3 dropped.
        ours = ours[ours["operator"] != ""].reset_index(drop=True)
        assert ours["operator"].tolist() == [r[0] for r in ref_rows]
        kb = ours[["size_increase_bytes", "self_size_increase_bytes", "alloc_bytes", "self_alloc_bytes"]] / 1024
        for i, ref in enumerate(ref_rows):
            _, calls, inc, self_inc, count, self_count, size, self_size = ref
            assert (ours["calls"][i], ours["alloc_count"][i], ours["self_alloc_count"][i]) == (calls, count, self_count)
            assert np.allclose(kb.iloc[i].round(2).to_numpy(), [inc, self_inc, size, self_size], atol=0.006), ref


def test_curve_and_events_resnet50_2021_without_addr(resnet):
    path, model = resnet(1)
    records, _ = _raw_memory(raw_events(path))
    gpu = sorted((r["ts"], r["args"]["Bytes"]) for r in records if r["args"]["Device Type"] == 1)
    running = np.cumsum([b for _, b in gpu])
    # 0.4.3 skipped records without Addr and so drew no curve and listed no events for this
    # trace (its memory_curve / memory_events replies are empty). Ours integrates the Bytes
    # and lists the allocations, unpaired.
    for name in ("curve", "events"):
        assert json.loads((REFERENCE / f"resnet50_num_workers_0_s1_memory_{name}.json").read_text())["rows"] == {}
    curve = memory_curve(model, "GPU0", max_points=10**9)
    assert curve["allocated_bytes"].tolist() == running.astype(float).tolist()
    assert memory_peaks(model, "GPU0").peak_allocated_bytes == running.max()
    assert curve["reserved_bytes"].isna().all()
    events = memory_events(model, "GPU0")
    assert len(events) == sum(1 for _, b in gpu if b > 0)
    assert events["free_us"].isna().all() and events["size_bytes"].sum() == sum(b for _, b in gpu if b > 0)
    # a range (314-576 ms, where 0.4.3 users look) lists the allocations made in it
    in_range = memory_events(model, "GPU0", start_us=314_000, end_us=576_000)
    assert len(in_range) == sum(1 for ts, b in gpu if b > 0 and 314_000 <= ts - model.origin_us <= 576_000) > 0
    assert in_range["alloc_us"].between(314_000, 576_000).all()


# --- samples ---------------------------------------------------------------------------------

@pytest.mark.parametrize("path", sorted((SAMPLES / "cpu_cnn").glob("*.json.gz")), ids=lambda p: p.name[:30])
def test_cpu_sample_curve_events_and_stats(path):
    model = tb_plugin.load(path).model
    records, _ = _raw_memory(raw_events(path))
    assert memory_devices(model) == ["CPU"]
    assert memory_peaks(model, "CPU").peak_allocated_bytes == max(r["args"]["Total Allocated"] for r in records)
    paired, unpaired, orphans = _pair_with_dict(records)
    events = memory_events(model, "CPU")
    assert events["free_us"].notna().sum() == len(paired) and events["free_us"].isna().sum() == len(unpaired)
    assert events["alloc_us"].isna().sum() == len(orphans)
    expected = sorted(f["ts"] - a["ts"] for a, f in paired)
    assert np.allclose(np.sort(events["duration_us"].dropna().to_numpy()), expected, atol=1e-3)
    stats = memory_stats(model, "CPU")
    assert stats["self_size_increase_bytes"].sum() == sum(r["args"]["Bytes"] for r in records)
    assert pd.api.types.is_string_dtype(stats["operator"]) and pd.api.types.is_string_dtype(events["operator"])
