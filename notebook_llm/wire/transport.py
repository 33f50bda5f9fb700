"""The HTTP transport every Lua adapter uses, overridable for record/replay and tests.

``LuaAdapter`` asks :func:`current_transport` for a transport when it was not given one. A
wrapper (a recorder, a replayer) is installed with :func:`use_transport` for the whole process
(``%llm record`` / ``%llm replay``) and removed with :func:`reset_transport`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

TransportFactory = Callable[[], httpx.AsyncBaseTransport]

_lock = threading.Lock()
_factory: TransportFactory | None = None


def use_transport(factory: TransportFactory | None) -> TransportFactory | None:
    """Make every adapter without its own transport use ``factory()``; returns the previous one."""
    global _factory
    with _lock:
        previous, _factory = _factory, factory
        return previous


def reset_transport() -> None:
    use_transport(None)


def current_transport() -> httpx.AsyncBaseTransport | None:
    """A transport from the installed factory, or ``None`` for the default network transport."""
    factory = _factory
    return factory() if factory is not None else None
