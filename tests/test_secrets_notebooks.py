"""Every notebook, run with a recognisable fake key for every provider, saves no key anywhere:
outputs, metadata, widget state, kernel logs, or a recording made during the run."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import KEY_VARS
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FAKE = "sk-LEAKCHECK-nb-{var}-0123456789abcdef"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_run_with_keys_saves_none_of_them(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = {var: FAKE.format(var=var) for var in KEY_VARS}
    for var, value in keys.items():
        monkeypatch.setenv(var, value)
    work = tmp_path / "nb"
    shutil.copytree(path.parent, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    nb = nbformat.read(work / path.name, as_version=4)
    # Also exercise what leaks most easily: errors from real providers with a key set, and a
    # recording made with keys in the environment.
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "%load_ext notebook_llm\n"
            "%llm record leak-check.jsonl\n"
            "from notebook_llm import Engine\n"
            "_e = Engine()\n"
            "_e.add_provider('keyed', adapter='openai', base_url='http://127.0.0.1:9/v1', "
            "api_key_env='OPENAI_API_KEY', model='m')\n"
            "try:\n"
            "    _e.complete_sync('keyed', prompt='hi')\n"
            "except Exception as err:\n"
            "    print(repr(err), str(err))\n"
            "%llm record stop"
        )
    )
    client = NotebookClient(
        nb,
        timeout=600,
        startup_timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(work)}},
        store_widget_state=True,
    )
    client.execute()
    out = work / "saved.ipynb"
    nbformat.write(nb, out)
    texts = {"saved notebook": out.read_text()}
    for file in work.rglob("*"):
        if file.is_file() and file.suffix in {".jsonl", ".json", ".log", ".txt"}:
            texts[str(file.relative_to(work))] = file.read_text(errors="replace")
    assert "leak-check.jsonl" in texts  # the recording was made
    for where, text in texts.items():
        for var, value in keys.items():
            assert value not in text, f"{var}'s key found in {where}"
