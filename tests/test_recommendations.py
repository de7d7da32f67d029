"""Recommendations fit the run (`Profile.recommendations`): each states what it tested, none
advises what the run already does, collective kernels are never fusion candidates, one item
per cause, ranked by the time it could save. Expected outcomes are worked out on paper for
hand-made traces, or counted from the raw events of the bundled samples."""

import pytest

import tb_plugin

from .helpers import SAMPLES, kernel, op, raw_events, runtime, write_trace

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "runtime")


def _sample(name):
    files = sorted((SAMPLES / name).glob("*.pt.trace.json.gz"))
    if not files:
        pytest.skip(f"samples/{name} is not available")
    return files[0]


def _by_id(items):
    return {r["id"]: r for r in items}


def _stream_trace(tmp_path, names_and_durs):
    """One op launching each kernel in turn; kernel i starts 1 µs after kernel i-1 ends."""
    events, t = [], 1000
    for i, (name, dur) in enumerate(names_and_durs):
        events += [op("aten::work", i * 10, 5, **{"External id": i + 1}),
                   runtime("cudaLaunchKernel", i * 10 + 1, 2, i + 1, i + 1), kernel(name, t, dur, i + 1)]
        t += dur + 1
    return write_trace(tmp_path / "w.pt.trace.json", events, distributedInfo={"rank": 0})


def test_collective_kernels_are_never_fusion_candidates(tmp_path):
    """N N N A B C, twice, on one stream (N an NCCL all-reduce of 30 µs; A, B, C 5, 6, 7 µs).
    N | N | N takes 180 of the 216 µs of kernel time and every window with an N is
    communication; the candidate is A | B | C: 2 x 18 = 36 µs (17% >= 10%), and fused into
    one kernel as long as its average, 36 x 2/3 = 24 µs could be saved."""
    block = [(NCCL, 30)] * 3 + [("A", 5), ("B", 6), ("C", 7)]
    rec = _by_id(tb_plugin.load(_stream_trace(tmp_path, block * 2)).recommendations())["fusion_candidate"]
    assert "A | B | C" in rec["text"] and "nccl" not in rec["text"].lower()
    assert rec["numbers"]["device_us"] == 36 and rec["numbers"]["share_pct"] == pytest.approx(100 * 36 / 216)
    assert rec["saving_us"] == pytest.approx(24)
    assert "without collective" in rec["condition"]


@pytest.mark.parametrize("name", [NCCL, "triton_poi_fused_add_mul_0"])
def test_no_fusion_candidate_of_communication_or_inductor_kernels(tmp_path, name):
    """Only one kernel repeats (every kernel time in it): a collective is not fused into
    computation, and an Inductor kernel is torch.compile's fusion already."""
    ids = [r["id"] for r in tb_plugin.load(_stream_trace(tmp_path, [(name, 20)] * 8)).recommendations()]
    assert "fusion_candidate" not in ids


def test_a100_sample_no_nccl_fusion_advice():
    """The A100 sample's stream runs NCCL all-reduce kernels back to back (counted from the raw
    events, so the case is real); no recommendation proposes fusing them."""
    path = _sample("gpu_a100_nccl")
    kernels = sorted((e for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") == "kernel"),
                     key=lambda e: (e["args"].get("device"), e["args"].get("stream"), e["ts"]))
    triples = sum(1 for a, b, c in zip(kernels, kernels[1:], kernels[2:])
                  if all("nccl" in k["name"].lower() for k in (a, b, c))
                  and a["args"]["stream"] == b["args"]["stream"] == c["args"]["stream"])
    assert triples >= 2
    for rec in tb_plugin.load(path).recommendations():
        assert not (rec["id"] == "fusion_candidate" and "nccl" in rec["text"].lower())


def test_run_using_cuda_graphs_and_compile_is_not_told_to_use_them():
    """The H100 compiled sample replays Inductor's code in CUDA graphs (raw cudaGraphLaunch
    calls and Torch-Compiled Region ranges). Launch-bound counts only kernels launched one by
    one (a graph's kernels share its one launch call), and the advice is about the code
    outside the graphs, not to start using what the run uses."""
    path = _sample("gpu_h100_compiled")
    events = raw_events(path)
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})}
    assert any(c["name"] == "cudaGraphLaunch" for c in calls.values())
    assert any(e.get("name", "").startswith("Torch-Compiled Region") for e in events)
    one_by_one = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"
                  and e["args"].get("correlation") in calls and "GraphLaunch" not in calls[e["args"]["correlation"]]["name"]]
    bound = [k for k in one_by_one
             if calls[k["args"]["correlation"]]["dur"] <= 50 and k["dur"] < calls[k["args"]["correlation"]]["dur"]]
    items = tb_plugin.load(path).recommendations()
    rec = _by_id(items)["launch_bound"]
    assert (rec["numbers"]["launch_bound"], rec["numbers"]["kernels"]) == (len(bound), len(one_by_one))
    assert rec["numbers"]["uses_cuda_graphs"] and rec["numbers"]["uses_compile"]
    assert "already uses torch.compile and CUDA graphs" in rec["text"]
    assert rec["saving_us"] == pytest.approx(sum(calls[k["args"]["correlation"]]["dur"] - k["dur"] for k in bound))
    for item in items:
        assert "Consider CUDA graphs or torch.compile" not in item["text"]
        assert "(torch.compile, CUDA graphs" not in item["text"]


