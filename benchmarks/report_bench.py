"""Size and time of `python -m tb_plugin report` (issue 37): on each trace, in fresh
processes, the report's CPU and wall time, peak RSS and file size against a load plus the
views its tabs open on (`tb_plugin.load`, then each tab's main `Profile` view once).

    PYTHONPATH=. python benchmarks/report_bench.py                  # shared ResNet-50 + synthetic
    PYTHONPATH=. python benchmarks/report_bench.py t.json.gz --synth-mb 0 --repeat 3

Both are timed as a user runs them: a fresh interpreter, its imports included (the CPU time
`/usr/bin/time` gives, the least of `--repeat` runs: on a shared machine waiting for a core
adds wall time, not CPU time); the load and the views are also timed inside their process.
The target: at most 10 MB for the 35 MB ResNet-50 trace, written in at most a load plus its
views (the report computes the same views, with each tab's choices, and packs them).
Figures are in benchmarks/README.md ("Report files").
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "traces"
DEFAULT_TRACES = [SHARED / "resnet50_v100_2021" / "worker0.1623143089861.pt.trace.json.gz",
                  SHARED / "v100_ddp_nccl_memory"]

# Run in a fresh interpreter: a load and the views each tab opens on, timed apart.
_LOAD_AND_VIEWS = """
import json, sys, time
import tb_plugin
t0, c0 = time.perf_counter(), time.process_time()
p = tb_plugin.load(sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
p.overview(); p.operators(); p.kernels(); p.idle_time(); p.kernel_launch_summary(); p.queue_length_summary()
p.kernel_sequences(); p.critical_path(); p.timeline_tracks()
start, end = p.model.span_us()
p.timeline().query(start, end, (end - start) / 2000)
for device in p.memory_devices():
    p.memory_curve(device); p.memory_stats(device)
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"load_s": t1 - t0, "views_s": t2 - t1, "load_cpu_s": c1 - c0, "views_cpu_s": c2 - c1}))
"""


# A load and every view the report holds: each answer the report embeds of the profile
# (`_held_requests`, recorded from a report of the same file), asked of the Python API
# (`Profile.answer`) and each of its tables computed, with nothing serialised.
_LOAD_AND_HELD_VIEWS = """
import json, sys, time
import tb_plugin
from tb_plugin.python_api.profile import declared_routes
from tb_plugin.schema import ROUTES
requests = json.loads(sys.argv[2])
t0, c0 = time.perf_counter(), time.process_time()
p = tb_plugin.load(sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
declared_routes()
for route, query in requests:
    declared = ROUTES[route]
    answer = p.answer(route, **{k: v for k, v in query.items() if k in {q.name for q in declared.params}})
    for name in declared.tables or ():
        getattr(answer, name)
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"load_s": t1 - t0, "views_s": t2 - t1, "load_cpu_s": c1 - c0, "views_cpu_s": c2 - c1}))
"""


def _held_requests(trace: Path) -> list[tuple[str, dict[str, str]]]:
    """(route, query) of every answer a report of `trace` embeds that is a view of its profile
    (not the run listing nor the tabs offered), each once."""
    from tb_plugin import report
    from tb_plugin.python_api.profile import declared_routes
    from tb_plugin.schema import PROFILE

    asked: dict[str, tuple[str, dict[str, str]]] = {}
    embed = report.Answers.embed

    def recording(self, route, **params):
        declared = declared_routes().get(route)
        if declared is not None and declared.reads == PROFILE:
            query = report._query(params)
            asked[report.answer_key(route, query)] = (route, query)
        return embed(self, route, **params)

    report.Answers.embed = recording
    try:
        report.run_report(str(trace), max_memory_bytes=8 << 30)
    finally:
        report.Answers.embed = embed
    return list(asked.values())


def _trace_file(path: Path) -> Path:
    return path if path.is_file() else sorted(path.glob("*.json.gz"))[0]


def _timed(argv: list[str]) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, stdout) of a fresh process running `argv`."""
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", *argv], env={**os.environ, "PYTHONPATH": str(REPO)},
                          check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    peak_kb, user, system = done.stderr.strip().splitlines()[-1].split()
    return wall, float(user) + float(system), int(peak_kb) / 1024, done.stdout


