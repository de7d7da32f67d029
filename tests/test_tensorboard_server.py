"""The installed plugin inside a real `tensorboard` process, over real HTTP on loopback."""

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

from .conftest import SAMPLES

TENSORBOARD = Path(sys.executable).with_name("tensorboard")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, json.loads(response.read())


@pytest.fixture(params=["", "/tb"], ids=["root", "path_prefix"])
def server(request, tmp_path):
    if not TENSORBOARD.exists():
        pytest.skip(f"no tensorboard executable beside {sys.executable}")
    port = free_port()
    args = [str(TENSORBOARD), "--logdir", str(SAMPLES), "--host", "127.0.0.1", "--port", str(port)]
    if request.param:
        args += ["--path_prefix", request.param]
    log = open(tmp_path / "tensorboard.log", "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}{request.param}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get_json(f"{base}/data/plugins_listing")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                assert proc.poll() is None, (tmp_path / "tensorboard.log").read_text()
                assert time.monotonic() < deadline, "tensorboard did not start"
                time.sleep(0.2)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_plugin_listed_active_and_serves_sample_runs(server):
    deadline = time.monotonic() + 30
    while True:  # becomes active once the background scan found the samples
        _, listing = get_json(f"{server}/data/plugins_listing")
        if listing["pytorch_profiler"]["enabled"]:
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    entry = listing["pytorch_profiler"]
    assert entry["tab_name"] == "PyTorch Profiler"
    assert entry["loading_mechanism"]["module_path"].endswith("/data/plugin/pytorch_profiler/index.js")
    _, runs = get_json(f"{server}/data/plugin/pytorch_profiler/runs")
    expected = sorted(p.name for p in SAMPLES.iterdir() if p.is_dir() and any(p.glob("*.pt.trace.json*")))
    assert [r["name"] for r in runs["runs"]] == expected
    with urllib.request.urlopen(f"{server}/data/plugin/pytorch_profiler/index.js", timeout=5) as response:
        assert b"render" in response.read()


def test_info_of_gpu_sample_over_http(server):
    url = f"{server}/data/plugin/pytorch_profiler/info?run=gpu_resnet50_v100&worker=worker0"
    deadline = time.monotonic() + 60
    while True:
        status, body = get_json(url)
        if status == 200:
            break
        assert status == 202 and body["loading"] is True
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert body["device_type"] == "CUDA"
    assert body["steps"] == [5, 6, 7, 8, 9, 10]
    assert body["devices"][0]["name"].startswith("Tesla V100")
