"""Distributed view: hand-made multi-worker traces with answers worked out on paper, and real
runs (gloo DDP samples, a sampled 128-rank NCCL job) checked against raw JSON sums."""

import gzip
import json
import math
import re
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

import tb_plugin
from tb_plugin.views.collectives import (bus_factor, element_bytes, fsdp_phase, input_bytes, largest_input_bytes,
                                         requested_collective)
from tb_plugin.views.distributed import (ALL_STEPS_COLUMNS, CALL_COLUMNS, COLLECTIVE_COLUMNS, DEVICE_COLUMNS,
                                         FSDP, GROUP_COLUMNS, STEP_COLUMNS, distributed)

from .helpers import PREFIX, SAMPLES, SHARED_TRACES, kernel, make_client, op, raw_events, runtime, wait_route, write_trace
from .job_traces import job_with_a_truncated_rank

STEP = re.compile(r"^ProfilerStep#\d+$")


def _load(path):
    return tb_plugin.load(path).model


def _row(table, **where):
    mask = np.ones(len(table), dtype=bool)
    for column, value in where.items():
        mask &= (table[column] == value).to_numpy()
    assert mask.sum() == 1, f"expected one row for {where}, got {mask.sum()}:\n{table}"
    return table[mask].iloc[0]


# --- hand-made traces -------------------------------------------------------------------------

def _gpu_worker(tmp_path, name, nccl_kernel_dur, launch_from_c10d=False, extra=()):
    """One step 0..100 us: a gemm kernel 20..60 (launched by aten::mm) and an all_reduce of
    1000 floats whose NCCL kernel runs 50..50+nccl_kernel_dur on another stream."""
    comm_ext = 2 if launch_from_c10d else 3
    events = [
        op("ProfilerStep#1", 0, 100, cat="user_annotation", **{"External id": 9}),
        op("aten::mm", 10, 10, **{"External id": 1}),
        runtime("cudaLaunchKernel", 12, 2, correlation=1, external_id=1),
        kernel("volta_sgemm_128x64_nn", 20, 40, correlation=1),
        op("c10d::allreduce_", 30, 20, **{"External id": 2}),
        op("nccl:all_reduce", 32, 15, cat="user_annotation",
           **{"External id": 3, "Input Dims": [[1000]], "Input type": ["float"]}),
        runtime("cudaLaunchKernel", 35, 2, correlation=2, external_id=comm_ext),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 50, nccl_kernel_dur, correlation=2, stream=20),
        *extra,
    ]
    rank = int(name[-1])
    return _load(write_trace(tmp_path / f"{name}.pt.trace.json", events,
                             distributedInfo={"backend": "nccl", "rank": rank, "world_size": 2}))


@pytest.fixture
def gpu_pair(tmp_path):
    return {"rank0": _gpu_worker(tmp_path, "rank0", 30),
            "rank1": _gpu_worker(tmp_path, "rank1", 12, launch_from_c10d=True)}


def test_distributed_columns_exact(gpu_pair):
    view = distributed(gpu_pair)
    assert list(view.steps.columns) == STEP_COLUMNS
    assert list(view.all_steps.columns) == ALL_STEPS_COLUMNS
    assert list(view.calls.columns) == CALL_COLUMNS
    assert list(view.collectives.columns) == COLLECTIVE_COLUMNS
    assert list(view.devices.columns) == DEVICE_COLUMNS
    assert list(view.groups.columns) == GROUP_COLUMNS and list(view.fsdp.columns) == FSDP.names
    assert view.steps["step"].dtype == np.int64 and view.collectives["calls"].dtype == np.int64
    assert view.collectives["size_bytes"].dtype == np.float64


def test_steps_gpu_overlap_worked_by_hand(gpu_pair):
    steps = distributed(gpu_pair).steps
    # rank0: gemm 20..60 (40), NCCL 50..80 (30), both 50..60 (10), neither 0..20 + 80..100 (40)
    r0 = _row(steps, worker="rank0", step=1)
    assert (r0.computation_us, r0.communication_us, r0.overlap_us, r0.other_us, r0.total_us) == (40, 30, 10, 40, 100)
    # rank1: NCCL 50..62 (12): overlap 10, other 100 - 40 - 12 + 10 = 58
    r1 = _row(steps, worker="rank1", step=1)
    assert (r1.computation_us, r1.communication_us, r1.overlap_us, r1.other_us, r1.total_us) == (40, 12, 10, 58, 100)


def test_collectives_transfer_is_min_over_workers(gpu_pair):
    view = distributed(gpu_pair)
    c0 = _row(view.collectives, worker="rank0", backend_name="nccl:all_reduce")
    c1 = _row(view.collectives, worker="rank1", backend_name="nccl:all_reduce")
    # one call each: device time 30 and 12 (rank1's kernel is linked to the c10d op, not the
    # nccl annotation); transfer = min = 12; synchronizing = the rest
    assert (c0.calls, c0.total_us, c0.transfer_us, c0.synchronizing_us) == (1, 30, 12, 18)
    assert (c1.calls, c1.total_us, c1.transfer_us, c1.synchronizing_us) == (1, 12, 12, 0)
    # 1000 float elements of 4 bytes
    assert c0.size_bytes == c1.size_bytes == 4000 and c0.mean_size_bytes == 4000
    assert view.calls["on_device"].all() and (view.calls["matched_workers"] == 2).all()


def test_steps_gpu_worker_host_collective_without_kernel_counts_its_interval(tmp_path):
    # a CPU-side gloo broadcast (e.g. of Python objects) 70..90 beside the NCCL kernel 50..80
    gloo = op("gloo:broadcast", 70, 20, tid=2, cat="user_annotation", **{"Input Dims": [[3]], "Input type": ["long int"]})
    view = distributed({"rank0": _gpu_worker(tmp_path, "rank0", 30, extra=[gloo])})
    # communication = union 50..90 = 40; computation 20..60 = 40; overlap 50..60 = 10
    step = _row(view.steps, worker="rank0")
    assert (step.computation_us, step.communication_us, step.overlap_us, step.other_us) == (40, 40, 10, 30)
    broadcast = _row(view.calls, backend_name="gloo:broadcast")
    assert (broadcast.on_device, broadcast.duration_us, broadcast.size_bytes) == (False, 20, 3 * 8)
    assert _row(view.calls, backend_name="nccl:all_reduce").duration_us == 30


