"""A batch's progress in the notebook (``notebook_llm.map`` with ``progress=None``).

The package's root installs :func:`progress_bar` as the batch progress hook
(:func:`notebook_llm.api.observers.set_batch_progress`). Where a person watches the cell, a
:class:`BatchView` shows, a few times a second: a bar, one line with the rows done and failed,
rows/s, the ETA, the cost spent and the rate limits' state (learned, waiting after a 429), and
the latest errors and answers (escaped text) so they can be read while the batch runs. Its Stop
button ends the batch cleanly: requests in flight are aborted, nothing more is sent, and what
is done is kept (in the journal with ``store=``; run the same call again to go on).

The button is there when its click can arrive: when the batch runs on the kernel's own loop
(``await notebook_llm.amap(...)``). A blocking ``map`` holds the kernel, which then reads no
widget message until the cell ends; the view says to interrupt the kernel instead, which stops
the batch the same way.

When the batch ends, the widgets are replaced, in place, by one static summary (text and
HTML): what a saved notebook keeps, no widget state. In a headless run (nbclient, papermill: see
:mod:`.watching`) no widget is made, only that summary. Outside a kernel there is no view.
"""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Callable
from typing import Any

from ..api.estimate import money
from ..api.observers import BatchProgress, BatchStatus
from ..core.background_loop import is_background_loop
from ..core.redaction import redact, shorten
from .watching import in_kernel, interactive

__all__ = ["BatchView", "progress_bar", "summary"]

#: The view is redrawn at most this often (seconds); the last state is always drawn.
REDRAW_EVERY = 0.25
#: How many of the latest errors and answers the view lists.
SHOWN_ROWS = 5


def progress_bar(total: int) -> BatchProgress | None:
    """The progress report of a batch of ``total`` prompts in the running kernel; ``None``
    outside a kernel or without ipywidgets."""
    if "ipykernel" not in sys.modules or not in_kernel():
        return None
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython comes with ipykernel
        return None
    if not interactive():  # no one watches: store no widget, just the final summary
        return _SummaryOnly(display)
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return None
    return BatchView(total, display)


def summary(status: BatchStatus) -> dict[str, str]:
    """What a finished batch leaves in the cell: a plain line and the same as HTML."""
    where = f"; journal: {status.store}" if status.store else ""
    text = f"{status.line()}{where}"
    return {"text/plain": text, "text/html": f"<pre>{html.escape(text)}</pre>"}


def _done_line(done: int, total: int, spent: float | None = None) -> dict[str, str]:
    """The summary of a batch whose status is not known (a view that was not attached)."""
    cost = f", {money(spent)} spent" if spent is not None else ""
    return {"text/plain": f"{done}/{total} prompts done{cost}"}


class _SummaryOnly:
    """Headless: no widget, the summary at the end."""

    def __init__(self, display: Callable[..., Any]) -> None:
        self.display = display
        self.run: Any = None

    def attach(self, run: Any) -> None:
        self.run = run

    def __call__(self, done: int, total: int, spent: float | None) -> None:
        if total > 0 and done >= total:
            status = self.run.status() if self.run is not None else None
            self.display(
                summary(status) if status is not None else _done_line(done, total, spent),
                raw=True,
            )


class BatchView:
    """The live view of one batch (see the module docstring); the batch calls it with
    ``(done, total, spent)`` after each row and hands it the running batch (:meth:`attach`)."""

    def __init__(self, total: int, display: Callable[..., Any]) -> None:
        import ipywidgets as w

        self.run: Any = None
        self.bar = w.IntProgress(value=0, min=0, max=max(total, 1), description=f"0/{total}")
        self.line = w.HTML(value="")
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop")
        self.stop_button.on_click(self._stop)
        self.stop_button.layout.display = "none"
        self.rows = w.HTML(value="")
        self.box = w.VBox([w.HBox([self.bar, self.stop_button]), self.line, self.rows])
        self.handle = display(self.box, display_id=True)
        self.last_draw = 0.0
        self.closed = False

    def attach(self, run: Any) -> None:
        """The running batch: its status, rows and errors, and its Stop."""
        self.run = run
        if not is_background_loop():  # the kernel's own loop: a click reaches the batch
            self.stop_button.layout.display = None
        else:
            self.stop_button.layout.display = "none"
        self._draw(force=True)

    def _stop(self, _button: Any = None) -> None:
        if self.run is not None:
            self.run.stop("stopped from the progress view")
        self.stop_button.disabled = True
        self.stop_button.description = "Stopping"

    def __call__(self, done: int, total: int, spent: float | None = None) -> None:
        if self.closed:
            return
        known = total > 0  # 0: a streamed input whose length is not known yet
        self.bar.max = max(total, 1)
        self.bar.value = min(done, self.bar.max) if known else 0
        self.bar.description = f"{done:,}/{total:,}" if known else f"{done:,}"
        ended = known and done >= total
        if ended and self.run is None:
            self._finish(_done_line(done, total, spent))
            return
        self._draw(force=ended)

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.run is None or (not force and now - self.last_draw < REDRAW_EVERY):
            return
        self.last_draw = now
        status: BatchStatus = self.run.status()
        if status.finished or (status.total and status.done >= status.total):
            self._finish(summary(status))
            return
        hint = (
            ""
            if self.stop_button.layout.display != "none"
            else " <i>(interrupt the kernel &#9632; to stop: what is done is kept)</i>"
        )
        self.line.value = f"<code>{html.escape(status.line())}</code>{hint}"
        self.rows.value = _rows_html(self.run.errors(), self.run.latest())

    def _finish(self, data: dict[str, str]) -> None:
        if self.closed:
            return
        self.closed = True
        if self.handle is not None:
            # A saved notebook keeps the summary, not widgets that need the kernel.
            self.handle.update(data, raw=True)
        for widget in (self.bar, self.line, self.stop_button, self.rows, self.box):
            widget.close()


def _rows_html(errors: list[tuple[int, Any]], latest: list[tuple[int, Any]]) -> str:
    """The latest errors and answers, escaped, shortened."""
    parts: list[str] = []
    if errors:
        items = "".join(
            f"<li>row {pos}: {html.escape(redact(shorten(str(err), 160, '...')))}</li>"
            for pos, err in errors[-SHOWN_ROWS:]
        )
        parts.append(f"<details open><summary>latest errors</summary><ul>{items}</ul></details>")
    answers = [(pos, r) for pos, r in latest if not isinstance(r, Exception)][-SHOWN_ROWS:]
    if answers:
        items = "".join(
            f"<li>row {pos}: {html.escape(redact(shorten(str(getattr(r, 'text', r)), 160, '...')))}</li>"
            for pos, r in answers
        )
        parts.append(f"<details><summary>latest answers</summary><ul>{items}</ul></details>")
    return "".join(parts)
