"""`python -m tb_plugin info` as a user runs it."""

import json
import subprocess
import sys

from .conftest import SAMPLES


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "tb_plugin", *args], capture_output=True, text=True, timeout=120)


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
