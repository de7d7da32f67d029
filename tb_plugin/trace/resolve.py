"""The builder's last pass: what is worked out across the model's tables once they are cut
(`build`): the links between them (op nesting, runtime call -> op, device activity ->
runtime call and op, allocation and flow end -> op, flow ends paired; with `linking`'s
vectorised walks), the profiler steps, and the devices (deviceProperties as Kineto writes
them, mapped to the device the work ran on).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .anomalies import DEVICE_PROPERTIES_MAPPED
from .linking import Nesting, flow_peers, lookup
from .tables import DEVICES

if TYPE_CHECKING:
    import numpy.typing as npt


STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


# The keys only Kineto's own writer gives a device (libkineto/src/CudaDeviceProperties.cpp):
# torch's Python exporter (`export_chrome_trace(..., use_python_export=True)`,
# torch/profiler/_chrome_trace_export.py in torch 2.13) writes neither, and puts the SM count
# (`multi_processor_count`) under `maxThreadsPerMultiprocessor`.
_KINETO_ONLY_DEVICE_KEYS = ("numSms", "regsPerBlock")


def _as_written_by_kineto(entry: dict[str, Any]) -> dict[str, Any]:
    """A deviceProperties entry with the Python exporter's SM count where Kineto puts it."""
    if "maxThreadsPerMultiprocessor" in entry and not any(k in entry for k in _KINETO_ONLY_DEVICE_KEYS) \
            and "regsPerMultiprocessor" in entry:
        entry = {**entry, "numSms": entry["maxThreadsPerMultiprocessor"]}
        del entry["maxThreadsPerMultiprocessor"]
    return entry


