"""Compiled view: the regions `torch.compile` ran, the kernels Inductor generated for them, and
how much of the step ran compiled.

What torch 2.x records (see ``samples/cpu_compile`` and the shared ``triton_kernel`` trace):

- ``Torch-Compiled Region: <frame>/<compile>`` around each call of a Dynamo-compiled frame;
  the second number counts the frame's compilations (``0/1`` is frame 0's second, a
  recompilation).
- ``CompiledFunction`` inside it (AOTAutograd's forward of a graph that needs autograd) and
  ``CompiledFunctionBackward`` when autograd runs the backward, both with the same
  ``Sequence number``.
- Inductor's kernels as ops: on GPU the Triton launch ``triton_<kind>_fused_<ops>_<n>`` with
  ``kernel_hash`` (and, in newer releases, ``kernel_file`` / ``kernel_backend``) args, whose
  device kernel has the same name; on CPU, with ``cpp.enable_kernel_profile``, the C++
  kernels ``graph_<g>_cpp_fused_<ops>_<n>`` (they run on the host).
"""

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..schema import NULLABLE, declare, route, tab
from ..trace.model import TraceModel
from .common import cached, device_activity, enclosing_op_where, name_mask, operator_tree, step_windows, texts
from .intervals import union_length

_FRAME_REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)")
_INDUCTOR_KERNEL = re.compile(r"^(graph_\d+_)?(triton_|cpp_fused_|cpp_kernel_)")
_FUSED = re.compile(r"fused_(.+?)(_\d+)?$")
# Who wrote a kernel that ran in a compiled region, from its name, first match wins: what
# Inductor generated, or a library kernel that an extern call (aten::mm -> cuBLAS, SDPA ->
# PyTorch's CUTLASS attention) or an eager op inside the region launched.
ORIGINS = (
    ("Inductor (Triton)", re.compile(r"^triton_")),
    ("Inductor (C++)", re.compile(r"^(graph_\d+_)?cpp_fused")),
    ("cuBLAS", re.compile(r"cublas|^sm\d+_xmma_gemm", re.IGNORECASE)),
    ("cuDNN", re.compile(r"cudnn", re.IGNORECASE)),
    ("CUTLASS", re.compile(r"cutlass", re.IGNORECASE)),
    ("NCCL", re.compile(r"nccl", re.IGNORECASE)),
    ("ATen", re.compile(r"\bat::|^(void )?\(anonymous namespace\)::")),
)
KINDS = ("frame", "forward", "backward")
_NO_TEXT = np.zeros(0, dtype=object)
_KIND_NAMES = {"forward": "CompiledFunction", "backward": "CompiledFunctionBackward"}

