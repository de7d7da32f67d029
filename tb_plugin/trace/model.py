"""The columnar trace model: one pandas table per event kind, links resolved once.

`build_model(parsed)` turns decoded events into a `TraceModel`. Conventions for every table:

- times are float64 microseconds relative to `TraceModel.origin_us` (the earliest event), so
  nanosecond fractions survive; `dur` is float64 microseconds, never negative;
- strings are pandas categoricals (interned names; all `name` columns share one category
  index, so `.cat.categories` may list names that occur only in other tables: use the codes
  or `.unique()` for what a table holds); integer ids use -1 for "absent";
- `thread` is a row index into `TraceModel.threads`; `op` / `runtime` are row indices into
  `ops` / `runtime` (-1 when there is none); a flow's `peer` is the row of the other end of
  its arrow (the first start and first end of one flow id within one category pair up).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .accelerators import CUDA

if TYPE_CHECKING:  # the tables' type only: importing the model loads no pandas (nor the builder)
    import pandas as pd

_DIGITS = re.compile(r"(-?\d+)")


def first_int(value: object) -> int:
    """The first integer in a pid/tid value (0, "1", "stream 7"); -1 when there is none, or
    when it does not fit an int64 column (a pid of 20 digits)."""
    m = _DIGITS.search("" if value is None else str(value))
    number = int(m.group(1)) if m else -1
    return number if -2**63 <= number < 2**63 else -1


@dataclass
class TraceModel:
    """Every event of one trace file, as columnar tables. See the module docstring."""

    origin_us: float
    threads: pd.DataFrame
    ops: pd.DataFrame
    python: pd.DataFrame
    runtime: pd.DataFrame
    kernels: pd.DataFrame
    memcpy: pd.DataFrame
    memset: pd.DataFrame
    syncs: pd.DataFrame
    gpu_annotations: pd.DataFrame
    memory: pd.DataFrame
    flows: pd.DataFrame
    counters: pd.DataFrame
    other: pd.DataFrame
    steps: pd.DataFrame
    devices: pd.DataFrame
    metadata: dict[str, Any]
    anomalies: dict[str, Any] = field(default_factory=dict)

    TABLES = ("ops", "python", "runtime", "kernels", "memcpy", "memset", "syncs", "gpu_annotations",
              "memory", "flows", "counters", "other", "steps")

    def __getstate__(self) -> dict[str, Any]:
        # Views cache their results (and locks) on the model, and the memory accounting what it
        # measured (object ids among them: meaningless in another process); a model pickled to
        # another process (a worker of a parallel job) holds only data, its fields.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def nbytes(self) -> int:
        """Approximate memory held by the tables, in bytes."""
        return int(sum(getattr(self, name).memory_usage(index=True, deep=False).sum()
                       for name in self.TABLES + ("threads", "devices")))

    @property
    def distributed(self) -> dict[str, Any]:
        info = self.metadata.get("distributedInfo")
        return info if isinstance(info, dict) else {}

    @property
    def device_type(self) -> str:
        """"CUDA", "ROCm", another accelerator's runtime name, or "CPU"."""
        if any(str(n).startswith("hip") for n in self.runtime["name"].unique()):  # HIP's calls: an AMD GPU
            return "ROCm"
        # A backend's own runtime category (`mtia_runtime`) names the device; CUDA's and the generic ones do not.
        cats = {str(c) for c in self.runtime["cat"].unique()} - {"", *CUDA.runtime_categories}
        if cats:
            return sorted(cats)[0].rsplit("_", 1)[0].upper()
        # CUDA runtime calls with no device activity recorded (CUPTI lost it, or the GPU ran
        # nothing in the window) are still a CUDA trace, not a CPU one.
        return "CUDA" if len(self.kernels) or len(self.memcpy) or len(self.memset) or len(self.runtime) else "CPU"

    def span_us(self) -> tuple[float, float]:
        """(start, end) of all timed events, relative to the origin; (0, 0) when empty."""
        starts, ends = [], []
        for name in ("ops", "python", "runtime", "kernels", "memcpy", "memset", "gpu_annotations"):
            table = getattr(self, name)
            if len(table):
                starts.append(table["ts"].min())
                ends.append((table["ts"] + table["dur"]).max())
        if len(self.memory):
            starts.append(self.memory["ts"].min())
            ends.append(self.memory["ts"].max())
        if not starts:
            return 0.0, 0.0
        return float(min(starts)), float(max(ends))
