"""Does this Python already have what ``pip install -e '.[EXTRAS]'`` would install?

    python scripts/venv_is_current.py EXTRA[,EXTRA...]     exit 0: yes; 1: no (and why, on stderr)

``scripts/setup-venv --if-missing`` asks this before it runs pip, so ``scripts/demo`` and
``scripts/lab`` install once and then start with no network (pip would rebuild the editable
install, which needs ``hatchling`` from the package index, on every run). "Has it" means: the
``notebook_llm`` it imports is this checkout, and every requirement of ``pyproject.toml``'s
dependencies and of those extras, and of their own dependencies in turn, is installed at a
version inside its range. ``pyproject.toml`` is read as it is now, so a dependency added by a
``git pull`` is installed at the next run.

A hand-written walk, not ``pip check`` (which checks every installed package, not the ones these
extras need) nor ``pip install --dry-run`` (which asks the index); its one library is
``packaging``, which pip uses and which the notebook extra installs (without it: not current).
"""

from __future__ import annotations

import sys
import tomllib
from collections import deque
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SELF = "notebook-llm"


def own_project(root: Path = ROOT) -> dict[str, Any]:
    """The ``[project]`` table of the checkout's ``pyproject.toml``."""
    project: dict[str, Any] = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]
    return project


def walk(project: dict[str, Any], extras: set[str]) -> Iterator[tuple[Any, str | None]]:
    """Every requirement ``pip install '.[EXTRAS]'`` would have to satisfy, once each (with
    the installed version of what it names, ``None`` when that is not installed): the
    project's own, then each installed dependency's, for the extras asked of it."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    self_name = canonicalize_name(SELF)
    asked: dict[str, set[str]] = {}  # distribution -> the extras asked of it so far
    todo: deque[tuple[str, set[str]]] = deque([(self_name, set(extras))])
    while todo:
        name, wanted = todo.popleft()
        if name in asked and wanted <= asked[name]:
            continue
        known = asked.setdefault(name, set())
        known |= wanted
        if name == self_name:
            texts = list(project["dependencies"])
            for extra in sorted(known):
                texts += project["optional-dependencies"][extra]
        else:
            try:
                texts = metadata.requires(name) or []
            except metadata.PackageNotFoundError:
                continue  # said when the requirement that named it was yielded
        environments = [{"extra": e} for e in ("", *sorted(known))]
        for text in texts:
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate(e) for e in environments):
                continue
            dep = canonicalize_name(req.name)
            if dep != self_name:
                try:
                    version: str | None = metadata.version(dep)
                except metadata.PackageNotFoundError:
                    version = None
                yield req, version
            todo.append((dep, set(req.extras)))


def missing(project: dict[str, Any], extras: set[str]) -> list[str]:
    """What the environment lacks for ``extras``, one line each (empty: nothing)."""
    lacking = []
    for req, version in walk(project, extras):
        if version is None:
            lacking.append(f"{req.name} is not installed ({req})")
        elif not req.specifier.contains(version, prereleases=True):
            lacking.append(f"{req.name} {version} is installed, {req} is required")
    return sorted(set(lacking))


def main(argv: list[str]) -> int:
    extras = {e for e in (argv[0] if argv else "").split(",") if e}
    try:
        import packaging  # noqa: F401  (the walk's one library)

        import notebook_llm
    except ImportError as exc:
        print(f"venv_is_current: {exc.name} is not installed", file=sys.stderr)
        return 1
    where = Path(notebook_llm.__file__).resolve()
    if not where.is_relative_to(ROOT):
        print(f"venv_is_current: notebook_llm comes from {where}, not {ROOT}", file=sys.stderr)
        return 1
    lacking = missing(own_project(), extras)
    for line in lacking:
        print(f"venv_is_current: {line}", file=sys.stderr)
    return 1 if lacking else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
