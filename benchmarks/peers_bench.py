#!/usr/bin/env python3
"""Ours against the tools users would otherwise reach for, on the same traces, in one run.

Measured, each in a fresh child process, interleaved round after round so that a busy
moment of the machine hits every tool alike:

- ``orjson``: ``orjson.loads`` of the trace's bytes (the project's yardstick);
- ``ours``: ``tb_plugin.load`` and the summary views the Overview, Operator and Kernel pages
  ask for (`OUR_VIEWS`);
- ``torch-tb-profiler 0.4.3`` (the last release of the old plugin): ``RunProfileData.parse``
  and ``RunGenerator.generate_run_profile``, which is how that release loads a trace and
  computes all its views at once (its ``RunLoader`` does this per file in a subprocess);
- ``HTA 0.5.0``: ``TraceAnalysis(trace_dir=...)`` and the analyses that answer what our
  summary views answer (`HTA_ANALYSES`: temporal breakdown, kernel breakdown, idle time).

Each peer is installed from PyPI, at its pinned version, into its own virtualenv under
``--venv-dir`` (made on first use; they would clash with ours and with each other). Imports
are timed apart from the work: the ratios compare load + views (the work a user waits for
once the tool is running); import times are reported beside them.

Usage::

    PYTHONPATH=. python benchmarks/peers_bench.py               # the 35 MB and 54 MB real traces
    PYTHONPATH=. python benchmarks/peers_bench.py t.json.gz --rounds 5

The figures (best of the rounds, per tool and trace, and the ratios) are printed as a
Markdown table and kept by `history.py` under ``benchmarks/results/peers/``.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import history  # noqa: E402  (benchmarks/ is not a package)

REPO_ROOT = Path(__file__).resolve().parents[1]
TRACES = REPO_ROOT.parent / "shared" / "traces"
DEFAULT_TRACES = [TRACES / "resnet50_v100_2021" / "worker0.1623143089861.pt.trace.json.gz",
                  TRACES / "v100_ddp_nccl_memory" / "rank1.pt.trace.json.gz"]
DEFAULT_VENV_DIR = Path.home() / ".cache" / "tb_plugin_bench" / "peers"
PEERS = {"torch-tb-profiler 0.4.3": "torch-tb-profiler==0.4.3", "HTA 0.5.0": "HolisticTraceAnalysis==0.5.0"}
# What a user opening a run waits for in our page: the Overview (steps, GPU summary,
# recommendations), the Operator and the Kernel tables.
OUR_VIEWS = ["steps", "overview", "gpu_summary", "operators", "kernels"]
HTA_ANALYSES = ["get_temporal_breakdown", "get_gpu_kernel_breakdown", "get_idle_time_breakdown"]
# Goals at 35 MB (load + views): this many times faster than each peer.
GOALS = {"torch-tb-profiler 0.4.3": 4.0, "HTA 0.5.0": 6.0}

# Each child prints one JSON line: {"import_s", "load_s", "views_s"}.
CHILD = {
    "orjson": """
import sys, time
from pathlib import Path
t0 = time.perf_counter(); import orjson; t1 = time.perf_counter()
data = Path(sys.argv[1]).read_bytes()
t2 = time.perf_counter(); orjson.loads(data); t3 = time.perf_counter()
print('{"import_s": %r, "load_s": %r, "views_s": 0.0}' % (t1 - t0, t3 - t2))
""",
    "ours": """
import json, sys, time
t0 = time.perf_counter(); import tb_plugin, tb_plugin.python_api.profile; t1 = time.perf_counter()
profile = tb_plugin.load(sys.argv[1]); t2 = time.perf_counter()
for name in json.loads(sys.argv[2]):
    getattr(profile, name)()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "views_s": t3 - t2}))
""",
    "torch-tb-profiler 0.4.3": """
import json, sys, tempfile, time
t0 = time.perf_counter()
from torch_tb_profiler.profiler.data import RunProfileData
from torch_tb_profiler.profiler.run_generator import RunGenerator
t1 = time.perf_counter()
with tempfile.TemporaryDirectory() as cache:
    data = RunProfileData.parse("worker0", None, sys.argv[1], cache); t2 = time.perf_counter()
    RunGenerator("worker0", None, data).generate_run_profile(); t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "views_s": t3 - t2}))
""",
    "HTA 0.5.0": """
import json, sys, time
t0 = time.perf_counter(); from hta.trace_analysis import TraceAnalysis; t1 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1]); t2 = time.perf_counter()
for name in json.loads(sys.argv[2]):
    getattr(analysis, name)(visualize=False)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "views_s": t3 - t2}))
