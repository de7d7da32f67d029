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

import dataclasses
import hashlib
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

# Declared dtype -> how a column of it is held in a DataFrame and sent as JSON.
#   int64   whole numbers; -1 means "absent" in id columns (documented per column); a nullable
#           int64 column (a count or size that may be unknown) is held as pandas' Int64
#   int32   whole numbers in the model's compact columns (sent like int64)
#   float64 measurements; NaN means "unknown" and is sent as null (declare the column
#           nullable where that can happen)
#   bool    flags
#   str     text (held as Python strings or a categorical of strings)
DTYPES = ("int64", "int32", "float64", "bool", "str")

# Each dtype's JSON Schema type: what the OpenAPI components and the conformance test use.
JSON_TYPES = {"int64": "integer", "int32": "integer", "float64": "number", "bool": "boolean", "str": "string"}

# The fifth element of a column tuple in `declare`: the column may hold null (NaN, None).
NULLABLE = True

# Units a column may carry. One unit per quantity across the package: times and durations
# are microseconds, sizes bytes, shares percent.
UNITS = ("", "us", "bytes", "pct", "count", "flops", "tflop/s", "gb/s", "bytes/us", "flop/byte")


@dataclass(frozen=True)
class Column:
    """One column: `name` (snake_case, with a unit suffix where it has one), `dtype` (one of
    `DTYPES`), `unit` (one of `UNITS`, "" for none), `doc`, one line of meaning, and
    `nullable`: whether a value may be missing (NaN, None or pandas' NA, sent as JSON null).
    Only measurements, text and whole-number quantities (int64, held as pandas' nullable Int64)
    can be; ids use -1 and flags False for "absent"."""

    name: str
    dtype: str
    unit: str
    doc: str
    nullable: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"column {self.name!r}: dtype {self.dtype!r} is not one of {DTYPES}")
        if self.unit not in UNITS:
            raise ValueError(f"column {self.name!r}: unit {self.unit!r} is not one of {UNITS}")
        if not self.doc or "\n" in self.doc:
            raise ValueError(f"column {self.name!r}: doc must be one non-empty line")
        if self.nullable and self.dtype not in ("float64", "str", "int64"):
            raise ValueError(f"column {self.name!r}: {self.dtype} columns cannot hold null")

    @property
    def json_type(self) -> str:
        """The JSON Schema type of its values: "integer", "number", "boolean" or "string"."""
        return JSON_TYPES[self.dtype]


