"""Recommendations fit the run (`Profile.recommendations`): each states what it tested, none
advises what the run already does, collective kernels are never fusion candidates, one item
per cause, ranked by the time it could save. Expected outcomes are worked out on paper for
hand-made traces, or counted from the raw events of the bundled samples."""

import gzip
import json

import pytest

import tb_plugin

from .helpers import SAMPLES, covered_length, kernel, op, raw_events, runtime, shared_trace, write_trace

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


EW_ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >(int)"
EW_MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, at::detail::Array<char*, 3> >(int)"
REDUCE = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float> > >()"
CUDNN = "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*)"
GEMM = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>(Params)"


def test_collective_kernels_are_never_fusion_candidates(tmp_path):
    """N N N A B C, twice, on one stream (N an NCCL all-reduce of 30 µs; A, B, C element-wise
    and reduction kernels of 5, 6, 7 µs). N | N | N takes 180 of the 216 µs of kernel time and
    every window with an N is communication; the candidate is A | B | C: 2 x 18 = 36 µs (17%
    >= 10%) in the trace's one step (no ProfilerStep), and fused into one kernel as long as
    its average, 36 x 2/3 = 24 µs per step could be saved."""
    block = [(NCCL, 30)] * 3 + [(EW_ADD, 5), (EW_MUL, 6), (REDUCE, 7)]
    rec = _by_id(tb_plugin.load(_stream_trace(tmp_path, block * 2)).recommendations())["fusion_candidate"]
    assert " | ".join((EW_ADD, EW_MUL, REDUCE)) in rec["text"] and "nccl" not in rec["text"].lower()
    assert rec["numbers"]["device_us"] == 36 and rec["numbers"]["share_pct"] == pytest.approx(100 * 36 / 216)
    assert rec["saving_us"] == pytest.approx(24) and rec["steps"] == 1
    assert "no library, collective" in rec["condition"]


@pytest.mark.parametrize("library", [CUDNN, GEMM, "void cublasLt::splitKreduce_kernel<32, 16, int, float>(float*)",
                                     "Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1_SN", "flash_fwd_kernel<Flash_fwd_kernel_traits>"])
def test_library_kernels_are_never_fusion_members(tmp_path, library):
    """A library kernel (40 µs) followed by two element-wise ones (5, 6 µs), four times: every
    repeating window of three holds the library kernel (cuDNN, CUTLASS, cuBLASLt, Tensile,
    FlashAttention), which fusion cannot remove: no fusion candidate, although the sequence is
    all of the kernel time."""
    ids = [r["id"] for r in tb_plugin.load(_stream_trace(tmp_path, [(library, 40), (EW_ADD, 5), (EW_MUL, 6)] * 4))
           .recommendations()]
    assert "fusion_candidate" not in ids


def _stepped_stream_trace(tmp_path, names_and_durs, steps):
    """`names_and_durs` launched one after another in each of `steps` ProfilerSteps of 1000
    µs (kernel i at +10 i + 100, launched at +10 i, 2 µs calls)."""
    events = []
    for s in range(steps):
        base = 1000 * s
        events.append(op(f"ProfilerStep#{s + 1}", base, 1000, cat="user_annotation"))
        for i, (name, dur) in enumerate(names_and_durs):
            corr = 100 * s + i + 1
            events += [op("aten::work", base + 10 * i, 5, **{"External id": corr}),
                       runtime("cudaLaunchKernel", base + 10 * i + 1, 2, corr, corr),
                       kernel(name, base + 100 + 10 * i, dur, corr)]
    return write_trace(tmp_path / "w.pt.trace.json", events, distributedInfo={"rank": 0})


