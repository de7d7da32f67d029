"""The disk cache's directory (`ModelCache`, a local path or an fsspec URL) of parsed trace
models and per-file summaries, so a restart or an evicted profile loads in a fraction of the
parse time: each entry's name (`key`, `summary_key`, `summary_index_key`), its reading and
writing, and the housekeeping that bounds the directory. What an entry holds, and how it is
encoded, sealed and checked, is `cache_format`'s.

Many processes may share the directory: parts are named by their hash and written under a
temporary name then renamed into place, and the manifest, which names them, is written last,
so a reader sees a whole entry or none. In an fsspec URL (`s3://...`) each object appears
whole when written.

Beside each model, small per-file summaries are entries of their own (`put_summary`, keyed
by `summary_key`): a view over many ranks is then served from them without parsing or loading
any rank's model. `preprocess` also writes, per run and span, one index entry holding every
worker's summary of a kind with each file's identity (`put_summary_index`): TensorBoard reads
one entry for a 1,024-rank job, not 1,024, and checks each member against its file as it
would a file's own entry.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import socket
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..trace.model import TraceModel
from ..version import __version__
from .cache_format import (CACHE_FORMAT, checked_manifest, decode_model, decode_summaries, encode_model,
                           encode_summaries, sealed_manifest, sha256, summary_format)
from .storage import is_url

if TYPE_CHECKING:  # types only
    from ..schema import Persisted

T = TypeVar("T")

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
# Temporary files are `.tmp-<host>-<pid>-<random>`: one whose writer, on this host, is gone
# belongs to a killed write and is removed on start; one of another host once this old (a
# write takes seconds), as is an entry directory without a manifest.
_TEMP_PREFIX = ".tmp-"
_TEMP_NAME = re.compile(r"\.tmp-([A-Za-z0-9_.]+)-([0-9]+)-[0-9a-f]{32}")
_HOST = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"
_OLD_SUFFIX = ".tbpp"
_STALE_TEMP_SECONDS = 3600.0
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}")
# Parts are named `<part>-<24 hex digits of its SHA-256>.arrow`, inside the entry's directory.
_PART_NAME = re.compile(r"(table-[a-z_]+|categories-[0-9]+)-[0-9a-f]{24}\.arrow")


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb_plugin_pytorch_profiler")


class ModelCache:
    """A directory (local path or fsspec URL) of cached `TraceModel`s and per-file summaries,
    bounded to `max_bytes` (least recently used entries go first; temporary files count too).
    `max_bytes=None` never trims: `preprocess` writes a job's whole cache, and a trim lists
    every entry after each write.

    The directory is created (and refused when another user owns it or others may write it),
    and temporary files and entries without a manifest of killed writes and old-format
    entries removed, on first use, not by the constructor. Locally nothing is read or
    written through a link, nor read from a file another user owns.
    """

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int | None = 10 << 30) -> None:
        self.directory = str(directory)
        self.max_bytes = max_bytes
        self._enabled: bool | None = None
        self.fs: Any = None  # the fsspec file system and the directory in it, set by `enabled`
        self.root = ""

    @property
    def enabled(self) -> bool:
        if self._enabled is None:
            self._enabled = self._prepare()
        return self._enabled

    def _prepare(self) -> bool:
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
                refused = _unsafe_directory(os.stat(self.root))
                if refused:
                    logger.warning("model cache disabled: %s %s", self.root, refused)
                    return False
            self._clean()
        except (OSError, ValueError, ImportError) as exc:
            logger.warning("model cache disabled: cannot use %s (%s)", self.directory, exc)
            return False
        return True

    def _path(self, *names: str) -> str:
        return (os.path.join if _is_local(self.fs) else posixpath.join)(self.root, *names)

    @staticmethod
    def key(source: str) -> str:
        """The entry name of a source file (path or URL) in this format and release."""
        text = f"{CACHE_FORMAT}|{__version__}|{source}"
        return sha256(text.encode("utf-8", "surrogatepass"))

    @staticmethod
    def summary_key(source: str, declared: Persisted) -> str:
        """The entry name of the summary `declared` (a `schema.Persisted`, e.g. the job view's
        `RANK_PART`) of a source file, in its format."""
        return ModelCache.key(f"summary:{summary_format(declared)}:{declared.name}|{source}")

    @staticmethod
    def summary_index_key(run_source: str, span: int, declared: Persisted) -> str:
        """The entry name of the index of the summaries `declared` of one span of every worker
        of the run directory `run_source` (path or URL), in their format."""
        return ModelCache.key(f"summary-index:{summary_format(declared)}:{declared.name}|{span}|{run_source}")

    @staticmethod
    def index_identity(run_source: str, span: int) -> dict[str, Any]:
        """What a run's summary index is checked against (its members carry their files')."""
        return {"run": run_source, "span": int(span)}

    # --- reading ------------------------------------------------------------------------

    def manifest(self, key: str, identity: dict[str, Any], entry_format: int | str = CACHE_FORMAT) \
            -> dict[str, Any] | None:
        """The entry's manifest when it is of `entry_format` (a model's: `CACHE_FORMAT`; a
        summary's: `summary_format`) and of exactly the file `identity` describes, else None."""
        if not self.enabled:
            return None
        try:
            manifest = checked_manifest(key, self._fetch(key, [MANIFEST])[MANIFEST])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as exc:
            logger.warning("discarding unreadable cache entry %s: %s", key, exc)
            return None
        if manifest["format"] != entry_format or manifest["version"] != __version__ or manifest["identity"] != identity:
            return None
        return manifest

    def get(self, key: str, identity: dict[str, Any], admit: Callable[[int], object] | None = None) \
            -> TraceModel | None:
        """The cached model of the file `identity` describes, or None (missing, stale, damaged,
        another format). `admit(memory_bytes)` is called before the tables are read, with the
        memory they take once loaded; it may raise to refuse them."""
        def admit_model(fields: dict[str, Any]) -> None:
            if admit is not None:
                admit(int(fields["memory_bytes"]))

        return self._read_entry(key, identity, "model", decode_model, admit_model)

    def get_summary(self, key: str, identity: dict[str, Any], declared: Persisted) -> Any:
        """The summary `declared` (a `schema.Persisted`, see `encode_summaries`) stored for the
        file `identity` describes, or None (missing, stale, damaged, another format)."""
        def decode(fields: dict[str, Any], parts: dict[str, bytes]) -> Any:
            members = decode_summaries(declared, fields, parts)
            if len(members) != 1 or members[0][1] != identity:
                raise ValueError("the entry holds the summary of another file")
            return members[0][2]

        return self._read_entry(key, identity, "summary", decode, entry_format=summary_format(declared))

    def get_summary_index(self, run_source: str, span: int, declared: Persisted) \
            -> dict[str, tuple[dict[str, Any], Any]] | None:
        """{source: (identity, summary)} of the run's index of the summaries `declared` (a
        `schema.Persisted`) (`put_summary_index`), or None (missing, damaged, another format);
        whether each member is still its file's is for the reader to check against the file's
        identity."""
        members = self._read_entry(self.summary_index_key(run_source, span, declared),
                                   self.index_identity(run_source, span), "summary",
                                   lambda fields, parts: decode_summaries(declared, fields, parts),
                                   entry_format=summary_format(declared))
        return None if members is None else {source: (identity, summary) for source, identity, summary in members}

    def _read_entry(self, key: str, identity: dict[str, Any], section: str,
                    decode: Callable[[dict[str, Any], dict[str, bytes]], T],
                    admit: Callable[[dict[str, Any]], object] | None = None, entry_format: int | str = CACHE_FORMAT) \
            -> T | None:
        """`decode(manifest[section], {part name: checked bytes})` of an entry of `entry_format`
        of the file `identity` describes; None when it is missing, stale or damaged in any way."""
        manifest = self.manifest(key, identity, entry_format)
        if manifest is None:
            return None
        try:
            fields = manifest[section]
            if admit is not None:
                admit(fields)
            for file_name, _ in manifest["parts"].values():
                if not _PART_NAME.fullmatch(file_name):  # a planted manifest naming ../../x
                    raise ValueError(f"part file name {file_name[:80]!r} is not one this cache writes")
            fetched = self._fetch(key, [file_name for file_name, _ in manifest["parts"].values()])
            parts = {}
            for name, (file_name, digest) in manifest["parts"].items():
                data = fetched[file_name]
                if sha256(data) != digest:
                    raise ValueError(f"part {name} does not match its checksum")
                parts[name] = data
            value = decode(fields, parts)
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            # Any damage to an entry means: parse again (the new entry replaces this one).
            logger.warning("discarding damaged cache entry %s: %s", key, exc)
            return None
        self._touch(key)
        return value

    def _fetch(self, key: str, file_names: Sequence[str]) -> dict[str, bytes]:
        """{file name: bytes} of files of the entry `key`. Locally nothing is read through a
        link (the entry directory and each file opened with O_NOFOLLOW) nor from a file or
        directory the server's user does not own: `ValueError` or `OSError` then."""
        if not _is_local(self.fs):
            paths = [self._path(key, name) for name in file_names]
            # One call for all parts: an object store's filesystem fetches them concurrently.
            fetched = self.fs.cat(paths) if paths else {}
            return {name: fetched[_fetched_key(self.fs, path)] for name, path in zip(file_names, paths)}
        directory = os.open(self._path(key), os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW)
        try:
            _check_owned(os.fstat(directory), key)
            return {name: _read_own_file(name, directory) for name in file_names}
        finally:
            os.close(directory)

    def _touch(self, key: str) -> None:
        if _is_local(self.fs):  # recently used: kept longest when the cache is trimmed
            try:
                os.utime(self._path(key, MANIFEST), follow_symlinks=False)
            except OSError:
                pass

    # --- writing ------------------------------------------------------------------------

    def put(self, key: str, identity: dict[str, Any], model: TraceModel, source: str = "") -> bool:
        """Store `model`, parsed from the file `identity` describes (`source` names it);
        whether it was written."""
        if not self.enabled:
            return False
        try:
            fields, parts = encode_model(model)
        except (TypeError, ValueError) as exc:
            logger.info("not caching %s: %s", source, exc)
            return False
        return self._write_entry(key, identity, source, "model", fields, parts)

    def put_summary(self, key: str, identity: dict[str, Any], summary: Any, declared: Persisted, source: str = "") \
            -> bool:
        """Store `summary` (of the kind `declared`, a `schema.Persisted`, see `encode_summaries`)
        of the file `identity` describes, under `key` (`summary_key`); whether it was written."""
        if not self.enabled:
            return False
        try:
            fields, parts = encode_summaries(declared, [(source, identity, summary)])
        except (TypeError, ValueError) as exc:
            logger.info("not caching the %s summary of %s: %s", type(summary).__name__, source, exc)
            return False
        return self._write_entry(key, identity, source, "summary", fields, parts, summary_format(declared))

    def put_summary_index(self, run_source: str, span: int, declared: Persisted,
                          members: Sequence[tuple[str, dict[str, Any], Any]]) -> bool:
        """Store one entry holding the summaries `declared` (a `schema.Persisted`) of every
        worker of one span of the run directory `run_source`, `members` = [(file's source, its
        identity, summary)]: a view over 1,024 ranks then reads one entry, not 1,024. Whether
        it was written."""
        if not self.enabled:
            return False
        try:
            fields, parts = encode_summaries(declared, members)
        except (TypeError, ValueError) as exc:
            logger.info("not caching the summary index of %s: %s", run_source, exc)
            return False
        key = self.summary_index_key(run_source, span, declared)
        return self._write_entry(key, self.index_identity(run_source, span), run_source, "summary", fields, parts,
                                 summary_format(declared))

    def _write_entry(self, key: str, identity: dict[str, Any], source: str, section: str, fields: dict[str, Any],
                     parts: dict[str, bytes], entry_format: int | str = CACHE_FORMAT) -> bool:
        """Write the parts, then the manifest naming them (`section`: `fields`) last.

        Another process may act on the same entry meanwhile: its housekeeping, or its own
        write of the same key, can remove the directory or a part between the writes here.
        An entry found incomplete once written (`_complete`), or a directory gone under a
        rename, is written once more; a second failure is a failed write."""
        names = {}
        for name, data in parts.items():
            digest = sha256(data)
            names[name] = [f"{name}-{digest[:24]}.arrow", digest]
        manifest = {"format": entry_format, "version": __version__, "source": source, "identity": identity,
                    "written": time.time(), section: fields, "parts": names}
        manifest = sealed_manifest(key, manifest)
        listed = {file_name for file_name, _ in names.values()} | {MANIFEST}
        try:
            for attempt in (1, 2):
                try:
                    self._write_parts(key, names, parts, manifest)
                except FileNotFoundError:  # the directory went under a rename
                    if attempt == 2:
                        raise
                    continue
                if self._complete(key, listed):
                    break
                if attempt == 2:
                    raise FileNotFoundError(f"parts of the entry {key} were removed while it was written")
            self._remove_unlisted(key, listed)
        except OSError as exc:
            logger.warning("could not write cache entry for %s: %s", source, exc)
            # A full disk fails the write part way: no manifest names the parts written, so
            # they go now, not at the next trim (which may never come while the disk is full).
            self._remove_orphaned(key)
            return False
        if self.max_bytes is not None:
            self._trim()
        return True

    def _write_parts(self, key: str, names: Mapping[str, Sequence[str]], parts: dict[str, bytes],
                     manifest: dict[str, Any]) -> None:
        self._entry_directory(key)
        if _is_local(self.fs):
            for name, data in parts.items():
                self._write(self._path(key, names[name][0]), data)
        elif parts:  # one call: an object store's filesystem uploads the parts concurrently
            self.fs.pipe({self._path(key, names[name][0]): data for name, data in parts.items()})
        self._write(self._path(key, MANIFEST), json.dumps(manifest, allow_nan=True).encode())

    def _complete(self, key: str, listed: set[str]) -> bool:
        """Whether the entry `key` holds every file of `listed` (its manifest and parts), as
        just written. Only checked locally, where housekeeping of other processes runs."""
        if not _is_local(self.fs):
            return True
        try:
            return listed <= set(os.listdir(self._path(key)))
        except FileNotFoundError:
            return False

    def _write(self, path: str, data: bytes) -> None:
        """Write `data` so that a reader sees all of it or nothing: locally a temporary file
        renamed into place; an object store's objects appear whole."""
        if not _is_local(self.fs):
            self.fs.pipe_file(path, data)
            return
        tmp = os.path.join(self.root, f"{_TEMP_PREFIX}{_HOST}-{os.getpid()}-{uuid.uuid4().hex}")
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

    def _entry_directory(self, key: str) -> None:
        """Make the entry's directory. Locally one that is a link is removed as a link (not
        written through: the files of whatever it points to are never touched) and made anew."""
        path = self._path(key)
        if not _is_local(self.fs):
            self.fs.makedirs(path, exist_ok=True)
            return
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                logger.warning("cache entry %s is a symbolic link: removed, not followed", key)
                os.unlink(path)
            elif _foreign(info):
                raise PermissionError(f"the entry directory {key} {_foreign(info)}")
        except FileNotFoundError:
            pass
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            # Written now: another process's housekeeping judges by this time that the
            # directory (maybe a killed write's, hours old) is in use.
            os.utime(path, follow_symlinks=False)

    def _remove_unlisted(self, key: str, keep: set[str]) -> None:
        """Parts of an older version of this entry (another process may still be reading one:
        it then finds it missing and parses the trace). Only files named as this cache names
        its parts are removed: whatever else lies there was not written by it."""
        for path in self.fs.ls(self._path(key), detail=False):
            name = posixpath.basename(path.rstrip("/"))
            if name not in keep and _PART_NAME.fullmatch(name):
                self.fs.rm_file(path)

    # --- housekeeping -------------------------------------------------------------------

    def _listing(self) -> list[dict[str, Any]]:
        try:
            return self.fs.ls(self.root, detail=True)
        except (OSError, ValueError):
            return []

    def _clean(self) -> None:
        """Remove temporary files of killed writes, entries without a manifest (a write that
        failed or was killed) and entries of the old pickle format."""
        now = time.time()
        for info in self._listing():
            name = posixpath.basename(info["name"].rstrip("/"))
            if info.get("type") == "directory" and _ENTRY_NAME.fullmatch(name):
                # Locally a listing per entry costs little; on an object store it is a request
                # per entry at every start, and a trim removes such entries first anyway.
                if _is_local(self.fs):
                    self._remove_orphaned(name, older_than=now - _STALE_TEMP_SECONDS, directory=info)
            elif _killed_write(name, _mtime(info), now) or name.endswith(_OLD_SUFFIX):
                try:
                    self.fs.rm_file(info["name"])
                except OSError:
                    pass

    def _remove_entry(self, key: str, names: list[str] | None = None) -> None:
        """Remove the files of the entry `key` this cache writes (its manifest, then its parts;
        `names`: the fsspec listing of the entry when known), and the directory once empty.
        Files it does not write stay; an entry that is a link is removed as a link."""
        path = self._path(key)
        if _is_local(self.fs) and os.path.islink(path):
            os.unlink(path)
            return
        if names is None:
            names = [posixpath.basename(p.rstrip("/")) for p in self.fs.ls(path, detail=False)]
        for name in sorted(names, key=lambda n: n != MANIFEST):  # the manifest first: no half entry is read
            if name == MANIFEST or _PART_NAME.fullmatch(name):
                self.fs.rm_file(self._path(key, name))
        if _is_local(self.fs):
            try:
                os.rmdir(path)
            except OSError:  # not empty: holds files this cache did not write
                pass

    def _remove_orphaned(self, key: str, older_than: float | None = None, directory: dict[str, Any] | None = None) \
            -> None:
        """Remove the entry `key` when it has no manifest and (with `older_than`) neither the
        entry's `directory` (its listing info) nor any of its files changed since then: its
        parts are named by nothing and never read. A directory just made by another process's
        write holds no file yet: its own time says it is in use (`_in_progress`)."""
        try:
            files = self.fs.ls(self._path(key), detail=True)
            names = [posixpath.basename(f["name"].rstrip("/")) for f in files]
            if MANIFEST in names or older_than is not None and _in_progress(directory, files, older_than):
                return
            self._remove_entry(key, names)
        except (OSError, ValueError):
            pass

    def _trim(self) -> None:
        """Drop least recently used entries until entries and temporary files fit `max_bytes`."""
        entries, total = [], 0
        for info in self._listing():
            if info.get("type") == "directory":
                try:
                    files = self.fs.ls(info["name"], detail=True)
                except (OSError, ValueError):
                    continue
                size = sum(f.get("size") or 0 for f in files)
                total += size
                manifests = [_mtime(f) for f in files if f["name"].endswith(MANIFEST)]
                # Another process's write in progress counts toward the size, but is its own.
                if not manifests and _in_progress(info, files, time.time() - _STALE_TEMP_SECONDS):
                    continue
                entries.append((max(manifests, default=0.0), size, info["name"]))
            else:
                total += info.get("size") or 0
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:  # type: ignore[operator]  # (a cache without a bound is never trimmed)
                break
            try:
                self._remove_entry(posixpath.basename(path.rstrip("/")))
            except OSError:
                continue
            total -= size


