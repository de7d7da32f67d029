#!/usr/bin/env python3
"""Measure the OLD plugin's trace view (torch-tb-profiler 0.4.3, the last release) in real
Chromium, with the figures ``trace_view_bench.py`` reports for ours, on the same trace.

Why: issue 5 asks that, on a 35 MB trace, our trace view is "at least as good as the old
plugin's viewer, which takes seconds and holds the trace three times over in the page".
That claim needs the old viewer measured on this machine, in the same browser, the same way.

The old plugin must be installed in its own virtualenv (``--venv``, it would clash with
ours: same plugin name)::

    python3 -m venv /tmp/old_helper/venv
    /tmp/old_helper/venv/bin/pip install torch-tb-profiler==0.4.3    # + tensorboard, pandas, numpy

How the old trace view works: its Trace tab mounts an iframe (``trace_embedding.html``)
that loads catapult's trace viewer (``trace_viewer_full.html``, 2.6 MB, an HTML import);
the parent page fetches ``/trace`` (the whole trace JSON, gzip on the wire), ``JSON.parse``s
it, and ``postMessage``s the object into the iframe (a structured clone), where catapult
imports it into its own model and draws it on canvases. Everything the viewer does after
that (zoom, pan) is client-side: no request.

Two files of that page come from public CDNs, which this machine cannot reach; the script
serves both from the browser context's request routing (nothing else is changed):

- ``https://cdnjs.cloudflare.com/ajax/libs/webcomponentsjs/0.7.24/webcomponents.min.js``,
  the Web Components v0 polyfill ``trace_embedding.html`` needs (Chromium dropped HTML
  imports / Custom Elements v0 / Shadow DOM v0): served from the npm package
  ``webcomponents.js@0.7.24``, the same release of the same file (fetched with ``npm pack``
  unless ``--polyfill FILE`` is given; its sha256 is checked; cdnjs's copy itself cannot be
  reached here to compare).
- ``https://www.gstatic.com/charts/loader.js`` (Google Charts, for the Overview's charts;
  the page renders nothing until ``google.charts.load`` resolves): replaced by a stub whose
  ``load`` resolves and whose charts draw nothing. The trace view does not use it.

What it measures, per open of the Trace tab (``--repeats``, default 3; each in a fresh
browser context on the same tensorboard, so the first is the server's first ``/trace``,
which appends the GPU-utilisation counters to the trace and gzips it; later ones read that
result back):

1. **Open -> drawn**: the page is opened on the Overview (as a user lands on it), then the
   "Views" select is opened and the time taken (``performance.timeOrigin + now()``) just
   before clicking its "Trace" option; "drawn" is the first animation frame, inside the
   iframe, in which the viewer has its model and its main track canvas (the largest
   ``<canvas>``) holds non-transparent pixels (at least ``--min-ink`` of a sampled grid:
   slices drawn, not just an empty canvas). An init script in the iframe polls this on its
   own ``requestAnimationFrame``. Also split into: the iframe's viewer ready (polyfill + HTML
   import), the ``/trace`` response (Resource Timing), the data message arriving in the
   iframe (after the parent's ``JSON.parse`` and the structured clone), the model set.
2. **Memory**: CDP ``Performance.getMetrics`` ``JSHeapUsedSize`` / ``JSHeapTotalSize`` (the
   renderer's V8 heap: the same-origin iframe lives in the same isolate, so it counts both
   copies), once drawn and after every step of a first run of the session (maximum), then
   once after a forced GC (``HeapProfiler.collectGarbage``): what the page keeps. The
   renderer processes' ``VmRSS`` (largest), from ``/proc``, as in ``trace_view_bench.py``.
3. **Zoom/pan**: a seeded ``--steps`` session (see ``session``) in the viewer's own controls,
   run a second time from the whole trace with the canvas hash on (it reads the canvas back,
   which would inflate the memory figures, hence two runs). An init script wraps the page's
   ``requestAnimationFrame`` before its scripts run: every callback is timed, the 2D-canvas
   drawing calls made in it are counted, and when it drew, an FNV hash of the largest
   canvas's pixels tells whether the picture changed. Per step, from the input event's
   ``timeStamp`` (keydown, wheel, mousedown): to the end of the first frame that changed the
   picture, and to the end of the last one (the step's final picture; a step is over once no
   frame has run for ``--quiet-ms``, and, in ours, the page is ready again). Frames that
   redraw the same pixels (ours repaints once when it writes the window to the URL, 250 ms
   later) do not count. Catapult animates key zooms/pans over ~100 ms; its Alt+wheel and
   drags are immediate.

``--with-ours`` measures ours on the same trace the same way (our tensorboard beside this
interpreter, our page opened on its Overview, then its Trace tab: first paint as
``trace_view_bench.py`` defines it, ``data-first-paint-ms``), and also runs
``trace_view_bench.py --trace`` on it; both are printed side by side.

Everything started (tensorboard, Chromium) is stopped by pid at the end.

Usage::

    /work/venv/bin/python benchmarks/old_plugin_trace_bench.py --venv /tmp/old_helper/venv --with-ours
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trace_view_bench  # noqa: E402
from trace_view_bench import (BOX, CHROMIUM, CHROMIUM_ARGS, GUTTER_PX, READY, json_size, log, measured_page,  # noqa: E402
                              percentile, renderer_rss_mb)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = REPO.parent / "shared/traces/resnet50_v100_2021/worker0.1623143089861.pt.trace.json.gz"
PLUGIN = "/data/plugin/pytorch_profiler"
POLYFILL_URL = "https://cdnjs.cloudflare.com/ajax/libs/webcomponentsjs/0.7.24/webcomponents.min.js"
POLYFILL_NPM = "webcomponents.js@0.7.24"
POLYFILL_SHA256 = "3858273ab39b299e7c2227f0830534afafaabf4a572c9ea73c2076fecbd8978c"
GCHARTS_URL = "https://www.gstatic.com/charts/loader.js"

GCHARTS_STUB = """
// Stand-in for Google Charts' loader (no network here): the old page waits for
// google.charts.load before it renders anything; its charts draw nothing.
(function () {
  function Chart() {}
  Chart.prototype.draw = function () {};
  Chart.prototype.clearChart = function () {};
  Chart.prototype.getSelection = function () { return []; };
  Chart.prototype.setSelection = function () {};
  function DataTable() { this.cols = []; this.rows = []; }
  DataTable.prototype.addColumn = function (c) { this.cols.push(c); return this.cols.length - 1; };
  DataTable.prototype.addRows = function (r) { if (Array.isArray(r)) this.rows.push.apply(this.rows, r); };
  DataTable.prototype.addRow = function (r) { this.rows.push(r); };
  DataTable.prototype.setProperty = function () {};
  DataTable.prototype.getNumberOfRows = function () { return this.rows.length; };
  DataTable.prototype.getNumberOfColumns = function () { return this.cols.length; };
  var v = { DataTable: DataTable, arrayToDataTable: function () { return new DataTable(); },
            events: { addListener: function () { return {}; }, removeListener: function () {} } };
  ["ColumnChart", "ComboChart", "LineChart", "PieChart", "SteppedAreaChart", "Table", "Timeline",
   "BarChart", "AreaChart"].forEach(function (n) { v[n] = Chart; });
  window.google = { charts: { load: function () { return Promise.resolve(); },
                              setOnLoadCallback: function (f) { setTimeout(f, 0); } },
                    visualization: v };
})();
"""

# Runs in every frame before its own scripts; does something only in the frame whose path ends
# with __PATH__ (the old viewer's iframe, or our page). It times every requestAnimationFrame
# callback and counts the 2D-canvas drawing calls made in each (catapult's Shadow DOM polyfill
# wraps contexts but calls the native methods, so the counts see both viewers' drawing).
PROBE = """
(() => {
  if (!location.pathname.endsWith('__PATH__')) return;
  const T = () => performance.timeOrigin + performance.now();
  const st = window.__bench = { start: T(), rafs: [], inputs: [], errors: [], draws: 0, hash: false, readyAt: null, dataAt: null,
                                modelAt: null, drawnAt: null, ink: 0, canvases: 0, minInk: __MIN_INK__ };
  const proto = CanvasRenderingContext2D.prototype;
  for (const name of ['clearRect', 'fillRect', 'strokeRect', 'fillText', 'strokeText', 'fill', 'stroke', 'drawImage',
                      'putImageData']) {
    const original = proto[name];
    proto[name] = function () { st.draws++; return original.apply(this, arguments); };
  }
  let lastHash = null;
  function canvasHash() {  // FNV-1a over every pixel of the largest canvas (the tracks)
    let big = null;
    // Array.from: the Shadow DOM polyfill's NodeList is not iterable
    for (const c of Array.from(document.querySelectorAll('canvas'))) if (!big || c.width * c.height > big.width * big.height) big = c;
    if (!big || !big.width || !big.height) return 0;
    const px = new Uint32Array(big.getContext('2d').getImageData(0, 0, big.width, big.height).data.buffer);
    let h = (0x811c9dc5 ^ big.width ^ (big.height << 16)) >>> 0;
    for (let i = 0; i < px.length; i++) h = Math.imul(h ^ px[i], 16777619);
    return h >>> 0;
  }
  const raf = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = function (cb) {
    return raf(function (ts) {
      const s = performance.now(), d = st.draws;
      try { return cb(ts); } finally {
        const e = performance.now(), drew = st.draws - d;
        let changed = st.hash ? 0 : -1;  // -1: not looked at
        if (drew > 0 && st.hash) {
          try { const h = canvasHash(); changed = h !== lastHash ? 1 : 0; lastHash = h; } catch (err) { st.hashError = String(err); changed = 1; }
        }
        st.rafs.push([s, e, drew, changed]);
      }
    });
  };
  window.addEventListener('error', (e) => st.errors.push([performance.now(), String(e.message), String(e.error && e.error.stack)]));
  for (const type of ['keydown', 'wheel', 'mousedown'])
    window.addEventListener(type, (e) => st.inputs.push([type, e.timeStamp, performance.now()]), true);
  if (!__WATCH_OLD__) return;
  window.addEventListener('message', (e) => { if (e.data && e.data.msg === 'data' && !st.dataAt) st.dataAt = T(); }, true);
  document.addEventListener('WebComponentsReady', () => { st.readyAt = T(); });
  function ink(canvas) {
    const w = canvas.width, h = canvas.height;
    if (!w || !h) return 0;
    const data = canvas.getContext('2d').getImageData(0, 0, w, h).data;
    let hit = 0, all = 0;
    for (let y = 0; y < h; y += 4) for (let x = 0; x < w; x += 4) { all++; if (data[(y * w + x) * 4 + 3] > 0) hit++; }
    return hit / all;
  }
  function check() {  // on our own (unwrapped) animation frames, until drawn
    const v = document.getElementById('trace-viewer');
    if (v && v.model && !st.modelAt) st.modelAt = T();
    if (st.modelAt) {
      const canvases = Array.from(document.querySelectorAll('canvas'));
      st.canvases = canvases.length;
      if (canvases.length) {
        const big = canvases.reduce((a, b) => (a.width * a.height >= b.width * b.height ? a : b));
        st.ink = ink(big);
        if (st.ink >= st.minInk) { st.drawnAt = T(); return; }
      }
    }
    raf(check);
  }
  raf(check);
})();
"""


def probe(path, min_ink=0.0, watch_old=False):
    return (PROBE.replace("__PATH__", path).replace("__MIN_INK__", str(min_ink))
            .replace("__WATCH_OLD__", "true" if watch_old else "false"))


def get_polyfill(path, work):
    """The bytes of webcomponents.min.js 0.7.24 (from `path`, or `npm pack` into `work`)."""
    if path is None:
        subprocess.run(["npm", "pack", POLYFILL_NPM, "--pack-destination", str(work)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tgz = next(work.glob("webcomponents.js-*.tgz"))
        with tarfile.open(tgz) as tar:
            data = tar.extractfile("package/webcomponents.min.js").read()
    else:
        data = Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert digest == POLYFILL_SHA256, f"webcomponents.min.js sha256 {digest} != {POLYFILL_SHA256}"
    return data


def old_tensorboard(venv, logdir, tmpdir, log_path):
    """The old plugin's tensorboard from its own venv (our PYTHONPATH kept out of it)."""
    # TMPDIR: the old plugin keeps its trace-with-counters files in tempfile.mkdtemp().
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmpdir)}
    env.pop("PYTHONPATH", None)
    return trace_view_bench.serve(Path(venv) / "bin/tensorboard", logdir, log_path, env=env)


