"""Showing one turn: the live view while it streams, then ONE static output in its place.

:class:`Presenter` is the notebook's :class:`~notebook_llm.api.observers.TurnObserver`: the
package's root installs it as the factory ``Chat`` gets its observers from, so the API layer
runs the turn (:mod:`notebook_llm.api.turn_runner`) and the notebook layer only watches it.

The live view is displayed with a ``display_id``; when the stream ends (finished, stopped,
errored or interrupted) that same output is updated to a :class:`~.final.FinalView` (reasoning,
tool-call cards, answer, error, footer) and every widget of the view is emptied and closed, so a
saved notebook holds no widget reference and no answer text in widget state. Without a live
view (``live=False``, or no one watching) the final view is simply displayed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...api.observers import TurnObserver
from ...api.tool_calling.events import LoopEvent, ToolOutcome
from ...api.turn_runner import all_text
from ...core.cancel import StopSignal
from ...core.completion import Completion
from ...core.errors import ErrorCode, LlmError
from ...core.protocol import ReasoningDelta, TextDelta, ToolCallBlock
from ...core.redaction import redact
from ...engine.pricing import cost, price_of
from ..watching import interactive
from .adapter_view import adapter_excerpt
from .final import FinalView, ToolCallInfo, footer_line
from .kernel_poll import clicks_on_arrival, ui_poller
from .render import ErrorBox, estimated_tokens, parse_json_answer, strip_fences
from .stream_view import StreamView
from .typed_view import ImageStrip, typed_text

if TYPE_CHECKING:
    from ...api.turn import Turn
    from ...engine.engine import Engine

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def show_output(obj: Any, **kwargs: Any) -> None:
    """``IPython.display.display`` (typed here once)."""
    from IPython.display import display

    show: Any = display
    show(obj, **kwargs)


def display_widget(widget: Any, placeholder: str = "") -> Any:
    """Display ``widget`` under a new ``display_id`` (returns the ``DisplayHandle``, to replace
    it later by a static output); ``placeholder`` is the ``text/plain`` fallback shown where no
    widget manager is (nbval skips widget outputs when comparing)."""
    from IPython.display import DisplayHandle

    data: dict[str, Any] = {
        WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}
    }
    if placeholder:
        data["text/plain"] = placeholder
    handle: Any = DisplayHandle()  # type: ignore[no-untyped-call]
    handle.display(data, raw=True)
    return handle


def status_of(completion: Completion) -> str:
    """A short status for the footer: done, stopped, error CODE, ..."""
    kind = completion.finish.kind if completion.finish else "error"
    if kind == "aborted":
        return "stopped"
    if kind == "error":
        err = completion.error
        return f"error {err.code}" if err else "error"
    return {
        "stop": "done",
        "max-tokens": "cut at max tokens",
        "tool-calls": "tool calls (not run)",
    }.get(kind, kind)


class Presenter(TurnObserver):
    """The notebook's observer of one turn: a :class:`StreamView` while it streams (when
    ``live``), then ONE static :class:`FinalView` in its place.

    ``live=None``: the live view only where a person watches (see
    :mod:`notebook_llm.notebook.watching`). ``stop`` is the turn's stop signal (the view's Stop
    button sets it); ``fmt`` how the answer is shown (markdown, text, json, code). ``poll`` replaces the kernel UI poll (tests use it
    to simulate clicks and interrupts).
    """

    def __init__(
        self,
        engine: Engine,
        turn: Turn,
        stop: StopSignal | None = None,
        *,
        live: bool | None,
        max_rate: float = 20.0,
        fmt: str = "markdown",
        poll: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.turn = turn
        self.fmt = fmt
        self.stop = stop if stop is not None else StopSignal()
        self.poll = poll
        self.view = (
            StreamView(
                turn.label,
                stop=self.stop,
                price=price_of(engine, turn.provider, turn.model),
                max_rate=max_rate,
            )
            if (interactive() if live is None else live)
            else None
        )
        self._handle: Any = None
        self._kernel_poll: Callable[[], None] | None = None
        self._waiting = False
        #: The events of the turn (tool results and their status feed the final view).
        self.events: list[LoopEvent] = []
        #: The parsed answer of ``fmt='json'`` once :meth:`finished` showed it (else ``None``).
        self.parsed: Any = None

    # ------------------------------------------------------------------ TurnObserver

    def started(self) -> None:
        """Show the turn's images as thumbnails (the saved notebook keeps only those), then
        the live view under a display id (replaced by the final output at the end)."""
        if self.turn.images is not None:
            show_output(ImageStrip(self.turn.messages[-1].content))
        if self.view is not None:
            self._handle = display_widget(
                self.view.widget, f"{redact(self.turn.label)}: streaming (live view)"
            )

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """A blocking run: let the kernel dispatch the Stop click meanwhile (ipykernel < 7), or
        see it as it arrives (ipykernel 7), or, where neither can be, replace Stop by what to
        do instead (see :mod:`.kernel_poll`)."""
        with ui_poller(self.view is not None and self.poll is None) as kernel_poll:
            if (
                self.view is not None
                and self.poll is None
                and kernel_poll is None
                and not clicks_on_arrival(self.view.stop_button, self.stop.set)
            ):
                self.view.stop_unavailable(
                    "interrupt the kernel (■) to stop, or use await chat.asend(...)"
                )
            self._kernel_poll, self._waiting = kernel_poll, True
            try:
                yield
            finally:
                self._kernel_poll, self._waiting = None, False

    def event(self, event: LoopEvent) -> None:
        self.events.append(event)
        if self.view is not None:
            self.view.handle(event)
            if not self._waiting:  # awaited: no tick comes, so flush here (rate-limited)
                self.view.maybe_flush()

    def tick(self) -> None:
        if self.view is not None:
            self.view.maybe_flush()
        if self.poll is not None:
            self.poll()
        if self._kernel_poll is not None:
            self._kernel_poll()

    async def confirm_async(self, call: Any) -> bool:
        """Run / Skip buttons in the live view (the cell awaits, so the click is dispatched);
        without a view, the question is asked on the terminal/stdin instead."""
        if self.view is None:
            return self.confirm(call)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[bool] = loop.create_future()

        def on_answer(run: bool) -> None:
            def settle() -> None:
                if not answer.done():
                    answer.set_result(run)

            loop.call_soon_threadsafe(settle)

        self.view.ask(call, on_answer)
        self.view.flush()
        try:
            return await answer
        finally:
            self.view.cancel_question()  # answered, or cancelled by an interrupt

    def finished(self, completion: Completion) -> None:
        self.parsed = self.show(completion, fmt=self.fmt)

    # ------------------------------------------------------------------ the final output

    def show(self, completion: Completion, *, fmt: str = "markdown") -> Any:
        """End the turn's display: the live view (if any) is replaced in place by ONE static
        :class:`FinalView` and its widgets are closed. Returns the parsed value for
        ``fmt='json'`` (else ``None``)."""
        error = completion.error
        stopped = error is not None and error.code == ErrorCode.ABORTED
        status = status_of(completion)
        text = (
            all_text(completion) if fmt == "json" else typed_text(completion, all_text(completion))
        )
        parsed: Any = None
        if fmt == "json" and not stopped and error is None:
            try:
                parsed = parse_json_answer(text)
                text = "```json\n" + json.dumps(parsed, indent=2, ensure_ascii=False) + "\n```"
            except LlmError as exc:
                exc.provider = self.turn.provider
                error = exc
        if fmt == "code" and text and not stopped:
            _offer_cell(strip_fences(text))
        box = None
        if error is not None and not stopped:
            hint = None
            if error.code == ErrorCode.MISSING_CREDENTIAL and error.provider:
                try:
                    hint = self.engine.key_hint(error.provider)
                except LlmError:
                    hint = None
            box = ErrorBox(error, hint, adapter_excerpt(self.engine, error))
        final = FinalView(
            text,
            reasoning="\n\n".join(
                c.reasoning for c in (completion.steps or [completion]) if c.reasoning
            ),
            tools=self._tool_calls(completion),
            footer=self._footer(completion, status),
            stopped=stopped,
            error=box,
            fmt="text" if fmt == "text" else "markdown",
        )
        if self._handle is not None:
            self._handle.update(final)  # the live view's output becomes the static one
            self._handle = None
        else:
            show_output(final)
        tool_images = [i for e in self.events if isinstance(e, ToolOutcome) for i in e.images]
        if tool_images:  # what tools gave back as images (an MCP tool can), as thumbnails
            show_output(ImageStrip(tool_images))
        if self.view is not None:
            self.view.close()
        return parsed

    def _tool_calls(self, completion: Completion) -> list[ToolCallInfo]:
        results = {e.call_id: e for e in self.events if isinstance(e, ToolOutcome)}
        calls: list[ToolCallInfo] = []
        for step in completion.steps or [completion]:
            for block in step.blocks:
                if isinstance(block, ToolCallBlock):
                    info = ToolCallInfo(block.name, block.arguments)
                    result = results.get(block.id)
                    if result is not None:
                        info.result, info.status = result.content, result.status
                        info.is_error, info.source = result.is_error, result.source
                    calls.append(info)
        return calls

    def _footer(self, completion: Completion, status: str) -> str:

        usage = completion.usage
        price = price_of(self.engine, self.turn.provider, self.turn.model)
        amount = cost(usage, price) if usage is not None and price is not None else None
        deltas = [e for e in self.events if isinstance(e, TextDelta | ReasoningDelta)]
        line = footer_line(
            self.turn.label,
            status,
            usage,
            amount,
            finished=completion.error is None,
            estimated_output=estimated_tokens(len(deltas), sum(len(d.text) for d in deltas)),
        )
        return f"{line} · {self.turn.budget.note()}" if self.turn.budget is not None else line


def _offer_cell(code: str) -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.set_next_input(redact(code), replace=False)
