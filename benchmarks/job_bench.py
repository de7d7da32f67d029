"""A synthetic many-rank job, preprocessed on Dask, then served by a real TensorBoard: the
figures of issue 16's targets, measured side by side in one run.

1. The job: one real trace replicated per rank (tests/job_traces.py), each rank on its own
   clock, one rank paused for extra compute in one step (the planted straggler).
2. Single-process: the work of one preprocess task (`preprocess_file`: read, parse, model,
   summaries, cache entries), one file after another in this process, and the parse alone,
   after one warm-up file; MB are MB of trace JSON.
3. `preprocess --dask local` with N worker processes over every rank: MB/s from the first
   task submitted to the last file's result (the cluster's start, and the run indexes written
   after the files, are shown apart), and the same with one worker process, which tells Dask's own cost from a machine without idle cores.
4. A real `tensorboard` on loopback with that cache: from launch to its first run listing
   (TensorBoard's start and the log directory's scan) and to the job view's first 200 answer, its peak RSS (VmHWM) after that answer, and whether the answer names the
   planted straggler (rank, step, cause).

    PYTHONPATH=. python benchmarks/job_bench.py [--ranks 256] [--workers 2] [--single 24] [--no-one-worker]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_plugin.python_api.preprocess import WORKER_ENV  # noqa: E402

# The single-process figure is taken as one worker runs: polars on one thread.
os.environ.update(WORKER_ENV)

from tests.helpers import free_port, stop_by_pid  # noqa: E402
from tests.job_traces import write_job  # noqa: E402

SHARED = Path(os.environ.get("TB_PLUGIN_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
DEFAULT_SOURCE = SHARED / "sampled_128rank_job" / "rank0.pt.trace.json.gz"
TENSORBOARD = Path(sys.executable).with_name("tensorboard")
PLUGIN = "/data/plugin/pytorch_profiler"


def build_job(source, logdir, ranks, straggler):
    rng = random.Random(16)
    offsets = [rng.uniform(-50_000.0, 50_000.0) for _ in range(ranks)]  # hosts' clocks disagree
    started = time.perf_counter()
    paths = write_job(source, logdir / "job", ranks, offsets, straggler=straggler)
    return paths, time.perf_counter() - started


def single_process(logdir, paths, count, cache_dir):
    """(preprocess MB/s, its CPU seconds per MB, parse-only MB/s) over `count` files after one
    warm-up file."""
    from tb_plugin.python_api.preprocess import preprocess_file
    from tb_plugin.python_api.profile import profile_from_bytes
    from tb_plugin.store.storage import Storage

    rels = [p.relative_to(logdir).as_posix() for p in paths[:count + 1]]
    preprocess_file(str(logdir), rels[0], cache_dir, force=True)  # imports, first-call costs
    started, cpu_started, json_bytes = time.perf_counter(), time.process_time(), 0
    for rel in rels[1:]:
        result = preprocess_file(str(logdir), rel, cache_dir, force=True)
        assert not result["error"], result
        json_bytes += result["json_bytes"]
    task_rate = json_bytes / 1e6 / (time.perf_counter() - started)
    cpu_per_mb = (time.process_time() - cpu_started) / (json_bytes / 1e6)
    storage = Storage(str(logdir))
    parse_seconds = 0.0
    for rel in rels[1:]:
        trace = storage.read_trace(rel)
        t0 = time.perf_counter()
        profile_from_bytes(trace, rel)
        parse_seconds += time.perf_counter() - t0
    return task_rate, cpu_per_mb, json_bytes / 1e6 / parse_seconds


def dask_preprocess(logdir, cache_dir, workers):
    from tb_plugin.python_api.preprocess import preprocess

    started = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        report = preprocess(str(logdir), "local", cache_dir, workers, force=True, out=quiet)
    assert not report.failed, report.failed[:3]
    return report, time.perf_counter() - started


def peak_rss_bytes(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _first_200(url, proc, log_path, deadline):
    """The JSON of `url`'s first 200 answer, asking every 50 ms (202: still loading)."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                if response.status == 200:
                    return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError, OSError):
            if proc.poll() is not None:
                raise RuntimeError(Path(log_path).read_text(errors="replace")) from None
        if time.perf_counter() > deadline:
            raise RuntimeError(f"no answer from {url} within 300 s")
        time.sleep(0.05)


def tensorboard_job(logdir, cache_dir, log_path):
    """(seconds from launch to the plugin's first run listing, to the job view's first 200,
    peak RSS bytes, the job answer)."""
    port = free_port()
    args = [str(TENSORBOARD), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port),
            "--profiler_cache_dir", cache_dir]
    base = f"http://127.0.0.1:{port}{PLUGIN}"
    with open(log_path, "wb") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        try:
            _first_200(f"{base}/runs", proc, log_path, started + 300)
            listed = time.perf_counter() - started
            body = _first_200(f"{base}/job?run=job", proc, log_path, started + 300)
            return listed, time.perf_counter() - started, peak_rss_bytes(proc.pid), body
        finally:
            stop_by_pid(proc, 15)


