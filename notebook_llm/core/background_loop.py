"""Running the async core from synchronous code, including inside a running event loop.

Why a dedicated background loop thread rather than ``nest_asyncio2``: patching the kernel's
running loop to be re-entrant changes asyncio semantics for every other library in the process
(tasks can interleave inside a blocking call) and is not supported by uvloop or Python's own
future loop changes. One long-lived loop in a daemon thread is plain asyncio: the caller's thread
just waits on a ``concurrent.futures.Future``, HTTP clients bound to that loop are reused across
calls, and a KeyboardInterrupt in the waiting thread is turned into a clean stop of the stream.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared background event loop (started on first use)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed() or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=run, name="notebook_llm-loop", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def is_background_loop() -> bool:
    """Whether the calling code runs on the shared background loop."""
    return _thread is not None and threading.current_thread() is _thread


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedule ``coro`` on the background loop; returns a thread-safe future."""
    return asyncio.run_coroutine_threadsafe(coro, background_loop())


def run_sync(coro: Coroutine[Any, Any, T], *, on_interrupt: Any = None, poll: float = 0.05) -> T:
    """Run ``coro`` to completion on the background loop and return its result.

    Works whether or not the calling thread has a running loop. On ``KeyboardInterrupt`` in the
    waiting thread, ``on_interrupt()`` is called (e.g. ``stop.set``) and the result is still
    awaited, so the coroutine can finish cleanly (the HTTP response is closed) before the
    result (or its ``ABORTED`` error) is returned; without ``on_interrupt`` the task is
    cancelled and the interrupt propagates.
    """
    if threading.current_thread() is _thread:
        raise RuntimeError("run_sync called from the notebook_llm loop thread itself; use await")
    future = submit(coro)
    while True:
        try:
            return future.result(timeout=poll)
        except concurrent.futures.TimeoutError:
            continue
        except KeyboardInterrupt:
            if on_interrupt is None:
                future.cancel()
                raise
            on_interrupt()
            # The stream now ends with finish 'aborted'; wait for the coroutine to wind down so
            # the HTTP response is closed, then hand back what it gives (or raises). A second
            # interrupt, or a coroutine that does not end, cancels it.
            try:
                return future.result(timeout=5)
            except (KeyboardInterrupt, concurrent.futures.TimeoutError):
                future.cancel()
                from .errors import ErrorCode, LlmError

                raise LlmError("interrupted", ErrorCode.ABORTED) from None