@dataclass(frozen=True)
class Table:
    """A declared table: `name` (unique in the package), `doc` (what one row is) and its
    `columns`, in the order they are produced."""

    name: str
    doc: str
    columns: tuple[Column, ...]

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"table {self.name!r} declares a column twice")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name!r} has no column {name!r}")

    def columns_named(self, *names: str) -> tuple[Column, ...]:
        """These columns of the table, in the order named: a table made of some of another's
        columns (one worker's rows before they are combined) declares them once."""
        return tuple(self.column(name) for name in names)

    def frame(self, data: pd.DataFrame | Mapping[str, Any]) -> pd.DataFrame:
        """A DataFrame with exactly the declared columns, in order, of the declared dtypes.

        `data` is a DataFrame or a mapping of column name to values holding every declared
        column (extra ones are dropped: intermediate columns of a computation never leak into
        an answer). A missing column, or values that cannot take the declared dtype, raise
        `SchemaError` naming the table and column.
        """
        if not isinstance(data, pd.DataFrame) and all(
                c.name in data and isinstance(data[c.name], np.ndarray) and _is_declared_array(data[c.name], c) for c in self.columns):
            # Arrays already of the declared dtypes (a zoomed timeline's hundred thousand
            # points): one DataFrame made from them, not a DataFrame, a Series per column,
            # their conversions and a second DataFrame.
            index = pd.RangeIndex(len(data[self.names[0]]))
            return pd.DataFrame({c.name: pd.Series(data[c.name], index=index, dtype=object) if c.dtype == "str" else data[c.name]
                                 for c in self.columns}, index=index)  # text stays object, as `_as_dtype` leaves it
        source = data if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
        missing = [n for n in self.names if n not in source.columns]
        if missing:
            raise SchemaError(f"table {self.name!r}: columns {missing} were not produced")
        out = {}
        for col in self.columns:
            values = source[col.name]
            try:
                out[col.name] = _as_dtype(values, col.dtype, col.nullable)
            except (TypeError, ValueError) as exc:
                raise SchemaError(f"table {self.name!r}, column {col.name!r}: {exc}") from exc
        return pd.DataFrame(out, index=pd.RangeIndex(len(source)))

    def conform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` (holding exactly the declared columns, in order) with each column kept as it
        is where `check` accepts its dtype (text as Python strings or pandas' own) and
        converted as `frame` converts it where not: a table written to or read back from
        storage gets the declared dtypes without copying the columns that have them.
        `SchemaError` names the table and column otherwise."""
        if list(frame.columns) != self.names:
            raise SchemaError(f"table {self.name!r}: columns {list(frame.columns)} != declared {self.names}")
        out = {}
        for col in self.columns:
            values = frame[col.name].reset_index(drop=True)
            try:
                out[col.name] = values if _has_dtype(values, col.dtype, col.nullable) else _as_dtype(
                    values, col.dtype, col.nullable)
            except (TypeError, ValueError) as exc:
                raise SchemaError(f"table {self.name!r}, column {col.name!r}: {exc}") from exc
        return pd.DataFrame(out, index=pd.RangeIndex(len(frame)))

    def empty(self) -> pd.DataFrame:
        """The table with no rows: what an analysis answers when the trace has nothing for it
        (no compiled region, no CUDA graph), without computing anything: made from empty
        columns of the declared dtypes, not converted as `frame` converts values (about a
        third of the time)."""
        index = pd.RangeIndex(0)
        columns = {c.name: _empty_column(c) for c in self.columns}
        # the dtype said again: pandas 3 would take an empty object column for its Arrow strings
        return pd.DataFrame({name: pd.Series(values, index=index, dtype=values.dtype) for name, values in columns.items()},
                            index=index)

    def check(self, frame: pd.DataFrame) -> None:
        """Raise `SchemaError` unless `frame` has exactly the declared columns and dtypes."""
        if list(frame.columns) != self.names:
            raise SchemaError(f"table {self.name!r}: columns {list(frame.columns)} != declared {self.names}")
        for col in self.columns:
            if not _has_dtype(frame[col.name], col.dtype, col.nullable):
                raise SchemaError(f"table {self.name!r}, column {col.name!r}: dtype "
                                  f"{frame[col.name].dtype} is not {col.dtype}")

    def doc_lines(self) -> list[str]:
        """The column list as it reads in a numpydoc Returns section, one column a line."""
        lines = []
        for c in self.columns:
            unit = f", {c.unit}" if c.unit else ""
            null = ", nullable" if c.nullable else ""
            lines.append(f"{c.name} ({c.dtype}{unit}{null}): {c.doc}")
        return lines

    def doc_block(self) -> list[str]:
        """This table's part of a docstring: its name, what a row is, its columns."""
        return [f"``{self.name}`` -- {self.doc}", "", *(f"- {line}" for line in self.doc_lines())]


class SchemaError(ValueError):
    """A table does not match its declaration (a bug in the view that made it)."""


def _as_dtype(values: pd.Series, dtype: str, nullable: bool = False) -> pd.Series:
    series = values if isinstance(values, pd.Series) else pd.Series(values)
    series = series.reset_index(drop=True)
    if dtype == "int64" and nullable:
        if pd.api.types.is_bool_dtype(series.dtype) or not (
                pd.api.types.is_numeric_dtype(series.dtype) or series.dtype == object or len(series) == 0):
            raise TypeError(f"holds {series.dtype}, not whole numbers")
        # whole numbers and None/NaN (rows built one by one give object); a fraction or text raises
        return series.astype("Int64")
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
        if len(series) == 0 or series.dtype == object and series.map(lambda value: isinstance(value, bool)).all():
            return series.astype(bool)
        raise TypeError(f"holds {series.dtype}, not bool")
    if dtype in ("int64", "int32"):
        if pd.api.types.is_integer_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype) or len(series) == 0:
            return series.astype(np.dtype(dtype))
        raise TypeError(f"holds {series.dtype}, not whole numbers")
    # float64: whole numbers widen; anything else is a bug
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        return series.astype(np.float64)
    if len(series) == 0:
        return series.astype(np.float64)
    raise TypeError(f"holds {series.dtype}, not numbers")


def _empty_column(column: Column) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """A column of no values of `column`'s dtype as `frame` makes it."""
    if column.dtype == "int64" and column.nullable:
        return pd.array([], dtype="Int64")
    return np.zeros(0, dtype=object if column.dtype == "str" else np.dtype(column.dtype))


def _is_declared_array(values: np.ndarray, column: Column) -> bool:
    """Whether the numpy array `values` is 1-D and of `column`'s dtype as `frame` makes it
    (text: an object array, as `_as_dtype` leaves it)."""
    if values.ndim != 1 or (column.dtype == "int64" and column.nullable):
        return False
    return values.dtype == (object if column.dtype == "str" else np.dtype(column.dtype))


def _categories_are_str(series: pd.Series) -> bool:
    return series.cat.categories.dtype == object or pd.api.types.is_string_dtype(series.cat.categories.dtype)


def _has_dtype(series: pd.Series, dtype: str, nullable: bool = False) -> bool:
    if dtype == "int64" and nullable:
        return series.dtype == "Int64"
    if dtype == "str":
        return series.dtype == object or pd.api.types.is_string_dtype(series.dtype) or (
            isinstance(series.dtype, pd.CategoricalDtype) and _categories_are_str(series))
    if dtype == "bool":
        return series.dtype == bool
    if dtype in ("int64", "int32"):
        return series.dtype == np.dtype(dtype)
    return series.dtype == np.float64


# Every declared table by name: what the OpenAPI generator, the page's types and the
# conformance test read. A table is registered by `declare`.
TABLES: dict[str, Table] = {}


def declare(name: str, doc: str, *columns: Column | tuple[str, str, str, str] | tuple[str, str, str, str, bool]) -> Table:
    """Declare and register a table; `columns` are `Column`s or (name, dtype, unit, doc)
    tuples, with `NULLABLE` as a fifth element for a column that may hold null."""
    if name in TABLES:
        raise ValueError(f"table {name!r} is declared twice")
    table = Table(name, doc, tuple(c if isinstance(c, Column) else Column(*c) for c in columns))
    TABLES[name] = table
    return table


@dataclass(frozen=True)
class Persisted:
    """A per-file summary the disk cache stores (`cache.encode_summaries`), declared field by
    field: `name` (what the cache keys it under, e.g. "job"), `kind` (its dataclass),
    `tables` ({field: Table} of its DataFrame fields, and of its 1-D array fields, each
    declared as a table of one column `value`, those named in `arrays`) and `scalars` (its
    other fields as the columns of a one-row table, or None when it has none). The cache
    writes and reads the summary only through these declarations, and its entries' format
    is derived from them (`digest`): a column renamed or retyped is another format."""

    name: str
    kind: type
    tables: dict[str, Table]
    scalars: Table | None = None
    arrays: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        declared = [*self.tables, *(self.scalars.names if self.scalars is not None else ())]
        fields = [f.name for f in dataclasses.fields(self.kind)]
        if sorted(declared) != sorted(fields):
            raise ValueError(f"persisted {self.name!r} declares {sorted(declared)}, "
                             f"but a {self.kind.__name__} has {sorted(fields)}")
        for field in self.arrays:
            if self.tables[field].names != ["value"]:
                raise ValueError(f"persisted {self.name!r}: array {field!r} is declared as one column, value")

    @property
    def digest(self) -> str:
        """12 hex digits of a SHA-256 over every declared name and dtype (what a stored entry's
        layout depends on; units and meanings do not change the bytes)."""
        def layout(table: Table | None) -> list[object] | None:
            return None if table is None else [table.name, [[c.name, c.dtype, c.nullable] for c in table.columns]]

        shape = [self.name, self.kind.__name__, layout(self.scalars), sorted(self.arrays),
                 sorted([field, layout(table)] for field, table in self.tables.items())]
        return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:12]


def documented(*tables: Table) -> Callable[[Callable[..., Any]], Any]:
    """Decorator: write the column lists of `tables` into the function's docstring, so that
    `help(view)` shows the declared columns and no copy is kept by hand.

    The lists go at the end of the docstring's "Returns" section (one is added, before
    "Notes", when there is none), after what the docstring says there itself (which table
    is returned when, and the row order).
    """
    # The decorated view is Any to mypy, as it was while this was unannotated: typed as the view
    # itself, its callers are checked against its signature, which four calls in views/ do not
    # yet pass (issue 36 item 6 finishes there).
    def decorate(function: Any) -> Any:
        function.__doc__ = _with_columns(function.__doc__ or "", tables)
        function.tables = tables
        return function
    return decorate


def _with_columns(doc: str, tables: Sequence[Table]) -> str:
    lines = inspect.cleandoc(doc).splitlines()
    block = []
    for table in tables:
        block += [*table.doc_block(), ""]
    headers = [i for i in range(1, len(lines)) if set(lines[i]) == {"-"} and lines[i - 1].strip()]
    returns = next((i for i in headers if lines[i - 1].strip() == "Returns"), None)
    if returns is None:
        at = next((i - 1 for i in headers if lines[i - 1].strip() == "Notes"), len(lines))
        block = ["Returns", "-------", *block]
    else:
        at = next((i - 1 for i in headers if i > returns), len(lines))
    if at > 0 and lines[at - 1].strip():
        block.insert(0, "")
    return "\n".join(lines[:at] + block + lines[at:]).rstrip() + "\n"


# --- routes --------------------------------------------------------------------------------
# A data route is declared once, beside the table(s) it answers with:
#
#     LIGHTNING_ROUTE = route("lightning", "Time per PyTorch Lightning hook.", lightning_hooks,
#                             table=LIGHTNING_HOOKS)
#
# name: the route (`/data/plugin/pytorch_profiler/<name>`) and `answer`'s name for it;
# summary: one line for its OpenAPI entry; call: the view function the route answers with,
# called with its input's parts first (`call(model, **parameters)` over one profile), then its
# parameters; reads: the kind of input (`READS`, below; one profile by default); params: its
# query parameters beside those naming the input (`choice`, `model_choice`, `flag`,
# `integer`, `number`, `text`, `ids`, `window`; `required=` where it has no default), in the
# order of the view's arguments; table: the one table it answers (or a tuple of tables when a
# parameter picks which, e.g. group_by), served as JSON or, with format=csv, CSV;
# tables: instead, {name: Table} of a view made of several tables (`call` returns an object
# with one attribute per name), served whole, some (`tables=a,b`) or one (`table=a`, CSV too);
# fields: instead, {name: Table or JSON Schema} of an answer that is an object of tables and
# plain values (`call` returns that dict: a device's memory curve with its peaks), JSON only
# (`alone`: those of its tables also served by themselves, with table= or format=csv);
# reply: instead, the hand-written component of openapi.yaml an answer of another shape is
# (a tree of modules, a window of slices); part: the per-worker summary a route over a span
# reads; admits: `call` takes `admit(values, what)`, the reply's share of the memory budget;
# frames: `frames(answer, resolve)` gives the answer's stack frames their files on the server.
# From these, `python -m tb_plugin.openapi_gen` writes the route's `paths:` entry and its line
# in tb_plugin/server/routes.py, the API answers it without a handler of its own, the page's
# parameter types and the fuzz test's valid values follow from the OpenAPI entry.


# The kinds of input a declared route reads, each with the query parameters that name it
# (shared parameters of openapi.yaml, `#/components/parameters/<name>`): the HTTP layer finds
# the input from them (`api.READ_INPUTS`), the Python entrance is the input's own `answer`
# (`Profile.answer`, `MemorySnapshot.answer`, `Run.answer`, `profile.diff`); `call` is given the
# input's parts first, then the route's parameters:
PROFILE = "profile"  # one profile (run, worker, span): call(model, ...)
SNAPSHOT = "snapshot"  # one memory snapshot (run, snapshot, span): call(model, ...)
TWO_PROFILES = "two profiles"  # A and B of a comparison: call(model_a, model_b, ...)
SPAN = "span of ranks"  # every worker of one span, each by its summary `Route.part`: call({worker: part}, {worker: reason not loaded}, ...)
TWO_SPANS = "two spans of ranks"  # a span of run A and one of run B, each worker by `Route.part`: call(parts_a, parts_b, ...)
RANKS = "ranks on one axis"  # the ranks of one span on one clock (`runs.RanksTimeline`): call(ranks, ...)
RUN_SNAPSHOTS = "snapshots of a run"  # every memory snapshot of a run: call({name: its model}, {name: reason not read}, ...)
SNAPSHOT_TRACES = "snapshot and its traces"  # a snapshot and its rank's profiles: call(its model, {(worker, span): model}, ...)
LOG_DIRECTORY = "log directory"  # the runs found under it (`views.listing.Listing`), answered afresh: call(listing, ...)
# A profile of a run (its first worker's unless `worker` names one) as the page's tabs are offered for it, with how
# many workers the run and trace files the log directory have (`Offer`), answered afresh (the counts change with
# every scan): call(offer, run name, ...)
OFFERED = "profile offered"
READS: dict[str, tuple[str, ...]] = {
    PROFILE: ("run", "worker", "span"), SNAPSHOT: ("run", "snapshot", "span"),
    TWO_PROFILES: ("run", "worker", "span", "run_b", "worker_b", "span_b"),
    SPAN: ("run", "span"), TWO_SPANS: ("run", "span", "run_b", "span_b"),
    RANKS: ("run", "span", "ranks", "expanded", "align_clocks"),
    RUN_SNAPSHOTS: ("run",), SNAPSHOT_TRACES: ("run", "snapshot", "span"), LOG_DIRECTORY: (),
    OFFERED: ("run", "first_worker", "span")}  # first_worker: the query's `worker`, optional


