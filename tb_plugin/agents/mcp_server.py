"""`python -m tb_plugin mcp [LOGDIR]`: a Model Context Protocol server over a log directory,
on the official `mcp` SDK (`pip install 'tb-plugin-pytorch-profiler[mcp]'`), over stdio or,
with `--http PORT`, streamable HTTP (on 127.0.0.1 unless `--host` says otherwise).

Its tools are the server's data routes (`answers.catalog`: the same names, parameters,
choices and defaults, their JSON Schemas derived from the route declarations) and `columns`,
the declared columns of a route's tables. Each answer is a text block of JSON: `answers.page`
cuts its tables to `limit` rows and the whole to `max_bytes`. A call whose profile is still
loading waits at most `--wait` seconds, reporting the load's progress, then answers
`{"loading": true, ...}` with its stage and fraction: ask again. Calls run on threads, so a
load or a long computation never holds up another call. A bad argument or a refusal (an
unknown run, a file outside the log directory, a table beyond the memory budget) is a tool
error with the reason; the server keeps serving.
"""

import argparse
import sys
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from ..store.cache import ModelCache, default_cache_dir
from ..server.loading import RunStore
from ..version import __version__
from .answers import Answers, Reply, ToolError, column_definitions, columns_tool_schema, encode

COLUMNS_TOOL = "columns"
INSTRUCTIONS = ("Answers about the PyTorch profiler traces under one log directory. Start with `runs` (runs, their "
                "workers and spans), then a route tool with `run`: `overview`, `operators`, `kernels`, `steps`, `job` "
                "(every rank of a distributed run), `diff` (two runs), `snapshot_oom` (memory snapshots) ... Tables "
                "come back as at most `limit` rows in their main measure's order, with `rows_total` and "
                "`next_offset`; `columns` defines their columns (units are in the names: _us microseconds, _bytes, "
                "_pct). A reply {\"loading\": true} means the trace is still being parsed: call again.")
POLL_SECONDS = 0.25


def build_server(answers: Answers, wait_seconds: float) -> Server:
    """The MCP server answering `answers`' tools; a loading profile is waited for at most
    `wait_seconds` per call."""
    reads = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    tools = [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema, annotations=reads)
             for t in answers.tools.values()]
    tools.append(types.Tool(name=COLUMNS_TOOL, input_schema=columns_tool_schema(), annotations=reads,
                            description="The declared columns of the tables a route answers: each column's name, "
                                        "type, unit and meaning."))

    async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        if params.name == COLUMNS_TOOL:
            reply = _columns(arguments)
        else:
            reply = await _answer(ctx, answers, params.name, arguments, wait_seconds)
        return types.CallToolResult(content=[types.TextContent(text=encode(reply.body).decode())],
                                    is_error=reply.status >= 400)

    return Server("tb_plugin", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _columns(arguments: dict[str, Any]) -> Reply:
    unknown = sorted(set(arguments) - {"route", "table"})
    try:
        if unknown:
            raise ToolError(f"columns takes no argument {unknown[0][:40]!r}; it takes route, table")
        route, table = arguments.get("route"), arguments.get("table")
        if not isinstance(route, str) or not (table is None or isinstance(table, str)):
            raise ToolError("argument 'route' (and 'table' where given) must be a name")
        return Reply(200, column_definitions(route, table))
    except ToolError as exc:
        return Reply(400, {"error": "bad_argument", "reason": str(exc)})


async def _answer(ctx: ServerRequestContext, answers: Answers, name: str, arguments: dict[str, Any],
                  wait_seconds: float) -> Reply:
    """The call answered on a worker thread; while its profile loads, asked again every
    POLL_SECONDS up to `wait_seconds`, the load's progress reported meanwhile."""
    deadline = anyio.current_time() + wait_seconds
    while True:
        reply = await anyio.to_thread.run_sync(answers.call, name, arguments)
        if reply.status != 202 or anyio.current_time() >= deadline:
            break
        await ctx.session.report_progress(reply.body.get("fraction") or 0.0, 1.0, f"loading: {reply.body.get('stage')}")
        await anyio.sleep(POLL_SECONDS)
    if reply.status == 202:
        return Reply(202, {**reply.body, "retry": "the trace is still loading: call again with the same arguments"})
    return reply


def run(args: argparse.Namespace) -> int:
    """Serve until stdin closes (stdio) or the process is interrupted (HTTP); exit 2 on bad input."""
    if args.max_memory_mb < 64:
        print("error: --max-memory-mb takes megabytes, at least 64", file=sys.stderr)
        return 2
    if not 0 <= args.wait <= 3600:
        print("error: --wait takes seconds, from 0 to 3600", file=sys.stderr)
        return 2
    if args.http is not None and not 0 < args.http < 65536:
        print("error: --http takes a port number, 1 to 65535", file=sys.stderr)
        return 2
    cache_dir = default_cache_dir() if args.cache_dir is None else args.cache_dir
    store = RunStore(args.logdir, max_memory_bytes=args.max_memory_mb << 20,
                     cache=ModelCache(cache_dir) if cache_dir else None)
    store.start()
    server = build_server(Answers(store), args.wait)
    try:
        if args.http is None:
            anyio.run(_serve_stdio, server)
        else:
            import uvicorn

            app = server.streamable_http_app(host=args.host)
            uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.http, log_level="warning")).run()
    except KeyboardInterrupt:
        pass
    finally:
        store.stop()
    return 0


async def _serve_stdio(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
