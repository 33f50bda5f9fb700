"""The recording file (a "cassette"): one :class:`Exchange` per HTTP request and response,
redacted before it is written, read back for replay. No engine, no globals.

Redaction works on values, not on the JSON text that carries them (:func:`redact_body`): each
JSON document of a body (the whole body, or each line or SSE ``data:`` payload of a stream) is
decoded, its strings redacted, and written back only if something was hidden, so a recorded
body stays byte for byte what the server sent unless it held a secret, and stays JSON when it
did. A ``.json`` recording stays one JSON array that grows in place: each exchange is written
over the closing bracket, so the writes are proportional to what is added (``.jsonl`` files
are appended to line by line).

The format and what is never written are described in :mod:`notebook_llm.api.recording`; the
transports that fill and read a cassette are in :mod:`notebook_llm.wire.tap`.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ..core.errors import ErrorCode, LlmError
from ..core.images import shrink_images
from ..core.redaction import SENSITIVE_HEADERS, redact, redact_obj, register_secret

log = logging.getLogger("notebook_llm.api.recording")

#: Error code of a request that has no recording in replay mode (the one in ``ErrorCode``).
REPLAY_MISS = ErrorCode.REPLAY_MISS
#: The key a provider that needs one gets while its engine replays (no real key is needed; this
#: one is registered as a secret, so it never shows either).
REPLAY_KEY = "notebook-llm-replay-placeholder-key"
FORMAT_VERSION = 1

#: Response headers never written to a recording (credentials, cookies, account ids) and those
#: that describe the transfer rather than the body (recomputed on replay).
_DROP_RESPONSE_HEADERS = SENSITIVE_HEADERS | {
    "set-cookie",
    "set-cookie2",
    "www-authenticate",
    "proxy-authenticate",
    "openai-organization",
    "openai-project",
    "anthropic-organization-id",
    "x-goog-api-key",
}
_TRANSFER_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive"}


# --------------------------------------------------------------------------------- exchanges

#: ``(method, path, query, body)``: what a replayed request is matched by (:func:`request_key`).
MatchKey = tuple[str, str, str, str]


@dataclass
class Exchange:
    """One recorded HTTP request and its response (already redacted)."""

    method: str
    url: str
    path: str
    request: Any
    status: int
    headers: dict[str, str]
    body: bytes
    complete: bool = True
    used: bool = field(default=False, compare=False)
    #: ``match_key()`` worked out once, when the exchange is read (a request nested too deeply
    #: to compare is then a fault of the file, not of a later replayed request).
    _key: MatchKey | None = field(default=None, compare=False, repr=False)

    def match_key(self) -> MatchKey:
        """What a replayed request must equal to be answered by this exchange (see
        :func:`request_key`); the query comes from the stored ``url``, so a recording written
        before the query was compared replays as it is."""
        if self._key is None:
            self._key = request_key(self.method, self.path, self.url, self.request)
        return self._key

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": self.method,
            "url": self.url,
            "path": self.path,
        }
        if isinstance(self.request, str):
            out["request_text"] = self.request
        else:
            out["request"] = self.request
        out["status"] = self.status
        out["headers"] = self.headers
        try:
            out["body"] = self.body.decode("utf-8")
        except UnicodeDecodeError:
            out["body_base64"] = base64.b64encode(self.body).decode("ascii")
        out["complete"] = self.complete
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Exchange:
        """An exchange from its JSON form; ``ValueError`` naming the field that is wrong."""
        if "body_base64" in obj:
            encoded = _field(obj, "body_base64", str)
            try:
                body = base64.b64decode(encoded, validate=True)
            except ValueError:
                raise ValueError("body_base64 is not base64") from None
        else:
            body = _field(obj, "body", str, "").encode("utf-8")
        request = obj["request"] if "request" in obj else _field(obj, "request_text", str, None)
        url = _field(obj, "url", str, "")
        method = _field(obj, "method", str)
        if not method.isalpha():
            raise ValueError(f"method must be an HTTP method such as POST, not {method!r}")
        try:
            path = _field(obj, "path", str, "") or httpx.URL(url).path
        except (httpx.InvalidURL, TypeError, ValueError):
            raise ValueError(f"url {url[:80]!r} is not a URL") from None
        status = _field(obj, "status", int, 200)
        if isinstance(status, bool) or not 100 <= status <= 599:
            raise ValueError(f"status must be an HTTP status (100-599), not {status!r}")
        headers = _field(obj, "headers", dict, {}) or {}
        for k, v in headers.items():
            if not isinstance(v, str | int | float) or isinstance(v, bool):
                raise ValueError(f"headers {k!r} must be a string, not {type(v).__name__}")
        exchange = cls(
            method=method,
            url=url,
            path=path,
            request=request,
            status=status,
            headers={str(k): str(v) for k, v in headers.items()},
            body=body,
            complete=_field(obj, "complete", bool, True),
        )
        exchange.match_key()
        return exchange


_JSON_NAMES = {str: "a string", int: "a number", bool: "true or false", dict: "an object"}
_MISSING = object()


def _field(obj: dict[str, Any], name: str, kind: type, default: Any = _MISSING) -> Any:
    """``obj[name]`` checked to be of JSON type ``kind`` (``null`` counts as missing)."""
    value = obj.get(name)
    if value is None:
        if default is _MISSING:
            raise ValueError(f"{name} is missing")
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{name} must be {_JSON_NAMES[kind]}, not {type(value).__name__}")
    return value


def _strip_strings(obj: Any) -> Any:
    if isinstance(obj, str):
        return obj.strip()
    if isinstance(obj, dict):
        return {k: _strip_strings(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strip_strings(v) for v in obj]
    return obj


def _canonical(body: Any) -> str:
    """The request body as compared on replay: key order and the whitespace around strings
    (a cell's trailing newline) do not matter."""
    if isinstance(body, str) or body is None:
        return (body or "").strip()
    return json.dumps(
        _strip_strings(body), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )


def request_key(method: str, path: str, url: str, body: Any) -> MatchKey:
    """The key a request is replayed by: the upper-cased method, the (redacted) URL path, the
    query of ``url`` (:func:`canonical_query`) and the request body (:func:`_canonical`).

    A request is answered only by an exchange with the same key, so a request to the same path
    with another query (``?city=Tokyo`` where ``?city=Paris`` was recorded) is a
    ``REPLAY_MISS``, not another URL's answer. The scheme, host and port are left out on
    purpose: a loopback server gets a new port on each run, and a recording is meant to replay
    against whatever base URL the provider has where it is replayed (another machine's local
    server, a proxy, a base URL set in the environment), with no network, so the host tells
    nothing about which answer is wanted. (Two hosts asked the same path, query and body are
    told apart only by the order of the recording.)"""
    return (method.upper(), path, canonical_query(url), _canonical(body))


def canonical_query(url: str) -> str:
    """The query string of ``url`` as compared on replay: redacted as a recording stores it,
    then split into name/value pairs (percent-escapes decoded, blank values kept) in sorted
    order, as JSON text.

    Redacting first makes a key in the query (Gemini's ``?key=...``) compare as ``***``, so a
    recording made with a real key replays with the placeholder :data:`REPLAY_KEY` or another
    key; a stored URL is redacted again because a recording made before a redaction rule
    existed would otherwise hold a value that a replayed request no longer shows. Sorting
    makes the parameter order and the spelling of the escapes not matter. ``""`` and ``?``
    alone are no query; an exchange without a ``url`` has none either."""
    text = redact(url)
    # RFC 3986: the fragment starts at the first "#", the query at the first "?" before it.
    query = text.partition("#")[0].partition("?")[2]
    if not query:
        return ""
    pairs = sorted(urllib.parse.parse_qsl(query, keep_blank_values=True))
    return json.dumps(pairs, ensure_ascii=False, separators=(",", ":"))


def query_text(url: str) -> str:
    """The query of ``url`` as it is written (``"city=Paris"``), for a message; ``""`` if none."""
    return url.partition("#")[0].partition("?")[2]


def _remember_credentials(request: httpx.Request) -> None:
    """Register the credential values a request carries, so redaction hides them everywhere."""
    for name, value in request.headers.items():
        if name.lower() in SENSITIVE_HEADERS:
            token = value.split(None, 1)[1] if value.lower().startswith("bearer ") else value
            register_secret(token.strip())


def _request_body(request: httpx.Request) -> Any:
    """The request body as redacted JSON (or redacted text when it is not JSON)."""
    raw = request.content
    if not raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    try:
        # Embedded images become short hash references (on record and on replay alike).
        return shrink_images(redact_obj(json.loads(text)))
    except ValueError:
        return redact(text)


def redact_body(body: bytes) -> bytes:
    """``body`` with secrets hidden in its values (see the module docstring); a body that is
    not UTF-8 is redacted as latin-1 text (one character per byte, so it maps back)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return redact(body.decode("latin-1")).encode("latin-1")
    whole = _redact_json_document(text)
    if whole is not None:
        return whole.encode("utf-8")
    lines = text.split("\n")
    for i, line in enumerate(lines):
        end = "\r" if line.endswith("\r") else ""
        content = line[: len(line) - len(end)]
        field, colon, payload = content.partition(":")
        if colon and field == "data":  # an SSE payload: "data:" and one optional space
            lead = " " if payload.startswith(" ") else ""
            document = _redact_json_document(payload[len(lead) :])
            if document is not None:
                lines[i] = f"data:{lead}{document}{end}"
                continue
        document = _redact_json_document(content)
        lines[i] = (document + end) if document is not None else redact(line)
    return "\n".join(lines).encode("utf-8")


def _redact_json_document(text: str) -> str | None:
    """``text`` with the strings of the JSON document it holds redacted (itself when nothing
    was hidden), or ``None`` when it is not a JSON document."""
    if not text.strip() or text.lstrip()[:1] not in ("{", "[", '"'):
        return None
    try:
        value = json.loads(text)
        hidden = redact_obj(value)
    except (ValueError, RecursionError):
        return None
    if hidden == value:
        return text
    return json.dumps(hidden, ensure_ascii=False)


def _redacted_url(url: httpx.URL) -> tuple[str, str]:
    return redact(str(url)), redact(url.path)


def _response_headers(headers: httpx.Headers) -> dict[str, str]:
    return {
        k: redact(v)
        for k, v in headers.items()
        if k.lower() not in _DROP_RESPONSE_HEADERS and k.lower() not in _TRANSFER_HEADERS
    }


# --------------------------------------------------------------------------------- files


def load_exchanges(path: str | Path) -> list[Exchange]:
    """Read a recording (JSON lines, or one JSON array); header lines are skipped.

    A missing, unreadable or malformed file raises ``LlmError(REPLAY_FILE)`` (with the line
    number of a bad JSON line)."""
    return _read_recording(Path(path).expanduser())[0]


def _read_recording(p: Path) -> tuple[list[Exchange], list[str]]:
    """The exchanges of recording ``p`` and warnings about it (no header, no exchanges)."""
    try:
        text = p.read_text(encoding="utf-8-sig")  # (a BOM an editor added is not an error)
    except MemoryError:
        raise LlmError(f"recording {p} is too large to read", ErrorCode.REPLAY_FILE) from None
    except OSError as exc:
        raise LlmError(
            f"cannot read recording {p}: {exc.strerror}", ErrorCode.REPLAY_FILE
        ) from None
    except UnicodeDecodeError:
        raise LlmError(f"recording {p} is not UTF-8 text", ErrorCode.REPLAY_FILE) from None
    items: list[Any] = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except ValueError as exc:
            raise LlmError(
                f"recording {p} is not valid JSON: {exc}", ErrorCode.REPLAY_FILE
            ) from None
        except RecursionError:
            raise LlmError(
                f"recording {p} is nested too deeply to read", ErrorCode.REPLAY_FILE
            ) from None
        if not isinstance(items, list):
            raise LlmError(f"recording {p} is not a list of exchanges", ErrorCode.REPLAY_FILE)
        numbered = [(f"item {i}", obj) for i, obj in enumerate(items, 1)]
    else:
        numbered = []
        # "\n" only: str.splitlines() would also split at \u2028, \x1c..., which JSON allows
        # raw inside a string, and so break a good line in two
        for number, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LlmError(
                    f"recording {p}, line {number}: not a JSON object ({exc.msg})",
                    ErrorCode.REPLAY_FILE,
                ) from None
            except RecursionError:
                raise LlmError(
                    f"recording {p}, line {number}: nested too deeply to read",
                    ErrorCode.REPLAY_FILE,
                ) from None
            items.append(item)
            numbered.append((f"line {number}", item))
    warnings = []
    if not any(isinstance(obj, dict) and "notebook_llm_recording" in obj for obj in items) and not (
        stripped.startswith("[")
    ):
        warnings.append(f"{p} has no notebook_llm_recording header: is it a recording?")
    exchanges = []
    for where, obj in numbered:
        if not isinstance(obj, dict) or "method" not in obj:
            continue
        try:
            exchanges.append(Exchange.from_json(obj))
        except RecursionError:
            raise LlmError(
                f"recording {p}, {where}: the exchange is nested too deeply to read",
                ErrorCode.REPLAY_FILE,
            ) from None
        except Exception as exc:  # any wrong field: one line with where it is
            raise LlmError(
                f"recording {p}, {where}: an exchange that cannot be read: {exc}",
                ErrorCode.REPLAY_FILE,
            ) from None
    if not exchanges:
        warnings.append(f"{p} holds no exchanges: every request will be a REPLAY_MISS")
    return exchanges, warnings


class _Writer:
    """Writes exchanges to the recording file as they end (thread-safe): a line each to a
    JSON-lines file; into the one array of a ``.json`` file, over its closing bracket."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.as_array = path.suffix.lower() == ".json"
        self._lock = threading.Lock()
        self.exchanges: list[Exchange] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"notebook_llm_recording": FORMAT_VERSION}
        if self.as_array:
            path.write_text("[\n]\n", encoding="utf-8")
            self._end = len("[\n")  # where the closing bracket starts
        else:
            path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    def write(self, exchange: Exchange) -> None:
        with self._lock:
            first = not self.exchanges
            self.exchanges.append(exchange)
            if self.as_array:
                item = json.dumps(exchange.to_json(), ensure_ascii=False, indent=1)
                piece = ("" if first else ",\n") + item + "\n"
                with self.path.open("r+b") as fh:
                    fh.seek(self._end)
                    data = piece.encode("utf-8")
                    fh.write(data + b"]\n")
                    fh.truncate()
                self._end += len(data)
            else:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(exchange.to_json(), ensure_ascii=False) + "\n")
