"""Idle time per device stream (`Profile.idle_time`, route `idle_time`): against Holistic
Trace Analysis's idle time breakdown on every real GPU trace, on hand-made traces worked out
on paper, and each deliberate difference from HTA as a test that names it."""

import csv
import io

import numpy as np
import pandas as pd
import pytest

import tb_plugin
from tb_plugin.views.gpu_idle import IDLE_TIME, IDLE_TIME_BY_STEP

from .helpers import PREFIX, SAMPLES, kernel, op, raw_events, runtime, write_trace
from .hta_reference import gpu_trace_files, hta

CATEGORIES = {"host_wait": "idle_host_wait_us", "kernel_wait": "idle_kernel_wait_us", "other": "idle_other_us"}
# Our times are float µs relative to the trace's first event, HTA's the absolute ones: sums
# of thousands of gaps agree to float rounding, well within 0.01 µs per stream.
TOLERANCE_US = 0.01


def hta_idle(path, **options):
    """HTA's idle time per stream and category, as {stream: {our column: µs}}."""
    analysis, rank = hta(path, **options)
    table, _ = analysis.get_idle_time_breakdown(ranks=[rank], visualize=False)
    wide = table.pivot_table(index="stream", columns="idle_category", values="idle_time", aggfunc="sum")
    wide = wide.reindex(columns=list(CATEGORIES)).fillna(0.0).rename(columns=CATEGORIES)
    return {int(s): row for s, row in wide.to_dict("index").items()}


def ours(path, **options):
    table = tb_plugin.load(path).idle_time(**options)
    return {int(r["stream"]): r for r in table.to_dict("records")}


@pytest.fixture(scope="module", params=gpu_trace_files())
def trace(request):
    return request.param


def test_idle_time_matches_hta_per_stream(trace):
    expected = hta_idle(trace)
    got = ours(trace)
    assert set(got) == set(expected)
    for stream, categories in expected.items():
        for column, value in categories.items():
            assert got[stream][column] == pytest.approx(value, abs=TOLERANCE_US), (stream, column)


def test_busy_and_idle_make_the_span(trace):
    table = tb_plugin.load(trace).idle_time()
    IDLE_TIME.check(table)
    span = table["end_us"] - table["start_us"]
    np.testing.assert_allclose(table["busy_us"] + table["idle_us"], span, atol=1e-6)
    np.testing.assert_allclose(table[list(CATEGORIES.values())].sum(axis=1), table["idle_us"], atol=1e-6)
    assert (table[["busy_us", "idle_us", *CATEGORIES.values()]] >= 0).all().all()


def test_by_step_never_exceeds_the_whole_trace(trace):
    profile = tb_plugin.load(trace)
    whole = profile.idle_time().set_index(["device", "stream"])
    steps = profile.idle_time(by_step=True)
    IDLE_TIME_BY_STEP.check(steps)
    summed = steps.groupby(["device", "stream"])[["busy_us", "idle_us", *CATEGORIES.values()]].sum()
    joined = whole.loc[summed.index]
    assert (summed <= joined[summed.columns] + 1e-6).all().all()


# --- hand-made traces, worked out on paper ------------------------------------------------------

def paper_trace(tmp_path):
    """Two steps; stream 7 runs K1..K4, stream 8 one memcpy.

    step 1 (host 80-150): K1 launched at 90 runs 100-110; K2 launched at 95 runs 112-120
      (gap 110-112 = 2 µs, launched before it: kernel wait).
    step 2 (host 150-320): K3 launched at 160 runs 200-210 (gap 120-200 = 80 µs, launched
      after K2 ended: host wait); K4 launched at 165 runs 300-310 (gap 210-300 = 90 µs,
      launched long before: other); a memcpy launched at 170 runs 160-180 on stream 8.
    """
    events = [
        op("ProfilerStep#1", 80, 70, cat="user_annotation"),
        op("ProfilerStep#2", 150, 170, cat="user_annotation"),
        runtime("cudaLaunchKernel", 90, 3, 1, 1), kernel("K1", 100, 10, 1),
        runtime("cudaLaunchKernel", 95, 3, 2, 2), kernel("K2", 112, 8, 2),
        runtime("cudaLaunchKernel", 160, 3, 3, 3), kernel("K3", 200, 10, 3),
        runtime("cudaLaunchKernel", 165, 3, 4, 4), kernel("K4", 300, 10, 4),
        runtime("cudaMemcpyAsync", 155, 3, 5, 5), kernel("Memcpy HtoD", 160, 20, 5, stream=8, cat="gpu_memcpy"),
    ]
    return write_trace(tmp_path / "w.pt.trace.json", events, distributedInfo={"rank": 0})


