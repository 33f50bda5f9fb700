"""Request slots: a batch's limit on requests in flight, taken by the request itself.

A batch (:func:`notebook_llm.api.batch.amap`) with ``concurrency=N`` promises at most N requests
at the provider at a time. N worker tasks would keep that promise, but a worker would prepare
its next request only after its previous answer was done: the Lua sandbox, the script's
``transform_request``, the body and the ``httpx.Request`` would sit between the end of one
response and the next request on the wire, in every round of the batch.

Instead, inside :func:`request_slots`, the batch starts a few prompts more than N, and an adapter
that supports it (``LlmAdapter.takes_request_slot``) holds a slot (:func:`request_slot`) only
around its HTTP exchange, after its request is built. A prompt waiting for a slot is ready to
send; when a response ends, :func:`yield_slot` lets that prompt go out before anything else
runs. The provider never has more than N requests at once (a test counts them at the server).

Preparing those extra prompts takes CPU time on the loop, which is also the time the batch's
responses are handled in. :func:`when_idle` lets a prompt start its preparation only when the
loop has nothing else ready, so it does not delay an answer that just arrived.

Outside a batch there are no slots and all three do nothing. Waiting for a slot is cancellable
(a Stop cancels it like any pending read).

A batch may also give the slots a *send gate* (``request_slots(count, gate=...)``): an async
context manager entered by every request after it took its slot and held until its exchange
ends. The batch's rate limits live there (:mod:`notebook_llm.api.rate_limits`), so that every
HTTP request is paced, the engine's retries included; this module knows nothing of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Iterator

#: Makes the send gate one request holds around its exchange (see the module docstring).
SendGate = Callable[[], contextlib.AbstractAsyncContextManager[None]]

#: At most this many turns of the loop are waited for it to be idle (:func:`when_idle`): a
#: loop that is never idle delays a prompt's preparation by that many turns, not forever.
IDLE_TURNS = 200


class _Slots:
    __slots__ = ("free", "gate", "idle_turn")

    def __init__(self, count: int, gate: SendGate | None = None) -> None:
        self.free = asyncio.Semaphore(count)
        self.gate = gate
        #: One prompt at a time waits for the loop to be idle, so that the waiters do not
        #: all see the same idle moment and prepare at once.
        self.idle_turn = asyncio.Lock()


_slots: contextvars.ContextVar[_Slots | None] = contextvars.ContextVar(
    "notebook_llm_request_slots", default=None
)


@contextlib.contextmanager
def request_slots(count: int, gate: SendGate | None = None) -> Iterator[None]:
    """Inside the block (and the tasks started in it), at most ``count`` requests hold a
    slot at once; each one also passes ``gate()`` while it holds its slot."""
    token = _slots.set(_Slots(count, gate))
    try:
        yield
    finally:
        _slots.reset(token)


@contextlib.asynccontextmanager
async def request_slot() -> AsyncIterator[None]:
    """Hold one of the enclosing :func:`request_slots` for the block (no-op outside one)."""
    slots = _slots.get()
    if slots is None:
        yield
        return
    async with slots.free:
        if slots.gate is None:
            yield
            return
        async with slots.gate():
            yield


async def yield_slot() -> None:
    """After this task released its slot: let the request that was waiting for it go out.

    Releasing wakes the next waiter, but its task runs only when this one pauses; without
    this, what this task does next (handling its answer, preparing its next prompt) would go
    first. No-op outside :func:`request_slots`.
    """
    if _slots.get() is not None:
        await asyncio.sleep(0)


async def when_idle() -> None:
    """Inside :func:`request_slots`: return when the loop has no other callback ready (at
    most :data:`IDLE_TURNS` turns later). No-op outside one.

    asyncio has neither idle callbacks nor task priorities, so this reads the loop's ready
    queue (``_ready``, a deque on every CPython loop since 3.4). On a loop without one (uvloop),
    it returns at once: the batch is as fast as before, not wrong.
    """
    slots = _slots.get()
    if slots is None:
        return
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    if ready is None:
        return
    async with slots.idle_turn:
        for _ in range(IDLE_TURNS):
            await asyncio.sleep(0)
            if len(ready) == 0:  # this task is running: nothing else is waiting to run
                return