def wait_runs(base, proc, timeout_s):
    """Seconds until the old plugin lists the run (it lists a run once it has parsed it)."""
    started = time.monotonic()
    while True:
        assert proc.poll() is None, "tensorboard exited"
        assert time.monotonic() - started < timeout_s, "the run did not load in time"
        try:
            with urllib.request.urlopen(f"{base}{PLUGIN}/runs", timeout=10) as response:
                body = json.loads(response.read())
            if body.get("runs") and not body.get("loading"):
                return body["runs"][0], time.monotonic() - started
        except (urllib.error.URLError, ConnectionError, OSError, ValueError):
            pass
        time.sleep(0.25)


def session(n_steps, seed):
    """Seeded (label, kind, argument) steps, built like trace_view_bench.session's, run the
    same in both viewers, each with its own controls: keys W/S (zoom: 1.5x in the old viewer,
    1.3x in ours) and A/D (pan: 30% / 15%), wheel zooms (Alt+wheel in the old viewer, whose
    plain wheel does not zoom: 1.5x per wheel event, as Chromium reports wheelDelta 120 for
    it; deltaY -300 is e = 2.72x in ours), drags, and "whole trace" (key 0 in the old viewer,
    the reset button in ours). No "jump to a step": the old viewer has none."""
    rng = random.Random(seed)
    script = [("w", "key", "w")] * 8 + [("d", "key", "d")] * 4 + [("a", "key", "a")] * 3
    script += [("wheel in", "wheel", (rng.uniform(0.1, 0.9), -300)) for _ in range(8)]
    script += [("drag", "drag", rng.choice([-250, 250])) for _ in range(3)]
    script += [("s", "key", "s")] * 6 + [("whole trace", "reset", None)]
    script += [("wheel in", "wheel", (rng.uniform(0.05, 0.95), -300)) for _ in range(8)]
    script += [("d", "key", "d")] * 5 + [("s", "key", "s")] * 5
    while len(script) < n_steps:
        script.append(rng.choice([("w", "key", "w"), ("s", "key", "s"), ("a", "key", "a"), ("d", "key", "d"),
                                  ("wheel in", "wheel", (rng.uniform(0.1, 0.9), -300))]))
    return script[:n_steps]


