"""Request slots (``notebook_llm.wire.slots``): a batch prepares the next prompts while its
``concurrency`` requests are out, and never has more than that many at the server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Awaitable, Iterator
from typing import Any

import pytest
from waiting import GUARD, HeldServer, until, until_sync

from notebook_llm import Completion, Engine, ErrorCode, LlmError, StopSignal
from notebook_llm.adapters.lua.lua_codec import LuaCodec
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.api.batch import MAX_LOOKAHEAD, amap, map_prompts
from notebook_llm.wire.slots import (
    IDLE_TURNS,
    request_slot,
    request_slots,
    when_idle,
    yield_slot,
)


def server_engine(srv: MockServer) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
    return engine


def batch_on(srv: MockServer, prompts: int, concurrency: int, **kw: Any) -> Awaitable[list[Any]]:
    """``amap`` of prompts ``p0``, ``p1``... through the openai Lua adapter against ``srv``."""
    return amap(
        [f"p{i}" for i in range(prompts)],
        engine=server_engine(srv),
        provider="m",
        concurrency=concurrency,
        progress=False,
        **kw,
    )


@pytest.mark.parametrize("concurrency", [1, 3, 12])
async def test_the_server_never_has_more_than_concurrency_requests(concurrency: int) -> None:
    # The answers are held until every slot is taken (and a few more loop turns, in which a
    # request over the limit would go out), then flow freely.
    with HeldServer() as srv:
        texts = [f"prompt {i}" for i in range(2 * concurrency + 1)]
        batch = asyncio.ensure_future(
            amap(
                texts,
                engine=server_engine(srv),
                provider="m",
                concurrency=concurrency,
                progress=False,
            )
        )
        await until(lambda: len(srv.requests) >= concurrency, "every slot taken")
        for _ in range(50):
            await asyncio.sleep(0)
        srv.release()
        results = await asyncio.wait_for(batch, GUARD)
        assert [r.text for r in results if isinstance(r, Completion)] == texts
        assert srv.most_requests_at_once == concurrency


def test_the_sync_map_keeps_the_limit_too() -> None:
    with HeldServer() as srv:

        def release_when_full() -> None:
            until_sync(lambda: len(srv.requests) >= 3, "every slot taken")
            srv.release()

        threading.Thread(target=release_when_full, daemon=True).start()
        texts = [f"prompt {i}" for i in range(12)]
        results = map_prompts(
            texts, engine=server_engine(srv), provider="m", concurrency=3, progress=False
        )
        assert [r.text for r in results if isinstance(r, Completion)] == texts
        assert srv.most_requests_at_once == 3


async def test_the_next_prompts_are_prepared_while_the_slots_are_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prepared: list[str] = []
    original = LuaCodec.request

    def counting(self: LuaCodec) -> Any:
        prepared.append(self.options.messages[-1].text)
        return original(self)

    monkeypatch.setattr(LuaCodec, "request", counting)
    with HeldServer() as srv:
        batch = asyncio.ensure_future(batch_on(srv, 10, concurrency=2))
        await until(lambda: len(srv.requests) == 2 and len(prepared) >= 4, "two more prepared")
        for _ in range(50):  # loop turns in which a third request or a fifth prompt would go
            await asyncio.sleep(0)
        assert len(srv.requests) == 2
        assert prepared == ["p0", "p1", "p2", "p3"]  # two more, ready to go
        srv.release()
        results = await asyncio.wait_for(batch, GUARD)
        assert [r.text for r in results if isinstance(r, Completion)] == [
            f"p{i}" for i in range(10)
        ]


async def test_a_stop_aborts_the_prompts_waiting_for_a_slot_too() -> None:
    with HeldServer() as srv:  # never answers: the stop alone ends the batch
        stop = StopSignal()
        batch = asyncio.ensure_future(batch_on(srv, 8, concurrency=2, stop_signal=stop))
        await until(lambda: len(srv.requests) == 2, "two requests at the server")
        stop.set()
        results = await asyncio.wait_for(batch, GUARD)  # nobody waited for an answer
        assert all(isinstance(r, LlmError) and r.code == ErrorCode.ABORTED for r in results)
        assert len(srv.requests) == 2  # the prepared ones were never sent


async def test_after_a_stop_the_remaining_prompts_do_not_wait_for_an_idle_loop() -> None:
    # Found in review: each remaining prompt waited its turn for an idle loop (200 turns when
    # another task keeps the loop busy) before it saw the stop: 5 s for 5,000 prompts.
    done = asyncio.Event()
    turns = 0

    async def busy() -> None:  # keeps the loop from ever being idle
        nonlocal turns
        while not done.is_set():
            turns += 1
            await asyncio.sleep(0)

    prompts, concurrency = 3000, 2
    spinner = asyncio.ensure_future(busy())
    stop = StopSignal()
    try:
        with HeldServer() as srv:
            batch = asyncio.ensure_future(
                batch_on(srv, prompts, concurrency=concurrency, stop_signal=stop)
            )
            await until(lambda: len(srv.requests) == concurrency, "two requests at the server")
            stopped_at = turns
            stop.set()
            results = await asyncio.wait_for(batch, GUARD)
            after_stop = turns - stopped_at
    finally:
        done.set()
        await spinner
    assert all(isinstance(r, LlmError) and r.code == ErrorCode.ABORTED for r in results)
    # Counted in loop turns, not seconds. Waiting for an idle loop costs each remaining prompt
    # IDLE_TURNS turns of the spinner: about 600,000 here. A right stop costs one idle wait
    # (IDLE_TURNS) plus the turns the spinner makes while the two aborted connections close,
    # which grow with the machine's load (200-400 on a quiet machine, 2,315 once under load).
    # The bar sits ten times below the fault and does not depend on that load.
    remaining = prompts - concurrency
    assert after_stop < remaining * IDLE_TURNS // 10, after_stop
    assert len(srv.requests) <= concurrency


async def test_a_failed_request_gives_its_slot_back() -> None:
    with MockServer() as srv:
        srv.inject("server_error", count=3)
        results = await batch_on(srv, 6, concurrency=1)
        codes = [r.code if isinstance(r, LlmError) else "ok" for r in results]
        assert codes.count(ErrorCode.SERVER) == 3
        assert codes.count("ok") == 3


async def test_adapters_without_slots_run_concurrency_at_a_time() -> None:
    from tests.test_batch import Picky

    engine = Engine(config_file=False, env_file=False, retries=0)
    adapter = Picky(delay=0.02)
    engine.add_provider("p", adapter=adapter, model="echo")
    assert not adapter.takes_request_slot
    await amap([f"p{i}" for i in range(12)], engine=engine, provider="p", concurrency=3)
    assert adapter.peak == 3


async def test_the_lookahead_is_bounded() -> None:
    with HeldServer() as srv:
        batch = asyncio.ensure_future(batch_on(srv, 60, concurrency=20))

        def workers() -> int:
            return len([t for t in asyncio.all_tasks() if "worker" in repr(t.get_coro())])

        await until(
            lambda: len(srv.requests) == 20 and workers() >= 20 + MAX_LOOKAHEAD, "the lookahead"
        )
        for _ in range(50):  # loop turns in which one more worker would start
            await asyncio.sleep(0)
        assert len(srv.requests) == 20
        assert workers() == 20 + MAX_LOOKAHEAD
        srv.release()
        await asyncio.wait_for(batch, GUARD)


# ------------------------------------------------------------------ the primitives


async def test_outside_a_batch_the_slots_do_nothing() -> None:
    async with request_slot():
        pass
    await yield_slot()
    busy = asyncio.ensure_future(asyncio.sleep(0))
    await when_idle()  # no waiting for the other task
    assert not busy.done()
    await busy


async def test_a_released_slot_goes_to_its_waiter_first() -> None:
    order: list[str] = []
    with request_slots(1):
        holding = asyncio.Event()

        async def first() -> None:
            async with request_slot():
                holding.set()
                await asyncio.sleep(0.01)
            await yield_slot()
            order.append("first goes on")

        async def second() -> None:
            await holding.wait()
            async with request_slot():
                order.append("second sends")

        await asyncio.gather(first(), second())
    assert order == ["second sends", "first goes on"]


async def test_when_idle_waits_for_the_other_ready_tasks() -> None:
    order: list[str] = []

    async def busy() -> None:
        for _ in range(20):
            await asyncio.sleep(0)
        order.append("busy done")

    async def idle() -> None:
        await when_idle()
        order.append("idle")

    with request_slots(1):
        await asyncio.gather(idle(), busy())
    assert order == ["busy done", "idle"]


async def test_when_idle_gives_up_on_a_loop_that_is_never_idle() -> None:
    stop = asyncio.Event()
    turns = 0

    async def spin() -> None:  # always ready to run
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    spinner = asyncio.ensure_future(spin())
    with request_slots(1):
        async with asyncio.timeout(5):
            await when_idle()  # returns after IDLE_TURNS turns, not never
    stop.set()
    await spinner
    assert IDLE_TURNS <= turns <= IDLE_TURNS + 3


# ------------------------------------------------------------------ the end of an answer in a batch


@pytest.mark.parametrize("fault", ["disconnect", "no_end", "malformed"])
async def test_a_batch_keeps_what_arrived_as_a_single_stream_does(fault: str) -> None:
    # The last read waits for the end of the exchange: a body cut short, or one that ends
    # without its end marker, still gives what arrived, as outside a batch.
    prompt = "one two three four five six seven"
    with MockServer() as srv:
        engine = server_engine(srv)
        srv.inject(fault, after=3)
        with pytest.raises(LlmError) as alone:
            await engine.complete("m", "echo", prompt=prompt)
        srv.inject(fault, after=3)
        [batched] = await amap([prompt], engine=engine, provider="m", progress=False)
    assert isinstance(batched, LlmError)
    kept = alone.value.details["completion"].text
    assert kept  # part or all of the answer arrived
    assert prompt.startswith(kept)
    assert batched.code == alone.value.code
    assert batched.details["completion"].text == kept


@contextlib.contextmanager
def raw_server(answer: bytes, hold: float = 0.0) -> Iterator[str]:
    """A base URL whose server answers every request with ``answer`` (after its head and
    Content-Length body are read), then keeps the connection ``hold`` seconds and closes it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    def one(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(answer)
            time.sleep(hold)

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        sock.close()


def sse_answer(body: bytes, end: bool) -> bytes:
    """A chunked SSE answer holding ``body`` in one chunk; ``end``: with the last chunk."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    return head + b"%x\r\n%s\r\n" % (len(body), body) + (b"0\r\n\r\n" if end else b"")


HELLO = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"hello"}}]}\n\n'
STOP = b'data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'


async def alone_and_batched(url: str) -> tuple[Any, Any]:
    """The same prompt as a single stream and in a batch (each under the hang guard)."""
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("m", adapter="openai", base_url=url, model="x")
    try:
        alone: Any = await asyncio.wait_for(engine.complete("m", "x", prompt="hi"), GUARD)
    except LlmError as err:
        alone = err
    [batched] = await asyncio.wait_for(
        amap(["hi"], engine=engine, provider="m", progress=False), GUARD
    )
    return alone, batched


async def test_an_answer_whose_body_stays_open_after_its_end_is_not_held_in_a_batch() -> None:
    # Only a read that completed the body waits for the end of the exchange: a server that
    # keeps the stream open after [DONE] costs a batch what it costs a single stream.
    # The server holds the connection for an hour: only the end of the answer can end either.
    answer = sse_answer(HELLO + STOP + b"data: [DONE]\n\n", end=False)
    with raw_server(answer, hold=3600) as url:
        alone, batched = await alone_and_batched(url)
    assert isinstance(batched, Completion)
    assert batched.text == alone.text == "hello"


async def test_an_error_in_the_last_read_is_reported_in_a_batch_as_alone() -> None:
    # The last read: a finish, a malformed payload, then an unterminated [DONE].
    body = HELLO + STOP + b'data: {"id": broken\n\ndata: [DONE]'
    with raw_server(sse_answer(body, end=True)) as url:
        alone, batched = await alone_and_batched(url)
    assert isinstance(alone, LlmError)
    assert isinstance(batched, LlmError)
    assert batched.code == alone.code == ErrorCode.MALFORMED_RESPONSE
    assert batched.details["completion"].text == alone.details["completion"].text == "hello"
