"""One generation's stream: the five rules and the error contract around an adapter, and the
single retry policy of the package.

Two layers, one job each:

* :func:`guarded` runs ONE request: it iterates an adapter's stream, checks every event against
  the five stream rules (:class:`~notebook_llm.core.stream_rules.StreamValidator`), turns adapter
  exceptions and rule violations into ``finish{kind:'error'}`` and a stop into
  ``finish{kind:'aborted'}``; the consumer never sees a bare exception from adapter code.
* :func:`attempts` is THE retry loop (there is no other in the package: ``map``, ``Chat`` and
  the magics all go through an engine): at most ``1 + retries`` guarded requests, waiting as
  :class:`RetryPolicy` says (``wire.http_errors.backoff_delay``, which honours a server's
  ``Retry-After``). The HTTP exchange (:mod:`notebook_llm.wire.exchange`) does not retry: it
  raises a failure that came before any event, with its code (``LlmError.retryable``) and the
  server's ``retry_after``, and this loop decides. The loop is here, not in the exchange,
  because it must cover every adapter (one that sends no HTTP too) and because only the caller
  knows whether output was shown (``complete`` holds it back and may retry after it).

The :class:`~notebook_llm.engine.engine.Engine` owns the settings (``Engine(retries=, retry_base=,
retry_cap=)``) and prepares the request; this module knows no routes, providers or keys. Its
log lines keep the logger name ``notebook_llm.engine.engine`` that users already filter on.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, cast

from ..adapters.base import LlmAdapter
from ..core.cancel import StopSignal, sleep_unless_stopped
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import Event, Finish, FinishReason, GenerateOptions
from ..core.stream_rules import StreamValidator
from ..wire.http_errors import backoff_delay

#: Retries were always logged as ``notebook_llm.engine.engine``; the name is kept for users' filters.
log = logging.getLogger("notebook_llm.engine.engine")


@dataclass
class RetryPolicy:
    """How many extra requests a retryable error gets, and how long to wait before each."""

    #: Extra attempts after the first (``0``: no retry).
    retries: int = 2
    #: The first backoff step and the ceiling of our own backoff, in seconds.
    base: float = 0.5
    cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry number ``attempt + 1`` (jittered; a ``Retry-After`` wins)."""
        return backoff_delay(
            attempt, retry_after=retry_after, base=self.base, cap=self.cap, rng=self.rng
        )


async def attempts(
    prepare: Callable[[], Awaitable[tuple[LlmAdapter, GenerateOptions]]],
    stop_signal: StopSignal | None,
    policy: RetryPolicy,
    whole: bool,
) -> AsyncGenerator[Event, None]:
    """THE retry loop (the only one in the package): at most ``1 + policy.retries`` requests.

    ``prepare()`` gives the adapter and the options (it raises configuration errors).
    ``whole=False`` (streaming) retries only before the first event reached the consumer;
    ``whole=True`` (``complete``) holds each attempt's events back, so a retryable error
    after some output is retried too: nothing had been shown."""
    adapter, options = await prepare()
    limit = policy.retries
    attempt = 0
    while True:
        pending_error: LlmError | None = None
        held: list[Event] = []
        emitted = False
        async with aclosing(guarded(adapter, options, stop_signal)) as events:
            async for event in events:
                if (
                    isinstance(event, Finish)
                    and event.reason.kind == "error"
                    and (whole or not emitted)
                ):
                    err = event.reason.failure
                    if err is not None and err.retryable and attempt < limit:
                        pending_error = err
                        break
                if whole:
                    held.append(event)
                    continue
                emitted = True
                yield event
        if pending_error is None:
            for event in held:
                yield event
            return
        delay = policy.delay(attempt, pending_error.retry_after)
        attempt += 1
        log.info(
            "retrying %s after %s (attempt %d of %d, waiting %.2fs)",
            options.provider,
            pending_error.code,
            attempt,
            limit,
            delay,
        )
        if not await sleep_unless_stopped(delay, stop_signal):
            reason = stop_signal.reason if stop_signal is not None else "stopped"
            yield Finish(FinishReason("aborted", LlmError(reason, ErrorCode.ABORTED)))
            return