REGIONS = declare(
    "compiled_regions", "one compiled region: a Dynamo frame's compilation, or AOTAutograd's forward or backward of it",
    ("region", "str", "", "Torch-Compiled Region: <frame>/<compile>, or CompiledFunction / CompiledFunctionBackward [<id>]"),
    ("kind", "str", "", "frame (Dynamo), forward (CompiledFunction) or backward (CompiledFunctionBackward)"),
    ("compile_id", "str", "", "<frame>/<compile> as Dynamo numbers it; '' when the trace does not say"),
    ("frame", "int64", "count", "Dynamo's frame number, -1 when unknown"),
    ("compilation", "int64", "count", "which compilation of the frame (0 first, 1+ recompilations), -1 when unknown"),
    ("calls", "int64", "count", "times the region ran"),
    ("host_total_us", "float64", "us", "summed host duration of the region's ops"),
    ("device_total_us", "float64", "us", "summed duration of the device activities launched inside it"),
    ("kernel_count", "int64", "count", "device kernels launched inside it"),
    ("inductor_kernel_calls", "int64", "count", "calls of Inductor-generated kernels inside it (host ops: triton_*, cpp_fused_*)"),
    ("kernels", "str", "", "the generated kernels it ran, most time first, '; '-separated"),
)
KERNELS = declare(
    "compiled_kernels", "one generated kernel in the innermost compiled region that ran it",
    ("region", "str", "", "the innermost compiled region (as in compiled_regions)"),
    ("kernel", "str", "", "the kernel's name (for a generated kernel, as Inductor named it)"),
    ("origin", "str", "", "who wrote it, from its name: Inductor (Triton), Inductor (C++), cuBLAS, cuDNN, CUTLASS, NCCL, ATen or other"),
    ("fused", "str", "", "the ops Inductor fused into it, from its name (fused_<ops>_<n>), '' when unnamed"),
    ("calls", "int64", "count", "calls (launching ops, else device kernels)"),
    ("host_us", "float64", "us", "summed host time of its launch op (on CPU: the kernel itself)"),
    ("device_us", "float64", "us", "summed device time of its kernels, 0 when it ran on the host"),
    ("kernel_hash", "str", "", "Inductor's kernel_hash arg, '' when not recorded"),
    ("kernel_file", "str", "", "Inductor's kernel_file arg (the generated source), '' when not recorded"),
)
SHARE = declare(
    "compiled_share", "time of the profiled steps inside compiled regions versus outside (eager)",
    ("compiled_us", "float64", "us", "union of compiled regions' host intervals within the steps"),
    ("eager_us", "float64", "us", "step time outside compiled regions"),
    ("total_us", "float64", "us", "summed step time"),
    ("compiled_pct", "float64", "pct", "compiled_us / total_us; null without steps", NULLABLE),
    ("regions", "int64", "count", "distinct compiled regions"),
    ("recompiled_frames", "int64", "count", "frames that ran a compilation other than their first"),
)


def _region_kind(model: TraceModel) -> npt.NDArray[np.int64]:
    """Per op: index into KINDS of the compiled-region op it is, -1 for any other op."""
    names = model.ops["name"]
    frame = name_mask(names, _FRAME_REGION.match)
    forward = (names == _KIND_NAMES["forward"]).to_numpy()
    backward = (names == _KIND_NAMES["backward"]).to_numpy()
    return np.select([frame, forward, backward], [0, 1, 2], default=-1).astype(np.int64)


def _region_ops(model: TraceModel) -> pd.DataFrame:
    """The compiled-region ops: row, kind (index into KINDS), compile id, frame, compilation
    and their region label (see `compiled`)."""
    def build() -> pd.DataFrame:
        ops = model.ops
        kind = _region_kind(model)
        rows = np.flatnonzero(kind >= 0)
        if not len(rows):  # an eager trace: the same columns, no rows, nothing computed
            return pd.DataFrame({"row": rows, "kind": rows, "name": _NO_TEXT, "frame": rows, "compilation": rows,
                                 "compile_id": _NO_TEXT, "region": _NO_TEXT})
        names = texts(ops["name"], rows)
        ids = pd.Series(names).str.extract(_FRAME_REGION)
        table = pd.DataFrame({"row": rows, "kind": kind[rows], "name": names,
                              "frame": pd.to_numeric(ids[0]).fillna(-1).astype(np.int64).to_numpy(),
                              "compilation": pd.to_numeric(ids[1]).fillna(-1).astype(np.int64).to_numpy()})
        # AOTAutograd's forward takes the id of the Dynamo region around it; its backward the
        # id of the forward with the same Sequence number (autograd runs it outside the region)
        frame_rows = enclosing_op_where(model, ops["parent"].to_numpy()[rows], kind == 0)
        has_frame = (table["kind"].to_numpy() == 1) & (frame_rows >= 0)
        lookup = table.set_index("row")
        for column in ("frame", "compilation"):
            values = table[column].to_numpy().copy()
            values[has_frame] = lookup[column].reindex(frame_rows[has_frame]).to_numpy()
            table[column] = values
        seq = ops["sequence_number"].to_numpy()[rows]
        forward = table[(table["kind"] == 1) & (seq >= 0)].assign(seq=seq[(table["kind"] == 1) & (seq >= 0)])
        by_seq = forward.drop_duplicates("seq").set_index("seq")
        backward = (table["kind"].to_numpy() == 2) & (seq >= 0)
        for column in ("frame", "compilation"):
            values = table[column].to_numpy().copy()
            values[backward] = by_seq[column].reindex(seq[backward]).fillna(-1).astype(np.int64).to_numpy()
            table[column] = values
        known = table["frame"] >= 0
        table["compile_id"] = np.where(known, table["frame"].astype(str) + "/" + table["compilation"].astype(str), "")
        suffix = np.where(known, " [" + table["compile_id"] + "]", "")
        table["region"] = np.where(table["kind"] == 0, table["name"], table["name"] + suffix)
        return table
    return cached(model, "compiled_region_ops", build)


