"""The package's shape: the layers import only downward, no import cycle, no module named for
nothing in particular or after a standard-library module.

An AST scan (nothing is imported) reads every ``import`` in ``notebook_llm/``: at module level,
inside functions (lazy imports) and under ``if TYPE_CHECKING:``; relative or absolute; and
``from pkg import name`` counts as importing ``pkg.name`` when that is a submodule, else
``pkg`` itself (its ``__init__``). Every elementary cycle of that graph is reported, written
from its alphabetically first module.

The layers are folders (``core`` < ``wire`` < ``adapters`` < ``engine`` < ``api`` <
``notebook``, with ``conformance`` beside ``engine`` and ``api``: it stands on ``core``,
``wire`` and ``adapters``, and only ``notebook`` imports it): a module may import its own layer
and the ones below, and only ``notebook`` may import the notebook libraries (IPython,
ipywidgets, anywidget, ...). The root's ``__init__`` and ``__main__`` join the layers and may
import any of them.

``KNOWN_CYCLES`` lists what is there today and is not fixed yet. The test compares in both
directions: a new cycle fails, and so does an entry that no longer holds, so the list only
shrinks. A module's size is judged in review (one job per module), not by a line cap: the cap
became a target that commits moved code to meet.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "notebook_llm"

#: Import cycles in ``notebook_llm`` today, each written from its alphabetically first module.
#: Empty (built-ins arrive as a plugin, the tool loop is only ``tools.run_tools``, widgets get
#: prices from ``pricing``): keep it so.
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


#: The layers, bottom first, and what each may import besides itself. ``conformance`` (the
#: adapter test kit, a tool over the adapters) stands beside ``engine`` and ``api``.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "wire": frozenset({"core"}),
    "adapters": frozenset({"core", "wire"}),
    "engine": frozenset({"core", "wire", "adapters"}),
    "api": frozenset({"core", "wire", "adapters", "engine"}),
    "conformance": frozenset({"core", "wire", "adapters"}),
    "notebook": frozenset({"core", "wire", "adapters", "engine", "api", "conformance"}),
}
LAYERS = tuple(MAY_IMPORT)

#: What only the notebook layer may import (the kernel, its widgets and their protocol).
NOTEBOOK_LIBRARIES = frozenset(
    {"IPython", "ipykernel", "ipywidgets", "anywidget", "jupyter_ui_poll", "traitlets", "comm"}
)

#: What may stand at the package root besides the layer folders.
ROOT_FILES = frozenset({"__init__.py", "__main__.py", "py.typed"})


def layer_of(module: str, package: str = "notebook_llm") -> str | None:
    """``notebook_llm.api.chat`` -> ``api``; the root modules belong to no layer."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != package or parts[1] == "__main__":
        return None
    return parts[1]


