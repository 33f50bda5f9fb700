"""Binder: install from ``binder/`` into a fresh virtual environment and run the quickstart there.

Does what repo2docker does (``pip install -r binder/requirements.txt`` from the repository
root), adds ``nbclient`` (part of Binder's base image), then executes
``notebooks/quickstart.ipynb`` with the new environment's kernel. Needs PyPI (pip's cache makes
reruns fast); takes about a minute.
"""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

RUN = """
import sys, nbformat
from nbclient import NotebookClient
sys.path.insert(0, sys.argv[4])  # the kernels' ports out of the other workers' way
from kernel_ports import kernel_ports_below_the_ephemeral_range
kernel_ports_below_the_ephemeral_range()
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, startup_timeout=300, kernel_name="python3",
               resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.write(nb, sys.argv[3])
"""


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> str:
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"{cmd[:4]} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def test_binder_environment_runs_the_quickstart(tmp_path: Path) -> None:
    requirements = ROOT / "binder" / "requirements.txt"
    assert requirements.is_file()
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTEST_ADDOPTS"}
    }
    (tmp_path / "config.toml").write_text("")  # empty: a missing named file is warned of
    env.update(
        PATH=f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(env_dir),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        NOTEBOOK_LLM_CONFIG=str(tmp_path / "config.toml"),
        NOTEBOOK_LLM_ADAPTERS_DIR=str(tmp_path / "adapters"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        PYTHONWARNINGS="ignore",
    )
    # As repo2docker does: from the repository root.
    _run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(requirements), "nbclient"],
        env,
        ROOT,
        timeout=1800,  # hang guards, not verdicts: a fresh install on a busy machine is slow
    )
    # The package came from binder/, not from this checkout's editable install.
    where = _run(
        [str(python), "-c", "import notebook_llm, sys; print(notebook_llm.__file__)"],
        env,
        tmp_path,
        timeout=600,
    )
    assert str(env_dir) in where
    # The live view's pane: anywidget (and its prebuilt JupyterLab extension) came with the
    # notebook extra, and the package ships its front-end files (the view, marked).
    shipped = _run(
        [
            str(python),
            "-c",
            "import anywidget; from notebook_llm.notebook.widgets import live; "
            "print(len(live.marked_source()), (live.STATIC / 'live_view.js').is_file())",
        ],
        env,
        tmp_path,
        timeout=600,
    )
    size, view = shipped.split()
    assert int(size) > 40_000
    assert view == "True"

    out = tmp_path / "quickstart.out.ipynb"
    _run(
        [
            str(python),
            "-c",
            RUN,
            str(ROOT / "notebooks" / "quickstart.ipynb"),
            str(tmp_path),
            str(out),
            str(TESTS),
        ],
        env,
        tmp_path,
        timeout=1200,
    )
    import nbformat

    nb = nbformat.read(out, as_version=4)
    texts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", output
            texts.append(
                str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
            )
    joined = "\n".join(texts)
    assert "Result of get_weather: 18°C and sunny in Lisbon" in joined
    assert "finished: aborted" in joined

    # The typed-data notebook (pydantic, pandas, matplotlib) runs there too.
    typed = tmp_path / "typed_data.out.ipynb"
    _run(
        [
            str(python),
            "-c",
            RUN,
            str(ROOT / "notebooks" / "typed_data.ipynb"),
            str(tmp_path),
            str(typed),
            str(TESTS),
        ],
        env,
        tmp_path,
        timeout=1200,
    )
    for cell in nbformat.read(typed, as_version=4).cells:
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", output
