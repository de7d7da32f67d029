"""`python -m tb_plugin view RUN ROUTE [--param value ...] --format table|json|csv|parquet|markdown`:
one data route's answer from a shell, for scripts and CI.

RUN is a run directory (a local path or fsspec URL), or with `--logdir DIR` a run's name as
TensorBoard lists it under DIR (then `diff`'s `--run_b` names another run there). ROUTE is
any tool of the MCP server (`answers.catalog`); its parameters are options of the same names,
choices and defaults. The answer comes through the same route as the HTTP server's (path
rules, memory budget, refusals), whole: every row, unless `--limit`/`--offset` page it.
Formats other than json need an answer of one table (`--table` chooses one where a route has
several); Parquet keeps each column's declared type. Exit status: 0 answered, 2 bad input or
a refusal, with one line on stderr.
"""

import argparse
import io
import os
import sys
import time
from typing import Any

import pandas as pd

from ..server.http import table_csv
from ..store.cache import ModelCache, default_cache_dir
from ..store.budget import DEFAULT_MAX_MEMORY_MB
from ..server.loading import RunStore
from ..schema import Table
from .answers import Answers, Paging, Tool, ToolError, catalog, encode, page

FORMATS = ("table", "json", "csv", "parquet", "markdown")
POLL_SECONDS = 0.1
_PANDAS_DTYPES = {"int64": "int64", "int32": "int32", "float64": "float64", "bool": "bool", "str": "object"}


def route_parser(tool: Tool) -> argparse.ArgumentParser:
    """The options of `view RUN <tool>`: the route's parameters, then the output's."""
    parser = argparse.ArgumentParser(prog=f"python -m tb_plugin view RUN {tool.name}", description=tool.summary)
    for param in tool.params:
        if param["name"] == "run":
            continue
        schema = param.get("schema", {})
        default = schema.get("default")
        kind = None if schema.get("enum") else schema.get("type", "string").upper()
        parser.add_argument(f"--{param['name']}", choices=schema.get("enum"), default=None, metavar=kind,
                            help=param.get("description", "") + (f" (default: {default})" if default is not None else ""))
    output = parser.add_argument_group("output")
    output.add_argument("--format", choices=FORMATS, default="table", help="how the answer is printed (table)")
    output.add_argument("--output", "-o", default=None, metavar="FILE", help="write to FILE instead of stdout")
    output.add_argument("--limit", type=int, default=None, help="at most this many rows (default: all)")
    output.add_argument("--offset", type=int, default=0, help="rows skipped first (0)")
    output.add_argument("--sort", default=None, metavar="COLUMN",
                        help="order by COLUMN, smallest first; --sort=-COLUMN largest first")
    output.add_argument("--columns", default=None, metavar="A,B", help="only these columns")
    source = parser.add_argument_group("source")
    source.add_argument("--logdir", default=None, help="the log directory RUN is a run of (default: RUN is a run directory)")
    source.add_argument("--max-memory-mb", type=int, default=DEFAULT_MAX_MEMORY_MB, metavar="MB",
                        help=f"memory budget, as TensorBoard's --profiler_max_memory_mb ({DEFAULT_MAX_MEMORY_MB})")
    source.add_argument("--cache-dir", default=None, metavar="DIR_OR_URL",
                        help="the parsed-trace cache (default: TensorBoard's; an empty string disables it)")
    return parser


