"""FLOPs and MFU: formulas against torch's own FLOP counter (torch.utils.flop_counter) on the
same shapes, a trace recorded here with `with_flops=True`, hand-made traces worked out on
paper, and the CPU CNN sample's raw shapes."""

import json
import math

import pandas as pd
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import tb_plugin
from tb_plugin.views.flops import OPERATORS, STEPS, peak_bandwidth, peak_tflops, shape_flops

from .helpers import PREFIX, SAMPLES, kernel, low_coverage_trace, make_client, op, raw_events, runtime, wait_route, write_trace


def _torch_flops(fn, *args):
    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return counter.get_total_flops()


@pytest.mark.parametrize("name, shapes, fn", [
    ("aten::mm", [[8, 32], [32, 16]], lambda a, b: a @ b),
    ("aten::bmm", [[4, 8, 32], [4, 32, 16]], torch.bmm),
    ("aten::matmul", [[2, 3, 8, 32], [32, 16]], torch.matmul),
    ("aten::matmul", [[32], [32, 16]], torch.matmul),
    ("aten::linear", [[4, 8, 32], [16, 32]], torch.nn.functional.linear),
])
def test_matrix_formulas_equal_torch_flop_counter(name, shapes, fn):
    tensors = [torch.randn(s) for s in shapes]
    assert shape_flops(name, json.dumps(shapes)) == _torch_flops(fn, *tensors)


def test_addmm_counts_the_product_not_the_bias():
    a, b, bias = torch.randn(8, 32), torch.randn(32, 16), torch.randn(16)
    assert shape_flops("aten::addmm", json.dumps([[16], [8, 32], [32, 16], [], []])) == \
        _torch_flops(torch.addmm, bias, a, b)


@pytest.mark.parametrize("stride, padding, dilation", [(1, 1, 1), (2, 0, 1), (1, 2, 2)])
def test_convolution_formula_equals_torch_flop_counter(stride, padding, dilation):
    x, w = torch.randn(2, 4, 15, 17), torch.randn(6, 2, 3, 3)  # groups=2
    expected = _torch_flops(lambda a, b: torch.nn.functional.conv2d(a, b, None, stride, padding, dilation, 2), x, w)
    concrete = json.dumps(["", "", "", f"[{stride}, {stride}]", f"[{padding}, {padding}]", f"[{dilation}, {dilation}]", "2"])
    assert shape_flops("aten::conv2d", json.dumps([list(x.shape), list(w.shape), [], [], [], [], []]), concrete) == expected


def test_sdpa_formula_equals_its_two_matmuls_in_torch_flop_counter():
    # attention = softmax(q k^T) v: torch's counter on the two batched matmuls it is made of
    q, k, v = torch.randn(2, 4, 16, 8), torch.randn(2, 4, 24, 8), torch.randn(2, 4, 24, 6)
    expected = _torch_flops(lambda a, b, c: torch.matmul(torch.matmul(a, b.transpose(-2, -1)).softmax(-1), c), q, k, v)
    assert shape_flops("aten::scaled_dot_product_attention", json.dumps([list(q.shape), list(k.shape), list(v.shape)])) \
        == expected


def test_unknown_ops_and_bad_shapes_have_no_flops():
    assert math.isnan(shape_flops("aten::relu", "[[8, 32]]"))
    assert math.isnan(shape_flops("aten::mm", "[[8], [32, 16]]"))
    assert math.isnan(shape_flops("aten::mm", "not json"))


def test_peaks_known_and_unknown():
    assert peak_tflops("NVIDIA A100-SXM4-80GB", "bf16") == 312.0
    assert peak_tflops("NVIDIA H100 PCIe", "bf16") == 756.0
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.4
    assert math.isnan(peak_tflops("NVIDIA GeForce RTX 3090", "fp16"))  # not in the table: peak unknown
    assert math.isnan(peak_tflops("Tesla V100-SXM2-16GB", "bf16"))  # V100 has no bf16 rate
    assert peak_bandwidth("NVIDIA A100-SXM4-80GB") == 2039.0 and peak_bandwidth("NVIDIA A100-PCIE-40GB") == 1555.0
    assert math.isnan(peak_bandwidth("NVIDIA GeForce RTX 3090"))