async def guarded(
    adapter: LlmAdapter, options: GenerateOptions, stop: StopSignal | None
) -> AsyncGenerator[Event, None]:
    """Iterate one adapter stream, enforcing the five rules and the error contract.

    Adapter exceptions and rule violations become ``finish{kind:'error'}``; ``stop.set()``
    cancels the pending read, the adapter's stream is closed (closing its HTTP response) and a
    ``finish{kind:'aborted'}`` ends the stream. Cancellation from outside is propagated after
    the adapter stream is closed.
    """
    validator = StreamValidator()
    task = asyncio.current_task()
    name = getattr(adapter, "name", type(adapter).__name__)
    failure: LlmError | None = None
    batches = batch_source(adapter)
    try:
        agen = batches(options) if batches is not None else adapter.stream(options)
    except Exception as exc:  # a stream() that is not an async generator and raises at once
        yield Finish.error(adapter_failure(exc, name, options.provider))
        return
    try:
        while failure is None:
            if stop is not None:
                if stop.is_set():
                    failure = LlmError(stop.reason, ErrorCode.ABORTED, provider=options.provider)
                    break
                stop._attach(task)
            try:
                item: Any = await agen.__anext__()
            except StopAsyncIteration:
                failure = LlmError(
                    f"adapter {name!r} ended its stream without a finish event (stream rule 5)",
                    ErrorCode.INVARIANT,
                    provider=options.provider,
                    adapter=name,
                )
                break
            except asyncio.CancelledError:
                if stop is not None and stop.is_set() and task is not None:
                    task.uncancel()
                    failure = LlmError(stop.reason, ErrorCode.ABORTED, provider=options.provider)
                    break
                raise
            except LlmError as err:
                if err.provider is None:
                    err.provider = options.provider
                failure = err
                break
            except Exception as exc:  # an adapter bug must not crash the consumer
                failure = adapter_failure(exc, name, options.provider)
                break
            finally:
                if stop is not None:
                    stop._detach(task)
            # A batch adapter hands over the events of one network read at once; they are
            # checked and yielded one by one here, with the stop check between them that a
            # one-event-per-read adapter gets before each read.
            events: Sequence[Event] = item if batches is not None else (item,)
            for event in events:
                if stop is not None and stop.is_set():
                    failure = LlmError(stop.reason, ErrorCode.ABORTED, provider=options.provider)
                    break
                try:
                    validator.check(event)
                except LlmError as err:
                    err.provider = options.provider
                    err.adapter = name
                    failure = err
                    break
                yield event
                if validator.finished:
                    return
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception as exc:  # a failing cleanup must not replace the stream's outcome
                log.warning("adapter %r failed while closing its stream: %r", name, exc)
    assert failure is not None
    yield Finish(FinishReason("aborted" if failure.code == ErrorCode.ABORTED else "error", failure))


def batch_source(adapter: LlmAdapter) -> Callable[[GenerateOptions], AsyncIterator[Any]] | None:
    """The adapter's ``stream_batches`` (lists of events, one per network read: see
    :meth:`notebook_llm.adapters.codec_adapter.CodecAdapter.stream_batches`) when its ``stream``
    is the one that flattens them; ``None`` for every other adapter, whose ``stream`` is used as it is (a
    subclass that overrides ``stream`` keeps its own)."""
    batches = getattr(adapter, "stream_batches", None)
    if batches is None or not callable(batches):
        return None
    owner = next((c for c in type(adapter).__mro__ if "stream_batches" in vars(c)), None)
    if owner is None or getattr(type(adapter), "stream", None) is not vars(owner).get("stream"):
        return None
    return cast(Callable[[GenerateOptions], AsyncIterator[Any]], batches)


def adapter_failure(exc: BaseException, name: str, provider: str) -> LlmError:
    if isinstance(exc, LlmError):
        return exc
    return LlmError(
        f"adapter {name!r} raised {type(exc).__name__}: {exc}",
        ErrorCode.ADAPTER_ERROR,
        provider=provider,
        adapter=name,
    )
