"""Reading bytes: local files, gzip, and fsspec URLs (s3://, gs://, az://, file://, ...).

Everything that touches a file system goes through `Storage`, so one place decides how paths
are joined and that nothing outside the root is read.
"""

import errno
import gzip
import hashlib
import io
import mmap
import os
import posixpath
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .budget import RAISE_IT
from ..errors import FileAccessError, PathOutsideLogdirError, TraceError, os_reason
from ..snapshot.sniff import looks_like_pickle

GZIP_MAGIC = b"\x1f\x8b"
# How many directory levels below the root a walk descends: deeper trees (a directory nested
# 1,400 levels took the whole scan down with the recursion limit) are reported, not walked.
MAX_SCAN_DEPTH = 64
_WINDOWS_PATHS = os.name == "nt"
# A 10-byte header, an empty deflate block and an 8-byte trailer: the shortest complete gzip file.
_GZIP_MIN_SIZE = 20


def is_url(path: str | os.PathLike[str]) -> bool:
    """True for `scheme://...` paths other than plain local ones."""
    return "://" in str(path) and not str(path).startswith("file://")


def _strip_file_scheme(path: str) -> str:
    path = str(path)
    return path[len("file://"):] if path.startswith("file://") else path


@dataclass(frozen=True)
class FileStat:
    """What tells one version of a file from another without reading it: size, mtime, and
    `version`: inode and ctime for a local file (a file replaced by one of the same size with
    its mtime kept, by `cp -p` or `rsync -a`, or whose permissions changed, has a new ctime),
    the ETag or generation an object store gives, where it gives one."""

    size: int
    mtime: float
    version: str = ""


# How much of a file's start and end `Storage.identity` hashes.
_IDENTITY_HASH_BYTES = 64 << 10


def _budget_exceeded(path: str, limit: int, head: bytes | bytearray | memoryview) -> TraceError:
    """The error of a gzip inflating past `limit`; `head`, its first inflated bytes, tells
    what it holds (a memory snapshot's pickle, else a trace's JSON)."""
    what = "pickle" if looks_like_pickle(bytes(head[:2])) else "JSON"
    return TraceError(path, f"too large to load: its {what} inflates to more than {limit >> 20} MiB, what the memory "
                            f"budget lets it take ({RAISE_IT})")


def refuse_corrupt_gzip_start(raw: bytes | bytearray, path: str) -> None:
    """Raise a TraceError saying so when the first bytes `raw` of a gzip file do not inflate
    (random bytes after the magic): such a file is no gzip of JSON, whatever size its last
    four bytes "claim" (200 KB of random bytes were refused as too large to load)."""
    try:
        zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(bytes(raw[:1 << 16]), 1)
    except zlib.error as exc:
        raise TraceError(path, f"not a gzip of JSON: the gzip stream is corrupt from its start ({exc})") from None


def decompress_if_gzip(data: bytes | bytearray, path: str, limit: int | None = None) -> bytes | bytearray:
    """Return `data` inflated when it is gzip, unchanged otherwise; truncation is a TraceError,
    and so is a stream inflating to more than `limit` bytes (counted as it inflates: the
    size a gzip trailer records is a claim, modulo 4 GiB)."""
    if not data.startswith(GZIP_MAGIC):
        return data
    refuse_corrupt_gzip_start(data, path)
    with gzip.GzipFile(fileobj=_BytesReader(data)) as stream:
        try:
            inflated = stream.read(-1 if limit is None else limit + 1)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(path, f"the gzip stream is corrupt or truncated ({exc})") from None
    if limit is not None and len(inflated) > limit:
        raise _budget_exceeded(path, limit, inflated)
    return inflated


