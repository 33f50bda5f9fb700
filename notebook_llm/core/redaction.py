"""Keeping API keys out of everything the package shows, logs or saves.

Every key the engine reads (from the environment, a ``.env`` file, the config file or
``%llm key``) is registered here with :func:`register_secret`. :func:`redact` replaces with
``***`` each known value, a bearer token, the user and password of a URL
(``https://user:pass@host``) and the value of every query parameter that carries a credential
(``?key=``, ``access_token=``, a signed URL's ``X-Amz-Signature=``, ``X-Amz-Credential=``,
``X-Goog-Signature=``, ``sig=``...: see :func:`is_credential_name`). Errors, reprs, log
records, widget state, displayed requests and recordings pass through it.

Every pattern here runs on untrusted text (answers, server bodies), so each is compiled by RE2
(:mod:`notebook_llm.core.linear_re`), whose time is linear in the text. A replacement never
takes a backslash or a quote with it, so redacting the raw text of a JSON body keeps it JSON
(recordings redact the decoded values anyway: :func:`notebook_llm.wire.cassette.redact_body`).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

from .linear_re import compile_linear, escape

REDACTED = "***"

_lock = threading.Lock()
#: The values registered (what :func:`register_secret` was given).
_registered: set[str] = set()
#: Every spelling looked for as it is: the values, URL-quoted, in hex.
_secrets: set[str] = set()
#: The registered values themselves (not their quoted or base64 forms): what fragments and
#: escaped spellings are looked for.
_raw: set[str] = set()
_pattern: Any = None
#: The base64 forms of the secrets: the whole base64 word that holds one is hidden.
_b64_cores: set[str] = set()
_base64: Any = None
#: Each secret spelled with any of its characters escaped (JSON ``\uXXXX``, ``\/``, URL
#: ``%XX``, HTML ``&#NN;``): text that decodes back to the key.
_encoded: Any = None
#: The shortest piece of a key hidden when it sits where a text was cut (see ``_cut_pieces``).
MIN_FRAGMENT = 6
#: Longer values are not keys (a stray ``.env`` value, a pasted file) and are not registered.
MAX_SECRET = 16 * 1024
#: Secrets longer than this (no API key is; a stray value from a ``.env`` may be) are hidden as
#: typed and URL-quoted only: their escaped spellings would make a regex of megabytes.
MAX_SPELLED = 512

# Header names whose values are credentials.
SENSITIVE_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization", "cookie"}
)
#: A query parameter: ``?`` or ``&``, a name, ``=``, the value (up to the next separator, white
#: space, quote, backslash or angle bracket: a JSON or HTML text around it stays intact).
_QUERY_PARAM = compile_linear(r"([?&]([A-Za-z0-9_.~-]{1,64})=)([^&#\s\"'\\<>]+)")
#: The user information of a URL: scheme, ``://``, then what comes before ``@`` in the host part.
_USERINFO = compile_linear(r"([A-Za-z][A-Za-z0-9+.-]{0,31}://)([^/?#@\s\"'\\<>]+)@")
_BEARER = compile_linear(r"(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", ignore_case=True)

#: Words of a query parameter's name that mark its value as a credential (``api_key``,
#: ``X-Amz-Signature``, ``X-Goog-Credential``, ``sig``, ``access_token``, ``client_secret``).
_CREDENTIAL_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "sig",
        "signature",
        "secret",
        "password",
        "passwd",
        "pwd",
        "credential",
        "credentials",
        "auth",
        "jwt",
        "session",
        "sessionid",
    }
)
#: Endings of a name written without separators that mark a credential (``accesstoken``,
#: ``clientsecret``, ``apikey``); ``key`` alone is not one (``monkey``), only these compounds.
_CREDENTIAL_ENDINGS = ("token", "secret", "signature", "password", "credential", "credentials")
_KEY_COMPOUNDS = frozenset(
    {"apikey", "accesskey", "secretkey", "privatekey", "subscriptionkey", "authkey", "signingkey"}
)


def is_credential_name(name: str) -> bool:
    """Whether a query parameter (or field) called ``name`` carries a credential: one of its
    words (split at ``-``, ``_``, ``.`` and camelCase) is a credential word (``key``, ``token``,
    ``sig``, ``signature``, ``secret``, ``password``, ``credential``, ``auth``...), or the name
    run together ends in one (``accesstoken``, ``apikey``)."""
    words: list[str] = []
    current = ""
    for i, ch in enumerate(name):
        if not ch.isalnum():
            words.append(current)
            current = ""
            continue
        if ch.isupper() and current and (name[i - 1].islower() or name[i - 1].isdigit()):
            words.append(current)
            current = ""
        current += ch.lower()
    words.append(current)
    if any(w in _CREDENTIAL_WORDS for w in words):
        return True
    joined = "".join(words)
    return joined.endswith(_CREDENTIAL_ENDINGS) or joined in _KEY_COMPOUNDS


def register_secret(value: str | None) -> None:
    """Remember a secret value so that :func:`redact` hides it: as typed, URL-quoted (as it
    appears in an ``{api_key}`` endpoint), in hex, in base64 (a Basic auth header), with characters
    escaped (JSON, URL, HTML) and as a piece left where a text was cut. Short values and
    values too long to be a key are ignored."""
    global _pattern, _encoded, _base64
    if not value or len(value) < 6 or len(value) > MAX_SECRET:
        return
    with _lock:
        if value in _registered:
            return
        _registered.add(value)
        if len(value) <= MAX_SPELLED:
            _raw.add(value)
            _b64_cores.update(_base64_cores(value))
        _secrets.add(value)
        # a value read with surrogateescape (a .env's undecodable byte) holds lone surrogates:
        # every spelling of it is made with surrogatepass, never an exception
        _secrets.add(urllib.parse.quote(value, safe="", errors="surrogatepass"))
        _secrets.add(urllib.parse.quote_plus(value, errors="surrogatepass"))
        # hex (the sandbox's ``tohex``, a signing adapter's header): matched in any case below;
        # a value read with surrogateescape stands for its original bytes, hex of those too
        _secrets.add(value.encode("utf-8", "surrogatepass").hex())
        with contextlib.suppress(UnicodeEncodeError):
            _secrets.add(value.encode("utf-8", "surrogateescape").hex())
        # Longest first so that a key containing another key is replaced whole.
        ordered = sorted(_secrets, key=len, reverse=True)
        # in any case: an upper-cased key (a provider code made ours) is still the key
        _pattern = compile_linear("|".join(escape(s) for s in ordered), ignore_case=True)
        cores = "|".join(escape(c) for c in sorted(_b64_cores, key=len, reverse=True))
        _base64 = compile_linear(cores) if cores else None
        spelled = sorted(_raw, key=len, reverse=True)
        _encoded = (
            None
            if not spelled
            else compile_linear(
                "|".join("".join(_any_spelling(c) for c in s) for s in spelled), ignore_case=True
            )
        )


def _base64_cores(value: str) -> list[str]:
    """The part of ``value``'s base64 form that does not depend on what surrounds it, at each
    of the three byte alignments it can have (``Basic base64("user:" + key)`` holds one)."""
    raw = value.encode("utf-8", "surrogatepass")
    cores = []
    for offset in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * offset + raw).decode("ascii")
            start = 4 if offset else 0  # the first group mixes in the bytes before the key
            end = 4 * ((offset + len(raw)) // 3)  # a last partial group mixes in what follows
            core = text[start:end]
            if len(core) >= 8:
                cores.append(core)
    return cores


def _any_spelling(char: str) -> str:
    """A regex for one character of a secret, literal or escaped the ways text is decoded:
    JSON ``\\uXXXX`` (either case, surrogate pairs too) and ``\\/``, URL ``%XX``, HTML
    character references. Redaction hides what decodes to a key, not only the key as typed."""
    forms = [escape(char)]
    units = char.encode("utf-16-be", "surrogatepass")
    json_escape = "".join(
        "\\\\u" + "".join(f"[{d.lower()}{d.upper()}]" for d in f"{unit:04x}")
        for unit in (int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2))
    )
    forms.append(json_escape)
    if char in '/"\\':
        forms.append(escape("\\" + char))
    forms.append(
        "".join(
            "%" + "".join(f"[{d.lower()}{d.upper()}]" for d in f"{byte:02x}")
            for byte in char.encode("utf-8", "surrogatepass")
        )
    )
    if char == " ":
        forms.append(r"\+")
    forms.append(f"&#0*{ord(char)};")
    forms.append("&#[xX]0*" + "".join(f"[{d.lower()}{d.upper()}]" for d in f"{ord(char):x}") + ";")
    return "(?:" + "|".join(forms) + ")"


def redact(text: str) -> str:
    """Return ``text`` with known secrets, bearer tokens and key query parameters hidden.

    Any text passes, lone surrogates included (a JSON ``"\\ud800"`` escape, undecodable bytes
    read with ``surrogateescape``): they are kept, and a key or credential around them is hidden
    as anywhere else (:mod:`~notebook_llm.core.linear_re` matches them as U+FFFD)."""
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        if _base64 is not None:
            text = _hide_base64_words(_base64, text)
        text = pattern.sub(REDACTED, text)
        encoded = _encoded
        if encoded is not None and ("\\" in text or "%" in text or "&#" in text):
            text = encoded.sub(REDACTED, text)
        text = _cut_pieces(text)
    if "=" in text:
        text = _QUERY_PARAM.sub(_hide_credential_param, text)
    if "://" in text and "@" in text:
        text = _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def _hide_credential_param(m: Any) -> str:
    whole: str = m.group(0)
    if m.group(3) == REDACTED or not is_credential_name(m.group(2)):
        return whole
    return str(m.group(1)) + REDACTED


_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")


def _hide_base64_words(cores: Any, text: str) -> str:
    """``text`` with each base64 word that holds a key's base64 core replaced whole (its first
    and last characters encode the key's first and last bytes too). Why not one regex with
    ``[A-Za-z0-9+/]*`` around the cores: on a long base64 run it backtracks quadratically."""
    spans: list[tuple[int, int]] = []
    for m in cores.finditer(text):
        start, end = m.span()
        if spans and start < spans[-1][1]:
            continue
        while start > 0 and text[start - 1] in _BASE64_CHARS:
            start -= 1
        while end < len(text) and text[end] in _BASE64_CHARS:
            end += 1
        while end < len(text) and text[end] == "=":
            end += 1
        spans.append((start, end))
    return _replace_spans(text, spans)


_ELLIPSES = ("…", "...")


def _cut_pieces(text: str) -> str:
    """``text`` with the pieces of a key that a cut left behind hidden: at least
    :data:`MIN_FRAGMENT` characters of a key's start at the end of the text or before an
    ellipsis, or of a key's end at its start or after an ellipsis.

    Every cut in the package redacts first; this is the second line for a text someone cut
    before it got here (a provider's own truncated echo of a request, a library's message).
    """
    with _lock:
        secrets = list(_raw)
    if not secrets:
        return text
    ends = [len(text)]  # where a key's start may have been cut off
    starts = [0]  # where a key's end may begin
    for mark in _ELLIPSES:
        at = text.find(mark)
        while at != -1:
            ends.append(at)
            starts.append(at + len(mark))
            at = text.find(mark, at + 1)
    hide: list[tuple[int, int]] = []
    for secret in secrets:
        head, tail, size = secret[:MIN_FRAGMENT], secret[-MIN_FRAGMENT:], len(secret)
        for end in ends:
            window = max(0, end - size + 1)
            at = text.find(head, window, end)
            while at != -1:
                if secret.startswith(text[at:end]):
                    hide.append((at, end))
                    break
                at = text.find(head, at + 1, end)
        for start in starts:
            limit = min(len(text), start + size - 1)
            at = text.rfind(tail, start, limit)
            while at != -1:
                piece_end = at + MIN_FRAGMENT
                if secret.endswith(text[start:piece_end]):
                    hide.append((start, piece_end))
                    break
                at = text.rfind(tail, start, at + MIN_FRAGMENT - 1)
    return _replace_spans(text, hide)


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of ``spans`` (merged where they overlap) replaced by ``***``, in one
    pass (replacing them one by one copies the text once per span)."""
    if not spans:
        return text
    out: list[str] = []
    at = 0
    for begin, finish in sorted(spans):
        if finish <= at:
            continue
        out.append(text[at : max(at, begin)])
        if begin >= at:
            out.append(REDACTED)
        at = finish
    out.append(text[at:])
    return "".join(out)