INPUT_OF = {"key": "keydown", "wheel": "wheel", "drag": "mousedown", "reset": "keydown"}


def track_box(page, frame, viewer):
    """Where the tracks are drawn (page coordinates): the old viewer's largest canvas, our
    `.trace-canvas`; read again before every pointer step (our timeline's height follows the
    lanes the window needs)."""
    if viewer == "ours":
        return page.locator(".trace-canvas").bounding_box()
    box = None
    for i in range(frame.locator("canvas").count()):
        b = frame.locator("canvas").nth(i).bounding_box()
        if b and (box is None or b["width"] * b["height"] > box["width"] * box["height"]):
            box = b
    return box


def run_session(page, frame, viewer, args, sample, pixels):
    """The seeded session in `frame` (the old viewer's iframe, or our page); per step, from
    the input event to the end of the first and of the last animation frame that drew on a
    canvas, once no frame has run for --quiet-ms (and, in ours, the page is ready again).
    Wheel zooms and drags happen half-way down the tracks (below, ours shows a hint line that
    does not take the wheel)."""
    old = viewer == "old"
    frame.evaluate(f"() => {{ window.__bench.hash = {'true' if pixels else 'false'}; }}")
    # start from the whole trace
    if old:
        page.keyboard.press("0")
    else:
        page.click("[data-control=trace-reset]")
        page.wait_for_selector(READY, state="attached")
    quiet = (f"performance.now() - (window.__bench.rafs.length ? window.__bench.rafs[window.__bench.rafs.length - 1][1] : 0)"
             f" > {args.quiet_ms}")
    frame.wait_for_function(f"() => {quiet}", polling=10)
    steps = []
    for label, kind, arg in session(args.steps, args.seed):
        t0, n0, seq = frame.evaluate("() => [performance.now(), window.__bench.rafs.length, document.body.dataset.readySeq || '0']")
        if kind in ("wheel", "drag"):
            box = track_box(page, frame, viewer)
            plot_x = box["x"] if old else box["x"] + GUTTER_PX
            plot_w = box["width"] if old else box["width"] - GUTTER_PX
            y = box["y"] + box["height"] / 2
        began = time.perf_counter()
        if kind == "key":
            page.keyboard.press(arg)
        elif kind == "reset":
            if old:
                page.keyboard.press("0")
            else:
                page.click("[data-control=trace-reset]")
        elif kind == "wheel":
            page.mouse.move(plot_x + arg[0] * plot_w, y)
            if old:
                page.keyboard.down("Alt")
            page.mouse.wheel(0, arg[1])
            if old:
                page.keyboard.up("Alt")
        elif kind == "drag":
            x = plot_x + plot_w / 2
            page.mouse.move(x, y)
            page.mouse.down()
            page.mouse.move(x + arg, y, steps=6)
            page.mouse.up()
        done = f"window.__bench.rafs.length > {n0} && {quiet}"
        if not old:
            done += f" && document.body.dataset.ready === 'true' && document.body.dataset.readySeq !== '{seq}'"
        try:
            frame.wait_for_function(f"() => {done}", polling=10)
        except Exception:
            log(f"step {len(steps)} ({label}) did not settle: " + json.dumps(frame.evaluate(
                "() => ({rafs: window.__bench.rafs.slice(-3), now: performance.now(), inputs: window.__bench.inputs.slice(-3), "
                "ready: document.body.dataset.ready, seq: document.body.dataset.readySeq})")))
            raise
        wall = (time.perf_counter() - began) * 1000 - args.quiet_ms
        input_type = "mousedown" if (kind == "reset" and not old) else INPUT_OF[kind]
        width = ("""(() => { const tv = document.getElementById('trace-viewer').trackView;
                    return 1000 * tv.viewport.currentDisplayTransform.xViewVectorToWorld(tv.modelTrackContainer_.canvas.width); })()"""
                 if old else f"(() => {{ const d = document.querySelector('{BOX}').dataset; return d.endUs - d.startUs; }})()")
        got = frame.evaluate(f"""() => {{ const b = window.__bench;
            const inp = b.inputs.filter((e) => e[0] === '{input_type}' && e[2] >= {t0});
            const frames = b.rafs.slice({n0}).filter((f) => f[0] >= {t0});
            const errors = b.errors.filter((e) => e[0] >= {t0}).map((e) => e[1] + ' ' + e[2]);
            return {{input: inp.length ? inp[0][1] : null, frames, errors, width_us: {width}}}; }}""")
        t_in = got["input"] if got["input"] is not None else t0
        frames = [f for f in got["frames"] if f[0] >= t_in]
        changed = [f for f in frames if f[3]]
        steps.append({
            "step": label,
            "first_frame_ms": changed[0][1] - t_in if changed else None,
            "settled_ms": changed[-1][1] - t_in if changed else None,
            "longest_frame_ms": max((f[1] - f[0] for f in frames), default=None),
            "drawing_frames": sum(1 for f in frames if f[2]),
            "changed_frames": len(changed),
            "last_drawing_ms": max((f[1] - t_in for f in frames if f[2]), default=None),
            "wall_ms": wall,
            "width_us": got["width_us"],
            "errors": got["errors"],
        })
        sample()
    error = frame.evaluate("() => window.__bench.hashError || ''")
    assert not error, f"the canvas hash failed in {viewer}: {error}"
    return steps


