#!/usr/bin/env python3
"""Benchmark the Trace view's ranks mode: many ranks on one time axis, collapsed.

Why: issue 16 asks that the level-of-detail index work across ranks "so 128 ranks draw as
fast as one". A collapsed rank is drawn from a small per-rank summary, so once the ranks'
summaries exist, the whole-axis answer for 128 collapsed ranks should cost about what one
rank's own whole-trace answer costs. This script writes a job of `--ranks` copies of a real
trace (`tests/job_traces.py`, each rank on its own clock), serves it with the plugin in
TensorBoard's WSGI app (in-process, no disk cache), and measures:

- the time from the first `timeline_ranks` request to its 200 (every rank parsed once for
  its two summaries; 202s meanwhile), and the process' peak RSS;
- the first paint's request, `timeline_rank_slices` over the whole axis at `--pixels`
  resolution for all ranks collapsed (median of `--repeat`, the reply cache bypassed by a
  distinct query each time), with its reply size and rows;
- the same for one rank drawn alone (`timeline_slices` of rank 0, the one-trace Trace view);
- one rank expanded among the collapsed ones;
- with `--browser`, the page in headless Chromium (Debian's, `/usr/bin/chromium`): the Trace
  view's first paint (`data-first-paint-ms`, from navigation start) with all ranks collapsed,
  and with rank 0's trace alone, the server warm (every summary built) in both.

Usage::

    PYTHONPATH=. python benchmarks/rank_timeline_bench.py            # 128 ranks
    PYTHONPATH=. python benchmarks/rank_timeline_bench.py --ranks 16
"""

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tb_plugin.server.plugin import ProfilerPlugin  # noqa: E402
from tests.job_traces import write_job  # noqa: E402  (the job replicator the job view's tests use)

PREFIX = "/data/plugin/pytorch_profiler"
SOURCE = Path("/work/shared/traces/sampled_128rank_job/rank0.pt.trace.json.gz")


def get(client, query, timeout=1800):
    """(seconds until the answer is not a 202, reply)."""
    start = time.perf_counter()
    while True:
        reply = client.get(f"{PREFIX}/{query}")
        if reply.status_code != 202:
            assert reply.status_code == 200, reply.get_data(as_text=True)[:300]
            return time.perf_counter() - start, reply
        if time.perf_counter() - start > timeout:
            raise TimeoutError(query)
        time.sleep(0.05)


def timed(client, query, repeat):
    times, reply = [], None
    for i in range(repeat):  # a distinct query each time: the reply cache answers none of them
        seconds, reply = get(client, f"{query}&_={i}")
        times.append(seconds)
    body = orjson.loads(reply.get_data())
    return statistics.median(times), len(reply.get_data()), len(body["track"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=128)
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--pixels", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also time the page's first paint in Chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rank_timeline_bench_") as tmp:
        logdir = Path(tmp)
        offsets = [(r % 7) * 1000.0 - 3000.0 for r in range(args.ranks)]  # hosts' clocks disagree by ms
        write_job(args.source, logdir / "job", args.ranks, offsets)
        flags = {"reload_interval": 3600, "profiler_cache_dir": "", "profiler_max_memory_mb": 1024}
        import argparse as _argparse
        plugin = ProfilerPlugin(base_plugin.TBContext(logdir=str(logdir), flags=_argparse.Namespace(**flags)))
        client = Client(application.TensorBoardWSGI([plugin]))
        plugin.store.wait_for_scan(60)
        try:
            ready_s, frame = get(client, "timeline_ranks?run=job&ranks=all")
            body = orjson.loads(frame.get_data())
            start, end = body["start_us"], body["end_us"]
            resolution = (end - start) / args.pixels
            window = f"start_us={start}&end_us={end}&resolution_us={resolution}"
            collapsed = timed(client, f"timeline_rank_slices?run=job&ranks=all&{window}", args.repeat)
            one_frame = get(client, "timeline_tracks?run=job&worker=rank0")[1]
            one = orjson.loads(one_frame.get_data())
            one_res = (one["end_us"] - one["start_us"]) / args.pixels
            alone = timed(client, f"timeline_slices?run=job&worker=rank0&start_us={one['start_us']}"
                                  f"&end_us={one['end_us']}&resolution_us={one_res}", args.repeat)
            expanded = timed(client, f"timeline_rank_slices?run=job&ranks=all&expanded=0&{window}", args.repeat)
            paints = first_paints(application.TensorBoardWSGI([plugin])) if args.browser else None
        finally:
            plugin.store.stop()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        size_mb = sum(p.stat().st_size for p in (logdir / "job").iterdir()) / 1e6
    print(f"{args.ranks} ranks of {args.source.name} ({size_mb:.1f} MB gzipped in all), {args.pixels} px")
    print(f"timeline_ranks first 200 (every rank parsed once): {ready_s:.1f} s; peak RSS {rss_mb:.0f} MB")
    print("| request | median s | reply KB | rows |")
    print("|---|---|---|---|")
    for label, (seconds, size, rows) in (
            (f"{args.ranks} ranks collapsed, whole axis (`timeline_rank_slices`)", collapsed),
            ("one rank alone, whole trace (`timeline_slices`)", alone),
            (f"{args.ranks} ranks, rank 0 expanded (`timeline_rank_slices`)", expanded)):
        print(f"| {label} | {seconds:.3f} | {size / 1024:.0f} | {rows} |")
    if paints:
        print(f"Chromium first paint (median of {len(paints['all'])}): {args.ranks} ranks collapsed "
              f"{statistics.median(paints['all']):.0f} ms, rank 0 alone {statistics.median(paints['one']):.0f} ms")


def first_paints(app, repeat=3):
    """{"all": [ms], "one": [ms]}: the Trace view's first paint, all ranks vs rank 0 alone."""
    import threading

    from playwright.sync_api import sync_playwright
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args, **kwargs):  # one line per request would bury the figures
            pass

    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}{PREFIX}/index.html?run=job&worker=rank0&span=1&view=trace"
    out = {"all": [], "one": []}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                                 args=["--no-sandbox", "--disable-gpu"])
            try:
                for _ in range(repeat):
                    for key, query in (("all", "&trace_ranks=all"), ("one", "")):
                        page = browser.new_page(viewport={"width": 1800, "height": 1000})
                        page.goto(base + query)
                        page.wait_for_selector("[data-testid=trace-timeline][data-first-paint-ms]", timeout=120_000)
                        out[key].append(float(page.get_attribute("[data-testid=trace-timeline]", "data-first-paint-ms")))
                        page.close()
            finally:
                browser.close()
    finally:
        server.shutdown()
    return out


if __name__ == "__main__":
    main()
