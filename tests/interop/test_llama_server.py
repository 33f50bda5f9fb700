"""The public API against llama.cpp's real OpenAI-compatible server (issue 14).

Provider ``local`` is added exactly as a user would: ``adapter="openai"`` and the server's
``base_url``. The model babbles: every assertion is about the protocol (events, finish kinds,
what the server saw), never about wording. See ``conftest.py`` for the servers.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from notebook_llm import (
    Chat,
    Event,
    Finish,
    LlmError,
    Message,
    StopSignal,
    TextDelta,
    ToolSchema,
    assemble,
    record,
    validate_stream,
)
from notebook_llm import map as map_prompts
from notebook_llm.core.errors import ErrorCode
from notebook_llm.core.protocol import ToolCallBlock, ToolResultBlock

from .conftest import ALIAS, LlamaServer, start_server

pytestmark = pytest.mark.interop

STORY = "Once upon a time, in a small village by the sea, there lived"
DISCONNECTED = "Disconnected from client"


def posts_since(server: LlamaServer, offset: int) -> int:
    """How many chat requests the server logged after ``offset`` (uvicorn's access log)."""
    return server.log_since(offset).count("POST /v1/chat/completions")


# ------------------------------------------------------------------ streams


async def test_a_stream_is_a_valid_event_stream(llama: LlamaServer) -> None:
    engine = llama.engine()
    events: list[Event] = [e async for e in engine.stream("local", prompt=STORY, max_tokens=24)]
    validate_stream(events)
    done = assemble(events)
    assert done.error is None
    assert done.finish is not None
    assert done.finish.kind in ("stop", "max-tokens")


async def test_max_tokens_is_honoured(llama: LlamaServer) -> None:
    engine = llama.engine()
    events = [e async for e in engine.stream("local", prompt=STORY, max_tokens=8, temperature=0.0)]
    done = assemble(events)
    assert done.finish is not None
    assert done.finish.kind == "max-tokens"  # the babble goes on: only the limit stops it
    assert 0 < sum(isinstance(e, TextDelta) for e in events) <= 8  # one chunk per token


def test_chat_max_tokens_is_honoured_turn_after_turn(llama: LlamaServer) -> None:
    # Before the fix the limit was ignored, the first turn filled the 2,048-token context and
    # the second failed after the server's 200.
    chat = Chat("local", engine=llama.engine(), max_tokens=16, live=False)
    for text in ("Tell me a story.", "Go on.", "And then?"):
        done = chat.send(text, display=False)
        assert done.error is None, done.error
        assert done.finish is not None
        assert done.finish.kind in ("stop", "max-tokens")
    assert [m.role for m in chat.messages] == ["user", "assistant"] * 3


async def test_list_models_returns_the_served_model(llama: LlamaServer) -> None:
    models = await llama.engine().list_models("local")
    assert [m.id for m in models] == [ALIAS]


def test_map_at_concurrency_4(tmp_path: Path) -> None:
    # llama-cpp-python's server answers one request at a time, and by default a new request
    # interrupts the running stream (it ends it with [DONE] and no finish reason, see
    # fixtures/llamacpp/stream_interrupted.sse). For concurrent clients it is started with
    # --interrupt_requests False, so the requests queue; the README says so.
    server = start_server(tmp_path / "map.log", extra=["--interrupt_requests", "False"])
    try:
        offset = server.log_size()
        prompts = [f"Item {i}: the weather today is" for i in range(6)]
        results = map_prompts(
            prompts,
            engine=server.engine(),
            provider="local",
            concurrency=4,
            max_tokens=8,
            progress=False,
        )
        assert len(results) == len(prompts)
        for result in results:
            assert not isinstance(result, LlmError), result
            assert result.error is None, result.error
            assert result.finish is not None
            assert result.finish.kind in ("stop", "max-tokens")
        assert posts_since(server, offset) == len(prompts)  # none was retried
    finally:
        server.stop()


# ------------------------------------------------------------------ stopping


async def _stop_after_first_text(llama: LlamaServer, stop: StopSignal) -> list[Event]:
    """Stream a long answer (1,500 tokens); once text flows, ask ``stop`` from outside the
    read (the next loop turn) and return the events."""
    engine = llama.engine()
    loop = asyncio.get_running_loop()
    asked = False
    events: list[Event] = []
    async for event in engine.stream("local", prompt=STORY, max_tokens=1500, stop_signal=stop):
        events.append(event)
        if isinstance(event, TextDelta) and not asked and len(events) >= 3:
            asked = True
            loop.call_soon(stop.set)
    return events


async def test_a_stop_signal_ends_the_stream_and_the_server_sees_the_close(
    llama: LlamaServer,
) -> None:
    offset = llama.log_size()
    # An answer cut short, and the server saw the client go: the stop ended the stream (how
    # soon is the machine's load's to say, not a verdict here).
    events = await _stop_after_first_text(llama, StopSignal())
    last = events[-1]
    assert isinstance(last, Finish)
    assert last.reason.kind == "aborted"
    assert llama.wait_for_log(DISCONNECTED, offset), llama.log_since(offset)[-2000:]


async def test_a_cancelled_task_ends_the_stream_and_the_server_sees_the_close(
    llama: LlamaServer,
) -> None:
    engine = llama.engine()
    offset = llama.log_size()
    flowing = asyncio.Event()
    seen: list[Event] = []

    async def consume() -> None:
        async for event in engine.stream("local", prompt=STORY, max_tokens=1500):
            seen.append(event)
            if sum(isinstance(e, TextDelta) for e in seen) >= 3:
                flowing.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(flowing.wait(), 120)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 120)  # a hang guard: 1,500 tokens take far longer
    assert llama.wait_for_log(DISCONNECTED, offset), llama.log_since(offset)[-2000:]


