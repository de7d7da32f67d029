"""Answers for agents and scripts: the server's data routes as tools of a Model Context
Protocol server (`python -m tb_plugin mcp LOGDIR`, `mcp_server`) and as a command line
(`python -m tb_plugin view RUN ROUTE ...`, `view`), both through `answers`, which calls the
routes as the HTTP server answers them and cuts their tables to what a reader can take in."""

import argparse

from ..store.budget import DEFAULT_MAX_MEMORY_MB


# The subcommands' arguments are here, light: `python -m tb_plugin` lists them without importing
# the MCP SDK (an optional extra) or the routes.


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m tb_plugin mcp`."""
    parser.add_argument("logdir", nargs="?", default=".",
                        help="the log directory (local path or fsspec URL), as TensorBoard's --logdir (default: .)")
    parser.add_argument("--http", type=int, metavar="PORT", default=None,
                        help="serve streamable HTTP on this port (path /mcp) instead of stdio")
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address --http binds (default 127.0.0.1: this machine only)")
    parser.add_argument("--max-memory-mb", type=int, default=DEFAULT_MAX_MEMORY_MB, metavar="MB",
                        help=f"memory budget, as TensorBoard's --profiler_max_memory_mb (default: {DEFAULT_MAX_MEMORY_MB})")
    parser.add_argument("--cache-dir", metavar="DIR_OR_URL", default=None,
                        help="the parsed-trace cache, as TensorBoard's --profiler_cache_dir (default: TensorBoard's "
                             "default; an empty string disables it)")
    parser.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                        help="how long a call waits for a trace still loading before it answers its progress (10)")


def add_view_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `python -m tb_plugin view` (the route's own are parsed by `view.route_parser`)."""
    parser.add_argument("run", help="a run directory (path or fsspec URL), or a run's name with --logdir")
    parser.add_argument("route", help="a data route (the MCP server's tools: kernels, operators, steps, job, diff ...)")
    parser.add_argument("options", nargs=argparse.REMAINDER,
                        help="the route's parameters (--name value) and --format, --output, --limit, ...: "
                             "`view RUN ROUTE --help` lists them")
