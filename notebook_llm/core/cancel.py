"""A stop signal that can be set from any thread (a Stop button, an interrupt handler)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref


class StopSignal:
    """Ask a running stream to stop. ``set()`` is thread-safe and idempotent.

    The engine registers the task that is iterating the stream; ``set()`` cancels that task's
    pending await (closing the HTTP response) and the stream ends with ``finish`` kind
    ``aborted`` (code ``ABORTED``).
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        #: Tasks waiting inside the engine right now (one signal may stop several streams).
        self._waiting: set[asyncio.Task[object]] = set()
        self.reason = "stopped by the user"

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self, reason: str | None = None) -> None:
        with self._lock:
            if self._event.is_set():
                return
            if reason:
                self.reason = reason
            self._event.set()
            waiting = list(self._waiting)
        for task in waiting:
            if not task.done():
                with contextlib.suppress(RuntimeError):  # loop closed: nothing left to stop
                    task.get_loop().call_soon_threadsafe(self._cancel_if_waiting, task)

    def _cancel_if_waiting(self, task: asyncio.Task[object]) -> None:
        # Runs on the stream's loop: only cancel while the task still waits inside the engine
        # (not while the consumer's own code awaits something else between two events).
        if task in self._waiting and not task.done():
            task.cancel(_STOP_MESSAGE)

    def _attach(self, task: asyncio.Task[object] | None) -> None:
        if task is not None:
            with self._lock:
                self._waiting.add(task)
            _by_task[task] = self

    def _detach(self, task: asyncio.Task[object] | None) -> None:
        if task is not None:
            with self._lock:
                self._waiting.discard(task)
            if _by_task.get(task) is self:
                del _by_task[task]

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


_STOP_MESSAGE = "notebook_llm.StopSignal"

#: The signal each engine task is attached to right now (while it waits inside the engine).
_by_task: weakref.WeakKeyDictionary[asyncio.Task[object], StopSignal] = weakref.WeakKeyDictionary()


def current_stop() -> StopSignal | None:
    """The stop signal of the engine stream the calling task is running, if any.

    An adapter's code runs synchronously inside the engine's wait for its next event (the
    engine attaches the task to the signal meanwhile), so a Lua sandbox can poll the signal
    from its CPU hook: a Stop, or a kernel interrupt (which sets it), ends even a hook that never
    gives control back to the event loop.
    """
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop
        return None
    return _by_task.get(task) if task is not None else None


async def sleep_unless_stopped(delay: float, stop: StopSignal | None) -> bool:
    """Sleep ``delay`` seconds (a retry's backoff); ``False`` at once if ``stop`` is set."""
    if stop is None:
        await asyncio.sleep(delay)
        return True
    if stop.is_set():
        return False
    task = asyncio.current_task()
    stop._attach(task)
    try:
        await asyncio.sleep(delay)
    except asyncio.CancelledError:
        if stop.is_set() and task is not None:
            task.uncancel()
            return False
        raise
    finally:
        stop._detach(task)
    return not stop.is_set()


#: How often :func:`until_stopped` looks at the signal (seconds).
STOP_POLL = 0.05


async def until_stopped(stop: StopSignal, poll: float = STOP_POLL) -> None:
    """Return once ``stop`` is set. A ``StopSignal`` is a ``threading.Event`` (set from any
    thread: a button, an interrupt handler), so it is polled, not awaited: the one stop-polling
    loop (the batch's stop watcher and the tool loop's wait for results both use it)."""
    while not stop.is_set():  # noqa: ASYNC110
        await asyncio.sleep(poll)
