"""A report that travels: the page as one self-contained HTML file, with the answers it asks
the server for embedded in place of the server.

`python -m tb_plugin report RUN_OR_FILE -o report.html` writes a run's (or one trace file's)
report; `python -m tb_plugin compare A B --html diff.html` the Diff page of a pair;
`tb_plugin.show(x)` and the `_repr_html_` of `Profile`, `Run` and a diff put the same page in a
notebook cell.

How: the answers are asked of the HTTP layer itself (`api.Api`'s WSGI apps, in-process, as
the `view` command and the MCP server ask it), over a `loading.RunStore` of the run, for every
request the page makes on opening each tab `/views` offers (`_profile_requests` lists them,
with the choices the tabs offer: group-bys, devices, flags), keyed by route and
canonical query (`answer_key`, the same string `frontend/src/api/client.ts` builds). The
Trace view is embedded at two levels of detail, bounded in size: the whole trace at
`OVERVIEW_PX` slices across, and one step (the median one by default) in full detail; the
page picks the finest that covers what it draws (`windows`) and says, where none does, how
to see it (TensorBoard). What no request asked for (an operator's call stacks, an event's
details) the page answers with the same "not in this report" reason, or, for a route of which
the report holds some choices only (critical paths), with a note saying which (`notes`). A
run of memory snapshots only is its Memory snapshot tab (`_snapshot_requests`).

The answers travel gzipped and base64-encoded in a non-executable `<script>` block, inflated
by the browser's `DecompressionStream`: nothing from the trace is ever markup or script
(base64 has no `<`), and the page's Content-Security-Policy allows no request at all but
inline data, so the file opens from `file://`, offline, in any browser.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import html
import importlib.resources
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .errors import BadParameterError, TraceError

if TYPE_CHECKING:
    from .server.loading import RunStore

# The whole trace at this many slices across: the Trace view asks for one slice per pixel of
# its plot (about 1,000-2,000), and takes an answer up to twice as coarse.
OVERVIEW_PX = 3000
# A step "in full detail": below any level's merging, every event its own slice.
DETAIL_RESOLUTION_US = 1e-3
# Counter series points per window (the most /timeline_counters gives).
COUNTER_POINTS = 5000
# Routes the page asks for a time window of (start_us, end_us) at some resolution: a report
# answers them from the embedded window that covers the request at a fine enough level.
WINDOW_ROUTES = ("timeline_slices", "timeline_counters")
WINDOW_PARAMS = ("start_us", "end_us", "resolution_us", "points", "tracks")
PAGE_THRESHOLDS = ("0.1", "0.5", "1", "2", "5", "10", "20")
# The Memory snapshot tab's timeline: bins across and bands drawn (SnapshotView.tsx).
SNAPSHOT_BINS = 1000
SNAPSHOT_BANDS = 60
POLL_SECONDS = 0.02
_DATA_ID = "tb-report-data"


def answer_key(route: str, query: dict[str, str]) -> str:
    """The key of an answer: `[route, [[name, value], ...]]` as compact JSON, names sorted,
    empty values left out, as `client.ts` `answerKey` writes it."""
    pairs = sorted([name, value] for name, value in query.items() if value != "")
    return orjson.dumps([route, pairs]).decode()


def _query(params: dict[str, Any]) -> dict[str, str]:
    return {name: str(value) for name, value in params.items() if value is not None and str(value) != ""}


@dataclass
class Answers:
    """The answers gathered for a report: `replies` {key: [status, body JSON bytes]},
    `windows` the Trace view's embedded windows, `location` the page's initial selection."""

    store: RunStore
    progress: Callable[[str], None] | None = None
    replies: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    windows: list[dict[str, Any]] = field(default_factory=list)
    location: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from .server.api import Api

        self._apps = Api(self.store).routes()

    def embed(self, route: str, **params: Any) -> int:
        """Embed the route's answer to `params` under its key; its status, asked again while
        the profile loads (202)."""
        from werkzeug.test import EnvironBuilder, run_wsgi_app

        query = _query(params)
        key = answer_key(route, query)
        if key not in self.replies:
            environ = EnvironBuilder(path=f"/{route}", query_string=query).get_environ()
            while True:
                body, status, _ = run_wsgi_app(self._apps[f"/{route}"], environ, buffered=True)
                code = int(status.split()[0])
                if code != 202:
                    break
                time.sleep(POLL_SECONDS)
            self.replies[key] = (code, b"".join(body))
        return self.replies[key][0]

    def ask(self, route: str, **params: Any) -> Any:
        """The route's answer to `params`, embedded (`embed`), as the report reads it: None when
        it refused (most answers are only embedded: reading them back costs a parse)."""
        code = self.embed(route, **params)
        return orjson.loads(self.replies[answer_key(route, _query(params))][1]) if code == 200 else None

    def refusal(self, route: str, **params: Any) -> dict[str, Any] | None:
        """The body of the route's refusal of `params` (embedded before), None where it answered."""
        code, body = self.replies[answer_key(route, _query(params))]
        return None if code == 200 else orjson.loads(body)

    def window(self, route: str, start_us: float, end_us: float, resolution_us: float, **params: Any) -> None:
        """A Trace view window embedded: `route` over [start_us, end_us] at `resolution_us`."""
        scope = answer_key(route, _query(params))
        extra = {"points": COUNTER_POINTS} if route == "timeline_counters" else {"resolution_us": resolution_us}
        self.embed(route, **params, start_us=start_us, end_us=end_us, **extra)
        key = answer_key(route, _query({**params, "start_us": start_us, "end_us": end_us, **extra}))
        self.windows.append({"route": route, "scope": scope, "start_us": start_us, "end_us": end_us,
                             "resolution_us": resolution_us, "key": key})

    def relist(self, keep: Callable[[str], bool], workers: list[str] | None = None, snapshots: bool = False) -> None:
        """The runs listed as they are once their profiles are loaded, with only what the
        report holds: the runs `keep` keeps, their `workers` (default: all), their memory
        snapshots only with `snapshots`."""
        del self.replies[answer_key("runs", {})]
        listing = self.ask("runs")
        listing["runs"] = [{**r, "workers": workers or r["workers"], "snapshots": r["snapshots"] if snapshots else []}
                           for r in listing["runs"] if keep(r["name"])]
        self.replies[answer_key("runs", {})] = (200, orjson.dumps(listing))

    def say(self, what: str) -> None:
        if self.progress is not None:
            self.progress(what)

    def payload(self) -> bytes:
        """The embedded data: {answers, windows, location, notes} as JSON, gzipped."""
        parts = [orjson.dumps(key) + b":[" + str(code).encode() + b"," + body + b"]"
                 for key, (code, body) in self.replies.items()]
        head = orjson.dumps({"windows": self.windows, "location": self.location, "notes": self.notes})
        data = head[:-1] + b',"answers":{' + b",".join(parts) + b"}}"
        return gzip.compress(data, compresslevel=3, mtime=0)  # as the server's replies (http.gzipped)