@dataclass(frozen=True)
class Param:
    """One query parameter of a declared route: `name`, its JSON Schema `type` ("string",
    "integer", "number"), `default` (given to the call when the request has none; None
    leaves the view's own default), `choices` (a string parameter's allowed values, the
    first the default), `means` (what some choices are to the view, where that is not the
    text itself: "true" -> True, "all" -> None), `choices_of` (instead of `choices`, where
    the profile decides them: `choices_of(model)`, the first the default), `minimum` and
    `maximum` (numbers, both allowed), one line of meaning and `arg`, the view's argument it
    is given as where that is not `name` (a snapshot's `library` is `flame`'s
    `collapse_library`); `required` (the request must give it: it has no default),
    `above` (a number's exclusive minimum), `at_least` (an earlier parameter's name: this one
    is not below it, and their difference is finite: a time window's end), `parse` (what a
    text value is to the view, e.g. comma-separated ids -> a list; ValueError says why it is
    not one) with `pattern`, the text's form in OpenAPI."""

    name: str
    type: str
    doc: str
    default: object = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    means: tuple[tuple[str, object], ...] = ()
    choices_of: Callable[[Any], Sequence[Any]] | None = None
    arg: str = ""
    required: bool = False
    above: float | None = None
    at_least: str = ""
    parse: Callable[[str], object] | None = None
    pattern: str = ""

    @property
    def argument(self) -> str:
        """The name of the view's argument it is given as."""
        return self.arg or self.name

    def valid_value(self) -> str | None:
        """A value a request may give (the fuzz test's and the load test's valid value); None
        where the profile decides them (`choices_of`: its first is the default)."""
        if self.choices_of is not None:
            return None
        if self.choices:
            return self.choices[0]
        if self.default is not None:
            return str(self.default)
        if self.type == "string":  # free text or ids: the shortest valid one
            return "0" if self.parse is not None else "a"
        return str(self.above + 1 if self.above is not None else self.minimum or 0)

    def check(self, value: object, earlier: Mapping[str, object]) -> None:
        """Raise ValueError saying why the number `value` (as the view takes it) is outside this
        parameter's declared bounds, `earlier` being the route's parameters before it (their
        values by name): what HTTP and the Python entrances both refuse. Text is checked by
        `value` (its `parse`), a choice by its choices."""
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"parameter {self.name!r} must be >= {self.minimum}, not {value}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"parameter {self.name!r} must be <= {self.maximum}, not {value}")
        if self.above is not None and value <= self.above:
            raise ValueError(f"parameter {self.name!r} must be > {self.above}")
        start = earlier.get(self.at_least) if self.at_least else None
        if isinstance(start, (int, float)) and not isinstance(start, bool):
            if value < start:
                raise ValueError(f"{self.name} ({value}) is before {self.at_least} ({start})")
            if not math.isfinite(value - start):  # e.g. -1e308..1e308: bins of width inf, NaN times
                raise ValueError(f"the window from {self.at_least} to {self.name} is too wide")

    def value(self, given: object) -> object:
        """What the view is called with for the request's value `given` (None: the view's
        own default holds); ValueError, naming the parameter, for a text `parse` refuses."""
        if not isinstance(given, str):
            return given
        means = dict(self.means)
        if given in means:
            return means[given]
        if self.type in ("integer", "number") and self.parse is None:  # a number given as its query text
            return number_text(self.name, given, self.type == "integer")
        if self.parse is None:
            return given
        try:
            return self.parse(given)
        except ValueError as exc:
            raise ValueError(f"parameter {self.name!r} {exc}") from None


