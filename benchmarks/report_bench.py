"""Size and time of `python -m tb_plugin report` (issue 37): on each trace, in fresh
processes, the report's wall time, peak RSS and file size against the time of a load plus
the views its tabs open on (`tb_plugin.load`, then each tab's main `Profile` view once).

    PYTHONPATH=. python benchmarks/report_bench.py                  # shared ResNet-50 + synthetic
    PYTHONPATH=. python benchmarks/report_bench.py t.json.gz --synth-mb 0

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


def _trace_file(path: Path) -> Path:
    return path if path.is_file() else sorted(path.glob("*.json.gz"))[0]


def measure(trace: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    base = json.loads(subprocess.run([sys.executable, "-c", _LOAD_AND_VIEWS, str(trace)], env=env, check=True,
                                     capture_output=True, text=True).stdout)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.html"
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", sys.executable, "-m", "tb_plugin", "report", str(trace),
                               "-o", str(out)], env=env, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - started
        peak_kb, user, system = done.stderr.strip().splitlines()[-1].split()
        size = out.stat().st_size
    return {"trace": trace.name, "json_mb": _json_mb(trace), **base, "report_s": wall,
            "report_cpu_s": float(user) + float(system), "report_peak_mb": int(peak_kb) / 1024, "report_mb": size / 1e6}


def _json_mb(trace: Path) -> float:
    import gzip

    with gzip.open(trace) if trace.suffix == ".gz" else open(trace, "rb") as f:
        return sum(len(chunk) for chunk in iter(lambda: f.read(1 << 24), b"")) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path, help="trace files or run folders (default: shared traces)")
    parser.add_argument("--synth-mb", type=float, default=110, help="synthetic trace size in MB (0: none)")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "tb_plugin_bench")
    args = parser.parse_args()
    traces = [_trace_file(t) for t in (args.traces or [t for t in DEFAULT_TRACES if t.exists()])]
    if args.synth_mb:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from bench import synthetic_trace

        args.cache_dir.mkdir(parents=True, exist_ok=True)
        traces.append(Path(synthetic_trace(_trace_file(DEFAULT_TRACES[0]), args.synth_mb, args.cache_dir)))
    print("| trace | JSON MB | load + views s (CPU s) | report s (CPU s, with interpreter start) | report peak RSS MB "
          "| report MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for trace in traces:
        r = measure(trace)
        print(f"| {r['trace']} | {r['json_mb']:.0f} | {r['load_s'] + r['views_s']:.1f} "
              f"({r['load_cpu_s'] + r['views_cpu_s']:.1f}) | {r['report_s']:.1f} ({r['report_cpu_s']:.1f}) | "
              f"{r['report_peak_mb']:.0f} | {r['report_mb']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