def _rows(table: Any) -> list[dict[str, Any]]:
    """A {columns, rows} answer as dicts (none for a refusal)."""
    if not isinstance(table, dict) or "columns" not in table:
        return []
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def median_step(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The step of median duration (the lower median, so always a step of the trace)."""
    if not steps:
        return None
    ordered = sorted(steps, key=lambda s: (s["end_us"] - s["start_us"], s["step"]))
    return ordered[(len(ordered) - 1) // 2]


def _detail_steps(steps: list[dict[str, Any]], step: int | None) -> list[dict[str, Any]]:
    """The step shown in full detail (`step`, else the median one), as a list of none or one;
    `BadParameterError` when the trace has no step `step`."""
    chosen = median_step(steps) if step is None else next((s for s in steps if s["step"] == step), None)
    if step is not None and chosen is None:
        raise BadParameterError(f"--step {step}: the trace has no step {step}; steps: "
                                f"{', '.join(str(s['step']) for s in steps) or 'none'}")
    return [chosen] if chosen is not None else []


def _trace_requests(answers: Answers, base: dict[str, Any], step: int | None) -> None:
    tracks = answers.ask("timeline_tracks", **base)
    if not tracks:
        return
    start, end = float(tracks["start_us"]), float(tracks["end_us"])
    width = max(end - start, 1.0)
    # the page asks for its window widened by a quarter on each side
    answers.window("timeline_slices", start - width / 4, end + width / 4, width * 1.5 / OVERVIEW_PX, **base)
    answers.window("timeline_counters", start - width / 4, end + width / 4, width * 1.5 / OVERVIEW_PX, **base)
    label = "the whole trace"
    for chosen in _detail_steps(_rows(tracks["steps"]), step):
        lo, hi = float(chosen["start_us"]), float(chosen["end_us"])
        # the page asks for the step's window (3% wider) widened by a quarter on each side
        pad = (hi - lo) / 2
        answers.window("timeline_slices", lo - pad, hi + pad, DETAIL_RESOLUTION_US, **base)
        answers.window("timeline_counters", lo - pad, hi + pad, DETAIL_RESOLUTION_US, **base)
        label = f"step {chosen['step']}"
    answers.notes[answer_key("timeline", _query(base))] = label


def _profile_requests(answers: Answers, run: str, worker: str, span: int, step: int | None) -> list[str]:
    """Ask every answer the page asks for on opening each tab of this profile; the tabs."""
    base = {"run": run, "worker": worker, "span": span}
    views = answers.ask("views", **base)
    offered = [v for v in (views or {}).get("views", []) if v != "diff"]
    # A run report holds one run: its Diff tab would compare with runs it does not hold
    # (`compare A B --html` writes a diff's report).
    if views is not None:
        key = answer_key("views", _query(base))
        answers.replies[key] = (200, orjson.dumps({**views, "views": offered}))
    share = answers.ask("compiled", **base, table="share")
    regions = _rows(share)[0].get("regions", 0) if _rows(share) else 0
    steps = _rows(answers.ask("steps", **base))
    for view in offered:
        answers.say(f"{run} / {worker} / span {span}: {view}")
        if view == "overview":
            answers.embed("overview", **base)
            answers.embed("flops", **base, table="steps")
        elif view == "operator":
            for group_by in ("name", "name_shape"):
                for scope in ("all", "compiled", "eager") if regions else ("all",):
                    answers.embed("operators", **base, group_by=group_by, scope=scope)
            answers.embed("kernel_tensor_cores", **base)
            answers.embed("flops", **base, tables="operators,missing")
        elif view == "kernel":
            for group_by in ("name", "name_op"):
                answers.embed("kernels", **base, group_by=group_by)
            answers.embed("kernel_tensor_cores", **base)
            answers.embed("compiled", **base, table="kernels")
            answers.embed("cuda_graphs", **base, tables="kernels,annotations")
            answers.embed("memcpy_summary", **base)
        elif view == "gpu_idle":
            for by_step in ("false", "true"):
                answers.embed("idle_time", **base, by_step=by_step)
            for route in ("queue_length_summary", "queue_length", "memory_bandwidth", "gpu_annotations",
                          "kernel_launch_summary"):
                answers.embed(route, **base)
            for length in (2, 3, 4, 5, 6, 8):
                answers.embed("kernel_sequences", **base, length=length, top=50)
            for flag in ("launch_bound", "runtime_outlier", "launch_delay_outlier"):
                answers.embed("kernel_launches", **base, flag=flag)
            # the critical path the tab opens on (the first step's) and the step the Trace view
            # holds in full detail: a path costs about as much as a view
            windows = _rows((answers.ask("timeline_tracks", **base) or {}).get("steps"))
            held = list(dict.fromkeys(row["step"] for row in steps[:1] + _detail_steps(windows, step)))
            for number in held:
                for table in ("categories", "operators", "segments"):
                    answers.embed("critical_path", **base, step=number, table=table)
            if len(steps) > len(held):  # what the page says of another step's
                answers.notes[answer_key("critical_path", _query(base))] = (
                    f"the critical path of {'step' if len(held) == 1 else 'steps'} {' and '.join(map(str, held))} only "
                    "(the first step, which the tab opens on, and the step the Trace view holds in full detail: "
                    "report --step N chooses it)")
        elif view == "memory":
            for device in (answers.ask("memory_devices", **base) or {}).get("devices", []):
                query = {**base, "device": device}
                answers.embed("memory_curve", **query, max_points=2000)
                answers.embed("memory_events", **query)
                answers.embed("memory_stats", **query)
        elif view == "module":
            answers.embed("modules", **base)
            answers.embed("module_flame", **base)
        elif view == "lightning":
            answers.embed("lightning", **base)
        elif view == "compiled":
            answers.embed("compiled", **base)
        elif view == "distributed":
            answers.embed("distributed", run=run, span=span,
                        tables="steps,all_steps,collectives,collective_time,groups,fsdp,devices,coverage,missing")
        elif view == "job":
            for align in ("true", "false"):
                answers.embed("job", run=run, span=span, align_clocks=align)
        elif view == "trace":
            _trace_requests(answers, base, step)
    return offered


def _snapshot_requests(answers: Answers, run: str, names: list[str]) -> None:
    """Ask every answer the Memory snapshot tab asks for on opening each snapshot of `run`
    (`SnapshotView.tsx`): the run's comparison, and per snapshot that reads its peak, OOM and trace
    cards, and per device its timeline and the moment the tab examines first (the OOM's or
    peak's entry: who holds the memory, by category, as a flame graph with library frames
    collapsed and expanded, and the allocator's state). A zoomed timeline or another moment
    is answered with the page's "not in this report" reason. A `TraceError` with the reason
    when no snapshot can be read."""
    answers.embed("snapshot_ranks", run=run)
    refusal = answers.refusal("snapshot_ranks", run=run)
    if refusal is not None:  # none can be read: the comparison names the first
        raise _trace_error(refusal, run, run)
    # the page asks nothing of a snapshot that cannot be read: the comparison names it
    unread = {row["snapshot"] for row in _rows(answers.ask("snapshot_ranks", run=run)["missing"])}
    for name in (n for n in names if n not in unread):
        answers.say(f"{run}: memory snapshot {name}")
        base = {"run": run, "snapshot": name}
        peak = answers.ask("snapshot_peak", **base)
        cards = _rows(answers.ask("snapshot_oom", **base))
        answers.embed("snapshot_trace", **base)  # a run of snapshots only has no trace to draw beside them
        for device in (row["device"] for row in _rows(peak)):
            answers.embed("snapshot_timeline", **base, device=device, bins=SNAPSHOT_BINS, bands=SNAPSHOT_BANDS)
            for entry in (card["entry"] for card in cards if card["device"] == device):
                moment = {**base, "device": device, "entry": entry}
                for route in ("snapshot_blame", "snapshot_categories", "snapshot_state"):
                    answers.embed(route, **moment)
                for library in ("collapsed", "expanded"):
                    answers.embed("snapshot_flame", **moment, library=library)


def _trace_error(refusal: dict[str, Any], run: str, unnamed: str) -> TraceError:
    """The `TraceError` of the server's refusal of a file of `run`, named by its path in the run
    as the user named the run (`unnamed` where the refusal names no file)."""
    return TraceError((refusal.get("path") or unnamed).removeprefix(f"{run}/"), refusal.get("reason", "not read"))


def _html(payload: bytes, title: str) -> str:
    """The page with its bundle, styles and `payload` inlined, and a policy allowing no request."""
    static = importlib.resources.files(__package__) / "static"
    script = (static / "app.js").read_text("utf-8")
    styles = (static / "index.css").read_text("utf-8")
    if re.search(r"</script|<!--", script, re.IGNORECASE):  # the bundle would end its own <script> element
        raise RuntimeError("the page's bundle holds '</script' or '<!--': it cannot be inlined")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    policy = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
              "img-src data: blob:; font-src data:; connect-src data: blob:; base-uri 'none'; form-action 'none'")
    escaped_title = html.escape(title)
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<meta name=\"color-scheme\" content=\"light dark\">\n<link rel=\"icon\" href=\"data:,\">\n"
            f"<title>{escaped_title}</title>\n<style>{styles}</style>\n"
            f"<script type=\"application/octet-stream\" id=\"{_DATA_ID}\">{base64.b64encode(payload).decode()}</script>\n"
            f"<script type=\"module\">{script}</script>\n</head>\n<body>\n<div id=\"app\"></div>\n</body>\n</html>\n")


def _store(logdir: str, max_memory_bytes: int, only_file: str | None = None) -> RunStore:
    from .server.loading import RunStore

    store = RunStore(logdir, max_memory_bytes=max_memory_bytes, cache=None, only_file=only_file)
    store.wait_for_scan()
    if store.scan_error:
        raise BadParameterError(store.scan_error)
    return store


def _resolve(source: str) -> tuple[str, str | None]:
    """(log directory, trace file name or None) of a run directory or a trace file."""
    from .python_api.compare import _is_trace_file
    from .store.storage import is_url

    if _is_trace_file(source):
        parent, name = (source.rsplit("/", 1) if is_url(source) else os.path.split(os.path.abspath(source)))
        return parent, name
    return source, None


def run_report(source: str, *, worker: str | None = None, span: int | None = None, step: int | None = None,
               view: str | None = None, max_memory_bytes: int, progress: Callable[[str], None] | None = None) -> str:
    """The HTML report of a run directory or trace file (`source`, a path or fsspec URL):
    every worker (or `worker`), every span (or `span`), each tab the page offers."""
    logdir, file_name = _resolve(source)
    with _named_run(logdir, file_name) as (logdir, run):
        # a file the run "." stands for (a URL's, which no link can name) is its store's only one
        store = _store(logdir, max_memory_bytes, file_name if run == "." else None)
        try:
            names = [r["name"] for r in store.runs()]
            if run not in names:
                held = f"; it holds the runs {', '.join(names[:10])}" if names else ""
                raise BadParameterError(f"{_shown(source)} is not a run directory nor a trace file{held}")
            answers = Answers(store, progress)
            title = f"PyTorch Profiler report: {_shown(source) if run == '.' else run}"
            listed = next(r for r in answers.ask("runs")["runs"] if r["name"] == run)
            spans = {name: (answers.ask("spans", run=run, worker=name) or {}).get("spans", [])
                     for name in listed["workers"]}
            if not spans and listed["snapshots"] and worker is None and file_name is None:
                # memory snapshots only: the page offers their tab alone, from the run listing
                _snapshot_requests(answers, run, list(dict.fromkeys(s["name"] for s in listed["snapshots"])))
                answers.relist(lambda name: name == run, snapshots=True)
                answers.location = {"run": run, "view": "memory_snapshot"}
                return _html(answers.payload(), title)
            if file_name is not None:  # one trace file: its worker and span
                worker, span = next((w, s["span"]) for w, listed in spans.items() for s in listed
                                    if s["file"] == file_name)
            if worker is not None and worker not in spans:
                raise BadParameterError(f"no worker {worker!r}; workers: {', '.join(spans)}")
            workers = [worker] if worker is not None else list(spans)
            if not workers:
                raise BadParameterError(f"{_shown(source)} holds no trace file")
            for name in workers:
                chosen_spans = [s["span"] for s in spans[name] if span is None or s["span"] == span]
                if not chosen_spans:
                    raise BadParameterError(f"worker {name!r} has no span {span}; spans: "
                                            f"{', '.join(str(s['span']) for s in spans[name])}")
                if span is not None:
                    answers.replies[answer_key("spans", {"run": run, "worker": name})] = (200, orjson.dumps(
                        {"run": run, "worker": name, "spans": [s for s in spans[name] if s["span"] == span]}))
                for number in chosen_spans:
                    _profile_requests(answers, run, name, number, step)
            _refuse_when_nothing_loaded(answers, run, {name: spans[name] for name in workers}, span)
            answers.relist(lambda name: name == run, workers)
            answers.location = {"run": run, "worker": workers[0], "span": str(span or 1),
                                **({"view": view} if view else {})}
            return _html(answers.payload(), title)
        finally:
            store.stop()


@contextlib.contextmanager
def _named_run(logdir: str, file_name: str | None) -> Iterator[tuple[str, str]]:
    """(log directory, run) to read the run of `logdir` (a trace file `file_name` of it, or
    the directory itself) under the name a user knows it by: the file's or directory's own,
    as the page names a run of a log directory by its folder, not "." (the name a store gives
    its log directory itself). A local directory is read through a link of that name in a
    temporary directory, a local file through a folder of that name holding a link to it
    alone (`_link_run`): the report of one worker's file holds that file, not its
    directory's other workers combined on the Job and Distributed tabs. A URL's run (or the
    root directory's) stays "." (its store holding a file of it alone, `RunStore.only_file`)."""
    from .store.storage import is_url

    name = os.path.basename(file_name or os.path.abspath(logdir))
    if is_url(logdir) or not name or not os.path.isdir(logdir):
        yield logdir, "."
        return
    with tempfile.TemporaryDirectory(prefix="tb_plugin_report_") as links:
        if file_name is not None:
            _link_run(links, name, os.path.join(logdir, file_name))
        else:
            os.symlink(os.path.abspath(logdir), os.path.join(links, name), target_is_directory=True)
        yield links, name


def _refuse_when_nothing_loaded(answers: Answers, run: str, spans: dict[str, list[dict[str, Any]]],
                                span: int | None) -> None:
    """A `TraceError` with the server's reason when no trace the report holds could be loaded
    (an empty or broken file): a report of nothing is no report. Where some load, the others'
    reasons are embedded and shown in their place, as the page shows them."""
    refusals = []
    for worker, listed in spans.items():
        for number in (s["span"] for s in listed if span is None or s["span"] == span):
            refusal = answers.refusal("views", run=run, worker=worker, span=number)
            if refusal is None:
                return
            refusals.append((refusal, worker))
    if refusals:
        refusal, worker = refusals[0]
        raise _trace_error(refusal, run, worker)


def _shown(source: str) -> str:
    """The name a report gives its source: the last part of the path, never the whole of it."""
    return source.rstrip("/").rsplit("/", 1)[-1] or source


def _link_run(logdir: str, name: str, source: str) -> None:
    """`logdir/name` a run of `source`'s trace files, as links (local paths: a report of a
    pair reads both through one store; links to files, since a store walks each real
    directory once, and A and B may be spans of one run)."""
    from .store.storage import is_url

    if is_url(source):
        raise BadParameterError(f"--html compares local files and directories; {_shown(source)} is a URL "
                                "(copy it here first)")
    target = os.path.abspath(source)
    if not os.path.exists(target):
        raise BadParameterError(f"{source}: no such file or directory")
    files = ([os.path.join(target, f) for f in os.listdir(target) if os.path.isfile(os.path.join(target, f))]
             if os.path.isdir(target) else [target])
    os.mkdir(os.path.join(logdir, name))
    for path in files:
        os.symlink(path, os.path.join(logdir, name, os.path.basename(path)))


def diff_report(a: Any, b: Any, threshold_pct: float, *, max_memory_bytes: int,
                progress: Callable[[str], None] | None = None) -> str:
    """The HTML report of the Diff page of `a` against `b` (`compare.Side`s: a trace file or
    run directory, a worker or None for the first, a span), opening on the Diff tab."""
    with tempfile.TemporaryDirectory(prefix="tb_plugin_diff_") as logdir:
        names = {"A": f"A-{_shown(a.path)}", "B": f"B-{_shown(b.path)}"}
        for side, key in ((a, "A"), (b, "B")):
            _link_run(logdir, names[key], side.path)
        store = _store(logdir, max_memory_bytes)
        try:
            answers = Answers(store, progress)
            listed = {r["name"]: r for r in answers.ask("runs")["runs"]}
            chosen = {}
            for side, key in ((a, "A"), (b, "B")):
                workers = listed.get(names[key], {}).get("workers", [])
                if not workers:
                    raise BadParameterError(f"{_shown(side.path)} holds no trace file")
                if side.worker is not None and side.worker not in workers:
                    raise BadParameterError(f"{_shown(side.path)}: no worker {side.worker!r}; workers: {', '.join(workers)}")
                chosen[key] = (names[key], side.worker or workers[0], side.span)
                spans = answers.ask("spans", run=names[key], worker=chosen[key][1]) or {"spans": []}
                if side.span not in [s["span"] for s in spans["spans"]]:
                    raise BadParameterError(f"{_shown(side.path)} has no span {side.span}")
            (run_a, worker_a, span_a), (run_b, worker_b, span_b) = chosen["A"], chosen["B"]
            answers.say("diff")
            # the page offers these thresholds (DiffView.tsx); another is shown at the nearest
            threshold = min(PAGE_THRESHOLDS, key=lambda t: abs(float(t) - threshold_pct))
            answers.embed("diff", run=run_a, worker=worker_a, span=span_a, run_b=run_b, worker_b=worker_b, span_b=span_b,
                        threshold_pct=threshold)
            if len(listed[run_a]["workers"]) > 1 and len(listed[run_b]["workers"]) > 1:
                answers.embed("diff_ranks", run=run_a, span=span_a, run_b=run_b, span_b=span_b, threshold_pct=threshold)
            # the report is the Diff page: its one tab
            answers.replies[answer_key("views", _query({"run": run_a, "worker": worker_a, "span": span_a}))] = (
                200, orjson.dumps({"run": run_a, "views": ["diff"]}))
            answers.relist(lambda run: run in (run_a, run_b))
            answers.location = {"run": run_a, "worker": worker_a, "span": str(span_a), "view": "diff",
                                "run_b": run_b, "worker_b": worker_b, "span_b": str(span_b), "diff_threshold": threshold}
            return _html(answers.payload(), f"PyTorch Profiler diff: {_shown(a.path)} vs {_shown(b.path)}")
        finally:
            store.stop()


def add_arguments(parser: Any) -> None:
    parser.add_argument("source", metavar="RUN_OR_FILE", help="a run directory or trace file, local path or fsspec URL")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write")
    parser.add_argument("--worker", default=None, help="only this worker (default: every worker of the run)")
    parser.add_argument("--span", type=int, default=None, help="only this span (default: every span)")
    parser.add_argument("--step", type=int, default=None, metavar="N",
                        help="the step the Trace view holds in full detail (default: the median step)")


def _progress_printer() -> Callable[[str], None]:
    started = time.monotonic()

    def progress(what: str) -> None:
        if time.monotonic() - started >= 1.0:
            print(f"report: {what} ({time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)
    return progress


def run(args: Any) -> int:
    """The `report` command: 0 written (said on stderr, with its size and time), 2 bad input or
    an output that cannot be written (checked before the report is made, then written
    atomically as `compare`'s outputs are)."""
    from .errors import PublicError
    from .python_api.compare import check_outputs, write_outputs

    started = time.monotonic()
    try:
        check_outputs([args.output])
        html = run_report(args.source, worker=args.worker, span=args.span, step=args.step,
                          max_memory_bytes=args.max_memory_mb << 20, progress=_progress_printer())
        write_outputs({args.output: html})
    except PublicError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"report: wrote {args.output} ({os.path.getsize(args.output) / 1e6:.1f} MB) in "
          f"{time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


# --- notebooks ----------------------------------------------------------------------------

NOTEBOOK_HEIGHT_PX = 900


class Shown:
    """The page of a report as a notebook shows it: an isolated frame (`srcdoc`) holding the
    report file, scripts allowed, nothing else (no access to the notebook, no request)."""

    def __init__(self, page: str, height_px: int = NOTEBOOK_HEIGHT_PX) -> None:
        self.page = page
        self.height_px = height_px

    def _repr_html_(self) -> str:
        # characters beyond ASCII as references: the frame's page reads the same in a notebook
        # of any encoding (its script's hash, which its policy checks, included)
        page = html.escape(self.page, quote=True).encode("ascii", "xmlcharrefreplace").decode("ascii")
        return (f'<iframe srcdoc="{page}" sandbox="allow-scripts allow-downloads" '
                f'title="PyTorch Profiler" style="width:100%;height:{self.height_px}px;border:1px solid #ccc">'
                "</iframe>")


def _source_of(x: Any) -> str:
    """The file or directory a `Profile`, `Run` or path names."""
    from .python_api.profile import Profile
    from .python_api.runs import Run

    if isinstance(x, Profile):
        return str(x.source)
    if isinstance(x, Run):
        return x.storage.display(None)  # the run directory load_run was given
    if isinstance(x, (str, os.PathLike)):
        return os.fspath(x)
    raise TypeError(f"show takes a Profile, a Run or a path, not {type(x).__name__}")


def show(x: Any, b: Any = None, *, view: str | None = None, step: int | None = None,
         max_memory_bytes: int | None = None) -> Shown:
    """The page of `x` (a `Profile`, a `Run`, or a trace file or run directory) in a notebook,
    offline and with no server; with `b`, the Diff page of `x` against `b`. `view` opens a
    tab ("operator", "kernel", "trace", ...); `step` is the step the Trace view holds in full
    detail (the median one by default). Its `_repr_html_` is the page in a frame.

    Examples
    --------
    >>> import tb_plugin
    >>> tb_plugin.show("log/resnet50", view="kernel")  # doctest: +SKIP
    >>> tb_plugin.show(profile_a, profile_b)            # the Diff page  # doctest: +SKIP
    """
    from .store.budget import DEFAULT_MAX_MEMORY_BYTES
    from .python_api.compare import Side

    budget = max_memory_bytes or DEFAULT_MAX_MEMORY_BYTES
    if b is not None:
        from .views.regression import DEFAULT_THRESHOLD_PCT

        return Shown(diff_report(Side(_source_of(x), None, 1), Side(_source_of(b), None, 1), DEFAULT_THRESHOLD_PCT,
                                 max_memory_bytes=budget))
    return Shown(run_report(_source_of(x), step=step, view=view, max_memory_bytes=budget))
