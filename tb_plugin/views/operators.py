"""Operator view: host and device self/total time per operator, and its call stacks."""

import re

import numpy as np
import pandas as pd

from ..trace.linking import Nesting
from .compiled import compiled_op_mask
from .common import _cached, operator_tree

_FRAME = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<function>.*)$")

OPERATOR_COLUMNS = ["name", "calls", "host_self_us", "host_total_us", "device_self_us", "device_total_us",
                    "tc_eligible", "tc_self_pct", "tc_total_pct", "has_call_stack"]


def _python_stack_leaf(model):
    """Per op row: the innermost python_function enclosing it on its thread (-1 if none)."""
    def build():
        py = model.python
        if not len(py):
            return np.full(len(model.ops), -1, dtype=np.int64)
        nesting = Nesting(py["thread"].to_numpy(), py["ts"].to_numpy(), py["dur"].to_numpy())
        return nesting.enclosing(model.ops["thread"].to_numpy(), model.ops["ts"].to_numpy())
    return _cached(model, "python_stack_leaf", build)


def _stack_keys(model):
    """Per op row: an id of its call stack (-1 when it has none), from `Call stack` args
    (old traces) or the enclosing python_function frames (PyTorch 2.x with_stack)."""
    def build():
        ops = model.ops
        arg_codes = ops["call_stack"].cat.codes.to_numpy().astype(np.int64)
        empty_code = list(ops["call_stack"].cat.categories).index("") if "" in ops["call_stack"].cat.categories else -2
        from_args = np.where(arg_codes == empty_code, -1, arg_codes)
        leaf = _python_stack_leaf(model)
        offset = len(ops["call_stack"].cat.categories)
        return np.where(from_args >= 0, from_args, np.where(leaf >= 0, leaf + offset, -1))
    return _cached(model, "stack_keys", build)


def _frames_of_key(model, key):
    """Frames (innermost first) of one stack id: [{"file", "line", "function", "text"}]."""
    categories = model.ops["call_stack"].cat.categories
    if key < len(categories):
        texts = [t for t in str(categories[key]).split(";") if t]
    else:
        py = model.python
        by_id = pd.Series(np.arange(len(py)), index=py["python_id"].to_numpy())
        by_id = by_id[~by_id.index.duplicated()]
        texts, row, seen = [], key - len(categories), set()
        names, parents = py["name"].astype(str).to_numpy(), py["python_parent_id"].to_numpy()
        while row >= 0 and row not in seen:  # one stack's frames: tens, not per event
            seen.add(row)
            texts.append(names[row])
            row = int(by_id.get(parents[row], -1))
    frames = []
    for text in texts:
        m = _FRAME.match(text)
        if m:
            frames.append({"file": m["file"], "line": int(m["line"]), "function": m["function"], "text": text})
        else:
            frames.append({"file": None, "line": None, "function": text, "text": text})
    return frames


