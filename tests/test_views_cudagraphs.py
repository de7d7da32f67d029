"""CUDA graphs: a hand-made trace worked out on paper (no real trace with graph replays is
available; see the note in the module docstring of tb_plugin/views/cudagraphs.py). Kernels a
graph launch ran count in the step, operator and kernel views, attributed to the launch."""

import pytest

import tb_plugin
from tb_plugin.views.cudagraphs import ANNOTATIONS, KERNELS, LAUNCHES

from .helpers import ANNOTATED_NODES, annotated_graph_trace, kernel, make_client, op, runtime, wait_route, write_trace


@pytest.fixture
def graph_profile(tmp_path):
    """Step 0..1000: an eager aten::mm (gemm kernel 20..30, correlation 1), then inside
    `Torch-Compiled Region: 0/0` (100..150) a cudaGraphLaunch (correlation 7) whose graph ran
    triton_a 200..300, triton_b 300..500, triton_c 500..800, and a second step 1000..2000 whose
    only device work is a replay (cuGraphLaunch, correlation 8) of a graph of four 100 us
    kernels triton_a, triton_b, triton_c, triton_d from 1100 to 1500."""
    events = [
        op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        op("aten::mm", 10, 5, **{"External id": 1}),
        runtime("cudaLaunchKernel", 11, 2, correlation=1, external_id=1),
        kernel("gemm", 20, 10, correlation=1),
        op("Torch-Compiled Region: 0/0", 100, 50, **{"External id": 2}),
        runtime("cudaGraphLaunch", 110, 20, correlation=7, external_id=2),
        kernel("triton_a", 200, 100, correlation=7),
        kernel("triton_b", 300, 200, correlation=7),
        kernel("triton_c", 500, 300, correlation=7),
        op("ProfilerStep#2", 1000, 1000, cat="user_annotation"),
        op("Torch-Compiled Region: 0/0", 1010, 50, **{"External id": 3}),
        runtime("cuGraphLaunch", 1020, 20, correlation=8, external_id=3, cat="cuda_driver"),
        *[kernel(name, 1100 + 100 * i, 100, correlation=8)
          for i, name in enumerate(["triton_a", "triton_b", "triton_c", "triton_d"])],
    ]
    return tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events))


def test_launches_attributed_to_step_and_operator(graph_profile):
    launches = graph_profile.cuda_graph_launches()
    LAUNCHES.check(launches)
    assert list(launches["step"]) == [1, 2]
    assert list(launches["operator"]) == ["Torch-Compiled Region: 0/0"] * 2
    assert list(launches["kernels"]) == [3, 4]
    assert list(launches["device_us"]) == [600, 400] and list(launches["span_us"]) == [600, 400]


def test_kernel_names_say_which_ran_in_graphs(graph_profile):
    kernels = graph_profile.cuda_graph_kernels().set_index("name")
    KERNELS.check(graph_profile.cuda_graph_kernels())
    assert "gemm" not in kernels.index  # launched eagerly
    assert (kernels.loc["triton_a", "graph_calls"], kernels.loc["triton_a", "graph_us"]) == (2, 200)
    assert kernels.loc["triton_c", "graph_us"] == kernels.loc["triton_c", "total_us"] == 300 + 100


def test_graph_kernels_count_in_steps_operators_and_kernels(graph_profile):
    steps = graph_profile.steps().set_index("step")
    # step 1: gemm 10 + graph 600; step 2: the replay's 400 -- not an idle GPU
    assert steps.loc[1, "kernel_us"] == 610 and steps.loc[2, "kernel_us"] == 400
    region = graph_profile.operators().set_index("name").loc["Torch-Compiled Region: 0/0"]
    assert region.device_total_us == 600 + 400
    kernels = graph_profile.kernels().set_index("name")
    assert kernels.loc["triton_a", "calls"] == 2 and kernels.loc["triton_a", "total_us"] == 200
    assert graph_profile.compiled().iloc[0].kernel_count == 3 + 4


def test_cuda_graphs_route(graph_profile, tmp_path):
    import csv
    import io
    import shutil

    run_dir = tmp_path / "logdir" / "graphs"
    run_dir.mkdir(parents=True)
    shutil.copy(tmp_path / "w.pt.trace.json", run_dir / "worker0.pt.trace.json")
    plugin, client = make_client(tmp_path / "logdir")
    try:
        plugin.store.wait_for_scan(30)
        url = "/data/plugin/pytorch_profiler/cuda_graphs?run=graphs&worker=worker0"
        body = wait_route(client, url).get_json()
        assert body["launches"]["columns"] == LAUNCHES.names and len(body["launches"]["rows"]) == 2
        text = client.get(url + "&table=kernels&format=csv").get_data(as_text=True)
        assert [r["name"] for r in csv.DictReader(io.StringIO(text))] == \
            list(graph_profile.cuda_graph_kernels()["name"])
    finally:
        plugin.store.stop()


def test_annotated_graph_kernels_as_torchs_script_writes_them(tmp_path):
    """`annotated_graph_trace`, worked by hand: attention 100 + 200 us on stream 7 (the
    script's default for graph kernels without an annotated stream), mlp 300 us on stream
    61, the object's 50 us under its text; 650 us of graph time."""
    node = ANNOTATED_NODES
    profile = tb_plugin.load(annotated_graph_trace(tmp_path / "w.pt.trace.json"))

    table = profile.cuda_graph_annotations()
    ANNOTATIONS.check(table)
    rows = table.set_index("annotation")
    assert list(table["annotation"]) == ["attention", "mlp", "norm-object"]  # most time first
    assert rows.loc["attention", ["kernel_names", "calls", "device_us"]].tolist() == [2, 2, 300]
    assert (rows.loc["mlp", "device_us"], rows.loc["mlp", "streams"]) == (300, "61")
    assert (rows.loc["attention", "streams"], rows.loc["norm-object", "device_us"]) == ("7", 50)
    assert rows["graph_pct"].tolist() == pytest.approx([100 * 300 / 650, 100 * 300 / 650, 100 * 50 / 650])

    by_op = profile.kernels(group_by="name_op").set_index("name")
    assert by_op.loc["triton_mlp", "graph_annotation"] == "mlp" and by_op.loc["gemm", "graph_annotation"] == ""
    assert by_op.loc["triton_mlp", "operator"] == "Torch-Compiled Region: 0/0"  # the launch's op, as before
    kernels = profile.model.kernels.set_index("name")
    assert kernels.loc["triton_mlp", "stream"] == 61 and kernels.loc["triton_qk", "stream"] == 7
    assert kernels.loc["triton_qk", "graph_node_id"] == str(node[0]) and kernels.loc["gemm", "graph_node_id"] == ""

    # the Trace view's details of a kernel name its annotation
    index = profile.timeline()
    slices = index.slices
    event = int(slices.index[(slices["source"] == "kernels") & (slices["row"] == 2)][0])
    fields = profile.timeline_event(event)["fields"]
    assert (fields["graph_annotation"], fields["graph_node_id"]) == ("mlp", str(node[2]))
