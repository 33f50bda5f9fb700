"""The package's shape: no import cycle, and no module named for nothing in particular.

An AST scan (nothing is imported) reads every ``import`` in ``notebook_llm/``: at module level,
inside functions (lazy imports) and under ``if TYPE_CHECKING:``; relative or absolute; and
``from pkg import name`` counts as importing ``pkg.name`` when that is a submodule, else
``pkg`` itself (its ``__init__``). Every elementary cycle of that graph is reported, written
from its alphabetically first module.

``KNOWN_CYCLES`` lists what is there today and is not fixed yet. The test compares in both
directions: a new cycle fails, and so does an entry that no longer holds, so the list only
shrinks. A module's size is judged in review (one job per module), not by a line cap: the cap
became a target that commits moved code to meet.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "notebook_llm"

#: Import cycles in ``notebook_llm`` today, each written from its alphabetically first module.
#: Empty since issue 15 (built-ins arrive as a plugin, the tool loop is only ``tools.run_tools``,
#: widgets get prices from ``pricing``): keep it so.
KNOWN_CYCLES: frozenset[str] = frozenset()


# ---------------------------------------------------------------- the scan


def module_name(path: Path, root: Path) -> str:
    """``notebook_llm/a/b.py`` -> ``notebook_llm.a.b``; a package's ``__init__`` is the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _resolve(base: str, level: int, is_package: bool) -> str:
    """The package a relative import of ``level`` dots means, inside module ``base``."""
    parts = base.split(".")
    if not is_package:
        parts.pop()  # a module's own package
    return ".".join(parts[: len(parts) - (level - 1)] if level > 1 else parts)


def imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The package modules that module ``name`` imports, anywhere in its file."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                origin = _resolve(name, node.level, is_package)
                target = f"{origin}.{node.module}" if node.module else origin
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:  # ``from pkg import submodule``
                    yield sub
                elif target in known:
                    yield target


def import_graph(root: Path) -> dict[str, set[str]]:
    mods = modules(root)
    known = set(mods)
    return {name: set(imports(name, path, known)) - {name} for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """Every elementary cycle, as a tuple starting at its smallest module (no repeats).

    A depth-first search from each module that only visits larger modules finds each cycle
    exactly once, from its smallest member; the graph is small enough for that.
    """
    found: set[tuple[str, ...]] = set()

    def walk(start: str, node: str, path: list[str], on_path: set[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                found.add(tuple(path))
            elif nxt > start and nxt not in on_path:
                on_path.add(nxt)
                path.append(nxt)
                walk(start, nxt, path, on_path)
                path.pop()
                on_path.discard(nxt)

    for start in sorted(graph):
        walk(start, start, [start], {start})
    return found


def spell(cycle: tuple[str, ...], package: str = "notebook_llm") -> str:
    """``("notebook_llm.a", "notebook_llm.b")`` -> ``"a -> b -> a"``."""
    short = [m.removeprefix(package + ".") for m in cycle]
    return " -> ".join([*short, short[0]])


# ---------------------------------------------------------------- the package


def test_no_import_cycle_beyond_the_known_ones() -> None:
    found = {spell(c) for c in cycles(import_graph(PACKAGE))}
    new = sorted(found - KNOWN_CYCLES)
    assert not new, (
        "new import cycle(s) inside notebook_llm (lazy and TYPE_CHECKING imports count): "
        + "; ".join(new)
        + ". Import only downward: protocol -> completion -> engine -> tools -> chat -> "
        "widgets -> magics (pass a value in instead of importing upward)."
    )


def test_every_known_cycle_still_exists() -> None:
    found = {spell(c) for c in cycles(import_graph(PACKAGE))}
    gone = sorted(KNOWN_CYCLES - found)
    assert not gone, f"fixed, so delete from KNOWN_CYCLES: {gone}"


def test_no_module_is_named_plain_adapter() -> None:
    """Four modules were once called ``adapter.py``; each is now named for its role
    (``base_adapter``, ``mock/direct_adapter``, ``lua/lua_adapter``, ``magics/adapter_magics``)."""
    plain = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("adapter.py"))
    assert not plain, f"name these modules for their role, not plain adapter.py: {plain}"


# ---------------------------------------------------------------- the scan itself


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A package where each kind of import closes one cycle."""
    root = tmp_path / "toy"
    files = {
        "__init__.py": "from .a import A\n",
        "a.py": "def f():\n    from toy import b  # lazy, absolute, a submodule\n\nA = 1\n",
        "b.py": "from . import a\n",
        "c.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.d import D\n"),
        "sub/__init__.py": "",
        "sub/d.py": "from ..c import *\nimport toy.sub.e\n",
        "sub/e.py": "from .. import A  # a name from the package's __init__\n",
        "f.py": "import json\nfrom toy.sub import e\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, "utf-8")
    return root


def test_the_scan_sees_lazy_type_checking_relative_and_submodule_imports(toy: Path) -> None:
    graph = import_graph(toy)
    assert graph["toy.a"] == {"toy.b"}
    assert graph["toy.b"] == {"toy.a"}
    assert graph["toy.c"] == {"toy.sub.d"}
    assert graph["toy.sub.d"] == {"toy.c", "toy.sub.e"}
    assert graph["toy.sub.e"] == {"toy"}
    assert graph["toy.f"] == {"toy.sub.e"}
    assert {spell(c, "toy") for c in cycles(graph)} == {"a -> b -> a", "c -> sub.d -> c"}


def test_package_init_cycles_are_found(toy: Path) -> None:
    (toy / "__init__.py").write_text("from .sub.e import *\n", "utf-8")
    found = {spell(c, "toy") for c in cycles(import_graph(toy))}
    assert found == {"a -> b -> a", "c -> sub.d -> c", "toy -> sub.e -> toy"}
