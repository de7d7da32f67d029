"""The backend's layering, as frontend/src/structure.test.ts checks the page's: each module
imports only what its entry in `ALLOWED` lists, the public boundary is annotated, and mypy
passes on the package.

After Perfetto's tools/check_imports.py, the rules are an allowlist over every module: a
module no entry covers fails (a new module says where it sits), and so does an import its
entry does not list. No import is excused: the last two the design did not want (the cache
reading __version__ through the package facade, the server checking a linked file with the
parser itself) were paid off rather than listed as debt. Layers, bottom up, each a folder:
errors / schema / stages -> store/ (storage, discovery, budget, cache and its format,
summaries) -> trace/ and snapshot/ (parsing and the columnar models) -> views/ (pure functions
of a model) -> python_api/ (Profile, Run, MemorySnapshot) -> server/ (the store that loads off
the request path, the HTTP routes, the TensorBoard plugin) -> agents/, report, __main__.
"""

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from tb_plugin.server import loading
from tb_plugin.python_api import profile, runs

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "tb_plugin"

# Module (a path under tb_plugin/ without ".py"; "views/" is every module of the package) ->
# (what it may import: modules of ours, "views/" for a whole package, and the third-party
# libraries that decide a layer, in THIRD_PARTY; why). A module's own package is not implied.
ALLOWED = {
    "errors": ((), "the error types every layer raises"),
    "stages": ((), "the names of a load's stages"),
    "server/routes": ((), "route names TensorBoard lists without importing what answers them"),
    "server/sources": ((), "a stack frame's file -> a path that exists here"),
    "schema": ((), "table declarations, below everything that declares a table"),
    "version": ((), "the package's version, read by the cache without the package facade"),
    "store/budget": ((), "the memory budget's arithmetic, read by TensorBoard at start-up"),
    "store/storage": (("store/budget", "errors", "fsspec", "snapshot/sniff"),
                      "bytes from local files or fsspec (and what they are, in errors)"),
    "store/discovery": (("errors", "snapshot/sniff", "store/storage"),
                        "runs and spans (and memory snapshots) from file names, walked in a Storage"),
    "trace/": (("trace/", "errors", "schema", "polars", "msgspec"),
               "the trace model knows nothing of the layers above it; the builder parses with msgspec and polars"),
    "snapshot/": (("snapshot/", "errors"), "the memory snapshot model knows nothing of the layers above it"),
    "views/": (("views/", "trace/model", "trace/linking", "trace/anomalies", "snapshot/model", "schema", "errors"),
               "a view is a pure function of a model: no HTTP, no loading, no parsing"),
    "python_api/profile": (("store/budget", "store/cache", "trace/", "views/", "errors", "schema", "stages",
                            "store/storage", "store/discovery", "importlib"),
                           "the Python API works without a server; `answer` looks a route's view up in its "
                           "declaration"),
    "python_api/snapshots": (("store/budget", "store/cache", "snapshot/", "views/", "errors", "store/storage"),
                             "the Python API over memory snapshots works without a server (the disk cache only "
                             "with cache_dir=)"),
    "python_api/compare": (("store/budget", "errors", "python_api/profile", "report", "python_api/runs",
                            "store/storage", "views/"),
                           "`python -m tb_plugin compare`: the Python API's diff, printed"),
    "store/cache_schema": (("msgspec",), "the declared shape of a cache manifest, checked by msgspec"),
    "store/cache_format": (("store/cache_schema", "schema", "trace/model", "trace/anomalies", "trace/metadata",
                            "msgspec", "pyarrow"),
                           "a cache entry's format: models and declared summaries as Arrow parts, manifests sealed and "
                           "checked by msgspec; never parses"),
    "store/cache": (("store/cache_format", "schema", "store/storage", "trace/model", "version", "fsspec"),
                    "the disk cache's directory: entries named, read, written and trimmed (local or fsspec)"),
    "store/summaries": (("store/cache", "errors", "schema", "store/storage"),
                        "per-file summaries held, read from the disk cache, built and written back, for the server "
                        "and the Python API alike"),
    "python_api/runs": (("store/budget", "store/cache", "store/discovery", "errors", "python_api/snapshots",
                         "python_api/profile", "schema", "store/storage", "store/summaries", "views/"),
                        "a run and a span of many ranks read, summarised and combined, for the server and the Python "
                        "API"),
    "python_api/preprocess": (("store/budget", "store/cache", "store/cache_format", "store/discovery", "errors",
                               "python_api/profile", "python_api/runs", "store/storage", "dask"),
                              "a Dask task per trace through the Python API into the cache"),
    "server/accounting": (("store/cache_format", "errors", "python_api/snapshots", "python_api/profile",
                           "snapshot/model", "store/summaries"),
                          "the server's memory budget counts what the store holds; it loads nothing"),
    "server/loading": (("server/accounting", "store/budget", "store/cache", "store/discovery", "errors",
                        "python_api/snapshots", "python_api/profile", "python_api/runs", "schema", "stages",
                        "store/storage", "store/summaries"), "the server's store loads through the Python API"),
    "server/http": (("server/accounting", "store/discovery", "errors", "schema", "stages", "werkzeug"),
                     "replies, parameters and the route wrapper: no data, no route of its own"),
    "server/api": (("server/accounting", "store/discovery", "errors", "server/http", "server/loading",
                    "python_api/snapshots", "python_api/profile", "server/routes", "python_api/runs", "schema",
                    "server/sources", "werkzeug"),
                   "routes reach the data through Profile and runs only; the HTTP layer never parses"),
    "server/plugin": (("server/api", "server/http", "store/budget", "store/cache", "server/loading", "python_api/profile",
                       "server/routes", "tensorboard", "werkzeug"),
                      "the TensorBoard plugin reaches the model only through the Python API"),
    "openapi_gen": (("schema", "views/", "importlib"),
                    "writes the declared tables and routes (every views module imported) into openapi.yaml and "
                    "routes.py"),
    "__init__": (("errors", "python_api/snapshots", "python_api/profile", "version", "importlib"),
                 "the package facade (its names imported from their modules when first used)"),
    "agents/": (("agents/", "server/api", "server/http", "store/budget", "store/cache", "errors", "server/loading", "openapi_gen",
                 "server/routes", "schema", "version", "werkzeug"),
                "answers for agents and scripts: the HTTP server's own routes, called in-process and paged"),
    "report": (("server/api", "store/budget", "python_api/compare", "errors", "server/loading", "python_api/profile",
                "python_api/runs", "store/storage", "views/", "werkzeug"),
               "the page as one file: the HTTP layer's own answers, asked in-process over a store, embedded"),
    "__main__": (("agents/", "store/budget", "python_api/compare", "server/loading", "python_api/snapshots",
                  "python_api/preprocess", "report", "__init__"), "the command line"),
    "server/": ((), "the package of the TensorBoard side"),
    "store/": ((), "the package of storage, discovery, budget, cache and summaries"),
    "python_api/": ((), "the package of the Python API"),
}
# Libraries that mark a layer: only the modules whose entry lists them may import them. The
# builder's libraries (polars, msgspec, pyarrow) belong to the layers that build the model and
# the cache; `importlib` (a module imported by its name, which no reader or tool can follow)
# to the registries that look declarations up. `importlib.resources` reads package data, not code.
THIRD_PARTY = ("werkzeug", "tensorboard", "fsspec", "dask", "polars", "msgspec", "pyarrow", "importlib")

