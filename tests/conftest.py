"""Shared fixtures: paths to the real traces, and writers for hand-made tiny traces."""

import collections
import contextlib
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
SHARED_TRACES = Path(os.environ.get("TB_PLUGIN_SHARED_TRACES", REPO.parent / "shared" / "traces"))


def shared_trace(run, name=None):
    """Path of a real trace in ../shared/traces; the test is skipped (with why) if absent."""
    folder = SHARED_TRACES / run
    if not folder.is_dir():
        pytest.skip(f"real trace folder {folder} is not available (../shared/traces missing)")
    files = sorted(folder.glob("*.json.gz")) if name is None else [folder / name]
    return files[0] if name is None else files[0]


def write_trace(path, events, gz=False, **top_level):
    """Write a hand-made trace: `events` list plus top-level keys; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = json.dumps({"schemaVersion": 1, **top_level, "traceEvents": events}).encode()
    path.write_bytes(gzip.compress(doc) if gz else doc)
    return path


def op(name, ts, dur, tid=1, pid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def runtime(name, ts, dur, correlation, external_id, tid=1, pid=1, cat="cuda_runtime"):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": correlation, "External id": external_id}}


def kernel(name, ts, dur, correlation, device=0, stream=7, cat="kernel", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": correlation, "device": device, "stream": stream, **args}}


def memory(ts, nbytes, addr, total_allocated, total_reserved, device_type=1, device_id=0, tid=1, pid=1):
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": pid, "tid": tid, "ts": ts,
            "args": {"Device Type": device_type, "Device Id": device_id, "Addr": addr, "Bytes": nbytes,
                     "Total Allocated": total_allocated, "Total Reserved": total_reserved}}


def raw_events(path):
    """The trace's events decoded by the standard library: an independent view of the file."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data)
    return doc if isinstance(doc, list) else doc["traceEvents"]


TENSORBOARD = Path(sys.executable).with_name("tensorboard")


def key_averages_counts(ops):
    """Calls per operator name in our ops table as `prof.key_averages()` counts them: it drops
    a child that has its parent's name and no sibling (torch's own merge of such pairs)."""
    parent = ops["parent"].to_numpy()
    names = ops["name"].astype(str).to_numpy()
    child_count = collections.Counter(parent[parent >= 0].tolist())
    counts = collections.Counter(names.tolist())
    for i in range(len(ops)):
        if parent[i] >= 0 and names[parent[i]] == names[i] and child_count[parent[i]] == 1:
            counts[names[i]] -= 1
    return counts


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tensorboard(logdir, log_path, path_prefix="", extra_args=()):
    """A real `tensorboard` on 127.0.0.1 at a free port, without the disk cache; yields its
    base URL once it answers; stopped by its pid (SIGTERM, then SIGKILL)."""
    if not TENSORBOARD.exists():
        pytest.skip(f"no tensorboard executable beside {sys.executable}")
    port = free_port()
    args = [str(TENSORBOARD), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port),
            "--profiler_cache_dir", "", *extra_args]
    if path_prefix:
        args += ["--path_prefix", path_prefix]
    log = open(log_path, "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}{path_prefix}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/data/plugins_listing", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                assert proc.poll() is None, Path(log_path).read_text(errors="replace")
                assert time.monotonic() < deadline, "tensorboard did not start within 60 s"
                time.sleep(0.2)
        yield base
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@contextlib.contextmanager
def deep_directory(parent, levels, name="d"):
    """`parent/name/name/...`, `levels` deep, made and removed one level at a time through
    directory descriptors: `os.makedirs` and `shutil.rmtree` recurse once per level and stop
    at Python's recursion limit (~1,000) on such a tree. Yields the top directory."""
    top = os.open(parent, os.O_RDONLY)
    current = top
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=current)
            below = os.open(name, os.O_RDONLY, dir_fd=current)
            if current != top:
                os.close(current)
            current = below
        if current != top:
            os.close(current)
        yield Path(parent) / name
    finally:
        os.close(top)
        # Bottom up, by path (2 characters a level: within PATH_MAX for a few thousand levels).
        for depth in range(levels, 0, -1):
            level = os.path.join(parent, *[name] * depth)
            with contextlib.suppress(FileNotFoundError):
                for entry in os.scandir(level):
                    if not entry.is_dir(follow_symlinks=False):
                        os.unlink(entry.path)
                os.rmdir(level)
