"""An asyncio network backend and HTTP/1.1 connection for httpcore, the layer under httpx.

Why it exists (issue 16, measured with ``bench/bench_batch.py``): httpcore reaches the network
on asyncio through AnyIO. AnyIO's ``SocketStream.send`` ends every write that did not have to
wait with a cancel-shielded ``sleep(0)`` (httpcore writes a request's headers and body
separately: two), and AnyIO's ``Lock`` does the same on every acquire, even of a free lock
(httpcore's connection takes three per request). In a batch of 16 concurrent streams each of
those yields puts the request behind every other ready task: responses that arrive together
are worked on round-robin, all of them finish late, and the next round's requests leave late.
A request took a median 10-14 ms from ``complete()`` to the wire (2-3 ms now) and the batch ran
at 1.36-1.45x its ideal time (1.17x now, on the same loaded machine).

httpcore lets both be replaced through public API: ``AsyncConnectionPool(network_backend=...)``
and the pool's ``create_connection``. No maintained package provides an asyncio backend (the
upstream lock fix, encode/httpcore#953, was merged and reverted), so this module is the small
hand-written part:

* :class:`AsyncioBackend` / :class:`AsyncioStream`: a buffered :class:`asyncio.Protocol` per
  connection, a write that returns at once unless the socket's buffer is full (then it waits
  for it to drain, as ``StreamWriter.drain`` does), a read that returns buffered bytes without
  waiting and pauses the socket while 256 KiB lie unread, a timeout as one timer per wait, and
  the errors httpcore expects (``ConnectError``, ``ReadTimeout``...); TLS is
  ``loop.start_tls`` on the same protocol;
* :class:`Http11Connection`: connects through that backend, then is httpcore's own
  ``AsyncHTTP11Connection`` (h11 does HTTP) with an ``asyncio.Lock``, whose response body comes
  up one piece per network read instead of one per HTTP chunk (:class:`_Http11`);
* :class:`ConnectionPool`: httpcore's pool (limits, queueing, keep-alive) of those.
"""

from __future__ import annotations

import asyncio
import ssl
import typing
from collections import deque
from collections.abc import Iterable

import h11
import httpcore

