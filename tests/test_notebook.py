"""`Profile`, `Run` and a diff shown in Jupyter: a notebook executed on a real kernel
(nbclient, ipykernel) stores, for each, the page in a frame holding the report with its
answers, which needs no server. What the frame does in a browser is
tests/e2e/test_report.py's."""

import html
import re

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook test needs nbformat, nbclient and ipykernel")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from .helpers import SAMPLES, embedded_answer as answer, report_data as embedded  # noqa: E402

CNN = SAMPLES / "cpu_cnn"


def frame_page(output, tmp_path):
    """The report file inside a stored text/html output's frame."""
    stored = output["data"]["text/html"]
    found = re.fullmatch(r'<iframe srcdoc="([^"]*)" sandbox="allow-scripts allow-downloads"[^>]*></iframe>', stored)
    assert found, stored[:300]
    page = tmp_path / f"frame{len(list(tmp_path.iterdir()))}.html"
    page.write_text(html.unescape(found.group(1)), "utf-8")
    return page


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    files = sorted(str(p) for p in CNN.glob("*.pt.trace.json.gz"))
    cells = [
        "import tb_plugin",
        f"run = tb_plugin.load_run({str(CNN)!r})\nrun",  # Run._repr_html_
        f"profile = tb_plugin.load({files[1]!r})\nprofile",  # Profile._repr_html_
        "tb_plugin.show(run, view='operator')",
        f"tb_plugin.show(tb_plugin.load({files[0]!r}), profile)",  # the diff of the two spans
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path_factory.mktemp("nb"))}}).execute()
    return [cell["outputs"] for cell in notebook.cells]


def test_run_shows_the_page_of_every_span(executed, tmp_path):
    [output] = executed[1]
    data = embedded(frame_page(output, tmp_path))
    assert [s["span"] for s in answer(data, "spans", run="cpu_cnn", worker="worker0")["spans"]] == [1, 2]
    assert "operator" in answer(data, "views", run="cpu_cnn", worker="worker0", span=2)["views"]


def test_profile_shows_its_own_span(executed, tmp_path):
    """The second span's Profile shows that file alone (its run is named after it), with the
    steps that file records, not the first span's."""
    import tb_plugin

    [output] = executed[2]
    data = embedded(frame_page(output, tmp_path))
    path = sorted(CNN.glob("*.pt.trace.json.gz"))[1]
    spans = answer(data, "spans", run=path.name, worker="worker0")["spans"]
    assert [s["file"] for s in spans] == [path.name] and data["location"]["span"] == str(spans[0]["span"])
    steps = answer(data, "steps", run=path.name, worker="worker0", span=spans[0]["span"])
    shown = [dict(zip(steps["columns"], row))["step"] for row in steps["rows"]]
    assert shown == tb_plugin.load(str(path)).steps()["step"].tolist()
    first = tb_plugin.load(str(sorted(CNN.glob("*.pt.trace.json.gz"))[0])).steps()["step"].tolist()
    assert shown != first


def test_show_opens_the_view_asked_for(executed, tmp_path):
    [output] = executed[3]
    assert embedded(frame_page(output, tmp_path))["location"]["view"] == "operator"


def test_a_diff_shows_the_diff_page(executed, tmp_path):
    [output] = executed[4]
    data = embedded(frame_page(output, tmp_path))
    location = data["location"]
    assert location["view"] == "diff"
    reply = answer(data, "diff", **{k: location[k] for k in ("run", "worker", "span", "run_b", "worker_b", "span_b")},
                   threshold_pct=location["diff_threshold"])
    assert reply["explanation"]["rows"]
