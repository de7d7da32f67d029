"""Frequent kernel sequences (`Profile.kernel_sequences`, route `kernel_sequences`): a
hand-made trace worked out on paper, raw-event facts on the real traces, and HTA 0.5.0's
`get_frequent_cuda_kernel_sequences` on every GPU trace its call graph reads (with the
compatibility shim of `hta_reference._call_graph_shim`)."""

import csv
import io

import pytest

import tb_plugin
from tb_plugin.views.sequences import KERNEL_SEQUENCES, MAX_LENGTH

from .helpers import PREFIX, kernel, op, raw_events, runtime, write_trace
from .hta_reference import frequent_sequences, gpu_trace_files

NAMES = "ABCABCABX"  # kernels on stream 7, in order; kernel i lasts i + 1 µs


def paper_trace(tmp_path):
    """Operators opA, opB, opC, opX each launch their kernel. With length 3 the windows are
    ABC, BCA, CAB, ABC, BCA, CAB, ABX: ABC, BCA and CAB occur twice each. Their kernels
    (each counted once) last 1..6 = 21 µs, 2..7 = 27 µs, 3..8 = 33 µs, of 45 µs in all."""
    events, t = [], 100
    for i, name in enumerate(NAMES):
        events += [op(f"op{name}", i * 10, 5, **{"External id": i + 1}),
                   runtime("cudaLaunchKernel", i * 10 + 1, 2, i + 1, i + 1), kernel(name, t, i + 1, i + 1)]
        t += i + 2
    return write_trace(tmp_path / "w.pt.trace.json", events, distributedInfo={"rank": 0})


def test_paper_trace(tmp_path):
    got = tb_plugin.load(paper_trace(tmp_path)).kernel_sequences(3)
    KERNEL_SEQUENCES.check(got)
    assert got["sequence"].tolist() == ["C | A | B", "B | C | A", "A | B | C"]
    assert got["device_us"].tolist() == [33, 27, 21] and got["occurrences"].tolist() == [2, 2, 2]
    assert got["operators"].tolist() == ["opC | opA | opB", "opB | opC | opA", "opA | opB | opC"]
    assert got["share_pct"].tolist() == pytest.approx([100 * 33 / 45, 100 * 27 / 45, 100 * 21 / 45])
    # no ProfilerStep: one step, the whole trace
    assert got["device_per_step_us"].tolist() == [33, 27, 21]
    # kernel i starts 1 µs after kernel i-1 ends: 100, 102, 105, 109, 114, ...; C|A|B first
    # runs kernels 2-4, from 105 to 114 + 5 (the trace starts at 0 with opA)
    assert got.loc[0, ["first_start_us", "first_end_us"]].tolist() == [105, 119]


def test_paper_trace_longer_and_top(tmp_path):
    profile = tb_plugin.load(paper_trace(tmp_path))
    # length 4: ABCA, BCAB occur twice (windows 0-3 / 3-6 and 1-4 / 4-7); CABC once
    got = profile.kernel_sequences(4)
    assert sorted(got["sequence"]) == ["A | B | C | A", "B | C | A | B"]
    assert profile.kernel_sequences(3, top=1)["sequence"].tolist() == ["C | A | B"]
    assert profile.kernel_sequences(8).empty


@pytest.mark.parametrize("length", [1, 33])
def test_length_out_of_range(tmp_path, length):
    with pytest.raises(ValueError, match="length"):
        tb_plugin.load(paper_trace(tmp_path)).kernel_sequences(length)


@pytest.fixture(scope="module", params=gpu_trace_files())
def trace(request):
    return request.param


