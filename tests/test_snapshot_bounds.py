"""Crafted memory snapshots (issue 40): each file is generated here, most a few bytes, and
each is either read within the memory budget or refused with a `TraceError` naming the
limit; where memory is what is at stake, the load runs in a child process whose peak RSS is
measured (VmHWM). Then a fuzz of the reader over pickle opcodes and the snapshot's fields
in which every outcome is a loaded snapshot or a `TraceError`."""

import copyreg
import gc
import json
import math
import os
import pickle
import resource
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tb_plugin
from tb_plugin import TraceError

from .helpers import PREFIX, make_client, wait_route

EXAMPLES = int(os.environ.get("TB_PLUGIN_HYPOTHESIS_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                                       HealthCheck.function_scoped_fixture])
MB = 1 << 20


def _text(value):
    """BINUNICODE (protocol 2) of `value`."""
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def _snapshot_holding(value_opcodes):
    """A protocol-2 pickle of {"segments": [], "device_traces": [], "x": <value_opcodes>}."""
    return (b"\x80\x02}(" + _text("segments") + b"]" + _text("device_traces") + b"]" + _text("x") + value_opcodes
            + b"u.")


def _entry(action="alloc", addr=1 << 40, size=512, time_us=1_000, **more):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": time_us, "frames": [], **more}


def _load(tmp_path, data, budget_mb=512, name="x.pickle"):
    path = tmp_path / name
    path.write_bytes(data)
    return tb_plugin.load_snapshot(path, max_memory_bytes=budget_mb * MB)


_CHILD = textwrap.dedent("""
    import json, resource, sys
    from tb_plugin import TraceError
    from tb_plugin.python_api.snapshots import load_snapshot

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    def size():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

    path, budget = sys.argv[1], int(sys.argv[2])
    # A safety net for the machine: the child cannot map more than the budget and 1 GB more.
    resource.setrlimit(resource.RLIMIT_AS, (size() + budget + (1 << 30), resource.RLIM_INFINITY))
    before = hwm()
    try:
        snap = load_snapshot(path, max_memory_bytes=budget)
        snap.index()
        outcome = {"devices": snap.devices(), "entries": len(snap.model.entries)}
    except TraceError as exc:
        outcome = {"error": str(exc)}
    print(json.dumps({**outcome, "grew": hwm() - before}))
""")


def _load_measured(tmp_path, data, budget_mb=512):
    """(outcome, bytes the child's peak RSS grew by while loading) of the file `data`."""
    path = tmp_path / "measured.pickle"
    path.write_bytes(data)
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(budget_mb * MB)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.splitlines()[-1])
    return outcome, outcome.pop("grew")


# --- the pickle itself --------------------------------------------------------------------------

def test_a_9_byte_pickle_writing_memo_slot_2_27_is_refused_without_allocating(tmp_path):
    data = b"\x80\x02N" + b"r" + struct.pack("<I", 1 << 27) + b"."
    assert len(data) == 9
    outcome, grew = _load_measured(tmp_path, data)
    assert "memo slot 134,217,728" in outcome["error"]
    assert grew < 32 * MB  # the C unpickler alone grew its memo to 2 GB for it


@pytest.mark.parametrize("put", [
    b"r" + struct.pack("<I", 1 << 21),  # LONG_BINPUT of 32 MB of memo, far beyond any slot put before it
    b"p134217728\n",  # PUT, the same index as text
])
def test_a_memo_slot_beyond_what_was_put_before_is_refused(tmp_path, put):
    with pytest.raises(TraceError, match="memo slot"):
        _load(tmp_path, _snapshot_holding(b"N" + put))


@pytest.mark.parametrize("opcode,name", [(b"\x8e", "BINBYTES8"), (b"\x8d", "BINUNICODE8"), (b"\x96", "BYTEARRAY8"),
                                         (b"\x95", "FRAME")])
@pytest.mark.parametrize("length", [1 << 63, (1 << 64) - 1, 1 << 40])
def test_a_declared_length_beyond_the_file_is_refused_before_it_is_read(tmp_path, opcode, name, length):
    data = b"\x80\x04" + opcode + struct.pack("<Q", length) + b"."
    with pytest.raises(TraceError, match=f"{name} at byte 2 declares {length:,} bytes"):
        _load(tmp_path, data)


@pytest.mark.parametrize("opcode,name", [(b"X", "BINUNICODE"), (b"B", "BINBYTES"), (b"\x8b", "LONG4")])
def test_a_four_byte_length_beyond_the_file_is_refused(tmp_path, opcode, name):
    with pytest.raises(TraceError, match=f"{name} at byte .* declares 4,294,967,295 bytes"):
        _load(tmp_path, _snapshot_holding(opcode + b"\xff\xff\xff\xff"))


@pytest.mark.parametrize("opcode,argument", [(b"\x82", b"\xf0"), (b"\x83", b"\xf0\x00"), (b"\x84", b"\xf0\x00\x00\x00")])
def test_extension_codes_are_refused_before_the_registry_is_looked_up(tmp_path, opcode, argument):
    """A process that registered and used extension code 240 has the class in copyreg's
    cache, which the C unpickler hands out without asking find_class."""
    copyreg.add_extension("collections", "OrderedDict", 240)
    try:
        assert type(pickle.loads(b"\x80\x02\x82\xf0)R.")).__name__ == "OrderedDict"  # now cached
        with pytest.raises(TraceError, match="extension registry"):
            _load(tmp_path, _snapshot_holding(opcode + argument + b")R"))
    finally:
        copyreg.remove_extension("collections", "OrderedDict", 240)
        copyreg.clear_extension_cache()


@pytest.mark.parametrize("data", [
    b"\x80\x02(]ctb_plugin\nx\n.",  # GLOBAL
    b"\x80\x02(]Pid\n.",  # PERSID
    b"\x80\x02}(" + b"X\x08\x00\x00\x00segments",  # ends before STOP
    b"\x80\x02}\xff.",  # no opcode
])
def test_what_the_walk_refuses_is_a_trace_error(tmp_path, data):
    with pytest.raises(TraceError, match="not a memory snapshot|truncated or corrupt"):
        _load(tmp_path, data)


def test_every_pickle_protocol_of_a_real_snapshot_passes_the_walk(tmp_path):
    from .snapshot_data import snapshot_of, training

    snapshot = snapshot_of([training(0, seed=3), training(1, seed=4, oom=True)])
    snapshot["device_traces"][0] *= 200  # memo slots beyond 2^16 in protocols 2 and 3 (LONG_BINPUT)
    for protocol in (2, 3, 4, 5):
        snap = _load(tmp_path, pickle.dumps(snapshot, protocol=protocol), name=f"p{protocol}.pickle")
        assert len(snap.model.entries) == sum(map(len, snapshot["device_traces"]))


# --- what the dict asks of the tables -----------------------------------------------------------

def test_a_segment_on_device_10_9_costs_what_one_device_does(tmp_path):
    segment = {"device": 10**9, "address": 1 << 40, "total_size": 2 * MB, "stream": 0, "segment_type": "large",
               "allocated_size": MB, "active_size": MB, "requested_size": MB,
               "blocks": [{"address": 1 << 40, "size": MB, "requested_size": MB, "state": "active_allocated",
                           "frames": []},
                          {"address": (1 << 40) + MB, "size": MB, "requested_size": 0, "state": "inactive",
                           "frames": []}]}
    data = pickle.dumps({"segments": [segment], "device_traces": [[_entry()]]})
    assert len(data) < 400
    outcome, grew = _load_measured(tmp_path, data)
    assert outcome == {"devices": [0, 10**9], "entries": 1}
    assert grew < 64 * MB  # arrays sized by the largest index took 15 GB for this
    snap = _load(tmp_path, data)
    peaks = snap.peak().set_index("device")
    assert peaks.loc[10**9, "allocated_at_snapshot_bytes"] == MB and peaks.loc[10**9, "reserved_at_snapshot_bytes"] == 2 * MB
    assert peaks.loc[0, "peak_allocated_bytes"] == 512


def test_references_to_one_entry_count_at_each_place_against_the_budget(tmp_path):
    entry = _entry()
    data = pickle.dumps({"segments": [], "device_traces": [[entry] * 2_500_000]}, protocol=4)
    assert len(data) < 6 * MB
    outcome, grew = _load_measured(tmp_path, data, budget_mb=512)
    assert "2,500,000 trace entries" in outcome["error"] and "memory budget (512 MiB)" in outcome["error"]
    assert grew < 160 * MB  # the list of references and the walk; no table was made
    # Within a budget that holds them, the same file loads: 2.5 M allocations of one address.
    small = pickle.dumps({"segments": [], "device_traces": [[entry] * 1000]}, protocol=4)
    assert len(_load(tmp_path, small, budget_mb=64).model.entries) == 1000


def _python_calls(load):
    """How many Python functions `load` calls, a count of work that, unlike its time, does not
    move with the machine's load (`benchmarks/hostile_bench.py` times the same files). Run once
    before counting so that one-time work (compiling the pickle walk's pattern) is not counted,
    and with the garbage collector held off: a collection during the count runs the finalizers
    of whatever earlier tests left behind (CI once counted 7 such calls), which is not the
    load's work."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    for counting in (False, True):
        calls = 0
        gc.collect()
        gc.disable()
        sys.setprofile(count if counting else None)
        try:
            load()
        except TraceError:
            pass
        finally:
            sys.setprofile(None)
            gc.enable()
    return calls


def _loads_and_answers(tmp_path, traces):
    data = pickle.dumps({"segments": [], "device_traces": traces})

    def load():
        snap = _load(tmp_path, data)
        snap.index()
        return snap.peak()
    return load


def _one_entry_each(devices):
    return [[_entry(addr=(1 << 40) + i)] for i in range(devices)]


def test_forty_thousand_devices_are_refused_at_once(tmp_path):
    """The refusal comes before any work per device (it took 28 s): refusing 40,000 devices
    calls as many Python functions as refusing 4,000, but for one read per MiB of the file."""
    data = pickle.dumps({"segments": [], "device_traces": _one_entry_each(40_000)})
    with pytest.raises(TraceError, match="40,000 devices have a trace or segments, more than the 256"):
        _load(tmp_path, data)
    assert _python_calls(_loads_and_answers(tmp_path, _one_entry_each(40_000))) \
        <= _python_calls(_loads_and_answers(tmp_path, _one_entry_each(4_000))) + len(data) // MB + 1


def _empty_but_last(devices):
    traces: list[list[dict]] = [[] for _ in range(devices)]
    traces[-1] = [_entry(), _entry("free_completed", time_us=2_000)]
    return traces


def test_devices_without_entries_cost_nothing(tmp_path):
    snap = _load(tmp_path, pickle.dumps({"segments": [], "device_traces": _empty_but_last(40_000)}))
    snap.index()
    assert snap.devices() == [39_999] and snap.model.device_count == 40_000
    assert snap.peak()["peak_allocated_bytes"].tolist() == [512]
    # 39,999 empty devices before the one with entries add no Python call to its load and answers
    assert _python_calls(_loads_and_answers(tmp_path, _empty_but_last(40_000))) \
        == _python_calls(_loads_and_answers(tmp_path, _empty_but_last(1)))


def test_many_devices_of_one_entry_each_load_index_and_answer_in_linear_work(tmp_path):
    snap = _load(tmp_path, pickle.dumps({"segments": [], "device_traces": _one_entry_each(256)}))
    snap.index()
    peaks = snap.peak()
    assert peaks["device"].tolist() == list(range(256)) and set(peaks["peak_allocated_bytes"]) == {512}
    # work per device is bounded (the 256 devices a snapshot is read with), never per pair of
    # devices: doubling the devices at most doubles the calls
    calls = {n: _python_calls(_loads_and_answers(tmp_path, _one_entry_each(n))) for n in (64, 128, 256)}
    assert calls[256] - calls[128] <= 2.2 * (calls[128] - calls[64])


# --- malformed but real forms ---------------------------------------------------------------------

def test_entries_without_pool_on_a_device_without_segments_are_read(tmp_path):
    """Older torch names no pool in its entries; after `empty_cache()` a device may have no segment."""
    entries = [{k: v for k, v in _entry(action, time_us=t).items()} for action, t in (("alloc", 1), ("free_completed", 2))]
    segment = {"device": 1, "address": 1 << 41, "total_size": MB, "stream": 0, "segment_type": "large",
               "segment_pool_id": (1, 7), "blocks": [{"size": MB, "state": "inactive"}]}
    snap = _load(tmp_path, pickle.dumps({"segments": [segment], "device_traces": [entries, []]}))
    assert snap.devices() == [0, 1]
    allocations = snap.allocations()
    assert len(allocations) == 1 and allocations["pool"].tolist() == [0]  # the default pool
    assert snap.peak().set_index("device").loc[0, "peak_allocated_bytes"] == 512


@pytest.mark.parametrize("snapshot", [{"segments": [], "device_traces": []}, {"device_traces": [[], []]},
                                      {"segments": []}])
def test_an_empty_snapshot_loads_with_no_device(tmp_path, snapshot):
    snap = _load(tmp_path, pickle.dumps(snapshot))
    assert snap.devices() == [] and len(snap.peak()) == 0 and snap.info()["entries"] == 0


def test_values_out_of_range_are_anomalies_with_a_reason(tmp_path):
    trace = [
        _entry(time_us=10),
        _entry(addr=1 << 64, time_us=11),  # beyond 64 bits
        _entry(size=-512, time_us=12),  # negative size
        _entry(size=1 << 70, time_us=13),
        _entry(addr=(1 << 40) + 512, time_us=math.inf),  # infinite time
        _entry(addr=(1 << 40) + 1024, time_us=10**400),  # beyond a float
        _entry(addr=(1 << 40) + 2048, time_us=5),  # backward
    ]
    segments = [
        {"device": 0, "address": 1 << 40, "total_size": 1 << 64, "blocks": [{"size": 512, "state": "active_allocated"}]},
        {"device": -1, "address": 1 << 41, "total_size": MB, "blocks": []},
        {"device": 0, "address": 1 << 42, "total_size": MB,
         "blocks": [{"size": -1, "state": "inactive"}, {"size": MB, "state": "inactive"}]},
    ]
    snap = _load(tmp_path, pickle.dumps({"segments": segments, "device_traces": [trace]}))
    counts = {a["anomaly"]: a["count"] for a in snap.anomalies()}
    assert counts == {"entry_out_of_range": 3, "time_out_of_range": 2, "time_backward": 1, "segment_out_of_range": 2,
                      "block_out_of_range": 1}
    assert all(a["meaning"] for a in snap.anomalies()) and snap.info()["anomalies"] == snap.anomalies()
    entries = snap.model.entries
    assert entries["addr"].tolist() == [1 << 40, (1 << 40) + 512, (1 << 40) + 1024, (1 << 40) + 2048]
    assert entries["time_us"].tolist()[0] == 10 and np.isnan(entries["time_us"].tolist()[1:3]).all()
    assert snap.model.segments["address"].tolist() == [1 << 42] and snap.model.blocks["size"].tolist() == [MB]
    assert snap.model.blocks["segment"].tolist() == [0]


def test_allocator_settings_nested_a_million_deep_are_cut(tmp_path):
    depth = 1_000_000
    nested = b"]" * depth + b"a" * (depth - 1)  # [[[...]]]
    data = (b"\x80\x02}(" + _text("segments") + b"]" + _text("device_traces") + b"]" + _text("allocator_settings")
            + b"}" + _text("deep") + nested + b"su.")
    snap = _load(tmp_path, data)
    assert [a["anomaly"] for a in snap.anomalies()] == ["settings_cut"]
    settings_depth, value = 0, snap.model.allocator_settings["deep"]
    while isinstance(value, list) and value:
        settings_depth, value = settings_depth + 1, value[0]
    assert settings_depth <= 16 and json.dumps(snap.model.allocator_settings)


def test_settings_shared_a_million_times_are_cut_not_expanded(tmp_path):
    level = ["x" * 100] * 1000
    for _ in range(3):
        level = [level] * 1000  # 10^12 leaves through shared references
    snap = _load(tmp_path, pickle.dumps({"segments": [], "device_traces": [], "allocator_settings": {"a": level}}))
    assert len(json.dumps(snap.model.allocator_settings)) < 2 * MB
    assert [a["anomaly"] for a in snap.anomalies()] == ["settings_cut"]


def test_a_json_snapshot_nested_too_deep_is_a_trace_error(tmp_path):
    data = b'{"segments": [], "allocator_settings": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(TraceError, match="truncated or corrupt"):
        _load(tmp_path, data, name="x.json")


def test_a_frame_line_beyond_64_bits_is_a_trace_error(tmp_path):
    entry = _entry(frames=[{"filename": "a.py", "line": 1 << 70, "name": "f"}])
    with pytest.raises(TraceError, match="documented format"):
        _load(tmp_path, pickle.dumps({"segments": [], "device_traces": [[entry]]}))


def test_anomalies_survive_the_disk_cache(tmp_path):
    run = tmp_path / "logs" / "job"
    run.mkdir(parents=True)
    (run / "rank0.pickle").write_bytes(pickle.dumps({"segments": [], "device_traces": [[_entry(), _entry(size=-1)]]}))
    first = tb_plugin.load_run(run, cache_dir=tmp_path / "cache").snapshot("rank0")
    again = tb_plugin.load_run(run, cache_dir=tmp_path / "cache").snapshot("rank0")
    assert first.anomalies() == again.anomalies() == [
        {"anomaly": "entry_out_of_range", "meaning": first.anomalies()[0]["meaning"], "count": 1}]


# --- the server -----------------------------------------------------------------------------------

SIX_ROUTES = ("snapshot_timeline", "snapshot_live", "snapshot_blame", "snapshot_categories", "snapshot_flame",
              "snapshot_state")


def test_routes_refuse_crafted_files_with_a_reason_and_no_server_path(tmp_path):
    run = tmp_path / "logs" / "job"
    run.mkdir(parents=True)
    (run / "empty.pickle").write_bytes(pickle.dumps({"segments": [], "device_traces": []}))
    (run / "memo.pickle").write_bytes(b"\x80\x02N" + b"r" + struct.pack("<I", 1 << 27) + b".")
    (run / "many.pickle").write_bytes(pickle.dumps({"segments": [], "device_traces": [[_entry()]] * 300}))
    plugin, client = make_client(tmp_path / "logs", profiler_max_memory_mb=512)
    try:
        for route in SIX_ROUTES:
            reply = wait_route(client, f"{PREFIX}/{route}?run=job&snapshot=empty")
            assert reply.status_code == 404, route
            assert "holds no device" in reply.get_json()["reason"] and str(tmp_path) not in reply.get_data(as_text=True)
        for name, reason in (("memo", "memo slot 134,217,728"), ("many", "300 devices")):
            reply = wait_route(client, f"{PREFIX}/snapshot_peak?run=job&snapshot={name}")
            assert 400 <= reply.status_code < 500 and reason in reply.get_json()["reason"]
            assert str(tmp_path) not in reply.get_data(as_text=True)
    finally:
        plugin.store.stop()


# --- the fuzz -------------------------------------------------------------------------------------

_NUMBERS = st.one_of(st.integers(), st.integers(min_value=-(1 << 80), max_value=1 << 80), st.floats(), st.none(),
                     st.booleans(), st.text(max_size=4))
_FRAMES = st.lists(st.fixed_dictionaries({}, optional={"filename": st.text(max_size=8), "line": _NUMBERS,
                                                       "name": st.text(max_size=8)}), max_size=3)
_ENTRY = st.fixed_dictionaries({"action": st.sampled_from(["alloc", "free_requested", "free_completed", "segment_alloc",
                                                           "segment_free", "oom", "snapshot", "other"])},
                               optional={"addr": _NUMBERS, "size": _NUMBERS, "stream": _NUMBERS, "time_us": _NUMBERS,
                                         "device_free": _NUMBERS, "frames": _FRAMES,
                                         "pool_id": st.one_of(st.tuples(_NUMBERS, _NUMBERS), _NUMBERS)})
_BLOCK = st.fixed_dictionaries({}, optional={"address": _NUMBERS, "size": _NUMBERS, "requested_size": _NUMBERS,
                                             "state": st.sampled_from(["active_allocated", "inactive", "odd"]),
                                             "frames": _FRAMES})
_SEGMENT = st.fixed_dictionaries({}, optional={
    "device": _NUMBERS, "address": _NUMBERS, "total_size": _NUMBERS, "stream": _NUMBERS,
    "segment_type": st.sampled_from(["small", "large"]), "segment_pool_id": st.tuples(_NUMBERS, _NUMBERS),
    "allocated_size": _NUMBERS, "blocks": st.lists(_BLOCK, max_size=4)})
_SETTINGS = st.recursive(_NUMBERS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                           st.dictionaries(st.text(max_size=3), inner, max_size=3)),
                         max_leaves=10)
_SNAPSHOT = st.fixed_dictionaries({}, optional={"segments": st.lists(_SEGMENT, max_size=3),
                                                "device_traces": st.lists(st.lists(_ENTRY, max_size=6), max_size=3),
                                                "allocator_settings": _SETTINGS})
# Opcodes spliced into a pickle: each alone, with the arguments the reader must bound.
_OPCODES = st.one_of(
    st.sampled_from([b"(", b")", b"]", b"}", b"N", b"a", b"e", b"s", b"u", b"t", b"0", b"1", b"2", b"\x85", b"\x86",
                     b"\x87", b"\x88", b"\x89", b"\x8f", b"\x90", b"\x91", b"\x94", b"R", b"b", b"o", b"\x81", b"\x92",
                     b"\x93", b"\x97", b"\x98", b"Q", b"."]),
    st.tuples(st.sampled_from([b"K", b"h", b"q", b"\x82", b"C", b"U", b"\x8c", b"\x8a", b"\x80"]),
              st.binary(min_size=1, max_size=1)).map(b"".join),
    st.tuples(st.sampled_from([b"M", b"\x83"]), st.binary(min_size=2, max_size=2)).map(b"".join),
    st.tuples(st.sampled_from([b"J", b"j", b"r", b"\x84", b"X", b"B", b"T", b"\x8b"]),
              st.integers(0, (1 << 32) - 1).map(lambda n: struct.pack("<I", n))).map(b"".join),
    st.tuples(st.sampled_from([b"\x8d", b"\x8e", b"\x96", b"\x95", b"G"]),
              st.integers(0, (1 << 64) - 1).map(lambda n: struct.pack("<Q", n))).map(b"".join),
    st.tuples(st.sampled_from([b"I", b"L", b"F", b"S", b"V", b"g", b"p", b"c", b"i", b"P"]),
              st.text("0123456789-.'x\n", max_size=12).map(str.encode)).map(lambda t: t[0] + t[1] + b"\n"),
)
_BUDGET_MB = 64


def _outcome(tmp_path, data, name="fuzz.pickle"):
    """A loaded snapshot whose views answer, or a TraceError: nothing else may come out."""
    try:
        snap = _load(tmp_path, data, budget_mb=_BUDGET_MB, name=name)
    except TraceError:
        return
    snap.info()
    snap.peak()
    snap.oom()
    for device in snap.devices()[:2]:
        snap.timeline(device, bins=8)
        snap.blame(device)
    json.dumps(snap.model.allocator_settings)


def _rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@FUZZ
@given(snapshot=_SNAPSHOT, protocol=st.integers(2, 5))
def test_fuzz_the_snapshots_fields(tmp_path, snapshot, protocol):
    _outcome(tmp_path, pickle.dumps(snapshot, protocol=protocol))


@FUZZ
@given(snapshot=_SNAPSHOT, protocol=st.integers(2, 5), splices=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 3),
                                                                                  _OPCODES), min_size=1, max_size=4))
def test_fuzz_the_pickle_opcodes(tmp_path, snapshot, protocol, splices):
    """Opcodes (with arguments the reader must bound) spliced into a snapshot's pickle,
    replacing up to 3 bytes each: loaded or refused, within the budget."""
    data = pickle.dumps(snapshot, protocol=protocol)
    before = _rss()
    for where, drop, opcodes in splices:
        at = 2 + int(where * (len(data) - 2))
        data = data[:at] + opcodes + data[at + drop:]
    _outcome(tmp_path, data)
    assert _rss() - before < 4 * _BUDGET_MB * MB
