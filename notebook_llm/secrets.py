"""Keeping API keys out of everything the package shows, logs or saves.

Every key the engine reads (from the environment, a ``.env`` file, the config file or
``%llm key``) is registered here with :func:`register_secret`. :func:`redact` replaces each
known value, and anything that looks like an auth header or a ``key=`` query parameter, with
``***``. Errors, reprs, log records, widget state and displayed requests pass through it.
"""

from __future__ import annotations

import logging
import re
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

REDACTED = "***"

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None

# Header names whose values are credentials.
SENSITIVE_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization", "cookie"}
)
_QUERY_KEY = re.compile(r"(?i)([?&](?:key|api_key|apikey|access_token|token)=)[^&#\s\"']+")
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
#: Text ending where a bearer token may follow (what ``_BEARER`` needs before the token).
_BEARER_OPEN = re.compile(r"(?i)bearer\s+$")


def register_secret(value: str | None) -> None:
    """Remember a secret value so that :func:`redact` hides it (also URL-quoted, as it appears
    in an ``{api_key}`` endpoint). Short values are ignored."""
    global _pattern
    if not value or len(value) < 6:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        _secrets.add(urllib.parse.quote(value, safe=""))
        _secrets.add(urllib.parse.quote_plus(value))
        # Longest first so that a key containing another key is replaced whole.
        ordered = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(s) for s in ordered))


def known_secrets() -> frozenset[str]:
    with _lock:
        return frozenset(_secrets)


def redact(text: str) -> str:
    """Return ``text`` with known secrets, bearer tokens and key query parameters hidden."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    if "=" in text:
        text = _QUERY_KEY.sub(lambda m: m.group(1) + REDACTED, text)
    if "earer" in text:
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def redaction_spans(text: str) -> list[tuple[int, int]]:
    """Where :func:`redact` hides something in ``text``: the ``(start, end)`` of each match of
    its patterns (a streamed text must not be cut inside one, or neither half is hidden)."""
    spans: list[tuple[int, int]] = []
    for pattern in (_pattern, _QUERY_KEY, _BEARER):
        if pattern is not None:
            spans.extend(m.span() for m in pattern.finditer(text))
    return spans


def opens_bearer(text: str) -> bool:
    """Whether ``text`` ends in ``bearer`` and white space, where a token may follow: a
    streamed text cut there would leave the token without the word that marks it."""
    return _BEARER_OPEN.search(text) is not None


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``headers`` fit to display: credential headers are replaced by ``***``."""
    return {
        k: (REDACTED if k.lower() in SENSITIVE_HEADERS else redact(str(v)))
        for k, v in headers.items()
    }


def redact_obj(obj: Any) -> Any:
    """Redact every string inside a JSON-like structure."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, Mapping):
        return {
            k: (
                REDACTED if isinstance(k, str) and k.lower() in SENSITIVE_HEADERS else redact_obj(v)
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    return obj


class Secret:
    """A string that does not show itself in ``repr``/``str`` (for keys held in objects)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        register_secret(value)
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class RedactingFilter(logging.Filter):
    """Redacts log records of libraries that print request URLs (httpx logs every request at
    INFO, with the URL, which holds the key for ``{api_key}`` endpoints such as Gemini's)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _pattern is not None or "=" in str(record.msg) or record.args:
            record.msg = redact(record.getMessage())
            record.args = None
        return True


_FILTER = RedactingFilter()
for _name in (
    "httpx",
    "httpcore",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.connection",
    "httpcore.proxy",
    "notebook_llm",
):
    logging.getLogger(_name).addFilter(_FILTER)
