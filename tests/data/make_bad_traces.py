"""Write the corpus of bad traces in tests/data/bad/, and `expected.json`: for each file, the
HTTP status and a fragment of the reason the API must give (or 200 when the loader must
accept the file and count its repairs).

Run `python tests/data/make_bad_traces.py` after changing a case; the files are committed so
the corpus is visible and reviewable.
"""

import gzip
import json
import random
from pathlib import Path

OUT = Path(__file__).parent / "bad"
GOOD_EVENT = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5}


def trace(events, **top):
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": events}).encode()


def cases():
    """(file name, bytes, expected status, reason fragment)."""
    good = trace([GOOD_EVENT, {**GOOD_EVENT, "name": "ProfilerStep#1", "cat": "user_annotation", "ts": 0, "dur": 50}])
    depth = 5000
    nested_event = (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": '
                    + b'{"a": ' * depth + b"1" + b"}" * depth + b"}")
    yield "empty.pt.trace.json", b"", 422, "the file is empty"
    yield "truncated_json.pt.trace.json", good[: len(good) // 2], 422, "truncated"
    yield "truncated_gzip.pt.trace.json.gz", gzip.compress(good, mtime=0)[:40], 422, "gzip stream is corrupt or truncated"
    # The first bytes of a gzip file being written: the magic alone was read as "empty", a
    # header cut short as "Not a gzipped file".
    yield "gzip_magic_only.pt.trace.json.gz", gzip.compress(good, mtime=0)[:2], 422, "shorter than any complete gzip file"
    yield "gzip_header_cut.pt.trace.json.gz", gzip.compress(good, mtime=0)[:6], 422, "shorter than any complete gzip file"
    # Random bytes after the gzip magic: their last four bytes "claimed" hundreds of MB, and the
    # file was refused as too large rather than as what it is.
    yield ("gzip_of_random_bytes.pt.trace.json.gz", b"\x1f\x8b" + random.Random(19).randbytes(20_000), 422,
           "not a gzip of JSON")
    # Two gzip members: the trailer records only the last one's size, a claim the reader must
    # not stop at (nor trust as a bound).
    yield ("gzip_claims_less_than_it_holds.pt.trace.json.gz",
           gzip.compress(good[:-40], mtime=0) + gzip.compress(good[-40:], mtime=0), 200, "")
    yield "not_a_trace.pt.trace.json", b'{"model": "resnet", "lr": 0.1}', 422, "no 'traceEvents'"
    # Starts like a trace (what a sniff of the head sees) and is not one: linked in from outside
    # the log directory, /trace_file streamed it out whole (issue 19).
    yield "secret_after_trace_key.pt.trace.json", b'{"traceEvents": [SECRET not json]}', 422, "not valid JSON"
    yield "scalar.pt.trace.json", b"3.14", 422, "not an object or array"
    yield "binary.pt.trace.json", bytes(range(256)) * 4, 422, "not valid JSON"
    yield "trace_events_not_list.pt.trace.json", b'{"traceEvents": {"a": 1}}', 422, "traceEvents"
    yield "deeply_nested_args.pt.trace.json", b'{"traceEvents": [' + nested_event + b"]}", 422, "nested too deeply"
    yield "missing_fields.pt.trace.json", trace([{"ph": "X"}, {"name": "x"}, {"ts": 5}, GOOD_EVENT]), 200, ""
    yield "negative_and_nan_durations.pt.trace.json", (
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": -5},'
        b' {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": NaN}]}'), 200, ""
    yield "huge_integers.pt.trace.json", (
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2,'
        b' "args": {"External id": 123456789012345678901234567890, "comm": 99999999999999999999999}}]}'), 200, ""
    yield "invalid_utf8.pt.trace.json", (
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "bad \xff\xfe name", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}'), 200, ""
    yield "huge_string.pt.trace.json.gz", gzip.compress(trace([{**GOOD_EVENT, "name": "x" * 2_000_000}]), mtime=0), 200, ""
    yield "duplicate_events.pt.trace.json", trace([GOOD_EVENT] * 50), 200, ""
    yield "wrong_types.pt.trace.json", trace([{**GOOD_EVENT, "ts": "soon"}, {**GOOD_EVENT, "dur": [1]}, GOOD_EVENT,
                                              {**GOOD_EVENT, "args": {"External id": "seven", "Input Dims": "?"}}]), 200, ""
    yield "events_not_objects.pt.trace.json", trace([1, "two", None, [3], GOOD_EVENT]), 200, ""
    # A JSON array with no event object in it at all is not an empty trace but no trace.
    yield "numbers_array.pt.trace.json", b"[1, 2, 3]", 422, "none of the 3 entries of its event list is an event"
    yield "no_event_objects.pt.trace.json", trace([1, "two", None, [{"ph": "X"}]]), 422, "none of the 4 entries"
    yield "bare_array_2020.pt.trace.json", json.dumps([GOOD_EVENT]).encode(), 200, ""
    yield "no_events.pt.trace.json", trace([]), 200, ""


def main():
    OUT.mkdir(exist_ok=True)
    expected = {}
    for name, data, status, reason in cases():
        (OUT / name).write_bytes(data)
        expected[name] = {"status": status, "reason": reason}
    (OUT / "expected.json").write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
