"""What an adapter is to the exchange: a codec. Options in, request out; payloads in, events out.

The exchange (:mod:`notebook_llm.wire.exchange`) does everything that touches the network:
it sends the :class:`WireRequest` a codec builds, reads the status, the body within its caps
and the time limits, frames a stream into payloads, and maps transport failures to errors. A
:class:`Codec` only translates, and knows no socket, no status code and no header:

* :meth:`Codec.request` builds the request (an adapter's hooks may fetch something on the way,
  through the exchange too);
* :meth:`Codec.feed` maps the payloads of one network read (SSE ``data`` or NDJSON lines, as
  text) to protocol events; :meth:`Codec.end` ends a body that stopped without the answer's
  own end; :meth:`Codec.whole` maps a whole (non-stream) body;
* :meth:`Codec.fail` finishes an answer that a failure cut after some of it was handed on;
  :meth:`Codec.refine` may add what to change to the error of a refused request.

The interface lives here, below the adapters, so that what a chunk mapper needs from the
transport comes to it through these calls and no import points up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..core.errors import LlmError
from ..core.protocol import Event

__all__ = ["Codec", "Framing", "WireRequest"]

#: How a streamed body is cut into payloads: Server-Sent Events or JSON lines. The exchange
#: switches to ``ndjson`` when the response says ``application/x-ndjson``.
Framing = Literal["sse", "ndjson"]


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One HTTP request as a codec builds it."""

    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    #: Whether the answer is a stream (framed into payloads) or one whole body.
    streaming: bool = True
    framing: Framing = "sse"


class Codec(Protocol):
    """One generation's translation, made by an adapter for one request (see the module doc)."""

    async def request(self) -> WireRequest:
        """The request to send."""
        ...

    def feed(self, payloads: list[str]) -> list[Event]:
        """The events of one network read's payloads. An error met after some of them is held
        until :meth:`raise_pending`, so the events mapped before it are handed on first."""
        ...

    @property
    def finished(self) -> bool:
        """The answer is complete (its end marker arrived): the exchange reads no further."""
        ...

    def raise_pending(self) -> None:
        """Raise the error :meth:`feed` held, if any."""
        ...

    def end(self) -> list[Event]:
        """The body ended before the answer's own end: its last events (a finish)."""
        ...

    async def whole(self, body: bytes) -> list[Event]:
        """The events of a whole (non-stream) successful body."""
        ...

    def fail(self, error: LlmError) -> list[Event] | None:
        """The events that end an answer cut by ``error`` after some of it was handed on
        (open blocks closed, a ``finish`` with the error); ``None`` when it had ended."""
        ...

    def refine(self, error: LlmError, body: bytes) -> LlmError:
        """The error of a refused request (status >= 400, ``body`` its start), with what this
        API's user should change (or as it is)."""
        ...
