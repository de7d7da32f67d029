"""Operator view: host and device self/total time per operator, and its call stacks."""

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import NULLABLE, choice, declare, documented, route, tab
from ..schema import text as free_text
from ..errors import BadParameterError
from ..trace.linking import Nesting
from ..trace.model import TraceModel
from .compiled import compiled_op_mask
from .common import cached, object_frame, operator_tree, texts

_FRAME = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<function>.*)$")

_NAME = ("name", "str", "", "operator name")
_STATS = (
    ("calls", "int64", "count", "calls (after the duplicate-node merge, as torch counts them)"),
    ("host_self_us", "float64", "us", "wall time less child ops and the op's own runtime calls (torch 2.11's "
     "key_averages() self CPU time, and torch-tb-profiler 0.4.3's)"),
    ("host_self_less_python_us", "float64", "us", "host_self_us less the Python frames (with_stack) that ran inside the op, "
     "the ops inside them counted once: torch 2.13's key_averages() self CPU time; = host_self_us without frames"),
    ("host_total_us", "float64", "us", "wall time"),
    ("device_self_us", "float64", "us", "device activity launched by the op's own runtime calls"),
    ("device_total_us", "float64", "us", "device activity launched by the op and its descendants"),
    ("tc_eligible", "bool", "", "whether it (or an op it called) can run on Tensor Cores"),
    ("tc_self_pct", "float64", "pct", "share of device_self_us on Tensor Cores; null without device time", NULLABLE),
    ("tc_total_pct", "float64", "pct", "share of device_total_us on Tensor Cores; null without device time",
     NULLABLE),
    ("has_call_stack", "bool", "", "whether some call recorded a call stack (see operator_stacks)"),
)
OPERATORS_BY_NAME = declare("operators_by_name", "one operator name", _NAME, *_STATS)
OPERATORS_BY_NAME_SHAPE = declare(
    "operators_by_name_shape", "one operator name with one list of input shapes",
    _NAME, ("input_shape", "str", "", "input shapes as JSON, as torch's key_averages() prints them (a tensor list's "
                                      "element is []); empty when not recorded"), *_STATS)
OPERATOR_COLUMNS = OPERATORS_BY_NAME.names


def _shape_text(input_dims: str) -> str:
    """`Input Dims` as torch's `key_averages()` prints `input_shapes`: a tensor list's
    element (the trace lists each tensor's shape) is `[]` there, as for any non-tensor input."""
    try:
        dims = json.loads(input_dims) if input_dims else None
    except ValueError:
        return input_dims
    if not isinstance(dims, list):
        return input_dims
    return json.dumps([[] if isinstance(d, list) and any(isinstance(x, list) for x in d) else d for d in dims])


def input_shapes(model: TraceModel) -> npt.NDArray[np.object_]:
    """Per op row: its input shapes as `_shape_text` writes them (one parse per distinct
    shape list, not per op)."""
    def build() -> npt.NDArray[np.object_]:
        dims = model.ops["input_dims"]
        shape_texts = np.array([_shape_text(str(c)) for c in dims.cat.categories], dtype=object)
        codes = dims.cat.codes.to_numpy()
        return shape_texts[codes] if len(shape_texts) else np.full(len(codes), "", dtype=object)
    return cached(model, "operator_input_shapes", build)


def _python_stack_leaf(model: TraceModel) -> npt.NDArray[np.int64]:
    """Per op row: the innermost python_function enclosing it on its thread (-1 if none)."""
    def build() -> npt.NDArray[np.int64]:
        py = model.python
        if not len(py):
            return np.full(len(model.ops), -1, dtype=np.int64)
        nesting = Nesting(py["thread"].to_numpy(), py["ts"].to_numpy(), py["dur"].to_numpy())
        return nesting.enclosing(model.ops["thread"].to_numpy(), model.ops["ts"].to_numpy())
    return cached(model, "python_stack_leaf", build)


