"""The H100 samples (`samples/generate_gpu.py`: a `torch.compile`d step replayed in CUDA
graphs, and an eager DDP step on NCCL) against torch's own `prof.key_averages()` of the same
steps, which the recording kept in tests/data/gpu_reference: operator counts, each
operator's device time and FLOPs. The differences are deliberate and named: key_averages
counts CUPTI's sync records (`cuda_sync`) as an operator's device time, where we count them
as waits, not work; it counts element-wise FLOPs, where our FLOPs are matrix work (MFU's
convention)."""

import collections
import json
import re

import pytest

import tb_plugin

from .helpers import REPO, SAMPLES, key_averages_counts, raw_events

RUNS = ["gpu_h100_compiled", "gpu_h100_eager_nccl"]
REFERENCE = REPO / "tests" / "data" / "gpu_reference"
_STEP = re.compile(r"^ProfilerStep#\d+$")


def _load(run):
    path, = sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))
    reference = json.loads((REFERENCE / f"{run}.key_averages.json").read_text())
    return path, tb_plugin.load(path), reference["operators"]


@pytest.fixture(scope="module", params=RUNS)
def sample(request):
    return _load(request.param)


@pytest.fixture(scope="module")
def eager():
    return _load("gpu_h100_eager_nccl")


def _sync_us_per_operator(path):
    """From the raw events alone: per operator name, the time of the `cuda_sync` records that
    its runtime calls caused (sync -> runtime call by correlation -> operator by External id)."""
    events = raw_events(path)
    operator = {e["args"]["External id"]: e["name"] for e in events
                if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    caller = {e["args"]["correlation"]: e["args"].get("External id") for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    waits = collections.defaultdict(float)
    for e in events:
        if e.get("cat") == "cuda_sync":
            waits[operator.get(caller.get(e["args"].get("correlation")))] += e["dur"]
    return waits


def test_every_operator_is_counted_as_key_averages_counts_it(sample):
    path, profile, reference = sample
    ours = collections.Counter()
    for name, count in key_averages_counts(profile.model.ops).items():
        ours[_STEP.sub("ProfilerStep*", name)] += count  # key_averages' one key for every step
    recorded = {_STEP.sub("ProfilerStep*", e["name"]) for e in raw_events(path)
                if e.get("cat") in ("cpu_op", "user_annotation")}
    assert len(recorded) > 50 and "ProfilerStep*" in recorded
    for name in recorded:
        assert ours[name] == reference[name]["count"], name


def test_device_time_per_operator_is_key_averages_less_its_sync_waits(sample):
    path, profile, reference = sample
    ours = profile.operators(group_by="name").set_index("name")
    waits = _sync_us_per_operator(path)
    assert sum(waits.values()) > 10  # both samples record CUPTI's sync records
    compared = 0
    for name, row in ours.iterrows():
        theirs = reference[name]
        assert row["device_self_us"] == pytest.approx(theirs["self_device_us"] - waits.get(name, 0.0),
                                                      abs=1e-3 * theirs["count"] + 1e-6), name
        compared += theirs["self_device_us"] > 0
    assert compared >= 10


def test_matrix_flops_equal_key_averages(eager):
    """torch 2.11 writes no `flops` arg into the trace; our FLOPs from the recorded shapes
    equal the ones key_averages() computed during the run."""
    path, profile, reference = eager
    assert not any("flops" in e.get("args", {}) for e in raw_events(path))
    flops = profile.flops().set_index("name")
    for name in ("aten::mm", "aten::addmm"):
        assert reference[name]["flops"] > 1e9
        assert flops.loc[name, "flops"] == reference[name]["flops"], name
        assert flops.loc[name, "source"] == "shapes"


def test_difference_element_wise_flops_are_not_counted(eager):
    """key_averages() counts one FLOP per element of `aten::add` / `aten::mul`; MFU counts
    matrix work, so they have no FLOPs here. Attention, which key_averages does not count, is
    counted from its shapes."""
    _, profile, reference = eager
    flops = profile.flops().set_index("name")
    for name in ("aten::add", "aten::mul"):
        assert reference[name]["flops"] > 0 and name not in flops.index
    attention = "aten::_scaled_dot_product_efficient_attention"
    assert reference[attention]["flops"] == 0 and flops.loc[attention, "flops"] > 0


def test_cuda_graph_replays_hold_their_kernels():
    """The compiled sample's forward and backward run as CUDA graph replays: each
    cudaGraphLaunch with the kernels CUPTI recorded under its correlation."""
    path, profile, _ = _load("gpu_h100_compiled")
    events = raw_events(path)
    launches = {e["args"]["correlation"]: e for e in events if e.get("name") == "cudaGraphLaunch"}
    kernels, durations = collections.Counter(), collections.defaultdict(float)
    for e in events:
        if e.get("cat") == "kernel" and e["args"].get("correlation") in launches:
            kernels[e["args"]["correlation"]] += 1
            durations[e["args"]["correlation"]] += e["dur"]
    ours = profile.cuda_graph_launches()
    assert len(ours) == len(launches) == 6
    assert sorted(ours["kernels"]) == sorted(kernels.values())
    assert sorted(ours["device_us"].round(3)) == sorted(round(d, 3) for d in durations.values())
    assert set(ours["operator"]) == {"CompiledFunction", "CompiledFunctionBackward"}
