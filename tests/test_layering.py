"""The backend's layering, as frontend/src/structure.test.ts checks the page's: each layer
imports only what is below it, the public boundary is annotated, and mypy passes on it.

Layers, bottom up: trace/ (parsing and the columnar model) -> views/ (pure functions of a
model) -> profile.py (the Python API) -> api.py (HTTP) -> plugin.py (TensorBoard).
"""

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from tb_plugin import loading, profile
from tb_plugin import views as views_package

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "tb_plugin"

# (files, modules they must not import, why)
RULES = [
    ("trace/", ("tb_plugin.views", "tb_plugin.profile", "tb_plugin.loading", "tb_plugin.api", "tb_plugin.plugin",
                "werkzeug"), "the trace model knows nothing of the layers above it"),
    ("snapshot/", ("tb_plugin.views", "tb_plugin.profile", "tb_plugin.memory_snapshot", "tb_plugin.loading",
                   "tb_plugin.api", "tb_plugin.plugin", "werkzeug"),
     "the snapshot model knows nothing of the layers above it"),
    ("views/", ("tb_plugin.api", "tb_plugin.plugin", "tb_plugin.routes", "tb_plugin.loading", "tb_plugin.profile",
                "werkzeug"), "a view is a pure function of a model: no HTTP, no loading"),
    ("api.py", ("tb_plugin.trace", "tb_plugin.views"),
     "routes reach the data through Profile / Run only; the HTTP layer never parses"),
    ("profile.py", ("tb_plugin.api", "tb_plugin.plugin", "werkzeug"), "the Python API works without a server"),
    ("memory_snapshot.py", ("tb_plugin.api", "tb_plugin.plugin", "werkzeug"), "the Python API works without a server"),
]


def imported_modules(source, module):
    """Every module an import statement of `source` (the text of `module`) names, relative
    imports resolved; `from a import b` names both `a` and `a.b`."""
    package = module.rsplit(".", 1)[0]
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def violations(path, source):
    rel = path.relative_to(PACKAGE).as_posix()
    module = "tb_plugin." + rel[: -len(".py")].replace("/", ".")
    found = []
    for files, forbidden, why in RULES:
        if not rel.startswith(files):
            continue
        for name in imported_modules(source, module):
            hit = [f for f in forbidden if name == f or name.startswith(f + ".")]
            if hit:
                found.append(f"{rel} imports {name}: {why}")
    return found


def test_each_layer_imports_only_what_is_below_it():
    problems = [v for path in sorted(PACKAGE.rglob("*.py")) for v in violations(path, path.read_text())]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("rel, source", [
    ("trace/model.py", "from ..views import common\n"),
    ("trace/model.py", "from .. import views\n"),
    ("views/memory.py", "def f():\n    from werkzeug import wrappers\n"),  # a lazy import counts too
    ("views/memory.py", "from ..api import respond\n"),
    ("api.py", "from .trace.parse import parse_trace\n"),
    ("api.py", "from .trace import parse\n"),
])
def test_the_rules_catch_a_forbidden_import(rel, source):
    assert violations(PACKAGE / rel, source)


def test_no_route_reaches_into_the_model():
    tree = ast.parse((PACKAGE / "api.py").read_text())
    reached = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "model"]
    assert not reached, f"api.py uses `.model` on lines {reached}: add a Profile method instead"


def _view_functions():
    """The view functions the Python API calls: `<views module>.<function>` in profile.py."""
    imported = {alias.asname or alias.name: alias.name
                for node in ast.walk(ast.parse((PACKAGE / "profile.py").read_text()))
                if isinstance(node, ast.ImportFrom) and node.module == "views" for alias in node.names}
    called = set()
    for node in ast.walk(ast.parse((PACKAGE / "profile.py").read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported:
            called.add((imported[node.value.id], node.attr))
    functions = []
    for module_name, attr in sorted(called):
        value = getattr(importlib.import_module(f"tb_plugin.views.{module_name}"), attr)
        if inspect.isfunction(value):
            functions.append(value)
    return functions


def _public_methods(cls):
    """(name, function) of the public methods and properties of `cls`, with `__init__`."""
    for name, member in vars(cls).items():
        if name.startswith("_") and name not in ("__init__", "__getitem__"):
            continue
        function = member.fget if isinstance(member, property) else member
        if inspect.isfunction(function):
            yield f"{cls.__name__}.{name}", function


def _boundary():
    """(name, function) of the public boundary: the Python API, RunStore, the views."""
    yield from (("load", profile.load), ("load_run", profile.load_run), ("diff", profile.diff),
                ("combine_distributed", profile.combine_distributed))
    yield from _public_methods(profile.Profile)
    yield from _public_methods(profile.Run)
    yield from _public_methods(loading.RunStore)
    yield from ((f"views.{f.__module__.rsplit('.', 1)[-1]}.{f.__name__}", f) for f in _view_functions())


def test_the_public_boundary_is_annotated():
    missing = []
    for name, function in _boundary():
        signature = inspect.signature(function)
        unannotated = [p for p in signature.parameters.values() if p.name != "self"
                       and p.annotation is inspect.Parameter.empty]
        if unannotated or signature.return_annotation is inspect.Signature.empty:
            missing.append(f"{name}{signature}")
    assert not missing, "annotate:\n" + "\n".join(missing)
    assert len(_view_functions()) >= 20  # the look-up found the views, not nothing


def test_every_views_module_is_checked_by_mypy():
    config = (REPO / "mypy.ini").read_text()
    assert "tb_plugin/views" in config
    modules = {m.name for m in pkgutil.iter_modules(views_package.__path__)}
    assert modules >= {"overview", "operators", "kernels", "memory", "modules", "distributed", "diff", "timeline"}


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (pip install -e '.[test]')")
def test_mypy_passes_on_the_public_boundary():
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "mypy.ini")],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr



def test_the_trace_model_is_light_to_import():
    """The views and the disk cache import `TraceModel` directly: that loads neither the
    builder's libraries (polars, msgspec), nor pandas, nor starts a thread."""
    code = ("import sys, threading, tb_plugin.cache, tb_plugin.trace.model\n"
            "heavy = ('pandas', 'polars', 'msgspec', 'tb_plugin.trace.build', 'tb_plugin.trace.parse',"
            " 'tb_plugin.trace.coding', 'tb_plugin.trace.kinds')\n"
            "print(sorted(m for m in heavy if m in sys.modules), threading.active_count())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "1"]
