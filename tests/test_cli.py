"""`python -m tb_plugin info` as a user runs it."""

import json
import subprocess
import sys

from .helpers import SAMPLES, op, run_cli, write_trace


def test_info_text_and_json():
    trace = sorted((SAMPLES / "cpu_cnn").glob("*.pt.trace.json.gz"))[0]
    text = run_cli("info", str(trace))
    assert text.returncode == 0, text.stderr
    assert "device:      CPU" in text.stdout and "steps:       2 (2..3)" in text.stdout
    as_json = run_cli("info", str(trace), "--json")
    info = json.loads(as_json.stdout)
    assert info["steps"] == [2, 3] and info["event_counts"]["python"] > 0


def test_info_bad_file_exits_2_with_message(tmp_path):
    bad = tmp_path / "x.pt.trace.json"
    bad.write_text("{")
    result = run_cli("info", str(bad))
    assert result.returncode == 2
    assert str(bad) in result.stderr and "error:" in result.stderr


def test_info_text_summarises_distributed_info(tmp_path):
    # distributedInfo of a rank in a 300-rank job lists every rank of each process group; the
    # text printed it whole (17 KB on one line for ../shared/traces/cpu_only_gloo).
    groups = [{"pg_name": str(i), "pg_size": 300, "ranks": list(range(300))} for i in range(10)]
    trace = write_trace(tmp_path / "rank34.pt.trace.json", [op("a", 0, 1)],
                        distributedInfo={"backend": "gloo", "rank": 34, "world_size": 300, "pg_count": 10,
                                         "pg_config": groups})
    text = run_cli("info", str(trace))
    assert text.returncode == 0, text.stderr
    assert "distributed: gloo, rank 34 of 300, 10 process groups\n" in text.stdout
    assert len(text.stdout) < 1000
    assert json.loads(run_cli("info", str(trace), "--json").stdout)["distributed"]["pg_config"] == groups


def test_info_into_a_closed_pipe_has_no_traceback():
    trace = sorted((SAMPLES / "cpu_cnn").glob("*.pt.trace.json.gz"))[0]
    proc = subprocess.Popen([sys.executable, "-m", "tb_plugin", "info", str(trace)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| head -0`: the reader is gone before anything is printed
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in stderr, stderr