def _gpu_trace(tmp_path, name="NVIDIA A100-SXM4-40GB"):
    """One step 0..1000 us: aten::linear > aten::addmm (bf16 [64,1024] @ [1024,512]) whose gemm
    kernel runs 100 us, and aten::mm carrying the profiler's own flops arg (1e9) with a 200 us
    kernel."""
    events = [op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
              op("aten::linear", 10, 50, **{"Input Dims": [[64, 1024], [512, 1024], [512]],
                                           "Input type": ["c10::BFloat16"] * 3}),
              op("aten::addmm", 15, 40, **{"External id": 1, "Input Dims": [[512], [64, 1024], [1024, 512], [], []],
                                          "Input type": ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"]}),
              runtime("cudaLaunchKernel", 20, 5, correlation=1, external_id=1),
              kernel("ampere_bf16_gemm", 100, 100, correlation=1),
              op("aten::mm", 300, 20, **{"External id": 2, "flops": 1e9, "Input Dims": [[8, 8], [8, 8]],
                                        "Input type": ["c10::BFloat16"] * 2}),
              runtime("cudaLaunchKernel", 305, 5, correlation=2, external_id=2),
              kernel("ampere_bf16_gemm", 400, 200, correlation=2)]
    props = [{"id": 0, "name": name, "totalGlobalMem": 40e9, "computeMajor": 8, "computeMinor": 0, "numSms": 108}]
    return tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events, deviceProperties=props))


def test_operators_worked_by_hand(tmp_path):
    table = _gpu_trace(tmp_path).flops()
    OPERATORS.check(table)
    addmm_flops = 2 * 64 * 1024 * 512
    addmm = table[table["name"] == "aten::addmm"].iloc[0]
    linear = table[table["name"] == "aten::linear"].iloc[0]
    mm = table[table["name"] == "aten::mm"].iloc[0]
    # counted once, at addmm; the linear around it shows the same FLOPs
    assert (addmm.flops, linear.flops, addmm.source, addmm["dtype"]) == (addmm_flops, addmm_flops, "shapes", "bf16")
    assert addmm.device_tflops_per_s == pytest.approx(addmm_flops / 100 / 1e6)
    assert addmm.host_tflops_per_s == pytest.approx(addmm_flops / 40 / 1e6)
    assert addmm.peak_tflops_per_s == 312.0
    assert addmm.pct_of_peak == pytest.approx(100 * addmm_flops / 100 / 1e6 / 312)
    # the with_flops arg wins over the shapes (2*8*8*8 from shapes)
    assert (mm.flops, mm.source) == (1e9, "arg")
    # roofline: bf16 (2 bytes) bias 512 + A 64x1024 + B 1024x512 read, out 64x512 written
    moved = 2 * (512 + 64 * 1024 + 1024 * 512 + 64 * 512)
    assert (addmm.bytes, linear.bytes) == (moved, moved)
    assert addmm.flop_per_byte == pytest.approx(addmm_flops / moved)
    assert addmm.peak_bandwidth_gbps == 1555.0  # A100 40GB


def test_steps_mfu_worked_by_hand(tmp_path):
    steps = _gpu_trace(tmp_path).mfu()
    STEPS.check(steps)
    row = steps.iloc[0]
    flops = 2 * 64 * 1024 * 512 + 1e9
    assert (row.flops, row.step_us, row["dtype"], row.device_name) == (flops, 1000, "bf16", "NVIDIA A100-SXM4-40GB")
    assert row.mfu_pct == pytest.approx(100 * flops / 1000 / 1e6 / 312)


def test_unknown_gpu_says_peak_unknown(tmp_path):
    profile = _gpu_trace(tmp_path, name="Some Future GPU")
    assert profile.flops()["peak_tflops_per_s"].isna().all() and profile.mfu()["mfu_pct"].isna().all()


