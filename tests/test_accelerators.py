"""Device activity of accelerators other than CUDA (`trace/accelerators.py`).

No real MTIA, XPU or HPU trace is at hand: `tests/data/mtia/worker0.pt.trace.json` is written
by hand from the format public traces and HTA's sources show (device pid 0, category
`mtia_ccp_events` with `correlation`, host `mtia_runtime` calls). Times in it, relative to its
earliest event (ProfilerStep#1 at 100 µs after the base 1700000000000000):

    step 1 [100, 300]: aten::mm [110, 160] launches pe_exe [215, 255]; aten::copy_ [165, 185]
        a dma_request [255, 270] of 4096 bytes; aten::add [190, 210] a merge [270, 280];
        event_wait [280, 290] (sync, launched by nothing; the syncs table)
    step 2 [300, 500]: aten::mm [310, 360] launches pe_exe [400, 460]; aten::add [370, 400]
        a remote [460, 480] and a merge [480, 490]; event_record [490, 495] (sync)

Expected figures are worked out on paper from those events (docstrings) and checked against
sums over the raw JSON, and HTA 0.5.0's reading of the same file.
"""

import collections
import re
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import tb_plugin
from tb_plugin.store.cache import ModelCache
from tb_plugin.trace import accelerators
from tb_plugin.views import common, critical_path, regression

from .helpers import covered_length, kernel, op, raw_events, runtime, shared_trace, write_trace

MTIA_TRACE = Path(__file__).parent / "data" / "mtia" / "worker0.pt.trace.json"
COMPUTE, TRANSFER, SYNC = ("pe_exe", "merge", "remote"), ("dma_request",), ("event_record", "event_wait")


@pytest.fixture(scope="module")
def mtia():
    return tb_plugin.load(str(MTIA_TRACE))


@pytest.fixture(scope="module")
def device_events():
    return [e for e in raw_events(MTIA_TRACE) if e.get("cat") == "mtia_ccp_events"]


def test_mtia_compute_is_in_the_kernel_view(mtia, device_events):
    expected = collections.defaultdict(float)
    for e in device_events:
        if e["name"] in COMPUTE:
            expected[e["name"]] += e["dur"]
    table = mtia.kernels()
    assert dict(zip(table["name"], table["total_us"])) == expected == {"pe_exe": 100, "merge": 20, "remote": 20}
    assert dict(zip(table["name"], table["calls"])) == {"pe_exe": 2, "merge": 2, "remote": 1}


def test_mtia_transfers_and_sync(mtia, device_events):
    memcpy = mtia.model.memcpy
    dma = [e for e in device_events if e["name"] in TRANSFER]
    assert memcpy["name"].astype(str).tolist() == ["dma_request"]
    assert memcpy["bytes"].tolist() == [e["args"]["size"] for e in dma] == [4096]
    assert memcpy["dur"].sum() == sum(e["dur"] for e in dma)
    syncs = mtia.model.syncs
    assert sorted(syncs["name"].astype(str)) == sorted(e["name"] for e in device_events if e["name"] in SYNC)
    assert len(mtia.model.kernels) + len(memcpy) + len(syncs) == len(device_events)


def test_mtia_device_work_links_to_its_runtime_call_and_operator(mtia):
    """Operators' device time: aten::mm launched both pe_exe (40 + 60), aten::add merge,
    remote and merge (10 + 20 + 10), aten::copy_ the dma_request (15)."""
    k = mtia.model.kernels
    rt = mtia.model.runtime
    assert (k["runtime"] >= 0).all()
    assert (rt["correlation"].to_numpy()[k["runtime"]] == k["correlation"].to_numpy()).all()
    table = mtia.operators()
    device = dict(zip(table["name"], table["device_self_us"]))
    assert device == {"aten::mm": 100, "aten::add": 40, "aten::copy_": 15}


