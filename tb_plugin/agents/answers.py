"""The data routes as tools: each route's parameters as a JSON Schema, a call answered by the
HTTP server's own route, and the answer cut to what a reader can take in.

Tools are derived, never listed: a route declared with `schema.route` is a tool through the
OpenAPI entry `openapi_gen.path_entry` writes from its declaration (its parameters, choices,
defaults and the tables it answers), a hand-written one through its entry in `openapi.yaml`.
Only `trace_file` (the stored file itself, not an answer) is left out.

A call goes through the route `api.Api` serves over a `loading.RunStore` (every path rule of
the server holds: only runs under the log directory, the memory budget, refusals with their
reasons, 202 with the progress of a profile still loading). Its answer is then paged: each
table (`{"columns", "rows"}`) keeps at most `limit` rows from `offset`, in the route's own
order (its main measure first) or `sort`'s, with how many rows it has and were left out; and
the whole is cut to `max_bytes` (fewer rows per table, then shorter lists). The same call on
the same data gives the same bytes.
"""

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlencode

import orjson
import yaml  # type: ignore[import-untyped]  # (no stubs in the test extra)
from werkzeug.test import EnvironBuilder, run_wsgi_app

from ..server.api import Api
from ..errors import PublicError
from ..server.loading import RunStore
from ..openapi_gen import SPEC_PATH, component_name, declared_routes, declared_tables, path_entry
from ..server.routes import API_ROUTES
from ..schema import Table

DEFAULT_LIMIT = 20
DEFAULT_MAX_BYTES = 16 << 10
MAX_LIMIT = 10_000
MAX_MAX_BYTES = 4 << 20
# Routes that answer no question: the trace file as stored, for other viewers.
NOT_TOOLS = ("trace_file",)
# Route parameters a tool does not take: its answer is JSON, paged by the arguments below,
# never CSV, and one table of several is chosen with `table`.
NOT_ARGUMENTS = ("format", "tables")
# The arguments every tool takes besides its route's parameters (a route parameter of the
# same name, the raw table route's `limit`, is left to its default).
PAGING = {
    "limit": {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
              "description": "At most this many rows of each table, in the route's order (its main measure first) "
                             "or sort's."},
    "offset": {"type": "integer", "minimum": 0, "default": 0,
               "description": "Rows of each table skipped first: the next page starts at offset + limit."},
    "sort": {"type": "string",
             "description": "Order the table's rows by this column, smallest first; '-column' for largest first "
                            "(default: the route's own order). Needs an answer of one table."},
    "columns": {"type": "string",
                "description": "Only these columns of the table, comma-separated (default: all). The columns tool "
                               "gives each column's type, unit and meaning. Needs an answer of one table."},
    "max_bytes": {"type": "integer", "minimum": 1024, "maximum": MAX_MAX_BYTES, "default": DEFAULT_MAX_BYTES,
                  "description": "The answer is cut to this many bytes of JSON: fewer rows per table, then shorter "
                                 "lists, each cut said so."},
}
_WORKER_DEFAULT = " Default: the run's first worker (the runs tool lists them)."


class ToolError(ValueError):
    """A call that cannot be answered as asked, in words naming the argument and what it takes."""


