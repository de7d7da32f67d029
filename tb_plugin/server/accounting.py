"""The memory budget's accounting for the server's store (`loading.RunStore`): what the process
holds, counted against one budget, and what is dropped to stay within it.

`MemoryBudget` counts parsed profiles and memory snapshots (each held on a `Shelf` of its own
type, all in one least recently used order) with what their views cached (the timeline index
included; `profile_bytes`, `held_bytes`), the loads in flight (reserved by their estimate
before they start, re-estimated once the events are counted), the store's summaries,
the reply cache (`ReplyCache`, bounded in bytes) and the replies being built
(`ReplyReservation`: counted while built, refused beyond a share of the budget); beyond the
budget it drops the least recently used profiles and snapshots, then unused summaries, and
has what was dropped given back to the system (`give_back_memory`). What is loaded, when, and
what a load may wait for is the store's business (`loading`); this module only counts.
"""

import ctypes
import functools
import gc
import os
import sys
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from ..store.cache_format import model_bytes
from ..errors import ReplyTooLargeError
from ..snapshot.model import SnapshotModel
from ..snapshot.model import model_bytes as snapshot_model_bytes

if TYPE_CHECKING:  # not at run time: the profile module loads numpy, pandas and polars
    import numpy as np

    from ..python_api.snapshots import MemorySnapshot
    from ..python_api.profile import Profile
    from ..store.summaries import SummaryStore

# What the budget holds of a file: its parsed `Profile`, or a memory snapshot's `MemorySnapshot`.
Held = TypeVar("Held", bound="Profile | MemorySnapshot")

# glibc malloc arenas the server's threads share (`cap_malloc_arenas`); mallopt's code for it.
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8
# Replies kept for reuse take at most this share of the memory budget, and so does one reply
# while it is built.
REPLY_SHARE = 8
# Memory building a reply holds at its peak per value sent: the value as a Python object in
# the row lists, its slot there and its JSON text (86 bytes measured on a table of floats,
# integers and categorical strings; benchmarks/README.md, "Reply bounds").
REPLY_BYTES_PER_VALUE = 96


def held_bytes(value: object, seen: set[int] | None = None) -> int:
    """Memory held by `value` and what it refers to: a table's columns (with the text of
    object and string columns, and each category list once), arrays, dicts, lists, tuples and
    objects' attributes, however deep, each object once (`seen`: ids counted already).

    Counting only a few levels down and columns' `nbytes` missed most of a profile's views: a
    timeline index's levels sit five levels deep, an object column's `nbytes` is its pointers,
    and the index's reference to its model counted the model twice; the plugin counted 40-46%
    of what a profile made the process grow by (issue 27)."""
    import numpy as np  # a profile (or a summary) exists, so numpy and pandas are loaded already
    import pandas as pd

    seen = set() if seen is None else seen
    total, todo = 0, [value]
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, (type, types.ModuleType, types.FunctionType, types.MethodType)):
            continue
        seen.add(id(item))
        if isinstance(item, pd.DataFrame):
            todo.append(item.index)
            todo.extend(column for _, column in item.items())
        elif isinstance(item, (pd.Series, pd.Index)):
            if isinstance(item.dtype, pd.CategoricalDtype):  # codes here; the shared category list once
                # a categorical dtype's array is a Categorical; pandas-stubs type it ExtensionArray
                total += cast(pd.Categorical, item.array).codes.nbytes
                todo.append(item.dtype.categories)
            elif item.dtype.kind in "biufcmM":  # numbers and times: no per-value objects
                total += item.nbytes
            elif item.dtype == object:
                total += _object_values_bytes(item.to_numpy())
            else:  # pandas' own strings: their buffers (a C loop, not one in Python)
                total += item.memory_usage(deep=True) if isinstance(item, pd.Index) else item.memory_usage(index=False, deep=True)
        elif isinstance(item, np.ndarray):
            total += _object_values_bytes(item) if item.dtype == object else item.nbytes
        elif isinstance(item, dict):
            total += sys.getsizeof(item)
            todo.extend(tuple(item.values()))  # a snapshot: other threads add views' results meanwhile
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += sys.getsizeof(item)
            todo.extend(item)
        elif hasattr(item, "__dict__"):
            total += sys.getsizeof(item)
            todo.extend(tuple(vars(item).values()))
        else:
            total += sys.getsizeof(item)
    return int(total)


