"""The tree walks of `trace/linking.py` on small trees worked out by hand.

The tree used below (node: parent), depths in brackets:

    0 [0]          5 [0]
    ├── 1 [1]      └── 6 [1]
    │   └── 2 [2]
    └── 3 [1]
        └── 4 [2]
"""

import numpy as np

from tb_plugin.trace.linking import ancestor_where, roll_up, tree_depth

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
