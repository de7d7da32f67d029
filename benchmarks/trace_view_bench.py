#!/usr/bin/env python3
"""Benchmark the trace view in real Chromium on a large trace: first paint, zoom/pan latency
and the page's memory.

Why: issue 5's targets are about what a user sees once a run is loaded: the trace view
paints its first slices in under 2 s, every zoom/pan is answered by the server in under
150 ms at the 95th percentile at any zoom level, and the page holds under 300 MB. The old
viewer shipped the whole trace JSON into the page; ours asks the server for what it draws.

What it does:

1. Puts the trace in a fresh temporary log directory (a hard link when it can, else a copy):
   by default a synthetic trace of ``--synth-mb`` MB (1024) built by ``bench.py``'s
   synthesiser from the 54 MB V100 DDP trace (cached in ``--cache-dir``), or ``--trace FILE``.
2. Starts the real ``tensorboard`` (beside this interpreter) on it, with
   ``--profiler_cache_dir`` in a temporary directory (so the trace is really parsed) and
   ``--profiler_max_memory_mb`` large enough for it; waits until ``/info`` answers 200 (the
   run is parsed) and then until ``/timeline_tracks`` answers 200 (the timeline index is
   built), timing both.
3. Opens the page in Debian's Chromium (``/usr/bin/chromium``, headless, via Playwright) on
   the Overview tab, clicks the Trace tab and times click -> first paint of slices (the page
   sets the performance mark ``trace-first-paint`` and ``data-first-paint-ms`` when it first
   drew slices). Also reported: the ``trace-view-open`` -> ``trace-first-paint`` measure.
4. Replays a scripted session of ``--steps`` zoom/pan steps (W/S/A/D keys, wheel zooms at
   seeded random positions, drags, jump to a step, whole trace), waiting after each for the
   page's ready signal (``body[data-ready]``), never on sleeps.
5. Reads every ``timeline_slices`` request from the browser's Resource Timing: server time =
   ``responseStart - requestStart`` (time to first byte on loopback: the server's work plus
   a fraction of a millisecond), and the whole request (``responseEnd - startTime``); p50,
   p95 and max. The session's steps are also timed from the action to the page being ready.
6. Memory: CDP ``Performance.getMetrics`` ``JSHeapUsedSize`` (and ``JSHeapTotalSize``)
   sampled after every step (the maximum is reported), and the resident memory of the
   page's renderer process (``VmRSS`` of Chromium's ``--type=renderer`` processes started
   by this script, the largest one), read from ``/proc``.

Everything started (tensorboard, Chromium) is stopped by pid at the end.

Usage::

    PYTHONPATH=. python benchmarks/trace_view_bench.py                     # 1024 MB synthetic
    PYTHONPATH=. python benchmarks/trace_view_bench.py --synth-mb 220
    PYTHONPATH=. python benchmarks/trace_view_bench.py \\
        --trace ../shared/traces/v100_ddp_nccl_memory/rank1.pt.trace.json.gz
"""

import argparse
import contextlib
import datetime
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (the synthesiser and its defaults)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests/ helpers
from tests.helpers import free_port, stop_by_pid  # noqa: E402  (one copy, shared with the tests)

PLUGIN = "/data/plugin/pytorch_profiler"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
READY = "body[data-ready='true']"
BOX = "[data-testid=trace-timeline]"
GUTTER_PX = 230  # frontend/src/views/trace/draw.ts
TARGET_FIRST_PAINT_S = 2.0
TARGET_P95_MS = 150.0
TARGET_PAGE_MB = 300.0


def log(message):
    print(message, file=sys.stderr, flush=True)


def get(base, route, timeout=600, **params):
    """(status, JSON body) of a plugin route."""
    url = f"{base}{PLUGIN}/{route}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@contextlib.contextmanager
def serve(executable, logdir, log_path, extra_args=(), env=None):
    """A `tensorboard` executable on 127.0.0.1 at a free port; yields (base URL, process) and
    stops it by pid (SIGTERM, then SIGKILL)."""
    port = free_port()
    args = [str(executable), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port), *extra_args]
    out = open(log_path, "wb")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"} if env is None else env
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    log(f"{executable} pid {proc.pid} on port {port} (log {log_path})")
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop_by_pid(proc, 30)
        out.close()