def test_eager_run_is_told_to_use_cuda_graphs_or_compile():
    """The eager H100 sample uses neither (no graph launch, no compiled region in the raw
    events): there the same rule does advise them."""
    path = _sample("gpu_h100_eager_nccl")
    events = raw_events(path)
    assert not any("GraphLaunch" in e.get("name", "") or e.get("name", "").startswith("Torch-Compiled Region")
                   for e in events)
    rec = _by_id(tb_plugin.load(path).recommendations())["launch_bound"]
    assert "Consider CUDA graphs or torch.compile" in rec["text"]
    assert not rec["numbers"]["uses_cuda_graphs"] and not rec["numbers"]["uses_compile"]


def test_compiled_run_without_cuda_graphs_is_pointed_at_reduce_overhead(tmp_path):
    """A torch.compile'd step (a Torch-Compiled Region around the launches) of 120 kernels of
    1 µs, each launched by a 5 µs call: all launch-bound (120 >= 100, 100% >= 20%), saving at
    most 120 x (5 - 1) = 480 µs. The run compiles but replays no graph: the advice is
    reduce-overhead, not to start using torch.compile."""
    events = [op("ProfilerStep#1", 0, 2000, cat="user_annotation"),
              op("Torch-Compiled Region: 0/0", 1, 1990, cat="user_annotation")]
    for i in range(120):
        events += [runtime("cudaLaunchKernel", 10 + 10 * i, 5, i + 1, i + 1), kernel(f"triton_poi_fused_{i}", 16 + 10 * i, 1, i + 1)]
    rec = _by_id(tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events)).recommendations())["launch_bound"]
    assert rec["numbers"]["uses_compile"] and not rec["numbers"]["uses_cuda_graphs"]
    assert (rec["numbers"]["launch_bound"], rec["numbers"]["kernels"]) == (120, 120)
    assert rec["saving_us"] == pytest.approx(480)
    assert 'mode="reduce-overhead"' in rec["text"] and "Consider CUDA graphs or torch.compile" not in rec["text"]


def test_one_launch_bound_item():
    """The ResNet-50 sample meets both launch-bound tests (HTA's flag and many tiny kernels per
    step): one item says so, naming both, with the tiny-kernel share counted from the raw
    kernels that a runtime call launched."""
    path = _sample("gpu_resnet50_v100")
    events = raw_events(path)
    calls = {e["args"]["correlation"] for e in events
             if e.get("ph") == "X" and str(e.get("cat", "")).lower() in RUNTIME_CATS and "correlation" in e.get("args", {})}
    launched = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"
                and e["args"].get("correlation") in calls]
    items = tb_plugin.load(path).recommendations()
    about_launches = [r["id"] for r in items if "launch-bound" in r["text"].lower()]
    assert about_launches == ["launch_bound"]
    rec = _by_id(items)["launch_bound"]
    tiny = sum(k["dur"] < 10 for k in launched) / len(launched)
    assert rec["numbers"]["tiny_kernel_share"] == pytest.approx(tiny)
    assert "shorter than their launch call" in rec["condition"] and "under 10 µs" in rec["condition"]


