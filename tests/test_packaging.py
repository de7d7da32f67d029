"""What `pip install .` (a wheel, not the editable install the tests run from) ships."""

import shutil
import subprocess
import sys
import zipfile

import pytest

from .helpers import REPO


def test_wheel_holds_every_module_and_data_file_of_the_package(tmp_path):
    pytest.importorskip("setuptools")
    # A copy, so that the build leaves no build/ or *.egg-info in the work tree.
    src = tmp_path / "src"
    shutil.copy(REPO / "setup.py", src.mkdir() or src / "setup.py")
    shutil.copy(REPO / "README.md", src / "README.md")
    shutil.copytree(REPO / "tb_plugin", src / "tb_plugin", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                             "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("tb_plugin/")}
    expected = {p.relative_to(src).as_posix() for p in (src / "tb_plugin").rglob("*") if p.is_file()}
    # Before the fix the wheel lacked tb_plugin/trace/*.py (no __init__.py) and
    # views/tensor_core_markers.txt, so every data route of an installed plugin answered 500.
    assert {"tb_plugin/trace/parse.py", "tb_plugin/trace/model.py", "tb_plugin/views/tensor_core_markers.txt",
            "tb_plugin/static/app.js", "tb_plugin/openapi.yaml"} <= expected
    assert sorted(expected - shipped) == []