def _object_values_bytes(values: "np.ndarray") -> int:
    """Memory of an object array: its pointers, and each distinct object it points to once.
    A view's text column mostly points at the few strings of a category list (the names of
    the ops, `views.common.texts`): counting a string per row counted the same string
    thousands of times. Objects are told apart by identity, in C loops (`map`, numpy)."""
    import numpy as np

    values = values.ravel()
    ids = np.fromiter(map(id, values), dtype=np.int64, count=len(values))
    _, first = np.unique(ids, return_index=True)
    return values.nbytes + sum(map(sys.getsizeof, values[first]))


def give_back_memory() -> None:
    """Hand memory freed by dropped profiles (and a parse's peak) back to the system: a
    collection first (tables on a reference cycle outlive their profile until one runs), then
    glibc's `malloc_trim`, without which freed pages stay in the allocator's arenas and the
    process keeps its peak (elsewhere than glibc, the collection alone)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to call
        return None


def cap_malloc_arenas() -> None:
    """Let glibc's malloc make at most `MALLOC_ARENAS` arenas from now on (unless the
    environment sets `MALLOC_ARENA_MAX`). By default each thread that allocates while another
    does gets an arena of its own, up to 8 per core: loader threads and dozens of request
    threads each kept pages freed tables had left half used, and 40 runs clicked through at
    a 512 MB budget settled ~290 MB higher than with two arenas (benchmarks/README.md,
    "Memory budget")."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, MALLOC_ARENAS)
    except (OSError, AttributeError):  # not glibc
        pass


def profile_bytes(profile: "Profile | MemorySnapshot") -> int:
    """A profile's (or a memory snapshot's) tables and what its views cached on the model,
    each cached result counted once (results never change once built) and apart from the
    model it refers to."""
    model = profile.model
    cache = model.__dict__.get("_view_cache", {})
    counted = model.__dict__.setdefault("_view_bytes", {})
    new = [key for key in tuple(cache) if key not in counted]
    if new:
        counted_with_model = _model_objects(model)
        for key in new:
            counted[key] = held_bytes(cache[key], set(counted_with_model))
    tables = snapshot_model_bytes(model) if isinstance(model, SnapshotModel) else model_bytes(model)
    return tables + sum(size for key, size in tuple(counted.items()) if key in cache)


def _model_objects(model: object) -> frozenset[int]:
    """Ids of what `model_bytes` counts: the model, its tables and their category lists (a
    view's table often shares a column's categories)."""
    import pandas as pd

    known = model.__dict__.get("_model_object_ids")
    if known is not None:  # tables never change once built: read once per model
        return known
    ids = {id(model)}
    for table in tuple(vars(model).values()):
        if hasattr(table, "columns"):
            ids.add(id(table))
            # a categorical column's categories are its dtype's: read off the dtypes, not by
            # making a Series of each column (9 ms a model, paid on every answer that cached a view)
            ids.update(id(dtype.categories) for dtype in table.dtypes if isinstance(dtype, pd.CategoricalDtype))
    model.__dict__["_model_object_ids"] = frozenset(ids)
    return model.__dict__["_model_object_ids"]