def test_devices_from_distributed_info_without_device_properties(gpu_pair):
    devices = distributed(gpu_pair).devices
    r1 = _row(devices, worker="rank1")
    assert (r1.backend, r1["rank"], r1.world_size, r1.device_id) == ("nccl", 1, 2, 0)
    assert r1.device_name == "" and math.isnan(r1.memory_bytes) and math.isnan(r1.sm_count)


def _gloo_worker(tmp_path, name, compute, gloo_calls, step_dur, frontend_ts):
    """CPU worker: compute ops (thread, ts, dur), `gloo:all_reduce` of 256 floats at
    (ts, dur) on a gloo thread, and c10d front-end calls that only enqueue the work."""
    events = [op("ProfilerStep#1", 0, step_dur, cat="user_annotation")]
    events += [op(n, ts, dur, tid=tid) for n, tid, ts, dur in compute]
    events += [op("gloo:all_reduce", ts, dur, tid=2, cat="user_annotation",
                  **{"Input Dims": [[256]], "Input type": ["float"]}) for ts, dur in gloo_calls]
    events += [op("c10d::allreduce_", ts, 2, tid=1, **{"Input Dims": [[[256]], []], "Input type": ["TensorList", ""]})
               for ts in frontend_ts]
    return _load(write_trace(tmp_path / f"{name}.pt.trace.json", events,
                             distributedInfo={"backend": "gloo", "rank": int(name[-1]), "world_size": 2}))


@pytest.fixture
def gloo_pair(tmp_path):
    # worker0: compute 10..60 (tid 1) and 40..80 (tid 3); three all_reduces; step 0..200
    w0 = _gloo_worker(tmp_path, "worker0", [("aten::add", 1, 10, 50), ("aten::mul", 3, 40, 40)],
                      [(50, 10), (100, 20), (150, 30)], 200, [62, 95, 145])
    # worker1: compute 0..50; only two all_reduces (unequal counts); step 0..100
    w1 = _gloo_worker(tmp_path, "worker1", [("aten::add", 1, 0, 50)], [(40, 15), (70, 5)], 100, [60, 65])
    return {"worker0": w0, "worker1": w1}


def test_steps_cpu_workers_use_op_and_gloo_intervals(gloo_pair):
    steps = distributed(gloo_pair).steps
    # worker0: computation = union 10..80 = 70; communication 10 + 20 + 30 = 60;
    # overlap 50..60 = 10; other = 200 - 70 - 60 + 10 = 80
    w0 = _row(steps, worker="worker0")
    assert (w0.computation_us, w0.communication_us, w0.overlap_us, w0.other_us) == (70, 60, 10, 80)
    # worker1: computation 50; communication 15 + 5 = 20; overlap 40..50 = 10; other 40
    w1 = _row(steps, worker="worker1")
    assert (w1.computation_us, w1.communication_us, w1.overlap_us, w1.other_us) == (50, 20, 10, 40)


def test_collectives_unequal_counts_match_by_order(gloo_pair):
    view = distributed(gloo_pair)
    # the c10d front-end calls are not collectives of their own: 3 and 2 calls, not 6 and 4
    w0 = _row(view.collectives, worker="worker0", backend_name="gloo:all_reduce")
    w1 = _row(view.collectives, worker="worker1", backend_name="gloo:all_reduce")
    # pairs: (10, 15) -> 10, (20, 5) -> 5; worker0's third call (30) is matched by no one
    assert (w0.calls, w0.total_us, w0.transfer_us, w0.synchronizing_us) == (3, 60, 10 + 5 + 30, 15)
    assert (w1.calls, w1.total_us, w1.transfer_us, w1.synchronizing_us) == (2, 20, 10 + 5, 5)
    assert w0.size_bytes == 3 * 256 * 4 and w1.size_bytes == 2 * 256 * 4
    unmatched = view.calls[view.calls["matched_workers"] == 1]
    assert list(unmatched["worker"]) == ["worker0"] and list(unmatched["duration_us"]) == [30]
    assert list(unmatched["synchronizing_us"]) == [0]
    assert not view.calls["on_device"].any()


def test_devices_cpu_worker_has_no_device(gloo_pair):
    devices = distributed(gloo_pair).devices
    assert list(devices["worker"]) == ["worker0", "worker1"]
    assert list(devices["device_id"]) == [-1, -1] and list(devices["backend"]) == ["gloo", "gloo"]


def _seq_worker(tmp_path, name, calls):
    """GPU worker whose all_reduces carry record_param_comms args (1000 BFloat16 elements,
    process group "0", Seq); the NCCL kernel is launched by record_param_comms."""
    events = [op("ProfilerStep#1", 0, 1000, cat="user_annotation")]
    for i, (seq, kernel_dur) in enumerate(calls):
        t, ext = 100 + 300 * i, 10 * (i + 1)
        events += [
            op("c10d::allreduce_", t, 50, **{"External id": ext}),
            op("record_param_comms", t + 5, 40, **{"External id": ext + 1, "Collective name": "allreduce",
                                                   "In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "BFloat16",
                                                   "Process Group Name": "0", "Seq": seq}),
            op("nccl:all_reduce", t + 10, 20, cat="user_annotation", **{"External id": ext + 2}),
            runtime("cudaLaunchKernel", t + 35, 3, correlation=ext, external_id=ext + 1),
            kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", t + 60, kernel_dur, correlation=ext, stream=20),
        ]
    return _load(write_trace(tmp_path / f"{name}.pt.trace.json", events))


def test_collectives_match_by_seq_and_size_from_nelems(tmp_path):
    # rank1's first collective (Seq 5) happened before its profiling window: its only call is
    # Seq 6, which pairs with rank0's second call, not its first.
    models = {"rank0": _seq_worker(tmp_path, "rank0", [(5, 40), (6, 10)]),
              "rank1": _seq_worker(tmp_path, "rank1", [(6, 25)])}
    view = distributed(models)
    r0 = _row(view.collectives, worker="rank0", backend_name="nccl:all_reduce")
    r1 = _row(view.collectives, worker="rank1", backend_name="nccl:all_reduce")
    assert (r0.calls, r0.total_us, r0.transfer_us, r0.synchronizing_us) == (2, 50, 40 + 10, 0)
    assert (r1.calls, r1.total_us, r1.transfer_us, r1.synchronizing_us) == (1, 25, 10, 15)
    assert r0.size_bytes == 2 * 1000 * 2 and r1.size_bytes == 1000 * 2  # BFloat16: 2 bytes
    assert set(view.calls["match_by"]) == {"seq"} and set(view.calls["match_group"]) == {"0"}
    assert sorted(view.calls["match_index"]) == [5, 6, 6]


