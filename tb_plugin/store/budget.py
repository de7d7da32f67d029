"""The memory budget's arithmetic, one for every door a trace comes in by: TensorBoard's
loader (--profiler_max_memory_mb), `preprocess` (--max-memory-mb), the command line's `info`,
`compare` and `memory` (--max-memory-mb) and the Python API (`max_memory_bytes`). Each door
parses through `profile.read_profile`, which refuses a trace whose estimate exceeds the
budget before reading it, stops inflating a gzip at `json_limit`, and estimates again once
the events are counted. No imports: TensorBoard reads the default at start-up.
"""

# Peak memory a parse adds to the process, per JSON byte and per event, plus a fixed part
# (batches in flight, polars' buffers). benchmarks/memory_per_event.py measured, per event:
# 2.1 KB for the 2021 ResNet-50 traces (464 JSON bytes per event, peak 4.5x the JSON), 0.8 KB
# for the 54 MB V100 DDP trace (249 bytes per event, 3.2x), 1.6 KB for the A100 collectives
# trace (241 bytes, 6.8x), and 433 bytes for a trace of 1 M args-less events (90 bytes per
# event, 4.8x): per JSON byte alone the many-tiny-events trace was underestimated (the old
# 3x-the-JSON estimate), per event alone the large-event ones. 3.5 bytes per JSON byte plus
# 250 per event plus 32 MB covers every one of them.
PEAK_BYTES_PER_JSON_BYTE = 3.5
PEAK_BYTES_PER_EVENT = 250
PEAK_FIXED_BYTES = 32 << 20

# The budget every door defaults to (TensorBoard's --profiler_max_memory_mb, the command
# line's --max-memory-mb, the Python API's max_memory_bytes), and the least the options take.
DEFAULT_MAX_MEMORY_MB = 4096
DEFAULT_MAX_MEMORY_BYTES = DEFAULT_MAX_MEMORY_MB << 20
MIN_MAX_MEMORY_MB = 64

# How a message tells a user to raise the budget, whichever door they came in by.
RAISE_IT = ("TensorBoard's --profiler_max_memory_mb, the command line's --max-memory-mb, "
            "the Python API's max_memory_bytes")


def json_limit(max_parse_bytes: int) -> int:
    """The most JSON a trace may inflate to in a parse within `max_parse_bytes`: the budget
    left once a parse's other needs are met. Every process that parses stops reading there,
    so a gzip bomb is never inflated whole."""
    return int((max_parse_bytes - PEAK_FIXED_BYTES) / PEAK_BYTES_PER_JSON_BYTE)


def estimate_parse_bytes(json_bytes: int, events: int) -> int:
    """Peak memory a parse of `events` events in `json_bytes` of JSON adds (see above)."""
    return int(PEAK_BYTES_PER_JSON_BYTE * json_bytes + PEAK_BYTES_PER_EVENT * events + PEAK_FIXED_BYTES)


def events_in(json_bytes: int, head: bytes) -> int:
    """The number of events a trace of `json_bytes` probably holds, from the density of
    events (`"ph"` keys) in its first bytes `head`."""
    if not head:
        return 0
    return int(head.count(b'"ph"') * json_bytes / len(head))
