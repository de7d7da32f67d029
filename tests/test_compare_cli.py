"""`python -m tb_plugin compare`: exit status, text, JSON and Markdown on the same program
twice, on a planted regression, on many ranks and on bad input."""

import json
import shutil
import subprocess
import sys

import pytest

from tb_plugin.__main__ import main

from .helpers import SAMPLES, raw_events
from .plants import slower_data_loader, write_gz

CPU_CNN = SAMPLES / "cpu_cnn"
DDP = SAMPLES / "cpu_ddp_gloo"


def _compare(capsys, *args):
    status = main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def test_same_program_twice_exits_0_and_calls_everything_noise(capsys, tmp_path):
    """The CNN's two spans: the same program profiled twice, nothing changed."""
    status, out, _ = _compare(capsys, CPU_CNN, CPU_CNN, "--span-b", 2, "--threshold", 5, "--json", tmp_path / "d.json")
    assert status == 0
    body = json.loads((tmp_path / "d.json").read_text())
    assert body["regressed"] is False and {r["verdict"] for r in body["explanation"]} == {"noise"}
    assert "within noise" in out and "REGRESSION" not in out
    # the causes add up to the step time's change
    step, *causes = body["explanation"]
    assert sum(c["mean_us_delta"] for c in causes) == pytest.approx(step["mean_us_delta"], abs=1e-6)


@pytest.fixture(scope="module")
def slower_loader(tmp_path_factory):
    """The CNN's first span with every DataLoader wait 1 ms longer, and the expected change."""
    source = sorted(CPU_CNN.glob("*.pt.trace.json.gz"))[0]
    edited, expected = slower_data_loader(list(raw_events(source)), 1000.0)
    return source, write_gz(tmp_path_factory.mktemp("plant"), "worker0", edited), expected


def test_planted_regression_exits_1_with_threshold(capsys, tmp_path, slower_loader):
    source, planted, expected = slower_loader
    status, out, _ = _compare(capsys, source, planted, "--threshold", 5, "--json", tmp_path / "d.json",
                              "--markdown", tmp_path / "d.md")
    assert status == 1
    body = json.loads((tmp_path / "d.json").read_text())
    rows = {r["cause"]: r for r in body["explanation"]}
    assert rows["data_loading"]["verdict"] == "regression" and body["regressed"] is True
    assert rows["data_loading"]["mean_us_delta"] == pytest.approx(expected, abs=0.1)
    top = [c for c in body["contributors"] if c["cause"] == "data_loading"][0]
    assert top["name"].startswith("enumerate(DataLoader)")
    markdown = (tmp_path / "d.md").read_text()
    # causes in words, as the page shows them, not their identifiers
    assert markdown.startswith("### :red_circle:") and "| Data loading (the DataLoader) |" in markdown
    assert "regression" in markdown and "data_loading" not in markdown
    assert "Data loading (the DataLoader)" in out and "regression" in out and "data_loading" not in out
    # without --threshold the verdicts are reported and the status is 0; a higher one passes
    assert _compare(capsys, source, planted)[0] == 0
    assert _compare(capsys, source, planted, "--threshold", 50)[0] == 0


def test_many_ranks_names_the_rank_that_changed(capsys, tmp_path):
    """Two runs of the 2-rank DDP job, the second with rank 1's data loader slowed down."""
    run_b = tmp_path / "run_b"
    shutil.copytree(DDP, run_b)
    rank1 = sorted(run_b.glob("worker1.*.pt.trace.json.gz"))[0]
    edited, expected = slower_data_loader(list(raw_events(rank1)), 3000.0)
    rank1.unlink()
    write_gz(run_b, rank1.name[: -len(".pt.trace.json.gz")], edited)
    status, out, _ = _compare(capsys, DDP, run_b, "--json", tmp_path / "d.json")
    assert status == 0
    body = json.loads((tmp_path / "d.json").read_text())
    ranks = {r["worker"]: r for r in body["ranks"]}
    assert [r["worker"] for r in body["ranks"]] == ["worker1", "worker0"]
    assert ranks["worker0"]["mean_us_delta"] == 0 and ranks["worker0"]["verdict"] == "noise"
    assert ranks["worker1"]["top_cause"] == "data_loading"
    assert ranks["worker1"]["top_cause_us"] == pytest.approx(expected, abs=0.1)
    assert body["worker"] == "worker1" and "2 ranks compared" in out


@pytest.mark.parametrize("args, reason", [
    (["no/such/trace.pt.trace.json", CPU_CNN], "no such"),
    ([CPU_CNN, CPU_CNN, "--worker", "nobody"], "no worker 'nobody'"),
    ([CPU_CNN, CPU_CNN, "--span-b", 7], "spans 1..2"),
    ([CPU_CNN, CPU_CNN, "--threshold", -1], "--threshold"),
    ([DDP, CPU_CNN], "--worker"),
])
def test_bad_input_exits_2_with_the_reason(capsys, args, reason):
    status, out, err = _compare(capsys, *args)
    assert status == 2 and out == ""
    assert err.startswith("error: ") and reason in err


def test_progress_on_stderr_for_slow_loads(capsys, monkeypatch):
    import tb_plugin.python_api.compare as compare
    monkeypatch.setattr(compare, "PROGRESS_AFTER_S", 0.0)  # every load counts as slow
    status, _, err = _compare(capsys, CPU_CNN, CPU_CNN, "--span-b", 2)
    assert status == 0
    assert "A samples/cpu_cnn [worker0, span 1]" in err.replace(str(SAMPLES.parent) + "/", "")
    assert "%" in err and "B " in err


def test_command_line_entry_point():
    """The module runs as `python -m tb_plugin compare` and documents its exit status."""
    done = subprocess.run([sys.executable, "-m", "tb_plugin", "compare", "--help"], capture_output=True, text=True,
                          timeout=60)
    text = " ".join(done.stdout.split())  # argparse wraps lines
    assert done.returncode == 0 and "--threshold PCT" in text and "1 a regression, 2 bad input" in text


def test_unrelated_programs_are_flagged(capsys, tmp_path):
    """The compiled MLP against the Lightning model: hardly an operator path in common."""
    status, out, _ = _compare(capsys, SAMPLES / "cpu_compile", SAMPLES / "cpu_lightning", "--markdown", tmp_path / "d.md",
                              "--json", tmp_path / "d.json")
    assert status == 0 and "may be different programs" in out
    assert "> :warning: Only" in (tmp_path / "d.md").read_text()
    # the answer carries the warnings as sentences
    assert any("may be different programs" in w for w in json.loads((tmp_path / "d.json").read_text())["warnings"])
    # the same program twice is not flagged
    assert "different programs" not in _compare(capsys, CPU_CNN, CPU_CNN, "--span-b", 2)[1]
