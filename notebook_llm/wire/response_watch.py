"""Watching the responses of the requests made in a context: ``(status, headers)`` of each one.

Whatever sends a request (:mod:`notebook_llm.wire.exchange`) calls :func:`notify_response` once
per HTTP response it reads, whatever its status (2xx, 4xx including 429, 5xx). A caller that
wants to learn from them (a batch that adapts its pace to a provider's rate-limit headers) wraps
its work in :func:`watching_responses`; the requests made inside the block, in this task and the
tasks it starts (an asyncio task copies the context it is created in), are reported to it.

With nobody watching, :func:`notify_response` costs one context-variable read. An observer that
raises is logged and ignored: watching must never break a request.

The headers are the server's, untrusted: an observer checks every value before it steers
anything.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator

import httpx

__all__ = ["ResponseObserver", "notify_response", "watching_responses"]

#: Receives the status and the headers of every HTTP response read in its context.
ResponseObserver = Callable[[int, httpx.Headers], None]

#: The package's root logger (redacted, as every logger of the package).
log = logging.getLogger("notebook_llm")

_observers: contextvars.ContextVar[tuple[ResponseObserver, ...]] = contextvars.ContextVar(
    "notebook_llm_response_observers", default=()
)


@contextlib.contextmanager
def _watching(observer: ResponseObserver) -> Iterator[None]:
    token = _observers.set((*_observers.get(), observer))
    try:
        yield
    finally:
        _observers.reset(token)


def watching_responses(observer: ResponseObserver) -> contextlib.AbstractContextManager[None]:
    """Report every response read inside the block (and in the tasks started in it) to
    ``observer``; a block inside another one reports to both."""
    return _watching(observer)


def notify_response(status: int, headers: httpx.Headers) -> None:
    """Tell the observers of this context about one response (a no-op when nobody watches)."""
    for observer in _observers.get():
        try:
            observer(status, headers)
        except Exception as exc:
            log.warning(
                "a response observer failed (%s: %s); the request goes on", type(exc).__name__, exc
            )