def has_regions(model: TraceModel) -> bool:
    """Whether the trace ran any compiled region (the Compiled view has data)."""
    return bool(len(_region_ops(model)))


def recompilations(model: TraceModel) -> pd.Series:
    """Per frame that ran a compilation other than its first (``Torch-Compiled Region: 0/1``):
    the highest compilation number that ran, indexed by frame number, ascending. Read from
    the region ops alone: the Overview asks this of every trace and needs none of the
    Compiled view's per-region totals."""
    regions = _region_ops(model)
    frames = regions[(regions["kind"].to_numpy() == 0) & (regions["compilation"].to_numpy() > 0)]
    return frames.groupby("frame")["compilation"].max()


def compiled_op_mask(model: TraceModel) -> npt.NDArray[np.bool_]:
    """Per op: whether it ran inside a compiled region (a Dynamo frame's region, or the
    AOTAutograd backward autograd runs outside it), the region ops themselves included."""
    def build() -> npt.NDArray[np.bool_]:
        kind = _region_kind(model)
        return enclosing_op_where(model, np.arange(len(model.ops)), (kind == 0) | (kind == 2)) >= 0
    return cached(model, "compiled_op_mask", build)


def is_inductor_kernel_name(name: str) -> bool:
    """Whether a kernel or op name is one Inductor generated (triton_*, cpp_fused_*, ...)."""
    return bool(_INDUCTOR_KERNEL.match(name))


def _inductor_kernel_ops(model: TraceModel) -> npt.NDArray[np.int64]:
    """Rows of ops that are Inductor-generated kernels (by name, or carrying kernel_hash)."""
    ops = model.ops
    named = name_mask(ops["name"], _INDUCTOR_KERNEL.match)
    hashed = (ops["kernel_hash"] != "").to_numpy()
    return np.flatnonzero(named | hashed)


