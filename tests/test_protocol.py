"""Events, JSON round trip, the five rules (each broken once), and the assembler."""

from __future__ import annotations

import json

import pytest

from notebook_llm import (
    BlockEnd,
    BlockStart,
    ErrorCode,
    Finish,
    FinishReason,
    ImageBlock,
    LlmError,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    assemble,
    event_from_json,
    validate_stream,
)


def good_stream() -> list:
    return [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "think"),
        BlockStart(1, "text"),
        TextDelta(1, "Hel"),
        TextDelta(1, "lo"),
        BlockEnd(0, ReasoningBlock("think")),
        BlockEnd(1, TextBlock("Hello")),
        BlockStart(2, "tool-call"),
        ToolCallDelta(2, "c1", '{"a":', "f"),
        ToolCallDelta(2, "c1", " 1}"),
        BlockEnd(2, ToolCallBlock("c1", "f", '{"a": 1}')),
        Usage(TokenUsage(10, 5, reasoning_tokens=2)),
        Finish(FinishReason("tool-calls")),
    ]


def test_event_json_shapes_are_the_reference_ones() -> None:
    evs = good_stream()
    assert evs[0].to_dict() == {"type": "block-start", "index": 0, "blockType": "reasoning"}
    assert evs[8].to_dict() == {
        "type": "tool-call-delta",
        "index": 2,
        "id": "c1",
        "name": "f",
        "argumentsDelta": '{"a":',
    }
    assert evs[11].to_dict() == {
        "type": "usage",
        "usage": {"inputTokens": 10, "outputTokens": 5, "reasoningTokens": 2},
    }
    assert evs[12].to_dict() == {"type": "finish", "reason": {"kind": "tool-calls"}}


def test_event_from_json_is_the_inverse_of_to_dict() -> None:
    err = LlmError("boom", ErrorCode.RATE_LIMIT, status=429, retry_after=1.5, request_id="r1")
    evs = [*good_stream()[:-1], Finish(FinishReason("error", err))]
    for ev in evs:
        back = event_from_json(ev.to_dict())
        assert back.to_dict() == ev.to_dict()
    failure = event_from_json(evs[-1].to_dict()).reason.failure  # type: ignore[union-attr]
    assert failure is not None
    assert failure.code == "RATE_LIMIT"
    assert failure.retry_after == 1.5


def test_blocks_round_trip_including_tool_results_and_images() -> None:
    msg = Message(
        "user",
        [
            ToolResultBlock.of("c1", "42", is_error=True),
            ImageBlock(data="AAAA", media_type="image/png"),
        ],
    )
    assert Message.from_json(msg.to_dict()).to_dict() == msg.to_dict()
    assert msg.content[0].to_dict()["isError"] is True


def test_to_json_is_json_text_and_to_dict_the_dict() -> None:
    """``to_json()`` returns a JSON string (what the name says); ``to_dict()`` the dict, and
    ``event_from_json`` / ``Message.from_json`` take either."""
    for ev in good_stream():
        text = ev.to_json()
        assert isinstance(text, str)
        assert json.loads(text) == ev.to_dict()
        assert event_from_json(text) == ev
    msg = Message.user("héllo")
    assert Message.from_json(msg.to_json()) == msg
    assert "héllo" in msg.to_json()  # not \u-escaped
    assert json.loads(TokenUsage(3, 4).to_json()) == {"inputTokens": 3, "outputTokens": 4}


def test_event_from_json_rejects_garbage() -> None:
    with pytest.raises(LlmError) as info:
        event_from_json({"type": "nope"})
    assert info.value.code == "MALFORMED_RESPONSE"
    with pytest.raises(LlmError):
        event_from_json({"type": "text-delta"})


def test_a_good_stream_validates() -> None:
    assert len(validate_stream(good_stream())) == 13


