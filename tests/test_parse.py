"""The loader on hand-made traces whose answers are known, including broken and odd inputs."""

import gzip
import json
import mmap
import warnings

import numpy as np
import pytest

import tb_plugin
from tb_plugin import TraceError

from .helpers import kernel, op, runtime, shared_trace, write_trace


def test_load_current_format_links_op_runtime_kernel(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#3", 100, 50, cat="user_annotation", **{"External id": 1}),
        op("aten::mm", 105, 20, **{"External id": 2, "Input Dims": [[4, 8], [8, 2]], "Input type": ["float", "float"]}),
        runtime("cudaLaunchKernel", 110, 5, correlation=77, external_id=2),
        kernel("gemm_kernel", 130, 12.5, correlation=77, grid=[2, 1, 1], block=[128, 1, 1],
               **{"blocks per SM": 0.5, "est. achieved occupancy %": 25}),
        {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3", "pid": 0, "tid": 7, "ts": 128, "dur": 20, "args": {}},
    ])
    p = tb_plugin.load(path)
    m = p.model
    assert list(m.ops["name"]) == ["ProfilerStep#3", "aten::mm"]
    assert list(m.ops["depth"]) == [0, 1]
    assert list(m.ops["parent"]) == [-1, 0]
    assert m.ops["input_dims"][1] == "[[4, 8], [8, 2]]"
    assert m.runtime["op"].tolist() == [1]
    assert m.kernels["runtime"].tolist() == [0]
    assert m.kernels["op"].tolist() == [1]
    assert m.kernels["dur"].tolist() == [12.5]
    assert m.kernels["grid"][0] == "[2, 1, 1]"
    assert m.kernels["blocks_per_sm"][0] == 0.5
    # times are relative to the earliest interval, in microseconds
    assert m.origin_us == 100
    assert m.kernels["ts"].tolist() == [30.0]
    # the GPU copy of the step annotation is not a second step
    assert m.steps["step"].tolist() == [3]
    assert len(m.gpu_annotations) == 1


def test_load_2021_capitalised_categories_and_string_tids(tmp_path):
    events = [
        {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 5, "tid": "5", "ts": 10, "dur": 30,
         "args": {"External id": 9, "Input dims": [[1, 3, 8, 8]], "Call stack": "a.py(3): f;b.py(7): g"}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": "5", "ts": 12, "dur": 4,
         "args": {"correlation": 3, "external id": 9}},
        {"ph": "X", "cat": "Kernel", "name": "conv_kernel", "pid": 0, "tid": "stream 7", "ts": 20, "dur": 6,
         "args": {"correlation": 3, "external id": 9}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": "stream 7", "ts": 30, "dur": 2,
         "args": {"correlation": 4, "external id": 9, "bytes": 1024}},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 5, "tid": 5, "ts": 15, "args": {"Device Type": 0, "Device Id": -1, "Bytes": 64}},
    ]
    m = tb_plugin.load(write_trace(tmp_path / "old.pt.trace.json", events)).model
    assert m.ops["input_dims"][0] == "[[1, 3, 8, 8]]"
    assert m.ops["call_stack"][0] == "a.py(3): f;b.py(7): g"
    # device and stream come from "stream 7" / pid when args lack them
    assert (m.kernels["device"][0], m.kernels["stream"][0]) == (0, 7)
    assert m.kernels["op"][0] == 0
    assert m.memcpy["bytes"][0] == 1024 and m.memcpy["op"][0] == 0
    # memory record on int tid 5 belongs to the op on string tid "5"
    assert m.memory["op"].tolist() == [0]
    assert m.memory["bytes"].tolist() == [64]


def test_load_2020_bare_array(tmp_path):
    path = tmp_path / "a.pt.trace.json"
    path.write_text(json.dumps([op("aten::add", 1, 2), op("aten::mul", 4, 2)]))
    assert tb_plugin.load(path).model.ops["name"].tolist() == ["aten::add", "aten::mul"]


def test_load_gzip_and_float_timestamps_keep_nanoseconds(tmp_path):
    path = write_trace(tmp_path / "g.pt.trace.json.gz", [op("a", 88511388202.765, 1.5), op("b", 88511388203.001, 0.25)], gz=True)
    m = tb_plugin.load(path).model
    np.testing.assert_allclose(m.ops["ts"], [0.0, 0.236], atol=1e-4)  # sub-nanosecond
    np.testing.assert_allclose(m.ops["dur"], [1.5, 0.25])


