"""Memory copies: time, bytes and bandwidth per kind of copy and device.

A copy's name says its direction and memory kinds (``Memcpy HtoD (Pageable -> Device)``,
``Memcpy DtoH (Device -> Pinned)``, ``Memcpy DtoD (Device -> Device)``): pageable host memory
is copied through a staging buffer at a fraction of a pinned copy's bandwidth, so a large
pageable share is worth pinning (``pin_memory=True``).
"""

import numpy as np
import pandas as pd

from ..schema import NULLABLE, declare, documented, route
from ..trace.model import TraceModel
from .common import texts

MEMCPY_SUMMARY = declare(
    "memcpy_summary", "one kind of memory copy (its name: direction and memory kinds) on one device",
    ("name", "str", "", "the copy as the trace names it, e.g. Memcpy HtoD (Pageable -> Device)"),
    ("device", "int64", "", "device number"),
    ("copies", "int64", "count", "copies of this kind on this device"),
    ("total_us", "float64", "us", "summed device time of the copies"),
    ("mean_us", "float64", "us", "total_us / copies"),
    ("total_bytes", "int64", "bytes", "bytes copied by the copies whose size the trace records"),
    ("bandwidth_gbps", "float64", "gb/s",
     "total_bytes over the time of the copies whose size is recorded; null when none is or their time is 0",
     NULLABLE),
    ("time_pct", "float64", "pct", "total_us as a share of all copies' time on this device"),
)


@documented(MEMCPY_SUMMARY)
def memcpy_summary(model: TraceModel) -> pd.DataFrame:
    """Per copy name and device: how many copies, their time, bytes and bandwidth, most time
    first; empty for a trace without copies.

    Notes
    -----
    Bandwidth counts only copies whose size the trace records (`bytes` >= 0), over their own
    time: GB/s = bytes / µs / 10^3, as `queues.memory_bandwidth` reads a copy's rate.
    """
    copies = model.memcpy
    sized = copies["bytes"].to_numpy() >= 0
    dur = copies["dur"].to_numpy()
    frame = pd.DataFrame({"name": texts(copies["name"]), "device": copies["device"].to_numpy(),
                          "dur": dur, "bytes": np.where(sized, copies["bytes"].to_numpy(), 0),
                          "sized_us": np.where(sized, dur, 0.0)})
    grouped = frame.groupby(["name", "device"], sort=False).agg(
        copies=("dur", "size"), total_us=("dur", "sum"), total_bytes=("bytes", "sum"), sized_us=("sized_us", "sum"))
    grouped = grouped.reset_index()
    device_us = grouped.groupby("device")["total_us"].transform("sum").to_numpy()
    sized_us = grouped["sized_us"].to_numpy()
    total_bytes = grouped["total_bytes"].to_numpy()
    table = grouped.assign(
        mean_us=grouped["total_us"] / grouped["copies"],
        bandwidth_gbps=np.where(sized_us > 0, total_bytes / np.where(sized_us > 0, sized_us, 1.0) / 1e3, np.nan),
        time_pct=np.where(device_us > 0, 100.0 * grouped["total_us"].to_numpy() / np.where(device_us > 0, device_us, 1.0),
                          0.0))
    table = table.sort_values(["total_us", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return MEMCPY_SUMMARY.frame({column: table[column].to_numpy() for column in MEMCPY_SUMMARY.names})


MEMCPY_SUMMARY_ROUTE = route(
    "memcpy_summary",
    "Memory copies per kind (direction and memory kinds) and device: copies, time, bytes, bandwidth, share of copy "
    "time.",
    memcpy_summary,
    table=MEMCPY_SUMMARY)
