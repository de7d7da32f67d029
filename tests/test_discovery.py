"""Run, worker and span naming, and scans of a log directory."""

import os

import pytest

from tb_plugin.store.discovery import SNIFF_BYTES, Skipped, discover_runs, parse_trace_file_name
from tb_plugin.store.storage import MAX_SCAN_DEPTH, Storage

from .helpers import PREFIX, deep_directory, make_client, op, write_trace


@pytest.mark.parametrize("name, expected", [
    ("worker0.pt.trace.json", ("worker0", None)),
    ("worker0.pt.trace.json.gz", ("worker0", None)),
    ("worker0.1623143089861.pt.trace.json.gz", ("worker0", 1623143089861)),
    ("host.example.com_1234.1700000000000000000.pt.trace.json", ("host.example.com_1234", 1700000000000000000)),
    ("rank-3.pt.trace.json", ("rank-3", None)),
    ("worker0.pt.trace.json.tmp", None),
    ("events.out.tfevents.123", None),
])
def test_parse_trace_file_name(name, expected):
    assert parse_trace_file_name(name) == expected


def test_spans_ordered_numerically_and_numbered_from_one(tmp_path):
    for stamp in ("10", "9", "100"):
        write_trace(tmp_path / "run" / f"w.{stamp}.pt.trace.json", [op("a", 0, 1)])
    write_trace(tmp_path / "run" / "v.pt.trace.json", [op("a", 0, 1)])
    runs = discover_runs(Storage(tmp_path))
    spans = runs["run"].workers["w"]
    assert [(s.span, s.stamp) for s in spans] == [(1, 9), (2, 10), (3, 100)]
    assert [s.span for s in runs["run"].workers["v"]] == [1]
    assert spans[0].path == "run/w.9.pt.trace.json"


def test_nested_runs_root_run_and_plain_json(tmp_path):
    write_trace(tmp_path / "w.pt.trace.json", [op("a", 0, 1)])
    write_trace(tmp_path / "a" / "b" / "x.pt.trace.json.gz", [op("a", 0, 1)], gz=True)
    write_trace(tmp_path / "plain" / "trace_rank0.json", [op("a", 0, 1)])
    (tmp_path / "plain" / "config.json").write_text('{"lr": 0.1}')
    (tmp_path / "plain" / "list.json").write_text('[1, 2, 3]')
    runs = discover_runs(Storage(tmp_path))
    assert list(runs) == [".", "a/b", "plain"]
    assert list(runs["plain"].workers) == ["trace_rank0"]


def test_symlink_loops_end(tmp_path):
    write_trace(tmp_path / "run" / "w.pt.trace.json", [op("a", 0, 1)])
    os.symlink(tmp_path, tmp_path / "run" / "loop")
    runs = discover_runs(Storage(tmp_path))
    assert list(runs) == ["run"]


def test_symlinked_run_directory_is_followed(tmp_path):
    outside = tmp_path / "elsewhere"
    write_trace(outside / "w.pt.trace.json", [op("a", 0, 1)])
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    os.symlink(outside, logdir / "linked")
    assert list(discover_runs(Storage(logdir))) == ["linked"]


def test_link_to_a_run_inside_the_logdir_does_not_rename_it(tmp_path):
    # Each real directory is walked once, and "alias" sorts before "run": the run used to be
    # listed only as "alias", its real name gone. Links into the logdir are not followed.
    write_trace(tmp_path / "run" / "w.pt.trace.json", [op("a", 0, 1)])
    os.symlink(tmp_path / "run", tmp_path / "alias")
    os.symlink("../run", tmp_path / "run" / "self")
    outside = tmp_path.parent / (tmp_path.name + "_outside")
    write_trace(outside / "w.pt.trace.json", [op("a", 0, 1)])
    os.symlink(tmp_path / "run", outside / "back")  # a linked run linking back into the logdir
    os.symlink(outside, tmp_path / "linked")
    runs = discover_runs(Storage(tmp_path))
    assert list(runs) == ["linked", "run"]
    assert runs["run"].workers["w"][0].path == "run/w.pt.trace.json"


WINDOWS_ONLY = pytest.mark.skipif(os.name != "nt", reason="a drive or a backslash is part of a name elsewhere")


@pytest.mark.parametrize("rel", ["..", "../x", "a/../../x", "/etc/passwd", "a/./../..",
                                 pytest.param("C:/x", marks=WINDOWS_ONLY), pytest.param("a\\..\\..\\x", marks=WINDOWS_ONLY)])
def test_storage_refuses_paths_leaving_the_root(tmp_path, rel):
    from tb_plugin.errors import PathOutsideLogdirError
    with pytest.raises(PathOutsideLogdirError):
        Storage(tmp_path).resolve(rel)