@dataclass(frozen=True)
class Tool:
    """A data route as a tool: `params`, its OpenAPI parameter objects (shared ones resolved)
    but those in `NOT_ARGUMENTS` and `PAGING`; `tables`, the declared tables it may answer;
    `table_keys`, their names as its `table` argument takes them (`job`'s `verdict` is the
    table `job_verdict`)."""

    name: str
    summary: str
    params: tuple[dict[str, Any], ...]
    tables: tuple[Table, ...]
    # {declared table name: what the route's `table` argument calls it} for a route of several
    table_keys: dict[str, str] = field(default_factory=dict)

    @property
    def description(self) -> str:
        tables = f" Tables: {', '.join(t.name for t in self.tables)} (the columns tool defines them)." if self.tables else ""
        return f"{self.summary}{tables} Tables come back paged: at most `limit` rows (default {DEFAULT_LIMIT}) each."

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the tool's arguments: its route's parameters, then `PAGING`."""
        properties: dict[str, Any] = {}
        for param in self.params:
            doc = param.get("description", "") + (_WORKER_DEFAULT if param["name"] == "worker" else "")
            properties[param["name"]] = {**param.get("schema", {}), **({"description": doc.strip()} if doc else {})}
        required = [p["name"] for p in self.params if p.get("required") and p["name"] != "worker"]
        schema = {"type": "object", "properties": {**properties, **PAGING}, "additionalProperties": False}
        return {**schema, "required": required} if required else schema


@lru_cache(maxsize=1)
def catalog() -> dict[str, Tool]:
    """Every tool by name (the routes of `routes.API_ROUTES` but `NOT_TOOLS`), sorted."""
    spec = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
    shared = spec["components"]["parameters"]
    declared = declared_routes()
    by_component = {component_name(name): table for name, table in declared_tables().items()}
    tools = {}
    for name in sorted(set(API_ROUTES) - set(NOT_TOOLS)):
        operation = (path_entry(declared[name]) if name in declared else spec["paths"][f"/{name}"])["get"]
        params = [shared[p["$ref"].rsplit("/", 1)[-1]] if "$ref" in p else p for p in operation.get("parameters", ())]
        answer = json.dumps(operation["responses"]["200"])
        components = dict.fromkeys(re.findall(r"#/components/schemas/(\w+)", answer))
        # an answer of several tables is an object {key: {"$ref": <the table's component>}}
        keys = dict(re.findall(r'"(\w+)": \{"\$ref": "#/components/schemas/(\w+Table)"\}', answer))
        taken = tuple(p for p in params if p["name"] not in NOT_ARGUMENTS and p["name"] not in PAGING)
        keys = keys if any(p["name"] == "table" for p in taken) else {}  # fields of an object answer are no choice
        tools[name] = Tool(name, operation["summary"], taken,
                           tuple(by_component[c] for c in components if c in by_component),
                           {by_component[c].name: key for key, c in keys.items() if c in by_component})
    return tools


def column_definitions(route: str, table: str | None = None) -> dict[str, Any]:
    """The declared columns of the tables `route` answers (or of its one table `table`): each
    column's name, type, unit, whether it may be null and its meaning."""
    tools = catalog()
    if route not in tools:
        raise ToolError(f"argument 'route' must be one of {', '.join(tools)}, not {route[:40]!r}")
    tool = tools[route]
    tables = tool.tables
    if table is not None:
        names = [tool.table_keys.get(t.name, t.name) for t in tables]
        if table not in names and table not in [t.name for t in tables]:
            raise ToolError(f"argument 'table' must be one of {', '.join(names) or '(none)'} "
                            f"for route {route!r}, not {table[:40]!r}")
        tables = tuple(t for t in tables if table in (t.name, tool.table_keys.get(t.name)))
    return {"route": route, "tables": [
        {"table": t.name, **({"argument": f"table={tool.table_keys[t.name]}"} if t.name in tool.table_keys else {}),
         "doc": t.doc, "columns": [
            {"name": c.name, "type": c.json_type, "unit": c.unit, "nullable": c.nullable, "doc": c.doc}
            for c in t.columns]} for t in tables]}


def columns_tool_schema() -> dict[str, Any]:
    """The JSON Schema of `column_definitions`' arguments."""
    return {"type": "object", "additionalProperties": False, "required": ["route"], "properties": {
        "route": {"type": "string", "enum": list(catalog()), "description": "A tool (route) name."},
        "table": {"type": "string", "description": "One of the tables the route answers, by its name or as the "
                                                   "route's table argument names it (default: all of them)."}}}


