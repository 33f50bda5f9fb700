"""One streamed response body of a Lua adapter: bytes in, protocol events out, per network read.

:class:`StreamPipeline` chains the framing (``wire/sse.py`` or ``wire/ndjson.py``), the script's
``transform_stream_chunk`` (called once per read for all its payloads, ``call_each``) and the
:class:`~notebook_llm.adapters.lua.chunk_mapping.ChunkMapper`. It does no I/O: the adapter feeds it each read
and yields the list of events it returns, so the events of one read cross the async layers once.

* ``[DONE]`` or a chunk with ``done = true`` ends the answer; what follows is ignored, and
  :func:`drain` reads the rest of the body (briefly) so the connection can be reused;
* an error met in the middle of a read's payloads is held (``pending``) and raised by
  :meth:`~StreamPipeline.raise_pending` once the events mapped before it were yielded;
* a body that is not the announced format (a proxy's HTML page) is the provider's
  ``MALFORMED_RESPONSE``, and an empty 200 is ``EMPTY_RESPONSE`` (retryable);
* while no block has been opened, the payloads are shown to a
  :class:`~notebook_llm.adapters.lua.dropped_text.DroppedText`: an answer that ends with no block although
  they held text is the script's ``ADAPTER_ERROR`` naming the field, not an empty answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx

from ...core.errors import ErrorCode, LlmError
from ...core.protocol import Event
from ...core.redaction import shorten
from ...wire.limits import DEFAULT_LIMITS, WireLimits
from ...wire.ndjson import NDJSONDecoder
from ...wire.sse import SSEDecoder
from .chunk_mapping import ChunkMapper
from .dropped_text import DroppedText, has_block, judge_events
from .hook_results import after_headers, blame_provider_if_not_json, json_object_output
from .runtime import LuaSandbox


class StreamPipeline:
    """Framing -> ``transform_stream_chunk`` -> ChunkMapper, for one response body."""

    def __init__(
        self,
        sandbox: LuaSandbox,
        mapper: ChunkMapper,
        ndjson: bool,
        name: str,
        request_chars: int = 0,
        limits: WireLimits = DEFAULT_LIMITS,
    ) -> None:
        self.sandbox = sandbox
        self.request_chars = request_chars
        self.mapper = mapper
        self.name = name
        self.ndjson = ndjson
        cap = limits.max_event_bytes
        self.sse = SSEDecoder(max_event_bytes=cap) if not ndjson else None
        self.nd = NDJSONDecoder(max_event_bytes=cap) if ndjson else None
        self.checked_format = False
        #: How many payloads (SSE events with data, NDJSON lines) the framing has completed:
        #: what the idle limit counts as the server being alive (comments are not).
        self.payloads = 0
        #: An error met in the middle of a batch of payloads; raised once the events mapped
        #: before it have been yielded, so nothing that arrived is lost.
        self.pending: LlmError | None = None
        #: Until the first block: the payloads' text, to fail an answer that dropped it all.
        self.witness: DroppedText | None = DroppedText()

    def _watch(self, payloads: list[str], out: list[Event]) -> None:
        if self.witness is None:
            return
        if has_block(out):
            self.witness = None  # the script maps this API's text: nothing more to watch
            return
        self.witness.feed_payloads(payloads)
        judge_events(
            out,
            self.witness,
            "transform_stream_chunk",
            provider=self.mapper.provider,
            adapter=self.name,
        )

    def raise_pending(self) -> None:
        if self.pending is not None:
            err, self.pending = self.pending, None
            raise err

    def _check_ndjson(self, first: str) -> None:
        # A proxy's HTML error page in front of Ollama must not be blamed on the adapter.
        self.checked_format = True
        if first[:1] not in ("{", "["):
            raise LlmError(
                "the response was announced as NDJSON but is not: " + shorten(first, 300),
                ErrorCode.MALFORMED_RESPONSE,
            )

    def feed(self, chunk: bytes) -> list[Event]:
        if self.nd is not None:
            lines = self.nd.feed(chunk)
            if lines and not self.checked_format:
                self._check_ndjson(lines[0])
            return self._payloads(lines)
        assert self.sse is not None
        return self._payloads(self.sse.feed_data(chunk))

    def _payloads(self, payloads: list[str]) -> list[Event]:
        self.payloads += len(payloads)
        out: list[Event] = []
        try:
            self._map(payloads, out)
        except LlmError as err:
            self.pending = err
        self._watch(payloads, out)
        return out

    def _map(self, payloads: list[str], out: list[Event]) -> None:
        if self.mapper.finished or not payloads:
            return
        mapper = self.mapper
        try:
            end = payloads.index("[DONE]")  # the end marker: what follows it is ignored
        except ValueError:
            end = len(payloads)
        items = payloads[:end]
        # parsed: what json.encode wrote comes back as dicts, from one json.loads per read
        results, error = self.sandbox.call_each("transform_stream_chunk", items, parsed=True)
        feed = mapper.feed
        for result in results:
            if mapper.finished:
                return
            if not result:  # "" (or nil): the script skipped this payload; {} maps to nothing
                continue
            if type(result) is dict:
                chunk = result
            else:
                chunk = json_object_output(result, self.name, "transform_stream_chunk")
            out.extend(feed(chunk))
            if chunk.get("done") is True:  # the script's own end marker (message_stop, ...)
                out.extend(mapper.finish())
                return
        if error is not None:
            raise blame_provider_if_not_json(error, items[len(results)])
        if end < len(payloads) and not mapper.finished:
            mapper.mark_end()
            out.extend(mapper.finish())

    def close(self) -> list[Event]:
        if self.nd is not None:
            lines = self.nd.flush()
            if lines and not self.checked_format:
                self._check_ndjson(lines[0])
            out = self._payloads(lines)
        else:
            assert self.sse is not None
            out = self._payloads(self.sse.flush_data())
            if not self.sse.saw_sse and not self.mapper.finished:
                text = (self.sse.non_sse_text() or "").strip()
                if not text:  # an empty 200: retryable, like a stream that gave nothing
                    raise LlmError(
                        after_headers("sent an empty body", self.request_chars),
                        ErrorCode.EMPTY_RESPONSE,
                    )
                raise LlmError(
                    "the response was announced as a stream but is not SSE: " + shorten(text, 300),
                    ErrorCode.MALFORMED_RESPONSE,
                )
        if not self.mapper.finished:
            error, self.pending = self.pending, None
            out.extend(self.mapper.finish(error))
            self._watch([], out)
        return out


async def drain(body: AsyncIterator[bytes], grace: float = 0.5) -> None:
    """Read what follows the end marker (normally just the end of the body), so the connection
    can be reused and a recording is complete; a server that keeps the stream open after it
    does not hold the caller longer than ``grace`` seconds."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError, LlmError):
        async with asyncio.timeout(grace):
            async for _ in body:
                pass
