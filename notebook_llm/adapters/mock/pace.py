"""How fast the offline mock streams: at a reading pace where someone watches, at once elsewhere.

The mock models answer in a few milliseconds, so a 2,000-token ``lorem`` answer is over before
the live view has drawn it, and Stop cannot be tried. Where a person watches the cell (an
interactive front end, :func:`notebook_llm.core.audience.someone_watching`) the mock's answers therefore
stream at :data:`DEFAULT_PACE` tokens per second, about the speed of a hosted model; where no
one does (nbclient, nbval, papermill, tests, scripts, the CLI) they come at once, so headless
runs stay fast.

The pace is set, in tokens per second (0 = at once):

* for the session with ``%llm pace N`` (or :func:`set_pace` from Python);
* from the environment with ``NOTEBOOK_LLM_MOCK_PACE=N`` (read at each answer).

The pace applies only where someone watches: a notebook that says ``%llm pace 40`` still runs
at full speed under nbval.

The mock server itself is left alone (it serves everyone in the process and has its own
``chunk_delay`` for tests): the provider adapters pace the events they hand on, token by token
against the clock, so a slow consumer never makes the answer slower still.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator

from ...core.audience import someone_watching
from ...core.protocol import Event, ReasoningDelta, TextDelta, ToolCallDelta
from .models import count_tokens

__all__ = ["DEFAULT_PACE", "PACE_ENV", "current_pace", "paced", "set_pace", "watched_pace"]

#: Tokens per second where someone watches and nothing else was set.
DEFAULT_PACE = 40.0

#: The environment variable that sets the pace (tokens per second, 0 = at once).
PACE_ENV = "NOTEBOOK_LLM_MOCK_PACE"

_session_pace: float | None = None

# The clock and the sleep the pacer uses (tests replace them, and only them).
_clock = time.monotonic
_sleep = asyncio.sleep


def set_pace(tokens_per_second: float | None) -> None:
    """Set the pace for this session (``None``: back to the environment's or the default)."""
    global _session_pace
    if tokens_per_second is not None and not tokens_per_second >= 0:
        raise ValueError(f"the pace is tokens per second, 0 or more (got {tokens_per_second!r})")
    _session_pace = None if tokens_per_second is None else float(tokens_per_second)


def current_pace() -> float:
    """The pace where someone watches: the session's, else ``NOTEBOOK_LLM_MOCK_PACE``, else
    :data:`DEFAULT_PACE` (a value that is not a number >= 0 there counts as unset)."""
    if _session_pace is not None:
        return _session_pace
    raw = os.environ.get(PACE_ENV, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    return DEFAULT_PACE


def watched_pace() -> float:
    """The pace for an answer that starts now: :func:`current_pace` where someone watches the
    cell, else 0 (at once)."""
    return current_pace() if someone_watching() else 0.0


def _tokens(event: Event) -> int:
    if isinstance(event, TextDelta | ReasoningDelta):
        return count_tokens(event.text)
    if isinstance(event, ToolCallDelta):
        return count_tokens(event.arguments_delta)
    return 0


async def paced(events: AsyncIterator[Event], tokens_per_second: float) -> AsyncIterator[Event]:
    """``events`` handed on no faster than ``tokens_per_second`` (0: as they come).

    Each delta waits until the clock reaches the time its tokens are due since the first
    event, so the time spent downstream counts towards the wait instead of adding to it."""
    start: float | None = None
    due = 0
    try:
        async for event in events:
            n = _tokens(event) if tokens_per_second > 0 else 0
            if n:
                now = _clock()
                if start is None:
                    start = now
                else:
                    wait = start + due / tokens_per_second - now
                    if wait > 0:
                        await _sleep(wait)
                due += n
            yield event
    finally:  # a Stop closes this generator: close the request under it now, not at GC
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
