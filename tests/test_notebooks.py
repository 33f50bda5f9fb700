"""Every notebook in ``notebooks/`` runs, in the environment ``scripts/lab`` makes, and
reproduces its saved outputs.

Runs ``pytest --nbval notebooks/`` in a subprocess (so it is part of the normal test command
without collecting notebooks from ``tests/``): cell by cell in order, in one kernel, as Run All
does. The kernel has only what the ``lab`` extra installs: modules that only other packages of
the test environment provide (pytest, nbval, ...) are refused in it as they are missing in
``scripts/lab``'s ``.venv`` (:mod:`lab_extra`), so a notebook that imports something the extra
lacks fails here as it fails for a learner. A server a notebook starts (``python -m
mcp_server_time``) gets only the MCP SDK's default environment, which the guard does not
reach: what notebooks run with ``-m``, and the files in ``notebooks/`` import, are checked
against the extra by reading them. With the sanitize file for volatile values, the
display-update plugin (:mod:`nbval_display_updates`) and an isolated config (a user's
``config.toml`` default provider must not change the answers).
The subprocess has no xdist workers of its own: it is one test of the outer run, on one worker.
"""

from __future__ import annotations

import ast
import itertools
import os
import subprocess
import sys
from pathlib import Path

import nbformat
from IPython.core.inputtransformer2 import TransformerManager
from lab_extra import closure, modules_outside

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TESTS = Path(__file__).resolve().parent


def _imports(tree: ast.AST) -> set[str]:
    """The top-level modules ``tree`` imports, or runs as ``python -m MODULE`` (an argument
    list with ``"-m"`` followed by a name: an MCP server a notebook starts)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.List | ast.Tuple):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            found.update(
                str(module).split(".")[0]
                for flag, module in itertools.pairwise(words)
                if flag == "-m" and isinstance(module, str)
            )
    return found


def _imported_modules(path: Path) -> set[str]:
    """The top-level modules a notebook's code cells import or run (magics turned into the
    Python IPython runs, then read with ``ast``); for a Python file, the file's own."""
    if path.suffix == ".py":
        return _imports(ast.parse(path.read_text("utf-8")))
    found: set[str] = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code":
            found |= _imports(ast.parse(TransformerManager().transform_cell(cell.source)))
    return found


def test_the_notebooks_folder_holds_notebooks_and_what_they_use() -> None:
    """What a learner sees in ``scripts/lab``'s file browser: the notebooks, and the files and
    folders they name (a recording, a demo server they start); no test or maintenance files."""
    sources = "\n".join(
        cell.source
        for path in NOTEBOOKS.glob("*.ipynb")
        for cell in nbformat.read(path, as_version=4).cells
    )
    others = sorted(p.name for p in NOTEBOOKS.iterdir() if p.suffix != ".ipynb")
    assert others, "the notebooks read recordings"
    for name in others:
        assert name in sources, f"notebooks/{name} is used by no notebook"
    assert not list(NOTEBOOKS.rglob("*.cfg"))
    assert not list(NOTEBOOKS.rglob("conftest.py"))


def test_the_lab_extra_has_every_module_the_notebooks_import() -> None:
    lab = closure("lab")
    assert {"jupyterlab", "notebook-llm", "ipykernel"} <= lab
    outside = modules_outside("lab")
    missing = {
        str(path.relative_to(NOTEBOOKS)): sorted(_imported_modules(path) & outside)
        for path in sorted([*NOTEBOOKS.glob("*.ipynb"), *NOTEBOOKS.rglob("*.py")])
    }
    assert not any(missing.values()), f"imports the lab extra does not install: {missing}"
    # the check can fail: the test environment has modules the lab extra does not
    assert {"pytest", "nbval"} <= outside


def test_notebooks_pass_nbval_with_only_the_lab_extra(tmp_path: Path) -> None:
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {p.name for p in notebooks} >= {
        "quickstart.ipynb",
        "writing_an_adapter.ipynb",
        "tool_calling.ipynb",
        "providers_tour.ipynb",
        "teaching.ipynb",
        "typed_data.ipynb",
        "batch_at_scale.ipynb",
        "mcp_tools.ipynb",
    }
    from lab_extra import guard_startup

    refused = guard_startup(tmp_path / "ipython")
    assert "pytest" in refused
    env = dict(os.environ)
    (tmp_path / "config.toml").write_text("")  # empty: a missing named file is warned of
    env["NOTEBOOK_LLM_CONFIG"] = str(tmp_path / "config.toml")
    env["NOTEBOOK_LLM_ADAPTERS_DIR"] = str(tmp_path / "adapters")
    env["IPYTHONDIR"] = str(tmp_path / "ipython")  # the kernels' startup: the lab extra only
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH")) if p)
    env.pop("PYTEST_ADDOPTS", None)
    # The notebooks run in one process, in order, whatever runs this test: nbval's items are the
    # cells of a notebook, which share one kernel and so cannot be spread over xdist workers.
    for var in [v for v in env if v.startswith("PYTEST_XDIST_")]:
        env.pop(var)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "nbval_display_updates",
            "--nbval",
            "--nbval-sanitize-with",
            str(TESTS / "nbval_sanitize.cfg"),
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.kernel_ports",  # the kernels' ports out of the other workers' way
            "--nbval-kernel-startup-timeout=300",  # a hang guard, for a busy machine
            "-q",
            str(NOTEBOOKS),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-4000:]
