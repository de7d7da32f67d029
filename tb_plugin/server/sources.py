"""Where a call-stack frame's file is on the machine TensorBoard runs on.

PyTorch writes stack frames relative to the `sys.path` entry the module came from
(`torch/autograd/graph.py`, `train.py`), so an editor asked to open one cannot find it: VS
Code's TensorBoard checks `fs.existsSync(filename)` and otherwise asks the user to pick the
file. A frame's file is looked up, by existence only (never opened or read), under the
directories it is likely relative to: TensorBoard's own `sys.path` (site-packages among
them, where the traced job used the same environment), the site-packages directories, the
working directory, and the directory of the run. The absolute path is given only when
exactly one distinct file matches; none or several mean no answer, never a guess.
"""

import functools
import os
import site
import sys
from collections.abc import Iterable
from typing import Any

# A frame's file is text from a trace: one longer than this, or with a NUL, is no path.
_MAX_PATH_CHARS = 4096


def _search_dirs() -> tuple[str, ...]:
    """TensorBoard's `sys.path` (its "" is the working directory), the site-packages
    directories and the working directory, each once, in that order."""
    candidates = [p or os.getcwd() for p in sys.path]
    try:
        candidates += site.getsitepackages() + [site.getusersitepackages()]
    except AttributeError:  # virtualenvs of old Pythons lack them
        pass
    candidates.append(os.getcwd())
    dirs = []
    for path in candidates:
        path = os.path.abspath(path)
        if path not in dirs and os.path.isdir(path):
            dirs.append(path)
    return tuple(dirs)


class SourceResolver:
    """Absolute paths of stack-frame files (see the module docstring); answers are cached,
    a frame's file being looked up once per run directory."""

    def __init__(self, search_dirs: Iterable[str] | None = None) -> None:
        self._search_dirs = _search_dirs() if search_dirs is None else tuple(search_dirs)
        self.resolve = functools.lru_cache(maxsize=4096)(self._resolve)

    def _resolve(self, file: str, run_dir: str | None = None) -> str | None:
        """`resolve(file, run_dir)`: the one existing file `file` names, as an absolute path, or None.

        An absolute `file` is answered when it exists. A relative one is joined to the run's
        directory (`run_dir`, local only) and to each search directory; a path with `..`
        components, a NUL or thousands of characters is not looked up.
        """
        if not file or len(file) > _MAX_PATH_CHARS or "\x00" in file:
            return None
        if os.path.isabs(file):
            return os.path.normpath(file) if os.path.isfile(file) else None
        if ".." in file.replace("\\", "/").split("/"):
            return None
        dirs = ((run_dir,) if run_dir else ()) + self._search_dirs
        found: dict[str, str] = {}
        for directory in dirs:
            path = os.path.join(directory, file)
            if os.path.isfile(path):
                found.setdefault(os.path.realpath(path), os.path.normpath(path))
        return next(iter(found.values())) if len(found) == 1 else None

    def with_paths(self, frames: Iterable[dict[str, Any]], run_dir: str | None = None) -> list[dict[str, Any]]:
        """Copies of `frames` ({"file", "line", ...}) with `path`: the absolute path of the
        frame's file when exactly one exists, else None."""
        return [{**frame, "path": self.resolve(frame["file"], run_dir) if frame.get("file") else None}
                for frame in frames]
