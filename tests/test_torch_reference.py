"""Operator counts and times against torch's own `prof.key_averages()` for a real CPU run."""

import collections

import pytest

import tb_plugin

from .helpers import key_averages_counts

torch = pytest.importorskip("torch", reason="torch is needed to record a reference trace")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch_ref")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10))
    data = torch.randn(4, 3, 16, 16)
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, record_shapes=True, profile_memory=True) as prof:
        for _ in range(3):
            with torch.profiler.record_function("train_step"):
                model(data).sum().backward()
    path = out / "worker0.pt.trace.json"
    prof.export_chrome_trace(str(path))
    return prof, tb_plugin.load(path)


def _torch_raw_events(prof):
    """torch's own record of the run, before its summaries merge anything."""
    return [e for e in prof.profiler.kineto_results.events() if not e.is_python_function() and e.device_type().name == "CPU"]


def test_operator_counts_and_durations_match_torch_record(recorded):
    prof, profile = recorded
    ops = profile.model.ops
    raw = _torch_raw_events(prof)
    theirs_count = collections.Counter(e.name() for e in raw)
    theirs_us = collections.defaultdict(float)
    for e in raw:
        theirs_us[e.name()] += e.duration_ns() / 1000
    ours = ops.groupby("name", observed=True)["dur"].agg(["count", "sum"])
    assert len(ours) > 10
    for name, row in ours.iterrows():
        assert row["count"] == theirs_count[name], name
        # the trace writes each duration rounded to the nanosecond
        assert row["sum"] == pytest.approx(theirs_us[name], abs=row["count"] * 1e-3 + 1e-6), name


def test_key_averages_counts_follow_from_nesting(recorded):
    """key_averages() drops a child that has its parent's name and no sibling; the same rule
    applied to our parent links must give its counts exactly."""
    prof, profile = recorded
    ours = key_averages_counts(profile.model.ops)
    averages = {e.key: e.count for e in prof.key_averages()}
    assert ours["aten::sum"] == averages["aten::sum"] == 6
    for name, count in averages.items():
        if name in ours:
            assert ours[name] == count, name


def test_annotation_nests_operators(recorded):
    _, profile = recorded
    ops = profile.model.ops
    steps = ops.index[ops["name"] == "train_step"]
    assert len(steps) == 3
    conv = ops[ops["name"] == "aten::conv2d"]
    # walk each conv2d up to its root: it is a train_step annotation
    parent = ops["parent"].to_numpy()
    for i in conv.index:
        while parent[i] >= 0:
            i = parent[i]
        assert ops["name"][i] == "train_step"


def test_operator_shapes_and_groups_equal_key_averages_with_tensor_lists(tmp_path):
    """torch.cat / torch.stack take a tensor list: key_averages(group_by_input_shape=True)
    writes its element as [] (the trace lists each tensor's shape). The operator table by
    name and shape has key_averages' shape texts and, per (name, shape), its call counts."""
    a, b = torch.randn(2, 3), torch.randn(4, 3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2):
            torch.cat([a, b])
            torch.cat([a, a, a], dim=1)
            torch.stack([a, a], dim=1)
            torch.add(a, 1.0)
    path = tmp_path / "worker0.pt.trace.json"
    prof.export_chrome_trace(str(path))
    table = tb_plugin.load(path).operators(group_by="name_shape")
    ours = {(r.name, r.input_shape): r.calls for r in table.itertuples()}
    theirs = {(e.key, str(e.input_shapes)): e.count for e in prof.key_averages(group_by_input_shape=True)}
    for key in (("aten::cat", "[[], []]"), ("aten::stack", "[[], []]"), ("aten::add", "[[2, 3], [], []]")):
        assert key in theirs  # the shapes torch prints, including a tensor list's []
    for key, count in theirs.items():
        if key[0] in ("aten::cat", "aten::stack", "aten::add"):
            assert ours[key] == count, key


@torch.library.custom_op("tb_plugin_test::python_bodied", mutates_args=())
def _python_bodied(x: torch.Tensor) -> torch.Tensor:
    """An op whose body is Python (as a CompiledFunction's is): frames inside an operator."""
    def python_work():
        return sum(range(20_000))
    python_work()
    return x * 2 + 1


@pytest.fixture(scope="module")
def recorded_with_stack(tmp_path_factory):
    """A torch.compile'd (aot_eager: AOTAutograd's CompiledFunction, no C++ compiler) MLP and
    a custom op with a Python body, forward and backward, recorded with with_stack=True."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    compiled = torch.compile(model, backend="aot_eager")
    data = torch.randn(16, 32)
    compiled(data).sum().backward()  # compile outside the profile
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True) as prof:
        for _ in range(2):
            compiled(data).sum().backward()
            _python_bodied(data)
    path = tmp_path_factory.mktemp("torch_stack") / "worker0.pt.trace.json"
    prof.export_chrome_trace(str(path))
    return prof, tb_plugin.load(path)


def test_self_time_with_python_frames_equals_key_averages(recorded_with_stack):
    """torch 2.13 subtracts the Python frames that ran inside an operator from its self time:
    host_self_less_python_us equals key_averages()' self CPU time for every operator both
    list, CompiledFunction and the Python-bodied op included (host_self_us keeps torch 2.11's
    count, `tests/test_gpu_reference.py`)."""
    prof, profile = recorded_with_stack
    assert len(profile.model.python) > 100  # with_stack recorded frames
    theirs = {e.key: e for e in prof.key_averages()}
    ours = profile.operators().set_index("name")
    for name in ("CompiledFunction", "CompiledFunctionBackward", "tb_plugin_test::python_bodied"):
        assert name in ours.index, name
        # the frames inside took most of the op's time: self time far below total
        assert theirs[name].self_cpu_time_total < 0.5 * theirs[name].cpu_time_total, name
    compared = 0
    for name, row in ours.iterrows():
        if name not in theirs:
            continue
        e = theirs[name]
        tolerance = row.calls * 2e-3 + 1e-6  # the trace rounds each time to the nanosecond
        assert row.calls == e.count, name
        assert row.host_total_us == pytest.approx(e.cpu_time_total, abs=tolerance), name
        assert row.host_self_less_python_us == pytest.approx(e.self_cpu_time_total, abs=tolerance), name
        compared += 1
    assert compared > 10
