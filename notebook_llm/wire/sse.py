"""Incremental Server-Sent Events decoder: bytes in, events out, no I/O.

Follows the WHATWG "event stream interpretation" rules
(https://html.spec.whatwg.org/multipage/server-sent-events.html):

* a leading UTF-8 BOM is removed (also when it arrives split across chunks);
* lines end at ``\\r\\n``, ``\\n`` or ``\\r`` and nowhere else; a chunk that ends in ``\\r`` ends
  the line at once, and a ``\\n`` opening the next chunk is then dropped, so a ``\\r\\n`` split
  across two chunks is one line break;
* ``field:value`` with one optional space after the colon removed; a line with no colon is a
  field with an empty value; lines starting with ``:`` are comments;
* ``data`` lines are joined with ``\\n``; ``event`` sets the type (default ``"message"``);
  ``id`` sets the last event id (ignored if it contains NUL) which persists across events;
  ``retry`` is kept only when it is all ASCII digits; other field names are ignored;
* a blank line dispatches the event if at least one ``data`` line was seen, otherwise it just
  resets the pending ``event``/``retry`` (so an ``event:`` line with no data is not an event).

Text is decoded per complete line with UTF-8 and ``errors="replace"``; since ``\\r`` and ``\\n``
never occur inside a multi-byte UTF-8 sequence, a character split across chunks is decoded
exactly as if it had arrived whole.

Two deliberate deviations from the browser algorithm, for HTTP response bodies that end:

* :meth:`SSEDecoder.flush` treats an unterminated last line as complete and dispatches a pending
  event that lacks its closing blank line (the spec discards it);
* a line longer than ``max_line_bytes`` raises ``LlmError(MALFORMED_RESPONSE)`` instead of
  growing memory without bound, and an event whose ``data`` (all its lines, with the line being
  read) passes ``max_event_bytes`` raises ``LlmError(RESPONSE_TOO_LARGE)``: the line limit
  alone let ``data:`` lines with no blank line between them pile up without end.

Non-SSE bodies: some providers answer a streaming request with a plain JSON error while still
labelling it ``text/event-stream`` (Gemini does this for a bad API key or unknown model). JSON
lines never form a ``data``/``event``/``id``/``retry`` field or a comment, so such a body yields
no events. The decoder keeps the raw bytes until the first SSE line is seen (up to
``max_non_sse_bytes``); after :meth:`~SSEDecoder.flush`, :meth:`~SSEDecoder.non_sse_text`
returns the whole body text when no SSE line was ever seen, so the caller can parse it as JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..core.errors import LlmError
from .framing import DEFAULT_MAX_LINE_BYTES, event_too_large, line_too_long

__all__ = ["SSEDecoder", "SSEEvent"]

_T = TypeVar("_T")
_BOM = b"\xef\xbb\xbf"
_DEFAULT_MAX_NON_SSE = 1024 * 1024


@dataclass(slots=True)
class SSEEvent:
    """One dispatched event. ``id`` is the last event id in force; ``retry`` is in ms."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


