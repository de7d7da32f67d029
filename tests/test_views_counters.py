"""Hardware counters (issue 39, item 2): counter events read into `Profile.counters()`, the
`counters` and `step_counters` routes, the Trace view's counter series per device.

The traces (`helpers.counter_trace`) are written as the writers write them:
- CUPTI PM sampling: one `C` event per sample, named "CUPTI PM Sampling", its args every
  metric asked for (`CuptiPMSamplingSession::buildTraceBuffer`, pytorch/kineto
  `libkineto/src/CuptiPMSamplingProfiler.cpp` at 27ddd6afaba038880a00e80a917f2b9ed4dc38e7),
  under the string pid "GPU N Counters" (kineto#1530), written by
  `ChromeTraceLogger::writeCounterEvent` (pytorch/pytorch `third_party/kineto/libkineto/src/
  output_json.cpp` at 35d03b38e2acbc5c21d953f0738178c61aff7b20): ph, cat, name, pid, tid, ts,
  args of `"metric": value`. The category written here, `hardware_counters` (the activity
  type's name), is not read: the pid and args place a sample.
- MTIA: `handleCounterEvent` in the same file: cat `mtia_counters`, pid the device id.
Every expected number below is worked out by hand from the events written.
"""

import csv
import io

import numpy as np
import pytest

import tb_plugin
from tb_plugin.views.counters import COUNTER_SAMPLES, STEP_COUNTERS

from .helpers import (PM_DRAM, PM_OCCUPANCY, PM_OCCUPANCY_VALUES, PM_THROUGHPUT, PM_THROUGHPUT_VALUES, PREFIX,
                      counter_trace, counter_workload, make_client, raw_events, wait_route, write_trace)

def test_counters_read_per_device_as_written(tmp_path):
    path = counter_trace(tmp_path / "w.pt.trace.json")
    table = tb_plugin.load(path).counters()
    assert list(table.columns) == COUNTER_SAMPLES.names
    raw = [e for e in raw_events(path) if e["ph"] == "C"]
    assert len(table) == sum(len(e["args"]) for e in raw) == 13 * 3 + 1
    gpu0 = table[table["device"] == 0]
    assert set(gpu0["pid"]) == {"GPU 0 Counters"} and set(gpu0["name"]) == {"CUPTI PM Sampling"}
    throughput = gpu0[gpu0["counter"] == PM_THROUGHPUT]
    # times from the trace origin (the first event, ts 1000), every 25 µs
    assert throughput["time_us"].tolist() == [25.0 * i for i in range(13)]
    assert throughput["value"].tolist() == list(map(float, PM_THROUGHPUT_VALUES))
    assert gpu0.loc[gpu0["counter"] == PM_DRAM, "value"].sum() == 1000 * sum(range(13))
    assert table.loc[table["device"] == 1, ["counter", "value"]].values.tolist() == [[PM_THROUGHPUT, 99.0]]


def test_step_means_worked_by_hand(tmp_path):
    table = tb_plugin.load(counter_trace(tmp_path / "w.pt.trace.json")).step_counters()
    assert list(table.columns) == STEP_COUNTERS.names
    got = {(r.step, r.device, r.counter): (r.mean_pct, r.samples) for r in table.itertuples()}
    expected = {
        (1, 0, PM_THROUGHPUT): (25.0, 4), (2, 0, PM_THROUGHPUT): (55.0, 4), (3, 0, PM_THROUGHPUT): (25.0, 4),
        (1, 0, PM_OCCUPANCY): (5.0, 4), (2, 0, PM_OCCUPANCY): (15.0, 4), (3, 0, PM_OCCUPANCY): (2.5, 4),
        (1, 1, PM_THROUGHPUT): (99.0, 1),
    }
    assert {k: v for k, v in got.items() if v[1]} == expected
    # GPU 1 was not sampled in steps 2 and 3: a row each, no mean
    empty = {k: v for k, v in got.items() if not v[1]}
    assert set(empty) == {(2, 1, PM_THROUGHPUT), (3, 1, PM_THROUGHPUT)} and all(np.isnan(v[0]) for v in empty.values())
    assert table["step"].tolist() == sorted(table["step"].tolist())  # step order
    assert set(zip(table["counter"], table["quantity"])) == {(PM_THROUGHPUT, "SM throughput"),
                                                              (PM_OCCUPANCY, "achieved occupancy")}
    # DRAM bytes are no SM throughput or occupancy counter
    assert PM_DRAM not in set(table["counter"])


