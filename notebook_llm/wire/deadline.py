"""Time limits on one request as a whole: a deadline, and the longest wait for an event.

httpx's timeouts (and aiohttp's under them) bound one socket read each, so a server that sends
a byte every few seconds, an endless run of ``: keepalive`` comments, or response headers two
bytes a second, never trips them: the request runs until its cell is killed. Two limits cover
what they do not:

* ``deadline``: the whole request, from sending it to the end of the body;
* ``idle``: for a stream, the longest time without an event (an SSE event with data, an NDJSON
  line). Comments, empty reads and bytes that do not complete an event do not reset it; the wait
  for the response headers and the first event counts.

Both end the request with ``TIMEOUT`` and one line naming the limit and how to change it. The
defaults suit reasoning models, which may think for minutes before their first token
(:data:`~notebook_llm.core.timeouts.DEFAULT_TIMEOUTS`). Set them per engine (``Engine(timeouts=Timeouts(...))``) or per
request (``engine.complete(..., timeouts=Timeouts(...))``); ``None`` turns one off.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import TypeVar

from ..core.errors import ErrorCode, LlmError
from ..core.timeouts import Timeouts

# Timeouts and its defaults live in core (a request carries them); this module enforces them.
__all__ = ["RequestClock"]

_T = TypeVar("_T")


class RequestClock:
    """The limits of one request, started when it is made: every network wait of the request
    goes through :meth:`run` or :meth:`paced`, and :meth:`heard` marks an event."""

    __slots__ = ("_end", "_idle", "_loop", "_provider", "_quiet_until")

    def __init__(self, timeouts: Timeouts, provider: str, streaming: bool) -> None:
        self._loop = asyncio.get_running_loop()
        now = self._loop.time()
        self._provider = provider
        self._end = now + timeouts.deadline if timeouts.deadline is not None else math.inf
        self._idle = timeouts.idle if streaming else None
        self._quiet_until = now + self._idle if self._idle is not None else math.inf

    def whole_body(self) -> None:
        """The answer is one whole body, not a stream: no idle limit, only the deadline."""
        self._idle = None
        self._quiet_until = math.inf

    def heard(self) -> None:
        """An event arrived: the idle limit starts again."""
        if self._idle is not None:
            self._quiet_until = self._loop.time() + self._idle

    def _when(self) -> float | None:
        when = min(self._end, self._quiet_until)
        return None if when == math.inf else when

    def _expired(self) -> LlmError:
        if self._quiet_until < self._end:
            what = (
                f"{self._provider} sent no event for {self._idle:g} s (the idle limit; "
                "Timeouts(idle=...) per request or Engine(timeouts=...))"
            )
        else:
            what = (
                f"the request to {self._provider} passed its deadline (Timeouts(deadline=...) "
                "per request or Engine(timeouts=...))"
            )
        return LlmError(f"timed out: {what}", ErrorCode.TIMEOUT, provider=self._provider)

    async def run(self, step: Awaitable[_T]) -> _T:
        """Await ``step`` within the limits; ``LlmError(TIMEOUT)`` when one passes first."""
        timeout = asyncio.timeout_at(self._when())
        try:
            async with timeout:
                return await step
        except TimeoutError:
            if timeout.expired():
                raise self._expired() from None
            raise

    async def paced(self, pieces: AsyncGenerator[_T, None]) -> AsyncIterator[_T]:
        """``pieces``, each waited for within the limits (the consumer's own time between two
        pieces counts too, as it is the request's); closed with this iterator."""
        try:
            while True:
                timeout = asyncio.timeout_at(self._when())
                try:
                    async with timeout:
                        piece = await anext(pieces)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    if timeout.expired():
                        raise self._expired() from None
                    raise
                yield piece
        finally:
            await pieces.aclose()
