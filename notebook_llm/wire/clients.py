"""Which ``httpx.AsyncClient`` carries a request.

:func:`open_client` picks it, for the exchange (:mod:`notebook_llm.wire.exchange`): a
transport given to the adapter or by the engine (its own, its recorder or its replayer), else
a batch's shared pool (:func:`~notebook_llm.wire.transport.connection_pool`), else on the
package's long-lived background loop one client for every request (connections kept alive
across requests), else a client for this one request.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Callable

import httpx

from .transport import network_client, scoped_client

__all__ = ["MakeTransport", "open_client"]

#: What makes one request's transport (``GenerateOptions.make_transport``: the engine's, its
#: recorder or its replayer).
MakeTransport = Callable[[], httpx.AsyncBaseTransport]

#: Guards the creation of :data:`_background_client_instance` (two threads may ask at once).
_background_client_lock = threading.RLock()

_background_client_instance: httpx.AsyncClient | None = None


def _on_background_loop() -> bool:
    from ..core.background_loop import is_background_loop

    return is_background_loop()


def _background_client() -> httpx.AsyncClient:
    # One connection pool for every request on the long-lived background loop, held by the
    # module so that it is never garbage-collected with open connections.
    global _background_client_instance
    with _background_client_lock:
        if _background_client_instance is None:
            _background_client_instance = network_client()
            from ..core.background_loop import background_loop

            atexit.register(_close_background_client, background_loop())
        return _background_client_instance


def _close_background_client(loop: asyncio.AbstractEventLoop) -> None:
    """Close the background loop's client at interpreter exit, on its own loop: aiohttp
    warns about (and leaks) a session that is garbage-collected open."""
    client = _background_client_instance
    if client is None or loop.is_closed() or not loop.is_running():
        return
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=2)


def open_client(
    transport: httpx.AsyncBaseTransport | None,
    make_transport: MakeTransport | None,
    timeout: httpx.Timeout,
) -> tuple[httpx.AsyncClient, bool]:
    """An HTTP client for one request, and whether the caller owns (must close) it.

    ``transport`` is the adapter's own; else the engine's (``make_transport``: its transport,
    recorder or replayer). Without either: inside a batch its shared pool; on the package's
    long-lived background loop (sync calls, magics, batches) one client for every request. On
    any other loop (an ``asyncio.run`` of the user's, a test's loop) the client lives for one
    request: a pooled connection must not outlive the loop it was opened on.
    """
    transport = transport or (make_transport() if make_transport is not None else None)
    if transport is None:
        pooled = scoped_client()
        if pooled is not None:
            return pooled, False
        if _on_background_loop():
            return _background_client(), False
    return network_client(timeout=timeout, transport=transport), True
