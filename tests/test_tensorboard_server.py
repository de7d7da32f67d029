"""The plugin inside TensorBoard: a real `tensorboard` process over HTTP on loopback, and what
building the plugin costs TensorBoard's start-up."""

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from .conftest import SAMPLES, deep_directory, op, tensorboard, write_trace

def get_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, json.loads(response.read())


@pytest.fixture(params=["", "/tb"], ids=["root", "path_prefix"])
def server(request, tmp_path):
    with tensorboard(SAMPLES, tmp_path / "tensorboard.log", path_prefix=request.param) as base:
        yield base


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


_START_UP = """
import argparse, sys
from tensorboard.plugins import base_plugin
from werkzeug.test import Client
from tb_plugin.plugin import ProfilerPluginLoader

HEAVY = ("pandas", "polars", "msgspec", "tb_plugin.profile", "tb_plugin.api", "tb_plugin.trace.build")
flags = argparse.Namespace(reload_interval=5, profiler_cache_dir="", profiler_max_memory_mb=4096)
plugin = ProfilerPluginLoader().load(base_plugin.TBContext(logdir=sys.argv[1], flags=flags))
apps = plugin.get_plugin_apps()
plugin.store.wait_for_scan(30)
print(plugin.is_active(), sorted(m for m in HEAVY if m in sys.modules))
response = Client(apps["/runs"]).get("/runs")
print(response.status_code, sorted(m for m in HEAVY if m in sys.modules))
plugin.store.stop()
"""


def test_tensorboard_start_up_imports_no_model_library_until_a_request(tmp_path):
    """TensorBoard builds every installed plugin at start-up, also for users who never open
    ours: building it, listing its routes and `is_active` import none of the libraries the
    views need; the first request does."""
    done = subprocess.run([sys.executable, "-c", _START_UP, str(SAMPLES)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before == "True []"
    assert after.startswith("200 ") and "pandas" in after and "tb_plugin.api" in after


def _request(url, method="GET", timeout=30):
    """(status, headers, body) of one request; error statuses are answers too."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def _answer(url, timeout=60):
    """Ask until the profile is parsed (202 while it loads); (status, headers, body)."""
    deadline = time.monotonic() + timeout
    while (reply := _request(url))[0] == 202:
        assert time.monotonic() < deadline, url
        time.sleep(0.2)
    return reply


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory):
    """A real tensorboard over a log directory as an unlucky user or an attacker leaves it:
    a run directory and a worker file named with bytes that are not UTF-8, a directory
    nested 1,400 levels, and `*.pt.trace.json` links out of the log directory to a secret
    that starts like a trace (plain and gzip) and to a real trace."""
    base = tmp_path_factory.mktemp("hostile")
    root, outside = base / "logdir", base / "outside"
    steps = [op("ProfilerStep#1", 0, 100, cat="user_annotation"), op("aten::mm", 10, 50)]
    shutil.copytree(SAMPLES / "cpu_cnn", root / "cpu_cnn")
    with open(os.fsencode(root) + b"/notes\xe9.txt", "wb") as stray:  # not a trace, not a run
        stray.write(b"lr 0.1")
    write_trace(os.fsdecode(os.fsencode(root) + b"/run\xff/worker0.pt.trace.json"), steps)
    write_trace(os.fsdecode(os.fsencode(root) + b"/mixed/rank\xfe.pt.trace.json"), steps)
    outside.mkdir()
    (outside / "secret.json").write_bytes(SECRET_TRACE)
    (outside / "secret.json.gz").write_bytes(gzip.compress(SECRET_TRACE))
    real = write_trace(outside / "real.pt.trace.json", steps)
    (root / "linked").mkdir()
    os.symlink(outside / "secret.json", root / "linked" / "leak.pt.trace.json")
    os.symlink(outside / "secret.json.gz", root / "linked" / "leakgz.pt.trace.json.gz")
    os.symlink(real, root / "linked" / "real.pt.trace.json")
    with deep_directory(root, 1400):
        with tensorboard(root, base / "tensorboard.log") as url:
            yield url + PLUGIN_DATA, real


SECRET_TRACE = b'{"traceEvents": [SECRET not json]}'
PLUGIN_DATA = "/data/plugin/pytorch_profiler"


def test_names_not_utf8_are_listed_escaped_and_load_over_http(hostile_server):
    """One name that is not UTF-8 made /runs and /workers answer 500 for every run."""
    data, _ = hostile_server
    status, _, body = _request(f"{data}/runs")
    assert status == 200
    runs = json.loads(body)
    by_name = {r["name"]: r for r in runs["runs"]}
    assert set(by_name) == {"cpu_cnn", "linked", "mixed", "run\\xff"}
    assert by_name["mixed"]["workers"] == ["rank\\xfe"]
    for run, worker in (("run\\xff", "worker0"), ("mixed", "rank\\xfe"), ("cpu_cnn", "worker0")):
        query = urllib.parse.urlencode({"run": run, "worker": worker})
        status, _, body = _request(f"{data}/workers?{query}")
        assert status == 200 and worker in json.loads(body)["workers"]
        status, _, body = _answer(f"{data}/overview?{query}")
        assert status == 200, body
        status, _, body = _answer(f"{data}/operators?{query}&format=csv")
        assert status == 200 and b"aten::" in body
    status, headers, body = _request(f"{data}/trace_file?run=mixed&worker=rank%5Cxfe")
    assert status == 200 and json.loads(body)["traceEvents"]
    assert headers["Content-Disposition"] == "attachment; filename*=UTF-8''rank%FE.pt.trace.json"


def test_a_tree_1400_levels_deep_stops_nothing_and_is_reported(hostile_server):
    data, _ = hostile_server
    runs = json.loads(_request(f"{data}/runs")[2])
    assert "cpu_cnn" in {r["name"] for r in runs["runs"]} and runs["scan_error"] == ""
    assert [s["reason"] for s in runs["scan_errors"]] == ["more than 64 levels below the log directory: not scanned"]
    assert runs["scan_errors"][0]["path"] == "/".join(["d"] * 65)


def test_trace_file_serves_no_secret_through_a_link_even_if_it_starts_like_a_trace(hostile_server):
    """`{"traceEvents": [SECRET not json]}` behind a link came back whole with 200 while
    /info said 422; a real trace linked in is still served byte for byte. Error replies name
    the file relative to the log directory (trace_file gave the absolute path)."""
    data, real = hostile_server
    for worker in ("leak", "leakgz"):
        status, _, body = _request(f"{data}/trace_file?run=linked&worker={worker}")
        assert status == 422 and b"SECRET" not in body
        reply = json.loads(body)
        assert reply["path"].startswith(f"linked/{worker}.pt.trace.json"), reply
        assert "not a trace" in reply["reason"]
        status, _, body = _answer(f"{data}/info?run=linked&worker={worker}")
        assert status == 422 and json.loads(body)["path"] == reply["path"]
    status, _, body = _request(f"{data}/trace_file?run=linked&worker=real")
    assert status == 200 and body == real.read_bytes()


def test_other_methods_answer_405_with_allow(hostile_server):
    data, _ = hostile_server
    for path in ("/runs", "/overview?run=cpu_cnn&worker=worker0", "/trace_file?run=cpu_cnn&worker=worker0", "/index.js"):
        for method in ("POST", "PUT", "DELETE"):
            status, headers, body = _request(f"{data}{path}", method=method)
            assert status == 405, (path, method)
            assert headers["Allow"] == "GET, HEAD", (path, method)
            assert json.loads(body)["error"] == "method_not_allowed"
