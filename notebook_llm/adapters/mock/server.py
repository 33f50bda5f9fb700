"""A loopback HTTP server speaking OpenAI, Anthropic and Ollama wire formats with mock models.

>>> with MockServer() as srv:  # doctest: +SKIP
...     httpx.post(srv.url + "/v1/chat/completions", json={"model": "echo", ...})

Routes: ``POST /v1/chat/completions`` (and ``/chat/completions``), ``POST /v1/messages``,
``POST /api/chat``, ``GET /v1/models`` (and ``/models``), ``GET /api/tags``; the batch APIs
(OpenAI's Files API and ``/v1/batches``, Anthropic's ``/v1/messages/batches``:
:mod:`notebook_llm.adapters.mock.batch_endpoints`, driven by :attr:`MockServer.batches`).
Faults (see :data:`notebook_llm.adapters.mock.faults.FAULTS`) are queued with :meth:`MockServer.inject`
or chosen per request with the header ``X-Mock-Fault: name; key=value``; they apply to the
POST generation routes only. ``rate_limit=MockRateLimit(requests=N, window=W)`` makes the
generation routes keep a provider's rate limit, with its headers and a 429 past it
(:mod:`.rate_limits`).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from types import TracebackType
from typing import Any

from . import bodies
from .batch_endpoints import MockBatches
from .bodies import Format, Frame
from .faults import (
    FAULT_HEADER,
    FAULTS,
    KEEPALIVE,
    STALL,
    TRICKLE,
    Fault,
    faulted_stream,
    parse_fault_header,
)
from .models import MockReply, UnknownModelError, apply_max_tokens, generate, usage_for
from .rate_limits import MockRateLimit

__all__ = ["FAULTS", "Fault", "MockServer", "RecordedRequest"]

_POST_ROUTES: dict[str, Format] = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/messages": "anthropic",
    "/api/chat": "ollama",
}
_BATCH_POST_ROUTES = frozenset({"/v1/files", "/v1/batches", "/v1/messages/batches"})
_BATCH_GET_PREFIXES = ("/v1/batches/", "/v1/files/", "/v1/messages/batches/")
_GET_ROUTES: dict[str, Format] = {
    "/v1/models": "openai",
    "/models": "openai",
    "/api/tags": "ollama",
}


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received; header names are lower-cased, ``body`` is parsed JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # The default backlog of 5 drops connections when a batch opens 16 at once.
    request_queue_size = 128
    mock: MockServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that went away."""


