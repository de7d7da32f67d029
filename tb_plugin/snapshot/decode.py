"""A memory snapshot's bytes -> the snapshot dict (read safely) -> columnar tables.

The format is documented in `torch/cuda/memory.py` (`_snapshot`): a dict with `segments`
(the allocator's state when the snapshot was taken: each segment with its blocks) and
`device_traces` (one list per device of the allocator's recent actions), plus
`allocator_settings` and `external_annotations` in newer versions. `_dump_snapshot` pickles
it; newer PyTorch can also write it as JSON.

Safety: a pickle is a program. The unpickler here refuses every global (`find_class`) and
every persistent id, so no class, function or module is ever looked up: a snapshot holds
only dicts, lists, tuples, strings and numbers, which need none, and a planted payload
(`os.system` by REDUCE, any `__reduce__`) stops at its first global with a `TraceError`,
having run nothing. Before it runs, `scan.check_pickle` walks the opcodes within the memory
budget (memo slots, declared lengths, extension codes). What comes out is then checked to be
the documented shape, and its entries and blocks counted against the budget (a shared
reference at each place), before any table is made; numbers out of range are anomalies
(`ANOMALIES`), not failures.

Speed: the pickle is decoded by CPython's C unpickler (with the garbage collector paused: the
millions of dicts it makes are all live), reading a memory-mapped file in place, and each
table column is taken from the entry dicts with C-level `map(itemgetter(...))`, not a Python
loop per entry, a slice of entries at a time (freed as they are read when loading a file).
Stacks are interned by the identity of the frame objects first (torch's pickle shares each
distinct frame dict through the pickle memo), each entry's list hashed with numpy from its
frames' codes and checked against the stack stored under that hash (the few lists whose hash
is another stack's are interned by their frames instead), then by content.
Each allocation's lifetime is worked out here too (`lifetimes.py`), once per decode.
"""

import gc
import io
import math
import pickle
import sys
from collections.abc import Callable, Collection, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, NoReturn, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..errors import TraceError
from .lifetimes import allocations_table, running_bytes
from .model import ACTIONS, BLOCK_STATES, SnapshotModel
from .scan import check_pickle
from .sniff import PROTO_OPCODE, PICKLE_PROTOCOLS, looks_like_json_snapshot


class _Refused(pickle.UnpicklingError):
    """What the pickle asked for and was refused."""


class _NoGlobalsUnpickler(pickle.Unpickler):
    """The C unpickler with every global and persistent id refused (module docstring)."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise _Refused(
            f"the pickle asks for the global {module}.{name}: refused, since a memory snapshot holds only "
            "dicts, lists, strings and numbers (nothing in it was run)")

    def persistent_load(self, pid: object) -> NoReturn:
        raise _Refused("the pickle holds a persistent id: refused (nothing in it was run)")


class _ViewReader(io.RawIOBase):
    """Bytes-like `data` as a file read in place: `io.BytesIO` would copy a memory mapping's
    view whole (the file once more at the unpickling's peak)."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        super().__init__()
        self._view = memoryview(data).cast("B")
        self._at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), len(self._view) - self._at)
        buffer[:n] = self._view[self._at:self._at + n]
        self._at += n
        return n


def read_snapshot_dict(data: bytes | bytearray | memoryview, path: str, max_memory_bytes: int) -> dict[str, Any]:
    """The snapshot dict of the (inflated) bytes `data` of the file `path`: a pickle of
    protocol 2-5 read by `_NoGlobalsUnpickler` once `scan.check_pickle` has walked its
    opcodes within `max_memory_bytes`, or a JSON snapshot. Anything else, or a payload, is a
    `TraceError` naming the file."""
    head = bytes(data[:2])
    if head[:1] == bytes([PROTO_OPCODE]):
        if head[1:2] and head[1] not in PICKLE_PROTOCOLS:
            raise TraceError(path, f"a pickle of protocol {head[1]}: memory snapshots are read in protocols 2-5")
        check_pickle(data, path, max_memory_bytes)
        collecting = gc.isenabled()
        gc.disable()
        try:
            snapshot = _NoGlobalsUnpickler(io.BufferedReader(_ViewReader(data), 1 << 20)).load()
        except _Refused as exc:
            raise TraceError(path, f"not a memory snapshot: {exc}") from None
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError, MemoryError,
                RecursionError, OverflowError) as exc:
            raise TraceError(path, f"the pickle is truncated or corrupt ({type(exc).__name__}: {exc})") from None
        finally:
            if collecting:
                gc.enable()
    elif looks_like_json_snapshot(data):
        try:
            import orjson

            snapshot = orjson.loads(data)
        except (ValueError, TypeError, RecursionError) as exc:
            raise TraceError(path, f"the JSON snapshot is truncated or corrupt ({exc})") from None
    else:
        raise TraceError(path, "not a memory snapshot: neither a pickle (protocol 2-5) nor a JSON snapshot")
    _check_shape(snapshot, path)
    return snapshot


