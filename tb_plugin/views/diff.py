"""Diff view: two traces (two runs, workers or spans) side by side, per operator, per kernel
and per step-time category, with the change from the first to the second, and why the step
time changed (`regression.explain`: causes, contributors, the matched operator trees).

Every quantity is per step, so that a trace of 6 steps compares with one of 3: an operator's
calls and times are its totals over the trace divided by the trace's step count."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import TWO_PROFILES, Column, Table, declare, documented, route, tab
from ..trace.model import TraceModel
from .common import step_breakdown, step_windows
from .kernels import KERNELS_BY_NAME
from .operators import OPERATORS_BY_NAME, operators
from .regression import (DEFAULT_THRESHOLD_PCT, THRESHOLD_PARAM, DIFF_CONTRIBUTOR_PATHS, DIFF_CONTRIBUTORS, DIFF_EXPLANATION, DIFF_TREE,
                         explain)

OPERATOR_QUANTITIES = ["calls", "host_self_us", "host_total_us", "device_self_us", "device_total_us"]
KERNEL_QUANTITIES = ["calls", "total_us"]
_SIDES = (("a", "mean per step over trace a's steps (its total in a / a's step count)"),
          ("b", "mean per step over trace b's steps (its total in b / b's step count)"),
          ("delta", "b's mean per step - a's"))


def _side_by_side_columns(source: Table, quantities: Sequence[str]) -> list[Column]:
    """The declared columns of a side-by-side table: name, then each quantity of `source`
    (a declared table) for a, b and their difference."""
    name = source.column("name")
    columns = [Column("name", "str", "", f"{name.doc}, found in either trace")]
    for q in quantities:
        c = source.column(q)
        columns += [Column(f"{q}_{side}", "float64", c.unit, f"{c.doc}, {meaning} (0 where absent)")
                    for side, meaning in _SIDES]
    return columns


DIFF_OPERATORS = declare(
    "diff_operators", "one operator name found in either trace (the operator view's rows, grouped by name)",
    *_side_by_side_columns(OPERATORS_BY_NAME, OPERATOR_QUANTITIES))
DIFF_KERNELS = declare(
    "diff_kernels", "one kernel name found in either trace (communication kernels included)",
    *_side_by_side_columns(KERNELS_BY_NAME, KERNEL_QUANTITIES))
DIFF_STEPS = declare(
    "diff_steps", "one step-time category of the step breakdown (kernel ... other), then total",
    ("category", "str", "", "the step_breakdown column without its _us suffix"),
    ("mean_us_a", "float64", "us", "mean over trace a's steps of the category's time per step"),
    ("mean_us_b", "float64", "us", "mean over trace b's steps of the category's time per step"),
    ("mean_us_delta", "float64", "us", "mean_us_b - mean_us_a: the change of the mean per step"),
)
DIFF_WARNINGS = declare(
    "diff_warnings", "one reason to read the diff with care, in a sentence (none when A and B compare cleanly)",
    ("kind", "str", "", "programs (few operator tree nodes in both), devices (other hardware), step_counts "
                        "(other numbers of steps) or few_steps (too few steps for the noise rule's spread)"),
    ("warning", "str", "", "the warning in words, with the numbers it rests on"),
)
# Below this share of the matched operator tree's nodes found in both traces, A and B look
# like different programs.
MATCHED_WARNING = 0.5
# The noise rule's spread (a median absolute deviation) over fewer steps than this says
# little: the verdict then rests on the threshold alone.
FEW_STEPS = 5
OPERATOR_DIFF_COLUMNS = DIFF_OPERATORS.names
KERNEL_DIFF_COLUMNS = DIFF_KERNELS.names
STEP_DIFF_COLUMNS = DIFF_STEPS.names


@dataclass
class DiffView:
    """Tables of the diff view; see `diff` for their columns."""

    operators: pd.DataFrame
    kernels: pd.DataFrame
    steps: pd.DataFrame
    explanation: pd.DataFrame
    contributors: pd.DataFrame
    contributor_paths: pd.DataFrame
    tree: pd.DataFrame
    warnings: pd.DataFrame


TABLES = ("warnings", "operators", "kernels", "steps", "explanation", "contributors", "contributor_paths", "tree")


def _side_by_side(a: pd.DataFrame, b: pd.DataFrame, quantities: list[str], steps_a: int, steps_b: int) -> pd.DataFrame:
    """Outer join of two per-name tables of totals, as per-step values; a name missing on one
    side counts 0 there."""
    merged = a[["name"] + quantities].merge(b[["name"] + quantities], on="name", how="outer", suffixes=("_a", "_b"))
    columns: dict[str, npt.NDArray[Any]] = {"name": merged["name"].astype(str).to_numpy()}
    for q in quantities:
        side_a = merged[f"{q}_a"].fillna(0).to_numpy(np.float64) / steps_a
        side_b = merged[f"{q}_b"].fillna(0).to_numpy(np.float64) / steps_b
        columns.update({f"{q}_a": side_a, f"{q}_b": side_b, f"{q}_delta": side_b - side_a})
    return pd.DataFrame(columns)


def _sorted_by_change(table: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Largest absolute change first (by each key in turn), then by name."""
    order = table.assign(**{f"_abs_{k}": table[k].abs() for k in keys})
    order = order.sort_values([f"_abs_{k}" for k in keys] + ["name"], ascending=[False] * len(keys) + [True],
                              kind="stable")
    return order[table.columns].reset_index(drop=True)


