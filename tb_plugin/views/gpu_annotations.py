"""GPU user annotations: device time per `gpu_user_annotation` range (the device-side copy of a
`record_function` range, or of `## forward ##` style markers), nested as on the timeline."""

import numpy as np
import pandas as pd

from ..schema import declare, route
from ..trace.linking import Nesting
from ..trace.model import TraceModel
from .common import cached, texts

PATH_SEPARATOR = " / "

GPU_ANNOTATIONS = declare(
    "gpu_annotation_breakdown", "one GPU user annotation name at one place in the nesting, over all its ranges",
    ("name", "str", "", "annotation name"),
    ("path", "str", "", "the names of the enclosing annotations and its own, outermost first, joined by ' / '"),
    ("parent_path", "str", "", "path of the enclosing annotation; empty at the top level"),
    ("depth", "int64", "", "nesting depth, 0 at the top level"),
    ("device", "int64", "", "device index of its first range"),
    ("stream", "int64", "", "stream id of its first range"),
    ("calls", "int64", "count", "ranges with this path"),
    ("total_us", "float64", "us", "summed duration of its ranges on the device"),
    ("mean_us", "float64", "us", "mean duration"),
    ("min_us", "float64", "us", "shortest range"),
    ("max_us", "float64", "us", "longest range"),
    ("first_start_us", "float64", "us", "start of its first range (for the Trace view link)"),
    ("first_end_us", "float64", "us", "end of its first range"),
)


def gpu_annotations(model: TraceModel) -> pd.DataFrame:
    """Time per GPU user annotation, nested (declared as `GPU_ANNOTATIONS`), in tree order:
    each row after its parent, siblings by total time.

    Ranges nest by time on their device stream (`trace.linking.Nesting`, the timeline's rule);
    rows group ranges by their path of names, so a name under two different parents is two
    rows.

    Notes
    -----
    HTA's `get_gpu_user_annotation_breakdown` gives per name (not per path) the sum, max,
    min, mean and standard deviation of the range durations on each rank, folding names past
    its `num_kernels` / `duration_ratio` cut into "other"; summed over paths, total_us,
    calls, min_us and max_us per name agree with it (tests/test_views_gpu_annotations.py).
    """
    return cached(model, "gpu_annotations", lambda: _gpu_annotations(model))


def _gpu_annotations(model: TraceModel) -> pd.DataFrame:
    a = model.gpu_annotations
    if not len(a):
        return GPU_ANNOTATIONS.empty()
    device, stream = a["device"].to_numpy(), a["stream"].to_numpy()
    lane = pd.factorize(pd.MultiIndex.from_arrays([device, stream]))[0]
    ts, dur = a["ts"].to_numpy(), a["dur"].to_numpy()
    nesting = Nesting(lane, ts, dur)
    parent, depth = nesting.parent, nesting.depth.astype(np.int64)
    names = texts(a["name"])
    path = names.copy()
    path_depth = np.zeros(len(names), dtype=np.int64)  # ancestors with a path (overlaps have none)
    # One pass per nesting level (tens at most), outermost first, so a parent's path is known.
    for level in range(1, int(depth.max()) + 1 if len(depth) else 0):
        rows = np.flatnonzero((depth == level) & (parent >= 0))
        path[rows] = path[parent[rows]] + PATH_SEPARATOR + names[rows]
        path_depth[rows] = path_depth[parent[rows]] + 1
    parent_path = np.where(parent >= 0, path[np.clip(parent, 0, None)], "")
    frame = pd.DataFrame({"name": names, "path": path, "parent_path": parent_path, "depth": path_depth,
                          "device": device, "stream": stream, "ts": ts, "dur": dur, "end": ts + dur})
    frame = frame.sort_values("ts", kind="stable")
    g = frame.groupby("path", sort=False).agg(
        name=("name", "first"), parent_path=("parent_path", "first"), depth=("depth", "first"), device=("device", "first"),
        stream=("stream", "first"), calls=("dur", "size"), total_us=("dur", "sum"), min_us=("dur", "min"),
        max_us=("dur", "max"), first_start_us=("ts", "first"), first_end_us=("end", "first"),
    ).reset_index()
    g["mean_us"] = g["total_us"] / g["calls"]
    return GPU_ANNOTATIONS.frame(_tree_order(g))


def _tree_order(g: pd.DataFrame) -> pd.DataFrame:
    """Rows in depth-first order: each parent, then its children by total time. One pass per
    depth over the (few) distinct paths."""
    g = g.sort_values(["total_us", "path"], ascending=[False, True], kind="stable").reset_index(drop=True)
    sibling = g.groupby("parent_path", sort=False).cumcount().to_numpy()
    row_of_path = pd.Series(np.arange(len(g)), index=g["path"])
    parent_row = row_of_path.reindex(g["parent_path"]).to_numpy()
    key = np.empty(len(g), dtype=object)
    for level in range(int(g["depth"].max()) + 1 if len(g) else 0):
        rows = np.flatnonzero(g["depth"].to_numpy() == level)
        for r in rows:  # per distinct annotation path, not per event
            key[r] = (key[int(parent_row[r])] if level else ()) + (sibling[r],)
    return g.iloc[sorted(range(len(g)), key=key.__getitem__)].reset_index(drop=True)


# The routes answering with these tables (see `schema.route`).
GPU_ANNOTATIONS_ROUTE = route(
    "gpu_annotations",
    "Device time per GPU user annotation, nested (tree order): name, path, parent_path, depth, "
    "device, stream, calls, total_us, mean_us, min_us, max_us, first_start_us, first_end_us.",
    gpu_annotations,
    table=GPU_ANNOTATIONS)