class _BytesReader:
    """A read-only file over bytes-like `data` without copying it (io.BytesIO copies a memoryview)."""

    def __init__(self, data: bytes | bytearray | memoryview | mmap.mmap) -> None:
        self._view, self._pos = memoryview(data), 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else self._pos + size
        chunk = bytes(self._view[self._pos:end])
        self._pos += len(chunk)
        return chunk

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos if whence == 0 else (self._pos + pos if whence == 1 else len(self._view) + pos)
        return self._pos

    def tell(self) -> int:
        return self._pos


def inflate_head(raw: bytes, size: int) -> bytes:
    """At most `size` bytes of what the first bytes `raw` of a file hold: inflated when they
    are gzip (b"" when that stream is corrupt), as they are otherwise."""
    if raw.startswith(GZIP_MAGIC):
        try:
            return zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(raw, size)
        except zlib.error:
            return b""
    return raw


class TraceBytes:
    """A trace's JSON bytes (`data`, bytes-like) and a way to hand back the part of them the
    loader has consumed.

    A local file is read (inflated, when gzip) into an anonymous memory mapping (never a
    mapping of the file itself: a file truncated while mapped would crash the process), whose
    pages `release` returns to the operating system as the loader moves on: a large trace's
    text does not stay in memory whole while its columns are built. Remote files are plain
    `bytes`; `release` leaves them alone.
    """

    def __init__(self, data: bytes | bytearray | memoryview, mapping: mmap.mmap | None = None) -> None:
        self.data = data
        self._mapping = mapping if hasattr(mmap, "MADV_DONTNEED") else None
        self._released = 0

    def release(self, upto: int | None = None) -> None:
        """The first `upto` bytes (all when None) will not be read again."""
        if self._mapping is None:
            return
        upto = len(self.data) if upto is None else min(upto, len(self.data))
        end = upto - upto % mmap.PAGESIZE
        if end > self._released:
            self._mapping.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
            self._released = end


def _no_report(fraction: float) -> None:
    pass


# How much of a trace's JSON `Storage.json_sample` returns: enough events to tell how many
# bytes an event takes in this file.
_SAMPLE_BYTES = 1 << 20

# Reads go in pieces of this size so that a long read (a large or remote file) can report
# how far it is; a piece is large enough that the number of calls costs nothing.
_READ_PIECE = 32 << 20


def _read_pieces(stream: io.BufferedIOBase, view: memoryview, progress: Callable[..., object]) -> int:
    """Fill `view` from `stream` piece by piece, calling `progress()` after each piece; the
    number of bytes read (fewer than `len(view)` when the stream ends first)."""
    filled = 0
    while filled < len(view):
        count = stream.readinto(view[filled:filled + _READ_PIECE])
        if not count:
            break
        filled += count
        progress()
    return filled


def _read_into_mapping(stream: io.BufferedIOBase, size: int, populate: bool = True,
                       progress: Callable[..., object] = _no_report) -> TraceBytes:
    """Up to `size` bytes of a stream (a file, or a `gzip.GzipFile` inflating one) in an
    anonymous mapping, as a `TraceBytes`. `populate` faults the pages in up front
    (MAP_POPULATE), which costs less than one fault per page while reading, but only suits a
    size known to be right."""
    if size <= 0:
        return TraceBytes(b"")
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
    mapping = mmap.mmap(-1, size, flags=flags)
    view = memoryview(mapping)
    filled = _read_pieces(stream, view, progress)
    return TraceBytes(view[:filled], mapping)


def _gzip_size(fh: io.BufferedIOBase, size: int) -> int:
    """The inflated size a gzip file's trailer records (modulo 4 GiB, so at least the
    compressed size), capped at deflate's maximum ratio (1032:1) against a damaged trailer."""
    if size < 18:
        return size
    fh.seek(size - 4)
    isize = int.from_bytes(fh.read(4), "little")
    fh.seek(0)
    while isize < size:  # the trailer wrapped around 4 GiB
        isize += 1 << 32
    return min(isize, size * 1032)


