"""JSON bytes -> columns of events, for every Kineto trace generation.

msgspec splits the document into one undecoded slice per event (skipping every top-level
key the model does not use); `events_frame` then hands batches of those slices to polars'
multi-threaded JSON-lines reader, which writes the top-level fields straight into typed
columns, without a Python object per event or field. `args` stays JSON text, decoded later
per event kind into only the fields that kind needs (see `batches._arg_columns`). Figures
against `orjson.loads` are in benchmarks/README.md.

Real files are not always valid JSON: bare `NaN`/`Infinity` (and `N/A`, `nan`, `inf`),
invalid `\\` escapes and invalid UTF-8 occur, as do fields of the wrong type. Those files take
the tolerant path: the text is repaired, parsed by the standard library (which accepts `NaN`
and big integers), re-encoded as strict JSON and decoded by the fast path; events that still
do not fit are dropped and counted in `ParsedTrace.anomalies`, never silently.
"""

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import polars as pl
from msgspec import Raw

from ..errors import TraceError
from .anomalies import (BARE_WORDS_NULLED, BYTE_ORDER_MARK_SKIPPED, INVALID_ESCAPES_REPAIRED, INVALID_UTF8_REPLACED,
                        LONE_SURROGATES_REPLACED, MALFORMED_EVENTS_DROPPED, TOLERANT_PARSE, record)
from .metadata import clean_metadata

_EMPTY_ARGS = Raw(b"{}")
_BLANK = re.compile(rb"\s*\Z")  # stops at the first non-blank byte: no copy of a large file


class Event(msgspec.Struct, gc=False):
    """One trace event, top-level fields only: what an event that polars rejects is
    repaired into (see `events_frame`)."""

    ph: str | None = ""
    cat: str | None = ""
    name: str | None = ""
    pid: int | str | None = 0
    tid: int | str | None = 0
    ts: float | None = None
    dur: float | None = None
    id: int | str | None = None
    bp: str | None = None
    args: Raw = _EMPTY_ARGS


class _Document(msgspec.Struct):
    """The top-level object; keys not named here are skipped by the decoder. Events stay
    undecoded slices here: `decode_events` turns them into Structs batch by batch, so a
    large trace never holds all its events as Python objects at once."""

    traceEvents: list[Raw] | None = None
    schemaVersion: Any = None
    deviceProperties: Any = None
    computeProperties: Any = None
    distributedInfo: Any = None
    displayTimeUnit: Any = None
    baseTimeNanoseconds: Any = None
    traceName: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    cupti_version: Any = None
    Framework: Any = None
    trace_id: Any = None
    host_name: Any = None
    PT_PROFILER_JOB_NAME: Any = None
    PT_PROFILER_JOB_VERSION: Any = None
    PT_PROFILER_JOB_ATTEMPT_INDEX: Any = None
    with_stack: Any = None
    with_modules: Any = None
    profile_memory: Any = None
    record_shapes: Any = None


_DOCUMENT_DECODER = msgspec.json.Decoder(_Document)
_RAW_LIST_DECODER = msgspec.json.Decoder(list[Raw])
_EVENT_LIST_DECODER = msgspec.json.Decoder(list[Event])
_EVENT_DECODER = msgspec.json.Decoder(Event)
_METADATA_KEYS = tuple(f for f in _Document.__struct_fields__ if f != "traceEvents")


def _keep_all(upto: int | None = None) -> None:
    pass


@dataclass
class ParsedTrace:
    """The events (undecoded JSON slices, `msgspec.Raw`) and top-level metadata of a trace.

    `release(upto)` says that the first `upto` bytes of the input (all when None) will not
    be read again; the loader calls it as it consumes events in order (the sum of the
    lengths of the slices consumed is at most their end in the input)."""

    events: list[Raw]
    metadata: dict[str, Any]
    anomalies: dict[str, Any] = field(default_factory=dict)
    release: Callable[..., None] = _keep_all


