"""`preprocess --cache-dir s3://...`: Dask worker processes write the cache into an S3 bucket
(moto's server on loopback, as tests/test_s3.py starts it), and a server over the same URL
answers the job and distributed views from it without parsing a trace."""

import shutil

import pandas as pd
import pytest

pytest.importorskip("dask.distributed", reason="preprocess runs on dask.distributed (the [dask] extra)")

import tb_plugin  # noqa: E402

from .conftest import SAMPLES  # noqa: E402
from .test_api import PREFIX, make_client, wait_route  # noqa: E402
from tb_plugin.runs import FILE_SUMMARIES  # noqa: E402

from .test_preprocess import _count_model_loads, _count_summary_reads, _no_parsing, _preprocess, _table  # noqa: E402
from .test_s3 import BUCKET, _fresh_s3fs, s3  # noqa: E402,F401  (fixtures)


def test_cache_on_s3_written_by_workers_and_served_without_parsing(s3, tmp_path, monkeypatch):
    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", logdir / "ddp")
    expected_job = tb_plugin.load_run(str(logdir / "ddp")).job()
    expected_steps = tb_plugin.load_run(str(logdir / "ddp")).distributed().steps
    cache = f"s3://{BUCKET}/preprocessed"
    # the workers are processes started now: they inherit the fixture's endpoint and credentials
    status, err = _preprocess(logdir, "--dask", "local", "--workers", "1", "--cache-dir", cache)
    assert status == 0 and "done: 4 of 4 files" in err, err
    keys = s3.client.list_objects_v2(Bucket=BUCKET, Prefix="preprocessed/")["Contents"]
    # per file its model and summaries; per span of the 2 workers an index of each summary
    assert sum(k["Key"].endswith("/manifest.json") for k in keys) == 4 * (1 + len(FILE_SUMMARIES)) + 2 * len(FILE_SUMMARIES)

    _no_parsing(monkeypatch)
    model_loads = _count_model_loads(monkeypatch)
    file_reads, index_reads = _count_summary_reads(monkeypatch)
    plugin, client = make_client(logdir, profiler_cache_dir=cache)
    try:
        job = wait_route(client, f"{PREFIX}/job?run=ddp").get_json()
        dist = wait_route(client, f"{PREFIX}/distributed?run=ddp").get_json()
    finally:
        plugin.store.stop()
    assert model_loads == []  # answered from the summaries alone
    assert file_reads == [] and sorted(index_reads) == ["distributed", "job"]  # one object per view
    pd.testing.assert_frame_equal(_table(job, "rank_steps"), expected_job.rank_steps, check_dtype=False)
    pd.testing.assert_frame_equal(_table(dist, "steps"), expected_steps, check_dtype=False)
