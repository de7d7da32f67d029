"""Module view against facts known independently: the structure of the models that recorded
the samples, raw JSON sums computed with the standard library, a trace recorded here from a
module tree built for the test, and a hand-made trace whose answers are worked out by hand."""

import collections
import importlib.util
import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.modules import MODULE_COLUMNS, module_flame, modules

from .helpers import SAMPLES, kernel, nested_modules_trace, op, python_frame, raw_events, runtime, write_trace

COLUMNS = ["node_id", "parent_id", "name", "module_type", "depth", "occurrences", "operators",
           "host_total_us", "host_self_us", "device_total_us", "device_self_us",
           "backward_host_total_us", "backward_device_total_us",
           "recompute_occurrences", "recompute_us", "recompute_device_us"]
SAMPLE_FILES = sorted((SAMPLES / "cpu_cnn").glob("*.pt.trace.json.gz")) + sorted(
    (SAMPLES / "cpu_ddp_gloo").glob("*.pt.trace.json.gz"))
EVALUATE = "autograd::engine::evaluate_function: "
# Autograd nodes the forward of each SmallCNN module type creates (see samples/generate.py).
BACKWARD_NODES = {
    "Conv2d": ["ConvolutionBackward0"],
    "BatchNorm2d": ["NativeBatchNormBackward0"],
    "ReLU": ["ReluBackward0"],
    "MaxPool2d": ["MaxPool2DWithIndicesBackward0"],
    "Linear": ["AddmmBackward0", "TBackward0"],  # F.linear on a 2-D input: addmm(bias, x, w.t())
    "CrossEntropyLoss": ["LogSoftmaxBackward0", "NllLossBackward0"],
}


def _paths(table):
    """Each node's path, its names from the root down joined by " > ", from the parent ids
    (parents come first in the table's depth-first order)."""
    paths = []
    for parent, name in zip(table["parent_id"], table["name"]):
        paths.append(name if parent < 0 else f"{paths[parent]} > {name}")
    return paths


def _type_paths(table):
    """Counter of root-to-node module type chains, e.g. ("SmallCNN", "Sequential", ...)."""
    types = dict(zip(table["node_id"], table["module_type"]))
    parents = dict(zip(table["node_id"], table["parent_id"]))
    paths = collections.Counter()
    for node in table["node_id"]:
        chain = []
        while node >= 0:
            chain.append(types[node])
            node = parents[node]
        paths[tuple(reversed(chain))] += 1
    return paths


def _module_type_paths(root, prefix=()):
    """The same Counter from a torch module's own `named_modules()`."""
    by_name = dict(root.named_modules())
    paths = collections.Counter()
    for name in by_name:
        parts = name.split(".") if name else []
        chain = [type(root).__name__] + [type(by_name[".".join(parts[:i + 1])]).__name__ for i in range(len(parts))]
        paths[tuple(prefix) + tuple(chain)] += 1
    return paths


def _raw_sum(events, name, cat):
    return sum(e["dur"] for e in events if e.get("ph") == "X" and e.get("cat") == cat and e.get("name") == name)


def _children_totals(table, column):
    sums = np.zeros(len(table))
    parents = table["parent_id"].to_numpy()
    np.add.at(sums, parents[parents >= 0], table[column].to_numpy()[parents >= 0])
    return sums


# --- schema and empty traces ---------------------------------------------------------------


def test_modules_columns_documented_with_dtypes():
    assert list(MODULE_COLUMNS) == COLUMNS
    doc = inspect.getdoc(modules)
    for column in COLUMNS:
        assert re.search(rf"- {column} \(", doc), column


def test_modules_trace_without_python_functions_is_empty(tmp_path):
    path = write_trace(tmp_path / "ops.pt.trace.json", [op("aten::mm", 0, 10), op("aten::add", 20, 5)])
    model = tb_plugin.load(path).model
    table = modules(model)
    assert list(table.columns) == COLUMNS
    assert len(table) == 0
    assert table["node_id"].dtype == np.int64 and table["host_total_us"].dtype == np.float64
    assert module_flame(model) == {"name": "All modules", "value": 0.0, "children": []}


def test_modules_python_frames_without_modules_is_empty(tmp_path):
    frame = {"ph": "X", "cat": "python_function", "name": "train.py(3): main", "pid": 1, "tid": 1, "ts": 0,
             "dur": 50, "args": {"Python id": 1, "Python parent id": 0}}
    path = write_trace(tmp_path / "stack.pt.trace.json", [frame, op("aten::mm", 5, 10)])
    table = modules(tb_plugin.load(path).model)
    assert list(table.columns) == COLUMNS and len(table) == 0