def test_fusion_saving_is_per_step_and_bounded_by_the_fusible_kernels(tmp_path):
    """Three steps, each running add, mul, mean (5, 6, 7 µs) twice: the sequence add | mul |
    mean occurs 2 x 3 times for 36 µs per step (all of the kernel time); fused, at most 2 of
    its 3 kernels' time is saved: 24 µs per step, a mean over 3 steps, far below the step."""
    rec = _by_id(tb_plugin.load(_stepped_stream_trace(tmp_path, [(EW_ADD, 5), (EW_MUL, 6), (REDUCE, 7)] * 2, 3))
                 .recommendations())["fusion_candidate"]
    assert rec["steps"] == 3 and rec["numbers"]["device_us"] == pytest.approx(36)
    assert rec["saving_us"] == pytest.approx(24) and "per step" in rec["text"]


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
    steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#"))
    items = tb_plugin.load(path).recommendations()
    rec = _by_id(items)["launch_bound"]
    assert (rec["numbers"]["launch_bound"], rec["numbers"]["kernels"]) == (len(bound), len(one_by_one))
    assert rec["numbers"]["uses_cuda_graphs"] and rec["numbers"]["uses_compile"]
    assert "already uses torch.compile and CUDA graphs" in rec["text"]
    # per step: the launch calls' time beyond their kernels', over the raw ProfilerSteps
    assert rec["steps"] == steps
    assert rec["saving_us"] == pytest.approx(sum(calls[k["args"]["correlation"]]["dur"] - k["dur"] for k in bound) / steps)
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
    most 120 x (5 - 1) = 480 µs in its one step. The run compiles but replays no graph: the advice is
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
    """DataLoader 600 µs per step, against 1000 - 40 - 600 = 360 µs per step of other host
    time (launch calls and CPU work) while the GPU idles: the data-loading advice, not "reduce
    CPU work between launches", saving at most the 600 µs per step (mean of 2 steps). The GPU
    is busy 80 of 2000 µs: low utilisation, no saving of its own, comes last."""
    items = tb_plugin.load(_loader_trace(tmp_path, 600)).recommendations()
    assert [r["id"] for r in items] == ["input_pipeline_bound", "low_gpu_utilization"]
    rec = items[0]
    assert (rec["saving_us"], rec["steps"], rec["numbers"]["host_work_us"]) == (600, 2, 360)
    assert "largest part of the time the GPU waits on the host" in rec["text"]
    assert "60.0% > 5%" in rec["condition"]


def test_host_bound_ranks_above_a_smaller_dataloader(tmp_path):
    """DataLoader 100 µs per step (10% > 5%) against 1000 - 40 - 100 = 860 µs per step of
    other host time while the GPU idles: host-bound (saving at most 860 µs per step) comes
    first, then the input pipeline (100 per step), then low utilisation (4%, no saving of its
    own)."""
    items = tb_plugin.load(_loader_trace(tmp_path, 100)).recommendations()
    assert [(r["id"], r["saving_us"]) for r in items] == [("host_bound", 860), ("input_pipeline_bound", 100),
                                                          ("low_gpu_utilization", None)]
    assert "Reduce CPU work between launches (torch.compile, CUDA graphs" in items[0]["text"]
    assert "largest part" not in items[1]["text"]
    # HTA's breakdown on paper, cut at the steps: the stream idles 640..820 and 840..1000 in
    # step 1, 1000..1620 and 1640..1820 in step 2: 1140 µs, 570 per step, all host wait
    assert items[0]["numbers"]["idle_host_wait_us"] == 570 and items[0]["numbers"]["idle_us"] == 570


def test_resnet_sample_dataloader_replaces_reduce_cpu_work():
    """The ResNet-50 sample's DataLoader takes a third of the step: no item tells the user to
    reduce CPU work between launches."""
    items = tb_plugin.load(_sample("gpu_resnet50_v100")).recommendations()
    assert "host_bound" not in _by_id(items) and "input_pipeline_bound" in _by_id(items)
    assert not any("Reduce CPU work between launches" in r["text"] for r in items)


def _raw_steps(path):
    """The host-side ProfilerStep ranges of a trace (not their GPU copies), from the raw events."""
    return [e for e in raw_events(path) if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
            and str(e.get("cat", "")).lower() in ("user_annotation", "operator", "cpu_op")]


@pytest.mark.parametrize("run", ["cpu_cnn", "cpu_ddp_gloo", "cpu_fsdp2_gloo", "cpu_mesh_2d_gloo", "gpu_a100_nccl",
                                 "gpu_h100_compiled", "gpu_h100_eager_nccl", "gpu_resnet50_v100"])