def kernel_totals(model: TraceModel) -> pd.DataFrame:
    """Per kernel name: calls (int64) and total_us (float64 µs), straight from `model.kernels`."""
    k = model.kernels
    grouped = k.groupby("name", observed=True, sort=False).agg(calls=("dur", "size"), total_us=("dur", "sum"))
    grouped = grouped.reset_index()
    grouped["name"] = grouped["name"].astype(str)
    return grouped.astype({"calls": np.int64, "total_us": np.float64})


def device_names(model: TraceModel) -> str | None:
    """The devices a trace ran its kernels, copies and sets on, in words: their names as its
    deviceProperties list them (the one listed when the ids used are not: ROCm traces number
    devices apart from it), "the CPU alone" without device activity; None when the trace
    does not name them."""
    used = np.unique(np.concatenate([t["device"].to_numpy() for t in (model.kernels, model.memcpy, model.memset)]))
    if not len(used):
        return "the CPU alone"
    listed = model.devices["name"].to_numpy()
    names = listed[np.isin(model.devices["id"].to_numpy(), used)]
    if not len(names) and len(set(listed)) == 1:
        names = listed
    named = sorted({n for n in names if isinstance(n, str) and n})
    return ", ".join(named) if named else None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def warnings(a: TraceModel, b: TraceModel, tree: pd.DataFrame, steps_a: int, steps_b: int) -> pd.DataFrame:
    """DIFF_WARNINGS of comparing trace `a` with `b` (`tree`: their matched operator tree)."""
    rows = []
    matched = float((tree["status"] == "matched").mean()) if len(tree) else 1.0
    if matched < MATCHED_WARNING:
        rows.append(("programs", f"Only {matched:.0%} of the operator tree's nodes are found in both traces: "
                                 "A and B may be different programs, and their difference says little."))
    device_a, device_b = device_names(a), device_names(b)
    if device_a is not None and device_b is not None and device_a != device_b:  # unnamed is not other
        rows.append(("devices", f"A ran on {device_a} and B on {device_b}: part of the difference is the "
                                "hardware's, not the code's."))
    if steps_a != steps_b:
        rows.append(("step_counts", f"A has {_plural(steps_a, 'step')} and B {steps_b}: every quantity is a mean per "
                                    "step of each side, so steps that differ in kind (warm-up, evaluation) weigh "
                                    "differently."))
    few = [f"{side} has {_plural(n, 'step')}" if len(model.steps) else f"{side} has no step markers (it counts as one step)"
           for side, model, n in (("A", a, steps_a), ("B", b, steps_b)) if n < FEW_STEPS]
    if len(few) == 2 and few[0][1:] == few[1][1:]:
        few = [f"A and B have {_plural(steps_a, 'step')} each" if len(a.steps) else "A and B have no step markers "
               "(each counts as one step)"]
    if few:
        rows.append(("few_steps", f"{' and '.join(few)}: too few for a sharp verdict (the noise rule's "
                                  f"step-to-step spread needs {FEW_STEPS} or more); a regression or improvement "
                                  "here rests on the threshold alone. Profile more steps to confirm it."))
    return DIFF_WARNINGS.frame(pd.DataFrame(rows, columns=DIFF_WARNINGS.names))


