"""Caps on what the wire may hand us, counted on decoded bytes (after every Content-Encoding).

One place for the numbers, so the stream decoders, the non-stream and error bodies, the Lua
``http_get`` / ``http_post`` built-ins and replayed recordings all stop at the same sizes. Each cap
ends the request with ``RESPONSE_TOO_LARGE`` and one line that names the cap.

The per-event and per-body caps sit well below the Lua state's memory limit (64 MiB by default)
so that a value at the cap can still be handed to a script without exhausting its state.
"""

from __future__ import annotations

from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class WireLimits:
    """The caps of one request. ``Engine(limits=...)`` may later take a custom one."""

    #: One SSE event (all its ``data:`` lines together) or one NDJSON line, decoded.
    max_event_bytes: int = 8 * MiB
    #: A whole non-streamed body, decoded (also a Lua ``http_get``/``http_post`` answer).
    max_body_bytes: int = 16 * MiB
    #: An error body: enough for any provider's message.
    max_error_body_bytes: int = 256 * KiB


DEFAULT_LIMITS = WireLimits()
