"""Module view: the nn.Module hierarchy with forward and backward time per module.

Needs traces recorded with `with_stack=True, with_modules=True` (PyTorch 2.x): each module
forward is then a `python_function` frame named `nn.Module: <Type>_<n>` carrying a
`Python module id`. Other traces give an empty table with the same columns.
"""

import re
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import declare, documented, route, tab
from ..trace.linking import Nesting, ancestor_where, lookup, roll_up, tree_depth
from ..trace.model import TraceModel
from .common import cached, device_activity, name_mask, operator_tree

MODULE_PREFIX = "nn.Module: "
FLAME_ROOT = "All modules"
# Module levels the flame graph nests at most below its root; deeper nodes are folded into
# their ancestor at the last level (its `folded` counts them). JSON encoders and the page
# recurse per level: 5,000 nested modules made `module_flame` fail (orjson stops at 255).
FLAME_MAX_DEPTH = 64
_INSTANCE = re.compile(r"^(?P<type>.+?)_\d+$")

MODULES = declare(
    "modules", "one module at one path of the nn.Module hierarchy, in depth-first order (siblings by first start)",
    ("node_id", "int64", "", "row number, 0..n-1"),
    ("parent_id", "int64", "", "node_id of the enclosing module's node; -1 for a root"),
    ("name", "str", "", "module instance as the profiler names it, e.g. Conv2d_1"),
    ("module_type", "str", "", "class name: the instance name without _<n>, e.g. Conv2d"),
    ("depth", "int64", "", "0 for roots; the node's path is the names up its parent_id chain"),
    ("occurrences", "int64", "count", "forward calls of the module at this path (recomputations not included)"),
    ("operators", "int64", "count", "operator calls (as the operator view counts them) inside those forward calls"),
    ("host_total_us", "float64", "us", "summed wall time of the module's forward frames (recomputations not included)"),
    ("host_self_us", "float64", "us", "host_total_us minus the children nodes' host_total_us (never below 0)"),
    ("device_total_us", "float64", "us", "device activity launched inside the forward calls, child modules included"),
    ("device_self_us", "float64", "us", "the part of device_total_us launched outside child modules"),
    ("backward_host_total_us", "float64", "us", "wall time of the backward ops of the module's forward ops, less the "
     "recomputed forwards run inside them (Notes)"),
    ("backward_device_total_us", "float64", "us", "device activity of those backward ops and of the ops they called, "
     "recomputation excluded"),
    ("recompute_occurrences", "int64", "count", "forward calls of the module run again inside the backward "
     "(activation checkpointing)"),
    ("recompute_us", "float64", "us", "summed wall time of those recomputed forward frames"),
    ("recompute_device_us", "float64", "us", "device activity launched inside them, child modules included"),
)
MODULE_COLUMNS = MODULES.names


@documented(MODULES)
def modules(model: TraceModel) -> pd.DataFrame:
    """The nn.Module tree: one row per module at one path of the hierarchy.

    A node is a module instance reached through one chain of enclosing modules, e.g.
    ``SmallCNN_0 > Sequential_0 > ConvBlock_1 > Conv2d_1``; a module called from two
    places gives two nodes, a module called twice from one place one node with two
    occurrences. Frames on every thread with the same path are one node. The path is not a
    column: it is the names up the `parent_id` chain (as text per row it grew with the square
    of the depth, 158 MB for 5,000 nested modules).

    Parameters
    ----------
    model : TraceModel

    Returns
    -------
    DataFrame, one row per node; an empty table when the trace has no module frames.

    Notes
    -----
    1. Module frames are the python_function frames named ``nn.Module: ...`` (or carrying a
       `Python module id`). A frame's parent module is its nearest module ancestor through
       `Python parent id`, skipping intermediate frames (``_call_impl``, ``forward`` ...);
       frames without a `Python id` fall back to time containment among module frames.
    2. Nodes are built level by level: a node is (parent node, instance name).
    3. An operator, or the launch (runtime call) of device activity, belongs to the innermost
       module frame enclosing its start on its thread; self values sum per node, totals add
       the children's, deepest level first.
    4. Backward: a backward op is an op with a `Sequence number` and a `Fwd thread id` > 0
       (``autograd::engine::evaluate_function: XBackward0`` and the ``XBackward0`` node inside
       it share both). Its forward op is found through the `fwdbwd` flow whose end lies in it
       (the flow starts at the forward op); without a flow, through the latest op that starts
       before it with the same sequence number and a `Fwd thread id` of 0 or none, on the thread
       learnt from the flows (any thread when the flows do not tell). The backward time is the
       wall time of the outermost backward ops (those inside no other backward op), counted
       for the module whose frame encloses the forward op's start.

    5. Activation checkpointing (`torch.utils.checkpoint`) runs a block's forward again inside
       the backward. Such a recomputed frame has no module frame around it (its Python parents
       are the backward's frames) and starts inside an outermost backward op on its thread; it
       and the module frames inside it are counted on the node of the module's own forward
       call (the first node with that instance name; its children by name below it), as
       `recompute_occurrences`, `recompute_us` and `recompute_device_us`, never as
       occurrences or forward time, and never as extra roots. The ops inside them are not
       counted in `operators`, and their time is taken out of the backward op that ran them
       (the recomputation is shown once, on the checkpointed block).

    Backward ops with no forward op in the trace (the forward ran before the profiler
    started), `AccumulateGrad` (no sequence number) and DDP's reducer work in hooks are not
    attributed to any module.
    """
    return cached(model, "modules", lambda: _build(model)).copy()


