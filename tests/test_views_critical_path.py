"""Critical path of a step (`Profile.critical_path`, route `critical_path`): hand-made traces
whose path was worked out on paper (one stream with a blocking sync, two streams, a CUDA
graph), and on the real traces the invariant that the path tiles the step."""

import csv
import io

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.common import step_windows
from tb_plugin.views.critical_path import CRITICAL_PATH, CRITICAL_PATH_CATEGORIES, CRITICAL_PATH_OPERATORS

from .conftest import kernel, op, runtime, write_trace
from .hta_reference import gpu_trace_files
from .test_api import PREFIX
from .test_views_gpu_idle import served  # noqa: F401 (the A100 sample served over HTTP)


def load(tmp_path, events):
    return tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events))


def segments(profile, step=1):
    path = profile.critical_path(step)
    CRITICAL_PATH.check(path)
    return [(r["category"], r["start_us"], r["end_us"], r["name"]) for r in path.to_dict("records")]


def test_one_stream_with_a_blocking_sync(tmp_path):
    """ProfilerStep#1 0-200; aten::mm 8-22 launches K1 (call 10-15, runs 20-120) and K2 (call
    16-20, runs 120-150); cudaDeviceSynchronize 25-152; aten::item 152-190.
    Backwards from 200: CPU 152-200 after the sync, which waited 150-152 for K2 (120-150),
    which followed K1 on the stream (20-120), which waited for its launch call (10-20),
    after CPU 0-10."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 200, cat="user_annotation"), op("aten::mm", 8, 14, **{"External id": 1}),
        runtime("cudaLaunchKernel", 10, 5, 1, 1), kernel("K1", 20, 100, 1),
        runtime("cudaLaunchKernel", 16, 4, 2, 1), kernel("K2", 120, 30, 2),
        runtime("cudaDeviceSynchronize", 25, 127, 3, 0), op("aten::item", 152, 38),
    ])
    assert segments(profile) == [("cpu", 0, 10, ""), ("launch", 10, 20, "cudaLaunchKernel"), ("kernel", 20, 120, "K1"),
                                 ("kernel", 120, 150, "K2"), ("sync", 150, 152, "cudaDeviceSynchronize"),
                                 ("cpu", 152, 200, "")]
    categories = profile.critical_path(1, "categories")
    CRITICAL_PATH_CATEGORIES.check(categories)
    times = dict(zip(categories["category"], categories["time_us"]))
    assert (times["cpu"], times["launch"], times["kernel"], times["sync"]) == (58, 10, 130, 2)
    assert categories["share_pct"].sum() == pytest.approx(100)
    operators = profile.critical_path(1, "operators")
    CRITICAL_PATH_OPERATORS.check(operators)
    # aten::mm: 2 µs of its own CPU time (8-10), the launch (10) and both kernels (130);
    # aten::item: 38; ProfilerStep#1: its own CPU time (8 + 10) and the sync it made (2).
    # segments: one for an operator's CPU time, plus its device, launch and sync segments
    assert operators[["operator", "time_us", "segments"]].values.tolist() == [
        ["aten::mm", 142, 4], ["aten::item", 38, 1], ["ProfilerStep#1", 20, 2]]


def test_two_streams(tmp_path):
    """K1 on stream 8 (call 5-8, runs 20-100); K2 on stream 7 launched at 10 but starting at
    100, when K1 ends (an event wait); the step's host range is 0-50, its window 0-130.
    Backwards: K2 (100-130) waited for K1 on the other stream (100-100, no gap), K1 for its
    launch (5-20), after CPU 0-5."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 50, cat="user_annotation"),
        runtime("cudaLaunchKernel", 5, 3, 1, 0), kernel("K1", 20, 80, 1, stream=8),
        runtime("cudaLaunchKernel", 10, 2, 2, 0), kernel("K2", 100, 30, 2, stream=7),
    ])
    assert segments(profile) == [("cpu", 0, 5, ""), ("launch", 5, 20, "cudaLaunchKernel"), ("kernel", 20, 100, "K1"),
                                 ("kernel", 100, 130, "K2")]
    assert profile.critical_path(1)["stream"].tolist() == [-1, -1, 8, 7]