def test_distributed_no_workers_gives_empty_tables():
    view = distributed({})
    for table, columns in ((view.steps, STEP_COLUMNS), (view.all_steps, ALL_STEPS_COLUMNS),
                           (view.calls, CALL_COLUMNS), (view.collectives, COLLECTIVE_COLUMNS),
                           (view.groups, GROUP_COLUMNS), (view.fsdp, FSDP.names), (view.devices, DEVICE_COLUMNS)):
        assert len(table) == 0 and list(table.columns) == columns


@pytest.mark.parametrize("dtype, size", [
    ("float", 4), ("Float", 4), ("c10::Half", 2), ("Half", 2), ("BFloat16", 2), ("c10::BFloat16", 2),
    ("double", 8), ("long int", 8), ("Long", 8), ("int", 4), ("unsigned char", 1), ("signed char", 1),
    ("bool", 1), ("c10::complex<float>", 8),
])
def test_element_bytes_known_dtypes(dtype, size):
    assert element_bytes(dtype) == size


@pytest.mark.parametrize("dtype", ["TensorList", "Scalar", "", "mystery"])
def test_element_bytes_unknown_is_nan(dtype):
    assert math.isnan(element_bytes(dtype))


def test_input_bytes_sums_tensor_inputs_and_skips_scalars():
    assert input_bytes("[[2, 3], [4], []]", '["float", "long int", "Scalar"]') == 2 * 3 * 4 + 4 * 8
    assert math.isnan(input_bytes("[[[80]], []]", '["TensorList", ""]'))
    assert math.isnan(input_bytes("", ""))


# --- real traces ------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _gloo_run():
    return tb_plugin.load_run(SAMPLES / "cpu_ddp_gloo")


def _gloo_view(span):
    run = _gloo_run()
    return distributed({w: run.profile(w, span).model for w in run.workers})


def _raw_file(run_dir, worker, span):
    files = sorted(p for p in run_dir.iterdir() if p.name.startswith(worker + "."))
    return files[span - 1]


_RAW_BYTES = {"float": 4, "long int": 8}  # the two input types these samples use


@pytest.mark.parametrize("span", [1, 2])
def test_collectives_gloo_samples_sizes_and_counts_from_raw(span):
    view = _gloo_view(span)
    for worker in _gloo_run().workers:
        events = [e for e in raw_events(_raw_file(SAMPLES / "cpu_ddp_gloo", worker, span))
                  if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")]
        for name in ("gloo:all_reduce", "gloo:broadcast"):
            mine = [e for e in events if e["name"] == name]
            expected_bytes = sum(math.prod(e["args"]["Input Dims"][0]) * _RAW_BYTES[e["args"]["Input type"][0]]
                                 for e in mine)
            row = _row(view.collectives, worker=worker, backend_name=name)
            assert row.calls == len(mine)
            assert row.size_bytes == expected_bytes
            assert row.total_us == pytest.approx(sum(e["dur"] for e in mine), abs=1e-6)
        # DDP's gradient all_reduce: one bucket of 6362 floats per step
        calls = view.calls[(view.calls["worker"] == worker) & (view.calls["backend_name"] == "gloo:all_reduce")]
        assert list(calls["size_bytes"]) == [25448.0, 25448.0]


def test_collectives_gloo_samples_pair_equal_sizes():
    # gloo's two work threads start the 80-float and 3-long broadcasts in different orders on
    # the two ranks; every matched pair must still be one collective (same size on both)
    for span in (1, 2):
        calls = _gloo_view(span).calls
        sizes = calls.groupby(["match_by", "match_group", "match_index"])["size_bytes"].nunique()
        assert (sizes == 1).all()
        assert (calls["matched_workers"] == 2).all()
        transfer = calls.groupby(["match_group", "match_index"]).agg(t=("transfer_us", "first"),
                                                                     d=("duration_us", "min"))
        assert np.allclose(transfer["t"], transfer["d"])


def _union_in(intervals, lo, hi):
    """Length of the union of (start, end) intervals clipped to [lo, hi], plain Python."""
    total, reach = 0.0, lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if e <= s:
            continue
        if e > reach:
            total += e - max(s, reach)
            reach = e
    return total


@pytest.mark.parametrize("span", [1, 2])
def test_steps_gloo_communication_is_raw_union_of_gloo_ops(span):
    view = _gloo_view(span)
    for worker in _gloo_run().workers:
        events = raw_events(_raw_file(SAMPLES / "cpu_ddp_gloo", worker, span))
        xs = [e for e in events if e.get("ph") == "X"]
        origin = min(e["ts"] for e in events if e.get("ph") in ("X", "i") and "ts" in e)
        steps = sorted((e["ts"] - origin, e["ts"] - origin + e["dur"], int(e["name"].split("#")[1]))
                       for e in xs if STEP.match(e["name"]) and e.get("cat") in ("cpu_op", "user_annotation"))
        gloo = [(e["ts"] - origin, e["ts"] - origin + e["dur"]) for e in xs if e["name"].startswith("gloo:")]
        for lo, hi, number in steps:  # CPU only: the step windows are the host ranges
            row = _row(view.steps, worker=worker, step=number)
            assert row.total_us == pytest.approx(hi - lo, abs=1e-3)
            assert row.communication_us == pytest.approx(_union_in(gloo, lo, hi), abs=1e-3)


@lru_cache(maxsize=None)
def _sampled_view():
    folder = SHARED_TRACES / "sampled_128rank_job"
    if not folder.is_dir():
        pytest.skip(f"real trace folder {folder} is not available")
    run = tb_plugin.load_run(folder)
    return run, distributed({w: run.profile(w).model for w in run.workers})


def test_steps_sampled_128rank_comm_equals_raw_nccl_kernel_sum():
    run, view = _sampled_view()
    assert run.workers == ["rank0", "rank1"]
    for worker in run.workers:
        events = [e for e in raw_events(SHARED_TRACES / "sampled_128rank_job" / f"{worker}.pt.trace.json.gz")
                  if e.get("ph") == "X"]
        steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
                 if STEP.match(e["name"]) and e.get("cat", "").lower() in ("cpu_op", "user_annotation")]
        nccl = [(e["ts"], e["ts"] + e["dur"]) for e in events
                if e.get("cat", "").lower() == "kernel" and "nccl" in e["name"].lower()]
        within_steps = sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in nccl for lo, hi in steps)
        mine = view.steps[view.steps["worker"] == worker]
        assert len(mine) == len(steps) == 2
        assert mine["communication_us"].sum() == pytest.approx(within_steps, abs=1e-6)
        # every NCCL kernel belongs to one collective call
        assert view.collectives[view.collectives["worker"] == worker]["total_us"].sum() == \
            pytest.approx(sum(e - s for s, e in nccl), abs=1e-6)