def operators(model, group_by="name", scope="all"):
    """Per operator (or operator + input shape): calls and times.

    Parameters
    ----------
    group_by : "name" or "name_shape"
    scope : "all", "compiled" (only ops that ran inside torch.compile regions,
        `compiled.compiled_op_mask`) or "eager" (only the others)

    Returns
    -------
    DataFrame with columns name (str), [input_shape (str) when grouped by shape], calls (int),
    host_self_us, host_total_us, device_self_us, device_total_us (float µs),
    tc_eligible (bool), tc_self_pct, tc_total_pct (float, % of the device time on Tensor Cores;
    NaN without device time), has_call_stack (bool); sorted by device self then host self time.

    Notes
    -----
    Host total is the op's wall time; host self excludes child ops and the runtime calls the
    op made. Device self is the device activity the op's own runtime calls launched; device
    total adds its descendants'. ProfilerStep, Optimizer, DataLoader, (Distributed)DataParallel
    ranges and user annotations are structure, not operators, and are left out; their children
    are not. Calls follow torch's duplicate-node rule (see `operator_tree`).
    """
    if group_by not in ("name", "name_shape"):
        raise ValueError(f"group_by must be 'name' or 'name_shape', not {group_by!r}")
    if scope not in ("all", "compiled", "eager"):
        raise ValueError(f"scope must be 'all', 'compiled' or 'eager', not {scope!r}")
    tree = operator_tree(model)
    ops = model.ops
    keep = tree["is_operator"].to_numpy()
    if scope != "all":
        keep = keep & (compiled_op_mask(model) == (scope == "compiled"))
    frame = pd.DataFrame({
        "name": ops["name"].to_numpy()[keep],
        "input_shape": ops["input_dims"].to_numpy()[keep],
        "host_self_us": tree["host_self_us"].to_numpy()[keep],
        "host_total_us": tree["host_total_us"].to_numpy()[keep],
        "device_self_us": tree["device_self_us"].to_numpy()[keep],
        "device_total_us": tree["device_total_us"].to_numpy()[keep],
        "tc_self_us": tree["tc_self_us"].to_numpy()[keep],
        "tc_total_us": tree["tc_total_us"].to_numpy()[keep],
        "tc_eligible": tree["tc_eligible"].to_numpy()[keep],
        "has_call_stack": _stack_keys(model)[keep] >= 0,
    })
    keys = ["name"] if group_by == "name" else ["name", "input_shape"]
    grouped = frame.groupby(keys, observed=True, sort=False).agg(
        calls=("host_total_us", "size"),
        host_self_us=("host_self_us", "sum"),
        host_total_us=("host_total_us", "sum"),
        device_self_us=("device_self_us", "sum"),
        device_total_us=("device_total_us", "sum"),
        tc_self_us=("tc_self_us", "sum"),
        tc_total_us=("tc_total_us", "sum"),
        tc_eligible=("tc_eligible", "any"),
        has_call_stack=("has_call_stack", "any"),
    ).reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        grouped["tc_self_pct"] = np.where(grouped["device_self_us"] > 0, 100 * grouped["tc_self_us"] / grouped["device_self_us"], np.nan)
        grouped["tc_total_pct"] = np.where(grouped["device_total_us"] > 0, 100 * grouped["tc_total_us"] / grouped["device_total_us"], np.nan)
    grouped["name"] = grouped["name"].astype(str)
    columns = OPERATOR_COLUMNS if group_by == "name" else OPERATOR_COLUMNS[:1] + ["input_shape"] + OPERATOR_COLUMNS[1:]
    if group_by == "name_shape":
        grouped["input_shape"] = grouped["input_shape"].astype(str)
    out = grouped[columns].sort_values(["device_self_us", "host_self_us"], ascending=False, kind="stable")
    return out.reset_index(drop=True)


def operator_stacks(model, name, input_shape=None):
    """Call stacks of one operator (optionally one input shape), heaviest first.

    Returns a list of {"calls", "host_self_us", "host_total_us", "device_self_us",
    "device_total_us", "frames": [{"file", "line", "function", "text"}, ...]}, frames
    innermost first. Operators recorded without stacks give an empty list.
    """
    tree = operator_tree(model)
    ops = model.ops
    mask = tree["is_operator"].to_numpy() & (ops["name"] == name).to_numpy()
    if input_shape is not None:
        mask &= (ops["input_dims"] == input_shape).to_numpy()
    keys = _stack_keys(model)
    mask &= keys >= 0
    if not mask.any():
        return []
    frame = pd.DataFrame({"key": keys[mask], **{c: tree[c].to_numpy()[mask] for c in
                          ("host_self_us", "host_total_us", "device_self_us", "device_total_us")}})
    grouped = frame.groupby("key").agg(calls=("host_total_us", "size"), host_self_us=("host_self_us", "sum"),
                                       host_total_us=("host_total_us", "sum"), device_self_us=("device_self_us", "sum"),
                                       device_total_us=("device_total_us", "sum"))
    grouped = grouped.sort_values(["device_total_us", "host_total_us"], ascending=False)
    # Distinct leaf frames can share one printed stack; merge those.
    merged = {}
    for key, row in grouped.iterrows():  # one row per distinct stack, not per event
        frames = _frames_of_key(model, int(key))
        text = "\n".join(f["text"] for f in frames)
        entry = merged.setdefault(text, {"calls": 0, "host_self_us": 0.0, "host_total_us": 0.0,
                                         "device_self_us": 0.0, "device_total_us": 0.0, "frames": frames})
        entry["calls"] += int(row["calls"])  # iterrows gives the row as floats
        for column in ("host_self_us", "host_total_us", "device_self_us", "device_total_us"):
            entry[column] += float(row[column])
    return list(merged.values())
