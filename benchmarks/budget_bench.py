#!/usr/bin/env python3
"""Does `--profiler_max_memory_mb` bound the process? Click through many runs and read RSS.

Copies real traces into `--runs` runs of a fresh log directory (cycling through the traces
given; by default the 35 MB ResNet-50 spans of `samples/gpu_resnet50_v100` and, where
`../shared/traces` is beside the checkout, the 54 MB V100 DDP trace), starts a real
``tensorboard`` with that budget and no disk cache (every run is parsed), and for each run
in turn asks what a user's first clicks ask (`CLICKS`, each until it stops answering 202),
then reads the server's RSS (`VmRSS`) and peak (`VmHWM`) from /proc. After the last run the
server is left idle for `--idle-seconds` and read again. The server is stopped by its pid.

    PYTHONPATH=. python benchmarks/budget_bench.py                     # 40 runs, 512 MB
    PYTHONPATH=. python benchmarks/budget_bench.py --runs 10 --json out.json

Reported: RSS after start-up (imports, warm-up), after each run, its peak, and idle at the
end, against the budget: the process should stay within the budget plus the fixed overhead
benchmarks/README.md states ("Memory budget").
"""

import argparse
import json
import shutil
import tempfile
import time
import urllib.parse
from pathlib import Path

from load_test import PREFIX, REPO, Server, get

SHARED = REPO.parent.parent / "shared" / "traces"
DEFAULT_TRACES = sorted((REPO / "samples" / "gpu_resnet50_v100").glob("*.pt.trace.json.gz")) + sorted(
    (SHARED / "v100_ddp_nccl_memory").glob("*.pt.trace.json.gz"))
# What a user's first look at a run asks for (the page's Overview, Operator, Kernel, Memory,
# Module and Trace views); `timeline_slices` over the whole trace at about 1,500 pixels.
CLICKS = ("info", "overview", "steps", "gpu_summary", "operators", "kernels", "memory_devices", "memory_stats",
          "modules", "module_flame", "timeline_tracks", "timeline_slices")


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def ask(port, url, timeout=600):
    """The answer once the profile is loaded (202 while it is parsed)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = get(port, url, timeout=timeout)
        if status != 202:
            return status, body
        if time.monotonic() > deadline:
            raise TimeoutError(url)
        time.sleep(0.2)


def click_through(port, run, worker):
    """Every CLICKS route of one run; {route: status}."""
    query = {"run": run, "worker": worker}
    statuses = {}
    for route in CLICKS:
        params = dict(query)
        if route == "timeline_slices":
            _, body = ask(port, f"{PREFIX}/timeline_tracks?{urllib.parse.urlencode(query)}")
            frame = json.loads(body)
            params.update(start_us=frame["start_us"], end_us=frame["end_us"],
                          resolution_us=max((frame["end_us"] - frame["start_us"]) / 1500, 1e-3))
        statuses[route], _ = ask(port, f"{PREFIX}/{route}?{urllib.parse.urlencode(params)}")
    return statuses


def run_bench(traces, runs, budget_mb, idle_seconds, log=print):
    root = Path(tempfile.mkdtemp(prefix="tb_budget_bench_"))
    server = None
    try:
        for i in range(runs):
            trace = traces[i % len(traces)]
            (root / f"run{i:02d}").mkdir()
            shutil.copy(trace, root / f"run{i:02d}" / trace.name)
        server = Server(root, extra_args=["--profiler_max_memory_mb", str(budget_mb), "--reload_interval", "3600"])
        server.wait_ready(120)
        pid = server.proc.pid
        time.sleep(5)  # the warm-up load
        started_kb = status_kb(pid, "VmRSS")
        log(f"tensorboard pid {pid}; {runs} runs of {', '.join(t.name for t in traces)}; budget {budget_mb} MB; "
            f"RSS after start-up {started_kb >> 10} MB")
        rows = []
        for i in range(runs):
            run = f"run{i:02d}"
            _, body = ask(server.port, f"{PREFIX}/workers?run={run}")
            worker = json.loads(body)["workers"][0]
            began = time.monotonic()
            statuses = click_through(server.port, run, worker)
            rows.append({"run": run, "trace": traces[i % len(traces)].name, "seconds": round(time.monotonic() - began, 2),
                         "rss_mb": status_kb(pid, "VmRSS") >> 10, "peak_mb": status_kb(pid, "VmHWM") >> 10,
                         "not_200": {r: s for r, s in statuses.items() if s != 200}})
            log(f"{run} {rows[-1]['trace'][:24]:24s} {rows[-1]['seconds']:6.2f} s  RSS {rows[-1]['rss_mb']:5d} MB  "
                f"peak {rows[-1]['peak_mb']:5d} MB  {rows[-1]['not_200'] or ''}")
        time.sleep(idle_seconds)
        report = {"runs": runs, "budget_mb": budget_mb, "traces": [t.name for t in traces],
                  "started_mb": started_kb >> 10, "max_rss_after_run_mb": max(r["rss_mb"] for r in rows),
                  "peak_mb": status_kb(pid, "VmHWM") >> 10, "idle_mb": status_kb(pid, "VmRSS") >> 10, "rows": rows}
        report["peak_over_budget_mb"] = report["peak_mb"] - budget_mb
        report["idle_over_budget_mb"] = report["idle_mb"] - budget_mb
        return report
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--budget-mb", type=int, default=512)
    parser.add_argument("--idle-seconds", type=float, default=15.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    report = run_bench(args.traces, args.runs, args.budget_mb, args.idle_seconds)
    print(f"budget {report['budget_mb']} MB: after start-up {report['started_mb']} MB, highest after a run "
          f"{report['max_rss_after_run_mb']} MB, peak {report['peak_mb']} MB "
          f"({report['peak_over_budget_mb']:+d} MB over the budget), idle {report['idle_mb']} MB")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
