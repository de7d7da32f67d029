"""Questions a user asks of a profile, answered through the MCP server (issue 38).

    python benchmarks/agent_eval.py [--out benchmarks/results/agent_eval.json]

Starts `python -m tb_plugin mcp samples` and talks to it with the `mcp` SDK's own client over
stdio, as an agent would. Each question is a few tool calls (the arguments an agent would
give: `limit`, `sort`, `columns`, `table`) and one value read from their answers; the same
value is computed from the Python API (`tb_plugin.load`, `load_run`, `diff`, `load_snapshot`)
without the server, and the two must agree. Recorded per question: the bytes of JSON the
agent read (every answer of its calls) against the size of the traces it is about, gzip and
inflated. Exit status 1 when an answer disagrees.
"""

import argparse
import asyncio
import gzip
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
sys.path.insert(0, str(REPO))

import tb_plugin  # noqa: E402

RESNET, CNN, MESH, DDP = "gpu_resnet50_v100", "cpu_cnn", "cpu_mesh_2d_gloo", "cpu_ddp_gloo"
H100, COMPILE, LIGHTNING, A100 = "gpu_h100_eager_nccl", "cpu_compile", "cpu_lightning", "gpu_a100_nccl"
SNAPSHOTS = "gpu_memory_snapshot"


def first(run):
    return sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))[0]


def profile(run, _cache={}):
    if run not in _cache:
        _cache[run] = tb_plugin.load(str(first(run)))
    return _cache[run]


def rows(answer, table=None):
    """{column: value} of each row of the (one) table of a tool's answer."""
    body = answer["answer"] if table is None else answer["answer"][table]
    return [dict(zip(body["columns"], row)) for row in body["rows"]]


def top(frame, column):
    return frame.loc[frame[column].idxmax()]


