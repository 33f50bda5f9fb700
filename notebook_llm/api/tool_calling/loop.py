"""The tool-calling loop: generate, run the requested tools, feed the results back, repeat.

``stream_tools`` yields :data:`~notebook_llm.api.tool_calling.events.LoopEvent` s; ``run_tools`` folds them
into one :class:`~notebook_llm.core.completion.Completion`.

Event order, per step ``n`` (numbered from 1): ``StepStart(n)``, the step's protocol events
(``BlockStart`` ... ``Finish``, obeying the five stream rules on their own), then for each
tool call: ``ToolRun`` when it starts (in the model's order; after the ``confirm`` answer)
and ``ToolOutcome`` when it ends (in the order the calls finish; each names its ``call_id``).
The results go back to the model in the model's order.

How the loop ends: the **last event is always a** ``Finish`` and its reason is the loop's
outcome. ``stop`` (or ``max-tokens``) when the model answered without tool calls; ``error`` /
``aborted`` when a generation failed or the stop signal was set. When the tools of step
``max_steps`` have run and the model still wants more, or the stop signal is set while tools
run, the loop adds a last step that makes no request and holds only
``Finish(error, LlmError(TOOL_STEP_LIMIT))`` (or ``Finish(aborted, ABORTED)``); the
transcript is complete up to then, so it can be continued with another call.

``run_tools`` mirrors ``Engine.complete``: it returns the final completion when the loop ended
normally and raises the ``LlmError`` otherwise (``TOOL_STEP_LIMIT`` included), with the whole
loop's completion (steps, transcript, summed usage) in ``err.details["completion"]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Required, Unpack, cast

from ...core.cancel import StopSignal, until_stopped
from ...core.completion import Completion, assemble
from ...core.errors import ErrorCode, LlmError
from ...core.protocol import (
    Block,
    Event,
    Finish,
    FinishReason,
    Message,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
)
from ...engine.request import Request, TurnOptions, check_request, request_of
from .events import LoopEvent, StepStart, ToolOutcome, ToolRun
from .tools import Tool, ToolReply, as_tool, error_text, result_text, run_user_code

if TYPE_CHECKING:
    from ...engine.engine import Engine

__all__ = [
    "DECLINED",
    "ConfirmFn",
    "ToolLoopOptions",
    "ToolSpec",
    "check_tool_timeout",
    "resolve_tools",
    "run_tools",
    "stream_tools",
]

log = logging.getLogger("notebook_llm.api.tool_calling")

#: ``confirm(call)``: return (or resolve to) ``True`` to run the call, ``False`` to skip it.
ConfirmFn = Callable[[ToolCallBlock], "bool | Awaitable[bool]"]

#: What the model is told when the user skips a call.
DECLINED = "the user declined to run this tool"
STOPPED = "not run: the tool loop was stopped"


#: What ``tools=`` takes: Python functions (or :class:`Tool` s) and ``"mcp:NAME"`` /
#: ``"mcp:NAME/TOOL"`` strings for the tools of a configured MCP server.
ToolSpec = Tool | Callable[..., Any] | str


async def _tool_table(
    tools: Iterable[ToolSpec], engine: Engine, stop: StopSignal | None
) -> dict[str, Tool]:
    """The tools by the name the model calls them. ``mcp:`` strings are resolved to the tools
    of their server (which starts it, or reads its listing from the recording when replaying)."""
    items = list(tools)
    specs = [obj for obj in items if isinstance(obj, str)]
    groups: list[list[Tool]] = []
    if specs:
        from ..mcp.tools import resolve_specs

        groups = await resolve_specs(specs, engine, stop)
    resolved = iter(groups)
    table: dict[str, Tool] = {}
    for obj in items:
        for t in next(resolved) if isinstance(obj, str) else [as_tool(obj)]:
            if t.name in table:
                prior = table[t.name]
                same = getattr(t, "remote_name", None) == getattr(prior, "remote_name", None)
                if t.source and t.source == prior.source and same:
                    continue  # the same MCP tool asked for twice (mcp:S and mcp:S/T)
                other = prior.source or "a Python function"
                raise LlmError(
                    f"two tools are named {t.name!r} ({other} and {t.source or 'a Python function'})"
                    + ("; offer one of them, e.g. mcp:SERVER/TOOL" if t.source else ""),
                    ErrorCode.INVALID_OPTIONS,
                )
            table[t.name] = t
    return table


async def resolve_tools(
    tools: Iterable[ToolSpec], engine: Engine, stop: StopSignal | None = None
) -> list[Tool]:
    """``tools`` as :class:`Tool` s, ``mcp:`` specs resolved once (a batch that runs the loop
    for every prompt lists each server once, not once per prompt)."""
    return list((await _tool_table(tools, engine, stop)).values())


#: How long a stopped step waits for its tasks to wind down before it leaves them behind: a
#: tool that catches ``CancelledError`` and goes on must not hold the loop after a Stop.
_CANCEL_GRACE = 1.0


def check_tool_timeout(value: Any, name: str = "tool_timeout") -> float | None:
    """``tool_timeout=`` checked before it steers anything: ``None``, or a positive, finite
    number of seconds (a bool, a NaN, an infinity or a string is one line naming it)."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise LlmError(
            f"{name} must be a positive number of seconds or None, not {value!r}",
            ErrorCode.INVALID_OPTIONS,
        )
    return float(value)