def test_load_rocm_and_other_accelerator_runtimes(tmp_path):
    path = write_trace(tmp_path / "r.pt.trace.json", [
        op("aten::mm", 0, 10, **{"External id": 1}),
        runtime("hipLaunchKernel", 1, 2, correlation=5, external_id=1),
        runtime("xpuLaunch", 4, 2, correlation=6, external_id=1, cat="xpu_runtime"),
        runtime("cuLaunchKernel", 7, 2, correlation=8, external_id=1, cat="cuda_driver"),
        kernel("k1", 20, 3, correlation=5), kernel("k3", 30, 3, correlation=8),
    ])
    m = tb_plugin.load(path).model
    assert len(m.runtime) == 3
    assert m.kernels["op"].tolist() == [0, 0]
    assert tb_plugin.load(path).device_type == "ROCm"


def test_nesting_duplicates_and_overlaps_stay_visible(tmp_path):
    path = write_trace(tmp_path / "n.pt.trace.json", [
        op("parent", 0, 100),
        op("child", 10, 20), op("child", 10, 20),  # exact duplicate
        op("overlapping", 90, 30),  # starts inside parent, ends after it
        op("zero", 40, 0),
        op("after", 100, 5),  # starts where parent ends, but "overlapping" is still open
        op("later", 130, 5),  # everything closed: back to lane 0
    ])
    m = tb_plugin.load(path).model
    rows = dict(zip(range(7), zip(m.ops["name"], m.ops["depth"], m.ops["parent"])))
    assert rows[0] == ("parent", 0, -1)
    assert rows[1] == ("child", 1, 0)
    assert rows[2] == ("child", 2, 1)  # the duplicate is nested in its twin, on its own lane
    assert rows[3][1] == 1 and rows[3][2] == -1  # overlap: own lane, no false parent
    assert rows[4] == ("zero", 1, 0)
    assert rows[5] == ("after", 1, -1)  # below the overlap's lane, not inside "parent"
    assert (m.ops["depth"][6], m.ops["parent"][6]) == (0, -1)


def test_runtime_without_external_id_attributed_by_time(tmp_path):
    path = write_trace(tmp_path / "t.pt.trace.json", [
        op("outer", 0, 100), op("inner", 10, 50),
        runtime("cudaMemcpyAsync", 20, 5, correlation=1, external_id=0),
        runtime("cudaFree", 70, 5, correlation=2, external_id=0),
        runtime("cudaFree", 200, 5, correlation=3, external_id=0),
    ])
    assert tb_plugin.load(path).model.runtime["op"].tolist() == [1, 0, -1]


def test_tolerates_nan_bad_escapes_big_ints_and_invalid_utf8(tmp_path):
    text = ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce \\q", "pid": 1, "tid": 1,'
            ' "ts": 5, "dur": NaN, "args": {"comm id": 123456789012345678901234567890, "External id": 3}},'
            ' {"ph": "X", "cat": "cpu_op", "name": "bad \xff name", "pid": 1, "tid": 1, "ts": 6, "dur": 1}]}')
    path = tmp_path / "weird.pt.trace.json"
    path.write_bytes(text.encode("latin-1"))  # the \xff char becomes a lone 0xff byte
    m = tb_plugin.load(path).model
    assert len(m.ops) == 2
    assert m.ops["name"][0] == "nccl:all_reduce \\q"
    assert m.ops["dur"][0] == 0  # NaN duration -> 0, counted
    assert m.ops["external_id"][0] == 3
    assert "\ufffd" in m.ops["name"][1]
    assert m.anomalies["invalid_escapes_repaired"] == 1
    assert m.anomalies["invalid_utf8_replaced"] >= 1
    assert m.anomalies["invalid_durations_zeroed"] == 1


@pytest.mark.parametrize("indent", [None, 2])
def test_args_strings_with_escapes_read_exactly(tmp_path, indent):
    """Backslashes, quotes and control characters escaped in args strings (Windows call
    stacks, odd group names) come out as the JSON says, beside events without escapes."""
    stack = "C:\\new\\torch\\nn.py(7): forward;C:\\Users\\me\\train.py(3): <module>"
    events = [op("plain", 0, 1, **{"External id": 1, "Call stack": "a.py(1): f"}),
              op("windows", 2, 1, **{"External id": 2, "Call stack": stack, "Input type": ['say "hi"', "float"]}),
              op("nccl:all_reduce", 4, 1, **{"External id": 3, "Process Group Name": "pg\t0\n\u0001",
                                             "Collective name": "all\u00e9"})]
    path = tmp_path / "escapes.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}, indent=indent))
    m = tb_plugin.load(path).model
    assert not m.anomalies
    ops = m.ops.set_index("name")
    assert ops.loc["plain", "call_stack"] == "a.py(1): f"
    assert ops.loc["windows", "call_stack"] == stack
    assert json.loads(ops.loc["windows", "input_type"]) == ['say "hi"', "float"]
    assert ops["external_id"].tolist() == [1, 2, 3]
    assert ops.loc["nccl:all_reduce", "process_group_name"] == "pg\t0\n\u0001"
    assert ops.loc["nccl:all_reduce", "collective_name"] == "all\u00e9"


