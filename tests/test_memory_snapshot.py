"""Memory snapshots (tb_plugin.load_snapshot) against torch's own reader of the same dict,
`torch.cuda._memory_viz`, and against the allocator the test data replays
(tests/snapshot_data.py), which counts its bytes after every action."""

import base64
import gzip
import json
import os
import pickle
import re
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

import tb_plugin
import tb_plugin.python_api.snapshots
from tb_plugin import TraceError
from tb_plugin.errors import NotFoundError
from tb_plugin.__main__ import main

from .helpers import PREFIX, make_client, memory, op, wait_route, write_trace
from .snapshot_data import STACKS, inconsistent_snapshot, snapshot_of, training

memory_viz = pytest.importorskip("torch.cuda._memory_viz")


def _lines(text):
    """`format_flamegraph` that returns the flame graph's input lines, so nothing is downloaded."""
    return text


@pytest.fixture(scope="module")
def allocators():
    return [training(0, seed=1, drop_first=10), training(1, seed=2, oom=True, graph_pool=True)]


@pytest.fixture(scope="module")
def snapshot(allocators):
    return snapshot_of(allocators)


@pytest.fixture(scope="module")
def snap(snapshot, tmp_path_factory):
    path = tmp_path_factory.mktemp("snap") / "rank0.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    return tb_plugin.load_snapshot(path)


def _truth(allocator):
    """(allocated, reserved) after each written entry, with the state before the first one first."""
    d = allocator.drop_first
    before = (allocator.allocated_after[d - 1], allocator.reserved_after[d - 1]) if d else (0, 0)
    return (np.array([before[0], *allocator.allocated_after[d:]]), np.array([before[1], *allocator.reserved_after[d:]]))


def test_peak_is_the_replayed_allocators_and_every_device_has_one_row(snap, allocators):
    peaks = snap.peak().set_index("device")
    assert list(peaks.index) == [0, 1]
    for a in allocators:
        allocated, reserved = _truth(a)
        at = int(np.argmax(allocated))
        assert peaks.at[a.device, "peak_allocated_bytes"] == allocated[at]
        assert peaks.at[a.device, "reserved_at_peak_bytes"] == reserved[at]
        assert peaks.at[a.device, "peak_reserved_bytes"] == reserved.max()
        assert peaks.at[a.device, "peak_time_us"] == a.entries[a.drop_first + at - 1]["time_us"]


def test_counts_and_oom_agree_with_memory_viz_trace(snap, snapshot):
    text = memory_viz.trace(snapshot)
    counts = [int(n) for n in re.findall(r"^(\d+) entries$", text, re.M)]
    assert list(snap.peak()["entries"]) == counts
    (asked, free), = re.findall(r"raise OutOfMemoryError # (\S+) requested, (\S+) free in CUDA", text)
    card = snap.oom().set_index("device")
    assert card.at[1, "kind"] == "oom" and card.at[0, "kind"] == "peak"
    assert memory_viz._format_size(card.at[1, "requested_bytes"]) == asked
    assert memory_viz._format_size(card.at[1, "device_free_bytes"]) == free


def test_oom_card_state_is_the_allocators_at_that_entry(snap, allocators):
    card = snap.oom().set_index("device").loc[1]
    allocated, reserved = _truth(allocators[1])
    assert card["allocated_bytes"] == allocated[-1] and card["reserved_bytes"] == reserved[-1]
    assert card["fragmentation_bytes"] == reserved[-1] - allocated[-1]


def test_allocated_above_reserved_is_an_anomaly_not_a_negative_fragmentation(tmp_path, capsys):
    """The hand-made inconsistent snapshot: fragmentation would be 2 - 8 = -6 MiB (-300%); it
    is null, with the reason, in Python and over HTTP, and "not known" in the CLI."""
    mib = 1 << 20
    snapshot = inconsistent_snapshot()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "rank0.pickle").write_bytes(pickle.dumps(snapshot))
    card = tb_plugin.load_snapshot(tmp_path / "run" / "rank0.pickle").oom().iloc[0]
    assert (card["kind"], card["allocated_bytes"], card["reserved_bytes"]) == ("oom", 8 * mib, 2 * mib)
    assert card["fragmentation_bytes"] is pd.NA and np.isnan(card["fragmentation_pct"])
    assert "more is allocated than reserved" in card["anomaly"]
    _, client = make_client(tmp_path)
    reply = wait_route(client, f"{PREFIX}/snapshot_oom?run=run&snapshot=rank0")
    (row,) = [dict(zip(reply.json["columns"], r)) for r in reply.json["rows"]]
    assert row["fragmentation_bytes"] is None and row["fragmentation_pct"] is None and row["anomaly"] == card["anomaly"]
    assert main(["memory", str(tmp_path / "run" / "rank0.pickle")]) == 0
    assert "allocated 8.0 MiB, reserved 2.0 MiB, fragmentation not known" in capsys.readouterr().out