class ReplyCache:
    """Serialised answers per request path (query string included) and the Profiles it used.

    Every view is a pure function of its profiles and the parameters, so an answer can be
    reused until a profile is replaced (a changed file loads as a new Profile). Entries go
    when their first profile does (weakly referenced); an answer that used more profiles
    (diff, distributed) holds weak references to the others and is reused only while each is
    still the profile served. Bounded in bytes (least recently used go first): the reply
    bytes count in the store's memory budget.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        # (id(first profile), path) -> (ref, reply, other refs, size)
        self._entries: OrderedDict[tuple[int, str], tuple[weakref.ref[object], tuple[bytes, str | None],
                                                          tuple[weakref.ref[object], ...], int]] = OrderedDict()
        self._dead: list[int] = []  # ids of first profiles gone: their entries are dropped on the next call
        self._lock = threading.Lock()

    def _drop_dead(self) -> None:
        while self._dead:
            gone = self._dead.pop()
            for key in [key for key in self._entries if key[0] == gone]:
                self.nbytes -= self._entries.pop(key)[3]

    def get(self, profiles: Sequence[object], path: str) -> tuple[bytes, str | None] | None:
        """The reply stored for `path` over exactly `profiles` (in order), or None."""
        first, others = profiles[0], profiles[1:]
        with self._lock:
            self._drop_dead()
            key = (id(first), path)
            entry = self._entries.get(key)
            if entry is None:
                return None
            ref, reply, used_others, _ = entry
            if ref() is not first or len(used_others) != len(others) \
                    or any(r() is not p for r, p in zip(used_others, others)):
                return None
            self._entries.move_to_end(key)
            return reply

    def put(self, profiles: Sequence[object], path: str, reply: tuple[bytes, str | None]) -> None:
        size = len(reply[0]) + len(path) + 256  # body, key and the entry's own objects
        if size > self.max_bytes:
            return
        first = profiles[0]
        # The callback only records the id: it may run during any allocation, lock held or not.
        gone = id(first)
        ref = weakref.ref(first, lambda _: self._dead.append(gone))
        with self._lock:
            self._drop_dead()
            key = (id(first), path)
            if key in self._entries:
                self.nbytes -= self._entries.pop(key)[3]
            self._entries[key] = (ref, reply, tuple(weakref.ref(p) for p in profiles[1:]), size)
            self.nbytes += size
            while self.nbytes > self.max_bytes:
                self.nbytes -= self._entries.popitem(last=False)[1][3]


class ReplyReservation:
    """What one request builds, counted in its store's memory budget (`budget`) while it is built:
    `admit(values, what)` before building `values` more values (table cells, timeline slice
    fields) refuses with `ReplyTooLargeError` once the reply would hold more than `max_bytes`,
    else counts them (profiles beyond the budget make room); `release()` when the reply is sent."""

    def __init__(self, budget: "MemoryBudget | None" = None, max_bytes: int | None = None) -> None:
        self.budget = budget
        self.max_bytes = max_bytes
        self.nbytes = 0

    def admit(self, values: int, what: str) -> None:
        need = int(values) * REPLY_BYTES_PER_VALUE
        if self.max_bytes is not None and self.nbytes + need > self.max_bytes:
            most = self.max_bytes // REPLY_BYTES_PER_VALUE
            raise ReplyTooLargeError(f"{what} would send {int(values):,} values, more than the {most:,} one reply may "
                                     f"hold within the memory budget (--profiler_max_memory_mb); ask for less "
                                     f"(a shorter time range, a coarser resolution, fewer tracks or rows)")
        self.nbytes += need
        if self.budget is not None:
            self.budget.count_reply(need)

    def release(self) -> None:
        if self.budget is not None and self.nbytes:
            self.budget.count_reply(-self.nbytes)
        self.nbytes = 0


class Shelf(Generic[Held]):
    """What a `MemoryBudget` holds of one kind (`profiles`, or memory `snapshots`), by path: each
    shelf holds only its own kind, so what it gives back is typed as that kind, while every
    shelf of a budget shares its least recently used order (`MemoryBudget.loaded`), its count
    and its bytes. `held` is changed by the budget only, under its lock."""

    def __init__(self, budget: "MemoryBudget") -> None:
        self.budget = budget
        self.held: dict[str, Held] = {}

    def __contains__(self, path: object) -> bool:
        return path in self.held

    def get(self, path: str) -> Held | None:
        """What is held of `path`, or None; its place in the order unchanged."""
        return self.held.get(path)

    def use(self, path: str) -> Held | None:
        """What is held of `path`, now the most recently used of the budget's, or None."""
        with self.budget.lock:
            held = self.held.get(path)
            if held is not None:
                self.budget.loaded.move_to_end(path)
            return held

    def keep(self, path: str, loaded: Held, size: int) -> None:
        """Hold `loaded` (of `path`, taking `size` bytes) as the budget's most recently used
        (`MemoryBudget.keep`)."""
        self.budget.keep(self, path, loaded, size)