def test_mtia_gpu_summary_and_overview(mtia):
    """Device 0 computes 40 + 10 in step 1 and 60 + 20 + 10 in step 2: 140 of the 400 µs of
    both steps (35%). Step 1: Kernel 50, Memcpy 15, Runtime 10 + 5 + 5, CPU Exec (mm 50 - 10,
    copy_ 20 - 5, add 20 - 5) 70, Other 200 - 155 = 45 (100-110, 160-165, 185-190, 210-215 and
    280-300, the event_wait included). Step 2: Kernel 90, Runtime 20, CPU Exec 40 + 20, Other
    30 (300-310, 360-370, 490-500)."""
    summary = mtia.gpu_summary()
    assert summary["device"].tolist() == [0]
    assert summary["utilization_pct"].iloc[0] == pytest.approx(35.0)
    steps = mtia.steps().set_index("step")
    assert steps.loc[1, ["kernel_us", "memcpy_us", "runtime_us", "cpu_exec_us", "other_us", "total_us"]].tolist() \
        == [50, 15, 20, 70, 45, 200]
    assert steps.loc[2, ["kernel_us", "memcpy_us", "runtime_us", "cpu_exec_us", "other_us", "total_us"]].tolist() \
        == [90, 0, 20, 60, 30, 200]


def test_mtia_busy_time_agrees_with_hta(mtia, device_events, tmp_path):
    """HTA 0.5.0's temporal breakdown over the same file. HTA leaves out the last profiler
    iteration, so its window is step 1's device work [215, 290]; it counts every event on a
    stream, sync included (event_wait as computation), where we leave syncs out of busy time."""
    trace_analysis = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is not installed")
    shutil.copy(MTIA_TRACE, tmp_path / MTIA_TRACE.name)
    hta = trace_analysis.TraceAnalysis(trace_dir=str(tmp_path)).get_temporal_breakdown(visualize=False).iloc[0]
    model = mtia.model
    in_step_1 = lambda table: table[table["ts"] < 300]  # noqa: E731
    compute = in_step_1(model.kernels)["dur"].sum()
    transfer = in_step_1(model.memcpy)["dur"].sum()
    sync = sum(e["dur"] for e in device_events if e["name"] in SYNC and e["ts"] - 1700000000000000 < 300)
    assert hta["idle_time(us)"] == 0
    assert hta["kernel_time(us)"] == compute + transfer + sync == 75
    assert hta["compute_time(us)"] == compute + sync
    assert hta["non_compute_time(us)"] == transfer


@pytest.mark.parametrize("backend_runtime, launch_name", [
    ("xpu_runtime", "urEnqueueKernelLaunch"), ("privateuse1_runtime", "launch"), ("hpu_op", "launch"),
    ("cuda_runtime", "hipLaunchKernel")])
def test_generic_device_categories_of_other_backends(tmp_path, backend_runtime, launch_name):
    """XPU, PrivateUse1, HPU and ROCm write their device work as `kernel` / `gpu_memcpy` /
    `gpu_memset` on the device's pid, launched by their own runtime category."""
    events = [op("ProfilerStep#1", 0, 100), op("aten::mm", 10, 40, **{"External id": 1}),
              runtime(launch_name, 20, 5, 7, 1, cat=backend_runtime),
              runtime(launch_name, 30, 5, 8, 1, cat=backend_runtime),
              {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 3, "ts": 40, "dur": 30,
               "args": {"correlation": 7}},
              {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy M2D", "pid": 0, "tid": 3, "ts": 70, "dur": 10,
               "args": {"correlation": 8, "bytes": 64}}]
    model = tb_plugin.load(str(write_trace(tmp_path / "w.pt.trace.json", events))).model
    assert model.runtime["cat"].astype(str).tolist() == [backend_runtime] * 2
    assert model.kernels["op"].tolist() == [1] and model.kernels["dur"].tolist() == [30]
    assert model.memcpy["op"].tolist() == [1] and model.memcpy["bytes"].tolist() == [64]


