"""Running one turn's event stream for its caller, from a blocking call or with ``await``,
telling a :class:`~notebook_llm.api.observers.TurnObserver` what happens.

Blocking (``Chat.send``, a plain ``%%llm`` cell): the caller's own event loop may be busy (the
kernel's runs the cell), and making it re-entrant (``nest_asyncio2``) would change asyncio
semantics for every library in the process. So the stream runs on the package's shared
background loop (:mod:`notebook_llm.core.background_loop`) and puts its events on a thread-safe
queue; the caller's thread takes them off and tells the observer, so everything the observer
does (widget messages in a notebook) happens on the caller's thread: ipykernel routes output by
the parent message of that thread, so it lands in the right cell. While it waits, the caller's
thread calls :meth:`~.TurnObserver.tick` (the notebook layer lets the kernel handle pending comm
messages there: a Stop click), answers the tool-call questions asked from the loop's thread,
and turns a ``KeyboardInterrupt`` into the stop signal. A stopped stream ends with ``finish``
aborted (the engine closes the HTTP response); one that does not end within
:data:`STOP_GRACE` seconds after a stop is cut off here.

``await`` (``Chat.asend``, an async ``%%llm`` cell): the stream runs in the caller's loop.

Either way nothing raises for a stream problem: it becomes the final ``Finish`` error, and an
observer that fails stops the stream and becomes the turn's error (a view that cannot show the
answer should not go on spending tokens on it, nor fail unseen).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future
from typing import Any

from ..core.background_loop import submit
from ..core.cancel import StopSignal
from ..core.completion import Completion, assemble
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import Event, Finish, FinishReason, Message, ToolResultBlock
from .observers import TurnObserver
from .tool_calling.events import LoopEvent, StepStart, ToolOutcome, ToolRun

__all__ = ["STOP_GRACE", "Source", "TurnRunner", "all_text", "completion_from"]

log = logging.getLogger("notebook_llm.api.turn_runner")

#: A function that starts the event stream (called on the loop that will iterate it).
Source = Callable[[], AsyncIterator[LoopEvent]]

#: Seconds a stream may take to end after a stop before it is cut off.
STOP_GRACE = 1.0

_DONE = object()


class TurnRunner:
    """Runs one turn for its caller: :meth:`run_blocking` or ``await`` :meth:`run_async`.

    ``observer`` is told the turn's events (see :class:`TurnObserver`); ``stop`` is the turn's
    stop signal (the observer's Stop button sets it, an interrupt too); ``provider`` and
    ``model`` label the completion. Use one runner per run.
    """

    def __init__(
        self,
        observer: TurnObserver,
        stop: StopSignal,
        provider: str | None = None,
        model: str | None = None,
    ) -> None:
        self.observer = observer
        self.stop = stop
        self.provider = provider
        self.model = model
        #: The events so far (all of them once the run returned).
        self.events: list[LoopEvent] = []
        #: Why the observer failed (then the turn's error), else ``None``.
        self.failure: LlmError | None = None
        self._caller: threading.Thread | None = None
        self._questions: queue.SimpleQueue[_CallerCall] = queue.SimpleQueue()

    @property
    def partial(self) -> Completion:
        """The completion of the events so far (what arrived before an interrupt)."""
        return self._fold()

    # ------------------------------------------------------------------ tool-call questions

    def confirm(self, call: Any) -> bool:
        """The observer's :meth:`~TurnObserver.confirm`, asked on the caller's thread: from the
        loop's side of a blocking run the question waits for the caller's wait loop to ask it
        (an unanswered one is declined when the run ends)."""
        if self._caller is None or threading.current_thread() is self._caller:
            return self.observer.confirm(call)
        pending = _CallerCall(lambda: self.observer.confirm(call))
        self._questions.put(pending)
        pending.done.wait()
        if pending.error is not None:  # the tool loop reports it as the call's result
            raise pending.error
        return bool(pending.result)

    async def confirm_async(self, call: Any) -> bool:
        """The observer's :meth:`~TurnObserver.confirm_async` (an awaited run's questions)."""
        return await self.observer.confirm_async(call)

    def _pending(self) -> Iterator[_CallerCall]:
        """The questions asked from the loop's side and not yet answered, taken one by one."""
        while True:
            try:
                yield self._questions.get_nowait()
            except queue.Empty:
                return

    # ------------------------------------------------------------------ blocking

    def run_blocking(self, source: Source) -> Completion:
        """Run ``source`` on the background loop while this thread waits and tells the
        observer; return the completion. A ``KeyboardInterrupt`` while waiting sets ``stop``
        and the partial completion is returned, ending aborted."""
        self._caller = threading.current_thread()
        inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.observer.started()
        with self.observer.waiting():
            try:
                self._wait(submit(self._pump(source, inbox)), inbox)
            finally:
                for question in self._pending():  # unanswered when the run ended: declined
                    question.settle(False)
        _ensure_finish(self.events, self.stop)
        return self._fold()

    async def _pump(self, source: Source, inbox: queue.SimpleQueue[Any]) -> None:
        """On the background loop: the stream's events into ``inbox``, then ``_DONE``."""
        try:
            await _each(source, inbox.put)
        except asyncio.CancelledError:
            inbox.put(_aborted(self.stop))
        except Exception as exc:
            inbox.put(_failure(exc))
        finally:
            inbox.put(_DONE)

    def _wait(self, future: Future[None], inbox: queue.SimpleQueue[Any]) -> None:
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
                    try:
                        self._add(item)
                    except KeyboardInterrupt:  # while showing one: the others are kept
                        self.stop.set("interrupted")
            except queue.Empty:
                pass
            except KeyboardInterrupt:
                self.stop.set("interrupted")
            try:
                if not done:
                    self._tell(self.observer.tick)
                    for question in self._pending():
                        question.run()
            except KeyboardInterrupt:
                self.stop.set("interrupted")
            if self.stop.is_set() and deadline is None:
                deadline = time.monotonic() + STOP_GRACE
            if not done and deadline is not None and time.monotonic() > deadline:
                future.cancel()
                self._add(_aborted(self.stop))
                done = True

    # ------------------------------------------------------------------ awaited

    async def run_async(self, source: Source, *, interruptible: bool = False) -> Completion:
        """Iterate ``source`` in the running loop, telling the observer; return the completion.

        A cancellation of this task (or an interrupt) sets ``stop`` and records an aborted
        finish; it propagates (:attr:`partial` then holds what arrived), unless
        ``interruptible`` (an async ``%%llm`` cell, which ipykernel cancels on a kernel
        interrupt): then the partial completion is returned, ending aborted."""
        self._caller = threading.current_thread()
        self.observer.started()
        try:
            await _each(source, self._add)
        except (asyncio.CancelledError, KeyboardInterrupt):
            self.stop.set("interrupted")
            self._add(_aborted(self.stop))
            task = asyncio.current_task()
            if not interruptible or task is None:
                raise
            task.uncancel()
        except Exception as exc:
            self._add(_failure(exc))
        _ensure_finish(self.events, self.stop)
        return self._fold()

    # ------------------------------------------------------------------ shared

    def _add(self, event: LoopEvent) -> None:
        self.events.append(event)
        self._tell(self.observer.event, event)

    def _tell(self, method: Callable[..., None], *args: Any) -> None:
        """Call an observer method; its first failure stops the stream and is the turn's
        error (the observer is told nothing more, but still :meth:`~TurnObserver.finished`)."""
        if self.failure is not None:
            return
        try:
            method(*args)
        except Exception as exc:
            log.debug("the turn's observer failed", exc_info=True)
            self.failure = LlmError(
                f"showing the turn failed ({type(exc).__name__}: {exc}), so it was stopped",
                ErrorCode.UNKNOWN,
                provider=self.provider,
            )
            self.stop.set("the turn's display failed")

    def _fold(self) -> Completion:
        completion = completion_from(self.events, self.provider, self.model)
        if self.failure is not None:
            completion.finish = FinishReason("error", self.failure)
        return completion


class _CallerCall:
    """A function to run on the caller's thread, on behalf of the stream's side."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: Any = None
        #: What ``fn`` raised (``input()`` without a stdin: ``EOFError``), raised again on the
        #: stream's side, where the question was asked; the caller's thread goes on waiting.
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except Exception as exc:
            self.error = exc
        finally:
            self.done.set()

    def settle(self, result: Any) -> None:
        self.result = result
        self.done.set()


def _failure(err: BaseException) -> Finish:
    if isinstance(err, LlmError):
        return Finish.error(err)
    return Finish(
        FinishReason("error", LlmError(f"{type(err).__name__}: {err}", ErrorCode.UNKNOWN))
    )


def _aborted(stop: StopSignal) -> Finish:
    return Finish(FinishReason("aborted", LlmError(stop.reason, ErrorCode.ABORTED)))


async def _each(source: Source, take: Callable[[LoopEvent], None]) -> None:
    """Start the stream, give each event to ``take``, and close the stream at the end (its
    HTTP response too, when it stopped early)."""
    stream = source()
    try:
        async for event in stream:
            take(event)
    finally:
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
