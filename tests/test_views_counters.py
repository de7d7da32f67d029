"""Hardware counters (issue 39, item 2): counter events read into `Profile.counters()`, the
`counters` and `step_counters` routes, the Trace view's counter series per device.

The traces are written here as the writers write them:
- CUPTI PM sampling: one `C` event per sample, named "CUPTI PM Sampling", its args every
  metric asked for (`CuptiPMSamplingSession::buildTraceBuffer`, pytorch/kineto
  `libkineto/src/CuptiPMSamplingProfiler.cpp` at 27ddd6afaba038880a00e80a917f2b9ed4dc38e7),
  under the string pid "GPU N Counters" (kineto#1530), written by
  `ChromeTraceLogger::writeCounterEvent` (pytorch/pytorch `third_party/kineto/libkineto/src/
  output_json.cpp` at 35d03b38e2acbc5c21d953f0738178c61aff7b20): ph, cat, name, pid, tid, ts,
  args of `"metric": value`.
- MTIA: `handleCounterEvent` in the same file: cat `mtia_counters`, pid the device id.
Every expected number below is worked out by hand from the events written.
"""

import csv
import io

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.counters import COUNTER_SAMPLES, STEP_COUNTERS

from .helpers import PREFIX, make_client, op, raw_events, runtime, kernel, wait_route, write_trace

THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DRAM = "dram__bytes_read.sum"

# Three steps of 100 µs from ts 1000, each launching one 50 µs kernel on GPU 0 stream 7, so
# the step windows are [1000, 1100), [1100, 1200), [1200, 1300).
STEP_STARTS = (1000, 1100, 1200)
# GPU 0 sampled every 25 µs from 1000 to 1300 (13 samples; the one at 1300 is after the last
# step). Per step, the four samples inside it:
THROUGHPUT_VALUES = (10, 20, 30, 40, 50, 50, 60, 60, 0, 0, 0, 100, 77)  # means 25, 55, 25
OCCUPANCY_VALUES = (5, 5, 5, 5, 10, 20, 10, 20, 1, 2, 3, 4, 9)  # means 5, 15, 2.5


def _workload():
    events = []
    for i, start in enumerate(STEP_STARTS):
        events += [op(f"ProfilerStep#{i + 1}", start, 100, pid=100, tid=100),
                   runtime("cudaLaunchKernel", start + 10, 5, i + 1, i + 1, pid=100, tid=100),
                   kernel("gemm", start + 20, 50, i + 1)]
    return events


def _pm_sample(ts, device, **metrics):
    return {"ph": "C", "cat": "hardware_counters", "name": "CUPTI PM Sampling", "pid": f"GPU {device} Counters",
            "tid": 0, "ts": ts, "args": metrics}


def _counter_trace(path):
    events = _workload()
    for i, (throughput, occupancy) in enumerate(zip(THROUGHPUT_VALUES, OCCUPANCY_VALUES)):
        events.append(_pm_sample(1000 + 25 * i, 0, **{THROUGHPUT: throughput, OCCUPANCY: occupancy, DRAM: 1000 * i}))
    # GPU 1 ran nothing here: one throughput sample in step 1 only
    events.append(_pm_sample(1010, 1, **{THROUGHPUT: 99.0}))
    return write_trace(path, events)


def test_counters_read_per_device_as_written(tmp_path):
    path = _counter_trace(tmp_path / "w.pt.trace.json")
    table = tb_plugin.load(path).counters()
    assert list(table.columns) == COUNTER_SAMPLES.names
    raw = [e for e in raw_events(path) if e["ph"] == "C"]
    assert len(table) == sum(len(e["args"]) for e in raw) == 13 * 3 + 1
    gpu0 = table[table["device"] == 0]
    assert set(gpu0["pid"]) == {"GPU 0 Counters"} and set(gpu0["name"]) == {"CUPTI PM Sampling"}
    throughput = gpu0[gpu0["counter"] == THROUGHPUT]
    # times from the trace origin (the first event, ts 1000), every 25 µs
    assert throughput["time_us"].tolist() == [25.0 * i for i in range(13)]
    assert throughput["value"].tolist() == list(map(float, THROUGHPUT_VALUES))
    assert gpu0.loc[gpu0["counter"] == DRAM, "value"].sum() == 1000 * sum(range(13))
    assert table.loc[table["device"] == 1, ["counter", "value"]].values.tolist() == [[THROUGHPUT, 99.0]]


