"""Incremental newline-delimited JSON (NDJSON / JSON Lines) splitter: bytes in, lines out.

Ollama streams ``application/x-ndjson``: one JSON object per line. This decoder only frames
lines; parsing the JSON is the caller's job. Rules:

* lines end at ``\\n``; surrounding whitespace (including the ``\\r`` of ``\\r\\n``) is stripped
  and blank lines are skipped;
* a leading UTF-8 BOM is removed;
* each complete line is decoded as UTF-8 with ``errors="replace"``; ``\\n`` never occurs inside
  a multi-byte sequence, so a character split across chunks decodes exactly as if whole;
* a line longer than ``max_line_bytes`` (terminator excluded) raises
  ``LlmError(MALFORMED_RESPONSE)``; one longer than ``max_event_bytes`` (one line is one event)
  raises ``LlmError(RESPONSE_TOO_LARGE)``, checked first.
"""

from __future__ import annotations

from ..core.errors import LlmError
from .framing import DEFAULT_MAX_LINE_BYTES, event_too_large, line_too_long

__all__ = ["NDJSONDecoder"]


class NDJSONDecoder:
    """Split chunks of an NDJSON body into non-empty, stripped text lines.

    Feed every chunk to :meth:`feed` in order and call :meth:`flush` once at the end of the
    body. The result does not depend on where the body was split into chunks.
    """

    __slots__ = ("_buf", "_first", "_max_event", "_max_line", "_pending")

    def __init__(
        self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, max_event_bytes: int | None = None
    ) -> None:
        """``max_line_bytes`` bounds one line (terminator excluded); ``max_event_bytes`` (default:
        no cap) is the cap on one line as an event."""
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._max_line = max_line_bytes
        self._max_event = max_event_bytes if max_event_bytes is not None else 1 << 62
        self._buf = bytearray()
        self._first = True  # the next complete line is the first of the body
        self._pending: LlmError | None = None  # an over-long line, raised at the next call

    def feed(self, chunk: bytes) -> list[str]:
        """Decode one chunk; return the lines it completed (possibly none).

        A line over the limit raises, but only after the lines completed before it were
        returned: the error is kept and raised by the next ``feed``/``flush``.
        """
        if self._pending is not None:
            raise self._pending
        if not chunk:
            return []
        self._buf += chunk
        if b"\n" not in chunk:
            if len(self._buf) > self._max_event:
                self._pending = event_too_large("NDJSON", self._max_event)
                self._buf.clear()
                raise self._pending
            if len(self._buf) > self._max_line:
                self._pending = line_too_long("NDJSON", len(self._buf), self._max_line)
                self._buf.clear()
                raise self._pending
            return []
        parts = bytes(self._buf).split(b"\n")
        self._buf.clear()
        self._buf += parts.pop()
        if len(self._buf) > self._max_event:
            self._pending = event_too_large("NDJSON", self._max_event)
            self._buf.clear()
        elif len(self._buf) > self._max_line:
            self._pending = line_too_long("NDJSON", len(self._buf), self._max_line)
            self._buf.clear()
        return self._lines(parts)

    def flush(self) -> list[str]:
        """End of body: return the last line if it had no terminating newline."""
        if self._pending is not None:
            raise self._pending
        if not self._buf:
            return []
        tail = bytes(self._buf)
        self._buf.clear()
        return self._lines([tail])

    def _lines(self, parts: list[bytes]) -> list[str]:
        out: list[str] = []
        limit = self._max_line
        for raw in parts:
            if len(raw) > self._max_event:
                self._pending = event_too_large("NDJSON", self._max_event)
                self._buf.clear()
                break
            if len(raw) > limit:
                self._pending = line_too_long("NDJSON", len(raw), limit)
                self._buf.clear()
                break
            text = raw.decode("utf-8", "replace")
            if self._first:
                self._first = False
                text = text.removeprefix("\ufeff")
            text = text.strip()
            if text:
                out.append(text)
        return out
