"""The README's tour, run as a newcomer types it: each code block one cell of a fresh kernel,
in order, headless (nbclient), on the offline mock. A block that needs something the README
never defined fails here, as it failed for the reader."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

#: The fence languages of the tour that are notebook cells (magic cells carry none).
CELL_LANGUAGES = {"", "python"}


def tour_blocks(text: str) -> list[str]:
    """The code blocks of the README's "A short tour" section (to the next ``## `` heading)
    that are notebook cells, in order."""
    start = text.index("\n## A short tour\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    blocks = re.findall(r"^```([\w-]*)\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)
    return [code for lang, code in blocks if lang in CELL_LANGUAGES]


def _outputs(cell: Any) -> str:
    return json.dumps(cell.outputs, ensure_ascii=False)


def test_the_tour_runs_in_a_fresh_kernel_as_typed(tmp_path: Path) -> None:
    blocks = tour_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    assert blocks[0].strip() == "%load_ext notebook_llm"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code.rstrip("\n")) for code in blocks]
    client = NotebookClient(
        nb,
        timeout=600,
        startup_timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, naming the block, at the first that fails
    for cell in nb.cells:
        text = _outputs(cell)
        assert not [o for o in cell.outputs if o.get("output_type") == "error"], cell.source
        assert "Traceback" not in text
        assert "UsageError" not in text, (cell.source, text)
        assert "LLM error" not in text, (cell.source, text)
    tool_cells = [c for c in nb.cells if "--tools get_weather" in c.source]
    assert tool_cells, "the tour calls a tool"
    # the tool ran, on the city the tour defined
    assert "sunny in" in _outputs(tool_cells[0])
    python_cell = next(c for c in nb.cells if "engine.complete_sync" in c.source)
    assert "hello" in _outputs(python_cell)


def test_the_tour_blocks_are_found() -> None:
    text = (
        "intro\n## A short tour\n\n```python\na = 1\n```\n\ntext\n\n```\n%%llm\nhi\n```\n"
        "```lua\nreturn {}\n```\n## Next\n```python\nb = 2\n```\n"
    )
    assert tour_blocks(text) == ["a = 1\n", "%%llm\nhi\n"]
