"""Compiled view (torch.compile): a hand-made GPU trace worked out on paper, the CPU
`samples/cpu_compile` run and the shared Triton trace, checked against raw event counts and
sums computed here from the JSON."""

import csv
import io
import math
import re
import shutil
from functools import lru_cache

import pytest

import tb_plugin
from tb_plugin.views.compiled import KERNELS, REGIONS, SHARE, compiled, compiled_kernels, compiled_share

from .helpers import PREFIX, SAMPLES, SHARED_TRACES, kernel, make_client, op, raw_events, runtime, wait_route, write_trace

REGION = re.compile(r"^Torch-Compiled Region: \d+/\d+$")
STEP = re.compile(r"^ProfilerStep#\d+$")


def _gpu_compiled_trace(tmp_path):
    """One step 0..1000. Frame 0 runs twice: compilation 0/0 at 10..210 and, recompiled, 0/1 at
    500..700. Each holds CompiledFunction (Sequence number 7, then 9) holding a Triton launch op
    `triton_poi_fused_add_relu_0` (kernel_hash h0) that launches (cuLaunchKernel) its kernel of
    20 us; the first region also runs an extern aten::mm whose gemm kernel takes 30 us.
    Autograd then runs CompiledFunctionBackward (Sequence number 7) at 300..400, outside the
    region, with `triton_per_fused_sum_1` (kernel 15 us)."""
    events = [op("ProfilerStep#1", 0, 1000, cat="user_annotation")]
    launch = [("triton_poi_fused_add_relu_0", 40, 1, 20, "h0"), ("triton_per_fused_sum_1", 320, 2, 15, "h1"),
              ("triton_poi_fused_add_relu_0", 540, 3, 20, "h0")]
    events += [
        op("Torch-Compiled Region: 0/0", 10, 200),
        op("CompiledFunction", 20, 180, **{"Sequence number": 7}),
        op("aten::mm", 100, 20, **{"External id": 50}),
        runtime("cudaLaunchKernel", 105, 5, correlation=50, external_id=50),
        kernel("sm80_xmma_gemm", 150, 30, correlation=50),
        op("CompiledFunctionBackward", 300, 100, **{"Sequence number": 7}),
        op("Torch-Compiled Region: 0/1", 500, 200),
        op("CompiledFunction", 510, 180, **{"Sequence number": 9}),
    ]
    for name, ts, ext, dur, digest in launch:
        events += [op(name, ts, 10, **{"External id": ext, "kernel_hash": digest, "kernel_file": f"/tmp/{digest}.py"}),
                   runtime("cuLaunchKernel", ts + 2, 5, correlation=ext, external_id=ext, cat="cuda_driver"),
                   kernel(name, ts + 60, dur, correlation=ext)]
    return tb_plugin.load(write_trace(tmp_path / "worker0.pt.trace.json", events))


def _row(table, **where):
    mask = True
    for column, value in where.items():
        mask = mask & (table[column] == value)
    assert int(mask.sum()) == 1, f"expected one row for {where}:\n{table}"
    return table[mask].iloc[0]


def test_regions_worked_by_hand(tmp_path):
    regions = compiled(_gpu_compiled_trace(tmp_path).model)
    REGIONS.check(regions)
    assert list(regions["region"]) == ["Torch-Compiled Region: 0/0", "CompiledFunction [0/0]",
                                       "CompiledFunctionBackward [0/0]", "Torch-Compiled Region: 0/1",
                                       "CompiledFunction [0/1]"]
    first = _row(regions, region="Torch-Compiled Region: 0/0")
    # gemm (30) + add_relu (20), both launched inside the region
    assert (first.calls, first.host_total_us, first.device_total_us, first.kernel_count) == (1, 200, 50, 2)
    assert (first.frame, first.compilation, first.inductor_kernel_calls) == (0, 0, 1)
    forward = _row(regions, region="CompiledFunction [0/0]")
    assert (forward.kind, forward.compile_id, forward.device_total_us, forward.kernel_count) == ("forward", "0/0", 50, 2)
    # the backward runs outside the region; Sequence number 7 ties it to 0/0's forward
    backward = _row(regions, kind="backward")
    assert (backward.compile_id, backward.host_total_us, backward.device_total_us) == ("0/0", 100, 15)
    assert backward.kernels == "triton_per_fused_sum_1"
    assert _row(regions, region="Torch-Compiled Region: 0/1").compilation == 1


def test_kernels_tie_generated_kernels_to_region_and_fused_ops(tmp_path):
    kernels = compiled_kernels(_gpu_compiled_trace(tmp_path).model)
    KERNELS.check(kernels)
    fused = _row(kernels, region="CompiledFunction [0/0]", kernel="triton_poi_fused_add_relu_0")
    assert (fused.fused, fused.calls, fused.host_us, fused.device_us) == ("add_relu", 1, 10, 20)
    assert (fused.kernel_hash, fused.kernel_file) == ("h0", "/tmp/h0.py")
    extern = _row(kernels, region="CompiledFunction [0/0]", kernel="sm80_xmma_gemm")
    assert (extern.calls, extern.host_us, extern.device_us, extern.kernel_hash) == (1, 0, 30, "")
    assert (fused.origin, extern.origin) == ("Inductor (Triton)", "cuBLAS")


