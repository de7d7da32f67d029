"""Diff view: a trace against itself (all deltas zero) and two hand-made traces whose
differences were worked out on paper."""

import re
from functools import lru_cache

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.common import step_breakdown
from tb_plugin.views.diff import KERNEL_DIFF_COLUMNS, OPERATOR_DIFF_COLUMNS, STEP_DIFF_COLUMNS, diff

from .helpers import SAMPLES, kernel, op, raw_events, runtime, shared_trace, write_trace

STEP = re.compile(r"^ProfilerStep#\d+$")


def _row(table, key, value):
    rows = table[table[key] == value]
    assert len(rows) == 1, f"expected one row {key}={value!r}:\n{table}"
    return rows.iloc[0]


@pytest.fixture
def two_traces(tmp_path):
    # a: two aten::mm (0..10, 20..40), each launching one gemm (7 and 9 us), and aten::add 45..50
    a = [
        op("aten::mm", 0, 10, **{"External id": 1}),
        runtime("cudaLaunchKernel", 2, 2, correlation=1, external_id=1),
        kernel("gemm", 5, 7, correlation=1),
        op("aten::mm", 20, 20, **{"External id": 2}),
        runtime("cudaLaunchKernel", 22, 2, correlation=2, external_id=2),
        kernel("gemm", 25, 9, correlation=2),
        op("aten::add", 45, 5, **{"External id": 3}),
    ]
    # b: one aten::mm (0..30) with an 11 us gemm, and aten::relu (35..39) with a 3 us kernel
    b = [
        op("aten::mm", 0, 30, **{"External id": 1}),
        runtime("cudaLaunchKernel", 2, 2, correlation=1, external_id=1),
        kernel("gemm", 5, 11, correlation=1),
        op("aten::relu", 35, 4, **{"External id": 2}),
        runtime("cudaLaunchKernel", 36, 1, correlation=2, external_id=2),
        kernel("relu_kernel", 38, 3, correlation=2),
    ]
    return tuple(tb_plugin.load(write_trace(tmp_path / f"{name}.pt.trace.json", events)).model
                 for name, events in (("a", a), ("b", b)))


def test_diff_columns_exact(two_traces):
    view = diff(*two_traces)
    assert list(view.operators.columns) == OPERATOR_DIFF_COLUMNS
    assert list(view.kernels.columns) == KERNEL_DIFF_COLUMNS
    assert list(view.steps.columns) == STEP_DIFF_COLUMNS
    # calls per step: a trace of 6 steps compares with one of 3
    assert view.operators["calls_delta"].dtype == np.float64 and view.kernels["calls_a"].dtype == np.float64
    assert view.operators["host_self_us_delta"].dtype == np.float64


def test_diff_operators_hand_made(two_traces):
    ops = diff(*two_traces).operators
    mm = _row(ops, "name", "aten::mm")
    assert (mm.calls_a, mm.calls_b, mm.calls_delta) == (2, 1, -1)
    assert (mm.host_total_us_a, mm.host_total_us_b, mm.host_total_us_delta) == (30, 30, 0)
    # self = wall time - launch time: (10 - 2) + (20 - 2) = 26 against 30 - 2 = 28
    assert (mm.host_self_us_a, mm.host_self_us_b, mm.host_self_us_delta) == (26, 28, 2)
    assert (mm.device_self_us_a, mm.device_self_us_b, mm.device_self_us_delta) == (16, 11, -5)
    assert (mm.device_total_us_a, mm.device_total_us_b, mm.device_total_us_delta) == (16, 11, -5)
    # only in a: zero on b's side
    add = _row(ops, "name", "aten::add")
    assert (add.calls_a, add.calls_b, add.calls_delta, add.host_total_us_delta) == (1, 0, -1, -5)
    # only in b: zero on a's side
    relu = _row(ops, "name", "aten::relu")
    assert (relu.calls_a, relu.calls_b, relu.host_self_us_b, relu.device_self_us_delta) == (0, 1, 3, 3)
    # largest device change first, then host change
    assert list(ops["name"]) == ["aten::mm", "aten::relu", "aten::add"]


def test_diff_kernels_hand_made(two_traces):
    kernels = diff(*two_traces).kernels
    gemm = _row(kernels, "name", "gemm")
    assert (gemm.calls_a, gemm.calls_b, gemm.calls_delta) == (2, 1, -1)
    assert (gemm.total_us_a, gemm.total_us_b, gemm.total_us_delta) == (16, 11, -5)
    relu = _row(kernels, "name", "relu_kernel")
    assert (relu.calls_a, relu.calls_b, relu.calls_delta, relu.total_us_a, relu.total_us_delta) == (0, 1, 1, 0, 3)
    assert len(kernels) == 2