# --- the committed CPU samples (SmallCNN, alone and under DDP) -------------------------------


@pytest.fixture(scope="module")
def small_cnn_paths():
    spec = importlib.util.spec_from_file_location("sample_generate", SAMPLES / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    return generate.SmallCNN()


@pytest.fixture(scope="module", params=SAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name[:7]}")
def sample(request):
    path = request.param
    return path, raw_events(path), modules(tb_plugin.load(path).model)


def test_modules_tree_matches_model_structure_on_samples(sample, small_cnn_paths):
    path, _, table = sample
    prefix = ("DistributedDataParallel",) if path.parent.name == "cpu_ddp_gloo" else ()
    expected = _module_type_paths(small_cnn_paths, prefix)
    if prefix:
        expected[prefix] += 1
    expected[("CrossEntropyLoss",)] += 1  # the loss is a module called outside the model
    assert _type_paths(table) == expected
    # ids, parents, depths and paths agree with each other
    assert list(table["node_id"]) == list(range(len(table)))
    names = dict(zip(table["node_id"], table["name"]))
    for row, path in zip(table.itertuples(), _paths(table)):
        assert row.depth == path.count(" > ")
        assert row.parent_id < row.node_id  # depth-first order: parents first
        assert names[row.node_id].startswith(row.module_type + "_")


def test_modules_occurrences_equal_profiler_steps_on_samples(sample):
    _, events, table = sample
    steps = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                and re.fullmatch(r"ProfilerStep#\d+", e.get("name", "")))
    assert steps == 2
    assert (table["occurrences"] == steps).all()


def test_modules_host_total_equals_raw_frame_sums_on_samples(sample):
    _, events, table = sample
    assert table["name"].is_unique  # each instance runs at one place in these models
    for name, total in zip(table["name"], table["host_total_us"]):
        assert total == pytest.approx(_raw_sum(events, f"nn.Module: {name}", "python_function"), abs=1e-6), name


def test_modules_self_and_children_within_total_on_samples(sample):
    _, _, table = sample
    assert (table["host_self_us"] <= table["host_total_us"] + 1e-9).all()
    assert (table["host_self_us"] >= 0).all()
    for column in ("host_total_us", "backward_host_total_us", "operators"):
        assert (_children_totals(table, column) <= table[column].to_numpy() + 1e-6).all(), column
    expected_self = table["host_total_us"].to_numpy() - _children_totals(table, "host_total_us")
    assert table["host_self_us"].to_numpy() == pytest.approx(np.maximum(expected_self, 0))
    leaves = ~table["node_id"].isin(table["parent_id"])
    assert (table.loc[leaves, "host_self_us"] == table.loc[leaves, "host_total_us"]).all()