def external_imports(path: Path) -> Iterator[tuple[int, str]]:
    """The top-level names of the other packages a file imports, anywhere in it (lazy and
    ``TYPE_CHECKING`` imports too, and ``import_module("x")`` / ``__import__("x")`` with a
    literal name), with their line numbers."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.lineno, node.module.split(".")[0]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value.lstrip(".").split(".")[0]


def layer_violations(root: Path) -> list[str]:
    """Every import that goes up a layer, or to a notebook library outside ``notebook``."""
    package = root.name
    mods = modules(root)
    known = set(mods)
    found: list[str] = []
    for name, path in sorted(mods.items()):
        layer = layer_of(name, package)
        if layer is None:
            continue  # the root joins the layers
        for target in sorted(set(imports(name, path, known))):
            to = layer_of(target, package)
            if to is None:
                found.append(f"{name} imports the package root {target} (import the layer)")
            elif to != layer and to not in MAY_IMPORT.get(layer, frozenset()):
                found.append(f"{name} ({layer}) imports {target} ({to}), a layer it may not import")
        if layer != "notebook":
            for line, lib in external_imports(path):
                if lib in NOTEBOOK_LIBRARIES:
                    found.append(f"{name}:{line} ({layer}) imports {lib}: only notebook may")
    return found


# ---------------------------------------------------------------- the package


def test_the_root_holds_only_the_layer_folders() -> None:
    stray = sorted(
        p.name
        for p in PACKAGE.iterdir()
        if p.name not in ROOT_FILES
        and p.name != "__pycache__"
        and not (p.is_dir() and p.name in LAYERS)
        and not p.name.startswith("_builtin_adapters")
    )
    assert not stray, f"only the layers and {sorted(ROOT_FILES)} stand at the root: {stray}"
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir()} - {"__pycache__"} <= {
        *LAYERS,
        "_builtin_adapters",
    }


def test_layers_import_only_downward() -> None:
    found = layer_violations(PACKAGE)
    assert not found, (
        "imports against the layers (lazy and TYPE_CHECKING imports count; what each may "
        + "import: "
        + "; ".join(f"{k}: {', '.join(sorted(v)) or 'nothing'}" for k, v in MAY_IMPORT.items())
        + "): pass a value or a callback in instead, or move the code down:\n"
        + "\n".join(found)
    )


def test_no_module_shadows_the_standard_library() -> None:
    names = {
        part
        for p in PACKAGE.rglob("*.py")
        for part in p.relative_to(PACKAGE).with_suffix("").parts
        if part != "__init__"
    }
    shadowing = sorted(names & set(sys.stdlib_module_names))
    assert not shadowing, f"module or folder names that are standard-library names: {shadowing}"


def test_no_import_cycle_beyond_the_known_ones() -> None:
    found = {spell(c) for c in cycles(import_graph(PACKAGE))}
    new = sorted(found - KNOWN_CYCLES)
    assert not new, (
        "new import cycle(s) inside notebook_llm (lazy and TYPE_CHECKING imports count): "
        + "; ".join(new)
        + ". Import only downward (pass a value in instead of importing upward)."
    )


def test_every_known_cycle_still_exists() -> None:
    found = {spell(c) for c in cycles(import_graph(PACKAGE))}
    gone = sorted(KNOWN_CYCLES - found)
    assert not gone, f"fixed, so delete from KNOWN_CYCLES: {gone}"


def _draw_layers() -> Any:
    """``scripts/draw-layers`` as a module (a script without the ``.py`` suffix)."""
    path = PACKAGE.parent / "scripts" / "draw-layers"
    loader = importlib.machinery.SourceFileLoader("draw_layers", str(path))
    spec = importlib.util.spec_from_loader("draw_layers", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_picture_in_the_docs_is_the_one_the_code_draws() -> None:
    draw = _draw_layers()
    # the drawing's own scan agrees with this file's on which layer imports which
    edges: dict[str, set[str]] = {layer: set() for layer in LAYERS}
    for module, targets in import_graph(PACKAGE).items():
        layer = layer_of(module)
        if layer is not None:
            edges[layer] |= {t for m in targets if (t := layer_of(m)) and t != layer}
    assert {name: imports for name, (_, imports) in draw.layers().items()} == edges
    doc = PACKAGE.parent / "docs" / "architecture.md"
    text = doc.read_text("utf-8")
    assert draw.in_doc(text, draw.picture()) == text, (
        "docs/architecture.md shows another picture of the layers than the code draws: "
        "run scripts/draw-layers --write"
    )


def test_the_picture_shows_each_layers_imports(tmp_path: Path) -> None:
    """The drawing reads relative, absolute and lazy imports, and orders the layers so that
    each stands above what it imports."""
    root = tmp_path / "pkg"
    files = {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "import json\n",
        "mid/__init__.py": "",
        "mid/sub/__init__.py": "",
        "mid/sub/b.py": "from ...low import a\n",
        "top/__init__.py": "",
        "top/c.py": "def f():\n    import pkg.mid.sub.b\n    from pkg import low\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, "utf-8")
    lines = _draw_layers().picture(root).splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["top/", "mid/", "low/"]
    assert lines[2].endswith("-> mid, low")
    assert "sub/" in lines[3]
    assert lines[3].endswith("-> low")
    assert lines[4].endswith("-> (nothing)")


def test_no_module_is_named_plain_adapter() -> None:
    """Each module that handles an adapter is named for its role (``adapters/base``,
    ``adapters/mock/direct_adapter``, ``adapters/lua/lua_adapter``,
    ``notebook/magics/adapter_magics``), not plain ``adapter.py``."""
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


@pytest.fixture
def layered(tmp_path: Path) -> Path:
    """A package with one import of each kind that breaks the layers, and some that do not."""
    root = tmp_path / "pkg"
    files = {
        "__init__.py": "from .notebook import view  # the root may join layers\n",
        "core/__init__.py": "",
        "core/base.py": "def f():\n    from ..api import chat  # lazy, upward\n",
        "core/ok.py": "from . import base\nimport json\n",
        "wire/__init__.py": "",
        "wire/net.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pkg.engine import run  # absolute, upward\n"
        ),
        "engine/__init__.py": "",
        "engine/run.py": "from ..core import base\nimport pkg\n",
        "api/__init__.py": "",
        "api/chat.py": (
            "import importlib\nfrom ..engine import run\n"
            "def g():\n    importlib.import_module('ipywidgets')\n"
        ),
        "conformance/__init__.py": "",
        "conformance/kit.py": "from ..wire import net\nfrom ..api import chat  # beside api\n",
        "notebook/__init__.py": "",
        "notebook/view.py": "import IPython\nfrom ..api import chat\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, "utf-8")
    return root


def test_the_layer_rule_sees_lazy_absolute_type_checking_and_import_module(
    layered: Path,
) -> None:
    found = layer_violations(layered)
    assert found == [
        "pkg.api.chat:4 (api) imports ipywidgets: only notebook may",
        "pkg.conformance.kit (conformance) imports pkg.api.chat (api), a layer it may not import",
        "pkg.core.base (core) imports pkg.api.chat (api), a layer it may not import",
        "pkg.engine.run imports the package root pkg (import the layer)",
        "pkg.wire.net (wire) imports pkg.engine.run (engine), a layer it may not import",
    ]


def test_package_init_cycles_are_found(toy: Path) -> None:
    (toy / "__init__.py").write_text("from .sub.e import *\n", "utf-8")
    found = {spell(c, "toy") for c in cycles(import_graph(toy))}
    assert found == {"a -> b -> a", "c -> sub.d -> c", "toy -> sub.e -> toy"}
