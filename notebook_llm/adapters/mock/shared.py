"""One loopback mock server per process, started on first use (the ``mock`` provider's)."""

from __future__ import annotations

import atexit
import threading

from .server import MockServer

_lock = threading.Lock()
_server: MockServer | None = None


def shared_server() -> MockServer:
    """The process-wide mock server on 127.0.0.1 (a free port), started if needed."""
    global _server
    with _lock:
        if _server is None:
            server = MockServer()
            server.start()
            atexit.register(server.stop)
            _server = server
        return _server
