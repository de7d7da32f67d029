"""`preprocess --cache-dir s3://...`: Dask worker processes write the cache into an S3 bucket
(moto's server on loopback, the `s3` fixture of conftest.py), and a server over the same URL
answers the job and distributed views from it without parsing a trace."""

import shutil

import pandas as pd
import pytest

pytest.importorskip("dask.distributed", reason="preprocess runs on dask.distributed (the [dask] extra)")

import tb_plugin  # noqa: E402
from tb_plugin.python_api.runs import FILE_SUMMARIES  # noqa: E402

from .helpers import (BUCKET, PREFIX, SAMPLES, count_model_loads, count_summary_reads, forbid_parsing,  # noqa: E402
                      make_client, run_preprocess, table_frame, wait_route)

pytestmark = pytest.mark.usefixtures("fresh_s3fs")


def test_cache_on_s3_written_by_workers_and_served_without_parsing(s3, tmp_path, monkeypatch):
    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", logdir / "ddp")
    expected_job = tb_plugin.load_run(str(logdir / "ddp")).job()
    expected_steps = tb_plugin.load_run(str(logdir / "ddp")).distributed().steps
    cache = f"s3://{BUCKET}/preprocessed"
    # the workers are processes started now: they inherit the fixture's endpoint and credentials
    status, err = run_preprocess(logdir, "--dask", "local", "--workers", "1", "--cache-dir", cache)
    assert status == 0 and "done: 4 of 4 files" in err, err
    keys = s3.client.list_objects_v2(Bucket=BUCKET, Prefix="preprocessed/")["Contents"]
    # per file its model and summaries; per span of the 2 workers an index of each summary
    assert sum(k["Key"].endswith("/manifest.json") for k in keys) == 4 * (1 + len(FILE_SUMMARIES)) + 2 * len(FILE_SUMMARIES)

    forbid_parsing(monkeypatch)
    model_loads = count_model_loads(monkeypatch)
    file_reads, index_reads = count_summary_reads(monkeypatch)
    plugin, client = make_client(logdir, profiler_cache_dir=cache)
    try:
        job = wait_route(client, f"{PREFIX}/job?run=ddp").get_json()
        dist = wait_route(client, f"{PREFIX}/distributed?run=ddp").get_json()
    finally:
        plugin.store.stop()
    assert model_loads == []  # answered from the summaries alone
    assert file_reads == [] and sorted(index_reads) == ["distributed", "job"]  # one object per view
    pd.testing.assert_frame_equal(table_frame(job, "rank_steps"), expected_job.rank_steps, check_dtype=False)
    pd.testing.assert_frame_equal(table_frame(dist, "steps"), expected_steps, check_dtype=False)
