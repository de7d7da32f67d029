"""On-disk cache of parsed trace models, so a restart or an evicted profile loads in a
fraction of the parse time.

Data only, never code: each entry is a directory holding one Arrow IPC file per table
(categorical columns as their integer codes, each distinct category list once in its own
Arrow file) and `manifest.json`, which records the source's identity (size, mtime,
inode/ctime where local, a hash of the file's head and tail), the model's scalars and dicts
(origin, metadata such as device properties and distributedInfo, anomalies), the memory the
tables take once loaded, and a SHA-256 of every part. Any mismatch (another file behind the
same path, a flipped byte, a missing part, another format) means the trace is parsed again:
never wrong numbers, never code from disk (pyarrow >= 14 refuses the pickled extension types
of CVE-2023-47248, and nothing here unpickles).

Many processes may share the directory: parts are named by their hash and written under a
temporary name then renamed into place, and the manifest, which names them, is written last,
so a reader sees a whole entry or none. The directory may be an fsspec URL (`s3://...`,
where each object appears whole when written). This is also the format `preprocess` writes.
"""

import hashlib
import json
import logging
import os
import posixpath
import re
import time
import uuid

from . import __version__
from .trace.model import TraceModel
from .storage import is_url

logger = logging.getLogger(__name__)

# Bump when TraceModel's tables, or this layout, change shape or meaning. Format 1 was pickles
# (`*.tbpp`), deleted on sight, never read; 3: flows carry `op` and `peer`, times their
# nanoseconds, MTIA's device work its own tables; 4: ops carry process-group descriptions,
# Inductor's kernel annotations, flops and Concrete Inputs.
CACHE_FORMAT = 4
MANIFEST = "manifest.json"
_TEMP_PREFIX = ".tmp-"
_OLD_SUFFIX = ".tbpp"
# A temporary file this old belongs to a write that was killed (a write takes seconds).
_STALE_TEMP_SECONDS = 3600.0
# Parts are named `<part>-<24 hex digits of its SHA-256>.arrow`, inside the entry's directory.
_PART_NAME = re.compile(r"(table-[a-z_]+|categories-[0-9]+)-[0-9a-f]{24}\.arrow")
_TABLES = ("threads", "ops", "python", "runtime", "kernels", "memcpy", "memset", "gpu_annotations",
           "memory", "flows", "counters", "other", "steps", "devices")


def default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb_plugin_pytorch_profiler")


def model_bytes(model):
    """Memory a `TraceModel`'s tables take: their columns, and once each the text of the
    category lists the categorical columns share (`nbytes` counts only their pointers).
    Tables never change once built: counted once per model."""
    known = model.__dict__.get("_tables_bytes")
    if known is not None:
        return known
    lists = {}
    for name in _TABLES:
        for _, values in getattr(model, name).items():
            categories = getattr(getattr(values, "cat", None), "categories", None) if values.dtype == "category" else None
            if categories is not None:
                lists[id(categories)] = categories
    model.__dict__["_tables_bytes"] = model.nbytes() + sum(int(c.memory_usage(deep=True)) for c in lists.values())
    return model.__dict__["_tables_bytes"]


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _arrow_bytes(table):
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _arrow_table(data):
    import pyarrow as pa

    return pa.ipc.open_file(pa.py_buffer(data)).read_all()


def encode_model(model):
    """(manifest fields, {part name: bytes}) of a `TraceModel`; raises TypeError or ValueError
    for a model that does not fit the format (it is then not cached)."""
    import pandas as pd
    import pyarrow as pa

    parts, columns, category_ids = {}, {}, {}
    for name in _TABLES:
        frame = getattr(model, name)
        plain, coded = {}, {}
        for column in frame.columns:
            values = frame[column]
            if isinstance(values.dtype, pd.CategoricalDtype):
                categories = values.cat.categories
                # Category lists are shared between tables (all `name` columns): stored once.
                index = category_ids.setdefault(id(categories), (len(category_ids), categories))[0]
                coded[column] = [index, bool(values.cat.ordered)]
                plain[column] = values.cat.codes
            else:
                plain[column] = values
        table = pa.Table.from_pandas(pd.DataFrame(plain, index=frame.index), preserve_index=False)
        parts[f"table-{name}"] = _arrow_bytes(table)
        columns[name] = {"order": list(frame.columns), "categorical": coded}
    for index, categories in category_ids.values():
        if categories.dtype != object or not all(isinstance(c, str) for c in categories):
            raise TypeError("only text categories are cached")
        parts[f"categories-{index}"] = _arrow_bytes(pa.table({"value": pa.array(list(categories), pa.large_string())}))
    fields = {"origin_us": model.origin_us, "metadata": model.metadata, "anomalies": model.anomalies,
              "columns": columns, "categories": len(category_ids), "memory_bytes": model_bytes(model)}
    json.dumps(fields, allow_nan=True)  # raises for values JSON cannot hold: not cached then
    return fields, parts


