"""A streamed body cut into payloads: the data of each SSE event, or each NDJSON line.

:class:`StreamFraming` wraps the pure decoders (:mod:`notebook_llm.wire.sse`,
:mod:`notebook_llm.wire.ndjson`) with what the exchange checks about the format as a whole:

* a body announced as NDJSON whose first line is not JSON (a proxy's HTML error page in front
  of Ollama) is the provider's ``MALFORMED_RESPONSE``, not the adapter's mistake;
* an SSE body that held no SSE line at all is ``MALFORMED_RESPONSE`` (quoting its start), and
  an empty one ``EMPTY_RESPONSE`` (retryable, like a stream that gave nothing).

:attr:`StreamFraming.feed` is the decoder's own method once nothing is left to check, so a
network read costs one call here.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.errors import ErrorCode, LlmError
from ..core.redaction import shorten
from .codec import Framing
from .ndjson import NDJSONDecoder
from .sse import SSEDecoder
from .transport_errors import after_headers

__all__ = ["StreamFraming"]


class StreamFraming:
    """One streamed body's framing (see the module docstring)."""

    __slots__ = ("_nd", "_sse", "feed")

    def __init__(self, framing: Framing, max_event_bytes: int) -> None:
        self._sse: SSEDecoder | None = None
        self._nd: NDJSONDecoder | None = None
        #: ``feed(read) -> payloads``: one network read's completed payloads.
        self.feed: Callable[[bytes], list[str]]
        if framing == "ndjson":
            self._nd = NDJSONDecoder(max_event_bytes=max_event_bytes)
            self.feed = self._first_ndjson
        else:
            self._sse = SSEDecoder(max_event_bytes=max_event_bytes)
            self.feed = self._sse.feed_data

    def _first_ndjson(self, chunk: bytes) -> list[str]:
        assert self._nd is not None
        lines = self._nd.feed(chunk)
        if lines:
            _check_ndjson(lines[0])
            self.feed = self._nd.feed  # checked: the decoder's own method from now on
        return lines

    def flush(self) -> list[str]:
        """The payloads the end of the body completes."""
        if self._nd is not None:
            if self.feed == self._nd.feed:
                return self._nd.flush()
            lines = self._nd.flush()
            if lines:
                _check_ndjson(lines[0])
            return lines
        assert self._sse is not None
        return self._sse.flush_data()

    def check_complete(self, request_chars: int) -> None:
        """At the end of a body whose answer did not end: raise if the body was not the
        announced format at all (see the module docstring). ``request_chars`` sizes the
        request, for the message."""
        sse = self._sse
        if sse is None or sse.saw_sse:
            return
        text = (sse.non_sse_text() or "").strip()
        if not text:
            raise LlmError(
                after_headers("sent an empty body", request_chars), ErrorCode.EMPTY_RESPONSE
            )
        raise LlmError(
            "the response was announced as a stream but is not SSE: " + shorten(text, 300),
            ErrorCode.MALFORMED_RESPONSE,
        )


def _check_ndjson(first: str) -> None:
    if first[:1] not in ("{", "["):
        raise LlmError(
            "the response was announced as NDJSON but is not: " + shorten(first, 300),
            ErrorCode.MALFORMED_RESPONSE,
        )