@pytest.mark.skipif(os.name == "nt", reason="POSIX names")
@pytest.mark.parametrize("rel", ["C:/x", "a\\..\\..\\x", "\\", "run/w\\x.pt.trace.json"])
def test_backslashes_and_colons_are_characters_of_posix_names(tmp_path, rel):
    assert Storage(tmp_path).resolve(rel) == os.path.join(str(tmp_path), *rel.split("/"))


def test_plain_json_sniffed_again_when_it_grows(tmp_path):
    plain = tmp_path / "run" / "t.json"
    plain.parent.mkdir()
    plain.write_text("")  # still being written
    cache = {}
    assert discover_runs(Storage(tmp_path), cache) == {}
    write_trace(plain, [op("a", 0, 1)])
    assert list(discover_runs(Storage(tmp_path), cache)) == ["run"]


def test_plain_json_trace_with_a_long_header_is_a_run(tmp_path):
    # Kineto writes distributedInfo before traceEvents: for a gloo rank of a 300-rank job with
    # ten process groups (../shared/traces/cpu_only_gloo) that is ~17 KB, past the 4 KB that
    # used to be sniffed, and such a trace saved as plain .json was not found. Larger jobs
    # push "traceEvents" past any head read: the header itself must be recognised.
    groups = [{"pg_name": str(i), "pg_size": 1000, "ranks": list(range(1000))} for i in range(16)]
    path = write_trace(tmp_path / "gloo" / "rank34.json", [op("a", 0, 1)],
                       deviceProperties=[], distributedInfo={"backend": "gloo", "rank": 34, "pg_config": groups})
    assert path.read_bytes().find(b'"traceEvents"') > SNIFF_BYTES
    (tmp_path / "gloo" / "notes.json").write_text('{"schemaVersion": 1, "comment": "' + "x" * 70_000 + '"}')
    runs = discover_runs(Storage(tmp_path))
    assert list(runs) == ["gloo"]
    assert list(runs["gloo"].workers) == ["rank34"]
    assert runs["gloo"].workers["rank34"][0].path == "gloo/rank34.json"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_named_pipes_in_the_logdir_block_neither_scan_nor_load(tmp_path):
    # Opening a FIFO for reading waits for a writer: one named like a trace (or a plain .json
    # being sniffed) used to hang the scan thread or the single loader thread for good.
    import threading

    import tb_plugin

    write_trace(tmp_path / "run" / "good.pt.trace.json", [op("a", 0, 1)])
    os.mkfifo(tmp_path / "run" / "pipe.pt.trace.json")
    os.mkfifo(tmp_path / "run" / "pipe2.json")
    outcome = {}

    def scan_and_load():
        outcome["runs"] = discover_runs(Storage(tmp_path))
        with pytest.raises(tb_plugin.TraceError) as err:
            tb_plugin.load(tmp_path / "run" / "pipe.pt.trace.json")
        outcome["reason"] = err.value.reason
        outcome["ops"] = len(tb_plugin.load(tmp_path / "run" / "good.pt.trace.json").model.ops)

    worker = threading.Thread(target=scan_and_load, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "blocked on a named pipe"
    assert list(outcome["runs"]["run"].workers) == ["good", "pipe"]
    assert "not a regular file but a pipe" in outcome["reason"]
    assert outcome["ops"] == 1


def test_tensorboard_profile_plugin_traces_are_not_runs(tmp_path):
    """TensorFlow's and JAX's profilers write Chrome traces (`<host>.trace.json.gz`, holding
    "traceEvents") under plugins/profile/<session>/ for TensorBoard's own Profile tab: not
    ours. A PyTorch trace file named as the handler names it still counts, wherever it is."""
    session = tmp_path / "plugins" / "profile" / "2024_01_01_00_00_00"
    write_trace(session / "host.trace.json.gz", [op("MatMul", 0, 5)], gz=True, displayTimeUnit="ns")
    assert discover_runs(Storage(str(tmp_path))) == {}
    write_trace(session / "worker0.pt.trace.json", [op("aten::mm", 0, 5)])
    runs = discover_runs(Storage(str(tmp_path)))
    assert list(runs) == ["plugins/profile/2024_01_01_00_00_00"]
    assert [f.path for f in runs["plugins/profile/2024_01_01_00_00_00"].files()] == [
        "plugins/profile/2024_01_01_00_00_00/worker0.pt.trace.json"]
    # the same plain file elsewhere is sniffed as a trace
    write_trace(tmp_path / "mine" / "host.trace.json.gz", [op("aten::mm", 0, 5)], gz=True)
    assert "mine" in discover_runs(Storage(str(tmp_path)))


def test_a_tree_deeper_than_the_recursion_limit_is_reported_and_the_rest_discovered(tmp_path):
    """A directory nested ~1,400 levels took the whole scan down ("maximum recursion depth
    exceeded"): no runs at all. The walk keeps its own stack and stops descending at
    MAX_SCAN_DEPTH, saying where; runs beside it, and above the bound inside it, are found."""
    write_trace(tmp_path / "a_run" / "w.pt.trace.json", [op("a", 0, 1)])
    write_trace(tmp_path / "z_run" / "w.pt.trace.json", [op("a", 0, 1)])
    with deep_directory(tmp_path, 1400) as top:
        within = top.joinpath(*["d"] * (MAX_SCAN_DEPTH - 2))  # MAX_SCAN_DEPTH - 1 levels: scanned
        write_trace(within / "w.pt.trace.json", [op("a", 0, 1)])
        skipped = []
        runs = discover_runs(Storage(tmp_path), skipped=skipped)
    deepest = "/".join(["d"] * (MAX_SCAN_DEPTH - 1))
    assert list(runs) == ["a_run", deepest, "z_run"]
    assert skipped == [Skipped("/".join(["d"] * (MAX_SCAN_DEPTH + 1)),
                               f"more than {MAX_SCAN_DEPTH} levels below the log directory: not scanned")]


def _refuse_listing(monkeypatch, refused):
    """Listing `refused` raises PermissionError, as a chmod 000 directory does for a user
    other than root (tests run as root, whom chmod does not stop)."""
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path) == os.fspath(refused):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_an_unreadable_run_directory_is_reported_and_the_others_found(tmp_path, monkeypatch):
    for run in ("a", "locked", "z"):
        write_trace(tmp_path / run / "w.pt.trace.json", [op("a", 0, 1)])
    write_trace(tmp_path / "locked" / "inner" / "w.pt.trace.json", [op("a", 0, 1)])
    _refuse_listing(monkeypatch, tmp_path / "locked")
    skipped = []
    assert list(discover_runs(Storage(tmp_path), skipped=skipped)) == ["a", "z"]
    assert skipped == [Skipped("locked", "cannot list the directory (Permission denied)")]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root lists a chmod 000 directory anyway; the listing error is emulated in the test above")