def test_a_consistent_snapshot_has_no_anomaly(snap):
    assert (snap.oom()["anomaly"] == "").all() and (snap.oom()["fragmentation_bytes"] >= 0).all()


def test_segment_totals_agree_with_memory_viz_segsum(snap, snapshot):
    text = memory_viz.segsum(snapshot)
    reserved = re.search(r"total_reserved: (\S+)", text).group(1)
    allocated = re.search(r"total_allocated: (\S+)", text).group(1)
    # The state rebuilt at each device's last entry from the trace, not read from `segments`.
    states = [snap.state(d) for d in snap.devices()]
    segment_bytes = sum(s.drop_duplicates("segment_address")["segment_bytes"].sum() for s in states)
    assert memory_viz._format_size(segment_bytes) == reserved
    requested = sum(snap.blame(d)["requested_bytes"].sum() for d in snap.devices())
    assert memory_viz._format_size(requested) == allocated
    assert len(snapshot["segments"]) == sum(s["segment_address"].nunique() for s in states)


def test_live_bytes_per_stack_agree_with_memory_viz_memory(snap, snapshot):
    expected = defaultdict(int)
    for line in memory_viz.memory(snapshot, format_flamegraph=_lines).splitlines():
        key, size = line.rsplit(" ", 1)
        _, state, frames = key.split(";", 2)
        if state == "active_allocated" and not frames.endswith("<gaps>"):
            expected[frames] += int(size)
    frames = snap.model.frames
    sf = snap.model.stack_frames
    ours = defaultdict(int)
    a = snap.allocations()
    for stack, requested in zip(a["stack"][a["free_entry"] < 0], a["requested"][a["free_entry"] < 0]):
        rows = sf[sf["stack"] == stack].sort_values("depth")["frame"]
        dicts = [{"filename": frames.at[r, "filename"], "line": frames.at[r, "line"], "name": frames.at[r, "name"]}
                 for r in rows]
        ours[";".join(memory_viz._frames_fmt(dicts, reverse=True)) or "<non-python>"] += int(requested)
    assert dict(ours) == dict(expected)


def test_segment_flamegraph_totals_agree_with_state(snap, snapshot):
    held = defaultdict(int)  # per segment: block bytes active (requested + its rounding)
    for line in memory_viz.segments(snapshot, format_flamegraph=_lines).splitlines():
        key, size = line.rsplit(" ", 1)
        _, seg, state, _ = key.split(";", 3)
        if state == "active_allocated":
            held[int(seg[len("seg_"):])] += int(size)
    ours = defaultdict(int)
    for d in snap.devices():
        s = snap.state(d)
        for address, size in zip(s["segment_address"][s["allocated"]], s["size_bytes"][s["allocated"]]):
            ours[int(address)] += int(size)
    assert dict(ours) == dict(held)


def test_alive_allocations_agree_with_trace_plots_data(snap, snapshot):
    html = memory_viz.trace_plot(json.loads(json.dumps(snapshot)), filter_freed=True)
    encoded = json.loads(re.search(r"const local_files = (\[.*\])", html).group(1))[0]["base64"]
    data = pickle.loads(base64.b64decode(encoded))  # torch's own output, written just above
    a = snap.allocations()
    for device, entries in enumerate(data["device_traces"]):
        kept_allocs = sorted(e["addr"] for e in entries if e["action"] == "alloc")
        kept_frees = sorted(e["addr"] for e in entries if e["action"] == "free_requested")
        mine = a[a["device"] == device]
        assert sorted(mine["addr"][(mine["alloc_entry"] >= 0) & (mine["free_entry"] < 0)]) == kept_allocs
        assert sorted(mine["addr"][(mine["alloc_entry"] < 0) & (mine["free_entry"] >= 0)]) == kept_frees


