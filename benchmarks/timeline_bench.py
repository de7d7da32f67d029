#!/usr/bin/env python3
"""Benchmark the trace view's server side on a large trace: load, index build, and the
latency of every zoom/pan query at every zoom level.

Why: issue 5's targets are that a 1 GB trace opens as fast as a small one: once the run is
loaded, each zoom/pan is answered by the server in under 150 ms at the 95th percentile, at
any zoom level. This script builds (and caches) a synthetic trace of `--synth-mb` MB by
replicating the steps of a real GPU trace (the same synthesiser as `bench.py`), loads it,
builds the timeline index, then replays a viewer session: `--queries` windows at random
positions with widths from the whole trace down to 100 µs, each at `--pixels` resolution,
for all tracks; each query is timed through the HTTP handler's work (query + JSON
serialisation). It prints wall times, peak RSS and latency percentiles per zoom level.

Usage::

    PYTHONPATH=. python benchmarks/timeline_bench.py                 # 1024 MB synthetic
    PYTHONPATH=. python benchmarks/timeline_bench.py --synth-mb 54 --queries 200
"""

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (the synthesiser and its defaults)

import tb_plugin  # noqa: E402
from tb_plugin.views.timeline import timeline_index  # noqa: E402


def percentiles(values):
    v = np.asarray(values) * 1000
    return {"p50_ms": float(np.percentile(v, 50)), "p95_ms": float(np.percentile(v, 95)),
            "max_ms": float(v.max()), "n": len(v)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", help="a trace file (default: synthesise one)")
    parser.add_argument("--synth-mb", type=float, default=1024)
    parser.add_argument("--cache-dir", type=Path, default=bench.DEFAULT_CACHE_DIR)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--pixels", type=int, default=1600, help="viewer width in pixels")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    path = Path(args.trace) if args.trace else bench.synthetic_trace(bench.DEFAULT_SYNTH_SOURCE, args.synth_mb, args.cache_dir)
    size_mb = path.stat().st_size / 2**20
    started = time.perf_counter()
    profile = tb_plugin.load(path)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    index = timeline_index(profile.model)
    index_s = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    start, end = profile.model.span_us()
    rng = np.random.default_rng(args.seed)
    levels = {}
    first = None
    for i in range(args.queries):
        width = (end - start) / 10 ** rng.uniform(0, np.log10(max((end - start) / 100.0, 10.0)))
        t0 = rng.uniform(start, max(start, end - width))
        if i == 0:  # the first paint: the whole trace
            t0, width = start, end - start
        began = time.perf_counter()
        body = orjson.dumps(index.query(t0, t0 + width, width / args.pixels))
        elapsed = time.perf_counter() - began
        first = first if first is not None else (elapsed, len(body))
        zoom = f"1e{int(np.floor(np.log10(width)))} us"
        levels.setdefault(zoom, []).append(elapsed)
    everything = [t for times in levels.values() for t in times]

    print(f"trace: {path} ({size_mb:.0f} MB JSON, {len(index.slices):,} slices, {len(index.tracks)} tracks, "
          f"{len(index.levels)} levels of detail)")
    print(f"load: {load_s:.1f} s   timeline index: {index_s:.2f} s   peak RSS: {peak_mb:.0f} MB")
    print(f"first paint query (whole trace): {first[0] * 1000:.1f} ms, {first[1] / 1024:.0f} KB of JSON")
    print(f"all {len(everything)} queries: " + ", ".join(f"{k} {v:.1f}" for k, v in percentiles(everything).items() if k != "n"))
    print("| window width | queries | p50 ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for zoom in sorted(levels, key=lambda z: -float(z.split()[0])):
        p = percentiles(levels[zoom])
        print(f"| {zoom} | {p['n']} | {p['p50_ms']:.1f} | {p['p95_ms']:.1f} | {p['max_ms']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
