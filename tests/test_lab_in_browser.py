"""A newcomer's trial in a real browser: the JupyterLab that ``scripts/lab`` starts (its exact
command, from its dry run, serving a copy of ``notebooks/``), in headless Chromium.

The kernels get only what the ``lab`` extra installs (:mod:`lab_extra`), as in ``scripts/lab``'s
own ``.venv``. Checked as a user sees it: no "Jupyter news?" prompt; ``typed_data.ipynb`` runs
with Run All; a ``%%adapter`` cell's editor language (see docs/adapters.md); the conformance
kit's table reads from the left; ``%%llm --help``; and a blocking ``chat.send`` shows a Stop
button that stops it, with the stopped answer's token count kept in its footer.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_extra import guard_startup
from test_browser import _add_cell, _browser_or_fail, _chromium_page, _wait_all_done

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "notebook-llm-lab-trial"
OPENAI_FIXTURE = ROOT / "tests" / "fixtures" / "wire" / "openai" / "stream_text_include_usage.sse"

#: A small adapter, with the Lua a Python colouring gets wrong: a comment with an apostrophe.
ADAPTER_CELL = """%%adapter shout
-- it's Lua: a comment, and "strings" in 'both' quotes
local adapter = { name = "shout", version = "0.1", endpoint = "/shout" }
function adapter.transform_request(raw)
  return raw
end
function adapter.transform_stream_chunk(line)
  return json.encode({ content = line, done = false })
end
return adapter"""

TRIAL_CELLS = [
    "%load_ext notebook_llm",
    ADAPTER_CELL,
    f"%adapter test openai {OPENAI_FIXTURE}",
    "%%llm --help\nthis cell is not sent",
    "from notebook_llm import Chat\n"
    "from notebook_llm.adapters.mock.shared import shared_server\n"
    "shared_server().chunk_delay = 0.05\n"
    'chat = Chat("mock", "lorem", live=True)',
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    """``scripts/lab``'s own command (its dry run prints it) on a copy of ``notebooks/``, the
    kernels limited to the lab extra; yields the base URL."""
    root = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", root)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in TRIAL_CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, root / "trial.ipynb")
    # The test's own user settings: every cell in the DOM, and nothing saved behind its back.
    # (No notification settings here: those are what scripts/lab must bring.)
    settings = tmp_path / "user-settings"
    for plugin, values in {
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
        "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    }.items():
        target = settings / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values), "utf-8")
    guard_startup(tmp_path / "ipython")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    (tmp_path / "config.toml").write_text("")
    env.update(
        VENV=sys.prefix,
        NOTEBOOK_LLM_LAB_DRY_RUN="1",
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        IPYTHONDIR=str(tmp_path / "ipython"),
        NOTEBOOK_LLM_CONFIG=str(tmp_path / "config.toml"),
        NOTEBOOK_LLM_ADAPTERS_DIR=str(tmp_path / "adapters"),
        PYTHONWARNINGS="ignore",
    )
    printed = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "lab"),
            f"--port={port}",
            f"--IdentityProvider.token={TOKEN}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    command = shlex.split(printed)
    assert command[-1] == "quickstart.ipynb"
    env.pop("NOTEBOOK_LLM_LAB_DRY_RUN")
    log = tmp_path / "lab.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, cwd=root, env=env, stdout=sink, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    assert not (ROOT / "notebooks" / "trial.ipynb").exists()  # the copy was served


def _open(page: Any, base: str, name: str) -> None:
    page.goto(f"{base}/lab/tree/{name}?token={TOKEN}", timeout=90_000)
    page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=90_000)
    page.wait_for_function("() => document.body.innerText.includes('Idle')", timeout=90_000)


def _run_all(page: Any) -> None:
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
    _wait_all_done(page, 180)


def _outputs(page: Any) -> str:
    return "\n".join(page.locator(".jp-Notebook .jp-OutputArea-output").all_inner_texts())


def test_typed_data_runs_with_run_all_and_no_news_prompt(lab: str) -> None:
    _browser_or_fail()
    with _chromium_page() as page:
        _open(page, lab, "typed_data.ipynb")
        _run_all(page)  # long after JupyterLab would have asked about news
        text = _outputs(page)
        assert "ModuleNotFoundError" not in text, text[:3000]
        assert "Traceback" not in text, text[:3000]
        assert page.locator(".jp-Notebook .jp-OutputArea-output").count() > 5
        assert "official Jupyter news" not in page.locator("body").inner_text()


def test_the_trial_cells_as_a_user_sees_them(lab: str) -> None:
    _browser_or_fail()
    with _chromium_page() as page:
        _open(page, lab, "trial.ipynb")
        _run_all(page)
        text = _outputs(page)
        assert "Traceback" not in text, text[:3000]

        # The %%adapter cell: JupyterLab gives it the notebook's language (docs/adapters.md).
        adapter_cell = page.locator(".jp-CodeCell", has_text="%%adapter shout").first
        language = adapter_cell.locator(".cm-content").get_attribute("data-language")
        assert language == "python", f"JupyterLab now colours it as {language}: update the docs"
        assert "loaded adapter shout" in adapter_cell.inner_text()

        # The kit's event table reads from the left.
        kit = page.locator(".jp-CodeCell", has_text="%adapter test openai").first
        aligns = kit.locator(".jp-OutputArea-output td").evaluate_all(
            "cells => cells.map(c => getComputedStyle(c).textAlign)"
        )
        assert len(aligns) > 8
        assert set(aligns) == {"left"}, set(aligns)

        # %%llm --help: one line for each option, --max-steps and --no-stream among them.
        helped = page.locator(".jp-CodeCell", has_text="%%llm --help").first.inner_text()
        assert "--max-steps N" in helped
        assert "--no-stream" in helped

        # A blocking chat.send: a Stop button that stops it.
        _add_cell(page, 'r = chat.send("Write a long story.", max_tokens=4000)')
        running = page.locator(".jp-CodeCell", has_text="chat.send").last
        running.locator(".notebook-llm-view .notebook-llm-live", has_text="Lorem").first.wait_for(
            timeout=120_000  # a loaded machine: the bound is generous, the verdict is the view
        )
        stop = running.locator(".notebook-llm-view button", has_text="Stop")
        assert stop.is_visible()
        assert "interrupt the kernel" not in running.inner_text()
        stop.click()
        _wait_all_done(page, 120)  # 4,000 tokens at 50 ms: minutes, had Stop not worked
        shown = running.locator(".jp-Cell-outputArea").inner_text()
        assert "[stopped]" in shown
        assert "mock:lorem · stopped · " in shown
        assert " out" in shown.split("mock:lorem · stopped · ")[1]  # the token count is kept
