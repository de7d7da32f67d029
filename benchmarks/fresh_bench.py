"""A fresh process's `python -c "import tb_plugin; tb_plugin.load(F).overview()"`, imports
included, against `orjson.loads` of the same JSON (issue 30: at most 2x).

Every figure is the wall time of a fresh child process, from its launch to its exit, the
children interleaved round after round (a busy moment hits all of them), best of
`--rounds`:

- "ours": the command above on the inflated trace `F`;
- "imports": `python -c "import tb_plugin.python_api.profile"`, what ours imports before it reads a byte;
- "orjson": `python -c "import orjson; orjson.loads(open(F, 'rb').read())"`.

`orjson.loads` of the same bytes is also timed in this process (best of the rounds), the
baseline the other benchmarks divide by; both ratios are recorded (history.py). With
`--against DIR` "ours" is also timed from another checkout (an earlier commit, unpacked with
`git archive`) in the same rounds: a before/after on a busy machine.

    PYTHONPATH=. python benchmarks/fresh_bench.py [TRACE] [--rounds 5] [--against DIR]
"""

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import history

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / "samples" / "gpu_resnet50_v100" / "worker0.1623143089861.pt.trace.json.gz"
COMMANDS = {
    "ours": "import tb_plugin; tb_plugin.load({path!r}).overview()",
    "imports": "import tb_plugin.python_api.profile",
    "orjson": "import orjson; orjson.loads(open({path!r}, 'rb').read())",
}


def wall_seconds(code, root=ROOT):
    started = time.perf_counter()
    # In the checkout's root: `-c` puts the working directory before PYTHONPATH on sys.path.
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    return time.perf_counter() - started


def main(argv):
    import orjson

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every child, best kept (default 5)")
    parser.add_argument("--against", type=Path, help="another checkout whose `ours` is timed in the same rounds")
    parser.add_argument("--no-record", action="store_true", help="do not write the figures (history.py)")
    args = parser.parse_args(argv)
    data = args.trace.read_bytes()
    json_bytes = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    with tempfile.NamedTemporaryFile(suffix=".pt.trace.json") as inflated:
        inflated.write(json_bytes)
        inflated.flush()
        times = {name: [] for name in (*COMMANDS, "orjson.loads", *(["ours, against"] if args.against else []))}
        for _ in range(args.rounds):
            for name, code in COMMANDS.items():
                times[name].append(wall_seconds(code.format(path=inflated.name)))
            if args.against:
                times["ours, against"].append(wall_seconds(COMMANDS["ours"].format(path=inflated.name), args.against))
            started = time.perf_counter()
            orjson.loads(json_bytes)
            times["orjson.loads"].append(time.perf_counter() - started)
    best = {name: min(values) for name, values in times.items()}
    print(f"trace: {args.trace.name} ({len(json_bytes) / 2**20:.1f} MB of JSON); best of {args.rounds}, seconds")
    for name, values in times.items():
        print(f"  {name:14} {best[name]:.3f}  ({', '.join(f'{v:.3f}' for v in values)})")
    ratios = {"ours / orjson process": best["ours"] / best["orjson"],
              "ours / orjson.loads": best["ours"] / best["orjson.loads"],
              "imports / orjson.loads": best["imports"] / best["orjson.loads"]}
    if args.against:
        ratios["ours, against / orjson.loads"] = best["ours, against"] / best["orjson.loads"]
    for name, ratio in ratios.items():
        print(f"  {name}: {ratio:.2f}")
    if not args.no_record:
        stem = args.trace.name.split(".")[0]
        figures = {f"{stem}: {name}": ratio for name, ratio in ratios.items() if "against" not in name}
        figures[f"{stem}: ours s"] = best["ours"]
        print(history.report(*history.record("fresh_bench", figures, context={"trace": str(args.trace)})))


if __name__ == "__main__":
    main(sys.argv[1:])