def test_modules_operators_equal_raw_counts_on_samples(sample):
    _, events, table = sample
    # cpu_op events starting inside each of the module's frames on its thread (child modules
    # included); no user annotation or same-name single child runs inside these modules
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    expected = collections.Counter()
    for frame in (e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")):
        expected[frame["name"][len("nn.Module: "):]] += sum(
            1 for o in ops if o["tid"] == frame["tid"] and frame["ts"] <= o["ts"] <= frame["ts"] + frame["dur"])
    assert dict(zip(table["name"], table["operators"])) == {name: expected[name] for name in table["name"]}
    block = table[table["module_type"] == "ConvBlock"]
    child_ops = _children_totals(table, "operators")[block.index]
    assert (block["operators"].to_numpy() == child_ops).all()  # ConvBlock.forward only calls modules


def test_modules_backward_matches_autograd_nodes_on_samples(sample):
    _, events, table = sample
    for module_type, nodes in BACKWARD_NODES.items():
        expected = sum(_raw_sum(events, EVALUATE + node, "cpu_op") for node in nodes)
        got = table.loc[table["module_type"] == module_type, "backward_host_total_us"].sum()
        assert expected > 0 and got == pytest.approx(expected), module_type
    # torch.flatten in SmallCNN.forward is its only own op with a backward node
    cnn = table.index[table["module_type"] == "SmallCNN"][0]
    own = table["backward_host_total_us"][cnn] - _children_totals(table, "backward_host_total_us")[cnn]
    assert own == pytest.approx(_raw_sum(events, EVALUATE + "ViewBackward0", "cpu_op"))
    # every backward node but AccumulateGrad (parameters, not module ops) lands on a root
    wrappers = sum(e["dur"] for e in events if e.get("cat") == "cpu_op" and e.get("name", "").startswith(EVALUATE)
                   and not e["name"].endswith("AccumulateGrad"))
    assert table.loc[table["parent_id"] < 0, "backward_host_total_us"].sum() == pytest.approx(wrappers)


def test_modules_device_time_zero_on_cpu_samples(sample):
    _, events, table = sample
    assert not any(e.get("cat") == "kernel" for e in events)
    assert (table[["device_total_us", "device_self_us", "backward_device_total_us"]] == 0).all().all()


def test_module_flame_mirrors_table_on_samples(sample):
    _, _, table = sample
    flame = module_flame(tb_plugin.load(sample[0]).model)
    seen = []

    def walk(node, parent_name):
        seen.append((node["name"], node["value"], parent_name))
        for child in node["children"]:
            walk(child, node["name"])

    for root in flame["children"]:
        walk(root, None)
    parent_names = [None if p < 0 else table["name"][p] for p in table["parent_id"]]
    assert seen == list(zip(table["name"], table["host_total_us"], parent_names))
    roots = table["parent_id"] < 0
    assert flame["value"] == pytest.approx(table.loc[roots, "host_total_us"].sum())


# --- a trace recorded here from a module tree built for the test -----------------------------

RUNS = 3


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    torch = pytest.importorskip("torch", reason="torch is needed to record a trace")
    nn = torch.nn

    class Sin(nn.Module):
        def forward(self, x):
            return torch.sin(x)

    class Cos(nn.Module):
        def forward(self, x):
            return torch.cos(x)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.sin, self.cos = Sin(), Cos()

        def forward(self, x):
            return self.cos(self.sin(self.sin(x)))  # one instance called twice

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block, self.tail = Block(), Sin()

        def forward(self, x):
            y = self.block.cos(torch.neg(self.block(x)))  # Block's Cos also called from here
            return self.tail(y)

    net = Net()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                with_stack=True, with_modules=True) as prof:
        for _ in range(RUNS):
            net(torch.randn(4, requires_grad=True)).sum().backward()
    path = tmp_path_factory.mktemp("recorded") / "tiny.pt.trace.json"
    prof.export_chrome_trace(str(path))
    return path, raw_events(path), modules(tb_plugin.load(path).model)


def _by_type_path(table):
    types = dict(zip(table["node_id"], table["module_type"]))
    out = {}
    for row in table.itertuples():
        chain, node = [], row.node_id
        while node >= 0:
            chain.append(types[node])
            node = table["parent_id"][node]
        out[" > ".join(reversed(chain))] = row
    return out


def test_modules_hierarchy_and_counts_on_recorded_trace(recorded):
    _, _, table = recorded
    rows = _by_type_path(table)
    # occurrences and operator calls per node, from the forward code above:
    # each Sin / Cos call is one aten::sin / aten::cos, Net adds one aten::neg.
    expected = {
        "Net": (RUNS, 6 * RUNS),
        "Net > Block": (RUNS, 3 * RUNS),
        "Net > Block > Sin": (2 * RUNS, 2 * RUNS),
        "Net > Block > Cos": (RUNS, RUNS),
        "Net > Cos": (RUNS, RUNS),
        "Net > Sin": (RUNS, RUNS),
    }
    assert {k: (r.occurrences, r.operators) for k, r in rows.items()} == expected
    # the Cos called from two places is one instance at two paths
    assert rows["Net > Block > Cos"].name == rows["Net > Cos"].name
    assert rows["Net > Block > Sin"].name != rows["Net > Sin"].name
    net, block, cos = rows["Net"].name, rows["Net > Block"].name, rows["Net > Cos"].name
    paths = dict(zip(table["node_id"], _paths(table)))
    assert paths[rows["Net > Block > Cos"].node_id] == f"{net} > {block} > {cos}"
    assert paths[rows["Net > Cos"].node_id] == f"{net} > {cos}"
    assert [rows[k].depth for k in ("Net", "Net > Block", "Net > Block > Sin")] == [0, 1, 2]