def test_escape_repair_keeps_valid_escaped_backslashes(tmp_path):
    """A Windows path (`C:\\\\Users`, valid JSON) beside an invalid escape: only the invalid
    one is repaired; the path's escaped backslashes are not taken for escapes."""
    text = ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a \\q", "pid": 1, "tid": 1, "ts": 0, "dur": 1,'
            ' "args": {"Call stack": "C:\\\\Users\\\\me\\\\train.py(3): main"}}]}')
    path = tmp_path / "windows.pt.trace.json"
    path.write_text(text)
    m = tb_plugin.load(path).model
    assert m.ops["name"].tolist() == ["a \\q"]
    assert m.ops["call_stack"].tolist() == ["C:\\Users\\me\\train.py(3): main"]
    assert m.anomalies["invalid_escapes_repaired"] == 1


@pytest.mark.parametrize("layout", ["one line", "indented", "long line"])
def test_bare_na_nan_and_inf_values_become_absent_and_strings_keep_them(tmp_path, layout):
    """Kineto wrote bare `N/A` values in early 2021 (pytorch/kineto#128) and C++ formatting
    writes `nan` / `inf`: those values are read as absent, counted; the same words inside
    strings are text and stay as they are. Indented files (as Kineto writes them) and short
    lines are repaired in bytes and keep the fast path; a word too far from a line start to
    tell cheaply whether it is in a string leaves the repair to the tolerant path."""
    events = [op('ratio: N/A, inf, -nan', 0, 10, **{"External id": 1}),
              kernel("k1", 2, 3, correlation=7, **{"blocks per SM": 1.5, "est. achieved occupancy %": 50}),
              kernel("k2", 6, 3, correlation=8, **{"blocks per SM": 2.0, "est. achieved occupancy %": 25})]
    if layout == "long line":
        events = [op("x" * 5000, 20, 1)] + events
    text = json.dumps({"traceEvents": events}, indent=2 if layout == "indented" else None)
    for number, word in [("1.5", "inf"), ("2.0", "-inf"), ("50", "N/A"), ("25", "nan")]:
        text = text.replace(number, word, 1)
    assert (text.count("N/A"), text.count("inf"), text.count("nan")) == (2, 3, 2)  # name + values
    path = tmp_path / "bare.pt.trace.json"
    path.write_text(text)
    m = tb_plugin.load(path).model
    assert m.ops["name"].tolist()[-1] == "ratio: N/A, inf, -nan"
    assert m.kernels["name"].tolist() == ["k1", "k2"]
    assert m.kernels["blocks_per_sm"].isna().all()
    assert m.kernels["est_achieved_occupancy_pct"].isna().all()
    assert m.anomalies["bare_words_nulled"] == 4
    assert ("tolerant_parse" in m.anomalies) == (layout == "long line")


def test_wrong_typed_fields_drop_only_that_event(tmp_path):
    path = write_trace(tmp_path / "typed.pt.trace.json", [
        op("good", 0, 10), {"ph": "X", "cat": "cpu_op", "name": "bad", "pid": 1, "tid": 1, "ts": {"x": 1}, "dur": 3},
        {"ph": "X", "cat": "cpu_op", "name": "no ts", "pid": 1, "tid": 1, "dur": 3},
        op("str numbers", "20", "5", **{"External id": "7"}),
    ])
    m = tb_plugin.load(path).model
    assert m.ops["name"].tolist() == ["good", "str numbers"]
    assert m.ops["ts"].tolist() == [0, 20] and m.ops["external_id"].tolist()[1] == 7
    assert m.anomalies["malformed_events_dropped"] == 1
    assert m.anomalies["events_without_ts_dropped"] == 1


