"""The regression explanation: regressions planted into real traces, whose expected attribution
is worked out here from the edit itself (the time inserted, the events renamed), a trace
against itself (all noise), and hand-made operator trees matched on paper."""

import re
from functools import lru_cache

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.regression import explain

from .helpers import SAMPLES, kernel, op, raw_events, runtime, write_trace
from .plants import (in_steps, insert_gaps, launch_times, slower_data_loader, step_ranges, stretched_kernels,
                     stretched_step_change, write_gz)

A100 = next((SAMPLES / "gpu_a100_nccl").glob("*.pt.trace.json.gz"))
CPU_CNN = sorted((SAMPLES / "cpu_cnn").glob("*.pt.trace.json.gz"))[0]
COLLECTIVE = re.compile(r"nccl|c10d|gloo|record_param_comms", re.I)
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
# The edited traces are written with float64 epoch-µs timestamps, which hold about a
# nanosecond (the model reads the originals' digits exactly): events that touched may then
# overlap or part by a nanosecond, and sizes agree to a tenth of a µs (of hundreds).
NS = 0.1


@lru_cache(maxsize=None)
def _events(path):
    return tuple(raw_events(path))


def _load(path):
    return tb_plugin.load(path).model


def _row(table, cause):
    return table.set_index("cause").loc[cause]


def _assert_exact_split(view):
    table = view.explanation
    causes = table[table["cause"] != "step_time"]
    assert causes["mean_us_delta"].sum() == pytest.approx(_row(table, "step_time")["mean_us_delta"], abs=1e-6)
    compute = view.contributors[view.contributors["cause"] == "device_compute"]
    # the parts of device compute, the rows past the top ones summed in one, add up to it
    assert compute["delta_us"].sum() == pytest.approx(_row(table, "device_compute")["mean_us_delta"], abs=1e-6)


def test_stretched_kernel_family_is_device_compute_slower_kernels(tmp_path):
    events = list(_events(A100))
    family = "cutlass_80_tensorop_s1688gemm_256x64"
    edited, stretched = stretched_kernels(events, family, 1.2)
    assert len(stretched) > 10
    expected = stretched_step_change(events, stretched)
    assert expected > 100  # a regression worth finding: 20% of the family's time per step
    a, b = _load(A100), _load(write_gz(tmp_path, "b", edited))
    view = explain(a, b)
    table = view.explanation
    assert _row(table, "step_time")["mean_us_delta"] == pytest.approx(expected, abs=NS)
    assert _row(table, "device_compute")["mean_us_delta"] == pytest.approx(expected, abs=NS)
    others = table[~table["cause"].isin(["step_time", "device_compute"])]
    assert np.abs(others["mean_us_delta"]).max() < NS
    # 0.4% of a 220 ms step: under the default 5% threshold, a regression over a 0.1% one
    step_mean = _row(table, "step_time")["mean_us_a"]
    assert expected / step_mean < 0.05 and _row(table, "device_compute")["verdict"] == "noise"
    assert expected / step_mean > 0.001
    assert _row(explain(a, b, threshold_pct=0.1).explanation, "device_compute")["verdict"] == "regression"
    _assert_exact_split(view)
    top = view.contributors.iloc[0]
    assert (top["cause"], top["part"]) == ("device_compute", "slower_kernels") and family in top["name"]
    slower = view.contributors[(view.contributors["part"] == "slower_kernels")
                               & view.contributors["name"].str.contains(family)]
    assert slower["delta_us"].sum() == pytest.approx(expected, abs=NS)


