"""Kernel launch statistics (`Profile.kernel_launches`, `kernel_launch_summary`, routes of the
same names): against Holistic Trace Analysis's get_cuda_kernel_launch_stats on every real GPU
trace, on a hand-made trace worked out on paper, and each deliberate difference named."""

import csv
import io

import numpy as np
import pandas as pd
import pytest

import tb_plugin
from tb_plugin.views.launches import KERNEL_LAUNCH_SUMMARY, KERNEL_LAUNCHES

from .helpers import PREFIX, SAMPLES, kernel, op, raw_events, runtime, shared_trace, write_trace
from .hta_reference import gpu_trace_files, hta

# The runtime calls HTA 0.5.0 counts as launches.
HTA_LAUNCH_CALLS = ["cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"]
TOLERANCE_US = 1e-3  # float µs relative to the trace start against HTA's absolute times


@pytest.fixture(scope="module", params=gpu_trace_files())
def trace(request):
    return request.param


def hta_launches(path):
    analysis, rank = hta(path)
    table = analysis.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
    return table.sort_values(["correlation", "gpu_duration"], kind="stable").reset_index(drop=True)


def test_launches_match_hta_per_correlation(trace):
    expected = hta_launches(trace)
    got = tb_plugin.load(trace).kernel_launches()
    KERNEL_LAUNCHES.check(got)
    got = got[got["runtime"].isin(HTA_LAUNCH_CALLS)].sort_values(["correlation", "device_us"], kind="stable")
    assert got["correlation"].tolist() == expected["correlation"].tolist()
    np.testing.assert_allclose(got["runtime_us"], expected["cpu_duration"], atol=TOLERANCE_US)
    np.testing.assert_allclose(got["device_us"], expected["gpu_duration"], atol=TOLERANCE_US)
    np.testing.assert_allclose(got["delay_after_call_us"], expected["launch_delay"], atol=TOLERANCE_US)


def test_flags_match_hta_charts(trace):
    """HTA's charts: short kernels (cpu_duration <= 50 and gpu < cpu), runtime outliers
    (cpu_duration > 50), launch delay outliers (launch_delay > 100)."""
    expected = hta_launches(trace)
    got = tb_plugin.load(trace).kernel_launches()
    got = got[got["runtime"].isin(HTA_LAUNCH_CALLS)]
    cpu, gpu = expected["cpu_duration"], expected["gpu_duration"]
    assert got["launch_bound"].sum() == ((cpu <= 50) & (gpu < cpu)).sum()
    assert got["runtime_outlier"].sum() == (cpu > 50).sum()
    assert got["launch_delay_outlier"].sum() == (expected["launch_delay"] > 100).sum()


def test_summary_adds_up_to_the_launches(trace):
    profile = tb_plugin.load(trace)
    launches, summary = profile.kernel_launches(), profile.kernel_launch_summary()
    KERNEL_LAUNCH_SUMMARY.check(summary)
    assert summary["launches"].sum() == len(launches)
    assert summary["launch_bound"].sum() == launches["launch_bound"].sum()
    assert summary["device_total_us"].sum() == pytest.approx(launches["device_us"].sum())


# --- hand-made trace, worked out on paper ---------------------------------------------------------

def paper_trace(tmp_path, graph=False):
    """K1: call 100-110 (10 µs), runs 112-114 (2 µs): launch-bound, delays 12 and 2.
    K2: call 120-180 (60 µs: runtime outlier), runs 400-500: delays 280 and 220 (outlier).
    A memset: cudaMemsetAsync 190-195, runs 196-197: launch-bound, delays 6 and 1.
    With `graph`, a cudaGraphLaunch 200-220 (20 µs) launches G1 (230-240) and G2 (240-260)
    under one correlation id: delays 30/10 and 40/20; G1 (10 µs < 20 µs) is launch-bound,
    G2 (20 µs) is not."""
    events = [
        op("aten::add", 95, 20), runtime("cudaLaunchKernel", 100, 10, 1, 0), kernel("K1", 112, 2, 1),
        runtime("cudaLaunchKernel", 120, 60, 2, 0), kernel("K2", 400, 100, 2),
        runtime("cudaMemsetAsync", 190, 5, 3, 0), kernel("Memset (Device)", 196, 1, 3, cat="gpu_memset"),
    ]
    if graph:
        events += [runtime("cudaGraphLaunch", 200, 20, 4, 0), kernel("G1", 230, 10, 4), kernel("G2", 240, 20, 4)]
    return write_trace(tmp_path / "w.pt.trace.json", events, distributedInfo={"rank": 0})


def test_paper_trace(tmp_path):
    got = tb_plugin.load(paper_trace(tmp_path)).kernel_launches().set_index("name")
    assert got.loc["K1", ["runtime_us", "device_us", "launch_delay_us", "delay_after_call_us"]].tolist() == [10, 2, 12, 2]
    assert got.loc["K2", ["launch_delay_us", "delay_after_call_us"]].tolist() == [280, 220]
    assert got.loc["Memset (Device)", ["launch_delay_us", "delay_after_call_us"]].tolist() == [6, 1]
    assert got["launch_bound"].to_dict() == {"K1": True, "K2": False, "Memset (Device)": True}
    assert got["runtime_outlier"].to_dict() == {"K1": False, "K2": True, "Memset (Device)": False}
    assert got["launch_delay_outlier"].to_dict() == {"K1": False, "K2": True, "Memset (Device)": False}
    assert got.loc["K1", "operator"] == "aten::add" and got.loc["K2", "operator"] == ""


