"""The per-file summaries of the views over many ranks (`runs.FILE_SUMMARIES`): held in
memory per version of a file, read from the disk cache (a run's index first, then the file's
own entry), built from the file's profile where the cache holds neither, and written back so
that the next reader parses nothing. One store for the server (`loading.RunStore` holds one,
counts its memory in the budget and drops what was not used lately) and the Python API
(`runs.Run` holds one): both read, build, keep and write summaries through these functions,
with the same disk-cache behaviour. Everything here takes plain arguments (a storage, paths,
keys, declarations), never a request.

Light on purpose: no numpy, pandas or views at import (the server imports it at start-up).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import TraceError

if TYPE_CHECKING:
    from .cache import ModelCache
    from ..schema import Persisted
    from .storage import Storage

# Stored summaries read at once by `SummaryStore.prefetch`: small reads, mostly waiting on I/O
# (on an object store each is a few round trips of ~30 ms: more of them in flight).
SUMMARY_READS = 16
REMOTE_SUMMARY_READS = 64
# Summaries used this recently are never dropped for the budget: a view over every rank of
# a job combines all of them at once, so dropping some to make room would only read them again.
SUMMARY_PIN_SECONDS = 60.0


def stored_summary(cache: ModelCache, source: str, identity: dict, declared: Persisted,
                   indexed: tuple[dict, Any] | None = None) -> Any:
    """The summary `declared` of the trace file `source` (its path or URL as the cache keys
    it) whose identity is `identity`: `indexed`, the (identity, summary) a run's index holds
    for it, while that identity is still the file's; else the file's own entry; None when
    the cache holds neither for this version of the file."""
    if indexed is not None and indexed[0] == identity:
        return indexed[1]
    return cache.get_summary(cache.summary_key(source, declared), identity, declared)


def span_index(cache: ModelCache, run_source: str, span: int, declared: Persisted) -> dict[str, tuple[dict, Any]]:
    """{file source: (identity, summary)} of the run index `preprocess` wrote for the summary
    `declared` of one span of the run at `run_source`; empty when none."""
    return cache.get_summary_index(run_source, span, declared) or {}


@dataclass
class _Looked:
    """What the disk cache was asked about one version of a file: its identity, once looked
    up, and the summaries it does not hold (looked for once, until the file changes)."""

    identity: dict | None = None
    misses: set[str] = field(default_factory=set)


class SummaryStore:
    """Summaries of the trace files of one storage, by path and key (a `FILE_SUMMARIES` name,
    or any name a caller builds a summary under): held in memory (least recently used first)
    and looked up in, and written to, the disk cache `cache` (None: none).

    `lock`: the lock guarding the store (the server shares its own, so that its budget sees
    the store as it is); `measure(summary)`: the memory a summary holds, counted in `nbytes`
    (None: not counted).
    """

    def __init__(self, cache: ModelCache | None, lock: threading.RLock | None = None,
                 measure: Callable[[Any], int] | None = None) -> None:
        self.cache = cache
        self._lock = lock if lock is not None else threading.RLock()
        self._measure = measure
        self._held: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._bytes: dict[str, int] = {}
        self._used: dict[str, float] = {}
        self._looked: dict[str, _Looked] = {}

    def _disk(self) -> ModelCache | None:
        return self.cache if self.cache is not None and self.cache.enabled else None

    def __len__(self) -> int:
        """Files whose summaries are held."""
        return len(self._held)

    @property
    def nbytes(self) -> int:
        """Memory the held summaries take, by `measure`."""
        with self._lock:
            return sum(self._bytes.values())

    def held(self, path: str, key: str) -> Any:
        """The summary `key` of `path` held in memory (marked used), or None."""
        with self._lock:
            return self.keep(path, key, None) if key in self._held.get(path, {}) else None

    def keep(self, path: str, key: str, value: Any) -> Any:
        """Hold `value` as the summary `key` of `path` unless one is held already: two threads
        may both have built one, and the first kept stays, so every caller gets the same
        object (answers are reused by identity). Marks it used; returns the one held."""
        with self._lock:
            held = self._held.setdefault(path, {})
            if key not in held:
                held[key] = value
                if self._measure is not None:
                    self._bytes[path] = self._bytes.get(path, 0) + self._measure(value)
            self._held.move_to_end(path)
            self._used[path] = time.monotonic()
            return held[key]

    def drop(self, path: str) -> None:
        """Let go of the summaries of `path` held in memory (read again, or built again, when
        asked for); what the disk cache was found to hold for it is still known."""
        with self._lock:
            self._held.pop(path, None)
            self._bytes.pop(path, None)
            self._used.pop(path, None)

    def forget(self, path: str) -> None:
        """Forget everything about `path`: the file changed or vanished."""
        with self._lock:
            self.drop(path)
            self._looked.pop(path, None)

    def drop_unused(self, excess: int) -> None:
        """Drop the summaries least recently used, not used for `SUMMARY_PIN_SECONDS`, until
        `excess` bytes went (or none of them is left)."""
        pinned_since = time.monotonic() - SUMMARY_PIN_SECONDS
        with self._lock:
            while excess > 0 and self._held:
                oldest = next(iter(self._held))
                if self._used.get(oldest, 0.0) > pinned_since:
                    break  # least recently used first: every later one is pinned too
                excess -= self._bytes.get(oldest, 0)
                self.drop(oldest)

    def loaded(self, path: str, identity: dict | None) -> None:
        """The profile of `path` was just loaded from the version of the file `identity`
        describes (None: unknown, as without a disk cache or when the file changed while it
        was parsed): summaries built from it are written under that identity, or not at all."""
        with self._lock:
            self._looked.setdefault(path, _Looked()).identity = identity

    def stored(self, storage: Storage, path: str, key: str, declared: Persisted,
               indexed: tuple[dict, Any] | None = None) -> Any:
        """The summary `key` (declared by `declared`) of the file `path` of `storage` from the
        disk cache, or None (`stored_summary`). A miss is remembered until the file changes
        (`forget`), so a run whose summaries were never stored costs one look."""
        cache = self._disk()
        if cache is None:
            return None
        with self._lock:
            looked = self._looked.setdefault(path, _Looked())
            if key in looked.misses:
                return None
            identity = looked.identity
        try:
            if identity is None:
                identity = storage.identity(path)
            found = stored_summary(cache, storage.display(path), identity, declared, indexed)
        except TraceError:  # unreadable now: the load reports why
            found = None
        with self._lock:
            if self._looked.get(path) is looked:  # still this version of the file
                looked.identity = identity
                if found is None:
                    looked.misses.add(key)
        return found

    def prefetch(self, storage: Storage, run_source: str, paths: Sequence[str], span: int, key: str,
                 declared: Persisted, refresh: Callable[[str], None] | None = None) -> None:
        """Look up the stored summaries `key` of these files (one span of a run's workers, the
        run at `run_source`) in the disk cache all at once and hold those found: from the
        run's index where `preprocess` wrote one (one entry for the whole span; each member
        taken only while its file's identity is still the one indexed), else from each file's
        own entry, several reads in flight (an object store answers each after a round trip;
        a 1,024-rank job asks for 1,024). `refresh(path)` is called first for each file (the
        server checks whether it changed). One file alone is left to `stored`."""
        cache = self._disk()
        if cache is None:
            return
        with self._lock:
            todo = [path for path in paths if key not in self._held.get(path, {})]
        if len(todo) < 2:
            return
        index = span_index(cache, run_source, span, declared)

        def fetch(path: str) -> None:
            if refresh is not None:
                refresh(path)
            found = self.stored(storage, path, key, declared, index.get(storage.display(path)))
            if found is not None:
                self.keep(path, key, found)

        reads = REMOTE_SUMMARY_READS if storage.remote else SUMMARY_READS
        with ThreadPoolExecutor(max_workers=min(reads, len(todo)), thread_name_prefix="tb_plugin_summary") as pool:
            list(pool.map(fetch, todo))

    def unstored(self, path: str, built: dict[str, tuple[Any, Persisted]]
                 ) -> tuple[dict | None, dict[str, tuple[Any, Persisted]]]:
        """(the identity of `path` as looked up, those of `built` ({key: (summary, its
        declaration)}) that were looked for in the disk cache and missing): what `persist`
        writes once they are built."""
        with self._lock:
            looked = self._looked.get(path)
            if looked is None:
                return None, {}
            return looked.identity, {key: value for key, value in built.items() if key in looked.misses}

    def persist(self, storage: Storage, path: str, identity: dict, summaries: dict[str, tuple[Any, Persisted]]) -> None:
        """Write summaries ({key: (summary, its declaration)}) built from the model of the file
        `identity` describes into the disk cache, unless the file changed since."""
        cache = self._disk()
        if cache is None:
            return
        display = storage.display(path)
        try:
            if storage.identity(path) != identity:
                return
        except TraceError:
            return
        for key, (summary, declared) in summaries.items():
            if cache.put_summary(cache.summary_key(display, declared), identity, summary, declared, display):
                with self._lock:
                    looked = self._looked.get(path)
                    if looked is not None and looked.identity == identity:
                        looked.misses.discard(key)