def open_trace_tab(browser, base, polyfill, args):
    """One fresh context: Overview, then the Trace tab; returns the figures of this open."""
    out = {}
    context = browser.new_context(viewport={"width": args.width, "height": args.height})
    try:
        blocked = []

        def route(r):
            url = r.request.url
            if url.startswith("http://127.0.0.1"):
                return r.continue_()
            if url == POLYFILL_URL:
                return r.fulfill(body=polyfill, content_type="application/javascript")
            if url == GCHARTS_URL:
                return r.fulfill(body=GCHARTS_STUB, content_type="application/javascript")
            blocked.append(url)
            return r.abort()

        context.route("**/*", route)
        context.add_init_script(probe("/trace_embedding.html", args.min_ink, watch_old=True))
        page, errors, heap, cdp = measured_page(context, args.step_timeout)
        page.goto(f"{base}{PLUGIN}/index.html")
        page.wait_for_selector("text=Execution Summary", timeout=args.step_timeout * 1000 * 5)
        page.evaluate("() => performance.setResourceTimingBufferSize(100000)")
        page.wait_for_timeout(500)
        out["renderer_rss_mb_overview"] = renderer_rss_mb()
        out["heap_used_mb_overview"] = heap()[0]
        # The "Views" select (a Material-UI select showing "Overview"), then its "Trace" option.
        page.get_by_text("Overview", exact=True).first.click()
        option = page.get_by_role("option", name="Trace")
        option.wait_for()
        clicked = page.evaluate("() => performance.timeOrigin + performance.now()")
        option.click()
        frame = None
        deadline = time.monotonic() + args.step_timeout * 5
        while frame is None:
            assert time.monotonic() < deadline, "no trace iframe"
            frame = next((f for f in page.frames if f.url.endswith("/trace_embedding.html")), None)
            if frame is None:
                page.wait_for_timeout(20)
        frame.wait_for_function("() => window.__bench && window.__bench.drawnAt", polling=50,
                                timeout=args.step_timeout * 1000 * 5)
        st = frame.evaluate("() => { const s = window.__bench; return {start: s.start, readyAt: s.readyAt, "
                            "dataAt: s.dataAt, modelAt: s.modelAt, drawnAt: s.drawnAt, ink: s.ink, canvases: s.canvases}; }")
        trace_req = page.evaluate("""() => performance.getEntriesByType('resource')
            .filter((e) => e.name.includes('/trace?')).map((e) => ({start: performance.timeOrigin + e.startTime,
              end: performance.timeOrigin + e.responseEnd, server: e.responseStart - e.requestStart,
              wire: e.transferSize, body: e.decodedBodySize}))""")
        out["open_to_drawn_s"] = (st["drawnAt"] - clicked) / 1000
        out["iframe_created_s"] = (st["start"] - clicked) / 1000
        out["viewer_ready_s"] = (st["readyAt"] - clicked) / 1000 if st["readyAt"] else None
        if trace_req:
            out["trace_response_s"] = (trace_req[0]["end"] - clicked) / 1000
            out["trace_server_ms"] = trace_req[0]["server"]
            out["trace_wire_mb"] = trace_req[0]["wire"] / 1e6
            out["trace_body_mb"] = trace_req[0]["body"] / 1e6
        out["data_in_iframe_s"] = (st["dataAt"] - clicked) / 1000 if st["dataAt"] else None
        out["model_set_s"] = (st["modelAt"] - clicked) / 1000
        out["ink"] = st["ink"]
        log(f"drawn {out['open_to_drawn_s']:.2f} s after the click (ink {st['ink']:.2f}, {st['canvases']} canvases)")
        page.wait_for_timeout(200)
        if args.steps:
            box = track_box(page, frame, "old")
            # focus the viewer: a click in the empty part of the track view, below the tracks
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] + 40)
        measure_drawn(page, frame, "old", args, heap, cdp, out)
        out["errors"] = errors
        out["blocked"] = blocked
    finally:
        context.close()
    return out


