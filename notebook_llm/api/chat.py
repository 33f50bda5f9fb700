"""Conversations: :class:`Chat` (the Python API) and :func:`run_turn` (shared with ``%%llm``).

>>> chat = Chat(provider="mock", model="echo", live=False)
>>> chat.send("hello", display=False).text
'hello'
>>> len(chat.messages)
2

One turn: build the request, start the live view (when a widget front end is there), run the
stream (blocking with ``send``, in the running loop with ``await asend``), then replace the live
view in place (its display id) by ONE static ``text/markdown`` + ``text/plain`` output and
close the view's widgets, so a saved notebook holds no widget reference::

    while streaming:  [live widget: reasoning, text, tool cards, footer with Stop]
    when it ended:    [reasoning (collapsed) · tool cards · answer · error box · footer line]
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import fields, replace
from typing import Any, Generic, TypeVar, Unpack, overload

from ..core.cancel import StopSignal
from ..core.completion import Completion
from ..core.errors import ErrorCode, LlmError
from ..core.images import image_blocks
from ..core.protocol import Message, ToolSchema
from ..core.response_schema import parse_into, retry_messages
from ..engine.engine import Engine
from ..engine.request import TurnOptions, request_of
from ..engine.session import default_engine, set_default_engine
from ..notebook.watching import interactive
from .tool_calling import as_tool, stream_tools
from .tool_calling.events import LoopEvent
from .turn import Turn

#: What a turn sets beside its request (``send(max_steps=3)``).
_TURN_SETTINGS = tuple(f.name for f in fields(Turn) if f.name != "request")

# --------------------------------------------------------------------------------------------
# tools (the tool loop lives in notebook_llm.api.tool_calling; this is only the hook)


def tool_schema(fn: Callable[..., Any]) -> ToolSchema:
    """The ToolSchema the model sees for ``fn`` (:func:`notebook_llm.api.tool_calling.as_tool`)."""
    return as_tool(fn).schema


def make_source(
    engine: Engine, turn: Turn, stop: StopSignal, confirm: Callable[..., Any] | None = None
) -> Callable[[], AsyncIterator[LoopEvent]]:
    """A function that starts the event stream of ``turn`` (the tool loop when tools are given;
    else one plain stream), stopped by ``stop``."""
    request = replace(turn.request, stop_signal=stop)
    if turn.tools:
        # turn.confirm: False, True (ask through ``confirm``) or a function of its own
        ask = turn.confirm if callable(turn.confirm) else confirm if turn.confirm else None

        def start_loop() -> AsyncIterator[LoopEvent]:
            return stream_tools(
                engine, request, tools=turn.tools, max_steps=turn.max_steps, confirm=ask
            )

        return start_loop

    def start() -> AsyncIterator[LoopEvent]:
        return engine.stream(request)

    return start


# --------------------------------------------------------------------------------------------

T = TypeVar("T")


class _Default(Generic[T]):
    """A :class:`Chat` attribute that is a field of the chat's default request: reading it
    reads the field, setting it replaces the request by a copy with the new value."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, chat: None, owner: type) -> _Default[T]: ...
    @overload
    def __get__(self, chat: Chat, owner: type | None = None) -> T: ...
    def __get__(self, chat: Chat | None, owner: type | None = None) -> T | _Default[T]:
        if chat is None:
            return self
        value: T = getattr(chat.request, self.name)
        return value

    def __set__(self, chat: Chat, value: T) -> None:
        chat.request = chat.request.replace(**{self.name: value})


