"""A trace's top-level metadata (distributedInfo, deviceProperties, schemaVersion, ...) as
the model keeps it: any JSON, but only values the views can hold.

The views read metadata numbers (a rank, a device id, the schema version) into int64 and
float64 columns, and replies nest the values in JSON: what those cannot hold is read as null
when a trace is parsed, and the disk cache serves only metadata that is already so.
"""

import math
from typing import Any

from .anomalies import METADATA_VALUES_NULLED, record

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
METADATA_MAX_DEPTH = 32


def clean_metadata(metadata: dict[str, Any], anomalies: dict[str, int]) -> dict[str, Any]:
    """`metadata` (the trace's top-level values) with every integer beyond int64, non-finite
    float and value nested deeper than `METADATA_MAX_DEPTH` replaced by None, each counted in
    `anomalies` as `METADATA_VALUES_NULLED`. The disk cache holds only metadata it leaves as is."""
    nulled = 0

    def clean(value: Any, depth: int) -> Any:
        nonlocal nulled
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int) and _INT64_MIN <= value <= _INT64_MAX:
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        if isinstance(value, dict) and depth < METADATA_MAX_DEPTH:
            return {key: clean(item, depth + 1) for key, item in value.items()}
        if isinstance(value, list) and depth < METADATA_MAX_DEPTH:
            return [clean(item, depth + 1) for item in value]
        nulled += 1
        return None

    cleaned = {key: clean(value, 1) for key, value in metadata.items()}
    if nulled:
        record(anomalies, METADATA_VALUES_NULLED, nulled)
    return cleaned
