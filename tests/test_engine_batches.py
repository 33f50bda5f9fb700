"""Events handed from adapter to engine in per-read batches: the engine checks and
yields them one by one, with the same stop, validation and close behaviour as one at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator

from notebook_llm import (
    BlockEnd,
    BlockStart,
    Engine,
    ErrorCode,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmAdapter,
    StopSignal,
    TextBlock,
    TextDelta,
)


class Batched(LlmAdapter):
    """Yields its events in the given batches from ``stream_batches``; ``stream`` flattens."""

    name = "batched"

    def __init__(self, batches: list[list[Event]]) -> None:
        self.batches = batches
        self.closed = False
        self.one_by_one = False

    async def stream_batches(self, options: GenerateOptions) -> AsyncIterator[list[Event]]:
        try:
            for batch in self.batches:
                yield batch
        finally:
            self.closed = True

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        self.one_by_one = True
        async for batch in self.stream_batches(options):
            for event in batch:
                yield event


class OwnStream(Batched):
    """Overrides ``stream``: the engine must use it, not the inherited ``stream_batches``."""

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        self.one_by_one = True
        yield BlockStart(0, "text")
        yield TextDelta(0, "own")
        yield BlockEnd(0, TextBlock("own"))
        yield Finish(FinishReason("stop"))


def engine_with(adapter: LlmAdapter) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("b", adapter=adapter, model="m")
    return engine


def whole_answer() -> list[list[Event]]:
    return [
        [BlockStart(0, "text"), TextDelta(0, "a"), TextDelta(0, "b"), TextDelta(0, "c")],
        [BlockEnd(0, TextBlock("abc")), Finish(FinishReason("stop"))],
    ]


async def test_batches_are_flattened_in_order_without_the_one_by_one_stream() -> None:
    adapter = Batched(whole_answer())
    events = [ev async for ev in engine_with(adapter).stream("b", prompt="hi")]
    assert [ev.type for ev in events] == [
        "block-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "block-end",
        "finish",
    ]
    assert not adapter.one_by_one
    assert adapter.closed
    completion = await engine_with(Batched(whole_answer())).complete("b", prompt="hi")
    assert completion.text == "abc"


async def test_stop_in_the_middle_of_a_batch_aborts_at_the_next_event() -> None:
    adapter = Batched(whole_answer())
    stop = StopSignal()
    seen: list[Event] = []
    async for ev in engine_with(adapter).stream("b", prompt="hi", stop_signal=stop):
        seen.append(ev)
        if isinstance(ev, TextDelta):
            stop.set()
    assert [ev.type for ev in seen] == ["block-start", "text-delta", "finish"]
    last = seen[-1]
    assert isinstance(last, Finish)
    assert last.reason.kind == "aborted"
    assert adapter.closed


async def test_a_rule_broken_inside_a_batch_keeps_the_events_before_it() -> None:
    bad = [[BlockStart(0, "text"), TextDelta(0, "a"), TextDelta(3, "x"), TextDelta(0, "b")]]
    seen = [ev async for ev in engine_with(Batched(bad)).stream("b", prompt="hi")]
    assert [ev.type for ev in seen] == ["block-start", "text-delta", "finish"]
    last = seen[-1]
    assert isinstance(last, Finish)
    assert last.reason.kind == "error"
    assert last.reason.failure is not None
    assert last.reason.failure.code == ErrorCode.INVARIANT


async def test_an_adapter_that_overrides_stream_is_streamed_one_by_one() -> None:
    adapter = OwnStream(whole_answer())
    events = [ev async for ev in engine_with(adapter).stream("b", prompt="hi")]
    assert adapter.one_by_one
    assert [ev for ev in events if isinstance(ev, TextDelta)] == [TextDelta(0, "own")]