def test_top_sequence_occurs_as_counted_in_the_raw_events(trace):
    """Count the top pair's occurrences from the raw JSON: kernels per stream in time order."""
    got = tb_plugin.load(trace).kernel_sequences(2, top=1)
    if got.empty:
        pytest.skip("no kernel pair repeats in this trace")
    kernels = sorted(((int(e["args"].get("stream", e["tid"])), e["ts"], e["name"]) for e in raw_events(trace)
                      if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"))
    first, second = got.loc[0, "sequence"].split(" | ")
    stream = got.loc[0, "stream"]
    names = [n for s, _, n in kernels if s == stream]
    assert got.loc[0, "occurrences"] == sum(a == first and b == second for a, b in zip(names, names[1:]))


# Operators HTA's patterns start from: "aten::" (its shallowest aten ops) and the entry ops of
# the common layers, each a pattern of the kernels its call launched.
HTA_OPERATORS = ("aten::", "aten::conv2d", "aten::linear")


def hta_patterns(trace):
    """HTA's patterns on `trace` that repeat: (operator, [device entries], count, GPU kernel µs)."""
    patterns = []
    for operator, found in frequent_sequences(trace, HTA_OPERATORS).items():
        if found.empty:
            continue
        for pattern, count, kernel_us in found[["pattern", "count", "GPU kernel duration (us)"]].itertuples(
                index=False, name=None):
            if count >= 2:
                first, *entries = pattern.split("|")
                patterns.append((first, entries, count, kernel_us))
    return patterns


def test_hta_frequent_sequences(trace):
    """HTA's `get_frequent_cuda_kernel_sequences` (through `hta_reference._call_graph_shim`)
    groups the kernels one operator call launched; each of its repeating patterns made of
    kernels is one of our sequences, found at least as often (HTA counts the operator's
    calls, we every place on the stream the kernels run back to back: more where the same
    kernels follow each other across operators, see `test_we_count_sequences_across_operators`)
    and with at least HTA's kernel time (to 0.01 µs per occurrence: float sums)."""
    profile = tb_plugin.load(trace)
    kernel_names = set(profile.model.kernels["name"].astype(str))
    compared = 0
    for operator, entries, count, kernel_us in hta_patterns(trace):
        if not set(entries) <= kernel_names or not 2 <= len(entries) <= MAX_LENGTH:
            continue  # memcpy, memset or sync entries: test_hta_patterns_hold_copies_fills_and_syncs
        ours = profile.kernel_sequences(len(entries), top=1 << 30)
        row = ours[ours["sequence"] == " | ".join(entries)]
        assert len(row) == 1, (operator, entries)
        assert row["occurrences"].iloc[0] >= count, (operator, entries)
        assert row["device_us"].iloc[0] >= kernel_us - 0.01 * count, (operator, entries)
        compared += 1
    if not compared:
        pytest.skip("HTA finds no repeating pattern of two kernels or more here")


def test_hta_patterns_hold_copies_fills_and_syncs(trace):
    """Deliberate difference: HTA's patterns list every device event an operator caused,
    memcpys, memsets and cuda_sync records (`Stream Sync`) among its kernels; our sequences are
    of kernels only (copies and fills between kernels do not break one; syncs are no work).
    Every entry of HTA's patterns that is no kernel is one of the trace's memcpys, memsets or
    syncs."""
    model = tb_plugin.load(trace).model
    kernels = set(model.kernels["name"].astype(str))
    others = {str(n) for table in (model.memcpy, model.memset, model.syncs) for n in table["name"].unique()}
    entries = {e for _, pattern, _, _ in hta_patterns(trace) for e in pattern} - kernels
    if not entries:
        pytest.skip("HTA's patterns here are kernels only")
    assert entries <= others


def test_we_count_sequences_across_operators(tmp_path):
    """Deliberate difference, on paper: opAB launches kernels A, B twice (calls at 0 and 20),
    then opA launches A and opB launches B (40, 50); all on stream 7 back to back. HTA's
    pattern opAB|A|B repeats 2 times (calls of opAB); A | B runs 3 times on the stream."""
    events, t, correlation = [], 100, 0
    for ts, name, kernels in ((0, "opAB", "AB"), (20, "opAB", "AB"), (40, "opA", "A"), (50, "opB", "B")):
        events.append(op(name, ts, 8, **{"External id": ts + 1}))
        for k in kernels:
            correlation += 1
            events += [runtime("cudaLaunchKernel", ts + correlation % 2 + 1, 1, correlation, ts + 1),
                       kernel(k, t, 2, correlation)]
            t += 3
    path = write_trace(tmp_path / "w.pt.trace.json", events, distributedInfo={"rank": 0})
    ours = tb_plugin.load(path).kernel_sequences(2)
    assert dict(zip(ours["sequence"], ours["occurrences"])) == {"A | B": 3, "B | A": 2}
    hta_found = frequent_sequences(path, ("opAB",))["opAB"]
    assert hta_found[["pattern", "count"]].values.tolist() == [["opAB|A|B", 2]]


@pytest.mark.parametrize("params", ["", "&length=2&top=5"])
def test_kernel_sequences_route_json_and_csv(a100_client, params):
    url = f"{PREFIX}/kernel_sequences?run=a100&worker=rank0{params}"
    body = a100_client.get(url).get_json()
    assert body["columns"] == KERNEL_SEQUENCES.names and body["rows"]
    rows = list(csv.reader(io.StringIO(a100_client.get(url + "&format=csv").get_data(as_text=True))))
    assert rows[0] == body["columns"] and len(rows) - 1 == len(body["rows"])


@pytest.mark.parametrize("params, fragment", [("&length=1", ">= 2"), ("&length=40", "<= 32"), ("&top=0", ">= 1")])
def test_kernel_sequences_route_rejects_bad_parameters(a100_client, params, fragment):
    response = a100_client.get(f"{PREFIX}/kernel_sequences?run=a100&worker=rank0{params}")
    assert response.status_code == 400 and fragment in response.get_json()["reason"]


def test_a_sequence_of_kernels_not_known_as_element_wise_is_no_fusion_candidate(tmp_path):
    """C | A | B takes 33 of the 45 µs of kernel time (73%), twice; but A, B and C are named as
    no element-wise or reduction kernel, so nothing says fusion could remove them: no fusion
    candidate (tests/test_recommendations.py recommends one of ATen's element-wise kernels)."""
    items = {r["id"]: r for r in tb_plugin.load(paper_trace(tmp_path)).recommendations()}
    assert tb_plugin.load(paper_trace(tmp_path)).kernel_sequences(3)["sequence"].iloc[0] == "C | A | B"
    assert "fusion_candidate" not in items
