"""Memory a load needs per event and per JSON byte: the figures behind the loader's
pre-parse estimate (`tb_plugin.store.budget.estimate_parse_bytes`).

For each trace, one fresh child process: imports and a tiny warm-up load first, then RSS is
read, the trace loaded, and the peak (`VmHWM`) and the model's table bytes reported against
the number of events and the JSON size. Traces of large events (the shared real traces) and
a synthetic one of many tiny events bound the two coefficients.

    PYTHONPATH=. python benchmarks/memory_per_event.py [TRACE ...] [--tiny-events 1000000]
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent.parent / "shared" / "traces"
if not SHARED.is_dir():
    SHARED = ROOT.parent / "shared" / "traces"


def _status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) << 10
    return 0


def tiny_events_trace(count, path):
    """A trace of `count` one-microsecond operators with no args: the most events per byte a
    Kineto-like trace has (~70 bytes per event)."""
    with open(path, "w") as fh:
        fh.write('{"schemaVersion": 1, "traceEvents": [\n')
        fh.write(",\n".join(f'{{"ph": "X", "cat": "cpu_op", "name": "op{i % 97}", "pid": 1, "tid": {i % 4}, '
                            f'"ts": {i * 2}, "dur": 1}}' for i in range(count)))
        fh.write("\n]}\n")
    return path


def child(path):
    import msgspec

    import tb_plugin
    from tb_plugin.server.plugin import warm_up

    warm_up()
    before = _status("VmRSS")
    profile = tb_plugin.load(path)
    peak = _status("VmHWM")
    model_bytes = profile.model.nbytes()
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    events = len(msgspec.json.decode(raw, type=dict)["traceEvents"])
    print(json.dumps({"path": str(path), "json_bytes": len(raw), "events": events,
                      "peak_rise": peak - before, "model_bytes": model_bytes}))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--tiny-events", type=int, default=1_000_000, help="events of the synthetic trace (0: none)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)
    traces = args.traces or sorted(p for p in SHARED.glob("*/*.json.gz") if "reference" not in str(p))
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny_events:
            traces.append(tiny_events_trace(args.tiny_events, Path(tmp) / "tiny.pt.trace.json"))
        print(f"{'trace':48} {'JSON MB':>8} {'events':>9} {'B/event':>8} {'peak B/ev':>9} {'model B/ev':>10} {'peak/JSON':>9}")
        for path in traces:
            out = subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
            if out.returncode:
                print(path, "failed:", out.stderr[-500:])
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            n = max(r["events"], 1)
            print(f"{str(path)[-48:]:48} {r['json_bytes'] / 2**20:8.1f} {r['events']:9d} {r['json_bytes'] / n:8.0f} "
                  f"{r['peak_rise'] / n:9.0f} {r['model_bytes'] / n:10.0f} {r['peak_rise'] / r['json_bytes']:9.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
