"""First load against later loads in a fresh process, with and without the plugin's
background warm-up, and what the warm-up costs TensorBoard's start.

Each measurement is a fresh child process (imports are once per process):

- "cold": `tb_plugin.load(trace)` N times, timing each: the first pays for importing numpy,
  pandas, polars, msgspec and the views and for their first-call costs;
- "warmed": the plugin is loaded as TensorBoard does (`ProfilerPluginLoader().load`), which
  starts the warm-up thread, and asked `is_active` (TensorBoard's first plugins listing, on
  which the warm-up begins); once it is done (a user opens a trace a few seconds after
  TensorBoard starts) the same N loads are timed;
- "tensorboard start": a real `tensorboard` on loopback, from launch to its first answer of
  `/data/plugins_listing`, with the warm-up and with it replaced by a no-op.

    PYTHONPATH=. python benchmarks/warm_up.py [TRACE] [--loads 4] [--starts 3]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests/ helpers
from tests.helpers import free_port  # noqa: E402  (one copy, shared with the tests)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / "samples" / "gpu_resnet50_v100" / "worker0.1623143089861.pt.trace.json.gz"
TENSORBOARD = Path(sys.executable).with_name("tensorboard")


def child(trace, loads, warmed):
    started = time.perf_counter()
    if warmed:
        import argparse as ap
        import threading

        from tensorboard.plugins import base_plugin

        from tb_plugin.server.plugin import ProfilerPluginLoader

        with tempfile.TemporaryDirectory() as logdir:
            context = base_plugin.TBContext(logdir=logdir, flags=ap.Namespace(
                reload_interval=3600, profiler_cache_dir="", profiler_max_memory_mb=4096))
            plugin_load_s = time.perf_counter() - started
            plugin = ProfilerPluginLoader().load(context)
            plugin_load_s = time.perf_counter() - started - plugin_load_s
            plugin.is_active()  # TensorBoard's first plugins listing: it serves
            for thread in threading.enumerate():
                if thread.name == "tb_plugin_warm_up":
                    thread.join()
        warm_up_s = time.perf_counter() - started
    import tb_plugin

    times = []
    for _ in range(loads):
        t0 = time.perf_counter()
        profile = tb_plugin.load(trace)
        profile.overview()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"times": times, **({"plugin_load_s": plugin_load_s, "warm_up_s": warm_up_s} if warmed else {})}))


_NO_WARM_UP = "import tb_plugin.server.plugin as p; p._warm_up_quietly = lambda plugin: None; "
_RUN_TENSORBOARD = "import sys; from tensorboard.main import run_main; sys.argv[0] = 'tensorboard'; run_main()"


def tensorboard_start_seconds(warm_up):
    """Seconds from launching `tensorboard --logdir samples` to its first plugins listing."""
    port = free_port()
    code = ("" if warm_up else _NO_WARM_UP) + _RUN_TENSORBOARD
    args = [sys.executable, "-c", code, "--logdir", str(ROOT / "samples"), "--host", "127.0.0.1",
            "--port", str(port), "--profiler_cache_dir", ""]
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugins_listing", timeout=5):
                    return time.perf_counter() - started
            except OSError:
                if proc.poll() is not None or time.perf_counter() - started > 120:
                    raise RuntimeError("tensorboard did not start") from None
                time.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(15)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--loads", type=int, default=4, help="loads timed per process (default 4)")
    parser.add_argument("--starts", type=int, default=3, help="tensorboard starts timed per mode (0: none)")
    parser.add_argument("--child", choices=("cold", "warmed"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.trace, args.loads, args.child == "warmed")
    print(f"trace: {args.trace} ({args.trace.stat().st_size / 2**20:.1f} MB stored); load + overview, seconds")
    for mode in ("cold", "warmed"):
        out = subprocess.run([sys.executable, __file__, str(args.trace), "--loads", str(args.loads), "--child", mode],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        times = result["times"]
        extra = (f"  (ProfilerPluginLoader().load returned in {result['plugin_load_s'] * 1000:.1f} ms; "
                 f"warm-up done {result['warm_up_s']:.2f} s after start)") if mode == "warmed" else ""
        print(f"{mode:7} first {times[0]:.3f}  later {', '.join(f'{t:.3f}' for t in times[1:])}{extra}")
    if args.starts:  # interleaved, so that a change in the machine's load hits both alike
        starts = {False: [], True: []}
        for _ in range(args.starts):
            for warm_up in (False, True):
                starts[warm_up].append(tensorboard_start_seconds(warm_up))
        for warm_up, times in starts.items():
            times.sort()
            print(f"tensorboard start to first listing, warm-up {'on ' if warm_up else 'off'}: "
                  f"median {times[len(times) // 2]:.2f} s ({', '.join(f'{s:.2f}' for s in times)})")

if __name__ == "__main__":
    main(sys.argv[1:])
