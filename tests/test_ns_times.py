"""Timestamps with nanosecond fractions stay exact relative to the trace origin
(`parse.anchored_times`): on a hand-made trace whose relative times are known exactly, and on
real ns traces against the decimal texts read by the standard library."""

import gzip
import json
from decimal import Decimal

import numpy as np
import pytest

import tb_plugin
from tb_plugin.trace.kinds import KIND_OP, KIND_RUNTIME, classify

from .helpers import SAMPLES, kernel, op, runtime, shared_trace

BASE = 1700000000000000  # epoch µs: float64 spacing there is 0.25 µs


NS_TIMES = {"origin": "0", "step1": "0.065", "step2": "35153.799", "step3": "298580.376", "mm": "99.999",
            "launch": "100.001", "gemm": "100.124"}


def _ns_trace_text():
    """Steps at 0.065, 35153.799 and 298580.376 µs after the earliest event (the issue's
    numbers), a kernel at 100.124: every absolute time is written with its ns digits, as
    Kineto writes them (json.dumps would write a float's shortest repr, already rounded)."""
    events = [op("aten::empty", "@origin@", 0.01),
              op("ProfilerStep#1", "@step1@", 35153.734), op("ProfilerStep#2", "@step2@", 263426.577),
              op("ProfilerStep#3", "@step3@", 1000.5),
              op("aten::mm", "@mm@", 2.5, **{"External id": 1}), runtime("cudaLaunchKernel", "@launch@", 0.5, 1, 1),
              kernel("gemm", "@gemm@", 3.125, 1)]
    text = json.dumps({"traceEvents": events})
    for key, relative in NS_TIMES.items():
        text = text.replace(f'"@{key}@"', str(Decimal(BASE) + Decimal("0.001") + Decimal(relative)))
    return text


def test_ns_fractions_are_exact_relative_to_the_origin(tmp_path):
    path = tmp_path / "w.pt.trace.json"
    text = _ns_trace_text()
    path.write_text(text)
    assert json.loads(text, parse_float=Decimal)["traceEvents"][1]["ts"] == Decimal("1700000000000000.066")
    model = tb_plugin.load(str(path)).model
    assert model.steps["ts"].tolist() == pytest.approx([0.065, 35153.799, 298580.376], abs=1e-9)
    assert model.kernels["ts"].tolist() == pytest.approx([100.124], abs=1e-9)
    assert model.runtime["ts"].tolist() == pytest.approx([100.001], abs=1e-9)
    # floats of the absolute times would be off by up to 0.125 µs: the test tells them apart
    assert abs((float("1700000000000000.066") - float("1700000000000000.001")) - 0.065) > 1e-3


@pytest.mark.parametrize("trace", ["samples", "a100_nccl_collectives", "rocm_mi250"])
def test_real_ns_traces_keep_their_fractions(trace):
    """Every interval's relative time equals the difference of the decimal texts (read with
    `Decimal` by the standard library) to within float64's rounding of the result."""
    if trace == "samples":
        path = sorted((SAMPLES / "cpu_cnn").glob("*.pt.trace.json.gz"))[0]
    else:
        path = shared_trace(trace)
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("ts"), Decimal)]
    assert any(e["ts"] != e["ts"].to_integral_value() for e in events), "a trace with ns fractions"
    kinds = {"ops": KIND_OP, "runtime": KIND_RUNTIME}
    model = tb_plugin.load(str(path)).model
    intervals = [e for e in events if classify("X", e.get("cat"), e.get("name")) in kinds.values()
                 or e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    origin = min(e["ts"] for e in intervals)
    for table, kind in kinds.items():
        expected = sorted(float(e["ts"] - origin) for e in intervals if classify("X", e.get("cat"), e.get("name")) == kind)
        got = np.sort(getattr(model, table)["ts"].to_numpy())
        assert len(got) == len(expected)
        assert not len(got) or np.abs(got - np.array(expected)).max() < 1e-6, table
    assert float(origin) == pytest.approx(model.origin_us, abs=1e-3)