def _quiet_launch_points(events):
    """Per step, the start of its first kernel launch that no device activity runs across and
    no collective operator encloses: where an inserted wait belongs to nobody else."""
    device = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in DEVICE_CATS]
    collectives = [(e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("cat") == "cpu_op" and COLLECTIVE.search(e.get("name", ""))]
    launches = sorted((e["ts"], e) for e in events if e.get("name") == "cudaLaunchKernel")
    points = []
    for start, end in step_ranges(events):
        for ts, e in launches:
            if start < ts < end and not any(s < ts < f for s, f in device) \
                    and not any(s <= ts <= f for s, f in collectives):
                points.append(e)
                break
    return points


def test_extra_blocking_sync_per_step_is_synchronisation(tmp_path):
    events = list(_events(A100))
    wait = 1500.0
    at = _quiet_launch_points(events)
    assert len(at) == len(step_ranges(events))
    edited = insert_gaps(events, [e["ts"] for e in at], [wait] * len(at))
    edited += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": e["pid"], "tid": e["tid"],
                "ts": e["ts"], "dur": wait, "args": {"correlation": 10_000_000 + n}} for n, e in enumerate(at)]
    view = explain(_load(A100), _load(write_gz(tmp_path, "b", edited)), threshold_pct=0.1)
    table = view.explanation
    assert _row(table, "step_time")["mean_us_delta"] == pytest.approx(wait, abs=NS)
    assert _row(table, "synchronisation")["mean_us_delta"] == pytest.approx(wait, abs=NS)
    assert np.abs(table[~table["cause"].isin(["step_time", "synchronisation"])]["mean_us_delta"]).max() < NS
    assert _row(table, "synchronisation")["verdict"] == "regression"
    _assert_exact_split(view)
    sync = view.contributors[view.contributors["cause"] == "synchronisation"].iloc[0]
    assert sync["name"] == "cudaDeviceSynchronize" and sync["delta_us"] == pytest.approx(wait, abs=NS)


def test_slower_data_loader_is_data_loading(tmp_path):
    events = list(_events(CPU_CNN))
    edited, expected = slower_data_loader(events, 400.0)
    assert expected > 0
    view = explain(_load(CPU_CNN), _load(write_gz(tmp_path, "b", edited)))
    table = view.explanation
    assert _row(table, "step_time")["mean_us_delta"] == pytest.approx(expected, abs=NS)
    assert _row(table, "data_loading")["mean_us_delta"] == pytest.approx(expected, abs=NS)
    assert np.abs(table[~table["cause"].isin(["step_time", "data_loading"])]["mean_us_delta"]).max() < NS
    _assert_exact_split(view)
    top = view.contributors[view.contributors["cause"] == "data_loading"].iloc[0]
    assert top["name"].startswith("enumerate(DataLoader)") and top["delta_us"] == pytest.approx(expected, abs=NS)


def test_operator_replaced_by_another_backends_kernel(tmp_path):
    """cuDNN's convolution becomes "MIOpen's": the operator and its gemm kernel renamed, the
    kernel 30% longer. The kernels meet at the operators' lowest common ancestor."""
    events = list(_events(A100))
    old_op, new_op = "aten::cudnn_convolution", "aten::miopen_convolution"
    conv_rows = [e for e in events if e.get("name") == old_op]
    assert conv_rows
    correlations = {e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                    and any(c["ts"] <= e["ts"] <= c["ts"] + c["dur"] and c["tid"] == e["tid"] for c in conv_rows)}
    replaced = {i: 0.3 * e["dur"] for i, e in enumerate(events)
                if e.get("cat") == "kernel" and e["args"].get("correlation") in correlations
                and "sm80_xmma_fprop_implicit_gemm" in e["name"]}
    assert replaced
    edited = insert_gaps(events, [events[i]["ts"] + events[i]["dur"] for i in replaced], list(replaced.values()),
                         own=replaced)
    for i in replaced:
        edited[i]["name"] = "miopen_conv_fwd_igemm"
    for e in edited:
        if e.get("name") == old_op:
            e["name"] = new_op
    launches = launch_times(events)
    in_step = in_steps([launches[events[i]["args"]["correlation"]] for i in replaced], events)
    expected = sum(np.array(list(replaced.values()))[in_step]) / len(step_ranges(events))
    view = explain(_load(A100), _load(write_gz(tmp_path, "b", edited)))
    table = view.explanation
    assert _row(table, "device_compute")["mean_us_delta"] == pytest.approx(expected, abs=NS)
    assert _row(table, "step_time")["mean_us_delta"] == pytest.approx(expected, abs=NS)
    _assert_exact_split(view)
    top = view.contributors.iloc[0]
    assert top["cause"] == "device_compute" and "-> miopen_conv_fwd_igemm" in top["name"]
    assert "sm80_xmma_fprop_implicit_gemm" in top["name"]
    # matched where the names meet: the convolution operator above both backends' operators
    assert top["operator"] not in (old_op, new_op) and top["operator"].startswith("aten::")
    replaced_rows = view.contributors[view.contributors["name"].str.contains("miopen_conv_fwd_igemm")]
    assert replaced_rows["delta_us"].sum() == pytest.approx(expected, abs=NS)
    tree = view.tree.set_index("node")
    removed = tree[(tree["name"] == old_op)]
    added = tree[(tree["name"] == new_op)]
    assert (removed["status"] == "removed").all() and (added["status"] == "added").all()
    assert set(removed["matched_at"]) == set(added["matched_at"])
    assert tree.loc[removed["matched_at"].iloc[0], "name"] == top["operator"]


