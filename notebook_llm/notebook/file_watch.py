"""Watch one file and say when it changed: a small reusable watcher with a ``changed`` signal.

anywidget-style: the watcher knows nothing of what a change means. Whoever cares connects a
callback (``watcher.changed.connect(fn)``; ``fn(path)`` runs on the watcher's thread) and gets
back a function that disconnects it. ``%adapter watch PATH`` connects "hot-reload the adapter
and update the status display"; anything else (a playground, a test) can connect its own.

Why polling: a daemon thread compares the file's mtime every ``interval`` seconds. The
``watchdog`` library would add a dependency and native observers for one file that changes
when a person saves it; a stat call twice a second costs nothing. A callback that raises is
logged (debug) and the watcher keeps going: a broken reload must not end the watch, nor the
kernel. A file that disappears (an editor's save-by-rename) is simply not a change until it is
back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

log = logging.getLogger("notebook_llm.notebook.file_watch")

T = TypeVar("T")


class Signal(Generic[T]):
    """Callbacks called with one value when the signal is emitted (in connection order)."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[T], object]] = []
        self._lock = threading.Lock()

    def connect(self, callback: Callable[[T], object]) -> Callable[[], None]:
        """Call ``callback(value)`` on each emit; returns a function that disconnects it."""
        with self._lock:
            self._callbacks.append(callback)

        def disconnect() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return disconnect

    def emit(self, value: T) -> None:
        """Call every connected callback; one that raises is logged and the others still run."""
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(value)
            except Exception:
                log.debug("a 'changed' callback raised", exc_info=True)


class FileWatcher:
    """Polls ``path``'s mtime in a daemon thread; emits :attr:`changed` with the path on change.

    >>> w = FileWatcher(Path("adapter.lua"), interval=0.5)       # doctest: +SKIP
    >>> stop_listening = w.changed.connect(lambda p: print(p, "changed"))  # doctest: +SKIP
    >>> w.start(); ...; w.stop()                                   # doctest: +SKIP
    """

    def __init__(self, path: Path, *, interval: float = 0.5) -> None:
        self.path = path
        self.interval = interval
        self.changed: Signal[Path] = Signal()
        #: How many changes were seen (and emitted) so far.
        self.changes = 0
        self._stop = threading.Event()
        self._mtime = self._stat()
        self.thread = threading.Thread(target=self._run, name=f"watch:{path.name}", daemon=True)

    def _stat(self) -> float:
        try:
            return self.path.stat().st_mtime_ns / 1e9
        except OSError:
            return -1.0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            mtime = self._stat()
            if mtime == self._mtime or mtime < 0:
                continue
            self._mtime = mtime
            self.changes += 1
            self.changed.emit(self.path)

    def start(self) -> FileWatcher:
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop polling (waits up to 2 s for the thread: a callback may be running)."""
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=2)