def test_paper_trace_whole(tmp_path):
    got = ours(paper_trace(tmp_path))
    s7 = got[7]
    assert (s7["start_us"], s7["end_us"]) == (20, 230)  # 100 and 310 from the first event at 80
    assert (s7["busy_us"], s7["idle_us"]) == (38, 172)
    assert (s7["idle_host_wait_us"], s7["idle_kernel_wait_us"], s7["idle_other_us"]) == (80, 2, 90)
    assert (got[8]["busy_us"], got[8]["idle_us"]) == (20, 0)


def test_paper_trace_by_step(tmp_path):
    table = tb_plugin.load(paper_trace(tmp_path)).idle_time(by_step=True)
    rows = {(r["step"], r["stream"]): r for r in table.to_dict("records")}
    assert sorted(rows) == [(1, 7), (2, 7), (2, 8)]
    # step 1 is 80-150: stream 7 from 100; the host-wait gap 120-200 is cut at 150
    assert (rows[1, 7]["busy_us"], rows[1, 7]["idle_host_wait_us"], rows[1, 7]["idle_kernel_wait_us"]) == (18, 30, 2)
    # step 2 is 150-320: the rest of that gap (50), K3 and K4 (20) and the other gap (90)
    assert (rows[2, 7]["busy_us"], rows[2, 7]["idle_host_wait_us"], rows[2, 7]["idle_other_us"]) == (20, 50, 90)
    assert rows[2, 8]["busy_us"] == 20


def test_paper_trace_matches_hta(tmp_path):
    path = paper_trace(tmp_path)
    assert hta_idle(path)[7] == {"idle_host_wait_us": 80, "idle_kernel_wait_us": 2, "idle_other_us": 90}


def test_kernel_wait_threshold(tmp_path):
    """At 1 µs the 2 µs gap between K1 and K2 is no longer a kernel wait."""
    got = ours(paper_trace(tmp_path), kernel_wait_us=1.0)[7]
    assert (got["idle_kernel_wait_us"], got["idle_other_us"]) == (0, 92)


# --- deliberate differences from HTA, each named ---------------------------------------------------

def test_difference_overlapping_activity_on_a_stream_gives_no_negative_idle(tmp_path):
    """K2 (120-130) runs inside K1 (100-200), then K3 at 210. HTA takes each gap from the
    previous kernel's end: -80 µs before K2 (under 30 µs: kernel wait) and 80 µs before K3
    (other). Here the stream is busy until 200: one 10 µs kernel-wait gap, busy 110."""
    events = [
        runtime("cudaLaunchKernel", 90, 3, 1, 1), kernel("K1", 100, 100, 1),
        runtime("cudaLaunchKernel", 95, 3, 2, 2), kernel("K2", 120, 10, 2),
        runtime("cudaLaunchKernel", 100, 3, 3, 3), kernel("K3", 210, 10, 3),
    ]
    path = write_trace(tmp_path / "w.pt.trace.json", events, distributedInfo={"rank": 0})
    assert hta_idle(path)[7] == {"idle_host_wait_us": 0, "idle_kernel_wait_us": -80, "idle_other_us": 80}
    got = ours(path)[7]
    assert (got["idle_host_wait_us"], got["idle_kernel_wait_us"], got["idle_other_us"]) == (0, 10, 0)
    assert got["busy_us"] == 110


def _sample(name):
    files = sorted((SAMPLES / name).glob("*.pt.trace.json.gz"))
    if not files:
        pytest.skip(f"samples/{name} is not available")
    return files[0]


def _differs(a, b):
    return any(abs(a[s][c] - b[s][c]) > 1.0 for s in a for c in CATEGORIES.values())


def test_difference_hta_drops_the_last_step_by_default():
    """HTA 0.5 leaves out the device work launched in the last ProfilerStep unless
    include_last_profiler_step=True; we keep every activity of the trace (the per-step rows
    say which step it belongs to)."""
    path = _sample("gpu_a100_nccl")
    got = ours(path)
    assert _differs(hta_idle(path, include_last_profiler_step=False), got)
    expected = hta_idle(path, include_last_profiler_step=True)
    assert all(got[s][c] == pytest.approx(v, abs=TOLERANCE_US) for s in expected for c, v in expected[s].items())


