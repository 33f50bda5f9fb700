"""Shared HTTP plumbing: one SSL context, the network transport, and optional connection pools.

Which transport a request uses is not chosen here: it is the engine's, httpx-style
(``Engine(transport=...)``, ``engine.recording(path)``, ``engine.replaying(path)``), handed to
the adapter with each request (``GenerateOptions.make_transport``). Nothing here changes how
one engine's requests travel behind another's back.

:func:`network_transport` is the transport to the network: ``httpx_aiohttp.AiohttpTransport``
(aiohttp's connection pool and its llhttp parser under httpx's client), with the shared SSL
context, routed by the environment's proxies (:class:`NetworkTransport`). Every client
notebook_llm opens is built by :func:`network_client` on it (a batch's pool,
:func:`connection_pool`; the background loop's shared client; a stream's own client;
``list_models``), and a recording wraps a network transport too, so a proxy applies to every
request in one way. A transport given by the engine or the adapter (``Engine(transport=...)``, a
recorder, a replayer) is used as given.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ssl
import threading
import urllib.request
import weakref
from collections.abc import AsyncIterator, Callable

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

_ssl_context_lock = threading.Lock()
_ssl_context: ssl.SSLContext | None = None


def shared_ssl_context() -> ssl.SSLContext:
    """One SSL context for the process: building one loads the CA bundle, which is slow."""
    global _ssl_context
    with _ssl_context_lock:
        if _ssl_context is None:
            _ssl_context = httpx.create_ssl_context()
        return _ssl_context


#: httpx's default pool limits; :func:`connection_pool` raises them to a batch's concurrency.
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5)

#: Loopback hosts are reached directly even when a proxy is set without ``NO_PROXY`` for them:
#: a local server (Ollama, llama.cpp, the mock) is on this machine, never behind the proxy.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class MalformedResponse(httpx.RemoteProtocolError):
    """The server's bytes are not HTTP/1.1 (a bad status line, header or chunk-size line, a
    transfer coding other than chunked): ``MALFORMED_RESPONSE``, not a cut connection."""


class _BodyParseError(aiohttp.ClientPayloadError):
    """Put on a body whose connection closed because aiohttp could not parse it."""


class _CheckedResponse(aiohttp.ClientResponse):
    """aiohttp's response, with one repair: a body that aiohttp's C parser rejects after the
    headers (a malformed chunk-size line) gets an error instead of waiting for ever.

    On such a parse error aiohttp closes the connection and records the error on the
    connection's protocol, but not on the body's reader, so a read of the body waits for ever
    (the sock_read timer is dropped too); its pure-Python parser does report it. Here, when the
    connection is lost before the body ended and the protocol holds a parse error, the body gets
    that error. Public aiohttp API only: ``response_class``, ``Connection.protocol``, the
    protocol's ``closed`` future and ``exception()``, the reader's ``on_eof`` and
    ``set_exception``.

    aiohttp creates the ``closed`` future only when it is asked for, and on a connection lost
    with an error (a reset) sets that error on it; a future whose exception nobody reads makes
    asyncio print "Future exception was never retrieved" when it is collected. So the future
    also gets :func:`_retrieve`, which reads it: the error itself reaches the body's reader
    through aiohttp's own path (the protocol's ``set_exception``), as without the watch.
    """

    async def start(self, connection: aiohttp.connector.Connection) -> aiohttp.ClientResponse:
        await super().start(connection)
        protocol = connection.protocol
        if protocol is None or self.content.is_eof():
            return self
        closed = protocol.closed
        if closed is None:
            return self
        # Once per future (a kept-alive connection's later responses ask for the same one).
        closed.remove_done_callback(_retrieve)
        closed.add_done_callback(_retrieve)
        ref = weakref.ref(self)

        def lost(_: object) -> None:
            response = ref()
            if response is None or response.content.is_eof():
                return
            cause = protocol.exception()
            if response.content.exception() is None and isinstance(
                cause, aiohttp.http_exceptions.HttpProcessingError
            ):
                response.content.set_exception(_BodyParseError(str(cause.message)), cause)

        def ended() -> None:  # the connection may be kept alive: forget this response
            closed.remove_done_callback(lost)

        closed.add_done_callback(lost)
        self.content.on_eof(ended)
        return self


def _retrieve(closed: asyncio.Future[None]) -> None:
    """Read the exception of a connection's ``closed`` future (see :class:`_CheckedResponse`):
    it is only a notice that the connection ended, and the error reaches the reader anyway."""
    if not closed.cancelled():
        closed.exception()


def _session_factory(
    ssl_context: ssl.SSLContext, limits: httpx.Limits
) -> Callable[[], aiohttp.ClientSession]:
    """What makes a transport's aiohttp session (on the loop of its first request): the
    connector ``AiohttpTransport`` would make from the same settings, with
    :class:`_CheckedResponse`."""

    def make() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            ssl=ssl_context,
            limit=limits.max_connections or 0,
            keepalive_timeout=limits.keepalive_expiry,
        )
        return aiohttp.ClientSession(connector=connector, response_class=_CheckedResponse)

    return make


def _mapped(exc: Exception) -> Exception:
    """The httpx error for a failure of aiohttp under ``AiohttpTransport``.

    ``httpx_aiohttp`` maps every ``aiohttp.ClientConnectionError`` (a server that closed the
    connection, a reset) to ``httpx.ConnectTimeout`` and lets aiohttp's parse errors through
    unmapped; what it raised is its ``__cause__``.
    """
    cause = exc.__cause__ if isinstance(exc, httpx.HTTPError) else exc
    if isinstance(cause, _BodyParseError | aiohttp.ClientResponseError):
        return MalformedResponse(f"malformed HTTP response: {_first_line(cause)}")
    if isinstance(cause, aiohttp.ServerTimeoutError):
        return httpx.ReadTimeout(str(cause))
    if isinstance(cause, aiohttp.ClientConnectorError):
        return httpx.ConnectError(str(cause))
    if isinstance(cause, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError("the server closed the connection")
    if isinstance(cause, aiohttp.ClientPayloadError):
        return httpx.ReadError(str(cause))
    if isinstance(cause, aiohttp.ClientOSError):
        return httpx.ReadError(str(cause))
    if isinstance(cause, aiohttp.ClientError) and not isinstance(exc, httpx.HTTPError):
        return httpx.TransportError(str(cause))
    return exc


def _first_line(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    text = str(message).strip()
    return text.splitlines()[0].rstrip(":") if text else type(exc).__name__


class _MappedStream(httpx.AsyncByteStream):
    """A response body whose aiohttp failures come up as the right httpx errors (:func:`_mapped`)."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except (httpx.HTTPError, aiohttp.ClientError) as exc:
            raise _mapped(exc) from exc

    async def aclose(self) -> None:
        with contextlib.suppress(httpx.HTTPError, aiohttp.ClientError):
            await self._inner.aclose()


