#!/usr/bin/env python3
"""Time the diff of two large traces (issue 28) against the load of one.

Target (benchmarks/README.md): `tb_plugin.diff(a, b)` of two 227 MB synthetic traces (bench.py's,
cached) answers in under 2x the time `tb_plugin.load` takes for one of them. A and B are two
separate loads (nothing computed on one model is reused for the other); B is the same trace
read again, so both sides are as large as each other and every table is as long as it gets.
The end-to-end time of `python -m tb_plugin compare` is the two loads plus the diff.

Usage::

    PYTHONPATH=. python benchmarks/diff_bench.py                  # 220 MB from the shared V100 trace
    PYTHONPATH=. python benchmarks/diff_bench.py --synth-mb 30 --source samples/gpu_a100_nccl/rank0.pt.trace.json.gz
"""

import argparse
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (the synthetic trace and the shared traces' location)

import tb_plugin  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--synth-mb", type=float, default=220, help="size of the synthetic trace (default 220 MB)")
    parser.add_argument("--source", type=Path, default=bench.DEFAULT_SYNTH_SOURCE, help="trace the synthetic one repeats")
    parser.add_argument("--cache-dir", type=Path, default=bench.DEFAULT_CACHE_DIR)
    args = parser.parse_args(argv)
    path = bench.synthetic_trace(args.source, args.synth_mb, args.cache_dir)
    size_mb = path.stat().st_size / bench.MB
    print(f"trace: {path} ({size_mb:.1f} MB); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    gc.collect()
    started = time.perf_counter()
    a = tb_plugin.load(path)
    load_a = time.perf_counter() - started
    started = time.perf_counter()
    b = tb_plugin.load(path)
    load_b = time.perf_counter() - started
    started = time.perf_counter()
    view = tb_plugin.diff(a, b)
    diff_s = time.perf_counter() - started
    one_load = min(load_a, load_b)
    steps = int(view.explanation["steps_a"].iloc[0])
    print(f"load A {load_a:.2f} s, load B {load_b:.2f} s; diff {diff_s:.2f} s = {diff_s / one_load:.2f}x one load "
          f"(target < 2x); {steps} steps, {len(view.tree)} tree nodes, {len(view.kernels)} kernel names")
    print(f"end to end (both loads + diff): {load_a + load_b + diff_s:.2f} s = "
          f"{(load_a + load_b + diff_s) / one_load:.2f}x one load")
    return 0 if diff_s < 2 * one_load else 1


if __name__ == "__main__":
    sys.exit(main())