def module_flame(model: TraceModel, max_depth: int = FLAME_MAX_DEPTH) -> dict[str, Any]:
    """The module tree as nested dicts for a flame graph, at most `max_depth` module levels
    deep.

    Returns
    -------
    dict
        ``{"name": "All modules", "value": <sum of the roots' host_total_us>, "children":
        [...]}`` where each child is ``{"name": <instance name>, "value": <host_total_us>,
        "children": [...]}`` in the order of `modules`; without module frames the root has
        value 0.0 and no children. A node at the last level drawn (`depth` max_depth - 1)
        with modules below it has no children but ``"folded": <nodes below it>``; its value,
        a total, still includes theirs.
    """
    table = modules(model)
    depth, parent = table["depth"].to_numpy(), table["parent_id"].to_numpy()
    below = roll_up(np.ones(len(table), np.int64), parent, depth) - 1  # nodes under each node
    shown = np.flatnonzero(depth < max_depth)
    names, values = table["name"].to_numpy()[shown].tolist(), table["host_total_us"].to_numpy()[shown].tolist()
    nodes: list[dict[str, Any]] = [{"name": name, "value": value, "children": []} for name, value in zip(names, values)]
    for i in np.flatnonzero((depth[shown] == max_depth - 1) & (below[shown] > 0)).tolist():
        nodes[i]["folded"] = int(below[shown[i]])
    root: dict[str, Any] = {"name": FLAME_ROOT, "value": 0.0, "children": []}
    # Rows are in depth-first order, so a shown node's parent is shown, at its rank in `shown`.
    position = np.searchsorted(shown, parent[shown])
    for node, up, at in zip(nodes, parent[shown].tolist(), position.tolist()):  # one step per node drawn
        (root if up < 0 else nodes[at])["children"].append(node)
    root["value"] = float(sum(child["value"] for child in root["children"]))
    return root


def _empty() -> pd.DataFrame:
    return MODULES.frame({column: [] for column in MODULES.names})