def _raw_document(path):
    """The whole JSON document (top-level keys too), decoded by the standard library."""
    return json.loads(gzip.decompress(path.read_bytes()))


def test_devices_sampled_128rank_rank_and_world_size():
    run, view = _sampled_view()
    for worker in run.workers:
        info = _raw_document(SHARED_TRACES / "sampled_128rank_job" / f"{worker}.pt.trace.json.gz")["distributedInfo"]
        row = _row(view.devices, worker=worker)
        assert (row.backend, row["rank"], row.world_size) == (info["backend"], info["rank"], info["world_size"])


def test_steps_parts_sum_to_step_on_real_runs():
    _, sampled = _sampled_view()
    for table in (sampled.steps, _gloo_view(1).steps, _gloo_view(2).steps):
        recomposed = table["computation_us"] + table["communication_us"] - table["overlap_us"] + table["other_us"]
        assert np.allclose(recomposed, table["total_us"], rtol=0, atol=1e-6)
        assert (table[["computation_us", "overlap_us", "communication_us", "other_us"]] >= -1e-9).all().all()
        assert (table["overlap_us"] <= np.minimum(table["computation_us"], table["communication_us"]) + 1e-9).all()


def test_all_steps_is_mean_per_step():
    view = _gloo_view(1)
    parts = ["computation_us", "overlap_us", "communication_us", "other_us", "total_us"]
    means = view.steps.groupby("worker")[parts].mean()
    for _, row in view.all_steps.iterrows():
        assert row.steps == 2
        assert np.allclose(means.loc[row.worker].to_numpy(), row[parts].to_numpy(np.float64))


A100 = SHARED_TRACES / "a100_nccl_collectives" / "rank0.pt.trace.json.gz"


@lru_cache(maxsize=None)
def _single_worker_view(path):
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return distributed({"rank0": _load(path)})


