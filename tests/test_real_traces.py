"""The model of every real trace in ../shared/traces against facts computed independently
from the raw JSON with the standard library."""

import collections

import numpy as np
import pytest

import tb_plugin

from .helpers import SHARED_TRACES, raw_events, shared_trace

RUNS = ["a100_alexnet", "a100_nccl_collectives", "cpu_only_gloo", "old_format_inference", "resnet50_v100_2021",
        "rocm_mi250", "sampled_128rank_job", "triton_kernel", "v100_ddp_nccl_memory"]
KIND_OF_CAT = {
    "cpu_op": "ops", "operator": "ops", "user_annotation": "ops", "python_function": "python",
    "cuda_runtime": "runtime", "runtime": "runtime", "cuda_driver": "runtime",
    "kernel": "kernels", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset",
    "gpu_user_annotation": "gpu_annotations",
}


@pytest.fixture(scope="module", params=RUNS)
def loaded(request):
    path = shared_trace(request.param)
    return path, raw_events(path), tb_plugin.load(path)


def test_event_counts_match_raw_json(loaded):
    _, events, profile = loaded
    expected = collections.Counter(KIND_OF_CAT[e["cat"].lower()] for e in events
                                   if e.get("ph") == "X" and e.get("cat", "").lower() in KIND_OF_CAT)
    expected["memory"] = sum(1 for e in events if e.get("ph") == "i" and e.get("name") == "[memory]")
    expected["flows"] = sum(1 for e in events if e.get("ph") in ("s", "f", "t"))
    for kind in ("ops", "python", "runtime", "kernels", "memcpy", "memset", "gpu_annotations", "memory", "flows"):
        assert len(getattr(profile.model, kind)) == expected[kind], kind


def test_kernel_time_and_names_match_raw_sums(loaded):
    _, events, profile = loaded
    raw = [e for e in events if e.get("ph") == "X" and e.get("cat", "").lower() == "kernel"]
    k = profile.model.kernels
    assert k["dur"].sum() == pytest.approx(sum(e["dur"] for e in raw))
    assert collections.Counter(k["name"]) == collections.Counter(e["name"] for e in raw)


def test_device_activity_linked_by_correlation_like_raw(loaded):
    _, events, profile = loaded
    runtime_corr = {e["args"]["correlation"] for e in events if e.get("ph") == "X"
                    and KIND_OF_CAT.get(e.get("cat", "").lower()) == "runtime" and "correlation" in e.get("args", {})}
    raw_kernels = [e for e in events if e.get("ph") == "X" and e.get("cat", "").lower() == "kernel"]
    linked = sum(1 for e in raw_kernels if e["args"].get("correlation") in runtime_corr)
    assert int((profile.model.kernels["runtime"] >= 0).sum()) == linked


def test_steps_come_from_host_annotations_only(loaded):
    _, events, profile = loaded
    host = sorted({int(e["name"].split("#")[1]) for e in events if e.get("ph") == "X"
                   and str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat", "").lower() != "gpu_user_annotation"})
    assert profile.model.steps["step"].tolist() == host


def test_parents_contain_children(loaded):
    ops = loaded[2].model.ops
    child = np.flatnonzero(ops["parent"].to_numpy() >= 0)
    parent = ops["parent"].to_numpy()[child]
    ts, end = ops["ts"].to_numpy(), (ops["ts"] + ops["dur"]).to_numpy()
    assert (ts[parent] <= ts[child]).all() and (end[parent] >= end[child]).all()
    assert (ops["thread"].to_numpy()[parent] == ops["thread"].to_numpy()[child]).all()


def test_gpu_trace_specifics():
    m = tb_plugin.load(shared_trace("v100_ddp_nccl_memory")).model
    assert m.distributed["backend"] == "nccl"
    assert (m.memory["device_type"] == 1).sum() > 0
    # every allocator record happens inside some operator on its thread in this trace
    assert (m.memory["op"] >= 0).mean() > 0.95
    nccl = m.kernels["name"].str.contains("nccl", case=False)
    assert nccl.sum() > 1000


def test_old_trace_call_stacks_and_memory_without_addr():
    m = tb_plugin.load(shared_trace("resnet50_v100_2021")).model
    assert (m.ops["call_stack"] != "").sum() > 1000
    assert (m.memory["addr"] == -1).all()
    assert m.devices["numSms"].iloc[0] == 80


def test_collective_args_of_record_param_comms():
    m = tb_plugin.load(shared_trace("a100_nccl_collectives")).model
    comms = m.ops[m.ops["name"] == "record_param_comms"]
    assert len(comms) > 0
    assert (comms["collective_name"] != "").all()
    assert (comms["in_msg_nelems"] >= 0).all()


def test_triton_kernel_launched_by_driver_is_linked():
    m = tb_plugin.load(shared_trace("triton_kernel")).model
    launch = m.runtime[m.runtime["name"] == "cuLaunchKernel"]
    assert launch["cat"].tolist() == ["cuda_driver"]
    assert m.kernels["runtime"].tolist() == [launch.index[0]]
    assert m.kernels["op"][0] >= 0


def test_shared_traces_folder_documented():
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces not available")
    assert set(RUNS) <= {p.name for p in SHARED_TRACES.iterdir()}
