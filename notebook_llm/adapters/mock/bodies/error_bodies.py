"""Error bodies and faulty frames of the mock server, in each provider's own shape.

:func:`error_body` is the HTTP error answer for an error kind (status and body, as OpenAI,
Anthropic or Ollama send it); :func:`error_frame` an in-stream error event after a 200;
:func:`malformed_frame` a frame cut short; :func:`oversized_frame` a valid frame padded to a
given size (the ``X-Mock-Fault`` faults of :mod:`notebook_llm.adapters.mock.faults` use them).
"""

from __future__ import annotations

from typing import Any, Literal

from .frames import Format, dumps, ndjson_line, now_iso, sse_event
from .render import ollama_message, openai_chunk

__all__ = ["ErrorKind", "error_body", "error_frame", "malformed_frame", "oversized_frame"]

ErrorKind = Literal[
    "model_not_found", "unauthorized", "rate_limit", "server_error", "invalid_request", "not_found"
]

_OPENAI_ERRORS: dict[str, tuple[int, str, str | None, str]] = {
    "model_not_found": (404, "invalid_request_error", "model_not_found", ""),
    "unauthorized": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided.",
    ),
    "rate_limit": (429, "rate_limit_error", "rate_limit_exceeded", "Rate limit reached (mock)."),
    "server_error": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    "invalid_request": (400, "invalid_request_error", None, "Invalid request."),
    "not_found": (404, "invalid_request_error", None, "Unknown route."),
}
_ANTHROPIC_TYPES = {
    "model_not_found": "not_found_error",
    "unauthorized": "authentication_error",
    "rate_limit": "rate_limit_error",
    "server_error": "api_error",
    "invalid_request": "invalid_request_error",
    "not_found": "not_found_error",
}


def error_body(fmt: Format, kind: ErrorKind, message: str = "") -> tuple[int, dict[str, Any]]:
    """HTTP status and provider-style error body for an error ``kind``."""
    status, typ, code, default = _OPENAI_ERRORS[kind]
    message = message or default
    if fmt == "openai":
        return status, {"error": {"message": message, "type": typ, "param": None, "code": code}}
    if fmt == "anthropic":
        err = {"type": _ANTHROPIC_TYPES[kind], "message": message}
        return status, {"type": "error", "error": err, "request_id": "req_mock"}
    return status, {"error": message}


def error_frame(fmt: Format) -> bytes:
    """An in-stream error event (sent with HTTP 200 after some content)."""
    if fmt == "openai":
        err = {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
        }
        return sse_event({"error": err})
    if fmt == "anthropic":
        err = {"type": "overloaded_error", "message": "Overloaded"}
        return sse_event({"type": "error", "error": err}, "error")
    return ndjson_line(
        {"error": "an error was encountered while running the model: unexpected EOF"}
    )


def malformed_frame(fmt: Format) -> bytes:
    """A frame whose JSON is cut short (invalid)."""
    if fmt == "openai":
        return b'data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"oo\n\n'
    if fmt == "anthropic":
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"oo\n\n'
    return b'{"model":"mock","message":{"role":"assistant","content":"oo\n'


def oversized_frame(fmt: Format, size: int, *, model: str, rid: str) -> bytes:
    """A valid content frame whose JSON data line is ``size`` bytes long (padded with ``x``)."""
    if fmt == "openai":
        line = "data: " + dumps(openai_chunk(rid, model, {"content": "\0"}))
        prefix = ""
    elif fmt == "anthropic":
        delta = {"type": "text_delta", "text": "\0"}
        ev = {"type": "content_block_delta", "index": 0, "delta": delta}
        line, prefix = "data: " + dumps(ev), "event: content_block_delta\n"
    else:
        msg = ollama_message(content="\0")
        line = dumps({"model": model, "created_at": now_iso(), "message": msg, "done": False})
        prefix = ""
    pad = max(size - (len(line.encode()) - len('"\\u0000"') + 2), 0)
    data = line.replace('"\\u0000"', '"' + "x" * pad + '"')
    tail = "\n" if fmt == "ollama" else "\n\n"
    return (prefix + data + tail).encode()