def tensorboard(logdir, cache_dir, memory_mb, log_path):
    """Our plugin's tensorboard (the one beside this Python)."""
    return serve(Path(sys.executable).with_name("tensorboard"), logdir, log_path,
                 ["--profiler_cache_dir", str(cache_dir), "--profiler_max_memory_mb", str(memory_mb)])


def wait_loaded(base, proc, timeout_s):
    """Poll until the run is listed, parsed (/info 200) and its timeline index built
    (/timeline_tracks 200); returns (query, seconds to parse, seconds to build the index)."""
    deadline = time.monotonic() + timeout_s
    started = time.monotonic()
    while True:
        assert proc.poll() is None, "tensorboard exited"
        assert time.monotonic() < deadline, "the run did not load in time"
        try:
            status, body = get(base, "runs", timeout=10)
            if status == 200 and body["runs"]:
                run = body["runs"][0]
                break
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.5)
    q = {"run": run["name"], "worker": run["workers"][0], "span": 1}
    log(f"run {q['run']!r} worker {q['worker']!r} found; parsing ...")
    while True:
        status, body = get(base, "info", **q)
        if status == 200:
            break
        assert status == 202, body
        assert proc.poll() is None and time.monotonic() < deadline, "the run did not load in time"
        time.sleep(1.0)
    parsed_s = time.monotonic() - started
    log(f"parsed in {parsed_s:.1f} s; building the timeline index ...")
    began = time.monotonic()
    while True:
        status, body = get(base, "timeline_tracks", **q)
        if status == 200:
            break
        assert status == 202, body
        time.sleep(0.5)
    index_s = time.monotonic() - began
    log(f"timeline index in {index_s:.1f} s: {len(body['tracks']['rows'])} tracks, {len(body['steps']['rows'])} steps")
    return q, parsed_s, index_s, body


