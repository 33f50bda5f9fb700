"""Many prompts at once: :func:`amap` (async) and :func:`map_prompts` (sync, Jupyter-safe).

>>> results = map_prompts(["a", "b"], provider="mock", model="echo")  # doctest: +SKIP
>>> [r.text for r in results]  # doctest: +SKIP
['a', 'b']

Results come back in input order; a prompt that fails for good holds its ``LlmError`` in its
slot instead of a ``Completion``, so one failure never loses the others.

Retries: one policy, the engine's (``Engine(retries=, retry_base=, retry_cap=)``; the shared
session engine's by default). A prompt that fails with a retryable code (RATE_LIMIT, SERVER,
TIMEOUT, TRANSPORT, EMPTY_RESPONSE) is sent at most ``1 + retries`` times in all, waiting
``backoff_delay`` between tries (exponential with full jitter, never shorter than the provider's
``Retry-After``). ``map(..., retries=N)`` sets that count for this batch instead of the
engine's; it does not add a second loop on top.

Nothing here imports notebook code: by default a batch reports its progress to the function that
the package's root installs (:func:`notebook_llm.api.observers.batch_progress`: a progress bar
where a person watches the notebook, :mod:`notebook_llm.notebook.progress`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Unpack

from ..core.background_loop import run_sync
from ..core.cancel import StopSignal, until_stopped
from ..core.completion import Completion
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import Message
from ..engine.engine import Engine
from ..engine.pricing import Price, cost, price_of
from ..engine.request import OPTION_NAMES, Request, TurnOptions, refuse_unknown_keywords, request_of
from ..wire.slots import request_slots, when_idle
from ..wire.transport import connection_pool
from .dataframes import prompts_of, to_frame
from .estimate import cap_value, check_cap, estimate_request, money
from .observers import BatchProgress, batch_progress

__all__ = ["BatchResult", "MapOptions", "ProgressFn", "amap", "map_prompts"]

log = logging.getLogger("notebook_llm.api.batch")

#: ``progress(done, total)``, called once with ``done=0`` and after each prompt finishes.
ProgressFn = Callable[[int, int], None]
#: One slot of the result list.
BatchResult = Completion | LlmError


def _engine(engine: Engine | None) -> Engine:
    """``engine``, else the session's (the one the magics and ``Chat`` use, with their keys)."""
    from ..engine.session import default_engine

    return engine if engine is not None else default_engine()


def _request(prompt: Any) -> dict[str, Any]:
    if isinstance(prompt, str):
        return {"prompt": prompt}
    if isinstance(prompt, Message):
        return {"messages": [prompt]}
    if isinstance(prompt, Sequence) and all(isinstance(m, Message) for m in prompt):
        return {"messages": list(prompt)}
    return {"prompt": str(prompt)}  # numbers, numpy strings and the like from a DataFrame


def _progress_fn(progress: ProgressFn | bool | None, total: int) -> BatchProgress | None:
    """The batch's report: the caller's ``progress(done, total)`` (an object with a ``spent``
    attribute gets the cost so far there first, when the price is known), none (``False``), or
    by default the progress bar of whoever shows things (the notebook layer, via the root)."""
    if progress is None or progress is True:
        return batch_progress(total)
    if progress is False:
        return None
    report = progress

    def call(done: int, total: int, spent: float | None) -> None:
        if spent is not None and hasattr(report, "spent"):
            report.spent = spent  # a callable object with a ``spent`` attribute is told it
        report(done, total)

    return call


async def _one(
    engine: Engine, request: Request, prompt: Any, stop: StopSignal | None
) -> BatchResult:
    if stop is not None and stop.is_set():
        return LlmError(stop.reason, ErrorCode.ABORTED, provider=request.provider)
    try:
        # The engine's retry loop is the only one: no second loop here to multiply it.
        return await engine.complete(replace(request, stop_signal=stop, **_request(prompt)))
    except LlmError as err:
        return err
    except Exception as exc:  # a bug somewhere must not lose the other prompts
        return LlmError(
            f"{type(exc).__name__}: {exc}", ErrorCode.UNKNOWN, provider=request.provider
        )


