"""Fixtures more than one test module uses; what the tests share besides fixtures is in
helpers.py."""

import logging
import os
import shutil
import time
from types import SimpleNamespace

import pytest

from .helpers import BUCKET, S3_NEEDS, S3_RUNS, SAMPLES, make_client, sample_traces, wait_ready


@pytest.fixture(scope="module")
def a100_client(tmp_path_factory):
    """A client of the plugin serving samples/gpu_a100_nccl as run `a100`, rank0 loaded."""
    if not (SAMPLES / "gpu_a100_nccl").is_dir():
        pytest.skip("samples/gpu_a100_nccl is not available")
    root = tmp_path_factory.mktemp("a100_logdir")
    shutil.copytree(SAMPLES / "gpu_a100_nccl", root / "a100")
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    assert wait_ready(client, "run=a100&worker=rank0").status_code == 200
    yield client
    plugin.store.stop()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 holding the sample runs under s3://bucket/logs/."""
    moto_server = pytest.importorskip("moto.server", reason=S3_NEEDS)
    boto3 = pytest.importorskip("boto3", reason=S3_NEEDS)
    s3fs = pytest.importorskip("s3fs", reason=S3_NEEDS)
    fsspec_config = pytest.importorskip("fsspec.config", reason=S3_NEEDS)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    werkzeug_log = logging.getLogger("werkzeug")
    old_level = werkzeug_log.level
    werkzeug_log.setLevel(logging.WARNING)  # one access-log line per request otherwise
    server.start()
    try:
        host, port = server.get_host_and_port()
        assert host == "127.0.0.1"
        endpoint = f"http://{host}:{port}"
        no_file = str(tmp_path_factory.mktemp("aws") / "absent")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AWS_ACCESS_KEY_ID", "testing")
            mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
            mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
            mp.setenv("AWS_ENDPOINT_URL", endpoint)
            # Nothing from the user's AWS/fsspec setup may redirect requests or credentials.
            for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL_S3",
                         "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_REGION"):
                mp.delenv(name, raising=False)
            mp.setenv("AWS_CONFIG_FILE", no_file)
            mp.setenv("AWS_SHARED_CREDENTIALS_FILE", no_file)
            mp.delitem(fsspec_config.conf, "s3", raising=False)
            s3fs.S3FileSystem.clear_instance_cache()

            client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
            client.create_bucket(Bucket=BUCKET)
            uploaded_at = time.time()
            local = {}  # "cnn/<file name>" -> local path
            for prefix, local_run in S3_RUNS.items():
                for path in sample_traces(local_run):
                    rel = f"{prefix}/{os.path.basename(path)}"
                    client.put_object(Bucket=BUCKET, Key=f"logs/{rel}", Body=path.read_bytes())
                    local[rel] = path
            # Outside the log directory: a sibling prefix sharing the "logs" spelling, and a file
            # at the bucket root. Neither may ever be listed or read through Storage("s3://bucket/logs").
            some_trace = sample_traces("cpu_cnn")[0]
            client.put_object(Bucket=BUCKET, Key=f"logs-old/cnn/{os.path.basename(some_trace)}",
                              Body=some_trace.read_bytes())
            client.put_object(Bucket=BUCKET, Key="secret.pt.trace.json.gz", Body=some_trace.read_bytes())
            yield SimpleNamespace(endpoint=endpoint, client=client, local=local, uploaded_at=uploaded_at)
            s3fs.S3FileSystem.clear_instance_cache()
    finally:
        server.stop()
        werkzeug_log.setLevel(old_level)


@pytest.fixture
def fresh_s3fs():
    """No cached S3FileSystem (or its listing cache) carries over from one test to the next."""
    s3fs = pytest.importorskip("s3fs", reason=S3_NEEDS)
    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()