def test_state_at_any_entry_is_the_allocators(snap, allocators):
    a = allocators[0]
    start = int(snap.model.entries.index[snap.model.entries["device"] == 0][0])
    for pos in (0, 40, 100, len(a.entries) - a.drop_first - 1):
        state = snap.state(0, start + pos)
        assert state["size_bytes"][state["allocated"]].sum() == a.allocated_after[a.drop_first + pos]
        assert state.drop_duplicates("segment_address")["segment_bytes"].sum() == a.reserved_after[a.drop_first + pos]
        # the blocks tile each segment
        per_segment = state.groupby("segment_address")["size_bytes"].sum()
        assert (per_segment == state.groupby("segment_address")["segment_bytes"].first()).all()


def test_timeline_stacks_to_the_allocated_bytes_and_keeps_the_peak(snap, allocators):
    for a in allocators:
        allocated, _ = _truth(a)
        line = snap.timeline(a.device, bins=7, bands=4)
        totals = line.totals
        assert totals["allocated_bytes"].max() == allocated.max()  # no peak between columns, however far out
        drawn = totals["entry"].to_numpy()
        start = int(snap.model.entries.index[snap.model.entries["device"] == a.device][0])
        assert (totals["allocated_bytes"].to_numpy() == allocated[np.where(drawn < 0, 0, drawn - start + 1)]).all()
        top = line.points.groupby("time_us")["high_bytes"].max()
        assert (top.to_numpy() == totals.groupby("time_us")["allocated_bytes"].first().to_numpy()).all()
        assert len(line.bands) <= 5
        # zoomed in to every entry: each column is one entry
        full = snap.timeline(a.device, bins=len(allocated) * 4, bands=1000)
        assert full.totals["allocated_bytes"].max() == allocated.max()
        assert full.bands["band"].iloc[1:].size == (full.bands["allocation"] >= 0).sum()


def test_private_pool_is_told_apart(snap, snapshot):
    live = snap.live(1)
    private = {s["segment_pool_id"] for s in snapshot["segments"] if tuple(s["segment_pool_id"]) != (0, 0)}
    assert private == {(1, 7)}
    held = sum(b["size"] for s in snapshot["segments"] if tuple(s["segment_pool_id"]) == (1, 7)
               for b in s["blocks"] if b["state"] == "active_allocated")
    assert live["size_bytes"][live["private_pool"]].sum() == held
    assert set(live["pool_id"][live["private_pool"]]) == {"1,7"}


def test_blame_folds_to_the_users_innermost_frame(snap, snapshot):
    expected = defaultdict(int)
    for s in snapshot["segments"]:
        if s["device"] != 0:
            continue
        for b in s["blocks"]:
            if b["state"] == "active_allocated":
                user = next(f for f in b["frames"] if f["filename"].startswith("/home/u/"))
                expected[f"{user['filename']}:{user['line']}:{user['name']}"] += b["size"]
    blame = snap.blame(0)
    assert dict(zip(blame["frame"], blame["live_bytes"])) == dict(expected)
    assert blame["share_pct"].sum() == pytest.approx(100.0)


def test_categories_say_how_they_were_decided(snap, snapshot):
    expected = defaultdict(int)
    kinds = {id(frames): kind for kind, frames in STACKS.items()}
    for s in snapshot["segments"]:
        if s["device"] == 1:
            for b in s["blocks"]:
                if b["state"] == "active_allocated":
                    expected[kinds[id(b["frames"])]] += b["size"]
    cats = snap.categories(1).set_index("category")
    assert cats.at["optimizer_state", "live_bytes"] == expected["optimizer"]
    assert cats.at["activation", "live_bytes"] == expected["activation"]
    assert cats.at["unknown", "live_bytes"] == expected["user"]
    assert cats["rule"].str.len().gt(10).all()


