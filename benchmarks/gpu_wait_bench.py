#!/usr/bin/env python3
"""Time the GPU-wait analyses (issue 17) against `orjson.loads` of the same JSON.

Targets (benchmarks/README.md): every GPU-wait analysis together on the 227 MB synthetic
trace (bench.py's, cached) in at most 1.0x `orjson.loads` time on top of the load, and each
panel's first answer under 1 s on the 35 MB ResNet-50 trace. Each analysis is timed on its
first call after the load (cold: nothing cached on the model yet but what the load built).

Usage::

    PYTHONPATH=. python benchmarks/gpu_wait_bench.py resnet      # 35 MB shared trace
    PYTHONPATH=. python benchmarks/gpu_wait_bench.py synthetic   # bench.py's 227 MB trace
"""

import gc
import gzip
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (the synthetic trace and the shared traces' location)

import tb_plugin  # noqa: E402
from tb_plugin.views import critical_path, gpu_annotations, gpu_idle, launches, queues, recommendations, sequences  # noqa: E402
from tb_plugin.views.common import step_windows  # noqa: E402

RESNET = bench.DEFAULT_TRACES_DIR / "resnet50_v100_2021" / "worker0.1623143089861.pt.trace.json.gz"


def analyses(model):
    """(name, callable) of every GPU-wait analysis, in the order the page asks for them."""
    every_step = step_windows(model)["step"].tolist()
    return [
        ("idle_time", lambda: gpu_idle.idle_time(model)),
        ("idle_time by step", lambda: gpu_idle.idle_time(model, by_step=True)),
        ("kernel_launches", lambda: launches.kernel_launches(model)),
        ("kernel_launch_summary", lambda: launches.kernel_launch_summary(model)),
        ("queue_length", lambda: queues.queue_length(model)),
        ("memory_bandwidth", lambda: queues.memory_bandwidth(model)),
        ("queue_length_summary", lambda: queues.queue_length_summary(model)),
        ("kernel_sequences(3)", lambda: sequences.kernel_sequences(model, 3)),
        ("gpu_annotations", lambda: gpu_annotations.gpu_annotations(model)),
        ("critical_path, every step, 3 tables", lambda: [
            (critical_path.critical_path(model, s), critical_path.critical_path_categories(model, s),
             critical_path.critical_path_operators(model, s)) for s in every_step]),
        ("GPU-wait recommendations", lambda: recommendations._gpu_waits(model)),
    ]


def main(which):
    if which == "synthetic":
        path = bench.synthetic_trace(bench.DEFAULT_SYNTH_SOURCE, 220, bench.DEFAULT_CACHE_DIR)
    else:
        path = Path(tempfile.gettempdir()) / "gpu_wait_bench_resnet50.json"
        if not path.exists():
            path.write_bytes(gzip.decompress(RESNET.read_bytes()))
    data = path.read_bytes()
    times = []
    for _ in range(2):
        started = time.perf_counter()
        orjson.loads(data)
        times.append(time.perf_counter() - started)
    orjson_s = min(times)
    del data
    gc.collect()
    started = time.perf_counter()
    profile = tb_plugin.load(str(path))
    load_s = time.perf_counter() - started
    results = []
    for name, run in analyses(profile.model):
        started = time.perf_counter()
        run()
        results.append((name, time.perf_counter() - started))
    total = sum(t for _, t in results)
    print(f"{which}: {path.stat().st_size / 2**20:.0f} MiB, orjson.loads {orjson_s:.2f} s, load {load_s:.2f} s, "
          f"GPU-wait analyses {total:.2f} s = {total / orjson_s:.2f}x orjson.loads")
    for name, seconds in results:
        print(f"  {name}: {seconds * 1000:.0f} ms")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "resnet")