def test_diff_steps_hand_made(two_traces):
    steps = diff(*two_traces).steps
    # no step markers: one step over the whole trace, 0..50 in a and 0..41 in b
    total = _row(steps, "category", "total")
    assert (total.mean_us_a, total.mean_us_b, total.mean_us_delta) == (50, 41, -9)
    # kernel time 7 + 9 against 11 + 3; launches 2 + 2 against 2 + 1
    k = _row(steps, "category", "kernel")
    assert (k.mean_us_a, k.mean_us_b, k.mean_us_delta) == (16, 14, -2)
    rt = _row(steps, "category", "runtime")
    assert (rt.mean_us_a, rt.mean_us_b, rt.mean_us_delta) == (4, 3, -1)
    # one row per breakdown category, plus total
    categories = [c[:-3] for c in step_breakdown(two_traces[0]).columns if c.endswith("_us")]
    assert list(steps["category"]) == categories


@lru_cache(maxsize=None)
def _a100():
    return tb_plugin.load(shared_trace("a100_nccl_collectives")).model


def test_diff_same_trace_all_deltas_zero():
    model = _a100()
    view = diff(model, model)
    for table in (view.operators, view.kernels, view.steps, view.explanation, view.tree):
        deltas = [c for c in table.columns if c.endswith("_delta")]
        assert len(table) and deltas
        assert (table[deltas].to_numpy() == 0).all()
    # the a and b sides are the trace's totals over its steps
    events = raw_events(shared_trace("a100_nccl_collectives"))
    steps = sum(1 for e in events if STEP.match(e.get("name", "")) and e.get("ph") == "X")
    kernels = [e["dur"] for e in events if e.get("cat") == "kernel"]
    assert view.kernels["calls_a"].sum() == pytest.approx(len(kernels) / steps)
    assert view.kernels["total_us_a"].sum() == pytest.approx(sum(kernels) / steps)


def test_diff_two_workers_of_gloo_run_kernel_free():
    run = tb_plugin.load_run(SAMPLES / "cpu_ddp_gloo")
    a, b = run.profile("worker0", 1).model, run.profile("worker1", 1).model
    view = diff(a, b)
    assert len(view.kernels) == 0 and list(view.kernels.columns) == KERNEL_DIFF_COLUMNS
    # both workers run the same program: same operators, same call counts
    assert (view.operators["calls_delta"] == 0).all()
    # CPU only: a step is its host ProfilerStep range, so the mean total is the raw mean duration
    mean_a, mean_b = (np.mean([e["dur"] for e in raw_events(_first_span(worker))
                               if STEP.match(e.get("name", "")) and e.get("cat") in ("cpu_op", "user_annotation")])
                      for worker in ("worker0", "worker1"))
    total = _row(view.steps, "category", "total")
    assert total.mean_us_a == pytest.approx(mean_a, abs=1e-6)
    assert total.mean_us_delta == pytest.approx(mean_b - mean_a, abs=1e-6)


def _first_span(worker):
    return sorted((SAMPLES / "cpu_ddp_gloo").glob(f"{worker}.*.pt.trace.json.gz"))[0]