def _check_shape(snapshot: object, path: str) -> None:
    if not isinstance(snapshot, dict):
        raise TraceError(path, f"not a memory snapshot: it holds a {type(snapshot).__name__}, not a dict")
    if "segments" not in snapshot and "device_traces" not in snapshot:
        raise TraceError(path, "not a memory snapshot: the dict has neither 'segments' nor 'device_traces'")
    for key in ("segments", "device_traces"):
        if not isinstance(snapshot.get(key, []), list):
            raise TraceError(path, f"not a memory snapshot: '{key}' is a {type(snapshot[key]).__name__}, not a list")
    for device, entries in enumerate(snapshot.get("device_traces", [])):
        if not isinstance(entries, list) or (entries and set(map(type, entries)) != {dict}):
            raise TraceError(path, f"not a memory snapshot: device_traces[{device}] is not a list of dicts")
    if not all(type(s) is dict and isinstance(s.get("blocks", []), list) for s in snapshot.get("segments", [])):
        raise TraceError(path, "not a memory snapshot: 'segments' is not a list of dicts with lists of blocks")


# Distinct frame lists hashed at a time: their frames' ids are arrays of this many lists' frames.
_HASH_LISTS = 1 << 16
# Multipliers of a stack's frames by depth in its hash (odd 64-bit numbers: no depth is lost).
_DEPTH_MULTIPLIERS = np.random.default_rng(29).integers(1, 1 << 62, size=256, dtype=np.int64).astype(np.uint64) * 2 + 1


def _ranges(starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The positions start, start + 1, ... start + length - 1 of each (start, length), concatenated."""
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))


def _stack_hashes(frame: npt.NDArray[np.int64], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) \
        -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each list of frame codes (the `lengths[i]` codes from `starts[i]` in
    `frame`, laid end to end): its codes times a multiplier per depth, summed, mixed with its
    length. Equal lists hash equal; different ones rarely (odds about stacks^2 / 2^65)."""
    if int(lengths.max(initial=0)) > len(_DEPTH_MULTIPLIERS):
        raise ValueError(f"a stack of {int(lengths.max())} frames: at most {len(_DEPTH_MULTIPLIERS)} are read")
    total = len(frame)
    depth = np.arange(total) - np.repeat(starts, lengths)
    terms = (frame.astype(np.uint64) + np.uint64(1)) * _DEPTH_MULTIPLIERS[depth]
    nonempty = lengths > 0
    hashes = np.zeros(len(lengths), dtype=np.uint64)
    hashes[nonempty] = np.add.reduceat(terms, starts[nonempty]) if total else []
    return hashes ^ lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)


def _unequal(a: npt.NDArray[np.int64], a_starts: npt.NDArray[np.int64], a_lengths: npt.NDArray[np.int64],
             b: npt.NDArray[np.int64], b_starts: npt.NDArray[np.int64], b_lengths: npt.NDArray[np.int64]) \
        -> npt.NDArray[np.bool_]:
    """Per pair i: whether list i of `a` differs from list i of `b` (each list the `lengths[i]`
    codes from `starts[i]` in its array)."""
    out = a_lengths != b_lengths
    compared = np.where(out, 0, a_lengths)
    owner = np.repeat(np.arange(len(compared)), compared)
    out[owner[a[_ranges(a_starts, compared)] != b[_ranges(b_starts, compared)]]] = True
    return out


