"""Letting the kernel handle widget clicks while a blocking cell waits for a turn.

A blocking ``Chat.send`` keeps the cell's thread in the turn runner's wait loop
(:mod:`notebook_llm.api.turn_runner`), so the kernel does not read its comm messages: a Stop
click would wait for the cell to end. :func:`ui_poller` gives the turn's observer a function to
call on each tick that lets the kernel process them, with ``jupyter_ui_poll``, where the kernel
supports it (ipykernel < 7). Under ipykernel 7 a blocking cell cannot receive clicks, so the view
hides Stop and says to interrupt or await instead; ``%%llm`` cells avoid this by running as async
cells.
"""

from __future__ import annotations

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


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    return get_ipython()
