"""The README's ``bash scripts/demo`` and ``bash scripts/lab`` after their first run: nothing is
installed again and nothing needs the network.

The second run is played on a venv that has everything (the test environment's own) seen
through a stand-in ``VENV/bin/python`` that runs that Python but refuses ``-m pip`` (and logs
it), with pip's index pointed at nothing and every proxy at a closed port: a run that still
installs, or reaches for the network, fails here as it failed offline. The stand-in also keeps
the test environment from ever being changed.
"""

from __future__ import annotations

import json
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


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns


def _second_run_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A ``VENV`` whose ``bin/python`` is this Python, except that ``-m pip`` is refused and
    written to the returned log."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "pip-runs.log"
    log.write_text("")
    python = venv / "bin" / "python"
    python.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" -m pip "*) echo "$*" >> ' + f"'{log}'" + "; exit 3;; esac\n"
        f"exec '{sys.executable}' \"$@\"\n"
    )
    python.chmod(0o755)
    return venv, log


def _offline_env(tmp_path: Path, venv: Path) -> dict[str, str]:
    dead = f"http://127.0.0.1:{_closed_port()}"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    for var in ("NO_PROXY", "no_proxy", "NOTEBOOK_LLM_NO_INSTALL", "NOTEBOOK_LLM_LAB_DRY_RUN"):
        env.pop(var, None)
    env.update(
        VENV=str(venv),
        PIP_NO_INDEX="1",
        PIP_INDEX_URL=dead,
        PIP_FIND_LINKS="",
        HTTP_PROXY=dead,
        HTTPS_PROXY=dead,
        http_proxy=dead,
        https_proxy=dead,
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        PYTHONWARNINGS="ignore",
    )
    return env


def test_demo_installs_nothing_on_its_second_run(tmp_path: Path) -> None:
    venv, pip_log = _second_run_venv(tmp_path)
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo")],
        env=_offline_env(tmp_path, venv),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert pip_log.read_text() == "", "the second run ran pip: " + pip_log.read_text()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Hello from notebook_llm! Every piece of this streamed back." in proc.stdout
    assert "installing" not in proc.stderr


def test_setup_installs_when_pyproject_asks_for_what_is_missing(tmp_path: Path) -> None:
    """The other side: a requirement the venv lacks (here an extra it never installed) sends
    the run to pip, which this stand-in refuses and logs."""
    venv, pip_log = _second_run_venv(tmp_path)
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup-venv"), "--if-missing", "interop"],
        env=_offline_env(tmp_path, venv),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode != 0
    assert "-m pip install" in pip_log.read_text()


def test_the_venv_check_names_what_is_missing() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import venv_is_current
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    project = venv_is_current.own_project()
    assert venv_is_current.missing(project, {"lab"}) == []
    project = {
        **project,
        "optional-dependencies": {
            **project["optional-dependencies"],
            "future": ["httpx>=999", "no-such-package-here>=1", "notebook-llm[lab]"],
        },
    }
    lacking = venv_is_current.missing(project, {"future"})
    assert any(line.startswith("httpx ") and "httpx>=999 is required" in line for line in lacking)
    assert "no-such-package-here is not installed (no-such-package-here>=1)" in lacking
    assert len(lacking) == 2


def test_lab_starts_offline_on_its_second_run_and_asks_about_no_news(tmp_path: Path) -> None:
    venv, pip_log = _second_run_venv(tmp_path)
    env = _offline_env(tmp_path, venv)
    log = tmp_path / "lab.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "lab"), f"--port={_closed_port()}"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and url is None:
            found = re.search(
                r"http://127\.0\.0\.1:\d+/lab/tree/quickstart\.ipynb\?token=\w+",
                log.read_text(errors="replace"),
            )
            url = found.group(0) if found else None
            time.sleep(0.3)
        assert url is not None, log.read_text()[-3000:]
        base, token = url.split("/lab/tree/")[0], url.rsplit("token=", 1)[1]
        settings_url = (
            f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}"
        )
        body = None
        while time.monotonic() < deadline and proc.poll() is None and body is None:
            try:
                with urllib.request.urlopen(settings_url, timeout=5) as resp:
                    body = json.loads(resp.read())
            except OSError:
                time.sleep(0.3)
        assert body is not None, log.read_text()[-3000:]
        # JupyterLab shows "Would you like to get notified about official Jupyter news?" when
        # this is "none" (its own default); here it is answered, and no update check either.
        # What the front end reads (the "composite"): the user's setting, else the schema's
        # default, which the server gives with the app settings' overrides applied.
        properties = body["schema"]["properties"]
        composite = {k: body["settings"].get(k, properties[k]["default"]) for k in properties}
        # JupyterLab shows "Would you like to get notified about official Jupyter news?" when
        # fetchNews is "none" (its own default); here it is answered, with no update check.
        assert composite["fetchNews"] == "false"
        assert composite["checkForUpdates"] is False
        assert pip_log.read_text() == "", pip_log.read_text()
        assert "installing" not in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
