"""Newer Kineto trace forms read as what they mean, with the views equal to the older form's
(issue 39, item 1). Each test writes a trace as its writer writes it; the writer's source is
named (repository, path, commit) beside each."""

import gzip
import json

import pandas as pd
import pytest

import tb_plugin

from .helpers import ANNOTATED_NODES, kernel, op, raw_events, runtime, shared_trace, write_trace


def _rewritten(tmp_path, name, source, change):
    """The real trace `source` written again to `tmp_path / name` after `change(events)`."""
    data = gzip.decompress(source.read_bytes())
    doc = json.loads(data)
    change(doc["traceEvents"])
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_a_text_number_in_one_event_costs_no_event_its_args(tmp_path):
    """Issue 39's case, on a real A100 trace: copies' `bytes` written as text while kernels,
    copies and sets carry integer `graph id` / `graph node id` (kineto#1276/#1277:
    `addGraphNodeTypedMetadata`, pytorch/pytorch third_party/kineto/libkineto/src/CuptiActivity.h
    at 7a6a8827f772dd40bc3d3b220fcb17a754973189) marked every copy's args malformed and
    replaced them all with defaults (bytes, correlation, stream). The text `bytes` is a mixed
    form no single writer read here produces on a device copy (the older ROCm writer writes it
    on the copy call: `test_copy_metadata_typed_and_as_text`); it stands for any argument whose
    type changes in one event. Each value is read on its own: nothing is lost and the views
    are unchanged."""
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
        copy | {"ts": 5, "args": {"correlation": 10, "device": 0, "stream": 7, "bytes": "unknown", "graph node id": 3}},
        copy | {"ts": 8, "args": {"correlation": 11, "device": 0, "stream": 7, "bytes": " 4096 ", "graph id": 2}},
        kernel("k", 12, 3, correlation=12, **{"graph node id": 4, "registers per thread": "32"}),
    ])
    m = tb_plugin.load(path).model
    assert m.memcpy[["correlation", "stream", "bytes", "op"]].values.tolist() == [[10, 7, -1, 0], [11, 7, 4096, 0]]
    assert m.kernels[["registers_per_thread", "graph_node_id"]].values.tolist() == [[32, "4"]]
    assert m.anomalies == {"arg_values_unreadable": 1}


# --- one small CUDA step, written as Kineto writes it, and its newer forms --------------------
# The older form: pytorch/kineto libkineto/src/output_json.cpp at acf03f80228f34a9b4a79d461a27ae30699a2468
# and libkineto/src/CuptiActivity.cpp at e398229027fbc98b6cb8823c0c34b06f5d67faee: kernels,
# copies and sets on pid = device, tid = stream; syncs named by `syncTypeString` ("Stream Sync",
# "Stream Wait Event", "Context Sync": the names on the shared real A100 trace a100_alexnet),
# with `cuda_sync_kind`, on tid = stream (a context sync's stream -1 written as tid -1); each
# device event a flow end (`f`, `bp: "e"`) of its correlation, whose start (`s`) is on the
# runtime calls that correlate (`RuntimeActivity::flowStart`: launches, copies, sets,
# cudaStreamSynchronize, cudaDeviceSynchronize, cudaStreamWaitEvent).

def _flow(phase, flow_id, pid, tid, ts):
    event = {"ph": phase, "id": flow_id, "pid": pid, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g"}
    return event | ({"bp": "e"} if phase == "f" else {})


def _device(cat, name, ts, dur, correlation, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "context": 1, "stream": 7, "correlation": correlation, **args}}


