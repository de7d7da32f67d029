"""Diff view: two traces (two runs, workers or spans) side by side, per operator, per kernel
and per step-time category, with the change from the first to the second."""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.model import TraceModel
from .common import step_breakdown
from .operators import operators

OPERATOR_QUANTITIES = ["calls", "host_self_us", "host_total_us", "device_self_us", "device_total_us"]
KERNEL_QUANTITIES = ["calls", "total_us"]
OPERATOR_DIFF_COLUMNS = ["name"] + [f"{q}_{side}" for q in OPERATOR_QUANTITIES for side in ("a", "b", "delta")]
KERNEL_DIFF_COLUMNS = ["name"] + [f"{q}_{side}" for q in KERNEL_QUANTITIES for side in ("a", "b", "delta")]
STEP_DIFF_COLUMNS = ["category", "mean_us_a", "mean_us_b", "mean_us_delta"]


@dataclass
class DiffView:
    """Tables of the diff view; see `diff` for their columns."""

    operators: pd.DataFrame
    kernels: pd.DataFrame
    steps: pd.DataFrame


def _side_by_side(a, b, quantities):
    """Outer join of two per-name tables; a name missing on one side counts 0 there."""
    merged = a[["name"] + quantities].merge(b[["name"] + quantities], on="name", how="outer", suffixes=("_a", "_b"))
    columns = {"name": merged["name"].astype(str).to_numpy()}
    for q in quantities:
        integer = q == "calls"
        dtype = np.int64 if integer else np.float64
        side_a = merged[f"{q}_a"].fillna(0).to_numpy().astype(dtype)
        side_b = merged[f"{q}_b"].fillna(0).to_numpy().astype(dtype)
        columns.update({f"{q}_a": side_a, f"{q}_b": side_b, f"{q}_delta": side_b - side_a})
    return pd.DataFrame(columns)


def _sorted_by_change(table, keys):
    """Largest absolute change first (by each key in turn), then by name."""
    order = table.assign(**{f"_abs_{k}": table[k].abs() for k in keys})
    order = order.sort_values([f"_abs_{k}" for k in keys] + ["name"], ascending=[False] * len(keys) + [True],
                              kind="stable")
    return order[table.columns].reset_index(drop=True)


def kernel_totals(model):
    """Per kernel name: calls (int64) and total_us (float64 µs), straight from `model.kernels`."""
    k = model.kernels
    grouped = k.groupby("name", observed=True, sort=False).agg(calls=("dur", "size"), total_us=("dur", "sum"))
    grouped = grouped.reset_index()
    grouped["name"] = grouped["name"].astype(str)
    return grouped.astype({"calls": np.int64, "total_us": np.float64})


def diff(a: TraceModel, b: TraceModel) -> DiffView:
    """Compare two traces: operators, kernels and step breakdown side by side.

    Parameters
    ----------
    a, b : TraceModel
        The baseline and the trace compared with it (two runs, two workers or two spans).
        Deltas are ``b - a``.

    Returns
    -------
    DiffView
        ``operators`` -- one row per operator name found in either trace (`operators.operators`
        grouped by name, so the same rows the operator view lists):

        - name (str)
        - calls_a, calls_b, calls_delta (int64)
        - host_self_us_a, host_self_us_b, host_self_us_delta (float64 µs)
        - host_total_us_a, host_total_us_b, host_total_us_delta (float64 µs)
        - device_self_us_a, device_self_us_b, device_self_us_delta (float64 µs)
        - device_total_us_a, device_total_us_b, device_total_us_delta (float64 µs)

        sorted by absolute device_total_us_delta, then absolute host_total_us_delta
        (largest first), then name.

        ``kernels`` -- one row per kernel name found in either trace (all kernels of
        ``model.kernels``, communication kernels included):

        - name (str)
        - calls_a, calls_b, calls_delta (int64)
        - total_us_a, total_us_b, total_us_delta (float64 µs): summed kernel duration

        sorted by absolute total_us_delta (largest first), then name.

        ``steps`` -- one row per step-time category of `common.step_breakdown` (kernel,
        memcpy, memset, communication, runtime, dataloader, cpu_exec, other) plus ``total``:

        - category (str): the breakdown column without its ``_us`` suffix
        - mean_us_a, mean_us_b (float64 µs): mean over the trace's steps of that category's
          time per step (a trace without step markers counts as one step)
        - mean_us_delta (float64 µs): mean_us_b - mean_us_a

    Notes
    -----
    Joins are outer: a name present in only one trace gets 0 calls and 0 time on the other
    side, so every delta is defined.
    """
    ops = _sorted_by_change(_side_by_side(operators(a, "name"), operators(b, "name"), OPERATOR_QUANTITIES),
                            ["device_total_us_delta", "host_total_us_delta"])
    kernels = _sorted_by_change(_side_by_side(kernel_totals(a), kernel_totals(b), KERNEL_QUANTITIES),
                                ["total_us_delta"])
    return DiffView(operators=ops[OPERATOR_DIFF_COLUMNS], kernels=kernels[KERNEL_DIFF_COLUMNS], steps=_step_diff(a, b))


def _step_means(model):
    table = step_breakdown(model)
    columns = [c for c in table.columns if c.endswith("_us")]
    return pd.Series(table[columns].mean(axis=0).to_numpy(np.float64), index=[c[: -len("_us")] for c in columns])


def _step_diff(a, b):
    mean_a, mean_b = _step_means(a), _step_means(b)
    categories = list(mean_a.index) + [c for c in mean_b.index if c not in mean_a.index]
    side_a = mean_a.reindex(categories).fillna(0.0).to_numpy(np.float64)
    side_b = mean_b.reindex(categories).fillna(0.0).to_numpy(np.float64)
    return pd.DataFrame({"category": categories, "mean_us_a": side_a, "mean_us_b": side_b,
                         "mean_us_delta": side_b - side_a})
