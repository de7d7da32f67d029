"""CUDA graphs: the kernels a graph replay ran, attributed to the graph launch, the operator
around it and the step.

A replay is one runtime call (``cudaGraphLaunch``, the driver's ``cuGraphLaunch``, HIP's
``hipGraphLaunch``) whose correlation id every kernel of the graph carries, so the model
already links each graph kernel to that launch and to the op that made it (for
``torch.compile(mode="reduce-overhead")`` the compiled region's ops; for
``torch.cuda.CUDAGraph.replay`` the Python-level op around it). Every other view counts
these kernels like any other; this module says which ran inside graphs.

torch 2.13 can name the parts of a graph: ``torch.cuda._graph_annotations.mark_kernels`` records,
during capture, an annotation per graph node, and ``torch.cuda._annotate_cuda_graph_trace``
merges them into the trace afterwards, matching kernels by their ``graph node id`` arg: a
dict annotation's keys become args (``mark_kernels("attention")`` gives ``str``), any other
object the ``annotation`` arg, and the kernel's ``tid`` and ``stream`` are reassigned (the
annotation's ``stream`` key, else stream 7). `graph_annotations` groups graph kernels by that
label (`tables.KERNELS`' ``graph_annotation``); the reassigned stream is the kernel's stream
everywhere. Custom keys other than ``annotation``, ``str`` and ``name`` are not read.

Launches are tested on hand-made traces and on the H100 sample (``samples/gpu_h100_compiled``);
annotations on a hand-made trace in the format torch's script writes (no annotated real trace
was at hand: the annotations need CUDA 13.1's ``cudaGraphNodeGetToolsId``).
"""

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import NULLABLE, declare, route
from ..trace.model import TraceModel
from .common import cached, name_mask, object_frame, op_names, step_windows, texts

_GRAPH_LAUNCH = re.compile(r"^(cuda|cu|hip)GraphLaunch")

LAUNCHES = declare(
    "cuda_graph_launches", "one CUDA graph replay: the launch call and the kernels it ran",
    ("step", "int64", "count", "the step whose window holds the launch (-1 outside every step)"),
    ("launch_us", "float64", "us", "host start of the launch call, relative to the trace origin"),
    ("launch_dur_us", "float64", "us", "host duration of the launch call"),
    ("operator", "str", "", "the operator or annotation around the launch ('' none)"),
    ("kernels", "int64", "count", "kernels the replay ran"),
    ("device_us", "float64", "us", "summed duration of those kernels"),
    ("span_us", "float64", "us", "first kernel start to last kernel end", NULLABLE),
)
ANNOTATIONS = declare(
    "cuda_graph_annotations", "one CUDA-graph annotation: the kernels graph replays ran under it",
    ("annotation", "str", "", "the label (see `tables.KERNELS`' graph_annotation); '' for graph kernels without one"),
    ("kernel_names", "int64", "count", "distinct kernel names"),
    ("calls", "int64", "count", "kernel runs"),
    ("device_us", "float64", "us", "their summed duration"),
    ("graph_pct", "float64", "pct", "device_us / the summed duration of every kernel graph replays ran"),
    ("streams", "str", "", "the streams they ran on (after the annotation's reassignment), comma-separated"),
)
KERNELS = declare(
    "cuda_graph_kernels", "one kernel name: how much of it ran inside CUDA graph replays",
    ("name", "str", "", "kernel name"),
    ("calls", "int64", "count", "all calls of the kernel"),
    ("graph_calls", "int64", "count", "calls inside graph replays"),
    ("total_us", "float64", "us", "summed duration of all calls"),
    ("graph_us", "float64", "us", "summed duration of the calls inside graph replays"),
)


def graph_launch_mask(model: TraceModel) -> npt.NDArray[np.bool_]:
    """Per runtime call: whether it launches a CUDA (or HIP) graph."""
    return cached(model, "graph_launch_mask", lambda: name_mask(model.runtime["name"], _GRAPH_LAUNCH.match))


def _in_graph(model: TraceModel) -> npt.NDArray[np.bool_]:
    """Per kernel: whether a graph ran it (launched by a graph launch, or carrying a graph
    node id when its launch was not linked)."""
    launch = graph_launch_mask(model)
    runtime = model.kernels["runtime"].to_numpy()
    linked = runtime >= 0
    out = name_mask(model.kernels["graph_node_id"], bool)  # a node id that is not ""
    out[linked] |= launch[runtime[linked]]
    return out


def graph_launches(model: TraceModel) -> pd.DataFrame:
    """One row per graph replay, declared as `LAUNCHES`, in launch order."""
    return cached(model, "cuda_graph_launches", lambda: _build_launches(model))