def choice(name: str, choices: tuple[str, ...], doc: str, means: dict[str, object] | None = None, arg: str = "",
           required: bool = False) -> Param:
    """A string parameter taking one of `choices`, the first by default (none where
    `required`); `means`: what some of them are to the view where that is not the text
    (None for the view's default)."""
    return Param(name, "string", doc, None if required else choices[0], tuple(choices),
                 means=tuple((means or {}).items()), arg=arg, required=required)


def model_choice(name: str, choices_of: Callable[[Any], Sequence[Any]], doc: str, type: str = "string",
                 minimum: int | None = None) -> Param:
    """A parameter (a string, or with `type` "integer" a whole number of at least `minimum`)
    taking one of what `choices_of(model)` lists for the input asked (the memory devices of
    a trace, the devices of a snapshot), the first by default."""
    return Param(name, type, doc, minimum=minimum, choices_of=choices_of)


def flag(name: str, doc: str) -> Param:
    """A yes/no parameter, "false" (the default) or "true", given to the view as a bool."""
    return choice(name, ("false", "true"), doc, {"false": False, "true": True})


def number_text(name: str, text: str, integer: bool) -> int | float:
    """The number parameter `name`'s query text as the number (an int where `integer`);
    ValueError naming it for text that is not one, or not finite: what HTTP and the Python
    entrances both refuse."""
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise ValueError(f"parameter {name!r} must be {'an integer' if integer else 'a number'}, not {text[:40]!r}") from None
    if isinstance(value, float) and not math.isfinite(value):  # (an int is: however large, never inf)
        raise ValueError(f"parameter {name!r} must be finite")
    return value