def test_a_truncated_large_file_is_refused_without_the_slow_repair_path(tmp_path, monkeypatch):
    """A half-written trace (the common case while TensorBoard watches a run) is told apart
    from a malformed one right after the fast decoder, without the standard library pass."""
    from tb_plugin.trace import parse

    monkeypatch.setattr(parse, "_decode_tolerant", lambda *a: pytest.fail("took the tolerant path"))
    text = json.dumps({"traceEvents": [op(f"op{i}", i, 1) for i in range(2000)]}, indent=2).encode()
    for cut in (len(text) // 2, len(text) - 3):
        path = tmp_path / "half.pt.trace.json"
        path.write_bytes(text[:cut])
        with pytest.raises(TraceError, match=f"truncated .* after {cut:,} bytes of JSON"):
            tb_plugin.load(path)


@pytest.mark.parametrize("content, reason", [
    (b"", "empty"),
    (b"   \n", "empty"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1', "truncated"),
    (b'{"foo": 1}', "no 'traceEvents'"),
    (b"42", "not an object or array"),
    (b"\x00\x01garbage", "not valid JSON"),
    (b"\xef\xbb\xbf \n", "empty"),  # a byte-order mark and nothing else
    (b'{"traceEvents": []}x', "not valid JSON: Extra data"),  # one byte after the end is not a cut
    (b'{"traceEvents": []}{"traceEvents": []}', "not valid JSON: Extra data"),
])
def test_bad_files_raise_trace_error_naming_the_file(tmp_path, content, reason):
    path = tmp_path / "bad.pt.trace.json"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        tb_plugin.load(path)
    assert str(path) in str(err.value)
    assert reason in err.value.reason


def test_truncated_gzip_raises_trace_error(tmp_path):
    whole = gzip.compress(json.dumps({"traceEvents": [op("a", 1, 2)] * 1000}).encode())
    path = tmp_path / "cut.pt.trace.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(TraceError, match="gzip stream is corrupt or truncated"):
        tb_plugin.load(path)


def test_missing_file_raises_trace_error(tmp_path):
    with pytest.raises(TraceError, match="cannot"):
        tb_plugin.load(tmp_path / "nope.pt.trace.json")


def test_counters_and_metadata(tmp_path):
    path = write_trace(tmp_path / "c.pt.trace.json", [
        op("a", 0, 10, pid=7, tid=8),
        {"ph": "C", "name": "GPU Util", "pid": 7, "ts": 5, "args": {"util": 0.5, "sm": 0.25}},
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": "main thread"}},
        {"ph": "M", "name": "thread_sort_index", "pid": 7, "tid": 8, "args": {"sort_index": 3}},
    ], deviceProperties=[{"id": 0, "name": "Tesla X", "totalGlobalMem": 100, "computeMajor": 8, "computeMinor": 0, "numSms": 108}],
        distributedInfo={"backend": "nccl", "rank": 1, "world_size": 2})
    p = tb_plugin.load(path)
    m = p.model
    assert sorted(zip(m.counters["series"], m.counters["value"])) == [("sm", 0.25), ("util", 0.5)]
    thread = m.threads.iloc[m.ops["thread"][0]]
    assert (thread["process_name"], thread["thread_name"], thread["thread_sort_index"]) == ("python", "main thread", 3)
    assert m.devices["name"].tolist() == ["Tesla X"]
    info = p.info()
    assert info["distributed"]["rank"] == 1 and m.devices["totalGlobalMem"].tolist() == [100]
    # described but running nothing: not a GPU the trace used
    assert info["devices"] == [] and info["devices_on_host"] == 1


def test_a_wrong_typed_arg_is_absent_alone(tmp_path):
    # One op's "External id" is text that is no number: that value alone is absent (counted);
    # the op keeps its other args and the other ops all of theirs.
    path = write_trace(tmp_path / "args.pt.trace.json", [
        op("a", 0, 10, **{"External id": 1, "Input Dims": [[2, 3], []], "Process Group Name": 0}),
        op("b", 1, 2, **{"External id": "not a number", "Input Dims": [[4]]}),
        op("c", 3, 2, **{"External id": 3, "Input Dims": [[[1, 2], [3]]], "Process Group Name": "pg"}),
    ])
    m = tb_plugin.load(path).model
    assert m.ops["external_id"].tolist() == [1, -1, 3]
    assert m.ops["input_dims"].tolist() == ["[[2, 3], []]", "[[4]]", "[[[1, 2], [3]]]"]
    assert m.ops["process_group_name"].tolist() == ["0", "", "pg"]
    assert m.anomalies == {"arg_values_unreadable": 1}


def test_flow_ids_written_as_numbers_or_text(tmp_path):
    def flow(phase, flow_id, ts):
        return {"ph": phase, "cat": "ac2g", "name": "ac2g", "id": flow_id, "pid": 1, "tid": 1, "ts": ts, "bp": "e"}
    path = write_trace(tmp_path / "flows.pt.trace.json", [
        op("a", 0, 10), flow("s", 5, 1), flow("f", "5", 2), flow("s", "x1", 3), flow("f", "x1", 4),
        flow("s", 2**70, 5), flow("f", 7, 6),
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": 7},
    ])
    ids = tb_plugin.load(path).model.flows["flow_id"].tolist()
    assert ids[0] == ids[1] and ids[2] == ids[3]  # 5 and "5" are one id, as are "x1" and "x1"
    assert len({ids[0], ids[2], ids[4], ids[5]}) == 4 and ids[6] == -1  # no id: -1


def test_batches_and_released_input_give_the_same_model(monkeypatch, tmp_path):
    """The loader reads a local trace into an anonymous mapping and gives pages back as it
    goes; with many small batches (many releases) the model must equal the one built from
    plain bytes in one batch."""
    import pandas.testing

    from tb_plugin.store.storage import Storage, TraceBytes
    from tb_plugin.trace import batches as batches_module
    text = gzip.decompress(shared_trace("v100_ddp_nccl_memory", "rank1.pt.trace.json.gz").read_bytes())
    whole = tb_plugin.python_api.profile.profile_from_bytes(text, "whole").model
    (tmp_path / "rank1.pt.trace.json").write_bytes(text)
    monkeypatch.setattr(batches_module, "_BATCH_BYTES", 1 << 18)
    released = []
    real_release = TraceBytes.release
    monkeypatch.setattr(TraceBytes, "release", lambda self, upto=None: (released.append(upto), real_release(self, upto)))
    trace = Storage(tmp_path).read_trace("rank1.pt.trace.json")
    assert trace._mapping is not None  # an uncompressed local file takes the mapping path
    heard = []
    batched = tb_plugin.python_api.profile.profile_from_bytes(trace, "batched", lambda *report: heard.append(report)).model
    assert len(released) > 100  # one release per batch
    # Progress: the fraction of the JSON read at each release, then the table building.
    fractions = [fraction for stage, fraction in heard if stage == "parsing"]
    assert heard[-1] == ("building", None) and [stage for stage, _ in heard].count("building") == 1
    assert fractions[0] == 0 and fractions == sorted(fractions) and 0.95 < fractions[-1] <= 1
    assert len(fractions) == len(released)  # the start, and each release but the final one
    for name in whole.TABLES + ("threads", "devices"):
        pandas.testing.assert_frame_equal(getattr(batched, name), getattr(whole, name), obj=name)
    assert batched.anomalies == whole.anomalies


@pytest.mark.parametrize("stored_as", ["plain", "gzip", "remote"])
def test_reading_reports_the_fraction_of_the_stored_file_read(tmp_path, monkeypatch, stored_as):
    """Pieces of `_READ_PIECE` bytes, each followed by a report; the last report is 1."""
    import fsspec

    from tb_plugin.store import storage
    monkeypatch.setattr(storage, "_READ_PIECE", 4096)
    content = json.dumps({"traceEvents": [{"name": f"op{i}", "ts": i} for i in range(3000)]}).encode()
    stored = gzip.compress(content) if stored_as == "gzip" else content
    if stored_as == "remote":
        root = f"memory://{tmp_path.name}"
        with fsspec.open(f"{root}/t.json", "wb") as fh:
            fh.write(stored)
    else:
        root = tmp_path
        (tmp_path / "t.json").write_bytes(stored)
    heard = []
    trace = storage.Storage(root).read_trace("t.json", heard.append)
    assert bytes(trace.data) == content
    assert heard == sorted(heard) and heard[-1] == 1.0 and heard[0] >= 0
    if stored_as != "gzip":  # a gzip stream reads its file ahead in buffers of its own
        assert len(heard) == -(-len(stored) // 4096) and heard[0] == 4096 / len(stored)


def test_released_pages_are_given_back_and_the_rest_kept(tmp_path):
    from tb_plugin.store.storage import Storage, TraceBytes
    page = mmap.PAGESIZE
    content = bytes(range(256)) * (3 * page // 256) + b"tail"
    (tmp_path / "t.json").write_bytes(content)
    trace = Storage(tmp_path).read_trace("t.json")
    assert bytes(trace.data) == content
    trace.release(page + 10)  # only whole pages below the mark go
    assert bytes(trace.data[:page]) == bytes(page)  # an anonymous page given back reads as zeros
    assert bytes(trace.data[page:]) == content[page:]
    trace.release()
    assert bytes(trace.data[:3 * page]) == bytes(3 * page) and bytes(trace.data[3 * page:]) == b"tail"
    gz = tmp_path / "g.json.gz"
    gz.write_bytes(gzip.compress(content))
    inflated = Storage(tmp_path).read_trace("g.json.gz")
    assert bytes(inflated.data) == content  # inflated into a mapping too, whole
    inflated.release(page)
    assert bytes(inflated.data[:page]) == bytes(page) and bytes(inflated.data[page:]) == content[page:]
    kept = TraceBytes(content)  # bytes from a remote file: nothing to give back, nothing changes
    kept.release()
    assert bytes(kept.data) == content


def test_gzip_holding_more_than_its_trailer_says_loads_whole(tmp_path):
    # A gzip trailer records the size of the last member only, modulo 4 GiB: a file of two
    # members (or above 4 GiB) inflates to more than it claims and must not be cut short.
    events = [op(f"op{i}", 10 * i, 5) for i in range(200)]
    text = json.dumps({"traceEvents": events}).encode()
    path = tmp_path / "two.pt.trace.json.gz"
    path.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    assert len(tb_plugin.load(path).model.ops) == 200


def test_gzip_with_a_damaged_trailer_is_reported(tmp_path):
    path = write_trace(tmp_path / "w.pt.trace.json.gz", [op("a", 0, 10), op("b", 20, 5)], gz=True)
    data = bytearray(path.read_bytes())
    data[-4:] = (20).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError, match="gzip stream is corrupt or truncated"):
        tb_plugin.load(path)  # the gzip reader checks the length it inflated against the trailer


def test_lone_utf16_surrogate_escapes_become_replacement_characters(tmp_path):
    # JSON allows "\ud800" alone; UTF-8 cannot hold it. The event stays, the character is
    # replaced (and counted); a proper pair is kept.
    path = tmp_path / "s.pt.trace.json"
    path.write_text('{"traceEvents": ['
                    '{"ph": "X", "cat": "cpu_op", "name": "a\\ud800b", "pid": 1, "tid": 1, "ts": 1, "dur": 2},'
                    '{"ph": "X", "cat": "cpu_op", "name": "pair \\ud83d\\ude00", "pid": 1, "tid": 1, "ts": 4, "dur": 1,'
                    ' "args": {"Call stack": "x\\udfffy", "External id": 5}}]}')
    m = tb_plugin.load(path).model
    assert m.ops["name"].tolist() == ["a\ufffdb", "pair \U0001F600"]
    assert m.ops["call_stack"].tolist() == ["", "x\ufffdy"]
    assert m.ops["external_id"].tolist() == [-1, 5]
    assert m.anomalies["lone_surrogates_replaced"] == 2


def test_a_polars_panic_takes_the_repair_path(tmp_path, monkeypatch):
    # A panic in polars' Rust code is a BaseException: it must neither escape the loader nor
    # lose the trace when the repair path can read it.
    import polars as pl

    from tb_plugin.trace import parse as parse_module
    path = write_trace(tmp_path / "p.pt.trace.json", [op("a", 0, 10), op("b", 2, 3)])
    real_read = pl.read_ndjson
    calls = []

    def panicking_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise pl.exceptions.PanicException("simulated panic")
        return real_read(*args, **kwargs)
    monkeypatch.setattr(parse_module.pl, "read_ndjson", panicking_once)
    assert tb_plugin.load(path).model.ops["name"].tolist() == ["a", "b"]

    def always_panicking(*args, **kwargs):
        raise pl.exceptions.PanicException("simulated panic")
    monkeypatch.setattr(parse_module.pl, "read_ndjson", always_panicking)
    m = tb_plugin.load(path).model  # nothing readable: events dropped and counted, no crash
    assert len(m.ops) == 0 and m.anomalies["malformed_events_dropped"] == 2


def test_a_polars_panic_while_modelling_becomes_a_trace_error(tmp_path, monkeypatch):
    import polars as pl

    from tb_plugin.trace import build as build_module
    path = write_trace(tmp_path / "p.pt.trace.json", [op("a", 0, 10)])

    def panicking(*args, **kwargs):
        raise pl.exceptions.PanicException("simulated panic")
    monkeypatch.setattr(build_module, "frame_codes", panicking)
    with pytest.raises(TraceError, match="could not be analysed.*PanicException"):
        tb_plugin.load(path)


def test_device_properties_without_a_usable_compute_minor_show_no_capability(tmp_path):
    """Fuzzing: a deviceProperties entry whose computeMinor is a string (or absent) made
    gpu_summary() raise ValueError (int(NaN)) instead of leaving the capability blank."""
    events = [kernel("k", 10, 5, correlation=1)]
    for minor in ("x", None, float("inf")):
        props = {"id": 0, "name": "GPU", "totalGlobalMem": 10, "computeMajor": 8, "computeMinor": minor}
        path = write_trace(tmp_path / "w.pt.trace.json", events, deviceProperties=[props])
        assert tb_plugin.load(path).gpu_summary()["compute_capability"].tolist() == [""]


def test_pid_and_tid_beyond_int64_load_and_draw(tmp_path):
    """Fuzzing: a 20-digit pid on a kernel made the model refuse the whole trace
    (OverflowError -> "could not be analysed"), and a 20-digit tid broke the timeline; the
    device / stream number becomes -1 (absent), as for a pid holding no number."""
    path = write_trace(tmp_path / "w.pt.trace.json", [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 10**20, "tid": 7, "ts": 1, "dur": 2, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 10**20, "ts": 1, "dur": 2, "args": {}},
    ])
    p = tb_plugin.load(path)
    assert p.model.kernels[["device", "stream"]].values.tolist() == [[-1, 7]]
    tracks = p.timeline().tracks
    assert {"stream 7", f"thread {10**20}"} <= set(tracks["thread"])


def test_module_frames_all_on_a_parent_id_cycle_give_an_empty_module_table(tmp_path):
    """Fuzzing: when every module frame's parent ids form a cycle (each frame is dropped, as
    documented), modules() raised IndexError indexing the empty node array."""
    def frame(ts, python_id, parent):
        return {"ph": "X", "cat": "python_function", "name": "nn.Module: M", "pid": 1, "tid": 1, "ts": ts, "dur": 5,
                "args": {"Python id": python_id, "Python parent id": parent, "Python module id": 0}}
    path = write_trace(tmp_path / "w.pt.trace.json", [frame(0, 1, 2), frame(1, 2, 1), op("aten::mm", 2, 1)])
    p = tb_plugin.load(path)
    assert len(p.modules()) == 0
    assert p.module_flame() == {"name": "All modules", "value": 0.0, "children": []}


def test_counter_args_that_are_strings_are_skipped_not_fatal(tmp_path):
    """Fuzzing: polars writes an args that is a JSON string as its bare text, so one counter
    event (`ph: C`) with `"args": "text"` made the joined counter JSON undecodable and the
    whole trace was refused ("could not be analysed"); one holding `{..}, {..}` as text
    shifted every later counter value onto the wrong event."""
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("aten::mm", 1, 2),
        {"ph": "C", "name": "ctr", "pid": 1, "ts": 2, "args": "cuda_runtime"},
        {"ph": "C", "name": "ctr", "pid": 1, "ts": 3, "args": '{"a": 1}, {"b": 2}'},
        {"ph": "C", "name": "ctr", "pid": 1, "ts": 4, "args": {"v": 5}},
        {"ph": "C", "name": "ctr", "pid": 1, "ts": 5, "args": None},
    ])
    m = tb_plugin.load(path).model
    assert m.counters[["ts", "series", "value"]].values.tolist() == [[3.0, "v", 5.0]]
    assert m.anomalies == {"malformed_args_replaced": 2}


