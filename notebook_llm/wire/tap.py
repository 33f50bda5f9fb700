"""The transports of record and replay: a :class:`Recorder` wraps the real transport and
writes each exchange to a cassette as it ends; a :class:`Replayer` answers each request from
one, with no network.

Both only *make* transports; who uses them is the engine's business
(``Engine.recording(path)`` / ``Engine.replaying(path)``), so nothing here is process-wide.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from ..core.errors import LlmError
from ..core.redaction import register_secret
from .cassette import (
    REPLAY_KEY,
    REPLAY_MISS,
    Exchange,
    MatchKey,
    _read_recording,
    _redacted_url,
    _remember_credentials,
    _request_body,
    _response_headers,
    _Writer,
    query_text,
    redact_body,
    request_key,
)

log = logging.getLogger("notebook_llm.api.recording")

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

    #: Whether an engine using this answers from a file (it then needs no key).
    replays = False

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._writer = _Writer(self.path)

    @property
    def exchanges(self) -> list[Exchange]:
        return list(self._writer.exchanges)

    def transport(self, inner: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncBaseTransport:
        """A transport that records what passes through ``inner`` (default: a new network
        transport, which honours environment proxies, closed with it; a given ``inner`` is the
        caller's and stays open)."""
        if inner is None:
            from .transport import network_transport

            return _RecordingTransport(self, network_transport(), owned=True)
        return _RecordingTransport(self, inner, owned=False)

    def _finish(
        self,
        request: httpx.Request,
        response: httpx.Response,
        req_body: Any,
        body: bytes,
        complete: bool,
    ) -> None:
        url, path = _redacted_url(request.url)
        stored = redact_body(body)  # values redacted, so a JSON body stays JSON
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


class _RecordingTransport(httpx.AsyncBaseTransport):
    def __init__(self, recorder: Recorder, inner: httpx.AsyncBaseTransport, *, owned: bool) -> None:
        self._recorder = recorder
        self._inner = inner
        self._owned = owned

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
        if self._owned:
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

    #: Whether an engine using this answers from a file (it then needs no key).
    replays = True

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

    def transport(self, inner: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncBaseTransport:
        """A transport that answers from the recording (``inner`` is never used: no network)."""
        return _ReplayTransport(self)

    def find(self, request: httpx.Request) -> Exchange:
        """The recorded exchange that answers ``request``: the first unused one with the same
        method, path, query and body (:func:`~notebook_llm.wire.cassette.request_key`; not the
        host or port), else (not strict) the last used one; ``LlmError(REPLAY_MISS)`` saying
        which part differs when there is none."""
        _remember_credentials(request)
        url, path = _redacted_url(request.url)
        key = request_key(request.method, path, url, _request_body(request))
        with self._lock:
            matching = [e for e in self.exchanges if e.match_key() == key]
            for exchange in matching:
                if not exchange.used:
                    exchange.used = True
                    return exchange
            if matching and not self.strict:
                return matching[-1]
            self.misses += 1
        method = key[0]
        raise LlmError(
            f"replay: no recorded response for {method} {url} in "
            f"{self.path.name}: {self._miss_hint(key)}. Record it first "
            "(record.start_recording / %llm record PATH) with the same prompt and options, "
            "or stop replaying.",
            REPLAY_MISS,
            details={"path": path, "recording": str(self.path)},
        )

    def _miss_hint(self, key: MatchKey) -> str:
        """Why no recording answers ``key``: nothing for its path, only other queries (the
        recorded ones shown, already redacted), or only other bodies (or all used, strict)."""
        method, path = key[0], key[1]
        same_path = [e for e in self.exchanges if e.match_key()[:2] == key[:2]]
        if not same_path:
            return f"nothing was recorded for {method} {path}"
        same_query = [e for e in same_path if e.match_key()[2] == key[2]]
        if same_query:
            return (
                f"{len(same_query)} recording(s) for {method} {path}"
                + (" with this query" if key[2] else "")
                + " have a different request body"
                + (" or were already used (strict replay)" if self.strict else "")
            )
        shown = list(dict.fromkeys(query_text(e.url)[:80] or "(none)" for e in same_path))
        return (
            f"{len(same_path)} recording(s) for {method} {path} have another query string "
            f"(recorded: {', '.join(shown[:3])}{', ...' if len(shown) > 3 else ''})"
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