def stats(values):
    values = [v for v in values if v is not None]
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "max": max(values, default=float("nan"))}


def measure_drawn(page, frame, viewer, args, heap, cdp, out):
    """Once drawn: memory, then the session twice from the whole trace. The first run, with
    the canvas hash off, gives the memory figures (JS heap and renderer RSS after every step,
    then a forced GC); the second, hashing the canvas on every frame that drew, gives the
    zoom/pan times (the hash reads the canvas back, which costs the renderer memory, hence two
    runs)."""
    samples, rss = [], []

    def sample():
        samples.append(heap())
        rss.append(renderer_rss_mb())

    sample()
    out["heap_used_mb_drawn"] = samples[0][0]
    out["renderer_rss_mb_drawn"] = rss[0]
    if args.screenshot:
        page.screenshot(path=str(args.screenshot).replace(".png", f"_{viewer}{args._open}_drawn.png"))
    out["steps_memory_run"] = run_session(page, frame, viewer, args, sample, pixels=False) if args.steps else []
    out["heap_used_mb_max"] = max(s[0] for s in samples)
    out["heap_total_mb_max"] = max(s[1] for s in samples)
    out["renderer_rss_mb_max"] = max(rss)
    cdp.send("HeapProfiler.enable")
    cdp.send("HeapProfiler.collectGarbage")
    page.wait_for_timeout(300)
    out["heap_used_mb_after_gc"] = heap()[0]
    out["steps"] = run_session(page, frame, viewer, args, lambda: None, pixels=True) if args.steps else []
    if args.screenshot:
        page.screenshot(path=str(args.screenshot).replace(".png", f"_{viewer}{args._open}_session.png"))