def decode_model(fields, parts):
    """The `TraceModel` of `encode_model`'s output (parts already checked)."""
    import pandas as pd

    categories = [pd.Index(_arrow_table(parts[f"categories-{i}"]).column("value").to_numpy(zero_copy_only=False),
                           dtype=object) for i in range(fields["categories"])]
    tables = {}
    for name in _TABLES:
        layout = fields["columns"][name]
        frame = _arrow_table(parts[f"table-{name}"]).to_pandas()
        for column, (index, ordered) in layout["categorical"].items():
            dtype = pd.CategoricalDtype(categories[index], ordered=ordered)
            frame[column] = pd.Categorical.from_codes(frame[column].to_numpy(), dtype=dtype)
        tables[name] = frame[layout["order"]]
    return TraceModel(origin_us=fields["origin_us"], metadata=fields["metadata"], anomalies=fields["anomalies"],
                      **tables)


class ModelCache:
    """A directory (local path or fsspec URL) of cached `TraceModel`s, bounded to `max_bytes`
    (least recently used entries go first; temporary files count too).

    The directory is created, and stale temporary files and old-format entries removed, on
    first use, not by the constructor.
    """

    def __init__(self, directory, max_bytes=10 << 30):
        self.directory = str(directory)
        self.max_bytes = max_bytes
        self._enabled = None
        self.fs = self.root = None

    @property
    def enabled(self):
        if self._enabled is None:
            self._enabled = self._prepare()
        return self._enabled

    def _prepare(self):
        try:
            if is_url(self.directory):
                import fsspec

                self.fs, self.root = fsspec.core.url_to_fs(self.directory)
                self.root = self.root.rstrip("/")
                self.fs.makedirs(self.root, exist_ok=True)
            else:
                from fsspec.implementations.local import LocalFileSystem

                self.fs = LocalFileSystem()
                self.root = os.path.abspath(self.directory.removeprefix("file://"))
                os.makedirs(self.root, mode=0o700, exist_ok=True)
                # Entries are data, but whoever writes them decides the numbers shown.
                if hasattr(os, "getuid") and os.stat(self.root).st_uid != os.getuid():
                    logger.warning("model cache disabled: %s belongs to another user", self.root)
                    return False
            self._clean()
        except (OSError, ValueError, ImportError) as exc:
            logger.warning("model cache disabled: cannot use %s (%s)", self.directory, exc)
            return False
        return True

    def _path(self, *names):
        return (os.path.join if _is_local(self.fs) else posixpath.join)(self.root, *names)

    @staticmethod
    def key(source):
        """The entry name of a source file (path or URL) in this format and release."""
        text = f"{CACHE_FORMAT}|{__version__}|{source}"
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    # --- reading ------------------------------------------------------------------------

    def manifest(self, key, identity):
        """The entry's manifest when it is of this format and of exactly the file `identity`
        describes, else None."""
        if not self.enabled:
            return None
        try:
            manifest = json.loads(self.fs.cat_file(self._path(key, MANIFEST)))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("discarding unreadable cache entry %s: %s", key, exc)
            return None
        if not isinstance(manifest, dict) or manifest.get("format") != CACHE_FORMAT \
                or manifest.get("version") != __version__ or manifest.get("identity") != identity:
            return None
        return manifest

    def get(self, key, identity, admit=None):
        """The cached model of the file `identity` describes, or None (missing, stale, damaged,
        another format). `admit(memory_bytes)` is called before the tables are read, with the
        memory they take once loaded; it may raise to refuse them."""
        manifest = self.manifest(key, identity)
        if manifest is None:
            return None
        try:
            fields = manifest["model"]
            if admit is not None:
                admit(int(fields["memory_bytes"]))
            parts = {}
            for name, (file_name, digest) in manifest["parts"].items():
                if not _PART_NAME.fullmatch(file_name):  # a planted manifest naming ../../x
                    raise ValueError(f"part file name {file_name[:80]!r} is not one this cache writes")
                data = self.fs.cat_file(self._path(key, file_name))
                if _sha256(data) != digest:
                    raise ValueError(f"part {name} does not match its checksum")
                parts[name] = data
            model = decode_model(fields, parts)
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            # Any damage to an entry means: parse again (the new entry replaces this one).
            logger.warning("discarding damaged cache entry %s: %s", key, exc)
            return None
        self._touch(key)
        return model

    def _touch(self, key):
        if _is_local(self.fs):  # recently used: kept longest when the cache is trimmed
            try:
                os.utime(self._path(key, MANIFEST))
            except OSError:
                pass

    # --- writing ------------------------------------------------------------------------

    def put(self, key, identity, model, source=""):
        if not self.enabled:
            return
        try:
            fields, parts = encode_model(model)
        except (TypeError, ValueError) as exc:
            logger.info("not caching %s: %s", source, exc)
            return
        try:
            names = {}
            self.fs.makedirs(self._path(key), exist_ok=True)
            for name, data in parts.items():
                digest = _sha256(data)
                names[name] = [f"{name}-{digest[:24]}.arrow", digest]
                self._write(self._path(key, names[name][0]), data)
            manifest = {"format": CACHE_FORMAT, "version": __version__, "source": source, "identity": identity,
                        "written": time.time(), "model": fields, "parts": names}
            self._write(self._path(key, MANIFEST), json.dumps(manifest, allow_nan=True).encode())
            self._remove_unlisted(key, {file_name for file_name, _ in names.values()} | {MANIFEST})
        except OSError as exc:
            logger.warning("could not write cache entry for %s: %s", source, exc)
            return
        self._trim()

    def _write(self, path, data):
        """Write `data` so that a reader sees all of it or nothing: locally a temporary file
        renamed into place; an object store's objects appear whole."""
        if not _is_local(self.fs):
            self.fs.pipe_file(path, data)
            return
        tmp = os.path.join(self.root, f"{_TEMP_PREFIX}{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _remove_unlisted(self, key, keep):
        """Parts of an older version of this entry (another process may still be reading one:
        it then finds it missing and parses the trace)."""
        for path in self.fs.ls(self._path(key), detail=False):
            if posixpath.basename(path.rstrip("/")) not in keep:
                self.fs.rm_file(path)

    # --- housekeeping -------------------------------------------------------------------

    def _listing(self):
        try:
            return self.fs.ls(self.root, detail=True)
        except (OSError, ValueError):
            return []

    def _clean(self):
        """Remove temporary files of killed writes and entries of the old pickle format."""
        now = time.time()
        for info in self._listing():
            name = posixpath.basename(info["name"].rstrip("/"))
            stale_temp = name.startswith(_TEMP_PREFIX) and now - _mtime(info) > _STALE_TEMP_SECONDS
            if stale_temp or name.endswith(_OLD_SUFFIX):
                try:
                    self.fs.rm_file(info["name"])
                except OSError:
                    pass

    def _trim(self):
        """Drop least recently used entries until entries and temporary files fit `max_bytes`."""
        entries, total = [], 0
        for info in self._listing():
            if info.get("type") == "directory":
                try:
                    files = self.fs.ls(info["name"], detail=True)
                except (OSError, ValueError):
                    continue
                size = sum(f.get("size") or 0 for f in files)
                used = max((_mtime(f) for f in files if f["name"].endswith(MANIFEST)), default=0.0)
                entries.append((used, size, info["name"]))
                total += size
            else:
                total += info.get("size") or 0
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            try:
                self.fs.rm(path, recursive=True)
            except OSError:
                continue
            total -= size


def _is_local(fs):
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _mtime(info):
    value = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or 0
    return value.timestamp() if hasattr(value, "timestamp") else float(value)