def run(args: argparse.Namespace) -> int:
    tools = catalog()
    tool = tools.get(args.route)
    if tool is None:
        print(f"error: no route {args.route[:40]!r}; routes: {', '.join(tools)}", file=sys.stderr)
        return 2
    options = route_parser(tool).parse_args(args.options)
    if options.max_memory_mb < 64:
        print("error: --max-memory-mb takes megabytes, at least 64", file=sys.stderr)
        return 2
    logdir, run_name = (options.logdir, args.run) if options.logdir is not None else (args.run, ".")
    cache_dir = default_cache_dir() if options.cache_dir is None else options.cache_dir
    store = RunStore(logdir, max_memory_bytes=options.max_memory_mb << 20,
                     cache=ModelCache(cache_dir) if cache_dir else None)
    try:
        store.wait_for_scan()
        if store.scan_error:
            raise ToolError(store.scan_error)
        names = [r["name"] for r in store.runs()]
        if options.logdir is None and "." not in names:
            held = f"; it holds the runs {', '.join(names[:10])}: give --logdir {args.run} and one of them" if names else ""
            raise ToolError(f"{args.run} is not a run directory (no trace file directly in it){held}")
        arguments = {p["name"]: getattr(options, p["name"]) for p in tool.params if p["name"] != "run"}
        answer = _answered(Answers(store), tool.name, {**arguments, "run": run_name},
                           Paging(options.limit, options.offset, options.sort,
                                  tuple(options.columns.split(",")) if options.columns else None, None))
        output = _formatted(answer["answer"], tool, options.format)
    except ToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        store.stop()
    if options.output is not None:
        with open(options.output, "wb") as out:
            out.write(output)
        return 0
    if options.format == "parquet" and sys.stdout.isatty():
        print("error: Parquet is binary: give --output FILE or redirect stdout", file=sys.stderr)
        return 2
    try:
        sys.stdout.buffer.write(output)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def _answered(answers: Answers, name: str, arguments: dict[str, Any], paging: Paging) -> dict[str, Any]:
    """The route's answer, paged, once its profiles are loaded; `ToolError` with the reason
    of a refusal."""
    if paging.limit is not None and paging.limit < 0 or paging.offset < 0:
        raise ToolError("--limit and --offset take whole numbers, at least 0")
    while True:
        reply = answers.get(name, arguments)
        if reply.status != 202:
            break
        time.sleep(POLL_SECONDS)
    if reply.status != 200:
        raise ToolError(reply.body.get("reason", reply.body.get("error", f"answered {reply.status}")))
    return page(name, reply.body, paging)


def _formatted(answer: Any, tool: Tool, form: str) -> bytes:
    """The answer as the bytes of `form`: JSON whole, the others its one table."""
    if form == "json":
        return encode(answer) + b"\n"
    if not (isinstance(answer, dict) and "columns" in answer and "rows" in answer):
        held = ", ".join(answer) if isinstance(answer, dict) else type(answer).__name__
        choose = " (choose one with --table)" if any(p["name"] == "table" for p in tool.params) else ""
        raise ToolError(f"--format {form} prints one table; this answer holds {held}{choose}: use --format json")
    frame = typed_frame(answer["columns"], answer["rows"], tool.tables)
    if form == "csv":
        return table_csv(frame).encode("utf-8")
    if form == "parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False, engine="pyarrow")
        return buffer.getvalue()
    if form == "markdown":
        return markdown(frame).encode("utf-8")
    return (frame.to_string(index=False) + "\n").encode("utf-8")


def typed_frame(columns: list[str], rows: list[list[Any]], tables: tuple[Table, ...]) -> pd.DataFrame:
    """The rows as a DataFrame, each column of its declared dtype where one of `tables`
    declares every column (nullable whole numbers as pandas' Int64)."""
    frame = pd.DataFrame(rows, columns=columns)
    declared = next((t for t in tables if set(columns) <= set(t.names)), None)
    if declared is None:
        return frame
    return frame.astype({name: "Int64" if (c := declared.column(name)).nullable and c.dtype == "int64"
                         else _PANDAS_DTYPES[c.dtype] for name in columns})


def markdown(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of `frame` (a `|` in a cell escaped, nulls empty)."""
    def cell(value: object) -> str:
        return "" if value is None or value is pd.NA or (isinstance(value, float) and value != value) else \
            str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(cell, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in frame.astype(object).itertuples(index=False)]
    return "\n".join(lines) + "\n"
