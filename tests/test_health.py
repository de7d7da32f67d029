"""Trace health (`views.health`, `python -m tb_plugin check`, the `health` route): torch's six
trace-validator rules give the counts torch's own `validate_trace` gives on the same file
(hand-made traces breaking each rule, counts worked out by hand; the samples; the shared
real traces), and the model's own findings on hand-made traces."""

import collections
import json

import pytest

import tb_plugin
from tests.helpers import PREFIX, SAMPLES, SHARED_TRACES, kernel, make_client, op, run_cli, runtime, wait_route, write_trace

validator = pytest.importorskip("torch.profiler._trace_validator")


def torch_counts(path):
    """{rule: violations} as torch's own validator counts them."""
    _, violations = validator.validate_trace(str(path))
    return dict(collections.Counter(v.rule_name for v in violations))


def our_counts(path, source="torch_validator"):
    table = tb_plugin.load(path).health()
    return {row["finding"]: row["count"] for row in table.to_dict("records") if row["source"] == source}


def ext(**args):
    """Args with the keys torch writes, spaces and all (`External id`)."""
    return {k.replace("_", " ") if k.startswith(("External", "Sequence", "Collective", "In_", "Out_", "Group"))
            else k: v for k, v in args.items()}


def sync(kind, ts, stream=7, device=0, dur=1.0, **args):
    return {"ph": "X", "cat": "cuda_sync", "name": kind, "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": {"cuda_sync_kind": kind, "device": device, "stream": stream, **args}}


def launched_kernel(name, ts, dur, external_id, stream=7):
    return kernel(name, ts, dur, correlation=-5, stream=stream, **{"External id": external_id})


# Each: the events, and the violations worked out by hand.
RULE_TRACES = {
    "_check_gpu_kernel_causality": ([
        # ext 1: the kernel (90) starts before its launch (100): 1
        runtime("cudaLaunchKernel", 100, 5, 1, 1), launched_kernel("k1", 90, 10, 1),
        # ext 2: after its launch: 0
        runtime("cudaLaunchKernel", 200, 5, 2, 2), launched_kernel("k2", 210, 10, 2),
        # ext 3: two kernels, the earliest (280) before the launch (290): 1
        runtime("cudaLaunchKernel", 290, 5, 3, 3), launched_kernel("k3", 300, 10, 3), launched_kernel("k3", 280, 5, 3),
        # ext 4: a cudaLaunchKernelExC is not torch's cudaLaunchKernel: 0
        runtime("cudaLaunchKernelExC", 400, 5, 4, 4), launched_kernel("k4", 390, 5, 4),
    ], 2),
    "_check_stream_wait_corr_id_populated": ([
        sync("Stream Wait Event", 10, wait_on_cuda_event_record_corr_id=-1),  # 1
        sync("Event Sync", 20, stream=-1),  # no field at all: 1
        sync("Stream Sync", 30, wait_on_cuda_event_record_corr_id=-1),  # not a wait: 0
        runtime("cudaEventRecord", 1, 1, 5, 50),
        sync("Stream Wait Event", 40, wait_on_cuda_event_record_corr_id=5),  # populated: 0
    ], 2),
    "_check_stream_sync_overlap": ([
        kernel("a", 100, 50, 1), kernel("b", 160, 40, 2),
        kernel("c", 170, 60, 3),  # starts inside b: programmatic dependent launch
        sync("Stream Sync", 120),  # inside a: 1
        sync("Stream Sync", 155),  # between a and b: 0
        sync("Stream Sync", 180),  # inside b and c: 2
        sync("Stream Sync", 120, stream=8),  # another stream: 0
        sync("Stream Sync", 200),  # b ends at 200, c runs: 1
    ], 4),
    "_check_stream_wait_corr_id_in_past": ([
        runtime("cudaEventRecord", 50, 1, 10, 11),
        {**runtime("cudaEventRecordWithFlags", 70, 1, 20, 21), "cat": "cuda_driver"},
        sync("Stream Wait Event", 60, wait_on_cuda_event_record_corr_id=10),  # recorded before: 0
        sync("Stream Wait Event", 40, wait_on_cuda_event_record_corr_id=11),  # its External id, recorded later: 1
        sync("Stream Wait Event", 45, wait_on_cuda_event_record_corr_id=99),  # no such record: 1
        sync("Stream Wait Event", 80, wait_on_cuda_event_record_corr_id=20),  # a driver record before: 0
        sync("Event Sync", 30, wait_on_cuda_event_record_corr_id=99),  # not a Stream Wait Event: 0
    ], 2),
    "_check_nccl_metadata": ([
        op("record_param_comms", 10, 5, **ext(Collective_name="allreduce", dtype="Float", In_msg_nelems=4,
                                             Out_msg_nelems=4, Group_size=2)),  # complete: 0
        op("record_param_comms", 20, 5, **ext(Collective_name="allreduce", In_msg_nelems=4, Out_msg_nelems=4,
                                             Group_size=2)),  # no dtype: 1
        op("record_param_comms", 30, 5, **ext(Collective_name="broadcast", dtype="Float", Out_msg_nelems=4)),  # 1
        op("nccl:all_reduce", 40, 5),  # not record_param_comms: 0
    ], 2),
    "_check_backward_seq_id_uniqueness": ([
        op("autograd::engine::evaluate_function: MulBackward0", 10, 5, **ext(Sequence_number=5)),
        op("autograd::engine::evaluate_function: AddBackward0", 20, 5, **ext(Sequence_number=5)),  # seq 5: 1
        op("autograd::engine::evaluate_function: MulBackward0", 30, 5, **ext(Sequence_number=6)),
        op("autograd::engine::evaluate_function: MulBackward0", 40, 5, **ext(Sequence_number=6)),  # one name: 0
        op("autograd::engine::evaluate_function: MmBackward0", 50, 5, **ext(Sequence_number=0)),
        op("autograd::engine::evaluate_function: ViewBackward0", 60, 5, **ext(Sequence_number=0)),  # 0 skipped
        op("MulBackward0", 70, 5, **ext(Sequence_number=6)),  # not an engine frame: 0
    ], 1),
}


