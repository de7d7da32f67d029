"""Every table is declared once, and every answer is what its declaration says.

- The trace model's tables of every sample trace have exactly the declared columns and
  dtypes (`trace/tables.py`).
- Every route's answer on every sample run, through the real API (the plugin in
  TensorBoard's WSGI app, werkzeug's test client), holds only tables the route's OpenAPI
  response names, each with exactly the declared columns in order and, per cell, the JSON
  type of the column's dtype (null only where the column is declared nullable). Routes with
  a `group_by`, `table` or `by_step` choice are asked for each value, so every table a route names is
  seen.
- `openapi.yaml`'s table components, the declared routes' paths and `routes.py`'s route table
  are what the generator writes from the declarations, and drift from a changed one.
- A view's docstring lists its declared columns (`help(view)` is true).
- The per-file summaries the disk cache keeps (`schema.Persisted`), built from every sample
  trace and snapshot, have exactly their declared columns, dtypes and scalar types.
"""

import dataclasses
import itertools
import re
import shutil
from urllib.parse import urlencode

import pandas as pd
import pytest

import tb_plugin
from tb_plugin import openapi_gen, schema
from tb_plugin.server.api import Api
from tb_plugin.python_api.snapshots import load_snapshot
from tb_plugin.python_api.runs import FILE_SUMMARIES
from tb_plugin.snapshot.model import to_parts
from tb_plugin.server.routes import DECLARED_ROUTES, HANDWRITTEN_ROUTES
from tb_plugin.trace.tables import MODEL_TABLES
from tb_plugin.views import diff, kernels, operators
from tb_plugin.views.memory_snapshot import SNAPSHOT_PARTS

from .helpers import PREFIX, REPO, SAMPLES, SPEC, VALID, make_client, route_parameters, wait_route

# Parameters whose value chooses which declared table a route answers with.
TABLE_CHOICES = ("group_by", "table", "by_step")

TABLES = openapi_gen.declared_tables()
BY_COMPONENT = {openapi_gen.component_name(name): table for name, table in TABLES.items()}
SAMPLE_FILES = sorted(SAMPLES.glob("*/*.pt.trace.json.gz"))
SNAPSHOT_RUN = "gpu_memory_snapshot"  # memory snapshots, answered by the snapshot_* routes
# Declared for the Python API and docs, served only in another form.
NOT_SERVED: dict[str, str] = {}  # declared tables no route answers with, and why
JSON_TYPES = {"integer": (int,), "number": (int, float), "boolean": (bool,), "string": (str,)}


def route_tables(path):
    """The declared tables a route's 200 JSON answer refers to, from openapi.yaml, also
    through the hand-written components it refers to (a declared route's `reply`)."""
    content = SPEC["paths"][path]["get"]["responses"]["200"].get("content", {})
    found, seen = [], set()

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            name = ref.rsplit("/", 1)[-1]
            if name in BY_COMPONENT:
                found.append(BY_COMPONENT[name])
            elif ref.startswith("#/components/schemas/") and name not in seen:
                seen.add(name)
                walk(SPEC["components"]["schemas"][name])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(content.get("application/json", {}))
    return {t.name: t for t in found}


TABLE_ROUTES = {path: tables for path in SPEC["paths"] if (tables := route_tables(path))}


def answered_tables(body):
    """Every {columns, rows} object in an answer, wherever it sits."""
    if isinstance(body, dict):
        if set(body) == {"columns", "rows"}:
            yield body
            return
        for value in body.values():
            yield from answered_tables(value)