def test_devices_a100_from_raw_device_properties():
    view = _single_worker_view(A100)  # skips without ../shared, before the file is read
    doc = _raw_document(A100)
    used = sorted({e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") == "kernel"})
    assert list(view.devices["device_id"]) == used
    for _, row in view.devices.iterrows():
        props = next(p for p in doc["deviceProperties"] if p["id"] == row.device_id)
        assert row.device_name == props["name"]
        assert row.memory_bytes == props["totalGlobalMem"]
        assert row.compute_capability == f"{props['computeMajor']}.{props['computeMinor']}"
        assert row.sm_count == props["numSms"]
        assert (row.backend, row["rank"], row.world_size) == ("nccl", 0, 2)
    # one call per nccl:* annotation; sizes from record_param_comms: In msg nelems x dtype
    # size. Its "wait" records (Work.wait(), 0 elements, no kernel) are not collectives.
    annotations = [e for e in doc["traceEvents"]  # host ones, not their gpu_user_annotation copies
                   if str(e.get("name", "")).startswith("nccl:") and e.get("cat") == "user_annotation"]
    rpc = [e for e in doc["traceEvents"] if e.get("name") == "record_param_comms"
           and e["args"].get("Collective name") not in (None, "", "wait")]
    assert len(view.calls) == len(annotations) == len(rpc) == 21
    assert view.collectives["size_bytes"].sum() == sum(
        e["args"]["In msg nelems"] * {"Float": 4, "Long": 8}[e["args"]["dtype"]] for e in rpc)
    # a single worker: every call is its own transfer time
    assert (view.calls["synchronizing_us"] == 0).all() and (view.calls["matched_workers"] == 1).all()


def test_collectives_a100_duration_is_raw_nccl_kernel_sum():
    view = _single_worker_view(A100)
    nccl = [e for e in raw_events(A100) if e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
    by_kind = pd.Series([e["dur"] for e in nccl], index=["all_reduce" if "AllReduce" in e["name"] else "broadcast"
                                                          for e in nccl]).groupby(level=0).agg(["sum", "size"])
    for kind in ("all_reduce", "broadcast"):
        row = _row(view.collectives, backend_name=f"nccl:{kind}")
        assert row.calls == by_kind.loc[kind, "size"]
        assert row.total_us == pytest.approx(by_kind.loc[kind, "sum"], abs=1e-6)


def test_collectives_one_worker_run_v100_has_no_synchronizing_time():
    # rank 1 of a 2-rank job on its own: nothing to match, so transfer = duration; 2020
    # all_reduces, each timed by its NCCL kernel
    path = SHARED_TRACES / "v100_ddp_nccl_memory" / "rank1.pt.trace.json.gz"
    view = _single_worker_view(path)
    kernels = [e for e in raw_events(path) if e.get("cat") == "kernel"]
    nccl = [e["dur"] for e in kernels if "nccl" in e["name"].lower()]
    row = _row(view.collectives, backend_name="nccl:all_reduce")
    assert row.calls == len(nccl) == 2020
    assert row.total_us == pytest.approx(sum(nccl), abs=1e-6)
    assert row.transfer_us == row.total_us and row.synchronizing_us == 0
    steps = view.steps
    assert np.allclose(steps["computation_us"] + steps["communication_us"] - steps["overlap_us"] + steps["other_us"],
                       steps["total_us"], rtol=0, atol=1e-6)
    assert list(view.devices["device_id"]) == sorted({e["args"]["device"] for e in kernels})


# --- today's jobs: requested names, process groups, bandwidth, FSDP ---------------------------

@pytest.mark.parametrize("name, kind", [
    ("c10d::_reduce_scatter_base_", "reduce_scatter"), ("reduce_scatter_tensor_coalesced", "reduce_scatter"),
    ("_c10d_functional::reduce_scatter_tensor", "reduce_scatter"), ("nccl:reduce_scatter", "reduce_scatter"),
    ("c10d::allreduce_", "all_reduce"), ("allreduce", "all_reduce"), ("gloo:all_reduce", "all_reduce"),
    ("_c10d_functional::all_reduce", "all_reduce"), ("c10d::_allgather_base_", "all_gather"),
    ("all_gather_into_tensor_coalesced", "all_gather"), ("nccl:_all_gather_base", "all_gather"),
    ("all_to_allv", "all_to_all"), ("c10d::broadcast_", "broadcast"), ("c10d::gather_", "gather"),
    ("c10d::scatter_", "scatter"), ("c10d::recv_", "recv"), ("c10d::barrier", "barrier"), ("aten::mm", ""),
])
def test_requested_collective_spellings(name, kind):
    assert requested_collective(name) == kind


def test_bus_factor_is_nccl_tests_formula():
    # nccl-tests doc/PERFORMANCE.md, n = 4
    assert bus_factor("all_reduce", 4) == 2 * 3 / 4
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == bus_factor("all_to_all", 4) == 3 / 4
    assert bus_factor("broadcast", 4) == bus_factor("reduce", 4) == 1
    assert math.isnan(bus_factor("all_reduce", -1)) and math.isnan(bus_factor("barrier", 4))


def test_largest_input_bytes_is_the_gathered_tensor():
    # c10d::_allgather_base_(output [1386], input [693]) of floats
    assert largest_input_bytes("[[1386], [693], [], []]", '["float", "float", "", "Scalar"]') == 1386 * 4
    assert math.isnan(largest_input_bytes("[[[80]], []]", '["TensorList", ""]'))


def _fsdp_gloo_worker(tmp_path, name, gather_dur, reduce_dur, pg_config=None):
    """FSDP2 on gloo, drawn by hand: one step 0..1000. The main thread (tid 1) runs
    FSDP::pre_forward 0..300 holding FSDP::all_gather 10..110 with the front-end
    c10d::_allgather_base_(out [400], in [200]) at 20; compute aten::mm 120..400;
    FSDP::post_forward 400..420; FSDP::post_backward_reduce 600..900 holding
    c10d::_reduce_scatter_base_(out [200], in [400]) at 610. gloo's thread (tid 2) runs
    gloo:all_gather(in [200]) from 30 and gloo:all_reduce(in [400]) from 620."""
    events = [
        op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        op("FSDP::pre_forward", 0, 300, cat="user_annotation"),
        op("FSDP::all_gather", 10, 100, cat="user_annotation"),
        op("c10d::_allgather_base_", 20, 5, **{"Input Dims": [[400], [200], [], []],
                                              "Input type": ["float", "float", "", "Scalar"]}),
        op("aten::mm", 120, 280),
        op("FSDP::post_forward", 400, 20, cat="user_annotation"),
        op("FSDP::post_backward_reduce", 600, 300, cat="user_annotation"),
        op("c10d::_reduce_scatter_base_", 610, 5, **{"Input Dims": [[200], [400], [], []],
                                                   "Input type": ["float", "float", "", "Scalar"]}),
        op("gloo:all_gather", 30, gather_dur, tid=2, cat="user_annotation",
           **{"Input Dims": [[200]], "Input type": ["float"]}),
        op("gloo:all_reduce", 620, reduce_dur, tid=2, cat="user_annotation",
           **{"Input Dims": [[400]], "Input type": ["float"]}),
    ]
    info = {"backend": "gloo", "rank": int(name[-1]), "world_size": 2}
    if pg_config is not None:
        info["pg_config"] = pg_config
    return _load(write_trace(tmp_path / f"{name}.pt.trace.json", events, distributedInfo=info))


_DEFAULT_PG = [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]


@pytest.fixture
def fsdp_pair(tmp_path):
    return {"worker0": _fsdp_gloo_worker(tmp_path, "worker0", 150, 200, _DEFAULT_PG),
            "worker1": _fsdp_gloo_worker(tmp_path, "worker1", 100, 250, _DEFAULT_PG)}


def test_collectives_named_by_request_with_backend_beside(fsdp_pair):
    view = distributed(fsdp_pair)
    # the front-end calls give the name and are not calls of their own: 2 calls per worker
    assert len(view.calls) == 4
    rs = _row(view.collectives, worker="worker0", name="reduce_scatter")
    ag = _row(view.collectives, worker="worker0", name="all_gather")
    assert (rs.backend_name, ag.backend_name) == ("gloo:all_reduce", "gloo:all_gather")
    assert (rs.process_group, rs.group_size) == ("default_pg", 2)
    # size: the gloo op's input; message S: the front end's larger tensor (400 floats both)
    assert (rs.size_bytes, rs.message_bytes) == (400 * 4, 400 * 4)
    assert (ag.size_bytes, ag.message_bytes) == (200 * 4, 400 * 4)
    # transfer = min over the two ranks: all_reduce min(200, 250) = 200 us, all_gather 100 us
    assert (rs.transfer_us, ag.transfer_us) == (200, 100)
    # algbw = S / transfer: 1600 B / 200 us = 8 B/us = 0.008 GB/s; gloo ran an all_reduce of
    # 2 ranks: busbw factor 2(n-1)/n = 1. all_gather: 1600 B / 100 us = 0.016 GB/s, factor 1/2
    assert rs.algbw_gbps == pytest.approx(0.008) and rs.busbw_gbps == pytest.approx(0.008)
    assert ag.algbw_gbps == pytest.approx(0.016) and ag.busbw_gbps == pytest.approx(0.008)


def test_groups_split_communication_and_list_configured_groups(fsdp_pair):
    groups = distributed(fsdp_pair).groups
    g0 = _row(groups, worker="worker0", process_group="default_pg")
    assert (g0.group_size, g0.ranks, g0.calls, g0.total_us, g0.share_pct) == (2, "0,1", 2, 150 + 200, 100)


def test_process_group_unknown_when_trace_does_not_say(tmp_path):
    mesh = [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 4, "ranks": [0, 1, 2, 3]},
            {"pg_name": "1", "pg_desc": "mesh_dp", "pg_size": 2, "ranks": [0, 2]},
            {"pg_name": "3", "pg_desc": "mesh_tp", "pg_size": 2, "ranks": [0, 1]}]
    view = distributed({"worker0": _fsdp_gloo_worker(tmp_path, "worker0", 150, 200, mesh)})
    assert set(view.calls["process_group"]) == {""} and set(view.calls["group_size"]) == {-1}
    assert view.calls["busbw_gbps"].isna().all() and view.calls["algbw_gbps"].notna().all()
    # every configured group is listed, with no calls, beside the unknown one
    assert sorted(view.groups["process_group"]) == ["", "default_pg", "mesh_dp", "mesh_tp"]
    assert _row(view.groups, process_group="mesh_tp").ranks == "0,1"
    assert _row(view.groups, process_group="").calls == 2


def test_process_group_from_record_param_comms_name_via_pg_config(tmp_path):
    events = [op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
              op("c10d::allreduce_", 100, 50, **{"External id": 1}),
              op("record_param_comms", 105, 40, **{"External id": 2, "Collective name": "allreduce",
                                                   "In msg nelems": 1000, "Out msg nelems": 1000,
                                                   "dtype": "BFloat16", "Process Group Name": "3", "Group size": 4}),
              op("nccl:all_reduce", 110, 20, cat="user_annotation", **{"External id": 3}),
              runtime("cudaLaunchKernel", 135, 3, correlation=1, external_id=2),
              kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 160, 40, correlation=1, stream=20)]
    info = {"backend": "nccl", "rank": 0, "world_size": 4,
            "pg_config": [{"pg_name": "3", "pg_desc": "mesh_tp", "pg_size": 4, "ranks": [0, 1, 2, 3]}]}
    view = distributed({"rank0": _load(write_trace(tmp_path / "rank0.pt.trace.json", events, distributedInfo=info))})
    call = _row(view.calls, name="all_reduce")
    assert (call.process_group, call.group_size, call.backend_name) == ("mesh_tp", 4, "nccl:all_reduce")
    # S = 1000 bf16 = 2000 bytes over the 40 us kernel: 0.05 GB/s; busbw x 2(4-1)/4 = 1.5
    assert call.algbw_gbps == pytest.approx(0.05) and call.busbw_gbps == pytest.approx(0.075)


def test_fsdp_breakdown_worked_by_hand(fsdp_pair):
    fsdp = distributed(fsdp_pair).fsdp
    unshard = _row(fsdp, worker="worker0", phase="unshard")
    # FSDP::all_gather 10..110; its gloo:all_gather 30..180; compute aten::mm 120..400
    # (the FSDP annotations are not operators): exposed = 30..120 = 90
    assert (unshard.annotations, unshard.host_us, unshard.communication_us, unshard.exposed_us) == (1, 100, 150, 90)
    other = _row(fsdp, worker="worker0", phase="other")  # pre_forward 0..300 minus the all_gather
    assert (other.annotations, other.host_us, other.communication_us) == (1, 200, 0)
    reshard = _row(fsdp, worker="worker0", phase="reshard")
    assert (reshard.host_us, reshard.communication_us) == (20, 0)
    reduce = _row(fsdp, worker="worker1", phase="reduce_scatter")
    # post_backward_reduce 600..900; gloo:all_reduce 620..870, nothing computes then
    assert (reduce.host_us, reduce.communication_us, reduce.exposed_us) == (300, 250, 250)


def test_fsdp_empty_without_fsdp_annotations(gloo_pair):
    assert len(distributed(gloo_pair).fsdp) == 0


@pytest.mark.parametrize("name, phase", [
    ("FSDP::all_gather (up)", "unshard"), ("FSDP::all_gather_copy_out", "unshard"),
    ("FSDP::backward_prefetch for up", "unshard"), ("FSDP::post_backward_reduce (down)", "reduce_scatter"),
    ("FSDP::post_backward_rs_wait (up)", "reduce_scatter"), ("FSDP::post_forward (up)", "reshard"),
    ("FSDP::post_backward_reshard", "reshard"), ("FSDP::pre_forward", "other"),
    ("FSDP::root_post_backward_callback", "other"), ("aten::mm", ""),
])
def test_fsdp_phase_of_annotation(name, phase):
    assert fsdp_phase(name) == phase


# --- real FSDP2 / DeviceMesh samples (samples/generate_modern.py) ------------------------------

@lru_cache(maxsize=None)
def _sample_view(run_name):
    run = tb_plugin.load_run(SAMPLES / run_name)
    return run, distributed({w: run.profile(w).model for w in run.workers})


def _sample_raw(run_name, worker):
    path = next((SAMPLES / run_name).glob(f"{worker}.*.pt.trace.json.gz"))
    return [e for e in raw_events(path) if e.get("ph") == "X"], _raw_document(path)


def _largest_input(event):
    args = event["args"]
    return max(math.prod(d) * 4 for d, t in zip(args["Input Dims"], args["Input type"]) if t == "float")


@pytest.mark.parametrize("run_name", ["cpu_fsdp2_gloo", "cpu_mesh_2d_gloo"])
def test_fsdp2_sample_collectives_from_raw(run_name):
    run, view = _sample_view(run_name)
    for worker in run.workers:
        events, _ = _sample_raw(run_name, worker)
        fronts = {kind: [e for e in events if e["name"] == op_name]
                  for kind, op_name in (("all_gather", "c10d::_allgather_base_"),
                                        ("reduce_scatter", "c10d::_reduce_scatter_base_"))}
        gathers = [e for e in events if e["name"] == "gloo:all_gather"]
        row = _row(view.collectives, worker=worker, name="all_gather")
        assert row.backend_name == "gloo:all_gather"
        assert row.calls == len(fronts["all_gather"]) == len(gathers)
        assert row.total_us == pytest.approx(sum(e["dur"] for e in gathers), abs=1e-6)
        assert row.message_bytes == sum(_largest_input(e) for e in fronts["all_gather"])
        row = _row(view.collectives, worker=worker, name="reduce_scatter")
        assert row.backend_name == "gloo:all_reduce"  # gloo has no reduce-scatter for FSDP2
        assert row.calls == len(fronts["reduce_scatter"])
        assert row.message_bytes == sum(_largest_input(e) for e in fronts["reduce_scatter"])
        # every gloo:all_reduce is FSDP's reduce-scatter or, on the mesh, DTensor's all_reduce
        tp = [e for e in events if e["name"] == "_c10d_functional::all_reduce"]
        all_reduces = view.collectives[(view.collectives["worker"] == worker)
                                       & (view.collectives["backend_name"] == "gloo:all_reduce")]
        assert all_reduces["calls"].sum() == len([e for e in events if e["name"] == "gloo:all_reduce"])
        assert all_reduces["calls"].sum() == len(fronts["reduce_scatter"]) + len(tp)


def test_fsdp2_sample_process_groups_from_pg_config():
    run, view = _sample_view("cpu_fsdp2_gloo")
    for worker in run.workers:
        _, doc = _sample_raw("cpu_fsdp2_gloo", worker)
        (group,) = doc["distributedInfo"]["pg_config"]
        mine = view.calls[view.calls["worker"] == worker]
        assert set(mine["process_group"]) == {group["pg_desc"]} and set(mine["group_size"]) == {group["pg_size"]}
    _, mesh = _sample_view("cpu_mesh_2d_gloo")
    listed = set(mesh.groups["process_group"])
    _, doc = _sample_raw("cpu_mesh_2d_gloo", "worker0")
    assert {g["pg_desc"] for g in doc["distributedInfo"]["pg_config"]} == {"default_pg", "mesh_dp", "mesh_tp"}
    assert listed == {"", "default_pg", "mesh_dp", "mesh_tp"}  # gloo on CPU does not say which group ran


@pytest.mark.parametrize("run_name", ["cpu_fsdp2_gloo", "cpu_mesh_2d_gloo"])
def test_fsdp2_sample_breakdown_from_raw(run_name):
    run, view = _sample_view(run_name)
    for worker in run.workers:
        events, _ = _sample_raw(run_name, worker)
        steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
                       for e in events if STEP.match(e["name"]) and e.get("cat") in ("cpu_op", "user_annotation"))
        annotations = [e for e in events if e["name"].startswith("FSDP::")]
        gather = [e for e in annotations if "all_gather" in e["name"] or "prefetch" in e["name"]]
        # raw timestamps are ~5e12 us: float64 keeps them to ~1e-3 us, so compare to 1e-2
        for lo, hi, number in steps:  # CPU only: the step windows are the host ranges
            mine = view.fsdp[(view.fsdp["worker"] == worker) & (view.fsdp["step"] == number)]
            # phases share out the union of all FSDP annotations; unshard comes first
            assert mine["host_us"].sum() == pytest.approx(
                _union_in([(e["ts"], e["ts"] + e["dur"]) for e in annotations], lo, hi), abs=1e-2)
            assert _row(mine, phase="unshard").host_us == pytest.approx(
                _union_in([(e["ts"], e["ts"] + e["dur"]) for e in gather], lo, hi), abs=1e-2)
            assert mine["annotations"].sum() == sum(lo <= e["ts"] < hi for e in annotations)
            assert (mine["exposed_us"] <= mine["communication_us"] + 1e-9).all()


