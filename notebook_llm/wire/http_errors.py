"""Turning a failed HTTP response into an :class:`~notebook_llm.core.errors.LlmError`, and retry timing.

Pure functions, no I/O:

* :func:`provider_error_message` pulls the provider's own message out of the error body shapes
  seen in recordings (OpenAI-style, Anthropic, Gemini incl. list-wrapped, Ollama, Mistral/FastAPI)
  with a plain-text fallback;
* :func:`parse_retry_after` / :func:`parse_retry_after_ms` / :func:`retry_after_from_headers`
  read ``Retry-After`` (delta-seconds or HTTP-date) and ``retry-after-ms``;
* :func:`error_from_http` builds the error: code from :func:`~notebook_llm.core.errors.code_for_status`
  on the whole body text, message ``"HTTP <status> from <provider>: <provider message>"``,
  ``retry_after`` from headers (else a Gemini ``RetryInfo.retryDelay`` in the body) and the
  request id from headers (else Anthropic's ``request_id`` in the body);
* :func:`backoff_delay` is capped exponential backoff with full jitter that honours
  ``retry_after``.
"""

from __future__ import annotations

import email.utils
import http
import json
import math
import random
import re
import string
import time
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from ..core.errors import LlmError, code_for_status
from ..core.redaction import shorten

__all__ = [
    "backoff_delay",
    "error_from_http",
    "parse_retry_after",
    "parse_retry_after_ms",
    "provider_error_message",
    "retry_after_from_headers",
]

