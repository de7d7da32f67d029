"""Command line: `python -m tb_plugin info TRACE [--json]` prints what a trace holds;
`python -m tb_plugin check TRACE... [--json]` states each trace's health (exit 1 when one is not clean);
`python -m tb_plugin compare A B [--threshold PCT]` explains why B's step time differs from A's;
`python -m tb_plugin memory SNAPSHOT [--top N]` why a CUDA memory snapshot ran out of memory;
`python -m tb_plugin preprocess LOGDIR --dask ADDRESS|local [--cache-dir DIR_OR_URL]` parses
every trace of a log directory on a Dask cluster into TensorBoard's cache;
`python -m tb_plugin mcp [LOGDIR] [--http PORT]` serves the data routes as tools of a Model
Context Protocol server; `python -m tb_plugin view RUN ROUTE [--param value ...] --format FORMAT`
prints one route's answer as a table, JSON, CSV, Parquet or Markdown;
`python -m tb_plugin report RUN_OR_FILE -o report.html` writes the page of a run as one
self-contained HTML file that opens offline.

Each reads within TensorBoard's memory budget (--max-memory-mb, as --profiler_max_memory_mb,
same default) and exits 2 with one line on stderr on input it cannot use."""

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import TraceError, load
from .store.budget import DEFAULT_MAX_MEMORY_MB, MIN_MAX_MEMORY_MB

if TYPE_CHECKING:  # imported where used, for the commands that need it
    from .python_api.snapshots import MemorySnapshot


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    from .python_api.compare import add_arguments
    add_arguments(parser)


def run_compare(args: argparse.Namespace) -> int:
    from .python_api.compare import run
    return run(args)


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    from .agents import add_mcp_arguments
    add_mcp_arguments(parser)


def run_mcp(args: argparse.Namespace) -> int:
    try:
        from .agents.mcp_server import run
    except ImportError as exc:  # the optional extra is not installed
        print(f"error: the MCP server needs the mcp extra (pip install 'tb-plugin-pytorch-profiler[mcp]'): {exc}",
              file=sys.stderr)
        return 2
    return run(args)


def add_view_arguments(parser: argparse.ArgumentParser) -> None:
    from .agents import add_view_arguments
    add_view_arguments(parser)


def run_view(args: argparse.Namespace) -> int:
    from .agents.view import run
    return run(args)


def _format_distributed(dist: dict[str, Any] | None) -> str:
    """One line for distributedInfo: its process groups can list every rank of a job (17 KB
    for a rank of a 300-rank gloo job), which `--json` keeps and the text leaves out."""
    if not dist:
        return "no"
    parts = [str(dist["backend"])] if dist.get("backend") else []
    if "rank" in dist:
        parts.append(f"rank {dist['rank']}" + (f" of {dist['world_size']}" if "world_size" in dist else ""))
    groups = dist.get("pg_count", len(dist.get("pg_config") or ()))
    if groups:
        parts.append(f"{groups} process group{'s' if groups != 1 else ''}")
    if dist.get("nccl_version"):
        parts.append(f"NCCL {dist['nccl_version']}")
    return ", ".join(parts) or "yes"


def _format_info(info: dict[str, Any]) -> str:
    lines = [
        f"source:      {info['source']}",
        f"device:      {info['device_type']}" + "".join(f"\n  GPU {d['id']}: {d['name']}" for d in info["devices"]),
        f"distributed: {_format_distributed(info['distributed'])}",
        f"steps:       {len(info['steps'])}" + (f" ({info['steps'][0]}..{info['steps'][-1]})" if info["steps"] else ""),
        f"time span:   {info['duration_us'] / 1000:.3f} ms",
        f"threads:     {info['threads']}",
        "events:",
    ]
    lines += [f"  {kind:<16}{count:>10,}" for kind, count in info["event_counts"].items()]
    if info["anomaly_details"]:
        lines.append("import anomalies:")
        for row in info["anomaly_details"]:
            lines += [f"  {row['key']}: {row['value']} ({row['severity'].replace('_', ' ')})", f"    {row['meaning']}"]
    lines.append(f"loaded in:   {info['load_seconds']:.3f} s")
    return "\n".join(lines)


