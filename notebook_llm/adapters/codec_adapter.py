"""``CodecAdapter``: an adapter that only translates, while the exchange does the HTTP.

An HTTP adapter is a codec (:class:`~notebook_llm.wire.codec.Codec`): options in, request out;
payloads in, events out. A subclass gives :meth:`CodecAdapter.codec`, one codec per stream;
this class runs it through an :class:`~notebook_llm.wire.exchange.HttpExchange`, which sends the
request on the engine's transport (recorded or replayed), applies the body caps, the deadline
and the idle limit, takes a batch's request slot, frames the stream and maps transport failures
to codes. The Lua adapter (:class:`~notebook_llm.adapters.lua.lua_adapter.LuaAdapter`) is one;
a Python adapter for an HTTP API can be one too.

An adapter that streams its events itself (a subclass of
:class:`~notebook_llm.adapters.base.LlmAdapter` with its own ``stream``) still works: one that
sends nothing (the ``mock-direct`` provider), or a plugin's adapter with its own HTTP client.
The latter bypasses the exchange, and with it the caps, time limits, slots, recording and
response watching that the exchange gives every request: it must do them itself.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

import httpx

from ..core.protocol import Event, GenerateOptions
from ..wire.codec import Codec
from ..wire.exchange import DEFAULT_TIMEOUT, HttpExchange
from ..wire.limits import DEFAULT_LIMITS, WireLimits
from .base import LlmAdapter

__all__ = ["CodecAdapter"]


class CodecAdapter(LlmAdapter):
    """Base class of the adapters whose HTTP the exchange does (see the module docstring)."""

    # The exchange takes a batch's slot around the request only, once the codec built it.
    takes_request_slot = True
    #: The adapter's own transport (a test's); ``None``: the engine's, else the network.
    transport: httpx.AsyncBaseTransport | None = None
    #: The timeouts of one socket operation (the request's own limits are ``options.timeouts``).
    timeout: httpx.Timeout = DEFAULT_TIMEOUT
    #: The caps on what one response may hand this adapter (decoded bytes).
    wire_limits: WireLimits = DEFAULT_LIMITS

    @abc.abstractmethod
    def codec(self, options: GenerateOptions, exchange: HttpExchange) -> Codec:
        """The codec of one stream. ``exchange`` is the stream's own, for what the codec must
        fetch on the way (a token, a signed URL) under the same limits and recording."""

    def exchange(self, options: GenerateOptions) -> HttpExchange:
        """The exchange of one stream: the adapter's own transport, else the engine's (its
        recorder or replayer), the adapter's caps and the request's time limits."""
        return HttpExchange.for_options(
            options, transport=self.transport, limits=self.wire_limits, timeout=self.timeout
        )

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        async with contextlib.aclosing(self.stream_batches(options)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def stream_batches(self, options: GenerateOptions) -> AsyncGenerator[list[Event], None]:
        """The events of :meth:`stream`, one non-empty list per network read.

        The engine iterates this instead of :meth:`stream` (``engine/streaming.py``,
        ``guarded``): the events of one read cross the async layers between adapter and caller
        once, as a list, and are flattened only at the public iterator. The codec is made at
        the first step, inside the engine's wait, so a Stop reaches its work.
        """
        exchange = self.exchange(options)
        async with contextlib.aclosing(exchange.stream(self.codec(options, exchange))) as events:
            async for batch in events:
                yield batch
