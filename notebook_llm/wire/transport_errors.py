"""THE mapping of transport failures to :class:`~notebook_llm.core.errors.LlmError`.

Every request goes through :mod:`notebook_llm.wire.exchange`, which calls
:func:`transport_error` on whatever its client raised; nothing else in the package turns an
``httpx`` exception into a code. The codes:

* ``TIMEOUT``: a socket operation timed out (connect, write, a read with a timeout);
* ``MALFORMED_RESPONSE``: bytes that are not HTTP (a bad status line, header or chunk-size
  line): the server's fault, and no retry reads them differently;
* ``TRANSPORT``: the connection failed, or was cut after the server accepted the request
  (:func:`after_headers` words it, and names the context window for a large request).

:func:`after_headers` also words the other failures after an HTTP 200 (an empty body).
"""

from __future__ import annotations

import httpx

from ..core.errors import ErrorCode, LlmError
from ..core.redaction import redact
from .transport import MalformedResponse

__all__ = ["LARGE_REQUEST_CHARS", "after_headers", "transport_error"]

#: A request body above this many characters (about 1,000 tokens) may not fit the context
#: window of a small local model (llama-cpp-python's server defaults to n_ctx 2048 tokens).
LARGE_REQUEST_CHARS = 4000


def after_headers(what: str, request_chars: int) -> str:
    """The message for a server that accepted a request (HTTP 200) and then failed: it says so
    plainly, and for a large request names the likely cause, the model's context window."""
    message = (
        f"the server accepted the request (HTTP 200) but then {what}; it failed while answering"
    )
    if request_chars >= LARGE_REQUEST_CHARS:
        message += (
            f". The request was large (about {request_chars // 4:,} tokens): it may not fit the "
            "model's context window. Start a new conversation or send less, or give the server "
            "a larger context (llama.cpp: --n_ctx)"
        )
    return message


def transport_error(
    exc: BaseException,
    provider: str,
    *,
    accepted: bool = False,
    request_chars: int = 0,
    doing: str | None = None,
) -> LlmError | None:
    """The ``LlmError`` for a failure of a request to ``provider``, or ``None`` when ``exc`` is
    not a transport failure (a bug elsewhere, cancellation: not ours to name).

    ``accepted``: the server had answered with a success status (its headers arrived), so a cut
    connection is a failure while answering. ``doing`` words a side request in the message
    ("asking local for its models"); an ``LlmError`` is handed back as it is, with its
    provider set.
    """
    what = doing or f"talking to {provider}"
    if isinstance(exc, LlmError):
        if exc.provider is None:
            exc.provider = provider
        return exc
    if isinstance(exc, httpx.TimeoutException):
        return LlmError(
            f"timed out {what}: {type(exc).__name__}", ErrorCode.TIMEOUT, provider=provider
        )
    if isinstance(exc, MalformedResponse):
        return LlmError(f"{provider} sent a {exc}", ErrorCode.MALFORMED_RESPONSE, provider=provider)
    if not isinstance(exc, httpx.HTTPError):
        return None
    if accepted:
        # The body was cut: llama.cpp's server does this when generation fails after it has
        # sent its 200 (a prompt over the context window, for one).
        cut = "closed the connection before the answer was complete"
        return LlmError(
            f"{after_headers(cut, request_chars)} ({type(exc).__name__})",
            ErrorCode.TRANSPORT,
            provider=provider,
        )
    failed = f"{doing} failed" if doing else f"connection to {provider} failed"
    return LlmError(
        f"{failed}: {type(exc).__name__}: {redact(str(exc))}",
        ErrorCode.TRANSPORT,
        provider=provider,
    )
