"""The Python API of CUDA memory snapshots: `load_snapshot` one file into a `MemorySnapshot`.

    snap = tb_plugin.load_snapshot("rank0.pickle")   # or .pickle.gz, a JSON snapshot, s3://...
    snap.peak()            # one row per device: peak allocated bytes, its time and entry
    snap.oom()             # the moment memory ran out (or the peak), per device
    snap.timeline(0)       # the Active Memory Timeline at the zoom asked for
    snap.blame(0)          # live bytes by the user's own frame, at the snapshot or any entry

Every view is a function of `tb_plugin.views.memory_snapshot` (definitions there).
"""

import gc
import os
from collections.abc import Callable
from typing import Any

import pandas as pd

from ..store.budget import DEFAULT_MAX_MEMORY_BYTES
from ..errors import NotFoundError, TraceError
from ..snapshot.decode import ANOMALIES, decode_snapshot, read_snapshot_dict
from ..snapshot.model import SnapshotModel, from_parts, to_parts
from ..store.storage import Storage, TraceBytes, open_single
from ..views import memory_snapshot as views, snapshot_series
from ..views.common import answer_route

# What reading a snapshot may take at its peak per byte of (inflated) file: the file and the
# unpickled dicts (`pickle.loads` alone peaks at 5.4x the file); the tables are built while the
# dicts are freed, so the load peaks there too: 5.5x measured by `benchmarks/snapshot_bench.py`
# on 5 M entries (6.5x while the dicts and the tables were held together), with room for
# snapshots whose entries carry more of their own objects.
PEAK_BYTES_PER_SNAPSHOT_BYTE = 6


def snapshot_limit(max_memory_bytes: int) -> int:
    """The largest (inflated) snapshot file that loads within `max_memory_bytes`."""
    return max_memory_bytes // PEAK_BYTES_PER_SNAPSHOT_BYTE


class MemorySnapshot:
    """One memory snapshot: its `model` (tables) and the views over it."""

    def __init__(self, model: SnapshotModel, source: str) -> None:
        self.model = model
        self.source = source

    def __repr__(self) -> str:
        return f"MemorySnapshot({self.source!r}, devices={self.devices()}, entries={len(self.model.entries)})"

    def devices(self) -> list[int]:
        return self.model.devices()

    def _device(self, device: int | None) -> int:
        """`device`, or the first device with a trace or a segment when None."""
        if device is not None:
            return device
        devices = self.devices()
        if not devices:  # no path in the reason: the server replies with it
            raise NotFoundError("the snapshot holds no device's trace or segments")
        return devices[0]

    def info(self) -> dict[str, Any]:
        """Devices, entry / segment / stack counts, the allocator's settings and the anomalies."""
        m = self.model
        return {"source": self.source, "devices": self.devices(), "entries": len(m.entries),
                "segments": len(m.segments), "blocks": len(m.blocks), "stacks": int(m.stack_frames["stack"].nunique()),
                "frames": len(m.frames), "private_pools": [p for p in m.pools["pool_id"] if p != "0,0"],
                "allocator_settings": m.allocator_settings, "anomalies": self.anomalies()}

    def anomalies(self) -> list[dict[str, Any]]:
        """What the file held out of range and how it was read: [{anomaly, meaning, count}]
        (`snapshot.decode.ANOMALIES`); empty for a clean snapshot."""
        return [{"anomaly": name, "meaning": ANOMALIES[name], "count": count}
                for name, count in self.model.anomalies.items()]

    def answer(self, route: str, **params: Any) -> Any:
        """The answer of the declared snapshot route `route` (e.g. "snapshot_blame") with its
        `params`: the table, or the object of tables, the HTTP API serves for it
        (`views.common.answer_route`)."""
        return answer_route(route, views.SNAPSHOT, (self.model,), params)

    def peak(self) -> pd.DataFrame:
        return views.peak(self.model)

    def oom(self) -> pd.DataFrame:
        return views.oom(self.model)

    def timeline(self, device: int | None = None, start_us: float | None = None, end_us: float | None = None, bins: int = 1000,
                 bands: int = views.DEFAULT_TIMELINE_BANDS) -> views.SnapshotTimeline:
        return views.timeline(self.model, self._device(device), start_us, end_us, bins, bands)

    def live(self, device: int | None = None, entry: int | None = None, top: int | None = None) -> pd.DataFrame:
        return views.live(self.model, self._device(device), entry, top)

    def blame(self, device: int | None = None, entry: int | None = None, by: str = "user_frame") -> pd.DataFrame:
        return views.blame(self.model, self._device(device), entry, by)

    def categories(self, device: int | None = None, entry: int | None = None) -> pd.DataFrame:
        return views.categories(self.model, self._device(device), entry)

    def flame(self, device: int | None = None, entry: int | None = None, collapse_library: bool = True) -> pd.DataFrame:
        return views.flame(self.model, self._device(device), entry, collapse_library)

    def state(self, device: int | None = None, entry: int | None = None) -> pd.DataFrame:
        return views.state(self.model, self._device(device), entry)

    def index(self) -> None:
        """Build now what the timeline's first answer would otherwise build (the block maxima
        of each device's allocated and reserved bytes, each stack's category and user frame;
        the lifetimes themselves are made when the snapshot is decoded): the server does it
        on a background thread right after the load."""
        for device in self.devices():
            views.prepare_timeline(self.model, device)

    def allocations(self) -> pd.DataFrame:
        """One row per allocation with its lifetime (`views.snapshot_series.allocations`)."""
        return snapshot_series.allocations(self.model)