def test_same_trace_twice_is_all_noise():
    model = _load(A100)
    view = explain(model, model)
    assert (view.explanation["verdict"] == "noise").all()
    assert (view.explanation["mean_us_delta"] == 0).all()
    assert len(view.contributors) == 0
    assert (view.tree["status"] == "matched").all() and (view.tree["host_total_us_delta"] == 0).all()
    steps = len(step_ranges(_events(A100)))
    assert (view.explanation[["steps_a", "steps_b"]] == steps).all().all()


def test_noise_rule_needs_threshold_and_spread():
    from tb_plugin.views.regression import verdicts

    # a 10 us rise on a 100 us step: 10% over a 5% threshold, medians 10 apart
    assert list(verdicts(np.array([10.0]), np.array([10.0]), np.array([1.0]), np.array([1.0]), 100.0, 5.0)) == ["regression"]
    # the same rise within one side's spread (2 x 6 > 10) is noise
    assert list(verdicts(np.array([10.0]), np.array([10.0]), np.array([1.0]), np.array([6.0]), 100.0, 5.0)) == ["noise"]
    # outside the spread but under the threshold is noise
    assert list(verdicts(np.array([3.0]), np.array([3.0]), np.array([0.0]), np.array([0.0]), 100.0, 5.0)) == ["noise"]
    assert list(verdicts(np.array([-10.0]), np.array([-10.0]), np.array([1.0]), np.array([1.0]), 100.0, 5.0)) == ["improvement"]


@pytest.fixture
def two_trees(tmp_path):
    # a, one step: fwd > aten::conv > cudnn_conv (kernel k1, 10 us), fwd > aten::add
    a = [op("ProfilerStep#1", 0, 100, cat="user_annotation"),
         op("fwd", 1, 90, cat="user_annotation"),
         op("aten::conv", 2, 40, **{"External id": 1}), op("cudnn_conv", 3, 30, **{"External id": 2}),
         runtime("cudaLaunchKernel", 4, 2, correlation=1, external_id=2), kernel("k1", 10, 10, correlation=1),
         op("aten::add", 50, 10)]
    # b, one step: fwd > aten::conv > miopen_conv (kernel k2, 16 us); no aten::add
    b = [op("ProfilerStep#7", 0, 100, cat="user_annotation"),
         op("fwd", 1, 90, cat="user_annotation"),
         op("aten::conv", 2, 40, **{"External id": 1}), op("miopen_conv", 3, 30, **{"External id": 2}),
         runtime("cudaLaunchKernel", 4, 2, correlation=1, external_id=2), kernel("k2", 10, 16, correlation=1)]
    return tuple(_load(write_trace(tmp_path / f"{n}.pt.trace.json", e)) for n, e in (("a", a), ("b", b)))