def test_every_item_states_its_test_and_items_rank_by_saving(run):
    """Every saving is per step, a mean over as many steps as the raw events hold
    ProfilerSteps, never above the mean step; items rank by it, those without one last."""
    path = _sample(run)
    profile = tb_plugin.load(path)
    items = profile.recommendations()
    assert items and all(r["condition"] for r in items)
    steps = len({e["name"] for e in _raw_steps(path)})
    assert {r["steps"] for r in items} == {steps}
    step_mean = profile.overview()["step_mean"]["total_us"]
    savings = [r["saving_us"] for r in items]
    measured = [s for s in savings if s is not None]
    assert all(0 <= s <= step_mean for s in measured)
    assert measured == sorted(measured, reverse=True)
    assert savings[:len(measured)] == measured  # the unmeasured ones come last


@pytest.mark.parametrize("name", ["worker0.1623143089861.pt.trace.json.gz", "worker0.1623143566756.pt.trace.json.gz"])
def test_v100_resnet_2021_advice_fits_a_v100_and_its_steps(name):
    """The 2021 V100 ResNet-50 runs (compute capability 7.0 in their deviceProperties, no
    Tensor Core kernel): Tensor Core advice without TF32 or bf16 (from 8.0) and without a
    saving (how much faster the convolutions would run is not in the trace: the eligible
    time per step is shown as measured, below the step); no fusion candidate holds a cuDNN
    kernel; every saving is below the mean step (the raw ProfilerSteps' mean is a lower
    bound of it: the step windows run on to the end of the step's device work)."""
    path = shared_trace("resnet50_v100_2021", name)
    doc = json.loads(gzip.decompress(path.read_bytes()))
    used = {e["args"]["device"] for e in doc["traceEvents"] if str(e.get("cat", "")).lower() == "kernel"}
    props = [p for p in doc["deviceProperties"] if p["id"] in used]
    assert [(p["computeMajor"], p["computeMinor"]) for p in props] == [(7, 0)]  # the case: a V100
    profile = tb_plugin.load(path)
    items = _by_id(profile.recommendations())
    raw = _raw_steps(path)
    raw_mean = sum(e["dur"] for e in raw) / len(raw)
    step_mean = profile.overview()["step_mean"]["total_us"]
    assert step_mean >= raw_mean
    tc = items["tensor_cores_unused"]
    assert tc["saving_us"] is None and 0 < tc["measured_us"] < raw_mean and tc["steps"] == len(raw)
    assert "TF32" not in tc["text"] and "bf16" not in tc["text"] and "float16" in tc["text"]
    assert all(r["saving_us"] is None or r["saving_us"] <= step_mean for r in items.values())
    assert "cudnn" not in items.get("fusion_candidate", {"text": ""})["text"].lower()


def _matmul_trace(tmp_path, major, minor):
    """One step: aten::mm launching a 100 µs fp32 SIMT GEMM (no Tensor Core) and aten::add a
    10 µs element-wise kernel, on a GPU of compute capability major.minor."""
    events = [op("ProfilerStep#1", 0, 300, cat="user_annotation"),
              op("aten::mm", 10, 20, **{"External id": 1}), runtime("cudaLaunchKernel", 12, 5, 1, 1),
              kernel("volta_sgemm_128x64_nn", 30, 100, 1),
              op("aten::add", 40, 10, **{"External id": 2}), runtime("cudaLaunchKernel", 42, 5, 2, 2),
              kernel(EW_ADD, 140, 10, 2)]
    props = [{"id": 0, "name": "GPU", "totalGlobalMem": 16e9, "computeMajor": major, "computeMinor": minor}]
    return write_trace(tmp_path / "w.pt.trace.json", events, deviceProperties=props)