def test_flame_graph_nodes_add_up(snap):
    flame = snap.flame(1)
    root = flame.set_index("node").loc[0]
    assert root["live_bytes"] == snap.live(1)["size_bytes"].sum()
    children = flame[flame["parent"] >= 0].groupby("parent")["live_bytes"].sum()
    own = flame.set_index("node")["live_bytes"]
    assert (children <= own.loc[children.index]).all()
    collapsed = flame[flame["library"]]["frame"]
    assert collapsed.str.match(r"\[library\] \d+ frames").all()
    assert "[library] 2 frames" in set(collapsed)  # linear.py under module.py, in the activations' stack
    expanded = snap.flame(1, collapse_library=False)
    assert len(expanded) > len(flame)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_pickle_protocol_gzip_and_json_read_the_same(snap, snapshot, tmp_path, protocol):
    path = tmp_path / "rank1.pickle.gz"
    path.write_bytes(gzip.compress(pickle.dumps(snapshot, protocol=protocol)))
    assert tb_plugin.load_snapshot(path).peak().equals(snap.peak())
    as_json = tmp_path / "rank1.json"
    as_json.write_text(json.dumps(snapshot))
    assert tb_plugin.load_snapshot(as_json).peak().equals(snap.peak())


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_consuming_decode_frees_the_entries_and_makes_the_same_tables(snapshot):
    from tb_plugin.snapshot.decode import decode_snapshot
    from tb_plugin.snapshot.model import TABLES

    kept, consumed = pickle.loads(pickle.dumps(snapshot)), pickle.loads(pickle.dumps(snapshot))
    whole, freed = decode_snapshot(kept, "kept"), decode_snapshot(consumed, "consumed", consume=True)
    assert [len(t) for t in kept["device_traces"]] == [len(t) for t in snapshot["device_traces"]]
    assert [len(t) for t in consumed["device_traces"]] == [0, 0]
    for name in TABLES:
        assert getattr(whole, name).equals(getattr(freed, name)), name


def _decoded_stacks(model):
    """Each entry's and then each block's stack as its (filename, line, name) frames,
    innermost first, from the decoded tables."""
    frames = list(zip(model.frames["filename"], model.frames["line"], model.frames["name"]))
    by_stack = defaultdict(list)
    ordered = model.stack_frames.sort_values(["stack", "depth"])
    for stack, frame in zip(ordered["stack"], ordered["frame"]):
        by_stack[stack].append(frames[frame])
    return [tuple(by_stack[s]) if s >= 0 else () for s in [*model.entries["stack"], *model.blocks["stack"]]]


def _dict_stacks(snapshot):
    """The same, read straight from the snapshot dict's frames."""
    records = [e for entries in snapshot["device_traces"] for e in entries]
    records += [b for segment in snapshot["segments"] for b in segment["blocks"]]
    return [tuple((f["filename"], f["line"], f["name"]) for f in r.get("frames") or ()) for r in records]


@pytest.mark.parametrize("hashes", [
    pytest.param(lambda frame, starts, lengths: np.zeros(len(lengths), np.uint64), id="all-equal"),
    # stacks of one length share a hash: gradient, optimizer and user are all 3 frames deep
    pytest.param(lambda frame, starts, lengths: lengths.astype(np.uint64) % np.uint64(2), id="by-length")])
@pytest.mark.parametrize("shared", [True, False], ids=["shared-lists", "copied-lists"])
def test_stacks_whose_hashes_collide_are_decoded_as_their_frames(snapshot, monkeypatch, hashes, shared):
    """Different stacks forced to share a hash are still told apart (by their frames): each
    entry's and block's decoded stack is its own frames, in the pickle's shared lists and in
    lists copied per entry (JSON: each list its own object), and stacks of equal frames are one."""
    from tb_plugin.snapshot import decode

    monkeypatch.setattr(decode, "_stack_hashes", hashes)
    data = pickle.loads(pickle.dumps(snapshot)) if shared else json.loads(json.dumps(snapshot))
    model = decode.decode_snapshot(data, "collided")
    assert _decoded_stacks(model) == _dict_stacks(snapshot)
    assert len(model.stack_frames["stack"].unique()) == len({s for s in _dict_stacks(snapshot) if s})


def test_a_planted_payload_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[_Payload(marker)]]}, protocol=4))
    pickle.loads(pickle.dumps(_Payload(tmp_path / "control")))  # the payload does run when unpickled plainly
    assert (tmp_path / "control").exists()
    with pytest.raises(TraceError) as err:
        tb_plugin.load_snapshot(path)
    assert not marker.exists()
    assert err.value.status == 422 and str(path) in str(err.value) and "system" in err.value.reason


@pytest.mark.parametrize("content, reason", [
    (b"", "neither a pickle"),
    (b"\x80\x04\x95", "truncated or corrupt"),
    (pickle.dumps([1, 2, 3]), "not a dict"),
    (pickle.dumps({"a": 1}), "neither 'segments'"),
    (pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "addr": "x"}]]}), "documented format"),
    (b'{"segments": [', "truncated or corrupt"),
])
def test_what_is_not_a_snapshot_says_why(tmp_path, content, reason):
    path = tmp_path / "x.pickle"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=reason):
        tb_plugin.load_snapshot(path)


