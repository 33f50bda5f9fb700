"""What comes back to a Lua adapter: hook results, a whole body, and failures, as one-liners.

* :func:`json_object_output` parses what ``transform_stream_chunk`` / ``transform_response``
  returned (a JSON object, fast path through the C scanner) or says what the hook must return;
* :func:`map_whole_body` maps a whole (non-stream) 200 body through ``transform_response`` to
  protocol events; the stream path and the conformance kit's replay share it;
* :func:`blame_provider_if_not_json` turns a hook's failure on a payload that is not JSON into
  the provider's ``MALFORMED_RESPONSE`` (the script is not at fault);
* :class:`TransportGuard` maps httpx failures to ``LlmError`` at one boundary;
  :func:`after_headers` words a failure after HTTP 200 (and names the context window when the
  request was large). Bodies are read within their caps by :mod:`notebook_llm.wire.body`.
"""

from __future__ import annotations

import json
import json.scanner
from typing import Any, cast

import httpx

from ...core.errors import ErrorCode, LlmError
from ...core.protocol import Event
from ...core.redaction import redact, shorten
from ...wire.transport import MalformedResponse
from .chunk_mapping import ChunkMapper, map_response
from .dropped_text import DroppedText, has_block, judge_events
from .runtime import LuaSandbox

#: A request body above this many characters (about 1,000 tokens) may not fit the context
#: window of a small local model (llama-cpp-python's server defaults to n_ctx 2048 tokens).
LARGE_REQUEST_CHARS = 4000


def map_whole_body(sandbox: LuaSandbox, raw: bytes, *, provider: str, adapter: str) -> list[Event]:
    """A whole (non-stream) body -> ``transform_response`` -> protocol events; a body that held
    text mapped to no block ends in the script's error (:mod:`.dropped_text`)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        out = sandbox.call("transform_response", text)
    except LlmError as err:
        raise blame_provider_if_not_json(err, text) from None
    return _whole_body_events(out, text, provider=provider, adapter=adapter)


async def amap_whole_body(
    sandbox: LuaSandbox, raw: bytes, *, provider: str, adapter: str
) -> list[Event]:
    """:func:`map_whole_body` with the hook awaited (its ``http_get`` on the stream's transport)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        out = await sandbox.acall("transform_response", text)
    except LlmError as err:
        raise blame_provider_if_not_json(err, text) from None
    return _whole_body_events(out, text, provider=provider, adapter=adapter)


def _whole_body_events(out: Any, text: str, *, provider: str, adapter: str) -> list[Event]:
    resp = json_object_output(out, adapter, "transform_response")
    events = map_response(resp, provider=provider, adapter=adapter)
    if not has_block(events):  # an answer with nothing in it: did the body hold text?
        witness = DroppedText()
        witness.feed_payloads([text])
        judge_events(events, witness, "transform_response", provider=provider, adapter=adapter)
    return events


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


def blame_provider_if_not_json(err: LlmError, payload: str) -> LlmError:
    """A hook that failed on a payload that is not JSON: the provider's fault, not the script's."""
    if err.code != ErrorCode.ADAPTER_ERROR:
        return err
    try:
        json.loads(payload)
    except ValueError:
        return LlmError(
            f"the provider sent a body or stream line that is not valid JSON: {shorten(payload, 200)!r} "
            f"(the adapter said: {err.message})",
            ErrorCode.MALFORMED_RESPONSE,
            adapter=err.adapter,
            hook=err.hook,
            lua_line=err.lua_line,
        )
    return err


# The C scanner behind json.loads, called directly: a hook's result is almost always a bare
# object that json.encode wrote, and skipping json.loads' wrappers (type checks, the whitespace
# regex) saves a good part of its cost per stream chunk. Anything else returns None and takes
# the full json.loads path, which gives the same value or the error to report.
_scan_once = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))


def _scan_object(text: str) -> dict[str, Any] | None:
    if not isinstance(text, str) or text[:1] != "{":
        return None
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError):
        return None
    if end != len(text) or not isinstance(value, dict):
        return None
    return value


def json_object_output(value: Any, adapter: str, hook: str) -> dict[str, Any]:
    """A hook's result parsed as a JSON object, or ``ADAPTER_ERROR`` saying what was expected."""
    scanned = _scan_object(value)  # the common case, without json.loads' wrappers
    if scanned is not None:
        return scanned
    parsed = _parse_json_output(value, adapter, hook)
    if not isinstance(parsed, dict):
        skip = ' or ""' if hook == "transform_stream_chunk" else ""
        raise LlmError(
            f"adapter {adapter!r}: {hook} must return a JSON object{skip}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook=hook,
        )
    return parsed


def _parse_json_output(value: Any, adapter: str, hook: str) -> Any:
    if isinstance(value, dict | list):
        return value
    if not isinstance(value, str):
        raise LlmError(
            f"adapter {adapter!r}: {hook} must return a JSON string, got {type(value).__name__}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook=hook,
        )
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise LlmError(
            f"adapter {adapter!r}: {hook} returned invalid JSON ({exc.msg} at {exc.pos}): {shorten(value, 200)!r}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook=hook,
        ) from None


class TransportGuard:
    """Map httpx failures to ``LlmError`` at one boundary (the httpx way).

    Before any event was produced the error is raised (so the engine may retry it); after
    output has started, the stream is finished with the error (``tail``) and the partial blocks
    are kept.
    """

    def __init__(self, provider: str, mapper: ChunkMapper, request_chars: int = 0) -> None:
        self.provider = provider
        self.mapper = mapper
        self.request_chars = request_chars
        #: Whether the server answered with a success status (its headers arrived).
        self.accepted = False
        self.started = False
        self.tail: list[Event] | None = None

    def __enter__(self) -> TransportGuard:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        if exc is None:
            return False
        if isinstance(exc, httpx.TimeoutException):
            err = LlmError(
                f"timed out talking to {self.provider}: {type(exc).__name__}",
                ErrorCode.TIMEOUT,
                provider=self.provider,
            )
        elif isinstance(exc, MalformedResponse):
            # Bytes that are not HTTP (a bad chunk-size line, status line or header): the
            # server's fault, and no retry will read them differently.
            err = LlmError(
                f"{self.provider} sent a {exc}",
                ErrorCode.MALFORMED_RESPONSE,
                provider=self.provider,
            )
        elif isinstance(exc, httpx.HTTPError) and self.accepted:
            # The body was cut: llama.cpp's server does this when generation fails after it
            # has sent its 200 (a prompt over the context window, for one).
            what = "closed the connection before the answer was complete"
            err = LlmError(
                f"{after_headers(what, self.request_chars)} ({type(exc).__name__})",
                ErrorCode.TRANSPORT,
                provider=self.provider,
            )
        elif isinstance(exc, httpx.HTTPError):
            err = LlmError(
                f"connection to {self.provider} failed: {type(exc).__name__}: {redact(str(exc))}",
                ErrorCode.TRANSPORT,
                provider=self.provider,
            )
        elif isinstance(exc, LlmError):
            err = exc
            if err.provider is None:
                err.provider = self.provider
        else:
            return False
        if self.started and not self.mapper.finished:
            self.tail = self.mapper.finish(err)
            return True
        if err is exc:
            return False
        raise err from None
