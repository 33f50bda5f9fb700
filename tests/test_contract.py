"""The Lua contract's pure-Python half: kernel request JSON, unified chunks -> protocol events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from notebook_llm.adapters.lua.chunk_mapping import ChunkMapper, build_request, map_response
from notebook_llm.core.completion import Completion, assemble
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.core.protocol import (
    BlockStart,
    Event,
    Finish,
    GenerateOptions,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSchema,
    Usage,
)
from notebook_llm.core.stream_rules import validate_stream

# --------------------------------------------------------------------------------------------
# build_request


def _opts(*messages: Message, **kw: Any) -> GenerateOptions:
    return GenerateOptions(provider="p", model="m", messages=list(messages), **kw)


def test_request_minimal_text() -> None:
    req = build_request(_opts(Message.user("hi")), stream=True)
    assert req == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_request_unset_sampling_fields_are_absent_and_model_none_omitted() -> None:
    req = build_request(GenerateOptions(provider="p", messages=[Message.user("x")]), stream=False)
    assert set(req) == {"messages", "stream"}
    assert req["stream"] is False


def test_request_system_goes_first() -> None:
    req = build_request(
        _opts(Message.system("inline"), Message.user("q"), system="top"), stream=False
    )
    assert req["messages"] == [
        {"role": "system", "content": "top"},
        {"role": "system", "content": "inline"},
        {"role": "user", "content": "q"},
    ]


def test_request_multi_turn_with_reasoning_and_tool_calls() -> None:
    assistant = Message(
        "assistant",
        [
            ReasoningBlock("let me "),
            ReasoningBlock("think"),
            TextBlock("Calling."),
            ToolCallBlock("c1", "add", '{"a":1}'),
            ToolCallBlock("c2", "noargs", ""),
        ],
    )
    results = Message.tool_results(
        [ToolResultBlock.of("c1", "2"), ToolResultBlock.of("c2", "boom", is_error=True)]
    )
    req = build_request(
        _opts(Message.user("q"), assistant, results, Message.user("next")), stream=True
    )
    msgs = req["messages"]
    assert msgs[1] == {
        "role": "assistant",
        "content": "Calling.",
        "reasoning_content": "let me think",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}},
            {"id": "c2", "type": "function", "function": {"name": "noargs", "arguments": "{}"}},
        ],
    }
    assert msgs[2] == {"role": "tool", "tool_call_id": "c1", "content": "2"}
    assert msgs[3] == {"role": "tool", "tool_call_id": "c2", "content": "boom", "is_error": True}
    assert msgs[4] == {"role": "user", "content": "next"}


def test_request_plain_assistant_has_no_reasoning_or_tool_calls_keys() -> None:
    req = build_request(_opts(Message.user("a"), Message.assistant("b")), stream=True)
    assert req["messages"][1] == {"role": "assistant", "content": "b"}


def test_request_tool_results_mixed_with_text_put_text_after() -> None:
    msg = Message("user", [TextBlock("and also"), ToolResultBlock.of("c1", "ok")])
    msgs = build_request(_opts(msg), stream=False)["messages"]
    assert msgs == [
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": "and also"},
    ]


def test_request_images_make_a_parts_array() -> None:
    msg = Message(
        "user",
        [
            TextBlock("what is this?"),
            ImageBlock(data="AAAA", media_type="image/jpeg"),
            ImageBlock(url="https://x/y.png"),
        ],
    )
    content = build_request(_opts(msg), stream=False)["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]


def test_request_tools_sampling_effort_and_extra_body() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": []}
    req = build_request(
        _opts(
            Message.user("q"),
            tools=[ToolSchema("add", "adds", schema)],
            temperature=0.2,
            max_tokens=100,
            stop_sequences=["END"],
            reasoning_effort="high",
            extra_body={"top_k": 5, "temperature": 0.3},
        ),
        stream=True,
    )
    assert req["tools"] == [
        {
            "type": "function",
            "function": {"name": "add", "description": "adds", "parameters": schema},
        }
    ]
    assert req["tool_choice"] == "auto"
    assert req["max_tokens"] == 100
    assert req["stop"] == ["END"]
    assert req["reasoning_effort"] == "high"
    assert "disable_thinking" not in req
    assert req["top_k"] == 5
    assert req["temperature"] == 0.3  # extra_body wins
    json.dumps(req)  # serialisable


@pytest.mark.parametrize("effort", ["off", "none"])
def test_request_effort_off_disables_thinking(effort: str) -> None:
    req = build_request(_opts(Message.user("q"), reasoning_effort=effort), stream=True)
    assert req["disable_thinking"] is True
    assert req["reasoning_effort"] == effort


@pytest.mark.parametrize(
    "message",
    [
        Message("assistant", [ImageBlock(url="https://x")]),
        Message("user", [ToolCallBlock("c", "f", "{}")]),
        Message("user", [ToolResultBlock("c", [ImageBlock(data="AA")])]),
    ],
)
def test_request_unsupported_content_raises(message: Message) -> None:
    with pytest.raises(LlmError) as info:
        build_request(_opts(message), stream=True)
    assert info.value.code == ErrorCode.UNSUPPORTED_CONTENT


# --------------------------------------------------------------------------------------------
# ChunkMapper


def run(*chunks: dict[str, Any], end: bool = True, error: LlmError | None = None) -> Completion:
    mapper = ChunkMapper("prov", "adp")
    events: list[Event] = []
    for chunk in chunks:
        events.extend(mapper.feed(chunk))
    if end:
        mapper.mark_end()
    events.extend(mapper.finish(error))
    validate_stream(events)
    return assemble(events)


def test_text_and_reasoning_are_one_block_each_in_first_seen_order() -> None:
    c = run(
        {"reasoning_content": "a"},
        {"content": "x"},
        {"reasoning_content": "b"},
        {"content": "y", "done": True},
    )
    assert [b.type for b in c.blocks] == ["reasoning", "text"]
    assert c.reasoning == "ab"
    assert c.text == "xy"
    assert c.finish is not None
    assert c.finish.kind == "stop"


def test_reasoning_before_content_within_one_chunk() -> None:
    c = run({"content": "answer", "reasoning_content": "think", "done": True})
    assert [b.type for b in c.blocks] == ["reasoning", "text"]


def test_empty_and_null_fields_are_ignored() -> None:
    mapper = ChunkMapper()
    assert mapper.feed({"content": "", "reasoning_content": None, "tool_calls": []}) == []


def test_singular_tool_call_with_object_arguments() -> None:
    c = run(
        {
            "tool_call": {"id": "t1", "type": "function", "name": "f", "arguments": {"x": 1}},
            "done": True,
        }
    )
    (call,) = c.tool_calls
    assert (call.id, call.name, call.args) == ("t1", "f", {"x": 1})
    assert c.finish is not None
    assert c.finish.kind == "tool-calls"


def test_singular_tool_call_with_string_arguments() -> None:
    c = run({"tool_call": {"id": "t1", "name": "f", "arguments": '{"x": 2}'}, "done": True})
    assert c.tool_calls[0].args == {"x": 2}


def test_openai_delta_shape_split_arguments() -> None:
    c = run(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]},
        {
            "tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}],
            "finish_reason": "tool_calls",
        },
    )
    (call,) = c.tool_calls
    assert (call.id, call.name, call.arguments) == ("c1", "f", '{"a":1}')


def test_kernel_shape_split_arguments() -> None:
    c = run(
        {
            "tool_calls": [
                {
                    "stream_index": 3,
                    "id": "k1",
                    "type": "function",
                    "name": "g",
                    "raw_arguments": "",
                }
            ]
        },
        {"tool_calls": [{"stream_index": 3, "raw_arguments": '{"b":'}]},
        {"tool_calls": [{"stream_index": 3, "raw_arguments": "2}"}]},
        {"done": True},
    )
    (call,) = c.tool_calls
    assert (call.id, call.name, call.args) == ("k1", "g", {"b": 2})


def test_parallel_interleaved_calls_keep_first_seen_order() -> None:
    c = run(
        {"content": "Let me check."},
        {"tool_calls": [{"index": 1, "id": "second", "function": {"name": "b", "arguments": "{"}}]},
        {"tool_calls": [{"index": 0, "id": "first", "function": {"name": "a", "arguments": "{"}}]},
        {
            "tool_calls": [
                {"index": 0, "function": {"arguments": "}"}},
                {"index": 1, "function": {"arguments": "}"}},
            ]
        },
        {"finish_reason": "tool_calls"},
    )
    assert [(b.type, getattr(b, "id", None)) for b in c.blocks] == [
        ("text", None),
        ("tool-call", "second"),
        ("tool-call", "first"),
    ]
    assert all(t.arguments == "{}" for t in c.tool_calls)


def test_whole_calls_without_index_are_matched_by_id() -> None:
    c = run(
        {"tool_calls": [{"id": "m1", "function": {"name": "w", "arguments": '{"q":1}'}}]},
        {"tool_calls": [{"id": "m2", "function": {"name": "w", "arguments": '{"q":2}'}}]},
        {"finish_reason": "tool_calls"},
    )
    assert [(t.id, t.args) for t in c.tool_calls] == [("m1", {"q": 1}), ("m2", {"q": 2})]


def test_same_index_with_a_different_id_is_a_new_call() -> None:
    c = run(
        {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "a", "arguments": "{}"}}]},
        {"tool_calls": [{"index": 0, "id": "y", "function": {"name": "b", "arguments": "{}"}}]},
        {"done": True},
    )
    assert [t.id for t in c.tool_calls] == ["x", "y"]


def test_missing_ids_are_synthesized_and_nameless_fragments_continue_the_last_call() -> None:
    c = run(
        {"tool_calls": [{"name": "a", "arguments": {"k": 1}}, {"name": "b", "arguments": ""}]},
        {"tool_calls": [{"arguments": '{"z":'}]},
        {"tool_calls": [{"arguments": "0}"}]},
        {"done": True},
    )
    assert [(t.id, t.name, t.args) for t in c.tool_calls] == [
        ("call_0", "a", {"k": 1}),
        ("call_1", "b", {"z": 0}),
    ]


def test_first_tool_delta_carries_the_name_even_when_the_name_comes_late() -> None:
    mapper = ChunkMapper()
    events = mapper.feed(
        {"tool_calls": [{"index": 0, "id": "c", "function": {"arguments": '{"a"'}}]}
    )
    assert events == []  # held until the name is known
    events = mapper.feed(
        {"tool_calls": [{"index": 0, "function": {"name": "late", "arguments": ":1}"}}]}
    )
    assert isinstance(events[0], BlockStart)
    first = events[1]
    assert isinstance(first, ToolCallDelta)
    assert (first.name, first.arguments_delta) == ("late", '{"a":1}')


def test_anthropic_empty_arguments_stay_raw_and_parse_as_empty_object() -> None:
    c = run(
        {"tool_calls": [{"stream_index": 0, "id": "t", "name": "noargs", "raw_arguments": ""}]},
        {"finish_reason": "max_tokens"},
    )
    (call,) = c.tool_calls
    assert call.arguments == ""
    assert call.args == {}
    assert c.finish is not None
    assert c.finish.kind == "max-tokens"
    assert c.finish.failure is None  # empty arguments are not "cut off"


def test_usage_frames_merge_field_by_field() -> None:
    c = run(
        {"usage": {"prompt": 100, "completion": 1, "cache_read": 40, "cache_write": 7}},
        {"content": "x"},
        {"usage": {"completion": 50, "reasoning_tokens": 20, "cache_miss": 60}, "done": True},
    )
    assert c.usage is not None
    assert c.usage.to_dict() == {
        "inputTokens": 100,
        "outputTokens": 50,
        "cacheReadTokens": 40,
        "cacheWriteTokens": 7,
        "reasoningTokens": 20,
    }


def test_usage_completion_from_total_and_single_usage_event_before_finish() -> None:
    mapper = ChunkMapper()
    events = mapper.feed({"content": "x", "usage": {"prompt": 10, "total": 15}})
    events += mapper.feed({"usage": {"prompt": 11, "total": 16}, "done": True})
    events += mapper.finish()
    usages = [e for e in events if isinstance(e, Usage)]
    assert len(usages) == 1
    assert (usages[0].usage.input_tokens, usages[0].usage.output_tokens) == (11, 5)
    assert isinstance(events[-2], Usage)
    assert isinstance(events[-1], Finish)


@pytest.mark.parametrize(
    ("reason", "kind", "code"),
    [
        ("stop", "stop", None),
        ("end_turn", "stop", None),
        ("stop_sequence", "stop", None),
        ("STOP", "stop", None),
        ("tool_calls", "tool-calls", None),
        ("tool_use", "tool-calls", None),
        ("function_call", "tool-calls", None),
        ("length", "max-tokens", None),
        ("max_tokens", "max-tokens", None),
        ("MAX_TOKENS", "max-tokens", None),
        ("content_filter", "error", "CONTENT_FILTER"),
        ("SAFETY", "error", "SAFETY"),
        ("refusal", "error", "REFUSAL"),
    ],
)
def test_finish_reason_mapping(reason: str, kind: str, code: str | None) -> None:
    c = run({"content": "x"}, {"finish_reason": reason})
    assert c.finish is not None
    assert c.finish.kind == kind
    assert (c.finish.failure.code if c.finish.failure else None) == code
    assert c.text == "x"


@pytest.mark.parametrize("reason", [None, ""])
def test_null_or_empty_finish_reason_is_ignored(reason: str | None) -> None:
    c = run({"content": "x", "finish_reason": reason}, end=True)
    assert c.finish is not None
    assert c.finish.kind == "stop"


def test_tool_calls_with_stop_reason_finish_as_tool_calls() -> None:
    c = run({"tool_call": {"id": "a", "name": "f", "arguments": {}}}, {"finish_reason": "STOP"})
    assert c.finish is not None
    assert c.finish.kind == "tool-calls"


def test_truncated_tool_arguments_with_length_are_reported_and_kept() -> None:
    c = run(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c",
                    "function": {
                        "name": "write_file",
                        "arguments": '{"path": "a.txt", "text": "hel',
                    },
                }
            ]
        },
        {"finish_reason": "length"},
    )
    assert c.finish is not None
    assert c.finish.kind == "max-tokens"
    failure = c.finish.failure
    assert failure is not None
    assert failure.code == ErrorCode.MALFORMED_RESPONSE
    assert "write_file" in failure.message
    assert "cut off by max_tokens" in failure.message
    assert c.tool_calls[0].arguments == '{"path": "a.txt", "text": "hel'  # never "{}"


def test_missing_end_marker_is_stream_closed_and_keeps_partial_blocks() -> None:
    c = run(
        {"reasoning_content": "hmm"},
        {"content": "partial ans"},
        {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"a'}}]},
        end=False,
    )
    assert c.finish is not None
    assert c.finish.kind == "error"
    assert c.finish.failure is not None
    assert c.finish.failure.code == ErrorCode.STREAM_CLOSED
    assert (c.reasoning, c.text, c.tool_calls[0].arguments) == ("hmm", "partial ans", '{"a')


def test_finish_stop_without_text_is_an_empty_answer_not_an_error() -> None:
    # llama.cpp's empty answer: a role chunk (skipped by the adapter), then finish_reason stop.
    c = run({"usage": {"prompt": 3, "completion": 0}}, {"finish_reason": "stop"})
    assert c.finish is not None
    assert c.finish.kind == "stop"
    assert c.finish.failure is None
    assert (c.text, c.blocks) == ("", [])
    assert c.usage is not None
    assert c.usage.input_tokens == 3


def test_no_content_and_no_finish_reason_is_empty_response() -> None:
    c = run({"usage": {"prompt": 3, "completion": 0}})
    assert c.finish is not None
    assert c.finish.failure is not None
    assert c.finish.failure.code == ErrorCode.EMPTY_RESPONSE
    assert c.finish.failure.retryable


@pytest.mark.parametrize(
    ("error", "code", "status"),
    [
        ({"message": "Overloaded", "code": "overloaded_error"}, ErrorCode.SERVER, None),
        ({"message": "slow down", "code": "rate_limit_exceeded"}, ErrorCode.RATE_LIMIT, None),
        ({"message": "no money", "code": "insufficient_quota"}, ErrorCode.QUOTA, None),
        ({"message": "bad", "status": 401}, ErrorCode.AUTH, 401),
        ({"message": "weird", "code": "something_odd"}, "SOMETHING_ODD", None),
        ({"message": "plain"}, ErrorCode.SERVER, None),
        ("just a string", ErrorCode.SERVER, None),
    ],
)
def test_error_field_finishes_with_error(error: Any, code: str, status: int | None) -> None:
    c = run({"content": "so far"}, {"error": error}, end=False)
    assert c.finish is not None
    assert c.finish.kind == "error"
    failure = c.finish.failure
    assert failure is not None
    assert failure.code == code
    assert failure.status == status
    assert failure.message == (error if isinstance(error, str) else error["message"])
    assert (failure.provider, failure.adapter) == ("prov", "adp")
    assert c.text == "so far"


def test_finish_error_argument_wins_and_finish_is_idempotent() -> None:
    mapper = ChunkMapper()
    events = mapper.feed({"content": "x", "done": True})
    events += mapper.finish(LlmError("gone", ErrorCode.TRANSPORT))
    assert mapper.finish() == []
    validate_stream(events)
    last = events[-1]
    assert isinstance(last, Finish)
    assert last.reason.failure is not None
    assert last.reason.failure.code == ErrorCode.TRANSPORT


def test_aborted_error_gives_aborted_kind() -> None:
    c = run({"content": "x"}, error=LlmError("stop", ErrorCode.ABORTED))
    assert c.finish is not None
    assert c.finish.kind == "aborted"


def test_bad_field_types_raise_adapter_error() -> None:
    with pytest.raises(LlmError) as info:
        ChunkMapper().feed({"content": ["not", "a", "string"]})
    assert info.value.code == ErrorCode.ADAPTER_ERROR


def test_20000_chunks_map_to_one_block() -> None:
    # (its speed is measured in bench/, not asserted here)
    mapper = ChunkMapper()
    chunks = [{"content": "tok ", "done": False}] * 20_000
    n = 0
    for chunk in chunks:
        n += len(mapper.feed(chunk))
    events = mapper.finish()
    assert n == 20_001
    assert len(events[0].block.text) == 80_000  # type: ignore[union-attr]


# --------------------------------------------------------------------------------------------
# map_response


def test_map_response_full() -> None:
    events = map_response(
        {
            "content": "Here.",
            "reasoning_content": "thought",
            "finish_reason": "tool_calls",
            "token_usage": {"prompt": 5, "completion": 6, "total": 11},
            "tool_calls": [
                {"id": "a", "type": "function", "name": "f", "arguments": {"x": 1}},
                {"type": "function", "name": "g", "arguments": '{"y": 2}'},
                {"type": "function", "name": "g", "arguments": {}},
            ],
        },
        provider="p",
    )
    c = assemble(validate_stream(events))
    assert (c.reasoning, c.text) == ("thought", "Here.")
    assert [(t.id, t.name, t.args) for t in c.tool_calls] == [
        ("a", "f", {"x": 1}),
        ("call_1", "g", {"y": 2}),
        ("call_2", "g", {}),
    ]
    assert c.usage is not None
    assert (c.usage.input_tokens, c.usage.output_tokens) == (5, 6)
    assert c.finish is not None
    assert c.finish.kind == "tool-calls"


def test_map_response_error_and_empty() -> None:
    events = map_response({"error": {"message": "nope", "code": "invalid_request_error"}})
    last = validate_stream(events)[-1]
    assert isinstance(last, Finish)
    assert last.reason.failure is not None
    assert last.reason.failure.code == ErrorCode.INVALID_REQUEST
    events = map_response({"content": ""})
    last = validate_stream(events)[-1]
    assert isinstance(last, Finish)
    assert last.reason.failure is not None
    assert last.reason.failure.code == ErrorCode.EMPTY_RESPONSE


def test_feed_after_finish_emits_nothing() -> None:
    mapper = ChunkMapper()
    mapper.feed({"content": "x", "done": True})
    mapper.finish()
    assert mapper.feed({"content": "late"}) == []