class Chat:
    """A conversation with one model, rendered live like ``%%llm``.

    ``Chat(provider="openai", model="gpt-4o-mini", system="Be brief.", tools=[f, g])``;
    ``chat.send(text)`` returns the :class:`~notebook_llm.Completion` (also when it failed or
    was stopped: check ``completion.error``); ``await chat.asend(text)`` in async code.
    ``live=None`` shows the widget view only where a person watches (a kernel driven by an
    interactive front end; headless runs such as nbclient or papermill get the static output
    only, see :mod:`notebook_llm.notebook.watching`); ``False`` never; ``True`` always.
    A turn that fails without any text is not added to the history, so it can be retried.
    """

    #: The chat's provider, model and system prompt: fields of its :attr:`request`, settable.
    provider = _Default[str]()
    model = _Default[str | None]()
    system = _Default[str | None]()

    def __init__(
        self,
        provider: str | None = None,
        model: str | None = None,
        *,
        tools: Sequence[Callable[..., Any]] = (),
        engine: Engine | None = None,
        live: bool | None = None,
        max_rate: float = 20.0,
        **options: Unpack[TurnOptions],
    ) -> None:
        """``options``: what every turn asks for unless it gives its own (``system``,
        ``temperature``, ``max_tokens``, ``schema``...: the fields of
        :class:`~notebook_llm.engine.request.Request`), checked here."""
        self.engine = engine or default_engine()
        for key in ("prompt", "messages", "images", "stop_signal"):
            if key in options:
                raise LlmError(
                    f"{key}= is not a Chat setting; give it to send()", ErrorCode.INVALID_OPTIONS
                )
        if provider is None:
            model = model or self.engine.file_config.default_model
        #: What every turn asks for: the provider, the model and the options (no history).
        self.request = request_of(
            provider or self.engine.file_config.default_provider or "mock", model, options, "Chat"
        )
        self.tools = list(tools)
        self.live = live
        self.max_rate = max_rate
        self.messages: list[Message] = []
        #: The last completion (``None`` before the first turn).
        self.last: Completion | None = None

    def __repr__(self) -> str:
        return (
            f"Chat(provider={self.provider!r}, model={self.model!r}, messages={len(self.messages)})"
        )

    def reset(self) -> None:
        """Forget the conversation."""
        self.messages.clear()
        self.last = None

    def turn(self, text: str, **overrides: Any) -> Turn:
        """The request for the next turn: history + ``text`` (with ``images=`` after it), the
        chat's options with ``overrides`` over them (``None``: not given), and the turn's own
        settings (:class:`Turn`'s ``tools``, ``confirm``, ``max_steps``, ``images``,
        ``budget``)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        extras = {k: given.pop(k) for k in _TURN_SETTINGS if k in given}
        extras.setdefault("tools", self.tools)
        user = Message.user(text)
        if extras.get("images") is not None:
            user = Message("user", [*user.content, *image_blocks(extras["images"])])
        given["messages"] = [*self.messages, user]
        return Turn(request_of(self.request, None, given, "Chat.send"), **extras)

    def record(self, text: str, completion: Completion, user: Message | None = None) -> None:
        """Add a finished turn to the history (skipped when it failed without text); ``user``
        is the turn's own user message (with its images), else ``text`` alone."""
        self.last = completion
        if completion.error is not None and not completion.text and not completion.steps:
            return
        self.messages.append(user or Message.user(text))
        self.messages.extend(completion.transcript or [completion.message()])

    def send(
        self, text: str, *, display: bool = True, fmt: str = "markdown", **overrides: Any
    ) -> Completion:
        """Send ``text``; show the stream (``display=False``: show nothing); return the result.

        With ``schema=`` and ``schema_retries=N``, an answer that does not validate is shown
        with its error, then sent back with the validation message as a new turn (at most N
        times); the history keeps the question and the last answer."""
        from ..notebook.widgets.present import Presenter

        first = turn = self.turn(text, **overrides)
        _before(turn, display)
        completion = Completion()
        for attempt in range(1 + max(0, turn.schema_retries)):
            if attempt:
                turn = _retry_turn(turn, completion)
                _before(turn, False)
            presenter = Presenter(
                self.engine, turn, live=self._live(display), display=display, max_rate=self.max_rate
            )
            completion = presenter.run_sync(
                make_source(self.engine, turn, presenter.stop, presenter.confirm)
            )
            _after(turn, completion)
            presenter.show(completion, fmt=fmt)
            if not _mismatch(completion):
                break
        self.record(text, completion, first.messages[-1])
        return completion

    async def asend(
        self,
        text: str,
        *,
        display: bool = True,
        fmt: str = "markdown",
        interruptible: bool = False,
        **overrides: Any,
    ) -> Completion:
        """Like :meth:`send`, awaiting the stream in the running event loop.

        A cancellation of this task (a kernel interrupt) stops the stream; what arrived is shown,
        marked as stopped, and kept in the history; then the cancellation propagates, unless
        ``interruptible=True`` (an async ``%%llm`` cell), which returns the partial completion."""
        from ..notebook.widgets.present import Presenter

        first = turn = self.turn(text, **overrides)
        _before(turn, display)
        completion = Completion()
        for attempt in range(1 + max(0, turn.schema_retries)):
            if attempt:
                turn = _retry_turn(turn, completion)
                _before(turn, False)
            presenter = Presenter(
                self.engine, turn, live=self._live(display), display=display, max_rate=self.max_rate
            )
            try:
                completion = await presenter.run_async(
                    make_source(self.engine, turn, presenter.stop, presenter.confirm_async),
                    interruptible=interruptible,
                )
            except asyncio.CancelledError:
                presenter.show(presenter.partial, fmt=fmt)
                self.record(text, presenter.partial, first.messages[-1])
                raise
            _after(turn, completion)
            presenter.show(completion, fmt=fmt)
            if not _mismatch(completion):
                break
        self.record(text, completion, first.messages[-1])
        return completion

    def _live(self, display: bool) -> bool:
        if not display:
            return False
        return interactive() if self.live is None else self.live


def _before(turn: Turn, display: bool) -> None:
    """Before a turn runs: refuse it when the session's budget is spent (or would be by this
    turn's estimate); show its images as thumbnails (the saved notebook keeps only those)."""
    if turn.budget is not None:
        turn.budget.check_turn(turn)
    if display and turn.images is not None:
        from ..notebook.widgets.present import show_output
        from ..notebook.widgets.typed_view import ImageStrip

        show_output(ImageStrip(turn.messages[-1].content))


def _mismatch(completion: Completion) -> bool:
    err = completion.error
    return err is not None and err.code == ErrorCode.SCHEMA_MISMATCH


def _retry_turn(turn: Turn, completion: Completion) -> Turn:
    """The next try of a turn whose answer did not validate: the answer and why, sent back."""
    assert completion.error is not None
    messages = retry_messages(turn.messages, completion.error)
    return replace(turn, request=replace(turn.request, messages=messages), images=None)


def _after(turn: Turn, completion: Completion) -> None:
    """After a turn ran: the parsed answer (``schema=``) and the cost spent (budget)."""
    parse_into(completion, turn.schema)
    if turn.budget is not None:
        turn.budget.add(completion, turn)


__all__ = [
    "Chat",
    "ErrorCode",
    "Turn",
    "default_engine",
    "make_source",
    "set_default_engine",
    "tool_schema",
]
