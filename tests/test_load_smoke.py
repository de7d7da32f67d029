"""The load test (benchmarks/load_test.py) in small: 10 clients for 5 s on a real tensorboard.

It starts `tensorboard --logdir samples --profiler_cache_dir ''` on a free 127.0.0.1 port,
hits every route of the V100 ResNet-50 sample run from its first (loading) second on, then
asks every URL once more until it answers, and stops the server by pid. Must hold: no 5xx,
no connection error or timeout, no client left hanging, the server alive at the end, and
every route answering 200 once the run loaded. How fast is not asserted (that flaked on a
busy 2-core machine when the run loaded after the 5 s): latency and `not_served_in_run` are
the benchmark's report, and only the waiting is bounded here, generously.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

from .helpers import REPO, SAMPLES

TENSORBOARD = Path(sys.executable).with_name("tensorboard")


def _load_test_module():
    spec = importlib.util.spec_from_file_location("load_test", REPO / "benchmarks" / "load_test.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_load_smoke_10_clients_5_seconds():
    if not TENSORBOARD.exists():
        pytest.skip(f"no tensorboard executable beside {sys.executable}")
    load_test = _load_test_module()
    report = load_test.run_load_test(SAMPLES, "gpu_resnet50_v100", seconds=5, clients=10, timeout=120,
                                     settle_seconds=600, log=lambda _: None)
    assert load_test.failed(report) == [], report["totals"]
    assert len(report["final_statuses"]) == report["urls"]  # every URL asked after the run
    not_ok = {route: status for route, status in report["final_statuses"].items() if status != 200}
    assert not_ok == {}, not_ok