#: At most this many prompts of a batch wait ready to send (``_lookahead``).
MAX_LOOKAHEAD = 8


def _lookahead(engine: Engine, provider: str, concurrency: int) -> int:
    """How many prompts beyond ``concurrency`` to start: the ones the adapter prepares while
    every request slot is taken (:mod:`notebook_llm.wire.slots`). None unless the adapter takes
    its slot around the HTTP exchange only; otherwise the workers are the limit."""
    try:
        adapter = engine.adapter_of(provider)
    except Exception:  # an unknown provider, a bad config: each prompt's slot reports it
        return 0
    return min(concurrency, MAX_LOOKAHEAD) if adapter.takes_request_slot else 0


class MapOptions(TurnOptions, total=False):
    """The keywords of :func:`amap` and :func:`map_prompts`: the batch's own (below, and
    ``stop_signal``, which stops the whole batch) and those of every prompt's request (the
    fields of :class:`~notebook_llm.engine.request.Request`, but the prompt and messages: the
    prompts are those)."""

    engine: Engine | None
    provider: str
    model: str | None
    concurrency: int
    progress: ProgressFn | bool | None
    template: str | None
    max_cost: float | None
    batch_api: Any
    store: str | None
    retry_failed: bool


#: Every keyword of :func:`amap` (the close ones are named for a typo).
_MAP_OPTIONS = (
    "provider",
    "model",
    "engine",
    "concurrency",
    "progress",
    "template",
    "max_cost",
    "batch_api",
    "store",
    "retry_failed",
    *(name for name in OPTION_NAMES if name not in ("prompt", "messages")),
)


