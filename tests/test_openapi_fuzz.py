"""Schemathesis against `tb_plugin/openapi.yaml`, the plugin served in-process.

The plugin runs inside TensorBoard's own WSGI app over a log directory holding copies of the
CPU CNN, the 2-rank gloo DDP and the V100 ResNet-50 samples (no disk cache). Every profile is
loaded before fuzzing starts, so generated requests reach the 200 answers, not only the 202s.

Schemathesis generates requests for every operation of the spec, valid and invalid (wrong
types, missing and out-of-range values); run, worker, device, operator and table names are
drawn from the real ones half of the time (schemathesis parameter dictionaries), so the views
are computed, not only refused. For each answer it checks: never a 5xx, the status code is one
the spec documents for the route, the content type is one the spec documents, the body
matches the response schema, and invalid requests are refused with a 4xx.

Bounded and reproducible: a fixed seed and example count per operation
(`TB_PLUGIN_FUZZ_SEED`, `TB_PLUGIN_FUZZ_EXAMPLES` change them for a longer hunt).
"""

import os
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance, negative_data_rejection,
                                               response_schema_conformance, status_code_conformance)

import tb_plugin
from tb_plugin import openapi_gen

from .conftest import SAMPLES, kernel, memory, op, runtime, write_trace
from .test_api import PREFIX, make_client, wait_route

SPEC_PATH = Path(tb_plugin.__file__).parent / "openapi.yaml"
EXAMPLES = int(os.environ.get("TB_PLUGIN_FUZZ_EXAMPLES", "40"))
SEED = int(os.environ.get("TB_PLUGIN_FUZZ_SEED", "20240601"))

RUNS = {"cpu_cnn": ["worker0"], "ddp": ["worker0", "worker1"], "resnet": ["worker0"], "plain": ["worker0"]}
SNAPSHOT_RUNS = {"snapshots": ["rank0", "rank1"]}  # runs of memory snapshots (samples/gpu_memory_snapshot)
KNOWN = {
    "snapshots": ["rank0", "rank1", "nobody"],
    "runs": list(RUNS) + list(SNAPSHOT_RUNS) + [".", "nope"],
    "workers": ["worker0", "worker1", "nobody"],
    "devices": ["CPU", "GPU0", "GPU9"],
    "operators": ["aten::conv2d", "aten::cudnn_convolution", "aten::addmm", "aten::relu_"],
    "shapes": ["[[32, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], [], [], []]", "[]"],
    "spans": [1, 2],
    "times": [0, 1500.5, 100000, 5e6],
    "resolutions": [0.5, 100, 10000],
    "events": [0, 1, 7, 1000],
    "tracks": ["0", "0,1", "1,2,3"],
    "queries": ["aten", "conv", "Memcpy", "ProfilerStep"],
}
CONFIG = schemathesis.Config.from_dict({
    "seed": SEED,
    "suppress-health-check": ["all"],
    "dictionaries": {name: {"values": values} for name, values in KNOWN.items()},
    "parameters": {
        "query.run": {"dictionary": "runs", "probability": 0.8},
        "query.run_b": {"dictionary": "runs", "probability": 0.6},
        "query.worker": {"dictionary": "workers", "probability": 0.8},
        "query.snapshot": {"dictionary": "snapshots", "probability": 0.8},
        "query.worker_b": {"dictionary": "workers", "probability": 0.6},
        "query.device": {"dictionary": "devices", "probability": 0.5},
        "query.name": {"dictionary": "operators", "probability": 0.5},
        "query.input_shape": {"dictionary": "shapes", "probability": 0.3},
        "query.span": {"dictionary": "spans", "probability": 0.7},
        "query.span_b": {"dictionary": "spans", "probability": 0.7},
        "query.start_us": {"dictionary": "times", "probability": 0.5},
        "query.end_us": {"dictionary": "times", "probability": 0.5},
        "query.after_us": {"dictionary": "times", "probability": 0.5},
        "query.resolution_us": {"dictionary": "resolutions", "probability": 0.5},
        "query.event": {"dictionary": "events", "probability": 0.5},
        "query.tracks": {"dictionary": "tracks", "probability": 0.5},
        "query.q": {"dictionary": "queries", "probability": 0.5},
    },
    "generation": {"max-examples": EXAMPLES, "deterministic": False, "database": "none"},
})



def without_tuples(node):
    """The spec with each `prefixItems` tuple (a table row: one type per column, in order)
    loosened to an array of the same length whose items are any of those types.

    schemathesis 4.32 rewrites `prefixItems` into a draft-7 `items` list, which its own
    OpenAPI 3.1 (draft 2020-12) response validator then refuses as an invalid schema
    (schemathesis/schemathesis#3842). The columns stay exact (`const`); the type of each
    position is checked against the table declarations by tests/test_table_conformance.py.
    """
    if isinstance(node, list):
        return [without_tuples(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: without_tuples(value) for key, value in node.items() if key != "prefixItems"}
    if "prefixItems" in node:
        cells = node["prefixItems"]
        out.update(items={"anyOf": without_tuples(cells)}, minItems=len(cells), maxItems=len(cells))
    return out


schema = schemathesis.openapi.from_dict(without_tuples(yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))),
                                        config=CONFIG)
SPEC = schema.raw_schema

