"""The corpus of bad traces (tests/data/bad, made by make_bad_traces.py) in one logdir next
to good runs: each bad file answers its documented error, the good runs keep working."""

import json
import os
import shutil
import time
from pathlib import Path

import pytest

import tb_plugin
from tb_plugin.server.loading import Loading, RunStore

from .helpers import PREFIX, SAMPLES, make_client, op, wait_ready, write_trace

BAD = Path(__file__).parent / "data" / "bad"
EXPECTED = json.loads((BAD / "expected.json").read_text())


def run_name(file_name):
    return "bad_" + file_name.split(".")[0]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed_logdir")
    shutil.copytree(SAMPLES / "cpu_cnn", root / "good_cpu")
    for name in EXPECTED:
        target = root / run_name(name) / ("worker0.pt.trace.json" + (".gz" if name.endswith(".gz") else ""))
        target.parent.mkdir()
        shutil.copy(BAD / name, target)
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    yield client
    plugin.store.stop()


def test_corpus_is_current():
    """expected.json lists exactly the committed files (rerun make_bad_traces.py if not)."""
    assert set(EXPECTED) == {p.name for p in BAD.iterdir() if p.name != "expected.json"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_trace_answers_its_documented_error(served, name):
    expected = EXPECTED[name]
    response = wait_ready(served, f"run={run_name(name)}&worker=worker0")
    assert response.status_code == expected["status"], response.get_json()
    if expected["status"] != 200:
        body = response.get_json()
        assert body["error"] == "bad_trace" and expected["reason"] in body["reason"]
    else:
        # accepted files still answer every view without a server error
        for route in ("overview", "operators", "kernels", "steps"):
            assert served.get(f"{PREFIX}/{route}?run={run_name(name)}&worker=worker0").status_code == 200, route


def test_good_run_unaffected_and_errors_listed(served):
    for name in EXPECTED:
        wait_ready(served, f"run={run_name(name)}&worker=worker0")
    assert wait_ready(served, "run=good_cpu&worker=worker0").get_json()["steps"] == [2, 3]
    runs = {r["name"]: r for r in served.get(f"{PREFIX}/runs").get_json()["runs"]}
    for name, expected in EXPECTED.items():
        errors = runs[run_name(name)]["errors"]
        assert bool(errors) == (expected["status"] != 200), name


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e["status"] != 200))
def test_loader_raises_trace_error(name):
    with pytest.raises(tb_plugin.TraceError) as err:
        tb_plugin.load(BAD / name)
    assert EXPECTED[name]["reason"] in err.value.reason and name in str(err.value)


def test_file_still_being_written_is_retried(tmp_path):
    """A failure on a file modified seconds ago is shown, and parsed again a little later even
    if size and mtime did not change (the writer may not have flushed yet)."""
    path = write_trace(tmp_path / "run" / "w.pt.trace.json", [])
    path.write_bytes(b'{"traceEvents": [')
    store = RunStore(str(tmp_path), rescan_seconds=3600, retry_seconds=0.2)
    store.wait_for_scan(30)
    with pytest.raises(tb_plugin.TraceError):
        store.profile_blocking("run", "w", 1, timeout=30)
    with pytest.raises(tb_plugin.TraceError):  # the error is shown meanwhile
        store.profile("run", "w", 1)
    time.sleep(0.3)
    assert isinstance(store.profile("run", "w", 1), Loading)  # then parsed again
    write_trace(path, [op("ProfilerStep#4", 0, 5, cat="user_annotation")])
    assert store.profile_blocking("run", "w", 1, timeout=30).model.steps["step"].tolist() == [4]
    store.stop()


def test_settled_broken_file_is_not_reparsed(tmp_path):
    path = write_trace(tmp_path / "run" / "w.pt.trace.json", [])
    path.write_bytes(b"{")
    old = time.time() - 3600
    os.utime(path, (old, old))
    store = RunStore(str(tmp_path), rescan_seconds=3600, retry_seconds=0.0)
    store.wait_for_scan(30)
    with pytest.raises(tb_plugin.TraceError):
        store.profile_blocking("run", "w", 1, timeout=30)
    for _ in range(3):
        with pytest.raises(tb_plugin.TraceError):
            store.profile("run", "w", 1)
    store.stop()


