"""Lightning view: time per PyTorch Lightning hook, from the ``[pl][profile]...`` ranges that
Lightning's ``PyTorchProfiler`` records around each hook it calls.

Lightning names a range ``[pl][profile][<Component>]<Owner>.<hook>`` (``[LightningModule]
LitMLP.training_step``, ``[Strategy]SingleDeviceStrategy.backward``,
``[_TrainingEpochLoop].train_dataloader_next``) or ``[pl][profile]<action>``
(``run_training_batch``); see ``samples/cpu_lightning``.
"""

import re

import numpy as np
import pandas as pd

from ..schema import NULLABLE, declare, route, tab
from ..trace.model import TraceModel
from .common import cached, name_mask, texts

_PREFIX = "[pl][profile]"
_RANGE = re.compile(r"^\[pl\]\[profile\](?:\[(?P<component>[^\]]*)\])?(?P<owner>[^.]*?)\.?(?P<hook>[^.]+)$")

HOOKS = declare(
    "lightning_hooks", "one Lightning hook (or action) that Lightning's PyTorchProfiler recorded",
    ("range", "str", "", "the range's name without the [pl][profile] prefix"),
    ("component", "str", "", "what called it: LightningModule, Strategy, Callback, _TrainingEpochLoop, ... ('' none)"),
    ("owner", "str", "", "the class whose hook ran (LitMLP, SingleDeviceStrategy), '' when not named"),
    ("hook", "str", "", "the hook or action: training_step, backward, optimizer_step, train_dataloader_next, ..."),
    ("calls", "int64", "count", "times it ran"),
    ("total_us", "float64", "us", "summed duration"),
    ("mean_us", "float64", "us", "total_us / calls", NULLABLE),
    ("max_us", "float64", "us", "longest call"),
    ("trace_pct", "float64", "pct", "total_us as a share of the time the trace covers (hooks nest: shares overlap)", NULLABLE),
)


def lightning_hooks(model: TraceModel) -> pd.DataFrame:
    """Time per Lightning hook, declared as `HOOKS`, most time first; empty for a trace
    without ``[pl][profile]`` ranges.

    Notes
    -----
    Every range counts in full, wherever it lies. Shares are of the time the whole trace
    covers (`TraceModel.span_us`), not of the profiler's steps: Lightning steps the profiler
    at the end of a batch, so a ``ProfilerStep#N`` range does not hold one whole batch
    (in ``samples/cpu_lightning`` the first ``run_training_batch`` is longer than its step).
    Ranges nest (``run_training_batch`` holds ``training_step``, ``backward`` and
    ``optimizer_step``), so the shares overlap and need not sum to 100.
    """
    return cached(model, "lightning_hooks", lambda: _build(model))


def _build(model: TraceModel) -> pd.DataFrame:
    ops = model.ops
    rows = np.flatnonzero(name_mask(ops["name"], lambda n: n.startswith(_PREFIX)))
    if not len(rows):
        return HOOKS.empty()
    names = pd.Series(texts(ops["name"], rows), dtype=object)
    parts = names.str.extract(_RANGE).fillna("")
    frame = pd.DataFrame({"range": names.str.slice(len(_PREFIX)).to_numpy(), "component": parts["component"],
                          "owner": parts["owner"], "hook": parts["hook"], "dur": ops["dur"].to_numpy()[rows]})
    table = frame.groupby(["range", "component", "owner", "hook"], sort=False).agg(
        calls=("dur", "size"), total_us=("dur", "sum"), max_us=("dur", "max")).reset_index()
    start, end = model.span_us()
    table["mean_us"] = table["total_us"] / table["calls"].where(table["calls"] > 0)
    table["trace_pct"] = 100.0 * table["total_us"] / (end - start) if end > start else np.nan
    return HOOKS.frame(table.sort_values("total_us", ascending=False, kind="stable"))


# The routes answering with these tables (see `schema.route`).
LIGHTNING_ROUTE = route(
    "lightning",
    "PyTorch Lightning: one row per hook its PyTorchProfiler recorded ([pl][profile] ranges): range, "
    "component, owner, hook, calls, total_us, mean_us, max_us, trace_pct. Empty for a trace without "
    "them.",
    lightning_hooks,
    table=HOOKS)


# This view's tab of the page (see `schema.tab`).
LIGHTNING_TAB = tab("lightning", 80, lambda offer: len(lightning_hooks(offer.model)))