def test_the_inflated_size_is_bounded_by_the_memory_budget(tmp_path):
    path = tmp_path / "big.pickle.gz"
    path.write_bytes(gzip.compress(pickle.dumps({"segments": [], "device_traces": [[{"action": "oom"}] * 10],
                                                 "pad": b"\0" * (8 << 20)})))
    assert path.stat().st_size < 100 << 10
    with pytest.raises(TraceError, match="too large to load: its pickle inflates"):
        tb_plugin.load_snapshot(path, max_memory_bytes=16 << 20)


def test_cli_prints_the_oom_card_and_top_stacks(snapshot, tmp_path, capsys):
    path = tmp_path / "rank0.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    assert main(["memory", str(path), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "device 1: out of memory" in out and "asked for 3.0 GiB, 123.0 MiB free" in out
    assert "/home/u/model.py:21:forward" in out
    assert main(["memory", str(tmp_path / "missing.pickle")]) == 2


# --- found with the run, cached, served ----------------------------------------------------

def _logdir(tmp_path, snapshot):
    run = tmp_path / "logs" / "job"
    run.mkdir(parents=True)
    (run / "rank0.pickle").write_bytes(pickle.dumps(snapshot, protocol=5))
    (run / "rank1.1700000000.pickle.gz").write_bytes(gzip.compress(pickle.dumps(snapshot, protocol=2)))
    (run / "rank2.json").write_text(json.dumps(snapshot))
    (run / "notes.json").write_text('{"lr": 0.1}')  # neither a trace nor a snapshot
    return tmp_path / "logs"


def test_snapshots_are_found_by_name_and_json_by_content(tmp_path, snapshot):
    from tb_plugin.store.discovery import discover_runs
    from tb_plugin.store.storage import Storage

    runs = discover_runs(Storage(_logdir(tmp_path, snapshot)))
    assert list(runs) == ["job"] and runs["job"].workers == {}  # a run of snapshots only
    found = {name: [(f.span, f.stamp, f.path) for f in files] for name, files in runs["job"].snapshots.items()}
    assert found == {"rank0": [(1, None, "job/rank0.pickle")], "rank1": [(1, 1700000000, "job/rank1.1700000000.pickle.gz")],
                     "rank2": [(1, None, "job/rank2.json")]}


def test_a_run_names_its_snapshots_and_loads_each_as_load_snapshot_does(tmp_path, snapshot):
    run = tb_plugin.load_run(_logdir(tmp_path, snapshot) / "job")
    assert run.workers == [] and run.snapshots() == ["rank0", "rank1", "rank2"]
    counts = [int(n) for n in re.findall(r"^(\d+) entries$", memory_viz.trace(snapshot), re.M)]
    for name, file_name in (("rank0", "rank0.pickle"), ("rank1", "rank1.1700000000.pickle.gz"), ("rank2", "rank2.json")):
        snap = run.snapshot(name)
        assert run.snapshot(name) is snap  # held by the run
        alone = tb_plugin.load_snapshot(tmp_path / "logs" / "job" / file_name)
        assert type(snap) is type(alone) and snap.source == alone.source
        assert list(snap.peak()["entries"]) == counts and snap.peak().equals(alone.peak())
    with pytest.raises(NotFoundError, match="rank3"):
        run.snapshot("rank3")


def test_a_run_with_a_disk_cache_decodes_a_snapshot_once_for_every_session(tmp_path, snapshot, allocators, monkeypatch):
    from tb_plugin.python_api import snapshots, runs

    run_dir, cache = _logdir(tmp_path, snapshot) / "job", tmp_path / "cache"
    decoded = []
    real_read = snapshots.read_snapshot
    monkeypatch.setattr(runs, "read_snapshot", lambda *args: decoded.append(args[1]) or real_read(*args))
    first = tb_plugin.load_run(run_dir, cache_dir=cache).snapshot("rank0")
    assert decoded == ["rank0.pickle"]
    again = tb_plugin.load_run(run_dir, cache_dir=cache).snapshot("rank0")  # a new session: from the cache
    assert decoded == ["rank0.pickle"] and again.peak().equals(first.peak()) and again.info() == first.info()
    assert first.devices() == [0, 1]
    (run_dir / "rank0.pickle").write_bytes(pickle.dumps(snapshot_of(allocators[:1]), protocol=5))  # one GPU now
    changed = tb_plugin.load_run(run_dir, cache_dir=cache).snapshot("rank0")
    assert decoded == ["rank0.pickle", "rank0.pickle"] and changed.devices() == [0]