def test_kernel_table_agrees_with_hta_trace_diff(tmp_path):
    """HTA 0.5.0's TraceDiff.compare_traces (device work of every iteration) on a control
    trace and a test trace with one kernel family 20% longer: per kernel name, our per-step
    calls and times times the step count are its counts and total durations, on both sides."""
    trace_diff = pytest.importorskip("hta.trace_diff", reason="HolisticTraceAnalysis is not installed")
    from .hta_reference import _env
    from .plants import stretched_kernels, write_gz
    control = next((SAMPLES / "gpu_a100_nccl").glob("*.pt.trace.json.gz"))
    edited, stretched = stretched_kernels(list(raw_events(control)), "cutlass_80_tensorop_s1688gemm", 1.2)
    assert stretched
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / control.name).symlink_to(control.resolve())
    test = write_gz(tmp_path / "test", "rank0", edited)
    with _env("HTA_DISABLE_NS_ROUNDING", "1"):
        labeled = [trace_diff.LabeledTrace(label, trace_dir=str(folder))
                   for label, folder in (("control", tmp_path / "control"),
                                         ("test", test.parent))]
    c, t = labeled
    reference = trace_diff.TraceDiff.compare_traces(c, t, control_iteration=c.iterations(),
                                                    test_iteration=t.iterations(),
                                                    device_type=trace_diff.DeviceType.GPU)
    steps = len(c.iterations())
    view = diff(tb_plugin.load(control).model, tb_plugin.load(test).model)
    ours = view.kernels.set_index("name")
    # HTA's device work includes memcpys and memsets, which the kernel table leaves out
    kernel_names = [n for n in reference.index if not n.startswith(("Memcpy", "Memset"))]
    assert sorted(kernel_names) == sorted(ours.index)
    for side, label in (("a", "control"), ("b", "test")):
        assert np.allclose(ours.loc[kernel_names, f"calls_{side}"] * steps, reference.loc[kernel_names, f"{label}_counts"])
        assert np.allclose(ours.loc[kernel_names, f"total_us_{side}"] * steps,
                           reference.loc[kernel_names, f"{label}_total_duration"], atol=1e-3)
    assert np.allclose(ours.loc[kernel_names, "total_us_delta"] * steps, reference.loc[kernel_names, "diff_duration"],
                       atol=1e-3)
    # the family grew by the time inserted (kernels on other streams running across its ends
    # grew too: the edit inserts time there)
    family = [n for n in kernel_names if "cutlass_80_tensorop_s1688gemm" in n]
    assert ours.loc[family, "total_us_delta"].sum() * steps >= sum(stretched.values()) - 1e-3


def test_traces_of_different_step_counts_compare_per_step(tmp_path):
    """The CNN's span against itself cut after its first step: 2 steps against 1, the same
    work per step, so calls per step agree where totals would halve."""
    from .plants import step_ranges, write_gz
    source = sorted((SAMPLES / "cpu_cnn").glob("*.pt.trace.json.gz"))[0]
    events = raw_events(source)
    (first_start, first_end), (second_start, _) = step_ranges(events)[:2]
    assert len(step_ranges(events)) == 2
    cut = [e for e in events if e.get("ph") == "M" or e.get("ts", 0) < second_start]
    a, b = tb_plugin.load(source).model, tb_plugin.load(write_gz(tmp_path, "cut", cut)).model
    view = diff(a, b)
    step = view.explanation.iloc[0]
    assert (step["cause"], step["steps_a"], step["steps_b"]) == ("step_time", 2, 1)
    # per step, from the raw events: each side's calls of aten::conv2d inside its steps over its steps
    def calls(evts, ranges):
        return sum(1 for e in evts if e.get("name") == "aten::conv2d" and any(s <= e["ts"] < f for s, f in ranges))
    per_step_a = calls(events, step_ranges(events)) / 2
    per_step_b = calls(cut, [(first_start, first_end)]) / 1
    assert per_step_a == per_step_b > 0
    conv = _row(view.operators, "name", "aten::conv2d")
    assert (conv.calls_a, conv.calls_b, conv.calls_delta) == (per_step_a, per_step_b, 0)


def _stepped_trace(path, steps, names, device=None):
    """`steps` steps of 100 us, each running the operators `names` (10 us apart); on `device`
    (a GPU name, listed in deviceProperties as id 0) each operator launches one 4 us kernel,
    without one the trace is CPU-only."""
    events, correlation = [], 0
    for step in range(steps):
        start = step * 100
        events.append(op(f"ProfilerStep#{step}", start, 100))
        for i, name in enumerate(names):
            ts = start + 5 + 10 * i
            events.append(op(name, ts, 8, **{"External id": correlation + 1}))
            if device:
                correlation += 1
                events += [runtime("cudaLaunchKernel", ts + 1, 1, correlation=correlation, external_id=correlation),
                           kernel(f"{name}_kernel", ts + 3, 4, correlation=correlation)]
    top = {"deviceProperties": [{"id": 0, "name": device, "totalGlobalMem": 2**34}]} if device else {}
    return tb_plugin.load(write_trace(path, events, **top)).model


CNN = ["aten::conv2d", "aten::relu", "aten::max_pool2d"]
TRANSFORMER = ["aten::linear", "aten::softmax", "aten::layer_norm", "aten::gelu"]


def test_a_clean_comparison_has_no_warnings(tmp_path):
    """The same program on the same GPU, 6 steps each: nothing to warn about."""
    a = _stepped_trace(tmp_path / "a.pt.trace.json", 6, CNN, "NVIDIA A100-SXM4-40GB")
    b = _stepped_trace(tmp_path / "b.pt.trace.json", 6, CNN, "NVIDIA A100-SXM4-40GB")
    assert diff(a, b).warnings.empty


