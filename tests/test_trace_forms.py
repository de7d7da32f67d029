"""Newer Kineto trace forms read as what they mean, with the views equal to the older form's
(issue 39, item 1). Each test writes a trace as its writer writes it; the writer's source is
named (repository, path, commit) beside each."""

import gzip
import json

import pandas as pd
import pytest

import tb_plugin

from .helpers import kernel, op, raw_events, runtime, shared_trace, write_trace


def _rewritten(tmp_path, name, source, change):
    """The real trace `source` written again to `tmp_path / name` after `change(events)`."""
    data = gzip.decompress(source.read_bytes())
    doc = json.loads(data)
    change(doc["traceEvents"])
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_a_text_number_in_one_event_costs_no_event_its_args(tmp_path):
    """On a real A100 trace, copies' `bytes` written as text (older ROCm writers) while kernels,
    copies and sets carry integer `graph id` / `graph node id` (pytorch/kineto#1276/#1277,
    libkineto/src/output_json.cpp / GenericTraceActivity at pytorch/kineto@002d991) marked
    every copy's args malformed and replaced them all with defaults (bytes, correlation,
    stream). Each value is read on its own: nothing is lost and the views are unchanged."""
    source = shared_trace("a100_nccl_collectives")
    events = raw_events(source)
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    assert copies and any(e.get("cat") == "kernel" for e in events)

    def newer_and_older_forms(trace_events):
        for e in trace_events:
            args = e.get("args")
            if e.get("cat") == "gpu_memcpy":
                args["bytes"] = str(args["bytes"])
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                args.update({"graph id": 0, "graph node id": 0})

    mutated = tb_plugin.load(_rewritten(tmp_path, "mutated.pt.trace.json", source, newer_and_older_forms))
    original = tb_plugin.load(source)
    assert mutated.info()["anomalies"] == original.info()["anomalies"] == {}
    pd.testing.assert_frame_equal(mutated.steps(), original.steps())
    memcpy = mutated.model.memcpy
    # against the raw JSON, summed independently
    assert memcpy["bytes"].sum() == sum(int(e["args"]["bytes"]) for e in copies)
    assert memcpy["dur"].sum() == pytest.approx(sum(e["dur"] for e in copies))
    assert sorted(memcpy["correlation"]) == sorted(e["args"]["correlation"] for e in copies)
    assert (memcpy["op"] >= 0).sum() == (original.model.memcpy["op"] >= 0).sum() > 0


def test_a_value_that_is_no_number_is_absent_alone(tmp_path):
    """A value that is no number where one goes (`"N/A"`) is absent on its own, counted; its
    event keeps every other value and the other events of the batch keep theirs."""
    copy = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "dur": 2}
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("aten::to", 0, 20, **{"External id": 1}),
        runtime("cudaMemcpyAsync", 1, 1, correlation=10, external_id=1),
        runtime("cudaMemcpyAsync", 3, 1, correlation=11, external_id=1),
        copy | {"ts": 5, "args": {"correlation": 10, "device": 0, "stream": 7, "bytes": "N/A", "graph node id": 3}},
        copy | {"ts": 8, "args": {"correlation": 11, "device": 0, "stream": 7, "bytes": " 4096 ", "graph id": 2}},
        kernel("k", 12, 3, correlation=12, **{"graph node id": 4, "registers per thread": "32"}),
    ])
    m = tb_plugin.load(path).model
    assert m.memcpy[["correlation", "stream", "bytes", "op"]].values.tolist() == [[10, 7, -1, 0], [11, 7, 4096, 0]]
    assert m.kernels[["registers_per_thread", "graph_node_id"]].values.tolist() == [[32, "4"]]
    assert m.anomalies == {"arg_values_unreadable": 1}
