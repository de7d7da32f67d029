"""Overview, operator and kernel views: hand-made traces worked out on paper, the old
plugin's answers on the 2021 ResNet-50 trace (where definitions agree), invariants on all
real traces, and the HTTP routes."""

import json

import numpy as np
import pandas as pd
import pytest

import tb_plugin
from tb_plugin.views.common import (cuda_core_markers, is_tensor_core_kernel, name_mask, object_frame, tensor_core_markers,
                                    texts)

from .helpers import SAMPLES, SHARED_TRACES, kernel, op, raw_events, runtime, shared_trace, write_trace

REFERENCE = SHARED_TRACES / "reference_torch_tb_profiler_0.4.3"


def reference(span, route):
    path = REFERENCE / f"resnet50_num_workers_0_s{span}_{route}.json"
    if not path.exists():
        pytest.skip(f"{path} not available")
    return json.loads(path.read_text())


@pytest.fixture(scope="module", params=[1, 2], ids=["span1", "span2"])
def resnet(request):
    folder = SHARED_TRACES / "resnet50_v100_2021"
    if not folder.is_dir():
        pytest.skip("../shared/traces/resnet50_v100_2021 not available")
    files = sorted(folder.glob("*.pt.trace.json.gz"))
    return request.param, tb_plugin.load(files[request.param - 1])


# --- the old plugin's answers (torch-tb-profiler 0.4.3) on the same trace -------------------

def test_steps_match_old_plugin(resnet):
    span, profile = resnet
    ref = reference(span, "overview")["steps"]["rows"]
    ours = profile.steps()
    assert ours["step"].tolist() == [int(r[0]) for r in ref]
    # old columns: Kernel, Memcpy, Memset, Runtime, DataLoader, CPU Exec, Other (rounded µs)
    for column, position in [("kernel_us", 1), ("memcpy_us", 3), ("memset_us", 5), ("runtime_us", 7),
                             ("dataloader_us", 9), ("cpu_exec_us", 11), ("other_us", 13)]:
        np.testing.assert_allclose(ours[column], [r[position] for r in ref], atol=1.0, err_msg=column)


def test_gpu_summary_matches_old_plugin(resnet):
    span, profile = resnet
    ref = {d["title"]: d["value"] for d in reference(span, "overview")["gpu_metrics"]["data"]}
    gpu = profile.gpu_summary().iloc[0]
    assert gpu["name"] == ref["Name"] and gpu["compute_capability"] == ref["Compute Capability"]
    for ours, title in [("utilization_pct", "GPU Utilization"), ("est_sm_efficiency_pct", "Est. SM Efficiency"),
                        ("est_achieved_occupancy_pct", "Est. Achieved Occupancy"),
                        ("tensor_core_kernel_pct", "Kernel Time using Tensor Cores")]:
        assert gpu[ours] == pytest.approx(float(ref[title].split()[0]), abs=0.01), title


@pytest.mark.parametrize("group_by, route", [("name", "operation_table_op"), ("name_shape", "operation_table_opshape")])
def test_operators_match_old_plugin(resnet, group_by, route):
    span, profile = resnet
    ref = reference(span, route)["data"]
    keys = ["name"] if group_by == "name" else ["name", "input_shape"]
    ours = profile.operators(group_by).set_index(keys)
    assert len(ours) == len(ref)
    for r in ref:
        row = ours.loc[tuple(r[k] for k in keys) if len(keys) > 1 else r["name"]]
        assert row["calls"] == r["calls"]
        for column, old in [("device_self_us", "device_self_duration"), ("device_total_us", "device_total_duration"),
                            ("host_self_us", "host_self_duration"), ("host_total_us", "host_total_duration")]:
            assert row[column] == pytest.approx(r[old], abs=1.0), (r["name"], column)
        assert bool(row["tc_eligible"]) == (r["tc_eligible"] == "Yes"), r["name"]


