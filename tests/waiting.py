"""Waiting for an event, not for a time: what a test waits for before it goes on.

A test that sleeps "long enough" for something to happen passes on a fast machine and fails on
a busy one. These helpers poll a condition instead and give up only after ``GUARD`` seconds,
a hang guard far beyond what any healthy run needs (a loaded laptop or CI runner included):
reaching it means the thing never happened, not that the machine was slow.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

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