def integer(name: str, doc: str, default: int | None = None, minimum: int | None = None,
            maximum: int | None = None, required: bool = False) -> Param:
    return Param(name, "integer", doc, default, minimum=minimum, maximum=maximum, required=required)


def number(name: str, doc: str, default: float | None = None, minimum: float | None = None,
           maximum: float | None = None, required: bool = False, above: float | None = None) -> Param:
    return Param(name, "number", doc, default, minimum=minimum, maximum=maximum, required=required, above=above)


def text(name: str, doc: str, required: bool = False) -> Param:
    """Free text (a name, a search): non-empty, at most 4096 characters, no NUL (the HTTP
    layer's rule for every text parameter)."""
    return Param(name, "string", doc, required=required)


# Ids at most this: beyond int32 the views' arrays would overflow.
_MAX_ID = (1 << 31) - 1


def parse_ids(raw: str, what: str = "ids") -> list[int]:
    """Comma-separated whole numbers (`what`: "track ids", "ranks"), each once in the order
    first given: 2,000 repeats of one track in a 4 KB query once built a 469 MB reply."""
    try:
        ids = [int(t) for t in raw.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"must be comma-separated {what}") from None
    if not all(0 <= t <= _MAX_ID for t in ids):
        raise ValueError(f"holds one of its {what} out of range")
    return list(dict.fromkeys(ids))


