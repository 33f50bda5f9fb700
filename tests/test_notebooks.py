"""Every notebook in ``notebooks/`` runs under nbval and reproduces its saved outputs.

Runs ``pytest --nbval notebooks/`` in a subprocess (so it is part of the normal test command
without collecting notebooks from ``tests/``), with the sanitize file for volatile values and
an isolated config (a user's ``config.toml`` default provider must not change the answers).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def test_notebooks_pass_nbval(tmp_path: Path) -> None:
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {p.name for p in notebooks} >= {
        "quickstart.ipynb",
        "writing_an_adapter.ipynb",
        "tool_calling.ipynb",
        "providers_tour.ipynb",
        "teaching.ipynb",
        "typed_data.ipynb",
        "batch_at_scale.ipynb",
    }
    env = dict(os.environ)
    (tmp_path / "config.toml").write_text("")  # empty: a missing named file is warned of
    env["NOTEBOOK_LLM_CONFIG"] = str(tmp_path / "config.toml")
    env["NOTEBOOK_LLM_ADAPTERS_DIR"] = str(tmp_path / "adapters")
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            "--nbval-sanitize-with",
            str(NOTEBOOKS / "nbval_sanitize.cfg"),
            "-p",
            "no:cacheprovider",
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