class NetworkTransport(httpx.AsyncBaseTransport):
    """Each request on ``AiohttpTransport``: directly, or through the proxy the environment
    names for its URL.

    An httpx client honours the proxy variables only for the transports it makes itself, and
    routes by URL in a private method; a recording wraps a transport, so the routing is here,
    where every client and the recorder share it. The rules are the standard library's
    (``urllib.request.getproxies_environment`` and ``proxy_bypass_environment``: the
    ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` variables in either case, ``NO_PROXY``
    host suffixes and ``*``), read when the transport is made, as httpx reads them when a client
    is made; loopback hosts always go directly (:data:`LOOPBACK_HOSTS`). aiohttp's own
    ``trust_env`` is off, so the variables are applied once, here.
    """

    def __init__(
        self, limits: httpx.Limits = DEFAULT_LIMITS, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._limits = limits
        self._ssl = ssl_context or shared_ssl_context()
        self._proxies = urllib.request.getproxies_environment()
        self._direct = self._make(None)
        self._via: dict[str, AiohttpTransport] = {}

    def _make(self, proxy: str | None) -> AiohttpTransport:
        return AiohttpTransport(
            verify=self._ssl,
            limits=self._limits,
            trust_env=False,
            proxy=httpx.Proxy(proxy) if proxy else None,
            client=_session_factory(self._ssl, self._limits),
        )

    def proxy_for(self, url: httpx.URL) -> str | None:
        """The proxy URL a request to ``url`` goes through, or ``None`` for directly."""
        host = url.host
        if not self._proxies or host in LOOPBACK_HOSTS:
            return None
        proxy = self._proxies.get(url.scheme) or self._proxies.get("all")
        if not proxy:
            return None
        where = f"{host}:{url.port}" if url.port else host
        bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
        if bypass(where, self._proxies):
            return None
        return proxy

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        proxy = self.proxy_for(request.url)
        if proxy is None:
            transport = self._direct
        else:
            transport = self._via.get(proxy) or self._via.setdefault(proxy, self._make(proxy))
        try:
            response = await transport.handle_async_request(request)
        except (httpx.HTTPError, aiohttp.ClientError) as exc:
            raise _mapped(exc) from exc
        coding = response.headers.get("transfer-encoding", "")
        if coding and coding.rsplit(",", 1)[-1].strip().lower() != "chunked":
            # RFC 9112 6.1: only chunked ends a response's transfer codings here; aiohttp would
            # hand the body on still coded (h11 refuses it too).
            await response.aclose()
            raise MalformedResponse(f"malformed HTTP response: Transfer-Encoding {coding!r}")
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _MappedStream(response.stream)
        return response

    async def aclose(self) -> None:
        for transport in (self._direct, *self._via.values()):
            await transport.aclose()


def network_transport(limits: httpx.Limits = DEFAULT_LIMITS) -> httpx.AsyncBaseTransport:
    """A transport to the network for an ``httpx.AsyncClient`` (see the module docstring)."""
    return NetworkTransport(limits)


#: httpx's own default; each request of an adapter sets its own.
DEFAULT_TIMEOUT = httpx.Timeout(5.0)

#: What the body decoders of :mod:`notebook_llm.wire.body` can decode within their caps; a
#: server must not pick another coding (``br``, ``zstd``) because httpx happens to know it.
ACCEPT_ENCODING = "gzip, deflate"


def network_client(
    limits: httpx.Limits = DEFAULT_LIMITS,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient``, as every client notebook_llm opens is built: on ``transport``
    (the engine's or the adapter's: a recorder, a replayer, a test's) when given, else on a new
    :func:`network_transport`."""
    return httpx.AsyncClient(
        transport=transport or network_transport(limits),
        follow_redirects=False,
        timeout=timeout,
        headers={"accept-encoding": ACCEPT_ENCODING},
    )


_scoped: contextvars.ContextVar[httpx.AsyncClient | None] = contextvars.ContextVar(
    "notebook_llm_scoped_client", default=None
)


def scoped_client() -> httpx.AsyncClient | None:
    """The connection pool of the enclosing :func:`connection_pool` block, if any."""
    return _scoped.get()


@contextlib.asynccontextmanager
async def connection_pool(concurrency: int | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """Share one HTTP connection pool (keep-alive) among the streams started inside the block,
    on the running loop; closed when the block ends, so no connection outlives its loop.

    ``notebook_llm.amap`` uses it for a batch; use it around your own ``asyncio.gather`` of
    engine streams. ``concurrency``: how many streams run at once, so that the pool allows as
    many connections. (On the package's background loop a process-wide pool is used when there
    is no block.)
    """
    limits = DEFAULT_LIMITS
    if concurrency is not None and concurrency > (limits.max_keepalive_connections or 0):
        limits = httpx.Limits(
            max_connections=max(concurrency, limits.max_connections or 0),
            max_keepalive_connections=concurrency,
            keepalive_expiry=limits.keepalive_expiry,
        )
    async with network_client(limits) as client:
        token = _scoped.set(client)
        try:
            yield client
        finally:
            _scoped.reset(token)