def test_every_backend_of_the_table_is_recognised():
    """The table's names, read back through the classifier."""
    from tb_plugin.trace.kinds import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_OTHER, KIND_RUNTIME, KIND_SYNC, classify
    of_role = {accelerators.COMPUTE: KIND_KERNEL, accelerators.TRANSFER: KIND_MEMCPY,
               accelerators.FILL: KIND_MEMSET, accelerators.SYNC: KIND_SYNC, accelerators.MARKER: KIND_OTHER}
    for backend in accelerators.BACKENDS:
        for category in backend.runtime_categories:
            assert classify("X", category, "x") == KIND_RUNTIME, (backend.name, category)
        for category, role in backend.device_categories.items():
            if role is not None:
                assert classify("X", category, "x") == of_role[role], (backend.name, category)
    assert [classify("X", "mtia_ccp_events", n) for n in ("pe_exe", "merge", "remote", "dma_request",
                                                          "event_record", "event_wait")] \
        == [KIND_KERNEL] * 3 + [KIND_MEMCPY] + [KIND_SYNC] * 2
    assert classify("X", "newchip_runtime", "x") == KIND_RUNTIME


def test_the_hand_written_trace_is_what_the_docstring_says():
    """Guard: the numbers above are worked from these events."""
    doc = json.loads(MTIA_TRACE.read_text())
    steps = [(e["name"], e["ts"] - 1700000000000000, e["dur"]) for e in doc["traceEvents"]
             if e.get("name", "").startswith("ProfilerStep")]
    assert steps == [("ProfilerStep#1", 100, 200), ("ProfilerStep#2", 300, 200)]
    assert np.isclose(sum(e["dur"] for e in doc["traceEvents"] if e.get("cat") == "mtia_ccp_events"), 170)


def test_a_backend_no_table_lists_is_recognised_by_where_it_runs_and_its_launch(tmp_path):
    """A made-up backend: `newchip_runtime` calls launch `newchip_device` events on pid 5,
    which holds no host event. Linked ones are device activity by their name's role (a tile
    of compute, a `dma` transfer, a `wait` sync kept in other); one whose correlation no
    runtime call has, and a `Trace` event on the host pid that shares a correlation, stay in
    other."""
    def device_event(name, ts, dur, correlation, **args):
        return {"ph": "X", "cat": "newchip_device", "name": name, "pid": 5, "tid": 3, "ts": ts, "dur": dur,
                "args": {"correlation": correlation, **args}}
    events = [op("ProfilerStep#1", 0, 100), op("aten::mm", 10, 40, **{"External id": 1}),
              runtime("launch", 20, 5, 7, 1, cat="newchip_runtime"), runtime("launch", 30, 5, 8, 1, cat="newchip_runtime"),
              device_event("matmul_tile", 40, 30, 7), device_event("dma_in", 70, 10, 8, bytes=64),
              device_event("barrier_wait", 80, 5, 8), device_event("unlaunched", 85, 5, 99),
              {"ph": "X", "cat": "Trace", "name": "host span", "pid": 1, "tid": 1, "ts": 0, "dur": 5,
               "args": {"correlation": 7}}]
    profile = tb_plugin.load(str(write_trace(tmp_path / "w.pt.trace.json", events)))
    model = profile.model
    assert model.kernels[["name", "device", "stream", "op"]].astype(str).values.tolist() == [["matmul_tile", "5", "3", "1"]]
    assert model.memcpy[["name", "bytes", "op"]].astype(str).values.tolist() == [["dma_in", "64", "1"]]
    assert sorted(model.other["name"].astype(str)) == ["barrier_wait", "host span", "unlaunched"]
    assert dict(zip(profile.operators()["name"], profile.operators()["device_self_us"])) == {"aten::mm": 40}


