"""String coding: text columns held as integer codes into their distinct values, and the
conversions between JSON values, numbers and pandas columns the builder (`batches`, `build`) uses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import pandas as pd
import polars as pl

if TYPE_CHECKING:
    import numpy.typing as npt

    # Coded strings: an int32 code per row into the distinct values, -1 where null.
    Coded = tuple[npt.NDArray[np.int32], list[str]]


def _objects(values: Sequence[object]) -> npt.NDArray[np.object_]:
    """Object array of a list without numpy probing each item (bytes and msgspec.Raw expose
    the buffer protocol, which makes `np.array(..., dtype=object)` 50x slower)."""
    return np.fromiter(values, dtype=object, count=len(values))


def whole_ints(values: npt.NDArray[np.float64], missing: int = -1) -> npt.NDArray[np.int64]:
    """int64 from float64, `missing` where NaN or infinite or outside int64 (which the cast
    would turn into -2**63)."""
    return np.where(np.abs(values) < 2.0**63, values, missing).astype(np.int64)


def as_floats(values: Sequence[Any]) -> npt.NDArray[np.float64]:
    """float64 array; None / non-numbers become NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)


def frame_codes(frame: pl.DataFrame, names: Sequence[str], also: Iterable[pl.Expr] = ()) -> dict[str, Any]:
    """{name: (codes, values)} for String columns of a polars DataFrame: `values` the column's
    distinct strings in order of first appearance, `codes` an int32 row -> index into
    `values`, -1 where null. Hashing happens in polars, without a Python object per row, and
    all columns take two polars calls (each call has a fixed cost); `also` are more
    expressions for the second call, whose results are returned as numpy arrays by name."""
    distinct = frame.select(pl.col(n).drop_nulls().unique(maintain_order=True).implode() for n in names).row(0) if names else ()
    if not names and not also:
        return {}
    columns = frame.select(*(pl.col(n).cast(pl.Enum(values)).to_physical().cast(pl.Int32).fill_null(-1)
                             for n, values in zip(names, distinct)), *also)
    coded = {n: (columns[n].to_numpy(), values) for n, values in zip(names, distinct)}
    return {**coded, **{name: columns[name].to_numpy() for name in columns.columns if name not in coded}}


def id_codes(series: pl.Series) -> npt.NDArray[np.int64]:
    """int64 code per row of a String Series of ids (-1 where null), equal ids sharing one.
    Ids are integers in nearly every trace: those are factorized as numbers (hashing many
    distinct strings is what `frame_codes` is slow at); other texts get codes after them."""
    as_int = series.cast(pl.Int64, strict=False)
    is_int = as_int.is_not_null().to_numpy()
    codes = np.full(len(series), -1, dtype=np.int64)
    int_codes, distinct = pd.factorize(as_int.filter(is_int).to_numpy())
    codes[is_int] = int_codes
    text_codes, _ = coded_series(series.filter(~is_int))
    codes[~is_int] = np.where(text_codes >= 0, text_codes + len(distinct), -1)
    return codes


def coded_series(series: pl.Series) -> Coded:
    """(codes, values) of one String Series (see `frame_codes`)."""
    return frame_codes(series.rename("values").to_frame(), ("values",))["values"]


def _intern(values: Sequence[str | None]) -> tuple[npt.NDArray[np.int64], pd.Index]:
    """(codes, categories) of strings: categories unique, always holding "" (None's code)."""
    codes, uniques = pd.factorize(_objects(values), use_na_sentinel=True)
    categories = [u if isinstance(u, str) else str(u) for u in uniques]
    categories_unique, remap = np.unique(np.array(categories + [""], dtype=object), return_inverse=True)
    remap = remap.astype(np.int64)
    codes = np.where(codes < 0, remap[len(categories)], remap[np.clip(codes, 0, None)])
    return codes, pd.Index(categories_unique, dtype=object)


def recode(coded: Coded, mask: npt.NDArray[np.bool_] | slice,
           transform: Callable[[str | None], str]) -> pd.Categorical:
    """Categorical of the rows in `mask` of coded strings (`coded_series`), each distinct value
    mapped through `transform` once (not once per row)."""
    codes, uniques = coded
    texts = [transform(u) for u in uniques] + [transform(None)]  # code -1 (missing) -> last
    new_codes, categories = _intern(texts)
    picked = codes[mask]
    return pd.Categorical.from_codes(new_codes[np.where(picked < 0, len(uniques), picked)], categories=categories,
                                     validate=False)


_ALL = slice(None)


def text_categorical(values: npt.NDArray[np.object_]) -> pd.Categorical:
    """Python strings as a Categorical whose categories stay Python strings (object): pandas 3
    infers its `str` dtype for them, which the disk cache does not store."""
    return pd.Categorical(values, categories=pd.Index(np.unique(values), dtype=object))


def categorical_of(coded: Coded) -> pd.Categorical:
    """Coded strings (`coded_series`) as a pandas Categorical; null becomes the empty string."""
    return recode(coded, _ALL, lambda v: v or "")


def _canonical_json(text: str | None) -> str:
    """JSON text (e.g. input shapes) written one way whoever wrote it; absent -> ""."""
    if text is None:
        return ""
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))


def json_categorical(coded: Coded) -> pd.Categorical:
    """Interned canonical JSON text of coded strings holding JSON; absent -> ""."""
    return recode(coded, _ALL, _canonical_json)


def decoded_texts(coded: Coded) -> list[str | None]:
    """Coded strings back as a list of str (None where null); for small tables only."""
    codes, values = coded
    return [values[c] if c >= 0 else None for c in codes.tolist()]


def first_valid(primary: npt.NDArray[np.int64], secondary: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return np.where(primary >= 0, primary, secondary)


class Interner:
    """Global codes for the strings of one column met batch by batch: `values[code]`."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self.values: list[str] = []

    def remap(self, coded: Coded) -> npt.NDArray[np.int32]:
        """Codes for the whole trace of a batch's coded strings (`frame_codes`); -1 where null."""
        batch_codes, batch_values = coded
        remap = np.empty(len(batch_values) + 1, dtype=np.int32)
        remap[-1] = -1  # batch code -1 (null) stays -1
        for i, value in enumerate(batch_values):  # distinct values only
            code = self._index.get(value)
            if code is None:
                code = self._index[value] = len(self.values)
                self.values.append(value)
            remap[i] = code
        return remap[batch_codes]