async def amap(prompts: Iterable[Any], **options: Unpack[MapOptions]) -> Any:
    """Complete every prompt, at most ``concurrency`` at a time; results in input order.

    ``prompts``: any iterable (a list, a generator, a pandas Series: its values) of strings,
    ``Message`` s or message lists. ``provider`` (``"mock"`` by default) and ``model``: where
    they go; the request options (``system``, ``temperature``, ``max_tokens``, ``retries``...)
    go to every prompt's request, checked once before anything is sent (see
    :meth:`Engine.complete`). ``concurrency`` (8 by default): the most requests at the provider
    at once; with an adapter that supports it (the Lua adapters), up to :data:`MAX_LOOKAHEAD`
    more prompts are prepared meanwhile, so each goes out as soon as a slot frees
    (:mod:`notebook_llm.wire.slots`). ``progress``: a ``(done, total)`` callback, ``False``
    for none, ``None`` for a progress bar when running in a Jupyter kernel. ``stop_signal``:
    once set, running requests are aborted and the remaining prompts are not sent; their slots
    hold ``LlmError(ABORTED)``.

    A pandas DataFrame (with ``template=``, filled from each row's columns) or Series gives a
    DataFrame back, with the input's index: the schema's fields (``schema=``) or an ``answer``
    column, and an ``error`` column (:mod:`notebook_llm.api.dataframes`). ``template=`` also fills a
    list's items. ``schema=``, ``schema_retries=`` and ``images=`` go to every request.
    ``max_cost``: a cap in US dollars; the batch is refused (``BUDGET_EXCEEDED``, nothing sent)
    when its estimate (:func:`notebook_llm.estimate_cost`) is over it, and once the cost spent
    reaches it the remaining prompts are not sent (their slots hold ``BUDGET_EXCEEDED``).

    ``batch_api=True`` sends the prompts through the provider's own batch API (OpenAI's Batch
    API, Anthropic's Message Batches) at its batch price, kept in ``store=`` (a SQLite file) so
    that the same call, run again later, collects them; ``retry_failed=True`` sends the rows
    that failed again (:mod:`notebook_llm.api.batch_api`, ``docs/batch.md``).
    """
    engine, provider = options.pop("engine", None), options.pop("provider", "mock")
    model, concurrency = options.pop("model", None), options.pop("concurrency", 8)
    progress, stop_signal = options.pop("progress", None), options.pop("stop_signal", None)
    template, max_cost = options.pop("template", None), options.pop("max_cost", None)
    batch_api, store = options.pop("batch_api", None), options.pop("store", None)
    retry_failed = options.pop("retry_failed", False)
    if concurrency < 1:
        raise LlmError(
            f"concurrency must be at least 1, not {concurrency}", ErrorCode.INVALID_OPTIONS
        )
    for key in ("prompt", "messages"):
        if key in options:
            raise LlmError(
                f"{key}= cannot be used with map; pass the prompts", ErrorCode.INVALID_OPTIONS
            )
    if max_cost is not None:
        max_cost = cap_value(max_cost)
    refuse_unknown_keywords(options, "map", _MAP_OPTIONS)  # a typo of a batch keyword is named too
    # Every prompt's request: checked once, here, before anything is sent.
    request = request_of(provider, model, options, "map")
    eng = _engine(engine)
    items, index = prompts_of(prompts, template)
    total = len(items)
    if batch_api is not None and batch_api is not False:
        out = await _through_batch_api(
            eng, request, items, batch_api, store, retry_failed, max_cost, progress, stop_signal
        )
        return to_frame(out, index, request.schema) if index is not None else out
    if max_cost is not None:
        check_cap(estimate_request(request, eng, items), max_cost, provider)  # nothing sent
    results: list[BatchResult | None] = [None] * total
    report = _progress_fn(progress, total)
    done = 0
    spent = 0.0
    price = price_of(eng, provider, model)
    children: set[StopSignal] = set()

    def tick() -> None:
        if report is None:
            return
        try:
            report(done, total, spent if price is not None else None)
        except Exception:
            log.warning("batch: the progress callback failed", exc_info=True)

    tick()
    next_index = 0
    # With a cap: requests in flight, requests answered, and a condition to wait on (admit).
    in_flight = 0
    answered = 0
    gate = asyncio.Condition()

    async def admit() -> bool:
        """Whether one more request may go out under ``max_cost`` (``False``: the spent cost
        reached it). The estimate may be far below what answers really cost (no max_tokens),
        so the cap cannot trust it for the requests in flight: the first request goes alone,
        and then one more goes out only while the spent cost plus the in-flight requests at
        the cost seen so far per answer stays under the cap. Sequential batches behave as
        before (send while spent < cap); concurrent ones overshoot by at most about one
        answer instead of ``concurrency`` answers."""
        nonlocal in_flight
        assert max_cost is not None
        async with gate:
            while True:
                if spent >= max_cost and spent > 0:  # a cap of 0 lets free requests through
                    return False
                if in_flight == 0 or (stop_signal is not None and stop_signal.is_set()):
                    break
                if answered and spent + in_flight * (spent / answered) < max_cost:
                    break
                await gate.wait()
            in_flight += 1
            return True

    async def release() -> None:
        nonlocal in_flight, answered
        async with gate:
            in_flight -= 1
            answered += 1
            gate.notify_all()

    async def worker() -> None:
        nonlocal next_index, done, spent
        while next_index < total:
            i = next_index
            next_index += 1
            stopped = stop_signal is not None and stop_signal.is_set()
            if lookahead and not stopped:  # prepared while the loop has nothing else to do
                await when_idle()
            if stop_signal is not None and stop_signal.is_set():
                results[i] = LlmError(stop_signal.reason, ErrorCode.ABORTED, provider=provider)
                done += 1
                tick()
                continue
            if max_cost is not None and not await admit():
                results[i] = LlmError(
                    f"not sent: the cost spent ({money(spent)}) reached max_cost={money(max_cost)}",
                    ErrorCode.BUDGET_EXCEEDED,
                    provider=provider,
                )
                done += 1
                tick()
                continue
            if max_cost is not None and stop_signal is not None and stop_signal.is_set():
                await release()  # stopped while waiting for the cap's turn: not sent
                results[i] = LlmError(stop_signal.reason, ErrorCode.ABORTED, provider=provider)
                done += 1
                tick()
                continue
            # Each request gets its own signal: a StopSignal stops one stream at a time.
            child = StopSignal() if stop_signal is not None else None
            if child is not None:
                children.add(child)
            try:
                results[i] = result = await _one(eng, request, items[i], child)
                if price is not None:
                    spent += _cost_of(result, price)
            finally:
                if child is not None:
                    children.discard(child)
                if max_cost is not None:
                    await release()
            done += 1
            tick()

    async def watch_stop(signal: StopSignal) -> None:
        await until_stopped(signal)
        for child in list(children):
            child.set(signal.reason)

    watcher = asyncio.ensure_future(watch_stop(stop_signal)) if stop_signal is not None else None
    lookahead = _lookahead(eng, provider, concurrency)
    try:
        # One keep-alive connection pool for the whole batch (closed with it); at most
        # `concurrency` requests hold a slot (and a connection) at once.
        with request_slots(concurrency):
            async with connection_pool(concurrency):
                await asyncio.gather(
                    *(worker() for _ in range(min(concurrency + lookahead, total)))
                )
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    out = [r if r is not None else LlmError("not run", ErrorCode.ABORTED) for r in results]
    if index is not None:
        return to_frame(out, index, request.schema)
    return out