def _add_budget_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--max-memory-mb", type=int, default=DEFAULT_MAX_MEMORY_MB, metavar="MB",
                        help=f"the memory budget, as TensorBoard's --profiler_max_memory_mb (give it the same value): "
                             f"{what} that would take more is refused, as TensorBoard refuses it, a gzip once that "
                             f"much is inflated (default: {DEFAULT_MAX_MEMORY_MB})")


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status: 0 done, 1 a regression (`compare --threshold`) or some files failed
    (`preprocess`), 2 input that cannot be used, one line on stderr, never a traceback: exit 1
    would read as a regression to a CI gate."""
    parser = argparse.ArgumentParser(prog="python -m tb_plugin", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print what a trace file holds")
    info.add_argument("trace", help="a .pt.trace.json[.gz] file, local path or fsspec URL")
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    pre = sub.add_parser("preprocess", help="parse every trace of a log directory on a Dask cluster into the cache",
                         description="Parse every trace file under LOGDIR as dask.distributed tasks (one per file) and "
                                     "write the parsed models and the per-rank summaries of the job, distributed and ranks "
                                     "timeline views into the cache that TensorBoard then reads "
                                     "(--profiler_cache_dir); then, per run of several workers, one index of "
                                     "those summaries, so TensorBoard reads one entry per view, not one per rank.")
    pre.add_argument("logdir", help="the log directory (local path or fsspec URL), as TensorBoard's --logdir names it "
                                    "and as every Dask worker can read it")
    pre.add_argument("--dask", required=True, metavar="ADDRESS|local",
                     help="a Dask scheduler's address (tcp://host:8786), or 'local' for a LocalCluster of worker "
                          "processes on this machine")
    pre.add_argument("--cache-dir", metavar="DIR_OR_URL", default=None,
                     help="the cache to write, a directory or an fsspec URL (s3://...) that the workers and "
                          "TensorBoard share (default: TensorBoard's default cache directory)")
    pre.add_argument("--workers", type=int, default=None, metavar="N",
                     help="worker processes of a 'local' cluster (default: one per core)")
    pre.add_argument("--force", action="store_true", help="parse files whose entries the cache holds already")
    _add_budget_argument(pre, "a trace whose parse")
    cmp = sub.add_parser("compare", help="explain why B's step time differs from A's (exit 1 on a regression)",
                         description="Compare two traces (files, run directories or fsspec URLs): the change of the "
                                     "mean step time split into causes that add up to it, each cause's top "
                                     "contributors, and whether each change is a regression or noise. Exit status: "
                                     "0 no regression beyond --threshold (or no --threshold), 1 a regression, "
                                     "2 bad input.")
    add_compare_arguments(cmp)
    _add_budget_argument(cmp, "a trace whose parse")
    mem = sub.add_parser("memory", help="print a CUDA memory snapshot's OOM (or peak) and the stacks holding the most")
    mem.add_argument("snapshot", help="a torch.cuda.memory._dump_snapshot file (.pickle[.gz] or JSON), path or fsspec URL")
    mem.add_argument("--top", type=int, default=10, metavar="N", help="how many stacks and allocations to list (10)")
    _add_budget_argument(mem, "a snapshot whose read")
    _add_budget_argument(info, "a trace whose parse")
    check = sub.add_parser("check", help="state each trace's health (exit 1 when one breaks a rule)",
                           description="Check trace files: torch's six trace-validator rules "
                                       "(torch.profiler._trace_validator, same names and counts), what the import "
                                       "repaired or dropped, events outside the profiled window, device activity "
                                       "before its launch, overlapping kernels on a stream, unpaired flows; each "
                                       "finding with its count, meaning and the views it can affect. Exit status: 0 "
                                       "every file clean (info findings only), 1 some file is not, 2 some file could "
                                       "not be read (one line on stderr each; the others are still checked).")
    check.add_argument("traces", nargs="+", metavar="TRACE", help="a .pt.trace.json[.gz] file, local path or fsspec URL")
    check.add_argument("--json", action="store_true",
                       help="print a JSON list of {source, clean, findings} instead of text")
    _add_budget_argument(check, "a trace whose parse")
    agents = sub.add_parser("mcp", help="serve the data routes as tools of a Model Context Protocol server",
                            description="A Model Context Protocol server over a log directory (pip install "
                                        "'tb-plugin-pytorch-profiler[mcp]'): every data route is a tool, answering "
                                        "tables of at most `limit` rows; over stdio, or streamable HTTP with --http.")
    add_mcp_arguments(agents)
    view = sub.add_parser("view", help="print one data route's answer (table, JSON, CSV, Parquet or Markdown)",
                          description="Answer one data route of the server over a run directory, for scripts and CI. "
                                      "The route's parameters are options (--group_by name_op); "
                                      "`python -m tb_plugin view RUN ROUTE --help` lists them.")
    add_view_arguments(view)
    rep = sub.add_parser("report", help="write the page of a run or trace file as one self-contained HTML file",
                         description="One HTML file that is the page, with the run's answers embedded: every tab, "
                                     "its charts, tables and CSV downloads; the Trace view whole at a coarse level "
                                     "and one step (--step, the median by default) in full detail. It opens from "
                                     "disk in any browser, with no server and no network.")
    from .report import add_arguments as add_report_arguments
    add_report_arguments(rep)
    _add_budget_argument(rep, "a trace whose parse")
    args = parser.parse_args(argv)
    if getattr(args, "max_memory_mb", MIN_MAX_MEMORY_MB) < MIN_MAX_MEMORY_MB:  # view takes no budget option
        print(f"error: --max-memory-mb takes megabytes, at least {MIN_MAX_MEMORY_MB}", file=sys.stderr)
        return 2
    command = {"compare": run_compare, "preprocess": _preprocess, "memory": _memory, "info": _info, "check": _check,
               "mcp": run_mcp, "view": run_view, "report": _report}[args.command]
    try:
        return command(args)
    except Exception as exc:  # noqa: BLE001 (a bug, or a library's error no check foresaw: still exit 2, not 1)
        print(f"error: internal error ({type(exc).__name__}: {exc}); please report it", file=sys.stderr)
        return 2


def _info(args: argparse.Namespace) -> int:
    try:
        profile = load(args.trace, max_memory_bytes=args.max_memory_mb << 20)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = profile.info()
    try:
        print(json.dumps(summary, indent=2, default=str) if args.json else _format_info(summary), flush=True)
    except BrokenPipeError:  # `... | head`: the reader left; no traceback for that
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def _report(args: argparse.Namespace) -> int:
    from .report import run
    return run(args)


def _format_health(source: str, clean: bool, findings: list[dict[str, Any]]) -> str:
    """One file's findings: a headline, then per finding its count, severity, meaning, the
    views it can affect and one instance."""
    if not findings:
        return f"{source}: clean"
    verdict = "clean (info only)" if clean else "NOT clean"
    lines = [f"{source}: {verdict}, {len(findings)} finding{'s' if len(findings) != 1 else ''}"]
    for row in findings:
        lines += [f"  {row['finding']}: {row['count']:,} ({row['severity'].replace('_', ' ')}, {row['source']})",
                  f"    {row['meaning']}", f"    affects: {row['affects']}"]
        if row["detail"]:
            lines.append(f"    e.g. {row['detail']}")
    return "\n".join(lines)


def _check(args: argparse.Namespace) -> int:
    """Exit status 0 when every file is clean, 1 when some is not, 2 when some cannot be read."""
    status, reports = 0, []
    for path in args.traces:
        try:
            profile = load(path, max_memory_bytes=args.max_memory_mb << 20)
        except TraceError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 2
            continue
        info = profile.info()
        status = max(status, 0 if info["health_clean"] else 1)
        reports.append({"source": info["source"], "clean": info["health_clean"], "findings": info["health"]})
    try:
        if args.json:
            print(json.dumps(reports, indent=2), flush=True)
        else:
            print("\n".join(_format_health(**r) for r in reports), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return max(status, 1)
    return status


def _bytes(count: float) -> str:  # type: ignore[return]  # the loop returns, at TiB at the latest
    from pandas import isna  # loaded already by whatever produced the count

    if isna(count):  # not known (a snapshot's fragmentation when it is inconsistent)
        return "not known"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.1f} {unit}" if unit != "B" else f"{count} B"
        count /= 1024


def _format_memory(snap: "MemorySnapshot", top: int) -> str:
    """The OOM card of each device (its peak without one), the allocations and the user frames
    holding the most at that moment."""
    lines = [f"snapshot: {snap.source}"]
    for card in snap.oom().to_dict("records"):
        device, entry = card["device"], card["entry"]
        if card["kind"] == "oom":
            lines.append(f"device {device}: out of memory at entry {entry}: asked for {_bytes(card['requested_bytes'])}, "
                         f"{_bytes(card['device_free_bytes'])} free on the device")
        else:
            lines.append(f"device {device}: no OOM; peak at entry {entry}")
        lines.append(f"  allocated {_bytes(card['allocated_bytes'])}, reserved {_bytes(card['reserved_bytes'])}, "
                     f"fragmentation {_bytes(card['fragmentation_bytes'])}")
        lines.append("  top stacks (innermost user frame):")
        for row in snap.blame(device, entry).head(top).to_dict("records"):
            lines.append(f"    {_bytes(row['live_bytes']):>12}  {row['allocations']:>6} allocations  {row['frame']}")
        lines.append("  largest live allocations:")
        for row in snap.live(device, entry, top=top).to_dict("records"):
            lines.append(f"    {_bytes(row['size_bytes']):>12}  {row['category']:<15} {row['top_frame']}")
    return "\n".join(lines)


def _memory(args: argparse.Namespace) -> int:
    from .python_api.snapshots import load_snapshot

    try:
        snap = load_snapshot(args.snapshot, max_memory_bytes=args.max_memory_mb << 20)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        print(_format_memory(snap, max(args.top, 1)), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


def _preprocess(args: argparse.Namespace) -> int:
    """Exit status 0 when every file is in the cache, 1 when some failed, 2 when nothing could be done."""
    from .python_api.preprocess import PreprocessError, preprocess

    if args.workers is not None and args.workers < 1:
        print("error: --workers takes a number of processes, at least 1", file=sys.stderr)
        return 2
    try:
        report = preprocess(args.logdir, args.dask, args.cache_dir, args.workers, args.force,
                            max_memory_mb=args.max_memory_mb)
    except PreprocessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not report.failed:
        return 0
    return 2 if len(report.failed) == len(report.results) else 1


if __name__ == "__main__":
    sys.exit(main())