class _Interner:
    """Frames and stacks met while decoding, each stored once (module docstring: by object
    identity first, by content at the end). A list of frames is hashed with numpy
    (`_stack_hashes`) and checked frame by frame against the one stored under its hash, so
    two stacks are one only when they are equal; a list whose hash is another stack's is
    interned by its frames instead (`_by_frames`). A stack may so get two codes (one by hash,
    one by frames): `tables` merges codes of equal content."""

    def __init__(self) -> None:
        self.frame_objects: list[dict[str, Any]] = []  # distinct frame dicts, by identity (kept: their ids stay theirs)
        self._frame_by_id: dict[int, int] = {}
        self._stack_by_hash: dict[int, int] = {}  # hash -> stack code (-1: the empty list)
        self._stack_by_frames: dict[tuple[int, ...], int] = {}  # frame codes -> stack code, for lists whose hash is another stack's
        # Each stack's frames (codes into frame_objects, innermost first): stack code -> its
        # start and length in one array of them.
        self._stack_starts = np.empty(0, dtype=np.int64)
        self._stack_lengths = np.empty(0, dtype=np.int64)
        self._stack_frame_codes = np.empty(0, dtype=np.int64)

    @property
    def stacks(self) -> list[tuple[int, ...]]:
        frames = self._stack_frame_codes.tolist()
        return [tuple(frames[start:start + length]) for start, length in zip(self._stack_starts.tolist(), self._stack_lengths.tolist())]

    def stack_codes(self, frame_lists: Sequence[Any]) -> npt.NDArray[np.int64]:
        """One stack code per list of frame dicts (-1 for an empty or missing one). Lists
        shared between entries (through the pickle memo) are looked at once."""
        if not frame_lists:
            return np.empty(0, dtype=np.int64)
        labels, unique_ids = pd.factorize(np.fromiter(map(id, frame_lists), dtype=np.int64, count=len(frame_lists)))
        first = np.zeros(len(unique_ids), dtype=np.int64)
        first[labels[::-1]] = np.arange(len(labels) - 1, -1, -1)  # an entry holding each distinct list
        distinct = list(map(frame_lists.__getitem__, first.tolist()))
        codes = np.concatenate([self._hashed(distinct[lo:lo + _HASH_LISTS]) for lo in range(0, len(distinct), _HASH_LISTS)])
        return codes[labels]

    def _hashed(self, lists: Sequence[Sequence[dict[str, Any]]]) -> npt.NDArray[np.int64]:
        """Stack codes of `lists` (distinct list objects), interning the new ones."""
        try:
            lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        except TypeError:  # None where an entry has no frames
            lists = [frames or () for frames in lists]
            lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        total = int(lengths.sum())
        ids = np.fromiter(map(id, chain.from_iterable(lists)), dtype=np.int64, count=total)
        frame = self._frame_codes(ids, lists, lengths)
        starts = np.cumsum(lengths) - lengths
        groups, group_hashes = pd.factorize(_stack_hashes(frame, starts, lengths))
        # One list per hash is looked up; the others of that hash that differ from it collided.
        representative = np.zeros(len(group_hashes), dtype=np.int64)
        representative[groups[::-1]] = np.arange(len(groups) - 1, -1, -1)
        rep_of = representative[groups]
        collided = _unequal(frame, starts, lengths, frame, starts[rep_of], lengths[rep_of])
        # Look the hashes up; a hash stored for another stack collided too (for every list of it).
        keys = group_hashes.tolist()
        codes = np.fromiter(map(self._stack_by_hash.get, keys, repeat(-2)), dtype=np.int64, count=len(keys))
        rep_lengths = lengths[representative]
        rep_starts = starts[representative]
        known = codes >= 0
        stale = (codes == -1) & (rep_lengths > 0)
        stale[known] = _unequal(frame, rep_starts[known], rep_lengths[known], self._stack_frame_codes,
                                self._stack_starts[codes[known]], self._stack_lengths[codes[known]])
        # The new hashes get codes (-1 for the empty list) and are stored.
        new = np.flatnonzero((codes == -2) & (rep_lengths > 0))
        codes[(codes == -2) & (rep_lengths == 0)] = -1
        codes[new] = self._stored(rep_lengths[new], frame[_ranges(rep_starts[new], rep_lengths[new])])
        self._stack_by_hash.update(zip([keys[i] for i in new.tolist()], codes[new].tolist()))
        self._stack_by_hash.update((keys[i], -1) for i in np.flatnonzero(rep_lengths == 0).tolist())
        out = codes[groups]
        collided |= stale[groups]
        if collided.any():
            which = np.flatnonzero(collided)
            out[which] = self._by_frames(frame, starts[which], lengths[which])
        return out

    def _stored(self, lengths: npt.NDArray[np.int64], frames: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Codes of new stacks, `lengths` long, of `frames` (their codes laid end to end)."""
        first = len(self._stack_lengths)
        self._stack_starts = np.r_[self._stack_starts, len(self._stack_frame_codes) + np.cumsum(lengths) - lengths]
        self._stack_lengths = np.r_[self._stack_lengths, lengths]
        self._stack_frame_codes = np.r_[self._stack_frame_codes, frames]
        return first + np.arange(len(lengths), dtype=np.int64)

    def _by_frames(self, frame: npt.NDArray[np.int64], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) \
            -> npt.NDArray[np.int64]:
        """Codes of the lists (`lengths` codes from `starts` in `frame`) whose hash is another
        stack's, interned by their frames. A loop over those lists only: collisions are rare
        (see `_stack_hashes`), so it stays correct without costing the common case."""
        out = np.empty(len(lengths), dtype=np.int64)
        for i, (start, length) in enumerate(zip(starts.tolist(), lengths.tolist())):
            key = tuple(frame[start:start + length].tolist())
            code = self._stack_by_frames.get(key)
            if code is None:
                code = int(self._stored(np.array([length]), np.array(key, dtype=np.int64))[0]) if key else -1
                self._stack_by_frames[key] = code
            out[i] = code
        return out

    def _frame_codes(self, ids: npt.NDArray[np.int64], lists: Sequence[Sequence[dict[str, Any]]],
                     lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Codes of the frames whose ids are `ids` (the frames of `lists`, in order), new ones added."""
        local, unique = pd.factorize(ids)
        known = self._frame_by_id
        first = np.zeros(len(unique), dtype=np.int64)
        first[local[::-1]] = np.arange(len(local) - 1, -1, -1)
        ends = np.cumsum(lengths)
        idents = unique.tolist()
        codes = np.fromiter(map(known.get, idents, repeat(-1)), dtype=np.int64, count=len(idents))
        for i in np.flatnonzero(codes < 0).tolist():  # frames not met before: a few thousand in all
            at = int(first[i])
            row = int(np.searchsorted(ends, at, side="right"))
            codes[i] = known[idents[i]] = len(self.frame_objects)
            self.frame_objects.append(lists[row][at - (int(ends[row]) - int(lengths[row]))])
        return codes[local]

    def tables(self, path: str) -> tuple[pd.DataFrame, pd.DataFrame, npt.NDArray[np.int64]]:
        """(frames, stack_frames, remap of stack codes to content-unique ones)."""
        try:
            triples = [(str(f.get("filename", "")), int(f.get("line", 0)), str(f.get("name", "")))
                       for f in self.frame_objects]
        except (AttributeError, TypeError, ValueError) as exc:
            raise TraceError(path, f"not a memory snapshot: a stack frame is not {{filename, line, name}} ({exc})") from None
        # the distinct frames and stacks: a pandas Index or array, or an empty list
        unique_frames: Collection[Any]
        unique_stacks: Collection[Any]
        frame_codes, unique_frames = pd.factorize(pd.Series(triples, dtype=object)) if triples else (np.empty(0, np.int64), [])
        content = [tuple(frame_codes[list(stack)]) for stack in self.stacks]
        stack_codes, unique_stacks = pd.factorize(pd.Series(content, dtype=object)) if content else (np.empty(0, np.int64), [])
        frames = pd.DataFrame({
            "filename": pd.Series([t[0] for t in unique_frames], dtype=object),
            "line": np.array([t[1] for t in unique_frames], dtype=np.int64),
            "name": pd.Series([t[2] for t in unique_frames], dtype=object),
        })
        lengths = np.array([len(s) for s in unique_stacks], dtype=np.int64)
        stack_frames = pd.DataFrame({
            "stack": np.repeat(np.arange(len(unique_stacks), dtype=np.int64), lengths),
            "depth": _ranges(np.zeros(len(lengths), np.int64), lengths),
            "frame": np.fromiter((f for s in unique_stacks for f in s), dtype=np.int64, count=int(lengths.sum())),
        })
        remap = np.append(np.asarray(stack_codes, dtype=np.int64), -1)  # code -1 stays -1
        return frames, stack_frames, remap


def _column(records: Sequence[dict[str, Any]], key: str, default: float, dtype: type[np.generic]) \
        -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_] | None]:
    """(`records[i][key]` for every record as a numpy array, `default` where a record lacks it
    or holds None; the mask of the records whose number lies beyond the dtype (beyond 64
    bits, an infinite time), which hold `default` instead, or None where none does). A value
    that is no number at all is a `ValueError`."""
    try:  # the common case, at C speed: every record has the key, with a number in range
        values = np.fromiter(map(itemgetter(key), records), dtype=dtype, count=len(records))
    except (KeyError, TypeError, ValueError, OverflowError):
        raw = [default if v is None else v for v in map(dict.get, records, repeat(key))]
        beyond = [type(v) in (int, float) and not _fits(v, dtype) for v in raw]
        try:
            values = np.array([default if out else v for v, out in zip(raw, beyond)], dtype=dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"'{key}' holds a value that is not a {np.dtype(dtype).name} ({exc})") from None
        if any(beyond):
            return values, np.array(beyond, dtype=bool)
    if values.dtype.kind == "f":
        infinite = np.isinf(values)
        if infinite.any():
            values[infinite] = default
            return values, infinite
    return values, None


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _fits(value: float, dtype: type[np.generic]) -> bool:
    """Whether the number `value` is one of `dtype`'s (finite, within 64 bits)."""
    if dtype is np.float64:
        return abs(value) <= sys.float_info.max  # Python's own comparison: exact for any int
    return value == value and _INT64[0] <= value <= _INT64[1]


