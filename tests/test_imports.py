"""A load imports only what it needs (issue 30): `python -c "import tb_plugin;
tb_plugin.load(f).overview()"` pays for every module it imports, in every fresh process
(benchmarks/fresh_bench.py). Checked in a child process: this one has imported everything."""

import json
import subprocess
import sys

from .helpers import REPO, SAMPLES

TRACE = SAMPLES / "gpu_resnet50_v100" / "worker0.1623143089861.pt.trace.json.gz"
# The table libraries: the Python API's first use imports them, not the package.
TABLE_LIBRARIES = ("numpy", "pandas", "polars", "pyarrow", "msgspec", "tb_plugin.python_api.profile")
# What neither a load nor its Overview uses: the server's layers, object stores, the cluster,
# TensorBoard, and the views of the other pages.
NOT_FOR_A_LOAD = ("fsspec", "dask", "werkzeug", "tensorboard", "tb_plugin.server.api", "tb_plugin.server.http", "tb_plugin.server.loading", "tb_plugin.store.cache",
                  "tb_plugin.python_api.runs", "tb_plugin.views.diff", "tb_plugin.views.regression", "tb_plugin.views.distributed",
                  "tb_plugin.views.collectives", "tb_plugin.views.job", "tb_plugin.views.flops",
                  "tb_plugin.views.timeline", "tb_plugin.views.rank_timeline", "tb_plugin.views.critical_path",
                  "tb_plugin.views.kernels", "tb_plugin.views.operators", "tb_plugin.views.modules",
                  "tb_plugin.views.queues", "tb_plugin.views.lightning", "tb_plugin.views.gpu_annotations")
CHILD = f"""
import json, sys
import tb_plugin
after_import = sorted(m for m in {TABLE_LIBRARIES + NOT_FOR_A_LOAD!r} if m in sys.modules)
profile = tb_plugin.load(sys.argv[1])
overview = profile.overview()
after_load = sorted(m for m in {NOT_FOR_A_LOAD!r} if m in sys.modules)
kernels = len(profile.kernels())  # a deferred view still answers, importing its module then
print(json.dumps([after_import, after_load, len(overview["steps"]), kernels, "tb_plugin.views.kernels" in sys.modules]))
"""


def test_import_and_a_load_with_its_overview_import_only_what_they_use():
    done = subprocess.run([sys.executable, "-c", CHILD, str(TRACE)], capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    after_import, after_load, steps, kernels, kernels_imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert after_import == []
    assert after_load == []
    assert steps > 0 and kernels > 0 and kernels_imported
