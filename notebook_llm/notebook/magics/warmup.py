"""Warm the first ``%%llm`` cell up in the background, after ``%load_ext notebook_llm``.

``%load_ext`` stays light (it imports no engine, httpx, Lua runtime or widgets), so the first
cell used to pay for all of them, for compiling the built-in adapter and for starting the
loopback mock server, many times what every later cell costs (``bench/bench_startup.py``).
:func:`start` does that work once per process on a daemon thread right after ``%load_ext``,
while the user reads or types the next cell:

* the imports the first cell makes (engine, httpx, lupa, the widgets of the live view);
* one whole answer from the offline mock, through a throwaway engine that reads no config file
  and no ``.env`` (so it prints nothing and changes nothing the session sees): the openai Lua
  adapter's bytecode, the HTTP transport and the mock server are then all up.

Rules it keeps:

* it never breaks anything: any failure is logged (``notebook_llm.warmup``, debug) and
  swallowed, and the cell then does the work itself as before;
* it does not race with a cell that starts right away: the magics call :func:`wait` before their
  own work, so a cell that comes during the warm-up lets it finish the step it is in (an
  import the cell needs anyway, or the one answer) and stop, and only then runs: nothing runs
  beside the cell, and nothing is done twice but the throwaway answer; a warm-up still running
  after :data:`WAIT_LIMIT` is left to finish alone;
* ``NOTEBOOK_LLM_WARMUP=0`` turns it off.
"""

from __future__ import annotations

import logging
import os
import threading

__all__ = ["STEPS", "WAIT_LIMIT", "join", "start", "wait"]

log = logging.getLogger("notebook_llm.warmup")

#: Seconds a cell waits at most for a warm-up still running (far more than it takes).
WAIT_LIMIT = 5.0

_lock = threading.Lock()
_thread: threading.Thread | None = None
_done = threading.Event()
_abandon = threading.Event()


def _enabled() -> bool:
    return os.environ.get("NOTEBOOK_LLM_WARMUP", "1").strip().lower() not in ("0", "false", "no")


def _import_engine() -> None:
    from ...adapters.lua import lua_adapter  # noqa: F401  (lupa)
    from ...api import chat  # noqa: F401  (httpx, the request pipeline)
    from ...engine import engine  # noqa: F401


def _import_widgets() -> None:
    from ..watching import in_kernel
    from ..widgets import present  # noqa: F401

    if in_kernel():
        from ..widgets import live  # noqa: F401  (anywidget, ipywidgets)


def _one_answer() -> None:
    # One answer from the mock through a throwaway engine: compiles openai.lua, starts the
    # shared mock server and the background loop, runs the transport's code paths once. It
    # reads no config file and no .env, so it prints nothing and the session sees no change.
    from ...engine.engine import Engine

    Engine(config_file=False, env_file=False, retries=0).complete_sync(
        "mock", "echo", prompt="warm-up"
    )


#: The warm-up's steps, in the order the first cell needs what they load.
STEPS = (_import_engine, _import_widgets, _one_answer)


def _warm() -> None:
    try:
        for step in STEPS:
            if _abandon.is_set():  # a cell has started: it does the rest itself
                break
            step()
    except BaseException as exc:  # a warm-up must never break the session
        log.debug("warm-up skipped: %s: %s", type(exc).__name__, exc)
    finally:
        _done.set()


def start() -> bool:
    """Start the warm-up once per process (a no-op after the first call, or when turned off);
    returns whether this call started it."""
    global _thread
    if not _enabled():
        return False
    with _lock:
        if _thread is not None:
            return False
        _thread = threading.Thread(target=_warm, name="notebook_llm-warmup", daemon=True)
        _thread.start()
        return True


def wait(timeout: float = WAIT_LIMIT) -> bool:
    """Let a started warm-up end its current step and stop, and wait for that (at once when
    none was started, or when called from the warm-up itself); returns whether none is left
    running. The cell then does what the warm-up had not done yet."""
    thread = _thread
    if thread is None or thread is threading.current_thread():
        return True
    _abandon.set()
    return _done.wait(timeout)


def join(timeout: float | None = None) -> bool:
    """Wait until a started warm-up has done all its steps (tests, the start-up bench); returns
    whether none is left running."""
    return _thread is None or _done.wait(timeout)