def test_kernels_match_old_plugin(resnet):
    span, profile = resnet
    ref = reference(span, "kernel_table_kernel")["data"]["rows"]
    ours = profile.kernels().set_index("name")
    assert len(ours) == len(ref)
    for name, tc, calls, total, mean, maximum, minimum, blocks, occupancy in ref:
        row = ours.loc[name]
        assert (row["calls"], row["total_us"], row["max_us"], row["min_us"]) == (calls, total, maximum, minimum)
        assert row["mean_us"] == pytest.approx(mean, abs=1)
        assert row["mean_blocks_per_sm"] == pytest.approx(blocks, abs=0.01)
        assert row["mean_est_achieved_occupancy_pct"] == pytest.approx(occupancy, abs=0.01)
        assert bool(row["tensor_cores_used"]) == (tc == "Yes")


def test_kernels_by_name_and_operator_match_old_plugin(resnet):
    span, profile = resnet
    ref = reference(span, "kernel_table_nameop")["data"]["rows"]
    ours = profile.kernels("name_op")
    assert len(ours) == len(ref)
    index = {(r["name"], r["operator"], r["grid"], r["block"], r["registers_per_thread"], r["shared_memory"]): r
             for r in ours.to_dict("records")}
    for name, operator, grid, block, registers, shared, tc, eligible, calls, total, *_ in ref:
        row = index[(name, operator, grid, block, int(registers), int(shared))]
        assert (row["calls"], row["total_us"]) == (calls, total)


# --- hand-made traces ------------------------------------------------------------------------

def test_step_breakdown_priority_worked_on_paper(tmp_path):
    # step 1: host 0..100; its launch at 10 runs a kernel 90..130, so the step ends at 130.
    # step 2: host 130..200 (starts at the extended end of step 1).
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 20, cat="user_annotation"),
        op("aten::mm", 20, 30, **{"External id": 5}),
        runtime("cudaLaunchKernel", 25, 10, correlation=1, external_id=5),
        kernel("gemm", 90, 40, correlation=1),
        op("ProfilerStep#2", 130, 70, cat="user_annotation"),
        op("nccl:all_reduce", 150, 20, cat="user_annotation"),
        op("aten::add", 180, 10),
        # step 2 launches its memcpy (a zero-length call: no runtime time), so it is a step
        # with device work, not a trailing step cut short by the end of profiling
        runtime("cudaMemcpyAsync", 140, 0, correlation=99, external_id=-1),
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 140, "dur": 5,
         "args": {"device": 0, "stream": 7, "correlation": 99}},
    ])
    steps = tb_plugin.load(path).steps()
    assert steps["step"].tolist() == [1, 2]
    first, second = steps.to_dict("records")
    # kernel 90-130 (40); runtime 25-35 (10); dataloader 0-20 (20); cpu exec = aten::mm 20-50 minus
    # runtime 25-35 = 20; other = 130 - 90 = 40
    assert first == {"step": 1, "kernel_us": 40, "memcpy_us": 0, "memset_us": 0, "communication_us": 0,
                     "runtime_us": 10, "dataloader_us": 20, "cpu_exec_us": 20, "other_us": 40, "total_us": 130}
    # memcpy 140-145 (5); communication 150-170 (20); cpu exec 180-190 (10); other 70 - 35 = 35
    assert second == {"step": 2, "kernel_us": 0, "memcpy_us": 5, "memset_us": 0, "communication_us": 20,
                      "runtime_us": 0, "dataloader_us": 0, "cpu_exec_us": 10, "other_us": 35, "total_us": 70}


def test_no_steps_means_one_step_over_the_trace(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [op("aten::add", 10, 20), op("aten::mul", 50, 10)])
    steps = tb_plugin.load(path).steps()
    assert steps["step"].tolist() == [0]
    assert steps["total_us"][0] == 50 and steps["cpu_exec_us"][0] == 30 and steps["other_us"][0] == 20