@pytest.mark.parametrize("gz", [False, True])
def test_a_utf8_byte_order_mark_is_skipped(tmp_path, gz):
    """Fuzzing: a trace saved with a UTF-8 byte-order mark (as Windows tools write) was
    refused as "not valid JSON: Unexpected UTF-8 BOM"; it is skipped and counted."""
    events = [op("aten::mm", 1, 2), op("aten::add", 4, 1)]
    for document in ({"traceEvents": events}, events):
        data = b"\xef\xbb\xbf" + json.dumps(document).encode()
        path = tmp_path / ("w.pt.trace.json" + (".gz" if gz else ""))
        path.write_bytes(gzip.compress(data) if gz else data)
        m = tb_plugin.load(path).model
        assert m.ops["name"].tolist() == ["aten::mm", "aten::add"]
        assert m.anomalies == {"byte_order_mark_skipped": 1}


def test_whole_number_args_beyond_int64_read_as_absent(tmp_path):
    """Fuzzing: a kernel's "registers per thread" / "shared memory", a memcpy's or a memory
    record's bytes of 1e300 were cast to int64 as -2**63 (with a RuntimeWarning)."""
    path = write_trace(tmp_path / "w.pt.trace.json", [
        kernel("k", 1, 2, correlation=1, **{"registers per thread": 1e300, "shared memory": -1e19}),
        {"ph": "X", "cat": "gpu_memcpy", "name": "m", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
         "args": {"bytes": 1e30, "device": 0, "stream": 7}},
        {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1,
         "args": {"Device Type": 0, "Device Id": 0, "Addr": 1, "Bytes": 1e300, "Total Allocated": 1, "Total Reserved": 1}},
    ])
    m = tb_plugin.load(path).model
    assert m.kernels[["registers_per_thread", "shared_memory"]].values.tolist() == [[-1, -1]]
    assert m.memcpy["bytes"].tolist() == [-1] and m.memory["bytes"].tolist() == [0]


