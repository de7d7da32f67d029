"""Many writers, one cache: the housekeeping of a process starting (or trimming) never
removes an entry another process is writing, and a write that loses its directory or a part
to another process is made again (issue 40, "Concurrent writers can lose an entry")."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import tb_plugin
from tb_plugin.store.cache import MANIFEST, ModelCache

from .helpers import SAMPLES

TRACE = sorted((SAMPLES / "cpu_cnn").glob("*.gz"))[0]


def test_an_entry_directory_just_made_by_another_writer_survives_a_start(tmp_path):
    """A writer makes the entry's directory, then renames its parts in: until the first
    rename the directory holds no file. A process starting then removed it at once (no
    manifest, no file newer than an hour), and the writer's rename failed."""
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir(mode=0o700)
    being_written = cache_dir / ModelCache.key("being written")
    being_written.mkdir(mode=0o700)
    killed_long_ago = cache_dir / ModelCache.key("killed")
    killed_long_ago.mkdir(mode=0o700)
    os.utime(killed_long_ago, (time.time() - 7200,) * 2)
    assert ModelCache(cache_dir).enabled
    assert being_written.is_dir() and not killed_long_ago.exists()


def test_a_trim_leaves_another_writers_entry_in_progress(tmp_path):
    """An entry without a manifest sorted first among the least recently used: a trim in
    one process removed another's entry as it was written."""
    model = tb_plugin.load(TRACE).model
    cache_dir = tmp_path / "cache"
    cache = ModelCache(cache_dir, max_bytes=1)
    being_written = cache_dir / ModelCache.key("being written")
    assert cache.enabled
    being_written.mkdir(mode=0o700)
    (being_written / "table-ops-000000000000000000000000.arrow").write_bytes(b"x" * 1000)
    assert cache.put(ModelCache.key("a"), {"size": 1}, model)
    assert being_written.is_dir() and len(list(being_written.iterdir())) == 1


def test_a_write_whose_directory_goes_midway_is_made_again(tmp_path, monkeypatch):
    """Another process's housekeeping removes the entry's directory between two parts: the
    rename of the next part failed with "No such file or directory" and the entry was lost."""
    model = tb_plugin.load(TRACE).model
    cache = ModelCache(tmp_path / "cache")
    key = ModelCache.key("x")
    real_write, removed = ModelCache._write, []

    def write_then_lose_the_directory(self, path, data):
        if not removed:
            removed.append(path)
            shutil.rmtree(self._path(key))
        real_write(self, path, data)

    monkeypatch.setattr(ModelCache, "_write", write_then_lose_the_directory)
    assert cache.put(key, {"size": 1}, model) is True
    assert removed and len(cache.get(key, {"size": 1}).ops) == len(model.ops)


def test_a_part_removed_before_the_manifest_is_written_again(tmp_path, monkeypatch):
    """A part removed by another process after it was renamed in, before the manifest: the
    manifest named a missing part and the entry was never read."""
    model = tb_plugin.load(TRACE).model
    cache = ModelCache(tmp_path / "cache")
    key = ModelCache.key("x")
    real_write, removed = ModelCache._write, []

    def lose_a_part_at_the_manifest(self, path, data):
        if os.path.basename(path) == MANIFEST and not removed:
            part = next(p for p in Path(self._path(key)).iterdir())
            part.unlink()
            removed.append(part)
        real_write(self, path, data)

    monkeypatch.setattr(ModelCache, "_write", lose_a_part_at_the_manifest)
    assert cache.put(key, {"size": 1}, model) is True
    assert removed and removed[0].is_file() and len(cache.get(key, {"size": 1}).ops) == len(model.ops)


# Each process: starts its own caches again and again (each start runs the housekeeping)
# while it writes entries of its own, then reads every one back.
_WRITER = """
import sys, tb_plugin
from tb_plugin.store.cache import ModelCache
cache_dir, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = tb_plugin.load(sys.argv[4]).model
failed = [i for i in range(count)
          if not ModelCache(cache_dir).put(ModelCache.key(f"{name}-{i}"), {"size": i}, model)]
lost = [i for i in range(count) if ModelCache(cache_dir).get(ModelCache.key(f"{name}-{i}"), {"size": i}) is None]
print(f"{name}: failed {failed} lost {lost}")
sys.exit(1 if failed or lost else 0)
"""
# A TensorBoard-like reader: a store started on the log directory with the cache, loading
# the trace (and writing its entry) while the others write.
_READER = """
import sys
from tb_plugin.store.cache import ModelCache
from tb_plugin.server.loading import RunStore
for _ in range(int(sys.argv[3])):
    store = RunStore(sys.argv[1], cache=ModelCache(sys.argv[2]), rescan_seconds=3600)
    store.start()
    assert store.profile_blocking("cnn", "worker0", 1, timeout=120) is not None
    store.stop()
"""
# A notebook: `load_run(cache_dir=...)` of the same run.
_NOTEBOOK = """
import sys, tb_plugin
for _ in range(int(sys.argv[3])):
    run = tb_plugin.load_run(sys.argv[1], cache_dir=sys.argv[2])
    assert run.profile(run.workers[0], 2) is not None and run.job(1) is not None
"""


def test_many_processes_writing_and_starting_against_one_cache_lose_nothing(tmp_path):
    """Writers, `preprocess` workers, a TensorBoard-like store and a notebook's `load_run`
    start and write against one cache at once: every write succeeds and reads back whole,
    and the trace files' entries are all there at the end."""
    from tb_plugin.python_api.preprocess import entry_keys, preprocess_file
    from tb_plugin.store.storage import Storage

    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "cpu_cnn", logdir / "cnn")
    cache_dir = str(tmp_path / "cache")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    preprocessing = ("import sys; from tb_plugin.python_api.preprocess import preprocess_file\n"
                     "r = preprocess_file(sys.argv[1], sys.argv[2], sys.argv[3], force=True)\n"
                     "print(r); sys.exit(1 if r['error'] else 0)")
    rels = sorted(f"cnn/{p.name}" for p in (logdir / "cnn").iterdir())
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, cache_dir, f"w{n}", "12", str(TRACE)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for n in range(3)]
    procs += [subprocess.Popen([sys.executable, "-c", preprocessing, str(logdir), rel, cache_dir], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rel in rels]
    procs += [subprocess.Popen([sys.executable, "-c", script, directory, cache_dir, "3"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for script, directory in ((_READER, str(logdir)), (_NOTEBOOK, str(logdir / "cnn")))]
    outputs = [p.communicate(timeout=300)[0][-2000:] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), list(zip([p.returncode for p in procs], outputs))
    cache, storage = ModelCache(cache_dir), Storage(str(logdir))
    for rel in rels:
        for key, entry_format in entry_keys(cache, storage.display(rel)).values():
            assert cache.manifest(key, storage.identity(rel), entry_format) is not None, rel
    assert preprocess_file(str(logdir), rels[0], cache_dir)["up_to_date"] is True
