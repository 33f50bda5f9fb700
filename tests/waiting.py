"""Waiting for an event, not for a time: what a test waits for before it goes on.

A test that sleeps "long enough" for something to happen passes on a fast machine and fails on
a busy one. These helpers poll a condition instead and give up only after ``GUARD`` seconds,
a hang guard far beyond what any healthy run needs (a loaded laptop or CI runner included):
reaching it means the thing never happened, not that the machine was slow.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from notebook_llm.adapters.mock.server import MockServer

#: Seconds after which a wait is a hang (a failure), never a verdict on speed.
GUARD = 60.0


async def until(condition: Callable[[], object], what: str, guard: float = GUARD) -> None:
    """Let the event loop run until ``condition()`` is true; fail after ``guard`` seconds."""
    deadline = time.monotonic() + guard
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {guard:g} s for {what}")
        await asyncio.sleep(0.005)


def until_sync(condition: Callable[[], object], what: str, guard: float = GUARD) -> None:
    """:func:`until` for a test outside an event loop (the condition changes in a thread)."""
    deadline = time.monotonic() + guard
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {guard:g} s for {what}")
        time.sleep(0.005)


class HeldServer(MockServer):
    """The mock server, holding every answer until the test calls :meth:`release` (where a test
    used to give the server a latency and hope that the client got somewhere meanwhile)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(latency=_HELD, **kwargs)
        self.gate = threading.Event()

    def release(self) -> None:
        """Answer the requests held so far, and every later one at once."""
        self.gate.set()

    def _sleep(self, seconds: float) -> bool:
        if seconds != _HELD:  # a fault's or a chunk's own delay
            return super()._sleep(seconds)
        while not self.gate.wait(0.01):
            if self._stopping.is_set():
                return False
        return not self._stopping.is_set()


#: The latency a :class:`HeldServer` is made with: what marks the wait for the gate.
_HELD = 1e-9
