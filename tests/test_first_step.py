"""Where the first step starts: device work from before the profiler started is not in it
(`common.step_windows`, torch-tb-profiler 0.4.3's rule), worked out by hand on tiny traces."""

import tb_plugin

from .helpers import kernel, op, runtime, write_trace


def _steps(profile):
    return profile.steps().set_index("step")


ORPHANS = [
    op("ProfilerStep#1", 100, 200), op("aten::mm", 120, 60, **{"External id": 1}),
    runtime("cudaLaunchKernel", 130, 10, 1, 1), kernel("gemm", 170, 50, 1),
    kernel("left_from_before", 80, 60, 900),  # no launch in the trace, ends (140) before 170
    kernel("still_running", 150, 30, 901),  # no launch either, but ends (180) after 170
    op("ProfilerStep#2", 300, 100), op("aten::add", 310, 20, **{"External id": 2}),
    runtime("cudaLaunchKernel", 315, 5, 2, 2), kernel("add", 330, 40, 2),
]


def test_first_step_starts_after_device_work_launched_before_profiling(tmp_path):
    """torch-tb-profiler 0.4.3's rule, worked by hand: step 1's first device activity it
    launched is `gemm` at 170; device work no step launched that ended before 170 is
    `left_from_before` (ends 140), so step 1 starts at max(100, 140) = 140 and ends at 300.
    `still_running` ends after 170 and does not move the start.

    Step 1 [140, 300], 160 µs: Kernel = gemm ∪ still_running = [150, 220] = 70; the launch
    [130, 140] ends at the start: Runtime 0; CPU Exec = aten::mm [140, 180] less the kernels =
    [140, 150] = 10; Other 160 - 80 = 80. (Before: [100, 300], Kernel 110 with the orphan.)
    Step 2 [300, 400]: Kernel 40, Runtime 5, CPU Exec 20 - 5 = 15, Other 40."""
    steps = _steps(tb_plugin.load(str(write_trace(tmp_path / "w.pt.trace.json", ORPHANS))))
    columns = ["kernel_us", "runtime_us", "cpu_exec_us", "other_us", "total_us"]
    assert steps.loc[1, columns].tolist() == [70, 0, 10, 80, 160]
    assert steps.loc[2, columns].tolist() == [40, 5, 15, 40, 100]


def test_first_step_without_device_work_keeps_its_host_start(tmp_path):
    """The rule needs the first step's own device work to compare with: without it the step
    starts at its host start, whatever ran before (0.4.3 the same)."""
    events = [e for e in ORPHANS if e.get("args", {}).get("correlation") != 1]
    steps = _steps(tb_plugin.load(str(write_trace(tmp_path / "w.pt.trace.json", events))))
    assert steps.loc[1, "total_us"] == 200


def test_work_launched_outside_every_step_counts_as_before_the_first_step(tmp_path):
    """A kernel [95, 145] launched at 90, before ProfilerStep#1 opens: no step launched it and
    it ends before step 1's own `gemm` (170), so step 1 starts at 145. Step 1 [145, 300],
    155 µs: Kernel [150, 220] = 70, CPU Exec = aten::mm [145, 150] = 5, Other 80."""
    events = ORPHANS + [runtime("cudaLaunchKernel", 90, 5, 3, 0), kernel("launched_before_step_1", 95, 50, 3)]
    steps = _steps(tb_plugin.load(str(write_trace(tmp_path / "w.pt.trace.json", events))))
    columns = ["kernel_us", "runtime_us", "cpu_exec_us", "other_us", "total_us"]
    assert steps.loc[1, columns].tolist() == [70, 0, 5, 80, 155]