class SSEDecoder:
    """Turn chunks of an SSE body into :class:`SSEEvent` objects.

    Feed every chunk to :meth:`feed` in order and call :meth:`flush` once at the end of the
    body. The result does not depend on where the body was split into chunks.
    """

    __slots__ = (
        "_at_start",
        "_buf",
        "_data",
        "_event",
        "_last_id",
        "_max_event",
        "_max_line",
        "_max_non_sse",
        "_pending",
        "_raw",
        "_retry",
        "_saw_sse",
        "_size",
        "_skip_lf",
    )

    def __init__(
        self,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        *,
        max_non_sse_bytes: int = _DEFAULT_MAX_NON_SSE,
        max_event_bytes: int | None = None,
    ) -> None:
        """``max_line_bytes`` bounds one line; ``max_non_sse_bytes`` bounds the kept raw body;
        ``max_event_bytes`` (default: no cap) bounds one event's data."""
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._max_line = max_line_bytes
        self._max_event = max_event_bytes if max_event_bytes is not None else 1 << 62
        self._size = 0  # bytes of data in the pending event
        self._max_non_sse = max_non_sse_bytes
        self._buf = bytearray()  # incomplete line (no terminator yet)
        self._at_start = True  # BOM not yet ruled in or out
        self._skip_lf = False  # the previous chunk ended with "\r"
        self._data: list[bytes] = []
        self._event = ""
        self._retry: int | None = None
        self._last_id: str | None = None
        self._saw_sse = False
        self._raw = bytearray()  # body kept until an SSE line is seen
        self._pending: LlmError | None = None  # an over-long line, raised at the next call

    @property
    def saw_sse(self) -> bool:
        """True once any SSE line (``data``/``event``/``id``/``retry`` field or comment) was seen."""
        return self._saw_sse

    @property
    def last_event_id(self) -> str | None:
        """The last event id set by an ``id`` field, as the spec's last-event-ID buffer."""
        return self._last_id

    def non_sse_text(self) -> str | None:
        """The body text if it held no SSE line at all, else ``None``.

        Meant to be called after :meth:`flush`. Returns ``None`` for a blank body too. The text
        is capped at ``max_non_sse_bytes`` bytes (BOM removed).
        """
        if self._saw_sse:
            return None
        text = _decode(bytes(self._raw))
        return text if text.strip() else None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode one chunk; return the events it completed (possibly none).

        A line over the limit raises, but only after the events completed before it were
        returned: the error is kept and raised by the next ``feed``/``flush``.
        """
        return self._process(self._lines(chunk), self._dispatch)

    def feed_data(self, chunk: bytes) -> list[str]:
        """Like :meth:`feed`, but return only the ``data`` of each event (the stream hot path:
        no :class:`SSEEvent` objects are made). Don't mix with :meth:`feed` on one decoder."""
        lines = self._lines(chunk)
        if not (self._saw_sse and not self._data and not self._event and self._retry is None):
            return self._process(lines, self._dispatch_data)
        # The common event, a "data: " line and the blank line after it, is taken here in
        # pairs, with no state to keep between them (what _process and _dispatch_data would do
        # for it, in fewer steps); from the first other line, _process takes the rest.
        out: list[str] = []
        limit = min(self._max_line, self._max_event + 6)
        n = len(lines) - 1
        i = 0
        while i < n:
            line = lines[i]
            if lines[i + 1] or line[:6] != b"data: " or len(line) > limit:
                break
            out.append(line[6:].decode("utf-8", "replace"))
            i += 2
        if i <= n:
            out += self._process(lines[i:] if i else lines, self._dispatch_data)
        return out

    def _lines(self, chunk: bytes) -> list[bytes]:
        if self._pending is not None:
            raise self._pending
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
                if not chunk:
                    return []
        if self._at_start:
            head = bytes(self._buf) + chunk
            if len(head) < 3 and _BOM.startswith(head):
                self._buf[:] = head
                return []
            self._at_start = False
            self._buf.clear()
            chunk = head[3:] if head.startswith(_BOM) else head
            if not chunk:
                return []
        if not self._saw_sse and len(self._raw) < self._max_non_sse:
            self._raw += chunk[: self._max_non_sse - len(self._raw)]
        if b"\n" not in chunk and b"\r" not in chunk:
            self._buf += chunk
            if self._size + len(self._buf) > self._max_event:
                self._pending = event_too_large("SSE", self._max_event)
                self._buf.clear()
                raise self._pending
            if len(self._buf) > self._max_line:
                self._pending = line_too_long("SSE", len(self._buf), self._max_line)
                self._buf.clear()
                raise self._pending
            return []
        self._buf += chunk
        data = bytes(self._buf)
        self._buf.clear()
        lines = data.splitlines()  # bytes.splitlines splits on \r\n, \n, \r only
        last = data[-1]
        if last == 0x0D:
            self._skip_lf = True
        elif last != 0x0A:
            self._buf += lines.pop()
            if self._size + len(self._buf) > self._max_event:
                self._pending = event_too_large("SSE", self._max_event)
                self._buf.clear()
            elif len(self._buf) > self._max_line:
                self._pending = line_too_long("SSE", len(self._buf), self._max_line)
                self._buf.clear()
        return lines

    def flush(self) -> list[SSEEvent]:
        """End of body: finish an unterminated line and dispatch a pending event.

        Call once, after the last :meth:`feed`. A pending ``event``/``retry`` without data is
        dropped; the last event id is kept, as it would be across a reconnection.
        """
        return self._flush(self._dispatch)

    def flush_data(self) -> list[str]:
        """:meth:`flush` for a decoder fed with :meth:`feed_data`."""
        return self._flush(self._dispatch_data)

    def _flush(self, dispatch: Callable[[], _T]) -> list[_T]:
        if self._pending is not None:
            raise self._pending
        lines: list[bytes] = []
        if self._buf:
            if len(self._buf) > self._max_line:
                raise line_too_long("SSE", len(self._buf), self._max_line)
            lines.append(bytes(self._buf))
            if self._at_start and not self._saw_sse:
                self._raw += self._buf
            self._buf.clear()
        events = self._process(lines, dispatch)
        if self._data:
            events.append(dispatch())
        self._event = ""
        self._retry = None
        return events

    def _process(self, lines: list[bytes], dispatch: Callable[[], _T]) -> list[_T]:
        events: list[_T] = []
        limit = self._max_line
        for line in lines:
            if line[:6] == b"data: " and self._saw_sse and len(line) <= limit:
                self._data.append(line[6:])  # the common line, short-cut
                self._size += len(line) - 6
                if self._size > self._max_event:
                    self._pending = event_too_large("SSE", self._max_event)
                    self._buf.clear()
                    break
                continue
            if not line:
                if self._data:
                    events.append(dispatch())
                else:
                    self._event = ""
                    self._retry = None
                continue
            if len(line) > limit:
                # Keep what came before; the error surfaces at the next feed/flush.
                self._pending = line_too_long("SSE", len(line), limit)
                self._buf.clear()
                break
            colon = line.find(b":")
            if colon == 0:
                self._mark_sse()
                continue
            if colon < 0:
                name, value = line, b""
            else:
                name = line[:colon]
                value = line[colon + 1 :]
                if value[:1] == b" ":
                    value = value[1:]
            if name == b"data":
                self._data.append(value)
                self._size += len(value)
                if self._size > self._max_event:
                    self._pending = event_too_large("SSE", self._max_event)
                    self._buf.clear()
                    break
            elif name == b"event":
                self._event = _decode(value)
            elif name == b"id":
                if b"\x00" not in value:
                    self._last_id = _decode(value)
            elif name == b"retry":
                if value.isdigit():  # bytes.isdigit is ASCII-only
                    self._retry = int(value)
            else:
                continue
            self._mark_sse()
        return events

    def _mark_sse(self) -> None:
        if not self._saw_sse:
            self._saw_sse = True
            self._raw = bytearray()

    def _dispatch(self) -> SSEEvent:
        event, retry = self._event or "message", self._retry
        return SSEEvent(event, self._dispatch_data(), self._last_id, retry)

    def _dispatch_data(self) -> str:
        data = self._data
        text = _decode(data[0] if len(data) == 1 else b"\n".join(data))
        self._data = []
        self._size = 0
        self._event = ""
        self._retry = None
        return text