def _beyond(*masks: npt.NDArray[np.bool_] | None) -> npt.NDArray[np.bool_] | None:
    """The union of `_column`'s masks of values out of range (None for none)."""
    present = [m for m in masks if m is not None]
    return np.logical_or.reduce(present) if present else None


def _optional_list(records: Sequence[dict[str, Any]], key: str) -> list[Any]:
    try:
        return list(map(itemgetter(key), records))
    except KeyError:
        return list(map(dict.get, records, repeat(key)))


def _pool_codes(values: Sequence[Any], pools: dict[str, int]) -> npt.NDArray[np.int64]:
    """Codes into `pools` (a dict {pool id as text: code}) of each entry's pool id, -1 without one."""
    out = np.full(len(values), -1, dtype=np.int64)
    if values.count(None) == len(values):  # entries of versions that name no pool
        return out
    for i, value in enumerate(values):
        if value is not None:
            text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
            out[i] = pools.setdefault(text, len(pools))
    return out


def _categorical(values: Sequence[str], categories: Sequence[str]) -> pd.Categorical:
    """Strings as a categorical over `categories`, followed by any others met (in order)."""
    codes = {c: i for i, c in enumerate(categories)}
    for value in dict.fromkeys(values):
        codes.setdefault(value, len(codes))
    if not all(isinstance(c, str) for c in codes):
        raise ValueError(f"a name that is not text among {list(codes)[:10]}")
    return pd.Categorical.from_codes(np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=len(values)),
                                     categories=cast(pd.Index, list(codes)))  # pandas-stubs want an Index; pandas takes a list


