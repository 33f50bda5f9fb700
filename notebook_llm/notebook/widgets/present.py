"""Showing one turn: the live view while it streams, then ONE static output in its place.

The live view is displayed with a ``display_id``; when the stream ends (finished, stopped,
errored or interrupted) that same output is updated to a :class:`~.final.FinalView` (reasoning,
tool-call cards, answer, error, footer) and every widget of the view is emptied and closed, so a
saved notebook holds no widget reference and no answer text in widget state. Without a live
view (``display`` only, or no kernel) the final view is simply displayed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...api.tool_calling.events import LoopEvent, ToolOutcome
from ...core.cancel import StopSignal
from ...core.completion import Completion
from ...core.errors import ErrorCode, LlmError
from ...core.protocol import ToolCallBlock
from ...core.redaction import redact
from ...engine.pricing import cost, price_of
from .adapter_view import adapter_excerpt
from .final import FinalView, ToolCallInfo, footer_line
from .render import ErrorBox, parse_json_answer, strip_fences
from .runner import Source, completion_from, run_async, run_blocking, ui_poller
from .stream_view import StreamView
from .typed_view import typed_text

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


class MainThreadCall:
    """A function to run on the cell's main thread, on behalf of the stream's loop thread."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: Any = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        finally:
            self.done.set()


class Presenter:
    """Runs one turn into a :class:`StreamView` (when ``live``) and shows the final outputs.

    ``poll`` replaces the kernel UI poll (tests use it to simulate clicks and interrupts).
    """

    def __init__(
        self,
        engine: Engine,
        turn: Turn,
        *,
        live: bool,
        display: bool = True,
        max_rate: float = 20.0,
        poll: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.turn = turn
        self.display = display
        self.stop = StopSignal()
        self.poll = poll
        self.view = (
            StreamView(
                turn.label,
                stop=self.stop,
                price=price_of(engine, turn.provider, turn.model),
                max_rate=max_rate,
            )
            if live
            else None
        )
        self._main_calls: list[MainThreadCall] = []
        self._handle: Any = None
        #: The events of the last run (tool results and their status feed the final view).
        self.events: list[LoopEvent] = []
        #: The completion so far of the last ``run_async`` (set also when it was cancelled).
        self.partial = Completion()

    def confirm(self, *args: Any) -> bool:
        """Ask the user whether a tool call may run (``--confirm``); callable from any thread."""
        call = args[0] if args else None
        name = getattr(call, "name", "tool")
        arguments = getattr(call, "arguments", "" if call is None else str(call))
        question = redact(f"Run tool {name}({arguments})? [y/N] ")
        if threading.current_thread() is threading.main_thread():
            return input(question).strip().lower() in ("y", "yes")
        pending = MainThreadCall(lambda: input(question).strip().lower() in ("y", "yes"))
        self._main_calls.append(pending)
        pending.done.wait()
        return bool(pending.result)

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

    def _poll(self) -> None:
        while self._main_calls:
            self._main_calls.pop(0).run()
        if self.poll is not None:
            self.poll()

    def run_sync(self, source: Source) -> Completion:
        """Run the stream, blocking this thread (the kernel keeps handling widget clicks)."""
        self._start()
        with ui_poller(self.view is not None and self.poll is None) as kernel_poll:
            if self.view is not None and self.poll is None and kernel_poll is None:
                self.view.stop_unavailable(
                    "interrupt the kernel (■) to stop, or use await chat.asend(...)"
                )

            def poll() -> None:
                self._poll()
                if kernel_poll is not None:
                    kernel_poll()

            events = run_blocking(source, self.stop, self.view, poll=poll)
        self.events = events
        return completion_from(events, self.turn.provider, self.turn.model)

    async def run_async(self, source: Source, *, interruptible: bool = False) -> Completion:
        """Run the stream in the running event loop (``interruptible``: see :func:`run_async`)."""
        self._start()
        events: list[LoopEvent] = []
        self.events = events
        try:
            await run_async(
                source, self.stop, self.view, swallow_cancel=interruptible, events=events
            )
        finally:
            # What arrived, also when the task was cancelled (the caller can still show it).
            self.partial = completion_from(events, self.turn.provider, self.turn.model)
        return self.partial

    def _start(self) -> None:
        if self.view is not None and self.display:
            self._handle = display_widget(
                self.view.widget, f"{redact(self.turn.label)}: streaming (live view)"
            )

    def show(self, completion: Completion, *, fmt: str = "markdown") -> Any:
        """End the turn's display: the live view (if any) is replaced in place by ONE static
        :class:`FinalView` and its widgets are closed. Returns the parsed value for
        ``fmt='json'`` (else ``None``)."""
        from .runner import all_text

        error = completion.error
        stopped = error is not None and error.code == ErrorCode.ABORTED
        status = status_of(completion)
        if not self.display:
            if self.view is not None:
                self.view.close()
            return None
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
                        info.is_error = result.is_error
                    calls.append(info)
        return calls

    def _footer(self, completion: Completion, status: str) -> str:

        usage = completion.usage
        price = price_of(self.engine, self.turn.provider, self.turn.model)
        amount = cost(usage, price) if usage is not None and price is not None else None
        line = footer_line(
            self.turn.label, status, usage, amount, finished=completion.error is None
        )
        return f"{line} · {self.turn.budget.note()}" if self.turn.budget is not None else line


def _offer_cell(code: str) -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.set_next_input(redact(code), replace=False)
