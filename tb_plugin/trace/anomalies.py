"""Import anomalies: every repair the reader makes to a real-world trace, and every event or
value it has to drop, is counted under one of the keys declared here, never silent.

Each anomaly is declared once, with its key, a severity and one line of meaning (as
Perfetto's trace processor declares its import stats). `TraceModel.anomalies` holds
{key: count} (for `TOLERANT_PARSE`, why the fast reader refused the file); `describe` turns
it into the rows `python -m tb_plugin info`, the `info` route and the page show.
"""

from dataclasses import dataclass

# Severities: the file was repaired and nothing it holds was lost, or something was lost.
INFO = "info"
DATA_LOSS = "data_loss"


@dataclass(frozen=True)
class Anomaly:
    """One kind of import anomaly: `key`, `severity` (`INFO` or `DATA_LOSS`), `meaning`."""

    key: str
    severity: str
    meaning: str


ANOMALIES: dict[str, Anomaly] = {}


def _declare(key: str, severity: str, meaning: str) -> str:
    ANOMALIES[key] = Anomaly(key, severity, meaning)
    return key


BYTE_ORDER_MARK_SKIPPED = _declare(
    "byte_order_mark_skipped", INFO, "the file starts with a UTF-8 byte order mark, which was skipped")
TOLERANT_PARSE = _declare(
    "tolerant_parse", INFO,
    "the JSON is not strictly valid (the value says why): it was read by the tolerant parser")
INVALID_UTF8_REPLACED = _declare(
    "invalid_utf8_replaced", DATA_LOSS, "bytes that are not UTF-8 were replaced by U+FFFD")
INVALID_ESCAPES_REPAIRED = _declare(
    "invalid_escapes_repaired", INFO, "backslash escapes JSON does not allow were read as the characters written")
LONE_SURROGATES_REPLACED = _declare(
    "lone_surrogates_replaced", DATA_LOSS, "escapes of half a UTF-16 character pair were replaced by U+FFFD")
BARE_WORDS_NULLED = _declare(
    "bare_words_nulled", DATA_LOSS,
    "values written as bare words (NaN, N/A, inf), which JSON has not, were read as null")
MALFORMED_EVENTS_DROPPED = _declare(
    "malformed_events_dropped", DATA_LOSS,
    "events that are no JSON object, or whose fields have the wrong type, were dropped")
MALFORMED_ARGS_REPLACED = _declare(
    "malformed_args_replaced", DATA_LOSS, "events whose args are no object (or cannot be read at all) kept default args")
ARG_VALUES_UNREADABLE = _declare(
    "arg_values_unreadable", DATA_LOSS,
    "args values that are no number where one goes (N/A, true, a list) were read as absent, their events kept")
EVENTS_WITHOUT_TS_DROPPED = _declare(
    "events_without_ts_dropped", DATA_LOSS, "timed events without a usable timestamp were dropped")
EVENTS_FAR_FROM_THE_TRACE_DROPPED = _declare(
    "events_far_from_the_trace_dropped", DATA_LOSS,
    "events more than a day from the rest of the trace (kernels written at ts 0: pytorch/kineto#109) were dropped")
INVALID_DURATIONS_ZEROED = _declare(
    "invalid_durations_zeroed", DATA_LOSS, "negative, missing or impossible (over 11.6 days) durations were set to 0")
METADATA_VALUES_NULLED = _declare(
    "metadata_values_nulled", DATA_LOSS,
    "top-level metadata numbers beyond 64 bits, or nested over 32 levels deep, were read as null")
UNSUPPORTED_EVENTS_SKIPPED = _declare(
    "unsupported_events_skipped", INFO, "events of a phase no table holds (async, object, sample, ...) were skipped")
DEVICE_PROPERTIES_MAPPED = _declare(
    "device_properties_mapped", INFO,
    "the one device in use is not deviceProperties' one id: that entry was taken as the device's (the value says which)")
# The anomalies whose value is a sentence (why, which), not a count.
TEXT_VALUED = frozenset({TOLERANT_PARSE, DEVICE_PROPERTIES_MAPPED})


def record(anomalies: dict[str, int], key: str, n: int = 1) -> None:
    """Add `n` occurrences of the declared anomaly `key` to the counts in `anomalies`."""
    if key not in ANOMALIES:
        raise KeyError(f"undeclared import anomaly {key!r}: declare it in tb_plugin/trace/anomalies.py")
    anomalies[key] = anomalies.get(key, 0) + n


def describe(anomalies: dict[str, object]) -> list[dict[str, object]]:
    """The anomalies of one trace as rows {key, severity, meaning, value}, those that lose data
    first, each group in declaration order; `value` is the count (for `TOLERANT_PARSE`, the
    reason; for `DEVICE_PROPERTIES_MAPPED`, which id was taken for which device). A key this
    reader does not declare (a disk cache written by a newer one) comes last, as info: shown,
    not lost."""
    order = {key: i for i, key in enumerate(ANOMALIES)}

    def declared(key: str) -> Anomaly:
        return ANOMALIES.get(key) or Anomaly(key, INFO, key.replace("_", " "))

    keys = sorted(anomalies, key=lambda k: (declared(k).severity != DATA_LOSS, order.get(k, len(order))))
    return [{"key": k, "severity": declared(k).severity, "meaning": declared(k).meaning, "value": anomalies[k]}
            for k in keys]
