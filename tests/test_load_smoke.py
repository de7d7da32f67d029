"""The load test (benchmarks/load_test.py) in small: 10 clients for 5 s on a real tensorboard.

It starts `tensorboard --logdir samples --profiler_cache_dir ''` on a free 127.0.0.1 port,
hits every route of the V100 ResNet-50 sample run from its first (loading) second on, and
stops the server by pid. Must hold: no 5xx, no connection error or timeout, no client left
hanging, the server alive at the end, and every route answered 200 once the run loaded.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

from .conftest import REPO, SAMPLES

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
    report = load_test.run_load_test(SAMPLES, "gpu_resnet50_v100", seconds=5, clients=10, timeout=30, log=lambda _: None)
    assert load_test.failed(report) == [], report["totals"]
    routes = {row["route"]: row for row in report["routes"]}
    assert len(routes) == report["urls"]  # every URL was requested
    not_served = sorted(route for route, row in routes.items() if row["2xx"] == 0)
    assert not_served == [], not_served
    assert report["loaded_after_s"] is not None