def _loader_trace(tmp_path, loader_us):
    """Two 1000 µs steps. Each: the DataLoader for `loader_us`, then aten::work until the
    step's end, launching (5 µs calls) a kernel at +610 (runs +620 to +640) and one at +810
    (runs +820 to +840). Every stream gap is host wait (each kernel launched after the one
    before ended). Per step: kernels 40 µs, launch calls 10, DataLoader `loader_us`, the rest
    CPU work: 1000 - 40 - 10 - loader_us."""
    events = []
    for step, base in enumerate((0, 1000)):
        events += [op(f"ProfilerStep#{step + 1}", base, 1000, cat="user_annotation"),
                   op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", base, loader_us, cat="user_annotation"),
                   op("aten::work", base + loader_us, 1000 - loader_us, **{"External id": 10 * step + 1})]
        for i, at in enumerate((610, 810)):
            corr = 10 * step + i + 1
            events += [runtime("cudaLaunchKernel", base + at, 5, corr, 10 * step + 1),
                       kernel(f"K{i}", base + at + 10, 20, corr)]
    return write_trace(tmp_path / "w.pt.trace.json", events, distributedInfo={"rank": 0})


def test_dataloader_dominating_the_host_wait_gets_data_loading_advice(tmp_path):
    """DataLoader 600 µs per step: 1200 µs, against 2 x (1000 - 40 - 10 - 600) + 2 x 10 =
    720 µs of other host time while the GPU idles: the data-loading advice, not "reduce CPU
    work between launches". The GPU is busy 80 of 2000 µs: low utilisation, no saving of its
    own, comes last."""
    items = tb_plugin.load(_loader_trace(tmp_path, 600)).recommendations()
    assert [r["id"] for r in items] == ["input_pipeline_bound", "low_gpu_utilization"]
    rec = items[0]
    assert rec["saving_us"] == 1200 and rec["numbers"]["host_other_us"] == 720
    assert "largest part of the time the GPU waits on the host" in rec["text"]
    assert "60.0% > 5%" in rec["condition"]


def test_host_bound_ranks_above_a_smaller_dataloader(tmp_path):
    """DataLoader 100 µs per step (200 µs, 10% > 5%) against 2 x (1000 - 40 - 10 - 100) + 2 x 10
    = 1720 µs of other host time: host-bound (saving 1720) comes first, then the input
    pipeline (saving 200), then low utilisation (4%, no saving of its own)."""
    items = tb_plugin.load(_loader_trace(tmp_path, 100)).recommendations()
    assert [(r["id"], r["saving_us"]) for r in items] == [("host_bound", 1720), ("input_pipeline_bound", 200),
                                                          ("low_gpu_utilization", None)]
    assert "Reduce CPU work between launches" in items[0]["text"]
    assert "largest part" not in items[1]["text"]
    # HTA's breakdown on paper: stream 620..1840 idles 1140 of 1220 µs, all of it host wait
    assert items[0]["numbers"]["idle_host_wait_us"] == 1140 and items[0]["numbers"]["idle_us"] == 1140


def test_resnet_sample_dataloader_replaces_reduce_cpu_work():
    """The ResNet-50 sample's DataLoader takes a third of the step: no item tells the user to
    reduce CPU work between launches."""
    items = tb_plugin.load(_sample("gpu_resnet50_v100")).recommendations()
    assert "host_bound" not in _by_id(items) and "input_pipeline_bound" in _by_id(items)
    assert not any("Reduce CPU work between launches" in r["text"] for r in items)


@pytest.mark.parametrize("run", ["cpu_cnn", "cpu_ddp_gloo", "gpu_a100_nccl", "gpu_h100_compiled",
                                 "gpu_h100_eager_nccl", "gpu_resnet50_v100"])
def test_every_item_states_its_test_and_items_rank_by_saving(run):
    items = tb_plugin.load(_sample(run)).recommendations()
    assert items and all(r["condition"] for r in items)
    savings = [r["saving_us"] for r in items]
    measured = [s for s in savings if s is not None]
    assert measured == sorted(measured, reverse=True)
    assert savings[:len(measured)] == measured  # the unmeasured ones come last
