"""The engine: registry, providers, keys, errors into finish events, cancellation, sync API."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest
from conftest import ScriptedAdapter
from waiting import GUARD, until, until_sync

from notebook_llm import (
    BlockEnd,
    BlockStart,
    Engine,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmAdapter,
    LlmError,
    Message,
    ModelInfo,
    StopSignal,
    TextBlock,
    TextDelta,
    validate_stream,
)

STOP = Finish(FinishReason("stop"))


def text_stream(text: str) -> list[Event]:
    return [BlockStart(0, "text"), TextDelta(0, text), BlockEnd(0, TextBlock(text)), STOP]


@pytest.fixture
def engine() -> Engine:
    return Engine(config_file=False, retry_base=0.01, retry_cap=0.05)


async def collect(engine: Engine, provider: str, **kw: object) -> list[Event]:
    return validate_stream([ev async for ev in engine.stream(provider, **kw)])  # type: ignore[arg-type]


# ------------------------------------------------------------------ registry


def test_register_routes_and_dispose(engine: Engine) -> None:
    adapter = ScriptedAdapter(text_stream("hi"))
    handle = engine.register_adapter(["a", "b"], adapter)
    assert engine.complete_sync("a", prompt="x").text == "hi"
    assert engine.complete_sync("b", prompt="x").text == "hi"
    handle()
    with pytest.raises(LlmError) as info:
        engine.complete_sync("a", prompt="x")
    assert info.value.code == "NO_ADAPTER"
    handle()  # idempotent


@pytest.mark.parametrize(
    ("routes", "code"),
    [([], "INVALID_ADAPTER"), ([""], "INVALID_ADAPTER"), (["x", "x"], "DUPLICATE_ADAPTER")],
)
def test_register_rejects_bad_route_lists(engine: Engine, routes: list[str], code: str) -> None:
    with pytest.raises(LlmError) as info:
        engine.register_adapter(routes, ScriptedAdapter())
    assert info.value.code == code


def test_register_is_all_or_nothing(engine: Engine) -> None:
    # "mock" is the built-in plugin's route: a registration that meets it binds nothing.
    with pytest.raises(LlmError) as info:
        engine.register_adapter(["fresh", "mock"], ScriptedAdapter())
    assert info.value.code == "DUPLICATE_ADAPTER"
    assert engine.registry.get("fresh") is None


def test_register_again_in_the_session_replaces(engine: Engine) -> None:
    first = engine.register_adapter(["taken"], ScriptedAdapter(text_stream("old")))
    engine.register_adapter(["fresh", "taken"], ScriptedAdapter(text_stream("new")))
    assert engine.complete_sync("taken", prompt="x").text == "new"
    assert first.disposed


def test_register_rejects_non_adapters(engine: Engine) -> None:
    with pytest.raises(LlmError) as info:
        engine.register_adapter(["x"], object())  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ADAPTER"


def test_handle_replace_checks_and_moves_routes(engine: Engine) -> None:
    a = ScriptedAdapter(text_stream("A"))
    handle = engine.register_adapter(["one"], a)
    engine.register_adapter(["other"], ScriptedAdapter())
    with pytest.raises(LlmError):
        handle.replace(["two", "other"])
    assert engine.registry.get("one") is a
    assert engine.registry.get("two") is None
    handle.replace(["two", "three"])
    assert engine.registry.get("one") is None
    assert engine.complete_sync("three", prompt="x").text == "A"


def test_unknown_route_is_no_adapter(engine: Engine) -> None:
    with pytest.raises(LlmError) as info:
        engine.complete_sync("nowhere", prompt="x")
    assert info.value.code == "NO_ADAPTER"
    assert "mock" in info.value.message  # lists what exists


# ------------------------------------------------------------------ errors never crash the consumer


async def test_adapter_exception_becomes_error_finish(engine: Engine) -> None:
    engine.register_adapter(
        ["bad"], ScriptedAdapter([BlockStart(0, "text")], raise_after=ValueError("oops"))
    )
    events = await collect(engine, "bad", prompt="x")
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == "ADAPTER_ERROR"
    assert "ValueError: oops" in finish.reason.failure.message
    with pytest.raises(LlmError) as info:
        await engine.complete("bad", prompt="x")
    assert info.value.code == "ADAPTER_ERROR"


async def test_adapter_breaking_a_rule_becomes_invariant_error(engine: Engine) -> None:
    engine.register_adapter(["rude"], ScriptedAdapter([TextDelta(0, "no start"), STOP]))
    events = await collect(engine, "rude", prompt="x")
    assert isinstance(events[-1], Finish)
    assert events[-1].reason.failure is not None
    assert events[-1].reason.failure.code == "INVARIANT"


async def test_adapter_without_finish_is_an_error(engine: Engine) -> None:
    engine.register_adapter(["short"], ScriptedAdapter(text_stream("x")[:-1]))
    with pytest.raises(LlmError) as info:
        await engine.complete("short", prompt="x")
    assert info.value.code == "INVARIANT"
    assert info.value.details["completion"].text == "x"  # nothing received is lost


async def test_retryable_error_before_output_is_retried(engine: Engine) -> None:
    class Flaky(LlmAdapter):
        name = "flaky"
        calls = 0

        async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
            Flaky.calls += 1
            if Flaky.calls < 3:
                raise LlmError("slow down", "RATE_LIMIT", status=429, retry_after=0.01)
            for ev in text_stream("finally"):
                yield ev

    engine.register_adapter(["flaky"], Flaky())
    assert (await engine.complete("flaky", prompt="x")).text == "finally"
    assert Flaky.calls == 3


async def test_non_retryable_error_is_not_retried(engine: Engine) -> None:
    adapter = ScriptedAdapter(raise_after=LlmError("bad key", "AUTH", status=401))
    engine.register_adapter(["auth"], adapter)
    with pytest.raises(LlmError) as info:
        await engine.complete("auth", prompt="x")
    assert info.value.code == "AUTH"
    assert len(adapter.calls) == 1


async def test_retries_give_up_after_the_configured_count(engine: Engine) -> None:
    adapter = ScriptedAdapter(raise_after=LlmError("down", "SERVER", status=500))
    engine.register_adapter(["down"], adapter)
    with pytest.raises(LlmError) as info:
        await engine.complete("down", prompt="x")
    assert info.value.code == "SERVER"
    assert len(adapter.calls) == engine.retries + 1


# ------------------------------------------------------------------ cancellation


class Slow(LlmAdapter):
    """Streams one delta, then waits forever, recording whether it was closed."""

    name = "slow"

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.started = False

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        try:
            yield BlockStart(0, "text")
            yield TextDelta(0, "partial")
            self.started = True
            await asyncio.sleep(3600)
            yield STOP
        finally:
            self.closed.set()


async def test_stop_signal_ends_with_aborted_and_closes_the_adapter(engine: Engine) -> None:
    slow = Slow()
    engine.register_adapter(["slow"], slow)
    stop = StopSignal()
    events: list[Event] = []

    async def consume() -> None:
        async for ev in engine.stream("slow", prompt="x", stop_signal=stop):
            events.append(ev)

    task = asyncio.create_task(consume())
    await until(lambda: slow.started, "the first text")  # the adapter now waits an hour
    threading.Thread(target=stop.set).start()  # a Stop button lives in another thread
    await asyncio.wait_for(task, GUARD)  # a hang guard: without the Stop, an hour
    assert slow.closed.is_set()
    validate_stream(events)
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "aborted"
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == "ABORTED"
    assert events[1] == TextDelta(0, "partial")


async def test_cancelling_the_consumer_closes_the_adapter(engine: Engine) -> None:
    slow = Slow()
    engine.register_adapter(["slow"], slow)

    async def consume() -> None:
        async for _ in engine.stream("slow", prompt="x"):
            pass

    task = asyncio.create_task(consume())
    await until(lambda: slow.started, "the adapter's stream")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(slow.closed.wait(), GUARD)


async def test_breaking_out_of_the_iteration_closes_the_adapter(engine: Engine) -> None:
    slow = Slow()
    engine.register_adapter(["slow"], slow)
    async for ev in engine.stream("slow", prompt="x"):
        if isinstance(ev, TextDelta):
            break
    await asyncio.wait_for(slow.closed.wait(), GUARD)


def test_complete_sync_stop_from_another_thread(engine: Engine) -> None:
    slow = Slow()
    engine.register_adapter(["slow"], slow)
    stop = StopSignal()

    def stop_once_partial() -> None:  # a Stop button, pressed once the first text is there
        until_sync(lambda: slow.started, "the first text")
        stop.set()

    threading.Thread(target=stop_once_partial, daemon=True).start()
    with pytest.raises(LlmError) as info:
        engine.complete_sync("slow", prompt="x", stop_signal=stop)
    assert info.value.code == "ABORTED"
    assert info.value.details["completion"].text == "partial"


# ------------------------------------------------------------------ sync API and mock


def test_complete_sync_on_mock_needs_no_key_or_network() -> None:
    c = Engine(config_file=False).complete_sync(provider="mock", model="echo", prompt="hello")
    assert "hello" in c.text
    assert c.usage is not None
    assert c.usage.input_tokens > 0
    assert c.usage.output_tokens > 0
    assert c.finish is not None
    assert c.finish.kind == "stop"


async def test_complete_sync_works_inside_a_running_loop(engine: Engine) -> None:
    # Like a Jupyter cell: a loop is running in this thread, and plain sync code is called.
    c = engine.complete_sync("mock", "echo", prompt="inside a loop")
    assert c.text == "inside a loop"
    c2 = await engine.complete("mock", "echo", prompt="inside a loop")
    assert c2.text == c.text  # sync/async parity


def test_messages_and_system_reach_the_adapter(engine: Engine) -> None:
    adapter = ScriptedAdapter(text_stream("ok"))
    engine.add_provider("p", adapter=adapter, model="m1", extra_body={"seed": 1})
    engine.complete_sync(
        "p",
        messages=[Message.user("a"), Message.assistant("b")],
        prompt="c",
        system="sys",
        temperature=0.2,
        max_tokens=5,
        stop_sequences=["END"],
    )
    opts = adapter.calls[0]
    assert [m.text for m in opts.messages] == ["a", "b", "c"]
    assert (opts.system, opts.model, opts.temperature, opts.max_tokens, opts.stop_sequences) == (
        "sys",
        "m1",
        0.2,
        5,
        ["END"],
    )
    assert opts.extra_body == {"seed": 1}


@pytest.mark.parametrize(
    "kw", [{"prompt": None}, {"prompt": "x", "max_tokens": 0}, {"prompt": "x", "temperature": 5.0}]
)
def test_bad_options_are_clear_errors(engine: Engine, kw: dict[str, object]) -> None:
    with pytest.raises(LlmError) as info:
        engine.complete_sync("mock", **kw)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_OPTIONS"


# ------------------------------------------------------------------ reasoning efforts


async def test_unsupported_reasoning_effort_is_refused_before_io(engine: Engine) -> None:
    class Effortful(ScriptedAdapter):
        async def resolve_model(self, provider: str, model: str | None) -> ModelInfo | None:
            return ModelInfo(
                model or "m", reasoning_efforts=["low", "high"], default_reasoning_effort="low"
            )

    adapter = Effortful(text_stream("ok"))
    engine.register_adapter(["eff"], adapter)
    with pytest.raises(LlmError) as info:
        await engine.complete("eff", prompt="x", reasoning_effort="max")
    assert info.value.code == "UNSUPPORTED_REASONING_EFFORT"
    assert "low, high" in info.value.message
    assert adapter.calls == []  # no I/O happened
    assert (await engine.complete("eff", prompt="x", reasoning_effort="high")).text == "ok"


async def test_reasoning_effort_on_a_model_without_efforts(engine: Engine) -> None:
    with pytest.raises(LlmError) as info:
        await engine.complete("mock", "echo", prompt="x", reasoning_effort="high")
    assert info.value.code == "UNSUPPORTED_REASONING_EFFORT"


async def test_one_stop_signal_stops_every_stream_it_was_given(engine: Engine) -> None:
    s1, s2 = Slow(), Slow()
    engine.register_adapter(["s1"], s1)
    engine.register_adapter(["s2"], s2)
    stop = StopSignal()

    async def consume(route: str) -> Event:
        last: Event | None = None
        async for ev in engine.stream(route, prompt="x", stop_signal=stop):
            last = ev
        assert last is not None
        return last

    tasks = [asyncio.create_task(consume(r)) for r in ("s1", "s2")]
    await until(lambda: s1.started and s2.started, "both streams")
    stop.set()
    finishes = await asyncio.wait_for(asyncio.gather(*tasks), GUARD)
    assert all(isinstance(f, Finish) and f.reason.kind == "aborted" for f in finishes)


async def test_reasoning_effort_passes_when_the_adapter_does_not_describe_the_model(
    engine: Engine,
) -> None:
    adapter = ScriptedAdapter(text_stream("ok"))  # resolve_model() -> None: unknown model
    engine.register_adapter(["plain"], adapter)
    assert (await engine.complete("plain", prompt="x", reasoning_effort="low")).text == "ok"
    assert adapter.calls[0].reasoning_effort == "low"


async def test_a_failing_cleanup_does_not_replace_the_outcome(engine: Engine) -> None:
    class BadClose(LlmAdapter):
        name = "badclose"

        async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
            try:
                for ev in text_stream("fine"):
                    yield ev
            finally:
                raise OSError("socket already closed")

    engine.register_adapter(["bc"], BadClose())
    assert (await engine.complete("bc", prompt="x")).text == "fine"


def test_stop_sequences_reach_the_adapter_and_stop_is_no_keyword(engine: Engine) -> None:
    # "stop" had two meanings (stop sequences beside stop_signal); only stop_sequences= is left.
    adapter = ScriptedAdapter(text_stream("ok"))
    engine.add_provider("p", adapter=adapter, model="m1")
    engine.complete_sync("p", prompt="c", stop_sequences=["END"])
    assert adapter.calls[0].stop_sequences == ["END"]
    assert not hasattr(adapter.calls[0], "stop")
    with pytest.raises(TypeError, match="stop"):
        engine.complete_sync("p", prompt="c", stop=["END"])