def test_store_serves_snapshots_from_the_disk_cache_when_unchanged(tmp_path, snapshot, snap, monkeypatch):
    from tb_plugin.server import loading
    from tb_plugin.store.cache import ModelCache

    logdir, cache_dir = _logdir(tmp_path, snapshot), tmp_path / "cache"

    loaded = _wait
    first = loading.RunStore(str(logdir), cache=ModelCache(cache_dir))
    assert loaded(first, "rank0").peak().equals(snap.peak())
    first.stop()
    reads = []
    monkeypatch.setattr("tb_plugin.python_api.snapshots.read_snapshot_dict", lambda *a: reads.append(a) or 1 / 0)
    second = loading.RunStore(str(logdir), cache=ModelCache(cache_dir))
    cached = loaded(second, "rank0")
    assert reads == [] and cached.peak().equals(snap.peak()) and cached.blame(1).equals(snap.blame(1))
    assert cached.timeline(1, bins=50).points.equals(snap.timeline(1, bins=50).points)
    second.stop()
    # a damaged part (checksum) or a changed file means: read again
    part = next(p for p in cache_dir.rglob("*.arrow") if "entries" in p.name)
    part.write_bytes(part.read_bytes()[:-8] + b"\0" * 8)
    third = loading.RunStore(str(logdir), cache=ModelCache(cache_dir))
    with pytest.raises(TraceError):  # read again: the patched reader is what fails
        loaded(third, "rank0")
    assert len(reads) == 1
    third.stop()


def _wait(store, name, timeout=60):
    import time

    from tb_plugin.server.loading import Loading

    store.wait_for_scan(30)
    deadline = time.monotonic() + timeout
    while isinstance(result := store.snapshot("job", name), Loading):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return result


def test_routes_answer_tables_csv_and_a_payload_422(tmp_path, snapshot):
    logdir = _logdir(tmp_path, snapshot)
    (logdir / "job" / "evil.pickle").write_bytes(pickle.dumps({"segments": [_Payload(tmp_path / "ran")]}))
    plugin, client = make_client(logdir)
    try:
        listed = client.get(f"{PREFIX}/runs").get_json()["runs"][0]
        assert [s["name"] for s in listed["snapshots"]] == ["evil", "rank0", "rank1", "rank2"]
        evil = wait_route(client, f"{PREFIX}/snapshot_peak?run=job&snapshot=evil")
        assert evil.status_code == 422 and "posix.system" in evil.get_json()["reason"]
        assert evil.get_json()["path"] == "job/evil.pickle" and not (tmp_path / "ran").exists()
        peak = wait_route(client, f"{PREFIX}/snapshot_peak?run=job&snapshot=rank1").get_json()
        assert peak["columns"][:2] == ["device", "peak_allocated_bytes"]
        assert [row[1] for row in peak["rows"]] == list(tb_plugin.load_snapshot(logdir / "job" / "rank0.pickle").peak()["peak_allocated_bytes"])
        csv = wait_route(client, f"{PREFIX}/snapshot_blame?run=job&snapshot=rank2&device=1&format=csv").get_data(as_text=True)
        assert csv.splitlines()[0].startswith("frame,filename,line,name,live_bytes")
        line = wait_route(client, f"{PREFIX}/snapshot_timeline?run=job&snapshot=rank0&device=0&bins=20&bands=3").get_json()
        assert set(line) == {"bands", "points", "totals"} and len(line["totals"]["rows"]) == 20
        ranks = wait_route(client, f"{PREFIX}/snapshot_ranks?run=job").get_json()
        # evil.pickle cannot be read: named with its reason, the three others compared
        assert [row[:1] for row in ranks["missing"]["rows"]] == [["evil"]]
        assert "posix.system" in ranks["missing"]["rows"][0][1]
        assert sorted({row[0] for row in ranks["ranks"]["rows"]}) == ["rank0", "rank1", "rank2"]
        (logdir / "job" / "evil.pickle").unlink()
        plugin.store.rescan()
        ranks = wait_route(client, f"{PREFIX}/snapshot_ranks?run=job").get_json()
        assert sorted({row[0] for row in ranks["ranks"]["rows"]}) == ["rank0", "rank1", "rank2"]
        assert ranks["missing"]["rows"] == [] and ranks["coverage"]["rows"][0][:2] == [3, 3]
        side = tb_plugin.load_run(logdir / "job").answer("snapshot_ranks").ranks  # the Python entrance, as HTTP answers
        assert side.columns.tolist() == ranks["ranks"]["columns"]
        assert side.astype(object).where(side.notna(), None).to_numpy().tolist() == ranks["ranks"]["rows"]
        bad = client.get(f"{PREFIX}/snapshot_state?run=job&snapshot=rank0&device=7")
        assert bad.status_code == 404 and "has no device 7" in bad.get_json()["reason"]
        bad = client.get(f"{PREFIX}/snapshot_state?run=job&snapshot=rank0&device=0&entry=100000")
        assert bad.status_code == 400
    finally:
        plugin.store.stop()


