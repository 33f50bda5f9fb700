"""What the two line-framed decoders (``sse.py``, ``ndjson.py``) share: the line limit and
the event cap.

Both bound one line so that a body with no line break (a binary blob, a runaway server) cannot
grow a buffer without end; both report the same ``MALFORMED_RESPONSE``, worded for their format,
with the same ``details``. Both also stop at the cap on one event (an SSE event's ``data`` lines
together, one NDJSON line) with ``RESPONSE_TOO_LARGE``. One helper each, so the two cannot drift.
"""

from __future__ import annotations

from typing import Literal

from ..core.errors import ErrorCode, LlmError
from .body import too_large

#: The default bound on one line (terminator excluded), in bytes.
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024

#: What a body of each format is not, when one of its lines is over the limit.
_BODY = {"SSE": "a valid event stream", "NDJSON": "a valid JSON-lines stream"}


def line_too_long(kind: Literal["SSE", "NDJSON"], size: int, limit: int) -> LlmError:
    """The error for a ``kind`` line of at least ``size`` bytes over the ``limit``."""
    return LlmError(
        f"{kind} line of at least {size} bytes exceeds the {limit}-byte limit; "
        f"the body is not {_BODY[kind]}",
        ErrorCode.MALFORMED_RESPONSE,
        details={"max_line_bytes": limit, "line_bytes": size},
    )


def event_too_large(kind: Literal["SSE", "NDJSON"], limit: int) -> LlmError:
    """The error for a ``kind`` event over the ``limit`` (``WireLimits.max_event_bytes``)."""
    what = "one SSE event of the stream" if kind == "SSE" else "one NDJSON line of the stream"
    return too_large(what, limit, "max_event_bytes")