class MemoryBudget:
    """What the store holds against `max_memory_bytes`: parsed `profiles` and memory
    `snapshots` (each a `Shelf` of its kind), in one least recently used order (`loaded`: path
    -> the shelf holding it, at most `max_profiles` of both together), their `sizes`, the
    loads in flight (`reserved`: path -> the memory each may take at its peak), the store's
    `summaries`, cached `replies` (at most 1/`REPLY_SHARE` of the budget) and the replies being
    built (`building_bytes`). Every count is read and changed under the store's `lock`;
    `changed` is notified when a load's reservation is given back. A dropped profile or
    snapshot is told to `evicted(path)`; while `stopped` is not set, what was dropped is given
    back to the system off the request path (`give_back(give_back_memory)`)."""

    def __init__(self, max_memory_bytes: int, max_profiles: int, lock: threading.RLock, summaries: "SummaryStore",
                 evicted: Callable[[str], None], give_back: Callable[[Callable[[], None]], object],
                 stopped: threading.Event) -> None:
        self.max_memory_bytes = max_memory_bytes
        self.max_profiles = max_profiles
        self.lock = lock
        self.summaries = summaries
        self.loaded: OrderedDict[str, Shelf[Any]] = OrderedDict()
        self.profiles: Shelf[Profile] = Shelf(self)
        self.snapshots: Shelf[MemorySnapshot] = Shelf(self)
        self.sizes: dict[str, int] = {}
        self.reserved: dict[str, int] = {}
        self.changed = threading.Condition(lock)
        self.replies = ReplyCache(max_memory_bytes // REPLY_SHARE)
        self.building_bytes = 0
        self._evicted = evicted
        self._give_back = give_back
        self._stopped = stopped

    def held_bytes(self) -> int:
        """Memory the store accounts for: profiles, loads in flight, summaries, cached replies
        and replies being built."""
        with self.lock:
            return (sum(self.sizes.values()) + sum(self.reserved.values()) + self.replies.nbytes
                    + self.summaries.nbytes + self.building_bytes)

    def reply_reservation(self) -> ReplyReservation:
        """A `ReplyReservation` for one request's reply, at most 1/`REPLY_SHARE` of the budget."""
        return ReplyReservation(self, self.max_memory_bytes // REPLY_SHARE)

    def count_reply(self, nbytes: int) -> None:
        with self.lock:
            self.building_bytes += nbytes
            if nbytes > 0:
                self.enforce(keep=1)

    def keep(self, shelf: Shelf[Held], path: str, loaded: Held, size: int) -> None:
        """Hold `loaded` (of `path`, taking `size` bytes) on `shelf` as the most recently used;
        the least recently used others go while beyond the budget (the one just loaded always
        stays)."""
        with self.lock:
            self._drop(path)
            shelf.held[path] = loaded
            self.loaded[path] = shelf
            self.sizes[path] = size
            self.enforce(keep=1)

    def forget(self, path: str) -> None:
        """Stop holding what was loaded of `path` (its file changed or went)."""
        with self.lock:
            self._drop(path)

    def _drop(self, path: str) -> None:
        shelf = self.loaded.pop(path, None)
        if shelf is not None:
            del shelf.held[path]
        self.sizes.pop(path, None)

    def remeasure(self, profiles: Sequence[object]) -> None:
        """Count again what `profiles` hold (their views cache results on the model as they are
        asked for) and drop least recently used profiles beyond the budget."""
        # what has a model is a Profile or a MemorySnapshot (not a summary)
        sizes = {id(p): profile_bytes(cast("Profile | MemorySnapshot", p)) for p in profiles if hasattr(p, "model")}
        with self.lock:
            for path, shelf in self.loaded.items():
                held = id(shelf.held[path])
                if held in sizes:
                    self.sizes[path] = sizes[held]
            self.enforce(keep=1)

    def enforce(self, keep: int) -> None:
        """Drop least recently used profiles (keeping the `keep` most recent), then summaries
        not used for `summaries.SUMMARY_PIN_SECONDS`, while the held memory is beyond the budget; the
        caller holds the lock. A dropped summary is read again from the disk cache (or built
        again) when asked for. What was dropped is given back to the system off the request
        path (`give_back_memory`)."""
        dropped = len(self.loaded) + len(self.summaries)
        while len(self.loaded) > keep and (len(self.loaded) > self.max_profiles
                                           or self.held_bytes() > self.max_memory_bytes):
            evicted = next(iter(self.loaded))
            self._drop(evicted)
            self._evicted(evicted)
        self.summaries.drop_unused(self.held_bytes() - self.max_memory_bytes)
        if len(self.loaded) + len(self.summaries) < dropped and not self._stopped.is_set():
            self._give_back(give_back_memory)

    def reserve(self, path: str, need: int, waiting: Callable[[], None], going: Callable[[], None]) -> None:
        """Wait until `need` bytes fit beside the other loads in flight (`waiting()` each time
        round), then hold them for the load of `path` (a load alone always starts: the per-trace
        limit was checked before); `going()` raises where the load is to stop instead."""
        with self.lock:
            while (sum(v for k, v in self.reserved.items() if k != path) + need > self.max_memory_bytes
                   and any(k != path for k in self.reserved) and not self._stopped.is_set()):
                waiting()
                self.changed.wait(1.0)
            going()
            self.reserved[path] = need
            self.enforce(keep=0)

    def hold(self, path: str, need: int, going: Callable[[], None]) -> None:
        """Hold `need` bytes for the load of `path` from now on (what it turned out to need,
        within the per-file limit already checked), making room among the loaded files;
        `going()` raises where the load is to stop instead."""
        with self.lock:
            going()
            if path in self.reserved:
                self.reserved[path] = need
            self.enforce(keep=0)

    def unreserve(self, path: str) -> None:
        """The load of `path` ended: its reservation is given back to the loads waiting."""
        with self.lock:
            self.reserved.pop(path, None)
            self.changed.notify_all()