def test_mesh_sample_functional_waits_from_raw():
    # DTensor's all_reduce returns at once; the host then blocks in wait_tensor: that time is
    # the call's wait_us, and every wait of the sample belongs to one all_reduce
    run, view = _sample_view("cpu_mesh_2d_gloo")
    for worker in run.workers:
        events, _ = _sample_raw("cpu_mesh_2d_gloo", worker)
        waits = [e["dur"] for e in events if e["name"] == "_c10d_functional::wait_tensor"]
        mine = view.collectives[view.collectives["worker"] == worker]
        assert mine["wait_us"].sum() == pytest.approx(sum(waits), abs=1e-6) and len(waits) > 0
        assert _row(mine, name="all_reduce").wait_us == pytest.approx(sum(waits), abs=1e-6)


# --- collectives whose transfer nothing measured (issue 24, item 4) ------------------------------

def test_nccl_call_without_a_kernel_has_no_transfer_bandwidth_or_overlap(tmp_path):
    # rank0 as in `_gpu_worker` but its NCCL call launched no kernel (a one-rank group): the
    # host ops c10d 30..50 / nccl 32..47 only issued it, while the gemm ran 20..60
    events = [op("ProfilerStep#1", 0, 100, cat="user_annotation"),
              op("aten::mm", 10, 10, **{"External id": 1}),
              runtime("cudaLaunchKernel", 12, 2, correlation=1, external_id=1),
              kernel("volta_sgemm_128x64_nn", 20, 40, correlation=1),
              op("c10d::allreduce_", 30, 20, **{"External id": 2}),
              op("nccl:all_reduce", 32, 15, cat="user_annotation",
                 **{"External id": 3, "Input Dims": [[1000]], "Input type": ["float"]})]
    model = _load(write_trace(tmp_path / "rank0.pt.trace.json", events,
                              distributedInfo={"backend": "nccl", "rank": 0, "world_size": 1}))
    view = distributed({"rank0": model})
    step = _row(view.steps, worker="rank0")
    # computation 20..60 = 40; no communication, so no overlap; other 100 - 40 = 60
    assert (step.computation_us, step.communication_us, step.overlap_us, step.other_us) == (40, 0, 0, 60)
    call = _row(view.calls, backend_name="nccl:all_reduce")
    assert (call.on_device, call.transfer_measured, call.duration_us, call.size_bytes) == (False, False, 20, 4000)
    assert all(math.isnan(call[c]) for c in ("transfer_us", "synchronizing_us", "algbw_gbps", "busbw_gbps"))
    assert "no communication kernel" in call.no_bandwidth_reason
    row = _row(view.collectives, backend_name="nccl:all_reduce")
    assert (row.total_us, row.size_bytes) == (20, 4000) and math.isnan(row.transfer_us) and math.isnan(row.algbw_gbps)
    assert row.no_bandwidth_reason == call.no_bandwidth_reason
    assert _row(view.collective_time, worker="rank0").transfer_us == 0


