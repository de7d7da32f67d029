#!/usr/bin/env python3
"""Load test on loopback: many clients on every route of one run, while it loads and after.

Starts a real ``tensorboard`` (the executable beside ``sys.executable``) on a free
127.0.0.1 port with ``--logdir LOGDIR --profiler_cache_dir ''`` (no disk cache, so the run
really is parsed), waits until it answers, and, without asking for any profile first, lets
``--clients`` threads hit every route of ``openapi.yaml`` for ``--run`` for ``--seconds``:
each thread keeps one HTTP/1.1 connection (as a browser tab would) and walks the route list
round-robin, starting at its own offset. The first seconds therefore meet a run that is
still parsing (202 answers), the rest the loaded run (200s, plus whatever 4xx a route
documents for this trace).

Reported per route: requests, 2xx / 202 / 4xx / 5xx counts, connection errors, and latency
p50 / p95 / p99 / max (ms), over the whole run and over the loaded phase alone (from the first
200 of /info on); how long the run took to load; and the routes that got no 2xx answer
within the timed run (`not_served_in_run`: on a busy machine the load can outlast a short
run; tests/test_load_smoke.py asserted this was empty before it flaked on a busy 2-core
machine). After the timed run every URL is asked once more, again while 202, until it
answers (`final_statuses`; at most `settle_seconds`). The exit status is non-zero if any
request got a 5xx or a connection error, or the server died. The server is stopped by its pid (SIGTERM, then SIGKILL after
10 s) whatever happens; every request has a timeout and every thread is joined with one.

Usage::

    python benchmarks/load_test.py                                  # samples, 50 clients, 30 s
    python benchmarks/load_test.py --clients 10 --seconds 5 --json out.json

`run_load_test` is the same as a function (tests/test_load_smoke.py calls it).
"""

import argparse
import http.client
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter, defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests/ helpers
from tests.helpers import free_port, stop_by_pid  # noqa: E402  (one copy, shared with the tests)


REPO = Path(__file__).resolve().parent.parent
PREFIX = "/data/plugin/pytorch_profiler"
TENSORBOARD = Path(sys.executable).with_name("tensorboard")
SPEC_PATH = REPO / "tb_plugin" / "openapi.yaml"

# A valid value for each query parameter of the spec (run and worker are filled in per run).
VALUES = {"span": "1", "span_b": "1", "name": "aten::conv2d", "start_us": "0", "end_us": "1000000",
          "resolution_us": "100", "event": "0", "q": "aten", "tracks": "0", "points": "200", "limit": "100",
          "max_points": "500", "group_by": "name", "after_us": "0", "direction": "next"}
VALUE_FOR_ROUTE = {("/tables", "table"): "kernels"}
# The memory snapshot routes answer a run's snapshots: they are asked of the samples' run of
# snapshots (`samples/gpu_memory_snapshot`), whatever run the rest is asked of.
SNAPSHOT_VALUES = {"run": "gpu_memory_snapshot", "snapshot": "rank0"}


def route_urls(run, worker, spec_path=SPEC_PATH):
    """[(route, url)]: one valid request per route of the spec, plus its CSV form where it has one."""
    spec = yaml.safe_load(Path(spec_path).read_text())
    shared = spec["components"]["parameters"]
    values = {**VALUES, "run": run, "worker": worker, "run_b": run, "worker_b": worker}
    urls = []
    for path in sorted(spec["paths"]):
        params, tables = [], []
        for p in spec["paths"][path]["get"].get("parameters", []):
            p = shared[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p
            params.append((p["name"], bool(p.get("required"))))
            if p["name"] == "table" and not p.get("required"):  # views of several tables: CSV of one
                tables = p.get("schema", {}).get("enum", [])
        asked = {**values, **SNAPSHOT_VALUES} if path.startswith("/snapshot_") else values
        query = {name: VALUE_FOR_ROUTE.get((path, name), asked.get(name, "")) for name, required in params if required}
        urls.append((path, f"{PREFIX}{path}?{urllib.parse.urlencode(query)}" if query else f"{PREFIX}{path}"))
        if "format" in dict(params):
            extra = {"format": "csv", **({"table": tables[0]} if tables else {})}
            urls.append((f"{path} (csv)", f"{PREFIX}{path}?{urllib.parse.urlencode({**query, **extra})}"))
    return urls


class Server:
    """`tensorboard` as a child process on 127.0.0.1, stopped by pid."""

    def __init__(self, logdir, port=None, extra_args=()):
        if not TENSORBOARD.exists():
            raise FileNotFoundError(f"no tensorboard executable beside {sys.executable}")
        self.port = port or free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="tb_load_test_", suffix=".log", delete=False)
        args = [str(TENSORBOARD), "--logdir", str(logdir), "--profiler_cache_dir", "", "--host", "127.0.0.1",
                "--port", str(self.port), *extra_args]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tensorboard exited with {self.proc.returncode}; log: {self.log.name}")
            try:
                status, _ = get(self.port, "/data/plugins_listing", timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"tensorboard did not answer within {timeout} s; log: {self.log.name}")

    def stop(self):
        stop_by_pid(self.proc, 10)
        self.log.close()