def test_gpu_summary_worked_on_paper(tmp_path):
    # one step 0..100; kernels 10-30 (blocks/SM 0.5, occ 40%) and 20-60 (blocks/SM 2, occ 80%)
    # busy = 10..60 = 50 -> 50%; SM efficiency: 10-20 0.5, 20-30 min(0.5+1,1)=1, 30-60 1 -> 5+10+30 = 45%
    # occupancy weighted: (40*20 + 80*40) / 60 = 66.67
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        op("aten::mm", 1, 5, **{"External id": 1}),
        runtime("cudaLaunchKernel", 2, 1, correlation=1, external_id=1),
        runtime("cudaLaunchKernel", 3, 1, correlation=2, external_id=1),
        kernel("volta_h884gemm", 10, 20, correlation=1, **{"blocks per SM": 0.5, "est. achieved occupancy %": 40}),
        kernel("elementwise", 20, 40, correlation=2, **{"blocks per SM": 2.0, "est. achieved occupancy %": 80}),
    ], deviceProperties=[{"id": 0, "name": "Tesla V100", "totalGlobalMem": 1000, "computeMajor": 7, "computeMinor": 0}])
    summary = tb_plugin.load(path).gpu_summary()
    assert str(summary["memory_bytes"].dtype) == "Int64"  # a byte count, never a float
    gpu = summary.iloc[0]
    assert gpu["utilization_pct"] == pytest.approx(50)
    assert gpu["est_sm_efficiency_pct"] == pytest.approx(45)
    assert gpu["est_achieved_occupancy_pct"] == pytest.approx(200 / 3)
    assert gpu["tensor_core_kernel_pct"] == pytest.approx(100 * 20 / 60)
    assert (gpu["compute_capability"], gpu["memory_bytes"]) == ("7.0", 1000)


def test_operator_self_and_total_worked_on_paper(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("aten::linear", 0, 100, **{"External id": 1}),
        op("aten::addmm", 10, 60, **{"External id": 2}),
        runtime("cudaLaunchKernel", 20, 10, correlation=1, external_id=2),
        kernel("gemm", 40, 25, correlation=1),
        op("aten::sum", 80, 10, **{"External id": 3}), op("aten::sum", 81, 8, **{"External id": 4}),  # dup node
        runtime("cudaLaunchKernel", 82, 2, correlation=2, external_id=4),
        kernel("reduce", 90, 5, correlation=2),
    ])
    ops = tb_plugin.load(path).operators().set_index("name")
    assert ops.loc["aten::linear", ["host_total_us", "host_self_us", "device_self_us", "device_total_us"]].tolist() == [100, 30, 0, 30]
    assert ops.loc["aten::addmm", ["host_total_us", "host_self_us", "device_self_us", "device_total_us"]].tolist() == [60, 50, 25, 25]
    # the inner aten::sum merges into the outer one (torch's duplicate-node rule): one call
    assert ops.loc["aten::sum", ["calls", "host_total_us", "host_self_us", "device_self_us"]].tolist() == [1, 10, 8, 5]
    assert bool(ops.loc["aten::linear", "tc_eligible"]) and not bool(ops.loc["aten::sum", "tc_eligible"])


def test_operator_stacks_from_python_functions(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        {"ph": "X", "cat": "python_function", "name": "train.py(10): main", "pid": 1, "tid": 1, "ts": 0, "dur": 100,
         "args": {"Python id": 1, "Python parent id": 0}},
        {"ph": "X", "cat": "python_function", "name": "model.py(42): forward", "pid": 1, "tid": 1, "ts": 5, "dur": 50,
         "args": {"Python id": 2, "Python parent id": 1}},
        op("aten::relu", 10, 5), op("aten::relu", 60, 5),
    ])
    p = tb_plugin.load(path)
    assert bool(p.operators().set_index("name").loc["aten::relu", "has_call_stack"])
    stacks = p.operator_stacks("aten::relu")
    assert [s["calls"] for s in stacks] == [1, 1]
    frames = {tuple(f["text"] for f in s["frames"]) for s in stacks}
    assert frames == {("model.py(42): forward", "train.py(10): main"), ("train.py(10): main",)}
    first = [s for s in stacks if len(s["frames"]) == 2][0]["frames"][0]
    assert (first["file"], first["line"], first["function"]) == ("model.py", 42, "forward")