def module_name(rel):
    """'views/memory' of 'views/memory.py'; '__init__' of the package's own __init__.py, and
    'trace/' of trace/__init__.py."""
    name = rel[: -len(".py")]
    if name.endswith("/__init__"):
        return name[: -len("__init__")]
    return name


def imported_modules(source, rel):
    """Every module an import statement of `source` (the text of tb_plugin/`rel`) names:
    ours as module names ('views/memory', 'trace/', '__init__'), a third-party library by its
    top-level name; relative imports resolved; `from a import b` names `a.b` where that is
    a module of ours, else `a`."""
    package = module_name(rel).rsplit("/", 1)[0] if "/" in module_name(rel).rstrip("/") else ""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {_ours(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = (["tb_plugin"] + ([package] if package else []))
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                dotted = f"{base}.{alias.name}"
                names.add(_ours(dotted) if _is_module(dotted) or not base.startswith("tb_plugin") else _ours(base))
    return {n for n in names if n is not None}


def _is_module(dotted):
    path = REPO / dotted.replace(".", "/")
    return dotted.startswith("tb_plugin") and (path.with_suffix(".py").is_file() or path.is_dir())


def _ours(dotted):
    """A module of ours as a module name, a layer-marking library by its name, else None."""
    if dotted == "tb_plugin":
        return "__init__"
    if dotted.startswith("tb_plugin."):
        rel = dotted[len("tb_plugin."):].replace(".", "/")
        return rel + "/" if (PACKAGE / rel).is_dir() else rel
    if dotted == "importlib.resources" or dotted.startswith("importlib.resources."):
        return None  # package data (the page's files, the kernel markers), no module by name
    top = dotted.split(".")[0]
    return top if top in THIRD_PARTY else None


def entry_of(module):
    """The ALLOWED key covering `module`: its own, else its package's; None when none does."""
    if module in ALLOWED:
        return module
    package = module.split("/")[0] + "/" if "/" in module else None
    return package if package in ALLOWED else None


def covers(allowed, name):
    return any(name == a or (a.endswith("/") and name.startswith(a)) for a in allowed)


def violations(rel, source):
    """('module imports name: why') for each import of tb_plugin/`rel` its entry does not
    allow; a module without an entry is one violation."""
    module = module_name(rel)
    key = entry_of(module)
    if key is None:
        return [f"{module} is in no entry of ALLOWED: say what it may import"]
    allowed, why = ALLOWED[key]
    return [f"{module} imports {name}: {why}" for name in sorted(imported_modules(source, rel))
            if name != module and not covers(allowed, name)]


def _sources():
    return {path.relative_to(PACKAGE).as_posix(): path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


def test_each_module_imports_only_what_its_entry_allows():
    problems = [v for rel, source in _sources().items() for v in violations(rel, source)]
    assert not problems, "\n".join(problems)


def test_every_allowlist_entry_covers_a_module():
    modules = [module_name(rel) for rel in _sources()]
    unused = [key for key in ALLOWED if not any(entry_of(m) == key for m in modules)]
    assert not unused, unused


@pytest.mark.parametrize("rel, source", [
    ("server/plugin.py", "from ..trace.model import build_model\n"),  # the warm-up's broken import
    ("server/plugin.py", "from ..trace import build\n"),
    ("trace/model.py", "from ..views import common\n"),
    ("trace/model.py", "from .. import views\n"),
    ("views/memory.py", "def f():\n    from werkzeug import wrappers\n"),  # a lazy import counts too
    ("views/memory.py", "from ..server.api import respond\n"),
    ("views/memory.py", "from ..trace.parse import parse_trace\n"),
    ("server/api.py", "from ..trace.parse import parse_trace\n"),
    ("server/api.py", "from ..trace import parse\n"),
    ("server/api.py", "import tb_plugin.views.memory\n"),
    ("store/cache.py", "from ..python_api.profile import Profile\n"),
    ("store/cache.py", "from .. import __version__\n"),  # the facade loads the Python API
    ("new_module.py", "import os\n"),  # a module no entry covers
    ("store/cache.py", "from ..server import loading\n"),  # no arrow points up a folder
    ("python_api/profile.py", "from ..server.api import respond\n"),
    ("views/memory.py", "import polars as pl\n"),  # the builder's libraries stay in the builder
    ("server/api.py", "from msgspec import Raw\n"),
    ("server/loading.py", "def f():\n    import pyarrow as pa\n"),
    ("trace/model.py", "import pyarrow\n"),
    ("views/common.py", "import importlib\n"),  # a module by name only in the registries
    ("python_api/runs.py", "from importlib import import_module\n"),
    ("server/api.py", "import importlib.util\n"),
])
def test_the_rules_catch_a_forbidden_import(rel, source):
    assert violations(rel, source)


def test_the_rules_read_imports_as_python_does():
    assert imported_modules("from ..trace.model import TraceModel\nfrom .. import errors\n", "store/cache.py") == \
        {"trace/model", "errors"}
    assert imported_modules("from ..trace import linking\nfrom .common import x\n", "views/memory.py") == \
        {"trace/linking", "views/common"}
    assert imported_modules("from .. import __version__\nimport werkzeug.wrappers, numpy\n", "store/cache.py") == \
        {"__init__", "werkzeug"}
    assert imported_modules("import importlib\nfrom msgspec import Raw\nimport polars as pl\n", "trace/parse.py") == \
        {"importlib", "msgspec", "polars"}
    assert imported_modules("from importlib import resources\nimport importlib.resources\n", "server/plugin.py") == set()


TESTS = REPO / "tests"


def imported_test_modules(source):
    """The test modules (`test_*.py`) an import statement of `source` names: `from .test_api
    import x`, `from ..test_views_flops import y`, `import tests.test_api`, `from . import test_cli`."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
            if node.module in (None, "tests", "tests.e2e"):  # names imported from a package of tests
                names |= {alias.name for alias in node.names}
    return sorted(n for n in names if n.rsplit(".", 1)[-1].startswith("test_"))


def test_no_test_module_imports_another():
    """Shared helpers live in tests/helpers.py and fixtures in conftest.py: a test module that
    imports another runs that module's fixtures and module-level set-up as a side effect, and a
    helper moved or renamed there breaks tests that only borrowed it."""
    problems = [f"{path.relative_to(REPO)} imports {name}" for path in sorted(TESTS.rglob("*.py"))
                for name in imported_test_modules(path.read_text())]
    assert not problems, "move what is shared into tests/helpers.py (fixtures: conftest.py):\n" + "\n".join(problems)


@pytest.mark.parametrize("source", ["from .test_api import PREFIX\n", "from ..test_views_flops import trace\n",
                                    "import tests.test_api\n", "from . import test_cli\n",
                                    "def f():\n    from .test_api import make_client\n"])
def test_the_test_module_rule_catches_an_import(source):
    assert imported_test_modules(source)


def test_the_test_module_rule_lets_helpers_through():
    assert imported_test_modules("from .helpers import PREFIX\nfrom .conftest import x\nimport pytest_mock\n"
                                 "from tb_plugin.schema import test_value\n") == []


def test_no_route_reaches_into_the_model():
    tree = ast.parse((PACKAGE / "server" / "api.py").read_text())
    reached = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "model"]
    assert not reached, f"api.py uses `.model` on lines {reached}: add a Profile method instead"


def _view_functions():
    """The view functions the Python API calls: `<views module>.<function>` in profile.py."""
    imported = {alias.asname or alias.name: alias.name
                for node in ast.walk(ast.parse((PACKAGE / "python_api" / "profile.py").read_text()))
                if isinstance(node, ast.ImportFrom) and node.module == "views" for alias in node.names}
    called = set()
    for node in ast.walk(ast.parse((PACKAGE / "python_api" / "profile.py").read_text())):
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
    yield from (("load", profile.load), ("load_run", runs.load_run), ("diff", profile.diff),
                ("ranks_inputs", runs.ranks_inputs), ("ranks_timeline", runs.ranks_timeline))
    yield from _public_methods(profile.Profile)
    yield from _public_methods(runs.Run)
    yield from _public_methods(runs.RunSpan)
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


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (pip install -e '.[test]')")
def test_mypy_passes_on_the_public_boundary():
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "mypy.ini")],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_checks_every_module_and_every_body():
    """mypy reads the whole package, every function is annotated, and no section of the
    configuration excuses a module from either: checking only the boundary left three quarters
    of the functions unchecked, and an import of a name that had moved away passed."""
    import configparser
    config = configparser.ConfigParser()
    config.read(REPO / "mypy.ini")
    assert config.get("mypy", "files").strip() == "tb_plugin"
    assert config.get("mypy", "check_untyped_defs").strip() == "True"
    assert config.get("mypy", "disallow_untyped_defs").strip() == "True"
    ours = [section for section in config.sections() if "tb_plugin" in section]
    assert not ours, f"sections that could relax the checks for our modules: {ours}"


def test_the_trace_model_is_light_to_import():
    """The views and the disk cache import `TraceModel` directly: that loads neither the
    builder's libraries (polars, msgspec), nor pandas, nor starts a thread."""
    code = ("import sys, threading, tb_plugin.store.cache, tb_plugin.trace.model\n"
            "heavy = ('pandas', 'polars', 'msgspec', 'tb_plugin.trace.build', 'tb_plugin.trace.batches',"
            " 'tb_plugin.trace.resolve', 'tb_plugin.trace.parse', 'tb_plugin.trace.coding', 'tb_plugin.trace.kinds')\n"
            "print(sorted(m for m in heavy if m in sys.modules), threading.active_count())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "1"]