def test_difference_hta_rounds_fractional_timestamps():
    """The A100 trace has timestamps with fractions of a µs: HTA 0.5 rounds starts up and ends
    down to whole µs by default (HTA_DISABLE_NS_ROUNDING=0), lengthening every gap; we keep the
    recorded times, and agree with HTA when it does too."""
    path = _sample("gpu_a100_nccl")
    got = ours(path)
    rounded = hta_idle(path, round_ns=True)
    assert _differs(rounded, got)
    assert sum(rounded[s]["idle_host_wait_us"] for s in rounded) > sum(got[s]["idle_host_wait_us"] for s in got)


def test_difference_every_device_has_rows(tmp_path):
    """HTA reads one rank's streams; a trace with work on two devices has rows for both."""
    events = [runtime("cudaLaunchKernel", 0, 3, 1, 1), kernel("K1", 10, 5, 1, device=0),
              runtime("cudaLaunchKernel", 1, 3, 2, 2), kernel("K2", 10, 5, 2, device=1)]
    table = tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events)).idle_time()
    assert table[["device", "stream"]].values.tolist() == [[0, 7], [1, 7]]


# --- HTTP ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("params, table", [("", IDLE_TIME), ("&by_step=true", IDLE_TIME_BY_STEP)])
def test_idle_time_route_json_and_csv(a100_client, params, table):
    url = f"{PREFIX}/idle_time?run=a100&worker=rank0{params}"
    body = a100_client.get(url).get_json()
    assert body["columns"] == table.names and body["rows"]
    rows = list(csv.reader(io.StringIO(a100_client.get(url + "&format=csv").get_data(as_text=True))))
    assert rows[0] == body["columns"] and len(rows) - 1 == len(body["rows"])
    expected = tb_plugin.load(_sample("gpu_a100_nccl")).idle_time(by_step=bool(params))
    got = pd.DataFrame(body["rows"], columns=body["columns"])
    np.testing.assert_allclose(got["idle_us"], expected["idle_us"])


@pytest.mark.parametrize("params, fragment", [("&by_step=yes", "by_step"), ("&kernel_wait_us=-1", ">= 0"),
                                              ("&kernel_wait_us=abc", "a number")])
def test_idle_time_route_rejects_bad_parameters(a100_client, params, fragment):
    response = a100_client.get(f"{PREFIX}/idle_time?run=a100&worker=rank0{params}")
    assert response.status_code == 400 and fragment in response.get_json()["reason"]


def test_host_bound_recommendation_uses_htas_idle_breakdown():
    """The A100 sample idles mostly waiting on the host (and has no DataLoader, which would
    get the advice instead): the recommendation's numbers are HTA's host-wait and idle totals
    over the streams, per step (over the raw ProfilerSteps), and it points at this view."""
    path = _sample("gpu_a100_nccl")
    expected = hta_idle(path)
    host_wait = sum(s["idle_host_wait_us"] for s in expected.values())
    idle = sum(sum(s.values()) for s in expected.values())
    steps = sum(1 for e in raw_events(path) if e.get("cat") == "user_annotation"
                and str(e.get("name", "")).startswith("ProfilerStep#"))
    items = {r["id"]: r for r in tb_plugin.load(path).recommendations()}
    rec = items["host_bound"]
    assert rec["steps"] == steps
    assert rec["numbers"]["idle_host_wait_us"] == pytest.approx(host_wait / steps, abs=TOLERANCE_US)
    assert rec["numbers"]["host_wait_share"] == pytest.approx(host_wait / idle)
    assert f"{host_wait / idle:.0%}" in rec["text"] and rec["evidence"]["view"] == "gpu_idle"


def test_no_host_bound_recommendation_on_a_busy_gpu(tmp_path):
    """Back-to-back kernels launched well ahead: no host wait, no recommendation."""
    events = [e for i in range(50) for e in (runtime("cudaLaunchKernel", i, 1, i + 1, 0),
                                             kernel(f"K{i}", 100 + 10 * i, 10, i + 1))]
    ids = [r["id"] for r in tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events)).recommendations()]
    assert "host_bound" not in ids
