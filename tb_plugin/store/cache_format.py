"""The format of a disk cache entry (`cache.ModelCache` keeps the directory of them): what its
manifest and Arrow parts hold, how a parsed model and per-file summaries are encoded into them
and decoded, and how a manifest is sealed and checked.

Data only, never code: an entry holds one Arrow IPC file per table (categorical columns as
their integer codes, each distinct category list once in its own Arrow file) and
`manifest.json`, which records the source's identity (size, mtime, inode/ctime where local, a
hash of the file's head and tail), the model's scalars and dicts (origin, metadata such as
device properties and distributedInfo, anomalies), the memory the tables take once loaded, a
SHA-256 of every part, and a seal: a SHA-256 of the entry's key and everything else in the
manifest (so of the source's identity and every part's digest). A manifest is checked against
its declared schema (`cache_schema.Manifest`: types, ranges, metadata as `clean_metadata`
leaves it, declared anomalies) and its seal before anything in it is used. Any mismatch
(another file behind the same path, a flipped byte, an edited manifest, a missing part,
another format) means the trace is parsed again: never wrong numbers, never a trace left
unloadable, never code from disk (pyarrow >= 14 refuses the pickled extension types of
CVE-2023-47248, and nothing here unpickles). This is also the format `preprocess` writes.

Beside each model, small per-file summaries (the job view's `RankPart`, the distributed
view's `WorkerPart`, a collapsed rank's `RankTimelinePart`) are entries of their own in the
same layout, written and read through their table declarations (`schema.Persisted`: one Arrow
part per declared table, the declared scalars in the manifest), the same identity and
checksums; their format is derived from those declarations (`summary_format`). A run's index
(`preprocess`, per run and span) holds every worker's summary of a kind, each with its file's
identity, in one entry.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..trace.anomalies import ANOMALIES, TEXT_VALUED
from ..trace.metadata import clean_metadata
from ..trace.model import TraceModel

if TYPE_CHECKING:  # types only: pandas and pyarrow are imported when an entry is read or written
    import pandas as pd
    import pyarrow as pa

    from ..schema import Column, Persisted

# Bump when TraceModel's tables, or this layout, change shape or meaning. Format 1 was pickles
# (`*.tbpp`), deleted on sight, never read; 3: flows carry `op` and `peer`, times their
# nanoseconds, MTIA's device work its own tables; 4: ops carry process-group descriptions,
# Inductor's kernel annotations, flops and Concrete Inputs; 5: summaries hold members (a file's
# one, or a run's index of all its workers') and 1-D arrays; 6: device syncs (`cuda_sync`) have
# their own table, with the event they waited on; 7: manifests are sealed (`_seal`); 8: the job
# summary's steps carry their windows and ProfilerStep host ranges; 9: kernels carry their
# CUDA-graph node id and annotation; 10: summaries are written and read through their table
# declarations (`schema.Persisted`), and a summary entry's format (`summary_format`) is this
# number and its declaration's digest: a column of a persisted part renamed or retyped is
# another format without an edit here; 11: the reader tells a context sync's written stream -1
# from an absent one and XPU's scope-profiler "metrics:" slices from kernels (a model cached
# before read them as stream 1 and as kernel time).
CACHE_FORMAT = 11
# A summary's table field names its part (`table-<field>`).
_TABLE_NAME = re.compile(r"[a-z_]+")
# The column of a summary part that says which member (file) a row belongs to.
_MEMBER = "__member"
_TABLES = ("threads", "ops", "python", "runtime", "kernels", "memcpy", "memset", "syncs", "gpu_annotations",
           "memory", "flows", "counters", "other", "steps", "devices")


def _seal(key: str, manifest: dict[str, Any]) -> str:
    """SHA-256 of the entry's key and its manifest (without its seal) in one canonical form:
    an edit of any value, the identity or a part's digest included, changes it."""
    canonical = json.dumps(manifest, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return sha256(f"{key}\n{canonical}".encode("utf-8", "surrogatepass"))


def sealed_manifest(key: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` of the entry `key` as it will be read back (tuples as lists, numpy floats as
    floats), with its seal, which `checked_manifest` checks."""
    manifest = json.loads(json.dumps(manifest, allow_nan=True))
    manifest["seal"] = _seal(key, manifest)
    return manifest


def checked_manifest(key: str, data: bytes) -> dict[str, Any]:
    """The manifest of the entry `key` from its bytes, once it fits `cache_schema.Manifest` and its seal;
    raises ValueError (or RecursionError, for nesting deeper than the parser goes) otherwise."""
    import msgspec

    from .cache_schema import Manifest

    manifest = json.loads(data)
    try:
        fields = msgspec.convert(manifest, Manifest)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not a manifest of this format: {exc}") from None
    if _seal(key, {k: v for k, v in manifest.items() if k != "seal"}) != fields.seal:
        raise ValueError("the manifest does not match its seal (edited since written)")
    model = fields.model
    if model is not None:
        # What a parse puts in a model, and nothing else: views trust these.
        repairs: dict[str, int] = {}
        if clean_metadata(model.metadata, repairs) != model.metadata or repairs:
            raise ValueError("its metadata holds values no parse keeps")
        if any(k not in ANOMALIES or isinstance(v, str) != (k in TEXT_VALUED) for k, v in model.anomalies.items()):
            raise ValueError("its anomalies are not the declared ones")
    return manifest


def model_bytes(model: TraceModel) -> int:
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


def sha256(data: bytes) -> str:
    """The SHA-256 of `data` in hex: a part's digest in its manifest, and the seal's."""
    return hashlib.sha256(data).hexdigest()


def _arrow_bytes(table: pa.Table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _arrow_table(data: bytes) -> pa.Table:
    import pyarrow as pa

    return pa.ipc.open_file(pa.py_buffer(data)).read_all()


def encode_model(model: TraceModel) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest fields, {part name: bytes}) of a `TraceModel`; raises TypeError or ValueError
    for a model that does not fit the format (it is then not cached)."""
    import pandas as pd
    import pyarrow as pa

    parts: dict[str, bytes] = {}
    columns: dict[str, dict] = {}
    category_ids: dict[int, tuple[int, Any]] = {}
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


def decode_model(fields: dict[str, Any], parts: dict[str, bytes]) -> TraceModel:
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


def _scalar(value: object, column: Column) -> object:
    """A summary's scalar field as its declared column (`schema.Column`) holds it, as a JSON
    value; TypeError for a value of another kind."""
    if value is None and column.nullable:
        return None
    if column.dtype == "bool" and isinstance(value, bool):
        return value
    if column.dtype in ("int64", "int32") and isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if column.dtype == "float64" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if column.dtype == "str" and isinstance(value, str):
        return value
    raise TypeError(f"field {column.name!r} holds a {type(value).__name__}, not a {column.dtype}")


def _numbers(value: Any) -> Any:
    """Numpy scalars as Python's: a summary built from tables may hold either."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value


def _declared_frame(declared: Persisted, field: str, value: Any) -> pd.DataFrame:
    """The table field `field` of a summary as its declaration (`declared.tables`) holds it:
    its columns exactly the declared ones, in order, of the declared dtypes (an array field
    as a table of one column, `value`); TypeError or ValueError (`schema.SchemaError`) else."""
    import numpy as np
    import pandas as pd

    table = declared.tables[field]
    if field in declared.arrays:
        if not isinstance(value, np.ndarray) or value.ndim != 1:
            raise TypeError(f"field {field!r} is not a 1-D array")
        value = pd.DataFrame({"value": value})
    elif not isinstance(value, pd.DataFrame):
        raise TypeError(f"field {field!r} holds a {type(value).__name__}, not a table")
    return table.conform(value)


def encode_summaries(declared: Persisted, members: Sequence[tuple[str, dict[str, Any], Any]]) \
        -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest fields, {part name: bytes}) of per-file summaries of the kind `declared` (a
    `schema.Persisted`) describes, `members` = [(source, identity, summary)]: each table
    field (declared tables, arrays as tables of one column) becomes one Arrow part for all
    members together, a `member` column saying whose rows they are; the scalar fields go
    in the manifest, per member. One file's entry holds one member; a run's index
    (`preprocess`) all its workers'. Raises TypeError or ValueError for a summary that does
    not fit its declarations (not cached then)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    if not members:
        raise ValueError("no summaries")
    if any(type(summary) is not declared.kind for _, _, summary in members):
        raise TypeError(f"summaries other than {declared.kind.__name__}s")
    parts = {}
    for field in declared.tables:
        if not _TABLE_NAME.fullmatch(field):
            raise ValueError(f"table field {field!r} cannot name a part")
        frames = [_declared_frame(declared, field, getattr(summary, field)) for _, _, summary in members]
        members_column = np.repeat(np.arange(len(frames), dtype=np.int32), [len(f) for f in frames])
        together = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        arrow = pa.Table.from_pandas(together, preserve_index=False).append_column(_MEMBER, pa.array(members_column))
        parts[f"table-{field}"] = _arrow_bytes(arrow)
    scalars = declared.scalars.columns if declared.scalars is not None else ()
    fields = {"kind": declared.kind.__name__,
              "members": [{"source": source, "identity": identity,
                           "scalars": {c.name: _scalar(_numbers(getattr(summary, c.name)), c) for c in scalars}}
                          for source, identity, summary in members]}
    json.dumps(fields, allow_nan=True)
    return fields, parts


def decode_summaries(declared: Persisted, fields: dict[str, Any], parts: dict[str, bytes]) \
        -> list[tuple[str, dict[str, Any], Any]]:
    """[(source, identity, summary)] of `encode_summaries`' output (parts already checked),
    each table given back its declared columns and dtypes; ValueError when the entry holds
    another kind, other columns or other fields than `declared` declares."""
    import numpy as np
    import pandas as pd

    if fields["kind"] != declared.kind.__name__:
        raise ValueError(f"the entry holds a {fields['kind']!r}, not a {declared.kind.__name__}")
    members = fields["members"]
    scalars = {c.name: c for c in (declared.scalars.columns if declared.scalars is not None else ())}
    values = []
    for member in members:
        if set(member["scalars"]) != set(scalars):
            raise ValueError(f"the entry's scalars are not those of a {declared.kind.__name__}")
        values.append({name: _scalar(value, scalars[name]) for name, value in member["scalars"].items()})
    for field, table in declared.tables.items():
        frame = _arrow_table(parts[f"table-{field}"]).to_pandas()
        owner = frame.pop(_MEMBER).to_numpy()
        if len(owner) and (np.any(np.diff(owner) < 0) or owner[0] < 0 or owner[-1] >= len(members)):
            raise ValueError(f"table {field!r} has rows of no member")
        bounds = np.searchsorted(owner, np.arange(len(members) + 1))
        frame = table.conform(frame)  # every member's rows at once: the declared dtypes back
        for value, start, end in zip(values, bounds[:-1], bounds[1:]):
            rows = frame.iloc[start:end]
            rows.index = pd.RangeIndex(end - start)  # the member's own rows, numbered from 0
            value[field] = rows["value"].to_numpy() if field in declared.arrays else rows
    return [(member["source"], member["identity"], declared.kind(**value)) for member, value in zip(members, values)]


def summary_format(declared: Persisted) -> str:
    """The format of a summary entry of the kind `declared` (a `schema.Persisted`): the cache's
    and the digest of the summary's declarations, so that a column of one of its tables
    renamed or retyped makes its entries another format (missed, built again), never read
    back as the new shape."""
    return f"{CACHE_FORMAT}.{declared.digest}"