# (question, runs it reads (for the trace size), tool calls, value from the answers,
#  value from the Python API)
QUESTIONS = [
    ("Which kernel costs the most GPU time?", [RESNET],
     [("kernels", {"run": RESNET, "limit": 1, "columns": "name,total_us"})],
     lambda a: rows(a[0])[0]["name"], lambda: top(profile(RESNET).answer("kernels"), "total_us")["name"]),
    ("Which kernel costs most per step, and how much per step (us)?", [RESNET],
     [("kernels", {"run": RESNET, "limit": 1, "columns": "name,total_us"}),
      ("steps", {"run": RESNET, "limit": 0})],
     lambda a: round(rows(a[0])[0]["total_us"] / a[1]["answer"]["rows_total"], 6),
     lambda: round(profile(RESNET).answer("kernels")["total_us"].max() / len(profile(RESNET).answer("steps")), 6)),
    ("How many steps did the profiler record?", [CNN],
     [("steps", {"run": CNN, "limit": 0})],
     lambda a: a[0]["answer"]["rows_total"], lambda: len(profile(CNN).answer("steps"))),
    ("What is the mean step time (us)?", [RESNET],
     [("steps", {"run": RESNET, "limit": 100, "columns": "total_us"})],
     lambda a: sum(r["total_us"] for r in rows(a[0])) / len(rows(a[0])),
     lambda: profile(RESNET).answer("steps")["total_us"].mean()),
    ("What share of the step time is spent waiting for the data loader (%)?", [CNN],
     [("steps", {"run": CNN, "limit": 100, "columns": "dataloader_us,total_us"})],
     lambda a: 100 * sum(r["dataloader_us"] for r in rows(a[0])) / sum(r["total_us"] for r in rows(a[0])),
     lambda: 100 * profile(CNN).answer("steps")["dataloader_us"].sum() / profile(CNN).answer("steps")["total_us"].sum()),
    ("Which operator takes the most GPU time of its own?", [RESNET],
     [("operators", {"run": RESNET, "limit": 1, "sort": "-device_self_us", "columns": "name,device_self_us"})],
     lambda a: rows(a[0])[0]["name"], lambda: top(profile(RESNET).answer("operators"), "device_self_us")["name"]),
    ("Which operator is called most often?", [CNN],
     [("operators", {"run": CNN, "limit": 1, "sort": "-calls", "columns": "name,calls"})],
     lambda a: rows(a[0])[0]["calls"], lambda: int(profile(CNN).answer("operators")["calls"].max())),
    ("Which operator costs the host the most time of its own?", [CNN],
     [("operators", {"run": CNN, "limit": 1, "sort": "-host_self_us", "columns": "name,host_self_us"})],
     lambda a: rows(a[0])[0]["name"], lambda: top(profile(CNN).answer("operators"), "host_self_us")["name"]),
    ("How busy is the GPU (utilization %)?", [RESNET],
     [("gpu_summary", {"run": RESNET, "columns": "device,utilization_pct"})],
     lambda a: rows(a[0])[0]["utilization_pct"], lambda: profile(RESNET).answer("gpu_summary")["utilization_pct"].iloc[0]),
    ("How long is the GPU idle in total (us)?", [RESNET],
     [("idle_time", {"run": RESNET, "limit": 100, "columns": "idle_us"})],
     lambda a: sum(r["idle_us"] for r in rows(a[0])), lambda: profile(RESNET).answer("idle_time")["idle_us"].sum()),
    ("Which operator allocates the most memory?", [RESNET],
     [("memory_stats", {"run": RESNET, "limit": 1, "sort": "-alloc_bytes", "columns": "operator,alloc_bytes"})],
     lambda a: rows(a[0])[0]["operator"],
     lambda: top(profile(RESNET).answer("memory_stats"), "alloc_bytes")["operator"]),
    ("How many bytes do the memory copies move?", [RESNET],
     [("memcpy_summary", {"run": RESNET, "limit": 100, "columns": "total_bytes"})],
     lambda a: sum(r["total_bytes"] for r in rows(a[0])), lambda: int(profile(RESNET).answer("memcpy_summary")["total_bytes"].sum())),
    ("Which kernel waits longest to start after its launch (mean launch delay)?", [RESNET],
     [("kernel_launch_summary", {"run": RESNET, "limit": 1, "sort": "-launch_delay_mean_us",
                                 "columns": "name,launch_delay_mean_us"})],
     lambda a: rows(a[0])[0]["name"], lambda: top(profile(RESNET).answer("kernel_launch_summary"), "launch_delay_mean_us")["name"]),
    ("What share of the kernel time runs on tensor cores (%)?", [H100],
     [("gpu_summary", {"run": H100, "columns": "tensor_core_kernel_pct"})],
     lambda a: rows(a[0])[0]["tensor_core_kernel_pct"],
     lambda: profile(H100).answer("gpu_summary")["tensor_core_kernel_pct"].iloc[0]),
    ("Which NCCL kernel takes the most time?", [A100],
     [("kernels", {"run": A100, "limit": 100, "columns": "name,total_us"})],
     lambda a: next(r["name"] for r in rows(a[0]) if "nccl" in r["name"].lower()),
     lambda: top((k := profile(A100).answer("kernels"))[k["name"].str.lower().str.contains("nccl")], "total_us")["name"]),
    ("How much of the time is spent in compiled regions (%)?", [COMPILE],
     [("compiled", {"run": COMPILE, "table": "share", "columns": "compiled_pct"})],
     lambda a: rows(a[0])[0]["compiled_pct"], lambda: profile(COMPILE).answer("compiled").share["compiled_pct"].iloc[0]),
    ("Which PyTorch Lightning hook takes the most time?", [LIGHTNING],
     [("lightning", {"run": LIGHTNING, "limit": 1, "sort": "-total_us", "columns": "hook,total_us"})],
     lambda a: rows(a[0])[0]["hook"], lambda: top(profile(LIGHTNING).answer("lightning"), "total_us")["hook"]),
    ("Why is the slowest rank slow (the job's verdict)?", [MESH],
     [("job", {"run": MESH, "table": "verdict", "columns": "text"})],
     lambda a: rows(a[0])[0]["text"], lambda: tb_plugin.load_run(str(SAMPLES / MESH)).job().verdict["text"].iloc[0]),
    ("Which rank has the longest mean step (us)?", [MESH],
     [("job", {"run": MESH, "table": "rank_steps", "limit": 1000, "columns": "rank,step_us"})],
     lambda a: max(sorted({r["rank"] for r in rows(a[0])}),
                   key=lambda k: (lambda s: sum(s) / len(s))([r["step_us"] for r in rows(a[0]) if r["rank"] == k])),
     lambda: int(tb_plugin.load_run(str(SAMPLES / MESH)).job().rank_steps.groupby("rank")["step_us"].mean().idxmax())),
    ("How long does rank 1 spend communicating per run (us)?", [DDP],
     [("distributed", {"run": DDP, "table": "all_steps", "columns": "worker,communication_us"})],
     lambda a: next(r["communication_us"] for r in rows(a[0]) if r["worker"] == "worker1"),
     lambda: (lambda t: t.loc[t["worker"] == "worker1", "communication_us"].iloc[0])(
         tb_plugin.load_run(str(SAMPLES / DDP)).distributed().all_steps)),
    ("What regressed between these two runs (the cause of the largest step-time increase)?", [CNN, DDP],
     [("diff", {"run": CNN, "run_b": DDP, "worker_b": "worker0", "table": "explanation", "limit": 2,
                "sort": "-mean_us_delta", "columns": "cause,mean_us_delta"})],
     lambda a: next(r["cause"] for r in rows(a[0]) if r["cause"] != "step_time"),  # the first row is the total
     lambda: (lambda t: top(t[t["cause"] != "step_time"], "mean_us_delta")["cause"])(
         tb_plugin.diff(profile(CNN), tb_plugin.load(str(first(DDP)))).explanation)),
    ("Which kernel's total time grew the most between the two runs (us)?", [RESNET, A100],
     [("diff", {"run": A100, "run_b": RESNET, "worker_b": "worker0", "table": "kernels", "limit": 1,
                "sort": "-total_us_delta", "columns": "name,total_us_delta"})],
     lambda a: rows(a[0])[0]["total_us_delta"],
     lambda: tb_plugin.diff(profile(A100), profile(RESNET)).kernels["total_us_delta"].max()),
    ("What held the memory at the OOM (the frame holding most)?", [SNAPSHOTS],
     [("snapshot_oom", {"run": SNAPSHOTS, "snapshot": "rank0", "columns": "kind,entry,requested_bytes"}),
      ("snapshot_blame", {"run": SNAPSHOTS, "snapshot": "rank0", "limit": 1, "columns": "frame,live_bytes"})],
     lambda a: rows(a[1])[0]["frame"],
     lambda: top(tb_plugin.load_snapshot(str(SAMPLES / SNAPSHOTS / "rank0.pickle")).blame(), "live_bytes")["frame"]),
    ("How many bytes did the allocation that ran out of memory ask for?", [SNAPSHOTS],
     [("snapshot_oom", {"run": SNAPSHOTS, "snapshot": "rank0", "columns": "kind,requested_bytes"})],
     lambda a: rows(a[0])[0]["requested_bytes"],
     lambda: int(tb_plugin.load_snapshot(str(SAMPLES / SNAPSHOTS / "rank0.pickle")).oom()["requested_bytes"].iloc[0])),
]