def devices_of(metadata: dict[str, Any]) -> pd.DataFrame:
    props = metadata.get("deviceProperties") or metadata.get("computeProperties") or []
    rows = [_as_written_by_kineto(p) for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    table = pd.DataFrame(rows)
    for column in DEVICES.names:
        if column not in table:
            table[column] = np.nan if column != "name" else ""
        elif column == "name":
            table[column] = [v if isinstance(v, str) else "" if v is None else str(v) for v in table[column]]
        else:  # numbers as float64, NaN where a file has a string, null or a non-finite value
            values = pd.to_numeric(table[column], errors="coerce").to_numpy(np.float64)
            table[column] = np.where(np.isfinite(values), values, np.nan)
    return table[DEVICES.names]  # the declared properties; others a file has are not kept


def devices_used(devices: pd.DataFrame, device_tables: Sequence[pd.DataFrame], anomalies: dict[str, Any]) -> pd.DataFrame:
    """`devices`, with the one entry of deviceProperties given the id of the one device the
    trace's device work ran on when the two differ (recorded as `DEVICE_PROPERTIES_MAPPED`):
    single-GPU ROCm traces run their kernels on device 2 or 9 (the node's numbering) while
    deviceProperties lists the one visible GPU as id 0. Several devices, or several
    entries, are left as written: which entry is which device is then unknown."""
    used = pd.unique(np.concatenate([t["device"].to_numpy() for t in device_tables]))
    used = used[used >= 0]
    if len(used) != 1 or len(devices) != 1 or devices["id"].iloc[0] == used[0]:
        return devices
    listed = devices["id"].iloc[0]
    anomalies[DEVICE_PROPERTIES_MAPPED] = \
        f"deviceProperties id {int(listed) if listed == listed else 'none'} taken as device {int(used[0])}"
    return devices.assign(id=float(used[0]))


def link_tables(ops: pd.DataFrame, runtime: pd.DataFrame, device_tables: Sequence[pd.DataFrame], memory: pd.DataFrame, flows: pd.DataFrame) -> Nesting:
    """Resolve op nesting, runtime -> op, device activity -> runtime/op, memory -> op, flow
    endpoint -> op and -> the other end of its arrow."""
    nesting = Nesting(ops["thread"].to_numpy(), ops["ts"].to_numpy(), ops["dur"].to_numpy())
    ops["depth"] = nesting.depth
    ops["parent"] = nesting.parent
    # Where an External id repeats (a user annotation and the op inside it), the innermost wins.
    by_depth = np.lexsort((-nesting.depth,))
    op_ext = ops["external_id"].to_numpy()
    distinct_ext = pd.unique(op_ext[op_ext > 0])  # hashing: numpy's unique sorts (or is slower still)
    ext_index = by_depth[lookup(op_ext[by_depth], distinct_ext)] if len(ops) else np.zeros(0, np.int64)
    ext_keys = op_ext[ext_index] if len(ops) else np.zeros(0, np.int64)

    def op_of_external(ext: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        pos = lookup(ext_keys, np.where(ext > 0, ext, -1))
        return np.where(pos >= 0, ext_index[np.clip(pos, 0, None)] if len(ext_index) else -1, -1)

    rt_op = op_of_external(runtime["external_id"].to_numpy())
    # Runtime calls without an External id: the innermost op around them on their thread.
    missing = rt_op < 0
    if missing.any():
        rt_op[missing] = nesting.enclosing(runtime["thread"].to_numpy()[missing], runtime["ts"].to_numpy()[missing])
    runtime["op"] = rt_op
    # Where a correlation repeats (XPU's driver call inside the runtime call that made it,
    # pytorch/kineto#1467), the outermost call is the launch.
    rt_nesting = Nesting(runtime["thread"].to_numpy(), runtime["ts"].to_numpy(), runtime["dur"].to_numpy())
    rt_by_depth = np.lexsort((rt_nesting.depth,))
    rt_correlation = runtime["correlation"].to_numpy()[rt_by_depth]
    for table in device_tables:
        rt = lookup(rt_correlation, table["correlation"].to_numpy())
        rt = np.where(rt >= 0, rt_by_depth[np.clip(rt, 0, None)] if len(rt_by_depth) else -1, -1)
        table["runtime"] = rt
        from_runtime = np.where(rt >= 0, rt_op[np.clip(rt, 0, None)] if len(rt_op) else -1, -1)
        table["op"] = np.where(from_runtime >= 0, from_runtime, op_of_external(table["external_id"].to_numpy()))
    memory["op"] = nesting.enclosing(memory["thread"].to_numpy(), memory["ts"].to_numpy())
    flows["op"] = nesting.enclosing(flows["thread"].to_numpy(), flows["ts"].to_numpy())
    # Flow ids are unique only within a category (ac2g and fwdbwd ids overlap): keyed by both.
    flow_id, phase = flows["flow_id"].to_numpy(), flows["phase"].to_numpy()
    key = flows["cat"].cat.codes.to_numpy().astype(np.int64) * (len(flows) + 1) + flow_id
    flows["peer"] = flow_peers(key, (phase == "s") & (flow_id >= 0), (phase == "f") & (flow_id >= 0))
    return nesting


def step_table(ops: pd.DataFrame) -> pd.DataFrame:
    """Host-side `ProfilerStep#N` ranges (never the GPU copies), one row per step number."""
    names = pd.Series(ops["name"].cat.categories, dtype=object)
    step_numbers = names.str.extract(STEP_NAME, expand=False)
    step_numbers = step_numbers.where(step_numbers.str.len() <= 18)  # beyond int64 is no step number
    is_step_code = step_numbers.notna().to_numpy()
    codes = ops["name"].cat.codes.to_numpy()
    mask = is_step_code[codes] if len(codes) else np.zeros(0, bool)
    rows = ops[mask]
    steps = pd.DataFrame({
        "step": step_numbers.to_numpy()[codes[mask]].astype(np.int64) if mask.any() else np.zeros(0, np.int64),
        "ts": rows["ts"].to_numpy(),
        "dur": rows["dur"].to_numpy(),
        "op": np.flatnonzero(mask),
    })
    # A step recorded twice on the host (cpu_op and user_annotation): keep the longest.
    steps = steps.sort_values(["step", "dur"], ascending=[True, False]).drop_duplicates("step")
    return steps.sort_values("ts").reset_index(drop=True)