# ------------------------------------------------------------------ findings 3-5, for real


async def test_an_empty_answer_is_finish_stop_and_is_not_retried(llama: LlamaServer) -> None:
    engine = llama.engine()
    first = await engine.complete("local", prompt=STORY, max_tokens=4, temperature=0.0)
    assert first.text
    offset = llama.log_size()
    # A stop sequence that matches the start of the (greedy, so repeatable) answer: llama.cpp
    # then sends a role chunk and a finish chunk with no text at all.
    done = await engine.complete(
        "local", prompt=STORY, max_tokens=4, temperature=0.0, stop_sequences=[first.text[0]]
    )
    assert (done.text, done.finish and done.finish.kind) == ("", "stop")
    assert posts_since(llama, offset) == 1


async def test_a_prompt_over_the_context_window_gets_a_plain_message(llama: LlamaServer) -> None:
    engine = llama.engine()
    engine.retries = 0
    offset = llama.log_size()
    with pytest.raises(LlmError) as info:
        await engine.complete("local", prompt="tell me more " * 1200, max_tokens=8)
    err = info.value
    assert "context window" in err.message, err
    assert "Traceback" not in err.message
    assert posts_since(llama, offset) == 1


async def test_the_server_reports_no_usage_in_streams(llama: LlamaServer) -> None:
    done = await llama.engine().complete("local", prompt=STORY, max_tokens=8)
    assert done.text
    assert done.usage is None  # not zeros, and so no cost either
    assert "usage=<usage not reported>" in repr(done)


# ------------------------------------------------------------------ record, stop, replay


def test_record_then_stop_the_server_then_replay_gives_the_same_answers(
    own_server: LlamaServer, tmp_path: Path
) -> None:
    engine = own_server.engine()
    path = tmp_path / "session.jsonl"
    prompts = [STORY, "The three primary colours are"]
    with record.record(path, engine=engine):
        live = [
            engine.complete_sync("local", prompt=p, max_tokens=12, temperature=0.0) for p in prompts
        ]
    own_server.stop()
    with pytest.raises(LlmError) as info:  # the server is really gone
        engine.complete_sync("local", prompt=prompts[0], max_tokens=12, temperature=0.0)
    assert info.value.code == ErrorCode.TRANSPORT
    with record.replay(path, engine=engine):
        replayed = [
            engine.complete_sync("local", prompt=p, max_tokens=12, temperature=0.0) for p in prompts
        ]
    assert [c.text for c in replayed] == [c.text for c in live]
    assert [c.finish and c.finish.kind for c in replayed] == [
        c.finish and c.finish.kind for c in live
    ]


# ------------------------------------------------------------------ tool calls

WEATHER = ToolSchema(
    "get_weather",
    "Get the weather for a unit system.",
    {
        "type": "object",
        "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["unit"],
    },
)
FORCED = {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}


def test_tool_calls_with_the_chatml_function_calling_format(tmp_path: Path) -> None:
    # llama-cpp-python streams a tool call only when tool_choice names the function ("auto"
    # with stream=true is refused after the 200: "Automatic streaming tool choice is not
    # supported"); extra_body puts the named choice over the adapter's "auto".
    server = start_server(tmp_path / "tools.log", chat_format="chatml-function-calling")
    try:
        engine = server.engine()
        first = engine.complete_sync(
            "local", prompt="Weather?", tools=[WEATHER], extra_body=FORCED, max_tokens=64
        )
        validate_stream(first.events)
        assert first.finish is not None
        assert first.finish.kind == "tool-calls"
        (call,) = first.tool_calls
        assert call.name == "get_weather"
        assert json.loads(call.arguments)["unit"] in ("celsius", "fahrenheit")
        # The result goes back as a tool message; tool_choice "none" asks for text.
        messages = [
            Message.user("Weather?"),
            first.message(),
            Message.tool_results([ToolResultBlock.of(call.id, "18 degrees and sunny")]),
        ]
        second = engine.complete_sync(
            "local",
            messages=messages,
            tools=[WEATHER],
            extra_body={"tool_choice": "none"},
            max_tokens=16,
        )
        validate_stream(second.events)
        assert second.error is None
        assert not any(isinstance(b, ToolCallBlock) for b in second.blocks)
    finally:
        server.stop()
