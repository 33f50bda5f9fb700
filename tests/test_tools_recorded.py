"""The tool loop on real recorded provider streams: a recorded OpenAI tool call (arguments split
over 11 chunks) runs our function, and the recorded second turn answers with its result."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from notebook_llm import Engine, LuaAdapter, validate_stream
from notebook_llm.api.tool_calling import run_tools, stream_tools
from notebook_llm.api.tool_calling.events import StepStart, ToolOutcome, ToolRun
from notebook_llm.core.protocol import Finish
from notebook_llm.engine.routing.lua_files import builtin_adapters_dir

WIRE = Path(__file__).parent / "fixtures" / "wire" / "openai"
# Both bodies come from one simonw/llm cassette (see tests/fixtures/wire/SOURCES.md).
STEP_BODIES = [
    (WIRE / "stream_tool_call_args_split.sse").read_bytes(),
    (WIRE / "stream_text_after_tool_result.sse").read_bytes(),
]

calls: list[tuple[int, int]] = []


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    calls.append((a, b))
    return a * b


async def test_recorded_tool_call_runs_the_function_and_the_recorded_answer_uses_it() -> None:
    requests: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(json.loads(request.content))
        body = STEP_BODIES[len(requests) - 1]
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    adapter = LuaAdapter.from_file(
        builtin_adapters_dir() / "openai.lua", transport=httpx.MockTransport(handler)
    )
    engine = Engine(config_file=False, env_file=False)
    engine.add_provider(
        "rec", adapter=adapter, base_url="https://api.invalid/v1", model="gpt-4o-mini"
    )

    events = [
        ev
        async for ev in stream_tools(engine, "rec", prompt="What is 1231 * 2331?", tools=[multiply])
    ]
    calls_seen = [e for e in events if isinstance(e, ToolRun)]
    results = [e for e in events if isinstance(e, ToolOutcome)]
    assert [(c.name, json.loads(c.arguments)) for c in calls_seen] == [
        ("multiply", {"a": 1231, "b": 2331})
    ]
    assert calls[-1] == (1231, 2331)
    assert [r.content for r in results] == ["2869461"]
    # Each step's protocol events obey the five rules on their own.
    steps: list[list[object]] = []
    for ev in events:
        if isinstance(ev, StepStart):
            steps.append([])
        elif not isinstance(ev, ToolRun | ToolOutcome):
            steps[-1].append(ev)
    for step in steps:
        validate_stream(step)  # type: ignore[arg-type]
    assert isinstance(steps[-1][-1], Finish)
    # The second request carries the call and its result the way OpenAI expects them.
    second = requests[1]["messages"]
    assert isinstance(second, list)
    assistant, tool = second[-2], second[-1]
    assert assistant["tool_calls"][0]["function"]["name"] == "multiply"
    assert tool == {
        "role": "tool",
        "tool_call_id": assistant["tool_calls"][0]["id"],
        "content": "2869461",
    }


async def test_run_tools_returns_the_final_answer_and_transcript() -> None:
    served = iter(STEP_BODIES)
    adapter = LuaAdapter.from_file(
        builtin_adapters_dir() / "openai.lua",
        transport=httpx.MockTransport(
            lambda request: httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=next(served)
            )
        ),
    )
    engine = Engine(config_file=False, env_file=False)
    engine.add_provider("rec", adapter=adapter, base_url="https://api.invalid/v1", model="m")
    completion = await run_tools(engine, "rec", prompt="What is 1231 * 2331?", tools=[multiply])
    assert "2,869,461" in completion.text
    assert len(completion.steps) == 2
    assert [m.role for m in completion.transcript] == ["assistant", "user", "assistant"]
    assert completion.usage is not None
    assert completion.usage.input_tokens == sum(
        s.usage.input_tokens for s in completion.steps if s.usage is not None
    )