# What a snapshot's tables take per entry of its trace and per segment or block, with room
# (the entries' columns, the allocations made of them, the Active Memory Timeline's index
# built right after a load): measured by `model_bytes` on `benchmarks/snapshot_bench.py`'s
# snapshots, 150-170 bytes per entry. The count is made before any table is: an entry
# the pickle shares between places (2.5 M references to one dict) counts at each.
TABLE_BYTES_PER_ENTRY = 256
TABLE_BYTES_PER_BLOCK = 160
# Devices with a trace or a segment a snapshot may have: a snapshot is of one process, which
# sees the GPUs of one machine; each device costs the views a pass of its own.
MAX_DEVICES = 256
# What of the allocator's settings is kept (they are shown, never interpreted).
_SETTINGS_DEPTH, _SETTINGS_ITEMS, _SETTINGS_TEXT = 16, 10_000, 4096

# The anomalies a snapshot is read with: {name: meaning}. Each is counted, never fatal.
ANOMALIES = {
    "entry_out_of_range": "trace entries left out: an address, size, stream or free byte count beyond 64 bits, "
                          "or a negative size",
    "time_out_of_range": "trace entries whose time is infinite or beyond 64 bits, read as not recorded",
    "time_backward": "trace entries recorded earlier than an entry before them on their device (kept in "
                     "recorded order)",
    "segment_out_of_range": "segments left out with their blocks: a device, address or size beyond 64 bits, a "
                            "negative device or size",
    "block_out_of_range": "blocks left out: an address or size beyond 64 bits, or a negative size",
    "settings_cut": "allocator settings nested deeper than 16 levels, longer than 10,000 items or 4,096 "
                    "characters, shown cut",
}


def decode_snapshot(snapshot: dict[str, Any], path: str, consume: bool = False, max_memory_bytes: int | None = None,
                    admit: Callable[[int], object] | None = None) -> SnapshotModel:
    """The `SnapshotModel` of a snapshot dict (`read_snapshot_dict`), refused with a
    `TraceError` when its tables would take more than `max_memory_bytes` (None: no limit) or
    it has more than `MAX_DEVICES` devices; `admit(bytes)`, when given, is told what the
    tables will take before they are made. With `consume`, the device lists are emptied
    and each entry dict dropped once read (a slice at a time), so the entry dicts already
    turned into columns are freed while the rest are read: the peak holds the dicts or the
    columns, not both. The snapshot is then no longer whole."""
    try:
        return _decode(snapshot, path, consume, max_memory_bytes, admit)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError, OverflowError) as exc:
        raise TraceError(path, f"not a memory snapshot in the documented format ({type(exc).__name__}: {exc})") from None
    except RecursionError:
        raise TraceError(path, "not a memory snapshot in the documented format (nested too deep)") from None