async def _through_batch_api(
    engine: Engine,
    request: Request,
    items: list[Any],
    batch_api: Any,
    store: str | None,
    retry_failed: bool,
    max_cost: float | None,
    progress: ProgressFn | bool | None,
    stop: StopSignal | None,
) -> list[BatchResult]:
    """``amap`` with ``batch_api=``: the rows through the provider's batch API
    (:func:`notebook_llm.api.batch_api.run_batch_api`)."""
    from .batch_api import BATCH_PRICE_FACTOR, run_batch_api

    if store is None:
        raise LlmError(
            "batch_api needs store='some.sqlite': a batch can take up to 24 hours, and the "
            "store is where the same map call finds it again to collect it",
            ErrorCode.INVALID_OPTIONS,
            provider=request.provider,
        )
    price = price_of(engine, request.provider, request.model)
    if max_cost is not None:
        estimate = estimate_request(request, engine, items)
        if estimate.price is not None:  # the batch price
            half = (estimate.price[0] * BATCH_PRICE_FACTOR, estimate.price[1] * BATCH_PRICE_FACTOR)
            estimate = replace(estimate, price=half)
        check_cap(estimate, max_cost, request.provider)
    return await run_batch_api(
        engine,
        request,
        items,
        batch_api=batch_api,
        store=store,
        retry_failed=retry_failed,
        report=_progress_fn(progress, len(items)),
        price=price,
        stop=stop,
    )


def _cost_of(result: BatchResult, price: Price) -> float:
    """What one slot's request cost (a failed one's partial completion counts too)."""
    completion = result if isinstance(result, Completion) else result.details.get("completion")
    usage = getattr(completion, "usage", None)
    return cost(usage, price) if usage is not None else 0.0


def map_prompts(prompts: Iterable[Any], **options: Unpack[MapOptions]) -> Any:
    """:func:`amap` from synchronous code, also inside a running loop (Jupyter): a list of
    results, or a DataFrame for a DataFrame or Series (see :func:`amap`).

    An interrupt (Ctrl-C, the kernel's stop button) aborts the requests in flight and skips the
    rest; the results gathered so far are still returned (the others hold ``ABORTED`` errors).
    ``stop_signal``: the caller's own signal (e.g. set from a progress callback); an interrupt
    sets it too.
    """
    stop = options["stop_signal"] = options.get("stop_signal") or StopSignal()
    return run_sync(amap(prompts, **options), on_interrupt=stop.set)
