"""What the ``lab`` extra installs, and which importable modules of this (test) environment it
does not: the environment ``scripts/lab`` makes, told apart inside the test environment without
building a second one.

The extras of ``notebook-llm`` are read from ``pyproject.toml`` (the source of truth: an
editable install's metadata is as old as the install); each dependency's own requirements from
its installed metadata. :func:`guard_startup` writes an IPython startup file that makes a
kernel refuse the modules the extra would not have, with the ``ModuleNotFoundError`` a user of
``scripts/lab`` would see; ``tests/test_notebooks.py`` runs the notebooks under it.
"""

from __future__ import annotations

import json
import tomllib
from collections import deque
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
SELF = canonicalize_name("notebook-llm")


def _own_requirements(extras: set[str]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    found = [Requirement(r) for r in project["dependencies"]]
    for extra in sorted(extras):
        found += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return found


def closure(extra: str = "lab") -> set[str]:
    """The canonical names of every distribution ``pip install 'notebook-llm[EXTRA]'`` brings
    (this package included), on this Python."""
    seen: dict[str, set[str]] = {}  # distribution -> the extras asked of it
    todo: deque[tuple[str, set[str]]] = deque([(SELF, {extra})])
    while todo:
        name, extras = todo.popleft()
        if name in seen and extras <= seen[name]:
            continue
        known = seen.setdefault(name, set())
        known |= extras
        if name == SELF:  # "notebook-llm[notebook,schema]" in our own extras lands here too
            requirements = _own_requirements(known)
        else:
            try:
                requirements = [Requirement(r) for r in metadata.requires(name) or []]
            except metadata.PackageNotFoundError:
                continue  # not installed here: nothing of it can be imported either
        environments = [{"extra": e} for e in ("", *sorted(known))]
        for req in requirements:
            if req.marker is None or any(req.marker.evaluate(e) for e in environments):
                todo.append((canonicalize_name(req.name), set(req.extras)))
    return set(seen)


def modules_outside(extra: str = "lab") -> set[str]:
    """Top-level modules importable here that only distributions outside the extra provide."""
    inside = closure(extra)
    return {
        module
        for module, dists in metadata.packages_distributions().items()
        if not any(canonicalize_name(d) in inside for d in dists)
    }


GUARD = """\
# Written by tests/lab_extra.py: this kernel has only what `notebook-llm[{extra}]` installs.
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


def guard_startup(ipython_dir: Path, extra: str = "lab") -> set[str]:
    """Make ``ipython_dir`` (an ``IPYTHONDIR``) start every kernel with the modules outside the
    extra refused; returns them."""
    outside = modules_outside(extra)
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    text = GUARD.format(extra=extra, outside=json.dumps(sorted(outside)))
    (startup / "00-lab-extra-only.py").write_text(text, "utf-8")
    return outside
