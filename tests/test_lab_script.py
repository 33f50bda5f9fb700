"""``bash scripts/lab``: the README's one command into JupyterLab, tried as a user runs it.

The script is started for real (on the test's own environment, which has JupyterLab: the venv
is there, so nothing is installed), and the quickstart's page must answer at the URL it prints.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "scripts" / "lab"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_readme_gives_the_lab_command_at_the_top() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```bash", 1)[1].split("```", 1)[0]
    assert "bash scripts/lab" in first_block
    assert "bash scripts/demo" in first_block
    assert "bash scripts/test" in first_block
    assert "%load_ext notebook_llm" in readme
    assert "[notebook]" in readme  # how to install into an existing Jupyter
    assert os.access(LAB, os.X_OK)


def test_the_command_opens_the_quickstart(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(
        VENV=sys.prefix,
        NOTEBOOK_LLM_LAB_DRY_RUN="1",
    )
    out = subprocess.run(
        ["bash", str(LAB), "--port=1234"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "-m jupyterlab" in out
    assert out.rstrip().endswith("quickstart.ipynb")
    assert "--no-browser" in out  # no display here
    assert out.count("port=") == 1  # the given port only: a second one is refused


def test_lab_starts_and_serves_the_quickstart(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(
        VENV=sys.prefix,  # the test's environment already has JupyterLab: nothing to install
        NOTEBOOK_LLM_NO_INSTALL="1",  # and should it lack something, fail instead of installing
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        PYTHONWARNINGS="ignore",
    )
    log = tmp_path / "lab.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            ["bash", str(LAB), f"--port={port}"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = None
        deadline = time.monotonic() + 180  # a hang guard: JupyterLab on a busy machine
        page = ""
        while time.monotonic() < deadline and proc.poll() is None:
            text = log.read_text(errors="replace")
            found = re.search(
                r"http://127\.0\.0\.1:\d+/lab/tree/quickstart\.ipynb\?token=\w+", text
            )
            url = found.group(0) if found else None
            if url:
                try:
                    with urllib.request.urlopen(url, timeout=5) as resp:
                        page = resp.read().decode()
                    break
                except OSError:
                    pass
            time.sleep(0.5)
        assert url is not None, log.read_text()[-3000:]
        assert f":{port}/" in url
        assert "<title>JupyterLab" in page, log.read_text()[-3000:]
        assert '"treePath": "quickstart.ipynb"' in page
        api = url.replace(
            "/lab/tree/quickstart.ipynb?", "/api/contents/quickstart.ipynb?content=0&"
        )
        with urllib.request.urlopen(api, timeout=5) as resp:
            assert b'"type": "notebook"' in resp.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