def test_snapshot_ranks_leaves_out_a_snapshot_that_cannot_be_read(tmp_path, allocators, snapshot):
    """Two good snapshots and one cut in the middle (as a crashed job leaves it): the two are
    compared, the third named with its reason, over HTTP and in Python alike; a run of bad
    snapshots alone is refused with the first one's reason."""
    good = pickle.dumps(snapshot, protocol=4)
    logdir = tmp_path / "logs"
    (logdir / "job").mkdir(parents=True)
    (logdir / "job" / "rank0.pickle").write_bytes(good)
    (logdir / "job" / "rank1.pickle").write_bytes(good[: len(good) // 2])
    (logdir / "job" / "rank2.pickle").write_bytes(good)
    (logdir / "bad").mkdir()
    (logdir / "bad" / "rank0.pickle").write_bytes(good[:100])
    (logdir / "bad" / "rank1.pickle").write_bytes(pickle.dumps({"segments": [_Payload(tmp_path / "ran")]}))
    plugin, client = make_client(logdir)
    try:
        reply = wait_route(client, f"{PREFIX}/snapshot_ranks?run=job")
        assert reply.status_code == 200
        answer = reply.get_json()
        ranks = pd.DataFrame(answer["ranks"]["rows"], columns=answer["ranks"]["columns"])
        # both good snapshots, each device with the replayed allocator's own peak
        assert sorted(set(ranks["snapshot"])) == ["rank0", "rank2"] and len(ranks) == 2 * len(allocators)
        for a in allocators:
            assert set(ranks.loc[ranks["device"] == a.device, "peak_allocated_bytes"]) == {_truth(a)[0].max()}
        (name, reason), = answer["missing"]["rows"]
        assert name == "rank1" and "truncated" in reason and str(tmp_path) not in reason
        (loaded, total, text), = answer["coverage"]["rows"]
        assert (loaded, total) == (2, 3)
        assert text.startswith("Covers 2 of 3 memory snapshots") and f"rank1 — {reason}" in text
        csv = wait_route(client, f"{PREFIX}/snapshot_ranks?run=job&table=missing&format=csv").get_data(as_text=True)
        assert csv.splitlines()[0] == "snapshot,reason" and csv.splitlines()[1].startswith("rank1,")
        # the Python entrance answers the same
        side = tb_plugin.load_run(logdir / "job").answer("snapshot_ranks")
        for table in ("ranks", "coverage", "missing"):
            frame = getattr(side, table)
            assert frame.columns.tolist() == answer[table]["columns"]
            assert frame.astype(object).where(frame.notna(), None).to_numpy().tolist() == answer[table]["rows"]
        # none can be read: refused with the first one's reason, over HTTP and in Python
        bad = wait_route(client, f"{PREFIX}/snapshot_ranks?run=bad")
        assert bad.status_code == 422 and bad.get_json()["path"] == "bad/rank0.pickle"
        assert "truncated" in bad.get_json()["reason"]
        with pytest.raises(TraceError, match="truncated"):
            tb_plugin.load_run(logdir / "bad").answer("snapshot_ranks")
        assert not (tmp_path / "ran").exists()
    finally:
        plugin.store.stop()


def test_beside_the_trace_of_the_same_rank(tmp_path, allocators, snapshot):
    """A Kineto trace of rank0 recorded while the snapshot's trace ran: one time axis (the
    trace's epoch-us origin), the overlap, and each one's peak in it."""
    a = allocators[0]
    times = [e["time_us"] for e in a.entries[a.drop_first:]]
    start = times[50]
    # the trace's allocator records: (time, total allocated); the last one after the snapshot's end
    records = [(start, 1000), (start + 30, 9000), (times[-1] - 5, 4000), (times[-1] + 500, 50_000)]
    events = [op("ProfilerStep#1", start - 10, times[-1] + 600 - start)]
    events += [memory(t, 512, 4096 + i, total, 1 << 30) for i, (t, total) in enumerate(records)]
    run = tmp_path / "logs" / "job"
    write_trace(run / "rank0.pt.trace.json", events)
    (run / "rank0.pickle").write_bytes(pickle.dumps(snapshot))
    plugin, client = make_client(tmp_path / "logs")
    try:
        table = wait_route(client, f"{PREFIX}/snapshot_trace?run=job&snapshot=rank0")
        assert table.status_code == 200, table.get_json()
        row, = [dict(zip(table.get_json()["columns"], r)) for r in table.get_json()["rows"]]
        assert (row["worker"], row["span"], row["device"]) == ("rank0", 1, 0)
        assert row["trace_origin_us"] == start - 10  # the earliest event of the trace
        assert (row["overlap_start_us"], row["overlap_end_us"]) == (start, times[-1])
        assert row["trace_peak_bytes"] == 9000  # 50,000 comes after the snapshot's last entry
        inside = [v for t, v in zip(times, a.allocated_after[a.drop_first:]) if start <= t <= times[-1]]
        assert row["snapshot_peak_bytes"] == max(inside)
        beside = tb_plugin.load_run(run).answer("snapshot_trace", snapshot="rank0")  # the Python entrance
        assert beside.to_dict("records") == [row]
        with pytest.raises(NotFoundError, match="give snapshot"):
            tb_plugin.load_run(run).answer("snapshot_trace")
    finally:
        plugin.store.stop()


def test_answer_is_the_python_entrance_of_every_declared_snapshot_route(snap, snapshot):
    """`MemorySnapshot.answer(route, ...)` answers a declared snapshot route as HTTP does: the
    declared defaults (the first device, library frames folded)
    and parameters by their query names (`library`, the view's `collapse_library`)."""
    alive = [b for seg in snapshot["segments"] if seg["device"] == 0 for b in seg["blocks"] if b["state"] == "active_allocated"]
    live = snap.answer("snapshot_live")
    assert len(live) == min(100, len(alive)) and list(live["size_bytes"]) == sorted(live["size_bytes"], reverse=True)
    assert len(snap.answer("snapshot_live", top=3)) == min(3, len(alive))
    expanded = snap.answer("snapshot_flame", device=1, library="expanded")
    assert expanded.equals(snap.flame(1, None, False)) and not expanded.equals(snap.answer("snapshot_flame", device=1))
    assert len(snap.answer("snapshot_timeline", device=0, bins=7).totals) == 7
    with pytest.raises(NotFoundError, match="has no device 7"):
        snap.answer("snapshot_state", device=7)
    with pytest.raises(NotFoundError, match="no route 'kernels' over a snapshot"):
        snap.answer("kernels")


def test_load_snapshot_with_a_cache_dir_reads_the_cache_the_second_time(snapshot, tmp_path, monkeypatch):
    """As `tb_plugin.load(path, cache_dir=)`: the first load decodes the pickle and stores its
    tables; the second reads them back (no decode) and answers as a load without a cache."""
    path = tmp_path / "rank0.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    decoded = []
    real = tb_plugin.python_api.snapshots.snapshot_from_bytes
    monkeypatch.setattr(tb_plugin.python_api.snapshots, "snapshot_from_bytes",
                        lambda stored, source, *a, **k: decoded.append(source) or real(stored, source, *a, **k))
    first = tb_plugin.load_snapshot(path, cache_dir=tmp_path / "cache")
    assert len(decoded) == 1 and any((tmp_path / "cache").rglob("*"))
    second = tb_plugin.load_snapshot(path, cache_dir=tmp_path / "cache")
    assert len(decoded) == 1  # read from the cache
    uncached = tb_plugin.load_snapshot(path)
    assert len(decoded) == 2
    for answer in (first, second):
        pd.testing.assert_frame_equal(answer.peak(), uncached.peak())
        pd.testing.assert_frame_equal(answer.answer("snapshot_categories"), uncached.answer("snapshot_categories"))