def test_tree_matched_by_path_and_lowest_common_ancestor(two_trees):
    view = explain(*two_trees)
    tree = view.tree.set_index("name")
    assert tree.loc["ProfilerStep#*", "status"] == "matched"
    assert tree.loc["aten::conv", "status"] == "matched"
    assert (tree.loc["cudnn_conv", "status"], tree.loc["miopen_conv", "status"]) == ("removed", "added")
    assert tree.loc["aten::add", "status"] == "removed"
    by_node = view.tree.set_index("node")
    conv = int(view.tree.loc[view.tree["name"] == "aten::conv", "node"].iloc[0])
    assert tree.loc["cudnn_conv", "matched_at"] == conv and tree.loc["miopen_conv", "matched_at"] == conv
    assert by_node.loc[conv, "device_total_us_a"] == 10 and by_node.loc[conv, "device_total_us_b"] == 16
    assert tree.loc["aten::add", "host_total_us_a"] == 10 and tree.loc["aten::add", "host_total_us_b"] == 0
    # the kernels, differently named, meet at aten::conv: 6 us slower, not one new and one gone
    compute = view.contributors[view.contributors["cause"] == "device_compute"]
    row = compute[compute["part"] == "slower_kernels"].iloc[0]
    assert (row["operator"], row["name"], row["delta_us"]) == ("aten::conv", "k1 -> k2", 6)
    assert not compute["part"].isin(["new_kernels", "vanished_kernels"]).any()


def test_kernels_of_other_names_match_only_on_the_same_input_shapes(tmp_path):
    """The same two trees, but the backends' operators ran on other input shapes: other work,
    so k1 vanished (-10 us) and k2 is new (+16 us), not one kernel 6 us slower."""
    def trace(name, backend, dims, kernel_name, dur):
        return _load(write_trace(tmp_path / f"{name}.pt.trace.json", [
            op("ProfilerStep#1", 0, 100, cat="user_annotation"),
            op("aten::conv", 2, 40, **{"External id": 1}),
            op(backend, 3, 30, **{"External id": 2, "Input Dims": dims}),
            runtime("cudaLaunchKernel", 4, 2, correlation=1, external_id=2),
            kernel(kernel_name, 10, dur, correlation=1)]))

    a = trace("a", "cudnn_conv", [[8, 3, 32, 32]], "k1", 10)
    b = trace("b", "miopen_conv", [[8, 3, 64, 64]], "k2", 16)
    compute = explain(a, b).contributors.set_index("part")
    assert (compute.loc["vanished_kernels", "name"], compute.loc["vanished_kernels", "delta_us"]) == ("k1", -10)
    assert (compute.loc["new_kernels", "name"], compute.loc["new_kernels", "delta_us"]) == ("k2", 16)
    assert "slower_kernels" not in compute.index
    # on the same shapes they are one kernel, 6 us slower
    b_same = trace("b_same", "miopen_conv", [[8, 3, 32, 32]], "k2", 16)
    row = explain(a, b_same).contributors.set_index("part").loc["slower_kernels"]
    assert (row["operator"], row["name"], row["delta_us"]) == ("aten::conv", "k1 -> k2", 6)


def test_tree_nests_operators_in_their_module_frames():
    """cpu_cnn was recorded with modules: its `nn.Module: X` frames are nodes of the matched
    tree, each as often and as long per step as the raw frames inside steps say, and every
    convolution's path runs through its Conv2d module."""
    first, second = sorted((SAMPLES / "cpu_cnn").glob("*.pt.trace.json.gz"))
    tree = explain(_load(first), _load(second)).tree
    events = list(_events(first))
    frames = [e for e in events if e.get("cat") == "python_function" and e.get("name", "").startswith("nn.Module: ")]
    inside = in_steps([e["ts"] for e in frames], events)
    steps = len(step_ranges(events))
    expected_calls, expected_us = {}, {}
    for e, kept in zip(frames, inside):
        if kept:
            expected_calls[e["name"]] = expected_calls.get(e["name"], 0) + 1 / steps
            expected_us[e["name"]] = expected_us.get(e["name"], 0.0) + e["dur"] / steps
    assert len(expected_calls) > 10
    modules = tree[tree["name"].str.startswith("nn.Module: ")].groupby("name")
    assert modules["calls_a"].sum().to_dict() == pytest.approx(expected_calls)
    assert modules["host_total_us_a"].sum().to_dict() == pytest.approx(expected_us, abs=NS)
    names, parent = tree["name"].to_numpy(), tree["parent"].to_numpy()

    def ancestors(node):
        while parent[node] >= 0:
            node = parent[node]
            yield names[node]

    convolutions = np.flatnonzero(names == "aten::conv2d")
    assert len(convolutions) >= 3
    for node in convolutions:
        path = list(ancestors(node))
        assert path[0].startswith("nn.Module: Conv2d_") and path[-1] == "ProfilerStep#*", path