def ids(name: str, doc: str, what: str) -> Param:
    """Comma-separated ids (`parse_ids`), given to the view as a list; absent, the view's
    default holds (every one)."""
    return Param(name, "string", doc, parse=lambda raw: parse_ids(raw, what), pattern=r"^\s*[0-9]+\s*(,\s*[0-9]*\s*)*$")


def window(what: str) -> tuple[Param, Param]:
    """The time window [start_us, end_us] a route answers over (`what`: of what), both
    required, the end not before the start."""
    return (number("start_us", f"Start of the window of {what} (µs, the trace's clock).", required=True),
            Param("end_us", "number", f"End of the window of {what} (µs; not before start_us).", required=True,
                  at_least="start_us"))


@dataclass(frozen=True)
class Route:
    """A data route, declared once (see `route`)."""

    name: str
    summary: str
    call: Callable[..., Any]
    params: tuple[Param, ...] = ()
    reads: str = PROFILE  # the kind of input (`READS`)
    table: Table | tuple[Table, ...] | None = None  # one table, or several one of which a parameter picks
    tables: dict[str, Table] | None = None  # {name: table} of a view made of several tables
    fields: dict[str, Any] | None = None  # {name: table or JSON Schema} of an object answer
    reply: str = ""  # the component of openapi.yaml an answer of another shape is (a tree, a window's slices)
    part: str = ""  # SPAN, TWO_SPANS: the per-worker summary read (`runs.FILE_SUMMARIES`)
    admits: bool = False  # `call` takes `admit(values, what)`, the reply's share of the memory budget
    frames: Callable[[Any, Callable[[Any], Any]], Any] | None = None  # frames(answer, resolve): its stack frames resolved
    alone: tuple[str, ...] = ()  # tables of a `fields` answer served alone: CSV (the first), `table=` where several

    @property
    def answer_tables(self) -> tuple:
        """Every table the route may answer with."""
        if self.tables is not None:
            return tuple(self.tables.values())
        if self.fields is not None:
            return tuple(f for f in self.fields.values() if isinstance(f, Table))
        if self.reply:
            return ()
        return self.table if isinstance(self.table, tuple) else (self.table,)


