"""Kernel view: GPU kernels by name (or name + launching operator + launch configuration)."""

import numpy as np
import pandas as pd

from ..schema import NULLABLE, choice, declare, documented, route, tab
from ..errors import BadParameterError
from ..trace.model import TraceModel
from .common import kernel_flags, matrix_unit, object_frame, op_names, texts

_NAME = ("name", "str", "", "kernel name")
_STATS = (
    ("calls", "int64", "count", "runs"),
    ("total_us", "float64", "us", "summed duration"),
    ("mean_us", "float64", "us", "mean duration"),
    ("max_us", "float64", "us", "longest run"),
    ("min_us", "float64", "us", "shortest run"),
    ("mean_blocks_per_sm", "float64", "", "duration-weighted mean over the runs that report it; null when none does",
     NULLABLE),
    ("mean_est_achieved_occupancy_pct", "float64", "pct",
     "duration-weighted mean over the runs that report it; null when none does", NULLABLE),
    ("tensor_cores_used", "bool", "", "whether the kernel runs on Tensor Cores (from its name)"),
)
KERNELS_BY_NAME = declare("kernels_by_name", "one kernel name", _NAME, *_STATS)
KERNELS_BY_NAME_OP = declare(
    "kernels_by_name_op", "one kernel name with the operator that launched it and one launch configuration",
    _NAME,
    ("operator", "str", "", "the launching operator or annotation; empty outside any, or directly in a ProfilerStep#N"),
    ("graph_annotation", "str", "", "the CUDA-graph annotation of kernels a graph replay ran (torch.cuda._graph_annotations."
     "mark_kernels, merged by torch.cuda._annotate_cuda_graph_trace); empty when none"),
    ("grid", "str", "", "grid dimensions \"[x, y, z]\"; empty when unknown"),
    ("block", "str", "", "block dimensions \"[x, y, z]\"; empty when unknown"),
    ("registers_per_thread", "int64", "count", "registers per thread; -1 when unknown"),
    ("shared_memory", "int64", "bytes", "shared memory per block; -1 when unknown"),
    *_STATS)
NAME_OP_KEYS = KERNELS_BY_NAME_OP.names[:-len(_STATS)]  # the grouping columns


@documented(KERNELS_BY_NAME, KERNELS_BY_NAME_OP)
def kernels(model: TraceModel, group_by: str = "name") -> pd.DataFrame:
    """GPU kernels grouped by name, or by name + operator + launch configuration.

    Parameters
    ----------
    group_by : "name" or "name_op"

    Returns
    -------
    DataFrame: `kernels_by_name`, or `kernels_by_name_op` for "name_op"; sorted by total
    time. A kernel launched outside any operator (Triton kernels through cuLaunchKernel, say)
    has operator "". A CUDA graph's kernels all carry the graph launch's operator; the
    annotation torch 2.13 can give them (`graph_annotation`) tells the graph's parts apart.
    """
    if group_by not in ("name", "name_op"):
        raise BadParameterError(f"group_by must be 'name' or 'name_op', not {group_by!r}")
    k = model.kernels
    _, tc = kernel_flags(model)
    dur = k["dur"].to_numpy()
    blocks = k["blocks_per_sm"].to_numpy()
    occupancy = k["est_achieved_occupancy_pct"].to_numpy()
    has_blocks = np.isfinite(blocks)
    has_occ = np.isfinite(occupancy)
    frame = object_frame({
        "name": texts(k["name"]),
        "dur": dur,
        "blocks_weighted": np.where(has_blocks, blocks * dur, 0.0),
        "blocks_weight": np.where(has_blocks, dur, 0.0),
        "occupancy_weighted": np.where(has_occ, occupancy * dur, 0.0),
        "occupancy_weight": np.where(has_occ, dur, 0.0),
        "tc": tc,
    })
    keys = ["name"]
    if group_by == "name_op":
        keys = NAME_OP_KEYS
        operator = pd.Series(op_names(model, k["op"].to_numpy()), dtype=object)
        # Launched in a step but in no operator: "ProfilerStep#N" would split its row per step.
        frame["operator"] = operator.mask(operator.str.match(r"ProfilerStep#\d+$"), "").to_numpy()
        frame["graph_annotation"] = texts(k["graph_annotation"])
        frame["grid"] = texts(k["grid"])
        frame["block"] = texts(k["block"])
        frame["registers_per_thread"] = k["registers_per_thread"].to_numpy()
        frame["shared_memory"] = k["shared_memory"].to_numpy()
    g = frame.groupby(keys, sort=False).agg(
        calls=("dur", "size"), total_us=("dur", "sum"), max_us=("dur", "max"), min_us=("dur", "min"),
        blocks_weighted=("blocks_weighted", "sum"), blocks_weight=("blocks_weight", "sum"),
        occupancy_weighted=("occupancy_weighted", "sum"), occupancy_weight=("occupancy_weight", "sum"),
        tensor_cores_used=("tc", "any"),
    ).reset_index()
    g["mean_us"] = g["total_us"] / g["calls"]
    with np.errstate(divide="ignore", invalid="ignore"):
        g["mean_blocks_per_sm"] = np.where(g["blocks_weight"] > 0, g["blocks_weighted"] / g["blocks_weight"], np.nan)
        g["mean_est_achieved_occupancy_pct"] = np.where(
            g["occupancy_weight"] > 0, g["occupancy_weighted"] / g["occupancy_weight"], np.nan)
    table = KERNELS_BY_NAME if group_by == "name" else KERNELS_BY_NAME_OP
    return table.frame(g.sort_values("total_us", ascending=False, kind="stable"))


def tensor_core_share(model: TraceModel) -> dict[str, float | str | None]:
    """Kernel time on and off Tensor Cores (AMD's matrix cores on ROCm): {"tensor_cores_us",
    "other_us", "tensor_cores_pct", "unit"}; `unit` is the vendor's name for them."""
    _, tc = kernel_flags(model)
    dur = model.kernels["dur"].to_numpy()
    on, total = float(dur[tc].sum()), float(dur.sum())
    return {"tensor_cores_us": on, "other_us": total - on, "tensor_cores_pct": 100 * on / total if total else None,
            "unit": matrix_unit(model)}


# The routes answering with these tables (see `schema.route`).
KERNELS_ROUTE = route(
    "kernels",
    "GPU kernels by name (group_by=name), or by name, launching operator and launch configuration "
    "(name_op).",
    kernels,
    params=(choice("group_by", ("name", "name_op"), "one row per kernel name, or per name, launching operator and launch configuration"),),
    table=(KERNELS_BY_NAME, KERNELS_BY_NAME_OP))


# This view's tab of the page (see `schema.tab`).
KERNEL_TAB = tab("kernel", 20, lambda offer: len(offer.model.kernels))
KERNEL_TENSOR_CORES_ROUTE = route(
    "kernel_tensor_cores",
    "Kernel time on and off Tensor Cores (AMD's matrix cores on ROCm).",
    tensor_core_share,
    fields={"tensor_cores_us": {"type": "number"}, "other_us": {"type": "number"},
            "tensor_cores_pct": {"type": ["number", "null"]},
            "unit": {"type": "string", "description": "The vendor's name for the units: Tensor Cores (NVIDIA) or Matrix "
                                                      "cores (AMD)."}})
