"""Why B's step is slower (or faster) than A's: the change of the mean step time split into
causes that add up to it exactly, each cause's top contributors, the noise rule that decides
whether a change is a regression, and the two operator trees matched node by node.

Every quantity is per step. A step's time is split into exclusive causes (the step
breakdown's sweep, each instant of the step going to the highest-priority activity running
then), so each side's causes sum to its step time, their means to its mean step time, and the
differences of the means to the change of the mean step time, exactly:

========================  ===============================================================
cause                     the part of the step where ...
========================  ===============================================================
``device_compute``        a compute kernel runs
``memcpy_memset``         no kernel runs, a memcpy or memset does
``communication``         nothing of the above runs, a communication kernel or collective
                          operator does (exposed communication)
``synchronisation``       the device is idle and the CPU is blocked in a synchronising call
                          (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, a synchronous
                          ``cudaMemcpy``, HIP's ``hipMemcpyWithStream``, ...: the blocking
                          calls of `common.is_blocking_call`, as the critical path's)
``host_launch``           the device is idle while the CPU runs other runtime calls (launches)
                          or operators: the GPU waits for the CPU (the host-wait share of the
                          GPU-idle view, cut along the same step windows)
``data_loading``          the device is idle while the CPU waits in the DataLoader
``other``                 none of these: Python between operators, time outside any event
========================  ===============================================================

Each cause is also named in words (`cause_words`, the tables' `label`), worded for the
traces' device: on a CPU-only run ``host_launch`` is "Operators on the CPU", never the device
waiting for the CPU.

Device compute is split further per matched operator and kernel (see `diff_contributors`),
again exactly: slower kernels, more or fewer kernels, new or vanished kernels, and the change of
overlap between kernels (concurrent streams; kernels cut by a step's edges). The other causes'
contributors are the raw per-step times of the calls behind them (collective kernels, copies,
synchronising calls, launches and operators' host self time, DataLoader waits), listed when the
cause moved by at least 0.1% of A's mean step time. A contributor is one kernel, call or
operator summed over every operator (module path) it ran under before the largest are picked
(`diff_contributor_paths` lists those operators), so a kernel slower a little under each of
many layers is one contributor of its whole change, not many small ones and a lump of the rest.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..errors import NotFoundError
from ..schema import NULLABLE, TWO_SPANS, Persisted, declare, number, route
from ..trace.linking import Nesting, ancestor_where, roll_up, tree_depth
from ..trace.model import TraceModel
from .common import is_blocking_call, is_dataloader_name, kernel_flags, name_mask, operator_tree, step_windows, texts
from .modules import module_frames
from .step_causes import CAUSES, step_causes

STEP_TIME = "step_time"
# A difference of medians counts as outside a side's step-to-step spread when it exceeds this
# many robust standard deviations of that side (1.4826 x the median absolute deviation, which
# equals the standard deviation for normally distributed step times and ignores outlier steps).
NOISE_SIGMAS = 2.0
MAD_TO_SIGMA = 1.4826
DEFAULT_THRESHOLD_PCT = 5.0
TOP_CONTRIBUTORS = 10
RESOLUTION_US = 1e-3  # Kineto writes times to the nanosecond: smaller changes are rounding
EXPLAINED_MIN_PCT = 0.1  # a cause other than device compute that moved less is not broken down
REGRESSION, IMPROVEMENT, NOISE = "regression", "improvement", "noise"
_PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")

DIFF_EXPLANATION = declare(
    "diff_explanation", "the mean step time (first row, step_time), then each cause of it; deltas are b - a, per step",
    ("cause", "str", "", "step_time, or device_compute, memcpy_memset, communication, synchronisation, host_launch, data_loading, other"),
    ("steps_a", "int64", "count", "steps of trace a the statistics are over"),
    ("steps_b", "int64", "count", "steps of trace b the statistics are over"),
    ("mean_us_a", "float64", "us", "mean over a's steps of the cause's time per step"),
    ("mean_us_b", "float64", "us", "the same in b"),
    ("mean_us_delta", "float64", "us", "mean_us_b - mean_us_a; the causes' deltas sum to step_time's"),
    ("share_pct", "float64", "pct", "mean_us_delta as a share of step_time's; null when the step time did not change", NULLABLE),
    ("median_us_a", "float64", "us", "median over a's steps"),
    ("median_us_b", "float64", "us", "median over b's steps"),
    ("spread_us_a", "float64", "us", "step-to-step spread of a: 1.4826 x the median absolute deviation from the median"),
    ("spread_us_b", "float64", "us", "the same for b"),
    ("change_pct", "float64", "pct", "mean_us_delta as a share of a's mean step time"),
    ("verdict", "str", "", "regression or improvement: |change_pct| over the threshold and the medians' difference over twice both spreads; else noise"),
    ("label", "str", "", "the cause in words, worded for the traces' device (`cause_words`)"),
)
DIFF_CONTRIBUTORS = declare(
    "diff_contributors", "one contributor to a cause's change, summed over the operators and module paths it ran under: the 10 largest |delta_us| of each cause and part, then one row of the rest",
    ("cause", "str", "", "the cause (as in diff_explanation) it contributes to"),
    ("part", "str", "", "device_compute: slower_kernels, kernel_count, new_kernels, vanished_kernels, overlap; else the cause"),
    ("operator", "str", "", "the matched operator (the launching operator, or its lowest ancestor found in both traces); empty when none"),
    ("node", "int64", "", "that operator's row in diff_tree (of several, the one whose change is largest); -1 when none"),
    ("name", "str", "", "the kernel, call or operator; 'a -> b' for kernels matched by their operator and its input shapes where names differ"),
    ("label", "str", "", "its cause and part in words, worded for the traces' device (`cause_words`)"),
    ("paths", "int64", "count", "the operators (tree nodes: module paths) its change is summed over, each in diff_contributor_paths when several; 0 for the row of the rest"),
    ("calls_a", "float64", "count", "calls per step in a"),
    ("calls_b", "float64", "count", "calls per step in b"),
    ("mean_us_a", "float64", "us", "mean duration of one call in a; null when none", NULLABLE),
    ("mean_us_b", "float64", "us", "mean duration of one call in b; null when none", NULLABLE),
    ("delta_us", "float64", "us", "its change of the cause per step; device_compute's parts sum to the cause's mean_us_delta"),
    ("step_a", "int64", "", "step of a's longest call (the Trace view's representative); -1 when none"),
    ("ts_us_a", "float64", "us", "start of a's longest call; null when none", NULLABLE),
    ("dur_us_a", "float64", "us", "its duration; null when none", NULLABLE),
    ("step_b", "int64", "", "step of b's longest call; -1 when none"),
    ("ts_us_b", "float64", "us", "start of b's longest call; null when none", NULLABLE),
    ("dur_us_b", "float64", "us", "its duration; null when none", NULLABLE),
)
DIFF_CONTRIBUTOR_PATHS = declare(
    "diff_contributor_paths", "one operator (tree node: module path) a contributor of diff_contributors ran under, for contributors of several; the largest |delta_us| first",
    ("cause", "str", "", "the contributor's cause"),
    ("part", "str", "", "its part"),
    ("name", "str", "", "its name"),
    ("operator", "str", "", "the operator it ran under (its name in diff_tree); empty when none"),
    ("node", "int64", "", "that operator's row in diff_tree; -1 when none"),
    ("calls_a", "float64", "count", "calls per step in a under this operator"),
    ("calls_b", "float64", "count", "calls per step in b under this operator"),
    ("delta_us", "float64", "us", "the change per step under this operator; a contributor's paths sum to its delta_us"),
)
DIFF_TREE = declare(
    "diff_tree", "one node of the two operator trees matched by path (names from the root: operators, annotations and, in traces recorded with modules, nn.Module frames; ProfilerStep#N as ProfilerStep#*)",
    ("node", "int64", "", "this node's id"),
    ("parent", "int64", "", "the parent node's id; -1 for a root"),
    ("name", "str", "", "operator or annotation name, or a module frame's (nn.Module: Conv2d_1)"),
    ("status", "str", "", "matched (the path is in both traces), added (only in b) or removed (only in a)"),
    ("matched_at", "int64", "", "the lowest ancestor-or-self found in both traces (where TraceLens matches differing names); -1 when none"),
    ("calls_a", "float64", "count", "calls per step in a"),
    ("calls_b", "float64", "count", "calls per step in b"),
    ("host_total_us_a", "float64", "us", "host time per step in a (its calls' durations)"),
    ("host_total_us_b", "float64", "us", "the same in b"),
    ("host_total_us_delta", "float64", "us", "host_total_us_b - host_total_us_a"),
    ("device_total_us_a", "float64", "us", "device time per step in a of the work it and its descendants launched (a module frame: the operators inside it)"),
    ("device_total_us_b", "float64", "us", "the same in b"),
    ("device_total_us_delta", "float64", "us", "device_total_us_b - device_total_us_a"),
)


@dataclass
class Explanation:
    """The explanation of a diff: see `explain`."""

    explanation: pd.DataFrame
    contributors: pd.DataFrame
    contributor_paths: pd.DataFrame
    tree: pd.DataFrame


# Each cause in words: (on a run with device activity, on a CPU-only run).
_CAUSE_WORDS = {
    STEP_TIME: ("Step time", "Step time"),
    "device_compute": ("Device compute (kernels)", "Device compute (none: the run used no accelerator)"),
    "memcpy_memset": ("Memory copies and sets", "Memory copies and sets (none: the run used no accelerator)"),
    "communication": ("Exposed communication", "Exposed communication (collectives)"),
    "synchronisation": ("Synchronisation (the CPU waits for the device)", "Synchronisation (the CPU blocked in a waiting call)"),
    "host_launch": ("Host work and launches (the device waits for the CPU)", "Operators on the CPU"),
    "data_loading": ("Data loading (the DataLoader)", "Data loading (the DataLoader)"),
    "other": ("Other (Python between operators, time outside any event)",
              "Other (Python between operators, time outside any event)"),
}


# The parts of device compute in words.
_PART_WORDS = {"slower_kernels": "slower kernels", "kernel_count": "more or fewer kernels", "new_kernels": "new kernels",
               "vanished_kernels": "vanished kernels", "overlap": "overlap of kernels and step edges"}


def cause_words(cause: str, on_device: bool) -> str:
    """`cause` (step_time or one of CAUSES) in words, for traces that used a device
    (`on_device`) or ran on the CPU alone."""
    return _CAUSE_WORDS[cause][0 if on_device else 1]


def _spread(values: npt.NDArray[np.float64]) -> float:
    return MAD_TO_SIGMA * float(np.median(np.abs(values - np.median(values)))) if len(values) else 0.0


def verdicts(delta_us: npt.NDArray[np.float64], median_delta_us: npt.NDArray[np.float64],
             spread_a: npt.NDArray[np.float64], spread_b: npt.NDArray[np.float64], step_mean_a: float,
             threshold_pct: float) -> npt.NDArray[Any]:
    """The noise rule, over arrays: a change is a regression (improvement) when it raises
    (lowers) the mean by more than `threshold_pct` of a's mean step time and the medians differ
    by more than NOISE_SIGMAS robust standard deviations of each side, in the same direction."""
    threshold = threshold_pct / 100.0 * step_mean_a
    outside = np.abs(median_delta_us) > NOISE_SIGMAS * np.maximum(spread_a, spread_b)
    worse = (delta_us > threshold) & (median_delta_us > 0) & outside
    better = (delta_us < -threshold) & (median_delta_us < 0) & outside
    return np.where(worse, REGRESSION, np.where(better, IMPROVEMENT, NOISE))


def explanation_table(causes_a: pd.DataFrame, causes_b: pd.DataFrame, threshold_pct: float) -> pd.DataFrame:
    """DIFF_EXPLANATION from each side's `step_causes`."""
    columns = [STEP_TIME, *CAUSES]
    source = {STEP_TIME: "total_us", **{c: f"{c}_us" for c in CAUSES}}
    a = np.column_stack([causes_a[source[c]].to_numpy(np.float64) for c in columns])
    b = np.column_stack([causes_b[source[c]].to_numpy(np.float64) for c in columns])
    mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)
    median_a, median_b = np.median(a, axis=0), np.median(b, axis=0)
    spread_a = np.array([_spread(a[:, i]) for i in range(len(columns))])
    spread_b = np.array([_spread(b[:, i]) for i in range(len(columns))])
    delta = mean_b - mean_a
    step_delta = delta[0]
    step_mean_a = mean_a[0]
    # a run that used a device has kernel or copy time in its steps; a CPU-only run has none
    on_device = bool((a[:, 1:3].sum() + b[:, 1:3].sum()) > 0)
    return DIFF_EXPLANATION.frame({
        "cause": columns, "steps_a": len(a), "steps_b": len(b),
        "mean_us_a": mean_a, "mean_us_b": mean_b, "mean_us_delta": delta,
        "share_pct": delta / step_delta * 100.0 if step_delta else np.full(len(columns), np.nan),
        "median_us_a": median_a, "median_us_b": median_b, "spread_us_a": spread_a, "spread_us_b": spread_b,
        "change_pct": delta / step_mean_a * 100.0 if step_mean_a else np.zeros(len(columns)),
        "verdict": verdicts(delta, median_b - median_a, spread_a, spread_b, step_mean_a, threshold_pct),
        "label": [cause_words(c, on_device) for c in columns],
    })


