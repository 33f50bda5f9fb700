"""The built-in Lua adapters (``adapters/*.lua``) replayed against recorded provider bodies.

Streams go the real path: ``LuaAdapter`` -> ``httpx.MockTransport`` serving the recorded body ->
SSE/NDJSON framing -> ``transform_stream_chunk`` -> ``ChunkMapper``. Every stream must pass
``validate_stream``; the assertions name concrete text, reasoning, tool calls, usage and finish.
Non-stream bodies go through ``transform_response`` + ``map_response`` (the built-ins all
stream, so ``LuaAdapter`` never takes that path for them).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from notebook_llm.adapters.lua.chunk_mapping import build_request, map_response
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaSandbox
from notebook_llm.core.completion import Completion, assemble
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.core.protocol import (
    Event,
    GenerateOptions,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
)
from notebook_llm.core.stream_rules import validate_stream

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "adapters"
WIRE = Path(__file__).parent / "fixtures" / "wire"

BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "deepseek": "https://api.deepseek.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
    "mistral": "https://api.mistral.ai/v1",
    "groq": "https://api.groq.com/openai/v1",
    "github": "https://models.github.ai/inference",
    "ollama": "http://localhost:11434",
}
KEY = "sk-test-0123456789"
CONTENT_TYPES = {
    ".sse": "text/event-stream; charset=utf-8",
    ".ndjson": "application/x-ndjson",
    ".json": "application/json",
}


def options(provider: str, **kw: Any) -> GenerateOptions:
    kw.setdefault("messages", [Message.user("hi")])
    return GenerateOptions(
        provider=provider,
        model=kw.pop("model", "test-model"),
        base_url=BASE_URLS[provider],
        api_key=KEY,
        **kw,
    )


async def _pieces(body: bytes, size: int) -> AsyncIterator[bytes]:
    for i in range(0, len(body), size):
        yield body[i : i + size]


@dataclass
class Replay:
    events: list[Event]
    requests: list[httpx.Request] = field(default_factory=list)

    @property
    def completion(self) -> Completion:
        return assemble(self.events)

    @property
    def body(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.requests[0].content)
        return result


async def replay(
    adapter_name: str,
    body: bytes,
    *,
    status: int = 200,
    content_type: str = "text/event-stream",
    opts: GenerateOptions | None = None,
    piece: int | None = None,
) -> Replay:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        # An async iterator keeps the body a real stream (bytes content would be pre-read).
        content: Any = _pieces(body, piece or max(len(body), 1))
        return httpx.Response(status, headers={"content-type": content_type}, content=content)

    adapter = LuaAdapter.from_file(
        ADAPTERS / f"{adapter_name}.lua", transport=httpx.MockTransport(handler)
    )
    events = [e async for e in adapter.stream(opts or options(adapter_name))]
    return Replay(validate_stream(events), requests)


async def replay_fixture(rel: str, piece: int | None = None) -> Completion:
    path = WIRE / rel
    provider = rel.split("/")[0]
    result = await replay(
        provider, path.read_bytes(), content_type=CONTENT_TYPES[path.suffix], piece=piece
    )
    return result.completion


def map_fixture(rel: str) -> Completion:
    provider = rel.split("/")[0]
    sandbox = LuaSandbox((ADAPTERS / f"{provider}.lua").read_text(), name=provider)
    out = sandbox.call("transform_response", (WIRE / rel).read_text(encoding="utf-8"))
    events = map_response(json.loads(out), provider=provider, adapter=provider)
    return assemble(validate_stream(events))


# --------------------------------------------------------------------------------------------
# Expectations per recorded body


@dataclass
class Expect:
    finish: str
    text: str | None = None  # exact
    text_start: str | None = None
    text_len: int | None = None
    reasoning_start: str | None = None
    reasoning_len: int | None = None
    tools: list[tuple[str | None, str, dict[str, Any]]] = field(
        default_factory=list
    )  # (id, name, args)
    usage: tuple[int, int] | None = None  # input, output
    cache_read: int | None = None
    cache_write: int | None = None
    reasoning_tokens: int | None = None


EXPECT: dict[str, Expect] = {
    # OpenAI
    "openai/stream_text_include_usage.sse": Expect(
        "stop", text="1, 2, 3, 4, 5", usage=(14, 13), cache_read=0, reasoning_tokens=0
    ),
    "openai/stream_text_after_tool_result.sse": Expect(
        "stop", text="The result of \\( 1231 \\times 2331 \\) is \\( 2,869,461 \\).", usage=(87, 26)
    ),
    "openai/stream_tool_call_args_split.sse": Expect(
        "tool-calls",
        text="",
        tools=[("call_1EYWDzueHEp8OsB8jJSEp7WB", "multiply", {"a": 1231, "b": 2331})],
        usage=(54, 20),
    ),
    "openai/chat_completion_text.json": Expect(
        "stop",
        text_start="Hello! I'm just a computer program",
        text_len=115,
        usage=(13, 31),
        cache_read=0,
    ),
    # DeepSeek
    "deepseek/stream_reasoning.sse": Expect(
        "stop",
        text="2",
        reasoning_start='We need to answer "What is 1 + 1?"',
        reasoning_len=76,
        usage=(21, 27),
        cache_read=0,
        reasoning_tokens=25,
    ),
    "deepseek/stream_tool_call.sse": Expect(
        "tool-calls",
        text="",
        reasoning_start="Let me get the current date.",
        reasoning_len=28,
        tools=[("call_00_tz6Vq4aG59EtpFCVbpoY3635", "get_date", {})],
        usage=(297, 35),
        reasoning_tokens=7,
    ),
    "deepseek/stream_tool_call_args_split.sse": Expect(
        "tool-calls",
        text="",
        reasoning_start="The user is asking for the weather in Sa",
        reasoning_len=191,
        tools=[("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", {"location": "San Francisco"})],
        usage=(339, 83),
        cache_read=320,
        reasoning_tokens=39,
    ),
    "deepseek/chat_completion_reasoning.json": Expect(
        "stop",
        text_start='The word "strawberry" contains three instances',
        text_len=107,
        reasoning_start="We are asked:",
        reasoning_len=935,
        usage=(18, 345),
        reasoning_tokens=315,
    ),
    # Anthropic
    "anthropic/stream_text.sse": Expect(
        "stop", text="Hello", usage=(10, 4), cache_read=0, cache_write=0
    ),
    "anthropic/stream_text_multibyte_emoji.sse": Expect(
        "stop", text_start="The version is **0.32a0**.", text_len=127, usage=(617, 41)
    ),
    "anthropic/stream_thinking.sse": Expect(
        "stop",
        text_start="1. **Pouch** - references their iconic bill pouch\n2. **Pelé**",
        text_len=89,
        reasoning_start="The user wants two names for a pet pelican",
        reasoning_len=289,
        usage=(46, 133),
    ),
    "anthropic/stream_thinking_then_tool_use.sse": Expect(
        "tool-calls",
        text="",
        reasoning_start="The user wants me to:\n1. Use the fixed_version tool",
        reasoning_len=180,
        tools=[("toolu_01825dXWLSoJwCst1qTsiWdb", "fixed_version", {})],
        usage=(598, 92),
        reasoning_tokens=53,
    ),
    "anthropic/stream_tool_use_parallel_empty_input.sse": Expect(
        "tool-calls",
        text="",
        tools=[
            ("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
            ("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}),
        ],
        usage=(542, 62),
    ),
    "anthropic/message_text.json": Expect(
        "stop", text_start="Hello! As an AI language model", text_len=134, usage=(13, 35)
    ),
    "anthropic/message_tool_use_parallel.json": Expect(
        "tool-calls",
        text="I'll execute all 3 parallel searches simultaneously right now!",
        tools=[
            (
                "toolu_01NwzvrxEz6tvT3A8ydvMtHu",
                "parallel_local_search_one",
                {"query": "latest OpenAI model release notes"},
            ),
            (
                "toolu_01YCxzSB1suk9uPVC1uwfHz9",
                "parallel_local_search_two",
                {"query": "latest Anthropic model release notes"},
            ),
            (
                "toolu_01Mauvxzv58eDY7pUt9HMKGy",
                "parallel_local_search_three",
                {"query": "latest Gemini model release notes"},
            ),
        ],
        usage=(914, 169),
    ),
    # Gemini (output = candidates + thoughts, OpenAI semantics)
    "gemini/stream_text.sse": Expect(
        "stop", text="The capital of France is Paris.\n", usage=(13, 8)
    ),
    "gemini/stream_thinking.sse": Expect(
        "stop",
        text_start="This is a great question! Safely crossing the street",
        text_len=1938,
        reasoning_start="**Clarifying User Goals**",
        reasoning_len=1575,
        usage=(34, 469 + 787),
        reasoning_tokens=787,
    ),
    "gemini/stream_function_call.sse": Expect(
        "tool-calls",
        text="",
        tools=[(None, "get_country", {})],
        usage=(29, 10 + 202),
        reasoning_tokens=202,
    ),
    "gemini/stream_function_calls_parallel.sse": Expect(
        "tool-calls",
        text="",
        tools=[
            ("0b3pdf3o", "favorite_color", {"_person": "Joe"}),
            ("brynwdxm", "favorite_color", {"_person": "Hadley"}),
        ],
        usage=(85, 35 + 127),
    ),
    "gemini/vertex_stream_function_call_partial_args.sse": Expect(
        "tool-calls",
        text="",
        tools=[
            (None, "getWeather", {"location": "Boston"}),
            (None, "getWeather", {"location": "San Francisco"}),
        ],
        usage=(26, 23 + 132),
    ),
    "gemini/generate_content_text.json": Expect("stop", text="Hello", usage=(1135, 1 + 22)),
    "gemini/generate_content_function_calls_parallel.json": Expect(
        "tool-calls",
        text="",
        tools=[
            (None, "parallel_local_search_one", {"query": "latest OpenAI model release notes"}),
            (None, "parallel_local_search_two", {"query": "latest Anthropic model release notes"}),
            (None, "parallel_local_search_three", {"query": "latest Gemini model release notes"}),
        ],
        usage=(291, 70 + 67),
    ),
    # Mistral
    "mistral/stream_text.sse": Expect("stop", text="2", usage=(22, 2)),
    "mistral/stream_text_multibyte.sse": Expect(
        "stop",
        text_start="Your name is **Steve**—nice to meet you! 😊 Let me know if there’s",
        text_len=105,
        usage=(25, 31),
    ),
    "mistral/stream_tool_call.sse": Expect(
        "tool-calls",
        text="",
        tools=[("gSIMJiOkT", "weather", {"location": "San Francisco"})],
        usage=(124, 22),
    ),
    "mistral/chat_completion_text.json": Expect(
        "stop", text_start='{\n  "title": "Apples are tasty"', usage=(44, 27)
    ),
    "mistral/chat_completion_tool_call.json": Expect(
        "tool-calls",
        text="",
        tools=[("pcZFHqej8", "get_weather", {"city": "Paris"})],
        usage=(70, 12),
        cache_read=69,
    ),
    # Groq
    "groq/stream_text.sse": Expect(
        "stop", text_start='Introducing "Luminaria" - a new holiday', text_len=3189, usage=(45, 662)
    ),
    "groq/stream_reasoning_text.sse": Expect(
        "stop",
        text="The tool returned the expected result for the valid call.",
        reasoning_start="The user wants to test error handling",
        reasoning_len=176,
        usage=(339, 58),
        reasoning_tokens=38,
    ),
    "groq/stream_reasoning_tool_call.sse": Expect(
        "tool-calls",
        text="",
        reasoning_start="We need to call the function",
        reasoning_len=92,
        tools=[
            (
                "fc_bfb39741-3748-4def-9886-a93fc9c64a90",
                "get_something_by_name",
                {"name": "example"},
            )
        ],
        usage=(304, 49),
        reasoning_tokens=23,
    ),
    "groq/chat_completion_text.json": Expect(
        "stop", text="The capital of France is Paris.", usage=(48, 8)
    ),
    # Ollama
    "ollama/stream_text.ndjson": Expect(
        "stop", text="Okay, here we go!\n\n1, 2, 3, 4, 5\n", usage=(16, 22)
    ),
    "ollama/stream_text_multibyte.ndjson": Expect(
        "stop", text="Hello there! How can I help you today? 😊", usage=(11, 12)
    ),
    "ollama/generate_stream_thinking.ndjson": Expect(
        "stop",
        text="Soft, swift, curious.",
        reasoning_start="We need to respond with three words",
        reasoning_len=87,
        usage=(81, 34),
    ),
}


def check(c: Completion, e: Expect) -> None:
    assert c.finish is not None
    assert c.finish.kind == e.finish, c.finish.to_dict()
    assert c.finish.failure is None
    if e.text is not None:
        assert c.text == e.text
    if e.text_start is not None:
        assert c.text.startswith(e.text_start)
    if e.text_len is not None:
        assert len(c.text) == e.text_len
    if e.reasoning_start is not None:
        assert c.reasoning.startswith(e.reasoning_start)
    if e.reasoning_len is not None:
        assert len(c.reasoning) == e.reasoning_len
    else:
        assert c.reasoning == "" or e.reasoning_start is not None
    got = [(t.id, t.name, t.args) for t in c.tool_calls]
    assert [(n, a) for _, n, a in got] == [(n, a) for _, n, a in e.tools]
    for (gid, _, _), (eid, _, _) in zip(got, e.tools, strict=True):
        if eid is not None:
            assert gid == eid
    assert len({gid for gid, _, _ in got}) == len(got), "tool call ids must be unique"
    if e.usage is not None:
        assert c.usage is not None
        assert (c.usage.input_tokens, c.usage.output_tokens) == e.usage
        if e.cache_read is not None:
            assert c.usage.cache_read_tokens == e.cache_read
        if e.cache_write is not None:
            assert c.usage.cache_write_tokens == e.cache_write
        if e.reasoning_tokens is not None:
            assert c.usage.reasoning_tokens == e.reasoning_tokens


def _recorded(kind: str) -> list[str]:
    suffixes = (".sse", ".ndjson") if kind == "stream" else (".json",)
    return sorted(
        f"{p.parent.name}/{p.name}"
        for p in WIRE.glob("*/*")
        if p.suffix in suffixes and not p.name.startswith("error_")
    )


def test_every_recorded_success_body_has_an_expectation() -> None:
    assert set(_recorded("stream")) | set(_recorded("json")) == set(EXPECT)


@pytest.mark.parametrize("rel", _recorded("stream"))
async def test_stream_fixture(rel: str) -> None:
    check(await replay_fixture(rel), EXPECT[rel])


@pytest.mark.parametrize("rel", _recorded("stream"))
async def test_stream_fixture_split_into_small_pieces(rel: str) -> None:
    check(await replay_fixture(rel, piece=7), EXPECT[rel])


@pytest.mark.parametrize("rel", _recorded("json"))
def test_response_fixture(rel: str) -> None:
    check(map_fixture(rel), EXPECT[rel])


# --------------------------------------------------------------------------------------------
# Error bodies: HTTP status -> LlmError code, with the provider's message

ERRORS: dict[str, str] = {
    "openai/error_400_unsupported_parameter.json": ErrorCode.INVALID_REQUEST,
    "openai/error_401_invalid_api_key.json": ErrorCode.AUTH,
    "openai/error_404_model_not_found.json": ErrorCode.NOT_FOUND,
    "deepseek/error_400.json": ErrorCode.INVALID_REQUEST,
    "anthropic/error_400_invalid_request.json": ErrorCode.INVALID_REQUEST,
    "anthropic/error_401_authentication.json": ErrorCode.AUTH,
    "anthropic/error_404_not_found.json": ErrorCode.NOT_FOUND,
    "anthropic/error_429_rate_limit.json": ErrorCode.RATE_LIMIT,
    "anthropic/error_529_overloaded.json": ErrorCode.SERVER,
    "gemini/error_400_api_key_invalid_on_stream.json": ErrorCode.AUTH,  # API_KEY_INVALID
    "gemini/error_403_permission_denied.json": ErrorCode.AUTH,
    "gemini/error_404_model_not_found_on_stream.json": ErrorCode.NOT_FOUND,
    "gemini/error_429_resource_exhausted.json": ErrorCode.RATE_LIMIT,
    "groq/error_400_tool_use_failed.json": ErrorCode.INVALID_REQUEST,
    "groq/error_404_model_not_found.json": ErrorCode.NOT_FOUND,
}


def test_every_recorded_error_body_has_an_expectation() -> None:
    found = {f"{p.parent.name}/{p.name}" for p in WIRE.glob("*/error_*")}
    assert found == set(ERRORS)


@pytest.mark.parametrize("rel", sorted(ERRORS))
async def test_error_fixture(rel: str) -> None:
    provider, name = rel.split("/")
    status = int(name.split("_")[1].split(".")[0])
    body = (WIRE / rel).read_bytes()
    # Gemini labels its stream errors text/event-stream although the body is plain JSON.
    ctype = "text/event-stream" if "on_stream" in name else "application/json"
    with pytest.raises(LlmError) as info:
        await replay(provider, body, status=status, content_type=ctype)
    err = info.value
    assert err.code == ERRORS[rel], str(err)
    assert err.status == status
    provider_message = " ".join(json.loads(body)["error"]["message"].split())
    assert provider_message[:80] in err.message
    assert KEY not in str(err)


@pytest.mark.parametrize("rel", sorted(ERRORS))
def test_error_body_through_transform_response_is_an_error_finish(rel: str) -> None:
    """A 200 that carries an error body (seen behind proxies) still ends as an error."""
    provider = rel.split("/")[0]
    sandbox = LuaSandbox((ADAPTERS / f"{provider}.lua").read_text(), name=provider)
    out = json.loads(sandbox.call("transform_response", (WIRE / rel).read_text()))
    c = assemble(validate_stream(map_response(out, provider=provider)))
    assert c.finish is not None
    assert c.finish.kind == "error"
    assert c.finish.failure is not None
    assert c.finish.failure.message == json.loads((WIRE / rel).read_text())["error"]["message"]


# --------------------------------------------------------------------------------------------
# Request side: what each adapter sends for a representative conversation

PNG = "iVBORw0KGgo="
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
NOARGS = {"type": "object", "properties": {}, "required": []}


def conversation(provider: str, **kw: Any) -> GenerateOptions:
    return options(
        provider,
        model="model-x",
        system="Be brief.",
        messages=[
            Message(
                "user",
                [TextBlock("What is in this image?"), ImageBlock(data=PNG, media_type="image/png")],
            ),
            Message(
                "assistant",
                [
                    ReasoningBlock("I should check."),
                    TextBlock("Let me check."),
                    ToolCallBlock("call_abc", "get_weather", '{"city":"Paris"}'),
                ],
            ),
            Message.tool_results([ToolResultBlock.of("call_abc", "18C and sunny")]),
        ],
        tools=[
            ToolSchema("get_weather", "Get the weather", WEATHER),
            ToolSchema("now", "Time", NOARGS),
        ],
        temperature=0.5,
        max_tokens=256,
        stop_sequences=["END"],
        **kw,
    )


# A small valid stream per provider, to answer the recorded request.
ANSWER = {
    "openai": "openai/stream_text_include_usage.sse",
    "deepseek": "deepseek/stream_reasoning.sse",
    "anthropic": "anthropic/stream_text.sse",
    "gemini": "gemini/stream_text.sse",
    "mistral": "mistral/stream_text.sse",
    "groq": "groq/stream_reasoning_tool_call.sse",
    "github": "openai/stream_text_include_usage.sse",
    "ollama": "ollama/stream_text.ndjson",
}


async def sent(provider: str, **kw: Any) -> tuple[httpx.Request, dict[str, Any]]:
    path = WIRE / ANSWER[provider]
    result = await replay(
        provider,
        path.read_bytes(),
        content_type=CONTENT_TYPES[path.suffix],
        opts=conversation(provider, **kw),
    )
    assert result.completion.finish is not None
    assert result.completion.finish.failure is None
    return result.requests[0], result.body


@pytest.mark.parametrize("provider", ["openai", "deepseek", "groq", "github", "mistral"])
async def test_request_openai_compatible(provider: str) -> None:
    request, body = await sent(provider)
    assert str(request.url) == BASE_URLS[provider] + "/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    assert msgs[0]["content"] == "Be brief."
    assert msgs[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
    }
    assert msgs[2]["tool_calls"] == [
        {
            "id": "call_abc",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_abc", "content": "18C and sunny"}
    assert body["tools"][1]["function"]["parameters"] == NOARGS  # "required": [] stays a list
    assert body["stream"] is True
    assert body["stop"] == ["END"]
    assert body["model"] == "model-x"
    kept_reasoning = provider == "deepseek"
    assert ("reasoning_content" in msgs[2]) is kept_reasoning
    if kept_reasoning:
        assert msgs[2]["reasoning_content"] == "I should check."
    # The openai adapter sends max_tokens (what OpenAI-compatible servers read); the openai
    # provider preset switches the field (see test_max_tokens_field_*).
    tokens_key = "max_completion_tokens" if provider == "groq" else "max_tokens"
    assert body[tokens_key] == 256
    assert {"max_tokens", "max_completion_tokens"} - {tokens_key} <= {
        "max_tokens",
        "max_completion_tokens",
    } - set(body)
    if provider in ("openai", "deepseek", "github"):
        assert body["stream_options"] == {"include_usage": True}
    else:
        assert "stream_options" not in body
    assert "disable_thinking" not in body


@pytest.mark.parametrize(
    ("provider", "field"),
    [
        ("openai", "max_completion_tokens"),  # OpenAI's own API (the openai preset)
        ("openai", "max_tokens"),
        ("groq", "max_tokens"),  # the setting wins over the script's own choice
        ("groq", "max_completion_tokens"),
    ],
)
async def test_max_tokens_field_puts_the_limit_under_the_configured_name(
    provider: str, field: str
) -> None:
    _, body = await sent(provider, max_tokens_field=field)
    other = "max_tokens" if field == "max_completion_tokens" else "max_completion_tokens"
    assert body[field] == 256
    assert other not in body
    assert body["messages"][0]["content"] == "Be brief."  # the rest of the body is kept


async def test_max_tokens_field_leaves_other_body_shapes_alone() -> None:
    _, body = await sent("gemini", max_tokens_field="max_completion_tokens")
    assert body["generationConfig"]["maxOutputTokens"] == 256
    assert "max_completion_tokens" not in body


async def test_request_github_sends_api_version_header() -> None:
    request, _ = await sent("github")
    assert request.headers["x-github-api-version"] == "2022-11-28"


async def test_request_anthropic() -> None:
    request, body = await sent("anthropic", extra_body={"top_k": 3})
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert body["system"] == "Be brief."
    assert body["max_tokens"] == 256
    assert body["stop_sequences"] == ["END"]
    assert body["top_k"] == 3
    assert body["tools"][0] == {
        "name": "get_weather",
        "description": "Get the weather",
        "input_schema": WEATHER,
    }
    assert body["tool_choice"] == {"type": "auto"}
    user, assistant, results = body["messages"]
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this image?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ],
    }
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check."},
            {
                "type": "tool_use",
                "id": "call_abc",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
        ],
    }
    assert results == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_abc", "content": "18C and sunny"}],
    }


def _transform(provider: str, opts: GenerateOptions, *, stream: bool = True) -> dict[str, Any]:
    sandbox = LuaSandbox((ADAPTERS / f"{provider}.lua").read_text(), name=provider)
    result: dict[str, Any] = json.loads(
        sandbox.call("transform_request", json.dumps(build_request(opts, stream=stream)))
    )
    return result


def test_request_anthropic_thinking_merged_tool_results_and_defaults() -> None:
    opts = options(
        "anthropic",
        messages=[
            Message.user("q"),
            Message("assistant", [ToolCallBlock("a", "f", "{}"), ToolCallBlock("b", "f", "")]),
            Message.tool_results(
                [ToolResultBlock.of("a", "1"), ToolResultBlock.of("b", "bad", is_error=True)]
            ),
            Message.user("thanks"),
        ],
        reasoning_effort="high",
        temperature=0.2,
    )
    body = _transform("anthropic", opts)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert body["max_tokens"] > 16384  # default 4096 raised above the budget
    assert "temperature" not in body
    last = body["messages"][-1]
    assert last["role"] == "user"
    assert [b["type"] for b in last["content"]] == ["tool_result", "tool_result", "text"]
    assert last["content"][1]["is_error"] is True
    assert body["messages"][1]["content"][1]["input"] == {}
    assert _transform("anthropic", options("anthropic"))["max_tokens"] == 4096


async def test_request_gemini() -> None:
    request, body = await sent("gemini")
    assert str(request.url).startswith(BASE_URLS["gemini"] + "/models/model-x:")
    assert request.headers["x-goog-api-key"] == KEY
    assert "authorization" not in request.headers
    assert KEY not in str(request.url)
    assert "model" not in body
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    user, model, results = body["contents"]
    assert user == {
        "role": "user",
        "parts": [
            {"text": "What is in this image?"},
            {"inlineData": {"mimeType": "image/png", "data": PNG}},
        ],
    }
    assert model["role"] == "model"
    assert model["parts"][0] == {"text": "Let me check."}
    assert model["parts"][1]["functionCall"] == {
        "name": "get_weather",
        "args": {"city": "Paris"},
        "id": "call_abc",
    }
    assert model["parts"][1]["thoughtSignature"] == "skip_thought_signature_validator"
    assert results == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "get_weather",
                    "response": {"result": "18C and sunny"},
                    "id": "call_abc",
                }
            }
        ],
    }
    decl = body["tools"][0]["functionDeclarations"]
    assert decl[0] == {
        "name": "get_weather",
        "description": "Get the weather",
        "parametersJsonSchema": WEATHER,
    }
    assert decl[1]["parametersJsonSchema"] == NOARGS
    assert body["generationConfig"] == {
        "temperature": 0.5,
        "maxOutputTokens": 256,
        "stopSequences": ["END"],
    }


async def test_request_gemini_uses_stream_endpoint() -> None:
    request, _ = await sent("gemini")
    assert str(request.url) == BASE_URLS["gemini"] + "/models/model-x:streamGenerateContent?alt=sse"


def test_request_gemini_non_stream_endpoint_and_thinking() -> None:
    sandbox = LuaSandbox((ADAPTERS / "gemini.lua").read_text(), name="gemini")
    assert sandbox.meta()["endpoint"] == "/models/{model}:generateContent"
    body = _transform("gemini", options("gemini", reasoning_effort="low"))
    assert body["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True,
        "thinkingBudget": 1024,
    }
    body = _transform("gemini", options("gemini", reasoning_effort="off"))
    assert body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}


def test_request_gemini_tool_result_without_matching_call_is_a_clear_error() -> None:
    opts = options(
        "gemini",
        messages=[Message.user("q"), Message.tool_results([ToolResultBlock.of("nope", "x")])],
    )
    with pytest.raises(LlmError) as info:
        _transform("gemini", opts)
    assert info.value.code == ErrorCode.ADAPTER_ERROR
    assert "nope" in info.value.message


async def test_request_ollama() -> None:
    request, body = await sent("ollama", reasoning_effort="off")
    assert str(request.url) == "http://localhost:11434/api/chat"
    msgs = body["messages"]
    assert msgs[0] == {"role": "system", "content": "Be brief."}
    assert msgs[1] == {"role": "user", "content": "What is in this image?", "images": [PNG]}
    assert msgs[2] == {
        "role": "assistant",
        "content": "Let me check.",
        "thinking": "I should check.",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
    }
    assert msgs[3] == {"role": "tool", "content": "18C and sunny", "tool_name": "get_weather"}
    assert body["options"] == {"temperature": 0.5, "num_predict": 256, "stop": ["END"]}
    assert body["think"] is False
    assert body["stream"] is True
    assert "tool_choice" not in body
    assert body["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize(("effort", "think"), [("high", "high"), ("on", True), ("none", False)])
def test_request_ollama_think(effort: str, think: Any) -> None:
    assert _transform("ollama", options("ollama", reasoning_effort=effort))["think"] == think


def test_request_deepseek_thinking_switch() -> None:
    body = _transform("deepseek", options("deepseek", reasoning_effort="off"))
    assert body["thinking"] == {"type": "disabled"}
    assert "reasoning_effort" not in body
    assert (
        _transform("deepseek", options("deepseek", reasoning_effort="high"))["reasoning_effort"]
        == "high"
    )


# --------------------------------------------------------------------------------------------
# Edge cases without a public recording (synthetic bodies in the providers' real shapes)


def sse(*payloads: Any, done: bool = False) -> bytes:
    lines = [f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n" for p in payloads]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


async def test_anthropic_error_event_mid_stream() -> None:
    body = sse(
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Partial"},
        },
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    c = (await replay("anthropic", body)).completion
    assert c.text == "Partial"
    assert c.finish is not None
    assert c.finish.kind == "error"
    assert c.finish.failure is not None
    assert (c.finish.failure.code, c.finish.failure.message) == (ErrorCode.SERVER, "Overloaded")


async def test_anthropic_max_tokens_inside_tool_input() -> None:
    body = sse(
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"text": "abc'},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "max_tokens"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    )
    c = (await replay("anthropic", body)).completion
    assert c.finish is not None
    assert c.finish.kind == "max-tokens"
    assert c.finish.failure is not None
    assert "write" in c.finish.failure.message
    assert c.tool_calls[0].arguments == '{"text": "abc'
    assert c.usage is not None
    assert (c.usage.input_tokens, c.usage.output_tokens) == (5, 9)  # merged, not overwritten


async def test_anthropic_stream_without_message_stop_is_stream_closed() -> None:
    body = sse(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
    )
    c = (await replay("anthropic", body)).completion
    assert c.text == "Hi"
    assert c.finish is not None
    assert c.finish.failure is not None
    assert c.finish.failure.code == ErrorCode.STREAM_CLOSED


async def test_openai_in_stream_error_and_content_filter() -> None:
    body = sse(
        {"choices": [{"index": 0, "delta": {"content": "x"}}]},
        {"error": {"message": "quota gone", "type": "insufficient_quota"}},
    )
    c = (await replay("openai", body)).completion
    assert c.finish is not None
    assert c.finish.failure is not None
    assert (c.finish.failure.code, c.finish.failure.message) == (ErrorCode.QUOTA, "quota gone")
    body = sse(
        {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "content_filter"}]},
        done=True,
    )
    c = (await replay("github", body)).completion
    assert c.finish is not None
    assert c.finish.failure is not None
    assert c.finish.failure.code == "CONTENT_FILTER"


async def test_github_azure_style_stream() -> None:
    body = sse(
        {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": [{"prompt_index": 0}],
        },
        {
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
            "model": "gpt-4o",
        },
        {"choices": [{"index": 0, "delta": {"content": "Hello"}}]},
        {"choices": [{"index": 0, "delta": {"content": None}, "finish_reason": "stop"}]},
        {
            "choices": [{"index": 0, "delta": {"content": None}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        },
        done=True,
    )
    c = (await replay("github", body)).completion
    assert c.text == "Hello"
    assert c.usage is not None
    assert (c.usage.input_tokens, c.usage.output_tokens) == (3, 1)


async def test_mistral_thinking_chunks_in_content_array() -> None:
    body = sse(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "content": [
                            {
                                "type": "thinking",
                                "thinking": [{"type": "text", "text": "Let me think"}],
                            }
                        ]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {"content": [{"type": "text", "text": "Answer"}]}}]},
        {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}]},
        done=True,
    )
    c = (await replay("mistral", body)).completion
    assert (c.reasoning, c.text) == ("Let me think", "Answer")


async def test_ollama_tool_calls_and_length() -> None:
    lines = [
        {
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "a", "arguments": {"x": 1}}},
                    {"function": {"name": "b", "arguments": {}}},
                ],
            },
            "done": False,
        },
        {
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 7,
            "eval_count": 3,
        },
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    c = (await replay("ollama", body, content_type="application/x-ndjson")).completion
    assert [(t.name, t.args) for t in c.tool_calls] == [("a", {"x": 1}), ("b", {})]
    assert c.finish is not None
    assert c.finish.kind == "tool-calls"
    lines = [
        {"message": {"role": "assistant", "content": "cut"}, "done": False},
        {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "length"},
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    c = (await replay("ollama", body, content_type="application/x-ndjson")).completion
    assert c.finish is not None
    assert c.finish.kind == "max-tokens"
    assert c.text == "cut"


async def test_ollama_stream_format_without_ndjson_content_type() -> None:
    """``stream_format = "ndjson"`` must select NDJSON even when the server says text/plain."""
    body = (WIRE / "ollama/stream_text.ndjson").read_bytes()
    c = (await replay("ollama", body, content_type="text/plain; charset=utf-8")).completion
    assert c.text == "Okay, here we go!\n\n1, 2, 3, 4, 5\n"


async def test_gzip_encoded_stream() -> None:
    """Providers may gzip the event stream (the Anthropic recordings were stored gzipped)."""
    raw = (WIRE / "anthropic/stream_text.sse").read_bytes()
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
        return httpx.Response(200, headers=headers, content=_pieces(gzip.compress(raw), 50))

    adapter = LuaAdapter.from_file(
        ADAPTERS / "anthropic.lua", transport=httpx.MockTransport(handler)
    )
    events = [e async for e in adapter.stream(options("anthropic"))]
    assert assemble(validate_stream(events)).text == "Hello"
