"""Showing one turn: the live view while it streams, then the static final outputs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..cancel import StopSignal
from ..errors import ErrorCode, LlmError
from ..loop_events import LoopEvent
from ..secrets import redact
from ..validate import Completion
from .render import (
    EMPTY_ANSWER,
    ErrorBox,
    JsonResult,
    Result,
    parse_json_answer,
    strip_fences,
)
from .runner import Source, completion_from, run_async, run_blocking, ui_poller
from .stream_view import StreamView

if TYPE_CHECKING:
    from ..chat import Turn
    from ..engine import Engine

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def show_output(obj: Any, **kwargs: Any) -> None:
    """``IPython.display.display`` (typed here once)."""
    from IPython.display import display

    show: Any = display
    show(obj, **kwargs)


def display_widget(widget: Any) -> None:
    """Display ``widget`` with only the widget-view mime type: front ends without the widget
    manager show nothing for it, and nbval skips it when comparing."""
    show_output(
        {WIDGET_MIME: {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}},
        raw=True,
    )


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
        from ..chat import price_of

        self.engine = engine
        self.turn = turn
        self.display = display
        self.stop = StopSignal()
        self.poll = poll
        self.view = (
            StreamView(turn.label, stop=self.stop, price=price_of(engine, turn), max_rate=max_rate)
            if live
            else None
        )
        self._main_calls: list[MainThreadCall] = []
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
        return completion_from(events, self.turn.provider, self.turn.model)

    async def run_async(self, source: Source, *, interruptible: bool = False) -> Completion:
        """Run the stream in the running event loop (``interruptible``: see :func:`run_async`)."""
        self._start()
        events: list[LoopEvent] = []
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
            display_widget(self.view.widget)

    def show(self, completion: Completion, *, fmt: str = "markdown") -> Any:
        """Finish the live view and display the final answer, any error, and the footer.
        Returns the parsed value for ``fmt='json'`` (else ``None``)."""
        from .runner import all_text

        error = completion.error
        stopped = error is not None and error.code == ErrorCode.ABORTED
        if self.view is not None:
            self.view.finish(status=status_of(completion))
        if not self.display:
            return None
        text = all_text(completion)
        parsed: Any = None
        if fmt == "json" and not stopped and error is None:
            try:
                parsed = parse_json_answer(text)
                show_output(JsonResult(parsed))
            except LlmError as exc:
                exc.provider = self.turn.provider
                show_output(Result(text))
                error = exc
        elif text or stopped:
            reasoning = "\n\n".join(
                c.reasoning for c in (completion.steps or [completion]) if c.reasoning
            )
            show_output(
                Result(
                    text,
                    stopped=stopped,
                    fmt="text" if fmt == "text" else "markdown",
                    reasoning=reasoning,
                )
            )
            if fmt == "code" and text and not stopped:
                _offer_cell(strip_fences(text))
        elif error is None and not any(c.tool_calls for c in (completion.steps or [completion])):
            show_output(Result(EMPTY_ANSWER, fmt="text"))  # a model may answer nothing
        if error is not None and not stopped:
            hint = None
            if error.code == ErrorCode.MISSING_CREDENTIAL and error.provider:
                try:
                    hint = self.engine.key_hint(error.provider)
                except LlmError:
                    hint = None
            show_output(ErrorBox(error, hint))
        if self.view is not None:
            display_widget(self.view.footer)
        return parsed


def _offer_cell(code: str) -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.set_next_input(redact(code), replace=False)
