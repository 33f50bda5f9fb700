"""Pure tests of the deterministic mock models and request conversion (no I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from notebook_llm.adapters.mock import bodies as wire
from notebook_llm.adapters.mock.models import (
    MODELS,
    MockReply,
    MockTokenCounts,
    Reasoning,
    Text,
    ToolCall,
    UnknownModelError,
    count_tokens,
    generate,
    split_tokens,
    tool_arguments,
    usage_for,
)

TRICKY = "Hello,  world!\n\tÜnïcödé 🎉 — x=3.5; ok?  "


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def req(model: str, *messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": list(messages), **extra}


WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather forecast",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "scale": {"type": "number"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "hourly": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "where": {"type": "object", "properties": {"lat": {"type": "number"}}},
                "maybe": {"type": ["null", "integer"]},
            },
            "required": ["city", "extra"],
        },
    },
}
OTHER = {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        "  lead",
        "trail  ",
        TRICKY,
        "a\n\nb",
        "!!??",
        "x" * 50,
        "9" * 20,
        "Überstraßenbahnhof x1y2z3w4v5",
    ],
)
def test_split_tokens_is_lossless(text: str) -> None:
    pieces = split_tokens(text)
    assert "".join(pieces) == text
    assert all(count_tokens(p) <= 1 for p in pieces)
    assert sum(count_tokens(p) for p in pieces) == count_tokens(text)


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("  a  b ") == 2


def test_long_words_are_split_into_sub_word_pieces_like_a_bpe() -> None:
    # The teaching notebook says tokens are "pieces of words": the mock must show it.
    word = "Antidisestablishmentarianism"
    pieces = split_tokens(word)
    assert pieces == ["Anti", "dis", "esta", "blish", "ment", "arian", "ism"]
    assert count_tokens(word) == len(pieces) == 7
    assert count_tokens("The quick brown fox jumps over the lazy dog.") == 10  # short words: 1
    assert split_tokens(" understanding") == [" under", "stand", "ing"]
    assert split_tokens("12345678") == ["123", "456", "78"]  # digits by threes
    assert count_tokens("2026") == 2
    assert split_tokens("Hello!") == ["Hello", "!"]
    long_text = "tokenization internationalization " * 3
    assert "".join(split_tokens(long_text)) == long_text
    assert count_tokens(long_text) == len(split_tokens(long_text.strip()))


def test_models_listed() -> None:
    assert set(MODELS) == {"echo", "reasoning", "tools", "lorem"}
    assert all(isinstance(d, str) and d for d in MODELS.values())


def test_echo_exact_in_small_pieces() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        user("first"),
        {"role": "assistant", "content": "x"},
    ]
    reply = generate(req("echo", *messages, user(TRICKY)))
    assert reply.text == TRICKY
    assert reply.finish_reason == "stop"
    assert all(isinstance(p, Text) for p in reply.parts)
    assert len(reply.parts) > 3
    assert all(count_tokens(p.text) <= 3 for p in reply.parts)  # type: ignore[union-attr]


def test_echo_content_parts_and_latest_tag() -> None:
    content = [
        {"type": "text", "text": "one"},
        {"type": "image_url"},
        {"type": "text", "text": "two"},
    ]
    reply = generate(req("echo:latest", {"role": "user", "content": content}))
    assert reply.text == "one\ntwo"


def test_deterministic() -> None:
    r = req("tools", user("Paris 3"), tools=[WEATHER])
    assert generate(r) == generate(r)
    assert generate(req("lorem")) == generate(req("lorem"))


def test_reasoning_mentions_prompt_then_answers() -> None:
    reply = generate(req("reasoning", user("What is 2+2?")))
    kinds = [type(p) for p in reply.parts]
    assert kinds.index(Text) > kinds.index(Reasoning)
    assert Reasoning not in kinds[kinds.index(Text) :]
    assert "What is 2+2?" in reply.reasoning
    assert reply.text == "What is 2+2?"
    usage = usage_for(reply, req("reasoning", user("What is 2+2?")))
    assert usage.reasoning_tokens == count_tokens(reply.reasoning) > 0
    assert usage.completion_tokens == usage.reasoning_tokens + count_tokens(reply.text)


def test_tools_first_call_fills_arguments() -> None:
    reply = generate(
        req("tools", user("Weather in Paris for 3 days at 1.5"), tools=[WEATHER, OTHER])
    )
    assert reply.finish_reason == "tool_calls"
    (call,) = reply.tool_calls
    assert call.name == "weather"
    assert call.id.startswith("call_")
    assert len(call.pieces) > 3
    args = json.loads(call.arguments)
    # required: city (the proper noun after "in") and extra (no schema: a short phrase);
    # optional: the ones the prompt gives (the numbers, in order), in the schema's order
    assert args == {
        "city": "Paris",
        "days": 3,
        "scale": 1.5,
        "extra": "Weather in Paris for 3 days at 1.5",
    }


def test_tool_arguments_without_values_in_the_prompt() -> None:
    assert tool_arguments(WEATHER, "hi") == {"city": "hi", "extra": "hi"}
    anthropic_style = {"name": "t", "input_schema": {"properties": {"q": {"type": "string"}}}}
    assert tool_arguments(anthropic_style, "hi") == {"q": "hi"}  # no `required`: all are


def _tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    params = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "parameters": params}}


GET_WEATHER = _tool(
    "get_weather",
    {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "include_forecast": {"type": "boolean"},
    },
    ["city"],
)


@pytest.mark.parametrize(
    ("tool", "prompt", "expected"),
    [
        (GET_WEATHER, "What's the weather in Paris?", {"city": "Paris"}),
        (
            GET_WEATHER,
            "Weather in New York City in fahrenheit for 3 days",
            {"city": "New York City", "unit": "fahrenheit", "days": 3},
        ),
        (
            GET_WEATHER,
            "Is it raining in São Paulo? No forecast please.",
            {"city": "São Paulo", "include_forecast": False},
        ),
        (
            GET_WEATHER,
            "Weather for Ürümqi over 10 days, with the forecast",
            {"city": "Ürümqi", "days": 7, "include_forecast": True},  # clamped to maximum
        ),
        (GET_WEATHER, "paris", {"city": "paris"}),  # nothing better than the prompt itself
        (
            _tool("population", {"city": {"type": "string"}}, ["city"]),
            "How many people live in Lima?",
            {"city": "Lima"},
        ),
        (
            _tool(
                "directions",
                {"origin": {"type": "string"}, "destination": {"type": "string"}},
                ["origin", "destination"],
            ),
            "How do I get from Lisbon to Porto?",
            {"origin": "Lisbon", "destination": "Porto"},
        ),
        (
            _tool(
                "translate",
                {"text": {"type": "string"}, "target_language": {"type": "string"}},
                ["text", "target_language"],
            ),
            'Translate "good morning" into Spanish',
            {"text": "good morning", "target_language": "Spanish"},
        ),
        (
            _tool(
                "search",
                {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
                ["query"],
            ),
            "Search the web for the latest Python release",
            {"query": "latest Python release"},
        ),
        (
            _tool(
                "compare",
                {"cities": {"type": "array", "items": {"type": "string"}}},
                ["cities"],
            ),
            "Compare the weather of Paris, Rome and Berlin",
            {"cities": ["Paris", "Rome", "Berlin"]},
        ),
        (
            _tool("add", {"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"]),
            "What is 2.5 plus 4?",
            {"a": 2.5, "b": 4},
        ),
        (
            _tool(
                "set_alarm",
                {
                    "hour": {"type": "integer", "default": 7},
                    "loud": {"type": "boolean", "default": True},
                    "label": {"type": "string", "enum": ["work", "gym"]},
                },
                ["hour", "loud", "label"],
            ),
            "wake me up",
            {"hour": 7, "loud": True, "label": "work"},  # defaults, then the first enum value
        ),
    ],
)
def test_tool_arguments_read_the_prompt_like_a_model(
    tool: dict[str, Any], prompt: str, expected: dict[str, Any]
) -> None:
    assert tool_arguments(tool, prompt) == expected
    assert tool_arguments(tool, prompt) == expected  # deterministic


def test_tools_answer_includes_results() -> None:
    first = generate(req("tools", user("Paris"), tools=[WEATHER]))
    call = first.tool_calls[0]
    messages = [
        user("Paris"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21C"},
        {"role": "tool", "tool_call_id": "other", "name": "clock", "content": "12:00"},
    ]
    reply = generate(req("tools", *messages, tools=[WEATHER]))
    assert reply.finish_reason == "stop"
    assert not reply.tool_calls
    assert "Sunny, 21C" in reply.text
    assert "12:00" in reply.text
    assert "weather" in reply.text
    # a new user message after the results starts a new tool round
    again = generate(req("tools", *messages, user("and Rome?"), tools=[WEATHER]))
    assert again.finish_reason == "tool_calls"


def test_tools_without_tools_echoes_with_note() -> None:
    reply = generate(req("tools", user("hello")))
    assert reply.text.endswith("hello")
    assert "no tools" in reply.text
    assert reply.finish_reason == "stop"


def test_lorem_default_length_and_max_tokens() -> None:
    reply = generate(req("lorem", user("go")))
    assert 2000 <= count_tokens(reply.text) <= 2010
    assert reply.finish_reason == "stop"
    short = generate(req("lorem", user("go"), max_tokens=25))
    assert short.finish_reason == "length"
    assert count_tokens(short.text) == 25
    assert reply.text.startswith(short.text)


def test_max_tokens_for_every_model() -> None:
    echo = generate(req("echo", user("one two three four five"), max_tokens=2))
    assert (echo.text, echo.finish_reason) == ("one two", "length")
    exact = generate(req("echo", user("one two"), max_completion_tokens=2))
    assert (exact.text, exact.finish_reason) == ("one two", "stop")
    think = generate(req("reasoning", user("hello"), max_tokens=3))
    assert think.finish_reason == "length"
    assert not think.text
    assert count_tokens(think.reasoning) == 3
    tool = generate(req("tools", user("Paris"), tools=[WEATHER], max_tokens=4))
    assert tool.finish_reason == "length"
    assert count_tokens(tool.tool_calls[0].arguments) == 4


def test_unknown_model() -> None:
    with pytest.raises(UnknownModelError, match="The model `nope` does not exist"):
        generate(req("nope", user("x")))


def test_mockreply_build_and_repieced() -> None:
    call = ToolCall.make("f", {"a": 1}, id="call_1")
    reply = MockReply.build("Hello there, world", reasoning="hmm ok", tool_calls=[call])
    assert reply.finish_reason == "tool_calls"
    assert (reply.text, reply.reasoning) == ("Hello there, world", "hmm ok")
    assert reply.tool_calls == [call]
    assert json.loads(call.arguments) == {"a": 1}
    drip = reply.repieced(1)
    assert all(len(p.text) == 1 for p in drip.parts if not isinstance(p, ToolCall))
    assert (drip.text, drip.reasoning) == (reply.text, reply.reasoning)
    assert drip.tool_calls[0].arguments == call.arguments
    assert MockReply.build("x", usage=MockTokenCounts(1, 2)).usage == MockTokenCounts(1, 2, 0)
    assert usage_for(MockReply.build("x", usage=MockTokenCounts(1, 2)), {}) == MockTokenCounts(
        1, 2, 0
    )


def test_anthropic_request_conversion() -> None:
    body = {
        "model": "tools",
        "max_tokens": 50,
        "system": [{"type": "text", "text": "be nice"}],
        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}],
            },
        ],
    }
    chat = wire.to_chat_request("anthropic", body)
    assert chat["max_tokens"] == 50
    assert chat["tools"][0]["function"]["name"] == "f"
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert chat["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"a":1}'
    reply = generate(chat)
    assert "Result of f: 42" in reply.text


def test_ollama_request_conversion() -> None:
    body = {
        "model": "tools",
        "options": {"num_predict": 7},
        "tools": [OTHER],
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "other", "arguments": {"x": 1}}}],
            },
            {"role": "tool", "tool_name": "other", "content": "done!"},
        ],
    }
    chat = wire.to_chat_request("ollama", body)
    assert chat["max_tokens"] == 7
    assert chat["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"x":1}'
    assert wire.is_stream("ollama", body)
    assert not wire.is_stream("openai", {})
    assert "done!" in generate(chat).text