ROUTES: dict[str, Route] = {}


def route(name: str, summary: str, call: Callable[..., Any], *, params: Sequence[Param] = (),
          table: Table | tuple[Table, ...] | None = None, tables: Mapping[str, Table] | None = None,
          fields: Mapping[str, Any] | None = None, reply: str = "", reads: str = PROFILE, part: str = "",
          admits: bool = False, frames: Callable[[Any, Callable[[Any], Any]], Any] | None = None,
          alone: Sequence[str] = ()) -> Route:
    """Declare (and register) a data route; see the comment above `READS`. `alone`: tables of
    a `fields` answer a request may have by themselves, as JSON or CSV: with format=csv the
    first (the ranks table of the ranks on one axis), and where there are several, the one
    `table=NAME` picks (JSON or CSV); without either, the whole object (JSON)."""
    if sum(answer is not None for answer in (table, tables, fields)) + bool(reply) != 1:
        raise ValueError(f"route {name!r}: give one of `table` (one table), `tables` (several), `fields` (an object) "
                         "or `reply` (an answer of another shape)")
    if name in ROUTES:
        raise ValueError(f"route {name!r} declared twice")
    if reads not in READS:
        raise ValueError(f"route {name!r}: reads {reads!r} is not one of {', '.join(READS)}")
    if bool(part) != (reads in (SPAN, TWO_SPANS)):
        raise ValueError(f"route {name!r}: `part` names the summary a route over a span of ranks reads, and only it")
    if any(not isinstance((fields or {}).get(n), Table) for n in alone):
        raise ValueError(f"route {name!r}: `alone` names tables of its `fields`")
    names = [p.name for p in params]
    for param in params:
        if param.at_least and param.at_least not in names[:names.index(param.name)]:
            raise ValueError(f"route {name!r}: {param.name} is at least {param.at_least!r}, which is not an earlier parameter")
        if param.name in READS[reads]:
            raise ValueError(f"route {name!r}: {param.name} names its input ({reads}); it is not a parameter too")
    declared = Route(name, summary, call, tuple(params), reads, table, None if tables is None else dict(tables),
                     None if fields is None else dict(fields), reply, part, admits, frames, tuple(alone))
    for table_ in declared.answer_tables:
        if not isinstance(table_, Table):
            raise TypeError(f"route {name!r}: {table_!r} is not a declared table")
    ROUTES[name] = declared
    return declared