def _killed_write(name: str, mtime: float, now: float) -> bool:
    """Whether `name` in the cache directory is the temporary file of a write that was killed."""
    if not name.startswith(_TEMP_PREFIX):
        return False
    if now - mtime > _STALE_TEMP_SECONDS:
        return True
    writer = _TEMP_NAME.fullmatch(name)
    if writer is None or writer[1] != _HOST:  # another host's: its processes are not seen here
        return False
    try:
        os.kill(int(writer[2]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):  # another user's live process, or no pid at all
        pass
    return False


def _in_progress(directory: dict[str, Any] | None, files: Iterable[dict[str, Any]], since: float) -> bool:
    """Whether an entry without a manifest may be a write in progress: its directory (fsspec
    listing info, None when unknown) or one of its files (listing infos) changed after `since`."""
    return any(_mtime(info) > since for info in [*([directory] if directory else []), *files])


def _foreign(info: os.stat_result) -> str:
    """"belongs to another user (uid N)" when the server's user does not own what `info` (an
    `os.stat_result`) describes, else "": whoever writes an entry decides the numbers shown."""
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"belongs to another user (uid {info.st_uid})"
    return ""


def _unsafe_directory(info: os.stat_result) -> str:
    """Why the cache directory `info` (an `os.stat_result`) describes may not be used, or "":
    it belongs to another user, or others may write into it and so plant or replace entries
    (a sticky directory, as /tmp, lets them add entries only, and those are refused as not
    owned by the server's user)."""
    if _foreign(info):
        return _foreign(info)
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        return (f"is writable by other users (mode {stat.S_IMODE(info.st_mode):o}), who could plant entries; "
                "chmod go-w it, or set --profiler_cache_dir to a directory of your own")
    return ""


# Local reads never go through a link: a link in place of an entry or a file fails to open.
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _check_owned(info: os.stat_result, name: str) -> None:
    """Raise ValueError when another user owns `name`, which `info` describes."""
    if _foreign(info):
        raise ValueError(f"{name} {_foreign(info)}")


def _read_own_file(name: str, directory: int) -> bytes:
    """The bytes of the regular file `name` in the directory open as `directory`, not read
    through a link, and only when the server's user owns it (OSError or ValueError)."""
    # O_NONBLOCK: a pipe planted under a part's name fails the check below instead of blocking.
    fd = os.open(name, os.O_RDONLY | _NO_FOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=directory)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{name} is not a regular file")
        _check_owned(info, name)
        return fh.read()


def _fetched_key(fs: Any, path: str) -> str:
    """The key under which `fs.cat([path, ...])` returns `path`'s bytes (its own form of it)."""
    return fs._strip_protocol(path)


def _is_local(fs: Any) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _mtime(info: dict[str, Any]) -> float:
    value = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or 0
    return value.timestamp() if hasattr(value, "timestamp") else float(value)