@pytest.mark.parametrize("args", ["", "  ", 5, [1, 2], "x"])
def test_args_that_are_not_objects_read_as_empty(tmp_path, args):
    """Fuzzing: an event whose args is an empty or blank string (`{"ph": "M", "args": ""}`)
    left the args lines one short, since polars writes a string as its bare text and the
    lines reader skips a blank line: the trace was refused ("All arrays must be of the same
    length"). Args that are no object hold no field: defaults, counted."""
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("a", 1, 2, **{"External id": 3}) | {"args": args},
        op("b", 1, 2, **{"External id": 7}),
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": args},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
    ])
    m = tb_plugin.load(path).model
    assert m.ops["external_id"].tolist() == [-1, 7]
    assert m.threads[["process_name", "thread_name"]].values.tolist() == [["main", ""]]
    assert m.anomalies == {"malformed_args_replaced": 2}


def test_absurd_durations_are_zeroed_and_keep_the_nesting(tmp_path):
    """Fuzzing: one python frame with `dur` 1e308 made the per-thread sort keys of its
    nesting (ts + thread * span) inf/NaN (numpy 'invalid value' warnings), garbling depth and
    parent of every frame; durations beyond 1e12 us (11.6 days) are invalid and zeroed, like
    negative ones."""
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("outer", 0, 10), op("inner", 2, 3),
        {"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 2, "ts": 1, "dur": 1e308, "args": {}},
    ])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        m = tb_plugin.load(path).model
    assert m.ops[["depth", "parent"]].values.tolist() == [[0, -1], [1, 0]]
    assert m.python["dur"].tolist() == [0.0] and m.anomalies == {"invalid_durations_zeroed": 1}