def _build_launches(model: TraceModel) -> pd.DataFrame:
    rt = model.runtime
    rows = np.flatnonzero(graph_launch_mask(model))
    if not len(rows):
        return LAUNCHES.empty()
    k = model.kernels
    in_graph = _in_graph(model)
    k_rt = k["runtime"].to_numpy()[in_graph]
    k_start = k["ts"].to_numpy()[in_graph]
    k_end = k_start + k["dur"].to_numpy()[in_graph]
    per = pd.DataFrame({"rt": k_rt, "start": k_start, "end": k_end, "dur": k["dur"].to_numpy()[in_graph]}).groupby(
        "rt").agg(kernels=("dur", "size"), device_us=("dur", "sum"), first=("start", "min"), last=("end", "max"))
    per = per.reindex(rows)
    windows = step_windows(model)
    start = rt["ts"].to_numpy()[rows]
    index = np.searchsorted(windows["start_us"].to_numpy(), start, side="right") - 1
    inside = (index >= 0) & (start < windows["end_us"].to_numpy()[np.clip(index, 0, None)])
    step = np.where(inside, windows["step"].to_numpy()[np.clip(index, 0, None)], -1) if len(windows) else \
        np.full(len(rows), -1)
    op = rt["op"].to_numpy()[rows]
    return LAUNCHES.frame({
        "step": step, "launch_us": start, "launch_dur_us": rt["dur"].to_numpy()[rows],
        "operator": op_names(model, op), "kernels": per["kernels"].fillna(0).astype(np.int64).to_numpy(),
        "device_us": per["device_us"].fillna(0.0).to_numpy(),
        "span_us": (per["last"] - per["first"]).fillna(0.0).to_numpy(),
    })


def graph_kernels(model: TraceModel) -> pd.DataFrame:
    """Per kernel name, declared as `KERNELS`: all calls and those inside graph replays;
    only names that ran in a graph at least once, most graph time first."""
    return cached(model, "cuda_graph_kernels", lambda: _build_kernels(model))


def _build_kernels(model: TraceModel) -> pd.DataFrame:
    k = model.kernels
    in_graph = _in_graph(model)
    if not in_graph.any():
        return KERNELS.empty()
    dur = k["dur"].to_numpy()
    frame = object_frame({"name": texts(k["name"]), "dur": dur, "graph": in_graph,
                          "graph_dur": np.where(in_graph, dur, 0.0)})
    table = frame.groupby("name", sort=False).agg(calls=("dur", "size"), graph_calls=("graph", "sum"),
                                                  total_us=("dur", "sum"), graph_us=("graph_dur", "sum")).reset_index()
    table = table[table["graph_calls"] > 0].astype({"graph_calls": np.int64})
    return KERNELS.frame(table.sort_values("graph_us", ascending=False, kind="stable"))


def graph_annotations(model: TraceModel) -> pd.DataFrame:
    """Graph kernels per annotation, declared as `ANNOTATIONS`, most time first; empty
    without graph kernels, one row '' when none is annotated."""
    return cached(model, "cuda_graph_annotations", lambda: _build_annotations(model))


def _build_annotations(model: TraceModel) -> pd.DataFrame:
    k = model.kernels
    in_graph = _in_graph(model)
    if not in_graph.any():
        return ANNOTATIONS.empty()
    frame = object_frame({"annotation": texts(k["graph_annotation"], in_graph), "name": texts(k["name"], in_graph),
                          "dur": k["dur"].to_numpy()[in_graph], "stream": k["stream"].to_numpy()[in_graph]})
    table = frame.groupby("annotation", sort=False).agg(
        kernel_names=("name", "nunique"), calls=("dur", "size"), device_us=("dur", "sum"),
        streams=("stream", lambda s: ", ".join(str(v) for v in np.unique(s)))).reset_index()  # per annotation
    total = frame["dur"].sum()
    table["graph_pct"] = 100.0 * table["device_us"] / total if total > 0 else np.nan
    return ANNOTATIONS.frame(table.sort_values("device_us", ascending=False, kind="stable"))


@dataclass
class CudaGraphView:
    """The CUDA graphs view's tables: `graph_launches`, `graph_kernels` and `graph_annotations`."""

    launches: pd.DataFrame
    kernels: pd.DataFrame
    annotations: pd.DataFrame


def cuda_graph_view(model: TraceModel) -> CudaGraphView:
    return CudaGraphView(launches=graph_launches(model), kernels=graph_kernels(model),
                         annotations=graph_annotations(model))


# The routes answering with these tables (see `schema.route`).
CUDA_GRAPHS_ROUTE = route(
    "cuda_graphs",
    "CUDA graphs: launches (step, launch_us, launch_dur_us, operator, kernels, device_us, span_us -- "
    "one row per cudaGraphLaunch / cuGraphLaunch / hipGraphLaunch) kernels (name, calls, graph_calls, "
    "total_us, graph_us -- kernel names that ran inside graph replays) and annotations (annotation, "
    "kernel_names, calls, device_us, graph_pct, streams -- graph kernels per torch.cuda._graph_annotations "
    "label). Every other view counts graph kernels like any other. Empty tables for a trace without graph launches. With "
    "table=NAME, that one table (JSON or CSV); with tables=A,B, those (JSON).",
    cuda_graph_view,
    tables={"launches": LAUNCHES, "kernels": KERNELS, "annotations": ANNOTATIONS})