def descendants(pid):
    """Pids of every process below `pid` (from /proc)."""
    children = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def renderer_rss_mb():
    """Largest VmRSS among the Chromium renderer processes started by this script."""
    best = 0.0
    for pid in descendants(os.getpid()):
        try:
            if b"--type=renderer" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    best = max(best, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return best


def measured_page(context, step_timeout_s):
    """A new page of a Playwright `context`, set up for measuring: (page, errors, heap, cdp)
    where `errors` collects the page's uncaught errors, `heap()` reads (JS heap used, total)
    in MB, and `cdp` is the page's DevTools protocol session."""
    page = context.new_page()
    page.set_default_timeout(step_timeout_s * 1000)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")

    def heap():
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        return metrics["JSHeapUsedSize"] / 2**20, metrics["JSHeapTotalSize"] / 2**20

    return page, errors, heap, cdp


def json_size(path):
    """Bytes of JSON in a trace file (the gzip trailer's size field for .gz files < 4 GiB)."""
    if path.suffix != ".gz":
        return path.stat().st_size
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def session(steps, n_steps, seed):
    """A seeded list of (label, action name, argument) zoom/pan steps."""
    rng = random.Random(seed)
    script = [("jump to a step", "step", len(steps) // 2 if steps else 0)]
    script += [("W", "key", "w")] * 8 + [("D", "key", "d")] * 4 + [("A", "key", "a")] * 3
    script += [("wheel in", "wheel", (rng.uniform(0.1, 0.9), -300)) for _ in range(8)]
    script += [("drag", "drag", rng.choice([-250, 250])) for _ in range(3)]
    script += [("S", "key", "s")] * 6 + [("whole trace", "reset", None)]
    script += [("wheel in", "wheel", (rng.uniform(0.05, 0.95), -400)) for _ in range(8)]
    script += [("D", "key", "d")] * 5 + [("S", "key", "s")] * 5
    while len(script) < n_steps:
        script.append(rng.choice([("W", "key", "w"), ("S", "key", "s"), ("A", "key", "a"), ("D", "key", "d"),
                                  ("wheel in", "wheel", (rng.uniform(0.1, 0.9), -200))]))
    return script[:n_steps]


def run_browser(base, q, tracks_reply, args):
    from playwright.sync_api import sync_playwright

    results = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": args.width, "height": args.height})
            page, errors, heap, _ = measured_page(context, args.step_timeout)
            page.goto(f"{base}{PLUGIN}/index.html?{urllib.parse.urlencode({**q, 'view': 'overview'})}")
            page.wait_for_selector(READY, state="attached", timeout=args.step_timeout * 1000 * 10)
            page.evaluate("() => performance.setResourceTimingBufferSize(100000)")
            results["renderer_rss_mb_before"] = renderer_rss_mb()  # the page on its Overview tab
            clicked = page.evaluate("() => performance.now()")
            page.click("[role=tab][data-view=trace]")
            page.wait_for_selector(f"{BOX}[data-first-paint-ms]", state="attached")
            painted = float(page.get_attribute(BOX, "data-first-paint-ms"))
            page.wait_for_selector(READY, state="attached")
            measure = page.evaluate("""() => { performance.measure('open-to-paint', 'trace-view-open', 'trace-first-paint');
                return performance.getEntriesByName('open-to-paint').pop().duration; }""")
            results["first_paint_s"] = (painted - clicked) / 1000
            results["open_to_paint_s"] = measure / 1000
            used, total = heap()
            samples = [(used, total)]
            rss = [renderer_rss_mb()]
            log(f"first paint {results['first_paint_s']:.2f} s after the click; heap {used:.0f} MB")
            if args.screenshot:
                page.screenshot(path=str(args.screenshot).replace(".png", "_first.png"))

            box = page.locator(".trace-canvas").bounding_box()
            plot = box["width"] - GUTTER_PX
            steps = [r for r in tracks_reply["steps"]["rows"]]
            timings = []
            for label, kind, arg in session(steps, args.steps, args.seed):
                seq = page.evaluate("() => document.body.dataset.readySeq || '0'")
                began = time.perf_counter()
                if kind == "key":
                    page.keyboard.press(arg)
                elif kind == "wheel":
                    page.mouse.move(box["x"] + GUTTER_PX + arg[0] * plot, box["y"] + box["height"] - 20)
                    page.mouse.wheel(0, arg[1])
                elif kind == "drag":
                    y = box["y"] + box["height"] - 20
                    x = box["x"] + GUTTER_PX + plot / 2
                    page.mouse.move(x, y)
                    page.mouse.down()
                    page.mouse.move(x + arg, y, steps=6)
                    page.mouse.up()
                elif kind == "step":
                    if steps:
                        page.select_option("[data-control=trace-step]", str(steps[arg][0]))
                elif kind == "reset":
                    page.click("[data-control=trace-reset]")
                page.wait_for_selector(f"body[data-ready='true']:not([data-ready-seq='{seq}'])", state="attached")
                elapsed = time.perf_counter() - began
                start, end = float(page.get_attribute(BOX, "data-start-us")), float(page.get_attribute(BOX, "data-end-us"))
                timings.append({"step": label, "ready_ms": elapsed * 1000, "width_us": end - start})
                samples.append(heap())
                rss.append(renderer_rss_mb())
            if args.screenshot:
                page.screenshot(path=str(args.screenshot))
            entries = page.evaluate("""() => performance.getEntriesByType('resource')
                .filter((e) => e.name.includes('/timeline_slices?') && e.responseEnd > 0)
                .map((e) => ({server: e.responseStart - e.requestStart, total: e.responseEnd - e.startTime,
                              bytes: e.decodedBodySize, url: e.name}))""")
            counters = page.evaluate("""() => performance.getEntriesByType('resource')
                .filter((e) => e.name.includes('/timeline_counters?') && e.responseEnd > 0)
                .map((e) => e.responseStart - e.requestStart)""")
            results["errors"] = errors
            results["requests"] = entries
            results["counter_server_ms"] = counters
            results["steps"] = timings
            results["heap_used_mb_max"] = max(s[0] for s in samples)
            results["heap_total_mb_max"] = max(s[1] for s in samples)
            results["heap_used_mb_end"] = samples[-1][0]
            results["renderer_rss_mb_max"] = max(rss)
            context.close()
        finally:
            browser.close()
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, help="a trace file (default: synthesise one)")
    parser.add_argument("--synth-mb", type=float, default=1024, help="size of the synthetic trace (default 1024)")
    parser.add_argument("--cache-dir", type=Path, default=bench.DEFAULT_CACHE_DIR, help="where synthetic traces are cached")
    parser.add_argument("--steps", type=int, default=50, help="zoom/pan steps in the session (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=1000)
    parser.add_argument("--server-memory-mb", type=int, default=16000, help="--profiler_max_memory_mb for tensorboard")
    parser.add_argument("--load-timeout", type=float, default=1800, help="seconds to wait for parse + index")
    parser.add_argument("--step-timeout", type=float, default=60, help="seconds to wait for one step")
    parser.add_argument("--screenshot", type=Path, help="save the page after the first paint (_first) and the session")
    parser.add_argument("--json-out", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)

    source = args.trace or bench.synthetic_trace(bench.DEFAULT_SYNTH_SOURCE, args.synth_mb, args.cache_dir)
    size_mb = json_size(source) / 1e6
    work = Path(tempfile.mkdtemp(prefix="trace_view_bench_"))
    try:
        run_dir = work / "logdir" / "bench"
        run_dir.mkdir(parents=True)
        target = run_dir / source.name
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
        (work / "cache").mkdir()
        with tensorboard(work / "logdir", work / "cache", args.server_memory_mb, work / "tensorboard.log") as (base, proc):
            q, parsed_s, index_s, tracks_reply = wait_loaded(base, proc, args.load_timeout)
            results = run_browser(base, q, tracks_reply, args)
            server_rss = 0.0
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    server_rss = int(line.split()[1]) / 1024
    finally:
        shutil.rmtree(work, ignore_errors=True)

    reqs = results["requests"]
    server = [r["server"] for r in reqs]
    total = [r["total"] for r in reqs]
    kb = [r["bytes"] / 1024 for r in reqs]
    ready = [s["ready_ms"] for s in results["steps"]]
    summary = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}",
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "trace": str(source), "json_mb": round(size_mb, 1),
        "tracks": len(tracks_reply["tracks"]["rows"]), "trace_steps": len(tracks_reply["steps"]["rows"]),
        "parse_s": round(parsed_s, 1), "index_s": round(index_s, 1), "server_peak_rss_mb": round(server_rss),
        "first_paint_s": round(results["first_paint_s"], 3), "open_to_paint_s": round(results["open_to_paint_s"], 3),
        "slices_requests": len(reqs),
        "server_ms": {"p50": percentile(server, 50), "p95": percentile(server, 95), "max": max(server, default=float("nan"))},
        "request_ms": {"p50": percentile(total, 50), "p95": percentile(total, 95), "max": max(total, default=float("nan"))},
        "counters_server_ms": {"p50": percentile(results["counter_server_ms"], 50), "p95": percentile(results["counter_server_ms"], 95)},
        "reply_kb": {"p50": percentile(kb, 50), "max": max(kb, default=float("nan"))},
        "step_to_ready_ms": {"p50": percentile(ready, 50), "p95": percentile(ready, 95), "max": max(ready, default=float("nan"))},
        "narrowest_window_us": min(s["width_us"] for s in results["steps"]),
        "heap_used_mb_max": round(results["heap_used_mb_max"], 1), "heap_total_mb_max": round(results["heap_total_mb_max"], 1),
        "renderer_rss_mb_max": round(results["renderer_rss_mb_max"], 1),
        "renderer_rss_mb_overview": round(results["renderer_rss_mb_before"], 1),
        "page_errors": results["errors"],
    }
    met = {
        "first paint < 2 s": summary["first_paint_s"] < TARGET_FIRST_PAINT_S,
        "server p95 < 150 ms": summary["server_ms"]["p95"] < TARGET_P95_MS,
        "page JS heap < 300 MB": summary["heap_used_mb_max"] < TARGET_PAGE_MB,
        "renderer RSS < 300 MB": summary["renderer_rss_mb_max"] < TARGET_PAGE_MB,
    }
    summary["targets"] = met
    if args.json_out:
        args.json_out.write_text(json.dumps({**summary, "raw": results}, indent=1))
    print(json.dumps(summary, indent=1))
    print()
    print("| trace | JSON MB | parse s | index s | first paint s | slices requests | server p50 ms | server p95 ms | "
          "server max ms | request p95 ms | reply KB p50/max | JS heap MB (max) | renderer RSS MB (max) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {source.name} | {size_mb:.0f} | {parsed_s:.1f} | {index_s:.1f} | {summary['first_paint_s']:.2f} | "
          f"{len(reqs)} | {summary['server_ms']['p50']:.0f} | {summary['server_ms']['p95']:.0f} | "
          f"{summary['server_ms']['max']:.0f} | {summary['request_ms']['p95']:.0f} | "
          f"{summary['reply_kb']['p50']:.0f}/{summary['reply_kb']['max']:.0f} | {summary['heap_used_mb_max']:.1f} | "
          f"{summary['renderer_rss_mb_max']:.0f} |")
    for name, ok in met.items():
        print(f"- {name}: {'met' if ok else 'NOT MET'}")
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
