"""The declared schema of a disk cache entry's manifest (`tb_plugin.store.cache_format`),
checked before any of it is used. Imported on the first manifest read: msgspec stays out of
TensorBoard's start-up.
"""

from typing import Annotated, Any

import msgspec

# A damaged or edited manifest (Infinity where a count belongs, a list where a dict does)
# fails here as one more damaged entry, parsed again, not as an error answered for that trace
# on every request.
_Count = Annotated[int, msgspec.Meta(ge=0, le=1 << 62)]
_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]


class _Schema(msgspec.Struct, forbid_unknown_fields=True):
    pass


class _ColumnLayout(_Schema):
    order: list[str]
    categorical: dict[str, tuple[_Count, bool]]  # column: (its category list, ordered)


class _ModelFields(_Schema):
    origin_us: float  # any float a parse may give: times are offsets from it, not checked here
    metadata: dict[str, Any]
    anomalies: dict[str, _Count | str]
    columns: dict[str, _ColumnLayout]
    categories: _Count
    memory_bytes: _Count


class _SummaryMember(_Schema):
    source: str
    identity: dict[str, Any]
    scalars: dict[str, None | bool | _Int64 | float | str]


class _SummaryFields(_Schema):
    kind: str
    members: list[_SummaryMember]


class Manifest(_Schema):
    """A manifest as `ModelCache` writes it: `model` or `summary` holds the entry's fields."""

    format: int | str  # a model's `CACHE_FORMAT`, a summary's `cache.summary_format`
    version: str
    source: str
    identity: dict[str, Any]
    written: float
    parts: dict[str, tuple[str, str]]  # part: (file name, SHA-256 of its bytes)
    seal: str
    model: _ModelFields | None = None
    summary: _SummaryFields | None = None