def test_stream_wait_with_a_gap(tmp_path):
    """As above but K2 starts at 110: the 10 µs after K1 are a wait on the other stream."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 50, cat="user_annotation"),
        runtime("cudaLaunchKernel", 5, 3, 1, 0), kernel("K1", 20, 80, 1, stream=8),
        runtime("cudaLaunchKernel", 10, 2, 2, 0), kernel("K2", 110, 30, 2, stream=7),
    ])
    assert segments(profile)[-2:] == [("stream_wait", 100, 110, ""), ("kernel", 110, 140, "K2")]


def test_cuda_graph(tmp_path):
    """cudaGraphLaunch 10-20 launches G1 (30-50) and G2 (50-60) under one correlation id;
    cudaStreamSynchronize 21-61; step 0-70. Backwards: CPU 61-70, sync 60-61, G2, G1 after it
    on the stream, G1's launch by the graph (10-30), CPU 0-10."""
    profile = load(tmp_path, [
        op("ProfilerStep#1", 0, 70, cat="user_annotation"),
        runtime("cudaGraphLaunch", 10, 10, 5, 0), kernel("G1", 30, 20, 5), kernel("G2", 50, 10, 5),
        runtime("cudaStreamSynchronize", 21, 40, 6, 0),
    ])
    assert segments(profile) == [("cpu", 0, 10, ""), ("launch", 10, 30, "cudaGraphLaunch"), ("kernel", 30, 50, "G1"),
                                 ("kernel", 50, 60, "G2"), ("sync", 60, 61, "cudaStreamSynchronize"), ("cpu", 61, 70, "")]


def test_unknown_step(tmp_path):
    profile = load(tmp_path, [op("ProfilerStep#1", 0, 70, cat="user_annotation")])
    with pytest.raises(KeyError, match="no step 9"):
        profile.critical_path(9)


@pytest.fixture(scope="module", params=gpu_trace_files())
def trace(request):
    return request.param


def test_path_tiles_every_step(trace):
    """On every real trace, the segments of each step's path follow each other without gap
    or overlap from the step's start to its end."""
    profile = tb_plugin.load(trace)
    for w in step_windows(profile.model).to_dict("records"):
        path = profile.critical_path(int(w["step"]))
        assert path["start_us"].iloc[0] == pytest.approx(w["start_us"]) and path["end_us"].iloc[-1] == pytest.approx(w["end_us"])
        np.testing.assert_allclose(path["start_us"].to_numpy()[1:], path["end_us"].to_numpy()[:-1])
        assert (path["dur_us"] > 0).all()


@pytest.mark.parametrize("table, declared", [("segments", CRITICAL_PATH), ("categories", CRITICAL_PATH_CATEGORIES),
                                             ("operators", CRITICAL_PATH_OPERATORS)])
def test_critical_path_route(served, table, declared):  # noqa: F811
    url = f"{PREFIX}/critical_path?run=a100&worker=rank0&step=5&table={table}"
    body = served.get(url).get_json()
    assert body["columns"] == declared.names and body["rows"]
    rows = list(csv.reader(io.StringIO(served.get(url + "&format=csv").get_data(as_text=True))))
    assert rows[0] == body["columns"] and len(rows) - 1 == len(body["rows"])


@pytest.mark.parametrize("params, status, fragment", [("&step=99", 404, "steps: 4, 5, 6"), ("&table=x", 400, "segments")])
def test_critical_path_route_errors(served, params, status, fragment):  # noqa: F811
    response = served.get(f"{PREFIX}/critical_path?run=a100&worker=rank0{params}")
    assert response.status_code == status and fragment in response.get_json()["reason"]
