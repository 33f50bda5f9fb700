"""A batch's progress bar in the notebook (``notebook_llm.map`` with ``progress=None``).

The package's root installs :func:`progress_bar` as the batch progress hook
(:func:`notebook_llm.api.observers.set_batch_progress`). Where a person watches the cell, an
ipywidgets ``IntProgress`` counts the prompts (and the cost spent, when the price is known),
then leaves one plain line in its place; in a headless run (nbclient, papermill: see
:mod:`.watching`) no widget is made, only that final line, so a saved notebook holds no widget
state. Outside a kernel there is no bar at all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..api.estimate import money
from ..api.observers import BatchProgress
from .watching import in_kernel, interactive

__all__ = ["progress_bar"]


def progress_bar(total: int) -> BatchProgress | None:
    """The progress report of a batch of ``total`` prompts in the running kernel; ``None``
    outside a kernel or without ipywidgets."""
    if "ipykernel" not in sys.modules or not in_kernel():
        return None
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython comes with ipykernel
        return None
    if not interactive():  # no one watches: store no widget, just the final line
        return _final_line_only(display)
    try:
        from ipywidgets import IntProgress
    except ImportError:
        return None
    bar = IntProgress(value=0, min=0, max=max(total, 1), description=f"0/{total}")
    handle = display(bar, display_id=True)  # type: ignore[no-untyped-call]

    def update(done: int, total: int, spent: float | None) -> None:
        bar.value = done
        bar.description = f"{done}/{total}" + (f" {money(spent)}" if spent is not None else "")
        if done >= total and handle is not None:
            # A saved notebook keeps a plain line, not a widget that needs the kernel.
            handle.update(_done_line(done, total, spent), raw=True)
            bar.close()

    return update


def _done_line(done: int, total: int, spent: float | None = None) -> dict[str, str]:
    """What a finished batch leaves in the cell: one plain line, no widget."""
    cost = f", {money(spent)} spent" if spent is not None else ""
    return {"text/plain": f"{done}/{total} prompts done{cost}"}


def _final_line_only(display: Callable[..., Any]) -> BatchProgress:
    def update(done: int, total: int, spent: float | None) -> None:
        if done >= total:
            display(_done_line(done, total, spent), raw=True)

    return update