@dataclass(frozen=True)
class Paging:
    """How an answer's tables are cut: `limit` rows (None: all) from `offset`, in `sort`'s
    order, only `columns`, the whole within `max_bytes` of JSON (None: no cut)."""

    limit: int | None = DEFAULT_LIMIT
    offset: int = 0
    sort: str | None = None
    columns: tuple[str, ...] | None = None
    max_bytes: int | None = DEFAULT_MAX_BYTES

    @classmethod
    def of(cls, arguments: dict[str, Any]) -> "Paging":
        """The paging arguments among a call's `arguments`, checked (defaults where absent)."""
        def whole(name: str, default: int, low: int, high: int) -> int:
            value = arguments.get(name, default)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ToolError(f"argument {name!r} must be a whole number from {low} to {high}, not {str(value)[:40]!r}")
            return value

        text = {}
        for name in ("sort", "columns"):
            value = arguments.get(name)
            if value is not None and (not isinstance(value, str) or not value.strip("-, ")):
                raise ToolError(f"argument {name!r} must name {'a column' if name == 'sort' else 'columns'}, "
                                f"not {str(value)[:40]!r}")
            text[name] = value
        return cls(whole("limit", DEFAULT_LIMIT, 0, MAX_LIMIT), whole("offset", 0, 0, 1 << 40), text["sort"],
                   None if text["columns"] is None else tuple(c.strip() for c in text["columns"].split(",") if c.strip()),
                   whole("max_bytes", DEFAULT_MAX_BYTES, 1024, MAX_MAX_BYTES))


@dataclass
class Reply:
    """What a route answered: `status` (200, 202 while loading, 4xx) and its JSON `body`."""

    status: int
    body: Any = field(default_factory=dict)


class Answers:
    """Tool calls over one log directory, answered by the routes the HTTP server serves over
    `store`."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.tools = catalog()
        self._apps = Api(store).routes()

    def get(self, name: str, arguments: dict[str, Any]) -> Reply:
        """The route `name`'s reply to `arguments` (the paging ones left out), whole."""
        tool = self.tools.get(name)
        if tool is None:
            raise ToolError(f"no tool {name[:40]!r}; tools: {', '.join(self.tools)}")
        taken = [p["name"] for p in tool.params]
        unknown = sorted(set(arguments) - set(taken) - set(PAGING))
        if unknown:
            raise ToolError(f"{name} takes no argument {unknown[0][:40]!r}; it takes {', '.join([*taken, *PAGING])}")
        query = {}
        for key in taken:
            value = arguments.get(key)
            if value is None:
                continue
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif not isinstance(value, (str, int, float)):
                raise ToolError(f"argument {key!r} must be a string or a number, not {type(value).__name__}")
            query[key] = str(value)
        if "worker" in taken and "worker" not in query and isinstance(query.get("run"), str):
            try:
                workers = list(self.store.run_files(query["run"]).workers)
            except PublicError as exc:  # an unknown run: refused as the route refuses it
                return Reply(exc.status, exc.body())
            if workers:
                query["worker"] = workers[0]
        environ = EnvironBuilder(path=f"/{name}", query_string=urlencode(query)).get_environ()
        body, status, _ = run_wsgi_app(self._apps[f"/{name}"], environ, buffered=True)
        return Reply(int(status.split()[0]), orjson.loads(b"".join(body)))

    def call(self, name: str, arguments: dict[str, Any]) -> Reply:
        """The route's reply to `arguments`, its tables paged (`page`) when it answered; a
        `ToolError` as a 400 reply `{"error", "reason"}`, as the route's refusals are."""
        try:
            paging = Paging.of(arguments)
            reply = self.get(name, arguments)
            if reply.status == 200:
                return Reply(200, page(name, reply.body, paging))
            return reply
        except ToolError as exc:
            return Reply(400, {"error": "bad_argument", "reason": str(exc)})


def encode(body: Any) -> bytes:
    """The bytes of an answer: compact JSON, keys in the order built (deterministic)."""
    return orjson.dumps(body)