def problems(table, answer):
    """What in `answer` ({columns, rows}) differs from the declaration `table`; [] if nothing."""
    if answer["columns"] != table.names:
        return [f"columns {answer['columns']} != declared {table.names}"]
    found = []
    for column, i in zip(table.columns, itertools.count()):
        kinds = JSON_TYPES[column.json_type]
        for row in answer["rows"]:
            value = row[i]
            ok = (value is None and column.nullable) or (
                isinstance(value, kinds) and (column.json_type == "boolean" or not isinstance(value, bool)))
            if not ok:
                found.append(f"{column.name}: {value!r} is not {column.json_type}{' or null' if column.nullable else ''}")
                break
    return found + [f"a row of {len(r)} cells" for r in answer["rows"] if len(r) != len(table.columns)][:1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Every sample run in one log directory, every profile loaded."""
    root = tmp_path_factory.mktemp("samples")
    runs = {}
    for folder in sorted({f.parent for f in SAMPLE_FILES}):
        shutil.copytree(folder, root / folder.name)
        workers = sorted({f.name.split(".", 1)[0] for f in folder.glob("*.pt.trace.json.gz")})
        spans = {w: len(list(folder.glob(f"{w}.*pt.trace.json.gz"))) for w in workers}
        runs[folder.name] = spans
    shutil.copytree(SAMPLES / SNAPSHOT_RUN, root / SNAPSHOT_RUN)
    plugin, client = make_client(root)
    plugin.store.wait_for_scan(30)
    for run, spans in runs.items():
        for worker, count in spans.items():
            for span in range(1, count + 1):
                assert wait_route(client, f"{PREFIX}/info?run={run}&worker={worker}&span={span}",
                                  timeout=180).status_code == 200
    yield client, runs
    plugin.store.stop()


def queries(path, client, runs):
    """Valid queries of `path` on every sample run, worker and span (and memory device),
    once per value of each choice between tables (`group_by`, `table`)."""
    params = dict(route_parameters(path))
    choices = {}
    for p in SPEC["paths"][path]["get"].get("parameters", []):
        if "$ref" not in p and p["name"] in TABLE_CHOICES:
            choices[p["name"]] = p["schema"]["enum"]
    if path.startswith("/snapshot_"):
        yield from snapshot_queries(params, choices, client)
        return
    b_run = next(iter(runs))
    for run, spans in runs.items():
        for worker, count in spans.items():
            for span in range(1, count + 1):
                base = {name: VALID[name] for name, required in params.items() if required and name in VALID}
                # a route comparing two runs rank by rank (no worker_b) needs runs sharing
                # workers: the run with itself
                other = b_run if "worker_b" in params else run
                base.update({k: v for k, v in (("run", run), ("worker", worker), ("span", span), ("run_b", other),
                                                ("worker_b", next(iter(runs[b_run])))) if k in params})
                devices = [None]
                if "device" in params:
                    devices = client.get(f"{PREFIX}/memory_devices?run={run}&worker={worker}&span={span}"
                                         ).get_json()["devices"]
                names = list(choices)
                for device, values in itertools.product(devices, itertools.product(*(choices[n] for n in names))):
                    yield {**base, **dict(zip(names, values)), **({"device": device} if device else {})}


def snapshot_queries(params, choices, client):
    """Valid queries of a snapshot_* route on every sample snapshot and each of its devices."""
    listed = next(r for r in client.get(f"{PREFIX}/runs").get_json()["runs"] if r["name"] == SNAPSHOT_RUN)
    names = [s["name"] for s in listed["snapshots"]] if "snapshot" in params else [None]
    for name in names:
        base = {"run": SNAPSHOT_RUN, **({"snapshot": name} if name else {})}
        devices = [None]
        if "device" in params:
            peak = wait_route(client, f"{PREFIX}/snapshot_peak?{urlencode(base)}", timeout=60).get_json()
            devices = [row[0] for row in peak["rows"]]
        for device, values in itertools.product(devices, itertools.product(*choices.values())):
            yield {**base, **dict(zip(choices, values)), **({"device": device} if device is not None else {})}


# The summaries the disk cache keeps: their tables are declared for it, not served.
PERSISTED = [declared for declared, _ in FILE_SUMMARIES.values()] + [SNAPSHOT_PARTS]


def _persisted_tables(declared):
    return [*declared.tables.values(), *([declared.scalars] if declared.scalars is not None else [])]


def test_every_declared_table_is_served_by_a_route():
    served_names = {name for tables in TABLE_ROUTES.values() for name in tables}
    kept = {table.name for declared in PERSISTED for table in _persisted_tables(declared)}
    assert set(TABLES) - served_names == set(NOT_SERVED) | (kept - served_names)


def _check_persisted(declared, summary):
    """`summary` has exactly the fields, tables and scalar types `declared` declares."""
    for field, table in declared.tables.items():
        value = getattr(summary, field)
        table.check(pd.DataFrame({"value": value}) if field in declared.arrays else value)
    for column in declared.scalars.columns if declared.scalars is not None else ():
        value = getattr(summary, column.name)
        assert isinstance(value, {"int64": int, "float64": float, "str": str, "bool": bool}[column.dtype]), \
            (declared.name, column.name, type(value))


@pytest.mark.parametrize("path", sorted(SAMPLE_FILES), ids=lambda p: f"{p.parent.name}/{p.name[:20]}")
def test_file_summaries_match_their_declarations(path):
    profile = tb_plugin.load(str(path))
    for declared, build in FILE_SUMMARIES.values():
        _check_persisted(declared, build(profile))


def test_a_snapshots_cached_parts_match_their_declarations():
    paths = sorted((SAMPLES / SNAPSHOT_RUN).glob("*.pickle*"))
    assert paths
    for path in paths:
        _check_persisted(SNAPSHOT_PARTS, to_parts(load_snapshot(path).model))


@pytest.mark.parametrize("path", sorted(TABLE_ROUTES))
def test_every_answer_has_the_declared_columns_and_types(served, path):
    client, runs = served
    declared = TABLE_ROUTES[path]
    seen = set()
    for query in queries(path, client, runs):
        url = f"{PREFIX}{path}?{urlencode(query)}"
        response = wait_route(client, url, timeout=180)
        assert response.status_code == 200, (url, response.get_json())
        for answer in answered_tables(response.get_json()):
            # tables with the same columns (memcpy, memset) are told apart by the query only
            matching = [t for t in declared.values() if t.names == answer["columns"]]
            assert matching, f"{url}: a table with columns {answer['columns']}, which {path} does not declare"
            assert problems(matching[0], answer) == [], url
            seen.update(t.name for t in matching if not problems(t, answer))
    assert seen == set(declared), f"{path}: tables declared but never answered: {set(declared) - seen}"


@pytest.mark.parametrize("path", sorted(SAMPLE_FILES), ids=lambda p: f"{p.parent.name}/{p.name[:20]}")
def test_model_tables_match_their_declarations(path):
    model = tb_plugin.load(str(path)).model
    for table in MODEL_TABLES:
        table.check(getattr(model, table.name))
    assert [t.name for t in MODEL_TABLES] == list(model.TABLES) + ["threads", "devices"]


def test_openapi_components_are_generated_from_the_declarations():
    text = openapi_gen.SPEC_PATH.read_text(encoding="utf-8")
    assert openapi_gen.render(text, TABLES) == text, "run: python -m tb_plugin.openapi_gen"


def test_generated_component_names_columns_units_and_row_types():
    component = SPEC["components"]["schemas"]["OperatorsByNameTable"]
    assert component["properties"]["columns"]["const"] == operators.OPERATORS_BY_NAME.names
    cells = component["properties"]["rows"]["items"]["prefixItems"]
    assert [c["title"] for c in cells] == operators.OPERATORS_BY_NAME.names
    by_name = {c["title"]: c for c in cells}
    assert by_name["calls"]["type"] == "integer"
    assert by_name["tc_self_pct"]["type"] == ["number", "null"] and by_name["tc_self_pct"]["x-unit"] == "pct"
    assert by_name["host_self_us"]["type"] == "number" and "µs" in by_name["host_self_us"]["description"]
    assert by_name["has_call_stack"]["type"] == "boolean"


def test_openapi_check_mode_fails_on_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "openapi.yaml"
    fresh = openapi_gen.SPEC_PATH.read_text(encoding="utf-8")
    stale.write_text(fresh.replace('"title": "calls"', '"title": "count"', 1))  # a column renamed by hand
    assert openapi_gen.main(["--check", "--spec", str(stale)]) == 1
    assert "python -m tb_plugin.openapi_gen" in capsys.readouterr().err
    assert openapi_gen.main(["--spec", str(stale)]) == 0
    assert openapi_gen.main(["--check", "--spec", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == fresh


@pytest.mark.parametrize("view, tables", [
    (operators.operators, (operators.OPERATORS_BY_NAME, operators.OPERATORS_BY_NAME_SHAPE)),
    (kernels.kernels, (kernels.KERNELS_BY_NAME, kernels.KERNELS_BY_NAME_OP)),
    (diff.diff, (diff.DIFF_WARNINGS, diff.DIFF_OPERATORS, diff.DIFF_KERNELS, diff.DIFF_STEPS, diff.DIFF_EXPLANATION,
                 diff.DIFF_CONTRIBUTORS, diff.DIFF_CONTRIBUTOR_PATHS, diff.DIFF_TREE)),
])
def test_view_docstrings_list_the_declared_columns(view, tables):
    for table in tables:
        for line in table.doc_lines():
            assert f"- {line}" in view.__doc__
    assert view.tables == tables


def test_hand_written_paths_survive_regeneration(tmp_path):
    """The generator rewrites only the block between its markers: a route added by hand
    (another engineer's, say) is kept as written."""
    text = openapi_gen.SPEC_PATH.read_text(encoding="utf-8")
    added = text.replace("paths:\n", "paths:\n  /new_view:\n    get:\n      summary: A hand-written entry.\n", 1)
    assert openapi_gen.render(added, TABLES) == added


def test_declared_routes_paths_and_route_table_are_generated_from_the_declarations():
    routes = openapi_gen.declared_routes()
    assert set(routes) >= {"lightning", "kernels", "compiled"}  # the look-up found them
    text = openapi_gen.SPEC_PATH.read_text(encoding="utf-8")
    assert openapi_gen.render(text, TABLES, routes, openapi_gen.declared_tabs()) == text, "run: python -m tb_plugin.openapi_gen"
    table = openapi_gen.ROUTES_PATH.read_text(encoding="utf-8")
    assert openapi_gen.render_routes(table, routes) == table, "run: python -m tb_plugin.openapi_gen"
    assert set(DECLARED_ROUTES) == set(routes)


@pytest.mark.parametrize("change", ["choices", "new route", "summary", "new tab"])
def test_a_changed_route_declaration_makes_the_generated_files_stale(change, tmp_path, monkeypatch, capsys):
    """The paths (whence the page's parameter types and the fuzz test's requests) and the route
    table drift from a changed declaration: the check fails until they are written again."""
    spec, table = tmp_path / "openapi.yaml", tmp_path / "routes.py"
    spec.write_text(openapi_gen.SPEC_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    table.write_text(openapi_gen.ROUTES_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    kernels_route = schema.ROUTES["kernels"]
    if change == "choices":
        changed = dataclasses.replace(kernels_route, params=(schema.choice("group_by", ("name",), "by name only"),))
        monkeypatch.setitem(schema.ROUTES, "kernels", changed)
    elif change == "new tab":  # the page's ViewName type comes from openapi.yaml's ViewName
        monkeypatch.setitem(schema.TABS, "roofline", schema.Tab("roofline", 1000, lambda offer: True))
    elif change == "new route":
        monkeypatch.setitem(schema.ROUTES, "kernels_again", dataclasses.replace(kernels_route, name="kernels_again"))
    else:
        monkeypatch.setitem(schema.ROUTES, "kernels", dataclasses.replace(kernels_route, summary="Other words."))
    files = ["--spec", str(spec), "--routes", str(table)]
    assert openapi_gen.main(["--check", *files]) == 1
    assert "python -m tb_plugin.openapi_gen" in capsys.readouterr().err
    assert openapi_gen.main(files) == 0
    assert openapi_gen.main(["--check", *files]) == 0


def test_each_route_is_answered_one_way():
    """A hand-written route by the `Api` method of its name; a declared one by its declaration
    alone (`api.declared_route`), never also by a method that could drift from it."""
    assert not set(HANDWRITTEN_ROUTES) & set(DECLARED_ROUTES)
    assert [name for name in HANDWRITTEN_ROUTES if not callable(getattr(Api, name, None))] == []
    assert [name for name in DECLARED_ROUTES if hasattr(Api, name)] == []


def test_the_page_lists_every_declared_tab_in_order():
    """A tab is declared once beside its view (`schema.tab`: the ViewName type and /views
    follow) and listed once by the page (frontend/src/app/views.ts, which says what it is
    called and which page shows it): the two name the same tabs, in the same order (the page
    shows them in /views's order, the declared one: tests/e2e/test_views.py)."""
    listed = re.findall(r"^  (\w+): \{ label: ", (REPO / "frontend" / "src" / "app" / "views.ts").read_text(encoding="utf-8"),
                        re.MULTILINE)
    declared = [t.name for t in openapi_gen.declared_tabs()]
    assert listed == declared
    assert SPEC["components"]["schemas"]["ViewName"]["enum"] == declared


def test_views_offers_the_tabs_whose_condition_holds(monkeypatch):
    """/views (`Profile.available_views`) is the declared tabs, in their order, whose
    condition holds for the profile: a tab declared to be always offered joins the list at its
    place; one offered by the page alone (memory snapshots) never does."""
    profile = tb_plugin.load(str(SAMPLE_FILES[0]))
    before = profile.available_views(worker_count=3)
    assert "memory_snapshot" not in before and before[0] == "overview" and "job" in before
    monkeypatch.setitem(schema.TABS, "roofline", schema.Tab("roofline", 5, lambda offer: offer.worker_count == 3))
    assert profile.available_views(worker_count=3) == ["overview", "roofline", *before[1:]]
    assert "roofline" not in profile.available_views(worker_count=1)


def test_a_missing_value_of_every_column_type_is_served_as_null():
    """`table_json` hands rows to the serialiser as they are: NaN, infinities, None and the
    nullable types' pd.NA and NaT must each come out as JSON null, numbers and text as
    themselves (worked out by hand)."""
    import numpy as np
    import orjson

    from tb_plugin.server.http import respond, table_json

    frame = pd.DataFrame({
        "float": [1.5, np.nan, np.inf],
        "int": pd.array([7, None, 2**40], dtype="Int64"),
        "text": ["a", None, '</script>"'],
        "category": pd.Categorical(["x", None, "x"]),
        "string": pd.array(["s", None, "t"], dtype="string"),
        "flag": pd.array([True, None, False], dtype="boolean"),
        "when": pd.Series([pd.NaT] * 3, dtype="datetime64[ns]"),
    })
    body = orjson.loads(respond(table_json(frame)).get_data())
    assert body["columns"] == ["float", "int", "text", "category", "string", "flag", "when"]
    assert body["rows"] == [[1.5, 7, "a", "x", "s", True, None],
                            [None, None, None, None, None, None, None],
                            [None, 2**40, '</script>"', "x", "t", False, None]]
