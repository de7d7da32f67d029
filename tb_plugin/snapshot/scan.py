"""A pickle's opcodes checked before CPython's unpickler runs them (`check_pickle`).

The C unpickler allocates what the file declares before it looks further: a memo slot
written at index i grows its memo array to 2i slots (a 9-byte pickle putting at 2^27 takes
2 GB), a declared length (BINBYTES8, BINUNICODE8, FRAME, up to 2^64) is allocated or read
before the bytes are found missing, and EXT1/EXT2/EXT4 fetch an object from `copyreg`'s
extension cache without asking `find_class`. So every opcode is walked first, without
building anything: memo indexes must stay below the slots the pickle has put so far (a
pickler numbers them 0, 1, 2, ...), declared lengths within the bytes that follow, EXT and
the text opcodes that name globals are refused; each refusal is a `TraceError` naming the
limit. Nothing is allocated per opcode.

Speed: the common opcodes (fixed-size arguments, one-byte lengths) are skipped by one
regular expression (C code, no Python per opcode); Python looks only at the rare ones that
carry a memo index above 2^20, a longer length, a frame or a line of text: about as long
as `pickle.loads` on a torch snapshot.
"""

import functools
import re
from collections.abc import Iterable

from ..errors import TraceError

# What a memo slot costs the C unpickler: a pointer, in an array grown to twice the index.
MEMO_BYTES_PER_SLOT = 16


def _any_of(codes: Iterable[int]) -> bytes:
    return b"[" + b"".join(re.escape(bytes([c])) for c in codes) + b"]"


def _counted(opcode: int, width: int = 1) -> bytes:
    """The opcode followed by a length below 256 (`width` bytes, little-endian) and that many bytes."""
    return re.escape(bytes([opcode])) + b"(?:" + b"|".join(
        re.escape(n.to_bytes(width, "little")) + (b".{%d}" % n if n else b"") for n in range(256)) + b")"


_NO_ARGUMENT = b"()012NRabdelostu}]\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98Q"


@functools.cache
def _skip() -> re.Pattern[bytes]:
    """A run of the opcodes safe to skip unseen, most frequent first (a torch snapshot is
    mostly LONG_BINGET, BINGET, MEMOIZE, MARK, LONG1 and the containers' opcodes); compiled on
    first use: its 1,000 alternatives take 20 ms to compile, which a process that reads no
    snapshot should not pay at import."""
    return re.compile(b"(?s:(?:" + b"|".join([
        _any_of(b"Jj") + b".{4}",  # BININT, LONG_BINGET
        _any_of(b"Khq") + b".",  # BININT1, BINGET, BINPUT (a one-byte memo index: at most 256 slots)
        _any_of(_NO_ARGUMENT),
        _counted(0x8A),  # LONG1
        b"M.{2}",  # BININT2
        b"G.{8}",  # BINFLOAT
        b"r.{2}[\x00-\x0f]\x00",  # LONG_BINPUT below 2^20 (16 MB of memo at most)
        _counted(0x8C), _counted(ord("C")), _counted(ord("U")),  # SHORT_BINUNICODE, SHORT_BINBYTES, SHORT_BINSTRING
        _counted(ord("X"), 4),  # BINUNICODE of a short string (protocols 2 and 3 write every string so)
    ]) + b")*+)")


_LENGTH4 = {ord("X"): "BINUNICODE", ord("B"): "BINBYTES", ord("T"): "BINSTRING", 0x8B: "LONG4"}
_LENGTH8 = {0x8D: "BINUNICODE8", 0x8E: "BINBYTES8", 0x96: "BYTEARRAY8", 0x95: "FRAME"}
_EXTENSIONS = {0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4"}
# Opcodes whose argument is a line of text; those naming a global (GLOBAL, INST) or a
# persistent id (PERSID) are refused here already.
_LINES = {ord("I"): "INT", ord("L"): "LONG", ord("F"): "FLOAT", ord("S"): "STRING", ord("V"): "UNICODE",
          ord("g"): "GET", ord("p"): "PUT"}
_NAMING = {ord("c"): "GLOBAL", ord("i"): "INST", ord("P"): "PERSID"}
_NEWLINE = re.compile(b"\n")
_STOP, _PROTO, _LONG_BINPUT = ord("."), 0x80, ord("r")


def check_pickle(data: bytes | bytearray | memoryview, path: str, max_memory_bytes: int) -> None:
    """Walk the opcodes of the pickle `data` (bytes-like) up to its STOP; raise `TraceError`
    (naming `path` and the limit) where one would make the unpickler allocate beyond the
    bytes that follow or the budget `max_memory_bytes`, or consult the extension registry.
    A memo index must be below both the opcode's position (a pickler puts at most a slot per
    byte before it) and the slots the budget pays for."""
    n = len(data)
    memo_slots = max_memory_bytes // MEMO_BYTES_PER_SLOT
    pos = 0
    skip = _skip().match
    while pos < n:
        skipped = skip(data, pos)
        assert skipped is not None  # a repetition matches, if only nothing
        pos = skipped.end()
        if pos >= n:
            break
        op = data[pos]
        if op == _STOP:
            return
        if op == _PROTO:
            pos += 2
        elif op == _LONG_BINPUT:
            _memo_index(int.from_bytes(data[pos + 1:pos + 5], "little"), min(pos, memo_slots), path)
            pos += 5
        elif op in _LENGTH4 or op in _LENGTH8:
            width = 4 if op in _LENGTH4 else 8
            length = int.from_bytes(data[pos + 1:pos + 1 + width], "little")
            after = pos + 1 + width
            if after > n:
                break
            if length > n - after:
                name = _LENGTH4.get(op) or _LENGTH8[op]
                raise TraceError(path, f"the pickle is truncated or corrupt: {name} at byte {pos} declares {length:,} bytes, more "
                                       f"than the {n - after:,} that follow it")
            pos = after if op == 0x95 else after + length  # a frame's opcodes are walked too
        elif op in _LINES:
            found = _NEWLINE.search(data, pos + 1)
            if found is None:
                raise TraceError(path, f"the pickle is corrupt: {_LINES[op]} at byte {pos} has no end of line")
            if op == ord("p"):
                _memo_index(_decimal(data[pos + 1:found.start()], path), min(pos, memo_slots), path)
            pos = found.end()
        elif op in _EXTENSIONS:
            raise TraceError(path, f"not a memory snapshot: the pickle uses the extension registry ({_EXTENSIONS[op]} "
                                   f"at byte {pos}): refused before any lookup, since a snapshot holds only plain data")
        elif op in _NAMING:
            raise TraceError(path, f"not a memory snapshot: the pickle names a global or a persistent id ({_NAMING[op]} "
                                   f"at byte {pos}): refused (nothing in it was run)")
        else:
            raise TraceError(path, f"the pickle is truncated or corrupt (byte {pos} is no opcode: 0x{op:02x})")
    raise TraceError(path, "the pickle is truncated or corrupt (it ends before its STOP opcode)")


def _memo_index(index: int, memo_slots: int, path: str) -> None:
    if index >= memo_slots:
        raise TraceError(path, f"the pickle is corrupt: it writes memo slot {index:,}, beyond the {memo_slots:,} its "
                               f"size and the memory budget allow (each slot costs the unpickler {MEMO_BYTES_PER_SLOT} bytes)")


def _decimal(text: bytes | bytearray | memoryview, path: str) -> int:
    try:
        return int(bytes(text))
    except ValueError:
        raise TraceError(path, "the pickle is corrupt: a PUT's memo index is not a number") from None
