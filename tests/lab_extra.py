"""What the ``lab`` extra installs, and which importable modules of this (test) environment it
does not: the environment ``scripts/lab`` makes, told apart inside the test environment without
building a second one.

The extras of ``notebook-llm`` are read from ``pyproject.toml`` (the source of truth: an
editable install's metadata is as old as the install); each dependency's own requirements from
its installed metadata, by the walk ``scripts/setup-venv`` uses (``scripts/venv_is_current.py``). :func:`guard_startup` writes an IPython startup file that makes a
kernel refuse the modules the extra would not have, with the ``ModuleNotFoundError`` a user of
``scripts/lab`` would see; ``tests/test_notebooks.py`` runs the notebooks under it.
"""

from __future__ import annotations

import importlib.util
import json
from importlib import metadata
from pathlib import Path
from types import ModuleType

from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _venv_check() -> ModuleType:
    """``scripts/venv_is_current.py``: the one walk over what an extra installs."""
    spec = importlib.util.spec_from_file_location(
        "venv_is_current", ROOT / "scripts" / "venv_is_current.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def closure(extra: str = "lab") -> set[str]:
    """The canonical names of every distribution ``pip install 'notebook-llm[EXTRA]'`` brings
    (this package included), on this Python."""
    check = _venv_check()
    walked = {canonicalize_name(req.name) for req, _ in check.walk(check.own_project(), {extra})}
    return walked | {canonicalize_name(check.SELF)}


def modules_outside(extra: str = "lab") -> set[str]:
    """Top-level modules importable here that only distributions outside the extra provide."""
    inside = closure(extra)
    return {
        module
        for module, dists in metadata.packages_distributions().items()
        if not any(canonicalize_name(d) in inside for d in dists)
    }


GUARD = """\
# Written by tests/lab_extra.py: this Python has only what `notebook-llm[{extra}]` installs.
# Every finder on sys.meta_path is wrapped to find nothing of the modules outside it, as when
# they are not installed: importing one raises ModuleNotFoundError, importlib.util.find_spec
# answers None (libraries probe optional modules that way).
import sys

_OUTSIDE = frozenset({outside})


class _WithoutOutside:
    def __init__(self, finder):
        self._finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _OUTSIDE:
            return None
        find = getattr(self._finder, "find_spec", None)
        return find(name, path, target) if find is not None else None

    def __getattr__(self, name):
        return getattr(self._finder, name)


sys.meta_path[:] = [_WithoutOutside(f) for f in sys.meta_path]
"""

#: The kernel's startup file: the guard for the kernel, and (through ``PYTHONPATH`` and a
#: ``sitecustomize``) for every Python it starts, such as the MCP servers of a notebook.
STARTUP = """\
import os

_GUARD = {guard_dir!r}
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_GUARD, os.environ.get("PYTHONPATH")) if p)
with open(os.path.join(_GUARD, "sitecustomize.py"), encoding="utf-8") as _file:
    exec(_file.read())
"""


def guard_startup(ipython_dir: Path, extra: str = "lab") -> set[str]:
    """Make ``ipython_dir`` (an ``IPYTHONDIR``) start every kernel, and every Python process a
    kernel starts, with the modules outside the extra refused; returns them."""
    outside = modules_outside(extra)
    guard_dir = ipython_dir / "lab-extra-only"
    guard_dir.mkdir(parents=True, exist_ok=True)
    text = GUARD.format(extra=extra, outside=json.dumps(sorted(outside)))
    (guard_dir / "sitecustomize.py").write_text(text, "utf-8")
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-lab-extra-only.py").write_text(STARTUP.format(guard_dir=str(guard_dir)), "utf-8")
    return outside