def test_paper_trace_matches_hta(tmp_path):
    expected = hta_launches(paper_trace(tmp_path))
    assert expected[["correlation", "cpu_duration", "gpu_duration", "launch_delay"]].values.tolist() == [
        [1, 10, 2, 2], [2, 60, 100, 220], [3, 5, 1, 1]]


def test_cutoffs(tmp_path):
    got = tb_plugin.load(paper_trace(tmp_path)).kernel_launches(runtime_cutoff_us=5, launch_delay_cutoff_us=1.5)
    got = got.set_index("name")
    assert got["runtime_outlier"].to_dict() == {"K1": True, "K2": True, "Memset (Device)": False}
    assert got["launch_bound"].to_dict() == {"K1": False, "K2": False, "Memset (Device)": True}
    assert got["launch_delay_outlier"].to_dict() == {"K1": True, "K2": True, "Memset (Device)": False}


# --- deliberate differences from HTA, each named --------------------------------------------------

def test_difference_graph_launches_count_each_kernel(tmp_path):
    """HTA counts no cudaGraphLaunch; here each kernel of the graph is a launch under the
    graph's correlation id, with the graph launch's call duration."""
    path = paper_trace(tmp_path, graph=True)
    assert 4 not in hta_launches(path)["correlation"].tolist()
    got = tb_plugin.load(path).kernel_launches()
    graph = got[got["correlation"] == 4].set_index("name")
    assert graph["runtime"].tolist() == ["cudaGraphLaunch", "cudaGraphLaunch"]
    assert graph.loc["G1", ["runtime_us", "launch_delay_us", "delay_after_call_us"]].tolist() == [20, 30, 10]
    assert graph.loc["G2", ["runtime_us", "launch_delay_us", "delay_after_call_us"]].tolist() == [20, 40, 20]
    assert graph["launch_bound"].to_dict() == {"G1": True, "G2": False}


@pytest.mark.parametrize("run, call", [("triton_kernel", "cuLaunchKernel"), ("rocm_mi250", "hipLaunchKernel")])
def test_difference_other_launch_calls_count(run, call):
    """Triton's driver launches and ROCm's HIP launches are launches here; HTA has none."""
    path = shared_trace(run)
    assert len(hta_launches(path)) == 0
    got = tb_plugin.load(path).kernel_launches()
    assert (got["runtime"] == call).any()


# --- HTTP ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("route, table", [("kernel_launches", KERNEL_LAUNCHES), ("kernel_launch_summary", KERNEL_LAUNCH_SUMMARY)])
def test_launch_routes_json_and_csv(a100_client, route, table):
    url = f"{PREFIX}/{route}?run=a100&worker=rank0"
    body = a100_client.get(url).get_json()
    assert body["columns"] == table.names and body["rows"]
    rows = list(csv.reader(io.StringIO(a100_client.get(url + "&format=csv").get_data(as_text=True))))
    assert rows[0] == body["columns"] and len(rows) - 1 == len(body["rows"])


def test_launch_route_flag_filter(a100_client):
    body = a100_client.get(f"{PREFIX}/kernel_launches?run=a100&worker=rank0").get_json()
    everything = pd.DataFrame(body["rows"], columns=body["columns"])
    body = a100_client.get(f"{PREFIX}/kernel_launches?run=a100&worker=rank0&flag=launch_bound").get_json()
    flagged = pd.DataFrame(body["rows"], columns=body["columns"])
    assert len(flagged) == everything["launch_bound"].sum() and flagged["launch_bound"].all()


@pytest.mark.parametrize("params, fragment", [("&flag=slow", "launch_bound"), ("&runtime_cutoff_us=-1", ">= 0"),
                                              ("&launch_delay_cutoff_us=x", "a number")])
def test_launch_route_rejects_bad_parameters(a100_client, params, fragment):
    response = a100_client.get(f"{PREFIX}/kernel_launches?run=a100&worker=rank0{params}")
    assert response.status_code == 400 and fragment in response.get_json()["reason"]


def test_launch_bound_recommendation_counts_raw_events():
    """On the GPU sample most kernels are shorter than their launch call: the count is the
    raw JSON's kernels whose correlated runtime call lasted <= 50 µs and longer than them."""
    path = SAMPLES / "gpu_resnet50_v100"
    files = sorted(path.glob("*.pt.trace.json.gz"))
    if not files:
        pytest.skip("samples/gpu_resnet50_v100 is not available")
    events = raw_events(files[0])
    calls = {e["args"]["correlation"]: e["dur"] for e in events
             if e.get("ph") == "X" and str(e.get("cat", "")).lower() in ("cuda_runtime", "runtime") and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"
               and e.get("args", {}).get("correlation") in calls]
    bound = [k for k in kernels if calls[k["args"]["correlation"]] <= 50 and k["dur"] < calls[k["args"]["correlation"]]]
    rec = {r["id"]: r for r in tb_plugin.load(files[0]).recommendations()}["launch_bound"]
    assert (rec["numbers"]["launch_bound"], rec["numbers"]["kernels"]) == (len(bound), len(kernels))
    assert f"{len(bound)} of {len(kernels)} kernels" in rec["text"]
    assert rec["evidence"] == {"view": "gpu_idle", "params": {"launch_flag": "launch_bound"}, "panel": "launches"}


def test_no_launch_bound_recommendation_for_a_few_kernels(tmp_path):
    ids = [r["id"] for r in tb_plugin.load(paper_trace(tmp_path)).recommendations()]
    assert "launch_bound" not in ids