class MockServer:
    """Mock LLM server on ``127.0.0.1`` in a daemon thread; a context manager.

    Attributes: ``latency`` (seconds before each response), ``chunk_delay`` (seconds between
    stream chunks), ``require_key`` (if set, a ``Authorization: Bearer <key>`` or
    ``x-api-key: <key>`` header is required, else 401).
    """

    def __init__(
        self,
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        latency: float = 0.0,
        chunk_delay: float = 0.0,
        require_key: str | None = None,
        rate_limit: MockRateLimit | None = None,
    ) -> None:
        """Configure the server; nothing is bound until :meth:`start`."""
        self.rate_limit = rate_limit
        self.host = host
        self.port = port
        self.latency = latency
        self.chunk_delay = chunk_delay
        self.require_key = require_key
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._replies: deque[MockReply] = deque()
        self._faults: deque[Fault] = deque()
        self._conns: set[socket.socket] = set()
        self._opened = 0
        self._active = 0
        self._most_active = 0
        self._handlers: set[threading.Thread] = set()
        self._ids = count(1)
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: The batch APIs' state: ``batches.polls`` (reads before a batch has ended),
        #: ``batches.queue(BatchScript(...))`` (how the next batch runs).
        self.batches = MockBatches()

    # -------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321`` (port known after :meth:`start`)."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> MockServer:
        """Bind and serve in a background daemon thread; returns ``self``."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.mock = self
        self.port = httpd.server_address[1]
        self.batches.base_url = self.url
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"MockServer:{self.port}",
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop serving, wake stalled handlers, close open connections; returns promptly."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            conns, handlers = list(self._conns), list(self._handlers)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout)
        for t in handlers:
            t.join(timeout / max(len(handlers), 1))

    def __enter__(self) -> MockServer:
        """Start the server (``with MockServer() as srv:``)."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server."""
        self.stop()

    # -------------------------------------------------------------- scripting

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def connections_opened(self) -> int:
        """How many TCP connections clients have opened so far (keep-alive reuses one)."""
        with self._lock:
            return self._opened

    @property
    def open_connections(self) -> int:
        """How many client connections are open now (a closed one is gone once the server
        notices: at its next read or write)."""
        with self._lock:
            return len(self._conns)

    @property
    def most_requests_at_once(self) -> int:
        """The most generation requests the server has been answering at the same time
        (from receiving one to the end of its answer)."""
        with self._lock:
            return self._most_active

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self._requests.clear()

    def queue_reply(self, reply: MockReply) -> None:
        """Answer the next generation request with ``reply`` instead of running the model."""
        with self._lock:
            self._replies.append(reply)

    def inject(self, fault: str, *, count: int = 1, **params: float | str) -> None:
        """Apply ``fault`` to the next ``count`` generation requests (see ``FAULTS``)."""
        f = Fault(fault, dict(params))
        with self._lock:
            self._faults.extend([f] * count)

    # -------------------------------------------------------------- internals (handler side)

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(req)

    def _count_active(self, change: int) -> None:
        with self._lock:
            self._active += change
            self._most_active = max(self._most_active, self._active)

    def _next_fault(self, header: str | None) -> Fault | None:
        if header:
            return parse_fault_header(header)
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def _next_reply(self) -> MockReply | None:
        with self._lock:
            return self._replies.popleft() if self._replies else None

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._opened += 1
                self._conns.add(conn)
                self._handlers.add(threading.current_thread())
            else:
                self._conns.discard(conn)
                self._handlers.discard(threading.current_thread())

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopping; ``False`` if the server is stopping."""
        if seconds > 0:
            self._stopping.wait(seconds)
        return not self._stopping.is_set()

    def _rid(self, fmt: Format) -> str:
        n = next(self._ids)
        return f"msg_mock{n:06d}" if fmt == "anthropic" else f"chatcmpl-mock{n:06d}"


_END = b"0\r\n\r\n"  # the end of a chunked body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Stream chunks are small writes: without TCP_NODELAY, Nagle's algorithm holds each one
    # until the previous is acknowledged, which delays streams and caps the request rate.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.mock._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.mock._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    #: Headers every answer to the current request carries (the rate limit's state).
    extra_headers: dict[str, str] | None = None

    def end_headers(self) -> None:
        for name, value in (self.extra_headers or {}).items():
            self.send_header(name, value)
        super().end_headers()

    # -------------------------------------------------------------- plumbing

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send_bytes(
        self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj, ensure_ascii=False).encode()
        self._send_bytes(status, body, "application/json", headers)

    def _send_error(self, fmt: Format, kind: bodies.ErrorKind, message: str = "") -> None:
        status, body = bodies.error_body(fmt, kind, message)
        self._send_json(status, body)

    def _abort(self) -> None:
        """Close the connection abruptly."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _chunk(self, data: bytes, last: bool = False) -> None:
        # The last chunk goes out with the body's end in one write, as servers that buffer their
        # writes send it: a client then reads both at once.
        self.wfile.write(b"%x\r\n%s\r\n%s" % (len(data), data, _END if last else b""))
        self.wfile.flush()

    def _authorized(self) -> bool:
        key = self.server.mock.require_key
        if key is None:
            return True
        return self.headers.get("Authorization", "") == f"Bearer {key}" or (
            self.headers.get("x-api-key") == key
        )

    # -------------------------------------------------------------- routes

    def do_GET(self) -> None:
        """Model listings and a liveness text at ``/``."""
        mock = self.server.mock
        path = self.path.split("?")[0]
        mock._record(RecordedRequest("GET", path, _lower(self.headers.items()), None))
        try:
            if not mock._sleep(mock.latency):
                return self._abort()
            if path == "/":
                return self._send_bytes(200, b"notebook_llm mock server is running", "text/plain")
            if path.startswith(_BATCH_GET_PREFIXES):
                return self._batch_get(path)
            if path == "/v1/batches":  # the list of batches: its query says which page
                return self._batch_list(self.path.partition("?")[2])
            fmt = _GET_ROUTES.get(path)
            if fmt is None:
                return self._send_error("openai", "not_found", f"Unknown route {path}")
            if not self._authorized():
                return self._send_error(fmt, "unauthorized")
            self._send_json(200, bodies.models_list(fmt))
        except (ConnectionError, OSError):
            self.close_connection = True

    def do_POST(self) -> None:
        """Generation routes (OpenAI, Anthropic, Ollama)."""
        mock = self.server.mock
        path = self.path.split("?")[0]
        raw = self._read_body()
        if path in _BATCH_POST_ROUTES:
            return self._batch_post(path, raw)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        mock._record(RecordedRequest("POST", path, _lower(self.headers.items()), body))
        self.extra_headers = None
        mock._count_active(+1)
        try:
            self._generate(path, body)
        except (ConnectionError, OSError):
            self.close_connection = True
        finally:
            mock._count_active(-1)

    def _batch_get(self, path: str) -> None:
        """A GET of a batch API route: a batch's state, a file's content, a batch's results."""
        fmt: Format = "anthropic" if path.startswith("/v1/messages/") else "openai"
        if not self._authorized():
            return self._send_error(fmt, "unauthorized")
        reply = self.server.mock.batches.get(path)
        if reply is None:
            return self._send_error(fmt, "not_found", f"Unknown route {path}")
        return self._send_bytes(*reply)

    def _batch_list(self, query: str) -> None:
        if not self._authorized():
            return self._send_error("openai", "unauthorized")
        return self._send_bytes(*self.server.mock.batches.list_openai(query))

    def _batch_post(self, path: str, raw: bytes) -> None:
        """A POST to a batch API route (no faults, no latency: the batch is what takes time)."""
        mock = self.server.mock
        ctype = self.headers.get("Content-Type", "")
        try:
            recorded: Any = json.loads(raw) if ctype.startswith("application/json") else None
        except ValueError:
            recorded = None
        mock._record(RecordedRequest("POST", path, _lower(self.headers.items()), recorded))
        fmt: Format = "anthropic" if path.startswith("/v1/messages") else "openai"
        try:
            if not self._authorized():
                return self._send_error(fmt, "unauthorized")
            reply = mock.batches.post(path, ctype, raw)
            assert reply is not None
            self._send_bytes(*reply)
        except (ConnectionError, OSError):
            self.close_connection = True

    def _generate(self, path: str, body: Any) -> None:
        mock = self.server.mock
        fmt = _POST_ROUTES.get(path)
        if fmt is None:
            return self._send_error("openai", "not_found", f"Unknown route {path}")
        if not self._authorized():
            return self._send_error(fmt, "unauthorized")
        if mock.rate_limit is not None:
            limit = body.get("max_tokens") if isinstance(body, dict) else None
            tokens = len(json.dumps(body)) / 4 + (limit if isinstance(limit, int) else 0)
            fits, self.extra_headers = mock.rate_limit.admit(tokens, fmt == "anthropic")
            if not fits:
                status, err = bodies.error_body(fmt, "rate_limit")
                return self._send_json(status, err)
        try:
            fault = mock._next_fault(self.headers.get(FAULT_HEADER))
        except ValueError as e:
            return self._send_error(fmt, "invalid_request", str(e))
        if not mock._sleep(mock.latency):
            return self._abort()
        if not isinstance(body, dict):
            return self._send_error(fmt, "invalid_request", "Request body must be a JSON object.")
        name = fault.name if fault else ""
        if name == "rate_limit":
            status, err = bodies.error_body(fmt, "rate_limit")
            secs = fault.params.get("seconds", 1) if fault else 1
            return self._send_json(status, err, {"Retry-After": str(secs)})
        if name == "unauthorized":
            return self._send_error(fmt, "unauthorized")
        if name == "server_error" and fault:
            status, err = bodies.error_body(fmt, "server_error")
            return self._send_json(int(fault.num("status")), err)
        stream = bodies.is_stream(fmt, body)
        if name == "wrong_format":
            html = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>\n"
            ctype = "text/event-stream; charset=utf-8" if stream else "application/json"
            return self._send_bytes(200, html, ctype)
        request = bodies.to_chat_request(fmt, body)
        model = str(body.get("model", ""))
        reply = mock._next_reply()
        if reply is None:
            try:
                reply = generate(request)
            except UnknownModelError as e:
                msg = {
                    "openai": f"The model `{e.model}` does not exist",
                    "anthropic": f"model: {e.model}",
                    "ollama": f'model "{e.model}" not found, try pulling it first',
                }[fmt]
                return self._send_error(fmt, "model_not_found", msg)
        else:
            reply = apply_max_tokens(reply, request)
        if name == "drip":
            reply = reply.repieced(1)
        usage = usage_for(reply, request)
        rid = mock._rid(fmt)
        if stream:
            frames = bodies.stream_frames(fmt, reply, model=model, usage=usage, rid=rid)
            return self._stream(fmt, frames, fault, model, rid)
        if name == "error_event":
            kind: bodies.ErrorKind = "server_error"
            return self._send_json(200, bodies.error_body(fmt, kind)[1])
        if name == "oversized_line" and fault:
            reply = MockReply.build(reply.text + "x" * int(fault.num("size")))
        doc = bodies.json_body(
            fmt, reply, model=model, usage=usage, rid=rid, no_end=name == "no_end"
        )
        data = json.dumps(doc, ensure_ascii=False).encode()
        if name == "malformed":
            data = data[: len(data) // 2]
        return self._json_faulty(data, fault)

    def _json_faulty(self, data: bytes, fault: Fault | None) -> None:
        mock = self.server.mock
        name = fault.name if fault else ""
        if name not in ("disconnect", "stall", "drip"):
            return self._send_bytes(200, data, "application/json")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        half = len(data) // 2
        if name == "disconnect":
            self.wfile.write(data[:half])
            return self._abort()
        if name == "stall" and fault:
            self.wfile.write(data[:half])
            if not mock._sleep(fault.num("seconds")):
                return self._abort()
            self.wfile.write(data[half:])
            return None
        step = max(len(data) // 8, 1)
        for i in range(0, len(data), step):
            if i and fault and not mock._sleep(fault.num("delay")):
                return self._abort()
            self.wfile.write(data[i : i + step])
        return None

    def _stream(
        self, fmt: Format, frames: list[Frame], fault: Fault | None, model: str, rid: str
    ) -> None:
        mock = self.server.mock
        name = fault.name if fault else ""
        out = faulted_stream(fmt, frames, fault, model=model, rid=rid)
        delay = max(mock.chunk_delay, fault.num("delay") if name == "drip" and fault else 0.0)

        self.send_response(200)
        self.send_header("Content-Type", bodies.CONTENT_TYPES[fmt])
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        ended = False  # the body's end went with the last chunk
        for i, item in enumerate(out):
            if item is STALL:
                if not mock._sleep(fault.num("seconds") if fault else 0):
                    return self._abort()
                continue
            if (item is KEEPALIVE or item is TRICKLE) and fault:
                if not self._alive_without_events(fmt, fault, item is TRICKLE):
                    return self._abort()
                continue
            if i and not mock._sleep(delay):
                return self._abort()
            assert isinstance(item, bytes)
            ended = i == len(out) - 1 and name != "disconnect"
            self._chunk(item, last=ended)
        if name == "disconnect":
            return self._abort()
        if not ended:
            self.wfile.write(_END)
            self.wfile.flush()
        return None

    def _alive_without_events(self, fmt: Format, fault: Fault, trickle: bool) -> bool:
        """Keep the stream busy for the fault's ``seconds`` without completing an event: a
        comment (SSE) or a blank line (NDJSON) every ``delay``, or (``trickle``) one space of a
        line that ends only afterwards. ``False`` if the server is stopping."""
        mock = self.server.mock
        piece = b" " if trickle else (b"\n" if fmt == "ollama" else b": keepalive\n\n")
        end = time.monotonic() + fault.num("seconds")
        while time.monotonic() < end:
            if not mock._sleep(fault.num("delay")):
                return False
            self._chunk(piece, last=False)
        if trickle:
            self._chunk(b"\n", last=False)
        return True


def _lower(items: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in items}
