"""On-disk cache of parsed trace models, so a restart or an evicted profile loads in a
fraction of the parse time.

Entries are keyed by the trace's path (or URL), size and mtime plus a format version, so a
changed file or a new release never reads a stale entry. Writes go to a temporary file
renamed into place, so two TensorBoard processes sharing the directory never see a partial
entry. A corrupt or unreadable entry is deleted and the trace parsed again. Entries are
pickles: the directory must be private to the user (created 0700; a directory owned by
someone else is refused), since loading a pickle runs code.
"""

import hashlib
import logging
import os
import pickle
import tempfile
from pathlib import Path

from . import __version__

logger = logging.getLogger(__name__)

# Bump when TraceModel's tables change shape or meaning.
CACHE_FORMAT = 2
_SUFFIX = ".tbpp"


def default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb_plugin_pytorch_profiler")


class ModelCache:
    """A directory of cached `TraceModel`s, bounded to `max_bytes` (oldest entries go first).

    The directory is created on first use, not by the constructor.
    """

    def __init__(self, directory, max_bytes=10 << 30):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self._enabled = None

    @property
    def enabled(self):
        if self._enabled is None:
            self._enabled = self._prepare()
        return self._enabled

    def _prepare(self):
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = self.directory.stat()
        except OSError as exc:
            logger.warning("model cache disabled: cannot create %s (%s)", self.directory, exc)
            return False
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            logger.warning("model cache disabled: %s belongs to another user", self.directory)
            return False
        return True

    @staticmethod
    def key(source, size, mtime):
        text = f"{CACHE_FORMAT}|{__version__}|{source}|{size}|{mtime!r}"
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def _path(self, key):
        return self.directory / f"{key}{_SUFFIX}"

    def get(self, key):
        """The cached model, or None (missing, corrupt, or from another format)."""
        if not self.enabled:
            return None
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                model = pickle.load(fh)
        except FileNotFoundError:
            return None
        except Exception as exc:  # any damage to an entry means: parse again
            logger.warning("discarding corrupt cache entry %s: %s", path.name, exc)
            path.unlink(missing_ok=True)
            return None
        from .trace.model import TraceModel  # not at import: see loading.RunStore._parse_or_cached

        if not isinstance(model, TraceModel):
            path.unlink(missing_ok=True)
            return None
        os.utime(path)  # recently used: kept longest when the cache is trimmed
        return model

    def put(self, key, model):
        if not self.enabled:
            return
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=_SUFFIX)
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(model, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self._path(key))
        except OSError as exc:
            logger.warning("could not write cache entry: %s", exc)
            if tmp:
                Path(tmp).unlink(missing_ok=True)
            return
        self._trim()

    def _trim(self):
        try:
            entries = [(p.stat().st_mtime, p.stat().st_size, p) for p in self.directory.glob(f"*{_SUFFIX}")
                       if not p.name.startswith(".tmp-")]
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size