# Entries turned into columns at a time (and, consuming, then freed).
_DECODE_SLICE = 1 << 17
_ENTRY_COLUMNS = ("device", "action", "addr", "size", "stream", "time_us", "stack", "pool", "device_free")


def _entry_columns(entries: list[dict[str, Any]], device: npt.NDArray[np.int64], interner: _Interner,
                   pools: dict[str, int], action_codes: dict[str, int], anomalies: dict[str, int]) \
        -> dict[str, npt.NDArray[Any]]:
    """{column: numpy array} of a slice of entries (of the devices `device`, one per entry);
    `action` as codes into `action_codes` ({action: code}, which gains the actions not met
    before). Entries with a number out of range are left out, counted in `anomalies`."""
    n = len(entries)
    actions = list(map(itemgetter("action"), entries))
    for value in dict.fromkeys(actions):
        action_codes.setdefault(value, len(action_codes))
    action = np.fromiter(map(action_codes.__getitem__, actions), dtype=np.int32, count=n)
    # Only `oom` entries say how much the device had free: read from those alone.
    device_free = np.full(n, -1, dtype=np.int64)
    ooms = np.flatnonzero(action == action_codes["oom"])
    device_free[ooms], free_beyond = _column([entries[i] for i in ooms], "device_free", -1, np.int64)
    addr, addr_beyond = _column(entries, "addr", -1, np.int64)
    size, size_beyond = _column(entries, "size", 0, np.int64)
    stream, stream_beyond = _column(entries, "stream", 0, np.int64)
    time_us, time_beyond = _column(entries, "time_us", np.nan, np.float64)
    columns: dict[str, npt.NDArray[Any]] = {
        "device": device, "action": action, "addr": addr, "size": size, "stream": stream, "time_us": time_us,
        "stack": interner.stack_codes(_optional_list(entries, "frames")),
        "pool": _pool_codes(_optional_list(entries, "pool_id"), pools),
        "device_free": device_free,
    }
    if time_beyond is not None:
        _count(anomalies, "time_out_of_range", int(time_beyond.sum()))
    dropped = size < 0
    for mask in (addr_beyond, size_beyond, stream_beyond):
        if mask is not None:
            dropped |= mask
    if free_beyond is not None:
        dropped[ooms[free_beyond]] = True
    if dropped.any():
        _count(anomalies, "entry_out_of_range", int(dropped.sum()))
        columns = {c: v[~dropped] for c, v in columns.items()}
    return columns


def _count(anomalies: dict[str, int], name: str, count: int) -> None:
    if count:
        anomalies[name] = anomalies.get(name, 0) + count


def _table_bytes(path: str, entries: int, blocks: int, max_memory_bytes: int | None) -> int:
    """What the tables of `entries` trace entries and `blocks` segments and blocks take,
    refused beyond `max_memory_bytes`."""
    need = entries * TABLE_BYTES_PER_ENTRY + blocks * TABLE_BYTES_PER_BLOCK
    if max_memory_bytes is not None and need > max_memory_bytes:
        raise TraceError(path, f"too large to load: its {entries:,} trace entries and {blocks:,} segments and blocks "
                               f"(a shared reference counted at each place) would take about {need >> 20} MiB of "
                               f"tables, more than the memory budget ({max_memory_bytes >> 20} MiB)")
    return need


def _check_devices(path: str, count: int) -> None:
    if count > MAX_DEVICES:
        raise TraceError(path, f"not read: {count:,} devices have a trace or segments, more than the {MAX_DEVICES} a "
                               "snapshot is read with (a snapshot is of one process, on one machine's GPUs)")