def test_modules_host_totals_equal_raw_sums_on_recorded_trace(recorded):
    _, events, table = recorded
    for name, group in table.groupby("name"):  # an instance at two paths splits its frames
        expected = _raw_sum(events, f"nn.Module: {name}", "python_function")
        assert group["host_total_us"].sum() == pytest.approx(expected, abs=1e-6), name
    assert (table["host_self_us"] <= table["host_total_us"]).all()


def test_modules_backward_follows_autograd_nodes_on_recorded_trace(recorded):
    _, events, table = recorded
    by_type = table.groupby("module_type")["backward_host_total_us"].sum()
    assert by_type["Sin"] == pytest.approx(_raw_sum(events, EVALUATE + "SinBackward0", "cpu_op"))
    assert by_type["Cos"] == pytest.approx(_raw_sum(events, EVALUATE + "CosBackward0", "cpu_op"))
    net = table.index[table["module_type"] == "Net"][0]
    own = table["backward_host_total_us"][net] - _children_totals(table, "backward_host_total_us")[net]
    assert own == pytest.approx(_raw_sum(events, EVALUATE + "NegBackward0", "cpu_op"))
    # .sum() runs outside every module: its SumBackward0 is attributed to none
    everything = sum(_raw_sum(events, EVALUATE + n, "cpu_op") for n in ("SinBackward0", "CosBackward0", "NegBackward0"))
    assert table["backward_host_total_us"][net] == pytest.approx(everything)


def test_modules_backward_without_flows_uses_sequence_numbers_on_recorded_trace(recorded, tmp_path):
    path, events, table = recorded
    assert any(e.get("cat") == "fwdbwd" for e in events)
    doc = json.loads(path.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "fwdbwd"]
    stripped = tmp_path / "noflows.pt.trace.json"
    stripped.write_text(json.dumps(doc))
    again = modules(tb_plugin.load(stripped).model)
    assert again["backward_host_total_us"].to_numpy() == pytest.approx(table["backward_host_total_us"].to_numpy())
    assert (again["backward_host_total_us"] > 0).all()


# --- a hand-made trace with device activity ----------------------------------------------------


def _flow(phase, flow_id, ts):
    event = {"ph": phase, "cat": "fwdbwd", "name": "fwdbwd", "id": flow_id, "pid": 1, "tid": 1, "ts": ts}
    if phase == "f":
        event["bp"] = "e"
    return event


def _hand_made_events(flows=True):
    """Outer (0-100) > forward() frame > Inner (10-50). aten::mm at 12 in Inner launches a 7 µs
    kernel; aten::add at 60 (Outer only) a 5 µs one; an earlier aten::empty in Outer shares
    the mm's sequence number. The mm's backward (200-230) launches an 11 µs kernel."""
    events = [
        python_frame("nn.Module: Outer_0", 0, 100, 1, 0, module_id=0),
        python_frame("model.py(9): forward", 1, 98, 2, 1),
        python_frame("nn.Module: Inner_0", 10, 40, 3, 2, module_id=0),
        op("aten::empty", 5, 1, **{"Sequence number": 5, "Fwd thread id": 0}),
        op("aten::mm", 12, 10, **{"External id": 1, "Sequence number": 5, "Fwd thread id": 0}),
        runtime("cudaLaunchKernel", 13, 2, correlation=100, external_id=1),
        op("aten::add", 60, 10, **{"External id": 2}),
        runtime("cudaLaunchKernel", 61, 2, correlation=101, external_id=2),
        op(EVALUATE + "MmBackward0", 200, 30, **{"External id": 3, "Sequence number": 5, "Fwd thread id": 1}),
        op("MmBackward0", 201, 28, **{"External id": 4, "Sequence number": 5, "Fwd thread id": 1}),
        op("aten::mm", 202, 20, **{"External id": 5}),
        runtime("cudaLaunchKernel", 203, 2, correlation=102, external_id=5),
        kernel("gemm_fwd", 300, 7, correlation=100),
        kernel("add_kernel", 310, 5, correlation=101),
        kernel("gemm_bwd", 320, 11, correlation=102),
    ]
    if flows:
        events += [_flow("s", 9, 12), _flow("f", 9, 201)]
    return events


