"""Memory copies per kind and device (`views.copies.memcpy_summary`, route `memcpy_summary`):
checked against the trace files' own events read by the standard library, and on a hand-made
trace against numbers worked out by hand."""

import collections
import csv
import io
import math

import pytest

import tb_plugin

from .helpers import PREFIX, SAMPLES, make_client, op, raw_events, runtime, wait_route, write_trace

GPU_SAMPLES = [sorted((SAMPLES / run).iterdir())[0] for run in ("gpu_a100_nccl", "gpu_h100_eager_nccl")]


def _copy(name, ts, dur, correlation, device=0, nbytes=None):
    args = {"device": device, "stream": 7, "correlation": correlation}
    if nbytes is not None:
        args["bytes"] = nbytes
    return {"ph": "X", "cat": "gpu_memcpy", "name": name, "pid": device, "tid": 7, "ts": ts, "dur": dur, "args": args}


@pytest.fixture(scope="module")
def hand_made(tmp_path_factory):
    """Device 0: two pageable host-to-device copies of 1,000,000 bytes (100 and 300 µs) and a
    pinned device-to-host copy whose size is not recorded (50 µs); device 1: one
    device-to-device copy of 64 bytes (2 µs). Each launched by a cudaMemcpyAsync."""
    copies = [("Memcpy HtoD (Pageable -> Device)", 100, 1_000_000, 0), ("Memcpy HtoD (Pageable -> Device)", 300, 1_000_000, 0),
              ("Memcpy DtoH (Device -> Pinned)", 50, None, 0), ("Memcpy DtoD (Device -> Device)", 2, 64, 1)]
    events = [op("ProfilerStep#1", 0, 2_000, cat="user_annotation")]
    for i, (name, dur, nbytes, device) in enumerate(copies):
        ts = 10 + 500 * i
        events += [runtime("cudaMemcpyAsync", ts, 5, correlation=100 + i, external_id=i + 1),
                   _copy(name, ts + 10, dur, 100 + i, device, nbytes)]
    return write_trace(tmp_path_factory.mktemp("copies") / "run" / "w.pt.trace.json", events)


def test_the_hand_made_copies_as_worked_out_by_hand(hand_made):
    table = tb_plugin.load(str(hand_made)).answer("memcpy_summary")
    rows = {(r["name"], r["device"]): r for r in table.to_dict("records")}
    assert list(table["name"]) == ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)",
                                   "Memcpy DtoD (Device -> Device)"]  # most time first
    htod = rows["Memcpy HtoD (Pageable -> Device)", 0]
    assert (htod["copies"], htod["total_us"], htod["mean_us"], htod["total_bytes"]) == (2, 400.0, 200.0, 2_000_000)
    assert htod["bandwidth_gbps"] == pytest.approx(5.0)  # 2e6 bytes / 400 µs = 5,000 bytes/µs
    assert htod["time_pct"] == pytest.approx(100 * 400 / 450)
    dtoh = rows["Memcpy DtoH (Device -> Pinned)", 0]
    assert (dtoh["copies"], dtoh["total_us"], dtoh["total_bytes"]) == (1, 50.0, 0)
    assert math.isnan(dtoh["bandwidth_gbps"])  # no size recorded: no bandwidth, not 0 GB/s
    assert dtoh["time_pct"] == pytest.approx(100 * 50 / 450)
    dtod = rows["Memcpy DtoD (Device -> Device)", 1]
    assert (dtod["copies"], dtod["total_bytes"], dtod["time_pct"]) == (1, 64, 100.0)
    assert dtod["bandwidth_gbps"] == pytest.approx(0.032)


@pytest.mark.parametrize("path", GPU_SAMPLES, ids=lambda p: p.parent.name)
def test_copies_equal_the_trace_files_own_events(path):
    expected = collections.defaultdict(lambda: [0, 0.0, 0])
    for event in raw_events(path):
        if event.get("cat") == "gpu_memcpy" and event.get("ph") == "X":
            entry = expected[event["name"], event["args"]["device"]]
            entry[0] += 1
            entry[1] += float(event["dur"])
            entry[2] += max(int(event["args"].get("bytes", -1)), 0)
    assert expected, "the sample has copies"
    table = tb_plugin.load(str(path)).answer("memcpy_summary")
    got = {(r["name"], r["device"]): r for r in table.to_dict("records")}
    assert set(got) == set(expected)
    for key, (copies, total_us, total_bytes) in expected.items():
        assert got[key]["copies"] == copies, key
        assert got[key]["total_us"] == pytest.approx(total_us, rel=1e-9), key
        assert got[key]["total_bytes"] == total_bytes, key
    for device in {d for _, d in expected}:
        assert sum(r["time_pct"] for (_, d), r in got.items() if d == device) == pytest.approx(100.0)


def test_the_route_answers_the_table_as_json_and_csv(hand_made):
    plugin, client = make_client(hand_made.parent.parent)
    try:
        url = f"{PREFIX}/memcpy_summary?run=run&worker=w"
        body = wait_route(client, url).get_json()
        rows = list(csv.reader(io.StringIO(client.get(f"{url}&format=csv").get_data(as_text=True))))
        refused = client.get(f"{url}&format=xml")
    finally:
        plugin.store.stop()
    expected = tb_plugin.load(str(hand_made)).answer("memcpy_summary")
    assert body["columns"] == list(expected.columns) == rows[0]
    assert [r[:3] for r in body["rows"]] == expected[["name", "device", "copies"]].values.tolist()
    assert [r[0] for r in rows[1:]] == list(expected["name"])
    assert refused.status_code == 400 and "format" in refused.get_json()["reason"]