def test_cuda_runtime_calls_without_device_activity_are_a_cuda_trace(tmp_path):
    """CUPTI recorded the launches but no kernel (lost, or outside the window): the trace is
    still a CUDA one, not "CPU"; without any runtime call it is CPU."""
    launches = [op("aten::mm", 0, 50, **{"External id": 1}), runtime("cudaLaunchKernel", 10, 5, 1, 1)]
    assert tb_plugin.load(write_trace(tmp_path / "cuda.pt.trace.json", launches)).device_type == "CUDA"
    cpu_only = [op("aten::mm", 0, 50, **{"External id": 1})]
    assert tb_plugin.load(write_trace(tmp_path / "cpu.pt.trace.json", cpu_only)).device_type == "CPU"


def test_real_cuda_trace_stripped_of_device_activity_is_still_cuda(tmp_path):
    """The H100 sample with every kernel, memcpy and memset removed from the raw JSON."""
    source = Path(__file__).parent.parent / "samples" / "gpu_h100_eager_nccl"
    files = sorted(source.glob("*.pt.trace.json.gz"))
    if not files:
        pytest.skip("samples/gpu_h100_eager_nccl is not available")
    events = [e for e in raw_events(files[0]) if str(e.get("cat", "")).lower() not in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert any(str(e.get("cat", "")).lower() == "cuda_runtime" for e in events)
    profile = tb_plugin.load(write_trace(tmp_path / "stripped.pt.trace.json", events))
    assert profile.device_type == "CUDA" and profile.info()["devices"] == []


def test_info_lists_only_the_gpus_the_trace_used():
    """The ResNet-50 sample's deviceProperties describe every GPU of its host; info lists
    those its device activity ran on (the raw events' device ids) and counts the others."""
    path = Path(__file__).parent.parent / "samples" / "gpu_resnet50_v100" / "worker0.1623143089861.pt.trace.json.gz"
    if not path.exists():
        pytest.skip("samples/gpu_resnet50_v100 is not available")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    used = sorted({e["args"]["device"] for e in doc["traceEvents"]
                   if str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")})
    info = tb_plugin.load(path).info()
    assert len(doc["deviceProperties"]) > len(used)  # the case: more GPUs on the host than used
    assert [d["id"] for d in info["devices"]] == used == info["devices_used"]
    assert info["devices_on_host"] == len(doc["deviceProperties"])
    names = {p["id"]: p["name"] for p in doc["deviceProperties"]}
    assert [d["name"] for d in info["devices"]] == [names[i] for i in used]


# A hipBLASLt GEMM on an MI300X (Tensile's name: MFMA instruction 16x16x1 in its MI field) and
# a plain elementwise kernel, launched by hipLaunchKernel / hipExtModuleLaunchKernel.
MI300_GEMM = ("Cijk_Alik_Bljk_HHS_BH_MT128x128x64_MI16x16x1_SN_1LDSB1_AFC1_AFEM1_ASEM1_CLR1_CADS0_"
              "EPS0_GRVWA8_GRVWB8_GSUAMB_ISA942_IU1_K1_LBSPPA128_LPA16_LPB16_MIAV1_MMFGLC_NTn1_PGR2_PLR1")


def test_mi300_mfma_gemms_are_matrix_core_kernels_named_per_vendor(tmp_path):
    """The MFMA GEMM (40 µs) runs on matrix cores, the elementwise kernel (10 µs) not: 80% of
    kernel time, and AMD's name for the units, on every view that gives the share."""
    events = [op("aten::mm", 0, 20, **{"External id": 1}), runtime("hipExtModuleLaunchKernel", 2, 3, 1, 1),
              kernel(MI300_GEMM, 30, 40, 1),
              op("aten::add", 20, 10, **{"External id": 2}), runtime("hipLaunchKernel", 22, 3, 2, 2),
              kernel("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >", 80, 10, 2)]
    profile = tb_plugin.load(write_trace(tmp_path / "mi300.pt.trace.json", events))
    assert profile.device_type == "ROCm"
    share = profile.tensor_core_share()
    assert (share["tensor_cores_us"], share["other_us"], share["unit"]) == (40, 10, "Matrix cores")
    assert share["tensor_cores_pct"] == pytest.approx(80)
    assert profile.gpu_summary()["tensor_core_kernel_pct"].tolist() == [pytest.approx(80)]
    assert profile.overview()["environment"]["matrix_unit"] == "Matrix cores"
    used = profile.kernels().set_index("name")["tensor_cores_used"]
    assert used[MI300_GEMM] and not used.drop(MI300_GEMM).any()


def test_mi250_trace_tensile_gemms_are_matrix_core_kernels():
    """The real MI250 trace: its Tensile GEMMs (an MI<m>x<n>x<k> field in the name, counted
    from the raw events) are the matrix-core kernel time, and the unit is AMD's."""
    path = shared_trace("rocm_mi250")
    kernels = [e for e in raw_events(path) if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"]
    mfma = [k for k in kernels if re.search(r"_MI\d+x\d+x\d+", k["name"])]
    assert mfma  # the case: the trace has MFMA GEMMs
    share = tb_plugin.load(path).tensor_core_share()
    assert share["unit"] == "Matrix cores"
    assert share["tensor_cores_us"] == pytest.approx(sum(k["dur"] for k in mfma))
    assert share["other_us"] == pytest.approx(sum(k["dur"] for k in kernels) - sum(k["dur"] for k in mfma))


# Blocking runtime calls, as the backends' documentation lists them: CUDA's "API
# synchronization behavior" (memcpys without Async that involve host memory are synchronous;
# device-to-device and peer copies do not block the host), HIP's API reference
# (hipMemcpyWithStream: "akin to hipMemcpyAsync + hipStreamSynchronize ... a sync API"), and
# the synchronize calls of each.
@pytest.mark.parametrize("name, blocking", [
    ("cudaDeviceSynchronize", True), ("cudaStreamSynchronize", True), ("cudaEventSynchronize", True),
    ("cuCtxSynchronize", True), ("cudaMemcpy", True), ("cudaMemcpy2D", True), ("cudaMemcpyToSymbol", True),
    ("cudaMemcpyFromSymbol", True), ("cuMemcpyDtoH_v2", True), ("cuMemcpyHtoD_v2", True),
    ("hipDeviceSynchronize", True), ("hipStreamSynchronize", True), ("hipMemcpy", True),
    ("hipMemcpyWithStream", True), ("hipMemcpyDtoH", True), ("hipMemcpyToSymbol", True), ("urQueueFinish", True),
    ("cudaMemcpyAsync", False), ("hipMemcpyAsync", False), ("hipMemcpyDtoHAsync", False), ("cudaMemcpyPeer", False),
    ("cuMemcpyDtoD_v2", False), ("cudaLaunchKernel", False), ("hipLaunchKernel", False),
    ("cudaStreamWaitEvent", False), ("cudaEventRecord", False), ("hipExtModuleLaunchKernel", False)])
def test_blocking_runtime_calls_of_every_backend(name, blocking):
    assert common.is_blocking_call(name) is blocking


def test_blocking_hip_memcpy_is_synchronisation_not_host_work():
    """The real MI250 trace copies its inputs with hipMemcpyWithStream, a blocking call. The
    host is then waiting for the device: on the critical path no instant of such a call is
    CPU work, and in the diff's causes the step's synchronisation is exactly the time of those
    calls (the only blocking calls inside the step) when no device activity ran, summed from
    the raw events."""
    path = shared_trace("rocm_mi250")
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    step = next(e for e in events if e["name"].startswith("ProfilerStep#"))
    inside = [e for e in events if step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]
    calls = [e for e in inside if e.get("cat") == "cuda_runtime" and e["name"] == "hipMemcpyWithStream"]
    assert len(calls) == 2 and not any("Synchronize" in e["name"] for e in inside)  # the case
    device = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in ("kernel", "gpu_memcpy"))
    blocked = sum(c["dur"] - covered_length(c["ts"], c["ts"] + c["dur"], device) for c in calls)
    profile = tb_plugin.load(path)
    causes = regression.step_causes(profile.model).iloc[0]
    assert causes["synchronisation_us"] == pytest.approx(blocked, abs=1e-3) and blocked > 50
    path_table = critical_path.critical_path(profile.model, int(causes["step"]))
    origin = step["ts"]
    for c in calls:
        start, end = c["ts"] - origin, c["ts"] + c["dur"] - origin
        during = path_table[(path_table["end_us"] > start + 1e-3) & (path_table["start_us"] < end - 1e-3)]
        assert set(during["category"]) <= {"launch", "memcpy", "sync"}, during
        assert "sync" in set(during["category"])


def _single_gpu_rocm_trace(tmp_path, name):
    """The MI250 trace (kernels on device 2) with deviceProperties cut to one entry, id 0,
    named `name`: what single-GPU MI300 traces hold (kernels on device 2 or 9, one entry 0)."""
    doc = json.loads(gzip.decompress(shared_trace("rocm_mi250").read_bytes()))
    doc["deviceProperties"] = [{**doc["deviceProperties"][0], "id": 0, "name": name}]
    used = {e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")}
    assert used == {2}  # the case: the one device in use is not the listed id
    path = tmp_path / "worker0.pt.trace.json"
    path.write_text(json.dumps(doc))
    return path, doc["deviceProperties"][0]


def test_one_device_in_use_maps_to_the_one_device_properties_entry(tmp_path):
    """The one device the trace ran on (2) takes the one deviceProperties entry (id 0): its
    name, memory and compute capability fill the GPU summary, info and the FLOPs view's peak
    (MI300X's datasheet fp32 peak, 163.4 TFLOP/s), and the anomalies say the mapping was made."""
    path, entry = _single_gpu_rocm_trace(tmp_path, "AMD Instinct MI300X")
    profile = tb_plugin.load(path)
    gpu = profile.gpu_summary().iloc[0]
    assert (gpu["device"], gpu["name"], gpu["memory_bytes"]) == (2, "AMD Instinct MI300X", entry["totalGlobalMem"])
    assert gpu["compute_capability"] == f"{entry['computeMajor']}.{entry['computeMinor']}"
    assert [d["name"] for d in profile.info()["devices"]] == ["AMD Instinct MI300X"]
    steps = profile.mfu()
    assert set(steps["device_name"]) == {"AMD Instinct MI300X"}
    assert set(steps.loc[steps["dtype"] == "fp32", "peak_tflops_per_s"]) == {163.4}
    mapped = [a for a in profile.overview()["anomalies"] if a["key"] == "device_properties_mapped"]
    assert mapped and mapped[0]["value"] == "deviceProperties id 0 taken as device 2"


def test_a_mapped_device_reads_back_from_the_disk_cache(tmp_path):
    """The mapping's anomaly is a sentence, not a count: the cache's check of a stored model's
    anomalies took it for tampering, so every such trace was parsed again on each start."""
    path, _ = _single_gpu_rocm_trace(tmp_path, "AMD Instinct MI300X")
    model = tb_plugin.load(path).model
    cache = ModelCache(tmp_path / "cache")
    cache.put(ModelCache.key(str(path)), {"size": 1}, model)
    back = cache.get(ModelCache.key(str(path)), {"size": 1})
    assert back is not None and back.anomalies == model.anomalies
    assert back.anomalies["device_properties_mapped"] == "deviceProperties id 0 taken as device 2"


def test_several_device_properties_entries_are_not_mapped():
    """The unmodified MI250 trace lists four GPUs (ids 0-3) and ran on device 2: the entry of
    id 2 describes it, and no mapping is made or reported."""
    profile = tb_plugin.load(shared_trace("rocm_mi250"))
    assert profile.info()["devices"][0]["id"] == 2
    assert "device_properties_mapped" not in profile.model.anomalies