@documented(DIFF_WARNINGS, DIFF_OPERATORS, DIFF_KERNELS, DIFF_STEPS, DIFF_EXPLANATION, DIFF_CONTRIBUTORS,
            DIFF_CONTRIBUTOR_PATHS, DIFF_TREE)
def diff(a: TraceModel, b: TraceModel, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> DiffView:
    """Compare two traces: operators, kernels and step breakdown side by side, per step, and
    why the mean step time changed.

    Parameters
    ----------
    a, b : TraceModel
        The baseline and the trace compared with it (two runs, two workers or two spans).
        Deltas are ``b - a``.
    threshold_pct : float
        The noise rule's threshold (`regression.verdicts`): a change of the step time or of a
        cause is a regression only above this share of a's mean step time.

    Returns
    -------
    DiffView
        Its tables ``warnings`` (reasons to read the diff with care: different programs,
        devices or step counts, too few steps for a sharp verdict), ``operators`` (sorted by absolute device_total_us_delta, then absolute
        host_total_us_delta, largest first, then name), ``kernels`` (sorted by absolute
        total_us_delta, largest first, then name) and ``steps`` (a trace without step
        markers counts as one step), ``explanation``, ``contributors``, ``contributor_paths``
        and ``tree`` (see `regression.explain`) are the ones declared below, in that order.

    Notes
    -----
    Joins are outer: a name present in only one trace gets 0 calls and 0 time on the other
    side, so every delta is defined.
    """
    steps_a, steps_b = len(step_windows(a)), len(step_windows(b))
    ops = _sorted_by_change(_side_by_side(operators(a, "name"), operators(b, "name"), OPERATOR_QUANTITIES, steps_a, steps_b),
                            ["device_total_us_delta", "host_total_us_delta"])
    kernels = _sorted_by_change(_side_by_side(kernel_totals(a), kernel_totals(b), KERNEL_QUANTITIES, steps_a, steps_b),
                                ["total_us_delta"])
    why = explain(a, b, threshold_pct)
    return DiffView(operators=DIFF_OPERATORS.frame(ops), kernels=DIFF_KERNELS.frame(kernels), steps=_step_diff(a, b),
                    explanation=why.explanation, contributors=why.contributors,
                    contributor_paths=why.contributor_paths, tree=why.tree,
                    warnings=warnings(a, b, why.tree, steps_a, steps_b))


def _step_means(model: TraceModel) -> pd.Series:
    table = step_breakdown(model)
    columns = [c for c in table.columns if c.endswith("_us")]
    return pd.Series(table[columns].mean(axis=0).to_numpy(np.float64), index=[c[: -len("_us")] for c in columns])


def _step_diff(a: TraceModel, b: TraceModel) -> pd.DataFrame:
    mean_a, mean_b = _step_means(a), _step_means(b)
    categories = list(mean_a.index) + [c for c in mean_b.index if c not in mean_a.index]
    side_a = mean_a.reindex(categories).fillna(0.0).to_numpy(np.float64)
    side_b = mean_b.reindex(categories).fillna(0.0).to_numpy(np.float64)
    return DIFF_STEPS.frame({"category": categories, "mean_us_a": side_a, "mean_us_b": side_b,
                             "mean_us_delta": side_b - side_a})


# This view's tab of the page (see `schema.tab`): it needs a second trace file to compare with.
DIFF_TAB = tab("diff", 110, lambda offer: offer.trace_file_count > 1)


# The route answering with these tables (see `schema.route`).
DIFF_ROUTE = route(
    "diff", "Two profiles side by side, every quantity per step (deltas = b - a): warnings (sentences: different programs, "
    "devices or step counts, too few steps for a sharp verdict), operators, kernels, steps (the step breakdown's means); "
    "explanation (the change of the mean step time split into causes that sum to it, with medians, spreads, step counts "
    "and the noise rule's verdict), contributors (each cause's top contributors, each summed over the operators and "
    "module paths it ran under, with a representative call in each trace), contributor_paths (those operators, for "
    "contributors of several), tree (the two operator trees matched by path, lowest common ancestor where names "
    "differ). With table=NAME, that one table.", diff,
    params=(THRESHOLD_PARAM,),
    tables=dict(zip(TABLES, (DIFF_WARNINGS, DIFF_OPERATORS, DIFF_KERNELS, DIFF_STEPS, DIFF_EXPLANATION, DIFF_CONTRIBUTORS,
                             DIFF_CONTRIBUTOR_PATHS, DIFF_TREE))), reads=TWO_PROFILES)
