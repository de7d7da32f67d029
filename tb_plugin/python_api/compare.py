"""`python -m tb_plugin compare A B`: why B's step time differs from A's, for people and CI.

A and B are trace files, run directories (one worker picked by --worker / --worker-b, one span
by --span / --span-b; a run of several workers without --worker compares every worker found in
both runs, rank by rank) or fsspec URLs. The explanation is `tb_plugin.diff`'s; this module only
resolves the inputs, loads them (progress on stderr), formats the answer and picks the exit
status: 0 when no regression beyond --threshold, 1 when one, 2 on bad input (with the reason).
"""

import argparse
import json
import math
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..store.budget import DEFAULT_MAX_MEMORY_BYTES
from ..errors import BadParameterError, PublicError, TraceError
from .profile import Profile, diff, load
from .runs import Run, diff_ranks, load_run
from ..store.storage import is_url
from ..views.diff import DiffView
from ..views.regression import CAUSES, DEFAULT_THRESHOLD_PCT, REGRESSION

PROGRESS_AFTER_S = 1.0  # a load quicker than this prints nothing: progress is for large traces
MARKDOWN_CONTRIBUTORS = 5


@dataclass
class Side:
    """What one side names: a trace file, or a run directory with a worker (None: every
    worker) and a span."""

    path: str
    worker: str | None
    span: int


@dataclass
class Comparison:
    """The answer: per compared pair (one, or one per rank) its label and diff; `ranks` the
    per-rank table when several ranks were compared, else None."""

    label_a: str
    label_b: str
    threshold_pct: float
    pairs: dict
    ranks: pd.DataFrame | None

    @property
    def main(self) -> DiffView:
        """The diff shown in full: the only one, or the rank that changed most."""
        key = self.ranks["worker"].iloc[0] if self.ranks is not None else next(iter(self.pairs))
        return self.pairs[key]

    @property
    def regressed(self) -> bool:
        return any((view.explanation["verdict"] == REGRESSION).any() for view in self.pairs.values())


def _is_trace_file(path: str) -> bool:
    if is_url(path):
        return path.endswith((".json", ".json.gz"))
    return os.path.isfile(path)