def trace_bytes(runs):
    """(stored, inflated) bytes of every file of `runs` the questions read (traces, snapshots)."""
    stored = inflated = 0
    for run in runs:
        files = [first(run)] if run not in (MESH, DDP, SNAPSHOTS) else sorted(
            p for p in (SAMPLES / run).iterdir() if p.name.endswith((".gz", ".pickle")))
        if run == SNAPSHOTS:
            files = [SAMPLES / run / "rank0.pickle"]
        for path in files:
            stored += path.stat().st_size
            inflated += len(gzip.decompress(path.read_bytes())) if path.suffix == ".gz" else path.stat().st_size
    return stored, inflated


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


async def ask_all(cache_dir):
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": cache_dir}
    server = StdioServerParameters(command=sys.executable, args=["-m", "tb_plugin", "mcp", str(SAMPLES), "--wait", "300"],
                                   env=env, cwd=str(REPO))
    results = []
    async with Client(server, read_timeout_seconds=600) as client:
        for question, runs, calls, from_answers, _ in QUESTIONS:
            texts, failed = [], None
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                texts.append(result.content[0].text)
                failed = failed or (f"{name} failed: {texts[-1]}" if result.is_error else None)
            answer = failed or from_answers([json.loads(t) for t in texts])
            results.append({"question": question, "calls": [{"tool": n, "arguments": a} for n, a in calls],
                            "answer": answer, "bytes_read": sum(len(t.encode()) for t in texts),
                            "largest_answer_bytes": max(len(t.encode()) for t in texts)})
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "agent_eval.json"))
    parser.add_argument("--cache-dir", default=None,
                        help="XDG_CACHE_HOME of the server, for its parsed-trace cache (default: a new temporary directory)")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    results = asyncio.run(ask_all(args.cache_dir or tempfile.mkdtemp(prefix="agent_eval_")))
    wrong = 0
    for result, (_, runs, _, _, reference) in zip(results, QUESTIONS):
        expected = reference()
        expected = expected.item() if hasattr(expected, "item") else expected
        result["python_api"] = expected
        result["agrees"] = same(result["answer"], expected)
        wrong += not result["agrees"]
        result["trace_bytes_stored"], result["trace_bytes_inflated"] = trace_bytes(runs)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"questions": results, "seconds": round(time.perf_counter() - began, 1)},
                                         indent=1, default=str) + "\n")
    print("| # | question | agrees | bytes read | largest answer | trace (gzip / JSON) | read / JSON |")
    print("|---|---|---|---|---|---|---|")
    for i, r in enumerate(results, 1):
        print(f"| {i} | {r['question']} | {'yes' if r['agrees'] else 'NO'} | {r['bytes_read']:,} | "
              f"{r['largest_answer_bytes']:,} | {r['trace_bytes_stored']:,} / {r['trace_bytes_inflated']:,} | "
              f"{100 * r['bytes_read'] / r['trace_bytes_inflated']:.3f}% |")
    print(f"{len(results) - wrong} of {len(results)} answers agree with the Python API", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