def stack_key_of_ops(model: TraceModel) -> npt.NDArray[np.int64]:
    """Per op row: an id of its call stack (-1 when it has none), from `Call stack` args
    (old traces) or the enclosing python_function frames (PyTorch 2.x with_stack)."""
    def build() -> npt.NDArray[np.int64]:
        ops = model.ops
        arg_codes = ops["call_stack"].cat.codes.to_numpy().astype(np.int64)
        empty_code = list(ops["call_stack"].cat.categories).index("") if "" in ops["call_stack"].cat.categories else -2
        from_args = np.where(arg_codes == empty_code, -1, arg_codes)
        leaf = _python_stack_leaf(model)
        offset = len(ops["call_stack"].cat.categories)
        return np.where(from_args >= 0, from_args, np.where(leaf >= 0, leaf + offset, -1))
    return cached(model, "stack_keys", build)


def frames_of_key(model: TraceModel, key: int) -> list[dict[str, Any]]:
    """Frames (innermost first) of one stack id: [{"file", "line", "function", "text"}]."""
    categories = model.ops["call_stack"].cat.categories
    if key < len(categories):
        frame_texts = [t for t in str(categories[key]).split(";") if t]
    else:
        py = model.python
        by_id = pd.Series(np.arange(len(py)), index=py["python_id"].to_numpy())
        by_id = by_id[~by_id.index.duplicated()]
        frame_texts, row, seen = [], key - len(categories), set()
        names, parents = texts(py["name"]), py["python_parent_id"].to_numpy()
        while row >= 0 and row not in seen:  # one stack's frames: tens, not per event
            seen.add(row)
            frame_texts.append(names[row])
            row = int(by_id.get(parents[row], -1))
    frames = []
    for text in frame_texts:
        m = _FRAME.match(text)
        if m:
            frames.append({"file": m["file"], "line": int(m["line"]), "function": m["function"], "text": text})
        else:
            frames.append({"file": None, "line": None, "function": text, "text": text})
    return frames


