"""Adapter ``log()`` calls shown under the cell that caused them.

A ``logging`` handler on ``notebook_llm.adapter`` (:class:`CellLogCollector`) buffers records per
cell, keyed by a context variable set before each cell runs, and shows them as one table when
the cell ends. Installed once per shell by the ``%adapter`` magics.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from typing import Any

from IPython.display import display as _display

from ...core.redaction import redact
from ..widgets.adapter_view import Rich, html_table

__all__ = ["CellLogCollector"]


def _show(obj: Any) -> Any:
    """``IPython.display.display`` (typed wrapper)."""
    return _display(obj)  # type: ignore[no-untyped-call]


_cell_logs: contextvars.ContextVar[list[tuple[str, str, str]] | None] = contextvars.ContextVar(
    "notebook_llm_cell_logs", default=None
)


class CellLogCollector(logging.Handler):
    """Collects ``notebook_llm.adapter.*`` records for the cell that caused them.

    The buffer is a context variable set before each cell runs: the engine's background loop
    runs coroutines in a copy of the calling cell's context, so a log from an adapter call lands
    with the cell that made the call. Records from elsewhere (a thread without that context)
    go to the cell running at the time, or, between cells, to the next cell's output.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._running: list[tuple[str, str, str]] | None = None
        self._pending: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        name = record.name.removeprefix("notebook_llm.adapter.")
        entry = (name, record.levelname.lower(), redact(record.getMessage()))
        with self._lock:
            target = _cell_logs.get() or self._running
            (target if target is not None else self._pending).append(entry)

    def start_cell(self, *args: Any) -> None:
        with self._lock:
            buf, self._pending = list(self._pending), []
            self._running = buf
        _cell_logs.set(buf)

    def end_cell(self, *args: Any) -> list[tuple[str, str, str]]:
        with self._lock:
            buf, self._running = self._running or [], None
        _cell_logs.set(None)
        if buf:
            _show(self.view(buf))
        return buf

    @staticmethod
    def view(entries: list[tuple[str, str, str]]) -> Rich:
        plain = "\n".join(f"[{a}] {lv}: {m}" for a, lv, m in entries)
        rows = [[a, lv, m] for a, lv, m in entries]
        return Rich(
            "adapter log:\n" + plain,
            "<b>adapter log</b>" + html_table(["adapter", "level", "message"], rows),
        )


_collectors: dict[int, CellLogCollector] = {}


def _install_collector(shell: Any) -> CellLogCollector:
    key = id(shell)
    if key in _collectors:
        return _collectors[key]
    collector = CellLogCollector()
    logger = logging.getLogger("notebook_llm.adapter")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.DEBUG)  # let info/debug from scripts reach the collector
    logger.addHandler(collector)
    shell.events.register("pre_run_cell", collector.start_cell)
    shell.events.register("post_run_cell", collector.end_cell)
    _collectors[key] = collector
    return collector


def _remove_collector(shell: Any) -> None:
    collector = _collectors.pop(id(shell), None)
    if collector is None:
        return
    logging.getLogger("notebook_llm.adapter").removeHandler(collector)
    for event, callback in (
        ("pre_run_cell", collector.start_cell),
        ("post_run_cell", collector.end_cell),
    ):
        with contextlib.suppress(ValueError):
            shell.events.unregister(event, callback)
