"""The scenarios of torch-tb-profiler's own test suite (kineto `tb_plugin/test/test_profiler.py`,
`test_ranges.py`), replayed on our views.

Each test builds the same tiny trace as the old suite (the events are the facts: names, times,
External ids, correlations, args) and asserts numbers worked out by hand from those events. Where
our definition differs from the old release's answer, the test asserts ours and its docstring
says what the old plugin answered and why we differ (METRICS.md, or the view's docstring).

The traces use the 2021 event spelling the old suite used: categories `Operator`, `Runtime`,
`Kernel`, `Memcpy`, `Memset`, string thread ids, `External id` on host ops and `external id` on
runtime calls and device activity.
"""

import json

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views import timeline
from tb_plugin.views.intervals import exclusive_time, union_length

from .helpers import shared_trace

NLL_KERNEL = "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>"
GEMM_KERNEL = "void gemmSN_TN_kernel_64addr"
TO_SHAPE = [[2, 8, 5], [], [], [], [], [], [], []]
NLL_SHAPE = [[], [32, 1000], [32], [], [], [], []]


# --- trace builders -----------------------------------------------------------------------------

def host(name, ts, dur, ext, tid="123", dims=None, cat="Operator", pid=13721, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": {"Input Dims": [] if dims is None else dims, "External id": ext, **args}}


def launch(ts, dur, corr, ext, tid="456", name="cudaLaunchKernel"):
    return {"ph": "X", "cat": "Runtime", "name": name, "pid": 13721, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "external id": ext}}


def device(ts, dur, corr, ext, name=NLL_KERNEL, cat="Kernel", stream=7, dev=0, **args):
    extra = {"device": dev} if cat == "Kernel" else {"stream": stream}
    return {"ph": "X", "cat": cat, "name": name, "pid": dev, "tid": f"stream {stream}", "ts": ts, "dur": dur,
            "args": {"correlation": corr, "external id": ext, **extra, **args}}


def mem(ts, nbytes, addr, device_type=1, tid=123, **totals):
    args = {"Device Type": device_type, "Device Id": 0 if device_type == 1 else -1, "Addr": addr, "Bytes": nbytes}
    args.update({{"allocated": "Total Allocated", "reserved": "Total Reserved"}[k]: v for k, v in totals.items()})
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": tid, "ts": ts, "args": args}


def write(folder, events, worker="worker0"):
    path = folder / f"{worker}.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def load(tmp_path, events):
    return tb_plugin.load(str(write(tmp_path, events)))


def row(table, column="name", **match):
    """The one row of `table` whose `column` equals the value in `match` (and other columns too)."""
    mask = np.ones(len(table), dtype=bool)
    for key, value in match.items():
        mask &= (table[key] == value).to_numpy()
    hits = table[mask]
    assert len(hits) == 1, f"{match}: {len(hits)} rows in\n{table}"
    return hits.iloc[0]


def steps_as_dicts(profile):
    """Step rows as {column: value} with the time columns only."""
    return profile.steps().set_index("step").to_dict("index")


# --- 1. every event category in one step -------------------------------------------------------