def test_recorded_cnn_equals_torch_flop_counter(tmp_path):
    """A small CNN forward recorded here with record_shapes: conv + linear FLOPs from the
    trace's shapes equal torch's FlopCounterMode on the same model and input."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, stride=2), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 8 * 8, 10))
    x = torch.randn(4, 3, 16, 16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        model(x)
    path = str(tmp_path / "cnn.pt.trace.json")
    prof.export_chrome_trace(path)
    table = tb_plugin.load(path).flops().set_index("name")
    assert table.loc["aten::conv2d", "flops"] + table.loc["aten::linear", "flops"] == _torch_flops(model, x)


def test_cnn_sample_flops_from_raw_shapes():
    path = sorted((SAMPLES / "cpu_cnn").glob("*.pt.trace.json.gz"))[0]
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    expected = 0.0
    for e in events:
        if e["name"] == "aten::conv2d":
            (n, _, h, w), (c_out, c_in, kh, kw) = e["args"]["Input Dims"][:2]
            expected += 2 * n * c_out * c_in * kh * kw * h * w  # 3x3, stride 1, padding 1: same size
    table = tb_plugin.load(path).flops().set_index("name")
    assert table.loc["aten::conv2d", "flops"] == expected > 0
    assert table.loc["aten::conv2d", "source"] == "shapes" and table.loc["aten::conv2d", "dtype"] == "fp32"
    assert table["peak_tflops_per_s"].isna().all()  # CPU: peak unknown


def test_flops_route_tables_and_csv(tmp_path):
    import csv
    import io
    import shutil

    shutil.copytree(SAMPLES / "cpu_cnn", tmp_path / "cnn")
    plugin, client = make_client(tmp_path)
    try:
        plugin.store.wait_for_scan(30)
        prefix = "/data/plugin/pytorch_profiler/flops?run=cnn&worker=worker0"
        body = wait_route(client, prefix).get_json()
        assert set(body) == {"missing", "operators", "steps"}
        assert body["missing"]["rows"] == []  # the CNN run recorded shapes: its matmuls and convolutions are counted
        assert body["operators"]["columns"] == OPERATORS.names and body["steps"]["columns"] == STEPS.names
        text = client.get(prefix + "&table=steps&format=csv").get_data(as_text=True)
        assert len(list(csv.DictReader(io.StringIO(text)))) == len(body["steps"]["rows"]) == 2
        mfu = body["steps"]["rows"][0][STEPS.names.index("mfu_pct")]
        assert mfu is None  # CPU: peak unknown, sent as null
        assert client.get(prefix + "&table=nope").status_code == 400
    finally:
        plugin.store.stop()


def _conv_from_raw_shapes(x, w, out):
    """FlopCounterMode's count of conv2d(x, w) giving `out`: ResNet-50's convolutions pad
    (k - 1) / 2, the stride is the ratio of the input's and the output's size (checked by the
    shape torch computes)."""
    stride = x[2] // out[2]
    with FlopCounterMode(display=False) as counter:
        y = torch.nn.functional.conv2d(torch.empty(x, device="meta"), torch.empty(w, device="meta"),
                                       stride=stride, padding=(w[2] - 1) // 2)
    assert list(y.shape) == out
    return counter.get_total_flops()


def test_convolutions_of_a_2021_trace_counted_from_their_autograd_nodes():
    # the 2021 ResNet-50 trace records no Concrete Inputs: a forward convolution's output size
    # is read from its backward. Expected: per step, FlopCounterMode on each backward's raw
    # shapes (input, grad_output, weight), once for the forward and once per gradient the
    # backward's raw children computed (the stem has no input gradient)
    path = next((SAMPLES / "gpu_resnet50_v100").glob("*.pt.trace.json.gz"))
    events = sorted((e for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") in ("Operator", "cpu_op")),
                    key=lambda e: e["ts"])
    steps = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in events
             if e["name"].startswith("ProfilerStep#")}
    children = [e for e in events if e["name"].startswith("aten::cudnn_convolution_backward_")]
    expected = {}
    for e in events:
        if e["name"] != "aten::cudnn_convolution_backward":
            continue
        x, grad, w = e["args"]["Input Dims"][:3]
        parts = sum(e["ts"] <= c["ts"] < e["ts"] + e["dur"] for c in children)
        step = next(n for n, (lo, hi) in steps.items() if lo <= e["ts"] < hi)
        expected[step] = expected.get(step, 0) + _conv_from_raw_shapes(x, w, grad) * (1 + parts)
    table = tb_plugin.load(path).mfu().set_index("step")
    assert len(expected) == len(table) and all(0 < parts for parts in expected.values())
    for step, flops in expected.items():
        # plus the classifier's [32, 2048] x [2048, 1000]: its addmm and the two mm of its gradients
        assert table.loc[step, "flops"] - flops == 3 * 2 * 32 * 2048 * 1000
    assert (table["uncounted_calls"] == 0).all() and (table["coverage_pct"] > 50).all()
    assert table["mfu_pct"].notna().all() and (table["mfu_withheld"] == "").all()


def test_forward_only_old_convolution_is_left_uncounted(tmp_path):
    # no Concrete Inputs and no autograd node: the output size is unknown, the call is said
    # to be uncounted, and the only counted kernel (the mm's, 100 of 1000 us) is too small a
    # part of the step for an MFU
    row = tb_plugin.load(low_coverage_trace(tmp_path / "w.pt.trace.json")).mfu().iloc[0]
    STEPS.check(pd.DataFrame([row]))
    assert (row.flops, row.uncounted_calls) == (2 * 64 ** 3, 1)
    assert (row.device_us, row.counted_device_us, row.coverage_pct) == (1000, 100, 10)
    assert math.isnan(row.mfu_pct) and "10.0%" in row.mfu_withheld and "25%" in row.mfu_withheld
    assert row.peak_tflops_per_s == 15.7 and row.tflops_per_s > 0  # the rate is still given


@pytest.mark.parametrize("name, dims, expected", [
    # Inductor's out= calls: the output is the last input, the operands stay where the schema has them
    ("aten::addmm", [[256], [64, 128], [128, 256], [], [], [64, 256]], 2 * 64 * 128 * 256),
    ("aten::mm", [[64, 128], [128, 256], [64, 256]], 2 * 64 * 128 * 256),
    ("aten::bmm", [[4, 8, 16], [4, 16, 32], [4, 8, 32]], 2 * 4 * 8 * 16 * 32),
    ("aten::baddbmm", [[4, 8, 32], [4, 8, 16], [4, 16, 32], [], [], [4, 8, 32]], 2 * 4 * 8 * 16 * 32),
    ("aten::matmul", [[64, 128], [128, 256], [64, 256]], 2 * 64 * 128 * 256),
    ("aten::linear", [[64, 128], [256, 128], [256], [64, 256]], 2 * 64 * 128 * 256),
])
def test_out_variants_worked_by_hand(name, dims, expected):
    assert shape_flops(name, json.dumps(dims)) == expected


def test_recorded_out_variants_equal_the_profilers_own_count(tmp_path):
    """The eager and the out= form of each product, recorded here: FLOPs from the trace's
    shapes equal what torch's profiler counts itself (with_flops, as key_averages() prints)
    and FlopCounterMode, and the out= calls count the same as the eager ones."""
    a, b, bias, out = torch.randn(64, 128), torch.randn(128, 256), torch.randn(256), torch.empty(64, 256)
    ba, bb, bbias, bout = torch.randn(4, 8, 16), torch.randn(4, 16, 32), torch.randn(4, 8, 32), torch.empty(4, 8, 32)
    calls = [lambda: torch.mm(a, b), lambda: torch.mm(a, b, out=out),
             lambda: torch.addmm(bias, a, b), lambda: torch.ops.aten.addmm.out(bias, a, b, out=out),
             lambda: torch.bmm(ba, bb), lambda: torch.bmm(ba, bb, out=bout),
             lambda: torch.baddbmm(bbias, ba, bb), lambda: torch.baddbmm(bbias, ba, bb, out=bout)]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                with_flops=True) as prof:
        for call in calls:
            call()
    path = str(tmp_path / "out.pt.trace.json")
    prof.export_chrome_trace(path)
    own = {e.key: (e.count, e.flops) for e in prof.key_averages()}
    counted = sum(_torch_flops(call) for call in calls)
    table = tb_plugin.load(path).flops().set_index("name")
    for name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"):
        assert (table.loc[name, "calls"], table.loc[name, "flops"]) == own[name], name
    assert table["flops"].sum() == counted == sum(flops for _, flops in own.values()) > 0
    mm_bytes = 4 * (64 * 128 + 128 * 256 + 64 * 256)  # the out= tensor is the output, not read
    assert table.loc["aten::mm", "bytes"] == 2 * mm_bytes


def test_recorded_convolution_backward_equals_torch_flop_counter(tmp_path):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 3, dilation=2))
    x = torch.randn(2, 3, 17, 19, requires_grad=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        model(x).sum().backward()
    path = str(tmp_path / "conv.pt.trace.json")
    prof.export_chrome_trace(path)
    with FlopCounterMode(display=False) as counter:
        model(x).sum().backward()
    expected = {str(op).split(".")[-1]: n for op, n in counter.get_flop_counts()["Global"].items()}
    table = tb_plugin.load(path).flops().set_index("name")
    assert table.loc["aten::convolution_backward", "flops"] == expected["convolution_backward"] > 0
    assert table.loc["aten::conv2d", "flops"] == expected["convolution"] > 0


@pytest.mark.parametrize("causal", [False, True])
def test_recorded_attention_causal_is_half_of_torch_flop_counter(tmp_path, causal):
    # ours halves causal attention (TraceLens's convention); FlopCounterMode counts it whole
    q, k, v = torch.randn(2, 4, 32, 16), torch.randn(2, 4, 32, 16), torch.randn(2, 4, 32, 8)
    attend = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        attend()
    path = str(tmp_path / "sdpa.pt.trace.json")
    prof.export_chrome_trace(path)
    table = tb_plugin.load(path).flops().set_index("name")
    full = _torch_flops(attend)
    assert table.loc["aten::scaled_dot_product_attention", "flops"] == (full / 2 if causal else full) > 0


@pytest.mark.parametrize("name, causal_at, count", [
    ("aten::_scaled_dot_product_flash_attention_backward", 11, 15),
    ("aten::_scaled_dot_product_efficient_attention_backward", 11, 13),
    ("aten::_scaled_dot_product_cudnn_attention_backward", 14, 16),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", 7, 10),
])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_is_torchs_five_products_halved_when_causal(name, causal_at, count, causal):
    from torch.utils.flop_counter import sdpa_backward_flop_count

    grad, q, k, v = [2, 4, 16, 6], [2, 4, 16, 8], [2, 4, 24, 8], [2, 4, 24, 6]
    dims = [grad, q, k, v] + [[]] * (count - 4)
    concrete = [""] * count
    concrete[causal_at] = "True" if causal else "False"
    full = sdpa_backward_flop_count(grad, q, k, v)
    assert shape_flops(name, json.dumps(dims), json.dumps(concrete)) == (full / 2 if causal else full) > 0


def _uncounted_trace(tmp_path, events):
    events = [op("ProfilerStep#1", 0, 1000, cat="user_annotation"), *events]
    return tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events)).model


def test_missing_flops_reason_fits_the_run(tmp_path):
    """Why no operator has a FLOP count, by what the trace holds: a counted trace has no
    reason; a matmul recorded without shapes asks for record_shapes; a run with shapes whose
    matrix work ran inside a CUDA-graph replay (one cudaGraphLaunch, two kernels, no operator
    below it) says so and does not ask for record_shapes, which it has."""
    from tb_plugin.views.flops import flops_missing

    assert flops_missing(_gpu_trace(tmp_path / "counted").model).empty
    bare = _uncounted_trace(tmp_path / "bare", [op("aten::mm", 10, 20)])
    (reason,) = flops_missing(bare)["reason"]
    assert "records no input shapes" in reason and "record_shapes=True" in reason and "its 1 call of" in reason
    graphs = _uncounted_trace(tmp_path / "graphs", [
        op("aten::add_", 10, 20, **{"Input Dims": [[1024, 1000], [1024, 1000]], "Input type": ["float", "float"]}),
        op("CUDAGraph::replay", 100, 50, **{"External id": 7}),
        runtime("cudaGraphLaunch", 110, 20, correlation=9, external_id=7),
        kernel("sm90_xmma_gemm_bf16", 200, 100, correlation=9), kernel("triton_poi_fused_add", 300, 10, correlation=9)])
    (reason,) = flops_missing(graphs)["reason"]
    assert "inside 1 CUDA-graph replay (cudaGraphLaunch)" in reason and "do have shapes" in reason
    assert "record_shapes" not in reason


def test_missing_flops_reason_of_the_compiled_graph_sample_over_http():
    """samples/gpu_h100_compiled records shapes, but its matmuls ran in graph replays: the
    reason names as many replays as the raw trace has cudaGraphLaunch calls."""
    run = SAMPLES / "gpu_h100_compiled"
    path = next(run.glob("*.pt.trace.json*"))
    launches = sum(e.get("name") == "cudaGraphLaunch" for e in raw_events(path))
    _, client = make_client(SAMPLES)
    reply = wait_route(client, f"{PREFIX}/flops?run=gpu_h100_compiled&worker={path.name.split('.')[0]}&span=1&table=missing")
    assert reply.status_code == 200
    (row,) = reply.json["rows"]
    assert f"inside {launches} CUDA-graph replays" in row[0] and "record_shapes" not in row[0]