def probe_ours(trace, args, work):
    """Ours, measured the same way as the old viewer: our tensorboard (beside this interpreter)
    on the same trace; --repeats opens of the Trace tab from the Overview, each in a fresh
    context, then the same session through run_session."""
    from playwright.sync_api import sync_playwright

    run_dir = work / "ours_logdir" / "ours"
    run_dir.mkdir(parents=True)
    try:
        os.link(trace, run_dir / trace.name)
    except OSError:
        shutil.copyfile(trace, run_dir / trace.name)
    (work / "ours_cache").mkdir()
    opens = []
    with trace_view_bench.tensorboard(work / "ours_logdir", work / "ours_cache", 16000, work / "ours_tensorboard.log") as (base, proc):
        q, parsed_s, index_s, _ = trace_view_bench.wait_loaded(base, proc, args.load_timeout)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                for i in range(args.repeats):
                    args._open = i
                    out = {}
                    context = browser.new_context(viewport={"width": args.width, "height": args.height})
                    try:
                        context.add_init_script(probe("/index.html"))
                        page, errors, heap, cdp = measured_page(context, args.step_timeout)
                        page.goto(f"{base}{PLUGIN}/index.html?{urllib.parse.urlencode({**q, 'view': 'overview'})}")
                        page.wait_for_selector(READY, state="attached", timeout=args.step_timeout * 1000 * 5)
                        page.wait_for_timeout(500)
                        out["renderer_rss_mb_overview"] = renderer_rss_mb()
                        out["heap_used_mb_overview"] = heap()[0]
                        clicked = page.evaluate("() => performance.now()")
                        page.click("[role=tab][data-view=trace]")
                        page.wait_for_selector(f"{BOX}[data-first-paint-ms]", state="attached")
                        out["open_to_drawn_s"] = (float(page.get_attribute(BOX, "data-first-paint-ms")) - clicked) / 1000
                        page.wait_for_selector(READY, state="attached")
                        log(f"ours: drawn {out['open_to_drawn_s']:.2f} s after the click")
                        page.wait_for_timeout(200)
                        measure_drawn(page, page.main_frame, "ours", args, heap, cdp, out)
                        out["errors"] = errors
                    finally:
                        context.close()
                    opens.append(out)
            finally:
                browser.close()
    return {"parse_s": parsed_s, "index_s": index_s, "opens": opens}


