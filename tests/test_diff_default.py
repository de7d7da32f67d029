"""The B the Diff tab proposes for A (`diff_default`, `runs.propose_comparison`), over hand-made
log directories whose operator names are chosen here, so the expected proposal and the counts
in its reason follow from the names written, not from the code under test."""

import shutil
import time

import pandas as pd
import pytest

from tb_plugin.python_api.runs import propose_comparison
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
    # another GPU program of other workers: 1 (aten::linear) of the 7 names either uses in common
    gpu_trace(root / "transformer" / "node1.pt.trace.json", ["aten::linear", "aten::softmax", "aten::gelu",
                                                              "aten::layer_norm"])
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
    reply = proposal(client, run="spans", worker="worker0", span=1)
    assert reply["run_b"] == "spans"  # (a run of two spans compares them)
    reply = proposal(client, run="few", worker="worker0")
    # "few" (conv2d, relu, mul) against each other CPU run: 2 of the 5 names either uses, 40%:
    # none runs its program
    assert reply["run_b"] is None
    assert reply["reason"] == ("this run has one span, and no other CPU run runs the same program (at most 40% of the "
                               "operator names either uses are in both; 60% needed)")


def test_another_program_on_the_same_device_is_never_proposed(client):
    """The GPU run's only other CUDA run is a transformer sharing aten::linear with it (1 of 7):
    the bundled V100 ResNet's default B was such a run ("improvement -83%")."""
    reply = proposal(client, run="gpu", worker="node7")
    assert reply["run_b"] is None and reply["worker_b"] is None
    assert reply["reason"] == (f"this run has one span, and no other CUDA run runs the same program (at most {1 / 7:.0%} "
                               "of the operator names either uses are in both; 60% needed)")


def test_bad_requests_say_why(client):
    assert client.get(f"{PREFIX}/diff_default?run=a&worker=nobody").status_code == 404
    assert client.get(f"{PREFIX}/diff_default?run=a&worker=worker0&span=3").status_code == 404
    assert client.get(f"{PREFIX}/diff_default?run=a").status_code == 400


def names(*operators, device="CPU"):
    return OperatorNames(names=pd.DataFrame({"name": pd.Series(list(operators), dtype=object)}), device_type=device)


def test_candidates_still_loading_are_named_or_waited_for():
    known = {"a": names("x", "y", "z"), "b": names("x", "y"), "c": None}
    runs = {"a": ["w0"], "b": ["w0"], "c": ["w0"], "d": ["w9"]}
    found = propose_comparison("a", "w0", 1, 1, runs, lambda run, worker: known.get(run), BUDGET)
    assert found.run == "b" and found.loading == ["c"]
    assert found.reason.endswith("; 1 other run not loaded yet (c)")
    # nothing of A's workers known yet, one loading: no proposal until it is (not "d", of other workers)
    known["b"] = names("q")
    waiting = propose_comparison("a", "w0", 1, 1, runs, lambda run, worker: known.get(run), BUDGET)
    assert waiting.run is None and waiting.loading == ["c"]
    # loaded, and sharing no name with A: nothing proposed, and the reason says why
    known["c"] = names("q")
    known["d"] = names("r", device="CUDA")
    none = propose_comparison("a", "w0", 1, 1, runs, lambda run, worker: known.get(run), BUDGET)
    assert none.run is None and none.reason == ("this run has one span, and no other CPU run runs the same program "
                                                "(at most 0% of the operator names either uses are in both; 60% needed)")


BUDGET = 64 << 20


def test_every_run_is_looked_at_not_the_first_sixteen():
    """40 runs of A's workers, 29 of them CUDA ones after 11 CPU ones: every one is asked,
    and the CUDA one running A's program (the last) is found."""
    runs = {"a": ["w0"], **{f"r{i:03d}": ["w0"] for i in range(40)}}
    asked = []

    def names_of(run, worker):
        asked.append(run)
        if run == "a" or run == "r039":
            return names("x", "y", device="CUDA")
        return names("x", "z", device="CUDA" if run >= "r011" else "CPU")

    found = propose_comparison("a", "w0", 1, 1, runs, names_of, BUDGET)
    assert len(asked) == 41 and found.run == "r039"
    assert found.reason == "run r039: another CUDA run with the same 1 worker, 2 of 2 operator names in common"


def test_runs_beyond_the_memory_budget_are_named():
    """Each trace's names take the memory measured here; a budget of three traces' names
    reads A's and three more (it is checked before each read), and names the rest."""
    runs = {"a": ["w0"], **{f"r{i}": ["w0"] for i in range(6)}}
    other = names("x", device="CUDA")
    size = int(other.names.memory_usage(index=True, deep=True).sum())
    asked = []

    def names_of(run, worker):
        asked.append(run)
        return names("x") if run == "a" else other

    found = propose_comparison("a", "w0", 1, 1, runs, names_of, 3 * size)
    assert asked == ["a", "r0", "r1", "r2"]
    assert found.run is None
    assert found.reason == (f"this run has one span, and no other run ran on CPU; 3 runs not looked at (r3, r4, r5): "
                            f"their operator names would pass the {(3 * size) >> 20} MiB of the memory budget a "
                            "proposal may read")


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


def test_the_bundled_v100_resnet_is_proposed_no_other_program():
    """Over the bundled runs, the V100 ResNet (one span) had the H100 transformer as its B.
    Its operator names against each other CUDA run's, counted here: none reaches 60%, so none
    is proposed; an exact copy of it is."""
    import tb_plugin
    cuda = ("gpu_resnet50_v100", "gpu_a100_nccl", "gpu_h100_compiled", "gpu_h100_eager_nccl")
    loaded = {r: tb_plugin.load_run(SAMPLES / r) for r in cuda}
    known = {r: run.profile(run.workers[0]).operator_names() for r, run in loaded.items()}
    mine = set(known["gpu_resnet50_v100"].names["name"])
    shares = {r: len(mine & set(n.names["name"])) / len(mine | set(n.names["name"])) for r, n in known.items()}
    closest = max(v for r, v in shares.items() if r != "gpu_resnet50_v100")
    assert closest < 0.6
    runs = {r: run.workers for r, run in loaded.items()}
    found = propose_comparison("gpu_resnet50_v100", runs["gpu_resnet50_v100"][0], 1, 1, runs,
                               lambda run, worker: known[run], BUDGET)
    assert found.run is None and f"at most {closest:.0%} of the operator names" in found.reason
    # a copy of the same run is proposed
    runs["copy"], known["copy"] = runs["gpu_resnet50_v100"], known["gpu_resnet50_v100"]
    found = propose_comparison("gpu_resnet50_v100", runs["gpu_resnet50_v100"][0], 1, 1, runs,
                               lambda run, worker: known[run], BUDGET)
    assert found.run == "copy"