# --- the matched operator tree ------------------------------------------------------------

def _tree_side(model: TraceModel) -> pd.DataFrame:
    """The nodes of one trace's tree: its live operators (after the duplicate-node rule) and,
    in a trace recorded with modules, its nn.Module frames (`nn.Module: X`, as the Module view
    finds them), nested by time on their thread so that a path reads module > submodule >
    operator. Columns: row (an op's row in model.ops; a module frame's is len(model.ops) +
    its index), parent_row, name (ProfilerStep#N as ProfilerStep#*), depth, host total
    (duration) and device total (of an op, its own; of a module frame, its descendants')."""
    ops = model.ops
    tree = operator_tree(model)
    live = ~tree["merged"].to_numpy()
    categories = ops["name"].cat.categories.astype(str)
    normal = np.asarray([_PROFILER_STEP.sub("ProfilerStep#*", c) for c in categories], dtype=object)
    names = normal[ops["name"].cat.codes.to_numpy()] if len(ops) else np.zeros(0, object)
    rows = np.flatnonzero(live)
    side = pd.DataFrame({
        "row": rows, "parent_row": tree["node_parent"].to_numpy()[live], "name": names[live],
        "depth": ops["depth"].to_numpy()[live], "host_total_us": ops["dur"].to_numpy()[live],
        "device_total_us": tree["device_total_us"].to_numpy()[live]})
    frames, _ = module_frames(model)
    if not len(frames):
        return side
    py = model.python
    # Frames first: a frame and an operator with the same start and length nest module outside.
    thread = np.concatenate([py["thread"].to_numpy()[frames], ops["thread"].to_numpy()[rows]])
    ts = np.concatenate([py["ts"].to_numpy()[frames], ops["ts"].to_numpy()[rows]])
    dur = np.concatenate([py["dur"].to_numpy()[frames], ops["dur"].to_numpy()[rows]])
    ids = np.concatenate([len(ops) + np.arange(len(frames)), rows])
    nesting = Nesting(thread, ts, dur)
    parent = nesting.parent
    depth = tree_depth(parent)
    is_frame = np.arange(len(ids)) < len(frames)
    device_self = np.concatenate([np.zeros(len(frames)), tree["device_self_us"].to_numpy()[rows]])
    device_total = np.where(is_frame, roll_up(device_self, parent, depth), np.concatenate(
        [np.zeros(len(frames)), side["device_total_us"].to_numpy()]))
    return pd.DataFrame({
        "row": ids, "parent_row": np.where(parent >= 0, ids[np.clip(parent, 0, None)], -1),
        "name": np.concatenate([texts(py["name"], frames), side["name"].to_numpy()]),
        "depth": depth, "host_total_us": dur, "device_total_us": device_total})


