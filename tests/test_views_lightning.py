"""Lightning view: the `samples/cpu_lightning` run (Lightning's PyTorchProfiler on CPU), checked
against raw sums of its `[pl][profile]` ranges computed here from the JSON, and a hand-made
trace for the name forms."""

import csv
import io
import shutil
from collections import defaultdict

import pytest

import tb_plugin
from tb_plugin.views.lightning import HOOKS, lightning_hooks

from .helpers import PREFIX, SAMPLES, make_client, op, raw_events, wait_route, write_trace



def _path():
    return next((SAMPLES / "cpu_lightning").glob("worker0.*.pt.trace.json.gz"))


def test_hooks_equal_raw_range_sums():
    table = tb_plugin.load(_path()).lightning()
    HOOKS.check(table)
    raw = defaultdict(list)
    for e in raw_events(_path()):
        if e.get("ph") == "X" and e["name"].startswith("[pl][profile]"):
            raw[e["name"][len("[pl][profile]"):]].append(e["dur"])
    assert sorted(table["range"]) == sorted(raw)
    for row in table.itertuples():
        assert row.calls == len(raw[row.range])
        assert row.total_us == pytest.approx(sum(raw[row.range]), abs=1e-6)
        assert row.max_us == pytest.approx(max(raw[row.range]), abs=1e-6)
    # the hooks the issue names are there, split into component, owner and hook
    step = table[table["hook"] == "training_step"].iloc[0]
    assert (step.component, step.owner) == ("Strategy", "SingleDeviceStrategy")
    assert set(table["hook"]) >= {"training_step", "backward", "optimizer_step", "train_dataloader_next"}
    assert list(table["total_us"]) == sorted(table["total_us"], reverse=True)


def test_hook_name_forms_worked_by_hand(tmp_path):
    events = [op("[pl][profile][LightningModule]Net.training_step", 0, 30, cat="user_annotation"),
              op("[pl][profile][LightningModule]Net.training_step", 50, 10, cat="user_annotation"),
              op("[pl][profile][_TrainingEpochLoop].train_dataloader_next", 30, 20, cat="user_annotation"),
              op("[pl][profile]run_training_batch", 0, 100, cat="user_annotation"),
              op("aten::mm", 5, 10)]
    table = lightning_hooks(tb_plugin.load(write_trace(tmp_path / "w.pt.trace.json", events)).model)
    step = table[table["hook"] == "training_step"].iloc[0]
    assert (step.component, step.owner, step.calls, step.total_us, step.mean_us, step.max_us) == \
        ("LightningModule", "Net", 2, 40, 20, 30)
    assert step.trace_pct == 40  # of the trace's 0..100 us
    loader = table[table["hook"] == "train_dataloader_next"].iloc[0]
    assert (loader.component, loader.owner) == ("_TrainingEpochLoop", "")
    batch = table[table["hook"] == "run_training_batch"].iloc[0]
    assert (batch.range, batch.component, batch.owner, batch.trace_pct) == ("run_training_batch", "", "", 100)


def test_lightning_route_and_views(tmp_path):
    shutil.copytree(SAMPLES / "cpu_lightning", tmp_path / "pl")
    shutil.copytree(SAMPLES / "cpu_cnn", tmp_path / "plain")
    plugin, client = make_client(tmp_path)
    try:
        plugin.store.wait_for_scan(30)
        body = wait_route(client, f"{PREFIX}/lightning?run=pl&worker=worker0").get_json()
        assert body["columns"] == HOOKS.names and len(body["rows"]) > 0
        text = client.get(f"{PREFIX}/lightning?run=pl&worker=worker0&format=csv").get_data(as_text=True)
        assert len(list(csv.DictReader(io.StringIO(text)))) == len(body["rows"])
        assert "lightning" in wait_route(client, f"{PREFIX}/views?run=pl&worker=worker0").get_json()["views"]
        assert "lightning" not in wait_route(client, f"{PREFIX}/views?run=plain&worker=worker0").get_json()["views"]
        assert wait_route(client, f"{PREFIX}/lightning?run=plain&worker=worker0").get_json()["rows"] == []
    finally:
        plugin.store.stop()
