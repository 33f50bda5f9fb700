"""Batch prompting: order, retries with Retry-After, per-prompt failures, progress."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from waiting import GUARD, until

from notebook_llm import (
    Completion,
    Engine,
    ErrorCode,
    Event,
    GenerateOptions,
    LlmAdapter,
    LlmError,
    Message,
    StopSignal,
)
from notebook_llm.adapters.mock.direct_adapter import MockAdapter
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.api.batch import amap, map_prompts


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as srv:
        yield srv


def server_engine(srv: MockServer, retries: int = 0) -> Engine:
    """An engine whose provider ``m`` talks to ``srv``; the engine's own retries are off so
    the batch retries are what is tested."""
    engine = Engine(config_file=False, env_file=False, retries=retries, retry_base=0.01)
    engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
    return engine


class Picky(LlmAdapter):
    """Echo, except: prompts starting with ``"deny"`` fail with AUTH, ``"flaky"`` with SERVER
    every time; counts attempts and the largest number of requests in flight."""

    name = "picky"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.attempts: dict[str, int] = {}
        self.in_flight = 0
        self.peak = 0
        self.inner = MockAdapter()

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        text = options.messages[-1].text
        self.attempts[text] = self.attempts.get(text, 0) + 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            if text.startswith("deny"):
                raise LlmError("no access", ErrorCode.AUTH, status=401)
            if text.startswith("flaky"):
                raise LlmError("overloaded", ErrorCode.SERVER, status=503, retry_after=0.0)
            async for event in self.inner.stream(options):
                yield event
        finally:
            self.in_flight -= 1


@pytest.fixture
def picky() -> tuple[Engine, Picky]:
    engine = Engine(config_file=False, env_file=False, retries=0, retry_base=0.001)
    adapter = Picky(delay=0.01)
    engine.add_provider("p", adapter=adapter, model="echo")
    return engine, adapter


async def test_order_kept_and_progress_reported(picky: tuple[Engine, Picky]) -> None:
    engine, adapter = picky
    prompts = [f"prompt {i}" for i in range(25)]
    seen: list[tuple[int, int]] = []
    results = await amap(
        prompts,
        engine=engine,
        provider="p",
        concurrency=4,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert [r.text for r in results if isinstance(r, Completion)] == prompts
    assert adapter.peak == 4
    assert seen == [(i, 25) for i in range(26)]


async def test_failures_hold_their_slot(picky: tuple[Engine, Picky]) -> None:
    engine, adapter = picky
    results = await amap(
        ["ok 1", "deny me", "flaky one", "ok 2"], engine=engine, provider="p", retries=2
    )
    assert isinstance(results[0], Completion)
    assert results[0].text == "ok 1"
    assert isinstance(results[1], LlmError)
    assert results[1].code == ErrorCode.AUTH
    assert isinstance(results[2], LlmError)
    assert results[2].code == ErrorCode.SERVER
    assert isinstance(results[3], Completion)
    assert adapter.attempts["deny me"] == 1  # not retryable
    assert adapter.attempts["flaky one"] == 3  # 1 + retries


async def test_any_iterable_and_message_prompts(picky: tuple[Engine, Picky]) -> None:
    engine, _ = picky
    prompts = (p for p in ["a", Message.user("b"), [Message.user("x"), Message.user("c")], 7])
    results = await amap(prompts, engine=engine, provider="p")
    assert [r.text for r in results if isinstance(r, Completion)] == ["a", "b", "c", "7"]


def test_pandas_series(picky: tuple[Engine, Picky]) -> None:
    pd = pytest.importorskip("pandas")
    engine, _ = picky
    series = pd.Series(["x", "y"], index=[10, 20])
    results = map_prompts(series, engine=engine, provider="p", progress=False)
    # a Series gives a DataFrame back: the answers, the errors, the Series' index
    assert results["answer"].tolist() == ["x", "y"]
    assert results["error"].tolist() == [None, None]
    assert results.index.tolist() == [10, 20]


def test_sync_wrapper(picky: tuple[Engine, Picky]) -> None:
    engine, _ = picky
    results = map_prompts(["one", "two"], engine=engine, provider="p", system="s", max_tokens=50)
    assert [str(r) for r in results] == ["one", "two"]


async def test_sync_wrapper_inside_running_loop(picky: tuple[Engine, Picky]) -> None:
    engine, _ = picky  # like a Jupyter cell: a loop is running in this thread
    results = map_prompts(["inside"], engine=engine, provider="p")
    assert str(results[0]) == "inside"


async def test_injected_429s_are_retried(server: MockServer) -> None:
    engine = server_engine(server)
    server.inject("rate_limit", count=6, seconds=0)
    prompts = [f"p{i}" for i in range(8)]
    results = await amap(prompts, engine=engine, provider="m", concurrency=4, retries=3)
    assert [r.text if isinstance(r, Completion) else r for r in results] == prompts
    assert len(server.requests) == 8 + 6


async def test_retry_after_is_honoured(server: MockServer) -> None:
    engine = server_engine(server)
    server.inject("rate_limit", count=1, seconds=0.4)
    start = time.perf_counter()
    results = await amap(["wait for it"], engine=engine, provider="m", retries=1)
    assert time.perf_counter() - start >= 0.4
    assert isinstance(results[0], Completion)


async def test_permanent_rate_limit_holds_the_error(server: MockServer) -> None:
    engine = server_engine(server)
    server.inject("rate_limit", count=3, seconds=0)
    results = await amap(["a"], engine=engine, provider="m", retries=2)
    assert isinstance(results[0], LlmError)
    assert results[0].code == ErrorCode.RATE_LIMIT
    assert results[0].status == 429


async def test_stop_signal(picky: tuple[Engine, Picky]) -> None:
    engine, adapter = picky
    adapter.delay = 3600  # the stop alone can end the requests in flight
    stop = StopSignal()
    batch = asyncio.ensure_future(
        amap(
            [f"p{i}" for i in range(6)],
            engine=engine,
            provider="p",
            concurrency=2,
            stop_signal=stop,
        )
    )
    await until(lambda: adapter.in_flight == 2, "two requests in flight")
    stop.set()
    results = await asyncio.wait_for(batch, GUARD)
    assert all(isinstance(r, LlmError) and r.code == ErrorCode.ABORTED for r in results)
    assert sum(adapter.attempts.values()) == 2  # the rest were never sent


async def test_bad_options(picky: tuple[Engine, Picky]) -> None:
    engine, _ = picky
    with pytest.raises(LlmError):
        await amap(["a"], engine=engine, provider="p", concurrency=0)
    with pytest.raises(LlmError):
        await amap(["a"], engine=engine, provider="p", prompt="x")
    assert await amap([], engine=engine, provider="p") == []


async def test_progress_callback_errors_do_not_stop_the_batch(
    picky: tuple[Engine, Picky],
) -> None:
    engine, _ = picky

    def broken(done: int, total: int) -> None:
        raise RuntimeError("bar broke")

    results = await amap(["a", "b"], engine=engine, provider="p", progress=broken)
    assert all(isinstance(r, Completion) for r in results)


def test_no_progress_bar_outside_a_kernel() -> None:
    from notebook_llm.notebook.progress import progress_bar

    assert progress_bar(10) is None  # pytest is not a kernel, even with ipykernel imported


async def test_a_batch_shares_one_connection_pool_and_closes_it() -> None:
    from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
    from notebook_llm.engine.routing.lua_files import builtin_adapters_dir
    from notebook_llm.wire.transport import connection_pool, scoped_client

    adapter = LuaAdapter.from_file(builtin_adapters_dir() / "openai.lua")
    assert scoped_client() is None
    client, owned = adapter._client()
    assert owned  # outside a pool (and off the background loop): one client per stream
    await client.aclose()
    async with connection_pool() as pool:
        assert adapter._client() == (pool, False)
        assert adapter._client() == (pool, False)
    assert pool.is_closed
    assert scoped_client() is None


async def test_stop_during_a_batch_retry_wait_returns_at_once() -> None:

    from notebook_llm import LlmAdapter, StopSignal
    from notebook_llm.api.batch import amap

    class Limited(LlmAdapter):
        name = "limited"

        async def stream(self, options):  # type: ignore[no-untyped-def]
            raise LlmError("slow down", "RATE_LIMIT", status=429, retry_after=100)
            yield  # pragma: no cover

    # retries live in the engine's one policy (issue 13): the wait is the engine's
    engine = Engine(config_file=False, env_file=False, retries=3)
    engine.add_provider("lim", adapter=Limited())
    stop = StopSignal()
    asyncio.get_running_loop().call_later(0.3, stop.set)  # a trigger: any moment will do
    results = await asyncio.wait_for(  # the guard: the Retry-After is 100 s
        amap(["a", "b"], engine=engine, provider="lim", stop_signal=stop, progress=False), GUARD
    )
    assert all(isinstance(r, LlmError) and r.code == "ABORTED" for r in results)
