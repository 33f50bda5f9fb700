"""Issue 13, done-when: a notebook run headless with nbclient goes through a tool that calls
``sys.exit``, the unload-after-reload case, a bad config file, ``--confirm`` and ``%llm key``
with no one to answer, and the kernel is alive at the end, each mistake told in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.util import run_sync

LIVE = """
local a = {{ name = "live", version = "{version}", endpoint = "/chat/completions" }}
function a.transform_request(raw) return raw end
function a.transform_stream_chunk(line) return json.encode({{ done = true }}) end
return a
"""

CELLS = [
    "%load_ext notebook_llm",
    "import argparse, sys\n"
    "def bye(a: int, b: int) -> int:\n"
    '    """Leaves."""\n'
    "    sys.exit(1)\n"
    "def cli(a: int, b: int) -> int:\n"
    '    """An argparse tool given bad arguments."""\n'
    "    p = argparse.ArgumentParser(prog='cli')\n"
    "    p.add_argument('--n', type=int, required=True)\n"
    "    p.parse_args(['--n', 'x'])\n"
    "    return 0\n"
    "def add(a: int, b: int) -> int:\n"
    '    """Adds."""\n'
    "    return a + b",
    "%%llm mock:tools --tools bye -o r1\nadd 1 and 2",
    "%%llm mock:tools --tools cli -o r2\nadd 1 and 2",
    "from notebook_llm import Chat\n"
    "r3 = Chat(provider='mock', model='tools', tools=[bye]).send('1 2', display=False)",
    "print('results:', [r.transcript[1].content[0].text for r in (r1, r2, r3)])",
    f"open('live.lua', 'w').write({LIVE.format(version='0.1')!r})\n%adapter load live.lua",
    f"open('live.lua', 'w').write({LIVE.format(version='0.2')!r})\n"
    "%adapter load live.lua\n%adapter unload live",
    "from notebook_llm.engine.session import default_engine\n"
    "try:\n"
    "    default_engine().adapter('live')\n"
    "    print('live is still there')\n"
    "except Exception as err:\n"
    "    print('after unload:', err.code)",
    "%%llm mock:tools --tools add --confirm -o r4\nadd 2 and 40",
    "print('confirm:', r4.transcript[1].content[0].text)",
    "%llm key openai",
    "%%llm mock:echo\nstill answering",
    "import os\nprint('alive', os.getpid())",
]


def _text(cell: Any, name: str) -> str:
    return "".join(
        o.get("text", "")
        for o in cell.outputs
        if o.get("output_type") == "stream" and o.get("name") == name
    )


def _all(cell: Any) -> str:
    return json.dumps(cell.outputs)


def test_headless_notebook_survives_every_mistake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Path(os.environ["NOTEBOOK_LLM_CONFIG"])
    config.write_text("[providers.openai]\nmodel = 5\n", "utf-8")
    for var in ("OPENAI_API_KEY",):
        monkeypatch.delenv(var, raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    client = NotebookClient(
        nb,
        timeout=600,
        startup_timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        assert client.km is not None
        assert run_sync(client.km.is_alive)()
    cells = nb.cells
    for cell in cells:
        assert "Traceback" not in _all(cell)
        assert not [o for o in cell.outputs if o.get("output_type") == "error"]
    # the session engine is made at the first %%llm: the config file is reported there, once
    assert _text(cells[2], "stderr").strip() == (
        f"notebook_llm: {config}: [providers.openai] model must be a string (in quotes), not an "
        "integer (5); the config file is ignored until you fix it and restart"
    )
    assert _text(cells[5], "stdout").strip() == (
        "results: ['SystemExit: 1', 'SystemExit: 2', 'SystemExit: 1']"
    )
    assert "loaded adapter live 0.1" in _all(cells[6])
    assert "reloaded adapter live 0.2" in _all(cells[7])
    assert "unloaded adapter live" in _all(cells[7])
    assert _text(cells[8], "stdout").strip() == "after unload: NO_ADAPTER"
    assert _text(cells[9], "stderr").strip() == (
        "--confirm: this run has no front end to answer (a headless run), so each tool call is "
        "skipped; run the cell in Jupyter to approve calls"
    )
    assert _text(cells[10], "stdout").strip() == "confirm: the user declined to run this tool"
    assert _text(cells[11], "stderr").splitlines()[0] == (
        "UsageError: %llm key cannot ask for a key here (this front end has no input box): set "
        "the environment variable OPENAI_API_KEY before starting Jupyter, or put "
        "OPENAI_API_KEY=... in a .env file in the notebook's folder"
    )
    assert "still answering" in _all(cells[12])
    assert _text(cells[13], "stdout").startswith("alive ")