@pytest.mark.parametrize(
    ("rule", "events"),
    [
        # 1: block-end for a block that is not open / of another type
        (
            1,
            [BlockStart(0, "text"), BlockEnd(0, ReasoningBlock("x")), Finish(FinishReason("stop"))],
        ),
        # 2: first index is not 0
        (2, [BlockStart(1, "text"), Finish(FinishReason("error"))]),
        # 3: delta for a block that was never started
        (3, [TextDelta(0, "x"), Finish(FinishReason("stop"))]),
        # 4: two usage events
        (4, [Usage(TokenUsage()), Usage(TokenUsage()), Finish(FinishReason("stop"))]),
        # 5: an event after finish
        (5, [Finish(FinishReason("stop")), Usage(TokenUsage())]),
    ],
)
def test_each_rule_broken_once_names_the_rule_and_position(rule: int, events: list) -> None:
    with pytest.raises(LlmError) as info:
        validate_stream(events)
    assert info.value.code == "INVARIANT"
    assert f"rule {rule}" in info.value.message
    assert "event #" in info.value.message
    assert info.value.details["rule"] == rule


def test_rule_3_delta_of_the_wrong_type() -> None:
    with pytest.raises(LlmError, match="rule 3"):
        validate_stream([BlockStart(0, "text"), ReasoningDelta(0, "x")])


def test_rule_5_open_blocks_only_on_error_or_abort() -> None:
    with pytest.raises(LlmError, match="rule 5"):
        validate_stream([BlockStart(0, "text"), Finish(FinishReason("stop"))])
    validate_stream([BlockStart(0, "text"), Finish(FinishReason("aborted"))])
    validate_stream([BlockStart(0, "text"), Finish(FinishReason("error"))])


def test_rule_5_missing_finish() -> None:
    with pytest.raises(LlmError, match="without finish"):
        validate_stream([BlockStart(0, "text"), BlockEnd(0, TextBlock(""))])


def test_rule_4_usage_after_finish_is_caught() -> None:
    with pytest.raises(LlmError, match="rule 5"):
        validate_stream([Finish(FinishReason("stop")), Usage(TokenUsage())])


def test_assemble_folds_blocks_in_index_order() -> None:
    c = assemble(good_stream())
    assert c.text == "Hello"
    assert c.reasoning == "think"
    assert [(t.name, t.args) for t in c.tool_calls] == [("f", {"a": 1})]
    assert c.usage == TokenUsage(10, 5, reasoning_tokens=2)
    assert c.finish is not None
    assert c.finish.kind == "tool-calls"
    assert c.ok


def test_assemble_tolerates_missing_starts_ends_and_double_usage() -> None:
    c = assemble(
        [
            TextDelta(0, "par"),
            TextDelta(0, "tial"),
            ToolCallDelta(1, "c9", '{"x"', "g"),
            Usage(TokenUsage(3, 0)),
            Usage(TokenUsage(0, 7)),
            Finish(FinishReason("aborted", LlmError("stop", ErrorCode.ABORTED))),
        ]
    )
    assert c.text == "partial"
    assert c.tool_calls[0].name == "g"
    assert c.tool_calls[0].arguments == '{"x"'
    assert c.usage == TokenUsage(3, 7)
    assert c.error is not None
    assert c.error.code == "ABORTED"


def test_truncated_tool_arguments_are_reported_not_hidden() -> None:
    call = ToolCallBlock("c1", "f", '{"city": "Par')
    with pytest.raises(LlmError) as info:
        _ = call.args
    assert info.value.code == "MALFORMED_RESPONSE"
    assert ToolCallBlock("c2", "f", "").args == {}


def test_llm_error_str_and_failure_shape() -> None:
    err = LlmError("nope", ErrorCode.AUTH, status=401, provider="openai")
    assert str(err) == "[AUTH] nope (provider=openai, status=401)"
    assert err.to_failure() == {
        "message": "nope",
        "code": "AUTH",
        "status": 401,
        "provider": "openai",
    }
    assert not err.retryable
    assert LlmError("x", ErrorCode.RATE_LIMIT).retryable
    assert isinstance(err, Exception)
