"""Shared HTTP plumbing of the Lua adapters: one SSL context, and optional connection pools.

Which transport a request uses is not chosen here: it is the engine's, httpx-style
(``Engine(transport=...)``, ``engine.recording(path)``, ``engine.replaying(path)``), handed to
the adapter with each request (``GenerateOptions.make_transport``). Nothing here changes how
one engine's requests travel behind another's back.
"""

from __future__ import annotations

import contextlib
import contextvars
import ssl
import threading
from collections.abc import AsyncIterator

import httpx

_ssl_context_lock = threading.Lock()
_ssl_context: ssl.SSLContext | None = None


def shared_ssl_context() -> ssl.SSLContext:
    """One SSL context for the process: building one loads the CA bundle (tens of ms)."""
    global _ssl_context
    with _ssl_context_lock:
        if _ssl_context is None:
            _ssl_context = httpx.create_ssl_context()
        return _ssl_context


_scoped: contextvars.ContextVar[httpx.AsyncClient | None] = contextvars.ContextVar(
    "notebook_llm_scoped_client", default=None
)


def scoped_client() -> httpx.AsyncClient | None:
    """The connection pool of the enclosing :func:`connection_pool` block, if any."""
    return _scoped.get()


@contextlib.asynccontextmanager
async def connection_pool() -> AsyncIterator[httpx.AsyncClient]:
    """Share one HTTP connection pool (keep-alive) among the streams started inside the block,
    on the running loop; closed when the block ends, so no connection outlives its loop.

    ``notebook_llm.amap`` uses it for a batch; use it around your own ``asyncio.gather`` of
    engine streams. (On the package's background loop a process-wide pool is used anyway.)
    """
    transport = httpx.AsyncHTTPTransport(verify=shared_ssl_context())
    async with httpx.AsyncClient(transport=transport, follow_redirects=False) as client:
        token = _scoped.set(client)
        try:
            yield client
        finally:
            _scoped.reset(token)