def _open_regular(full: str) -> io.BufferedReader:
    """A local file opened for binary reading, refusing what is not a regular file.

    Opened without blocking, then checked: a FIFO named like a trace (or a link to one, or to
    a device) would otherwise block `open` or `read` for good, and with it the scan or the
    loader thread that every run waits on."""
    fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", full)
        if not stat.S_ISREG(mode):
            kind = "a pipe" if stat.S_ISFIFO(mode) else "a device or socket"
            raise OSError(errno.EINVAL, f"not a regular file but {kind}", full)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class Storage:
    """A root directory (local path or fsspec URL) and read access below it.

    Paths handed to the methods are relative to the root, use `/` separators, and must stay
    below the root: `..` components and absolute paths raise `PathOutsideLogdirError`.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        root = str(root)
        self.remote = is_url(root)
        # What a failed read raises: locally an OSError (or ValueError); an object store's
        # back-end raises its own types too (botocore's NoCredentialsError, a connection
        # error), each a reason to report, never a crash.
        self._failures = (Exception,) if self.remote else (OSError, ValueError)
        if self.remote:
            import fsspec  # optional back-ends (s3fs, gcsfs, adlfs) load on first use

            self.protocol = root.split("://", 1)[0]
            try:
                self.fs, self.root = fsspec.core.url_to_fs(root)
            except (ValueError, ImportError) as exc:  # "Protocol not known", "Please install gcsfs"
                raise FileAccessError(root, f"cannot open the {self.protocol}:// location ({exc})") from None
            self.root = self.root.rstrip("/")
        else:
            self.fs = None
            self.root = os.path.abspath(_strip_file_scheme(root))
            self.protocol = "file"

    def __repr__(self) -> str:
        return f"Storage({self.display(None)!r})"

    def display(self, rel: str | None) -> str:
        """The path a user recognises, for messages."""
        # http(s)'s file system keeps the scheme in its paths
        base = self.root if not self.remote or "://" in self.root else f"{self.protocol}://{self.root}"
        return base if not rel or rel == "." else f"{base.rstrip('/')}/{rel}"  # the root "/" is no "//"

    def resolve(self, rel: str) -> str:
        """Absolute path (or bucket key) of `rel`, refusing anything that leaves the root."""
        rel = str(rel)
        # Only Windows reads "\\" as a separator and "C:" as a drive; elsewhere both are plain
        # characters of a name (a worker file named "a\\b" or "C:x" is in its directory).
        if _WINDOWS_PATHS and not self.remote:
            rel = rel.replace("\\", "/")
            if len(rel) > 1 and rel[1] == ":":
                raise PathOutsideLogdirError(rel, "absolute paths are not accepted")
        if rel.startswith("/"):
            raise PathOutsideLogdirError(rel, "absolute paths are not accepted")
        normalised = posixpath.normpath(rel) if rel else "."
        if normalised == ".." or normalised.startswith("../"):
            raise PathOutsideLogdirError(rel, "the path leaves the log directory")
        if self.remote:
            return self.root if normalised == "." else f"{self.root}/{normalised}"
        return os.path.join(self.root, *normalised.split("/")) if normalised != "." else self.root

    def stat(self, rel: str) -> FileStat:
        full = self.resolve(rel)
        try:
            if self.remote:
                info = self.fs.info(full)
                mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or 0
                if hasattr(mtime, "timestamp"):
                    mtime = mtime.timestamp()
                version = info.get("ETag") or info.get("etag") or info.get("generation") or info.get("version_id") or ""
                return FileStat(int(info.get("size") or 0), float(mtime or 0), str(version))
            st = os.stat(full)
            return FileStat(st.st_size, st.st_mtime, f"{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}")
        except self._failures as exc:
            raise FileAccessError(self.display(rel), f"cannot stat the file ({os_reason(exc)})") from None

    def identity(self, rel: str) -> dict[str, Any]:
        """What the disk cache checks an entry against: the file's `stat` and a SHA-256 of its
        first and last 64 KB, so that content replaced under the same size and mtime (and, on a
        file system whose ctime cannot be trusted, the same inode) is not taken for the old."""
        stat = self.stat(rel)
        try:
            with self.open_stored(rel, block_size=_IDENTITY_HASH_BYTES) as fh:
                head = fh.read(_IDENTITY_HASH_BYTES)
                fh.seek(max(stat.size - _IDENTITY_HASH_BYTES, 0))
                tail = fh.read(_IDENTITY_HASH_BYTES)
        except TraceError:  # open_stored's, with its reason
            raise
        except self._failures as exc:
            raise FileAccessError(self.display(rel), f"cannot read the file ({os_reason(exc)})") from None
        digest = hashlib.sha256(head + b"|" + tail).hexdigest()
        return {"size": stat.size, "mtime": stat.mtime, "version": stat.version, "head_tail_sha256": digest}

    def open_stored(self, rel: str, block_size: int | None = None) \
            -> Any:  # a local io.BufferedReader, or fsspec's file
        """The file opened for binary reading, as stored (no decompression); `block_size` is
        how much a remote read fetches at a time (fsspec's default when None)."""
        full = self.resolve(rel)
        try:
            if self.remote:
                return self.fs.open(full, "rb", **({"block_size": block_size} if block_size else {}))
            return _open_regular(full)
        except self._failures as exc:
            raise FileAccessError(self.display(rel), f"cannot read the file ({os_reason(exc)})") from None

    def read_bytes(self, rel: str, limit: int | None = None) -> bytes:
        """The file's bytes (at most `limit` of them), as stored (no decompression)."""
        # A small block size for head reads: fsspec's default would fetch ~50 MB to sniff 4 KB.
        with self.open_stored(rel, block_size=max(limit, 1 << 16) if limit else None) as fh:
            try:
                return fh.read(limit) if limit else fh.read()
            except self._failures as exc:
                raise FileAccessError(self.display(rel), f"cannot read the file ({os_reason(exc)})") from None

    def read_trace(self, rel: str, progress: Callable[[float], object] = _no_report, limit: int | None = None) \
            -> TraceBytes:
        """The file's JSON bytes (inflated when the file is gzip) as a `TraceBytes`;
        `progress(fraction)` hears which fraction of the stored file is read so far. A gzip
        inflating to more than `limit` bytes is a TraceError, found as it inflates."""
        if self.remote:
            return TraceBytes(decompress_if_gzip(self._read_remote(rel, progress), self.display(rel), limit))
        full = self.resolve(rel)
        try:
            with _open_regular(full) as fh:
                size = os.fstat(fh.fileno()).st_size

                def report() -> None:  # a gzip stream reads ahead: its file position is what is read
                    progress(min(fh.tell() / size, 1.0))

                if fh.read(2) != GZIP_MAGIC:
                    fh.seek(0)
                    # A file still being written may have grown since: what is read is what
                    # the size said, and an incomplete JSON is reported (and retried) as
                    # truncated.
                    return _read_into_mapping(fh, size, progress=report)
                # The trailer's size is a claim (a file still being written has none yet; it
                # wraps at 4 GiB): with a `limit` the mapping is that large, without one the
                # claim's size. It is not populated, so pages never written cost nothing; a
                # stream holding more than the mapping is refused past `limit`, inflated whole
                # (counted against nothing) without one, as is a claim too large to map.
                if size < _GZIP_MIN_SIZE:  # GzipFile reads such a stub as empty, not as cut off
                    raise EOFError(f"{size} bytes, shorter than any complete gzip file")
                fh.seek(0)
                refuse_corrupt_gzip_start(fh.read(1 << 16), self.display(rel))
                capacity = _gzip_size(fh, size) if limit is None else limit
                fh.seek(0)
                stream = gzip.GzipFile(fileobj=fh)
                try:
                    inflated = _read_into_mapping(stream, capacity, populate=False, progress=report)
                except OverflowError:
                    inflated = None
                except OSError as exc:
                    if exc.errno != errno.ENOMEM:
                        raise
                    inflated = None
                if inflated is not None and len(inflated.data) == capacity and stream.read(1):
                    if limit is not None:
                        raise _budget_exceeded(self.display(rel), limit, inflated.data)
                    inflated = None
                if inflated is None:
                    fh.seek(0)
                    inflated = TraceBytes(decompress_if_gzip(fh.read(), self.display(rel), limit))
                return inflated
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise TraceError(self.display(rel), f"the gzip stream is corrupt or truncated ({exc})") from None
        except self._failures as exc:
            raise FileAccessError(self.display(rel), f"cannot read the file ({os_reason(exc)})") from None

    def _read_remote(self, rel: str, progress: Callable[[float], object]) -> bytes | bytearray:
        """A remote file's stored bytes, read piece by piece to report progress."""
        with self.open_stored(rel) as fh:
            try:
                size = fh.size if isinstance(getattr(fh, "size", None), int) else None
                if size is None:  # a file system that cannot tell the size up front
                    return fh.read()
                data = bytearray(size)
                filled = _read_pieces(fh, memoryview(data), lambda: progress(fh.tell() / size if size else 1.0))
                del data[filled:]  # a file that shrank since it was listed
                return data
            except self._failures as exc:
                raise FileAccessError(self.display(rel), f"cannot read the file ({os_reason(exc)})") from None

    def json_sample(self, rel: str, head_bytes: int = _SAMPLE_BYTES) -> tuple[int, bytes]:
        """(size of the trace's JSON in bytes: the file size, or for gzip the size the trailer
        records, modulo 4 GiB, so at least the compressed size; the first `head_bytes` of the JSON).

        A gzip whose start does not inflate is a TraceError saying so: its trailer's size
        claim is then noise (random bytes "claimed" 590 MB), not a reason to refuse it as
        too large."""
        full = self.resolve(rel)
        size = self.stat(rel).size
        try:
            with (self.fs.open(full, "rb", block_size=1 << 18) if self.remote else _open_regular(full)) as fh:
                if fh.read(2) != GZIP_MAGIC:
                    fh.seek(0)
                    return size, fh.read(head_bytes) if head_bytes else b""
                claimed = _gzip_size(fh, size)
                if not head_bytes or size < _GZIP_MIN_SIZE:  # a stub: `read_trace` says what it is
                    return claimed, b""
                raw = fh.read(max(head_bytes // 4, 1 << 16))
        except self._failures as exc:
            raise FileAccessError(self.display(rel), f"cannot read the file ({os_reason(exc)})") from None
        refuse_corrupt_gzip_start(raw, self.display(rel))
        return claimed, inflate_head(raw, head_bytes)

    def leaves_root(self, rel: str, stored: io.BufferedIOBase) -> bool:
        """True when `stored`, the local file `rel` opened by `open_stored`, lies outside the
        root's real path: it was reached through a symbolic link leading out. Judged on the
        open handle where the system tells its path (a link swapped after the open changes
        nothing). Remote files never do."""
        if self.remote:
            return False
        handle_path = f"/proc/self/fd/{stored.fileno()}"
        real = os.readlink(handle_path) if os.path.islink(handle_path) else os.path.realpath(self.resolve(rel))
        return not _inside(real, os.path.realpath(self.root))

    def read_head(self, rel: str, size: int = 4096) -> bytes:
        """The first `size` bytes of the (decompressed) file, to sniff its type."""
        return inflate_head(self.read_bytes(rel, limit=size), size)

    def walk(self, on_skip: Callable[[str, str], object] | None = None) -> Iterator[tuple[str, list[str]]]:
        """Yield `(relative_dir, [file names])` for every directory below the root, the root first.

        Local symlinks are followed, each real directory visited once, so link loops end. A
        directory that cannot be listed, or lies more than `MAX_SCAN_DEPTH` levels below the
        root, is not walked (nor what it holds) and is reported as `on_skip(relative_dir,
        reason)`; the walk goes on with the rest. The walk keeps its own stack: a tree of any
        depth costs no recursion.
        """
        report = on_skip or _no_skip_report
        if self.remote:
            yield from self._walk_remote(report)
            return
        seen = set()
        real_root = os.path.realpath(self.root)
        pending = [(".", self.root)]
        while pending:
            rel, full = pending.pop()
            real = os.path.realpath(full)
            if real in seen:
                continue
            seen.add(real)
            try:
                with os.scandir(full) as listing:
                    entries = list(listing)
            except OSError as exc:
                report(rel, f"cannot list the directory ({os_reason(exc)})")
                continue
            files: list[str] = []
            dirs: list[str] = []
            for entry in entries:
                try:
                    is_dir = entry.is_dir()  # follows links, as discovery does
                except OSError:
                    is_dir = False
                (dirs if is_dir else files).append(entry.name)
            yield rel, sorted(files)
            depth = 0 if rel == "." else rel.count("/") + 1
            # Pushed in reverse, so subdirectories are walked in name order.
            for name in sorted(dirs, reverse=True):
                child_rel = name if rel == "." else f"{rel}/{name}"
                child = os.path.join(full, name)
                # A link to a directory inside the root is not followed: that directory is
                # walked under its own name (an `alias -> run` link sorting first hid `run`).
                if _links_into(child, real_root):
                    continue
                if depth + 1 > MAX_SCAN_DEPTH:
                    report(child_rel, f"more than {MAX_SCAN_DEPTH} levels below the log directory: not scanned")
                    continue
                pending.append((child_rel, child))

    def _walk_remote(self, report: Callable[[str, str], object]) -> Iterator[tuple[str, list[str]]]:
        try:
            entries = self.fs.find(self.root, withdirs=False, detail=False)
        except self._failures as exc:
            report(".", f"cannot list the directory ({os_reason(exc)})")
            return
        by_dir: dict[str, list[str]] = {}
        too_deep: set[str] = set()
        for full in entries:
            if full.endswith("/"):
                continue  # a zero-byte "folder" marker object, not a file
            rel = posixpath.relpath(full, self.root)
            if rel == ".":
                continue
            parent, name = posixpath.split(rel)
            parts = parent.split("/") if parent else []
            if len(parts) > MAX_SCAN_DEPTH:
                too_deep.add("/".join(parts[:MAX_SCAN_DEPTH + 1]))
                continue
            by_dir.setdefault(parent or ".", []).append(name)
        for rel in sorted(too_deep):
            report(rel, f"more than {MAX_SCAN_DEPTH} levels below the log directory: not scanned")
        # The root first, as the local walk does (load_run reads only the first item), then the rest.
        yield from sorted(by_dir.items(), key=lambda item: (item[0] != ".", item[0]))


def _no_skip_report(rel: str, reason: str) -> None:
    pass


def _links_into(path: str, real_root: str) -> bool:
    """True when `path` is a symbolic link to somewhere inside `real_root` (or to it)."""
    return os.path.islink(path) and _inside(os.path.realpath(path), real_root)


def _inside(real_path: str, real_root: str) -> bool:
    try:
        return os.path.commonpath([real_path, real_root]) == real_root
    except ValueError:  # different drives
        return False


def open_single(path: str | os.PathLike[str]) -> tuple[Storage, str]:
    """Split a file path or URL into a `Storage` for its directory and the file's name."""
    path = str(path)
    if is_url(path):
        scheme, rest = path.split("://", 1)
        parent, name = posixpath.split(rest)
        return Storage(f"{scheme}://{parent}"), name
    local = os.path.abspath(_strip_file_scheme(path))
    return Storage(os.path.dirname(local)), os.path.basename(local)
