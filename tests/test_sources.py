"""Stack-frame files resolved to absolute paths on the TensorBoard machine (tb_plugin/server/sources.py)."""

import builtins
import importlib.util
import io
import os
from pathlib import Path

from tb_plugin.server.sources import SourceResolver

from .helpers import PREFIX, make_client, op, wait_route, write_trace


def _tree(root, *files):
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def test_one_match_is_answered_several_or_none_are_not(tmp_path, monkeypatch):
    a, b, run = tmp_path / "a", tmp_path / "b", tmp_path / "run"
    _tree(a, "pkg/mod.py", "both.py")
    _tree(b, "both.py")
    _tree(run, "train.py")
    os.symlink(a, tmp_path / "a_again")  # the same directory twice on the path: one file
    opened = []
    monkeypatch.setattr(builtins, "open", lambda *args, **kw: opened.append(args) or io.StringIO())
    monkeypatch.setattr(os, "open", lambda *args, **kw: opened.append(args) or -1)
    resolver = SourceResolver([a, tmp_path / "a_again", b])
    assert resolver.resolve("pkg/mod.py") == str(a / "pkg/mod.py")
    assert resolver.resolve("train.py", str(run)) == str(run / "train.py")
    assert resolver.resolve("train.py") is None  # not under any search directory
    assert resolver.resolve("both.py") is None  # two different files: no guess
    assert resolver.resolve(str(b / "both.py")) == str(b / "both.py")  # absolute and existing
    assert resolver.resolve(str(b / "gone.py")) is None
    for hostile in ("../b/both.py", "pkg/../../b/both.py", "pkg\x00.py", "a" * 5000, ""):
        assert resolver.resolve(hostile) is None
    assert opened == []  # existence only: nothing is opened, let alone read


def test_default_search_finds_torch_in_site_packages():
    torch_file = Path(importlib.util.find_spec("torch").origin).parent / "nn" / "modules" / "module.py"
    assert SourceResolver().resolve("torch/nn/modules/module.py") == str(torch_file)


def test_operator_stacks_and_event_details_carry_the_path(tmp_path):
    stack = "train.py(1): <module>;nowhere/missing.py(3): f"
    write_trace(tmp_path / "run" / "w.pt.trace.json", [op("ProfilerStep#1", 0, 100, cat="user_annotation"),
                                                       op("aten::mm", 10, 50, **{"External id": 1, "Call stack": stack})])
    (tmp_path / "run" / "train.py").write_text("import torch\n")
    plugin, client = make_client(tmp_path)
    try:
        body = wait_route(client, f"{PREFIX}/operator_stacks?run=run&worker=w&name=aten::mm").get_json()
        frames = body["stacks"][0]["frames"]
        assert [(f["file"], f["line"], f["path"]) for f in frames] == [
            ("train.py", 1, str(tmp_path / "run" / "train.py")), ("nowhere/missing.py", 3, None)]
        event = client.get(f"{PREFIX}/timeline_search?run=run&worker=w&q=aten::mm").get_json()["match"]["event"]
        details = client.get(f"{PREFIX}/timeline_event?run=run&worker=w&event={event}").get_json()
        assert [f["path"] for f in details["call_stack"]] == [str(tmp_path / "run" / "train.py"), None]
    finally:
        plugin.store.stop()