def _trace_columns(traces: list[list[Any]], path: str, consume: bool, interner: _Interner, pools: dict[str, int],
                   action_codes: dict[str, int], anomalies: dict[str, int]) -> dict[str, npt.NDArray[Any]]:
    """The entries' columns, devices one after another, read a slice at a time across
    devices: a device costs nothing beyond its entries."""
    lengths = np.fromiter(map(len, traces), dtype=np.int64, count=len(traces))
    _check_devices(path, int(np.count_nonzero(lengths)))
    device = np.repeat(np.arange(len(traces), dtype=np.int64), lengths)
    flat = list(chain.from_iterable(traces))
    if consume:
        for entries in traces:
            entries.clear()
    slices = []
    for lo in range(0, len(flat), _DECODE_SLICE):
        hi = min(lo + _DECODE_SLICE, len(flat))
        slices.append(_entry_columns(flat[lo:hi], device[lo:hi], interner, pools, action_codes, anomalies))
        if consume:
            flat[lo:hi] = [None] * (hi - lo)
    columns = {c: np.concatenate([part[c] for part in slices]) if slices else np.empty(0, np.float64 if c == "time_us" else np.int64)
               for c in _ENTRY_COLUMNS}
    _count(anomalies, "time_backward", _backward(columns["time_us"], columns["device"]))
    return columns


def _backward(time_us: npt.NDArray[Any], device: npt.NDArray[Any]) -> int:
    """How many entries are recorded earlier than an entry before them on their device
    (entries without a time left out)."""
    count = 0
    timed = ~np.isnan(time_us)
    for part in np.split(time_us[timed], np.flatnonzero(np.diff(device[timed])) + 1):  # per device: MAX_DEVICES at most
        count += int(np.count_nonzero(part[1:] < np.maximum.accumulate(part)[:-1]))
    return count


def _decode(snapshot: dict[str, Any], path: str, consume: bool, max_memory_bytes: int | None,
            admit: Callable[[int], object] | None) -> SnapshotModel:
    interner, pools = _Interner(), {"0,0": 0}
    anomalies: dict[str, int] = {}
    action_codes = {c: i for i, c in enumerate(ACTIONS)}
    traces = snapshot.get("device_traces", [])
    segments_in = snapshot.get("segments", [])
    block_lists = [s.get("blocks") or [] for s in segments_in]
    counts = np.fromiter(map(len, block_lists), dtype=np.int64, count=len(block_lists))
    need = _table_bytes(path, sum(map(len, traces)), len(segments_in) + int(counts.sum()), max_memory_bytes)
    if admit is not None:
        admit(need)
    device_count = len(traces)
    # --- the trace: one row per allocator action, devices one after another ---
    columns = _trace_columns(traces, path, consume, interner, pools, action_codes, anomalies)
    if not all(isinstance(c, str) for c in action_codes):
        raise ValueError(f"an action that is not text among {list(action_codes)[:10]}")
    action = pd.Categorical.from_codes(columns.pop("action").astype(np.int32), categories=cast(pd.Index, list(action_codes)))
    entries = pd.DataFrame(columns)
    del columns
    entries.insert(1, "action", pd.Series(action))
    entries.insert(0, "entry", np.arange(len(entries), dtype=np.int64))

    # --- the state when the snapshot was taken: segments and their blocks ---
    numbers = {key: _column(segments_in, key, 0, np.int64)
               for key in ("device", "address", "total_size", "stream", "allocated_size", "active_size", "requested_size")}
    kept = (numbers["device"][0] >= 0) & (numbers["total_size"][0] >= 0)
    beyond = _beyond(*(mask for _, mask in numbers.values()))
    if beyond is not None:
        kept &= ~beyond
    segments = pd.DataFrame({
        **{key: values for key, (values, _) in numbers.items() if key in ("device", "address", "total_size", "stream")},
        "segment_type": pd.Categorical(_optional_list(segments_in, "segment_type")),
        "pool": _pool_codes([p if p is not None else (0, 0) for p in _optional_list(segments_in, "segment_pool_id")], pools),
        **{key: values for key, (values, _) in numbers.items() if key.endswith("_size") and key != "total_size"},
    })
    blocks_in = [b for blocks in block_lists for b in blocks]
    if not all(type(b) is dict for b in blocks_in):
        raise ValueError("a segment's block is not a dict")
    sizes, size_beyond = _column(blocks_in, "size", 0, np.int64)
    segment_of = np.repeat(np.arange(len(segments_in), dtype=np.int64), counts)
    # Blocks lie in their segment in address order; older snapshots give no block address.
    in_segment = np.zeros(len(counts), dtype=np.int64)
    np.add.at(in_segment, segment_of, sizes)
    offsets = np.cumsum(sizes) - sizes - np.repeat(np.cumsum(in_segment) - in_segment, counts)
    fallback = segments["address"].to_numpy()[segment_of] + offsets
    address, address_beyond = _column(blocks_in, "address", -1, np.int64)
    address = np.where(address < 0, fallback, address)
    states = _optional_list(blocks_in, "state")
    blocks = pd.DataFrame({
        "segment": segment_of,
        "device": segments["device"].to_numpy()[segment_of],
        "address": address,
        "size": sizes,
        # `requested_size` is what the caller asked for (the block is rounded up); older
        # snapshots only have it in `history`.
        "requested_size": _requested_sizes(blocks_in, sizes),
        "state": _categorical(["inactive" if s is None else s for s in states], BLOCK_STATES),
        "stack": interner.stack_codes(_block_frames(blocks_in)),
    })
    blocks_kept = kept[segment_of] & (sizes >= 0)
    for mask in (size_beyond, address_beyond):
        if mask is not None:
            blocks_kept &= ~mask
    _count(anomalies, "segment_out_of_range", int(np.count_nonzero(~kept)))
    _count(anomalies, "block_out_of_range", int(np.count_nonzero(~blocks_kept & kept[segment_of])))
    if not (kept.all() and blocks_kept.all()):
        segments = segments[kept].reset_index(drop=True)
        blocks = blocks[blocks_kept].reset_index(drop=True)
        blocks["segment"] = (np.cumsum(kept) - 1)[blocks["segment"].to_numpy()]
    frames, stack_frames, remap = interner.tables(path)
    entries["stack"] = remap[entries["stack"].to_numpy()]
    blocks["stack"] = remap[blocks["stack"].to_numpy()]
    pool_table = pd.DataFrame({"pool": np.arange(len(pools), dtype=np.int64),
                               "pool_id": pd.Series(list(pools), dtype=object)})
    # Every device a table names, by index; arrays per device are sized by their number.
    devices = np.union1d(entries["device"].to_numpy(), segments["device"].to_numpy())
    _check_devices(path, len(devices))
    allocations = allocations_table(entries, segments, blocks, devices)
    entries["allocated"], entries["reserved"] = running_bytes(entries, segments, allocations, devices)
    settings = snapshot.get("allocator_settings")
    return SnapshotModel(entries=entries, segments=segments, blocks=blocks, frames=frames, stack_frames=stack_frames,
                         pools=pool_table, allocations=allocations, device_count=device_count,
                         allocator_settings=_plain(settings, anomalies) if isinstance(settings, dict) else {},
                         anomalies=anomalies)


