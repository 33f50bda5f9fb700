"""Conversations: :class:`Chat`, the Python API that ``%%llm`` cells use too.

>>> chat = Chat(provider="mock", model="echo", live=False)
>>> chat.send("hello", display=False).text
'hello'
>>> len(chat.messages)
2

One turn: build the request (:meth:`Chat.turn`), run its stream with a
:class:`~.turn_runner.TurnRunner` (blocking with ``send``, in the running loop with
``await asend``), and tell an observer what happens (:mod:`.observers`). ``Chat`` knows no
widget: in a notebook, the observer that the package's root installs shows the live view while
the turn streams, then ONE static output in its place
(:mod:`notebook_llm.notebook.widgets.present`); with ``display=False`` nothing is shown.
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
from ..engine.request import OPTION_NAMES, TurnOptions, refuse_unknown_keywords, request_of
from ..engine.session import default_engine, set_default_engine
from .observers import turn_display
from .tool_calling import as_tool, stream_tools
from .tool_calling.events import LoopEvent
from .tool_calling.loop import ToolSpec, check_tool_timeout
from .turn import Turn
from .turn_runner import TurnRunner

#: What a turn sets beside its request (``send(max_steps=3)``).
_TURN_SETTINGS = tuple(f.name for f in fields(Turn) if f.name != "request")

#: Request fields a turn makes itself (a ``Request`` would take them, so say why not).
_NOT_SEND_OPTIONS = {
    "prompt": "the text sent is the prompt",
    "messages": "the history is chat.messages (chat.reset() forgets it)",
}

#: What ``send`` takes beside ``text``, ``display`` and ``fmt``: a typo gets the close ones of
#: these (``max_step`` is ``max_steps``, not ``max_tokens``).
_SEND_OPTIONS = tuple(
    dict.fromkeys(
        [
            "provider",
            "model",
            *(name for name in OPTION_NAMES if name not in _NOT_SEND_OPTIONS),
            *_TURN_SETTINGS,
        ]
    )
)

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
                engine,
                request,
                tools=turn.tools,
                max_steps=turn.max_steps,
                confirm=ask,
                tool_timeout=turn.tool_timeout,
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

    ``Chat(provider="openai", model="gpt-4o-mini", system="Be brief.", tools=[f, g])``
    (``"mcp:SERVER"`` in ``tools`` offers an MCP server's tools; ``tool_timeout=30``: seconds
    one call may run, for every turn, or ``send(..., tool_timeout=)`` for one);
    ``chat.send(text)`` returns the :class:`~notebook_llm.Completion` (also when it failed or
    was stopped: check ``completion.error``); ``await chat.asend(text)`` in async code.
    ``live=None`` shows the widget view only where a person watches (a kernel driven by an
    interactive front end; headless runs such as nbclient or papermill get the static output
    only: the notebook layer decides); ``False`` never; ``True`` always.
    A turn that fails without any text is not added to the history, so it can be retried.
    """

    #: The chat's provider, model and default options: fields of its :attr:`request`, each
    #: settable (``chat.temperature = 0.2`` replaces the request by a checked copy).
    provider = _Default[str]()
    model = _Default[str | None]()
    system = _Default[str | None]()
    temperature = _Default[float | None]()
    max_tokens = _Default[int | None]()
    reasoning_effort = _Default[str | None]()
    schema = _Default[Any]()

    def __init__(
        self,
        provider: str | None = None,
        model: str | None = None,
        *,
        tools: Sequence[ToolSpec] = (),
        tool_timeout: float | None = None,
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
                # prompt and messages go to no call: send's text is the prompt, the history
                # is the chat's own; images and a stop signal belong to one turn
                why = _NOT_SEND_OPTIONS.get(key, "give it to send()")
                raise LlmError(f"{key}= is not a Chat setting: {why}", ErrorCode.INVALID_OPTIONS)
        if provider is None:
            model = model or self.engine.file_config.default_model
        #: What every turn asks for: the provider, the model and the options (no history).
        self.request = request_of(
            provider or self.engine.file_config.default_provider or "mock", model, options, "Chat"
        )
        self.tools = list(tools)
        #: Seconds one tool call of a turn may run (``send(tool_timeout=)`` overrides it).
        self.tool_timeout = check_tool_timeout(tool_timeout)
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
        named = [k for k in overrides if k not in _NOT_SEND_OPTIONS]  # those: one line below
        refuse_unknown_keywords(dict.fromkeys(named), "Chat.send", _SEND_OPTIONS)
        given = {k: v for k, v in overrides.items() if v is not None}
        for key, why in _NOT_SEND_OPTIONS.items():
            if key in given:
                raise LlmError(
                    f"{key}= is not an option of send(): {why}", ErrorCode.INVALID_OPTIONS
                )
        extras = {k: given.pop(k) for k in _TURN_SETTINGS if k in given}
        extras.setdefault("tools", self.tools)
        extras["tool_timeout"] = check_tool_timeout(extras.get("tool_timeout", self.tool_timeout))
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
        times); the history keeps the question and the last answer. ``stop_signal=``: a
        :class:`~notebook_llm.StopSignal` of the caller's; setting it (from any thread) stops
        the turn like the Stop button, and what arrived is kept."""
        tries = _Tries(self, text, overrides, display=display, fmt=fmt)
        while (runner := tries.next()) is not None:
            tries.done(runner.run_blocking(tries.source(runner.confirm)))
        return tries.keep()

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
        tries = _Tries(self, text, overrides, display=display, fmt=fmt)
        while (runner := tries.next()) is not None:
            source = tries.source(runner.confirm_async)
            try:
                completion = await runner.run_async(source, interruptible=interruptible)
            except asyncio.CancelledError:
                tries.done(runner.partial)
                tries.keep()
                raise
            tries.done(completion)
        return tries.keep()


class _Tries:
    """The tries of one message: its turn, then one more for each answer that does not match
    the schema (at most ``schema_retries``). Each try runs with a stop signal and an observer
    of its own (:func:`~notebook_llm.api.observers.turn_display`: the notebook's live view and
    final output, or nothing); ``send`` and ``asend`` differ only in how they run a try."""

    def __init__(
        self, chat: Chat, text: str, overrides: dict[str, Any], *, display: bool, fmt: str
    ) -> None:
        self.chat = chat
        self.text = text
        self.display = display
        self.fmt = fmt
        self.first = chat.turn(text, **overrides)
        self.turn: Turn | None = None
        self.left = max(0, self.first.schema_retries)
        self.completion = Completion()
        self.runner: TurnRunner | None = None

    def next(self) -> TurnRunner | None:
        """The runner of the next try, or ``None`` when the last answer stands. Refuses a try
        when the session's budget is spent (or would be by this turn's estimate)."""
        if self.turn is None:
            turn = self.first
        elif _mismatch(self.completion) and self.left:
            self.left -= 1
            turn = _retry_turn(self.turn, self.completion)
        else:
            return None
        if turn.budget is not None:
            turn.budget.check_turn(turn)
        self.turn = turn
        # send(stop_signal=s): the caller's own signal stops every try; else one per try.
        stop = turn.request.stop_signal or StopSignal()
        observer = turn_display(
            self.chat.engine,
            turn,
            stop,
            live=self.chat.live,
            display=self.display,
            max_rate=self.chat.max_rate,
            fmt=self.fmt,
        )
        self.runner = TurnRunner(observer, stop, turn.provider, turn.model)
        return self.runner

    def source(self, confirm: Callable[..., Any]) -> Callable[[], AsyncIterator[LoopEvent]]:
        """The event stream of the current try (``confirm``: how its tool calls are asked)."""
        assert self.turn is not None
        assert self.runner is not None
        return make_source(self.chat.engine, self.turn, self.runner.stop, confirm)

    def done(self, completion: Completion) -> None:
        """A try ended: parse its answer, count its cost, then let the observer show it."""
        assert self.turn is not None
        assert self.runner is not None
        _after(self.turn, completion)
        self.completion = completion
        self.runner.observer.finished(completion)

    def keep(self) -> Completion:
        """Add the message and the last answer to the chat's history; return that answer."""
        self.chat.record(self.text, self.completion, self.first.messages[-1])
        return self.completion


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
