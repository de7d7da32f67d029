#!/usr/bin/env python3
"""Benchmark `tb_plugin.load` and the Profile views against `orjson.loads` on the same JSON.

Why this script exists: the project's performance targets are relative to the cost of just
parsing the trace JSON, so the baseline (`orjson.loads`) and the product (`tb_plugin.load`
plus every view) are measured side by side, on the same uncompressed bytes, in the same run:

- ``tb_plugin.load`` time at most 0.7x ``orjson.loads`` time on the same file;
- peak RSS at most 2.5x the JSON size.

Every measurement runs in a fresh child interpreter (this script re-invoked with a hidden
``--_child`` argument), because RSS is monotonic within a process: the child's peak RSS at
the end (``VmHWM``; see `_peak_rss_bytes` for why not ``ru_maxrss``) is the peak of that one
measurement alone, interpreter and imports included. Inside the child the timed call is
repeated ``--repeat`` times and the best time is kept (the first call pays one-off costs such
as lazy imports and cold caches, which are not what we want to compare). Nothing from one
repeat is kept alive into the next, but memory allocators (glibc's per-thread arenas,
polars' jemalloc) keep part of what was freed, so later repeats can peak higher than the
first: the memory target is checked against the peak read right after the first load (what
a user loading a trace once sees), and the child's whole peak (all repeats and views) is
reported beside it.

Gzip decompression is kept out of both timings: ``.json.gz`` inputs are inflated once into a
temporary directory (``tempfile``, so ``TMPDIR`` decides where) and both sides read the
plain ``.json``. ``orjson.loads`` is timed on bytes already in memory; ``tb_plugin.load`` is
timed from its path, so its figure includes reading the (page-cached) file.

Real traces are at most ~54 MB, so a larger synthetic trace (``--synth-mb``, default 220 MB)
is built by replicating the profiler steps of a real GPU trace; see `synthesize`.
It is cached in ``--cache-dir`` so reruns skip the synthesis.

Usage::

    PYTHONPATH=. python benchmarks/bench.py                 # all shared traces + synthetic
    PYTHONPATH=. python benchmarks/bench.py a.json.gz --synth-mb 0 --repeat 5
    PYTHONPATH=. python benchmarks/bench.py --cprofile      # also: where load's time goes
"""

import argparse
import bisect
import gzip
import hashlib
import inspect
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import history  # noqa: E402  (benchmarks/ is not a package)
DEFAULT_TRACES_DIR = REPO_ROOT.parent / "shared" / "traces"
# Answers of the old plugin, not traces: never benchmarked.
EXCLUDED_DIRS = {"reference_torch_tb_profiler_0.4.3"}
DEFAULT_SYNTH_SOURCE = DEFAULT_TRACES_DIR / "v100_ddp_nccl_memory" / "rank1.pt.trace.json.gz"
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "tb_plugin_bench"

# The views a Profile is expected to grow; the ones not there yet are skipped and reported.
VIEWS = ["info", "steps", "overview", "gpu_summary", "operators", "kernels", "memory_stats", "modules"]

# Project targets (see module docstring).
TARGET_LOAD_RATIO = 0.7
TARGET_RSS_RATIO = 2.5

# Bump when the synthesiser's output changes, so stale cache entries are not reused.
SYNTH_VERSION = 1
# Ids that link events to each other (op -> launch -> kernel, flow arrows, autograd pairs,
# python stacks), top-level or in args; offset per copy so every link stays unique.
RENUMBERED = ("id", "External id", "external id", "correlation", "Ev Idx", "Sequence number",
              "Python id", "Python parent id")
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
FLOW_PHASES = ("s", "t", "f")

MB = 1e6  # sizes are reported in decimal megabytes, RSS included, so ratios are unit-free


def log(message):
    """Progress goes to stderr so stdout holds only the results."""
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# Synthetic large trace
# --------------------------------------------------------------------------------------