@pytest.mark.parametrize("rule", sorted(RULE_TRACES))
def test_each_validator_rule_counts_as_worked_out_and_as_torch(tmp_path, rule):
    events, expected = RULE_TRACES[rule]
    path = write_trace(tmp_path / "t.pt.trace.json", events)
    assert torch_counts(path) == {rule: expected}
    assert our_counts(path) == {rule: expected}


def _trace_files():
    files = sorted(SAMPLES.glob("*/*.pt.trace.json.gz")) + sorted((SAMPLES.parent / "tests" / "data" / "mtia").glob("*.json"))
    return [pytest.param(f, id=f"{f.parent.name}/{f.name[:12]}") for f in files]


@pytest.mark.parametrize("path", _trace_files())
def test_validator_counts_equal_torchs_on_the_samples(path):
    assert our_counts(path) == torch_counts(path)


SHARED_RUNS = ("a100_alexnet", "a100_nccl_collectives", "cpu_only_gloo", "old_format_inference", "resnet50_v100_2021",
               "rocm_mi250", "sampled_128rank_job", "triton_kernel", "v100_ddp_nccl_memory")


@pytest.mark.parametrize("run", SHARED_RUNS)
def test_validator_counts_equal_torchs_on_the_shared_real_traces(run):
    folder = SHARED_TRACES / run
    if not folder.is_dir():
        pytest.skip(f"real trace folder {folder} is not available (../shared/traces missing)")
    for path in sorted(folder.glob("*.json.gz")):
        assert our_counts(path) == torch_counts(path), path.name


def flow(phase, flow_id, ts, tid=1, pid=1, cat="ac2g"):
    return {"ph": phase, "cat": cat, "id": flow_id, "name": "launch", "pid": pid, "tid": tid, "ts": ts, "bp": "e"}


