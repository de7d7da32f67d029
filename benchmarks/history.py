"""Benchmark figures kept run after run, so that a slowdown is seen when it happens.

Each benchmark run writes its figures as one JSON file under ``benchmarks/results/<bench>/``
(``<UTC time>-<commit>.json``), next to the files of earlier runs, and compares them with the
latest earlier file of the same benchmark: every figure that grew by more than
`SLOWER_THRESHOLD` is printed. Figures are "lower is better" numbers keyed by a readable name
(``"v100_ddp_nccl_memory/rank1: load / orjson"``). The comparison is made on what the
benchmark chose to record; `bench.py` and `peers_bench.py` record times *relative to
`orjson.loads` measured in the same run* beside the seconds, because on a shared machine the
seconds move with the load while the ratios mostly do not (benchmarks/README.md).
"""

import json
import subprocess
import time
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# A figure counts as a regression when it grew by more than this fraction.
SLOWER_THRESHOLD = 0.20


def _commit():
    try:
        return subprocess.run(["git", "-C", str(RESULTS_DIR.parent), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "nocommit"


def slower(previous, current, threshold=SLOWER_THRESHOLD):
    """The figures of `current` that grew by more than `threshold` over `previous`, as
    (name, previous value, current value, growth), largest growth first. Figures present on
    one side only, or not positive before, are not compared."""
    out = []
    for name, now in current.items():
        before = previous.get(name)
        if not isinstance(before, (int, float)) or not isinstance(now, (int, float)) or before <= 0:
            continue
        growth = now / before - 1.0
        if growth > threshold:
            out.append((name, float(before), float(now), growth))
    return sorted(out, key=lambda row: -row[3])


def record(bench, figures, directory=RESULTS_DIR, context=None):
    """Write `figures` (name -> lower-is-better number) as this run's file of benchmark
    `bench` and return (path written, previous file or None, `slower` rows against it)."""
    folder = Path(directory) / bench
    folder.mkdir(parents=True, exist_ok=True)
    earlier = sorted(folder.glob("*.json"))
    previous = earlier[-1] if earlier else None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = folder / f"{stamp}-{_commit()}.json"
    path.write_text(json.dumps({"bench": bench, "time": stamp, "context": context or {},
                                "figures": figures}, indent=1, sort_keys=True) + "\n")
    if previous is None:
        return path, None, []
    return path, previous, slower(json.loads(previous.read_text())["figures"], figures)


def report(path, previous, rows):
    """The lines a benchmark prints after recording its figures."""
    lines = [f"figures written to {path}"]
    if previous is None:
        lines.append("no earlier run of this benchmark to compare with")
    elif not rows:
        lines.append(f"nothing got slower by more than {SLOWER_THRESHOLD:.0%} since {previous.name}")
    else:
        lines.append(f"slower by more than {SLOWER_THRESHOLD:.0%} since {previous.name}:")
        lines += [f"  {name}: {before:.4g} -> {now:.4g} (+{growth:.0%})" for name, before, now, growth in rows]
    return "\n".join(lines)
