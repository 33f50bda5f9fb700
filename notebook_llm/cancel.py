"""A stop signal that can be set from any thread (a Stop button, an interrupt handler)."""

from __future__ import annotations

import asyncio
import contextlib
import threading


class StopSignal:
    """Ask a running stream to stop. ``set()`` is thread-safe and idempotent.

    The engine registers the task that is iterating the stream; ``set()`` cancels that task's
    pending await (closing the HTTP response) and the stream ends with ``finish`` kind
    ``aborted`` (code ``ABORTED``).
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._task: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
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
            task, loop = self._task, self._loop
        if task is not None and loop is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # loop closed: nothing left to stop
                loop.call_soon_threadsafe(self._cancel_if_waiting, task)

    def _cancel_if_waiting(self, task: asyncio.Task[object]) -> None:
        # Runs on the stream's loop: only cancel while the task still waits inside the engine
        # (not while the consumer's own code awaits something else between two events).
        if self._task is task and not task.done():
            task.cancel(_STOP_MESSAGE)

    def _attach(self, task: asyncio.Task[object] | None) -> None:
        with self._lock:
            self._task = task
            self._loop = task.get_loop() if task is not None else None

    def _detach(self) -> None:
        with self._lock:
            self._task = None
            self._loop = None

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


_STOP_MESSAGE = "notebook_llm.StopSignal"


def is_stop_cancellation(exc: BaseException, stop: StopSignal | None) -> bool:
    """Whether a ``CancelledError`` was caused by ``stop.set()``."""
    return stop is not None and stop.is_set() and isinstance(exc, asyncio.CancelledError)
