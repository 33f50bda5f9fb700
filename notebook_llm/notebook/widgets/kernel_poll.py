"""Letting a Stop click reach a blocking cell that waits for a turn.

A blocking ``Chat.send`` keeps the cell's thread in the turn runner's wait loop
(:mod:`notebook_llm.api.turn_runner`), and that thread is the one that handles comm messages:
a Stop click would wait for the cell to end. Two ways round it, by kernel:

* ipykernel < 7: :func:`ui_poller` gives the turn's observer a function to call on each tick
  that lets the kernel process pending messages, with ``jupyter_ui_poll``.
* ipykernel 7: the kernel has no such step (``do_one_iteration`` is gone), but every shell
  message now passes a *shell channel thread* first, which looks up the comm of each
  ``comm_msg`` and asks it where to route the message (``comm._reply_subshell_for``, ipykernel
  7.4 and later). :func:`clicks_on_arrival` watches there for the Stop button's click and sets
  the stop signal from that thread at once; the main thread handles the click again when the
  cell ends, which changes nothing. ``_reply_subshell_for`` is ipykernel's own, undocumented
  step: where a kernel does not have it, the view hides Stop and says to interrupt the kernel
  or ``await chat.asend(...)`` instead.

``%%llm`` cells need neither: they run as async cells, during which ipykernel 7 dispatches comm
messages itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Poll = Callable[[], None]


@contextmanager
def ui_poller(enabled: bool = True, interval: float = 0.05) -> Iterator[Poll | None]:
    """A function that lets the kernel handle pending comm messages (widget clicks) while a
    cell blocks, or ``None`` outside a kernel or when ``jupyter_ui_poll`` cannot be used."""
    shell = _shell()
    kernel = getattr(shell, "kernel", None) if shell is not None else None
    # jupyter_ui_poll drives kernel.do_one_iteration(), which ipykernel 7 no longer has (there,
    # comm messages are only dispatched while a cell *awaits*: %%llm cells run as async cells).
    if not enabled or kernel is None or not hasattr(kernel, "do_one_iteration"):
        yield None
        return
    try:
        from jupyter_ui_poll import ui_events

        context = ui_events()
        process = context.__enter__()
    except Exception:  # an unsupported kernel: the Stop button waits, interrupt still works
        yield None
        return
    last = [0.0]

    def poll() -> None:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            process(10)

    try:
        yield poll
    finally:
        context.__exit__(None, None, None)


def clicks_on_arrival(button: Any, on_click: Callable[[], None]) -> bool:
    """Call ``on_click`` (from the kernel's shell channel thread, so it must be thread-safe and
    quick) as soon as a click on ``button`` (an ipywidgets ``Button``) reaches the kernel, even
    while the main thread is busy; see the module docstring. Returns whether this kernel lets
    a click be seen that way."""
    shell = _shell()
    kernel = getattr(shell, "kernel", None) if shell is not None else None
    if getattr(kernel, "shell_channel_thread", None) is None:
        return False
    comm = getattr(button, "comm", None)
    route = getattr(comm, "_reply_subshell_for", None)
    if comm is None or not callable(route):
        return False

    def watched_route(data: Any, default: Any) -> Any:
        content = data.get("content") if isinstance(data, dict) else None
        if (
            isinstance(content, dict)
            and data.get("method") == "custom"
            and content.get("event") == "click"
        ):
            try:
                on_click()
            except Exception:  # never break the kernel's message routing
                logging.getLogger(__name__).exception("Stop click")
        return route(data, default)

    comm._reply_subshell_for = watched_route
    return True


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    return get_ipython()