@pytest.mark.parametrize("marker", tensor_core_markers())
def test_each_tensor_core_marker_is_recognised(marker):
    assert is_tensor_core_kernel(f"void sm_xx_kernel_{marker}_tn_align8(Params)")


@pytest.mark.parametrize("marker", cuda_core_markers())
def test_each_cuda_core_marker_overrides_a_tensor_core_marker(marker):
    assert not is_tensor_core_kernel(f"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_{marker}"
                                     "_aligna4_alignc4_execute_kernel__5x_cublas")


def test_xmma_kernels_on_cuda_cores_in_the_h100_sample():
    """The H100 sample's fp32 GEMMs are cuBLAS xmma kernels on the CUDA cores (`ffma`): no
    Tensor Core time; its memory-efficient attention kernels are CUTLASS SIMT, also none. An
    xmma kernel naming its MMA shape is a Tensor Core one."""
    path, = (SAMPLES / "gpu_h100_compiled").glob("*.pt.trace.json.gz")
    names = {e["name"] for e in raw_events(path) if e.get("cat") == "kernel"}
    xmma = [n for n in names if "xmma" in n]
    assert xmma and all("_ffma_" in n for n in xmma)
    assert not any(is_tensor_core_kernel(n) for n in names)
    assert tb_plugin.load(path).tensor_core_share()["tensor_cores_pct"] == 0
    assert is_tensor_core_kernel("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1"
                                 "_tensor16x8x16_kernel")


def test_plain_kernels_are_not_tensor_core():
    for name in ("void at::native::vectorized_elementwise_kernel<4>", "volta_sgemm_128x64_nn", "ncclKernel_AllReduce"):
        assert not is_tensor_core_kernel(name)


def test_dataloader_recommendation_numbers(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 60, cat="user_annotation"),
    ])
    items = {r["id"]: r for r in tb_plugin.load(path).recommendations()}
    assert items["input_pipeline_bound"]["numbers"]["dataloader_share"] == pytest.approx(0.6)

    assert items["input_pipeline_bound"]["docs"] == "https://pytorch.org/docs/stable/data.html#multi-process-data-loading"


def test_recommendations_name_their_panel_their_docs_and_the_kernels_they_quote():
    """The H100 compiled sample: each piece of evidence names the panel of its view that
    shows it, the fusion candidate's kernels (quoted in full in its text) are listed for the
    page to shorten, and every recommendation links the PyTorch documentation of its fix."""
    (path,) = (SAMPLES / "gpu_h100_compiled").glob("*.pt.trace.json.gz")
    items = {r["id"]: r for r in tb_plugin.load(path).recommendations()}
    panels = {i: r["evidence"].get("panel") for i, r in items.items() if r["evidence"]}
    assert panels == {"launch_bound": "launches", "host_bound": "idle", "fusion_candidate": "sequences"}
    fusion = items["fusion_candidate"]
    assert len(fusion["evidence"]["kernels"]) == 3
    assert f"the kernel sequence {' | '.join(fusion['evidence']['kernels'])} (launched by" in fusion["text"]
    assert all(r["docs"].startswith("https://pytorch.org/") for r in items.values())


# --- invariants on every real trace -----------------------------------------------------------

@pytest.mark.parametrize("run", ["a100_alexnet", "a100_nccl_collectives", "cpu_only_gloo", "old_format_inference",
                                 "rocm_mi250", "sampled_128rank_job", "triton_kernel", "v100_ddp_nccl_memory"])
