"""Table declarations: every table the package produces is declared once, here or beside the
view that makes it, the way Perfetto's trace processor declares its tables.

A declaration names the table's columns in order, each with its dtype, unit and one line of
meaning. It is the single source from which the view's documented column list, the OpenAPI
response component of the route that serves it and the page's row types are generated, and
against which a test checks every answer. A view builds its output through
`Table.frame(...)`, so a column that is missing, extra or of another dtype fails where it is
made, not in the page.

This module is light on purpose (pandas and numpy only): the views, the cache and the API
import it at no cost.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

# Declared dtype -> how a column of it is held in a DataFrame and sent as JSON.
#   int64   whole numbers; -1 means "absent" in id columns (documented per column)
#   float64 measurements; NaN means "unknown" and is sent as null
#   bool    flags
#   str     text (held as Python strings or a categorical of strings)
DTYPES = ("int64", "float64", "bool", "str")

# Units a column may carry. One unit per quantity across the package: times and durations
# are microseconds, sizes bytes, shares percent.
UNITS = ("", "us", "bytes", "pct", "count", "flops", "tflop/s", "gb/s", "bytes/us", "flop/byte")


@dataclass(frozen=True)
class Column:
    """One column: `name` (snake_case, with a unit suffix where it has one), `dtype` (one of
    `DTYPES`), `unit` (one of `UNITS`, "" for none) and `doc`, one line of meaning."""

    name: str
    dtype: str
    unit: str
    doc: str

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"column {self.name!r}: dtype {self.dtype!r} is not one of {DTYPES}")
        if self.unit not in UNITS:
            raise ValueError(f"column {self.name!r}: unit {self.unit!r} is not one of {UNITS}")
        if not self.doc or "\n" in self.doc:
            raise ValueError(f"column {self.name!r}: doc must be one non-empty line")


@dataclass(frozen=True)
class Table:
    """A declared table: `name` (unique in the package), `doc` (what one row is) and its
    `columns`, in the order they are produced."""

    name: str
    doc: str
    columns: tuple

    def __post_init__(self):
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"table {self.name!r} declares a column twice")

    @property
    def names(self):
        return [c.name for c in self.columns]

    def column(self, name):
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name!r} has no column {name!r}")

    def frame(self, data):
        """A DataFrame with exactly the declared columns, in order, of the declared dtypes.

        `data` is a DataFrame or a mapping of column name to values holding every declared
        column (extra ones are dropped: intermediate columns of a computation never leak into
        an answer). A missing column, or values that cannot take the declared dtype, raise
        `SchemaError` naming the table and column.
        """
        source = data if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
        missing = [n for n in self.names if n not in source.columns]
        if missing:
            raise SchemaError(f"table {self.name!r}: columns {missing} were not produced")
        out = {}
        for col in self.columns:
            values = source[col.name]
            try:
                out[col.name] = _as_dtype(values, col.dtype)
            except (TypeError, ValueError) as exc:
                raise SchemaError(f"table {self.name!r}, column {col.name!r}: {exc}") from exc
        return pd.DataFrame(out, index=pd.RangeIndex(len(source)))

    def check(self, frame):
        """Raise `SchemaError` unless `frame` has exactly the declared columns and dtypes."""
        if list(frame.columns) != self.names:
            raise SchemaError(f"table {self.name!r}: columns {list(frame.columns)} != declared {self.names}")
        for col in self.columns:
            if not _has_dtype(frame[col.name], col.dtype):
                raise SchemaError(f"table {self.name!r}, column {col.name!r}: dtype "
                                  f"{frame[col.name].dtype} is not {col.dtype}")

    def doc_lines(self):
        """The column list as it reads in a numpydoc Returns section, one column a line."""
        lines = []
        for c in self.columns:
            unit = f", {c.unit}" if c.unit else ""
            lines.append(f"{c.name} ({c.dtype}{unit}): {c.doc}")
        return lines


class SchemaError(ValueError):
    """A table does not match its declaration (a bug in the view that made it)."""


def _as_dtype(values, dtype):
    series = values if isinstance(values, pd.Series) else pd.Series(values)
    series = series.reset_index(drop=True)
    if dtype == "str":
        if isinstance(series.dtype, pd.CategoricalDtype):
            return series.astype(str) if not _categories_are_str(series) else series
        if series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
            return series.astype(object)
        if len(series) == 0:
            return series.astype(object)
        raise TypeError(f"holds {series.dtype}, not text")
    if dtype == "bool":
        if series.dtype == bool:
            return series
        if len(series) == 0 or series.dtype == object and series.map(type).eq(bool).all():
            return series.astype(bool)
        raise TypeError(f"holds {series.dtype}, not bool")
    if dtype == "int64":
        if pd.api.types.is_integer_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
            return series.astype(np.int64)
        if len(series) == 0:
            return series.astype(np.int64)
        raise TypeError(f"holds {series.dtype}, not whole numbers")
    # float64: whole numbers widen; anything else is a bug
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        return series.astype(np.float64)
    if len(series) == 0:
        return series.astype(np.float64)
    raise TypeError(f"holds {series.dtype}, not numbers")


def _categories_are_str(series):
    return series.cat.categories.dtype == object or pd.api.types.is_string_dtype(series.cat.categories.dtype)


def _has_dtype(series, dtype):
    if dtype == "str":
        return series.dtype == object or pd.api.types.is_string_dtype(series.dtype) or (
            isinstance(series.dtype, pd.CategoricalDtype) and _categories_are_str(series))
    if dtype == "bool":
        return series.dtype == bool
    if dtype == "int64":
        return series.dtype == np.int64
    return series.dtype == np.float64


# Every declared table by name: what the OpenAPI generator, the page's types and the
# conformance test read. A table is registered by `declare`.
TABLES = {}


def declare(name, doc, *columns):
    """Declare and register a table; `columns` are `Column`s or (name, dtype, unit, doc) tuples."""
    if name in TABLES:
        raise ValueError(f"table {name!r} is declared twice")
    table = Table(name, doc, tuple(c if isinstance(c, Column) else Column(*c) for c in columns))
    TABLES[name] = table
    return table