def worst_straggler(body):
    table = body["stragglers"]
    if not table["rows"]:
        return None
    row = dict(zip(table["columns"], table["rows"][0]))
    return int(row["rank"]), int(row["step"]), row["cause"], float(row["excess_us"])


def cache_bytes(cache_dir):
    """{"model": bytes, "summary": bytes, "index": bytes} of the cache's entries, by what their
    manifest holds (a run's index holds several members)."""
    sizes = {"model": 0, "summary": 0, "index": 0}
    for manifest in Path(cache_dir).glob("*/manifest.json"):
        fields = json.loads(manifest.read_text())
        section = "model" if "model" in fields else "index" if len(fields["summary"]["members"]) > 1 else "summary"
        sizes[section] += sum(p.stat().st_size for p in manifest.parent.iterdir())
    return sizes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=str(DEFAULT_SOURCE), help="the real trace every rank copies")
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes")
    parser.add_argument("--single", type=int, default=24, help="files timed in the single-process pass")
    parser.add_argument("--step", type=int, default=552, help="the straggling step (one of the trace's)")
    parser.add_argument("--no-one-worker", dest="one_worker", action="store_false",
                        help="skip the pass with one Dask worker (long for many ranks)")
    args = parser.parse_args()
    straggler = (args.ranks * 2 // 3, args.step, 60_000.0)

    with tempfile.TemporaryDirectory(prefix="job_bench_") as tmp:
        tmp = Path(tmp)
        logdir = tmp / "logs"
        paths, build_s = build_job(args.source, logdir, args.ranks, straggler)
        stored = sum(p.stat().st_size for p in paths)
        print(f"job: {args.ranks} ranks of {Path(args.source).name}, {stored / 1e6:.1f} MB stored, written in "
              f"{build_s:.1f} s; planted straggler rank {straggler[0]}, step {straggler[1]}, "
              f"+{straggler[2] / 1000:.0f} ms compute", flush=True)

        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
        task_rate, cpu_per_mb, parse_rate = single_process(logdir, paths, args.single, str(tmp / "single_cache"))
        print(f"single process: {task_rate:.2f} MB/s per preprocess task (parse + summaries + cache write; "
              f"{cpu_per_mb * 1000:.0f} ms CPU per MB), {parse_rate:.2f} MB/s parse alone", flush=True)

        cache_dir = str(tmp / "cache")
        report, with_start_s = dask_preprocess(logdir, cache_dir, args.workers)
        dask_rate = report.throughput()
        target = 0.8 * report.workers * task_rate
        print(f"dask local, {report.workers} workers: {report.json_bytes / 1e6:.1f} MB of JSON in "
              f"{report.seconds:.1f} s = {dask_rate:.2f} MB/s ({with_start_s:.1f} s with the cluster's start); "
              f"target >= 0.8 x {report.workers} x {task_rate:.2f} = {target:.2f} MB/s: "
              f"{'held' if dask_rate >= target else 'missed'} ({dask_rate / (report.workers * task_rate):.2f}x); "
              f"then {report.indexes} run summary indexes in {report.index_seconds:.1f} s", flush=True)
        dask_cpu_per_mb = report.cpu_seconds / (report.json_bytes / 1e6)
        print(f"  CPU per MB in the workers' tasks: {dask_cpu_per_mb * 1000:.0f} ms ({cpu_per_mb / dask_cpu_per_mb:.2f}x "
              f"the single process's efficiency); {report.workers} workers with a core each would do "
              f"{report.workers / dask_cpu_per_mb:.2f} MB/s", flush=True)
        if report.workers > 1 and args.one_worker:  # Dask's own cost, apart from cores the machine may not have idle
            one, _ = dask_preprocess(logdir, str(tmp / "cache_one"), 1)
            print(f"dask local, 1 worker: {one.throughput():.2f} MB/s ({one.throughput() / task_rate:.2f}x the "
                  f"single process); {report.workers} workers are {dask_rate / one.throughput():.2f}x one worker",
                  flush=True)
        sizes = cache_bytes(cache_dir)
        print(f"cache: {sizes['model'] / 1e6:.1f} MB of models, {sizes['summary'] / 1e6:.2f} MB of files' summaries "
              f"and {sizes['index'] / 1e6:.2f} MB of run indexes "
              f"for {report.json_bytes / 1e6:.1f} MB of JSON; load average after: {os.getloadavg()[0]:.2f}",
              flush=True)

        listed, seconds, rss, body = tensorboard_job(logdir, cache_dir, tmp / "tensorboard.log")
        found = worst_straggler(body)
        print(f"tensorboard: launch to the first run listing in {listed:.2f} s, to the job view's first 200 "
              f"in {seconds:.2f} s (target < 5 s: "
              f"{'held' if seconds < 5 else 'missed'}); peak RSS {rss / 2**20:.0f} MiB (target < 1 GiB: "
              f"{'held' if rss < 1 << 30 else 'missed'})", flush=True)
        print(f"straggler found: {found}; planted {straggler} -> "
              f"{'found' if found and found[:3] == (straggler[0], straggler[1], 'compute') else 'NOT FOUND'}",
              flush=True)
        shutil.rmtree(logdir)


if __name__ == "__main__":
    main()
