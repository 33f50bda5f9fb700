"""Framing detection for a recorded body: SSE (with or without ``event:`` lines), NDJSON or JSON.

The body is split with the same decoders the runtime uses (``wire/sse.py``, ``wire/ndjson.py``),
so the payloads the inference reads are exactly the strings a drafted script's hook will get.
Every way a body can be unusable (empty, too large, not text, not any of the three framings, no
JSON payload at all, nested too deep) is one ``LlmError`` line saying what to do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import shorten
from ...wire.limits import DEFAULT_LIMITS
from ...wire.ndjson import NDJSONDecoder
from ...wire.sse import SSEDecoder

__all__ = ["MAX_DEPTH", "SAMPLE_HEAD", "SAMPLE_TAIL", "Body", "Payload", "parse_body"]

Framing = Literal["sse", "ndjson", "json"]

#: Payloads read in full when a stream has more: the first ones and the last ones (where the
#: finish, the usage and the end marker are). Paths repeat from payload to payload, so a long
#: stream tells nothing more; the kit's check of the draft still replays every payload.
SAMPLE_HEAD = 2000
SAMPLE_TAIL = 500

#: JSON nested deeper than this is refused: no real API nests an answer that deep, and the
#: inference (and the Lua JSON decoder) walk payloads recursively.
MAX_DEPTH = 64


@dataclass
class Payload:
    """One payload as the hook receives it: its text, its JSON value (``None`` if not JSON) and
    the SSE ``event:`` name it came under (``None`` without one)."""

    text: str
    value: Any = None
    is_json: bool = False
    event: str | None = None


@dataclass
class Body:
    """A recorded body split into payloads."""

    framing: Framing
    payloads: list[Payload] = field(default_factory=list)
    #: Whether the SSE body names its events (``event:`` lines).
    event_lines: bool = False
    size: int = 0
    #: How many payloads were decoded and read (all of them unless the stream is long).
    read: int = 0

    @property
    def json_payloads(self) -> list[tuple[int, Any]]:
        """``(position, value)`` of every JSON payload that was read (position is 0-based)."""
        return [
            (i, p.value) for i, p in enumerate(self.payloads) if p.is_json and p.value is not None
        ]

    def describe(self) -> str:
        """``"SSE with event: lines, 12 payloads"`` and the like (for comments and the CLI)."""
        kind = {"sse": "SSE", "ndjson": "NDJSON", "json": "a non-stream JSON body"}[self.framing]
        if self.framing == "sse":
            kind += " with event: lines" if self.event_lines else " (data: lines only)"
        if self.framing != "json":
            kind += f", {len(self.payloads)} payloads"
            if self.read < len(self.payloads):
                kind += f" (the first {SAMPLE_HEAD} and the last {SAMPLE_TAIL} read)"
        return kind


def _depth_ok(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests at most ``limit`` levels (iterative: no recursion to exhaust)."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return False
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return True


def _loads(text: str) -> tuple[bool, Any]:
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep() from None
    except ValueError:
        return False, None
    # a text with fewer brackets than the limit cannot nest deeper: skip the walk
    if text.count("{") + text.count("[") > MAX_DEPTH and not _depth_ok(value):
        raise _too_deep()
    return True, value


def _too_deep() -> LlmError:
    return LlmError(
        f"the body nests JSON deeper than {MAX_DEPTH} levels: no answer can be found in it; "
        "draft from a real response body",
        ErrorCode.MALFORMED_RESPONSE,
    )


def _looks_sse(text: str) -> bool:
    head = text.lstrip("\ufeff \t\r\n")[:4096]
    for line in head.splitlines():
        if line.startswith(("data:", "event:", "id:", "retry:", ":")):
            return True
        if line.strip():
            return False
    return False


def _sampled(n: int) -> range | list[int]:
    """The payload positions that are decoded and read (see ``SAMPLE_HEAD``)."""
    if n <= SAMPLE_HEAD + SAMPLE_TAIL:
        return range(n)
    return [*range(SAMPLE_HEAD), *range(n - SAMPLE_TAIL, n)]


def _fill(body: Body, texts: list[str], events: list[str | None]) -> Body:
    """Decode the sampled payloads; the others are only marked JSON-looking (an object)."""
    read = set(_sampled(len(texts)))
    for i, text in enumerate(texts):
        if i in read:
            ok, value = _loads(text)
        else:
            ok, value = text[:1] == "{", None
        body.payloads.append(Payload(text, value, ok, events[i]))
    body.read = len(read)
    return body


def _sse(raw: bytes) -> Body:
    dec = SSEDecoder(max_line_bytes=DEFAULT_LIMITS.max_event_bytes)
    events = dec.feed(raw) + dec.flush()
    body = Body("sse", size=len(raw))
    names = [ev.event if ev.event != "message" else None for ev in events]
    body.event_lines = any(names)
    return _fill(body, [ev.data for ev in events], names)


def _ndjson_lines(raw: bytes) -> list[str]:
    dec = NDJSONDecoder(max_line_bytes=DEFAULT_LIMITS.max_event_bytes)
    return dec.feed(raw) + dec.flush()


def parse_body(raw: bytes, label: str = "the body") -> Body:
    """Detect the framing of ``raw`` and split it into payloads (see the module doc)."""
    if len(raw) > DEFAULT_LIMITS.max_body_bytes:
        raise LlmError(
            f"{label} is {len(raw):,} bytes, over the {DEFAULT_LIMITS.max_body_bytes:,}-byte "
            "limit for a body: draft from a shorter recording",
            ErrorCode.INPUT_TOO_LARGE,
        )
    text = raw.decode("utf-8", "replace").removeprefix("\ufeff")
    if not text.strip():
        raise LlmError(
            f"{label} is empty: record a response body first (a .sse, .ndjson or .json file)",
            ErrorCode.INVALID_OPTIONS,
        )
    if _looks_sse(text):
        body = _sse(raw)
    else:
        ok, value = _loads(text)
        if ok and label.lower().endswith((".ndjson", ".jsonl")):
            # a stream of one line (a very short answer): the file's name says it is a stream
            body = Body("ndjson", [Payload(text.strip(), value, True)], size=len(raw), read=1)
        elif ok:
            body = Body("json", [Payload(text, value, True)], size=len(raw), read=1)
        else:
            lines = _ndjson_lines(raw)
            body = _fill(Body("ndjson", size=len(raw)), lines, [None] * len(lines))
            if len(lines) < 2 or not any(p.value is not None for p in body.payloads):
                raise LlmError(
                    f"{label} is not SSE, NDJSON or JSON (it starts {shorten(text, 60)!r}): "
                    "give a recorded response body",
                    ErrorCode.MALFORMED_RESPONSE,
                )
    if not body.json_payloads:
        raise LlmError(
            f"{label} ({body.describe()}) holds no JSON payload, so there is no field to map",
            ErrorCode.MALFORMED_RESPONSE,
        )
    return body
