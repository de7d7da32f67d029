"""The B the Diff tab proposes for A (`diff_default`, `runs.propose_comparison`), over hand-made
log directories whose operator names are chosen here, so the expected proposal and the counts
in its reason follow from the names written, not from the code under test."""

import shutil
import time

import pandas as pd
import pytest

from tb_plugin.runs import PROPOSAL_CANDIDATES, propose_comparison
from tb_plugin.views.regression import OperatorNames

from .helpers import PREFIX, SAMPLES, kernel, make_client, op, raw_events, runtime, write_trace
from .plants import stretched_kernels, stretched_step_change, write_gz


def cpu_trace(path, names):
    """A CPU trace of two steps, each running the operators `names` one after another."""
    events = []
    for step in range(2):
        start = step * 1000
        events.append(op(f"ProfilerStep#{step}", start, 900))
        events += [op(name, start + 10 + 20 * i, 10) for i, name in enumerate(names)]
    return write_trace(path, events)


def gpu_trace(path, names):
    """A CUDA trace: `names` as operators, the first launching one kernel."""
    events = [op("ProfilerStep#0", 0, 900)] + [op(name, 10 + 20 * i, 10, **{"External id": i + 1})
                                               for i, name in enumerate(names)]
    events += [runtime("cudaLaunchKernel", 11, 2, correlation=1, external_id=1), kernel("k", 20, 5, correlation=1)]
    return write_trace(path, events)


A_NAMES = ["aten::conv2d", "aten::relu", "aten::linear", "aten::add"]


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("proposals")
    cpu_trace(root / "a" / "worker0.pt.trace.json", A_NAMES)
    # the same workers: "few" shares 2 names with A, "many" 3 (listed after it)
    cpu_trace(root / "few" / "worker0.pt.trace.json", A_NAMES[:2] + ["aten::mul"])
    cpu_trace(root / "many" / "worker0.pt.trace.json", A_NAMES[:3] + ["aten::sub"])
    # other workers, all four names: not preferred to a run with A's workers
    cpu_trace(root / "other_job" / "rank3.pt.trace.json", A_NAMES)
    # two spans of one worker
    cpu_trace(root / "spans" / "worker0.1.pt.trace.json", A_NAMES)
    cpu_trace(root / "spans" / "worker0.2.pt.trace.json", A_NAMES)
    # a GPU run whose names are A's: another device, never proposed for a CPU run or vice versa
    gpu_trace(root / "gpu" / "node7.pt.trace.json", A_NAMES)
    return root


@pytest.fixture(scope="module")
def client(logdir):
    plugin, client = make_client(logdir)
    plugin.store.wait_for_scan(30)
    yield client
    plugin.store.stop()


def proposal(client, timeout=60, **params):
    """The `diff_default` reply once every candidate is loaded: asked again while it answers
    202 or names candidates still loading (their loads were started by the first request)."""
    query = "&".join(f"{k}={v}" for k, v in params.items())
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(f"{PREFIX}/diff_default?{query}")
        if response.status_code != 202:
            assert response.status_code == 200, response.get_json()
            reply = response.get_json()
            if not reply["loading"]:
                return reply
        assert time.monotonic() < deadline, "still loading"
        time.sleep(0.05)


def test_another_span_of_the_same_worker_comes_first(client):
    for span, other in ((1, 2), (2, 1)):
        reply = proposal(client, run="spans", worker="worker0", span=span)
        assert (reply["run_b"], reply["worker_b"], reply["span_b"]) == ("spans", "worker0", other)
        assert reply["reason"] == f"the same run's span {other}"


def test_a_run_with_the_same_workers_and_most_names_in_common(client):
    reply = proposal(client, run="a", worker="worker0")
    # "spans" has A's workers and all 4 names: it beats "many" (3) and "few" (2)
    assert (reply["run_b"], reply["worker_b"], reply["span_b"]) == ("spans", "worker0", 1)
    assert reply["reason"] == "run spans: another CPU run with the same 1 worker, 4 of 4 operator names in common"
    assert reply["loading"] == []


def test_without_a_run_of_the_same_workers_the_reason_says_so(client):
    reply = proposal(client, run="other_job", worker="rank3")
    # no other run has the worker rank3: the one with most names in common ("a", 4 of 4)
    assert (reply["run_b"], reply["worker_b"]) == ("a", "worker0")
    assert reply["reason"].startswith("no run shares A's 1 worker: run a, another CPU run (worker worker0), "
                                      "4 of 4 operator names in common")


def test_nothing_of_the_same_device_type(client):
    reply = proposal(client, run="gpu", worker="node7")
    assert reply["run_b"] is None and reply["worker_b"] is None
    assert reply["reason"] == "this run has one span, and no other run ran on CUDA"


def test_bad_requests_say_why(client):
    assert client.get(f"{PREFIX}/diff_default?run=a&worker=nobody").status_code == 404
    assert client.get(f"{PREFIX}/diff_default?run=a&worker=worker0&span=3").status_code == 404
    assert client.get(f"{PREFIX}/diff_default?run=a").status_code == 400