def get(port, url, timeout=30, connection=None):
    """(status, body) of one GET; a fresh connection unless one is given."""
    conn = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", url)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        if connection is None:
            conn.close()


def _client(port, urls, offset, deadline, timeout, results, first_loaded, lock):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    i = offset
    while time.monotonic() < deadline:
        route, url = urls[i % len(urls)]
        i += 1
        started = time.monotonic()
        try:
            conn.request("GET", url)
            response = conn.getresponse()
            response.read()
            status = response.status
            if response.will_close:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        except (OSError, http.client.HTTPException) as exc:
            status = f"error: {type(exc).__name__}"
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        ended = time.monotonic()
        with lock:
            results.append((route, status, started, (ended - started) * 1000.0))
            if status == 200 and route == "/info" and first_loaded[0] is None:
                first_loaded[0] = ended
    conn.close()


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(q / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[k]


def summarise(results, loaded_at):
    """Per-route rows and totals from the raw (route, status, start, latency_ms) records."""
    by_route = defaultdict(list)
    for record in results:
        by_route[record[0]].append(record)
    rows = []
    for route in sorted(by_route):
        records = by_route[route]
        statuses = Counter(r[1] for r in records)
        latencies = sorted(r[3] for r in records)
        loaded = sorted(r[3] for r in records if loaded_at is not None and r[2] >= loaded_at)
        rows.append({
            "route": route, "requests": len(records),
            "2xx": sum(n for s, n in statuses.items() if isinstance(s, int) and 200 <= s < 300 and s != 202),
            "202": statuses.get(202, 0),
            "4xx": sum(n for s, n in statuses.items() if isinstance(s, int) and 400 <= s < 500),
            "5xx": sum(n for s, n in statuses.items() if isinstance(s, int) and s >= 500),
            "errors": sum(n for s, n in statuses.items() if not isinstance(s, int)),
            "p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95), "p99_ms": percentile(latencies, 99),
            "max_ms": percentile(latencies, 100),
            "loaded_p50_ms": percentile(loaded, 50), "loaded_p95_ms": percentile(loaded, 95),
            "loaded_p99_ms": percentile(loaded, 99),
            "statuses": {str(s): n for s, n in sorted(statuses.items(), key=str)},
        })
    everything = sorted(r[3] for r in results)
    loaded_all = sorted(r[3] for r in results if loaded_at is not None and r[2] >= loaded_at)
    totals = {
        "requests": len(results), "5xx": sum(r["5xx"] for r in rows), "errors": sum(r["errors"] for r in rows),
        "202": sum(r["202"] for r in rows), "4xx": sum(r["4xx"] for r in rows), "2xx": sum(r["2xx"] for r in rows),
        "p50_ms": percentile(everything, 50), "p95_ms": percentile(everything, 95), "p99_ms": percentile(everything, 99),
        "max_ms": percentile(everything, 100),
        "loaded_p50_ms": percentile(loaded_all, 50), "loaded_p95_ms": percentile(loaded_all, 95),
        "loaded_p99_ms": percentile(loaded_all, 99),
    }
    return rows, totals


def settle(port, urls, timeout, settle_seconds):
    """{route: status} of each URL asked one after another, again while it answers 202,
    for at most `settle_seconds` in all; a URL still loading then stays 202."""
    deadline = time.monotonic() + settle_seconds
    statuses = {}
    for route, url in urls:
        while True:
            try:
                status, _ = get(port, url, timeout=timeout)
            except (OSError, http.client.HTTPException) as exc:
                status = f"error: {type(exc).__name__}"
            if status != 202 or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        statuses[route] = status
    return statuses


def run_load_test(logdir=REPO / "samples", run="gpu_resnet50_v100", seconds=30.0, clients=50, timeout=30.0,
                  spec_path=SPEC_PATH, log=print, settle_seconds=300.0):
    """Start tensorboard, load it for `seconds` with `clients` threads, ask every URL once
    more until it answers (`settle`), stop it; returns a dict."""
    server = Server(logdir)
    try:
        server.wait_ready()
        status, body = get(server.port, f"{PREFIX}/workers?run={urllib.parse.quote(run)}", timeout=timeout)
        if status != 200:
            raise RuntimeError(f"run {run!r} not found under {logdir}: {status} {body[:200]!r}")
        worker = json.loads(body)["workers"][0]
        urls = route_urls(run, worker, spec_path)
        log(f"tensorboard pid {server.proc.pid} on 127.0.0.1:{server.port}; run {run!r}, worker {worker!r}; "
            f"{len(urls)} URLs, {clients} clients, {seconds:g} s")
        results, first_loaded, lock = [], [None], threading.Lock()
        started = time.monotonic()
        deadline = started + seconds
        threads = [threading.Thread(target=_client, daemon=True, name=f"load-client-{i}",
                                    args=(server.port, urls, i * len(urls) // clients, deadline, timeout, results,
                                          first_loaded, lock)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, deadline + timeout + 5 - time.monotonic()))
        hung = [t.name for t in threads if t.is_alive()]
        final_statuses = settle(server.port, urls, timeout, settle_seconds) if server.proc.poll() is None else {}
        server_alive = server.proc.poll() is None
        with lock:
            records = list(results)
        rows, totals = summarise(records, first_loaded[0])
        report = {
            "run": run, "worker": worker, "clients": clients, "seconds": seconds, "urls": len(urls),
            "loaded_after_s": None if first_loaded[0] is None else round(first_loaded[0] - started, 3),
            "elapsed_s": round(time.monotonic() - started, 3), "requests_per_s": round(len(records) / seconds, 1),
            "hung_clients": hung, "server_alive": server_alive, "server_log": server.log.name,
            "routes": rows, "totals": totals,
            "not_served_in_run": sorted(row["route"] for row in rows if row["2xx"] == 0),
            "final_statuses": final_statuses,
        }
    finally:
        server.stop()
    if not failed(report):  # the server log is kept only when something went wrong
        os.unlink(server.log.name)
        report["server_log"] = None
    return report


def failed(report):
    """Why the run failed (empty when it passed)."""
    reasons = []
    if report["totals"]["5xx"]:
        reasons.append(f"{report['totals']['5xx']} answers were 5xx")
    if report["totals"]["errors"]:
        reasons.append(f"{report['totals']['errors']} requests failed to connect or timed out")
    if report["hung_clients"]:
        reasons.append(f"{len(report['hung_clients'])} clients did not finish")
    if not report["server_alive"]:
        reasons.append("the server died")
    return reasons


def print_report(report, out=sys.stdout):
    columns = ["requests", "2xx", "202", "4xx", "5xx", "errors", "p50_ms", "p95_ms", "p99_ms", "max_ms", "loaded_p95_ms"]
    print(f"{'route':<28}" + "".join(f"{c:>14}" for c in columns), file=out)
    for row in report["routes"] + [{"route": "ALL", **report["totals"]}]:
        cells = [f"{row[c]:>14.1f}" if isinstance(row[c], float) else f"{row[c]:>14}" for c in columns]
        print(f"{row['route']:<28}" + "".join(cells), file=out)
    print(f"loaded after {report['loaded_after_s']} s; {report['requests_per_s']} requests/s"
          + (f"; server log kept in {report['server_log']}" if report["server_log"] else ""), file=out)
    if report["not_served_in_run"]:
        print(f"no 2xx within the {report['seconds']:g} s run: {', '.join(report['not_served_in_run'])}", file=out)
    unanswered = {route: status for route, status in report["final_statuses"].items() if status != 200}
    if unanswered:
        print(f"not 200 when asked again after the run: {unanswered}", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logdir", default=str(REPO / "samples"))
    parser.add_argument("--run", default="gpu_resnet50_v100", help="run to hit (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument("--json", help="also write the full report here")
    args = parser.parse_args(argv)
    report = run_load_test(args.logdir, args.run, args.seconds, args.clients, args.timeout)
    report["machine"] = {"platform": platform.platform(), "python": platform.python_version(),
                         "cpus": os.cpu_count(), "processor": _cpu_model()}
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    reasons = failed(report)
    if reasons:
        print("FAILED: " + "; ".join(reasons), file=sys.stderr)
        return 1
    return 0


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
