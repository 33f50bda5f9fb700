"""Who watches the HTTP responses: the status and headers of every response, told to an observer.

A batch learns the provider's rate limits from what the provider says (OpenAI's
``x-ratelimit-*``, Anthropic's ``anthropic-ratelimit-*``, ``Retry-After``) and backs off as a
whole when one request meets a 429. The code that sends a request knows nothing of batches: it
calls :func:`notify_response` once for every response it reads (2xx, 4xx including 429, 5xx),
and whoever wants to know installs an observer with :func:`watching_responses` around its work.

The observer lives in a context variable, so it belongs to the block that set it and to the
asyncio tasks started inside it (a task copies the context it was created in): two batches in
one process each see their own responses. Outside any such block :func:`notify_response` does
nothing. An observer's exception is logged and swallowed: a bug in a watcher must not fail the
request that reported to it.

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

log = logging.getLogger("notebook_llm.wire.response_watch")

#: ``observer(status, headers)``: called once per HTTP response read.
ResponseObserver = Callable[[int, httpx.Headers], None]

_observer: contextvars.ContextVar[ResponseObserver | None] = contextvars.ContextVar(
    "notebook_llm_response_observer", default=None
)


@contextlib.contextmanager
def watching_responses(observer: ResponseObserver) -> Iterator[None]:
    """Inside the block (and the tasks started in it), every response is told to ``observer``."""
    token = _observer.set(observer)
    try:
        yield
    finally:
        _observer.reset(token)


def notify_response(status: int, headers: httpx.Headers) -> None:
    """Tell the observer of this context about one response; a no-op when nobody watches."""
    observer = _observer.get()
    if observer is None:
        return
    try:
        observer(status, headers)
    except Exception:
        log.warning("a response observer failed; the request goes on", exc_info=True)
