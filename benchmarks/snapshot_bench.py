#!/usr/bin/env python3
"""Benchmark CUDA memory snapshots (issue 29): load against `pickle.loads` with the GC off,
peak RSS against the file, the Active Memory Timeline's first paint and zoom latency.

Targets: a 5 M-entry snapshot (~1 GB pickled) loads within 1.5x `pickle.loads` (GC off),
peaks under 3x the file in RSS, paints the whole-trace timeline under 1 s after load, and
answers zooms in under 50 ms at the 95th percentile.

The snapshot is synthesised here (never committed): one device, a training loop of
`--entries` allocator actions (allocations that live from a few actions to the whole run,
sizes from 512 B to 64 MB), each with its own list of 8-14 frames out of a pool of distinct
frame dicts shared through the pickle memo, as torch's own pickles share them, and
`compile_context` / `user_metadata` as torch 2.x writes them; segments and their blocks at
the end as the allocator holds them. Each measurement runs in a fresh child
process (RSS only grows within a process), read from VmHWM.

    PYTHONPATH=. python benchmarks/snapshot_bench.py --entries 5000000 [--snapshot /tmp/s5m.pickle]

`--snapshot` keeps the synthetic file (written once, in a child process) for the next run.
"""

import argparse
import gc
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def vm_hwm():
    """Peak RSS of this process in bytes (VmHWM: ru_maxrss carries the parent's over exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def synthesise(path, entries, seed=0):
    """Write a snapshot of about `entries` actions to `path`; its size in bytes."""
    rng = random.Random(seed)
    files = [f"/home/u/project/model_{i}.py" for i in range(40)] + \
            [f"/usr/lib/python3/site-packages/torch/nn/modules/m{i}.py" for i in range(40)]
    frames = [{"filename": rng.choice(files), "line": rng.randint(1, 2000), "name": f"fn_{i}"} for i in range(3000)]
    stacks = [[frames[rng.randrange(len(frames))] for _ in range(rng.randint(8, 14))] for _ in range(20000)]
    trace, live, t, addr = [], {}, 1_700_000_000_000_000, 1 << 40
    segment_base, segment_bytes = addr, 0
    while len(trace) < entries:
        t += rng.randint(1, 20)
        if live and (len(live) > 4000 or rng.random() < 0.48):
            a = rng.choice(list(live)) if len(live) < 64 else next(iter(live))
            size, stack = live.pop(a)
            for action in ("free_requested", "free_completed"):
                trace.append({"action": action, "addr": a, "size": size, "stream": 0, "time_us": t,
                              "frames": list(stack), "compile_context": "N/A", "user_metadata": ""})
        else:
            size = 512 * int(2 ** rng.uniform(0, 17))
            stack = stacks[rng.randrange(len(stacks))]
            live[addr] = (size, stack)
            trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": list(stack),
                          "compile_context": "N/A", "user_metadata": ""})
            addr += size
            segment_bytes += size
    blocks, cursor = [], segment_base
    for a in sorted(live):
        size, stack = live[a]
        if a > cursor:
            blocks.append({"address": cursor, "size": a - cursor, "requested_size": 0, "state": "inactive", "frames": []})
        blocks.append({"address": a, "size": size, "requested_size": size, "state": "active_allocated", "frames": stack})
        cursor = a + size
    blocks.append({"address": cursor, "size": segment_base + segment_bytes + 512 - cursor, "requested_size": 0,
                   "state": "inactive", "frames": []})
    held = sum(s for s, _ in live.values())
    segment = {"device": 0, "address": segment_base, "total_size": segment_bytes + 512, "stream": 0,
               "segment_type": "large", "segment_pool_id": (0, 0), "allocated_size": held, "active_size": held,
               "requested_size": held, "blocks": blocks}
    snapshot = {"segments": [segment], "device_traces": [trace], "allocator_settings": {}}
    with open(path, "wb") as fh:
        pickle.dump(snapshot, fh, protocol=4)
    return os.path.getsize(path)


def child(kind, path, entries, queries, seed):
    """One measurement in this (fresh) process; prints a JSON line."""
    if kind == "synthesise":
        print(json.dumps({"size": synthesise(path, entries, seed)}))
        return
    data = Path(path).read_bytes()
    after_read = vm_hwm()
    if kind == "pickle":
        gc.disable()
        start = time.perf_counter()
        pickle.loads(data)
        print(json.dumps({"seconds": time.perf_counter() - start, "peak_rss": vm_hwm(), "after_read_rss": after_read}))
        return
    del data
    import tb_plugin

    tb_plugin.load_snapshot  # noqa: B018  (imports outside the timing)
    from tb_plugin.python_api.snapshots import load_snapshot

    base = vm_hwm()
    start = time.perf_counter()
    snap = load_snapshot(path, max_memory_bytes=64 << 30)
    load_seconds = time.perf_counter() - start
    load_peak = vm_hwm()
    entries = len(snap.model.entries)
    start = time.perf_counter()
    whole = snap.timeline(0, bins=1600)
    first_paint = time.perf_counter() - start  # building the block maxima on the way
    t0, t1 = whole.totals["start_us"].iloc[0], snap.model.entries["time_us"].iloc[-1]
    rng = np.random.default_rng(seed)
    latencies = []
    for _ in range(queries):
        width = (t1 - t0) / 10 ** rng.uniform(0, 5)
        lo = rng.uniform(t0, t1 - width)
        start = time.perf_counter()
        snap.timeline(0, lo, lo + width, bins=1600)
        latencies.append(time.perf_counter() - start)
    del snap, whole
    fresh = load_snapshot(path, max_memory_bytes=64 << 30)
    start = time.perf_counter()
    fresh.index()  # what the server does on its index thread right after a load
    index_seconds = time.perf_counter() - start
    start = time.perf_counter()
    fresh.timeline(0, bins=1600)
    indexed_paint = time.perf_counter() - start
    del fresh
    print(json.dumps({"seconds": load_seconds, "peak_rss": load_peak, "rss_before_load": base,
                      "first_paint_seconds": first_paint, "index_seconds": index_seconds,
                      "indexed_paint_seconds": indexed_paint, "zoom_p50_ms": float(np.percentile(latencies, 50)) * 1000,
                      "zoom_p95_ms": float(np.percentile(latencies, 95)) * 1000, "entries": entries,
                      "child_peak_rss": vm_hwm()}))


def run_child(kind, path, args):
    out = subprocess.run([sys.executable, __file__, "--child", kind, path, "--entries", str(args.entries), "--queries", str(args.queries),
                          "--seed", str(args.seed)], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=5_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--snapshot", metavar="PATH",
                        help="measure this file, synthesising it first when it does not exist (kept between runs)")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child[0], args.child[1], args.entries, args.queries, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.snapshot or os.path.join(tmp, "synthetic.pickle")
        if os.path.exists(path):
            size = os.path.getsize(path)
            print(f"snapshot {path}: {size / 1e6:,.0f} MB")
        else:
            start = time.perf_counter()
            size = run_child("synthesise", path, args)["size"]  # in a child: the parent stays small
            print(f"synthetic snapshot: {args.entries:,} entries, {size / 1e6:,.0f} MB ({time.perf_counter() - start:.0f} s to write)")
        baseline = run_child("pickle", path, args)
        ours = run_child("load", path, args)
    print(f"pickle.loads (GC off): {baseline['seconds']:.2f} s")
    print(f"load_snapshot:         {ours['seconds']:.2f} s = {ours['seconds'] / baseline['seconds']:.2f}x (target 1.5x)")
    print(f"load peak RSS:         {ours['peak_rss'] / 1e6:,.0f} MB = {ours['peak_rss'] / size:.2f}x the file (target 3x); "
          f"pickle.loads' own: {baseline['peak_rss'] / 1e6:,.0f} MB = {baseline['peak_rss'] / size:.2f}x")
    print(f"first paint:           {ours['first_paint_seconds'] * 1000:.0f} ms right after load (target 1 s); "
          f"{ours['indexed_paint_seconds'] * 1000:.0f} ms once the server's index is built ({ours['index_seconds']:.2f} s after load)")
    print(f"zoom:                  p50 {ours['zoom_p50_ms']:.1f} ms, p95 {ours['zoom_p95_ms']:.1f} ms (target 50 ms)")


if __name__ == "__main__":
    main()