def _innermost_region(model: TraceModel, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For op rows: the row of the innermost compiled-region op around them (-1 when none)."""
    return enclosing_op_where(model, rows, _region_kind(model) >= 0)


def compiled_kernels(model: TraceModel) -> pd.DataFrame:
    """The generated kernels per innermost compiled region, declared as `KERNELS`.

    Notes
    -----
    A kernel is an op named like Inductor's kernels (``triton_*``, ``cpp_fused_*``, with or
    without the ``graph_<g>_`` prefix of CPU kernel profiling) or carrying ``kernel_hash``,
    and the device kernels such ops launched. Device kernels launched from any other op
    inside a region (an extern ``aten::mm`` call, cuBLAS) are listed under their own name
    with no launch op time. Ordered by host_us + device_us, largest first.
    """
    return cached(model, "compiled_kernels", lambda: _build_kernels(model))


def kernel_origin(name: str) -> str:
    """Who wrote a kernel (`ORIGINS`): "Inductor (Triton)", ..., "ATen", else "other"."""
    return next((origin for origin, pattern in ORIGINS if pattern.search(name)), "other")


def _build_kernels(model: TraceModel) -> pd.DataFrame:
    if not len(_region_ops(model)):
        return KERNELS.empty()
    ops = model.ops
    regions = _region_ops(model).set_index("row")["region"]
    op_rows = _inductor_kernel_ops(model)
    op_region = _innermost_region(model, op_rows)
    keep = op_region >= 0
    host = pd.DataFrame({
        "region": regions.reindex(op_region[keep]).to_numpy(),
        "kernel": texts(ops["name"], op_rows[keep]),
        "dur": ops["dur"].to_numpy()[op_rows[keep]],
        "kernel_hash": texts(ops["kernel_hash"], op_rows[keep]),
        "kernel_file": texts(ops["kernel_file"], op_rows[keep]),
    })
    dev = device_activity(model)
    dev = dev[dev["kind"] == "kernel"]
    launch_op = dev["op"].to_numpy()
    dev_region = _innermost_region(model, launch_op)
    on = dev_region >= 0
    device = pd.DataFrame({"region": regions.reindex(dev_region[on]).to_numpy(),
                           "kernel": texts(dev["name"], on), "dur": dev["dur"].to_numpy()[on]})
    per_host = host.groupby(["region", "kernel"], sort=False).agg(
        host_calls=("dur", "size"), host_us=("dur", "sum"), kernel_hash=("kernel_hash", "max"),
        kernel_file=("kernel_file", "max"))
    per_device = device.groupby(["region", "kernel"], sort=False).agg(device_calls=("dur", "size"),
                                                                        device_us=("dur", "sum"))
    table = per_host.join(per_device, how="outer").reset_index()
    table["calls"] = np.where(table["host_calls"].notna(), table["host_calls"], table["device_calls"])
    table = table.fillna({"host_us": 0.0, "device_us": 0.0, "kernel_hash": "", "kernel_file": "", "calls": 0})
    table["calls"] = table["calls"].astype(np.int64)
    fused = table["kernel"].str.extract(_FUSED)[0] if len(table) else pd.Series(dtype=object)
    table["fused"] = fused.fillna("").astype(str) if len(table) else fused
    table["origin"] = [kernel_origin(name) for name in table["kernel"]]
    table["_time"] = table["host_us"] + table["device_us"]
    table = table.sort_values("_time", ascending=False, kind="stable")
    return KERNELS.frame(table)


def compiled(model: TraceModel) -> pd.DataFrame:
    """One row per compiled region, declared as `REGIONS`.

    Notes
    -----
    Rows are keyed by (kind, compile id): a frame compiled twice gives two frame rows
    (``0/0``, ``0/1``) when both ran in the trace. host_total_us sums the region ops'
    durations (nested calls of the same region would count twice; Dynamo does not nest a
    frame in itself). device_total_us and kernel_count count every device kernel (and, for
    device_total_us, memcpy/memset) whose launching op is inside the region, nested
    regions included: a frame's row includes its CompiledFunction's kernels. The backward
    runs outside the frame's region, so it is a row of its own. ``kernels`` lists the
    generated kernels of `compiled_kernels` whose innermost region is this one.
    """
    return cached(model, "compiled_regions", lambda: _build_regions(model))


def _build_regions(model: TraceModel) -> pd.DataFrame:
    table = _region_ops(model)
    if not len(table):
        return REGIONS.empty()
    ops = model.ops
    tree = operator_tree(model)
    table = table.assign(host=ops["dur"].to_numpy()[table["row"].to_numpy()],
                         device=tree["device_total_us"].to_numpy()[table["row"].to_numpy()])
    # per region row: device kernels and Inductor kernel ops anywhere inside (per kind, so a
    # kernel counts for the frame and for the CompiledFunction around it)
    kind = _region_kind(model)
    dev = device_activity(model)
    kernels = dev[dev["kind"] == "kernel"]
    inductor_rows = _inductor_kernel_ops(model)
    kernel_counts, inductor_counts = np.zeros(len(table), np.int64), np.zeros(len(table), np.int64)
    position = pd.Series(np.arange(len(table)), index=table["row"].to_numpy())
    for k in range(len(KINDS)):  # three kinds of region
        for rows, counts in ((kernels["op"].to_numpy(), kernel_counts), (inductor_rows, inductor_counts)):
            around = enclosing_op_where(model, rows, kind == k)
            around = around[around >= 0]
            np.add.at(counts, position.reindex(around).to_numpy(dtype=np.int64), 1)
    table["kernel_count"], table["inductor_kernel_calls"] = kernel_counts, inductor_counts
    grouped = table.groupby(["kind", "compile_id", "region"], sort=False).agg(
        frame=("frame", "first"), compilation=("compilation", "first"), calls=("row", "size"),
        host_total_us=("host", "sum"), device_total_us=("device", "sum"), kernel_count=("kernel_count", "sum"),
        inductor_kernel_calls=("inductor_kernel_calls", "sum")).reset_index()
    listed = compiled_kernels(model).groupby("region", sort=False)["kernel"].agg("; ".join)
    grouped["kernels"] = listed.reindex(grouped["region"]).fillna("").to_numpy()
    grouped["kind"] = np.asarray(KINDS, dtype=object)[grouped["kind"].to_numpy()] if len(grouped) else \
        grouped["kind"].astype(object)
    grouped = grouped.sort_values(["frame", "compilation", "kind"], key=lambda c: c.map(KINDS.index)
                                  if c.name == "kind" else c, kind="stable")
    return REGIONS.frame(grouped)


def compiled_share(model: TraceModel) -> pd.DataFrame:
    """How much of the profiled steps ran inside compiled regions (declared as `SHARE`, one
    row): the union of the frame and backward regions' host intervals within the step
    windows (`common.step_windows`), the rest being eager. A frame "recompiled" when a
    compilation other than its first (``<frame>/<n>``, n >= 1) ran in the trace."""
    regions = _region_ops(model)
    ops = model.ops
    outer = regions[regions["kind"].isin([0, 2])]["row"].to_numpy()
    start = ops["ts"].to_numpy()[outer]
    end = start + ops["dur"].to_numpy()[outer]
    windows = step_windows(model)
    bounds = (windows["start_us"].to_numpy(), windows["end_us"].to_numpy())
    compiled_us = float(union_length(start, end, bounds).sum())
    total = float((bounds[1] - bounds[0]).sum())
    known = regions[regions["frame"] >= 0]
    return SHARE.frame({
        "compiled_us": [compiled_us], "eager_us": [total - compiled_us], "total_us": [total],
        "compiled_pct": [100.0 * compiled_us / total if total > 0 else np.nan],
        "regions": [int(regions["region"].nunique())],
        "recompiled_frames": [int(known[known["compilation"] > 0]["frame"].nunique())],
    })


@dataclass
class CompiledView:
    """The compiled view's tables: `compiled`, `compiled_kernels` and `compiled_share`."""

    regions: pd.DataFrame
    kernels: pd.DataFrame
    share: pd.DataFrame


def compiled_view(model: TraceModel) -> CompiledView:
    """All three tables of the compiled view of one profile."""
    return CompiledView(regions=compiled(model), kernels=compiled_kernels(model), share=compiled_share(model))


# The routes answering with these tables (see `schema.route`).
COMPILED_ROUTE = route(
    "compiled",
    "torch.compile in one profile: regions (region, kind, compile_id, frame, compilation, calls, "
    "host_total_us, device_total_us, kernel_count, inductor_kernel_calls, kernels -- one row per "
    "Dynamo frame compilation and AOTAutograd forward/backward), kernels (region, kernel, fused, "
    "calls, host_us, device_us, kernel_hash, kernel_file -- Inductor's generated kernels per "
    "innermost region) and share (compiled_us, eager_us, total_us, compiled_pct, regions, "
    "recompiled_frames). Empty tables for a trace without compiled regions. With table=NAME, that one"
    " table (JSON or CSV); with tables=A,B, those (JSON).",
    compiled_view,
    tables={"regions": REGIONS, "kernels": KERNELS, "share": SHARE})


# This view's tab of the page (see `schema.tab`).
COMPILED_TAB = tab("compiled", 70, lambda offer: has_regions(offer.model))