def names(*operators, device="CPU"):
    return OperatorNames(names=pd.DataFrame({"name": pd.Series(list(operators), dtype=object)}), device_type=device)


def test_candidates_still_loading_are_named_or_waited_for():
    known = {"a": names("x", "y", "z"), "b": names("x"), "c": None}
    runs = {"a": ["w0"], "b": ["w0"], "c": ["w0"], "d": ["w9"]}
    found = propose_comparison("a", "w0", 1, 1, runs, lambda run, worker: known.get(run))
    assert found.run == "b" and found.loading == ["c"]
    assert found.reason.endswith("; 1 other run not loaded yet (c)")
    # nothing of A's workers known yet, one loading: no proposal until it is (not "d", of other workers)
    known["b"] = names("q")
    waiting = propose_comparison("a", "w0", 1, 1, runs, lambda run, worker: known.get(run))
    assert waiting.run is None and waiting.loading == ["c"]
    # loaded, and sharing no name with A: nothing proposed, and the reason says why
    known["c"] = names("q")
    known["d"] = names("r", device="CUDA")
    none = propose_comparison("a", "w0", 1, 1, runs, lambda run, worker: known.get(run))
    assert none.run is None and none.reason == "this run has one span, and no other CPU run shares an operator name with it"


def test_candidates_beyond_the_limit_are_not_asked_for():
    runs = {"a": ["w0"], **{f"r{i:03d}": ["w0"] for i in range(PROPOSAL_CANDIDATES + 5)}}
    asked = []

    def names_of(run, worker):
        asked.append(run)
        return names("x") if run == "a" else names("x", device="CUDA")

    found = propose_comparison("a", "w0", 1, 1, runs, names_of)
    assert len(asked) == 1 + PROPOSAL_CANDIDATES
    assert found.reason == "this run has one span, and no other run ran on CPU; 5 runs more not looked at"


FAMILY = "cutlass_80_tensorop_s1688gemm_256x64"


@pytest.fixture(scope="module")
def job_client(tmp_path_factory):
    """Two runs of a three-rank job, every rank the A100 sample: in `slower`, rank1's kernels of
    one family are 20% longer (`plants.stretched_kernels`). Returns the client and the planted
    change of rank1's mean step time."""
    root = tmp_path_factory.mktemp("job")
    source = next((SAMPLES / "gpu_a100_nccl").glob("*.pt.trace.json.gz"))
    events = list(raw_events(source))
    stretched_events, stretched = stretched_kernels(events, FAMILY, 1.2)
    for rank in range(3):
        for run in ("base", "slower"):
            (root / run).mkdir(exist_ok=True)
            if run == "slower" and rank == 1:
                write_gz(root / run, f"rank{rank}", stretched_events)
            else:
                shutil.copy(source, root / run / f"rank{rank}.pt.trace.json.gz")
    (root / "other").mkdir()
    shutil.copy(source, root / "other" / "node9.pt.trace.json.gz")
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    yield client, stretched_step_change(events, stretched)
    plugin.store.stop()


def ready_reply(client, url, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(url)
        if response.status_code != 202:
            return response
        assert time.monotonic() < deadline, f"{url} still loading"
        time.sleep(0.05)


def test_diff_ranks_puts_the_stretched_rank_first_with_its_change(job_client):
    client, planted = job_client
    assert planted > 100
    response = ready_reply(client, f"{PREFIX}/diff_ranks?run=base&run_b=slower&threshold_pct=0.1")
    assert response.status_code == 200, response.get_json()
    table = response.get_json()
    ranks = pd.DataFrame(table["rows"], columns=table["columns"])
    assert list(ranks["worker"])[0] == "rank1" and sorted(ranks["worker"]) == ["rank0", "rank1", "rank2"]
    first = ranks.iloc[0]
    assert first["mean_us_delta"] == pytest.approx(planted, abs=0.1)
    assert first["top_cause"] == "device_compute" and first["top_cause_us"] == pytest.approx(planted, abs=0.1)
    assert ranks["mean_us_delta"].iloc[1:].abs().max() < 1e-6
    # the same rows as CSV
    csv = ready_reply(client, f"{PREFIX}/diff_ranks?run=base&run_b=slower&threshold_pct=0.1&format=csv")
    assert csv.status_code == 200 and csv.get_data(as_text=True).splitlines()[0] == ",".join(table["columns"])
    assert len(csv.get_data(as_text=True).splitlines()) == 1 + len(ranks)


def test_diff_ranks_bad_requests_say_why(job_client):
    client, _ = job_client
    missing = ready_reply(client, f"{PREFIX}/diff_ranks?run=base&run_b=other")
    assert missing.status_code == 404 and "share no worker" in missing.get_json()["reason"]
    assert client.get(f"{PREFIX}/diff_ranks?run=base&run_b=slower&threshold_pct=-1").status_code == 400
    assert client.get(f"{PREFIX}/diff_ranks?run=base").status_code == 400
    assert client.get(f"{PREFIX}/diff_ranks?run=base&run_b=nope").status_code == 404