# Valid values of every query parameter, for requests that must reach the views.
VALID = {"run": "cpu_cnn", "worker": "worker0", "span": "1", "run_b": "cpu_cnn", "worker_b": "worker0", "span_b": "1",
         "name": "aten::conv2d", "device": "CPU", "start_us": "0", "end_us": "1000000", "resolution_us": "100",
         "event": "0", "q": "aten", "tracks": "0", "points": "10", "limit": "10", "max_points": "100",
         "format": "json", "group_by": "name", "after_us": "0", "direction": "next", "snapshot": "rank0",
         # a declared route's parameters: from their declarations (`schema.route`), but for
         # those the profile decides (the memory device, given above)
         **{p.name: value for r in openapi_gen.declared_routes().values() for p in r.params
            if (value := p.valid_value()) is not None}}
VALID_FOR_ROUTE = {("/tables", "table"): "ops", ("/distributed", "run"): "ddp",
                   # memory snapshots' routes: the run of samples/gpu_memory_snapshot, copied as "snapshots"
                   **{(path, "run"): next(iter(SNAPSHOT_RUNS)) for path in SPEC["paths"] if path.startswith("/snapshot_")}}


def route_parameters(path):
    """[(name, required)] of one route, from the spec."""
    shared = SPEC["components"]["parameters"]
    out = []
    for p in SPEC["paths"][path]["get"].get("parameters", []):
        p = shared[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p
        out.append((p["name"], bool(p.get("required"))))
    return out


def csv_table(path):
    """{"table": NAME} for a route made of several tables (its CSV is one of them: the first
    the spec lists), else {}."""
    shared = SPEC["components"]["parameters"]
    for p in SPEC["paths"][path]["get"].get("parameters", []):
        p = shared[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p
        if p["name"] == "table" and not p.get("required") and p.get("schema", {}).get("enum"):
            return {"table": p["schema"]["enum"][0]}
    return {}


def valid_query(path, skip=None):
    """The query string of a valid request to `path` (required parameters only), minus `skip`."""
    parts = []
    for name, required in route_parameters(path):
        if name == skip or not (required or name in ("span",)):
            continue
        parts.append(f"{name}={quote(VALID_FOR_ROUTE.get((path, name), VALID.get(name, '')), safe='')}")
    return "&".join(parts)


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """TensorBoard's WSGI app with the plugin, every profile of the log directory loaded."""
    root = tmp_path_factory.mktemp("fuzz_logdir")
    shutil.copytree(SAMPLES / "cpu_cnn", root / "cpu_cnn")
    shutil.copytree(SAMPLES / "cpu_ddp_gloo", root / "ddp")
    shutil.copytree(SAMPLES / "gpu_resnet50_v100", root / "resnet")
    shutil.copytree(SAMPLES / "gpu_memory_snapshot", root / "snapshots")
    # an uncompressed trace too, as tensorboard_trace_handler(use_gzip=False) writes them
    events = [op("ProfilerStep#1", 0, 100, cat="user_annotation"), op("aten::conv2d", 10, 50, **{"External id": 1}),
              runtime("cudaLaunchKernel", 20, 5, correlation=1, external_id=1), kernel("volta_sgemm_128x64_nn", 30, 40, 1),
              memory(15, 512, 4096, 512, 2048), memory(55, -512, 4096, 0, 2048)]
    write_trace(root / "plain" / "worker0.pt.trace.json", events)
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    for run, workers in RUNS.items():
        for worker in workers:
            for span in (1, 2):
                status = wait_route(client, f"{PREFIX}/info?run={run}&worker={worker}&span={span}", timeout=120).status_code
                assert status in (200, 404), (run, worker, span, status)  # 404: a run with one span
    assert wait_route(client, f"{PREFIX}/distributed?run=ddp&span=2").status_code == 200
    assert wait_route(client, f"{PREFIX}/snapshot_ranks?run=snapshots").status_code == 200
    yield client.application
    plugin.store.stop()


# Replies are gzipped for a client that accepts it (tests/test_api.py checks that); schemathesis'
# WSGI transport says it accepts gzip but does not inflate, so these ask for the plain bytes.
PLAIN = {"Accept-Encoding": "identity"}


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_no_server_error_and_answers_match_the_spec(app, case):
    response = case.call(app=app, headers=PLAIN)
    case.validate_response(response, checks=CHECKS)
    assert response.status_code != 202, "fuzzing must see loaded profiles"


def _known_good_queries(path):
    """Valid queries of one route for the first worker of every run, JSON and CSV."""
    params = dict(route_parameters(path))
    if "snapshot" in params or path == "/snapshot_ranks":
        for run, snapshots in SNAPSHOT_RUNS.items():
            for name in snapshots:
                query = {"run": run, **({"snapshot": name} if "snapshot" in params else {})}
                yield query
                yield {**query, "format": "csv", **csv_table(path)}
        return
    for run, workers in RUNS.items():
        query = {name: VALID_FOR_ROUTE.get((path, name), VALID.get(name, "")) for name, required in params.items() if required}
        query.update({k: v for k, v in (("run", run), ("worker", workers[0]), ("run_b", run), ("worker_b", workers[0]))
                      if k in params})
        if path == "/memory_curve" or path == "/memory_events" or path == "/memory_stats":
            query.pop("device", None)  # the first device of the trace
        yield query
        if "format" in params:
            yield {**query, "format": "csv", **csv_table(path)}


@pytest.mark.parametrize("path", sorted(schema.raw_schema["paths"]))
def test_known_good_requests_match_the_spec(app, path):
    """Deterministic complement of the fuzzing: valid requests on every run (gzip and plain
    JSON files, CPU, GPU and 2-worker) answer 200 or a documented 4xx, and conform."""
    operation = schema[path]["GET"]
    statuses = []
    for query in _known_good_queries(path):
        case = operation.Case(query=query)
        response = case.call(app=app, headers=PLAIN)
        operation.validate_response(response)
        assert response.status_code < 500, (query, response.status_code)
        statuses.append(response.status_code)
    assert 200 in statuses, statuses
