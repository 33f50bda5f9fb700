"""What every mock wire format shares: the format names, content types, frames and encoders.

A stream is rendered as a list of :class:`Frame` (one per flushed write), tagged ``start``,
``content`` or ``end`` so that faults (:mod:`notebook_llm.adapters.mock.faults`) can cut or alter it.
``sse_event`` and ``ndjson_line`` encode one JSON object as an SSE event or an NDJSON line, compactly, as
the providers send them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = [
    "CONTENT_TYPES",
    "Format",
    "Frame",
    "FrameKind",
    "dumps",
    "ndjson_line",
    "now_iso",
    "sse_event",
]

Format = Literal["openai", "anthropic", "ollama"]
FrameKind = Literal["start", "content", "end"]

CONTENT_TYPES: dict[Format, str] = {
    "openai": "text/event-stream; charset=utf-8",
    "anthropic": "text/event-stream; charset=utf-8",
    "ollama": "application/x-ndjson",
}


@dataclass(frozen=True)
class Frame:
    """One write of a stream: raw bytes and where it sits (start / content / end)."""

    data: bytes
    kind: FrameKind


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sse_event(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {dumps(obj)}\n\n".encode()


def ndjson_line(obj: Any) -> bytes:
    return (dumps(obj) + "\n").encode()


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