def test_warnings_name_other_programs_devices_and_step_counts(tmp_path):
    """A CNN of 6 steps on an A100 against a transformer of 3 steps on an H100. The matched
    tree holds ProfilerStep#* (in both), A's 3 operators under it (removed) and B's 4 (added):
    1 node of 8 in both, 12%."""
    a = _stepped_trace(tmp_path / "a.pt.trace.json", 6, CNN, "NVIDIA A100-SXM4-40GB")
    b = _stepped_trace(tmp_path / "b.pt.trace.json", 3, TRANSFORMER, "NVIDIA H100 80GB HBM3")
    view = diff(a, b)
    said = dict(zip(view.warnings["kind"], view.warnings["warning"]))
    assert list(said) == ["programs", "devices", "step_counts", "few_steps"]
    assert said["programs"].startswith(f"Only {1 / 8:.0%} of the operator tree's nodes are found in both traces")
    assert "NVIDIA A100-SXM4-40GB" in said["devices"] and "NVIDIA H100 80GB HBM3" in said["devices"]
    assert said["step_counts"].startswith("A has 6 steps and B 3")
    # A's 6 steps are enough for the spread, B's 3 are not
    assert said["few_steps"].startswith("B has 3 steps: too few for a sharp verdict")


def test_a_cpu_only_trace_against_a_gpu_one_is_another_device(tmp_path):
    a = _stepped_trace(tmp_path / "a.pt.trace.json", 6, CNN)
    b = _stepped_trace(tmp_path / "b.pt.trace.json", 6, CNN, "Tesla V100-SXM2-16GB")
    said = dict(zip(*(diff(a, b).warnings[c] for c in ("kind", "warning"))))
    assert list(said) == ["devices"]
    assert said["devices"].startswith("A ran on the CPU alone and B on Tesla V100-SXM2-16GB")


def test_the_bundled_v100_resnet_against_the_h100_transformer_is_flagged():
    """The pair the issue met: the V100 ResNet's default B was an H100 transformer run."""
    resnet = tb_plugin.load(next((SAMPLES / "gpu_resnet50_v100").glob("*.pt.trace.json.gz"))).model
    h100 = tb_plugin.load(next((SAMPLES / "gpu_h100_eager_nccl").glob("*.pt.trace.json.gz"))).model
    kinds = set(diff(resnet, h100).warnings["kind"])
    assert {"programs", "devices"} <= kinds


def test_a_trace_that_does_not_name_its_device_is_not_another_device(tmp_path):
    """A trace rewritten without deviceProperties (as the tests' plants are) ran on a device
    it does not name: no warning of other hardware, which nothing shows."""
    a = _stepped_trace(tmp_path / "a.pt.trace.json", 6, CNN, "NVIDIA A100-SXM4-40GB")
    events = raw_events(tmp_path / "a.pt.trace.json")
    b = tb_plugin.load(write_trace(tmp_path / "b.pt.trace.json", list(events))).model
    assert len(b.devices) == 0 and len(b.kernels) == len(a.kernels)
    assert diff(a, b).warnings.empty


def test_two_short_traces_are_too_few_steps_on_both_sides(tmp_path):
    a = _stepped_trace(tmp_path / "a.pt.trace.json", 2, CNN)
    b = _stepped_trace(tmp_path / "b.pt.trace.json", 2, CNN)
    said = diff(a, b).warnings
    assert list(said["kind"]) == ["few_steps"]
    assert said["warning"].iloc[0].startswith("A and B have 2 steps each: too few for a sharp verdict")


def test_a_trace_without_step_markers_is_said_to_have_none(tmp_path):
    a = _stepped_trace(tmp_path / "a.pt.trace.json", 6, CNN)
    unmarked = [e for e in raw_events(tmp_path / "a.pt.trace.json") if not STEP.match(e.get("name", ""))]
    b = tb_plugin.load(write_trace(tmp_path / "b.pt.trace.json", unmarked)).model
    said = dict(zip(*(diff(a, b).warnings[c] for c in ("kind", "warning"))))
    assert said["few_steps"].startswith("B has no step markers (it counts as one step): too few for a sharp verdict")
    both = diff(b, b).warnings
    assert both["warning"].iloc[-1].startswith("A and B have no step markers (each counts as one step)")