""",
}


def log(message):
    print(message, file=sys.stderr, flush=True)


def peer_python(venv_dir, tool):
    """The interpreter of `tool`'s virtualenv, made and filled from PyPI on first use."""
    venv = venv_dir / tool.split()[0].lower()
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if not marker.exists() or marker.read_text() != PEERS[tool]:
        log(f"making {venv} with {PEERS[tool]} (first use only) ...")
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", PEERS[tool]], check=True)
        marker.write_text(PEERS[tool])
    return python


def run_child(python, tool, target, extra):
    env = dict(os.environ)
    if tool in ("ours", "orjson"):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    else:
        env.pop("PYTHONPATH", None)  # a peer must not import our checkout's packages
    proc = subprocess.run([str(python), "-c", CHILD[tool], str(target), *extra],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        return {"error": f"exited {proc.returncode}: {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def inflate(path, tmp_dir, index):
    """The trace as plain JSON in a directory of its own (HTA reads a directory)."""
    folder = Path(tmp_dir) / f"trace{index}"
    folder.mkdir()
    raw = path.read_bytes()
    out = folder / ("rank0.pt.trace.json" if raw[:2] == b"\x1f\x8b" else path.name)
    out.write_bytes(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return out


def fmt(value, spec=".3f"):
    return "—" if value is None else format(value, spec)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, help="traces (.json or .json.gz); default: the "
                        "35 MB ResNet-50 and 54 MB DDP traces of ../shared/traces")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all tools, best kept (default 3)")
    parser.add_argument("--venv-dir", type=Path, default=DEFAULT_VENV_DIR)
    parser.add_argument("--no-record", dest="record", action="store_false",
                        help="do not keep the figures in benchmarks/results/peers/")
    args = parser.parse_args(argv)
    traces = args.traces or DEFAULT_TRACES
    missing = [str(p) for p in traces if not p.is_file()]
    if missing:
        log(f"error: no such file: {', '.join(missing)}")
        return 2
    pythons = {"orjson": Path(sys.executable), "ours": Path(sys.executable),
               **{tool: peer_python(args.venv_dir.expanduser(), tool) for tool in PEERS}}
    extra = {"orjson": [], "ours": [json.dumps(OUR_VIEWS)], "torch-tb-profiler 0.4.3": [],
             "HTA 0.5.0": [json.dumps(HTA_ANALYSES)]}
    tools = list(pythons)
    best = {}
    with tempfile.TemporaryDirectory(prefix="tb_plugin_peers_") as tmp_dir:
        for index, trace in enumerate(traces):
            plain = inflate(trace, tmp_dir, index)
            label = f"{trace.parent.name}/{trace.name.split('.')[0]}"
            for round_no in range(args.rounds):
                # rotate the order each round: no tool always runs right after another
                order = tools[round_no % len(tools):] + tools[:round_no % len(tools)]
                for tool in order:
                    target = plain.parent if tool == "HTA 0.5.0" else plain
                    log(f"{label} round {round_no + 1}/{args.rounds}: {tool} ...")
                    result = run_child(pythons[tool], tool, target, extra[tool])
                    key = (label, tool)
                    if "error" in result:
                        best.setdefault(key, result)
                        continue
                    result["total_s"] = result["load_s"] + result["views_s"]
                    if "total_s" not in best.get(key, {}) or result["total_s"] < best[key]["total_s"]:
                        best[key] = {**result, "mb": plain.stat().st_size / 1e6}

    labels = list(dict.fromkeys(label for label, _ in best))
    print("| trace | JSON MB | tool | import s | load s | views s | load+views s | ÷ orjson | ours faster by |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    figures = {}
    for label in labels:
        oj = best.get((label, "orjson"), {}).get("total_s")
        ours = best.get((label, "ours"), {}).get("total_s")
        for tool in tools:
            r = best.get((label, tool), {})
            if "error" in r:
                print(f"| {label} | | {tool} | failed: {r['error']} | | | | | |")
                continue
            total = r.get("total_s")
            speedup = total / ours if total and ours and tool not in ("ours", "orjson") else None
            goal = GOALS.get(tool)
            verdict = "" if speedup is None or goal is None else \
                f" ({'met' if speedup >= goal else '**not met**'}: goal {goal:.0f}x)"
            print(f"| {label} | {fmt(r.get('mb'), '.1f')} | {tool} | {fmt(r.get('import_s'))} | {fmt(r.get('load_s'))} "
                  f"| {fmt(r.get('views_s'))} | {fmt(total)} | {fmt(total / oj if total and oj else None, '.2f')} "
                  f"| {fmt(speedup, '.1f')}{'x' if speedup else ''}{verdict} |")
            if total and oj:
                figures[f"{label}: {tool} (load+views) / orjson"] = total / oj
    if args.record and figures:
        print()
        print(history.report(*history.record("peers", figures, context={"rounds": args.rounds})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
