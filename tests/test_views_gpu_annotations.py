"""GPU user annotations (`Profile.gpu_annotations`, route `gpu_annotations`): against HTA's
get_gpu_user_annotation_breakdown on the real traces that have them, and a hand-made nested
trace worked out on paper."""

import csv
import io

import pytest

import tb_plugin
from tb_plugin.views.gpu_annotations import GPU_ANNOTATIONS

from .helpers import PREFIX, kernel, write_trace
from .hta_reference import gpu_trace_files, hta


@pytest.fixture(scope="module", params=gpu_trace_files())
def trace(request):
    return request.param


def test_per_name_totals_match_hta(trace):
    got = tb_plugin.load(trace).gpu_annotations()
    GPU_ANNOTATIONS.check(got)
    if got.empty:
        pytest.skip("no gpu_user_annotation in this trace")
    analysis, rank = hta(trace)
    expected = analysis.get_gpu_user_annotation_breakdown(visualize=False, num_kernels=100_000).set_index("name")
    per_name = got.groupby("name").agg(total=("total_us", "sum"), calls=("calls", "sum"), lo=("min_us", "min"),
                                       hi=("max_us", "max"))
    assert sorted(per_name.index) == sorted(expected.index)
    for name, row in per_name.iterrows():
        assert row["total"] == pytest.approx(expected.loc[name, "sum (us)"], abs=1e-3)
        assert row["lo"] == pytest.approx(expected.loc[name, "min (us)"], abs=1e-3)
        assert row["hi"] == pytest.approx(expected.loc[name, "max (us)"], abs=1e-3)
        assert row["total"] / row["calls"] == pytest.approx(expected.loc[name, "mean (us)"], abs=1e-3)


def annotation(name, ts, dur, stream=7):
    return kernel(name, ts, dur, -1, stream=stream, cat="gpu_user_annotation")


def test_paper_trace_nesting(tmp_path):
    """Stream 7: "step" 0-100 holds "fwd" 0-40 and "bwd" 50-100, which holds "fwd" 60-70;
    "step" again 200-260 holding "fwd" 200-230. Stream 8: "copy" 10-20."""
    events = [annotation("step", 0, 100), annotation("fwd", 0, 40), annotation("bwd", 50, 50), annotation("fwd", 60, 10),
              annotation("step", 200, 60), annotation("fwd", 200, 30), annotation("copy", 10, 10, stream=8)]
    got = tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events)).gpu_annotations()
    rows = got[["path", "depth", "calls", "total_us", "min_us", "max_us"]].values.tolist()
    assert rows == [
        ["step", 0, 2, 160, 60, 100],
        ["step / fwd", 1, 2, 70, 30, 40],
        ["step / bwd", 1, 1, 50, 50, 50],
        ["step / bwd / fwd", 2, 1, 10, 10, 10],
        ["copy", 0, 1, 10, 10, 10],
    ]
    assert got.loc[3, "parent_path"] == "step / bwd" and got.loc[4, "stream"] == 8
    assert got.loc[0, ["first_start_us", "first_end_us"]].tolist() == [0, 100]


def test_gpu_annotations_route_json_and_csv(a100_client):
    url = f"{PREFIX}/gpu_annotations?run=a100&worker=rank0"
    body = a100_client.get(url).get_json()
    assert body["columns"] == GPU_ANNOTATIONS.names and body["rows"]
    rows = list(csv.reader(io.StringIO(a100_client.get(url + "&format=csv").get_data(as_text=True))))
    assert rows[0] == body["columns"] and len(rows) - 1 == len(body["rows"])