def measure(trace: Path, repeat: int) -> dict:
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        # the trace alone in its run: the run-wide tabs (job, distributed) of a file's report
        # cover every worker of its directory (the synthetic traces of other sizes beside it)
        alone = Path(tmp) / "run" / trace.name
        alone.parent.mkdir()
        alone.symlink_to(trace.resolve())
        held = json.dumps(_held_requests(alone))
        opening, holding = [], []
        out = Path(tmp) / "report.html"
        for _ in range(repeat):  # interleaved: a busy moment slows each alike
            wall, cpu, _, printed = _timed([sys.executable, "-c", _LOAD_AND_VIEWS, str(alone)])
            opening.append({**json.loads(printed), "base_s": wall, "base_cpu_s": cpu})
            wall, cpu, _, printed = _timed([sys.executable, "-c", _LOAD_AND_HELD_VIEWS, str(alone), held])
            holding.append({**{f"held_{k}": v for k, v in json.loads(printed).items()}, "held_s": wall, "held_cpu_s": cpu})
            wall, cpu, peak, _ = _timed([sys.executable, "-m", "tb_plugin", "report", str(alone), "-o", str(out)])
            reports.append({"report_s": wall, "report_cpu_s": cpu, "report_peak_mb": peak})
        size = out.stat().st_size
    return {"trace": trace.name, "json_mb": _json_mb(trace), **min(opening, key=lambda r: r["base_cpu_s"]),
            **min(holding, key=lambda r: r["held_cpu_s"]), **min(reports, key=lambda r: r["report_cpu_s"]),
            "report_mb": size / 1e6, "answers": len(json.loads(held))}


def _json_mb(trace: Path) -> float:
    import gzip

    with gzip.open(trace) if trace.suffix == ".gz" else open(trace, "rb") as f:
        return sum(len(chunk) for chunk in iter(lambda: f.read(1 << 24), b"")) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path, help="trace files or run folders (default: shared traces)")
    parser.add_argument("--synth-mb", type=float, default=110, help="synthetic trace size in MB (0: none)")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "tb_plugin_bench")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (the least CPU time is kept)")
    args = parser.parse_args()
    traces = [_trace_file(t) for t in (args.traces or [t for t in DEFAULT_TRACES if t.exists()])]
    # the package's bytecode written once, as an installed package has it (compileall writes it
    # whatever PYTHONDONTWRITEBYTECODE says): without it, with that variable set, as on this
    # machine, every process compiled the modules it imports (0.2-0.35 s, more for the report,
    # which imports the server's)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "tb_plugin")], check=True)
    if args.synth_mb:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from bench import synthetic_trace

        args.cache_dir.mkdir(parents=True, exist_ok=True)
        traces.append(Path(synthetic_trace(_trace_file(DEFAULT_TRACES[0]), args.synth_mb, args.cache_dir)))
    print("| trace | JSON MB | load + opening views CPU s (load, views) | load + the views it holds CPU s (load, views; "
          "answers) | report CPU s | wall s: the three | report peak RSS MB | report MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for trace in traces:
        r = measure(trace, args.repeat)
        print(f"| {r['trace']} | {r['json_mb']:.0f} | {r['base_cpu_s']:.1f} ({r['load_cpu_s']:.1f}, {r['views_cpu_s']:.1f}) "
              f"| {r['held_cpu_s']:.1f} ({r['held_load_cpu_s']:.1f}, {r['held_views_cpu_s']:.1f}; {r['answers']}) "
              f"| {r['report_cpu_s']:.1f} | {r['base_s']:.1f}, {r['held_s']:.1f}, {r['report_s']:.1f} "
              f"| {r['report_peak_mb']:.0f} | {r['report_mb']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