# --- tabs ----------------------------------------------------------------------------------
# A page with a tab of its own is declared once, beside the view it shows:
#
#     LIGHTNING_TAB = tab("lightning", 90, lambda offer: len(lightning_hooks(offer.model)))
#
# name: the tab (the page's `?view=` and its line in frontend/src/app/views.ts); order: where
# it comes in /views's list (gaps left for new tabs); offered: whether a profile has data for
# it (`Offer` -> truthy), or None for a tab the page offers from the run listing itself (memory
# snapshots). From these `Profile.available_views` answers /views and
# `python -m tb_plugin.openapi_gen` writes the `ViewName` component of openapi.yaml, the
# page's `ViewName` type.


@dataclass(frozen=True)
class Offer:
    """What decides whether a tab is offered: the profile's `model`, how many workers its run
    has (`worker_count`) and how many trace files the log directory (`trace_file_count`)."""

    model: Any
    worker_count: int
    trace_file_count: int


@dataclass(frozen=True)
class Tab:
    """A tab of the page, declared once beside its view (see `tab`)."""

    name: str
    order: int
    offered: Callable[[Offer], Any] | None


TABS: dict[str, Tab] = {}


def tab(name: str, order: int, offered: Callable[[Offer], Any] | None) -> Tab:
    """Declare (and register) a tab; see the comment above `Offer`."""
    if name in TABS:
        raise ValueError(f"tab {name!r} declared twice")
    clash = [t.name for t in TABS.values() if t.order == order]
    if clash:
        raise ValueError(f"tab {name!r}: order {order} is {clash[0]!r}'s")
    TABS[name] = Tab(name, order, offered)
    return TABS[name]


def ordered_tabs() -> list[Tab]:
    """The declared tabs in their order (of those whose modules are imported)."""
    return sorted(TABS.values(), key=lambda t: t.order)