def test_mtia_counters_on_the_device_pid(tmp_path):
    """MTIA counters carry the device id as pid: the device whose activity has that pid."""
    events = [*counter_workload(),
              {"ph": "C", "cat": "mtia_counters", "name": "mtia_counters", "pid": 0, "tid": 3, "ts": 1050,
               "args": {"util": 42}},
              {"ph": "C", "cat": "cpu_instant_event", "name": "host", "pid": 100, "tid": 100, "ts": 1050,
               "args": {"level": 7}}]
    table = tb_plugin.load(write_trace(tmp_path / "m.pt.trace.json", events)).counters()
    assert table[["device", "counter", "value"]].values.tolist() == [[-1, "level", 7.0], [0, "util", 42.0]]


def test_trace_without_counters_unchanged(tmp_path):
    with_counters = tb_plugin.load(counter_trace(tmp_path / "with.pt.trace.json"))
    without = tb_plugin.load(write_trace(tmp_path / "without.pt.trace.json", counter_workload()))
    assert without.counters().empty and without.step_counters().empty
    assert list(without.counters().columns) == COUNTER_SAMPLES.names
    # counter events take nothing from the step breakdown
    assert with_counters.steps().equals(without.steps())
    assert without.steps()["total_us"].tolist() == [100.0, 100.0, 100.0]


def test_trace_view_draws_counters_in_the_device_group(tmp_path):
    profile = tb_plugin.load(counter_trace(tmp_path / "w.pt.trace.json"))
    series = {s["name"]: s for s in profile.timeline_counters(0, 300, 12)}
    gpu0 = series[f"GPU 0 {PM_THROUGHPUT}"]
    # GPU 0's streams are written under pid 0 (the kernels' pid)
    assert gpu0["pid"] == "0"
    # buckets of 25 µs, each starting at a sample: the value at the bucket start is the sample
    assert gpu0["value"] == list(map(float, PM_THROUGHPUT_VALUES[:12]))
    # GPU 1 has no streams here: drawn in the Counters group
    assert series[f"GPU 1 {PM_THROUGHPUT}"]["pid"] == ""
    assert all(s["pid"] == "" for name, s in series.items() if not name.startswith(("GPU 0 sm", "GPU 0 dram")))
    tracks = profile.timeline_tracks()["tracks"]
    assert "0" in set(tracks["pid"])


@pytest.mark.parametrize("route,table", [("counters", COUNTER_SAMPLES), ("step_counters", STEP_COUNTERS)])
def test_counter_routes_answer_json_and_csv(tmp_path, route, table):
    counter_trace(tmp_path / "hw" / "w.pt.trace.json")
    write_trace(tmp_path / "plain" / "w.pt.trace.json", counter_workload())
    plugin, client = make_client(tmp_path)
    try:
        plugin.store.wait_for_scan(30)
        body = wait_route(client, f"{PREFIX}/{route}?run=hw&worker=w").get_json()
        assert body["columns"] == table.names and len(body["rows"]) > 0
        rows = [dict(zip(body["columns"], row)) for row in body["rows"]]
        if route == "step_counters":
            first = next(r for r in rows if r["step"] == 2 and r["device"] == 0 and r["counter"] == PM_THROUGHPUT)
            assert (first["mean_pct"], first["samples"]) == (55.0, 4)
        else:
            assert sum(r["value"] for r in rows if r["counter"] == PM_OCCUPANCY) == sum(PM_OCCUPANCY_VALUES)
        text = client.get(f"{PREFIX}/{route}?run=hw&worker=w&format=csv").get_data(as_text=True)
        parsed = list(csv.DictReader(io.StringIO(text)))
        assert len(parsed) == len(body["rows"]) and list(parsed[0]) == table.names
        assert wait_route(client, f"{PREFIX}/{route}?run=plain&worker=w").get_json()["rows"] == []
    finally:
        plugin.store.stop()