MODEL_TRACE = [
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 100,
     "dur": 1000, "args": {}},
    op("before", 50, 10),  # starts before the session: 1
    op("inside", 500, 10),
    op("cut", 900, 500),  # cut by the session's end: not counted
    op("after", 1200, 10),  # starts after it: 1
    runtime("cudaLaunchKernel", 300, 5, 1, 1), kernel("early", 290, 5, 1),  # 10 us before its launch: 1
    runtime("cudaLaunchKernel", 400, 5, 2, 2), kernel("k", 410, 50, 2),
    runtime("cudaLaunchKernel", 402, 5, 3, 3), kernel("pdl", 440, 50, 3),  # starts inside k on stream 7: 1
    runtime("cudaLaunchKernel", 404, 5, 4, 4), kernel("other stream", 445, 10, 4, stream=8),
    flow("s", 2, 400), flow("f", 2, 410, pid=0, tid=7),  # paired
    flow("s", 3, 402),  # no end: 1
    flow("f", 9, 600),  # no start: 1
    {"ph": "X", "cat": "cpu_op", "name": "no ts", "pid": 1, "tid": 1, "dur": 3},  # dropped: 1
]


def test_model_findings_count_as_worked_out(tmp_path):
    path = write_trace(tmp_path / "t.pt.trace.json", MODEL_TRACE)
    table = tb_plugin.load(path).health()
    rows = {row["finding"]: row for row in table.to_dict("records")}
    assert {k: r["count"] for k, r in rows.items() if r["source"] != "torch_validator"} == {
        "events_outside_profiled_window": 2, "device_before_launch": 1, "overlapping_kernels_on_a_stream": 1,
        "unpaired_flows": 2, "events_without_ts_dropped": 1}
    # causality by External id is torch's rule; these kernels carry none
    assert our_counts(path) == torch_counts(path) == {}
    assert rows["device_before_launch"]["detail"] == "the most: kernels 'early' starts 10.0 us before its launch"
    assert rows["unpaired_flows"]["detail"] == "1 ac2g ends, 1 ac2g starts"
    assert rows["events_without_ts_dropped"]["severity"] == "data_loss"
    # most severe first, and each says which views it can affect
    assert list(table["severity"]) == ["data_loss", "warning", "warning", "info", "info"]
    assert all(table["affects"].str.len() > 0) and all(table["meaning"].str.len() > 0)