def test_load_run_says_when_there_is_no_directory(tmp_path):
    # Both used to answer "no trace files (*.pt.trace.json[.gz]) in this directory".
    trace = write_trace(tmp_path / "run" / "w.pt.trace.json", [op("a", 0, 1)])
    with pytest.raises(tb_plugin.TraceError) as missing:
        tb_plugin.load_run(tmp_path / "nowhere")
    assert missing.value.path == str(tmp_path / "nowhere") and missing.value.reason == "no such directory"
    with pytest.raises(tb_plugin.TraceError) as a_file:
        tb_plugin.load_run(trace)
    assert a_file.value.path == str(trace) and a_file.value.reason.startswith("not a directory")
    with pytest.raises(tb_plugin.TraceError) as empty:
        tb_plugin.load_run(tmp_path)
    assert "no trace files" in empty.value.reason
    assert tb_plugin.load_run(tmp_path / "run").workers == ["w"]


def test_trace_file_linked_in_from_outside_serves_exactly_what_loads(tmp_path):
    """Each corpus file as the target of a `*.pt.trace.json` link from a run directory into a
    folder outside the log directory (the corpus itself): /trace_file hands it out, byte for
    byte, exactly when it loads as a trace, and otherwise answers 422 with none of its bytes
    (a file whose head held "traceEvents" was streamed out whole before)."""
    root = tmp_path / "logdir"
    for name in EXPECTED:
        link = root / run_name(name) / ("worker0.pt.trace.json" + (".gz" if name.endswith(".gz") else ""))
        link.parent.mkdir(parents=True)
        os.symlink(BAD / name, link)
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    try:
        for name, expected in sorted(EXPECTED.items()):
            response = client.get(f"{PREFIX}/trace_file?run={run_name(name)}&worker=worker0")
            if expected["status"] == 200:
                assert response.status_code == 200 and response.data == (BAD / name).read_bytes(), name
            else:
                assert response.status_code == 422, (name, response.status_code)
                body = response.get_json()
                assert body["error"] == "bad_trace" and body["path"].startswith(f"{run_name(name)}/worker0.pt.trace.json")
                assert b"SECRET" not in response.data
    finally:
        plugin.store.stop()


def test_metadata_numbers_beyond_64_bits_are_nulled_and_counted(tmp_path):
    """The issue's case: a rank, a schema version and a device id above 2^64 answered 500 on
    info, overview, job, distributed and the ranks timeline. Each is read as null, counted as
    an anomaly, and every route answers; a cached model carries the repaired metadata."""
    huge = 2 ** 70
    write_trace(tmp_path / "logs" / "run" / "w0.pt.trace.json",
                [op("ProfilerStep#1", 0, 50), op("aten::mm", 10, 20)], schemaVersion=huge,
                distributedInfo={"rank": huge, "world_size": 1, "backend": "gloo"},
                deviceProperties=[{"id": huge, "name": "GPU"}])
    for cache_dir in ("", str(tmp_path / "cache"), str(tmp_path / "cache")):  # parsed; parsed, cached; cached
        plugin, client = make_client(tmp_path / "logs", profiler_cache_dir=cache_dir)
        query = "run=run&worker=w0&span=1"
        try:
            info = wait_ready(client, query)
            assert info.status_code == 200
            body = info.get_json()
            # the described GPU ran nothing, so `devices` (the GPUs used) is empty; it is counted
            assert body["distributed"]["rank"] is None and body["devices"] == [] and body["devices_on_host"] == 1
            assert body["anomalies"]["metadata_values_nulled"] == 3
            for route in ("overview", "job", "distributed", "timeline_ranks"):
                assert client.get(f"{PREFIX}/{route}?{query}").status_code == 200, route
        finally:
            plugin.store.stop()