def cached_snapshot(cache: Any, source: str, identity: dict) -> MemorySnapshot | None:
    """The snapshot the disk cache `cache` (a `cache.ModelCache`) holds for the file `source`
    whose identity is `identity` (its tables as `views.memory_snapshot.SNAPSHOT_PARTS`), or
    None."""
    parts = cache.get_summary(cache.summary_key(source, views.SNAPSHOT_PARTS), identity, views.SNAPSHOT_PARTS)
    return None if parts is None else MemorySnapshot(from_parts(parts), source)


def cache_snapshot(cache: Any, source: str, identity: dict, snapshot: MemorySnapshot) -> bool:
    """Store `snapshot`, read from the file `source` whose identity is `identity`, in the disk
    cache `cache`, for `cached_snapshot`; whether it was written."""
    return cache.put_summary(cache.summary_key(source, views.SNAPSHOT_PARTS), identity, to_parts(snapshot.model),
                             views.SNAPSHOT_PARTS, source)


def snapshot_through_cache(cache: Any, storage: Storage, name: str,
                           decode: Callable[[], MemorySnapshot]) -> tuple[MemorySnapshot, dict | None]:
    """(the snapshot of the file `name` of `storage`, the identity its entry in the disk cache
    `cache` is of, or None): read from the cache where it holds the file as it is, else
    `decode()`d and stored there, unless the file changed while it was read. The server's
    loader and `runs.Run` read snapshots through it."""
    display, identity = storage.display(name), storage.identity(name)
    cached = cached_snapshot(cache, display, identity)
    if cached is not None:
        return cached, identity
    snapshot = decode()
    if storage.identity(name) != identity:  # changed while it was read: not stored
        return snapshot, None
    cache_snapshot(cache, display, identity, snapshot)
    return snapshot, identity


def snapshot_from_bytes(stored: TraceBytes, source: str, max_memory_bytes: int,
                        admit: Callable[[int], None] | None = None) -> MemorySnapshot:
    """A `MemorySnapshot` of a snapshot file's (inflated) bytes `stored`; `source` names it in
    errors. What the pickle's opcodes and the tables would take is checked against
    `max_memory_bytes` before either is made (`snapshot.scan`, `snapshot.decode`), the
    tables' share told to `admit`. The bytes are handed back (`TraceBytes.release`) once
    unpickled, and the entry dicts freed as they become columns: the decode's peak stays
    below the unpickling's."""
    # The collector is paused while the millions of dicts are made and read: they all stay
    # alive until the tables are built, so each pass over them would find nothing to free.
    collecting = gc.isenabled()
    gc.disable()
    try:
        snapshot = read_snapshot_dict(stored.data, source, max_memory_bytes)
        stored.release()
        model = decode_snapshot(snapshot, source, consume=True, max_memory_bytes=max_memory_bytes, admit=admit)
        del snapshot
    finally:
        if collecting:
            gc.enable()
    return MemorySnapshot(model, source)


def load_snapshot(path_or_url: str | os.PathLike[str], max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
                  cache_dir: str | os.PathLike[str] | None = None) -> MemorySnapshot:
    """Load one memory snapshot (`torch.cuda.memory._dump_snapshot`'s pickle, gzipped or not,
    or a JSON snapshot; local path or fsspec URL).

    With `cache_dir` (a local path or fsspec URL of a disk cache), its tables are read from it
    where it holds the file as it is, else decoded and stored there: the second load of an
    unchanged snapshot reads the cache, as TensorBoard does (`snapshot_through_cache`), and as
    `tb_plugin.load(path, cache_dir=)` does for a trace.

    Raises
    ------
    TraceError
        When the file cannot be read, is not a memory snapshot, holds anything but plain data
        (a pickle naming any class, function or extension code is refused before it runs), or
        would take more than `max_memory_bytes` (the server's default budget) to read or to
        build its tables (its opcodes and entries are counted first, shared references at each
        place); the message names the file and the reason. Values out of range are read as
        anomalies instead (`MemorySnapshot.anomalies`).
    """
    storage, name = open_single(path_or_url)
    if cache_dir is None:
        return read_snapshot(storage, name, max_memory_bytes)
    from ..store.cache import ModelCache  # imported only then, as `tb_plugin.load` does

    return snapshot_through_cache(ModelCache(cache_dir), storage, name,
                                  lambda: read_snapshot(storage, name, max_memory_bytes))[0]


def read_snapshot(storage: Storage, name: str, max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES) -> MemorySnapshot:
    """The memory snapshot of the file `name` of `storage` (`load_snapshot`, whose errors it raises)."""
    display = storage.display(name)
    limit = snapshot_limit(max_memory_bytes)
    stored = storage.read_trace(name, limit=limit)
    if len(stored.data) > limit:
        raise TraceError(display, f"too large to load: {len(stored.data) >> 20} MiB would take more than the memory budget "
                                  f"({max_memory_bytes >> 20} MiB) to read")
    return snapshot_from_bytes(stored, display, max_memory_bytes)