def _meta(what, pid, tid, **args):
    return {"name": what, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


def older_step():
    """One profiler step: an op launching a kernel, a copy, a set, a stream wait and a stream
    sync on stream 7 of GPU 0, then a device sync (a context sync, no stream); times in µs."""
    return [
        _meta("process_name", 1, 0, name="python"), _meta("process_name", 0, 0, name="python"),
        _meta("process_labels", 0, 0, labels="GPU 0"), _meta("thread_name", 0, 7, name="stream 7 "),
        op("ProfilerStep#1", 0, 100, cat="user_annotation", **{"External id": 1}),
        op("aten::mm", 5, 60, **{"External id": 2}),
        runtime("cudaLaunchKernel", 10, 5, correlation=100, external_id=2) | {"args": {"cbid": 211, "correlation": 100, "External id": 2}},
        _flow("s", 100, 1, 1, 10),
        _device("kernel", "gemm", 20, 30, 100, **{"registers per thread": 32, "shared memory": 0, "blocks per SM": 0.5,
                                                 "warps per SM": 2.0, "grid": [40, 1, 1], "block": [128, 1, 1],
                                                 "est. achieved occupancy %": 6}),
        _flow("f", 100, 0, 7, 20),
        runtime("cudaMemcpyAsync", 16, 4, correlation=101, external_id=2),
        _device("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 52, 8, 101, bytes=4096, **{"memory bandwidth (GB/s)": 0.512}),
        runtime("cudaMemsetAsync", 21, 2, correlation=102, external_id=2),
        _device("gpu_memset", "Memset (Device)", 61, 1, 102, bytes=128, **{"memory bandwidth (GB/s)": 0.128}),
        runtime("cudaStreamWaitEvent", 24, 1, correlation=103, external_id=2), _flow("s", 103, 1, 1, 24),
        _device("cuda_sync", "Stream Wait Event", 63, 1, 103, cuda_sync_kind="Stream Wait Event", wait_on_stream=9,
                wait_on_cuda_event_record_corr_id=99, wait_on_cuda_event_id=3),
        _flow("f", 103, 0, 7, 63),
        runtime("cudaStreamSynchronize", 66, 20, correlation=104, external_id=2), _flow("s", 104, 1, 1, 66),
        _device("cuda_sync", "Stream Sync", 66, 19, 104, cuda_sync_kind="Stream Sync"),
        _flow("f", 104, 0, 7, 66),
        runtime("cudaDeviceSynchronize", 87, 9, correlation=107, external_id=1), _flow("s", 107, 1, 1, 87),
        _device("cuda_sync", "Context Sync", 88, 7, 107, cuda_sync_kind="Context Sync", stream=-1) | {"tid": -1},
        _flow("f", 107, 0, -1, 88),
    ]


def _views(profile, tables):
    """The answers a user reads, and the model's `tables` (text as text), as comparable frames."""
    views = {"steps": profile.steps(), "gpu_summary": profile.gpu_summary(), "operators": profile.operators(),
             "kernels": profile.kernels(), "idle": profile.idle_time(), "memcpy": profile.answer("memcpy_summary"),
             "critical_path": profile.critical_path()}
    m = profile.model
    for name in tables:
        table = getattr(m, name).drop(columns=["thread"])
        views[f"table {name}"] = table.astype({c: str for c in table if isinstance(table[c].dtype, pd.CategoricalDtype)})
    return views


def assert_same_views(newer, older, tables=("kernels", "memcpy", "memset", "syncs")):
    a, b = _views(newer, tables), _views(older, tables)
    for name in b:
        pd.testing.assert_frame_equal(a[name].reset_index(drop=True), b[name].reset_index(drop=True), obj=name)


def _load(tmp_path, name, events, **top_level):
    return tb_plugin.load(write_trace(tmp_path / f"{name}.pt.trace.json", events, **top_level))


def test_sync_on_the_virtual_sync_thread_is_its_streams_sync(tmp_path):
    """kineto#1356 (`ChromeTraceLogger::handleActivity` and `handleLink` in pytorch/pytorch
    third_party/kineto/libkineto/src/output_json.cpp at 35d03b38e2acbc5c21d953f0738178c61aff7b20,
    `kSyncStreamTidOffset = 1000000` in output_json.h): a CUDA sync named "Stream Sync" is
    written on the virtual thread `stream + 1,000,000`, and so is its flow end; before the first
    one of a (device, stream), a `thread_name` "stream N (sync)" and a `thread_sort_index` N on
    that thread. Other syncs stay where they were: "Stream Wait Event" on its stream; "Context
    Sync", whose stream CUPTI leaves invalid, written by the typed metadata as `"stream": -1`
    (`streamIdForTrace`, CuptiActivity.h at 7a6a8827f772dd40bc3d3b220fcb17a754973189) on tid
    `sanitizeTid(-1)` = 1 (older writers: tid -1). A moved sync is stream N's sync, not a new
    stream; the context sync is on no stream."""
    newer, virtual = [], 7 + 1_000_000
    for e in older_step():
        if e.get("name") == "Stream Sync" or (e.get("ph") == "f" and e["id"] == 104):
            if e["ph"] == "X":
                newer += [_meta("thread_name", 0, virtual, name="stream 7 (sync)") | {"ts": e["ts"]},
                          _meta("thread_sort_index", 0, virtual, sort_index=7) | {"ts": e["ts"]}]
            e["tid"] = virtual
        if e.get("tid") == -1 and e.get("pid") == 0:
            e["tid"] = 1
        newer.append(e)
    older = _load(tmp_path, "older", older_step())
    profile = _load(tmp_path, "newer", newer)
    assert_same_views(profile, older)
    syncs = profile.model.syncs
    assert dict(zip(syncs["name"].astype(str), syncs["stream"])) == {
        "Stream Wait Event": 7, "Stream Sync": 7, "Context Sync": -1}
    # the flows pair as before, the sync's ending on its virtual thread
    threads = profile.model.threads
    assert [(c, s_ts, e_ts) for c, _, s_ts, _, e_ts in _flow_pairs(profile)] == \
        [(c, s_ts, e_ts) for c, _, s_ts, _, e_ts in _flow_pairs(older)]
    assert [tuple(threads.loc[end, ["pid", "tid"]]) for *_, end, e_ts in _flow_pairs(profile) if e_ts == 66] == [("0", str(virtual))]
    assert profile.info()["anomalies"] == older.info()["anomalies"]


def _with_args(events, cats, **args):
    """`events` (copied) with `args` added to those of the categories `cats`."""
    events = json.loads(json.dumps(events))
    for e in events:
        if e.get("cat") in cats:
            e["args"].update(args)
    return events


def _typed_cuda_args(events, graph_node):
    """`events` (copied) with the args Kineto's typed metadata adds to kernels, copies and sets
    (`GpuActivity<...>::visitTypedMetadata` in pytorch/pytorch third_party/kineto/libkineto/src/
    CuptiActivity.h at 7a6a8827f772dd40bc3d3b220fcb17a754973189, names from CudaMetadataFields.h
    at pytorch/kineto 6d1cb7a7223bb843a020865b197dd36973dce939): kernels' `queued` and
    `occupancy` (an object); `graph id` and `graph node id` (unsigned numbers, CUDA >= 12;
    `graph_node(name)` the node, 0 outside a graph) and `channel` / `channel_type` on all
    three (`addGraphNodeTypedMetadata`, `addChannelTypedMetadata`); `priority` on kernels
    (CUDA >= 13.1)."""
    events = json.loads(json.dumps(events))
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        if e["cat"] == "kernel":
            e["args"] = {"queued": 0, **e["args"], "occupancy": {
                "activeBlocksPerMultiprocessor": 4, "limitingFactors": "WARPS|REGS", "blockLimitRegs": 4,
                "blockLimitSharedMem": 32, "blockLimitWarps": 16, "blockLimitBlocks": 32, "blockLimitBarriers": 32,
                "allocatedRegistersPerBlock": 4096, "allocatedSharedMemPerBlock": 0}}
        node = graph_node(e["name"])
        e["args"].update({"graph id": 1 if node else 0, "graph node id": node})
        e["args"].update({"priority": 0} if e["cat"] == "kernel" else {})
        e["args"].update({"channel": 2, "channel_type": 1})
    return events


def test_graph_ids_on_kernels_copies_and_sets(tmp_path):
    """kineto#1276/#1277: kernels, copies and sets carry `graph id` and `graph node id`, with the
    rest of the typed metadata (`_typed_cuda_args`); outside a graph both are 0. No value, the
    `occupancy` object included, changes a number; a node id above the int64 range (CUPTI's are
    unsigned 64-bit) is kept whole as text."""
    outside = _typed_cuda_args(older_step(), lambda name: 0)
    assert_same_views(_load(tmp_path, "outside", outside), _load(tmp_path, "older", older_step()))
    big = 2**64 - 5
    replayed = _load(tmp_path, "replayed", _typed_cuda_args(older_step(), lambda name: big if name == "gemm" else 0))
    assert replayed.model.kernels["graph_node_id"].astype(str).tolist() == [str(big)]
    assert replayed.info()["anomalies"] == {}


def test_cuda_event_records_are_no_work(tmp_path):
    """kineto#1164: CUPTI's CUDA event records, as `CudaEventActivity` (pytorch/pytorch
    third_party/kineto/libkineto/src/CuptiActivity.h at 7a6a8827f772dd40bc3d3b220fcb17a754973189)
    and `handleCuptiActivity` (CuptiActivityProfiler.cpp) log them: category `cuda_event`
    (ActivityType.h), name "cudaEvent", at the device timestamp of the record (CUDA >= 12.8; 0
    before, so dropped as out of range), `dur` 1 ns, on pid = device, tid = stream, args
    `event_id`, `stream`, `correlation`, `device`, `context` after the linked op's `External
    id`; `ChromeTraceLogger::handleActivity` (output_json.cpp at 35d03b38e2acbc5c21d953f0738178c61aff7b20)
    writes `"dur": 0.001` and a flow end (`flowId` is the correlation) whose start is never
    written: cudaEventRecord is not one of the calls that correlate
    (CuptiCbidRegistry.cpp at 23fcfb72c3ae432aa6495d45cfecb58c239f2828). A record is a marker,
    not device work: the views equal those of the trace without it."""
    older = older_step() + [runtime("cudaEventRecord", 26, 1, correlation=105, external_id=2)]
    record = {"ph": "X", "cat": "cuda_event", "name": "cudaEvent", "pid": 0, "tid": 7, "ts": 62.5, "dur": 0.001,
              "args": {"External id": 2, "event_id": 3, "stream": 7, "correlation": 105, "device": 0, "context": 1}}
    profile = _load(tmp_path, "newer", older + [record, _flow("f", 105, 0, 7, 62.5)])
    before = _load(tmp_path, "older", older)
    assert_same_views(profile, before, tables=("kernels", "memcpy", "memset"))
    syncs = profile.model.syncs
    assert sorted(syncs["name"].astype(str)) == ["Context Sync", "Stream Sync", "Stream Wait Event", "cudaEvent"]
    assert syncs.loc[syncs["name"] == "cudaEvent", ["stream", "correlation"]].values.tolist() == [[7, 105]]
    assert _flow_pairs(profile) == _flow_pairs(before)


def _xpu(events):
    """`events` as Kineto's XPU plugin writes them (`handleRuntimeKernelMemcpyMemsetActivities`,
    pytorch/pytorch third_party/kineto/libkineto/src/plugin/xpupti/XpuptiActivityHandlers.cpp
    at 355bd7084a14c986b6ad7530d71403094950926a): `xpu_runtime` calls (urEnqueue...) with
    `correlation`; kernels, copies and sets on pid = device, tid = SYCL queue id, with no
    `stream` arg: `correlation`, the append / submit times as text, `device`, the Level Zero
    context and queue handles as hex text, `sycl queue`, and the kind's own (`kernel_id`, ...;
    copies' and sets' `l0 call`, `bytes` and bandwidth); an `ac2g` flow from each runtime call
    to its device event. No CUDA sync records."""
    names = {"cudaLaunchKernel": "urEnqueueKernelLaunch", "cudaMemcpyAsync": "urEnqueueUSMMemcpy",
             "cudaMemsetAsync": "urEnqueueUSMFill", "cudaStreamWaitEvent": "urEnqueueEventsWaitWithBarrier",
             "cudaStreamSynchronize": "urQueueFinish", "cudaDeviceSynchronize": "urQueueFinish"}
    l0_calls = {"gpu_memcpy": "zeCommandListAppendMemoryCopy", "gpu_memset": "zeCommandListAppendMemoryFill"}
    events = json.loads(json.dumps(events))
    syncs = {e["args"]["correlation"] for e in events if e.get("cat") == "cuda_sync"}
    out = []
    for e in events:
        a = e.get("args", {})
        if e.get("cat") == "cuda_runtime":
            e.update(cat="xpu_runtime", name=names[e["name"]], args={"External id": a["External id"], "correlation": a["correlation"]})
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            args = {"correlation": a["correlation"], **({"l0 call": l0_calls[e["cat"]]} if e["cat"] in l0_calls else {}),
                    "appended": f"{e['ts'] - 3:.3f}", "appended_rel_to_start": "-3.000",
                    "submitted": f"{e['ts'] - 2:.3f}", "submitted_rel_to_start": "-2.000",
                    "device": 0, "context": "0x00005581f0a3c2d0", "sycl queue": e["tid"], "l0 queue": "0x00005581f0b20a10"}
            if e["cat"] == "kernel":
                args.update(kernel_id=1, sycl_node_id=0, sycl_invocation_id=0)
            else:
                args.update({"memory opration id": a["correlation"], "bytes": a["bytes"],
                             "memory bandwidth (GB/s)": a["memory bandwidth (GB/s)"]})
            e["args"] = args
        if e.get("cat") != "cuda_sync" and not (e["ph"] in ("s", "f") and e["id"] in syncs):
            out.append(e)
    # every runtime call starts its correlation's flow (`startsFlow(XPU_RUNTIME)`), every device
    # event ends it
    flows = {(e["ph"], e["id"]) for e in out if e["ph"] in ("s", "f")}
    for e in list(out):
        end = e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        if (e.get("cat") == "xpu_runtime" or end) and ("f" if end else "s", e["args"]["correlation"]) not in flows:
            out.insert(out.index(e) + 1, _flow("f" if end else "s", e["args"]["correlation"], e["pid"], e["tid"], e["ts"]))
    return out


def test_xpu_sync_and_scope_profiler_events_are_no_work(tmp_path):
    """XPU, as Kineto's XPU plugin writes it (pytorch/pytorch third_party/kineto/libkineto/src/
    plugin/xpupti/ at the commits named here) through `ChromeTraceLogger` (output_json.cpp at
    35d03b38e2acbc5c21d953f0738178c61aff7b20):
    - `xpu_sync` (`handleSynchronizationActivity`, XpuptiActivityHandlers.cpp at
      355bd7084a14c986b6ad7530d71403094950926a): on pid -1 (no device) and the host thread,
      args `correlation`, `Type`, the Level Zero handles as hex text, `Number_wait_events`,
      `Return_code`;
    - the scope profiler (`handleScopeRecord`, XpuptiScopeProfilerHandlers.cpp at
      cd58ff91d0cb4050dedd84f237f5b6861405b3be): per measured kernel a `kernel` slice "metrics:
      <name>" from 1 ns before it to 1 ns after on its row, args `kernel_id`, `queue` (text)
      and each metric `name::unit`; and two `xpu_scope_profiler` counter samples "xpu" on that
      row (`handleCounterEvent`), the metrics' values at its start, zeros at its end.
    None of them is work: the views and tables equal those without them; the sync is a sync,
    the metric slice a marker (`other`), the samples counters."""
    older = _xpu(older_step())
    sync = {"ph": "X", "cat": "xpu_sync", "name": "zeEventHostSynchronize", "pid": -1, "tid": 1, "ts": 67, "dur": 18,
            "args": {"External id": 2, "correlation": 109, "Type": "HOST_EVENT", "Context_handle": "0x00005581f0a3c2d0",
                     "Queue_handle": "0x0000000000000000", "Event_handle": "0x00005581f0b41e80",
                     "Number_wait_events": 0, "Return_code": 0}}
    metrics = {"ph": "X", "cat": "kernel", "name": "metrics: gemm", "pid": 0, "tid": 7, "ts": 19.999, "dur": 30.002,
               "args": {"kernel_id": 1, "queue": "7", "EuActive::%": 80.5, "GpuTime::ns": 30000}}
    samples = [{"ph": "C", "cat": "xpu_scope_profiler", "name": "xpu", "pid": 0, "tid": 7, "ts": ts,
                "args": {"EuActive": eu, "GpuTime": gpu}} for ts, eu, gpu in ((19.999, 80.5, 30000), (50.001, 0, 0))]
    profile = _load(tmp_path, "newer", older + [sync, metrics, *samples])
    assert_same_views(profile, _load(tmp_path, "older", older), tables=("kernels", "memcpy", "memset"))
    assert profile.model.syncs["name"].astype(str).tolist() == ["zeEventHostSynchronize"]
    assert profile.model.other["name"].astype(str).tolist() == ["metrics: gemm"]
    counters = profile.counters()
    assert sorted(zip(counters["counter"], counters["value"])) == [
        ("EuActive", 0.0), ("EuActive", 80.5), ("GpuTime", 0.0), ("GpuTime", 30000.0)]


def test_xpu_flows_keyed_by_activity_type(tmp_path):
    """kineto#1467 (`XpuptiActivityProfilerSession::startsFlow` used in
    `handleRuntimeKernelMemcpyMemsetActivities`, pytorch/pytorch third_party/kineto/libkineto/
    src/plugin/xpupti/XpuptiActivityHandlers.cpp at 355bd7084a14c986b6ad7530d71403094950926a):
    the XPU plugin starts the `ac2g` flow at the host record of activity type
    `xpu_runtime`, whatever the call's name (the SYCL 2025.3+ launch
    `urEnqueueKernelLaunchWithArgsExp`, which the former name list missed), never at the
    `xpu_driver` record (ze*) the runtime call makes: nested in it on its thread, with its
    correlation. The older form: `urEnqueueKernelLaunch`, no driver records. The driver calls'
    time is the runtime call's, counted once in the op's host self time."""
    older = _xpu(older_step())
    drivers = {"urEnqueueKernelLaunch": "zeCommandListAppendLaunchKernel", "urEnqueueUSMMemcpy": "zeCommandListAppendMemoryCopy"}
    newer = []
    for e in json.loads(json.dumps(older)):
        if e.get("name") in drivers:  # the driver record written first: a buffer's order, not time's
            newer.append(runtime(drivers[e["name"]], e["ts"] + 1, e["dur"] - 2, correlation=e["args"]["correlation"],
                                 external_id=2, cat="xpu_driver"))
        if e.get("name") == "urEnqueueKernelLaunch":
            e["name"] = "urEnqueueKernelLaunchWithArgsExp"
        newer.append(e)
    profile, before = _load(tmp_path, "newer", newer), _load(tmp_path, "older", older)
    assert_same_views(profile, before, tables=())
    assert _flow_pairs(profile) == _flow_pairs(before)
    assert [(c, start, end) for c, _, start, _, end in _flow_pairs(profile)] == [("ac2g", 10, 20), ("ac2g", 16, 52), ("ac2g", 21, 61)]
    # the tables equal but for `runtime`, a row of the runtime table, which holds the driver
    # calls too: each device event's is the runtime call's
    tables = ("kernels", "memcpy", "memset")
    a, b = _views(profile, tables), _views(before, tables)
    for name in tables:
        table = a[f"table {name}"]
        pd.testing.assert_frame_equal(table.drop(columns=["runtime"]), b[f"table {name}"].drop(columns=["runtime"]))
        assert [profile.model.runtime["name"][r][:9] for r in table["runtime"]] == ["urEnqueue"]
    assert profile.operators().set_index("name")["host_self_us"]["aten::mm"] == 60 - 5 - 4 - 2 - 1 - 20


def _rocm_streams(queues, logical):
    """One step of ROCm work: an op launching a kernel (`hipLaunchKernel`) on each of
    `len(queues)` HIP streams, a copy (`hipMemcpyAsync`) on the first and a zero-duration copy
    on the last, each written on `logical[i]` (tid and `stream`) with its HSA queue
    `queues[i]` as `hsa_queue`, in the typed metadata (pytorch/pytorch third_party/kineto/
    libkineto/src/RocprofActivity_inl.h at 65b188e3231f3c180b76c7bd46e983d5159c0cef: the copy
    call's `bytes` a number, the device copy's bandwidth omitted at zero duration);
    `logical` None writes the older form instead (pytorch/kineto libkineto/src/
    RocprofActivity_inl.h at 6a3c599544293eecbd0c48133cdc5739fd340938): the queue as tid and
    `stream`, no `hsa_queue`, the copy call's `bytes` as text, the bandwidth `"N/A"` at zero
    duration. Both write `src`, `dst` and `kind` on the copy call, `kind` and `bytes` (a
    number) on the device copy."""
    events = [op("ProfilerStep#1", 0, 400, cat="user_annotation", **{"External id": 1}),
              op("aten::add", 5, 300, **{"External id": 2})]
    last = len(queues) - 1
    work = [("kernel", f"k{i}", i, 25) for i in range(len(queues))] + [
        ("gpu_memcpy", "Memcpy HtoD (Host -> Device)", 0, 25), ("gpu_memcpy", "Memcpy DtoH (Device -> Host)", last, 0)]
    for n, (cat, name, i, dur) in enumerate(work):
        correlation, ts = 200 + n, 10 + 20 * n
        stream = queues[i] if logical is None else logical[i]
        call = {"cid": 1, "correlation": correlation}
        args = {"device": 0, "stream": stream, **({} if logical is None else {"hsa_queue": queues[i]}),
                "correlation": correlation}
        if cat == "kernel":
            args.update({"kind": "Dispatch Kernel", "grid": [64, 1, 1], "block": [256, 1, 1]})
        else:
            kind, nbytes = ("HtoD", 4096) if dur else ("DtoH", 64)
            call.update({"src": "0x7f3a00", "dst": "0x7f3b00", "bytes": str(nbytes) if logical is None else nbytes,
                         "kind": "1" if dur else "2"})
            args.update({"kind": kind, "bytes": nbytes})
            if dur or logical is None:
                args["memory bandwidth (GB/s)"] = nbytes / (dur * 1000) if dur else "N/A"
        events.append(runtime("hipLaunchKernel" if cat == "kernel" else "hipMemcpyAsync", ts, 5, correlation=correlation,
                              external_id=2) | {"args": call})
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": 100 + 30 * n, "dur": dur, "args": args})
    return events


def _assert_same_views_stream_renamed(newer, older, as_logical):
    """The views of `newer` equal `older`'s with each stream `s` read as `as_logical[s]`."""
    a, b = _views(newer, ("kernels", "memcpy")), _views(older, ("kernels", "memcpy"))
    for name, frame in b.items():
        if "stream" in frame:
            frame = frame.assign(stream=[as_logical.get(s, s) for s in frame["stream"]])
        pd.testing.assert_frame_equal(a[name].reset_index(drop=True), frame.reset_index(drop=True), obj=name)


def test_rocm_logical_stream_ids(tmp_path):
    """kineto#1424 (pytorch/kineto libkineto/src/RocmStreamQueue.h `backfillAsyncStreams` at 25856f7 and
    RocprofActivity_inl.h `GpuActivity::visitTypedMetadata` at pytorch/pytorch 65b188e): ROCm
    kernels and copies are written on their HIP stream, numbered 1, 2, ... per device (tid and
    `stream`: the activity's `resourceId()`), the HSA queue as `hsa_queue`; older writers put
    the HSA queue there, so with more HIP streams than hardware queues (`GPU_MAX_HW_QUEUES=4`)
    two streams shared a track. With one queue per stream the views equal the older form's,
    stream N read as queue N's; with five streams on four queues each keeps its own stream."""
    queues = [0x7F3A10, 0x7F3A20, 0x7F3A30]
    older = _load(tmp_path, "queues", _rocm_streams(queues, None))
    newer = _load(tmp_path, "logical", _rocm_streams(queues, [1, 2, 3]))
    _assert_same_views_stream_renamed(newer, older, {q: i + 1 for i, q in enumerate(queues)})
    assert newer.info()["anomalies"] == older.info()["anomalies"] == {}

    shared = _load(tmp_path, "shared", _rocm_streams([0x7F3A10, 0x7F3A20, 0x7F3A30, 0x7F3A40, 0x7F3A10], [1, 2, 3, 4, 5]))
    assert shared.model.kernels["stream"].tolist() == [1, 2, 3, 4, 5]
    assert shared.idle_time()["stream"].tolist() == [1, 2, 3, 4, 5]


def test_copy_metadata_typed_and_as_text(tmp_path):
    """kineto#1455, typed metadata. ROCm (`_rocm_streams`): the copy call's `bytes` became a
    number (the older writer wrote it as text) and the device copy's bandwidth is omitted at
    zero duration (it wrote `"N/A"`). CUDA: `addBandwidthTypedMetadata` (pytorch/pytorch
    third_party/kineto/libkineto/src/CuptiActivity.h at 7a6a8827f772dd40bc3d3b220fcb17a754973189)
    omits the bandwidth at zero duration where `bandwidth()` (pytorch/kineto
    libkineto/src/CuptiActivity.cpp at e398229027fbc98b6cb8823c0c34b06f5d67faee) wrote `"N/A"`.
    Each form means the same copies: same views, the bytes and bandwidths as written, no
    anomaly."""
    queues = [0x7F3A10]
    rocm_typed = _load(tmp_path, "rocm_typed", _rocm_streams(queues, queues))
    rocm_text = _load(tmp_path, "rocm_text", _rocm_streams(queues, None))
    _assert_same_views_stream_renamed(rocm_typed, rocm_text, {})
    assert rocm_typed.model.memcpy[["bytes", "memory_bandwidth_gbps"]].fillna(-1).values.tolist() == [[4096, 4096 / 25_000], [64, -1]]
    assert rocm_typed.info()["anomalies"] == rocm_text.info()["anomalies"] == {}

    def zero_duration_copy(bandwidth):
        extra = _device("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 90, 0, 106, bytes=64)
        if bandwidth is not None:
            extra["args"]["memory bandwidth (GB/s)"] = bandwidth
        return older_step() + [runtime("cudaMemcpyAsync", 27, 1, correlation=106, external_id=2), extra]

    typed, older = _load(tmp_path, "typed", zero_duration_copy(None)), _load(tmp_path, "older", zero_duration_copy("N/A"))
    assert_same_views(typed, older)
    assert older.info()["anomalies"] == {}
    assert typed.model.memcpy["bytes"].tolist() == [4096, 64]


def _allreduce(kernel_args, **op_args):
    """`older_step()` with an all-reduce: `record_param_comms` (External id 3) with its args as
    torch's `saveNcclMeta` records them (pytorch/pytorch torch/csrc/profiler/util.cpp: names
    quoted, counts `std::to_string`, so bare) and Kineto writes them (`GenericTraceActivity::
    metadataJson`, third_party/kineto/libkineto/src/GenericTraceActivity.cpp at
    6127b77e5a73a9c7a57bcd6feca1cc87372ff8ad: typed strings quoted, unsigned numbers bare, the
    legacy raw values as recorded), `op_args` replacing some; its NCCL kernel carrying
    `kernel_args` as well, the fields the writer copies from the op."""
    fields = {"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1 << 40, "Out msg nelems": 1 << 40,
              "Group size": 8, "Process Group Name": "0", "Process Group Description": "default_pg", "Seq": 12}
    return older_step() + [
        op("record_param_comms", 30, 5, **{"External id": 3, **fields, **op_args}),
        runtime("cudaLaunchKernel", 31, 2, correlation=108, external_id=3), _flow("s", 108, 1, 1, 31),
        _device("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 90, 5, 108, **{"External id": 3, **kernel_args}),
        _flow("f", 108, 0, 7, 90)]


def test_nccl_fields_as_each_writer_copies_them(tmp_path):
    """kineto#1482/#1499: `ChromeTraceLogger::appendCollectiveArgs` (pytorch/pytorch
    third_party/kineto/libkineto/src/output_json.cpp at 35d03b38e2acbc5c21d953f0738178c61aff7b20)
    copies the op's collective fields to its NCCL kernel, the names re-quoted after
    `stripQuotes` (typed metadata gives them unquoted, the legacy path quoted), the counts
    (unsigned) and `Seq` / `Comms Id` written raw, so bare; the older writer (pytorch/kineto
    libkineto/src/output_json.cpp at 002d99198b93aa6eed09014a7c8b4959eb545372) wrote each value
    raw, as recorded, and no `Seq`. Both mean the same collective: same views, the op's fields
    read. No writer read here quotes a count; a count written as text is read all the same."""
    copied = {"Collective name": "allreduce", "In msg nelems": 1 << 40, "Out msg nelems": 1 << 40, "Group size": 8,
              "dtype": "Float", "Process Group Name": "0", "Process Group Description": "default_pg"}
    older = _load(tmp_path, "older", _allreduce(copied))
    newer = _load(tmp_path, "newer", _allreduce(copied | {"Seq": 12}))
    assert_same_views(newer, older)
    row = newer.model.ops.query("name == 'record_param_comms'")
    assert row[["in_msg_nelems", "out_msg_nelems", "group_size", "collective_seq"]].values.tolist() == [[1 << 40, 1 << 40, 8, 12]]
    assert row["process_group_name"].tolist() == ["0"] and newer.info()["anomalies"] == older.info()["anomalies"] == {}

    as_text = {k: str(v) for k, v in copied.items() if isinstance(v, int)} | {"Seq": "12"}
    quoted = _load(tmp_path, "quoted", _allreduce(copied, **as_text))
    assert_same_views(quoted, newer)
    assert quoted.info()["anomalies"] == {}


def test_nccl_fields_above_int64_are_absent_alone_and_counted(tmp_path):
    """The typed writer writes the collective fields as unsigned 64-bit numbers, bare
    (`appendUIntValue` in TypedMetadataJson.h, pytorch/kineto); the model keeps them as int64
    (-1 absent). A value above the int64 range (no message or sequence number reaches it: it
    is a sentinel) is absent on its own and counted (`arg_values_unreadable`), the op keeping
    its other fields and every view its answers: those of the same trace without the field."""
    copied = {"Collective name": "allreduce", "In msg nelems": 1 << 40, "Out msg nelems": 1 << 40, "Group size": 8,
              "dtype": "Float", "Process Group Name": "0", "Process Group Description": "default_pg"}
    without = _allreduce(copied)
    for e in without:
        if e.get("name") == "record_param_comms":
            del e["args"]["Seq"]
    without_seq = _load(tmp_path, "without", without)
    profile = _load(tmp_path, "above", _allreduce(copied | {"Seq": 2**64 - 1}, Seq=2**64 - 1))
    assert_same_views(profile, without_seq)
    row = profile.model.ops.query("name == 'record_param_comms'")
    assert row[["in_msg_nelems", "out_msg_nelems", "group_size", "collective_seq"]].values.tolist() == [[1 << 40, 1 << 40, 8, -1]]
    assert profile.info()["anomalies"] == {"arg_values_unreadable": 1}
    assert without_seq.info()["anomalies"] == {}


def test_display_time_unit_ns_changes_no_time(tmp_path):
    """kineto#1074 (`ChromeTraceLogger::handleTraceStart` in pytorch/pytorch third_party/kineto/
    libkineto/src/output_json.cpp at 35d03b38e2acbc5c21d953f0738178c61aff7b20, built with
    DISPLAY_TRACE_IN_NS): `displayTimeUnit`
    is how Chrome's viewer labels the axis; `ts` and `dur` stay µs with ns fractions."""
    assert_same_views(_load(tmp_path, "ns", older_step(), displayTimeUnit="ns"),
                      _load(tmp_path, "ms", older_step(), displayTimeUnit="ms"))


def test_the_python_exporter_reads_as_kinetos_writer(tmp_path):
    """torch 2.13's `export_chrome_trace(..., use_python_export=True)`
    (torch/profiler/_chrome_trace_export.py) writes the same profile without `host_name` or
    `trace_id`, with its own thread names: recorded here for real, both ways."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    model = torch.nn.Linear(8, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for step in range(2):
            with record_function(f"ProfilerStep#{step}"):
                model(torch.randn(4, 8)).sum().backward()
    kineto, python = tmp_path / "kineto.pt.trace.json", tmp_path / "python.pt.trace.json"
    prof.export_chrome_trace(str(kineto))
    prof.export_chrome_trace(str(python), use_python_export=True)
    assert "host_name" in json.loads(kineto.read_text()) and "host_name" not in json.loads(python.read_text())
    a, b = tb_plugin.load(python), tb_plugin.load(kineto)
    for name in ("steps", "operators", "critical_path"):
        pd.testing.assert_frame_equal(_views(a, ())[name], _views(b, ())[name], obj=name)
    pd.testing.assert_frame_equal(a.model.ops.drop(columns=["thread"]), b.model.ops.drop(columns=["thread"]))
    assert len(a.model.ops) == sum(1 for e in raw_events(python) if e.get("cat") in ("cpu_op", "user_annotation"))


def test_the_python_exporters_device_entry_reads_as_kinetos(tmp_path):
    """The Python exporter's deviceProperties entry (torch 2.13, _chrome_trace_export.py) has
    no `numSms` / `regsPerBlock` and writes the SM count (`multi_processor_count`) under
    `maxThreadsPerMultiprocessor`; Kineto's (libkineto/src/CudaDeviceProperties.cpp) has both."""
    common = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_000_000_000, "computeMajor": 8,
              "computeMinor": 0, "maxThreadsPerBlock": 1024, "regsPerMultiprocessor": 65536, "warpSize": 32}
    python = common | {"maxThreadsPerMultiprocessor": 108}
    kineto = common | {"maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "numSms": 108,
                       "sharedMemPerBlock": 49152}
    a = _load(tmp_path, "python", older_step(), deviceProperties=[python])
    b = _load(tmp_path, "kineto", older_step(), deviceProperties=[kineto])
    assert a.model.devices["numSms"].tolist() == [108] and a.model.devices["maxThreadsPerMultiprocessor"].isna().all()
    assert_same_views(a, b)
    assert a.distributed_part().devices["sm_count"].tolist() == b.distributed_part().devices["sm_count"].tolist() == [108]


def test_host_and_job_settings_are_shown_with_the_run(tmp_path):
    """libkineto's `getEnvMetadata` (EnvMetadata.h, which `ChromeTraceLogger::addEnvVarsToMetadata`
    in pytorch/pytorch third_party/kineto/libkineto/src/output_json.cpp at
    35d03b38e2acbc5c21d953f0738178c61aff7b20 calls; the index holds the header's text but
    names no path or commit for it) writes the host's name (`gethostname`) and the
    `PT_PROFILER_JOB_*` environment variables set when profiling as top-level text, each
    quoted."""
    settings = {"host_name": "node-17", "PT_PROFILER_JOB_NAME": "llama-pretrain", "PT_PROFILER_JOB_VERSION": "3",
                "PT_PROFILER_JOB_ATTEMPT_INDEX": "1"}
    profile = _load(tmp_path, "job", older_step(), **settings)
    assert profile.info()["run_settings"] == settings
    assert {k: profile.overview()["environment"][k] for k in settings} == settings
    assert _load(tmp_path, "plain", older_step()).info()["run_settings"] == {}


def test_hip_graph_launch_flows_change_no_view(tmp_path):
    """kineto#1310: `RuntimeActivity::flowStart` counts hipGraphLaunch among the calls that
    start an `ac2g` flow (pytorch/pytorch third_party/kineto/libkineto/src/RocprofActivity_inl.h
    at 65b188e3231f3c180b76c7bd46e983d5159c0cef; not at pytorch/kineto 6a3c599544293eecbd0c48133cdc5739fd340938),
    so the launch writes one `s`; each kernel of the graph writes its flow end in both
    versions (`GpuActivity::flowId` is the correlation, RocprofActivity.h), so the older form's
    ends have no start. The kernels were already linked to the launch by their shared
    `correlation`: the views are the same either way."""
    def replay(with_start):
        events = [op("ProfilerStep#1", 0, 100, cat="user_annotation", **{"External id": 1}),
                  op("graph replay", 5, 60, **{"External id": 2}),
                  runtime("hipGraphLaunch", 10, 5, correlation=300, external_id=2)]
        events += [_flow("s", 300, 1, 1, 10)] if with_start else []
        for i, ts in enumerate((20, 40, 55)):
            events += [_device("kernel", f"k{i}", ts, 10, 300), _flow("f", 300, 0, 7, ts)]
        return events

    newer, older = _load(tmp_path, "flows", replay(True)), _load(tmp_path, "plain", replay(False))
    assert_same_views(newer, older, tables=("kernels",))
    pd.testing.assert_frame_equal(newer.cuda_graph_launches(), older.cuda_graph_launches())
    assert newer.cuda_graph_launches()["kernels"].tolist() == [3]
    assert [(c, start, end) for c, _, start, _, end in _flow_pairs(newer)] == [("ac2g", 10, 20)] and _flow_pairs(older) == []


def _flow_pairs(profile):
    """Each paired flow as (category, start's thread and ts, end's thread and ts)."""
    f = profile.model.flows
    return sorted((f["cat"][i], f["thread"][i], f["ts"][i], f["thread"][p], f["ts"][p])
                  for i, p in enumerate(f["peer"]) if f["phase"][i] == "s" and p >= 0)


def test_flows_bound_on_slices_pair_as_flow_events(tmp_path):
    """kineto#1547: instead of `s` / `f` flow events, the slices carry Perfetto's flow form
    (`bind_id` with `flow_out: true` on the start slice, `flow_in: true` on the end slice; see
    Perfetto's JSON importer, src/trace_processor/importers/json/). The flows pair as the
    older events did: `ac2g` from the launch to the kernel, `fwdbwd` from a forward op to its
    backward op."""
    backward = [op("aten::mm", 70, 10, tid=2, **{"External id": 5}),
                {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 5, "cat": "fwdbwd", "name": "fwdbwd"},
                {"ph": "f", "id": 7, "pid": 1, "tid": 2, "ts": 70, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"}]
    older_events = older_step() + backward
    newer_events = [e for e in json.loads(json.dumps(older_events)) if e["ph"] not in ("s", "f")]
    for flow in (e for e in older_events if e["ph"] in ("s", "f")):  # each flow event bound on its slice
        bound = [e for e in newer_events if e["ph"] == "X" and (e["pid"], e["tid"], e["ts"]) == (flow["pid"], flow["tid"], flow["ts"])]
        assert len(bound) == 1
        bound[0].update(bind_id=flow["id"], **{"flow_out" if flow["ph"] == "s" else "flow_in": True})
    older, newer = _load(tmp_path, "older", older_events), _load(tmp_path, "newer", newer_events)
    assert _flow_pairs(newer) == _flow_pairs(older)
    assert [(c, start, end) for c, _, start, _, end in _flow_pairs(newer)] == [
        ("ac2g", 10, 20), ("ac2g", 24, 63), ("ac2g", 66, 66), ("ac2g", 87, 88), ("fwdbwd", 5, 70)]
    assert_same_views(newer, older)


# --- CUDA-graph annotations baked into the export (pytorch#194854) ----------------------------
# The writer: pytorch/pytorch torch/profiler/_chrome_trace_export.py, `export_chrome_trace(...,
# annotations=get_kernel_annotations())`, in two versions with `_INLINE_ANNOTATED_KEY` (the
# search index holds both texts but names no commit for either):
# - the first (19,132 characters) always moves graph work to its annotation's lane
#   (`_exported_with_annotations` without `graph_lanes`);
# - the next (20,879 characters) adds `graph_lanes`: "none" (the default) moves nothing and
#   keeps an annotation's `stream` as `annotated_stream`; "all" moves as before but rewrites
#   the hardware `stream` in place instead of repeating the key, and skips an annotation that
#   is no dict (`_exported_with_annotations` with `graph_lanes`).
# The older form: the same trace written plain, then annotated by torch 2.13's post-processor
# (torch/cuda/_annotate_cuda_graph_trace.py `annotate_trace`, installed torch 2.13.0).

def _graph_replay():
    """A step replaying four graph nodes on hardware streams 3 and 4 (ac2g flows from the
    launch), and an eager gemm on stream 3."""
    node = ANNOTATED_NODES
    events = [_meta("process_name", 0, 0, name="python"), _meta("thread_name", 0, 3, name="stream 3 "),
              _meta("thread_name", 0, 4, name="stream 4 "),
              op("ProfilerStep#1", 0, 1000, cat="user_annotation", **{"External id": 1}),
              op("Torch-Compiled Region: 0/0", 10, 50, **{"External id": 2}),
              runtime("cudaGraphLaunch", 20, 20, correlation=7, external_id=2), _flow("s", 7, 1, 1, 20),
              runtime("cudaLaunchKernel", 590, 5, correlation=9, external_id=2), _flow("s", 9, 1, 1, 590)]
    for name, ts, dur, stream, graph_node, correlation in (
            ("triton_qk", 100, 100, 3, node[0], 7), ("triton_softmax_pv", 200, 200, 3, node[1], 7),
            ("triton_mlp", 150, 300, 4, node[2], 7), ("triton_norm", 500, 50, 3, node[3], 7), ("gemm", 600, 40, 3, 0, 9)):
        events += [kernel(name, ts, dur, correlation, stream=stream, **{"graph node id": graph_node}),
                   _flow("f", correlation, 0, stream, ts)]
    return events


_GRAPH_ANNOTATIONS = {ANNOTATED_NODES[0]: [{"str": "attention"}], ANNOTATED_NODES[1]: [{"str": "attention"}],
                      ANNOTATED_NODES[2]: [{"str": "mlp", "stream": 61, "Process Group Description": "tp"}],
                      ANNOTATED_NODES[3]: ["norm-object"]}


def test_cuda_graph_annotations_baked_into_the_export(tmp_path):
    """The exporter writes what torch's post-processor writes (work on the annotated lanes,
    the annotation fields in args) plus the hardware stream as `original_stream`, with the
    lane's `stream` repeated after the hardware one: the views and tables equal the
    post-processed trace's, the kernels on their lanes with their labels."""
    annotate = pytest.importorskip("torch.cuda._annotate_cuda_graph_trace", reason="needs torch >= 2.13")
    trace = {"schemaVersion": 1, "traceEvents": _graph_replay()}
    assert annotate.annotate_trace(trace, _GRAPH_ANNOTATIONS) == 4
    older = _load(tmp_path, "post_processed", trace["traceEvents"])
    newer = tb_plugin.load(_exported_with_annotations(tmp_path / "baked.pt.trace.json", _graph_replay(), _GRAPH_ANNOTATIONS))
    # the critical path names its host thread by its row in the threads table, whose order
    # follows the file's layout (the exporter names the hardware streams first): compare
    # (pid, tid)
    def pid_tid(profile, thread):
        return tuple(profile.model.threads.loc[thread, ["pid", "tid"]])

    a, b = _views(newer, ("kernels",)), _views(older, ("kernels",))
    for profile, views in ((newer, a), (older, b)):
        views["critical_path"]["thread"] = [pid_tid(profile, t) for t in views["critical_path"]["thread"]]
    for name in b:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)
    pd.testing.assert_frame_equal(newer.cuda_graph_annotations(), older.cuda_graph_annotations())
    flows = [[(c, pid_tid(p, s), s_ts, pid_tid(p, e), e_ts) for c, s, s_ts, e, e_ts in _flow_pairs(p)] for p in (newer, older)]
    assert flows[0] == flows[1] and len(flows[0]) == 2  # a flow id pairs its start with its first end
    kernels = newer.model.kernels.set_index("name")
    assert kernels["stream"].to_dict() == {"triton_qk": 7, "triton_softmax_pv": 7, "triton_mlp": 61, "triton_norm": 7, "gemm": 3}
    assert kernels["graph_annotation"].astype(str).to_dict() == {
        "triton_qk": "attention", "triton_softmax_pv": "attention", "triton_mlp": "mlp", "triton_norm": "norm-object", "gemm": ""}
    assert newer.info()["anomalies"] == older.info()["anomalies"] == {}


def _exported_with_annotations(path, events, annotations, graph_lanes=None, default_stream=7):
    """`events` written as the exporter bakes `annotations` in: graph work gets each
    annotation's fields as text after its args (`stream`, a number, written among them by the
    first version only; an annotation that is no dict written as `annotation` by the first
    version, skipped by the later); it moves to the lane the annotation names, else
    `default_stream` (the first version, `graph_lanes="all"`), or stays (`"none"`), a named
    lane then written as `annotated_stream`. When moved, its `stream` arg names the lane
    (appended after the hardware one, a repeated key, unless the annotation wrote it: the
    first version; rewritten in place: the later) and `original_stream` the hardware stream;
    the kernel's `f` flow follows it and each new lane gets a thread_name (the annotation's
    "Process Group Description", else "stream N ") and a thread_sort_index.
    `cudaGraphInlineAnnotated: true` heads the envelope when some work had an annotation."""
    first = graph_lanes is None
    lines, moved, lanes, annotated = [], {}, {}, False
    for e in events:
        e = dict(e)
        if e.get("ph") == "f" and (e["tid"], e["ts"]) in moved:
            e["tid"] = moved[e["tid"], e["ts"]]
        graph_node = e.get("args", {}).get("graph node id", 0)
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") or not graph_node:
            lines.append(json.dumps(e))
            continue
        args, parts, stream, lane_name = dict(e.pop("args")), [], None, None
        annotated = annotated or bool(annotations.get(graph_node))
        for ann in annotations.get(graph_node, []):
            if not isinstance(ann, dict):
                parts += [f'"annotation": {json.dumps(str(ann))}'] if first else []
                continue
            lane_name = lane_name or ann.get("Process Group Description")
            stream = int(ann["stream"]) if "stream" in ann else stream
            fields = {k: v if k == "stream" else str(v) for k, v in ann.items() if first or k != "stream"}
            parts += [json.dumps(fields)[1:-1]] if fields else []
        lane = (default_stream if stream is None else stream) if graph_lanes != "none" else e["tid"]
        if lane != e["tid"]:
            if not first:
                args["stream"] = lane
            elif stream is None:
                parts.append(f'"stream": {lane}')
            parts.append(f'"original_stream": {e["tid"]}')
            moved[e["tid"], e["ts"]] = lane
            lanes[lane] = lane_name or lanes.get(lane) or f"stream {lane} "
        elif stream is not None:
            parts.append(f'"annotated_stream": {stream}')
        e["tid"] = lane
        lines.append(json.dumps(e)[:-1] + ', "args": {' + ", ".join([json.dumps(args)[1:-1]] + parts) + "}}")
    for lane, name in sorted(lanes.items()):
        lines += [json.dumps(_meta("thread_name", 0, lane, name=name)), json.dumps(_meta("thread_sort_index", 0, lane, sort_index=lane))]
    flag = '"cudaGraphInlineAnnotated": true, ' if annotated else ""
    path.write_text('{"schemaVersion": 1, ' + flag + '"traceEvents": [\n' + ",\n".join(lines) + "]}")
    return path


# mark_kernels gives every annotation as a dict (a bare label as {"name": ...}) in the later version
_DICT_ANNOTATIONS = {**_GRAPH_ANNOTATIONS, ANNOTATED_NODES[3]: [{"name": "norm"}]}


def test_cuda_graph_annotations_on_their_lanes_with_the_stream_rewritten(tmp_path):
    """graph_lanes="all": the views and tables equal the post-processed trace's, the kernels on
    their lanes with their labels; the `stream` arg is the lane once, never repeated."""
    annotate = pytest.importorskip("torch.cuda._annotate_cuda_graph_trace", reason="needs torch >= 2.13")
    trace = {"schemaVersion": 1, "traceEvents": _graph_replay()}
    annotate.annotate_trace(trace, _DICT_ANNOTATIONS)
    older = _load(tmp_path, "post_processed", trace["traceEvents"])
    path = _exported_with_annotations(tmp_path / "all.pt.trace.json", _graph_replay(), _DICT_ANNOTATIONS, "all")
    assert path.read_text().count('"stream"') == sum(1 for e in _graph_replay() if e.get("cat") == "kernel")
    newer = tb_plugin.load(path)
    pd.testing.assert_frame_equal(_views(newer, ())["steps"], _views(older, ())["steps"])
    pd.testing.assert_frame_equal(newer.cuda_graph_annotations(), older.cuda_graph_annotations())
    kernels = newer.model.kernels.set_index("name")
    assert kernels["stream"].to_dict() == {"triton_qk": 7, "triton_softmax_pv": 7, "triton_mlp": 61, "triton_norm": 7, "gemm": 3}
    assert kernels["graph_annotation"].astype(str).to_dict() == {
        "triton_qk": "attention", "triton_softmax_pv": "attention", "triton_mlp": "mlp", "triton_norm": "norm", "gemm": ""}
    assert newer.info()["anomalies"] == older.info()["anomalies"] == {}


def test_cuda_graph_annotations_kept_off_the_lanes(tmp_path):
    """graph_lanes="none" (the default): nothing moves, so the views and tables equal those of
    the same replay exported without annotations, each kernel on the stream it ran on; the
    labels are read; the lane an annotation named is `annotated_stream`, which the writer does
    not act on and neither does the model (no stream changes)."""
    plain = _load(tmp_path, "plain", _graph_replay())
    path = _exported_with_annotations(tmp_path / "none.pt.trace.json", _graph_replay(), _DICT_ANNOTATIONS, "none")
    assert '"annotated_stream": 61' in path.read_text() and '"cudaGraphInlineAnnotated": true' in path.read_text()
    newer = tb_plugin.load(path)
    a, b = _views(newer, ("kernels",)), _views(plain, ("kernels",))
    for name in b:
        frame = a[name].drop(columns=["graph_annotation"]) if name == "table kernels" else a[name]
        expected = b[name].drop(columns=["graph_annotation"]) if name == "table kernels" else b[name]
        pd.testing.assert_frame_equal(frame, expected, obj=name)
    kernels = newer.model.kernels.set_index("name")
    assert kernels["stream"].to_dict() == {"triton_qk": 3, "triton_softmax_pv": 3, "triton_mlp": 4, "triton_norm": 3, "gemm": 3}
    assert kernels["graph_annotation"].astype(str).to_dict() == {
        "triton_qk": "attention", "triton_softmax_pv": "attention", "triton_mlp": "mlp", "triton_norm": "norm", "gemm": ""}
    assert newer.info()["anomalies"] == {}