def test_step_means_worked_by_hand(tmp_path):
    table = tb_plugin.load(_counter_trace(tmp_path / "w.pt.trace.json")).step_counters()
    assert list(table.columns) == STEP_COUNTERS.names
    got = {(r.step, r.device, r.counter): (r.mean_pct, r.samples) for r in table.itertuples()}
    expected = {
        (1, 0, THROUGHPUT): (25.0, 4), (2, 0, THROUGHPUT): (55.0, 4), (3, 0, THROUGHPUT): (25.0, 4),
        (1, 0, OCCUPANCY): (5.0, 4), (2, 0, OCCUPANCY): (15.0, 4), (3, 0, OCCUPANCY): (2.5, 4),
        (1, 1, THROUGHPUT): (99.0, 1),
    }
    assert {k: v for k, v in got.items() if v[1]} == expected
    # GPU 1 was not sampled in steps 2 and 3: a row each, no mean
    empty = {k: v for k, v in got.items() if not v[1]}
    assert set(empty) == {(2, 1, THROUGHPUT), (3, 1, THROUGHPUT)} and all(np.isnan(v[0]) for v in empty.values())
    assert table["step"].tolist() == sorted(table["step"].tolist())  # step order
    # DRAM bytes are no SM throughput or occupancy counter
    assert DRAM not in set(table["counter"])


def test_mtia_counters_on_the_device_pid(tmp_path):
    """MTIA counters carry the device id as pid: the device whose activity has that pid."""
    events = [*_workload(),
              {"ph": "C", "cat": "mtia_counters", "name": "mtia_counters", "pid": 0, "tid": 3, "ts": 1050,
               "args": {"util": 42}},
              {"ph": "C", "cat": "cpu_instant_event", "name": "host", "pid": 100, "tid": 100, "ts": 1050,
               "args": {"level": 7}}]
    table = tb_plugin.load(write_trace(tmp_path / "m.pt.trace.json", events)).counters()
    assert table[["device", "counter", "value"]].values.tolist() == [[-1, "level", 7.0], [0, "util", 42.0]]


def test_trace_without_counters_unchanged(tmp_path):
    with_counters = tb_plugin.load(_counter_trace(tmp_path / "with.pt.trace.json"))
    without = tb_plugin.load(write_trace(tmp_path / "without.pt.trace.json", _workload()))
    assert without.counters().empty and without.step_counters().empty
    assert list(without.counters().columns) == COUNTER_SAMPLES.names
    # counter events take nothing from the step breakdown
    assert with_counters.steps().equals(without.steps())
    assert without.steps()["total_us"].tolist() == [100.0, 100.0, 100.0]


def test_trace_view_draws_counters_in_the_device_group(tmp_path):
    profile = tb_plugin.load(_counter_trace(tmp_path / "w.pt.trace.json"))
    series = {s["name"]: s for s in profile.timeline_counters(0, 300, 12)}
    gpu0 = series[f"GPU 0 {THROUGHPUT}"]
    # GPU 0's streams are written under pid 0 (the kernels' pid)
    assert gpu0["pid"] == "0"
    # buckets of 25 µs, each starting at a sample: the value at the bucket start is the sample
    assert gpu0["value"] == list(map(float, THROUGHPUT_VALUES[:12]))
    # GPU 1 has no streams here: drawn in the Counters group
    assert series[f"GPU 1 {THROUGHPUT}"]["pid"] == ""
    assert all(s["pid"] == "" for name, s in series.items() if not name.startswith(("GPU 0 sm", "GPU 0 dram")))
    tracks = profile.timeline_tracks()["tracks"]
    assert "0" in set(tracks["pid"])


@pytest.mark.parametrize("route,table", [("counters", COUNTER_SAMPLES), ("step_counters", STEP_COUNTERS)])
def test_counter_routes_answer_json_and_csv(tmp_path, route, table):
    _counter_trace(tmp_path / "hw" / "w.pt.trace.json")
    write_trace(tmp_path / "plain" / "w.pt.trace.json", _workload())
    plugin, client = make_client(tmp_path)
    try:
        plugin.store.wait_for_scan(30)
        body = wait_route(client, f"{PREFIX}/{route}?run=hw&worker=w").get_json()
        assert body["columns"] == table.names and len(body["rows"]) > 0
        rows = [dict(zip(body["columns"], row)) for row in body["rows"]]
        if route == "step_counters":
            first = next(r for r in rows if r["step"] == 2 and r["device"] == 0 and r["counter"] == THROUGHPUT)
            assert (first["mean_pct"], first["samples"]) == (55.0, 4)
        else:
            assert sum(r["value"] for r in rows if r["counter"] == OCCUPANCY) == sum(OCCUPANCY_VALUES)
        text = client.get(f"{PREFIX}/{route}?run=hw&worker=w&format=csv").get_data(as_text=True)
        parsed = list(csv.DictReader(io.StringIO(text)))
        assert len(parsed) == len(body["rows"]) and list(parsed[0]) == table.names
        assert wait_route(client, f"{PREFIX}/{route}?run=plain&worker=w").get_json()["rows"] == []
    finally:
        plugin.store.stop()