def run_ours(trace, args, work):
    """trace_view_bench.py --trace on the same file, with this interpreter; its JSON summary."""
    out = work / "ours.json"
    cmd = [sys.executable, str(REPO / "benchmarks/trace_view_bench.py"), "--trace", str(trace), "--steps",
           str(args.steps), "--width", str(args.width), "--height", str(args.height), "--json-out", str(out)]
    log("ours: " + " ".join(cmd))
    subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(work)},
                   stdout=subprocess.DEVNULL, check=False)
    return json.loads(out.read_text())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, default=Path("/tmp/old_helper/venv"),
                        help="virtualenv holding torch-tb-profiler==0.4.3 and its tensorboard")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="trace file (default: the 35 MB ResNet-50 one)")
    parser.add_argument("--polyfill", type=Path, help="webcomponents.min.js 0.7.24 (default: npm pack webcomponents.js@0.7.24)")
    parser.add_argument("--repeats", type=int, default=3, help="opens of the Trace tab, each in a fresh context")
    parser.add_argument("--steps", type=int, default=50, help="zoom/pan steps per open (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=1000)
    parser.add_argument("--min-ink", type=float, default=0.01, help="share of the track canvas that must be drawn")
    parser.add_argument("--quiet-ms", type=float, default=300, help="no frame for this long = a step has settled")
    parser.add_argument("--load-timeout", type=float, default=600)
    parser.add_argument("--step-timeout", type=float, default=60)
    parser.add_argument("--work-dir", type=Path, help="scratch directory (default: a new temporary one)")
    parser.add_argument("--with-ours", action="store_true",
                        help="also measure ours on the same trace: the same probe and session, and trace_view_bench.py")
    parser.add_argument("--screenshot", type=Path, help="save the page once drawn and after the session (PNG prefix)")
    parser.add_argument("--json-out", type=Path, help="also write the raw results here")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="old_plugin_bench_", dir=args.work_dir))
    versions = subprocess.run([str(args.venv / "bin/python"), "-c",
                               "import importlib.metadata as m; print(' '.join(f'{p} {m.version(p)}' for p in "
                               "('torch-tb-profiler', 'tensorboard', 'pandas', 'numpy')))"],
                              capture_output=True, text=True, check=True).stdout.strip()
    opens = []
    try:
        polyfill = get_polyfill(args.polyfill, work)
        run_dir = work / "logdir" / "old"
        run_dir.mkdir(parents=True)
        target = run_dir / args.trace.name
        try:
            os.link(args.trace, target)
        except OSError:
            shutil.copyfile(args.trace, target)
        (work / "tmp").mkdir()
        with old_tensorboard(args.venv, work / "logdir", work / "tmp", work / "tensorboard.log") as (base, proc):
            run, load_s = wait_runs(base, proc, args.load_timeout)
            log(f"run {run!r} listed after {load_s:.1f} s")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                try:
                    for i in range(args.repeats):
                        args._open = i
                        opens.append(open_trace_tab(browser, base, polyfill, args))
                finally:
                    browser.close()
            server_rss = 0.0
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    server_rss = int(line.split()[1]) / 1024
        ours_probe = probe_ours(args.trace, args, work) if args.with_ours else None
        ours_bench = run_ours(args.trace, args, work) if args.with_ours else None
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def figures(opens):
        steps = [s for o in opens for s in o["steps"]]
        return {
            "open_to_drawn_s": [round(o["open_to_drawn_s"], 3) for o in opens],
            "first_drawn_frame_ms": stats([s["first_frame_ms"] for s in steps]),
            "settled_ms": stats([s["settled_ms"] for s in steps]),
            "longest_frame_ms": stats([s["longest_frame_ms"] for s in steps]),
            "wall_ms": stats([s["wall_ms"] for s in steps]),
            "steps": len(steps),
            "steps_without_change": sum(1 for s in steps if not s["changed_frames"]),
            "narrowest_window_us": min((s["width_us"] for s in steps), default=None),
            "heap_used_mb_overview": round(max(o["heap_used_mb_overview"] for o in opens), 1),
            "heap_used_mb_max": round(max(o["heap_used_mb_max"] for o in opens), 1),
            "heap_used_mb_after_gc": round(max(o["heap_used_mb_after_gc"] for o in opens), 1),
            "renderer_rss_mb_overview": round(max(o["renderer_rss_mb_overview"] for o in opens), 1),
            "renderer_rss_mb_max": round(max(o["renderer_rss_mb_max"] for o in opens), 1),
            "page_errors": sorted({e for o in opens for e in o["errors"]}),
        }

    summary = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}",
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "old_versions": versions, "trace": str(args.trace), "json_mb": round(json_size(args.trace) / 1e6, 1),
        "old_load_s": round(load_s, 1), "old_server_peak_rss_mb": round(server_rss),
        "old": figures(opens),
        "old_open_phases_s": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in o.items()
                               if k.endswith("_s") or k.startswith("trace_")} for o in opens],
        "old_blocked_requests": sorted({u for o in opens for u in o["blocked"]}),
    }
    if ours_probe:
        summary["ours"] = {"parse_s": round(ours_probe["parse_s"], 1), "index_s": round(ours_probe["index_s"], 1),
                           **figures(ours_probe["opens"])}
        keep = ("first_paint_s", "server_ms", "request_ms", "step_to_ready_ms", "heap_used_mb_max",
                "renderer_rss_mb_max", "renderer_rss_mb_overview", "slices_requests", "parse_s", "index_s",
                "server_peak_rss_mb", "page_errors")
        summary["ours_trace_view_bench"] = {k: ours_bench.get(k) for k in keep}
    if args.json_out:
        args.json_out.write_text(json.dumps({**summary, "raw_old": opens,
                                             "raw_ours": ours_probe and ours_probe["opens"]}, indent=1))
    print(json.dumps(summary, indent=1))
    print()
    print("| viewer | open Trace tab -> drawn, s (each open) | zoom/pan: input -> final picture, p50 / p95 / max ms | "
          "input -> first changed frame, p50 / p95 ms | longest frame p50 / max ms | JS heap used MB: max (after GC) | "
          "renderer RSS MB: max (on Overview) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, f in (("old 0.4.3", summary["old"]), ("ours", summary.get("ours"))):
        if not f:
            continue
        print(f"| {name} | {' / '.join(f'{v:.2f}' for v in f['open_to_drawn_s'])} | "
              f"{f['settled_ms']['p50']:.0f} / {f['settled_ms']['p95']:.0f} / {f['settled_ms']['max']:.0f} | "
              f"{f['first_drawn_frame_ms']['p50']:.0f} / {f['first_drawn_frame_ms']['p95']:.0f} | "
              f"{f['longest_frame_ms']['p50']:.1f} / {f['longest_frame_ms']['max']:.1f} | "
              f"{f['heap_used_mb_max']:.0f} ({f['heap_used_mb_after_gc']:.0f}) | "
              f"{f['renderer_rss_mb_max']:.0f} ({f['renderer_rss_mb_overview']:.0f}) |")
    if ours_bench:
        o = ours_bench
        print(f"\nours, trace_view_bench.py on the same file: first paint {o['first_paint_s']:.2f} s, "
              f"{o['slices_requests']} slices requests, server p50 / p95 {o['server_ms']['p50']:.0f} / "
              f"{o['server_ms']['p95']:.0f} ms, step -> ready p50 / p95 {o['step_to_ready_ms']['p50']:.0f} / "
              f"{o['step_to_ready_ms']['p95']:.0f} ms, JS heap max {o['heap_used_mb_max']:.1f} MB, "
              f"renderer RSS max {o['renderer_rss_mb_max']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