def test_check_exits_0_on_a_clean_trace_and_says_so(tmp_path):
    path = write_trace(tmp_path / "clean.pt.trace.json", [op("aten::add", 10, 5), op("aten::mul", 20, 5)])
    result = run_cli("check", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("clean.pt.trace.json: clean")
    assert json.loads(run_cli("check", str(path), "--json").stdout) == [
        {"source": str(path), "clean": True, "findings": []}]


def test_check_exits_1_on_a_broken_rule_with_count_meaning_and_views(tmp_path):
    events, expected = RULE_TRACES["_check_nccl_metadata"]
    broken = write_trace(tmp_path / "broken.pt.trace.json", events)
    clean = write_trace(tmp_path / "clean.pt.trace.json", [op("aten::add", 10, 5)])
    result = run_cli("check", str(clean), str(broken))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index(f"{broken}: NOT clean, 1 finding")
    assert lines[start + 1] == f"  _check_nccl_metadata: {expected} (violation, torch_validator)"
    assert "Collective name, dtype, In msg nelems, Out msg nelems, Group size" in lines[start + 2]
    assert lines[start + 3] == "    affects: Distributed (collective sizes, bandwidth), Job"
    assert lines[start + 4] == "    e.g. the record_param_comms at 10.0 us lacks dtype"
    reports = json.loads(run_cli("check", str(broken), "--json").stdout)
    assert [(r["clean"], [(f["finding"], f["count"]) for f in r["findings"]]) for r in reports] == [
        (False, [("_check_nccl_metadata", expected)])]


def test_check_exits_0_when_only_info_findings(tmp_path):
    path = write_trace(tmp_path / "t.pt.trace.json", [op("aten::add", 10, 5), flow("f", 9, 12)])
    result = run_cli("check", str(path))
    assert result.returncode == 0, result.stderr
    assert "clean (info only), 1 finding" in result.stdout and "unpaired_flows: 1 (info, model)" in result.stdout


def test_check_bad_input_exits_2_with_one_line_and_checks_the_others(tmp_path):
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text("{not json")
    good = write_trace(tmp_path / "good.pt.trace.json", [op("aten::add", 10, 5)])
    result = run_cli("check", str(bad), str(good))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith(f"error: {bad}")
    assert "Traceback" not in result.stderr
    assert result.stdout.strip() == f"{good}: clean"


def test_health_route_and_info_state_the_findings(tmp_path):
    events, expected = RULE_TRACES["_check_backward_seq_id_uniqueness"]
    write_trace(tmp_path / "run" / "worker0.pt.trace.json", events)
    _, client = make_client(tmp_path)
    query = "run=run&worker=worker0&span=1"
    reply = wait_route(client, f"{PREFIX}/health?{query}").get_json()
    row = dict(zip(reply["columns"], reply["rows"][0]))
    assert (row["finding"], row["count"], row["severity"]) == ("_check_backward_seq_id_uniqueness", expected, "violation")
    info = wait_route(client, f"{PREFIX}/info?{query}").get_json()
    assert info["health_clean"] is False and [h["finding"] for h in info["health"]] == [row["finding"]]
    csv = client.get(f"{PREFIX}/health?{query}&format=csv")
    assert csv.status_code == 200 and csv.get_data(as_text=True).splitlines()[0] == ",".join(reply["columns"])


def test_job_view_states_each_ranks_health(tmp_path):
    events, expected = RULE_TRACES["_check_stream_wait_corr_id_populated"]
    write_trace(tmp_path / "job" / "rank0.pt.trace.json", [op("aten::add", 10, 5)], distributedInfo={"rank": 0})
    write_trace(tmp_path / "job" / "rank1.pt.trace.json", events, distributedInfo={"rank": 1})
    _, client = make_client(tmp_path)
    reply = wait_route(client, f"{PREFIX}/job?run=job&span=1&table=health").get_json()
    rows = [dict(zip(reply["columns"], row)) for row in reply["rows"]]
    assert [(r["rank"], r["worker"], r["finding"], r["count"]) for r in rows] == [
        (1, "rank1", "_check_stream_wait_corr_id_populated", expected)]
    # the same rows as that rank's own health route
    own = wait_route(client, f"{PREFIX}/health?run=job&worker=rank1&span=1").get_json()
    assert [row[2:] for row in reply["rows"]] == own["rows"]


def test_kernels_written_at_ts_zero_are_a_data_loss_finding(tmp_path):
    """Kernels Kineto wrote at `ts: 0` (pytorch/kineto#109, pytorch/pytorch#188481) in a trace
    recorded at epoch µs: dropped by the import, stated as a loss with the views it affects."""
    base = 1_700_000_000_000_000
    path = write_trace(tmp_path / "t.pt.trace.json", [
        op("aten::mm", base + 10, 5), runtime("cudaLaunchKernel", base + 11, 2, 1, 1),
        kernel("gemm", 0, 3, 1), kernel("gemm", 0, 3, 2), kernel("gemm", base + 14, 3, 1)])
    rows = {r["finding"]: r for r in tb_plugin.load(path).health().to_dict("records")}
    assert rows["events_far_from_the_trace_dropped"]["count"] == 2
    assert rows["events_far_from_the_trace_dropped"]["severity"] == "data_loss"
    assert "Kernel" in rows["events_far_from_the_trace_dropped"]["affects"]
    assert run_cli("check", str(path)).returncode == 1


def test_an_anomaly_this_reader_does_not_declare_is_shown_as_info(tmp_path):
    """A disk cache written by a newer reader may hold an anomaly this one does not know: the
    health table and `Profile.anomalies()` both show it, as info, with its value."""
    profile = tb_plugin.load(write_trace(tmp_path / "t.pt.trace.json", [op("aten::add", 10, 5)]))
    profile.model.anomalies["events_from_the_future_kept"] = 3
    described = profile.anomalies()
    assert described[-1] == {"key": "events_from_the_future_kept", "severity": "info",
                             "meaning": "events from the future kept", "value": 3}
    row = profile.health().set_index("finding").loc["events_from_the_future_kept"]
    assert (row["severity"], row["count"], row["detail"], row["source"]) == ("info", 1, "3", "import")
