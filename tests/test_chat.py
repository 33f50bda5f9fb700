"""Chat: history, send/asend parity, tool schemas, folding tool-loop events."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from notebook_llm import Engine
from notebook_llm.api.chat import Chat, set_default_engine, tool_schema
from notebook_llm.api.tool_calling.events import StepStart, ToolOutcome, ToolRun
from notebook_llm.api.turn_runner import all_text, completion_from
from notebook_llm.core.protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    Usage,
)


@pytest.fixture
def engine() -> Iterator[Engine]:
    eng = Engine(config_file=False, env_file=False, retries=0)
    set_default_engine(eng)
    yield eng
    set_default_engine(None)


def test_send_keeps_history(engine: Engine) -> None:
    chat = Chat("mock", "echo", system="be brief", live=False)
    assert chat.send("one", display=False).text == "one"
    assert chat.send("two", display=False).text == "two"
    assert [(m.role, m.text) for m in chat.messages] == [
        ("user", "one"),
        ("assistant", "one"),
        ("user", "two"),
        ("assistant", "two"),
    ]
    chat.reset()
    assert chat.messages == []
    assert chat.last is None


def test_failed_turn_is_not_recorded(engine: Engine) -> None:
    chat = Chat("openai", live=False)
    completion = chat.send("hi", display=False)
    assert completion.error is not None
    assert completion.error.code == "MISSING_CREDENTIAL"
    assert chat.messages == []


async def test_asend_matches_send(engine: Engine) -> None:
    chat = Chat("mock", "reasoning", live=False)
    sync = Chat("mock", "reasoning", live=False).send("same", display=False)
    result = await chat.asend("same", display=False)
    assert (result.text, result.reasoning) == (sync.text, sync.reasoning)
    assert len(chat.messages) == 2


def test_default_provider_is_mock(engine: Engine) -> None:
    assert Chat(live=False).provider == "mock"


def test_tool_schema_from_signature() -> None:
    def lookup(city: str, days: int = 1, *, metric: bool = True) -> str:
        """Weather for a city.

        More details here."""
        return city

    schema = tool_schema(lookup)
    assert schema.name == "lookup"
    assert schema.description.startswith("Weather for a city")
    assert schema.parameters["required"] == ["city"]
    assert schema.parameters["properties"]["days"]["type"] == "integer"


def test_completion_from_tool_loop_events() -> None:
    events = [
        StepStart(0),
        BlockStart(0, "tool-call"),
        BlockEnd(0, ToolCallBlock("c1", "f", "{}")),
        Usage(TokenUsage(10, 5)),
        Finish(FinishReason("tool-calls")),
        ToolRun("c1", "f", "{}"),
        ToolOutcome("c1", "f", "42"),
        StepStart(1),
        BlockStart(0, "text"),
        TextDelta(0, "42!"),
        BlockEnd(0, TextBlock("42!")),
        Usage(TokenUsage(20, 2)),
        Finish.stop(),
    ]
    done = completion_from(events, "mock", "tools")  # type: ignore[arg-type]
    assert done.text == "42!"
    assert len(done.steps) == 2
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens) == (30, 7)
    assert [m.role for m in done.transcript] == ["assistant", "user", "assistant"]
    assert all_text(done) == "42!"
    assert done.finish is not None
    assert done.finish.kind == "stop"
