"""What a user waits for: TensorBoard started on a log directory holding one trace, the
page opened, and the time from the click to the Overview of that run, against
`orjson.loads` of the same trace's JSON measured in the same run.

Each round starts a real `tensorboard --logdir <temp dir>` (the trace copied in as stored,
a fresh disk cache directory per round, so that nothing is served from an earlier round's
cache) and waits for the plugin's background work to be done by asking `/runs`: its
`warming_up` says when the warm-up (and whatever the server prepares before the first click)
is done. A server from before that field existed is waited for until its CPU time stays flat
for `IDLE_SECONDS` (its warm-up done). Then it makes the requests the page makes on
opening the run (`/views`, then `/overview`), asking again while the answer is 202 with
the page's delays (frontend/src/api/client.ts: 500 ms, x1.5 per ask, at most 3 s), and
times them from the first request to the Overview's last byte. `orjson.loads` of the
inflated trace is timed right after, best of `--orjson-repeat`, in this process.

    PYTHONPATH=. python benchmarks/click_bench.py [TRACE] [--rounds 3]
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests/ helpers
import history  # noqa: E402  (benchmarks/ is not a package)
from tests.helpers import free_port  # noqa: E402  (one copy, shared with the tests)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / "samples" / "gpu_resnet50_v100" / "worker0.1623143089861.pt.trace.json.gz"
TENSORBOARD = Path(sys.executable).with_name("tensorboard")
PLUGIN_URL = "http://127.0.0.1:{port}/data/plugin/pytorch_profiler/"
# The page's polling while a reply is 202 (frontend/src/api/client.ts).
FIRST_POLL_S, POLL_GROWTH, LAST_POLL_S = 0.5, 1.5, 3.0
# A server without the `warming_up` field counts as warmed up once its CPU time grew by less than
# `IDLE_CPU_S` over this long.
IDLE_SECONDS, IDLE_CPU_S = 1.5, 0.05
START_TIMEOUT_S = 180.0


def get(url):
    """(status, body) of one GET."""
    try:
        with urllib.request.urlopen(url, timeout=120) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def get_as_page(base, route, params):
    """The page's `fetchJson`: ask again while 202, with its delays; the 200 body."""
    url = base + route + "?" + urllib.parse.urlencode(params)
    delay = FIRST_POLL_S
    while True:
        status, body = get(url)
        if status == 200:
            return body
        if status != 202:
            raise RuntimeError(f"{route}: HTTP {status}: {body[:300]!r}")
        time.sleep(delay)
        delay = min(delay * POLL_GROWTH, LAST_POLL_S)


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_warm(base, proc):
    """The first run once the page would have opened (TensorBoard's plugins listing, on
    which the plugin's warm-up begins), `/runs` lists it and the server's background work is
    done."""
    deadline = time.monotonic() + START_TIMEOUT_S
    listing = base.split("/data/")[0] + "/data/plugins_listing"
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("tensorboard did not start")
        try:
            if get(listing)[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("tensorboard did not start, or its plugin did not list the run")
        try:
            status, body = get(base + "runs")
        except OSError:
            status = 0
        if status == 200:
            reply = json.loads(body)
            if reply["runs"] and not reply.get("warming_up", False):
                break
        time.sleep(0.1)
    if "warming_up" not in reply:  # an older server: wait until it is idle
        last = cpu_seconds(proc.pid)
        while True:
            time.sleep(IDLE_SECONDS)
            now = cpu_seconds(proc.pid)
            if now - last < IDLE_CPU_S:
                break
            last = now
    return reply["runs"][0]


def one_round(trace, json_bytes, orjson_repeat):
    import orjson

    with tempfile.TemporaryDirectory(prefix="tb_plugin_click_") as tmp:
        logdir, cache = Path(tmp) / "logs", Path(tmp) / "cache"
        (logdir / "run").mkdir(parents=True)
        shutil.copy(trace, logdir / "run" / trace.name)
        port = free_port()
        base = PLUGIN_URL.format(port=port)
        proc = subprocess.Popen([str(TENSORBOARD), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port),
                                 "--profiler_cache_dir", str(cache)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            started = time.perf_counter()
            run = wait_until_warm(base, proc)
            warm_s = time.perf_counter() - started
            params = {"run": run["name"], "worker": run["workers"][0], "span": 1}
            clicked = time.perf_counter()
            get_as_page(base, "views", params)
            get_as_page(base, "overview", params)
            click_s = time.perf_counter() - clicked
        finally:
            proc.terminate()
            proc.wait(30)
    orjson_s = min(_timed(orjson.loads, json_bytes) for _ in range(orjson_repeat))
    return {"warm_s": warm_s, "click_s": click_s, "orjson_s": orjson_s}


def _timed(fn, *args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--rounds", type=int, default=3, help="TensorBoard starts, one click each (default 3)")
    parser.add_argument("--orjson-repeat", type=int, default=3, help="orjson.loads timed per round, best kept")
    parser.add_argument("--no-record", action="store_true", help="do not write the figures (history.py)")
    args = parser.parse_args(argv)
    data = args.trace.read_bytes()
    json_bytes = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    print(f"trace: {args.trace.name} ({len(json_bytes) / 2**20:.1f} MB of JSON); seconds")
    rounds = []
    for i in range(args.rounds):
        result = one_round(args.trace, json_bytes, args.orjson_repeat)
        result["ratio"] = result["click_s"] / result["orjson_s"]
        rounds.append(result)
        print(f"round {i + 1}: warm {result['warm_s']:.2f} after launch; click to Overview {result['click_s']:.3f}; "
              f"orjson.loads {result['orjson_s']:.3f}; click / orjson {result['ratio']:.2f}")
    ratios = sorted(r["ratio"] for r in rounds)
    best = min(rounds, key=lambda r: r["ratio"])
    print(f"click / orjson: best {ratios[0]:.2f}, median {ratios[len(ratios) // 2]:.2f}")
    if not args.no_record:
        name = args.trace.name.split(".")[0]
        figures = {f"{name}: click to Overview / orjson (best)": ratios[0],
                   f"{name}: click to Overview / orjson (median)": ratios[len(ratios) // 2],
                   f"{name}: click to Overview s (best round)": best["click_s"]}
        print(history.report(*history.record("click_bench", figures, context={"trace": str(args.trace)})))


if __name__ == "__main__":
    main(sys.argv[1:])