@pytest.mark.parametrize("flows", [True, False], ids=["flows", "sequence_numbers"])
def test_modules_device_and_backward_on_hand_made_trace(tmp_path, flows):
    path = write_trace(tmp_path / "hand.pt.trace.json", _hand_made_events(flows))
    table = modules(tb_plugin.load(path).model)
    assert _paths(table) == ["Outer_0", "Outer_0 > Inner_0"]
    table = table.set_index("name")
    expected = {
        #            occ, ops, host total, host self, dev total, dev self, bwd host, bwd device
        "Outer_0": (1, 3, 100.0, 60.0, 12.0, 5.0, 30.0, 11.0),
        "Inner_0": (1, 1, 40.0, 40.0, 7.0, 7.0, 30.0, 11.0),
    }
    columns = ["occurrences", "operators", "host_total_us", "host_self_us", "device_total_us", "device_self_us",
               "backward_host_total_us", "backward_device_total_us"]
    for name, values in expected.items():
        assert tuple(table.loc[name, columns]) == pytest.approx(values), name


def test_modules_frames_without_python_ids_nest_by_time_on_hand_made_trace(tmp_path):
    def frame(name, ts, dur, tid):
        return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
                "args": {"Python module id": 0}}

    events = [frame("nn.Module: Outer_0", 0, 100, 1), frame("nn.Module: Inner_0", 10, 40, 1),
              frame("nn.Module: Outer_0", 0, 80, 2), frame("nn.Module: Inner_0", 20, 30, 2),
              frame("nn.Module: Inner_0", 120, 5, 2)]  # called alone: a root of its own
    table = modules(tb_plugin.load(write_trace(tmp_path / "noid.pt.trace.json", events)).model)
    got = {path: (row.occurrences, row.host_total_us, row.host_self_us) for row, path in zip(table.itertuples(), _paths(table))}
    assert got == {"Outer_0": (2, 180.0, 110.0), "Outer_0 > Inner_0": (2, 70.0, 70.0), "Inner_0": (1, 5.0, 5.0)}


# --- activation checkpointing, recorded here ----------------------------------------------------


@pytest.fixture(scope="module", params=[False, True], ids=["non_reentrant", "reentrant"])
def checkpointed(request, tmp_path_factory):
    """Net > (Block x 3, Linear head), Blocks 0 and 1 under torch.utils.checkpoint, RUNS
    iterations. A forward pre-hook on every module records, in call order, whether the call
    ran inside the backward (torch's graph task id is set then): the recomputations."""
    torch = pytest.importorskip("torch", reason="torch is needed to record a trace")
    from torch.utils.checkpoint import checkpoint
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.act = nn.Linear(16, 16), nn.ReLU()

        def forward(self, x):
            return self.act(self.fc(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks, self.head = nn.ModuleList([Block() for _ in range(3)]), nn.Linear(16, 1)

        def forward(self, x):
            for i, block in enumerate(self.blocks):
                x = checkpoint(block, x, use_reentrant=request.param) if i < 2 else block(x)
            return self.head(x)

    torch.manual_seed(0)
    net = Net()
    # module -> [ran inside the backward, ...] in call order; "order": every call's module
    calls = collections.defaultdict(list)

    def called(module, args):  # a pre-hook: a non-reentrant recomputation stops before the forward ends
        calls[module].append(torch._C._current_graph_task_id() != -1)
        calls["order"].append(module)

    for module in net.modules():
        module.register_forward_pre_hook(called)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True,
                                with_modules=True) as prof:
        for _ in range(RUNS):
            net(torch.randn(4, 16, requires_grad=True)).sum().backward()
    path = tmp_path_factory.mktemp("checkpoint") / "ckpt.pt.trace.json"
    prof.export_chrome_trace(str(path))
    return net, calls, raw_events(path), modules(tb_plugin.load(path).model)


def _frames_by_call(events, module_name):
    """The raw frames of one module instance, in time order (the order its hook saw the calls)."""
    return sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "python_function"
                   and e.get("name") == f"nn.Module: {module_name}"), key=lambda e: e["ts"])


def _instance_names(calls_in_order):
    """The profiler's instance names (<Type>_<n>, n counting a type's modules in the order of
    their first call) of the modules the hooks saw."""
    names, per_type = {}, collections.Counter()
    for module in calls_in_order:
        if module not in names:
            kind = type(module).__name__
            names[module] = f"{kind}_{per_type[kind]}"
            per_type[kind] += 1
    return names


