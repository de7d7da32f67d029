"""The tree walks and flow pairing of `trace/linking.py`, on small cases worked out by hand.

The tree used below (node: parent), depths in brackets:

    0 [0]          5 [0]
    ├── 1 [1]      └── 6 [1]
    │   └── 2 [2]
    └── 3 [1]
        └── 4 [2]
"""

import numpy as np

from tb_plugin import load
from tb_plugin.trace.linking import ancestor_where, flow_peers, roll_up, tree_depth

from .helpers import op, write_trace

PARENT = np.array([-1, 0, 1, 0, 3, -1, 5])
DEPTH = np.array([0, 1, 2, 1, 2, 0, 1])


def test_tree_depth_counts_the_steps_to_a_root():
    assert tree_depth(PARENT).tolist() == DEPTH.tolist()
    assert tree_depth(np.array([], dtype=np.int64)).tolist() == []


def test_roll_up_sums_each_subtree():
    own = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    assert roll_up(own, PARENT, DEPTH).tolist() == [31.0, 6.0, 4.0, 24.0, 16.0, 96.0, 64.0]
    assert own.tolist() == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]  # the input is left alone


def test_roll_up_of_several_columns_and_of_flags():
    own = np.array([[1, 0], [0, 1], [1, 1], [0, 0], [0, 0], [0, 0], [1, 0]])
    assert roll_up(own, PARENT, DEPTH).tolist() == [[2, 2], [1, 2], [1, 1], [0, 0], [0, 0], [1, 0], [1, 0]]
    flags = np.array([False, False, False, False, True, False, False])
    assert roll_up(flags, PARENT, DEPTH, np.logical_or).tolist() == [True, False, False, True, True, False, False]


def test_a_node_left_out_of_the_roll_up_keeps_its_value_to_itself():
    parent = PARENT.copy()
    parent[3] = -1  # 3 (and with it 4) no longer adds to 0
    own = np.ones(7)
    assert roll_up(own, parent, DEPTH).tolist() == [3.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0]


def test_ancestor_where_finds_the_nearest_and_the_outermost():
    marked = np.array([True, True, False, False, False, False, True])
    assert ancestor_where(marked, PARENT, DEPTH).tolist() == [0, 1, 1, 0, 0, -1, 6]
    assert ancestor_where(marked, PARENT, DEPTH, outermost=True).tolist() == [0, 0, 0, 0, 0, -1, 6]


def test_flow_peers_pair_the_first_start_and_end_of_each_key():
    key = np.array([7, 7, 8, 7, 9, 8])
    is_start = np.array([True, False, True, True, True, False])
    is_end = ~is_start
    # key 7: rows 0 (first start) and 1; the second start (3) stays alone, as does 9 (no end)
    assert flow_peers(key, is_start, is_end).tolist() == [1, 0, 5, -1, -1, 2]


def test_flows_know_their_op_and_other_end_when_the_model_is_built(tmp_path):
    def flow(phase, flow_id, ts, cat="fwdbwd", tid=1):
        return {"ph": phase, "cat": cat, "name": cat, "id": flow_id, "pid": 1, "tid": tid, "ts": ts, "bp": "e"}

    events = [op("aten::mm", 0, 10), op("MmBackward0", 100, 20, tid=2), op("aten::add", 200, 5),
              flow("s", 1, 2), flow("f", 1, 101, tid=2),
              flow("s", 1, 201, cat="ac2g"),  # same id, another category: not the fwdbwd arrow's end
              flow("s", 2, 300)]  # no end
    model = load(str(write_trace(tmp_path / "w.pt.trace.json", events))).model
    names = model.ops["name"].astype(str).tolist()
    flows = model.flows.sort_values("ts")
    assert [names[o] if o >= 0 else None for o in flows["op"]] == ["aten::mm", "MmBackward0", "aten::add", None]
    peer = flows["peer"].tolist()
    rows = flows.index.tolist()
    assert (peer[0], peer[1], peer[2], peer[3]) == (rows[1], rows[0], -1, -1)


def test_innermost_container_is_torchs_parent_rule():
    """Worked on paper, as torch's `_populate_cpu_children` stack nests events: on thread 0,
    A [0, 100) holds Y [10, 20), and Z, the same interval as Y, is Y's child; F [90, 150) only
    partly overlaps A, so it is nobody's child, and X [95, 99) is F's, not A's; on thread 1,
    C starts where B ends: not its child."""
    from tb_plugin.trace.linking import innermost_container

    thread = [0, 0, 0, 0, 0, 1, 1]
    ts = [0, 90, 95, 10, 10, 0, 10]
    dur = [100, 60, 4, 10, 10, 10, 2]
    assert innermost_container(thread, ts, dur).tolist() == [-1, -1, 1, 0, 3, -1, -1]