def _layered_trace(path, gemm_us, other_us, layers=12, steps=2):
    """`steps` steps of `layers` operators layer0 .. layerN, each around an aten::mm launching
    one `gemm` kernel of `gemm_us`; layer0's aten::mm launches a second kernel, `other`, of
    `other_us`: one kernel name under `layers` operator paths, another under one."""
    events, corr = [], 0
    for step in range(steps):
        start = step * 1000
        events.append(op(f"ProfilerStep#{step}", start, 1000))
        for layer in range(layers):
            ts = start + 10 + 60 * layer
            corr += 1
            events += [op(f"layer{layer}", ts, 50), op("aten::mm", ts + 1, 48, **{"External id": corr}),
                       runtime("cudaLaunchKernel", ts + 2, 1, correlation=corr, external_id=corr),
                       kernel("gemm", ts + 4, gemm_us, correlation=corr)]
            if layer == 0:
                corr += 1
                events += [runtime("cudaLaunchKernel", ts + 3, 1, correlation=corr, external_id=corr - 1),
                           kernel("other", ts + 4 + gemm_us + 1, other_us, correlation=corr)]
    return _load(write_trace(path, events))


def test_a_kernel_under_many_module_paths_is_one_contributor(tmp_path):
    """B's gemm is 1 us slower under each of 12 layers (12 us per step) and `other` 5 us slower
    under one: gemm leads with its whole change, not 10 rows of 1 us and a lump of the rest,
    and its 12 paths, 1 us each, are in contributor_paths."""
    a = _layered_trace(tmp_path / "a.pt.trace.json", gemm_us=10, other_us=5)
    b = _layered_trace(tmp_path / "b.pt.trace.json", gemm_us=11, other_us=10)
    why = explain(a, b)
    slower = why.contributors[why.contributors["part"] == "slower_kernels"]
    assert list(slower["name"]) == ["gemm", "other"]
    gemm = slower.iloc[0]
    assert (gemm["delta_us"], gemm["paths"], gemm["calls_a"], gemm["calls_b"]) == (pytest.approx(12.0), 12, 12, 12)
    assert slower.iloc[1]["delta_us"] == pytest.approx(5.0) and slower.iloc[1]["paths"] == 1
    assert not why.contributors["name"].str.endswith(" others").any()
    paths = why.contributor_paths
    assert set(paths["name"]) == {"gemm"} and len(paths) == 12
    assert paths["delta_us"].to_numpy() == pytest.approx(np.ones(12))
    # each path is one operator of the matched tree, each under its own layer
    tree = why.tree.set_index("node")
    assert set(paths["operator"]) == {"aten::mm"}
    assert {tree.loc[tree.loc[n, "parent"], "name"] for n in paths["node"]} == {f"layer{i}" for i in range(12)}


def test_causes_are_worded_for_the_device():
    """On the CPU-only CNN no cause says the GPU waits; on the A100 the host's cause does."""
    cpu = explain(_load(CPU_CNN), _load(CPU_CNN)).explanation.set_index("cause")["label"]
    gpu = explain(_load(A100), _load(A100)).explanation.set_index("cause")["label"]
    assert not any("device" in label or "GPU" in label for label in cpu[["host_launch", "synchronisation"]])
    assert cpu["host_launch"] == "Operators on the CPU"
    assert "the device waits for the CPU" in gpu["host_launch"]
    # every cause in words, none an identifier
    assert not any("_" in label for label in [*cpu, *gpu])
