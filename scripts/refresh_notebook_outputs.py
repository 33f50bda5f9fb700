"""Re-execute the notebooks in ``notebooks/`` and save them the way they are committed.

    python scripts/refresh_notebook_outputs.py [NAME.ipynb ...]

Runs each notebook with nbclient in its own folder (as nbval and JupyterLab do), then drops
what only makes sense inside a live front end: outputs that are nothing but a widget view
(their models are gone once the kernel stops, and nbval ignores them) and the saved widget
state. What stays is the ``text/html`` / ``text/plain`` result of every cell, which is what
GitHub, nbviewer and ``nbval`` see. Every ``%%llm`` cell ends as one static output (answer, tool
cards, footer) by itself, so nothing of the answer is lost here. A user's ``config.toml`` and
adapters folder are ignored (as in the nbval test), so two runs write the same bytes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def clean(nb: nbformat.NotebookNode) -> None:
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)  # timestamps: noise in every diff
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data is not None:
                data.pop(WIDGET_VIEW, None)
                if not data:
                    continue
            kept.append(out)
        cell.outputs = kept


def refresh(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    clean(nb)
    nbformat.write(nb, path)
    print(f"refreshed {path.relative_to(NOTEBOOKS.parent)}")


def main(argv: list[str]) -> None:
    paths = [NOTEBOOKS / a for a in argv] or sorted(NOTEBOOKS.glob("*.ipynb"))
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text("")  # an empty config: the presets only, and no "missing file" note
        os.environ.setdefault("NOTEBOOK_LLM_CONFIG", str(config))
        os.environ.setdefault("NOTEBOOK_LLM_ADAPTERS_DIR", str(Path(tmp) / "adapters"))
        for path in paths:
            refresh(path)


if __name__ == "__main__":
    main(sys.argv[1:])