def page(route: str, body: Any, paging: Paging) -> dict[str, Any]:
    """`body` (a route's JSON answer) with each of its tables paged and cut (see the module's
    docstring), as `{"route", "answer", "paging"}` (`paging` where it holds tables)."""
    found = list(_tables_in(body))
    if (paging.sort or paging.columns) and len(found) != 1:
        what = "sort" if paging.sort else "columns"
        raise ToolError(f"argument {what!r} needs an answer of one table; this one holds "
                        f"{len(found)}: choose one with the argument 'table'")
    ordered = {id(table): _ordered(table, paging) for table in found}
    longest = max((len(t["rows"]) for t in ordered.values()), default=0)
    limit = longest if paging.limit is None else paging.limit

    def answer(rows: int, items: int | None = None) -> dict[str, Any]:
        shown = _cut(body, ordered, paging.offset, rows, items)
        if not found:
            return {"route": route, "answer": shown}
        hint = (f"each table holds at most limit={paging.limit} rows from offset={paging.offset}; "
                "next page: offset + rows shown; sort=column (or -column) orders by another column; "
                "columns=a,b keeps some columns")
        state: dict[str, Any] = {"limit": paging.limit, "offset": paging.offset, "sort": paging.sort, "hint": hint}
        if rows < limit:
            state["cut_to_fit"] = f"at most {rows} rows per table to stay within max_bytes={paging.max_bytes}"
        if items is not None:
            state["lists_cut_to"] = items
        return {"route": route, "answer": shown, "paging": state}

    whole = answer(limit)
    if paging.max_bytes is None or len(encode(whole)) <= paging.max_bytes:
        return whole
    fits = _largest(limit, lambda rows: len(encode(answer(rows))) <= paging.max_bytes)  # type: ignore[operator]  # (not None: returned above)
    if fits is not None:
        return answer(fits)
    items = _largest(_longest_list(body), lambda n: len(encode(answer(0, n))) <= paging.max_bytes)  # type: ignore[operator]  # (not None: returned above)
    if items is None:
        raise ToolError(f"the answer is larger than max_bytes={paging.max_bytes} even without rows; raise max_bytes")
    return answer(0, items)


def _largest(high: int, fits: Callable[[int], bool]) -> int | None:
    """The largest n in 0..high for which `fits(n)` holds (it holds for every smaller n
    where it holds for n), or None."""
    if not fits(0):
        return None
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def _tables_in(value: Any) -> Iterator[dict[str, Any]]:
    """Every table (`{"columns": [...], "rows": [...]}`, `http.table_json`) in a JSON answer."""
    if isinstance(value, dict):
        if set(value) == {"columns", "rows"} and isinstance(value["rows"], list):
            yield value
            return
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            yield from _tables_in(item)


def _longest_list(value: Any) -> int:
    if isinstance(value, dict):
        return max((_longest_list(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max([len(value), *(_longest_list(v) for v in value)])
    return 0


def _ordered(table: dict[str, Any], paging: Paging) -> dict[str, Any]:
    """The table's rows in `paging.sort`'s order (stable: ties keep the route's order; nulls
    last), of `paging.columns` only."""
    columns, rows = table["columns"], table["rows"]
    for name in [*(paging.columns or ()), *([paging.sort.lstrip("-")] if paging.sort else [])]:
        if name not in columns:
            raise ToolError(f"the table has no column {name[:40]!r}; its columns: {', '.join(columns)}")
    if paging.sort:
        at = columns.index(paging.sort.lstrip("-"))
        present = sorted((r for r in rows if r[at] is not None), key=lambda r: r[at], reverse=paging.sort.startswith("-"))
        rows = present + [r for r in rows if r[at] is None]
    if paging.columns:
        keep = [columns.index(name) for name in paging.columns]
        columns, rows = list(paging.columns), [[r[i] for i in keep] for r in rows]
    return {"columns": columns, "rows": rows}


def _cut(value: Any, ordered: dict[int, dict[str, Any]], offset: int, rows: int, items: int | None) -> Any:
    """`value` with each table replaced by its page (at most `rows` rows from `offset`, with
    its counts) and, with `items`, every other list cut to its first `items` items."""
    if isinstance(value, dict):
        table = ordered.get(id(value))
        if table is not None:
            total = len(table["rows"])
            shown = table["rows"][offset:offset + rows]
            page_ = {"columns": table["columns"], "rows": shown, "rows_total": total, "offset": offset,
                     "rows_left_out": total - len(shown)}
            if offset + len(shown) < total:
                page_["next_offset"] = offset + len(shown)
            return page_
        return {k: _cut(v, ordered, offset, rows, items) for k, v in value.items()}
    if isinstance(value, list):
        kept = value if items is None or len(value) <= items else value[:items]
        cut = [_cut(v, ordered, offset, rows, items) for v in kept]
        return cut if len(kept) == len(value) else [*cut, f"... {len(value) - len(kept)} more items left out"]
    return value
