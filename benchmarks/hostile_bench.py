#!/usr/bin/env python3
"""How long hostile inputs take to be refused or read: the times the tests no longer assert.

The tests bound these inputs by work and memory (`tests/test_snapshot_bounds.py` counts the
Python calls a load makes, `tests/test_cli_hardened.py` reads the child's VmHWM), not by
elapsed time, which moves with the machine's load. This script times the same inputs:

- a memory snapshot naming 40,000 devices with an entry each (refused: more than 256 devices);
- 40,000 devices of which only the last has entries (read: empty devices cost nothing);
- 256 devices of one entry each, loaded, indexed and asked for its peaks;
- a 5 MB gzip that inflates to 5 GiB of JSON whitespace, given to `info --max-memory-mb 512`.

    PYTHONPATH=. python benchmarks/hostile_bench.py [--repeat 3]

Each case is timed `--repeat` times in this process (the bomb in a child, as a user runs the
CLI); the best and the median are printed in milliseconds.
"""

import argparse
import gzip
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tb_plugin

MB = 1 << 20


def _entry(addr, time_us=1_000, action="alloc"):
    return {"action": action, "addr": addr, "size": 512, "stream": 0, "time_us": time_us, "frames": []}


def _snapshot_cases(folder):
    empty_but_last = [[] for _ in range(40_000)]
    empty_but_last[-1] = [_entry(1 << 40), _entry(1 << 40, 2_000, "free_completed")]
    cases = {
        "40,000 devices, refused": [[_entry((1 << 40) + i)] for i in range(40_000)],
        "40,000 devices, one with entries": empty_but_last,
        "256 devices of one entry, load + index + peak": [[_entry((1 << 40) + i)] for i in range(256)],
    }
    for name, traces in cases.items():
        path = folder / f"{len(traces)}-{sum(map(len, traces))}.pickle"
        path.write_bytes(pickle.dumps({"segments": [], "device_traces": traces}))

        def case(path=path):
            try:
                snap = tb_plugin.load_snapshot(path, max_memory_bytes=512 * MB)
            except tb_plugin.TraceError:
                return
            snap.index()
            snap.peak()
        yield name, case


def _bomb_case(folder):
    member = 64 * MB
    path = folder / "bomb.pt.trace.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * member, compresslevel=9)
                     + gzip.compress(b" " * member, compresslevel=9) * 79)

    def case():
        done = subprocess.run([sys.executable, "-m", "tb_plugin", "info", str(path), "--max-memory-mb", "512"],
                              capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
    return "gzip bomb (5 MB -> 5 GiB), `info` refuses it", case


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases = [*_snapshot_cases(folder), _bomb_case(folder)]
        print("| input | best ms | median ms |\n|---|---|---|")
        for name, case in cases:
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                case()
                times.append((time.perf_counter() - start) * 1000)
            print(f"| {name} | {min(times):,.0f} | {statistics.median(times):,.0f} |")


if __name__ == "__main__":
    main()
