"""One running batch: :class:`BatchRun` hands the prompts to ``concurrency`` workers, keeps to
the cost cap (:class:`~notebook_llm.api.cost_cap.CostCap`, whose count starts at what the
journal's earlier runs spent, and whose count of each row is the cost journaled) and the rate
limits, journals each result (with a store) and tells the progress view how it goes.

The prompts come from a :class:`~notebook_llm.api.batch_inputs.Source`, chunk by chunk; the
work list (:meth:`BatchRun._work`) is a generator the workers share (it never awaits, so two
workers never run it at once). With a store it computes each row's key, asks the journal which
rows of the chunk have a result already, and skips those (unless ``retry_failed`` and the row
failed), so a finished batch run again reads its input and its journal and sends nothing.

Without a store the results are kept in memory and returned as before; with one they go to
the journal as they arrive and are read back at the end (an in-memory input), or returned as a
:class:`~notebook_llm.api.batch_results.StoredResults` (a streamed input), so memory does not
grow with the input.

Nothing here imports notebook code: the progress view is whatever the caller's ``progress``
gave (:mod:`notebook_llm.api.observers`); it may ``attach`` to the run to read its status, see
its latest rows and errors, and stop it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.cancel import StopSignal, until_stopped
from ..core.completion import Completion
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import Message
from ..core.response_schema import ResponseSchema
from ..engine.engine import Engine
from ..engine.pricing import Price
from ..engine.request import Request
from ..wire.response_watch import watching_responses
from ..wire.slots import request_slots, when_idle
from ..wire.transport import connection_pool
from .batch_inputs import Source
from .batch_results import StoredResults, frame_of, results_of, row_result
from .batch_store import BatchStore, StoredRow, prompt_text, row_key
from .cost_cap import CostCap
from .dataframes import to_frame
from .estimate import DEFAULT_OUTPUT_TOKENS, estimate_tokens, prompt_tokens
from .observers import BatchProgress, BatchStatus
from .rate_limits import RateGate, request_weight
from .tool_calling.loop import run_tools
from .tool_calling.tools import Tool

__all__ = ["BatchRun", "BatchSettings", "WorkItem"]

log = logging.getLogger("notebook_llm.api.batch")

#: One slot of the result list.
BatchResult = Completion | LlmError

#: At most this many prompts of a batch wait ready to send (see ``lookahead_of``).
MAX_LOOKAHEAD = 8
#: How many of the latest rows and errors a running batch keeps for a view to show.
RECENT_ROWS = 20


def _request_fields(prompt: Any) -> dict[str, Any]:
    if isinstance(prompt, str):
        return {"prompt": prompt}
    if isinstance(prompt, Message):
        return {"messages": [prompt]}
    if isinstance(prompt, list | tuple) and all(isinstance(m, Message) for m in prompt):
        return {"messages": list(prompt)}
    return {"prompt": str(prompt)}  # numbers, numpy strings and the like from a DataFrame


async def complete_one(
    engine: Engine,
    request: Request,
    prompt: Any,
    stop: StopSignal | None,
    tools: Sequence[Tool] = (),
    max_steps: int = 8,
    tool_timeout: float | None = None,
) -> BatchResult:
    """One prompt's result: its ``Completion`` (the tool loop's final one, with ``tools``), or
    the ``LlmError`` it failed with."""
    if stop is not None and stop.is_set():
        return LlmError(stop.reason, ErrorCode.ABORTED, provider=request.provider)
    try:
        one = replace(request, stop_signal=stop, **_request_fields(prompt))
        if tools:  # the tool loop, for this prompt (its steps go through the engine's retries)
            return await run_tools(
                engine, one, tools=tools, max_steps=max_steps, tool_timeout=tool_timeout
            )
        # The engine's retry loop is the only one: no second loop here to multiply it.
        return await engine.complete(one)
    except LlmError as err:
        return err
    except Exception as exc:  # a bug somewhere must not lose the other prompts
        return LlmError(
            f"{type(exc).__name__}: {exc}", ErrorCode.UNKNOWN, provider=request.provider
        )


def lookahead_of(engine: Engine, provider: str, concurrency: int) -> int:
    """How many prompts beyond ``concurrency`` to start: the ones the adapter prepares while
    every request slot is taken (:mod:`notebook_llm.wire.slots`). None unless the adapter takes
    its slot around the HTTP exchange only; otherwise the workers are the limit."""
    return min(concurrency, MAX_LOOKAHEAD) if _takes_slot(engine, provider) else 0


def _takes_slot(engine: Engine, provider: str) -> bool:
    try:
        return bool(engine.adapter_of(provider).takes_request_slot)
    except Exception:  # an unknown provider, a bad config: each prompt's slot reports it
        return False


@dataclass
class BatchSettings:
    """What one batch was asked to do, beside its prompts (``map``'s keywords, checked)."""

    engine: Engine
    request: Request
    concurrency: int
    report: BatchProgress | None
    stop_signal: StopSignal | None
    max_cost: float | None
    price: Price | None
    schema: ResponseSchema | None
    gate: RateGate
    store: BatchStore | None = None
    part: int = 0
    retry_failed: bool = False
    #: The cost cap (``max_cost``), and what counts the cost when there is none; the meter
    #: starts at what the journal's earlier runs spent.
    cap: CostCap | None = None
    meter: CostCap | None = None
    #: Whether the model's price is known (the view shows the cost then).
    priced: bool = False
    #: Tools each prompt's tool loop may call (``map(tools=)``), its most steps, and the
    #: seconds one call may run (``None``: the config's ``[defaults] tool_timeout``, else none).
    tools: Sequence[Tool] = ()
    max_steps: int = 8
    tool_timeout: float | None = None


@dataclass
class WorkItem:
    """One input row to answer: its position, its prompt, its key (with a store)."""

    pos: int
    prompt: Any
    key: str | None


class BatchRun:
    """One batch while it runs (see the module docstring). :meth:`run` it once."""

    def __init__(self, source: Source, settings: BatchSettings) -> None:
        self.source = source
        self.s = settings
        self.total: int | None = source.total
        self.done = 0
        self.failed = 0
        self.resumed = 0
        self.sent = 0
        if settings.meter is None and settings.store is not None:
            self.spent = settings.store.spent()  # a caller that gave no meter: the journal's
        self.started = time.monotonic()
        self.finished_at: float | None = None
        #: In memory: every result (no store), or the keys and unsent outcomes (a store and an
        #: input in memory, to read the journal back at the end).
        self.results: dict[int, BatchResult] = {}
        #: Why a row of an in-memory input with a store was not sent (stopped, the cap).
        self.unsent: dict[int, LlmError] = {}
        self.keys: list[str] = []
        self.recent: deque[tuple[int, BatchResult]] = deque(maxlen=RECENT_ROWS)
        self.recent_errors: deque[tuple[int, LlmError]] = deque(maxlen=RECENT_ROWS)
        self._children: set[StopSignal] = set()
        self._slots = _takes_slot(settings.engine, settings.request.provider)
        self._weight_base: float | None = None
        self._reported: tuple[int, int] | None = None
        self._commit_timer: asyncio.TimerHandle | None = None
        self._commit_error: LlmError | None = None

    # ------------------------------------------------------------------ for a view

    def status(self) -> BatchStatus:
        """Where the batch is (the progress view reads it)."""
        end = self.finished_at if self.finished_at is not None else time.monotonic()
        return BatchStatus(
            done=self.done,
            failed=self.failed,
            total=self.total,
            resumed=self.resumed,
            spent=self.spent if self._priced() else None,
            elapsed=end - self.started,
            rate_limits=str(self.s.gate.state()),
            stopped=self.s.stop_signal is not None and self.s.stop_signal.is_set(),
            finished=self.finished_at is not None,
            store=str(self.s.store.path) if self.s.store is not None else None,
        )

    def latest(self) -> list[tuple[int, BatchResult]]:
        """The latest rows finished in this run: ``(position, result)``, newest last."""
        return list(self.recent)

    def errors(self) -> list[tuple[int, LlmError]]:
        """The latest rows that failed in this run: ``(position, error)``, newest last."""
        return list(self.recent_errors)

    def stop(self, reason: str = "stopped") -> None:
        """End the batch: requests in flight are aborted, nothing more is sent, what is done is
        kept (in the journal with a store). Safe from any thread."""
        if self.s.stop_signal is not None:
            self.s.stop_signal.set(reason)

    # ------------------------------------------------------------------ running

    async def run(self) -> Any:
        """Run the batch to its end (or its stop, or the cap) and return what ``map`` returns."""
        s = self.s
        self._tick()
        self._attach_view()
        work = self._work()
        stop = s.stop_signal
        watcher = asyncio.ensure_future(self._watch_stop(stop)) if stop is not None else None
        lookahead = min(s.concurrency, MAX_LOOKAHEAD) if self._slots else 0
        workers = s.concurrency + lookahead
        if self.total is not None:
            workers = min(workers, max(self.total, 1))
        try:
            # One keep-alive connection pool for the whole batch (closed with it); at most
            # `concurrency` requests hold a slot (and a connection) at once, each through the
            # rate gate; every response tells the gate the provider's limits.
            with (
                watching_responses(s.gate.observe),
                request_slots(s.concurrency, gate=s.gate.passage),
            ):
                async with connection_pool(s.concurrency):
                    await asyncio.gather(*(self._worker(work, lookahead) for _ in range(workers)))
        finally:
            self.finished_at = time.monotonic()
            if self._commit_timer is not None:
                self._commit_timer.cancel()
            if s.store is not None:
                s.store.commit()
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            self._tick(final=True)
        if self._commit_error is not None:
            raise self._commit_error
        return self._output()

    def _commit(self) -> None:
        """The journal's group commit, on a timer (see :class:`BatchStore`)."""
        self._commit_timer = None
        store = self.s.store
        if store is None:
            return
        try:
            store.commit()
        except LlmError as err:  # the disk is full, the file went away: stop, say why
            self._commit_error = err
            self.stop(str(err))

    def _attach_view(self) -> None:
        """Hand this run to the progress view, when it takes one (an ``attach`` method)."""
        attach = getattr(self.s.report, "attach", None)
        if callable(attach):
            try:
                attach(self)
            except Exception:
                log.warning("batch: the progress view failed to attach", exc_info=True)

    def _work(self) -> Iterator[WorkItem]:
        """The rows to send, read from the source chunk by chunk; rows the journal has a
        result for are counted as done and skipped."""
        s = self.s
        store = s.store
        pos = 0
        for chunk in self.source.chunks:
            known: dict[int, tuple[str, str]] = {}
            if store is not None:
                known = store.known(s.part, pos, pos + len(chunk))
            skipped = 0
            for i, prompt in enumerate(chunk):
                p = pos + i
                key = None
                if store is not None:
                    key = row_key(prompt, store.definition_digest)
                    if not self.source.streamed:
                        self.keys.append(key)
                    prior = known.get(p)
                    if (
                        prior is not None
                        and prior[0] == key
                        and (prior[1] == "done" or not s.retry_failed)
                    ):
                        self.done += 1
                        self.resumed += 1
                        self.failed += prior[1] == "failed"
                        skipped += 1
                        continue
                yield WorkItem(p, prompt, key)
            pos += len(chunk)
            if skipped:
                self._tick()
        if self.total is None or self.source.streamed:
            self.total = pos

    async def _worker(self, work: Iterator[WorkItem], lookahead: int) -> None:
        s = self.s
        stop = s.stop_signal
        for item in work:
            stopped = stop is not None and stop.is_set()
            if lookahead and not stopped:  # prepared while the loop has nothing else to do
                await when_idle()
            if stop is not None and stop.is_set():
                self._unsent(
                    item, LlmError(stop.reason, ErrorCode.ABORTED, provider=s.request.provider)
                )
                if self.source.streamed:
                    return  # a streamed input is not read further
                continue
            cap, provider = s.cap, s.request.provider
            prompt_request = replace(s.request, **_request_fields(item.prompt))
            ticket = await cap.admit(prompt_request, self._stopping) if cap is not None else None
            if cap is not None and ticket is None:  # what is spent reached the cap
                self._unsent(item, cap.refusal(provider))
                if self.source.streamed:
                    return
                continue
            if cap is not None and ticket is not None and self._stopping():
                # stopped while waiting for the cap's turn: not sent
                await cap.settle(ticket, LlmError("not sent", ErrorCode.ABORTED))
                self._unsent(item, LlmError(stop.reason if stop else "stopped",
                                            ErrorCode.ABORTED, provider=provider))  # fmt: skip
                continue
            # Each request gets its own signal: a StopSignal stops one stream at a time.
            child = StopSignal() if stop is not None else None
            if child is not None:
                self._children.add(child)
            result: BatchResult = LlmError("not run", ErrorCode.ABORTED, provider=provider)
            try:
                result = await self._send(item, child)
            finally:
                if child is not None:
                    self._children.discard(child)
                if cap is not None and ticket is not None:
                    cost = await cap.settle(ticket, result)
                else:
                    cost = self.meter.add(result, prompt_request)
            self._finish(item, result, cost)

    async def _send(self, item: WorkItem, child: StopSignal | None) -> BatchResult:
        s = self.s
        self.sent += 1
        with request_weight(self._weight(item.prompt)):
            one = (s.engine, s.request, item.prompt, child, s.tools, s.max_steps, s.tool_timeout)
            if self._slots:  # the adapter passes the gate around each HTTP exchange
                return await complete_one(*one)
            async with s.gate.passage():
                return await complete_one(*one)

    def _weight(self, prompt: Any) -> float:
        """The request's tokens as a tokens-per-minute limit counts them: the input estimate
        and ``max_tokens`` (the schema and system part computed once)."""
        request = self.s.request
        if self._weight_base is None:
            self._weight_base = float(
                prompt_tokens("", request.system, request.schema)
                + (request.max_tokens or DEFAULT_OUTPUT_TOKENS)
            )
        if isinstance(prompt, str):
            return self._weight_base + estimate_tokens(prompt)
        return self._weight_base + prompt_tokens(prompt)

    def _finish(self, item: WorkItem, result: BatchResult, cost: float = 0.0) -> None:
        """A row's result (and what it cost): journaled (with a store) or kept, counted,
        shown."""
        s = self.s
        store = s.store
        aborted = isinstance(result, LlmError) and result.code == ErrorCode.ABORTED
        if store is not None and not aborted and item.key is not None:
            row = row_result(result, s.schema, cost)
            store.record(s.part, item.pos, item.key, prompt_text(item.prompt), row)
            if store.uncommitted and self._commit_timer is None:  # committed soon, in a group
                self._commit_timer = asyncio.get_running_loop().call_later(
                    store.commit_after, self._commit
                )
            failed = row.status == "failed"
        else:
            failed = isinstance(result, LlmError)
        if store is None:
            self.results[item.pos] = result
        elif aborted and isinstance(result, LlmError) and not self.source.streamed:
            self.unsent[item.pos] = result
        self.done += 1
        self.failed += failed
        self.recent.append((item.pos, result))
        if isinstance(result, LlmError):
            self.recent_errors.append((item.pos, result))
        self._tick()

    def _unsent(self, item: WorkItem, error: LlmError) -> None:
        if self.s.store is None:
            self.results[item.pos] = error
        elif not self.source.streamed:
            self.unsent[item.pos] = error
        self.done += 1
        self._tick()

    # ------------------------------------------------------------------ the cost

    @property
    def meter(self) -> CostCap:
        """What counts the cost: the cap, else an uncapped counter (see :class:`BatchSettings`)."""
        if self.s.meter is None:
            self.s.meter = self.s.cap or CostCap(
                math.inf, self.s.engine, allow_unpriced=True, tell_unpriced=False
            )
        return self.s.meter

    @property
    def spent(self) -> float:
        """US dollars spent, this run and the journal's earlier ones (the cap's count)."""
        return self.meter.spent

    @spent.setter
    def spent(self, value: float) -> None:
        self.meter.spent = value

    def _priced(self) -> bool:
        return self.s.priced or self.s.price is not None

    def _stopping(self) -> bool:
        stop = self.s.stop_signal
        return stop is not None and stop.is_set()

    # ------------------------------------------------------------------ stopping, showing

    async def _watch_stop(self, signal: StopSignal) -> None:
        await until_stopped(signal)
        for child in list(self._children):
            child.set(signal.reason)

    def _tick(self, final: bool = False) -> None:
        report = self.s.report
        if report is None:
            return
        # An unknown total (a streamed input not read to its end) is reported as 0; at the
        # end, the total is what was done (a streamed input stopped early has no more).
        total = self.total if self.total is not None else 0
        if final:
            total = self.done if self.source.streamed else max(total, self.done)
            if (self.done, total) == self._reported:
                return  # the last row's report said it all
        self._reported = (self.done, total)
        try:
            report(self.done, total, self.spent if self._priced() else None)
        except Exception:
            log.warning("batch: the progress callback failed", exc_info=True)

    # ------------------------------------------------------------------ the result

    def _output(self) -> Any:
        s = self.s
        store = s.store
        index = self.source.index
        if store is not None and self.source.streamed:
            return StoredResults(store.path, s.request.schema, s.part)
        total = self.total or 0
        if store is None:
            out = [
                self.results.get(i) or LlmError("not run", ErrorCode.ABORTED) for i in range(total)
            ]
            if self.source.pandas:
                return to_frame(out, index if index is not None else range(total), s.request.schema)
            return out
        rows: list[StoredRow | None] = [None] * total
        for row in store.rows(s.part, 0, total):
            if row.pos < total and row.key == self.keys[row.pos]:
                rows[row.pos] = row
        if not self.source.pandas:
            results = results_of(rows)
            for pos, error in self.unsent.items():  # not sent (stopped, the cap): why
                if rows[pos] is None:
                    results[pos] = error
            return results
        frame = frame_of(rows, index, s.request.schema)
        if self.unsent:
            column = frame.columns[-1]
            for pos, error in self.unsent.items():
                if rows[pos] is None:
                    frame.iloc[pos, frame.columns.get_loc(column)] = (
                        f"{error.code}: {error.message}"
                    )
        return frame