def module_frames(model: TraceModel) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Module frames (rows of model.python) and, per frame, the index of its parent module
    frame in the same arrays (-1 for a root)."""
    py = model.python
    is_module = name_mask(py["name"], lambda n: n.startswith(MODULE_PREFIX)) | (py["python_module_id"].to_numpy() >= 0)
    rows = np.flatnonzero(is_module)
    if not len(rows):
        return rows, np.zeros(0, np.int64)
    python_id = py["python_id"].to_numpy()
    parent_row = lookup(python_id, py["python_parent_id"].to_numpy())
    ancestor = parent_row[rows]
    # Climb through non-module frames, one stack level per round (tens of rounds at most).
    for _ in range(len(py) + 1):
        pending = ancestor >= 0
        pending[pending] = ~is_module[ancestor[pending]]
        if not pending.any():
            break
        ancestor[pending] = parent_row[ancestor[pending]]
    else:
        ancestor[:] = -1  # a cycle in the parent ids: trust time nesting instead
        python_id = np.full(len(py), -1)
    frame_of_row = np.full(len(py), -1, dtype=np.int64)
    frame_of_row[rows] = np.arange(len(rows))
    parent_frame = np.where(ancestor >= 0, frame_of_row[np.clip(ancestor, 0, None)], -1)
    no_id = python_id[rows] < 0
    if no_id.any():
        nesting = Nesting(py["thread"].to_numpy()[rows], py["ts"].to_numpy()[rows], py["dur"].to_numpy()[rows])
        parent_frame[no_id] = nesting.parent[no_id]
    return rows, parent_frame


def _assign_nodes(name_code: npt.NDArray[np.int64], parent_frame: npt.NDArray[np.int64]) \
        -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Node of each frame, built level by level; returns (node_of_frame, node_parent, node_name_code)."""
    n = len(name_code)
    node_of = np.full(n, -1, dtype=np.int64)
    node_parent: list[int] = []
    node_name: list[int] = []
    frontier = parent_frame < 0
    width = int(name_code.max()) + 1 if n else 1
    while frontier.any():  # one round per module depth level
        parent_node = np.where(parent_frame[frontier] >= 0, node_of[np.clip(parent_frame[frontier], 0, None)], -1)
        codes, uniques = pd.factorize((parent_node + 1) * width + name_code[frontier])
        node_of[frontier] = len(node_parent) + codes
        node_parent.extend((uniques // width - 1).tolist())
        node_name.extend((uniques % width).tolist())
        frontier = (node_of < 0) & (parent_frame >= 0)
        frontier[frontier] = node_of[parent_frame[frontier]] >= 0
    # Frames left unassigned sit on a cycle of parent ids; they are dropped.
    return node_of, np.asarray(node_parent, dtype=np.int64), np.asarray(node_name, dtype=np.int64)


def _recompute_roots(model: TraceModel, rows: npt.NDArray[np.int64], parent_frame: npt.NDArray[np.int64]) \
        -> npt.NDArray[np.bool_]:
    """Per module frame: whether it is a recomputed forward's outermost frame (Notes 5): no
    module frame around it, and its start inside an outermost backward op on its thread."""
    ops = model.ops
    seq, fwd_tid = ops["sequence_number"].to_numpy(), ops["fwd_thread_id"].to_numpy()
    is_bwd = (seq >= 0) & (fwd_tid > 0)
    root = parent_frame < 0
    if not is_bwd.any() or not root.any():
        return np.zeros(len(rows), dtype=bool)
    outermost = ancestor_where(is_bwd, ops["parent"].to_numpy(), ops["depth"].to_numpy(), outermost=True)
    bwd = np.flatnonzero(is_bwd & (outermost == np.arange(len(ops))))
    backward = Nesting(ops["thread"].to_numpy()[bwd], ops["ts"].to_numpy()[bwd], ops["dur"].to_numpy()[bwd])
    py = model.python
    inside = backward.enclosing(py["thread"].to_numpy()[rows], py["ts"].to_numpy()[rows]) >= 0
    return root & inside


def _attach_recomputes(name_code: npt.NDArray[np.int64], ts: npt.NDArray[np.float64],
                       parent_frame: npt.NDArray[np.int64], recompute_root: npt.NDArray[np.bool_]) \
        -> npt.NDArray[np.int64]:
    """Parent frames with each recomputed root given the parent of the first forward frame
    of the same module instance, so that node building puts it (and its children) on the
    forward's nodes."""
    forward = np.flatnonzero(~recompute_root)
    if not recompute_root.any() or not len(forward):
        return parent_frame
    by_start = forward[np.argsort(ts[forward], kind="stable")]
    codes, first = np.unique(name_code[by_start], return_index=True)
    first_frame = by_start[first]
    wanted = np.flatnonzero(recompute_root)
    at = np.clip(np.searchsorted(codes, name_code[wanted]), 0, len(codes) - 1)
    found = codes[at] == name_code[wanted]
    out = parent_frame.copy()
    out[wanted[found]] = parent_frame[first_frame[at[found]]]
    return out


def _backward_roots(model: TraceModel) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Outermost backward ops and where their forward op starts.

    Returns (rows into model.ops, forward thread, forward start ts); rows whose forward op
    was not found are left out. See `modules`, Notes 4.
    """
    ops = model.ops
    seq = ops["sequence_number"].to_numpy()
    fwd_tid = ops["fwd_thread_id"].to_numpy()
    thread, ts = ops["thread"].to_numpy(), ops["ts"].to_numpy()
    is_bwd = (seq >= 0) & (fwd_tid > 0)
    is_fwd = (seq >= 0) & (fwd_tid <= 0)
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    if not is_bwd.any():
        return empty
    # Outermost: no backward op among the ancestors.
    outermost_bwd = ancestor_where(is_bwd, ops["parent"].to_numpy(), ops["depth"].to_numpy(), outermost=True)
    roots = np.flatnonzero(is_bwd & (outermost_bwd == np.arange(len(ops))))
    # 1. fwdbwd flows (paired when the model was built): start (s) at the forward op, end (f)
    # inside the backward op, which is the innermost backward op around the end's op.
    flows = model.flows
    peer = flows["peer"].to_numpy()
    starts = np.flatnonzero((flows["cat"] == "fwdbwd").to_numpy() & (flows["phase"] == "s").to_numpy() & (peer >= 0))
    end_op = flows["op"].to_numpy()[peer[starts]]
    nearest_bwd = ancestor_where(is_bwd, ops["parent"].to_numpy(), ops["depth"].to_numpy())
    hit = np.where(end_op >= 0, nearest_bwd[np.clip(end_op, 0, None)], -1) if len(ops) else end_op
    ok = hit >= 0
    op_rows = hit[ok]
    linked = pd.DataFrame({"fwd_tid": fwd_tid[op_rows], "seq": seq[op_rows],
                           "fwd_thread": flows["thread"].to_numpy()[starts[ok]],
                           "fwd_ts": flows["ts"].to_numpy()[starts[ok]]}).drop_duplicates(["fwd_tid", "seq"])
    want = pd.DataFrame({"row": roots, "fwd_tid": fwd_tid[roots], "seq": seq[roots], "ts": ts[roots]})
    want = want.merge(linked, on=["fwd_tid", "seq"], how="left")
    # 2. Sequence numbers for the rest: the latest forward op with that number before the
    # backward op, on the thread the flows tie to that `Fwd thread id` when they do.
    missing = want["fwd_thread"].isna().to_numpy()
    if missing.any() and is_fwd.any():
        thread_of_tid = linked.groupby("fwd_tid")["fwd_thread"].agg(lambda s: s.mode().iloc[0])
        fwd = pd.DataFrame({"seq": seq[is_fwd], "cand_thread": thread[is_fwd], "cand_ts": ts[is_fwd]})
        need = want.loc[missing, ["row", "fwd_tid", "seq", "ts"]]
        need = need.assign(expected_thread=need["fwd_tid"].map(thread_of_tid).fillna(-1).to_numpy(np.int64))
        cand = need.merge(fwd, on="seq")
        cand = cand[(cand["cand_ts"] <= cand["ts"])
                    & ((cand["expected_thread"] < 0) | (cand["cand_thread"] == cand["expected_thread"]))]
        best = cand.sort_values("cand_ts", kind="stable").drop_duplicates("row", keep="last").set_index("row")
        rows = want.loc[missing, "row"]
        want.loc[missing, "fwd_thread"] = rows.map(best["cand_thread"]).to_numpy(np.float64)
        want.loc[missing, "fwd_ts"] = rows.map(best["cand_ts"]).to_numpy(np.float64)
    want = want[want["fwd_thread"].notna()]
    return (want["row"].to_numpy(np.int64), want["fwd_thread"].to_numpy(np.int64), want["fwd_ts"].to_numpy(np.float64))


def _build(model: TraceModel) -> pd.DataFrame:
    py = model.python
    if not len(py):
        return _empty()
    rows, parent_frame = module_frames(model)
    if not len(rows):
        return _empty()
    name_code = py["name"].cat.codes.to_numpy().astype(np.int64)[rows]
    recompute_root = _recompute_roots(model, rows, parent_frame)
    # A recomputed frame is one inside a recomputed root (itself included), by module nesting.
    frame_depth = tree_depth(parent_frame)
    recompute_root_of = ancestor_where(recompute_root, parent_frame, frame_depth, outermost=True)
    parent_frame = _attach_recomputes(name_code, py["ts"].to_numpy()[rows], parent_frame, recompute_root)
    node_of, node_parent, node_name = _assign_nodes(name_code, parent_frame)
    keep = node_of >= 0
    if not keep.any():  # every module frame sits on a cycle of parent ids
        return _empty()
    # frame indices renumbered over the kept frames (recompute_root_of points into them)
    kept_index = np.cumsum(keep) - 1
    recompute_root_of = np.where(recompute_root_of >= 0, kept_index[np.clip(recompute_root_of, 0, None)], -1)[keep]
    recompute_root = recompute_root[keep]
    rows, node_of = rows[keep], node_of[keep]
    recomputed = recompute_root_of >= 0
    n = len(node_parent)
    f_thread, f_ts, f_dur = (py[c].to_numpy()[rows] for c in ("thread", "ts", "dur"))

    occurrences = np.bincount(node_of[~recomputed], minlength=n)
    host_total = np.bincount(node_of[~recomputed], weights=f_dur[~recomputed], minlength=n)
    recompute_occurrences = np.bincount(node_of[recomputed], minlength=n)
    recompute_us = np.bincount(node_of[recomputed], weights=f_dur[recomputed], minlength=n)
    first_ts = np.full(n, np.inf)
    np.minimum.at(first_ts, node_of, f_ts)

    # Self values: each op / launch / backward op to the innermost module frame around it.
    frames = Nesting(f_thread, f_ts, f_dur)

    def node_at(thread: npt.NDArray[np.int64], t: npt.NDArray[np.float64], recompute: bool | None = None) \
            -> npt.NDArray[np.int64]:
        """Node of the innermost frame around each point; -1 outside every frame, and -1
        unless that frame is (recompute=True) or is not (False) a recomputed one."""
        frame = frames.enclosing(thread, t)
        if recompute is not None:
            frame = np.where((frame >= 0) & (recomputed[np.clip(frame, 0, None)] == recompute), frame, -1)
        return np.where(frame >= 0, node_of[np.clip(frame, 0, None)], -1)

    def per_node(node: npt.NDArray[np.int64], weights: npt.NDArray[np.float64] | None = None) -> npt.NDArray[Any]:
        ok = node >= 0
        return np.bincount(node[ok], weights=None if weights is None else weights[ok], minlength=n).astype(
            np.int64 if weights is None else np.float64)

    ops = model.ops
    tree = operator_tree(model)
    op_node = node_at(ops["thread"].to_numpy(), ops["ts"].to_numpy(), recompute=False)
    operators = per_node(np.where(tree["is_operator"].to_numpy(), op_node, -1))

    dev = device_activity(model)
    rt, dev_op = dev["runtime"].to_numpy(), dev["op"].to_numpy()
    rt_thread, rt_ts = model.runtime["thread"].to_numpy(), model.runtime["ts"].to_numpy()
    op_thread, op_ts = ops["thread"].to_numpy(), ops["ts"].to_numpy()
    launched = (rt >= 0) | (dev_op >= 0)
    r, o = np.clip(rt, 0, None), np.clip(dev_op, 0, None)
    launch_thread = np.where(rt >= 0, rt_thread[r] if len(rt_thread) else -1, op_thread[o] if len(op_thread) else -1)
    launch_ts = np.where(rt >= 0, rt_ts[r] if len(rt_ts) else 0.0, op_ts[o] if len(op_ts) else 0.0)
    dev_frame = np.where(launched, frames.enclosing(launch_thread, launch_ts), -1)
    dev_dur = dev["dur"].to_numpy()
    in_frame = dev_frame >= 0
    dev_recomputed = in_frame & recomputed[np.clip(dev_frame, 0, None)]
    device_self = per_node(np.where(in_frame & ~dev_recomputed, node_of[np.clip(dev_frame, 0, None)], -1), dev_dur)
    recompute_device = per_node(np.where(dev_recomputed, node_of[np.clip(dev_frame, 0, None)], -1), dev_dur)

    bwd_rows, bwd_thread, bwd_fwd_ts = _backward_roots(model)
    bwd_node = node_at(bwd_thread, bwd_fwd_ts)
    device_total_op = tree["device_total_us"].to_numpy()[tree["node"].to_numpy()[bwd_rows]]
    bwd_host = ops["dur"].to_numpy()[bwd_rows].astype(np.float64)
    if recompute_root.any() and len(bwd_rows):
        # the recomputations a backward op ran are shown on the checkpointed block, not in it
        recompute_roots = np.flatnonzero(recompute_root)
        backward = Nesting(ops["thread"].to_numpy()[bwd_rows], ops["ts"].to_numpy()[bwd_rows], bwd_host)
        host_of = backward.enclosing(f_thread[recompute_roots], f_ts[recompute_roots])
        ran = host_of >= 0
        bwd_host -= np.bincount(host_of[ran], weights=f_dur[recompute_roots][ran], minlength=len(bwd_rows))
        root_device = np.bincount(recompute_root_of[np.clip(dev_frame[dev_recomputed], 0, None)],
                                  weights=dev_dur[dev_recomputed], minlength=len(rows))[recompute_roots]
        device_total_op = device_total_op - np.bincount(host_of[ran], weights=root_device[ran], minlength=len(bwd_rows))
    backward_host = per_node(bwd_node, bwd_host)
    backward_device = per_node(bwd_node, device_total_op)

    # Totals from the deepest level up; a frame's own host time is what its children leave.
    depth = tree_depth(node_parent)
    operators, device_total, backward_host, backward_device, recompute_device = (
        roll_up(column, node_parent, depth)
        for column in (operators, device_self, backward_host, backward_device, recompute_device))
    has_parent = node_parent >= 0
    children_host = np.bincount(node_parent[has_parent], weights=host_total[has_parent], minlength=n)
    host_self = np.maximum(host_total - children_host, 0.0)

    # Depth-first order, siblings by first start (one step per node).
    children: list[list[int]] = [[] for _ in range(n)]
    roots: list[int] = []
    for node in np.argsort(first_ts, kind="stable"):
        (roots if node_parent[node] < 0 else children[node_parent[node]]).append(int(node))
    visited: list[int] = []
    stack = roots[::-1]
    while stack:
        node = stack.pop()
        visited.append(node)
        stack.extend(children[node][::-1])
    order = np.asarray(visited, dtype=np.int64)
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(n)

    categories = py["name"].cat.categories
    names = np.array([str(c)[len(MODULE_PREFIX):] if str(c).startswith(MODULE_PREFIX) else str(c)
                      for c in categories[node_name]], dtype=object)
    types = np.array([m["type"] if (m := _INSTANCE.match(s)) else s for s in names], dtype=object)

    out = pd.DataFrame({
        "node_id": np.arange(n, dtype=np.int64),
        "parent_id": np.where(node_parent[order] >= 0, new_id[np.clip(node_parent[order], 0, None)], -1),
        "name": names[order], "module_type": types[order],
        "depth": depth[order], "occurrences": occurrences[order].astype(np.int64), "operators": operators[order],
        "host_total_us": host_total[order], "host_self_us": host_self[order],
        "device_total_us": device_total[order], "device_self_us": device_self[order],
        "backward_host_total_us": backward_host[order], "backward_device_total_us": backward_device[order],
        "recompute_occurrences": recompute_occurrences[order].astype(np.int64),
        "recompute_us": recompute_us[order], "recompute_device_us": recompute_device[order],
    })
    return MODULES.frame(out)


# The routes answering with these tables (see `schema.route`).
MODULES_ROUTE = route(
    "modules",
    "The nn.Module tree with forward and backward host and device time per module.",
    modules,
    table=MODULES)
MODULE_FLAME_ROUTE = route(
    "module_flame",
    "The module tree as nested {name, value (host total µs), children} for a flame graph, at most 64 module levels "
    "deep: a node at the last level with modules below it has no children and says how many in folded.",
    module_flame, reply="FlameNode")


# This view's tab of the page (see `schema.tab`).
MODULE_TAB = tab("module", 50, lambda offer: len(modules(offer.model)))