def _match_trees(side_a: pd.DataFrame, side_b: pd.DataFrame) \
        -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], pd.DataFrame]:
    """Node ids of the union of both trees, keyed by (parent node, name), level by level
    (one vectorised lookup per nesting level): returns (node per row of side_a, node per row
    of side_b, the nodes' parent and name)."""
    codes, names = pd.factorize(np.concatenate([side_a["name"].to_numpy(), side_b["name"].to_numpy()]))
    n_names = len(names) + 1
    sides = {"a": (side_a, codes[: len(side_a)]), "b": (side_b, codes[len(side_a):])}
    node_of = {s: np.full(len(t), -1, np.int64) for s, (t, _) in sides.items()}
    # a row's parent row -> its index in the side table, to read the parent's node
    index_of = {s: pd.Index(t["row"].to_numpy()) for s, (t, _) in sides.items()}
    known = np.zeros(0, np.int64)  # per node: (parent node + 1) * n_names + name code
    for level in np.union1d(side_a["depth"].unique(), side_b["depth"].unique()):
        at, keys = {}, {}
        for s, (table, name_code) in sides.items():
            at[s] = np.flatnonzero(table["depth"].to_numpy() == level)
            parent_row = table["parent_row"].to_numpy()[at[s]]
            parent_node = np.full(len(parent_row), -1, np.int64)
            has = parent_row >= 0
            parent_node[has] = node_of[s][index_of[s].get_indexer(parent_row[has])]
            keys[s] = (parent_node + 1) * n_names + name_code[at[s]]
        new = np.setdiff1d(np.concatenate([keys["a"], keys["b"]]), known)
        known = np.concatenate([known, new])
        lookup = pd.Index(known)
        for s in sides:
            # pandas takes any array-like target; pandas-stubs ask for an Index
            node_of[s][at[s]] = lookup.get_indexer(cast(pd.Index, keys[s]))
    nodes = pd.DataFrame({"parent": known // n_names - 1, "name": np.asarray(names, dtype=object)[known % n_names]})
    return node_of["a"], node_of["b"], nodes


def matched_tree(a: TraceModel, b: TraceModel) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The matched tree (DIFF_TREE), and each trace's node per op row (-1 for merged rows)."""
    side_a, side_b = _tree_side(a), _tree_side(b)
    node_a, node_b, nodes = _match_trees(side_a, side_b)
    n = len(nodes)
    steps_a, steps_b = len(step_windows(a)), len(step_windows(b))

    def per_node(side: pd.DataFrame, node: npt.NDArray[np.int64], column: str | None, steps: int) \
            -> npt.NDArray[np.float64]:
        weights = side[column].to_numpy(np.float64) if column else np.ones(len(side))
        return np.bincount(node, weights=weights, minlength=n) / steps

    calls_a, calls_b = per_node(side_a, node_a, None, steps_a), per_node(side_b, node_b, None, steps_b)
    in_a, in_b = np.bincount(node_a, minlength=n) > 0, np.bincount(node_b, minlength=n) > 0
    parent = nodes["parent"].to_numpy(np.int64)
    depth = tree_depth(parent)
    matched = in_a & in_b
    table = {
        "node": np.arange(n), "parent": parent, "name": nodes["name"].to_numpy(),
        "status": np.where(matched, "matched", np.where(in_b, "added", "removed")),
        "matched_at": ancestor_where(matched, parent, depth), "calls_a": calls_a, "calls_b": calls_b}
    for q in ("host_total_us", "device_total_us"):
        qa, qb = per_node(side_a, node_a, q, steps_a), per_node(side_b, node_b, q, steps_b)
        table.update({f"{q}_a": qa, f"{q}_b": qb, f"{q}_delta": qb - qa})
    rows_a, rows_b = _op_nodes(a, side_a, node_a), _op_nodes(b, side_b, node_b)
    return DIFF_TREE.frame(table), rows_a, rows_b


def _op_nodes(model: TraceModel, side: pd.DataFrame, node: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The node of each row of model.ops (-1 for merged rows), from a side's rows (module
    frames, numbered after the ops, left out)."""
    rows = side["row"].to_numpy()
    is_op = rows < len(model.ops)
    out = np.full(len(model.ops), -1, np.int64)
    out[rows[is_op]] = node[is_op]
    return out


# --- contributors -------------------------------------------------------------------------

def _step_of(model: TraceModel, ts: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """The step number each time falls in (its window), -1 outside every step."""
    windows = step_windows(model)
    start, end = windows["start_us"].to_numpy(), windows["end_us"].to_numpy()
    k = np.searchsorted(start, ts, side="right") - 1
    inside = (k >= 0) & (ts < end[np.clip(k, 0, None)])
    return np.where(inside, windows["step"].to_numpy()[np.clip(k, 0, None)], -1)


def _compute_kernels(model: TraceModel, op_node: npt.NDArray[np.int64], tree: pd.DataFrame) -> pd.DataFrame:
    """The compute kernels inside steps: operator node (the launching operator's matched
    ancestor-or-self in the tree), name, shapes (the launching operator's input shapes), ts,
    dur, step."""
    k = model.kernels
    comm, _ = kernel_flags(model)
    ts = k["ts"].to_numpy()
    step = _step_of(model, ts)
    op = k["op"].to_numpy()
    live_op = np.where(op >= 0, operator_tree(model)["node"].to_numpy()[np.clip(op, 0, None)] if len(op_node) else -1, -1)
    node = np.where(live_op >= 0, op_node[np.clip(live_op, 0, None)] if len(op_node) else -1, -1)
    matched_at = tree["matched_at"].to_numpy()
    node = np.where(node >= 0, matched_at[np.clip(node, 0, None)] if len(matched_at) else -1, -1)
    keep = ~comm & (step >= 0)
    dims = model.ops["input_dims"]
    shapes = (texts(dims, np.clip(live_op, 0, None)) if len(dims) else np.zeros(len(op), object))
    shapes = np.where(live_op >= 0, shapes, "")
    return pd.DataFrame({"node": node[keep], "name": texts(k["name"], keep), "shapes": shapes[keep],
                         "ts": ts[keep], "dur": k["dur"].to_numpy()[keep], "step": step[keep]})


def _longest(events: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group of `keys`: step, ts and dur of its longest event."""
    if not len(events):
        return events.loc[[], [*keys, "step", "ts", "dur"]]
    rows = events.groupby(keys, sort=False, observed=True)["dur"].idxmax()
    return events.loc[rows.to_numpy(), [*keys, "step", "ts", "dur"]]


def _per_step(events: pd.DataFrame, keys: list[str], steps: int) -> pd.DataFrame:
    grouped = events.groupby(keys, sort=False, observed=True)["dur"].agg(["size", "sum"]).reset_index()
    return grouped.assign(calls=grouped["size"] / steps, time=grouped["sum"] / steps).drop(columns=["size", "sum"])


def _side_by_side(events_a: pd.DataFrame, events_b: pd.DataFrame, keys: list[str], steps_a: int, steps_b: int) \
        -> pd.DataFrame:
    """Per key: calls and time per step on each side, with each side's longest event."""
    a, b = _per_step(events_a, keys, steps_a), _per_step(events_b, keys, steps_b)
    both = a.merge(b, on=keys, how="outer", suffixes=("_a", "_b"))
    for s, events in (("a", events_a), ("b", events_b)):
        longest = _longest(events, keys).rename(columns={"step": f"step_{s}", "ts": f"ts_us_{s}", "dur": f"dur_us_{s}"})
        both = both.merge(longest, on=keys, how="left")
    for c in ("calls_a", "calls_b", "time_a", "time_b"):
        both[c] = both[c].astype(np.float64).fillna(0.0)
    for c in ("step_a", "step_b"):
        both[c] = both[c].astype(np.float64).fillna(-1).astype(np.int64)
    for c in ("ts_us_a", "dur_us_a", "ts_us_b", "dur_us_b"):
        both[c] = both[c].astype(np.float64)
    return both


def _device_compute_parts(kernels_a: pd.DataFrame, kernels_b: pd.DataFrame, steps_a: int, steps_b: int,
                          compute_delta: float) -> pd.DataFrame:
    """Device compute's change per (operator node, kernel), split exactly into its parts.
    Kernels are matched by name under the same operator node; the calls of kernels found on
    one side only are matched by their operator node and its input shapes where both sides
    have such calls (another backend's or library's kernel for the same work), pooled under
    one name 'a-kernels -> b-kernels'."""
    keys, match = ["node", "name"], ["node", "shapes"]
    both = _side_by_side(kernels_a, kernels_b, keys, steps_a, steps_b)

    def one_sided(events: pd.DataFrame, absent_on_other: str) -> npt.NDArray[np.bool_]:
        pairs = pd.MultiIndex.from_frame(both.loc[both[absent_on_other] == 0, keys])
        return pd.MultiIndex.from_frame(events[keys]).isin(pairs) & (events["node"].to_numpy() >= 0)

    lone_a, lone_b = one_sided(kernels_a, "calls_b"), one_sided(kernels_b, "calls_a")
    shared = pd.MultiIndex.from_frame(kernels_a.loc[lone_a, match]).intersection(
        pd.MultiIndex.from_frame(kernels_b.loc[lone_b, match]))
    if not len(shared):
        return _parts(both, compute_delta)
    pooled_a = lone_a & pd.MultiIndex.from_frame(kernels_a[match]).isin(shared)
    pooled_b = lone_b & pd.MultiIndex.from_frame(kernels_b[match]).isin(shared)

    def names(events: pd.DataFrame) -> pd.Series:  # one string per operator and shapes, not per event
        return events.groupby(match, sort=False)["name"].agg(lambda n: ", ".join(sorted(set(n))))

    label = (names(kernels_a[pooled_a]) + " -> " + names(kernels_b[pooled_b])).rename("label").reset_index()

    def relabelled(events: pd.DataFrame) -> pd.DataFrame:
        return events.merge(label, on=match).drop(columns="name").rename(columns={"label": "name"})

    both = pd.concat([_side_by_side(kernels_a[~pooled_a], kernels_b[~pooled_b], keys, steps_a, steps_b),
                      _side_by_side(relabelled(kernels_a[pooled_a]), relabelled(kernels_b[pooled_b]), keys,
                                    steps_a, steps_b)], ignore_index=True)
    return _parts(both, compute_delta)


def _parts(both: pd.DataFrame, compute_delta: float) -> pd.DataFrame:
    """The rows of `both` (per key: calls and time per step on each side) split into the
    parts of device compute, plus the overlap that makes them add up to `compute_delta`."""
    calls_a, calls_b = both["calls_a"].to_numpy(), both["calls_b"].to_numpy()
    per_call_a = np.divide(both["time_a"], calls_a, out=np.zeros(len(both)), where=calls_a > 0)
    per_call_b = np.divide(both["time_b"], calls_b, out=np.zeros(len(both)), where=calls_b > 0)
    present = (calls_a > 0) & (calls_b > 0)
    parts = []
    # slower: a's calls at b's duration minus a's duration; count: the extra calls at b's duration
    parts.append(both.assign(part="slower_kernels", delta=np.where(present, calls_a * (per_call_b - per_call_a), 0.0)))
    parts.append(both.assign(part="kernel_count", delta=np.where(present, (calls_b - calls_a) * per_call_b, 0.0)))
    parts.append(both.assign(part="new_kernels", delta=np.where(calls_a == 0, both["time_b"], 0.0)))
    parts.append(both.assign(part="vanished_kernels", delta=np.where(calls_b == 0, -both["time_a"], 0.0)))
    rows = pd.concat(parts, ignore_index=True)
    overlap = compute_delta - float(both["time_b"].sum() - both["time_a"].sum())
    rows = pd.concat([rows, pd.DataFrame({"node": [-1], "name": ["overlap of kernels and step edges"],
                                          "calls_a": [0.0], "calls_b": [0.0], "time_a": [0.0], "time_b": [0.0],
                                          "step_a": [-1], "ts_us_a": [np.nan], "dur_us_a": [np.nan],
                                          "step_b": [-1], "ts_us_b": [np.nan], "dur_us_b": [np.nan],
                                          "part": ["overlap"], "delta": [overlap]})], ignore_index=True)
    return rows


def _host_events(model: TraceModel, picked: Callable[[str], bool], table: str = "ops") -> pd.DataFrame:
    """Events of `model.<table>` whose name `picked(name)` holds (asked once per distinct
    name), inside steps: name, ts, dur, step."""
    t = getattr(model, table)
    mask = name_mask(t["name"], picked)
    ts = t["ts"].to_numpy()[mask]
    step = _step_of(model, ts)
    inside = step >= 0
    return pd.DataFrame({"node": -1, "name": texts(t["name"], mask)[inside], "ts": ts[inside],
                         "dur": t["dur"].to_numpy()[mask][inside], "step": step[inside]})


def _operator_self_times(model: TraceModel, op_node: npt.NDArray[np.int64], tree: pd.DataFrame) -> pd.DataFrame:
    """Operators inside steps with their host self time as `dur`, keyed by tree node."""
    ops, times = model.ops, operator_tree(model)
    live = np.flatnonzero(~times["merged"].to_numpy() & times["is_operator"].to_numpy())
    ts = ops["ts"].to_numpy()[live]
    node = op_node[live]
    node = np.where(node >= 0, tree["matched_at"].to_numpy()[np.clip(node, 0, None)] if len(tree) else -1, -1)
    table = pd.DataFrame({"node": node, "name": texts(ops["name"], live), "ts": ts,
                          "dur": times["host_self_us"].to_numpy()[live], "step": _step_of(model, ts)})
    return table[table["step"] >= 0]


def _cause_events(model: TraceModel, op_node: npt.NDArray[np.int64], tree: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """For each cause besides device compute and other, the events whose time per step
    stands for it (raw durations by name; the cause's own delta is the exclusive time):
    host and launch has the runtime calls and each operator's host self time."""
    comm, _ = kernel_flags(model)
    k = model.kernels
    comm_k = pd.DataFrame({"node": -1, "name": texts(k["name"], comm), "ts": k["ts"].to_numpy()[comm],
                           "dur": k["dur"].to_numpy()[comm]})
    comm_k = comm_k.assign(step=_step_of(model, comm_k["ts"].to_numpy()))
    transfers = pd.concat([pd.DataFrame({"node": -1, "name": texts(t["name"]), "ts": t["ts"].to_numpy(),
                                         "dur": t["dur"].to_numpy()}) for t in (model.memcpy, model.memset)],
                          ignore_index=True)
    transfers = transfers.assign(step=_step_of(model, transfers["ts"].to_numpy()))
    blocking = _host_events(model, is_blocking_call, "runtime")
    launches = _host_events(model, lambda n: not is_blocking_call(n), "runtime")
    loader = _host_events(model, is_dataloader_name)
    return {"communication": comm_k[comm_k["step"] >= 0], "memcpy_memset": transfers[transfers["step"] >= 0],
            "synchronisation": blocking, "data_loading": loader,
            "host_launch": pd.concat([launches, _operator_self_times(model, op_node, tree)], ignore_index=True)}


def _contributors(a: TraceModel, b: TraceModel, tree: pd.DataFrame, nodes_a: npt.NDArray[np.int64],
                  nodes_b: npt.NDArray[np.int64], explanation: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    steps_a, steps_b = int(explanation["steps_a"].iloc[0]), int(explanation["steps_b"].iloc[0])
    compute_delta = float(explanation.loc[explanation["cause"] == "device_compute", "mean_us_delta"].iloc[0])
    compute = _device_compute_parts(_compute_kernels(a, nodes_a, tree), _compute_kernels(b, nodes_b, tree),
                                    steps_a, steps_b, compute_delta).assign(cause="device_compute")
    frames = [compute]
    events_a, events_b = _cause_events(a, nodes_a, tree), _cause_events(b, nodes_b, tree)
    delta_of = dict(zip(explanation["cause"], explanation["mean_us_delta"]))
    step_mean_a = float(explanation["mean_us_a"].iloc[0])
    for cause in events_a:
        # Contributors besides device compute are raw times, not the cause's exclusive time: a
        # launch that waited longer while the device ran moves without costing step time. So
        # a cause that barely changed is not broken down into them.
        if abs(delta_of[cause]) < EXPLAINED_MIN_PCT / 100.0 * step_mean_a:
            continue
        rows = _side_by_side(events_a[cause], events_b[cause], ["node", "name"], steps_a, steps_b)
        frames.append(rows.assign(cause=cause, part=cause, delta=rows["time_b"] - rows["time_a"]))
    rows = pd.concat(frames, ignore_index=True)
    # float residue of sums that are equal (the same trace twice) is no contributor
    rows = rows[rows["delta"].abs() > 1e-9]
    rows, paths = _summed_over_paths(rows)
    rows["order"] = -rows["delta"].abs()
    rows = rows.sort_values(["order", "name"], kind="stable")
    # changes under the traces' resolution are not listed one by one
    significant = rows["delta"].abs().to_numpy() >= RESOLUTION_US
    rank = np.where(significant, rows.groupby(["cause", "part"], sort=False).cumcount().to_numpy(), TOP_CONTRIBUTORS)
    beyond = rank >= TOP_CONTRIBUTORS
    rest = rows[beyond].groupby(["cause", "part"], sort=False).agg(
        delta=("delta", "sum"), count=("delta", "size")).reset_index()
    rest = rest[rest["delta"].abs() > 1e-9]
    # beyond the top ones, one row per part holds the rest, so that the parts still add up
    rest = rest.assign(node=-1, name=rest["count"].astype(str) + " others", calls_a=0.0, calls_b=0.0, time_a=0.0,
                       time_b=0.0, step_a=-1, step_b=-1, ts_us_a=np.nan, dur_us_a=np.nan, ts_us_b=np.nan,
                       dur_us_b=np.nan, order=0.0, paths=0)
    rows = pd.concat([rows[~beyond], rest.drop(columns="count")], ignore_index=True)
    cause_rank = {c: i for i, c in enumerate(CAUSES)}
    rows = rows.assign(cause_rank=rows["cause"].map(cause_rank)).sort_values(["cause_rank", "order", "name"], kind="stable")
    node = rows["node"].to_numpy(np.int64)
    tree_names = tree["name"].to_numpy()

    def operator_of(node: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        return np.where(node >= 0, tree_names[np.clip(node, 0, None)] if len(tree_names) else "", "")

    calls_a, calls_b = rows["calls_a"].to_numpy(), rows["calls_b"].to_numpy()
    listed = pd.MultiIndex.from_frame(rows.loc[rows["paths"] > 1, ["cause", "part", "name"]])
    paths = paths[pd.MultiIndex.from_frame(paths[["cause", "part", "name"]]).isin(listed)]
    path_nodes = paths["node"].to_numpy(np.int64)
    contributor_paths = DIFF_CONTRIBUTOR_PATHS.frame({
        "cause": paths["cause"], "part": paths["part"], "name": paths["name"], "operator": operator_of(path_nodes),
        "node": path_nodes, "calls_a": paths["calls_a"], "calls_b": paths["calls_b"], "delta_us": paths["delta"]})
    cause_label = rows["cause"].map(dict(zip(explanation["cause"], explanation["label"])))
    part_label = rows["part"].map(_PART_WORDS)
    return DIFF_CONTRIBUTORS.frame({
        "cause": rows["cause"], "part": rows["part"], "operator": operator_of(node),
        "label": np.where(part_label.notna(), cause_label + ": " + part_label.fillna(""), cause_label),
        "node": node, "name": rows["name"], "paths": rows["paths"], "calls_a": calls_a, "calls_b": calls_b,
        "mean_us_a": np.where(calls_a > 0, rows["time_a"] / np.where(calls_a > 0, calls_a, 1), np.nan),
        "mean_us_b": np.where(calls_b > 0, rows["time_b"] / np.where(calls_b > 0, calls_b, 1), np.nan),
        "delta_us": rows["delta"],
        "step_a": rows["step_a"].fillna(-1), "ts_us_a": rows["ts_us_a"], "dur_us_a": rows["dur_us_a"],
        "step_b": rows["step_b"].fillna(-1), "ts_us_b": rows["ts_us_b"], "dur_us_b": rows["dur_us_b"],
    }), contributor_paths


_CONTRIBUTOR = ["cause", "part", "name"]


def _summed_over_paths(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per contributor (cause, part, name) from rows per operator node: a kernel or
    call that ran under many module paths is one contributor of its whole change, not one per
    path (each under the limit of those listed). Calls and times are summed; `node` is the
    path of the largest |delta|, `paths` counts the nodes, the representative calls are the
    longest on each side over all paths. Returns (those rows, the per-node rows, the largest
    |delta| first)."""
    by_change = rows.assign(_abs=rows["delta"].abs()).sort_values("_abs", ascending=False, kind="stable")
    sums = rows.groupby(_CONTRIBUTOR, sort=False).agg(
        delta=("delta", "sum"), calls_a=("calls_a", "sum"), calls_b=("calls_b", "sum"), time_a=("time_a", "sum"),
        time_b=("time_b", "sum"), paths=("node", "nunique")).reset_index()
    summed = sums.merge(by_change.drop_duplicates(_CONTRIBUTOR)[[*_CONTRIBUTOR, "node"]], on=_CONTRIBUTOR)
    for s in ("a", "b"):
        call = [f"step_{s}", f"ts_us_{s}", f"dur_us_{s}"]
        longest = rows.sort_values(f"dur_us_{s}", ascending=False, na_position="last", kind="stable")
        summed = summed.merge(longest.drop_duplicates(_CONTRIBUTOR)[[*_CONTRIBUTOR, *call]], on=_CONTRIBUTOR)
    return summed, by_change.drop(columns="_abs")


def explain(a: TraceModel, b: TraceModel, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Explanation:
    """Why b's mean step time differs from a's: `explanation` (DIFF_EXPLANATION: the step
    time and each cause, per step, with the noise rule's verdict at `threshold_pct`),
    `contributors` (DIFF_CONTRIBUTORS), the operators each of several ran under
    (`contributor_paths`, DIFF_CONTRIBUTOR_PATHS) and `tree` (DIFF_TREE, the matched operator trees)."""
    explanation = explanation_table(step_causes(a), step_causes(b), threshold_pct)
    tree, nodes_a, nodes_b = matched_tree(a, b)
    contributors, paths = _contributors(a, b, tree, nodes_a, nodes_b, explanation)
    return Explanation(explanation=explanation, contributors=contributors, contributor_paths=paths, tree=tree)


DIFF_RANKS = declare(
    "diff_ranks", "one rank (worker) found in both runs: its mean step time in each, the rank that changed most first",
    ("worker", "str", "", "the worker's name, the same in both runs"),
    ("steps_a", "int64", "count", "steps of the rank in a"),
    ("steps_b", "int64", "count", "steps of the rank in b"),
    ("mean_us_a", "float64", "us", "the rank's mean step time in a"),
    ("mean_us_b", "float64", "us", "the same in b"),
    ("mean_us_delta", "float64", "us", "mean_us_b - mean_us_a"),
    ("change_pct", "float64", "pct", "mean_us_delta as a share of mean_us_a"),
    ("verdict", "str", "", "the noise rule's verdict on the rank's step time"),
    ("top_cause", "str", "", "the cause with the largest |mean_us_delta| on this rank"),
    ("top_cause_us", "float64", "us", "that cause's mean_us_delta"),
    ("top_cause_label", "str", "", "that cause in words (`cause_words`)"),
)


@dataclass
class StepCauses:
    """What comparing two runs rank by rank needs of one rank's trace: its `step_causes`."""

    steps: pd.DataFrame


# A `StepCauses` as the disk cache stores it.
STEP_CAUSES_PART = Persisted("step_causes", StepCauses, {"steps": declare(
    "step_causes_part", "one step of one rank, its length split into the explanation's causes (the part of the step where ...)",
    ("step", "int64", "", "the step number (ProfilerStep#N)"),
    ("device_compute_us", "float64", "us", "a compute kernel runs"),
    ("memcpy_memset_us", "float64", "us", "no kernel runs, a memcpy or memset does"),
    ("communication_us", "float64", "us", "nothing above runs, a collective does (exposed communication)"),
    ("synchronisation_us", "float64", "us", "the device is idle, the CPU blocked in a synchronising call"),
    ("host_launch_us", "float64", "us", "the device is idle while the CPU launches or runs operators"),
    ("data_loading_us", "float64", "us", "the device is idle while the CPU waits in the DataLoader"),
    ("other_us", "float64", "us", "none of these: Python between operators, time outside any event"),
    ("total_us", "float64", "us", "the step's length"))})


def step_causes_part(model: TraceModel) -> StepCauses:
    return StepCauses(steps=step_causes(model))


def rank_table(parts_a: dict, parts_b: dict, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> pd.DataFrame:
    """DIFF_RANKS of every worker in both {worker: `StepCauses`} (`rank_changes`), from the
    step causes alone: what a many-rank comparison needs of each trace is a small summary.
    `NotFoundError` when they share no worker."""
    if not any(w in parts_b for w in parts_a):
        raise NotFoundError(f"the runs share no worker: {', '.join(parts_a)} against {', '.join(parts_b)}")
    return rank_changes({w: explanation_table(parts_a[w].steps, parts_b[w].steps, threshold_pct)
                         for w in parts_a if w in parts_b})


@dataclass
class OperatorNames:
    """What proposing a B for a diff needs of one trace (`runs.propose_comparison`): its
    operator names (one column, `name`; the ProfilerStep#N step markers, in every trace, left
    out) and its device type."""

    names: pd.DataFrame
    device_type: str


# An `OperatorNames` as the disk cache stores it.
OPERATOR_NAMES_PART = Persisted(
    "operator_names", OperatorNames,
    {"names": declare("operator_names_part", "one operator name a trace uses (step markers left out)",
                      ("name", "str", "", "the operator's name"))},
    scalars=declare("operator_names_device", "the device type of the trace whose operator names these are",
                    ("device_type", "str", "", "CUDA, ROCm, CPU... as the trace's run reports it")))


def operator_names(model: TraceModel, device_type: str) -> OperatorNames:
    """The `OperatorNames` of one trace whose device type is `device_type`."""
    categories = model.ops["name"].cat.categories.astype(str) if len(model.ops) else pd.Index([], dtype=object)
    used = np.unique(model.ops["name"].cat.codes.to_numpy()) if len(model.ops) else np.zeros(0, np.int64)
    names = [c for c in categories[used] if not _PROFILER_STEP.match(c)]
    return OperatorNames(names=pd.DataFrame({"name": pd.Series(sorted(names), dtype=object)}), device_type=device_type)


def rank_changes(explanations: dict) -> pd.DataFrame:
    """DIFF_RANKS from {worker: its `explain(...).explanation`}, sorted by |mean_us_delta|,
    largest first, then by worker."""
    rows = []
    for worker, table in explanations.items():  # one per rank, not per event
        step = table.iloc[0]
        causes = table.iloc[1:]
        top = causes.iloc[int(np.argmax(causes["mean_us_delta"].abs().to_numpy()))]
        rows.append({"worker": worker, "steps_a": step["steps_a"], "steps_b": step["steps_b"],
                     "mean_us_a": step["mean_us_a"], "mean_us_b": step["mean_us_b"],
                     "mean_us_delta": step["mean_us_delta"], "change_pct": step["change_pct"],
                     "verdict": step["verdict"], "top_cause": top["cause"], "top_cause_us": top["mean_us_delta"],
                     "top_cause_label": top["label"]})
    frame = pd.DataFrame(rows, columns=DIFF_RANKS.names)
    frame = frame.assign(_abs=frame["mean_us_delta"].abs()).sort_values(["_abs", "worker"], ascending=[False, True],
                                                                          kind="stable")
    return DIFF_RANKS.frame(frame)


# The noise rule's threshold, a parameter of the routes comparing two runs (diff, diff_ranks).
THRESHOLD_PARAM = number("threshold_pct", "The noise rule's threshold: a change is a regression only above this share of "
                         "A's mean step time (and outside both sides' step-to-step spread).", DEFAULT_THRESHOLD_PCT, 0, 1000)

DIFF_RANKS_ROUTE = route(
    "diff_ranks",
    'Two runs of a job compared rank by rank (Python: runs.diff_ranks): every worker found in both, its '
    "span of run A against its span_b of run B, with its mean step time in each, the noise rule's verdict"
    " and its largest cause; the rank that changed most first. Each rank's full diff is the diff route "
    'with worker = worker_b = that worker.',
    rank_table, params=(THRESHOLD_PARAM,), table=DIFF_RANKS, reads=TWO_SPANS, part="step_causes")