def _progress_printer(label: str) -> Callable[[str, float | None], None]:
    """A `progress(stage, fraction)` printing to stderr, at most every 10%, once the load has
    run PROGRESS_AFTER_S."""
    started = time.monotonic()
    shown: dict[str, object] = {"stage": None, "tenth": -1}

    def progress(stage: str, fraction: float | None) -> None:
        if time.monotonic() - started < PROGRESS_AFTER_S:
            return
        tenth = -1 if fraction is None else int(fraction * 10)
        if (stage, tenth) != (shown["stage"], shown["tenth"]):
            shown.update(stage=stage, tenth=tenth)
            done = "" if fraction is None else f" {fraction:.0%}"
            print(f"{label}: {stage}{done} ({time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)
    return progress


def _workers(side: Side, run: Run) -> list[str]:
    if not run.workers:  # a run of memory snapshots alone
        raise BadParameterError(f"{side.path}: holds memory snapshots only ({', '.join(run.snapshots())}), no trace to "
                                "compare; `python -m tb_plugin memory SNAPSHOT` reads a snapshot")
    if side.worker is not None:
        if side.worker not in run.workers:
            raise BadParameterError(f"{side.path}: no worker {side.worker!r}; workers: {', '.join(run.workers)}")
        return [side.worker]
    return run.workers


def _loader(side: Side, run: Run | None, worker: str | None, name: str, max_memory_bytes: int) -> Callable[[], Profile]:
    label = f"{name} {side.path}" + (f" [{worker}, span {side.span}]" if run is not None else "")

    def load_it() -> Profile:
        if run is None:
            return load(side.path, _progress_printer(label), max_memory_bytes)
        return run.profile(worker, side.span, _progress_printer(label), keep=False)  # type: ignore[arg-type]  # (a run's side names its worker)
    return load_it


def _steps(profile: Profile, name: str, whole_trace: bool) -> int:
    """The number of steps of `profile` (side `name`), refusing a trace that holds no events,
    and one without steps unless `whole_trace`."""
    model = profile.model
    if not any(len(getattr(model, table)) for table in model.TABLES):
        raise TraceError(profile.source, f"{name} holds no events: nothing to compare (was the profiler stopped "
                                         "before anything ran?)")
    if len(model.steps) == 0 and not whole_trace:
        raise TraceError(profile.source, f"{name} has no steps (no ProfilerStep#N: the profiler was not stepped with "
                                         "prof.step()), so no per-step time to compare; --whole-trace compares two "
                                         "such traces as wholes")
    return len(model.steps)


def _comparable(whole_trace: bool) -> Callable[[Profile, Profile], None]:
    """A check of a pair of profiles (A, B) that refuses what `compare` cannot compare: a
    trace without events, without steps (unless `whole_trace`: each is then one step spanning
    the whole trace, which means something only when neither side has steps)."""
    def check(profile_a: Profile, profile_b: Profile) -> None:
        steps_a, steps_b = _steps(profile_a, "A", whole_trace), _steps(profile_b, "B", whole_trace)
        if (steps_a == 0) != (steps_b == 0):
            stepped, whole = ("A", profile_b) if steps_a else ("B", profile_a)
            raise TraceError(whole.source, f"{'B' if stepped == 'A' else 'A'} has no steps and {stepped} has "
                                           f"{max(steps_a, steps_b)}: a whole trace against a mean step compares "
                                           "different things")
    return check


def compare(a: Side, b: Side, threshold_pct: float = DEFAULT_THRESHOLD_PCT, whole_trace: bool = False,
            max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES) -> Comparison:
    """Load and diff what `a` and `b` name, each trace within `max_memory_bytes`; raises
    `PublicError` (with its reason) on bad input: a run of memory snapshots alone, a trace
    without events, one without steps (unless `whole_trace`, and then both are step-less)."""
    if not (threshold_pct >= 0 and math.isfinite(threshold_pct)):
        raise BadParameterError(f"--threshold takes a percentage >= 0, not {threshold_pct}")
    runs = {n: (None if _is_trace_file(s.path) else load_run(s.path, max_memory_bytes=max_memory_bytes))
            for n, s in (("A", a), ("B", b))}
    # a trace file's one "worker" is None
    workers: dict[str, list[str] | list[None]] = {
        n: ([None] if (side_run := runs[n]) is None else _workers(s, side_run)) for n, s in (("A", a), ("B", b))}
    for n, s in (("A", a), ("B", b)):
        if runs[n] is not None and s.span < 1:
            raise BadParameterError(f"--span{'-b' if n == 'B' else ''} counts from 1, not {s.span}")
    if len(workers["A"]) > 1 and len(workers["B"]) > 1:
        printers = {}

        def progress(side: str, worker: str, stage: str, fraction: float | None) -> None:
            key = (side, worker)
            if key not in printers:
                printers[key] = _progress_printer(f"{side} {(a if side == 'A' else b).path} [{worker}]")
            printers[key](stage, fraction)
        run_a, run_b = runs["A"], runs["B"]
        assert run_a is not None and run_b is not None  # several workers: both sides are runs
        ranks, views = diff_ranks(run_a, run_b, a.span, b.span, threshold_pct, progress, _comparable(whole_trace))
        return Comparison(f"{a.path} [every worker, span {a.span}]", f"{b.path} [every worker, span {b.span}]",
                          threshold_pct, views, ranks)
    if len(workers["A"]) > 1 or len(workers["B"]) > 1:
        many = "A" if len(workers["A"]) > 1 else "B"
        names = [w for w in workers[many] if w is not None]  # all of them: several workers are a run's
        raise BadParameterError(f"{many} is a run of {len(workers[many])} workers ({', '.join(names[:8])}"
                                f"{', ...' if len(workers[many]) > 8 else ''}) and the other side one trace: "
                                f"name one worker with --worker{'-b' if many == 'B' else ''}")
    worker_a, worker_b = workers["A"][0], workers["B"][0]
    profile_a = _loader(a, runs["A"], worker_a, "A", max_memory_bytes)()
    profile_b = _loader(b, runs["B"], worker_b, "B", max_memory_bytes)()
    _comparable(whole_trace)(profile_a, profile_b)
    view = diff(profile_a, profile_b, threshold_pct)

    def label(side: Side, run: Run | None, worker: str | None) -> str:
        return side.path if run is None else f"{side.path} [{worker}, span {side.span}]"
    return Comparison(label(a, runs["A"], worker_a), label(b, runs["B"], worker_b), threshold_pct,
                      {worker_a or "": view}, None)


# --- formatting ---------------------------------------------------------------------------

def _ms(us: Any) -> str:  # a number, or a table's cell holding one
    return f"{us / 1000:.3f}"


def _signed_ms(us: Any) -> str:
    return f"{us / 1000:+.3f}"


def _verdict_line(comparison: Comparison) -> str:
    step = comparison.main.explanation.iloc[0]
    words = {"regression": "REGRESSION", "improvement": "improvement", "noise": "within noise"}
    return (f"step time {_ms(step['mean_us_a'])} -> {_ms(step['mean_us_b'])} ms ({_signed_ms(step['mean_us_delta'])} ms, "
            f"{step['change_pct']:+.1f}%): {words[step['verdict']]} at a {comparison.threshold_pct:g}% threshold")


def _cause_rows(explanation: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    rows = []
    r: Any  # a row (pandas-stubs type its cells as any scalar)
    for r in explanation.itertuples():  # eight rows
        share = "" if pd.isna(r.share_pct) else f"{r.share_pct + 0.0:.0f}%"  # no "-0%"
        rows.append([r.label, _ms(r.mean_us_a), _ms(r.mean_us_b), _signed_ms(r.mean_us_delta), share,
                     f"{_ms(r.median_us_a)} ± {_ms(r.spread_us_a)}", f"{_ms(r.median_us_b)} ± {_ms(r.spread_us_b)}",
                     r.verdict])
    return ["cause", "A ms/step", "B ms/step", "delta ms", "share", "A median ± spread", "B median ± spread",
            "verdict"], rows


def _contributor_rows(contributors: pd.DataFrame, limit: int) -> tuple[list[str], list[list[str]]]:
    """The `limit` largest contributors of each cause, the row of the rest (paths 0) never
    among them: a lump of small changes is no contributor to act on."""
    rows = []
    r: Any  # a row (pandas-stubs type its cells as any scalar)
    for cause in CAUSES:
        mine = contributors[(contributors["cause"] == cause) & (contributors["paths"] > 0)]
        for r in mine.sort_values("delta_us", key=abs, ascending=False).head(limit).itertuples():
            # one operator named before it; several counted after it
            where = f"{r.operator}: " if r.paths == 1 and r.operator and r.operator != r.name else ""
            paths = f" (under {r.paths} operators)" if r.paths > 1 else ""
            calls = f"{r.calls_a:g} -> {r.calls_b:g}"
            rows.append([r.label, where + r.name + paths, calls, f"{r.delta_us:+.1f}"])
    return ["cause", "contributor", "calls/step", "delta us/step"], rows


def _text_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _short(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_text(comparison: Comparison) -> str:
    view = comparison.main
    step = view.explanation.iloc[0]
    lines = [f"A: {comparison.label_a} ({step['steps_a']} steps)", f"B: {comparison.label_b} ({step['steps_b']} steps)"]
    lines += [f"warning: {w}" for w in view.warnings["warning"]]
    if comparison.ranks is not None:
        ranks = comparison.ranks
        lines += ["", f"{len(ranks)} ranks compared; the ones that changed most:",
                  _text_table(["worker", "A ms/step", "B ms/step", "delta ms", "change", "verdict", "top cause"],
                              [[r.worker, _ms(r.mean_us_a), _ms(r.mean_us_b), _signed_ms(r.mean_us_delta),
                                f"{r.change_pct:+.1f}%", r.verdict, f"{r.top_cause_label} ({_signed_ms(r.top_cause_us)} ms)"]
                               for r in ranks.head(10).itertuples()]),
                  "", f"in detail, {ranks['worker'].iloc[0]}:"]
    lines += ["", _verdict_line(comparison), "", _text_table(*_cause_rows(view.explanation))]
    header, rows = _contributor_rows(view.contributors, 3)
    if rows:
        lines += ["", "top contributors (per step):",
                  _text_table(header, [[_short(r[0], 60), _short(r[1]), *r[2:]] for r in rows])]
    lines += ["", "A change is a regression when it exceeds the threshold (share of A's mean step time) and the "
                  "difference of medians exceeds twice the spread (1.4826 x MAD) of each side; else noise."]
    return "\n".join(lines)


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = lambda row: "| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |"  # noqa: E731
    return "\n".join([cells(header), "|" + "---|" * len(header), *(cells(r) for r in rows)])


def format_markdown(comparison: Comparison) -> str:
    view = comparison.main
    mark = ":red_circle:" if comparison.regressed else ":white_check_mark:"
    parts = [f"### {mark} {_verdict_line(comparison)}", "",
             f"A: `{comparison.label_a}` · B: `{comparison.label_b}`", ""]
    parts += [f"> :warning: {w}" for w in view.warnings["warning"]] + ([""] if len(view.warnings) else [])
    if comparison.ranks is not None:
        parts += [_markdown_table(["rank", "A ms/step", "B ms/step", "Δ ms", "verdict", "top cause"],
                                  [[r.worker, _ms(r.mean_us_a), _ms(r.mean_us_b), _signed_ms(r.mean_us_delta),
                                    r.verdict, r.top_cause_label] for r in comparison.ranks.head(5).itertuples()]),
                  "", f"Rank `{comparison.ranks['worker'].iloc[0]}` in detail:", ""]
    parts += [_markdown_table(*_cause_rows(view.explanation))]
    header, rows = _contributor_rows(view.contributors, 1)
    if rows:
        parts += ["", "<details><summary>Top contributors</summary>", "",
                  _markdown_table(header, [[r[0], f"`{_short(r[1], 120)}`", *r[2:]] for r in rows]
                                  [:MARKDOWN_CONTRIBUTORS * 2]),
                  "", "</details>"]
    return "\n".join(parts) + "\n"


def _records(frame: pd.DataFrame) -> list[dict[Hashable, Any]]:
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def format_json(comparison: Comparison) -> str:
    view = comparison.main
    body = {"a": comparison.label_a, "b": comparison.label_b, "threshold_pct": comparison.threshold_pct,
            "regressed": comparison.regressed, "warnings": list(view.warnings["warning"]),
            "explanation": _records(view.explanation),
            "contributors": _records(view.contributors),
            "ranks": None if comparison.ranks is None else _records(comparison.ranks)}
    if comparison.ranks is not None:
        body["worker"] = comparison.ranks["worker"].iloc[0]
    return json.dumps(body, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="the baseline: a trace file, a run directory or an fsspec URL")
    parser.add_argument("b", help="the trace compared with it, named the same ways")
    parser.add_argument("--worker", help="A's worker when A is a run directory (default: its only worker; "
                                         "a run of several workers compares each worker found in both runs)")
    parser.add_argument("--span", type=int, default=1, help="A's span when A is a run directory (default 1)")
    parser.add_argument("--worker-b", help="B's worker (default: --worker)")
    parser.add_argument("--span-b", type=int, default=None, help="B's span (default: --span)")
    parser.add_argument("--threshold", type=float, default=None, metavar="PCT",
                        help="exit 1 when the step time or a cause regressed by more than PCT%% of A's mean step "
                             f"time, beyond the step-to-step noise (default: report at {DEFAULT_THRESHOLD_PCT:g}%%, exit 0)")
    parser.add_argument("--whole-trace", action="store_true",
                        help="compare traces without steps (no ProfilerStep#N) as wholes, each as one step; "
                             "without it such a trace is refused (exit 2), as is a step-less trace against a stepped one")
    parser.add_argument("--json", metavar="FILE", help="write the explanation as JSON to FILE")
    parser.add_argument("--markdown", metavar="FILE", help="write a summary for a pull request comment to FILE")
    parser.add_argument("--html", metavar="FILE",
                        help="write the Diff page of the pair as one self-contained HTML file (opens offline; "
                             "a CI artifact), warnings and verdict first")


class OutputError(PublicError):
    """An output file that cannot be written: nothing was written."""

    error = "cannot_write"


def _file_mode(path: str) -> int:
    """The mode a new output gets (that of the file it replaces, else 0666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def check_outputs(paths: Iterable[str]) -> None:
    """Raise `OutputError` for the first of `paths` that `write_outputs` would refuse or could
    not write (checked before a long load, and again when written)."""
    for path in paths:
        directory = os.path.dirname(os.path.abspath(path))
        if os.path.islink(path):
            raise OutputError(f"cannot write {path}: it is a symbolic link (not written through; name the file itself)")
        if os.path.exists(path) and not os.path.isfile(path):
            raise OutputError(f"cannot write {path}: it exists and is not a regular file")
        if not os.path.isdir(directory):
            raise OutputError(f"cannot write {path}: no directory {directory}")


def write_outputs(outputs: dict[str, str]) -> None:
    """Write each {path: text} atomically (a temporary file in the same directory, then
    `os.replace`), all or none: every path is checked, then every text written to its
    temporary file, and only once all are written are they renamed into place. A path that
    is a symbolic link is refused (never written through), and so is one that is not a
    regular file. Raises `OutputError` naming the path and the reason; nothing is then written."""
    check_outputs(outputs)
    written: dict[str, str] = {}
    try:
        for path, text in outputs.items():
            directory = os.path.dirname(os.path.abspath(path))
            try:
                fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
            except OSError as exc:
                raise OutputError(f"cannot write {path}: cannot create a file in {directory} "
                                  f"({exc.strerror or type(exc).__name__})") from None
            written[path] = temporary
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    os.fchmod(out.fileno(), _file_mode(path))
                    out.write(text)
            except OSError as exc:
                raise OutputError(f"cannot write {path}: {exc.strerror or type(exc).__name__}") from None
        for path, temporary in written.items():
            os.replace(temporary, path)
        written.clear()
    except OSError as exc:
        raise OutputError(f"cannot write {exc.filename or 'an output'}: {exc.strerror or type(exc).__name__}") from None
    finally:
        for temporary in written.values():
            try:
                os.unlink(temporary)
            except OSError:
                pass


def run(args: argparse.Namespace) -> int:
    """The `compare` command: 0 no regression (or no --threshold), 1 regression, 2 bad input."""
    threshold = DEFAULT_THRESHOLD_PCT if args.threshold is None else args.threshold
    named: dict[str, str] = {}  # output path -> the option naming it
    for option, path in (("--json", args.json), ("--markdown", args.markdown), ("--html", args.html)):
        if path and os.path.abspath(path) in named:
            print(f"error: {named[os.path.abspath(path)]} and {option} name the same file", file=sys.stderr)
            return 2
        if path:
            named[os.path.abspath(path)] = option
    paths = [p for p in (args.json, args.markdown, args.html) if p]
    try:
        check_outputs(paths)
        a = Side(args.a, args.worker, args.span)
        b = Side(args.b, args.worker_b or args.worker, args.span if args.span_b is None else args.span_b)
        comparison = compare(a, b, threshold, args.whole_trace, args.max_memory_mb << 20)
        outputs = {path: text(comparison) for path, text in ((args.json, format_json),
                                                             (args.markdown, format_markdown)) if path}
        if args.html:
            from ..report import diff_report
            outputs[args.html] = diff_report(a, b, threshold, max_memory_bytes=args.max_memory_mb << 20)
        write_outputs(outputs)
    except PublicError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    regressed = args.threshold is not None and comparison.regressed
    try:
        print(format_text(comparison), flush=True)
    except BrokenPipeError:  # `... | head`: the reader left; the verdict still decides the status
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1 if regressed else 0