def _requested_sizes(blocks: list[dict[str, Any]], sizes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    requested, _ = _column(blocks, "requested_size", -1, np.int64)
    missing = np.flatnonzero(requested < 0)
    for i in missing:  # only in snapshots from before PyTorch 2.1
        history = blocks[i].get("history") or [{}]
        real = history[0].get("real_size", sizes[i])
        requested[i] = real if type(real) in (int, float) and _fits(real, np.int64) and real >= 0 else sizes[i]
    return requested


def _block_frames(blocks: list[dict[str, Any]]) -> list[Any]:
    frames = _optional_list(blocks, "frames")
    for i, value in enumerate(frames):
        if value is None and blocks[i].get("history"):  # before PyTorch 2.1
            frames[i] = blocks[i]["history"][0].get("frames")
    return frames


def _plain(settings: object, anomalies: dict[str, int]) -> Any:
    """The allocator's `settings` as JSON holds them (they are shown, never interpreted):
    keys as text; numbers JSON cannot hold (beyond 64 bits, infinite) and anything else as
    text; cut below `_SETTINGS_DEPTH` levels, after `_SETTINGS_ITEMS` items and
    `_SETTINGS_TEXT` characters (counted in `anomalies`), so settings nested a million deep
    or shared a million times cost no more than that."""
    left = [_SETTINGS_ITEMS]

    def plain(value: object, depth: int) -> Any:
        left[0] -= 1
        if left[0] < 0 or depth > _SETTINGS_DEPTH:
            anomalies["settings_cut"] = 1
            return "..."
        if isinstance(value, dict):
            return {_text(k): plain(v, depth + 1) for k, v in value.items() if left[0] >= 0}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [plain(v, depth + 1) for v in value if left[0] >= 0]
        if value is None or isinstance(value, bool) or (type(value) is int and _fits(value, np.int64)) or (
                type(value) is float and math.isfinite(value)):
            return value
        return _text(value)

    def _text(value: object) -> str:
        if isinstance(value, int) and not _fits(value, np.int64):
            return f"(an integer of {value.bit_length()} bits)"
        text = value if isinstance(value, str) else repr(value[:_SETTINGS_TEXT] if isinstance(value, (bytes, bytearray)) else value)
        if len(text) > _SETTINGS_TEXT:
            anomalies["settings_cut"] = 1
            return text[:_SETTINGS_TEXT] + "..."
        return text

    return plain(settings, 0)