@pytest.mark.parametrize("major, minor, tf32", [(7, 0, False), (7, 5, False), (8, 0, True), (9, 0, True)])
def test_precision_advice_follows_the_compute_capability(tmp_path, major, minor, tf32):
    """The GEMM is 100 of 110 µs of kernel time, none on Tensor Cores: TF32 and bf16 are
    advised from compute capability 8.0 on, fp16 autocast below it; never a saving, the
    eligible 100 µs per step as measured."""
    rec = _by_id(tb_plugin.load(_matmul_trace(tmp_path, major, minor)).recommendations())["tensor_cores_unused"]
    assert ("TF32" in rec["text"] and "bf16" in rec["text"]) is tf32
    assert ("float16" in rec["text"]) is not tf32
    assert rec["saving_us"] is None and rec["measured_us"] == pytest.approx(100)


@pytest.mark.parametrize("run, marker, ddp", [("cpu_ddp_gloo", "DistributedDataParallel.forward", True),
                                              ("cpu_fsdp2_gloo", "FSDP::", False),
                                              ("cpu_mesh_2d_gloo", "FSDP::", False)])
def test_communication_advice_fits_the_parallelism_the_run_uses(run, marker, ddp):
    """DDP buckets are advised only to a DDP run (its DistributedDataParallel.forward ranges,
    in the raw events); FSDP2 runs (FSDP:: annotations) and the 2-D mesh run (FSDP2 over dp,
    tensor parallel over tp, as its process groups say) get advice of their own; the
    exposed communication is per step, below the step."""
    path = _sample(run)
    events = raw_events(path)
    assert any(str(e.get("name", "")).startswith(marker) for e in events)
    profile = tb_plugin.load(path)
    rec = _by_id(profile.recommendations())["communication_heavy"]
    assert ("bucket" in rec["text"]) is ddp and ("DDP" in rec["text"]) is ddp
    assert ("FSDP" in rec["text"]) is not ddp
    if run == "cpu_mesh_2d_gloo":
        assert "tensor parallel" in rec["text"] and rec["numbers"]["tensor_parallel"]
    assert rec["saving_us"] <= profile.overview()["step_mean"]["total_us"]


def test_blocking_hip_copy_is_synchronisation_advice_not_host_work(tmp_path):
    """The MI250 trace with a blocking hipMemcpyWithStream planted at the end of its step
    (20 ms, its copy running in its last 5 µs after the device drained) and a hipGraphLaunch
    (the run replays graphs). The GPU idles while the CPU is blocked: a synchronisation item
    whose saving per step is the time blocking calls held the CPU while no device work ran
    (summed from the raw events), no host-bound item, and no advice to use CUDA graphs."""
    doc = json.loads(gzip.decompress(shared_trace("rocm_mi250").read_bytes()))
    events = doc["traceEvents"]
    step = next(e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
    t = max(step["ts"] + step["dur"], max(e["ts"] + e["dur"] for e in device)) + 10
    pid, tid = step["pid"], step["tid"]
    events += [
        {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyWithStream", "pid": pid, "tid": tid, "ts": t, "dur": 20000,
         "args": {"correlation": 9001, "External id": 9001}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Host)", "pid": 2, "tid": 0, "ts": t + 19990,
         "dur": 5, "args": {"correlation": 9001, "device": 2, "stream": 0}},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipGraphLaunch", "pid": pid, "tid": tid, "ts": step["ts"] + 1,
         "dur": 1, "args": {"correlation": 9002, "External id": 9002}},
    ]
    step["dur"] = t + 20010 - step["ts"]
    path = tmp_path / "worker0.pt.trace.json"
    path.write_text(json.dumps(doc))
    device = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in ("kernel", "gpu_memcpy"))
    end = step["ts"] + step["dur"]
    blocking = [e for e in events if e.get("cat") == "cuda_runtime" and e["name"] == "hipMemcpyWithStream"
                and step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end]
    blocked = sum(e["dur"] - covered_length(e["ts"], e["ts"] + e["dur"], device) for e in blocking)
    items = tb_plugin.load(path).recommendations()
    by_id = _by_id(items)
    assert "host_bound" not in by_id
    rec = by_id["host_synchronisation"]
    assert rec["saving_us"] == pytest.approx(blocked, abs=1e-3) and blocked > 19990
    assert "hipMemcpyWithStream" in rec["text"]
    for item in items:
        assert "Consider CUDA graphs" not in item["text"] and "(torch.compile, CUDA graphs" not in item["text"]