def test_h100_compiled_kernels_are_labelled_by_who_wrote_them():
    """The H100 sample's regions ran Inductor's Triton kernels beside cuBLAS GEMMs, CUTLASS
    kernels (cuBLAS's sgemm, PyTorch's memory-efficient attention) and ATen's elementwise
    kernels from eager ops inside them: each labelled by the library its name says."""
    (path,) = (SAMPLES / "gpu_h100_compiled").glob("*.pt.trace.json.gz")
    kernels = tb_plugin.load(path).compiled_kernels()
    by_origin = kernels.groupby("origin")["kernel"].apply(list).to_dict()
    assert set(by_origin) == {"Inductor (Triton)", "cuBLAS", "CUTLASS", "ATen"}
    assert all(k.startswith("triton_") for k in by_origin["Inductor (Triton)"])
    assert not any(k.startswith("triton_") for o, ks in by_origin.items() if o != "Inductor (Triton)" for k in ks)
    assert any(k.startswith("sm80_xmma_gemm") for k in by_origin["cuBLAS"])
    assert any(k.startswith("void cublasLt::splitKreduce_kernel") for k in by_origin["cuBLAS"])
    assert {k.split("(")[0].split("<")[0] for k in by_origin["CUTLASS"]} == {
        "void cutlass::Kernel2", "fmha_cutlassF_f32_aligned_64x64_rf_sm80", "fmha_cutlassB_f32_aligned_64x64_k64_dropout_sm80"}
    assert all(k.startswith("void at::native::") for k in by_origin["ATen"])


def test_share_and_recompilation_recommendation(tmp_path):
    profile = _gpu_compiled_trace(tmp_path)
    share = compiled_share(profile.model)
    SHARE.check(share)
    # regions 10..210, 300..400 (backward), 500..700 in the step window: 500 of 1000, and
    # the step is extended to the last kernel's end (560 + 20 = 580 < 1000: unchanged)
    row = share.iloc[0]
    assert (row.compiled_us, row.total_us, row.compiled_pct, row.recompiled_frames) == (500, 1000, 50, 1)
    items = {r["id"]: r for r in profile.recommendations()}
    assert items["recompilations"]["numbers"] == {"frames": 1, "max_compilations": 2}


# --- real traces ------------------------------------------------------------------------------

def _sample_path():
    return next((SAMPLES / "cpu_compile").glob("worker0.*.pt.trace.json.gz"))


@lru_cache(maxsize=None)
def _sample():
    return tb_plugin.load(_sample_path())


def _inside(inner, outer):
    return inner["tid"] == outer["tid"] and outer["ts"] <= inner["ts"] and \
        inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]


def test_cpu_compile_sample_regions_from_raw():
    events = [e for e in raw_events(_sample_path()) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    regions = _sample().compiled()
    for name, kind in (("Torch-Compiled Region: 0/1", "frame"), ("CompiledFunction", "forward"),
                       ("CompiledFunctionBackward", "backward")):
        raw = [e for e in events if e["name"] == name]
        row = _row(regions, kind=kind)
        assert row.calls == len(raw) > 0
        assert row.host_total_us == pytest.approx(sum(e["dur"] for e in raw), abs=1e-6)
        assert row.compile_id == "0/1" and row.device_total_us == 0 and row.kernel_count == 0
        # Inductor's C++ kernels (recorded as ops) inside the region's calls
        cpp = [e for e in events if "cpp_fused" in e["name"] and any(_inside(e, r) for r in raw)]
        assert row.inductor_kernel_calls == len(cpp) > 0
    kernels = _sample().compiled_kernels()
    raw_cpp = [e for e in events if re.match(r"^graph_\d+_cpp_fused_", e["name"])]
    assert kernels["calls"].sum() == len(raw_cpp)
    assert kernels["host_us"].sum() == pytest.approx(sum(e["dur"] for e in raw_cpp), abs=1e-6)


def _union_in(intervals, lo, hi):
    total, reach = 0.0, lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if e > s and e > reach:
            total += e - max(s, reach)
            reach = e
    return total


def test_cpu_compile_sample_share_and_recommendation_from_raw():
    events = [e for e in raw_events(_sample_path()) if e.get("ph") == "X"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if STEP.match(e["name"])]
    outer = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if REGION.match(e["name"]) or e["name"] == "CompiledFunctionBackward"]
    share = _sample().compiled_share().iloc[0]
    # raw timestamps are ~5e12 us: compare to 1e-2 us
    assert share.compiled_us == pytest.approx(sum(_union_in(outer, lo, hi) for lo, hi in steps), abs=1e-2)
    assert share.total_us == pytest.approx(sum(hi - lo for lo, hi in steps), abs=1e-2)
    # frame 0's second compilation ran: recompiled
    assert share.recompiled_frames == 1
    assert "recompilations" in {r["id"] for r in _sample().recommendations()}
    eager = tb_plugin.load(next((SAMPLES / "cpu_cnn").glob("*.pt.trace.json.gz")))
    assert len(eager.compiled()) == 0 and eager.compiled_share().iloc[0].compiled_us == 0
    assert "recompilations" not in {r["id"] for r in eager.recommendations()}