MAX_MESSAGE_CHARS = 500
REQUEST_ID_HEADERS = (
    "x-request-id",
    "request-id",
    "x-goog-request-id",
    "x-kong-request-id",
    "x-amzn-requestid",
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")
_WHITESPACE = re.compile(r"\s+")


def _finite_non_negative(seconds: float) -> float | None:
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value, or ``None`` if absent or unparsable.

    Accepts delta-seconds (``"30"``; decimals tolerated) and an HTTP-date
    (``"Wed, 21 Oct 2015 07:28:00 GMT"``), measured from ``now`` (epoch seconds, default
    :func:`time.time`). A date in the past gives ``0.0``; negative numbers give ``None``.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return None if seconds < 0 else _finite_non_negative(seconds)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # RFC 7231 dates are GMT; "-0000" parses as naive
        when = when.replace(tzinfo=UTC)
    reference = time.time() if now is None else now
    return _finite_non_negative(when.timestamp() - reference)


def parse_retry_after_ms(value: str | None) -> float | None:
    """Seconds from a ``retry-after-ms`` value (milliseconds, as OpenAI and Anthropic send)."""
    if value is None:
        return None
    try:
        millis = float(value.strip())
    except ValueError:
        return None
    return None if millis < 0 else _finite_non_negative(millis / 1000.0)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup that works for plain dicts and ``httpx.Headers``."""
    value = headers.get(name)
    if value is not None:
        return value
    for key, val in headers.items():
        if key.lower() == name:
            return val
    return None


def retry_after_from_headers(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait per the response headers: ``retry-after-ms`` first, then ``Retry-After``."""
    millis = parse_retry_after_ms(_header(headers, "retry-after-ms"))
    if millis is not None:
        return millis
    return parse_retry_after(_header(headers, "retry-after"), now)


def _load_json(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def _error_object(parsed: Any) -> dict[str, Any] | None:
    """The top-level error dict; Gemini sometimes wraps it in a one-element list."""
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict):
        parsed = parsed[0]
    return parsed if isinstance(parsed, dict) else None


def _nonempty(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _message_from_json(obj: dict[str, Any]) -> str | None:
    error = obj.get("error")
    if isinstance(error, dict):
        found = _nonempty(error.get("message"))
        if found:
            return found
        for key in ("type", "code", "status"):  # no message: the error's own label beats raw JSON
            label = error.get(key)
            if isinstance(label, str) and label:
                return label
    elif (found := _nonempty(error)) is not None:  # Ollama: {"error": "..."}
        return found
    found = _nonempty(obj.get("message"))  # Mistral: {"message": "..."}
    if found:
        return found
    detail = obj.get("detail")  # FastAPI-style (Mistral 422): str, dict or list of {"msg"}
    if (found := _nonempty(detail)) is not None:
        return found
    if isinstance(detail, dict):
        return _nonempty(detail.get("message")) or _nonempty(detail.get("msg"))
    if isinstance(detail, list):
        msgs = [m for d in detail if isinstance(d, dict) and (m := _nonempty(d.get("msg")))]
        return "; ".join(msgs) or None
    return None


def _truncate(text: str) -> str:
    # redacted before it is cut: a key cut in two is no longer found, and its start would stay
    return shorten(_WHITESPACE.sub(" ", text).strip(), MAX_MESSAGE_CHARS)


def provider_error_message(body: bytes | str) -> str | None:
    """The provider's own error message from an error body, or ``None`` for an empty body.

    Recognised JSON shapes: ``{"error": {"message": ...}}`` (OpenAI, DeepSeek, Groq, Anthropic,
    Gemini, also as ``[{"error": ...}]``), ``{"error": "..."}`` (Ollama), ``{"message": ...}``
    and ``{"detail": ...}`` (Mistral / FastAPI). Anything else falls back to the body text
    (an HTML page's ``<title>``), whitespace-collapsed and truncated to 500 characters.
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if not text.strip():
        return None
    obj = _error_object(_load_json(text))
    if obj is not None:
        found = _message_from_json(obj)
        if found:
            return _truncate(found)
    elif text.lstrip().startswith("<"):
        title = html_title(text)
        if title is not None and title.strip():
            return _truncate(title)
    return _truncate(text)


#: ``str.translate`` table that lower-cases ASCII letters only (so the length stays the same).
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def html_title(text: str) -> str | None:
    """The text of an HTML page's first ``<title ...>...</title>`` (tag names in any case), or
    ``None``. Found with ``str.find``: the lazy regex this replaces scanned to the end of the
    body from every ``<title>`` of a page that never closes one, quadratic in the body."""
    low = text.translate(_ASCII_LOWER)
    start = low.find("<title")
    if start < 0:
        return None
    opened = low.find(">", start + 6)
    if opened < 0:
        return None
    end = low.find("</title>", opened + 1)
    return text[opened + 1 : end] if end >= 0 else None


def _gemini_retry_delay(obj: dict[str, Any] | None) -> float | None:
    """``RetryInfo.retryDelay`` (e.g. ``"37s"``) from a Google error body's details."""
    error = obj.get("error") if obj else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, list):
        return None
    for item in details:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("RetryInfo"):
            match = _DURATION.match(str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _error_label(obj: dict[str, Any] | None) -> str | None:
    """The provider's machine-readable error kind (``type`` / ``code`` / ``status``)."""
    error = obj.get("error") if obj else None
    if not isinstance(error, dict):
        return None
    for key in ("type", "code", "status"):
        label = error.get(key)
        if isinstance(label, str) and label:
            return label
    return None


def error_from_http(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    provider: str | None = None,
    now: float | None = None,
) -> LlmError:
    """Build the :class:`LlmError` for a non-2xx response.

    ``code`` comes from ``code_for_status(status, body_text)``; the message is
    ``"HTTP 401 from openai: <provider message>"`` (the reason phrase when the body is empty);
    ``retry_after`` from ``retry-after-ms`` / ``Retry-After`` or a Gemini ``RetryInfo``;
    ``request_id`` from ``x-request-id`` / ``request-id`` / ``x-goog-request-id`` / ... headers
    or Anthropic's body ``request_id``. ``details["error_type"]`` holds the provider's error
    type/code/status string when the body has one.
    """
    text = body.decode("utf-8", "replace")
    obj = _error_object(_load_json(text))
    message = provider_error_message(text)
    if message is None:
        try:
            message = http.HTTPStatus(status).phrase
        except ValueError:
            message = "no response body"
    where = f" from {provider}" if provider else ""
    retry_after = retry_after_from_headers(headers, now)
    if retry_after is None:
        retry_after = _gemini_retry_delay(obj)
    request_id = next(
        (v for name in REQUEST_ID_HEADERS if (v := _header(headers, name))), None
    ) or (_nonempty(obj.get("request_id")) if obj else None)
    label = _error_label(obj)
    return LlmError(
        f"HTTP {status}{where}: {message}",
        code_for_status(status, text),
        status=status,
        retry_after=retry_after,
        # the provider's own strings, shown with the error: redacted like its message
        request_id=shorten(str(request_id), 200) if request_id else None,
        provider=provider,
        details={"error_type": shorten(str(label), 200)} if label else None,
    )


def backoff_delay(
    attempt: int,
    *,
    retry_after: float | None,
    base: float = 0.5,
    cap: float = 30.0,
    max_retry_after: float = 120.0,
    rng: random.Random | None = None,
) -> float:
    """Seconds to sleep before retry number ``attempt`` (0 for the first retry).

    Full jitter: uniform in ``[0, min(cap, base * 2**attempt)]``. When the provider sent
    ``retry_after``, the delay is never shorter than it, but a server-requested wait is itself
    capped at ``max_retry_after`` so one header cannot stall a notebook for hours (callers that
    should rather give up can compare ``error.retry_after`` themselves). Pass ``rng`` for
    deterministic tests.
    """
    ceiling = min(cap, base * 2.0 ** min(max(attempt, 0), 64))
    delay = (rng or random).uniform(0.0, ceiling)
    if retry_after is not None and retry_after > 0:
        delay = max(delay, min(retry_after, max_retry_after))
    return delay