def test_checkpointed_blocks_are_one_node_with_their_recompute(checkpointed):
    net, calls, events, table = checkpointed
    # one root and the model's own tree (ModuleList is never called): no extra roots
    assert _type_paths(table) == {("Net",): 1, ("Net", "Block"): 3, ("Net", "Block", "Linear"): 3,
                                  ("Net", "Block", "ReLU"): 3, ("Net", "Linear"): 1}
    module_of = {name: module for module, name in _instance_names(calls["order"]).items()}
    for row in table.itertuples():
        inside_backward = calls[module_of[row.name]]
        assert row.occurrences == inside_backward.count(False) == RUNS, row.name
        assert row.recompute_occurrences == inside_backward.count(True), row.name
        # the raw frames split as the hook saw the calls: forward time and recompute time
        frames = _frames_by_call(events, row.name)
        assert len(frames) == len(inside_backward)
        forward = sum(f["dur"] for f, again in zip(frames, inside_backward) if not again)
        assert row.host_total_us == pytest.approx(forward)
        assert row.recompute_us == pytest.approx(sum(f["dur"] for f, again in zip(frames, inside_backward) if again))
    # the two checkpointed blocks and their children were recomputed once per run, the third not
    recomputed = table.set_index("name")["recompute_occurrences"]
    assert [recomputed[f"Block_{i}"] for i in range(3)] == [RUNS, RUNS, 0]


def test_checkpoint_recompute_is_not_backward_time(checkpointed):
    """The backward of the whole model (the root's rolled-up backward) is every outermost
    autograd op's wall time, less the recomputed forwards run inside them (the raw frames the
    hooks saw called inside the backward, outermost ones: the Blocks)."""
    net, calls, events, table = checkpointed
    module_of = {name: module for module, name in _instance_names(calls["order"]).items()}
    recompute = sum(f["dur"] for i in range(2) for f, again in zip(_frames_by_call(events, f"Block_{i}"),
                                                                 calls[module_of[f"Block_{i}"]]) if again)
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    outermost = [e for e in ops if e["name"].startswith(EVALUATE)
                 and not any(o is not e and o["name"].startswith(EVALUATE) and o["tid"] == e["tid"]
                             and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"] for o in ops)]
    # SumBackward0 of .sum() runs outside every module, AccumulateGrad has no forward op: not attributed
    attributed = sum(e["dur"] for e in outermost
                     if e["name"] not in (EVALUATE + "SumBackward0", EVALUATE + "torch::autograd::AccumulateGrad"))
    root = table[table["parent_id"] < 0].iloc[0]
    assert root["backward_host_total_us"] == pytest.approx(attributed - recompute, rel=1e-9)


# --- issue 27, item 9: 5,000 nested modules ---------------------------------------------------

def test_5000_nested_modules_send_each_path_once_and_fold_the_flame(tmp_path):
    """Issue 27: `modules` repeated each row's full path (158 MB for this 1 MB trace) and
    `module_flame` could not be encoded (500: orjson's nesting limit). Paths are the parent
    ids; the flame graph draws FLAME_MAX_DEPTH levels and folds the rest into the last."""
    import orjson

    from tb_plugin.server.http import table_json
    from tb_plugin.views.modules import FLAME_MAX_DEPTH

    path = nested_modules_trace(tmp_path / "deep.pt.trace.json")
    assert path.stat().st_size < 1.1e6
    model = tb_plugin.load(path).model
    table = modules(model)
    assert len(table) == 5000 and table["depth"].max() == 4999
    assert (table["parent_id"].to_numpy() == np.arange(-1, 4999)).all()
    assert len(orjson.dumps(table_json(table))) < 1e6
    flame = module_flame(model)
    encoded = orjson.loads(orjson.dumps(flame))  # raised "Recursion limit reached" before
    node, levels = encoded["children"][0], 1
    while node["children"]:
        assert len(node["children"]) == 1 and "folded" not in node
        node, levels = node["children"][0], levels + 1
    assert levels == FLAME_MAX_DEPTH and node["name"] == f"Block_{FLAME_MAX_DEPTH - 1}"
    assert node["folded"] == 5000 - FLAME_MAX_DEPTH  # the modules below it, not drawn
    assert node["value"] == table["host_total_us"][FLAME_MAX_DEPTH - 1]  # a total: theirs included
    assert encoded["value"] == table["host_total_us"][0]
    openapi = (Path(tb_plugin.__file__).parent / "openapi.yaml").read_text()
    assert f"at most {FLAME_MAX_DEPTH} module levels" in openapi  # the declaration says the same bound