def test_view_invariants_on_real_traces(run):
    p = tb_plugin.load(shared_trace(run))
    steps = p.steps()
    parts = steps.drop(columns=["step", "total_us"]).sum(axis=1)
    np.testing.assert_allclose(parts, steps["total_us"], rtol=1e-9, atol=1e-6)
    ops = p.operators()
    assert (ops["host_self_us"] <= ops["host_total_us"] + 1e-6).all()
    assert (ops["device_self_us"] <= ops["device_total_us"] + 1e-6).all()
    kernels = p.kernels()
    # every kernel counted once, including those launched outside operators
    assert kernels["calls"].sum() == len(p.model.kernels)
    assert kernels["total_us"].sum() == pytest.approx(p.model.kernels["dur"].sum())
    # device self time sums to the device time that operators launched
    dev = p.model.kernels
    launched = dev["dur"][dev["op"] >= 0].sum() + p.model.memcpy["dur"][p.model.memcpy["op"] >= 0].sum() \
        + p.model.memset["dur"][p.model.memset["op"] >= 0].sum()
    from tb_plugin.views.common import operator_tree
    assert operator_tree(p.model)["device_self_us"].sum() == pytest.approx(launched)
    for gpu in p.gpu_summary().to_dict("records"):
        assert 0 <= gpu["utilization_pct"] <= 100
        assert gpu["est_sm_efficiency_pct"] != gpu["est_sm_efficiency_pct"] or gpu["est_sm_efficiency_pct"] <= gpu["utilization_pct"] + 1e-9


def test_triton_kernel_outside_operators_still_counted():
    p = tb_plugin.load(shared_trace("triton_kernel"))
    table = p.kernels("name_op")
    assert table["calls"].sum() == 1 and table["name"][0].startswith("triton_")


def test_kernel_launched_directly_in_a_step_has_no_operator_and_one_row(tmp_path):
    """A launch inside ProfilerStep#N but in no operator (a Triton kernel through the driver,
    say) is one row for all steps, operator "", not a row per step; a user annotation around
    a launch is still named."""
    events = []
    for step, t0 in ((1, 0), (2, 100)):
        events += [op(f"ProfilerStep#{step}", t0, 90, cat="user_annotation"),
                   runtime("cuLaunchKernel", t0 + 10, 2, correlation=step, external_id=-1, cat="cuda_driver"),
                   kernel("triton_k", t0 + 20, 5, correlation=step),
                   op("## fwd ##", t0 + 40, 30, cat="user_annotation"),
                   runtime("cudaLaunchKernel", t0 + 50, 2, correlation=10 + step, external_id=-1),
                   kernel("k_fwd", t0 + 60, 4, correlation=10 + step)]
    table = tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events)).kernels("name_op")
    rows = {(r["name"], r["operator"]): (r["calls"], r["total_us"]) for r in table.to_dict("records")}
    assert rows == {("triton_k", ""): (2, 10.0), ("k_fwd", "## fwd ##"): (2, 8.0)}


def test_texts_reads_a_categorical_as_astype_str_does_and_keeps_python_strings():
    names = pd.Series(pd.Categorical.from_codes([2, 0, -1, 1, 2], categories=pd.Index(["a", "bb", "c"], dtype=object)))
    assert texts(names).tolist() == ["c", "a", "", "bb", "c"]  # a missing value is "", as the model writes it
    assert texts(names, np.array([4, 1])).tolist() == ["c", "a"]
    assert texts(names, np.array([True, False, False, True, False])).tolist() == ["c", "bb"]
    assert texts(pd.Series(["x", "y"], dtype=object), [1]).tolist() == ["y"]
    present = names[names.cat.codes >= 0]
    assert texts(present).tolist() == present.astype(str).tolist()
    frame = object_frame({"kind": "kernel", "name": texts(names), "dur": np.arange(5.0)})
    assert [str(t) for t in frame.dtypes] == ["object", "object", "float64"]  # not pandas 3's Arrow strings
    assert frame["kind"].tolist() == ["kernel"] * 5 and frame["name"].tolist() == ["c", "a", "", "bb", "c"]


def test_name_mask_is_false_for_rows_without_a_name():
    # A null name is categorical code -1: it must not take the verdict of the last category.
    names = pd.Series(["a", None, "b", None], dtype="category")
    assert name_mask(names, lambda name: name == "b").tolist() == [False, False, True, False]
    assert name_mask(pd.Series([None, None], dtype="category"), lambda name: True).tolist() == [False, False]
    assert name_mask(pd.Series([], dtype="category"), lambda name: True).tolist() == []