def _step_units(events):
    """Group the timed events of a trace into one list of event indices per ProfilerStep.

    Host events belong to the step whose [start, end) holds their `ts`. Device events and
    flow arrows would be misplaced by time (a kernel often runs after its step ended), so
    every event sharing a `correlation`, and every flow event sharing a (cat, id), follows
    the earliest event of its group - the launch, which is on the host inside the step. So
    a copied step carries its kernels and flows along and no link crosses copies.

    Returns (step numbers, [indices into `events` of each step]); events outside every step
    are in no unit (they stay in the original part of the synthetic trace only).
    """
    ranges = sorted(
        (e["ts"], e["ts"] + (e.get("dur") or 0), int(m.group(1)))
        for e in events
        if e.get("ph") == "X" and isinstance(e.get("name"), str)
        and (m := STEP_NAME.match(e["name"])) and isinstance(e.get("ts"), (int, float))
    )
    # A step can be recorded twice (host annotation and its GPU copy): keep the first per number.
    seen, steps = set(), []
    for start, end, number in ranges:
        if number not in seen:
            seen.add(number)
            steps.append((start, end, number))
    if not steps:
        return [], []
    starts = [s[0] for s in steps]

    def by_time(ts):
        i = bisect.bisect_right(starts, ts) - 1
        return i if i >= 0 and ts < steps[i][1] else None

    timed = [i for i, e in enumerate(events) if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    step_of = {i: by_time(events[i]["ts"]) for i in timed}

    def link_key(e):
        args = e.get("args")
        if args and "correlation" in args:
            return ("corr", args["correlation"])
        if e.get("ph") in FLOW_PHASES and "id" in e:
            return ("flow", e.get("cat"), e["id"])
        return None

    # The earliest member of each link group decides the group's step.
    first = {}
    for i in timed:
        key = link_key(events[i])
        if key is not None:
            best = first.get(key)
            if best is None or events[i]["ts"] < events[best]["ts"]:
                first[key] = i
    units = [[] for _ in steps]
    for i in timed:
        key = link_key(events[i])
        step = step_of[first[key]] if key is not None else step_of[i]
        if step is not None:
            units[step].append(i)
    return [s[2] for s in steps], units


def _id_range(events):
    """One more than the largest integer link id, so copy k can add k * range to each id."""
    top = 0
    for e in events:
        for holder in (e, e.get("args") or {}):
            for key in RENUMBERED:
                value = holder.get(key)
                if type(value) is int:
                    top = max(top, value)
    return top + 1


def _shifted_copy(events, dt, id_offset, step_offset):
    """Copies of the event dicts moved by `dt` µs, ids and ProfilerStep numbers renumbered.

    The reference semantics of the synthesiser; `_shifted_text` does the same on JSON text.
    """
    out = []
    for e in events:
        c = dict(e)
        c["ts"] = e["ts"] + dt
        for key in RENUMBERED:
            if type(c.get(key)) is int and c[key] >= 0:
                c[key] += id_offset
        args = e.get("args")
        if args:
            new_args = None
            for key in RENUMBERED:
                value = args.get(key)
                if type(value) is int and value >= 0:
                    if new_args is None:
                        new_args = dict(args)
                    new_args[key] = value + id_offset
            if new_args is not None:
                c["args"] = new_args
        name = c.get("name")
        if isinstance(name, str) and (m := STEP_NAME.match(name)):
            c["name"] = f"ProfilerStep#{int(m.group(1)) + step_offset}"
        out.append(c)
    return out


# Matches, in event JSON text: a ts (integer part), a renumbered id, a ProfilerStep number.
_TEXT_FIELDS = re.compile(
    rb'"ts": ?(\d+)(?=[.,\s}])'
    rb'|"(' + b"|".join(re.escape(k.encode()) for k in RENUMBERED) + rb')": ?(\d+)(?=[,\s}\]])'
    rb'|"ProfilerStep#(\d+)"'
)


def _shifted_text(text, dt, id_offset, step_offset):
    """`_shifted_copy` on the JSON text of events, keeping the source's exact layout."""
    def repl(m):
        if m.group(1) is not None:
            return b'"ts": %d' % (int(m.group(1)) + dt)
        if m.group(2) is not None:
            return b'"%s": %d' % (m.group(2), int(m.group(3)) + id_offset)
        return b'"ProfilerStep#%d"' % (int(m.group(4)) + step_offset)

    return _TEXT_FIELDS.sub(repl, text)


def _event_slices(raw, events):
    """The exact bytes of each event in `raw`, or None when the layout is not Kineto's.

    Kineto writes each event as ``\\n  {`` ... ``\\n  }`` at two-space indentation, and JSON
    strings cannot hold a raw newline, so those markers are structural. Keeping the source's
    text (not re-serialising) keeps its whitespace, hence its events per MB: RSS / JSON size
    of the synthetic trace stays comparable to real traces.
    """
    head = raw.find(b'"traceEvents"')
    open_at = raw.find(b"[", head) if head >= 0 else (raw.find(b"[") if raw.lstrip()[:1] == b"[" else -1)
    close_at = raw.find(b"\n  ]", open_at)
    if open_at < 0 or close_at < 0:
        return None
    starts = [m.start() for m in re.finditer(rb"\n  \{", raw[:close_at])]
    starts = [s for s in starts if s > open_at]
    ends = [m.end() for m in re.finditer(rb"\n  \}", raw[:close_at + 1])]
    ends = [e for e in ends if e > open_at]
    if len(starts) != len(events) or len(ends) != len(events):
        return None
    import orjson

    slices = [raw[s:e] for s, e in zip(starts, ends)]
    # Spot-check that the slices are the events, in order.
    for i in range(0, len(slices), max(1, len(slices) // 200)):
        if orjson.loads(slices[i]) != events[i]:
            return None
    return slices, ends[-1]


def synthesize(source, target_bytes, out_path):
    """Write a trace of at least `target_bytes` of JSON by replicating `source`'s steps.

    The original trace is kept whole; then, round after round, a copy of each ProfilerStep
    (with its kernels, memcpys, flows, memory events...) is appended, shifted in time by
    the trace's whole span per round (so copies never overlap each other or the original),
    with link ids offset per round (`RENUMBERED`) and ProfilerStep#N numbers continuing.
    It stops after the first step copy that reaches the size, so the result holds whole
    steps. A trace without ProfilerSteps is replicated whole, one copy per round.

    Copies are made on the source's JSON text, so the Kineto layout (and its bytes per
    event) is preserved; if the text cannot be split into events, everything is written
    as compact JSON instead (denser, so fewer events per MB), and the result says so.
    """
    import orjson

    raw = source.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = orjson.loads(raw)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    timed = [e for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    span = math.ceil(t1 - t0) + 1000  # whole µs, plus a 1 ms gap between rounds
    id_range = _id_range(events)
    numbers, units = _step_units(events)
    step_range = max(numbers) - min(numbers) + 1 if numbers else 0
    if not units:
        units = [[i for i, e in enumerate(events) if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]]

    split = _event_slices(raw, events)
    if split is not None:
        slices, insert_at = split
        head, tail = raw[:insert_at], raw[insert_at:]
        unit_text = [b",".join(slices[i] for i in unit) for unit in units]
        # The text path must agree with the reference semantics (checked on one step copy).
        probe = orjson.loads(b"[" + _shifted_text(unit_text[0], span, id_range, step_range) + b"]")
        if probe != _shifted_copy([events[i] for i in units[0]], span, id_range, step_range):
            split = None
    if split is None:
        log("synthetic trace: source layout not recognised, writing compact JSON")
        meta = {k: v for k, v in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else {}
        head = (orjson.dumps(meta)[:-1] + (b"," if meta else b"") + b'"traceEvents":[' if isinstance(doc, dict)
                else b"[") + orjson.dumps(events)[1:-1]
        tail = b"]}" if isinstance(doc, dict) else b"]"
        unit_text = [orjson.dumps([events[i] for i in unit])[1:-1] for unit in units]
    del raw, doc, events, timed

    tmp_path = out_path.with_suffix(".partial")
    copies = round_no = 0
    with open(tmp_path, "wb") as out:
        out.write(head)
        written = len(head) + len(tail)
        while written < target_bytes:
            round_no += 1
            for text in unit_text:
                if text:
                    chunk = _shifted_text(text, round_no * span, round_no * id_range, round_no * step_range)
                    out.write(b",")
                    out.write(chunk)
                    written += len(chunk) + 1
                copies += 1
                if written >= target_bytes:
                    break
        out.write(tail)
    os.replace(tmp_path, out_path)
    return {"step_copies": copies, "rounds": round_no, "steps_in_source": len(units),
            "layout": "kept" if split is not None else "compact"}


def synthetic_trace(source, target_mb, cache_dir):
    """Path of the cached synthetic trace for (source, size), building it when missing."""
    st = source.stat()
    key = hashlib.sha1(f"{SYNTH_VERSION}|{source.resolve()}|{st.st_size}|{st.st_mtime_ns}|{target_mb}"
                       .encode()).hexdigest()[:10]
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"synthetic_{target_mb:g}mb_{key}.pt.trace.json"
    if path.exists():
        log(f"synthetic trace: cached {path}")
        return path
    log(f"synthetic trace: building {target_mb:g} MB from {source} ...")
    started = time.perf_counter()
    info = synthesize(source, int(target_mb * MB), path)
    log(f"synthetic trace: {path.stat().st_size / MB:.1f} MB, {info['step_copies']} step copies "
        f"in {info['rounds']} rounds, layout {info['layout']}, {time.perf_counter() - started:.1f} s -> {path}")
    return path


# --------------------------------------------------------------------------------------
# Measurements, each in a fresh child process
# --------------------------------------------------------------------------------------

def _peak_rss_bytes():
    """This process's peak RSS since it started (exec), in bytes.

    Not `ru_maxrss`: on Linux that is carried over from the parent across fork + exec
    (the parent's RSS at fork time is folded into the child's rusage), so a child started
    by a parent holding 450 MB would report at least 450 MB. `VmHWM` belongs to the memory
    map that exec created, so it is the child's own peak.
    """
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _view_callables(profile_cls, names):
    """Split `names` into the zero-argument views Profile has and the ones it lacks (why)."""
    present, missing = [], {}
    for name in names:
        attr = inspect.getattr_static(profile_cls, name, None)
        if attr is None or name.startswith("_"):
            missing[name] = "not on Profile yet"
        elif isinstance(attr, property):
            present.append(name)
        elif callable(attr):
            params = list(inspect.signature(attr).parameters.values())[1:]  # drop self
            required = [p for p in params if p.default is p.empty
                        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if required:
                missing[name] = f"needs arguments ({', '.join(p.name for p in required)})"
            else:
                present.append(name)
        else:
            missing[name] = "not a method"
    return present, missing


def child_orjson(path, repeat):
    """Best `orjson.loads` time on the file's bytes (the read is not timed)."""
    import gc

    import orjson

    base = _peak_rss_bytes()
    data = Path(path).read_bytes()
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        doc = orjson.loads(data)
        best = min(best, time.perf_counter() - started)
        del doc
        gc.collect()
    return {"seconds": best, "base_rss": base, "peak_rss": _peak_rss_bytes()}


def child_load(path, repeat, views):
    """Best `tb_plugin.load` time, and best load+views time, on one uncompressed trace."""
    import gc

    sys.path.insert(0, str(REPO_ROOT))
    import tb_plugin
    import tb_plugin.python_api.profile  # noqa: F401  (the package imports it lazily: the base must include it)

    base = _peak_rss_bytes()
    present, missing = _view_callables(tb_plugin.Profile, views)
    is_property = {n: isinstance(inspect.getattr_static(tb_plugin.Profile, n), property) for n in present}
    best_load = best_total = float("inf")
    view_best = {name: float("inf") for name in present}
    errors = {}
    load_peak = None
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            profile = tb_plugin.load(path)
        except Exception as exc:  # report, do not crash the whole benchmark
            return {"error": f"load: {type(exc).__name__}: {exc}", "base_rss": base,
                    "peak_rss": _peak_rss_bytes(), "views": present, "missing_views": missing}
        load_s = time.perf_counter() - started
        load_peak = load_peak or _peak_rss_bytes()  # the first load's peak, before any view
        views_s = 0.0
        for name in present:
            result = None
            v_started = time.perf_counter()
            try:
                result = getattr(profile, name)  # a property is computed here...
                if not is_property[name]:
                    result = result()  # ...a method here
            except Exception as exc:
                errors[name] = f"{type(exc).__name__}: {exc}"
            elapsed = time.perf_counter() - v_started
            view_best[name] = min(view_best[name], elapsed)
            views_s += elapsed
            del result  # a view's answer must not inflate the next repeat's peak RSS
        best_load = min(best_load, load_s)
        best_total = min(best_total, load_s + views_s)
        del profile
        gc.collect()  # the next repeat must not hold two Profiles at once
    return {"seconds": best_load, "total_seconds": best_total, "view_seconds": view_best,
            "view_errors": errors, "views": present, "missing_views": missing,
            "base_rss": base, "load_peak_rss": load_peak, "peak_rss": _peak_rss_bytes()}


def child_cprofile(path, top):
    """cProfile one `tb_plugin.load`: top functions by cumulative and by own time."""
    import cProfile
    import pstats

    sys.path.insert(0, str(REPO_ROOT))
    import tb_plugin

    tb_plugin.load(path)  # warm-up: lazy imports and first-call costs are not the hotspots
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    tb_plugin.load(path)
    profiler.disable()
    wall = time.perf_counter() - started
    stats = pstats.Stats(profiler).stats

    def where(func):
        filename, line, name = func
        if filename == "~":
            return name  # a builtin, e.g. <method 'decode' of 'msgspec.json.Decoder' objects>
        for root in (str(REPO_ROOT) + os.sep, "site-packages" + os.sep):
            if root in filename:
                filename = filename.split(root, 1)[1]
                break
        return f"{filename}:{line}({name})"

    rows = [{"function": where(func), "ncalls": nc, "tottime": tt, "cumtime": ct}
            for func, (cc, nc, tt, ct, callers) in stats.items()]
    skip = ("cProfile", "child_cprofile")
    rows = [r for r in rows if not any(s in r["function"] for s in skip)]
    by_cum = sorted(rows, key=lambda r: -r["cumtime"])[:top]
    by_own = sorted(rows, key=lambda r: -r["tottime"])[:top]
    return {"wall": wall, "by_cumtime": by_cum, "by_tottime": by_own}


def run_child(kind, **params):
    """Run one measurement in a fresh interpreter; returns its JSON result."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--_child", json.dumps({"kind": kind, **params})],
        capture_output=True, text=True, env=env,
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        return {"error": f"child exited {proc.returncode}: {' | '.join(tail)}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _child_main(spec):
    spec = json.loads(spec)
    kind = spec.pop("kind")
    result = {"orjson": child_orjson, "load": child_load, "cprofile": child_cprofile}[kind](**spec)
    print(json.dumps(result))


# --------------------------------------------------------------------------------------
# Driver and report
# --------------------------------------------------------------------------------------

def code_version():
    """The repository commit measured, and whether tb_plugin/ had uncommitted changes."""
    def git(*args):
        try:
            return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True,
                                  text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:
        return "unknown commit (not a git checkout)"
    dirty = git("status", "--porcelain", "--", "tb_plugin")
    return f"commit {commit}" + (" + uncommitted changes in tb_plugin/" if dirty else "")


def default_traces(traces_dir):
    """Every `*.json.gz` under the shared traces folder, minus the reference answers."""
    found = sorted(p for p in traces_dir.rglob("*.json.gz")
                   if not EXCLUDED_DIRS.intersection(p.relative_to(traces_dir).parts))
    return found


def plain_json(path, tmp_dir):
    """An uncompressed copy of a `.json.gz` (in `tmp_dir`); a `.json` is used as it is."""
    raw = path.read_bytes()
    if raw[:2] != b"\x1f\x8b":
        return path
    out = Path(tmp_dir) / f"{len(list(Path(tmp_dir).iterdir())):03d}_{path.name[:-3]}"
    out.write_bytes(gzip.decompress(raw))
    return out


def label(path, traces_dir):
    try:
        return str(path.relative_to(traces_dir))
    except ValueError:
        return path.name


def fmt(value, spec):
    return "—" if value is None else format(value, spec)


def report_table(rows):
    """The results as a Markdown table (readable in a terminal, pasted as is into README)."""
    head = ["file", "JSON MB", "orjson s", "orjson MB/s", "load s", "load MB/s", "load/orjson",
            "load+views s", "(load+views)/orjson", "load peak RSS MB", "RSS/JSON",
            "RSS after imports MB", "(peak−imports)/JSON", "child peak RSS MB", "orjson peak RSS MB",
            "load ≤0.7x", "RSS ≤2.5x"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for r in rows:
        mb = r["bytes"] / MB
        oj, ld = r["orjson"], r["load"]
        o_s = oj.get("seconds")
        l_s = ld.get("seconds")
        t_s = ld.get("total_seconds")
        peak = ld.get("load_peak_rss")
        ratio = l_s / o_s if l_s and o_s else None
        rss_ratio = peak / r["bytes"] if peak else None
        cells = [
            r["label"], fmt(mb, ".2f"), fmt(o_s, ".4f"), fmt(mb / o_s if o_s else None, ".0f"),
            fmt(l_s, ".4f"), fmt(mb / l_s if l_s else None, ".0f"), fmt(ratio, ".2f"),
            fmt(t_s, ".4f"), fmt(t_s / o_s if t_s and o_s else None, ".2f"),
            fmt(peak / MB if peak else None, ".0f"), fmt(rss_ratio, ".1f"),
            fmt(ld.get("base_rss", 0) / MB or None, ".0f"),
            fmt((peak - ld["base_rss"]) / r["bytes"] if peak and ld.get("base_rss") else None, ".1f"),
            fmt((ld.get("peak_rss") or 0) / MB or None, ".0f"),
            fmt(oj.get("peak_rss", 0) / MB or None, ".0f"),
            "—" if ratio is None else ("met" if ratio <= TARGET_LOAD_RATIO else "**not met**"),
            "—" if rss_ratio is None else ("met" if rss_ratio <= TARGET_RSS_RATIO else "**not met**"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_cprofile(result, label_text, json_bytes):
    lines = [f"cProfile of one tb_plugin.load of {label_text} ({json_bytes / MB:.1f} MB JSON): "
             f"{result['wall']:.2f} s under the profiler (cProfile slows Python-level code more "
             f"than C code; use the shares, not the absolute times).", ""]
    for key, title in (("by_cumtime", "by cumulative time"), ("by_tottime", "by own time")):
        lines += [f"Top {len(result[key])} {title}:", "",
                  "| # | function | calls | own s | cumulative s | cum % |", "|---:|---|---:|---:|---:|---:|"]
        for i, r in enumerate(result[key], 1):
            fn = r["function"].replace("|", "\\|")
            lines.append(f"| {i} | `{fn}` | {r['ncalls']} | {r['tottime']:.3f} | {r['cumtime']:.3f} | "
                         f"{100 * r['cumtime'] / result['wall']:.0f}% |")
        lines.append("")
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Time tb_plugin.load (+ every Profile view) against orjson.loads on the same "
                    "trace JSON, with peak RSS per measurement from a fresh child process.",
        epilog="Targets: load <= 0.7x orjson.loads time; peak RSS <= 2.5x JSON size. Temporary "
               "uncompressed copies go to tempfile's directory (set TMPDIR to move them).")
    parser.add_argument("traces", nargs="*", type=Path,
                        help=f"trace files (.json or .json.gz); default: every *.json.gz under "
                             f"{DEFAULT_TRACES_DIR} except {', '.join(sorted(EXCLUDED_DIRS))}")
    parser.add_argument("--repeat", type=int, default=3, help="repeats per measurement, best kept (default 3)")
    parser.add_argument("--synth-mb", type=float, default=220,
                        help="size of the synthetic trace added to the list, in MB of JSON; 0 = none (default 220)")
    parser.add_argument("--synth-source", type=Path, default=DEFAULT_SYNTH_SOURCE,
                        help="real trace whose steps are replicated (default: %(default)s)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR,
                        help="where the synthetic trace is cached (default: %(default)s)")
    parser.add_argument("--cprofile", action="store_true",
                        help="also cProfile one tb_plugin.load of the largest file and list the hotspots")
    parser.add_argument("--cprofile-top", type=int, default=12, help="functions listed per hotspot table (default 12)")
    parser.add_argument("--json-out", type=Path, help="also write all raw results to this JSON file")
    parser.add_argument("--no-record", dest="record", action="store_false",
                        help="do not write the figures to benchmarks/results/bench/ nor compare them "
                             "with the previous run's (history.py)")
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args._child:
        _child_main(args._child)
        return 0

    traces = [p.resolve() for p in args.traces] or default_traces(DEFAULT_TRACES_DIR)
    missing = [p for p in traces if not p.is_file()]
    if missing:
        log(f"error: no such file: {', '.join(map(str, missing))}")
        return 2

    sys.path.insert(0, str(REPO_ROOT))
    import tb_plugin

    present, missing_views = _view_callables(tb_plugin.Profile, VIEWS)
    print(f"tb_plugin {tb_plugin.__version__} at {code_version()}; Python {sys.version.split()[0]}")
    print(f"views measured: {', '.join(present) or 'none'}")
    for name, why in missing_views.items():
        print(f"view skipped: {name} ({why})")

    rows = []
    with tempfile.TemporaryDirectory(prefix="tb_plugin_bench_") as tmp_dir:
        inputs = [(label(p, DEFAULT_TRACES_DIR), p) for p in traces]
        if args.synth_mb > 0:
            synth = synthetic_trace(args.synth_source.resolve(), args.synth_mb, args.cache_dir.expanduser())
            inputs.append((f"synthetic: {label(args.synth_source, DEFAULT_TRACES_DIR)} steps ×N", synth))
        for text, path in inputs:
            json_path = plain_json(path, tmp_dir)
            size = json_path.stat().st_size
            log(f"{text}: {size / MB:.2f} MB JSON ...")
            oj = run_child("orjson", path=str(json_path), repeat=args.repeat)
            ld = run_child("load", path=str(json_path), repeat=args.repeat, views=VIEWS)
            for what, res in (("orjson", oj), ("load", ld)):
                if "error" in res:
                    print(f"{text}: {what} failed: {res['error']}")
            for name, err in ld.get("view_errors", {}).items():
                print(f"{text}: view {name} failed: {err}")
            rows.append({"label": text, "path": str(path), "json_path": str(json_path),
                         "bytes": size, "orjson": oj, "load": ld})

        print()
        print(report_table(rows))
        print()
        if present:
            print("Best time per view (s):")
            print()
            print("| file | " + " | ".join(present) + " |")
            print("|---|" + "---:|" * len(present))
            for r in rows:
                vs = r["load"].get("view_seconds", {})
                print(f"| {r['label']} | " + " | ".join(fmt(vs.get(n), ".4f") for n in present) + " |")
            print()

        result = {"rows": rows, "views": present, "missing_views": missing_views, "repeat": args.repeat}
        if args.cprofile and rows:
            largest = max(rows, key=lambda r: r["bytes"])
            log(f"cProfile of tb_plugin.load on {largest['label']} ...")
            prof = run_child("cprofile", path=largest["json_path"], top=args.cprofile_top)
            if "error" in prof:
                print(f"cProfile failed: {prof['error']}")
            else:
                print(report_cprofile(prof, largest["label"], largest["bytes"]))
            result["cprofile"] = {"file": largest["label"], **prof}

    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1, default=str))
    if args.record:
        print(history.report(*history.record("bench", bench_figures(rows), context={
            "code": code_version(), "repeat": args.repeat, "python": sys.version.split()[0]})))
    return 0


def bench_figures(rows):
    """The lower-is-better figures `history` keeps of a run: per file, the seconds of load,
    load+views and each view, and load and load+views relative to orjson in the same run."""
    figures = {}
    for r in rows:
        oj, ld = r["orjson"].get("seconds"), r["load"]
        if ld.get("seconds") is None:
            continue
        figures[f"{r['label']}: load s"] = ld["seconds"]
        figures[f"{r['label']}: load+views s"] = ld["total_seconds"]
        if oj:
            figures[f"{r['label']}: load / orjson"] = ld["seconds"] / oj
            figures[f"{r['label']}: (load+views) / orjson"] = ld["total_seconds"] / oj
        if ld.get("load_peak_rss"):
            figures[f"{r['label']}: load peak RSS / JSON"] = ld["load_peak_rss"] / r["bytes"]
        for name, seconds in ld.get("view_seconds", {}).items():
            figures[f"{r['label']}: view {name} s"] = seconds
    return figures


if __name__ == "__main__":
    sys.exit(main())