def test_one_rank_group_with_a_kernel_has_transfer_time_but_no_bandwidth(tmp_path):
    rpc = op("record_param_comms", 31, 16, **{"External id": 4, "Collective name": "allreduce", "Group size": 1,
                                               "In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "Float"})
    view = distributed({"rank0": _gpu_worker(tmp_path, "rank0", 30, extra=[rpc])})
    call = _row(view.calls, backend_name="nccl:all_reduce")
    assert (call.group_size, call.transfer_measured, call.transfer_us) == (1, True, 30)
    assert math.isnan(call.algbw_gbps) and call.no_bandwidth_reason == "a group of one rank moves no data"


def _h100_one_rank_nccl():
    path = next((SAMPLES / "gpu_h100_eager_nccl").glob("*.pt.trace.json.gz"))
    return path, distributed({"worker0": _load(path)})


def test_one_rank_nccl_sample_overlap_as_hta_and_no_bandwidth():
    """The H100 sample's all_reduces ran on a one-rank NCCL group: the raw trace has no NCCL
    kernel, HTA's get_comm_comp_overlap finds no communication (NaN), and ours has none either,
    nor any transfer time or bandwidth (they were 10-35 GB/s from the host intervals)."""
    from .hta_reference import hta

    path, view = _h100_one_rank_nccl()
    raw = [e for e in raw_events(path) if e.get("cat") == "kernel"]
    assert raw and not any("nccl" in e["name"].lower() for e in raw)
    analysis, _ = hta(str(path))
    assert analysis.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].isna().all()
    assert (view.steps["communication_us"] == 0).all() and (view.steps["overlap_us"] == 0).all()
    assert len(view.calls) and view.calls["algbw_gbps"].isna().all() and view.calls["transfer_us"].isna().all()
    assert (view.calls["no_bandwidth_reason"] != "").all()


def test_one_rank_nccl_sample_job_collectives_have_no_bandwidth():
    job = tb_plugin.load_run(SAMPLES / "gpu_h100_eager_nccl").job(span=1)
    assert len(job.collectives) and job.collectives["algbw_gbps"].isna().all()
    assert job.collectives["transfer_us"].isna().all() and (job.collectives["no_bandwidth_reason"] != "").all()


def test_cpu_only_gloo_trace_overlaps_nothing_as_hta():
    """rank 34 of a 300-rank gloo job, CPU only, holding only gloo's work ops: HTA finds no
    computation/communication overlap (NaN: no kernels), ours none (0 us); gloo ran each
    all_reduce on its own thread, so its interval there is the transfer and has a bandwidth:
    the raw Input Dims' bytes over the raw duration."""
    from .hta_reference import hta

    path = next((SHARED_TRACES / "cpu_only_gloo").glob("*.json*"), None)
    if path is None:
        pytest.skip(f"{SHARED_TRACES / 'cpu_only_gloo'} is not available")
    analysis, _ = hta(str(path))
    assert analysis.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"].isna().all()
    view = distributed({"rank34": _load(path)})
    assert (view.steps["overlap_us"] == 0).all() and (view.steps["communication_us"] > 0).all()
    raw = sorted((e for e in raw_events(path) if e.get("name") == "gloo:all_reduce"), key=lambda e: e["ts"])
    calls = view.calls.sort_values("start_us")
    assert calls["transfer_measured"].all() and len(calls) == len(raw)
    for call, event in zip(calls.itertuples(), raw):
        size = sum(math.prod(d) * 4 for d, t in zip(event["args"]["Input Dims"], event["args"]["Input type"])
                   if t == "float")
        assert call.algbw_gbps == pytest.approx(size / event["dur"] / 1e3)


@pytest.mark.parametrize("where, run", [("shared", "sampled_128rank_job"), ("shared", "v100_ddp_nccl_memory"),
                                        ("samples", "gpu_a100_nccl")])
def test_overlap_share_equals_hta_on_nccl_traces(where, run):
    """Where communication kernels ran, the share of communication time that overlapped
    computation, over all steps, equals HTA's get_comm_comp_overlap (which rounds to 0.01%)."""
    from .hta_reference import hta

    folder = (SHARED_TRACES if where == "shared" else SAMPLES) / run
    path = next(iter(sorted(folder.glob("*.pt.trace.json.gz"))), None)
    if path is None:
        pytest.skip(f"{folder} is not available")
    analysis, _ = hta(str(path))
    (theirs,) = analysis.get_comm_comp_overlap(visualize=False)["comp_comm_overlap_pctg"]
    steps = distributed({"rank": _load(path)}).steps
    assert steps["communication_us"].sum() > 0
    assert 100 * steps["overlap_us"].sum() / steps["communication_us"].sum() == pytest.approx(theirs, abs=0.006)


# --- a job with a bad rank is still a job -------------------------------------------------------

def test_distributed_with_a_truncated_rank_answers_for_the_others(tmp_path):
    """The 4-rank mesh sample with worker2's trace cut in the middle: the view of the three
    others is the view of the job without worker2, and worker2 is named with its reason."""
    bad, without = job_with_a_truncated_rank(SAMPLES / "cpu_mesh_2d_gloo", tmp_path, "worker2")
    view, expected = tb_plugin.load_run(str(bad)).distributed(), tb_plugin.load_run(str(without)).distributed()
    for table in ("steps", "all_steps", "calls", "collectives", "collective_time", "groups", "fsdp", "devices"):
        pd.testing.assert_frame_equal(getattr(view, table), getattr(expected, table), obj=table)
    assert sorted(view.devices["worker"]) == ["worker0", "worker1", "worker3"]
    assert view.missing["worker"].tolist() == ["worker2"] and view.missing["reason"][0].startswith("truncated")
    coverage = view.coverage.iloc[0]
    assert (coverage["ranks"], coverage["ranks_total"]) == (3, 4)
    assert coverage["text"].startswith("Covers 3 of 4 ranks") and "worker2" in coverage["text"]
    # the same over HTTP, with no path of this machine in the reply
    _, client = make_client(tmp_path)
    answer = wait_route(client, f"{PREFIX}/distributed?run=bad&tables=coverage,missing,devices")
    assert answer.status_code == 200 and str(tmp_path) not in answer.get_data(as_text=True)
    body = answer.get_json()
    assert body["coverage"]["rows"] == [[3, 4, coverage["text"]]]
    assert body["missing"]["rows"] == [["worker2", 2, view.missing["reason"][0]]]
    alone = wait_route(client, f"{PREFIX}/distributed?run=without&table=steps&format=csv")
    assert wait_route(client, f"{PREFIX}/distributed?run=bad&table=steps&format=csv").get_data() == alone.get_data()