def shorten(text: str, limit: int, marker: str = "…") -> str:
    """``text`` redacted, then cut to at most ``limit`` characters (``marker`` ending a cut
    one). Redacting first is the point: a key cut in two is no longer found, and its first
    part would be left in the text."""
    text = redact(text)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(marker))] + marker


def redaction_spans(text: str) -> list[tuple[int, int]]:
    """Where :func:`redact` hides something in ``text``: the ``(start, end)`` of each match of
    its patterns (a streamed text must not be cut inside one, or neither half is hidden)."""
    spans: list[tuple[int, int]] = []
    for pattern in (_base64, _pattern, _encoded, _USERINFO, _BEARER):
        if pattern is not None:
            spans.extend(m.span() for m in pattern.finditer(text))
    if "=" in text:
        spans.extend(
            m.span() for m in _QUERY_PARAM.finditer(text) if is_credential_name(m.group(2))
        )
    return spans


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
            (redact(k) if isinstance(k, str) else k): (
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
        msg = str(record.msg)
        if _pattern is not None or "=" in msg or "@" in msg or record.args:
            message = record.getMessage()
            hidden = redact(message)
            if hidden != message:  # a record with nothing to hide keeps its args
                record.msg = hidden
                record.args = None
        return True


_FILTER = RedactingFilter()

#: The loggers whose records are redacted. A logger's filter does not see its children's
#: records, so each of the package's own loggers is named (a test holds this list to the
#: ``getLogger("...")`` calls of the package); a Lua adapter's ``notebook_llm.adapter.NAME``
#: logger gets text that its host redacted already.
FILTERED_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.connection",
    "httpcore.proxy",
    "notebook_llm",
    "notebook_llm.adapter",
    "notebook_llm.adapter.watch",
    "notebook_llm.adapters",
    "notebook_llm.api.batch",
    "notebook_llm.api.batch_api",
    "notebook_llm.api.recording",
    "notebook_llm.api.tool_calling",
    "notebook_llm.api.turn_runner",
    "notebook_llm.engine.engine",
    "notebook_llm.engine.routing.plugins",
    "notebook_llm.notebook.file_watch",
    "notebook_llm.warmup",
    "notebook_llm.wire.response_watch",
)
for _name in FILTERED_LOGGERS:
    logging.getLogger(_name).addFilter(_FILTER)
