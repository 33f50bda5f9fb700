"""Driving a stream into a :class:`StreamView`, from a blocking cell or with ``await``.

Why a worker loop plus a queue for blocking cells (rather than ``nest_asyncio2``): the kernel's
own event loop is busy running the cell, and making it re-entrant changes asyncio semantics for
every library in the process. So the stream runs on the package's shared background loop
(``notebook_llm.core.background_loop``) and puts events on a thread-safe queue; the kernel's main thread takes
them off and updates the widgets. Widget messages are therefore sent from the cell's own thread
(ipykernel routes output by the parent message of that thread, so they land in the right cell).
While it waits, the main thread lets the kernel process pending comm messages with
``jupyter_ui_poll`` where the kernel supports it (ipykernel < 7: the Stop button's click arrives
during the blocking cell; under ipykernel 7 a blocking cell cannot receive clicks, so the view
hides Stop and says to interrupt or await instead; ``%%llm`` cells avoid this by running as
async cells), and a kernel interrupt (``KeyboardInterrupt``) sets the stop signal: the engine ends the stream with
``finish`` aborted and closes the HTTP response; a stream that does not end within ~1 s after a
stop is cut off here.

``await`` callers (``Chat.asend``) run the stream directly in their own loop instead.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ...api.tool_calling.events import LoopEvent, StepStart, ToolOutcome, ToolRun
from ...core.background_loop import submit
from ...core.cancel import StopSignal
from ...core.completion import Completion, assemble
from ...core.errors import ErrorCode, LlmError
from ...core.protocol import Event, Finish, FinishReason, Message, ToolResultBlock
from .stream_view import StreamView

#: A function that starts the event stream (called on the loop that will iterate it).
Source = Callable[[], AsyncIterator[LoopEvent]]
Poll = Callable[[], None]

_DONE = object()
#: Seconds a stream may take to end after a stop before it is cut off.
STOP_GRACE = 1.0


def _failure(err: BaseException) -> Finish:
    if isinstance(err, LlmError):
        return Finish.error(err)
    return Finish(
        FinishReason("error", LlmError(f"{type(err).__name__}: {err}", ErrorCode.UNKNOWN))
    )


def _aborted(stop: StopSignal) -> Finish:
    return Finish(FinishReason("aborted", LlmError(stop.reason, ErrorCode.ABORTED)))


def run_blocking(
    source: Source, stop: StopSignal, view: StreamView | None = None, *, poll: Poll | None = None
) -> list[LoopEvent]:
    """Run ``source`` on the background loop; feed ``view`` on this thread; return the events.

    Never raises for stream problems (they become a final ``Finish`` error event). A
    ``KeyboardInterrupt`` sets ``stop`` and the partial stream is returned, ending aborted.
    """
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()

    async def pump() -> None:
        try:
            events = source()
            try:
                async for event in events:
                    inbox.put(event)
            finally:
                await _aclose(events)
        except asyncio.CancelledError:
            inbox.put(_aborted(stop))
        except Exception as exc:
            inbox.put(_failure(exc))
        finally:
            inbox.put(_DONE)

    future = submit(pump())
    events: list[LoopEvent] = []
    deadline: float | None = None
    done = False
    while not done:
        try:
            items = [inbox.get(timeout=0.02)]
            while True:
                try:
                    items.append(inbox.get_nowait())
                except queue.Empty:
                    break
            for item in items:
                if item is _DONE:
                    done = True
                    continue
                events.append(item)
                if view is not None:
                    view.handle(item)
        except queue.Empty:
            pass
        except KeyboardInterrupt:
            stop.set("interrupted")
        try:
            if view is not None:
                view.maybe_flush()
            if poll is not None and not done:
                poll()
        except KeyboardInterrupt:
            stop.set("interrupted")
        if stop.is_set() and deadline is None:
            deadline = time.monotonic() + STOP_GRACE
        if not done and deadline is not None and time.monotonic() > deadline:
            future.cancel()
            events.append(_aborted(stop))
            if view is not None:
                view.handle(events[-1])
            done = True
    return _ensure_finish(events, stop)


async def run_async(
    source: Source,
    stop: StopSignal,
    view: StreamView | None = None,
    *,
    swallow_cancel: bool = False,
    events: list[LoopEvent] | None = None,
) -> list[LoopEvent]:
    """Iterate ``source`` in the running loop, feeding ``view``. Cancellation (or an interrupt)
    sets ``stop`` and records an aborted finish; it propagates, unless ``swallow_cancel`` (an
    async ``%%llm`` cell, which ipykernel cancels on a kernel interrupt): then the partial
    stream is returned, ending aborted, and the cell shows it as stopped. ``events``: a list
    to collect into, which the caller still holds when the cancellation propagates."""
    if events is None:
        events = []
    try:
        stream = source()
        try:
            async for event in stream:
                events.append(event)
                if view is not None:
                    view.handle(event)
                    view.maybe_flush()
        finally:
            await _aclose(stream)
    except (asyncio.CancelledError, KeyboardInterrupt):
        stop.set("interrupted")
        events.append(_aborted(stop))
        if view is not None:
            view.handle(events[-1])
        task = asyncio.current_task()
        if not swallow_cancel or task is None:
            raise
        task.uncancel()
    except Exception as exc:
        events.append(_failure(exc))
        if view is not None:
            view.handle(events[-1])
    return _ensure_finish(events, stop)


async def _aclose(stream: AsyncIterator[LoopEvent]) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


def _ensure_finish(events: list[LoopEvent], stop: StopSignal) -> list[LoopEvent]:
    if not any(isinstance(e, Finish) for e in events):
        events.append(
            _aborted(stop)
            if stop.is_set()
            else _failure(LlmError("the stream ended without finish", ErrorCode.INVARIANT))
        )
    return events


def completion_from(events: list[LoopEvent], provider: str | None, model: str | None) -> Completion:
    """Fold the events of one run (a single stream, or the steps of a tool loop) into a
    :class:`Completion`. For a tool loop, the result is the last step's completion with
    ``steps``, the summed ``usage`` and the ``transcript`` (assistant turns and tool results)."""
    steps: list[list[Event]] = [[]]
    results: list[list[ToolOutcome]] = [[]]
    for ev in events:
        if isinstance(ev, StepStart):
            if steps[-1] or results[-1]:
                steps.append([])
                results.append([])
        elif isinstance(ev, ToolOutcome):
            results[-1].append(ev)
        elif not isinstance(ev, ToolRun):
            steps[-1].append(ev)
    done = [assemble(s) for s in steps]
    final = done[-1]
    if not final.finish:  # a final synthetic finish may sit in a step of its own
        final.finish = next((c.finish for c in reversed(done) if c.finish), None)
    if len(done) > 1:
        final.steps = done
        usages = [c.usage for c in done if c.usage is not None]
        final.usage = sum(usages[1:], usages[0]) if usages else None
        for comp, res in zip(done, results, strict=True):
            if comp.blocks:
                final.transcript.append(comp.message())
            if res:
                final.transcript.append(
                    Message.tool_results(
                        [ToolResultBlock.of(r.call_id, r.content, is_error=r.is_error) for r in res]
                    )
                )
    for comp in done:
        comp.provider, comp.model = provider, model
    return final


def all_text(completion: Completion) -> str:
    """The answer text of every step, joined by blank lines."""
    parts = [c.text for c in (completion.steps or [completion])]
    return "\n\n".join(p for p in parts if p)


@contextmanager
def ui_poller(enabled: bool = True, interval: float = 0.05) -> Iterator[Poll | None]:
    """A function that lets the kernel handle pending comm messages (widget clicks) while a
    cell blocks, or ``None`` outside a kernel or when ``jupyter_ui_poll`` cannot be used."""
    shell = _shell()
    kernel = getattr(shell, "kernel", None) if shell is not None else None
    # jupyter_ui_poll drives kernel.do_one_iteration(), which ipykernel 7 no longer has (there,
    # comm messages are only dispatched while a cell *awaits*: %%llm cells run as async cells).
    if not enabled or kernel is None or not hasattr(kernel, "do_one_iteration"):
        yield None
        return
    try:
        from jupyter_ui_poll import ui_events

        context = ui_events()
        process = context.__enter__()
    except Exception:  # an unsupported kernel: the Stop button waits, interrupt still works
        yield None
        return
    last = [0.0]

    def poll() -> None:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            process(10)

    try:
        yield poll
    finally:
        context.__exit__(None, None, None)


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    return get_ipython()
