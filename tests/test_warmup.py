"""The background warm-up ``%load_ext notebook_llm`` starts (``notebook_llm/notebook/magics/warmup.py``).

Each scenario runs in a fresh process (the warm-up is once per process, and what it loads is
what is checked). No timing is asserted: the order of what happened is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str, **env: str) -> dict[str, object]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    full.pop("NOTEBOOK_LLM_WARMUP", None)
    full.update(env)
    prelude = (
        "import json, sys, io, contextlib\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "from notebook_llm.notebook.magics import warmup\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        env=full,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result: dict[str, object] = json.loads(line[7:])
    return result


def test_load_ext_warms_the_first_cell_up_and_changes_nothing_the_session_sees() -> None:
    result = _run(
        "shell.run_line_magic('load_ext', 'notebook_llm')\n"
        "started = warmup._thread is not None\n"
        "assert warmup.join(60)\n"
        "import notebook_llm.engine.session as session, notebook_llm.adapters.mock.shared as shared\n"
        "heavy = ('httpx', 'lupa', 'ipywidgets', 'notebook_llm.engine.engine', 'notebook_llm.api.chat')\n"
        "print('RESULT ' + json.dumps({'started': started,\n"
        "    'loaded': sorted(m for m in heavy if m in sys.modules),\n"
        "    'server': shared._server is not None,\n"
        "    'session_engine': session._engine is not None}))\n"
    )
    assert result["started"] is True
    assert result["loaded"] == [
        "httpx",
        "ipywidgets",
        "lupa",
        "notebook_llm.api.chat",
        "notebook_llm.engine.engine",
    ]
    assert result["server"] is True  # the mock server is up before the first cell
    # the session's engine (config file, .env, its notices) is still made by the first cell
    assert result["session_engine"] is False


def test_a_cell_right_after_load_ext_waits_for_the_step_in_progress_then_runs_alone() -> None:
    result = _run(
        "import threading, time\n"
        "log = []\n"
        "def slow_step():\n"
        "    log.append('step 1 start')\n"
        "    while not warmup._abandon.is_set():\n"  # until the cell has asked the warm-up to stop
        "        time.sleep(0.001)\n"
        "    log.append('step 1 end')\n"
        "def never():\n"
        "    log.append('step 2')\n"
        "warmup.STEPS = (slow_step, never)\n"
        "shell.run_line_magic('load_ext', 'notebook_llm')\n"
        "while not log: time.sleep(0.001)\n"  # the warm-up is in its first step
        "log.append('cell start')\n"
        "sink = io.StringIO()\n"
        "with contextlib.redirect_stdout(sink):\n"
        "    shell.run_cell('%%llm mock:echo -o out\\nhello there')\n"
        "log.append('cell end')\n"
        "warmup.join(10)\n"
        "print('RESULT ' + json.dumps({'log': log, 'text': shell.user_ns['out'].text}))\n"
    )
    assert result["text"] == "hello there"
    # the step under way ended before the cell did anything; the next step never ran
    assert result["log"] == ["step 1 start", "cell start", "step 1 end", "cell end"]


def test_a_failing_warm_up_breaks_nothing() -> None:
    result = _run(
        "def boom():\n"
        "    raise RuntimeError('no warm-up today')\n"
        "def exit_():\n"
        "    raise SystemExit(3)\n"
        "warmup.STEPS = (boom,)\n"
        "shell.run_line_magic('load_ext', 'notebook_llm')\n"
        "assert warmup.join(10)\n"
        "warmup._warm.__globals__['STEPS'] = (exit_,)\n"
        "warmup._warm()\n"  # even SystemExit stays inside the warm-up
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    shell.run_cell('%%llm mock:echo -o out\\nstill fine')\n"
        "print('RESULT ' + json.dumps({'text': shell.user_ns['out'].text}))\n"
    )
    assert result["text"] == "still fine"


def test_the_warm_up_can_be_turned_off() -> None:
    result = _run(
        "shell.run_line_magic('load_ext', 'notebook_llm')\n"
        "print('RESULT ' + json.dumps({'started': warmup._thread is not None,\n"
        "    'engine': 'notebook_llm.engine.engine' in sys.modules}))\n",
        NOTEBOOK_LLM_WARMUP="0",
    )
    assert result == {"started": False, "engine": False}