def _first_significant_byte(data: bytes | bytearray | memoryview) -> bytes:
    stripped = bytes(data[:64]).lstrip(b" \t\r\n\xef\xbb\xbf")
    return stripped[:1]


def _trace_of(events: list[Raw], metadata: dict[str, Any], anomalies: dict[str, Any] | None = None) -> ParsedTrace:
    """The `ParsedTrace` of decoded event slices; `_NotATrace` when the list has entries but
    no JSON object among them (`[1, 2, 3]`, a list of names): no trace, not an empty one."""
    if events and not any(bytes(memoryview(raw)[:1]) == b"{" for raw in events):  # slices start at their value
        raise _NotATrace(f"none of the {len(events):,} entries of its event list is an event "
                         "(a JSON object with ph, name, ts, ...)")
    anomalies = {} if anomalies is None else anomalies
    return ParsedTrace(events, clean_metadata(metadata, anomalies), anomalies)


def _decode_fast(data: bytes | bytearray | memoryview) -> ParsedTrace:
    if _first_significant_byte(data) == b"[":
        return _trace_of(_RAW_LIST_DECODER.decode(data), {})
    doc = _DOCUMENT_DECODER.decode(data)
    if doc.traceEvents is None:
        raise _NotATrace("the JSON object has no 'traceEvents' list")
    metadata = {k: getattr(doc, k) for k in _METADATA_KEYS if getattr(doc, k) is not None}
    return _trace_of(doc.traceEvents, metadata)


class _NotATrace(Exception):
    pass


