"""Record the HTTP exchanges of a notebook run, and replay them later with no key and no network.

Run a notebook once against a live provider while recording, then replay it in CI, on Binder or
in a class: the adapters, the event mapping and the live view all run as usual, only the bytes
come from the file.

>>> from notebook_llm import record
>>> with record.record("run.jsonl"):          # doctest: +SKIP
...     engine.complete_sync("openai", prompt="hi")
>>> with record.replay("run.jsonl"):          # doctest: +SKIP
...     engine.complete_sync("openai", prompt="hi")   # same answer, no key, no network

Both install a transport wrapper with :func:`notebook_llm.wire.transport.use_transport`, so every
Lua adapter without its own transport (all built-in providers, the ``mock`` provider, adapters
loaded in a cell) goes through it. :func:`start_recording`, :func:`start_replay` and :func:`stop`
do the same without a ``with`` block (that is what ``%llm record PATH``, ``%llm replay PATH`` and
``%llm record stop`` call, through :func:`magic_command`).

The file
    JSON lines (a ``.json`` path gives one JSON array instead): a header line, then one object per
    exchange: ``method``, ``url``, ``path``, ``request`` (the JSON body, or ``request_text``),
    ``status``, ``headers`` (response headers), ``body`` (the whole response body as text, a
    stream recorded whole; ``body_base64`` if it is not UTF-8) and ``complete`` (``false`` when the
    reader stopped early, e.g. the Stop button). Lines are appended as each exchange ends.

What is never written
    No request header is recorded at all (so no ``Authorization``, ``x-api-key``, ...). The values
    of credential headers seen while recording are registered as secrets
    (:func:`notebook_llm.secrets.register_secret`), and every string written (URL, request body,
    response headers and body) goes through :func:`notebook_llm.secrets.redact`, which hides all
    known keys, bearer tokens and ``key=``-style query parameters (Gemini's ``?key=``). Response
    headers that carry credentials or cookies (``set-cookie``, ...) and organisation ids are
    dropped. (One limit: a key that a *model* echoes back split over several stream chunks is
    not recognised in the raw stream body; providers do not echo keys, and error bodies, which
    sometimes do, arrive whole.)

Replay
    Each request is answered by the first unused recording with the same method, URL path and
    request body (compared after the same redaction, so a key in the URL does not matter and the
    mock server's port does not either; key order and whitespace around strings are ignored). With ``strict=False`` (the default) a request whose
    recordings were all used gets the last of them again, so re-running a cell works; with
    ``strict=True`` each recording answers once. A request with no recording fails with
    ``LlmError`` code ``REPLAY_MISS`` (the stream ends with that error; nothing is sent to the
    network). A recorded stream is sent back line by line (optionally with ``chunk_delay``
    seconds between pieces) so the live view streams as it did.

Keys in replay mode
    Providers that need a key (``OPENAI_API_KEY``, ...) must run without one. While a replay is
    active, every such variable that is not set gets the placeholder value
    :data:`REPLAY_KEY` in ``os.environ`` (preset providers, providers from the config file and
    providers added to the default engine); :func:`stop` removes them again. The placeholder is
    registered as a secret, so it never shows either. A real key that is set is left alone and is
    never sent anywhere: the replay transport has no network.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from .errors import ErrorCode, LlmError
from .secrets import SENSITIVE_HEADERS, redact, redact_obj, register_secret
from .wire.transport import TransportFactory, use_transport

if TYPE_CHECKING:
    from .engine import Engine

__all__ = [
    "REPLAY_KEY",
    "REPLAY_MISS",
    "Exchange",
    "Recorder",
    "Replayer",
    "load_exchanges",
    "magic_command",
    "record",
    "replay",
    "start_recording",
    "start_replay",
    "status",
    "stop",
]

log = logging.getLogger("notebook_llm.record")

#: Error code of a request that has no recording in replay mode.
REPLAY_MISS = "REPLAY_MISS"
#: Placeholder key given to providers that need one while a replay is active.
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

    def match_key(self) -> tuple[str, str, str]:
        return (self.method.upper(), self.path, _canonical(self.request))

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
        if "body_base64" in obj:
            body = base64.b64decode(obj["body_base64"])
        else:
            body = str(obj.get("body", "")).encode("utf-8")
        request = obj["request"] if "request" in obj else obj.get("request_text")
        url = str(obj.get("url", ""))
        return cls(
            method=str(obj.get("method", "POST")),
            url=url,
            path=str(obj.get("path") or httpx.URL(url).path),
            request=request,
            status=int(obj.get("status", 200)),
            headers={str(k): str(v) for k, v in (obj.get("headers") or {}).items()},
            body=body,
            complete=bool(obj.get("complete", True)),
        )


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
        return redact_obj(json.loads(text))
    except ValueError:
        return redact(text)


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
        text = p.read_text(encoding="utf-8")
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
    else:
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise LlmError(
                    f"recording {p}, line {number}: not a JSON object ({exc.msg})",
                    ErrorCode.REPLAY_FILE,
                ) from None
    warnings = []
    if not any(isinstance(obj, dict) and "notebook_llm_recording" in obj for obj in items) and not (
        stripped.startswith("[")
    ):
        warnings.append(f"{p} has no notebook_llm_recording header: is it a recording?")
    try:
        exchanges = [
            Exchange.from_json(obj) for obj in items if isinstance(obj, dict) and "method" in obj
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise LlmError(
            f"recording {p} holds an exchange that cannot be read: {type(exc).__name__}: {exc}",
            ErrorCode.REPLAY_FILE,
        ) from None
    if not exchanges:
        warnings.append(f"{p} holds no exchanges: every request will be a REPLAY_MISS")
    return exchanges, warnings


class _Writer:
    """Appends exchanges to the recording file as they end (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.as_array = path.suffix.lower() == ".json"
        self._lock = threading.Lock()
        self.exchanges: list[Exchange] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"notebook_llm_recording": FORMAT_VERSION}
        if self.as_array:
            path.write_text("[]\n", encoding="utf-8")
        else:
            path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    def write(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)
            if self.as_array:
                data = [e.to_json() for e in self.exchanges]
                self.path.write_text(
                    json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
                )
            else:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(exchange.to_json(), ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------------- recording


class _RecordingStream(httpx.AsyncByteStream):
    """Passes the response body through unchanged and records it whole when it is closed."""

    def __init__(self, inner: httpx.AsyncByteStream, done: Any) -> None:
        self._inner = inner
        self._done = done
        self._buf = bytearray()
        self._finished = False
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._buf += chunk
            yield chunk
        self._finished = True

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._inner.aclose()
        finally:
            self._done(bytes(self._buf), self._finished)


class Recorder:
    """Records every exchange that passes through the transports it makes (see module doc)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._writer = _Writer(self.path)

    @property
    def exchanges(self) -> list[Exchange]:
        return list(self._writer.exchanges)

    def transport(self, inner: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncBaseTransport:
        if inner is None:
            from .wire.transport import shared_ssl_context

            inner = httpx.AsyncHTTPTransport(verify=shared_ssl_context())
        return _RecordingTransport(self, inner)

    def _finish(
        self,
        request: httpx.Request,
        response: httpx.Response,
        req_body: Any,
        body: bytes,
        complete: bool,
    ) -> None:
        url, path = _redacted_url(request.url)
        text = body.decode("utf-8", errors="strict") if _is_utf8(body) else None
        stored = redact(text).encode("utf-8") if text is not None else body
        self._writer.write(
            Exchange(
                method=request.method,
                url=url,
                path=path,
                request=req_body,
                status=response.status_code,
                headers=_response_headers(response.headers),
                body=stored,
                complete=complete,
            )
        )

    def __repr__(self) -> str:
        return f"<Recorder: {self.describe()}>"

    def describe(self) -> str:
        n = len(self._writer.exchanges)
        return f"recording to {self.path} ({n} exchange{'s' if n != 1 else ''} so far)"


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _RecordingTransport(httpx.AsyncBaseTransport):
    def __init__(self, recorder: Recorder, inner: httpx.AsyncBaseTransport) -> None:
        self._recorder = recorder
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        _remember_credentials(request)
        await request.aread()
        req_body = _request_body(request)
        # Ask for an unencoded body so the recording holds readable text, not gzip.
        request.headers["accept-encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)

        def done(body: bytes, complete: bool) -> None:
            self._recorder._finish(request, response, req_body, body, complete)

        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_RecordingStream(stream, done),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


# --------------------------------------------------------------------------------- replay


class _ReplayStream(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes], delay: float) -> None:
        self._pieces = pieces
        self._delay = delay

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i, piece in enumerate(self._pieces):
            if i and self._delay > 0:
                await asyncio.sleep(self._delay)
            yield piece

    async def aclose(self) -> None:
        return None


def _pieces(body: bytes, content_type: str, size: int = 256) -> list[bytes]:
    """Streams go back line by line (grouped up to ``size`` bytes); other bodies in one piece."""
    if not body:
        return []
    if "event-stream" not in content_type and "ndjson" not in content_type:
        return [body]
    out: list[bytes] = []
    current = b""
    for line in body.splitlines(keepends=True):
        current += line
        # Cut after an event's blank line (SSE) or after each line (NDJSON), once big enough.
        if line.strip() == b"" or "ndjson" in content_type or len(current) >= size:
            out.append(current)
            current = b""
    if current:
        out.append(current)
    return out


class Replayer:
    """Answers requests from a recording (see module doc)."""

    def __init__(self, path: str | Path, *, strict: bool = False, chunk_delay: float = 0.0) -> None:
        self.path = Path(path).expanduser()
        self.strict = strict
        self.chunk_delay = chunk_delay
        self.exchanges, self.warnings = _read_recording(self.path)
        for line in self.warnings:
            log.warning("replay: %s", line)
        self.misses = 0
        self._lock = threading.Lock()
        register_secret(REPLAY_KEY)

    def transport(self) -> httpx.AsyncBaseTransport:
        return _ReplayTransport(self)

    def find(self, request: httpx.Request) -> Exchange:
        _remember_credentials(request)
        _url, path = _redacted_url(request.url)
        key = (request.method.upper(), path, _canonical(_request_body(request)))
        with self._lock:
            matching = [e for e in self.exchanges if e.match_key() == key]
            for exchange in matching:
                if not exchange.used:
                    exchange.used = True
                    return exchange
            if matching and not self.strict:
                return matching[-1]
            self.misses += 1
        same_path = [e for e in self.exchanges if e.method.upper() == key[0] and e.path == path]
        hint = (
            f"{len(same_path)} recording(s) for {key[0]} {path} have a different request body"
            + (" or were already used (strict replay)" if self.strict else "")
            if same_path
            else f"nothing was recorded for {key[0]} {path}"
        )
        raise LlmError(
            f"replay: no recorded response for {key[0]} {redact(str(request.url))} in "
            f"{self.path.name}: {hint}. Record it first (record.start_recording / "
            "%llm record PATH) with the same prompt and options, or stop replaying.",
            REPLAY_MISS,
            details={"path": path, "recording": str(self.path)},
        )

    def __repr__(self) -> str:
        return f"<Replayer: {self.describe()}>"

    def describe(self) -> str:
        used = sum(e.used for e in self.exchanges)
        return (
            f"replaying {self.path} ({used} of {len(self.exchanges)} recorded exchanges used"
            + (f", {self.misses} miss{'es' if self.misses != 1 else ''}" if self.misses else "")
            + ")"
        )


class _ReplayTransport(httpx.AsyncBaseTransport):
    def __init__(self, replayer: Replayer) -> None:
        self._replayer = replayer

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        exchange = self._replayer.find(request)
        headers = dict(exchange.headers)
        ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
        pieces = _pieces(exchange.body, ctype.lower())
        return httpx.Response(
            exchange.status,
            headers=headers,
            stream=_ReplayStream(pieces, self._replayer.chunk_delay),
            request=request,
        )


# --------------------------------------------------------------------------------- placeholder keys


def _key_variables(engine: Engine | None = None) -> set[str]:
    """Environment variables that hold the keys of providers that need one: the presets', and
    those of the config file and the providers of ``engine`` (default: the shared engine)."""
    from .providers import PRESETS, ProviderConfig, resolve_provider_config

    names = {p.api_key_env for p in PRESETS.values() if p.needs_key and p.api_key_env}
    engines: list[Engine] = [engine] if engine is not None else []
    with contextlib.suppress(Exception):
        from .session import default_engine

        engines.append(default_engine())
    for eng in engines:
        for table in eng.file_config.providers.values():
            if isinstance(table.get("api_key_env"), str):
                names.add(table["api_key_env"])
        bound: dict[str, ProviderConfig] = getattr(eng, "_providers", {})
        for name in eng.provider_names():  # without binding routes (no side effects)
            config: ProviderConfig | None = bound.get(name)
            if config is None:
                with contextlib.suppress(LlmError):
                    config = resolve_provider_config(name, eng.file_config)
            if config is not None and config.needs_key and config.api_key_env:
                names.add(config.api_key_env)
    return names


# --------------------------------------------------------------------------------- session API

_state_lock = threading.Lock()
_active: Recorder | Replayer | None = None
_previous_factory: TransportFactory | None = None
_placeholder_vars: list[str] = []


def _install(obj: Recorder | Replayer, engine: Engine | None = None) -> None:
    global _active, _previous_factory
    stop()
    factory: TransportFactory = obj.transport
    with _state_lock:
        _previous_factory = use_transport(factory)
        _active = obj
        if isinstance(obj, Replayer):
            for var in sorted(_key_variables(engine)):
                if not os.environ.get(var):
                    os.environ[var] = REPLAY_KEY
                    _placeholder_vars.append(var)


def start_recording(path: str | Path) -> Recorder:
    """Record every provider exchange to ``path`` (overwritten) until :func:`stop`."""
    recorder = Recorder(path)
    _install(recorder)
    return recorder


def start_replay(
    path: str | Path,
    *,
    strict: bool = False,
    chunk_delay: float = 0.0,
    engine: Engine | None = None,
) -> Replayer:
    """Answer every provider request from ``path`` until :func:`stop` (no key, no network).

    Key variables of providers that need a key get :data:`REPLAY_KEY` while it lasts: the
    presets', the config file's, and those of ``engine``'s providers (default: the shared one).
    """
    replayer = Replayer(path, strict=strict, chunk_delay=chunk_delay)
    _install(replayer, engine)
    return replayer


def stop() -> str:
    """End recording or replay: restore the transport and remove placeholder keys.

    Returns a one-line summary (empty when nothing was active)."""
    global _active, _previous_factory
    with _state_lock:
        active, _active = _active, None
        if active is None:
            return ""
        use_transport(_previous_factory)
        _previous_factory = None
        for var in _placeholder_vars:
            if os.environ.get(var) == REPLAY_KEY:
                del os.environ[var]
        _placeholder_vars.clear()
    if isinstance(active, Recorder):
        n = len(active.exchanges)
        return f"recorded {n} exchange{'s' if n != 1 else ''} to {active.path}"
    return "stopped " + active.describe()


def status() -> str:
    """What is active: ``recording to ...``, ``replaying ...`` or ``not recording or replaying``."""
    active = _active
    return active.describe() if active is not None else "not recording or replaying"


def active() -> Recorder | Replayer | None:
    """The active :class:`Recorder` or :class:`Replayer`, if any."""
    return _active


@contextlib.contextmanager
def record(path: str | Path) -> Iterator[Recorder]:
    """``with record(path):`` records the exchanges made inside the block."""
    recorder = start_recording(path)
    try:
        yield recorder
    finally:
        if _active is recorder:
            stop()


@contextlib.contextmanager
def replay(
    path: str | Path,
    *,
    strict: bool = False,
    chunk_delay: float = 0.0,
    engine: Engine | None = None,
) -> Iterator[Replayer]:
    """``with replay(path):`` answers the requests made inside the block from ``path``."""
    replayer = start_replay(path, strict=strict, chunk_delay=chunk_delay, engine=engine)
    try:
        yield replayer
    finally:
        if _active is replayer:
            stop()


def magic_command(args: list[str] | str) -> str:
    """What ``%llm record ...`` / ``%llm replay ...`` do; returns the line to print.

    ``record PATH`` | ``record stop`` | ``replay PATH [--strict]`` | ``replay stop`` | ``stop`` |
    ``record`` / ``replay`` (status). Raises ``ValueError`` with a usage line for anything else.
    """
    words = args.split() if isinstance(args, str) else list(args)
    usage = "usage: %llm record PATH | %llm replay PATH [--strict] | %llm record stop"
    if not words:
        raise ValueError(usage)
    command, rest = words[0], words[1:]
    if command == "stop" or (command in ("record", "replay") and rest == ["stop"]):
        return stop() or "not recording or replaying"
    if command not in ("record", "replay"):
        raise ValueError(usage)
    if not rest:
        return status()
    strict = "--strict" in rest
    paths = [w for w in rest if w != "--strict"]
    if len(paths) != 1 or (strict and command == "record"):
        raise ValueError(usage)
    previous = _active
    # The new file is read (replay) or created (record) before the old session ends, so a bad
    # path leaves it running; ending one is always said, never done silently.
    if command == "record":
        recorder = Recorder(paths[0])
        ended = stop()
        _install(recorder)
        line = f"recording provider exchanges to {recorder.path} (no keys are written); stop with %llm record stop"
        if isinstance(previous, Recorder):
            return f"switched recording: {ended}; now {line}"
        return f"ended the replay ({ended}); {line}" if ended else line
    replayer = Replayer(paths[0], strict=strict)
    ended = stop()
    _install(replayer)
    line = (
        f"replaying {len(replayer.exchanges)} recorded exchanges from {replayer.path} "
        "(no key or network needed); stop with %llm replay stop"
    )
    if ended:
        what = "the recording" if isinstance(previous, Recorder) else "the previous replay"
        line = f"ended {what} ({ended}); {line}"
    return "\n".join([line, *(f"warning: {w}" for w in replayer.warnings)])
