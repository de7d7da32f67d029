"""FLOPs and MFU: formulas against torch's own FLOP counter (torch.utils.flop_counter) on the
same shapes, a trace recorded here with `with_flops=True`, hand-made traces worked out on
paper, and the CPU CNN sample's raw shapes."""

import json
import math
from functools import lru_cache

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import tb_plugin
from tb_plugin.views.flops import OPERATORS, STEPS, peak_bandwidth, peak_tflops, shape_flops

from .conftest import SAMPLES, kernel, op, raw_events, runtime, write_trace


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

    from .test_api import make_client, wait_route

    shutil.copytree(SAMPLES / "cpu_cnn", tmp_path / "cnn")
    plugin, client = make_client(tmp_path)
    try:
        plugin.store.wait_for_scan(30)
        prefix = "/data/plugin/pytorch_profiler/flops?run=cnn&worker=worker0"
        body = wait_route(client, prefix).get_json()
        assert set(body) == {"operators", "steps"}
        assert body["operators"]["columns"] == OPERATORS.names and body["steps"]["columns"] == STEPS.names
        text = client.get(prefix + "&table=steps&format=csv").get_data(as_text=True)
        assert len(list(csv.DictReader(io.StringIO(text)))) == len(body["steps"]["rows"]) == 2
        mfu = body["steps"]["rows"][0][STEPS.names.index("mfu_pct")]
        assert mfu is None  # CPU: peak unknown, sent as null
        assert client.get(prefix + "&table=nope").status_code == 400
    finally:
        plugin.store.stop()


def test_uncounted_convolutions_of_a_2021_trace_from_raw():
    # the 2021 ResNet-50 trace records no Concrete Inputs: its convolutions cannot be counted,
    # and the steps say how many calls that leaves out instead of a silently low MFU
    path = next((SAMPLES / "gpu_resnet50_v100").glob("*.pt.trace.json.gz"))
    steps = tb_plugin.load(path).mfu()
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    ranges = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in events
              if e["name"].startswith("ProfilerStep#")}
    convs = [e["ts"] for e in events if e["name"] == "aten::conv2d"]
    for row in steps.itertuples():
        lo, hi = ranges[row.step]
        assert row.uncounted_calls == sum(lo <= ts < hi for ts in convs) > 0
    assert steps["peak_tflops_per_s"].notna().all()  # a V100: the peak is known