ALL_CATEGORIES = [
    host("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 180, 2),
    host("aten::to", 200, 60, 3, dims=TO_SHAPE),
    host("aten::nll_loss_backward", 340, 70, 4, tid="456", dims=NLL_SHAPE),
    host("ProfilerStep#1", 50, 400, 1),
    device(405, 10, 334, 4, name="Memcpy HtoD (Pageable -> Device)", cat="Memcpy"),
    launch(360, 20, 334, 4, name="cudaMemcpyAsync"),
    device(420, 5, 40344, 4, name="Memset (Device)", cat="Memset"),
    launch(390, 10, 40344, 4, name="cudaMemsetAsync"),
    device(430, 15, 40348, 4),
    launch(405, 5, 40348, 4),
]


def test_all_categories_step_breakdown(tmp_path):
    """Kernel, memcpy and memset launched by nll_loss_backward, a DataLoader range holding
    aten::to, all inside ProfilerStep#1 [50, 450]: each category keeps only the time no higher
    one claimed. Runtime 35 µs loses [405, 410] to the memcpy; aten::to lies inside the
    DataLoader range; nll_loss_backward [340, 410] keeps 70 - 20 - 10 - 5."""
    step = steps_as_dicts(load(tmp_path, ALL_CATEGORIES))
    assert list(step) == [1]
    assert step[1] == {"kernel_us": 15, "memcpy_us": 10, "memset_us": 5, "communication_us": 0, "runtime_us": 30,
                       "dataloader_us": 180, "cpu_exec_us": 35, "other_us": 125, "total_us": 400}


@pytest.mark.parametrize("group_by", ["name", "name_shape"])
def test_all_categories_operators(tmp_path, group_by):
    """The step and DataLoader ranges are not operators; nll_loss_backward's device time is its
    kernel, memcpy and memset (15 + 10 + 5); its host self time excludes its three runtime calls."""
    table = load(tmp_path, ALL_CATEGORIES).operators(group_by=group_by)
    assert sorted(table["name"]) == ["aten::nll_loss_backward", "aten::to"]
    to = row(table, name="aten::to")
    nll = row(table, name="aten::nll_loss_backward")
    assert (to["calls"], to["host_total_us"], to["host_self_us"], to["device_total_us"], to["device_self_us"]) == \
        (1, 60, 60, 0, 0)
    assert (nll["calls"], nll["host_total_us"], nll["host_self_us"], nll["device_total_us"], nll["device_self_us"]) \
        == (1, 70, 70 - 20 - 10 - 5, 30, 30)
    if group_by == "name_shape":
        assert json.loads(to["input_shape"]) == TO_SHAPE
        assert json.loads(nll["input_shape"]) == NLL_SHAPE


def test_all_categories_kernels(tmp_path):
    """One kernel: by name and by (name, launching op, launch configuration)."""
    profile = load(tmp_path, ALL_CATEGORIES)
    by_name = profile.kernels(group_by="name")
    assert len(by_name) == 1
    k = by_name.iloc[0]
    assert (k["name"], k["calls"], k["total_us"], k["mean_us"], k["min_us"], k["max_us"]) == \
        (NLL_KERNEL, 1, 15, 15, 15, 15)
    by_op = profile.kernels(group_by="name_op")
    assert len(by_op) == 1
    assert (by_op.iloc[0]["operator"], by_op.iloc[0]["calls"], by_op.iloc[0]["total_us"]) == \
        ("aten::nll_loss_backward", 1, 15)


# --- 2. linking launches to operators -----------------------------------------------------------

def test_external_id_decides_the_launching_op(tmp_path):
    """Four zero-length launches at the start (120) and the end (190) of aten::mm, which nests in
    aten::mat_mul: time containment cannot tell child from sibling, the External id can.
    Kernels 5 and 7 belong to mm, 6 and 8 to mat_mul."""
    events = [
        host("aten::mat_mul", 100, 100, 2, tid="456"), host("aten::mm", 120, 70, 4, tid="456"),
        device(130, 5, 334, 4), launch(120, 0, 334, 4),
        device(130, 6, 335, 2), launch(120, 0, 335, 2),
        device(130, 7, 336, 4), launch(190, 0, 336, 4),
        device(130, 8, 337, 2), launch(190, 0, 337, 2),
    ]
    table = load(tmp_path, events).operators()
    mat_mul, mm = row(table, name="aten::mat_mul"), row(table, name="aten::mm")
    assert (mat_mul["device_total_us"], mat_mul["device_self_us"]) == (5 + 6 + 7 + 8, 6 + 8)
    assert (mm["device_total_us"], mm["device_self_us"]) == (5 + 7, 5 + 7)


@pytest.mark.parametrize("mm_ts", [100, 130], ids=["same_start", "same_end"])
def test_nested_ops_sharing_an_edge(tmp_path, mm_ts):
    """aten::mm [mm_ts, mm_ts + 70] inside aten::mat_mul [100, 200], sharing its start or its
    end, is still its child: mat_mul's self time is 100 - 70."""
    events = [host("aten::mat_mul", 100, 100, 2, tid="456"), host("aten::mm", mm_ts, 70, 4, tid="456")]
    table = load(tmp_path, events).operators()
    assert row(table, name="aten::mat_mul")["host_self_us"] == 30
    assert row(table, name="aten::mm")["host_self_us"] == 70


def test_same_name_chain_is_one_operator(tmp_path):
    """aten::mm > aten::mm > aten::mm, each the only child of the one above: torch's duplicate
    node rule merges them into the outermost, which gets the innermost's launch and kernel.
    Host self = 100 minus the 20 µs launch (the merged children are not children any more)."""
    events = [
        host("aten::mm", 100, 100, 2, tid="456"), host("aten::mm", 110, 80, 3, tid="456"),
        host("aten::mm", 120, 60, 4, tid="456"),
        launch(130, 20, 335, 4), device(220, 8, 335, 4, name=GEMM_KERNEL),
    ]
    table = load(tmp_path, events).operators()
    assert len(table) == 1
    mm = table.iloc[0]
    assert (mm["calls"], mm["host_total_us"], mm["host_self_us"], mm["device_self_us"], mm["device_total_us"]) == \
        (1, 100, 80, 8, 8)


@pytest.mark.parametrize("ext", [0, 335], ids=["external_id_0", "external_id_of_no_op"])
def test_launch_outside_any_operator(tmp_path, ext):
    """A launch on another thread than aten::mm, with External id 0 (old traces) or one no op
    carries: its kernel belongs to no operator, yet it is a kernel of the trace."""
    events = [host("aten::mm", 100, 100, 2, tid="123"), launch(130, 20, 335, ext),
              device(220, 8, 335, ext, name=GEMM_KERNEL)]
    profile = load(tmp_path, events)
    mm = row(profile.operators(), name="aten::mm")
    assert (mm["device_total_us"], mm["device_self_us"]) == (0, 0)
    k = profile.kernels(group_by="name_op")
    assert (len(k), k.iloc[0]["operator"], k.iloc[0]["calls"], k.iloc[0]["total_us"]) == (1, "", 1, 8)


def test_launch_directly_in_profiler_step(tmp_path):
    """A launch whose External id is the ProfilerStep's: the step is no operator (the table is
    empty); the breakdown has the kernel and the runtime call, no CPU Exec."""
    events = [host("ProfilerStep#1", 100, 300, 2, tid="456"), launch(130, 20, 335, 2),
              device(220, 8, 335, 2, name=GEMM_KERNEL)]
    profile = load(tmp_path, events)
    step = steps_as_dicts(profile)[1]
    assert (step["kernel_us"], step["runtime_us"], step["cpu_exec_us"], step["other_us"], step["total_us"]) == \
        (8, 20, 0, 300 - 8 - 20, 300)
    assert len(profile.operators()) == 0
    assert len(profile.operators(group_by="name_shape")) == 0
    k = profile.kernels(group_by="name_op")
    assert (len(k), k.iloc[0]["calls"], k.iloc[0]["total_us"]) == (1, 1, 8)


def test_one_launch_many_kernels(tmp_path):
    """cudaLaunchCooperativeKernelMultiDevice starts one kernel per stream with the same
    correlation id: both belong to the launching op."""
    name = "ncclBroadcastRingLLKernel_copy_i8(ncclColl)"
    events = [
        host("Broadcast", 100, 300, 2, tid="456"),
        launch(130, 20, 335, 2, name="cudaLaunchCooperativeKernelMultiDevice"),
        device(160, 120318, 335, 2, name=name, stream=13, context=1),
        device(170, 132800, 335, 2, name=name, stream=22, context=2),
    ]
    profile = load(tmp_path, events)
    assert row(profile.operators(), name="Broadcast")["device_total_us"] == 120318 + 132800
    by_name = profile.kernels()
    assert (len(by_name), by_name.iloc[0]["calls"], by_name.iloc[0]["total_us"]) == (1, 2, 120318 + 132800)
    by_op = profile.kernels(group_by="name_op")
    assert (len(by_op), by_op.iloc[0]["operator"]) == (1, "Broadcast")


# --- 3. steps ------------------------------------------------------------------------------------

def test_no_profiler_step_is_one_step(tmp_path):
    """Without ProfilerStep markers the trace is one step (number 0) from the first op (100) to
    the end of the kernel (420). CPU Exec: aten::to 60 plus nll_loss_backward before its launch
    (10); Other is the gap 160..300 between them."""
    events = [
        host("aten::to", 100, 60, 3, dims=TO_SHAPE),
        host("aten::nll_loss_backward", 300, 70, 4, tid="456", dims=NLL_SHAPE),
        device(320, 100, 40348, 4), launch(310, 20, 40348, 4),
    ]
    profile = load(tmp_path, events)
    assert steps_as_dicts(profile) == {0: {
        "kernel_us": 100, "memcpy_us": 0, "memset_us": 0, "communication_us": 0, "runtime_us": 10,
        "dataloader_us": 0, "cpu_exec_us": 60 + 10, "other_us": 300 - 160, "total_us": 420 - 100}}
    table = profile.operators(group_by="name_shape")
    nll = row(table, name="aten::nll_loss_backward")
    assert json.loads(nll["input_shape"]) == NLL_SHAPE
    assert (nll["calls"], nll["host_total_us"], nll["host_self_us"], nll["device_total_us"], nll["device_self_us"]) \
        == (1, 70, 50, 100, 100)
    to = row(table, name="aten::to")
    assert (to["host_total_us"], to["host_self_us"], to["device_total_us"]) == (60, 60, 0)
    k = profile.kernels(group_by="name_op").iloc[0]
    assert (k["operator"], k["calls"], k["total_us"], k["min_us"], k["max_us"]) == \
        ("aten::nll_loss_backward", 1, 100, 100, 100)


TWO_STEPS = [
    host("ProfilerStep#1", 100, 200, 1), host("aten::to", 200, 60, 2, dims=TO_SHAPE),
    host("ProfilerStep#2", 350, 150, 3), host("aten::mm", 360, 50, 4),
    device(280, 40, 334, 2, name="Memcpy HtoD (Pageable -> Device)", cat="Memcpy"),
    launch(250, 5, 334, 2, tid="123", name="cudaMemcpyAsync"),
    device(410, 200, 40348, 4), launch(400, 5, 40348, 4, tid="123"),
]


def test_steps_end_with_the_device_work_they_launched(tmp_path):
    """Step 1 [100, 300] launched a memcpy ending at 320, step 2 [350, 500] a kernel ending at
    610: each step ends with its device work."""
    profile = load(tmp_path, TWO_STEPS)
    steps = steps_as_dicts(profile)
    assert steps[1] == {"kernel_us": 0, "memcpy_us": 40, "memset_us": 0, "communication_us": 0, "runtime_us": 5,
                        "dataloader_us": 0, "cpu_exec_us": 55, "other_us": 200 - 60 - 20, "total_us": 320 - 100}
    assert steps[2] == {"kernel_us": 200, "memcpy_us": 0, "memset_us": 0, "communication_us": 0, "runtime_us": 5,
                        "dataloader_us": 0, "cpu_exec_us": 45, "other_us": 10, "total_us": 610 - 350}
    assert profile.steps()["total_us"].mean() == ((320 - 100) + (610 - 350)) / 2
    table = profile.operators()
    to, mm = row(table, name="aten::to"), row(table, name="aten::mm")
    assert (to["host_total_us"], to["host_self_us"], to["device_total_us"], to["device_self_us"]) == (60, 55, 40, 40)
    assert (mm["host_total_us"], mm["host_self_us"], mm["device_total_us"], mm["device_self_us"]) == (50, 45, 200, 200)
    k = profile.kernels(group_by="name_op")
    assert (len(k), k.iloc[0]["operator"], k.iloc[0]["total_us"]) == (1, "aten::mm", 200)


def test_step_starts_after_the_previous_steps_device_work(tmp_path):
    """The memcpy launched in step 1 runs until 380, past step 2's host start (350): step 2
    starts at 380 and keeps only its own work (mm from 380, its launch, its kernel).

    A kernel [150, 240] with no launch in the trace (correlation 123, External id 0) ends
    before step 1's first device activity (the memcpy at 280): it is work from before the
    profiler started, and step 1 starts after it, at 240, as in the old plugin
    (`common.step_windows`): total 140, Memcpy 100, Runtime 5, CPU Exec 15, Other 20."""
    events = TWO_STEPS[:4] + [
        device(150, 90, 123, 0),
        device(280, 100, 334, 2, name="Memcpy HtoD (Pageable -> Device)", cat="Memcpy"),
        launch(250, 5, 334, 2, tid="123", name="cudaMemcpyAsync"),
        device(410, 200, 40348, 4), launch(400, 5, 40348, 4, tid="123"),
    ]
    steps = steps_as_dicts(load(tmp_path, events))
    # step 1 [240, 380]: memcpy 280-380, launch 250-255, aten::to 240-260 minus the launch =
    # 240-250 and 255-260, the rest (260-280) is Other
    assert steps[1] == {"kernel_us": 0, "memcpy_us": 100, "memset_us": 0, "communication_us": 0, "runtime_us": 5,
                        "dataloader_us": 0, "cpu_exec_us": 15, "other_us": 20, "total_us": 140}
    # step 2 [380, 610]: as the old plugin (mm 380-410 minus nothing, plus 405-410 after the launch)
    assert steps[2] == {"kernel_us": 200, "memcpy_us": 0, "memset_us": 0, "communication_us": 0, "runtime_us": 5,
                        "dataloader_us": 0, "cpu_exec_us": (380 + 100) - 360 - 100 + 5, "other_us": 0,
                        "total_us": 610 - 380}


def test_pure_cpu_steps(tmp_path):
    """Two steps without any device work keep their host ranges."""
    events = [host("ProfilerStep#1", 100, 200, 1), host("aten::to", 120, 10, 2, dims=TO_SHAPE),
              host("ProfilerStep#2", 300, 100, 3), host("aten::mm", 350, 40, 4)]
    steps = steps_as_dicts(load(tmp_path, events))
    zero = {"kernel_us": 0, "memcpy_us": 0, "memset_us": 0, "communication_us": 0, "runtime_us": 0, "dataloader_us": 0}
    assert steps == {1: {**zero, "cpu_exec_us": 10, "other_us": 190, "total_us": 200},
                     2: {**zero, "cpu_exec_us": 40, "other_us": 60, "total_us": 100}}


def test_datapipe_range_is_dataloader_time_not_an_operator(tmp_path):
    """`enumerate(DataPipe)#...` counts as DataLoader time and is no operator."""
    events = [host("enumerate(DataPipe)#ShufflerIterDataPipe", 100, 23, 34, cat="cpu_op", tid=7557)]
    profile = load(tmp_path, events)
    assert steps_as_dicts(profile)[0]["dataloader_us"] == 23
    assert len(profile.operators()) == 0


def test_trailing_steps_without_device_work_are_left_out(tmp_path):
    """Steps 2 and 3 launched nothing while step 1 launched a kernel: they are steps the profiler
    stopped recording part-way, so the step table has step 1 only, [110, 330]: its kernel ends
    at 330, and it starts after the kernel [90, 110] that has no launch in the trace and ends
    before step 1's own device work (`common.step_windows`), 330 - 110 = 220 as the old plugin."""
    events = [
        host("ProfilerStep#1", 100, 200, 1), host("aten::to", 120, 10, 2, dims=TO_SHAPE),
        host("ProfilerStep#2", 300, 100, 3), host("ProfilerStep#3", 400, 50, 4),
        device(90, 20, 123, 0), launch(125, 5, 334, 2, tid="123", name="cudaMemcpyAsync"),
        device(150, 180, 334, 2),
    ]
    profile = load(tmp_path, events)
    table = profile.steps()
    assert table["step"].tolist() == [1]
    assert table["total_us"].tolist() == [330 - 110]
    # the window of the GPU summary is that step too: kernel-busy 150..330 within 110..330
    assert profile.gpu_summary()["utilization_pct"].tolist() == pytest.approx([100 * (330 - 150) / 220])


def test_last_step_with_much_less_device_work_is_left_out(tmp_path):
    """Step 2 launched 1 kernel, step 1 launched 2: fewer than 80% of the step before it, so
    the last step is taken as cut short by the end of profiling and left out."""
    events = [
        host("ProfilerStep#1", 0, 100, 1), launch(10, 5, 1, 1, tid="123"), launch(20, 5, 2, 1, tid="123"),
        device(30, 10, 1, 1), device(50, 10, 2, 1),
        host("ProfilerStep#2", 100, 100, 2), launch(110, 5, 3, 2, tid="123"), device(120, 10, 3, 2),
    ]
    table = load(tmp_path, events).steps()
    assert table["step"].tolist() == [1]
    assert table["kernel_us"].tolist() == [20]


def test_steps_of_a_cpu_only_trace_are_all_kept(tmp_path):
    """Without any device work no step is dropped, even an empty last one."""
    events = [host("ProfilerStep#1", 0, 100, 1), host("aten::add", 10, 50, 2), host("ProfilerStep#2", 100, 10, 3)]
    assert load(tmp_path, events).steps()["total_us"].tolist() == [100, 10]


def test_rocm_trace_stub_last_step_is_left_out():
    """The real ROCm trace ends with a 49 µs `ProfilerStep#2` holding no work at all (the step
    the final `prof.step()` opened): it is not a step of the table, as in the old plugin."""
    profile = tb_plugin.load(shared_trace("rocm_mi250"))
    assert profile.model.steps["step"].tolist() == [1, 2]
    assert profile.steps()["step"].tolist() == [1]


# --- 4. GPU metrics ------------------------------------------------------------------------------

GPU_METRICS = [
    host("aten::mat_mul", 100, 100, 2, tid="456"), host("aten::mm", 120, 70, 4, tid="456"),
    device(130, 10, 334, 4, dev=1, **{"blocks per SM": 0.5, "est. achieved occupancy %": 0.6}),
    launch(120, 0, 334, 4),
    device(135, 15, 335, 2, name=GEMM_KERNEL, dev=1, **{"blocks per SM": 0.6, "est. achieved occupancy %": 0.1}),
    device(150, 0, 335, 2, name=GEMM_KERNEL, dev=1, **{"blocks per SM": 0.3, "est. achieved occupancy %": 0.2}),
    launch(120, 0, 335, 2),
    device(145, 25, 336, 4, dev=1, **{"blocks per SM": 0.3, "est. achieved occupancy %": 1.0}),
    launch(125, 3, 336, 4),
    device(200, 20, 337, 2, dev=1, **{"blocks per SM": 10.5, "est. achieved occupancy %": 0.3}),
    launch(195, 1, 337, 2),
]
for _event in GPU_METRICS[2:]:
    if _event["cat"] == "Kernel":
        _event["tid"] = "stream 8" if _event["name"] == GEMM_KERNEL else "stream 7"


def test_gpu_utilization_sm_efficiency_and_occupancy(tmp_path):
    """GPU 1 over the one step [100, 220]: kernels busy 130..170 and 200..220 (60 of 120 µs).
    SM efficiency integrates min(blocks per SM, 1) summed over concurrent kernels, capped at 1:
    0.5 (130-135), 1.1 -> 1 (135-140), 0.6 (140-145), 0.9 (145-150), 0.3 (150-170), 1 (200-220).
    Occupancy is weighted by kernel time; the zero-length kernel weighs nothing."""
    gpu = load(tmp_path, GPU_METRICS).gpu_summary()
    assert gpu["device"].tolist() == [1]
    g = gpu.iloc[0]
    assert g["utilization_pct"] == pytest.approx(100 * (40 + 20) / 120)
    sm = 0.5 * 5 + 1.0 * 5 + 0.6 * 5 + 0.9 * 5 + 0.3 * 20 + 1.0 * 20
    assert g["est_sm_efficiency_pct"] == pytest.approx(100 * sm / 120)
    assert g["est_achieved_occupancy_pct"] == pytest.approx((0.6 * 10 + 0.1 * 15 + 1.0 * 25 + 0.3 * 20) / 70)


def test_gpu_metrics_per_kernel(tmp_path):
    """Blocks per SM and occupancy per kernel are weighted by kernel time (the zero-length
    gemm kernel weighs nothing but is a call); by (name, op) the launching op splits them."""
    profile = load(tmp_path, GPU_METRICS)
    by_name = profile.kernels()
    gemm, nll = row(by_name, name=GEMM_KERNEL), row(by_name, name=NLL_KERNEL)
    assert (gemm["calls"], gemm["total_us"]) == (2, 15)
    assert (gemm["mean_blocks_per_sm"], gemm["mean_est_achieved_occupancy_pct"]) == pytest.approx((0.6, 0.1))
    assert nll["calls"] == 3
    assert nll["mean_blocks_per_sm"] == pytest.approx((0.5 * 10 + 0.3 * 25 + 10.5 * 20) / 55)
    assert nll["mean_est_achieved_occupancy_pct"] == pytest.approx((0.6 * 10 + 1.0 * 25 + 0.3 * 20) / 55)
    by_op = profile.kernels(group_by="name_op")
    assert row(by_op, name=GEMM_KERNEL, operator="aten::mat_mul")["mean_blocks_per_sm"] == pytest.approx(0.6)
    mm = row(by_op, name=NLL_KERNEL, operator="aten::mm")
    assert (mm["mean_blocks_per_sm"], mm["mean_est_achieved_occupancy_pct"]) == \
        pytest.approx(((0.5 * 10 + 0.3 * 25) / 35, (0.6 * 10 + 1.0 * 25) / 35))
    mat_mul = row(by_op, name=NLL_KERNEL, operator="aten::mat_mul")
    assert (mat_mul["mean_blocks_per_sm"], mat_mul["mean_est_achieved_occupancy_pct"]) == pytest.approx((10.5, 0.3))


def test_gpu_utilization_counter_in_10us_buckets(tmp_path):
    """The trace view's utilization counter over [100, 220] in 10 µs buckets: busy (100%) in
    130..170 and 200..220, idle elsewhere. SM efficiency per bucket is the same integral as
    the summary, bucket by bucket."""
    profile = load(tmp_path, GPU_METRICS)
    origin = profile.model.origin_us
    series = {s["name"]: s for s in timeline.counters(profile.model, 100 - origin, 220 - origin, points=12)}
    util = series["GPU 1 utilization"]
    assert [t + origin for t in util["time_us"]] == pytest.approx(list(range(100, 220, 10)))
    assert util["value"] == [0, 0, 0, 100, 100, 100, 100, 0, 0, 0, 100, 100]
    sm = series["GPU 1 est. SM efficiency"]["value"]
    # 130-140: 0.5 x 5 + 1 x 5; 140-150: 0.6 x 5 + 0.9 x 5; 150-170: 0.3; 200-220: 1
    assert sm == pytest.approx([0, 0, 0, 75, 75, 30, 30, 0, 0, 0, 100, 100])



def test_gpu_counters_of_a_trace_shorter_than_a_bucket(tmp_path):
    """A 3 µs trace (the old plugin crashed when the whole trace was shorter than one of its
    buckets): the utilization counter integrates to the kernel's 2 µs busy time."""
    events = [host("aten::add", 0, 3, 1, tid="456"), launch(0.5, 0.5, 1, 1), device(1, 2, 1, 1)]
    profile = load(tmp_path, events)
    start, end = profile.model.span_us()
    series = {s["name"]: s for s in timeline.counters(profile.model, start, end, points=7)}
    util = series["GPU 0 utilization"]["value"]
    assert sum(v / 100 * (end - start) / 7 for v in util) == pytest.approx(2, abs=0.01)
    assert profile.gpu_summary()["utilization_pct"].tolist() == pytest.approx([100 * 2 / 3])


def test_gpu_metrics_of_kernels_outside_every_step(tmp_path):
    """Both kernels run outside ProfilerStep#2 [100, 200] (at 60 and 240, launched outside it
    too): within the step the GPU is idle, so utilization and SM efficiency are 0 and the
    occupancy, a mean over no kernel time, is unknown (NaN). The old plugin answered None for
    the SM efficiency; 0 is the integral the definition gives (METRICS.md: the integral over
    the steps' span). The kernel table still covers both kernels."""
    events = [
        host("aten::mat_mul", 10, 10, 1, tid="456"), host("aten::mm", 120, 70, 3, tid="456"),
        host("aten::mm", 220, 20, 4, tid="456"), host("ProfilerStep#2", 100, 100, 2, tid="456"),
        device(60, 20, 334, 1, dev=1, **{"blocks per SM": 0.5, "est. achieved occupancy %": 0.6}),
        launch(15, 5, 334, 1),
        device(240, 25, 337, 4, dev=1, **{"blocks per SM": 10.5, "est. achieved occupancy %": 0.3}),
        launch(230, 10, 337, 4),
    ]
    profile = load(tmp_path, events)
    g = profile.gpu_summary().iloc[0]
    assert (g["utilization_pct"], g["est_sm_efficiency_pct"]) == (0, 0)
    assert np.isnan(g["est_achieved_occupancy_pct"])
    k = row(profile.kernels(), name=NLL_KERNEL)
    assert (k["mean_blocks_per_sm"], k["mean_est_achieved_occupancy_pct"]) == \
        pytest.approx(((20 * 0.5 + 25 * 10.5) / 45, (20 * 0.6 + 25 * 0.3) / 45))
    by_op = profile.kernels(group_by="name_op")
    assert row(by_op, operator="aten::mat_mul")["mean_blocks_per_sm"] == pytest.approx(0.5)
    assert row(by_op, operator="aten::mm")["mean_est_achieved_occupancy_pct"] == pytest.approx(0.3)


# --- 5. kernel grouping and Tensor Cores ---------------------------------------------------------

def _config(grid=None, block=None, regs=None, shared=None):
    args = {"grid": grid, "block": block, "registers per thread": regs, "shared memory": shared}
    return {k: v for k, v in args.items() if v is not None}


def test_kernels_grouped_by_op_and_launch_configuration(tmp_path):
    """kernel1 three times from op1 (two with block [16, 16, 16], one [16, 16, 64]) and once
    from op2: three groups."""
    g, b16, b64 = [16, 1, 1], [16, 16, 16], [16, 16, 64]
    events = [
        host("op1", 200, 60, 3, dims=TO_SHAPE), host("op2", 340, 70, 4, tid="456", dims=NLL_SHAPE),
        device(230, 15, 1000, 3, name="kernel1", **_config(g, b16, 18, 0)), launch(210, 5, 1000, 3),
        device(250, 10, 1001, 3, name="kernel1", **_config(g, b16, 18, 0)), launch(215, 5, 1001, 3),
        device(250, 13, 1002, 3, name="kernel1", **_config(g, b64, 18, 0)), launch(220, 5, 1002, 3),
        device(250, 17, 1003, 4, name="kernel1", **_config(g, b64, 18, 0)), launch(350, 5, 1003, 4),
    ]
    table = load(tmp_path, events).kernels(group_by="name_op")
    assert len(table) == 3
    got = {(r["operator"], json.loads(r["grid"]) == g, json.loads(r["block"])[2], r["registers_per_thread"],
            r["shared_memory"]): (r["calls"], r["total_us"], r["mean_us"], r["min_us"], r["max_us"])
           for r in table.to_dict("records")}
    assert got == {("op1", True, 16, 18, 0): (2, 25, 12.5, 10, 15),
                   ("op1", True, 64, 18, 0): (1, 13, 13, 13, 13),
                   ("op2", True, 64, 18, 0): (1, 17, 17, 17, 17)}


def test_kernels_grouped_when_launch_fields_are_missing(tmp_path):
    """Five launches of kernel1 by op1, each lacking other fields (grid; block; registers;
    shared memory; all four): an absent field is a value of its own, so five groups."""
    g, b = [16, 1, 1], [16, 16, 16]
    configs = [_config(None, b, 18, 0), _config(g, None, 18, 0), _config(g, b, None, 0), _config(g, b, 18, None),
               _config()]
    events = [host("op1", 200, 60, 3, dims=TO_SHAPE)]
    for i, config in enumerate(configs):
        events += [device(220 + 10 * i, i + 1, 1000 + i, 3, name="kernel1", **config),
                   launch(210 + 10 * i, 5, 1000 + i, 3)]
    table = load(tmp_path, events).kernels(group_by="name_op")
    assert len(table) == 5
    assert set(table["operator"]) == {"op1"}
    assert sorted(table["total_us"]) == [1, 2, 3, 4, 5] and set(table["calls"]) == {1}
    by_total = table.set_index("total_us")
    assert by_total.loc[1, "grid"] == by_total.loc[5, "grid"] != by_total.loc[2, "grid"]
    assert by_total.loc[2, "block"] == by_total.loc[5, "block"] != by_total.loc[1, "block"]
    assert by_total.loc[3, "registers_per_thread"] == by_total.loc[5, "registers_per_thread"] == -1
    assert by_total.loc[4, "shared_memory"] == by_total.loc[5, "shared_memory"] == -1
    assert (by_total.loc[1, "registers_per_thread"], by_total.loc[1, "shared_memory"]) == (18, 0)


def test_tensor_core_ratios(tmp_path):
    """aten::conv2d [200, 300] holds op_no_tc (plain kernel, 10 µs) and
    aten::cudnn_convolution (an `s884` Tensor Core kernel, 15 µs). conv2d is eligible by name
    and its total device time is 15 of 25 on Tensor Cores; its own device time is none, so its
    self ratio is undefined (NaN; the old plugin showed 0). The GPU's Tensor Core share is 15
    of the 25 µs operators launched."""
    tc_kernel = "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1"
    events = [
        host("aten::conv2d", 200, 100, 3, dims=[[]]), host("op_no_tc", 205, 10, 4, dims=[[]]),
        host("aten::cudnn_convolution", 215, 10, 5, dims=[[]]),
        device(210, 10, 1000, 4, name="kernel_no_tc"), launch(205, 5, 1000, 4, tid="123"),
        device(220, 15, 1001, 5, name=tc_kernel), launch(215, 5, 1001, 5, tid="123"),
    ]
    profile = load(tmp_path, events)
    ops = profile.operators()
    assert len(ops) == 3
    conv = row(ops, name="aten::conv2d")
    assert bool(conv["tc_eligible"]) and np.isnan(conv["tc_self_pct"])
    assert conv["tc_total_pct"] == pytest.approx(100 * 15 / 25)
    no_tc = row(ops, name="op_no_tc")
    assert (bool(no_tc["tc_eligible"]), no_tc["tc_self_pct"], no_tc["tc_total_pct"]) == (False, 0, 0)
    cudnn = row(ops, name="aten::cudnn_convolution")
    assert (bool(cudnn["tc_eligible"]), cudnn["tc_self_pct"], cudnn["tc_total_pct"]) == (True, 100, 100)
    kernels = profile.kernels(group_by="name_op")
    no_tc_kernel = row(kernels, name="kernel_no_tc")
    assert (no_tc_kernel["operator"], bool(no_tc_kernel["tensor_cores_used"])) == ("op_no_tc", False)
    assert (row(kernels, name=tc_kernel)["operator"], bool(row(kernels, name=tc_kernel)["tensor_cores_used"])) == \
        ("aten::cudnn_convolution", True)
    assert profile.gpu_summary()["tensor_core_kernel_pct"].tolist() == pytest.approx([100 * 15 / 25])
    share = profile.tensor_core_share()
    assert share.pop("unit") == "Tensor Cores"  # an NVIDIA kernel name: NVIDIA's matrix units
    assert share == pytest.approx({"tensor_cores_us": 15, "other_us": 10, "tensor_cores_pct": 100 * 15 / 25})


# --- 6. memory -----------------------------------------------------------------------------------

MEMORY_OPS = [
    host("aten::to", 10, 10, 2),
    host("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 180, 2),
    host("aten::to", 200, 60, 3, dims=TO_SHAPE),
    host("aten::nll_loss_backward", 340, 70, 4, dims=NLL_SHAPE),
    host("ProfilerStep#1", 50, 400, 1), host("ProfilerStep#2", 500, 500, 1),
    host("aten::to", 510, 150, 3, dims=TO_SHAPE), host("aten::copy_", 520, 100, 3, dims=TO_SHAPE),
    host("aten::liner", 700, 100, 3, dims=TO_SHAPE), host("aten::t", 705, 40, 3, dims=TO_SHAPE),
    host("aten::transpose", 710, 30, 3, dims=TO_SHAPE), host("aten::tranas_stride", 720, 10, 3, dims=TO_SHAPE),
    host("aten::addmm", 750, 40, 3, dims=TO_SHAPE), host("aten::to", 900, 100, 3, dims=TO_SHAPE),
]
CPU, GPU = 0, 1
MEMORY_RECORDS = [  # (ts, device type, address, bytes)
    (90, CPU, 90, 4), (150, CPU, 150, 4), (200, CPU, 200, 4), (210, GPU, 210, 4), (265, GPU, 265, 4),
    (300, GPU, 300, 4), (350, GPU, 350, 10), (360, GPU, 350, -10), (450, CPU, 450, 1000000),
    (515, GPU, 515, 100), (520, GPU, 520, 100), (600, GPU, 520, -100), (690, GPU, 690, 100),
    (701, GPU, 701, 100), (796, GPU, 515, -100), (708, GPU, 708, 100), (742, GPU, 708, -100),
    (715, GPU, 715, 50), (735, GPU, 715, -50), (725, GPU, 725, 50), (728, GPU, 725, -50), (729, CPU, 729, 50),
    (746, CPU, 746, 100), (747, GPU, 747, 20), (749, CPU, 690, -100), (760, GPU, 760, 30), (780, GPU, 760, -30),
    (795, GPU, 795, 10), (799, GPU, 795, -10),
]
STATS = ["self_size_increase_bytes", "self_alloc_bytes", "self_alloc_count", "size_increase_bytes", "alloc_bytes",
         "alloc_count", "calls"]


@pytest.fixture
def memory_profile(tmp_path):
    # the ops' thread ids are strings ("123"), the records' numbers (123), as the old suite wrote them
    events = MEMORY_OPS + [mem(ts, nbytes, addr, device_type=dtype) for ts, dtype, addr, nbytes in MEMORY_RECORDS]
    return load(tmp_path, events)


def test_memory_stats_per_operator(memory_profile):
    """Each record belongs to the innermost operator open at its time on its thread; totals add
    the callees'. Records inside no operator (in the DataLoader range or only in a step) go to
    the row "". Columns as the old plugin's: self increase, self allocation size and count,
    increase, allocation size and count, calls (all four aten::to instances)."""
    assert memory_profile.memory_devices() == ["CPU", "GPU0"]
    gpu = memory_profile.memory_stats("GPU0").set_index("operator")[STATS]
    assert gpu.loc["aten::to"].tolist() == [104, 104, 2, 104, 204, 3, 4]
    assert gpu.loc["aten::nll_loss_backward"].tolist() == [0, 10, 1, 0, 10, 1, 1]
    assert gpu.loc["aten::copy_"].tolist() == [0, 100, 1, 0, 100, 1, 1]
    assert gpu.loc["aten::addmm"].tolist() == [0, 30, 1, 0, 30, 1, 1]
    assert gpu.loc["aten::tranas_stride"].tolist() == [0, 50, 1, 0, 50, 1, 1]
    assert gpu.loc["aten::transpose"].tolist() == [0, 50, 1, 0, 100, 2, 1]
    assert gpu.loc["aten::t"].tolist() == [0, 100, 1, 0, 200, 3, 1]
    assert gpu.loc["aten::liner"].tolist() == [20, 130, 3, 20, 360, 7, 1]
    # outside every operator: 265 (DataLoader range), 300 and 690 (step only)
    assert gpu.loc[""].tolist() == [4 + 4 + 100, 108, 3, 108, 108, 3, 0]
    assert len(gpu) == 9

    cpu = memory_profile.memory_stats("CPU").set_index("operator")[STATS]
    assert cpu.loc["aten::to"].tolist() == [4, 4, 1, 4, 4, 1, 4]
    assert cpu.loc["aten::liner"].tolist() == [0, 100, 1, 50, 150, 2, 1]
    assert cpu.loc["aten::tranas_stride"].tolist() == [50, 50, 1, 50, 50, 1, 1]
    assert cpu.loc["aten::transpose"].tolist() == [0, 0, 0, 50, 50, 1, 1]
    assert cpu.loc["aten::t"].tolist() == [0, 0, 0, 50, 50, 1, 1]
    # 90 (step only), 150 (DataLoader range), 450 (the end of step 1)
    assert cpu.loc[""].tolist() == [4 + 4 + 1000000, 1000008, 3, 1000008, 1000008, 3, 0]
    assert len(cpu) == 6


def test_memory_stats_in_a_time_range(memory_profile):
    """Restricted to [700, 800]: the records of aten::liner's call and the operators overlapping
    the range (aten::to at 510..660 does not)."""
    gpu = memory_profile.memory_stats("GPU0", start_us=700 - memory_profile.model.origin_us,
                                      end_us=800 - memory_profile.model.origin_us).set_index("operator")[STATS]
    assert sorted(gpu.index) == ["aten::addmm", "aten::liner", "aten::t", "aten::tranas_stride", "aten::transpose"]
    assert gpu.loc["aten::liner"].tolist() == [20, 130, 3, 20, 360, 7, 1]


def test_memory_events_pair_allocations_with_frees(memory_profile):
    """GPU records paired by address: 350 freed at 360, 520 at 600, 515 at 796 (by aten::liner
    though aten::to allocated it), 708 at 742, 715 at 735, 725 at 728, 760 at 780, 795 at 799;
    210, 265, 300, 690, 701 and 747 are never freed."""
    events = memory_profile.memory_events("GPU0")
    origin = memory_profile.model.origin_us
    got = {(r["alloc_us"] + origin): (r["operator"], r["size_bytes"],
                                       None if np.isnan(r["free_us"]) else r["free_us"] + origin)
           for r in events.to_dict("records")}
    assert got == {
        210: ("aten::to", 4, None), 265: ("", 4, None), 300: ("", 4, None), 350: ("aten::nll_loss_backward", 10, 360),
        515: ("aten::to", 100, 796), 520: ("aten::copy_", 100, 600), 690: ("", 100, None),
        701: ("aten::liner", 100, None), 708: ("aten::t", 100, 742), 715: ("aten::transpose", 50, 735),
        725: ("aten::tranas_stride", 50, 728), 747: ("aten::liner", 20, None), 760: ("aten::addmm", 30, 780),
        795: ("aten::liner", 10, 799)}



def test_memory_curve_without_totals_integrates_the_records(memory_profile):
    """The old suite's memory records carry no Total Allocated (as before PyTorch 1.10): the
    curve is the running sum of each device's Bytes in time order."""
    origin = memory_profile.model.origin_us
    for device, dtype in (("GPU0", GPU), ("CPU", CPU)):
        records = sorted((ts, nbytes) for ts, d, _, nbytes in MEMORY_RECORDS if d == dtype)
        curve = memory_profile.memory_curve(device)
        assert (curve["time_us"] + origin).tolist() == [ts for ts, _ in records]
        assert curve["allocated_bytes"].tolist() == np.cumsum([b for _, b in records]).tolist()
        assert curve["reserved_bytes"].isna().all()


def test_memory_records_without_addresses(tmp_path):
    """Records without `Addr` (before PyTorch 1.10) are attributed as before, so the statistics
    are the same; allocations cannot be paired with frees: no free time, and the frees are left
    out of the events."""
    events = MEMORY_OPS + [mem(ts, nbytes, addr, device_type=dtype) for ts, dtype, addr, nbytes in MEMORY_RECORDS]
    for event in events:
        event["args"].pop("Addr", None)
    profile = load(tmp_path, events)
    gpu = profile.memory_stats("GPU0").set_index("operator")[STATS]
    assert gpu.loc["aten::liner"].tolist() == [20, 130, 3, 20, 360, 7, 1]
    assert gpu.loc["aten::to"].tolist() == [104, 104, 2, 104, 204, 3, 4]
    allocations = profile.memory_events("GPU0")
    assert len(allocations) == sum(1 for _, d, _, b in MEMORY_RECORDS if d == GPU and b > 0)
    assert allocations["free_us"].isna().all()
    assert sorted(allocations["size_bytes"]) == sorted(b for _, d, _, b in MEMORY_RECORDS if d == GPU and b > 0)


# The old suite's memory-curve records: (ts, device type, device id, addr, bytes, total allocated,
# total reserved); the CPU "free 5" at 905 names address 4, so it frees nothing allocated there.
CURVE_CPU = [
    (1, 0, 0, 1, 4, 4, 0), (20, 0, 0, 1, -4, 0, 0), (100, 0, 0, 2, 8000, 8000, 0), (200, 0, 0, 2, -8000, 0, 0),
    (300, 0, 0, 3, 4, 4, 0), (400, 0, 0, 4, 16, 20, 0), (500, 0, 0, 5, 4000, 4020, 0), (600, 0, 0, 4, -16, 4004, 0),
    (700, 0, 0, 7, 80, 4084, 0), (800, 0, 0, 3, -4, 4080, 0), (900, 0, 0, 7, -80, 4000, 0),
    (905, 0, 0, 4, -4000, 0, 0),
]
CURVE_GPU = [
    (2, 1, 0, 11, 400, 400, 512), (22, 1, 0, 11, -400, 0, 512), (105, 1, 0, 12, 5000, 5000, 10240),
    (106, 1, 0, 13, 3000, 8000, 10240), (205, 1, 0, 12, -5000, 3000, 10240), (401, 1, 0, 14, 1024, 4024, 10240),
    (499, 1, 0, 15, 4, 4028, 10240), (501, 1, 0, 13, -3000, 1028, 10240), (502, 1, 0, 15, -4, 1024, 10240),
    (906, 1, 0, 14, -1024, 0, 10240),
]


@pytest.fixture
def curve_profile(tmp_path):
    def entry(ts, dtype, did, addr, nbytes, allocated, reserved):
        return {"ph": "i", "s": "t", "name": "[memory]", "pid": 0, "tid": 0, "ts": ts,
                "args": {"Device Type": dtype, "Device Id": did, "Addr": addr, "Bytes": nbytes,
                         "Total Allocated": allocated, "Total Reserved": reserved}}
    return load(tmp_path, [entry(*r) for r in sorted(CURVE_CPU + CURVE_GPU, key=lambda r: r[0])])


def test_memory_curve_is_the_allocator_totals(curve_profile):
    """A memory-only trace: one curve point per record, at its time from the first record (1 µs),
    with the allocator's Total Allocated and Total Reserved. CPU reserved is NaN where the old
    plugin showed the 0 the CPU allocator writes (it reserves nothing: no measurement; see
    `memory_curve`)."""
    assert curve_profile.model.origin_us == 1
    gpu = curve_profile.memory_curve("GPU0")
    assert gpu["time_us"].tolist() == [r[0] - 1 for r in CURVE_GPU]
    assert gpu["allocated_bytes"].tolist() == [r[5] for r in CURVE_GPU]
    assert gpu["reserved_bytes"].tolist() == [r[6] for r in CURVE_GPU]
    cpu = curve_profile.memory_curve("CPU")
    assert cpu["time_us"].tolist() == [r[0] - 1 for r in CURVE_CPU]
    assert cpu["allocated_bytes"].tolist() == [r[5] for r in CURVE_CPU]
    assert cpu["reserved_bytes"].isna().all()
    peaks = curve_profile.memory_peaks("GPU0")
    assert (peaks.peak_allocated_bytes, peaks.peak_allocated_us, peaks.peak_reserved_bytes) == (8000, 106 - 1, 10240)


def test_memory_curve_events_with_an_unmatched_free(curve_profile):
    """CPU allocations pair with the next free of their address; the free of 4000 bytes at 905
    names address 4 (already freed at 600), so it is an unmatched free and the 4000 bytes at
    address 5 are never freed."""
    events = curve_profile.memory_events("CPU")
    rows = [(None if np.isnan(r["alloc_us"]) else r["alloc_us"] + 1, r["size_bytes"],
             None if np.isnan(r["free_us"]) else r["free_us"] + 1) for r in events.to_dict("records")]
    assert rows == [(None, 4000, 905), (1, 4, 20), (100, 8000, 200), (300, 4, 800), (400, 16, 600),
                    (500, 4000, None), (700, 80, 900)]


# --- 7. distributed ------------------------------------------------------------------------------

def coll(name, ts, dur, ext, tid, dims, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 23803, "tid": tid, "ts": ts, "dur": dur,
            "args": {"External id": ext, "Input Dims": dims, "Input type": ["float"] * len(dims)}}


def add_op(ts, dur, tid="23803"):
    return {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 23803, "tid": tid, "ts": ts, "dur": dur,
            "args": {"External id": 24504, "Input Dims": [[1000], [1000], []], "Input type": ["float", "float", "Int"]}}


def dist_kernel(name, ts, dur, corr, ext, stream):
    return {"ph": "X", "cat": "Kernel", "name": name, "pid": 0, "tid": f"stream {stream}", "ts": ts, "dur": dur,
            "args": {"device": 0, "correlation": corr, "external id": ext}}


BROADCAST_K = "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)"
ALLREDUCE_K = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
ADD_K = "void at::native::vectorized_elementwise_kernel"


def nccl_worker(bcast_dur, bcast_k, add_ts, add_k, allreduce_k):
    return [
        coll("nccl:broadcast", 0, bcast_dur, 146, "23803", [[53120]]),
        dist_kernel(BROADCAST_K, *bcast_k, 28506, 146, 16),
        add_op(add_ts, 20),
        dist_kernel(ADD_K, *add_k, 99765, 24504, 7),
        coll("nccl:all_reduce", 160, 75, 2513, "25166", [[2049000]]),
        dist_kernel(ALLREDUCE_K, *allreduce_k, 33218, 2513, 16),
    ]


@pytest.fixture
def nccl_run(tmp_path):
    write(tmp_path, nccl_worker(75, (16, 16), 100, (130, 161), (162, 1556)), "worker0")
    write(tmp_path, nccl_worker(20, (8, 31), 25, (30, 161), (562, 1058)), "worker1")
    return tb_plugin.load_run(str(tmp_path))


def test_nccl_step_breakdown(nccl_run):
    """Without steps a worker's one step is the whole trace, [0, 1718] on worker 0: the NCCL
    kernels run to 1718 and are not linked to any launch. Communication = the collective ops
    and their kernels, minus the computing kernel 130..291 that outranks it; CPU Exec is
    aten::add_ 100..120.

    The old plugin answered [Kernel 105, Communication 75, CPU Exec 20, Other 35, total 235]:
    it made the step end at the last CPU op (235) because these kernels have no launch. Ours
    spans the whole trace (`step_windows`: one step over the whole trace), so no device work
    falls outside the only step; the 35 µs of Other are the same."""
    w0 = steps_as_dicts(nccl_run.profile("worker0"))[0]
    assert w0 == {"kernel_us": 161, "memcpy_us": 0, "memset_us": 0, "communication_us": 75 + (1718 - 291),
                  "runtime_us": 0, "dataloader_us": 0, "cpu_exec_us": 20, "other_us": 35, "total_us": 1718}
    w1 = steps_as_dicts(nccl_run.profile("worker1"))[0]
    # communication 0..30, 191..235, 562..1620; aten::add_ 25..45 is all communication or kernel
    assert w1 == {"kernel_us": 161, "memcpy_us": 0, "memset_us": 0, "communication_us": 30 + 44 + 1058,
                  "runtime_us": 0, "dataloader_us": 0, "cpu_exec_us": 0, "other_us": 562 - 235, "total_us": 1620}


def test_nccl_overlap_and_collectives(nccl_run):
    """Computation = the computing kernel (161 µs on both workers); communication = the NCCL
    kernels (16 + 1556 on worker 0, 31 + 1058 on worker 1); they overlap 162..291 on worker 0
    and 30..39 on worker 1. A collective's time is its kernels' time; its transfer time is the
    minimum over workers (broadcast 16, all_reduce 1058), the rest is synchronizing.

    These are the old plugin's answers of its first NCCL test version (transfer 16 and 1058,
    synchronizing 498 and 15, overlap 73 and 9 within its 235 µs step). Its later version
    counts the collective's CPU op as communication time too and sums per-range minima of
    overlapping ranges (broadcast transfer 36 = min CPU op 20 + min kernel 16); ours follows
    METRICS.md: NCCL collectives are their kernels."""
    view = nccl_run.distributed()
    steps = view.steps.set_index("worker")
    assert steps.loc["worker0", ["computation_us", "overlap_us", "communication_us", "other_us", "total_us"]].tolist() \
        == [161, 291 - 162, 16 + 1556, 1718 - (16 + 1556) - (161 - 129), 1718]
    assert steps.loc["worker1", ["computation_us", "overlap_us", "communication_us", "other_us", "total_us"]].tolist() \
        == [161, 9, 31 + 1058, 1620 - 1089 - 152, 1620]
    # the backend's op names the row the old plugin showed (`name` is what the program asked for)
    colls = view.collectives.set_index(["worker", "backend_name"])
    columns = ["calls", "size_bytes", "mean_size_bytes", "total_us", "mean_us", "transfer_us", "synchronizing_us"]
    assert colls.loc[("worker0", "nccl:broadcast"), columns].tolist() == [1, 212480, 212480, 16, 16, 16, 0]
    assert colls.loc[("worker0", "nccl:all_reduce"), columns].tolist() == [1, 8196000, 8196000, 1556, 1556, 1058, 498]
    assert colls.loc[("worker1", "nccl:broadcast"), columns].tolist() == [1, 212480, 212480, 31, 31, 16, 15]
    assert colls.loc[("worker1", "nccl:all_reduce"), columns].tolist() == [1, 8196000, 8196000, 1058, 1058, 1058, 0]
    assert set(view.calls["matched_workers"]) == {2}


GLOO_W0 = [
    coll("gloo:broadcast", 16, 38, 165, "23803", [[53120]]), coll("gloo:broadcast", 25, 36, 166, "23805", [[53120]]),
    coll("gloo:broadcast", 66, 18, 167, "23803", [[53120]]), add_op(0, 20, tid="23800"),
    coll("gloo:all_reduce", 110, 18, 2513, "23805", [[2049000]]),
    coll("gloo:all_reduce", 120, 36, 2516, "23803", [[2049000]]),
]
GLOO_W1 = [
    coll("gloo:broadcast", 20, 28, 256, "23803", [[53120]]), coll("gloo:broadcast", 28, 30, 257, "23805", [[53120]]),
    coll("gloo:broadcast", 77, 6, 258, "23803", [[53120]]), add_op(0, 30, tid="23800"),
    coll("gloo:all_reduce", 88, 38, 2513, "23805", [[2049000]]),
    coll("gloo:all_reduce", 130, 16, 2516, "23803", [[2049000]]),
]


def mul_op(ts, dur):
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 23803, "tid": "23800", "ts": ts, "dur": dur,
            "args": {"External id": 24505}}


@pytest.fixture(params=["gpu", "cpu"])
def gloo_run(request, tmp_path):
    """gloo collectives on two threads per worker; the computation is a kernel launched by
    aten::add_ (`gpu`) or an aten::mul op (`cpu`, no GPU at all)."""
    if request.param == "gpu":
        extra0, extra1 = [dist_kernel(ADD_K, 30, 101, 99765, 24504, 7)], [dist_kernel(ADD_K, 70, 70, 99765, 24504, 7)]
    else:
        extra0, extra1 = [mul_op(30, 101)], [mul_op(70, 70)]
    write(tmp_path, GLOO_W0 + extra0, "worker0")
    write(tmp_path, GLOO_W1 + extra1, "worker1")
    return request.param, tb_plugin.load_run(str(tmp_path))


def test_gloo_step_breakdown(gloo_run):
    """Communication = the union of the gloo ops (16..61, 66..84, 110..156 on worker 0), below
    the kernel (GPU case); CPU Exec = aten::add_ (and aten::mul) outside them. These are the
    old plugin's numbers."""
    kind, run = gloo_run
    w0 = steps_as_dicts(run.profile("worker0"))[0]
    w1 = steps_as_dicts(run.profile("worker1"))[0]
    parts = ["kernel_us", "communication_us", "cpu_exec_us", "other_us", "total_us"]
    if kind == "gpu":
        assert [w0[p] for p in parts] == [101, 39, 16, 0, 156]
        assert [w1[p] for p in parts] == [70, 44, 20, 12, 146]
    else:
        assert [w0[p] for p in parts] == [0, 109, 47, 0, 156]
        assert [w1[p] for p in parts] == [0, 98, 36, 12, 146]


def test_gloo_overlap_and_collectives(gloo_run):
    """Computation: the kernel, or without kernels the CPU operators (aten::add_, aten::mul);
    communication: the gloo ops' host intervals. Overlap and the rest as the old plugin
    (worker 0, GPU: computation-only 31, overlap 70, communication-only 39, other 16).

    Collectives: each gloo op is one call, matched across workers by its order among the
    calls of the same name and size (by host start: the broadcasts of worker 0 at 16, 25, 66
    with those of worker 1 at 20, 28, 77). Transfer = the shorter of each matched pair. The
    old plugin's total per collective was the union of its calls' intervals (worker 0
    broadcast 63, where the calls on two threads overlap) and its transfer the union of
    end-aligned minima (41); ours sums per call (METRICS.md: the i-th collective's transfer
    is the minimum of its duration over workers), so total 38 + 36 + 18 = 92 and transfer
    28 + 30 + 6 = 64; the all_reduce transfers (34) agree."""
    kind, run = gloo_run
    view = run.distributed()
    steps = view.steps.set_index("worker")
    columns = ["computation_us", "overlap_us", "communication_us", "other_us", "total_us"]
    if kind == "gpu":
        assert steps.loc["worker0", columns].tolist() == [101, 70, 109, 16, 156]
        assert steps.loc["worker1", columns].tolist() == [70, 54, 98, 32, 146]
    else:
        assert steps.loc["worker0", columns].tolist() == [121, 74, 109, 0, 156]
        assert steps.loc["worker1", columns].tolist() == [100, 64, 98, 12, 146]
    # the backend's op names the row the old plugin showed (`name` is what the program asked for)
    colls = view.collectives.set_index(["worker", "backend_name"])
    columns = ["calls", "size_bytes", "mean_size_bytes", "total_us", "mean_us", "transfer_us", "synchronizing_us"]
    assert colls.loc[("worker0", "gloo:broadcast"), columns].tolist() == [3, 637440, 212480, 92, 92 / 3, 64, 28]
    assert colls.loc[("worker1", "gloo:broadcast"), columns].tolist() == [3, 637440, 212480, 64, 64 / 3, 64, 0]
    assert colls.loc[("worker0", "gloo:all_reduce"), columns].tolist() == [2, 16392000, 8196000, 54, 27, 34, 20]
    assert colls.loc[("worker1", "gloo:all_reduce"), columns].tolist() == [2, 16392000, 8196000, 54, 27, 34, 20]


def test_nccl_user_annotation_is_communication(tmp_path):
    """PyTorch 2.x may record the collective as a `user_annotation` named `nccl:all_reduce`
    (kineto issue 640): it is still communication, and a collective call."""
    event = {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 128, "tid": 999,
             "ts": 1686070155939447, "dur": 71, "args": {"External id": 647, "Profiler Event Index": 134}}
    write(tmp_path, [event], "worker0")
    run = tb_plugin.load_run(str(tmp_path))
    assert steps_as_dicts(run.profile("worker0"))[0]["communication_us"] == 71
    calls = run.distributed().calls
    assert (calls["backend_name"].tolist(), calls["duration_us"].tolist()) == (["nccl:all_reduce"], [71])


# --- 8. modules ----------------------------------------------------------------------------------

def test_module_hierarchy(tmp_path):
    """`nn.Module` python frames under a non-module root frame: MyModule called three times,
    each with a Linear holding one aten::addmm, and a Conv2 without children. Roots are
    MyModule and Conv2; Linear is MyModule's only child."""
    def frame(name, ts, dur, pid_, parent=None, module=None):
        args = {"Python id": pid_}
        if parent is not None:
            args["Python parent id"] = parent
        if module is not None:
            args["Python module id"] = module
        return {"ph": "X", "cat": "python_function", "name": name, "pid": 1908, "tid": 1908, "ts": ts, "dur": dur,
                "args": args}

    def addmm(ts, dur, caller):
        return {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1908, "tid": 1908, "ts": ts, "dur": dur,
                "args": {"External id": 12182, "Fwd thread id": 0, "Sequence number": 4006,
                         "python_caller_id": caller}}

    events = [frame("test_root", 1, 19367, 1)]
    for i, (ts, mm_dur) in enumerate([(2, 31), (1000, 32), (2000, 33)]):
        outer, inner = 2 + 2 * i, 3 + 2 * i
        events += [frame("nn.Module: MyModule", ts, 211, outer, parent=1, module=0),
                   frame("nn.Module: Linear", ts + 1 + (2 if i == 0 else 0), 62, inner, parent=outer, module=1),
                   addmm(ts + 2 + (6 if i == 0 else 0), mm_dur, inner)]
    events.append(frame("nn.Module: Conv2", 3000, 211, 8, parent=1, module=100))
    table = load(tmp_path, events).modules()
    # each node's path, from the parent ids (parents come first in the depth-first order)
    paths: list[str] = []
    for parent, name in zip(table["parent_id"], table["name"]):
        paths.append(name if parent < 0 else f"{paths[parent]} > {name}")
    assert paths == ["MyModule", "MyModule > Linear", "Conv2"]
    by_path = table.assign(path=paths).set_index("path")
    assert by_path.loc["MyModule", ["occurrences", "operators", "host_total_us", "host_self_us"]].tolist() == \
        [3, 3, 3 * 211, 3 * (211 - 62)]
    assert by_path.loc["MyModule > Linear", ["occurrences", "operators", "host_total_us"]].tolist() == [3, 3, 3 * 62]
    assert by_path.loc["Conv2", ["occurrences", "operators", "host_total_us", "depth"]].tolist() == [1, 0, 211, 0]
    assert by_path.loc["MyModule > Linear", "parent_id"] == by_path.loc["MyModule", "node_id"]


# --- 9. interval arithmetic (the old test_ranges.py) ---------------------------------------------

def test_interval_union():
    """Merging (1.1, 2.2), (1.5, 2.3), (3.3, 3.9) and the ranges inside it, (4.1, 4.2) gives
    (1.1, 2.3), (3.3, 3.9), (4.1, 4.2): 1.9 in all."""
    starts = [1.1, 1.5, 3.3, 3.5, 3.7, 4.1]
    ends = [2.2, 2.3, 3.9, 3.6, 3.8, 4.2]
    assert union_length(starts, ends, ([0], [10]))[0] == pytest.approx(1.2 + 0.6 + 0.1)
    # the same ranges as windows of their own: each merged range's length, nothing between
    assert union_length(starts, ends, ([1.1, 3.3, 4.1], [2.3, 3.9, 4.2])) == pytest.approx([1.2, 0.6, 0.1])


def test_interval_subtraction_and_intersection():
    """Ranges a = (1.1, 2.2), (3.3, 4.4), (5.5, 6.6) and b = (0, 0.1), (1.0, 1.4), (1.5, 1.6),
    (1.9, 3.4), (4.3, 4.6): a minus b = (1.4, 1.5), (1.6, 1.9), (3.4, 4.3), (5.5, 6.6) (2.4 in
    all); a and b = (1.1, 1.4), (1.5, 1.6), (1.9, 2.2), (3.3, 3.4), (4.3, 4.4) (0.9). With b
    outranking a, a's exclusive time is a minus b, and b's time inside a is the intersection."""
    a = ([1.1, 3.3, 5.5], [2.2, 4.4, 6.6])
    b = ([0, 1.0, 1.5, 1.9, 4.3], [0.1, 1.4, 1.6, 3.4, 4.6])
    parts = exclusive_time(a, [b, a])
    assert parts[:, 1] == pytest.approx([0.1 + 0.3, 0.9, 1.1])  # a minus b, per range of a
    assert parts[:, 0] == pytest.approx([0.3 + 0.1 + 0.3, 0.1 + 0.1, 0])  # a and b, per range of a
    assert parts.sum() == pytest.approx(3.3)  # the sum of a's lengths, as get_ranges_sum
