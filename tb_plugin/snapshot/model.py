"""The columnar model of one memory snapshot.

Tables (pandas), ids are row positions, -1 means "absent":

- `entries`: one row per action of `device_traces`, devices one after another, each device's
  in its recorded order: entry (row number), device, action (categorical over `ACTIONS` and
  any other met), addr, size, stream, time_us (the allocator's clock, microseconds since the
  epoch, NaN when not recorded), stack, pool (into `pools`, -1 when the entry names none),
  device_free (bytes free on the device, `oom` entries only, else -1), allocated and
  reserved (bytes allocated and reserved on the entry's device after it: `lifetimes.py`);
- `segments`: the allocator's segments when the snapshot was taken: device, address,
  total_size, stream, segment_type ("small"/"large"), pool, allocated_size, active_size,
  requested_size;
- `blocks`: their blocks: segment (row of `segments`), device, address, size,
  requested_size (what the caller asked for; `size` is rounded up), state (categorical over
  `BLOCK_STATES`), stack;
- `frames`: distinct stack frames: filename, line, name;
- `stack_frames`: each distinct stack as its frames, innermost (depth 0) first: stack, depth,
  frame (row of `frames`);
- `pools`: pool (code), pool_id (the allocator's `(a, b)` id as "a,b"; "0,0" is the default
  pool, any other a private pool: a CUDA graph's, a `MemPool`'s, FSDP's);
- `allocations`: one row per allocation with its lifetime (`lifetimes.allocations_table`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the tables' type only: importing the model loads no pandas
    import pandas as pd
    import numpy as np
    import numpy.typing as npt

ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot")
BLOCK_STATES = ("active_allocated", "active_pending_free", "active_awaiting_free", "inactive")
TABLES = ("entries", "segments", "blocks", "frames", "stack_frames", "pools", "allocations")
DEFAULT_POOL_ID = "0,0"


def actions_in(action: pd.Series, *names: str) -> npt.NDArray[np.bool_]:
    """Boolean mask of the rows of the categorical `action` that are one of `names` (on the
    codes: no text per entry)."""
    import numpy as np

    wanted = [i for i, c in enumerate(action.cat.categories) if c in names]
    return np.isin(action.cat.codes.to_numpy(), wanted)


def held_blocks(blocks: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Mask of the blocks in use when the snapshot was taken (allocated, or freed but awaiting a stream)."""
    import numpy as np

    state = blocks["state"]
    held = [i for i, c in enumerate(state.cat.categories) if c.startswith("active_")]
    return np.isin(state.cat.codes.to_numpy(), held)


@dataclass
class SnapshotModel:
    """One snapshot as columnar tables (module docstring)."""

    entries: pd.DataFrame
    segments: pd.DataFrame
    blocks: pd.DataFrame
    frames: pd.DataFrame
    stack_frames: pd.DataFrame
    pools: pd.DataFrame
    allocations: pd.DataFrame
    device_count: int
    allocator_settings: dict = field(default_factory=dict)
    anomalies: dict[str, int] = field(default_factory=dict)  # {name: count} (`decode.ANOMALIES`)

    def devices(self) -> list[int]:
        """Devices with a trace or a segment, in order (tables never change: found once)."""
        import numpy as np

        known = self.__dict__.get("_devices")
        if known is None:
            known = self.__dict__["_devices"] = sorted(
                int(d) for d in np.union1d(self.entries["device"].unique(), self.segments["device"].unique()))
        return list(known)


@dataclass
class SnapshotParts:
    """A `SnapshotModel` in the form the disk cache stores (`cache.ModelCache.put_summary`):
    tables without categorical columns (their text as plain strings), settings and anomalies as
    JSON text."""

    entries: pd.DataFrame
    segments: pd.DataFrame
    blocks: pd.DataFrame
    frames: pd.DataFrame
    stack_frames: pd.DataFrame
    pools: pd.DataFrame
    allocations: pd.DataFrame
    device_count: int
    allocator_settings: str
    anomalies: str


_CATEGORIES = {("entries", "action"): ACTIONS, ("segments", "segment_type"): ("small", "large"),
               ("blocks", "state"): BLOCK_STATES}


def to_parts(model: SnapshotModel) -> SnapshotParts:
    import json

    tables = {}
    for name in TABLES:
        frame = getattr(model, name).copy(deep=False)
        for (table, column) in _CATEGORIES:
            if table == name:
                frame[column] = frame[column].astype(object)
        tables[name] = frame
    return SnapshotParts(**tables, device_count=model.device_count,
                         allocator_settings=json.dumps(model.allocator_settings), anomalies=json.dumps(model.anomalies))


def from_parts(parts: SnapshotParts) -> SnapshotModel:
    import json

    import pandas as pd

    tables = {name: getattr(parts, name) for name in TABLES}
    for (table, column), known in _CATEGORIES.items():
        values = tables[table][column].astype(object)
        categories = list(known) + [v for v in pd.unique(values) if v not in known and isinstance(v, str)]
        tables[table][column] = pd.Categorical(values, categories=categories)
    return SnapshotModel(**tables, device_count=int(parts.device_count),
                         allocator_settings=json.loads(parts.allocator_settings), anomalies=json.loads(parts.anomalies))


def model_bytes(model: SnapshotModel) -> int:
    """Memory the tables take (text columns counted deep once, as they never change)."""
    known = model.__dict__.get("_tables_bytes")
    if known is None:
        known = model.__dict__["_tables_bytes"] = int(sum(getattr(model, n).memory_usage(deep=True).sum() for n in TABLES))
    return known
