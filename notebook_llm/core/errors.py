"""Errors raised by notebook_llm.

There is one exception class, :class:`LlmError`, and every failure the package reports is an
``LlmError`` with a stable string ``code``. Callers decide policy on the code (retry, ask for a
key, show the Lua line), never on the message text, so codes are never renamed once published.

Exception tree::

    Exception
     └── LlmError                 .code .status .retry_after .request_id .provider
                                  .adapter .hook .lua_line .details

Codes (``ErrorCode``) and where they come from:

    provider / HTTP      AUTH, QUOTA, RATE_LIMIT, CONTEXT_WINDOW_EXCEEDED, INVALID_REQUEST,
                         NOT_FOUND, SERVER, HTTP_<status>
    transport            TRANSPORT, TIMEOUT, STREAM_CLOSED, MALFORMED_RESPONSE, EMPTY_RESPONSE,
                         RESPONSE_TOO_LARGE (a decoded event or body over its cap)
    caller               ABORTED, MISSING_CREDENTIAL, UNSUPPORTED_CONTENT,
                         UNSUPPORTED_REASONING_EFFORT, INVALID_OPTIONS, INPUT_TOO_LARGE (a
                         prompt, tool result or value too big to hand to an adapter),
                         BUDGET_EXCEEDED (a cost cap)
    typed answers        SCHEMA_MISMATCH (an answer that does not validate against the schema)
    registry             NO_ADAPTER, DUPLICATE_ADAPTER, INVALID_ADAPTER
    Lua adapters         ADAPTER_ERROR, ADAPTER_TIMEOUT, ADAPTER_MEMORY
    protocol             INVARIANT (a stream broke one of the five rules)
    tools                TOOL_STEP_LIMIT, MCP_SERVER (an MCP server that cannot be used: it is
                         not configured, failed to start, or crashed while starting)
    record/replay        REPLAY_MISS (a request with no recorded answer), REPLAY_FILE (a
                         recording that is missing, unreadable or not JSON; with its line)
    batch APIs           BATCH_PENDING (a row still in a provider's batch: the same call
                         collects it later), BATCH_EXPIRED (the batch's window ended before
                         the row ran)
    anything else        UNKNOWN, or a provider finish reason upper-cased (CONTENT_FILTER, ...)

Retryable by default: RATE_LIMIT, SERVER, TIMEOUT, TRANSPORT, EMPTY_RESPONSE.

Messages never contain an API key: every message passes through :func:`redact` with the keys the
process knows about (see :mod:`notebook_llm.core.redaction`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    AUTH = "AUTH"
    QUOTA = "QUOTA"
    RATE_LIMIT = "RATE_LIMIT"
    CONTEXT_WINDOW_EXCEEDED = "CONTEXT_WINDOW_EXCEEDED"
    INVALID_REQUEST = "INVALID_REQUEST"
    NOT_FOUND = "NOT_FOUND"
    SERVER = "SERVER"
    TRANSPORT = "TRANSPORT"
    TIMEOUT = "TIMEOUT"
    ABORTED = "ABORTED"
    STREAM_CLOSED = "STREAM_CLOSED"
    MALFORMED_RESPONSE = "MALFORMED_RESPONSE"
    EMPTY_RESPONSE = "EMPTY_RESPONSE"
    RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"
    INPUT_TOO_LARGE = "INPUT_TOO_LARGE"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    SCHEMA_MISMATCH = "SCHEMA_MISMATCH"
    MISSING_CREDENTIAL = "MISSING_CREDENTIAL"
    UNSUPPORTED_CONTENT = "UNSUPPORTED_CONTENT"
    UNSUPPORTED_REASONING_EFFORT = "UNSUPPORTED_REASONING_EFFORT"
    INVALID_OPTIONS = "INVALID_OPTIONS"
    NO_ADAPTER = "NO_ADAPTER"
    DUPLICATE_ADAPTER = "DUPLICATE_ADAPTER"
    INVALID_ADAPTER = "INVALID_ADAPTER"
    ADAPTER_ERROR = "ADAPTER_ERROR"
    ADAPTER_TIMEOUT = "ADAPTER_TIMEOUT"
    ADAPTER_MEMORY = "ADAPTER_MEMORY"
    INVARIANT = "INVARIANT"
    TOOL_STEP_LIMIT = "TOOL_STEP_LIMIT"
    MCP_SERVER = "MCP_SERVER"
    REPLAY_MISS = "REPLAY_MISS"
    REPLAY_FILE = "REPLAY_FILE"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    STORE_MISMATCH = "STORE_MISMATCH"
    STORE_CORRUPT = "STORE_CORRUPT"
    BATCH_PENDING = "BATCH_PENDING"
    BATCH_EXPIRED = "BATCH_EXPIRED"
    UNKNOWN = "UNKNOWN"


RETRYABLE_CODES: frozenset[str] = frozenset(
    {
        ErrorCode.RATE_LIMIT,
        ErrorCode.SERVER,
        ErrorCode.TIMEOUT,
        ErrorCode.TRANSPORT,
        ErrorCode.EMPTY_RESPONSE,
    }
)


class LlmError(Exception):
    """The one exception notebook_llm raises.

    ``code`` is stable; ``message`` is for humans. ``retry_after`` is in seconds.
    """

    def __init__(
        self,
        message: str,
        code: str = ErrorCode.UNKNOWN,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        request_id: str | None = None,
        provider: str | None = None,
        adapter: str | None = None,
        hook: str | None = None,
        lua_line: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        from .redaction import redact  # local: secrets imports nothing from here at import time

        self.message = redact(str(message))
        self.code = str(code)
        self.status = status
        self.retry_after = retry_after
        self.request_id = request_id
        self.provider = provider
        self.adapter = adapter
        self.hook = hook
        self.lua_line = lua_line
        self.details = details or {}
        super().__init__(self.message)

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_CODES

    def __str__(self) -> str:
        where = []
        if self.provider:
            where.append(f"provider={self.provider}")
        if self.adapter:
            where.append(f"adapter={self.adapter}")
        if self.hook:
            where.append(f"hook={self.hook}")
        if self.lua_line is not None:
            where.append(f"line={self.lua_line}")
        if self.status is not None:
            where.append(f"status={self.status}")
        suffix = f" ({', '.join(where)})" if where else ""
        return f"[{self.code}] {self.message}{suffix}"

    def __repr__(self) -> str:
        return f"LlmError({self.message!r}, code={self.code!r})"

    def to_failure(self) -> dict[str, Any]:
        """The ``failure`` JSON of a ``finish`` event (reference shape, camelCase)."""
        out: dict[str, Any] = {"message": self.message, "code": self.code}
        if self.status is not None:
            out["status"] = self.status
        if self.retry_after is not None:
            out["providerRetryAfterMs"] = int(self.retry_after * 1000)
        if self.request_id is not None:
            out["requestId"] = self.request_id
        if self.provider is not None:
            out["provider"] = self.provider
        if self.adapter is not None:
            out["adapter"] = self.adapter
        if self.hook is not None:
            out["hook"] = self.hook
        if self.lua_line is not None:
            out["luaLine"] = self.lua_line
        return out

    @classmethod
    def from_failure(cls, failure: dict[str, Any]) -> LlmError:
        retry_ms = failure.get("providerRetryAfterMs")
        return cls(
            str(failure.get("message", "")),
            str(failure.get("code", ErrorCode.UNKNOWN)),
            status=failure.get("status"),
            retry_after=retry_ms / 1000 if isinstance(retry_ms, int | float) else None,
            request_id=failure.get("requestId"),
            provider=failure.get("provider"),
            adapter=failure.get("adapter"),
            hook=failure.get("hook"),
            lua_line=failure.get("luaLine"),
        )


def code_for_status(status: int, body_text: str = "") -> str:
    """Map an HTTP status (and the provider's error text) to a stable code.

    Body-text refinements, from recorded provider bodies:

    * Gemini rejects a bad API key with 400 ``INVALID_ARGUMENT`` / ``API_KEY_INVALID``: AUTH.
    * Gemini 429 ``RESOURCE_EXHAUSTED`` is RATE_LIMIT even when its text says "exceeded your
      current quota ... billing": Google uses it for per-minute limits and sends a RetryInfo
      delay, so it is retryable. OpenAI's ``insufficient_quota`` (no credit) stays QUOTA.
    """
    text = body_text.lower()
    if status in (401, 403):
        return ErrorCode.AUTH
    if status == 400 and ("api_key_invalid" in text or "api key not valid" in text):
        return ErrorCode.AUTH
    if status == 429:
        if "resource_exhausted" in text:
            return ErrorCode.RATE_LIMIT
        if any(
            k in text
            for k in (
                "insufficient_quota",
                "quota exceeded",
                "exceeded your current quota",
                "billing",
            )
        ):
            return ErrorCode.QUOTA
        return ErrorCode.RATE_LIMIT
    if status == 402:
        return ErrorCode.QUOTA
    if status == 404:
        return ErrorCode.NOT_FOUND
    if status in (400, 413, 422):
        if any(
            k in text
            for k in (
                "context length",
                "context_length",
                "maximum context",
                "too many tokens",
                "prompt is too long",
            )
        ):
            return ErrorCode.CONTEXT_WINDOW_EXCEEDED
        return ErrorCode.INVALID_REQUEST
    if status == 408:
        return ErrorCode.TIMEOUT
    if 500 <= status <= 599:
        return ErrorCode.SERVER
    return f"HTTP_{status}"