def test_a_chmod_000_run_directory_is_reported_and_the_others_found(tmp_path):
    for run in ("a", "locked"):
        write_trace(tmp_path / run / "w.pt.trace.json", [op("a", 0, 1)])
    os.chmod(tmp_path / "locked", 0)
    try:
        skipped = []
        assert list(discover_runs(Storage(tmp_path), skipped=skipped)) == ["a"]
        assert skipped == [Skipped("locked", "cannot list the directory (Permission denied)")]
    finally:
        os.chmod(tmp_path / "locked", 0o755)


def test_names_that_are_not_utf8_are_listed_escaped_and_open(tmp_path):
    """Linux names are bytes; Python hands those that are not UTF-8 over as lone surrogates,
    which broke every JSON reply. Runs and workers are named with the bytes escaped (\\xff),
    and the file paths keep the real name."""
    root = os.fsencode(tmp_path)
    write_trace(os.fsdecode(root + b"/caf\xe9/w.pt.trace.json"), [op("a", 0, 1)])  # Latin-1 "café"
    write_trace(os.fsdecode(root + b"/run/rank\xff.pt.trace.json"), [op("a", 0, 1)])
    runs = discover_runs(Storage(tmp_path))
    assert list(runs) == ["caf\\xe9", "run"]
    assert list(runs["run"].workers) == ["rank\\xff"]
    for run in runs.values():
        for span in run.files():
            assert os.path.isfile(os.path.join(root, os.fsencode(span.path)))
    assert all(name.encode("utf-8") for name in [*runs, *runs["run"].workers])  # no surrogates left


def test_names_equal_once_escaped_keep_the_first_and_report_the_other(tmp_path):
    root = os.fsencode(tmp_path)
    write_trace(os.fsdecode(root + b"/a\xff/w.pt.trace.json"), [op("a", 0, 1)])
    write_trace(tmp_path / "a\\xff" / "w.pt.trace.json", [op("a", 0, 1)])  # the escape spelled out
    skipped = []
    runs = discover_runs(Storage(tmp_path), skipped=skipped)
    assert list(runs) == ["a\\xff"]
    assert [s.path for s in skipped] == ["a\\xff"] and "also another directory's" in skipped[0].reason


def test_runs_route_reports_an_unreadable_run_directory(tmp_path, monkeypatch):
    """An unreadable run directory disappeared with no message anywhere: /runs now lists it
    under scan_errors with the reason, beside the runs that were found."""
    for run in ("a", "locked"):
        write_trace(tmp_path / run / "w.pt.trace.json", [op("a", 0, 1)])
    _refuse_listing(monkeypatch, tmp_path / "locked")
    plugin, client = make_client(tmp_path)
    try:
        body = client.get(f"{PREFIX}/runs").get_json()
        assert [r["name"] for r in body["runs"]] == ["a"]
        assert body["scan_errors"] == [{"path": "locked", "reason": "cannot list the directory (Permission denied)"}]
        assert body["scan_error"] == ""
    finally:
        plugin.store.stop()