@documented(OPERATORS_BY_NAME, OPERATORS_BY_NAME_SHAPE)
def operators(model: TraceModel, group_by: str = "name", scope: str = "all") -> pd.DataFrame:
    """Per operator (or operator + input shape): calls and times.

    Parameters
    ----------
    group_by : "name" or "name_shape"
    scope : "all", "compiled" (only ops that ran inside torch.compile regions,
        `compiled.compiled_op_mask`) or "eager" (only the others)

    Returns
    -------
    DataFrame: `operators_by_name`, or `operators_by_name_shape` grouped by shape; sorted by
    device self then host self time.

    Notes
    -----
    Host total is the op's wall time; host self excludes child ops and the runtime calls the
    op made. torch's own ``key_averages()`` changed its self time between releases when
    ``with_stack`` recorded Python frames inside operators (a ``CompiledFunction``'s body):
    torch 2.13's subtracts those frames too, torch 2.11's does not; both are given,
    host_self_less_python_us being 2.13's (`common._python_frame_correction`). Device self is the device activity the op's own runtime calls launched; device
    total adds its descendants'. ProfilerStep, Optimizer, DataLoader, (Distributed)DataParallel
    ranges and user annotations are structure, not operators, and are left out; their children
    are not. Calls follow torch's duplicate-node rule (see `operator_tree`). Input shapes are
    written as `key_averages(group_by_input_shape=True)` writes them, so the groups are its
    groups: a tensor list's element is `[]` (the trace's per-tensor shapes are in the Trace
    view's event details).
    """
    if group_by not in ("name", "name_shape"):
        raise BadParameterError(f"group_by must be 'name' or 'name_shape', not {group_by!r}")
    if scope not in ("all", "compiled", "eager"):
        raise BadParameterError(f"scope must be 'all', 'compiled' or 'eager', not {scope!r}")
    tree = operator_tree(model)
    ops = model.ops
    keep = tree["is_operator"].to_numpy()
    if scope != "all":
        keep = keep & (compiled_op_mask(model) == (scope == "compiled"))
    frame = object_frame({
        "name": texts(ops["name"], keep),
        "input_shape": input_shapes(model)[keep],
        "host_self_us": tree["host_self_us"].to_numpy()[keep],
        "host_self_less_python_us": tree["host_self_less_python_us"].to_numpy()[keep],
        "host_total_us": tree["host_total_us"].to_numpy()[keep],
        "device_self_us": tree["device_self_us"].to_numpy()[keep],
        "device_total_us": tree["device_total_us"].to_numpy()[keep],
        "tc_self_us": tree["tc_self_us"].to_numpy()[keep],
        "tc_total_us": tree["tc_total_us"].to_numpy()[keep],
        "tc_eligible": tree["tc_eligible"].to_numpy()[keep],
        "has_call_stack": stack_key_of_ops(model)[keep] >= 0,
    })
    keys = ["name"] if group_by == "name" else ["name", "input_shape"]
    grouped = frame.groupby(keys, observed=True, sort=False).agg(
        calls=("host_total_us", "size"),
        host_self_us=("host_self_us", "sum"),
        host_self_less_python_us=("host_self_less_python_us", "sum"),
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
    if group_by == "name_shape":
        grouped["input_shape"] = grouped["input_shape"].astype(str)
    table = OPERATORS_BY_NAME if group_by == "name" else OPERATORS_BY_NAME_SHAPE
    return table.frame(grouped.sort_values(["device_self_us", "host_self_us"], ascending=False, kind="stable"))


def operator_stacks(model: TraceModel, name: str, input_shape: str | None = None) -> list[dict[str, Any]]:
    """Call stacks of one operator (optionally one input shape), heaviest first.

    Returns a list of {"calls", "host_self_us", "host_total_us", "device_self_us",
    "device_total_us", "frames": [{"file", "line", "function", "text"}, ...]}, frames
    innermost first. Operators recorded without stacks give an empty list.
    """
    tree = operator_tree(model)
    ops = model.ops
    mask = tree["is_operator"].to_numpy() & (ops["name"] == name).to_numpy()
    if input_shape is not None:
        mask &= input_shapes(model) == input_shape
    keys = stack_key_of_ops(model)
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
    merged: dict[str, dict[str, Any]] = {}
    for key, row in zip(grouped.index.tolist(), grouped.to_dict("records")):  # one per distinct stack, not per event
        frames = frames_of_key(model, int(key))
        text = "\n".join(f["text"] for f in frames)
        entry = merged.setdefault(text, {"calls": 0, "host_self_us": 0.0, "host_total_us": 0.0,
                                         "device_self_us": 0.0, "device_total_us": 0.0, "frames": frames})
        entry["calls"] += int(row["calls"])
        for column in ("host_self_us", "host_total_us", "device_self_us", "device_total_us"):
            entry[column] += float(row[column])
    return list(merged.values())


def stacks_of(model: TraceModel, name: str, input_shape: str | None = None) -> dict[str, Any]:
    """{name, input_shape, stacks: `operator_stacks`}: the route's answer."""
    return {"name": name, "input_shape": input_shape, "stacks": operator_stacks(model, name, input_shape)}


def with_stack_files(answer: dict[str, Any], resolve: Callable[[Any], Any]) -> dict[str, Any]:
    """`stacks_of`'s answer with every stack's frames resolved (`resolve(frames)`)."""
    return {**answer, "stacks": [{**s, "frames": resolve(s["frames"])} for s in answer["stacks"]]}


# The routes answering with these tables (see `schema.route`).
OPERATORS_ROUTE = route(
    "operators",
    "Host and device self/total time per operator (group_by=name), or per operator and input shapes "
    "(name_shape).",
    operators,
    params=(choice("group_by", ("name", "name_shape"), "one row per operator name, or per name and input shapes"),
            choice("scope", ("all", "compiled", "eager"), "all ops, only those inside torch.compile regions (compiled), or the others (eager)")),
    table=(OPERATORS_BY_NAME, OPERATORS_BY_NAME_SHAPE))
OPERATOR_STACKS_ROUTE = route(
    "operator_stacks",
    "Call stacks of one operator (optionally one input shape), frames innermost first.",
    stacks_of, reply="OperatorStacks", frames=with_stack_files,
    params=(free_text("name", "The operator's name (a row of /operators).", required=True),
            free_text("input_shape", "Only its calls with these input shapes (the input_shape of /operators?group_by=name_shape).")))


# This view's tab of the page (see `schema.tab`).
OPERATOR_TAB = tab("operator", 10, lambda offer: len(offer.model.ops))