def test_a_step_number_beyond_int64_is_no_step(tmp_path):
    """Fuzzing: an op named "ProfilerStep#" + 20 digits made the trace refused (OverflowError
    casting the step numbers to int64); it stays an op, not a step."""
    path = write_trace(tmp_path / "w.pt.trace.json", [
        op("ProfilerStep#99999999999999999999", 0, 10, cat="user_annotation"),
        op("ProfilerStep#4", 20, 10, cat="user_annotation"), op("aten::mm", 22, 1),
    ])
    p = tb_plugin.load(path)
    assert p.model.steps["step"].tolist() == [4] and len(p.model.ops) == 3
    assert p.steps()["step"].tolist() == [4]


def test_events_far_from_the_trace_are_dropped_and_the_rest_keep_their_args(tmp_path):
    """Kineto has written kernels (and their flow ends) at ts 0 in traces whose times are
    epoch microseconds (pytorch/kineto#109). Kept, they would make the trace start in 1970:
    decades wide, every other time rounded. They are dropped and counted; the events around
    them keep their own args (the args columns drop the same rows)."""
    t0 = 1_615_207_264_500_000
    events = [
        op("aten::mm", t0, 50, **{"External id": 7}),
        runtime("cudaLaunchKernel", t0 + 10, 5, correlation=1, external_id=7),
        runtime("cudaLaunchKernel", t0 + 20, 5, correlation=2, external_id=7),
        kernel("bad", 0, 0, correlation=1, **{"registers per thread": 99}),
        {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 0, "cat": "ac2g", "name": "launch", "bp": "e"},
        kernel("good", t0 + 30, 8, correlation=2, **{"registers per thread": 32}),
        {"ph": "s", "id": 2, "pid": 1, "tid": 1, "ts": t0 + 20, "cat": "ac2g", "name": "launch"},
        {"ph": "f", "id": 2, "pid": 0, "tid": 7, "ts": t0 + 30, "cat": "ac2g", "name": "launch", "bp": "e"},
        {"ph": "C", "name": "util", "pid": 0, "tid": 0, "ts": 0, "args": {"v": 1}},
        {"ph": "C", "name": "util", "pid": 0, "tid": 0, "ts": t0 + 40, "args": {"v": 2}},
    ]
    model = tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events)).model
    assert model.anomalies["events_far_from_the_trace_dropped"] == 3
    assert model.origin_us == t0
    k = model.kernels
    assert k["name"].astype(str).tolist() == ["good"] and k["registers_per_thread"].tolist() == [32]
    assert k["ts"].tolist() == [30.0] and k["op"].tolist() == [0]
    assert model.flows["ts"].tolist() == [20.0, 30.0] and model.flows["flow_id"].nunique() == 1
    assert model.counters["value"].tolist() == [2.0] and model.counters["ts"].tolist() == [40.0]
    assert model.span_us() == (0.0, 50.0)