async def _confirmed(confirm: ConfirmFn, call: ToolCallBlock) -> bool:
    # user code: whatever it raises of its own (sys.exit too) is an ordinary exception here
    return bool(await run_user_code(confirm, call))


class _StepRunner:
    """Runs the tool calls of one step; events go to ``queue``, ``None`` marks the end."""

    def __init__(
        self,
        calls: Sequence[ToolCallBlock],
        table: dict[str, Tool],
        concurrency: int,
        confirm: ConfirmFn | None,
        tool_timeout: float | None = None,
    ) -> None:
        self.calls = list(calls)
        self.tool_timeout = tool_timeout
        self.table = table
        self.semaphore = asyncio.Semaphore(max(1, concurrency))
        self.confirm = confirm
        self.queue: asyncio.Queue[ToolRun | ToolOutcome | None] = asyncio.Queue()
        self.results: dict[str, ToolOutcome] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def _finish(self, call: ToolCallBlock, result: ToolOutcome) -> None:
        self.results[call.id] = result
        self.queue.put_nowait(result)

    async def dispatch(self) -> None:
        """Start the calls in the model's order (confirmations one at a time), then wait."""
        try:
            for call in self.calls:
                await self._start(call)
            if self.tasks:
                # return_exceptions: one call's failure must not end the others' wait
                await asyncio.gather(*self.tasks, return_exceptions=True)
        finally:
            self.queue.put_nowait(None)

    async def _start(self, call: ToolCallBlock) -> None:
        try:
            await self._start_call(call)
        except Exception as exc:  # never lose a call: it is reported, the others go on
            if call.id not in self.results:
                text = f"the tool call could not be started: {error_text(exc)}"
                self._finish(call, ToolOutcome(call.id, call.name, text, True, "error"))

    async def _start_call(self, call: ToolCallBlock) -> None:
        t = self.table.get(call.name)
        if t is None:
            known = ", ".join(sorted(self.table)) or "none"
            self.queue.put_nowait(ToolRun(call.id, call.name, call.arguments))
            text = f"unknown tool {call.name!r}; the available tools are: {known}"
            self._finish(call, ToolOutcome(call.id, call.name, text, True, "error"))
            return
        kwargs, problem = t.prepare(call.arguments)
        if kwargs is None:
            self.queue.put_nowait(ToolRun(call.id, call.name, call.arguments, source=t.source))
            text = problem or "invalid arguments"
            self._finish(call, _outcome(t, call, ToolReply(text, is_error=True)))
            return
        if self.confirm is not None:
            try:
                ok = await _confirmed(self.confirm, call)
            except Exception as exc:
                text = f"the confirmation failed: {error_text(exc)}"
                self._finish(call, _outcome(t, call, ToolReply(text, is_error=True)))
                return
            if not ok:
                skipped = ToolOutcome(
                    call.id, call.name, DECLINED, True, "skipped", source=t.source
                )
                self._finish(call, skipped)
                return
        await self.semaphore.acquire()
        self.queue.put_nowait(ToolRun(call.id, call.name, call.arguments, source=t.source))
        task = asyncio.ensure_future(self._run(t, call, kwargs))
        self.tasks.add(task)

    async def _run(self, t: Tool, call: ToolCallBlock, kwargs: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            reply = await self._call(t, kwargs)
        finally:
            self.semaphore.release()
        self._finish(call, _outcome(t, call, reply, time.perf_counter() - started))

    async def _call(self, t: Tool, kwargs: dict[str, Any]) -> ToolReply:
        """What the call gave back. The call runs as a task of its own, so a stop or the
        timeout ends the wait at once, even for a tool that ignores its cancellation."""
        work = asyncio.ensure_future(t.call(kwargs))
        try:
            done, _ = await asyncio.wait({work}, timeout=self.tool_timeout)
        except asyncio.CancelledError:
            work.cancel()
            raise
        if not done:
            work.cancel()
            return ToolReply(
                f"tool {t.name!r} did not finish within {self.tool_timeout:g} s "
                f"(tool_timeout={self.tool_timeout:g}) and was abandoned",
                is_error=True,
            )
        try:
            value = work.result()
        except asyncio.CancelledError:
            # the call's own task was cancelled from inside (the tool cancelled itself)
            return ToolReply(f"tool {t.name!r} was cancelled", is_error=True)
        except Exception as exc:
            return ToolReply(error_text(exc), is_error=True)
        if isinstance(value, ToolReply):
            return value
        text, is_error = result_text(t.name, value)
        return ToolReply(text, is_error=is_error)

    def result_message(self) -> Message:
        """The results in the model's order (calls that never finished are reported as
        stopped), then the images the tools gave back: the adapter contract carries text in a
        tool result, so an image goes to the model right after the results, in the same turn,
        and each result's text says which images are its own."""
        blocks: list[Block] = []
        images: list[Block] = []
        for call in self.calls:
            r = self.results.get(call.id)
            if r is None:
                blocks.append(ToolResultBlock.of(call.id, STOPPED, is_error=True))
            else:
                blocks.append(ToolResultBlock.of(call.id, r.content, is_error=r.is_error))
                images += r.images
        return Message("user", blocks + images)


def _outcome(t: Tool, call: ToolCallBlock, reply: ToolReply, duration: float = 0.0) -> ToolOutcome:
    status: Literal["ok", "error"] = "error" if reply.is_error else "ok"
    return ToolOutcome(
        call.id,
        call.name,
        reply.text,
        reply.is_error,
        status,
        duration,
        source=t.source,
        images=list(reply.images),
    )


class ToolLoopOptions(TurnOptions, total=False):
    """The keywords of :func:`stream_tools` and :func:`run_tools`: the loop's own (below) and
    the request's (:class:`~notebook_llm.engine.request.Request`; ``tools`` here are the
    functions, their schemas are the request's)."""

    tools: Required[Iterable[ToolSpec]]
    max_steps: int
    concurrency: int
    confirm: ConfirmFn | bool | None
    tool_timeout: float | None
    transcript: list[Message] | None


#: The keywords the loop takes for itself; the others make the request of every step.
_LOOP_KEYS = ToolLoopOptions.__required_keys__ | (
    ToolLoopOptions.__optional_keys__ - TurnOptions.__optional_keys__
)


def _start(
    engine: Engine,
    provider: str | Request,
    model: str | None,
    options: Mapping[str, Any],
    where: str,
    state: _LoopState | None = None,
) -> tuple[Request, AsyncGenerator[LoopEvent, None]]:
    """The request and the loop's events for the keywords of a public entry point called
    ``where``."""
    loop = {k: v for k, v in options.items() if k in _LOOP_KEYS}
    rest = {k: v for k, v in options.items() if k not in _LOOP_KEYS}
    request = request_of(provider, model, rest, where)
    state = state if state is not None else _LoopState(loop.pop("transcript", None))
    loop.pop("transcript", None)
    return request, _loop(engine, request, state=state, **loop)


async def stream_tools(
    engine: Engine,
    provider: str | Request,
    model: str | None = None,
    **options: Unpack[ToolLoopOptions],
) -> AsyncIterator[LoopEvent]:
    """Run the tool loop, yielding step markers, protocol events and tool events.

    ``tools``: functions, callables or :class:`Tool` s (duplicated names are an error).
    ``max_steps``: the most generations made (at least 1; 8 by default). ``concurrency``: how
    many calls of one step run at once (4). ``confirm``: ``confirm(call) -> bool`` (sync or
    async), asked before each call runs, one at a time in the model's order; a declined call is
    not run and the model is told so (``ToolOutcome(status="skipped")``); ``confirm=True``
    raises ``INVALID_OPTIONS`` here (the notebook layer maps it to its Run/Skip buttons and
    passes a callable). ``tool_timeout``: seconds one call may run before it is abandoned and
    the model told so (``None``, the default: the config file's ``[defaults] tool_timeout``,
    else no limit; Stop still ends a call that hangs; an MCP server's own ``tool_timeout``
    applies too, the smaller wins). A
    thread cannot be killed: a sync tool that never returns goes on in its own daemon thread,
    its result dropped. ``transcript``: a list the loop appends its messages to (assistant
    turns, tool results) as it goes, for callers that keep a history. The other keywords
    (``prompt``, ``messages``, ``system``, ``temperature``, ``stop_signal``...) make the
    request of every step, as for :meth:`Engine.stream`; ``provider`` may be a ``Request``.

    Configuration errors raise ``LlmError`` before the first event; everything afterwards ends
    the stream with a ``Finish`` (see the module docs). Callers read the transcript through
    :func:`run_tools`, ``transcript=``, or rebuild it from the events.
    """
    _, loop = _start(engine, provider, model, options, "stream_tools")
    async with aclosing(loop) as events:
        async for event in events:
            yield event


class _LoopState:
    def __init__(self, transcript: list[Message] | None = None) -> None:
        self.steps: list[Completion] = []
        self.transcript: list[Message] = transcript if transcript is not None else []
        self.final: FinishReason | None = None


async def _loop(
    engine: Engine,
    request: Request,
    *,
    state: _LoopState,
    tools: Iterable[ToolSpec],
    max_steps: int = 8,
    concurrency: int = 4,
    confirm: ConfirmFn | bool | None = None,
    tool_timeout: float | None = None,
) -> AsyncGenerator[LoopEvent, None]:
    if confirm is True:
        raise LlmError(
            "confirm=True needs a notebook view to ask with; at the engine level pass a "
            "callable confirm(call) -> bool",
            ErrorCode.INVALID_OPTIONS,
        )
    confirm_fn = confirm if callable(confirm) else None
    if max_steps < 1:
        raise LlmError(f"max_steps must be at least 1, not {max_steps}", ErrorCode.INVALID_OPTIONS)
    tool_timeout = check_tool_timeout(tool_timeout)
    if tool_timeout is None:  # not given: the config file's [defaults] tool_timeout, if any
        file_config = getattr(engine, "file_config", None)  # an engine-like test double has none
        tool_timeout = getattr(file_config, "default_tool_timeout", None)
    if request.tools:
        raise LlmError("tools= given twice", ErrorCode.INVALID_OPTIONS)
    provider, model, stop_signal = request.provider, request.model, request.stop_signal
    table = await _tool_table(tools, engine, stop_signal)
    schemas = [t.schema for t in table.values()]
    conversation = check_request(request)  # the prompt and images join the messages, once
    request = replace(request, prompt=None, images=None, tools=schemas)

    step = 0
    while True:
        step += 1
        yield StepStart(step)
        if step > max_steps or (stop_signal is not None and stop_signal.is_set()):
            if stop_signal is not None and stop_signal.is_set():
                reason = FinishReason("aborted", LlmError(stop_signal.reason, ErrorCode.ABORTED))
            else:
                reason = FinishReason(
                    "error",
                    LlmError(
                        f"the model still asked for tools after {max_steps} "
                        f"step{'' if max_steps == 1 else 's'} (max_steps={max_steps}); the "
                        "tool results so far are in the transcript",
                        ErrorCode.TOOL_STEP_LIMIT,
                        provider=provider,
                        details={"max_steps": max_steps},
                    ),
                )
            state.final = reason
            yield Finish(reason)
            return
        events: list[Event] = []
        step_stream = engine.stream(replace(request, messages=conversation))
        async with aclosing(cast(AsyncGenerator[Event, None], step_stream)) as stream:
            async for event in stream:
                events.append(event)
                yield event
        completion = assemble(events)
        completion.provider = provider
        completion.model = model or engine.provider(provider).model
        state.steps.append(completion)
        state.final = completion.finish
        calls = completion.tool_calls
        if completion.finish is not None and completion.finish.kind == "max-tokens":
            calls = []  # cut off by max_tokens: never run a call whose arguments may be partial
        if completion.error is not None or not calls:
            if completion.error is None and completion.blocks:
                # The final answer belongs to the conversation too, so it can be continued.
                state.transcript.append(completion.message())
            return
        assistant = completion.message()
        conversation.append(assistant)
        state.transcript.append(assistant)
        runner = _StepRunner(calls, table, concurrency, confirm_fn, tool_timeout)
        dispatcher = asyncio.ensure_future(runner.dispatch())
        try:
            while True:
                item = await _next(runner.queue, stop_signal)
                if item is None:
                    break
                yield item
        finally:
            # Stopped, or the consumer went away: cancel what still runs (threads finish on
            # their own; their results are dropped). The wait is bounded: a confirm function
            # or a tool that swallows its cancellation is left behind, not waited for.
            pending = [t for t in [dispatcher, *runner.tasks] if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait(pending, timeout=_CANCEL_GRACE)
        for call in runner.calls:
            if call.id not in runner.results:
                known = table.get(call.name)
                source = known.source if known is not None else ""
                yield ToolOutcome(call.id, call.name, STOPPED, True, "error", source=source)
        results = runner.result_message()
        conversation.append(results)
        state.transcript.append(results)


async def _next(
    queue: asyncio.Queue[ToolRun | ToolOutcome | None], stop: StopSignal | None
) -> ToolRun | ToolOutcome | None:
    """The next tool event; ``None`` when the step's calls are done or ``stop`` was set."""
    if stop is None:
        return await queue.get()
    if stop.is_set():
        return None
    getter = asyncio.ensure_future(queue.get())
    stopped = asyncio.ensure_future(until_stopped(stop))
    try:
        done, _ = await asyncio.wait({getter, stopped}, return_when=asyncio.FIRST_COMPLETED)
        return getter.result() if getter in done else None
    finally:
        for waiter in (getter, stopped):
            if not waiter.done():
                waiter.cancel()


def _sum_usage(steps: Sequence[Completion]) -> TokenUsage | None:
    total: TokenUsage | None = None
    for c in steps:
        if c.usage is not None:
            total = c.usage if total is None else total + c.usage
    return total


async def run_tools(
    engine: Engine,
    provider: str | Request,
    model: str | None = None,
    *,
    on_event: Callable[[LoopEvent], None] | None = None,
    **options: Unpack[ToolLoopOptions],
) -> Completion:
    """Run the tool loop to the end; the final :class:`Completion`.

    Its blocks and ``finish`` are the last step's; ``steps`` holds every step's completion,
    ``transcript`` the messages the loop added (assistant turns and tool results, in order;
    append them to your history), ``usage`` the sum over the steps, ``events`` the last
    step's protocol events. ``on_event`` sees every loop event as it happens. Takes what
    :func:`stream_tools` takes.

    Raises ``LlmError`` when the loop did not end with the model's answer (a failed or aborted
    generation, ``TOOL_STEP_LIMIT``); the loop's completion is in ``err.details["completion"]``.
    """
    state = _LoopState(options.get("transcript"))
    request, loop = _start(engine, provider, model, options, "run_tools", state)
    async with aclosing(loop) as events:
        async for event in events:
            if on_event is not None:
                on_event(event)
    last = state.steps[-1] if state.steps else Completion()
    result = Completion(
        blocks=list(last.blocks),
        usage=_sum_usage(state.steps),
        finish=state.final,
        events=list(last.events),
        provider=request.provider,
        model=last.model or request.model,
        steps=state.steps,
        transcript=state.transcript,
    )
    err = result.error
    if err is not None:
        err.details["completion"] = result
        if err.provider is None:
            err.provider = request.provider
        raise err
    return result
