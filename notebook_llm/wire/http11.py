"""notebook_llm's HTTP/1.1 transport for httpx: asyncio connections, llhttp parsing, keep-alive.

Why it exists (issue 16, measured with ``bench/bench_batch.py``, 15 interleaved runs): a batch
of 200 prompts at concurrency 16 ran at 1.101x its ideal time with plain ``httpx`` on httpx's
own transport stack (httpcore's pool and HTTP/1.1 connection, h11's pure-Python parser; on an
asyncio network backend, since AnyIO's yielded to the loop five times per request), 1.084x with
plain ``httpx`` on a transport that parses with llhttp, and 1.069x with raw sockets. Between one
answer and the next request, httpcore and h11 cost about 1 ms of CPU per request (cProfile:
event objects, state machine, header validation, the pool scanning every connection twice per
request), and sixteen streams share the loop. No maintained package gives httpx a faster
HTTP/1.1 transport: ``httpx-aiohttp`` wraps aiohttp's whole client and measured slower than
httpcore (1.137x). So this module is the small hand-written part, on maintained libraries:

* parsing is ``httptools`` (the llhttp parser of Node.js, which uvicorn uses): status line,
  headers, chunked and length-delimited bodies, keep-alive rules, in C;
* :class:`Connection` is one connection's :class:`asyncio.Protocol`: it feeds every read to
  the parser, keeps the body pieces until the stream reads them (pausing the socket while
  256 KiB lie unread), and wakes the one task waiting on it. A response body comes up one piece
  per network read, whatever the server's chunking: a provider writes every SSE event as its
  own HTTP chunk, and one read that brought six events is one trip through httpx and the
  adapter's pipeline (a Lua call), not six;
* :class:`Http11Transport` is an ``httpx.AsyncBaseTransport`` (httpx's public extension
  point) with a keep-alive pool under httpx's ``Limits``: at most ``max_connections`` open,
  waiting for one up to the ``pool`` timeout, at most ``max_keepalive_connections`` idle, each
  for ``keepalive_expiry`` seconds; TLS is asyncio's (``loop.create_connection(ssl=...)``).

What it does not do, because notebook_llm does not need it: HTTP/2, upgrades (``101``),
``Expect: 100-continue``, proxies (the proxied hosts go through httpx's own transport, see
``transport.network_client``), Unix sockets. A request it cannot send is a clear
``httpx.LocalProtocolError``, as h11 would give.

Errors are httpx's: ``ConnectError``/``ConnectTimeout``, ``WriteError``/``WriteTimeout``,
``ReadError``/``ReadTimeout``, ``RemoteProtocolError`` (a malformed answer, or one the server
cut short; the body pieces before the fault are kept), ``PoolTimeout``.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import typing
from collections import deque
from collections.abc import AsyncIterator

import httpx

from .http11_connection import CHUNKED, Connection, request_head


def _timeouts(request: httpx.Request) -> dict[str, float | None]:
    return typing.cast(dict[str, float | None], request.extensions.get("timeout", {}))


class _ResponseBody(httpx.AsyncByteStream):
    """A response's body, one piece per network read; gives the connection back to the pool
    once the answer is complete, or closes it if the body was not read to its end."""

    def __init__(self, pool: Http11Transport, conn: Connection, read_timeout: float | None):
        self._pool = pool
        self._conn = conn
        self._timeout = read_timeout
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while not self._done:
            if conn.body:
                yield conn.take()
                continue
            if conn.complete:
                self._release(reuse=True)
                break
            if conn.error is not None:
                self._release(reuse=False)
                raise _read_error(conn.error)
            if conn.eof:
                self._release(reuse=False)
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            try:
                await conn.wait(self._timeout)
            except TimeoutError:
                self._release(reuse=False)
                raise httpx.ReadTimeout("timed out reading the response") from None

    async def aclose(self) -> None:
        if not self._done:
            self._release(reuse=self._conn.complete and not self._conn.body)
            if self._conn.transport is not None and not self._conn.reusable:
                # asyncio closes the socket in a callback (connection_lost): one turn of the
                # loop runs it, so the server sees a stopped stream's close at once.
                await asyncio.sleep(0)

    def _release(self, reuse: bool) -> None:
        self._done = True
        self._pool._release(self._conn, reuse)


def _wrong_length(size: int, framing: int, request: httpx.Request) -> httpx.LocalProtocolError:
    return httpx.LocalProtocolError(
        f"the body has {size} bytes, its Content-Length says {framing}", request=request
    )


def _read_error(error: BaseException) -> httpx.TransportError:
    if isinstance(error, httpx.TransportError):
        return error
    return httpx.ReadError(str(error) or repr(error))


class Http11Transport(httpx.AsyncBaseTransport):
    """An HTTP/1.1 transport for ``httpx.AsyncClient`` with a keep-alive pool (see the module
    docstring). One instance belongs to one event loop (its connections do)."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext,
        limits: httpx.Limits = httpx.Limits(),  # noqa: B008 - immutable
    ) -> None:
        self._ssl = ssl_context
        self._max = limits.max_connections
        self._max_idle = limits.max_keepalive_connections
        self._expiry = limits.keepalive_expiry
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._open = 0  # connections open or opening, idle ones included
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._active: set[Connection] = set()
        self._closed = False

    # ---------------------------------------------------------------- httpx's interface

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise RuntimeError("the transport is closed")
        scheme = request.url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}", request=request)
        head, framing = request_head(request)
        try:
            body: bytes | None = request.content
        except httpx.RequestNotRead:  # a streamed body
            body = None
        if body is not None and framing != CHUNKED and len(body) != framing:
            raise _wrong_length(len(body), framing, request)
        timeouts = _timeouts(request)
        port = request.url.port or (443 if scheme == "https" else 80)
        # The ASCII (IDNA 2008) form httpx puts in the Host header: Python's own encoding of a
        # Unicode name is IDNA 2003, which names another host for some (faß.de -> fass.de).
        origin = (scheme, request.url.raw_host.decode("ascii"), port)
        conn = await self._acquire(origin, request, timeouts)
        try:
            conn.start(head_only=request.method == "HEAD")
            self._active.add(conn)
            try:
                await self._send(conn, head, framing, body, request, timeouts.get("write"))
            except httpx.WriteError:
                if not conn.head_done:  # else: the server answered early (a 413), then closed
                    raise
            read_timeout = timeouts.get("read")
            while not conn.head_done:
                if conn.error is not None:
                    raise _read_error(conn.error)
                if conn.eof:
                    raise httpx.RemoteProtocolError(
                        "Server disconnected without sending a response."
                    )
                try:
                    await conn.wait(read_timeout)
                except TimeoutError:
                    raise httpx.ReadTimeout("timed out waiting for the response") from None
        except BaseException:
            self._release(conn, reuse=False)
            raise
        version = conn.parser.get_http_version()
        return httpx.Response(
            conn.status,
            headers=conn.headers,
            stream=_ResponseBody(self, conn, read_timeout),
            extensions={
                "http_version": b"HTTP/" + version.encode("ascii"),
                "reason_phrase": conn.reason,
                "network_stream": conn,
            },
        )

    async def aclose(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
        for conn in list(self._active):
            conn.close()
        self._active.clear()
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_exception(RuntimeError("the transport is closed"))

    # ---------------------------------------------------------------- sending

    async def _send(
        self,
        conn: Connection,
        head: bytes,
        framing: int,
        body: bytes | None,
        request: httpx.Request,
        limit: float | None,
    ) -> None:
        """Write the request: its body framed as its headers say (``framing``, from
        :func:`request_head`; a bytes ``body`` was checked against it), so the server reads
        exactly the body that is sent."""
        if body is not None and framing != CHUNKED:
            conn.write(head + body)  # the usual case: one write, one packet for a small request
            await self._drained(conn, limit)
            return
        conn.write(head)
        stream = httpx.ByteStream(body) if body is not None else request.stream
        sent = 0
        async for part in typing.cast(httpx.AsyncByteStream, stream):
            if not part:
                continue
            if framing == CHUNKED:
                conn.write(b"%x\r\n%s\r\n" % (len(part), part))
            else:
                sent += len(part)
                if sent > framing:
                    raise httpx.LocalProtocolError(
                        f"the body is longer than its Content-Length ({framing})", request=request
                    )
                conn.write(part)
            await self._drained(conn, limit)
        if framing == CHUNKED:
            conn.write(b"0\r\n\r\n")
        elif sent != framing:
            raise _wrong_length(sent, framing, request)
        await self._drained(conn, limit)

    @staticmethod
    async def _drained(conn: Connection, limit: float | None) -> None:
        if conn.error is not None and not conn.head_done:
            raise httpx.WriteError(str(conn.error) or repr(conn.error))
        if conn.writing_paused and not conn.eof:
            try:
                await conn.drain(limit)
            except TimeoutError:
                raise httpx.WriteTimeout("timed out sending the request") from None

    # ---------------------------------------------------------------- the pool

    async def _acquire(
        self,
        origin: tuple[str, str, int],
        request: httpx.Request,
        timeouts: dict[str, float | None],
    ) -> Connection:
        loop = asyncio.get_running_loop()
        limit = timeouts.get("pool")
        deadline = None if limit is None else loop.time() + limit
        while True:
            idle = self._idle.get(origin)
            if idle:
                now = time.monotonic()
                while idle:
                    conn = idle.pop()  # the most recently used one
                    if conn.usable(now, self._expiry):
                        return conn
                    self._discard(conn)
            if self._max is None or self._open < self._max:
                return await self._connect(origin, request, timeouts.get("connect"))
            if self._close_an_idle_connection():
                continue
            # Every connection is busy: wait for one to be released (in turn), up to `pool`.
            waiter = loop.create_future()
            self._waiting.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except BaseException as exc:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, but leaving: the turn goes to the next one
                if isinstance(exc, TimeoutError):
                    raise httpx.PoolTimeout("timed out waiting for a connection") from None
                raise
            finally:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)

    async def _connect(
        self, origin: tuple[str, str, int], request: httpx.Request, limit: float | None
    ) -> Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = scheme == "https"
        if tls:
            self._ssl.set_alpn_protocols(["http/1.1"])
        sni = request.extensions.get("sni_hostname") or host
        self._open += 1
        try:
            async with asyncio.timeout(limit):
                _, conn = await loop.create_connection(
                    lambda: Connection(loop, origin),
                    host,
                    port,
                    ssl=self._ssl if tls else None,
                    server_hostname=sni if tls else None,
                    happy_eyeballs_delay=0.25,  # as AnyIO does: IPv6 and IPv4 both tried
                )
        except TimeoutError:
            self._gone()
            raise httpx.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except (OSError, ssl.SSLError) as exc:
            self._gone()
            raise httpx.ConnectError(str(exc) or repr(exc)) from exc
        except BaseException:
            self._gone()
            raise
        return conn  # asyncio sets TCP_NODELAY

    def _release(self, conn: Connection, reuse: bool) -> None:
        self._active.discard(conn)
        conn.in_use = False
        if (
            reuse
            and not self._closed
            and conn.complete
            and conn.usable(0.0, None)
            and (self._max_idle is None or self._idle_count() < self._max_idle)
        ):
            conn.idle_since = time.monotonic()
            self._idle.setdefault(conn.origin, []).append(conn)
            self._wake_one()
        else:
            self._discard(conn)

    def _discard(self, conn: Connection) -> None:
        conn.close()
        self._gone()

    def _gone(self) -> None:
        self._open -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _idle_count(self) -> int:
        return sum(len(conns) for conns in self._idle.values())

    def _close_an_idle_connection(self) -> bool:
        """At the connection limit, an idle connection to another host makes room."""
        for conns in self._idle.values():
            if conns:
                self._discard(conns.pop(0))  # the least recently used one
                return True
        return False


def body_received(response: httpx.Response) -> bool:
    """Whether all of ``response``'s body has arrived and been read: known only on this
    transport (its connection is ``response.extensions["network_stream"]``); ``False`` on any
    other (a recording's, a test's)."""
    conn = response.extensions.get("network_stream")
    return isinstance(conn, Connection) and conn.in_use and conn.complete and not conn.body
