"""Shared HTTP plumbing of the Lua adapters: one SSL context, the network transport, and
optional connection pools.

Which transport a request uses is not chosen here: it is the engine's, httpx-style
(``Engine(transport=...)``, ``engine.recording(path)``, ``engine.replaying(path)``), handed to
the adapter with each request (``GenerateOptions.make_transport``). Nothing here changes how
one engine's requests travel behind another's back.

:func:`network_transport` is notebook_llm's HTTP/1.1 transport for httpx
(:mod:`notebook_llm.wire.http11`: asyncio connections, llhttp parsing, a keep-alive pool), which
costs a batch half the CPU per request of httpx's own (httpcore and h11) and does not hand the
loop back where AnyIO did (issue 16). Every client notebook_llm opens is built by
:func:`network_client` on it (a batch's pool, :func:`connection_pool`; the background loop's
shared client; a stream's own client; ``list_models``), and a recording wraps it. With a proxy
in the environment the proxied hosts go through httpx's own transport instead, a recording's
too (:class:`RoutedTransport`). A transport given by the engine or the adapter
(``Engine(transport=...)``, a recorder, a replayer) is used as given.
"""

from __future__ import annotations

import contextlib
import contextvars
import ssl
import threading
import urllib.request
from collections.abc import AsyncIterator

import httpx

from .http11 import Http11Transport

_ssl_context_lock = threading.Lock()
_ssl_context: ssl.SSLContext | None = None


def shared_ssl_context() -> ssl.SSLContext:
    """One SSL context for the process: building one loads the CA bundle (tens of ms)."""
    global _ssl_context
    with _ssl_context_lock:
        if _ssl_context is None:
            _ssl_context = httpx.create_ssl_context()
        return _ssl_context


#: httpx's default pool limits; :func:`connection_pool` raises the keep-alive count to its
#: concurrency, or the connections above 20 would be closed after every request.
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5)


class NetworkTransport(Http11Transport):
    """The network transport: :class:`~notebook_llm.wire.http11.Http11Transport` (HTTP/1.1,
    llhttp, a keep-alive pool) with the shared SSL context, no proxy."""

    def __init__(
        self, limits: httpx.Limits = DEFAULT_LIMITS, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        super().__init__(ssl_context or shared_ssl_context(), limits)


def network_transport(limits: httpx.Limits = DEFAULT_LIMITS) -> httpx.AsyncBaseTransport:
    """A transport to the network for an ``httpx.AsyncClient`` (see the module docstring)."""
    return NetworkTransport(limits)


#: Loopback hosts are reached directly even when a proxy is set without ``NO_PROXY`` for them:
#: a local server (Ollama, llama.cpp, the mock) is on this machine, never behind the proxy.
LOOPBACK = ("all://localhost", "all://127.0.0.1", "all://[::1]")


def proxy_in_env() -> bool:
    """Whether ``HTTP_PROXY``, ``HTTPS_PROXY`` or ``ALL_PROXY`` (any case) names a proxy: what
    httpx honours (with ``NO_PROXY``) when it builds a client with ``trust_env``."""
    found = urllib.request.getproxies_environment()
    return any(found.get(scheme) for scheme in ("http", "https", "all"))


#: httpx's own default; each request of an adapter sets its own.
DEFAULT_TIMEOUT = httpx.Timeout(5.0)


def network_client(
    limits: httpx.Limits = DEFAULT_LIMITS,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient``, as every client notebook_llm opens is built.

    ``transport`` (the engine's or the adapter's: a recorder, a replayer, a test's) is used as
    given. Without one, and no proxy in the environment: one :func:`network_transport`. With a
    proxy: httpx's own proxy handling (``HTTP(S)_PROXY``, ``ALL_PROXY``, ``NO_PROXY``; an
    explicit transport would turn it off), and loopback hosts on :func:`network_transport`,
    directly (:data:`LOOPBACK`).
    """
    if transport is not None or not proxy_in_env():
        return httpx.AsyncClient(
            transport=transport or network_transport(limits),
            follow_redirects=False,
            timeout=timeout,
        )
    return httpx.AsyncClient(
        verify=shared_ssl_context(),
        limits=limits,
        trust_env=True,
        mounts={pattern: network_transport(limits) for pattern in LOOPBACK},
        follow_redirects=False,
        timeout=timeout,
    )


class RoutedTransport(httpx.AsyncBaseTransport):
    """Each request on the transport :func:`network_client` picks for its URL: the proxy the
    environment names for it (``NO_PROXY`` and loopback excepted), else the network transport.

    For a transport that wraps another (a recording): a client's proxy routing applies only to
    the transports it makes itself, so a recording around :func:`network_transport` went
    straight to the network with a proxy set.
    """

    def __init__(self, limits: httpx.Limits = DEFAULT_LIMITS) -> None:
        self._client = network_client(limits)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        # httpx routes a client's requests by URL in `_transport_for_url` (private; there since
        # httpx 0.18). tests/test_proxy.py checks that a recording goes through the proxy.
        transport = self._client._transport_for_url(request.url)
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        await self._client.aclose()


def routed_transport() -> httpx.AsyncBaseTransport:
    """A transport to the network that honours environment proxies (:class:`RoutedTransport`
    when one is set, else :func:`network_transport`)."""
    return RoutedTransport() if proxy_in_env() else network_transport()


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
    engine streams. ``concurrency``: how many streams run at once, so that as many
    connections are kept alive (httpx keeps 20; a batch of 32 would otherwise open a new
    connection for a third of its requests). (On the package's background loop a
    process-wide pool is used when there is no block.)
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
