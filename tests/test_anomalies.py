"""The import anomaly registry (tb_plugin/trace/anomalies.py) and where it is shown."""

import ast
import json
from pathlib import Path

import pytest

import tb_plugin
from tb_plugin.trace import anomalies

from .helpers import op, run_cli, write_trace

TRACE_PACKAGE = Path(anomalies.__file__).parent


def test_every_anomaly_is_declared_with_a_severity_and_one_line_of_meaning():
    assert len(anomalies.ANOMALIES) >= 12
    for key, entry in anomalies.ANOMALIES.items():
        assert entry.key == key == getattr(anomalies, key.upper())
        assert entry.severity in (anomalies.INFO, anomalies.DATA_LOSS)
        assert entry.meaning and "\n" not in entry.meaning and len(entry.meaning) < 120


def test_no_anomaly_is_named_by_a_free_string_outside_the_registry():
    keys = set(anomalies.ANOMALIES)
    written = [(path.name, node.lineno, node.value)
               for path in TRACE_PACKAGE.glob("*.py") if path.name != "anomalies.py"
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Constant) and node.value in keys]
    assert not written, f"use the registry's constants instead of {written}"


def test_counting_an_undeclared_anomaly_fails_loudly():
    with pytest.raises(KeyError, match="undeclared import anomaly 'typo'"):
        anomalies.record({}, "typo")


def _repaired_trace(tmp_path):
    """Two durations to zero (-5 and 1e308), one op whose args are not an object."""
    events = [op("ok", 0, 10), op("negative", 20, -5), op("huge", 30, 1e308),
              {"ph": "X", "cat": "cpu_op", "name": "odd args", "pid": 1, "tid": 1, "ts": 40, "dur": 1, "args": [1]}]
    return write_trace(tmp_path / "w.pt.trace.json", events)


def test_a_profile_describes_its_anomalies_data_losses_first(tmp_path):
    rows = tb_plugin.load(str(_repaired_trace(tmp_path))).anomalies()
    assert [(r["key"], r["value"]) for r in rows] == [("malformed_args_replaced", 1), ("invalid_durations_zeroed", 2)]
    assert all(r["severity"] == "data_loss" and r["meaning"] == anomalies.ANOMALIES[r["key"]].meaning for r in rows)
    byte_order_mark = tmp_path / "bom.pt.trace.json"
    byte_order_mark.write_bytes(b"\xef\xbb\xbf" + json.dumps({"traceEvents": [op("a", 0, 1)]}).encode())
    assert [(r["key"], r["severity"]) for r in tb_plugin.load(str(byte_order_mark)).anomalies()] == [
        ("byte_order_mark_skipped", "info")]


def test_the_overview_and_info_carry_the_anomalies(tmp_path):
    profile = tb_plugin.load(str(_repaired_trace(tmp_path)))
    assert profile.overview()["anomalies"] == profile.anomalies() == profile.info()["anomaly_details"]
    assert profile.info()["anomalies"] == {"malformed_args_replaced": 1, "invalid_durations_zeroed": 2}


def test_info_prints_each_anomaly_with_its_meaning(tmp_path):
    result = run_cli("info", str(_repaired_trace(tmp_path)))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "import anomalies:\n  malformed_args_replaced: 1 (data loss)\n" in text
    assert f"  invalid_durations_zeroed: 2 (data loss)\n    {anomalies.ANOMALIES['invalid_durations_zeroed'].meaning}\n" in text
