"""How a caller watches the API's work: a turn (:class:`TurnObserver`) and a batch (a progress
function), each obtained from a hook that the layer which shows things installs.

``Chat`` knows no widget: for each turn it asks :func:`turn_display` for an observer and the turn
runner (:mod:`.turn_runner`) tells that observer what happens. ``map`` asks
:func:`batch_progress` for a progress function. The package's root installs the notebook
layer's factories (:func:`set_turn_display`, :func:`set_batch_progress`); without them a turn
shows nothing and a batch reports to no one. The hooks are plain functions in a module that
imports nothing at load, so that installing them costs ``import notebook_llm`` nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..core.cancel import StopSignal
    from ..core.completion import Completion
    from ..engine.engine import Engine
    from .tool_calling.events import LoopEvent
    from .turn import Turn

__all__ = [
    "BatchProgress",
    "BatchStatus",
    "TurnDisplay",
    "TurnObserver",
    "batch_progress",
    "set_batch_progress",
    "set_turn_display",
    "turn_display",
]


class TurnObserver:
    """What a caller is told while one turn runs; every method is optional (this base class
    does nothing, and asks a tool-call question on the terminal).

    The order: :meth:`started`; then :meth:`event` for every event of the stream (and, in a
    blocking run, :meth:`tick` regularly while waiting, all of it inside :meth:`waiting`);
    then :meth:`finished` with the completion, once the caller has parsed it and counted its
    cost. Every call but :meth:`confirm_async` happens on the caller's thread (the cell's own
    thread in a notebook, which is where widget messages must be sent from). An exception
    from :meth:`event` or :meth:`tick` stops the stream and becomes the turn's error.
    """

    def started(self) -> None:
        """The turn is about to run (show the live view here)."""

    def waiting(self) -> contextlib.AbstractContextManager[None]:
        """Entered around a blocking run, on the caller's thread, while it waits for events
        (the notebook layer lets the kernel dispatch widget clicks in there)."""
        return contextlib.nullcontext()

    def event(self, event: LoopEvent) -> None:
        """One event of the stream (a protocol event, or a tool loop's step and tool events)."""

    def tick(self) -> None:
        """Called regularly while a blocking run waits for events (flush a view; poll the UI).
        A ``KeyboardInterrupt`` raised here stops the stream, like an interrupt of the cell."""

    def confirm(self, call: Any) -> bool:
        """May this tool call run (``confirm=True``)? Asked on the caller's thread."""
        from ..core.redaction import redact

        name = getattr(call, "name", "tool")
        arguments = getattr(call, "arguments", "" if call is None else str(call))
        question = redact(f"Run tool {name}({arguments})? [y/N] ")
        return input(question).strip().lower() in ("y", "yes")

    async def confirm_async(self, call: Any) -> bool:
        """:meth:`confirm` for a turn that runs in the caller's own event loop."""
        return self.confirm(call)

    def finished(self, completion: Completion) -> None:
        """The turn ended (done, stopped, failed or interrupted): show its final output."""


class TurnDisplay(Protocol):
    """Makes the observer of one turn (the notebook layer's: the live view, then one static
    output). ``live``: ``None`` means "where a person watches", decided by the displaying
    layer; ``display=False`` never reaches a factory (nothing is shown)."""

    def __call__(
        self,
        engine: Engine,
        turn: Turn,
        stop: StopSignal,
        *,
        live: bool | None,
        max_rate: float,
        fmt: str,
    ) -> TurnObserver: ...


_turn_display: TurnDisplay | None = None


def set_turn_display(factory: TurnDisplay | None) -> None:
    """Install the factory of turn observers (``None``: turns show nothing)."""
    global _turn_display
    _turn_display = factory


def turn_display(
    engine: Engine,
    turn: Turn,
    stop: StopSignal,
    *,
    live: bool | None = None,
    display: bool = True,
    max_rate: float = 20.0,
    fmt: str = "markdown",
) -> TurnObserver:
    """The observer of one turn: the installed factory's, or one that shows nothing (also when
    ``display=False``)."""
    if not display or _turn_display is None:
        return TurnObserver()
    return _turn_display(engine, turn, stop, live=live, max_rate=max_rate, fmt=fmt)


#: ``progress(done, total, spent)``: after each prompt of a batch (and once with ``done=0``);
#: ``spent`` is the cost so far in US dollars, ``None`` when the model's price is unknown.
BatchProgress = Callable[[int, int, "float | None"], None]

_batch_progress: Callable[[int], BatchProgress | None] | None = None


@dataclass(frozen=True)
class BatchStatus:
    """Where a running batch is: what a progress view shows. A progress function may have an
    ``attach(run)`` method: ``map`` then hands it the running batch, whose ``status()`` gives
    this, ``latest()`` and ``errors()`` its newest rows, and ``stop()`` ends it cleanly."""

    done: int
    failed: int
    #: ``None`` while a streamed input has not been read to its end.
    total: int | None
    #: Rows whose result was in the journal already (not sent in this run).
    resumed: int
    #: US dollars spent, in this run and the journal's earlier ones; ``None``: no price known.
    spent: float | None
    elapsed: float
    #: The rate limits as one line (``"500 rpm (learned), waiting 2.0 s"``).
    rate_limits: str
    stopped: bool
    finished: bool
    #: The journal's path, when the batch has one.
    store: str | None = None
    #: A provider's batch API at work (``map(..., batch_api=True)``): its batches and their
    #: own counts, as one line (``"openai batch batch_abc: in_progress (1,200 completed)"``).
    remote: str | None = None

    @property
    def rows_per_second(self) -> float | None:
        """Rows finished per second in this run (resumed rows not counted)."""
        sent = self.done - self.resumed
        return sent / self.elapsed if self.elapsed > 0 and sent > 0 else None

    @property
    def eta(self) -> float | None:
        """Seconds left at the current pace; ``None`` when it cannot be told."""
        rate = self.rows_per_second
        if rate is None or self.total is None:
            return None
        return max(self.total - self.done, 0) / rate

    def line(self) -> str:
        """One plain line: rows, failures, pace, ETA, cost, limits."""
        from .estimate import money

        total = f"/{self.total:,}" if self.total is not None else ""
        parts = [f"{self.done:,}{total} rows"]
        if self.failed:
            parts.append(f"{self.failed:,} failed")
        if self.resumed:
            parts.append(f"{self.resumed:,} from the journal")
        rate = self.rows_per_second
        if rate is not None:
            parts.append(f"{rate:,.1f} rows/s")
        if self.eta is not None and not self.finished and self.done < (self.total or 0):
            parts.append(f"ETA {_duration(self.eta)}")
        if self.spent is not None:
            parts.append(f"{money(self.spent)} spent")
        if self.remote is not None:
            parts.append(self.remote)
        else:
            parts.append(f"limits: {self.rate_limits}")
        if self.stopped:
            parts.append("stopped")
        return ", ".join(parts)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def set_batch_progress(factory: Callable[[int], BatchProgress | None] | None) -> None:
    """Install the factory of a batch's progress report, called with the number of prompts
    (``None``: batches report to no one unless given ``progress=``)."""
    global _batch_progress
    _batch_progress = factory


def batch_progress(total: int) -> BatchProgress | None:
    """The progress report of a batch of ``total`` prompts (``None``: none is shown)."""
    return _batch_progress(total) if _batch_progress is not None else None