# A backslash that does not start a valid JSON escape: doubled so it stays a literal. Runs of
# backslashes are read from their start, pair by pair, so the second half of a valid `\\`
# (a Windows path's separator) is never taken for the start of an escape.
_INVALID_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\(?=u(?![0-9a-fA-F]{4})|[^\"\\/bfnrtu])")
# A UTF-16 surrogate escape without its pair (JSON allows it, UTF-8 cannot hold it): it
# becomes U+FFFD, as invalid UTF-8 does.
_LONE_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
# Bare words some writers put where a number goes (Kineto wrote `N/A` in 2021, C++ formatting
# writes `nan` / `inf`), matched outside strings: a string literal is matched first and kept.
_BARE_WORD_PATTERN = r"(?<![\w.])(?:N/A|[-+]?(?:[nN][aA][nN]|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?))(?![\w/])"
_BARE_WORD = re.compile(_BARE_WORD_PATTERN)
_STRING_OR_BARE_WORD = re.compile(r'("(?:[^"\\]|\\.)*")|' + _BARE_WORD_PATTERN)
_JSON_NON_NUMBERS = ("NaN", "Infinity", "-Infinity")  # the standard library reads these itself
_BARE_WORD_BYTES = re.compile(_BARE_WORD_PATTERN.encode())
_ESCAPED_CHAR = re.compile(rb"\\.")
# How far back from a bare word its line may start for `_null_bare_words` to look.
_LINE_LOOKBACK = 4096
_EVENT_FIELDS = set(Event.__struct_fields__)


def _repaired_text(data: bytes | bytearray | memoryview, anomalies: dict[str, Any]) -> str:
    """JSON bytes as text the standard library parses, each repair counted in `anomalies`:
    invalid UTF-8 and lone surrogate escapes become U+FFFD, invalid escapes literal
    backslashes, bare `N/A` / `nan` / `inf` values null."""
    text = str(data, "utf-8", errors="replace")
    if "\ufffd" in text:
        record(anomalies, INVALID_UTF8_REPLACED, text.count("\ufffd"))
    text, escapes = _INVALID_ESCAPE.subn(r"\1\\\\", text)
    if escapes:
        record(anomalies, INVALID_ESCAPES_REPAIRED, escapes)
    text, surrogates = _LONE_SURROGATE.subn(r"\\ufffd", text)
    if surrogates:
        record(anomalies, LONE_SURROGATES_REPLACED, surrogates)
    if _BARE_WORD.search(text):  # a quick scan first: the string-aware pass calls back per string
        nulled = 0

        def null_bare_word(match: re.Match[str]) -> str:
            nonlocal nulled
            if match.group(1) is not None or match.group(0) in _JSON_NON_NUMBERS:
                return match.group(0)
            nulled += 1
            return "null"
        text = _STRING_OR_BARE_WORD.sub(null_bare_word, text)
        if nulled:
            record(anomalies, BARE_WORDS_NULLED, nulled)
    return text


def _bare_words_outside_strings(data: bytes) -> list[tuple[int, int]] | None:
    """(start, end) of each bare NaN-like word of `data` (bytes) outside strings, in order;
    None when one cannot be told apart from text cheaply.

    Candidates come from plain substring searches of the lower-cased text (the regular
    expression alone would scan ~30 MB/s). A raw newline never occurs inside a JSON string,
    so a word is outside strings when the quotes between the start of its line and itself
    are balanced; Kineto writes an event or an args field per line, so lines are short."""
    lowered = data.lower()
    candidates = []
    for literal in (b"nan", b"inf", b"n/a"):
        at = lowered.find(literal)
        while at >= 0:
            candidates.append(at - 1 if at and lowered[at - 1] in b"-+" else at)
            at = lowered.find(literal, at + 1)
    spans = []
    for at in sorted(candidates):
        match = _BARE_WORD_BYTES.match(data, at)
        if match is None:
            continue
        window = data[max(0, at - _LINE_LOOKBACK):at]
        newline = window.rfind(b"\n")
        if newline < 0 and at > _LINE_LOOKBACK:
            return None
        if not _ESCAPED_CHAR.sub(b"", window[newline + 1:]).count(b'"') % 2:
            spans.append(match.span())
    return spans


def _null_bare_words(data: bytes | bytearray | memoryview, anomalies: dict[str, Any]) -> bytes | None:
    """`data` with each bare `NaN` / `N/A` / `nan` / `inf` value replaced by `null` (counted
    in `anomalies`), so that the fast path can read it; None when there is none, or when
    `_bare_words_outside_strings` cannot tell (the tolerant path then repairs the text)."""
    data = bytes(data)
    spans = _bare_words_outside_strings(data)
    if not spans:
        return None
    record(anomalies, BARE_WORDS_NULLED, len(spans))
    ends = [0, *(end for _, end in spans)]
    starts = [*(start for start, _ in spans), len(data)]
    return b"null".join(data[end:start] for end, start in zip(ends, starts))


def _decode_tolerant(data: bytes | bytearray | memoryview, anomalies: dict[str, Any]) -> ParsedTrace:
    doc = json.loads(_repaired_text(data, anomalies), strict=False)
    if isinstance(doc, dict):
        raw_events = doc.get("traceEvents")
        if not isinstance(raw_events, list):
            raise _NotATrace("the JSON object has no 'traceEvents' list")
        metadata = {k: doc[k] for k in _METADATA_KEYS if doc.get(k) is not None}
    elif isinstance(doc, list):
        raw_events, metadata = doc, {}
    else:
        raise _NotATrace(f"the top level is a JSON {type(doc).__name__}, not an object or array")
    # Re-encoding through msgspec turns NaN into null and keeps big integers exact; events
    # that are not objects or have fields of the wrong type are dropped by decode_events.
    return _trace_of([Raw(msgspec.json.encode(item)) for item in raw_events], metadata, anomalies)


def _decode_one(raw: bytes, anomalies: dict[str, Any]) -> Event | None:
    """One event on its own: repaired text if need be, wrongly typed fields coerced where
    possible; None (counted as dropped) when it is not a usable event."""
    try:
        return _EVENT_DECODER.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    try:
        item = json.loads(_repaired_text(raw, anomalies), strict=False)
        if not isinstance(item, dict):
            raise TypeError("not an object")
        top = {k: v for k, v in item.items() if k in _EVENT_FIELDS and k != "args"}
        event = msgspec.convert(top, Event, strict=False)
        args = item.get("args")
        if isinstance(args, dict):
            event.args = Raw(msgspec.json.encode(args))
        return event
    except (ValueError, TypeError, RecursionError, msgspec.ValidationError, msgspec.EncodeError):
        record(anomalies, MALFORMED_EVENTS_DROPPED)
        return None


def decode_events(raws: Sequence[bytes], anomalies: dict[str, Any]) -> list[Event]:
    """Decode a batch of event slices into `Event` Structs, in one decoder call; when some
    event does not fit, event by event, dropping (and counting in `anomalies`) the unusable."""
    try:
        return _EVENT_LIST_DECODER.decode(b"[" + b",".join(raws) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    events = (_decode_one(raw, anomalies) for raw in raws)
    return [e for e in events if e is not None]


# What polars raises when it cannot read a text: its errors, and a panic of its Rust code
# (a BaseException, which no `except Exception` would stop) on input it did not foresee.
POLARS_REFUSED = (pl.exceptions.PolarsError, pl.exceptions.PanicException)

# The columns of `events_frame`. pid / tid are text because traces write them as numbers or
# strings; polars writes a number given for a String column as its text, and an object
# (`args`) as its compact JSON. Every column costs polars time on every event, so the flow
# events' `id` and `bp` are read apart, from those events only (`flow_columns`).
EVENT_SCHEMA = {"ph": pl.String, "cat": pl.String, "name": pl.String, "pid": pl.String, "tid": pl.String,
                "ts": pl.Float64, "dur": pl.Float64, "args": pl.String}
FLOW_SCHEMA = {"id": pl.String, "bp": pl.String}
# One event per line for the JSON-lines reader: a raw newline inside an event can only be
# whitespace between tokens (JSON strings hold newlines escaped), so it becomes a space; the
# record separator, which valid JSON never holds raw, is put between events and becomes the
# newline. A slice that breaks these rules fails to read and takes the repair path.
_ONE_EVENT_PER_LINE = bytes.maketrans(b"\n\r\x1e", b"  \n")


# polars writes an object read into a String column as JSON, but leaves the backslashes and
# control characters of its strings unescaped (polars 2.1: the args text `{"p": "C:\\\\x"}`
# comes back as `{"p": "C:\\x"}`), which would garble or lose such args (Windows call stacks);
# those rows take their args text from the event's own JSON instead.
_NOT_ESCAPED_BY_POLARS = r"[\x00-\x1f\\]"
_NEWLINES_TO_SPACES = bytes.maketrans(b"\n\r", b"  ")  # raw newlines are whitespace in JSON


class _ArgsOnly(msgspec.Struct):
    args: Raw = _EMPTY_ARGS


_ARGS_ONLY_DECODER = msgspec.json.Decoder(_ArgsOnly)


# Perfetto's flow form, which Kineto writes on slices (kineto#1547): a slice with `bind_id` and
# `flow_out: true` starts the flow of that id, one with `flow_in: true` ends it. Read only from
# batches that hold the key (a search of the batch's text), so other traces pay nothing.
SLICE_FLOW_SCHEMA = {"bind_id": pl.String, "flow_in": pl.Boolean, "flow_out": pl.Boolean}


def _read_lines(events: Sequence[bytes], schema: dict[str, Any] = EVENT_SCHEMA) -> pl.DataFrame:
    text = b"\x1e".join(events).translate(_ONE_EVENT_PER_LINE)
    if schema is EVENT_SCHEMA and b'"bind_id"' in text:
        schema = {**EVENT_SCHEMA, **SLICE_FLOW_SCHEMA}
    frame = pl.read_ndjson(text, schema=schema)
    if "args" in schema and b"\\" in text:  # no backslash in the batch, no escape to lose
        frame = _with_exact_args(frame, events)
    return frame


def _with_exact_args(frame: pl.DataFrame, events: Sequence[bytes]) -> pl.DataFrame:
    """`frame` (read from `events`, a row each) with the args text of the rows polars did
    not write faithfully (`_NOT_ESCAPED_BY_POLARS`) cut from the events' own JSON."""
    rows = frame["args"].str.contains(_NOT_ESCAPED_BY_POLARS).fill_null(False).arg_true().to_list()
    if not rows:
        return frame
    exact = []
    for row in rows:  # rows whose args hold escapes only
        try:
            args = bytes(_ARGS_ONLY_DECODER.decode(events[row]).args)
        except msgspec.DecodeError:
            args = frame["args"][row].encode()
        exact.append(args.translate(_NEWLINES_TO_SPACES).decode("utf-8", errors="replace"))
    return frame.with_columns(frame["args"].scatter(rows, exact))


def events_frame(raws: Sequence[bytes], anomalies: dict[str, Any]) -> tuple[pl.DataFrame, Sequence[bytes]]:
    """A batch of event slices as a polars DataFrame with `EVENT_SCHEMA` columns, one row per
    event in order, and the events' JSON texts (one per row: `raws` itself, unless repaired).

    When polars rejects the batch (a field of the wrong type, an event that is not an
    object, ...), its events are decoded one by one by msgspec, repaired or dropped (counted
    in `anomalies`), and re-encoded as plain JSON for polars."""
    if not raws:
        return pl.DataFrame(schema=EVENT_SCHEMA), []
    try:
        return _read_lines(raws), raws
    except POLARS_REFUSED:
        pass
    lines = [msgspec.json.encode(e) for e in decode_events(raws, anomalies)]
    try:
        return (_read_lines(lines) if lines else pl.DataFrame(schema=EVENT_SCHEMA)), lines
    except POLARS_REFUSED:
        pass
    frames, kept = [], []
    for line in lines:  # only when polars still refuses what msgspec accepted: event by event
        try:
            frames.append(_read_lines([line]))
            kept.append(line)
        except POLARS_REFUSED:
            record(anomalies, MALFORMED_EVENTS_DROPPED)
    return (pl.concat(frames, how="diagonal") if frames else pl.DataFrame(schema=EVENT_SCHEMA)), kept


def flow_columns(events: Sequence[bytes]) -> pl.DataFrame:
    """`id` and `bp` of flow events (their JSON texts) as a DataFrame with `FLOW_SCHEMA`
    columns, one row per event; null where a value cannot be read as text."""
    try:
        return _read_lines(events, FLOW_SCHEMA)
    except POLARS_REFUSED:
        pass
    unreadable = pl.DataFrame({"id": [None], "bp": [None]}, schema=FLOW_SCHEMA)
    rows = []
    for event in events:  # only when some event's id or bp is not text: event by event
        try:
            rows.append(_read_lines([event], FLOW_SCHEMA))
        except POLARS_REFUSED:
            rows.append(unreadable)
    return pl.concat(rows) if rows else pl.DataFrame(schema=FLOW_SCHEMA)


# float64 keeps about 16 significant digits: an epoch-µs timestamp with a ns fraction
# (1700000000000000.123) needs 19, so the float polars reads is off by up to 0.125 µs. Above
# 2**42 µs float64's spacing (>= 2**-10 µs) can round a ns fraction to a whole number.
_FRACTION_MAY_VANISH_US = 2.0**42
_FRACTIONAL_TS = re.compile(rb'"ts"\s*:\s*-?\d+\.\d')
# Where every float of a batch came out whole, its first events' text tells whether the file
# writes fractions at all: one that does rounds a fraction to a whole float one time in four
# at 1.7e15, so a batch with fractions almost surely shows some.
_FRACTION_SAMPLE = 256
_TS_KEY = np.frombuffer(b'"ts":', dtype=np.uint8)
# Bytes after `"ts":` read for the number: blanks, a sign, 16 whole and 12 fraction digits.
_TS_WINDOW = 40
_LOW_DIGITS = 4  # whole-µs digits checked against the float: they tell this `ts` is the event's
_FRACTION_DIGITS = 12  # read after the point: ns are 3, none writes more than ps
_POWERS_OF_TEN = 10.0 ** -np.arange(_FRACTION_DIGITS + 1)  # weight of the k-th digit after the point: 10**-k


def _ts_fractions(events: Sequence[bytes]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Per event, the fraction of its `ts` as written, with the number's sign (-0.5 for
    `-12.5`, 0 for a whole number), and the number's last `_LOW_DIGITS` whole digits; NaN and
    -1 where the text holds no plain decimal `ts` (exponent form, a string, none).

    Vectorised over the batch's bytes: the first `"ts":` of each event (Kineto writes `ts`
    before `args`), then a fixed window of bytes after it as a matrix, one row per event."""
    buf = np.frombuffer(b"\x1e".join(events), dtype=np.uint8)
    fractions, low = np.full(len(events), np.nan), np.full(len(events), -1, dtype=np.int64)
    size = len(buf) - len(_TS_KEY) + 1
    if size <= 0:
        return fractions, low
    keys = np.flatnonzero(buf[1:size + 1] == _TS_KEY[1])  # every `t` (as the start of `"ts":`), then those in `"ts":`
    for k in (0, *range(2, len(_TS_KEY))):
        keys = keys[buf[keys + k] == _TS_KEY[k]]
    # where each event ends (with the separator after it) in the joined bytes
    ends = np.cumsum(np.fromiter(map(len, events), dtype=np.int64, count=len(events)) + 1)
    event, first = np.unique(np.searchsorted(ends, keys, side="right"), return_index=True)
    padded = np.concatenate([buf, np.full(_TS_WINDOW, ord(","), dtype=np.uint8)])  # a window never runs off the end
    window = padded[keys[first][:, None] + (len(_TS_KEY) + np.arange(_TS_WINDOW, dtype=np.int64))]
    rows, column = np.arange(len(window)), np.arange(_TS_WINDOW, dtype=np.int8)
    start = np.argmax(window > ord(" "), axis=1).astype(np.int8)[:, None]  # first non-blank byte
    negative = window[rows, start[:, 0]] == ord("-")
    value = window - np.uint8(ord("0"))  # a digit's value; wraps above 9 for every other byte
    digit = value < 10
    point = window == ord(".")
    number = digit | point
    number[rows, start[:, 0]] |= negative
    end = np.argmin(number | (column < start), axis=1).astype(np.int8)[:, None]  # first byte after the number
    in_number = (column >= start) & (column < end)
    points = point & in_number
    dot = np.where(points.any(axis=1), np.argmax(points, axis=1), end[:, 0]).astype(np.int8)[:, None]
    after = window[rows, end[:, 0]]
    plain = ((after <= ord(" ")) | (after == ord(",")) | (after == ord("}"))) & (end[:, 0] > 0) \
        & (dot[:, 0] > start[:, 0] + negative) & (points.sum(axis=1) <= 1)
    # the digits just after the point and just before it, gathered as small matrices
    places = dot + np.arange(1, _FRACTION_DIGITS + 1, dtype=np.int8)
    after_point = places < end
    fraction = (np.where(after_point, value[rows[:, None], places.clip(0, _TS_WINDOW - 1)], 0)
                * _POWERS_OF_TEN[1:_FRACTION_DIGITS + 1]).sum(axis=1)
    places = dot - np.arange(1, _LOW_DIGITS + 1, dtype=np.int8)
    before_point = places >= start + negative[:, None]
    low_digits = (np.where(before_point, value[rows[:, None], places.clip(0, None)], 0).astype(np.int64)
                  * 10 ** np.arange(_LOW_DIGITS)).sum(axis=1)
    fractions[event[plain]] = np.where(negative, -fraction, fraction)[plain]
    low[event[plain]] = low_digits[plain]
    return fractions, low


def anchored_times(events: Sequence[bytes], ts: npt.NDArray[np.float64]) -> tuple[int, npt.NDArray[np.float64]]:
    """The timestamps of a batch of events as `(anchor, offsets)`: an integer µs `anchor`
    (the batch's median, floored) and float64 µs offsets from it, one per event (NaN where
    `ts` is). `ts` are the floats polars read from `events` (their JSON texts, one per row).

    Offsets are exact to the digits written. Where the text holds fractions the floats may
    have rounded, each `ts` is rebuilt from its written fraction f (`_ts_fractions`) and the
    whole number the float gives, round(float - f) (the float is off by less than 0.5), whose
    last digits must match the text's; only the difference to the anchor becomes a float.
    A `ts` that is no plain decimal (exponent form, a string) keeps the float."""
    finite = np.isfinite(ts)
    if not finite.any():
        return 0, ts
    values = ts[finite]
    anchor = int(np.floor(np.partition(values, len(values) // 2)[len(values) // 2]))
    offsets = ts - anchor
    if (values == np.floor(values)).all() and (
            np.abs(values).max() < _FRACTION_MAY_VANISH_US
            or not _FRACTIONAL_TS.search(b"\x1e".join(events[:_FRACTION_SAMPLE]))):
        return anchor, offsets  # whole µs below 2**53: the floats are the numbers written
    fractions, low = _ts_fractions(events)
    usable = finite & np.isfinite(fractions) & (np.abs(ts) < 2.0**52)
    whole = np.zeros(len(ts), dtype=np.int64)
    whole[usable] = np.round(ts[usable] - fractions[usable]).astype(np.int64)
    usable &= np.abs(whole) % 10**_LOW_DIGITS == low
    return anchor, np.where(usable, (whole - anchor).astype(np.float64) + np.nan_to_num(fractions), offsets)


# What msgspec says of input that ends before its JSON does (a file still being written, or
# cut off); the whole file was valid up to there, so the tolerant path could not help.
_MSGSPEC_TRUNCATED = "Input data was truncated"
_TRUNCATED = "truncated (ends before the JSON does)"


def _try_fast(data: bytes | bytearray | memoryview, path: str) -> ParsedTrace | Exception:
    """`_decode_fast(data)`, or the decode error the tolerant path may get past."""
    try:
        return _decode_fast(data)
    except _NotATrace as exc:
        raise TraceError(path, f"not a Kineto trace: {exc}") from None
    except RecursionError:
        raise TraceError(path, "the JSON is nested too deeply to be a Kineto trace") from None
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        return exc


_BOM = b"\xef\xbb\xbf"


def parse_trace(data: bytes | bytearray | memoryview, path: str) -> ParsedTrace:
    """Decode a trace's JSON bytes; any failure becomes a `TraceError` naming `path`."""
    anomalies: dict[str, Any] = {}  # counts, and the reason the fast reader refused the JSON
    if bytes(data[:3]) == _BOM:  # UTF-8 written with a byte-order mark (Windows tools): skipped, not copied
        data = memoryview(data)[3:]
        record(anomalies, BYTE_ORDER_MARK_SKIPPED)
    if _BLANK.match(data):
        raise TraceError(path, "the file is empty")
    parsed = _try_fast(data, path)
    # Bare NaN-like words are the common flaw of otherwise valid files: nulled, the file
    # takes the fast path instead of the standard library's (~15x slower).
    if isinstance(parsed, Exception) and (repaired := _null_bare_words(data, anomalies)) is not None:
        data = repaired
        parsed = _try_fast(data, path)
    if not isinstance(parsed, Exception):
        parsed.anomalies.update(anomalies)
        return parsed
    if str(parsed) == _MSGSPEC_TRUNCATED:  # no repair gives back the missing end: say so at once
        raise TraceError(path, f"{_TRUNCATED} after {len(data):,} bytes of JSON: still being written, or cut off")
    anomalies[TOLERANT_PARSE] = str(parsed)  # why the fast reader refused it
    try:
        return _decode_tolerant(data, anomalies)
    except _NotATrace as exc:
        raise TraceError(path, f"not a Kineto trace: {exc}") from None
    except json.JSONDecodeError as exc:
        where = _TRUNCATED if exc.pos >= len(exc.doc) - 1 and exc.msg != "Extra data" else "not valid JSON"
        raise TraceError(path, f"{where}: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:
        raise TraceError(path, f"cannot be decoded: {type(exc).__name__}: {exc}") from None