#: Stop reading from the socket while this much is buffered and unread (back pressure).
READ_HIGH_WATER = 256 * 1024

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class _Protocol(asyncio.Protocol):
    """One connection's bytes: buffered as they arrive, handed to one reader at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.eof = False
        self.error: BaseException | None = None
        self.reading_paused = False
        self.writing_paused = False
        self.read_waiter: asyncio.Future[None] | None = None
        self.drain_waiter: asyncio.Future[None] | None = None

    # ---------------------------------------------------------------- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > READ_HIGH_WATER and not self.reading_paused and self.transport:
            self.transport.pause_reading()
            self.reading_paused = True
        self._wake_reader()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake_reader()
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        if exc is not None:
            self.error = exc
        self._wake_reader()
        self._wake_writer()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._wake_writer()

    def _wake_reader(self) -> None:
        waiter, self.read_waiter = self.read_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_writer(self) -> None:
        waiter, self.drain_waiter = self.drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ---------------------------------------------------------------- for the stream

    def take(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` buffered bytes (``b""`` when none): everything that arrived
        since the last read, in one piece, so that the stream's parser runs once for it."""
        parts: list[bytes] = []
        size = 0
        while self.chunks and size < max_bytes:
            part = self.chunks.popleft()
            if size + len(part) > max_bytes:
                cut = max_bytes - size
                part, rest = part[:cut], part[cut:]
                self.chunks.appendleft(rest)
            parts.append(part)
            size += len(part)
        chunk = parts[0] if len(parts) == 1 else b"".join(parts)
        self.buffered -= size
        if self.reading_paused and self.buffered <= READ_HIGH_WATER // 4 and self.transport:
            self.transport.resume_reading()
            self.reading_paused = False
        return chunk

    async def wait(self, kind: str, limit: float | None) -> None:
        """Wait until bytes, EOF or an error arrive (``kind="read"``) or the write buffer has
        drained (``kind="write"``); ``TimeoutError`` after ``limit`` seconds."""
        waiter: asyncio.Future[None] = self.loop.create_future()
        if kind == "read":
            self.read_waiter = waiter
        else:
            self.drain_waiter = waiter
        timer = None
        if limit is not None:
            timer = self.loop.call_later(limit, _expire, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One TCP (or TLS, or Unix socket) connection, as httpcore uses it (its interface passes
    each call's ``timeout``)."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        protocol = self._protocol
        if not protocol.chunks and not protocol.eof:
            try:
                await protocol.wait("read", timeout)
            except TimeoutError:
                raise httpcore.ReadTimeout("timed out reading the response") from None
        if protocol.chunks:
            return protocol.take(max_bytes)
        if protocol.error is not None:
            raise httpcore.ReadError(str(protocol.error) or repr(protocol.error))
        return b""  # the server closed the connection

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        protocol = self._protocol
        if protocol.error is not None or self._transport.is_closing():
            raise httpcore.WriteError(str(protocol.error or "the connection is closed"))
        self._transport.write(buffer)  # hands the bytes to the socket, or buffers them
        if protocol.writing_paused:  # the socket's buffer is full: wait until it drains
            try:
                await protocol.wait("write", timeout)
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out sending the request") from None
            if protocol.error is not None:
                raise httpcore.WriteError(str(protocol.error))

    async def aclose(self) -> None:
        # At once, as AnyIO does: a TLS close() would keep a shutdown handshake running on
        # the loop (up to 30 s), which may be about to end with the batch.
        self._transport.abort()
        # asyncio closes the socket in a callback it schedules (``connection_lost``): one turn
        # of the loop runs it, so the server sees the close when a stopped stream ends, even if
        # the caller then blocks the loop or ends it (AnyIO's aclose yields once too).
        await asyncio.sleep(0)

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
    ) -> httpcore.AsyncNetworkStream:
        loop = self._protocol.loop
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError:
            self._transport.abort()
            raise httpcore.ConnectTimeout("timed out during the TLS handshake") from None
        except (OSError, ssl.SSLError) as exc:
            self._transport.abort()
            raise httpcore.ConnectError(str(exc)) from exc
        if transport is None:  # pragma: no cover - only for a transport closed meanwhile
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        # asyncio does not call connection_made again: flow control now goes through TLS.
        self._protocol.transport = transport
        return AsyncioStream(transport, self._protocol)

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":
            # httpcore asks this of an idle keep-alive connection: anything that arrived on
            # it (bytes, EOF, an error) means the server closed it or broke it.
            protocol = self._protocol
            return bool(protocol.chunks) or protocol.eof or self._transport.is_closing()
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend on the running asyncio loop (see the module docstring)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    lambda: _Protocol(loop),
                    host,
                    port,
                    local_addr=(local_address, 0) if local_address else None,
                    happy_eyeballs_delay=0.25,  # as AnyIO does: IPv6 and IPv4 both tried
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _configured(transport, protocol, socket_options)  # asyncio sets TCP_NODELAY

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_unix_connection(
                    lambda: _Protocol(loop), path
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"timed out connecting to {path}") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _configured(transport, protocol, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _configured(
    transport: asyncio.BaseTransport,
    protocol: _Protocol,
    socket_options: Iterable[SocketOption] | None,
) -> AsyncioStream:
    sock = transport.get_extra_info("socket")
    for option in socket_options or ():
        sock.setsockopt(*option)
    return AsyncioStream(typing.cast(asyncio.Transport, transport), protocol)


class _Http11(httpcore.AsyncHTTP11Connection):
    """httpcore's HTTP/1.1 connection, whose response body comes one piece per network read.

    httpcore yields one piece per HTTP chunk. A provider writes each SSE event as its own chunk,
    so a read that brought six events became six trips up through httpcore, httpx and the
    adapter's pipeline (a Lua call each). Here the chunks h11 already holds are joined, never
    waiting for more: what arrives together is handled together, and what arrives alone is
    passed on alone, as soon as it arrives (tests/test_wire_transport.py checks both).
    """

    async def _receive_response_body(
        self, request: httpcore.Request
    ) -> typing.AsyncIterator[bytes]:
        timeout = request.extensions.get("timeout", {}).get("read")
        h11_state = self._h11_state
        while True:
            event: object = await self._receive_event(timeout=timeout)
            if isinstance(event, h11.Data):
                parts = [bytes(event.data)]
                failure: h11.RemoteProtocolError | None = None
                try:
                    event = h11_state.next_event()  # NEED_DATA when h11 holds nothing more
                    while isinstance(event, h11.Data):
                        parts.append(bytes(event.data))
                        event = h11_state.next_event()
                except h11.RemoteProtocolError as exc:
                    failure = exc
                yield b"".join(parts) if len(parts) > 1 else parts[0]
                if failure is not None:  # after the body before it; mapped as httpcore does
                    raise httpcore.RemoteProtocolError(failure) from failure
            if isinstance(event, h11.EndOfMessage) or event is h11.PAUSED:
                break


class Http11Connection(httpcore.AsyncConnectionInterface):
    """One HTTP/1.1 connection of the pool: opened on its first request by
    :class:`AsyncioBackend` (TLS for ``https``), then httpcore's own
    ``AsyncHTTP11Connection`` (h11) with an asyncio lock.

    httpcore's connection takes AnyIO locks (``anyio.Lock()``) twice per request and its
    wrapper once more; AnyIO's lock yields to the loop even when no one else holds it, which
    is the same round-robin interleaving as the writes (a batch at 1.45x of its ideal time with
    them, 1.17x without; the upstream fix, encode/httpcore#953, was merged and reverted).
    ``asyncio.Lock`` takes a free lock without yielding. The connection is used by one request
    at a time (the pool only hands out idle ones), so the lock is never contended; it still
    guards the state as httpcore's does.
    """

    def __init__(
        self,
        origin: httpcore.Origin,
        backend: AsyncioBackend,
        ssl_context: ssl.SSLContext,
        keepalive_expiry: float | None,
    ) -> None:
        self._origin = origin
        self._backend = backend
        self._ssl_context = ssl_context
        self._keepalive_expiry = keepalive_expiry
        self._http11: httpcore.AsyncHTTP11Connection | None = None
        self._connect_failed = False

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if self._http11 is None:
            try:
                stream = await self._connect(request)
            except BaseException:
                self._connect_failed = True
                raise
            http11 = _Http11(
                origin=self._origin, stream=stream, keepalive_expiry=self._keepalive_expiry
            )
            # httpcore's private names used here: `_state_lock` (see the class docstring), and
            # in _Http11 `_receive_response_body`, `_receive_event`, `_h11_state`. Tests notice
            # a rename upstream: a request that yields before it is sent, chunks of one read
            # that come up one by one (tests/test_wire_transport.py).
            http11._state_lock = asyncio.Lock()  # type: ignore[assignment]
            self._http11 = http11
        return await self._http11.handle_async_request(request)

    async def _connect(self, request: httpcore.Request) -> httpcore.AsyncNetworkStream:
        timeout = request.extensions.get("timeout", {}).get("connect")
        host = self._origin.host.decode("ascii")
        stream = await self._backend.connect_tcp(host, self._origin.port, timeout=timeout)
        if self._origin.scheme in (b"https", b"wss"):
            self._ssl_context.set_alpn_protocols(["http/1.1"])  # as httpcore does
            sni = request.extensions.get("sni_hostname") or host
            stream = await stream.start_tls(self._ssl_context, sni, timeout=timeout)
        return stream

    def can_handle_request(self, origin: httpcore.Origin) -> bool:
        return origin == self._origin

    async def aclose(self) -> None:
        if self._http11 is not None:
            await self._http11.aclose()

    # Before the first request has connected, a connection is only its creator's (HTTP/1.1):
    # not available to others; idle, expired and closed only if connecting failed.

    def is_available(self) -> bool:
        return self._http11 is not None and self._http11.is_available()

    def has_expired(self) -> bool:
        return self._connect_failed if self._http11 is None else self._http11.has_expired()

    def is_idle(self) -> bool:
        return self._connect_failed if self._http11 is None else self._http11.is_idle()

    def is_closed(self) -> bool:
        return self._connect_failed if self._http11 is None else self._http11.is_closed()

    def info(self) -> str:
        if self._http11 is None:
            return "CONNECTION FAILED" if self._connect_failed else "CONNECTING"
        return self._http11.info()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} [{self.info()}]>"


class ConnectionPool(httpcore.AsyncConnectionPool):
    """httpcore's connection pool (keep-alive, limits, queueing) of :class:`Http11Connection`."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext,
        max_connections: int | None,
        max_keepalive_connections: int | None,
        keepalive_expiry: float | None,
    ) -> None:
        self._asyncio_backend = AsyncioBackend()
        self._tls = ssl_context
        self._expiry = keepalive_expiry
        super().__init__(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=self._asyncio_backend,
        )

    def create_connection(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface:
        return Http11Connection(origin, self._asyncio_backend, self._tls, self._expiry)