def test_triton_trace_kernel_tied_to_region_from_raw():
    path = SHARED_TRACES / "triton_kernel" / "worker0.pt.trace.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is not available")
    events = raw_events(path)
    launch = next(e for e in events if e.get("cat") == "cpu_op" and e["name"].startswith("triton_"))
    device = [e for e in events if e.get("cat") == "kernel"]
    profile = tb_plugin.load(path)
    region = _row(profile.compiled(), kind="frame")
    assert region.kernel_count == len(device) == 1
    assert region.device_total_us == pytest.approx(sum(e["dur"] for e in device), abs=1e-6)
    row = _row(profile.compiled_kernels(), kernel=launch["name"])
    assert (row.kernel_hash, row.device_us) == (launch["args"]["kernel_hash"], device[0]["dur"])
    assert row.fused == "add_cos_sin" and row.region == region.region


# --- HTTP -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compile_served(tmp_path_factory):
    root = tmp_path_factory.mktemp("compile_logdir")
    shutil.copytree(SAMPLES / "cpu_compile", root / "compiled")
    shutil.copytree(SAMPLES / "cpu_cnn", root / "eager")
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    yield client
    plugin.store.stop()


def test_compiled_route_tables_and_csv(compile_served):
    body = wait_route(compile_served, f"{PREFIX}/compiled?run=compiled&worker=worker0").get_json()
    assert set(body) == {"regions", "kernels", "share"}
    regions = body["regions"]
    assert regions["columns"] == REGIONS.names
    calls = {r[regions["columns"].index("region")]: r[regions["columns"].index("calls")] for r in regions["rows"]}
    raw = [e for e in raw_events(_sample_path()) if e.get("ph") == "X"]
    assert calls["Torch-Compiled Region: 0/1"] == sum(e["name"] == "Torch-Compiled Region: 0/1" for e in raw)
    text = compile_served.get(f"{PREFIX}/compiled?run=compiled&worker=worker0&table=kernels&format=csv")
    rows = list(csv.DictReader(io.StringIO(text.get_data(as_text=True))))
    assert list(rows[0]) == KERNELS.names and len(rows) == len(body["kernels"]["rows"])
    assert "compiled" in wait_route(compile_served, f"{PREFIX}/views?run=compiled&worker=worker0").get_json()["views"]
    assert "compiled" not in wait_route(compile_served, f"{PREFIX}/views?run=eager&worker=worker0").get_json()["views"]
    assert compile_served.get(f"{PREFIX}/compiled?run=compiled&worker=worker0&table=nope").status_code == 400
    share = wait_route(compile_served, f"{PREFIX}/compiled?run=eager&worker=worker0&table=share").get_json()
    assert share["rows"][0][share["columns"].index("compiled_us")] == 0
    assert not math.isnan(share["rows"][0][share["columns"].index("total_us")])


def test_operators_scope_splits_compiled_and_eager_from_raw():
    profile = _sample()
    every = profile.operators().set_index("name")["calls"]
    inside = profile.operators(scope="compiled").set_index("name")["calls"]
    outside = profile.operators(scope="eager").set_index("name")["calls"]
    # the two scopes partition the operators
    assert inside.add(outside, fill_value=0).astype(int).sort_index().equals(every.sort_index())
    raw = [e for e in raw_events(_sample_path()) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    regions = [e for e in raw if REGION.match(e["name"]) or e["name"] == "CompiledFunctionBackward"]
    relu = [e for e in raw if e["name"] == "graph_1_cpp_fused_relu_0"]
    assert inside["graph_1_cpp_fused_relu_0"] == len(relu) == sum(any(_inside(e, r) for r in regions) for e in relu)
    # the loss is computed outside the compiled model
    loss = [e for e in raw if e["name"] == "aten::cross_entropy_loss"]
    assert outside["aten::cross_entropy_loss"] == len(loss) and "aten::cross_entropy_loss" not in inside
    with pytest.raises(ValueError):
        profile.operators(scope="sometimes")


def test_operators_route_scope_parameter(compile_served):
    url = f"{PREFIX}/operators?run=compiled&worker=worker0"
    compiled_rows = wait_route(compile_served, url + "&scope=compiled").get_json()
    names = {r[compiled_rows["columns"].index("name")] for r in compiled_rows["rows"]}
    assert "graph_1_cpp_fused_relu_0" in names and "aten::cross_entropy_loss" not in names
    assert compile_served.get(url + "&scope=sometimes").status_code == 400
