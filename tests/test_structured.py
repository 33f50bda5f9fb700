"""Typed answers: ``schema=`` normalised to one JSON Schema, the mock's valid instances, the
answers validated into the caller's type, SCHEMA_MISMATCH keeping the raw text and the message,
and the opt-in retry that feeds the message back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from notebook_llm import Engine, ErrorCode, LlmError
from notebook_llm.adapters.base import LlmAdapter
from notebook_llm.adapters.mock import MockReply, MockServer
from notebook_llm.adapters.mock.schema_answers import instance
from notebook_llm.core.completion import assemble
from notebook_llm.core.json_schema_check import check
from notebook_llm.core.protocol import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    GenerateOptions,
    TextBlock,
    TextDelta,
)
from notebook_llm.core.response_schema import as_schema


class Sentiment(BaseModel):
    label: Literal["positive", "negative", "neutral"]
    score: float = Field(ge=0, le=1)


class Address(BaseModel):
    city: str


class Person(BaseModel):
    name: str
    address: Address
    tags: list[str]


@dataclass
class Point:
    x: int
    y: int


JSON_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["n"],
}


@pytest.fixture
def engine() -> Engine:
    return Engine(config_file=False, retries=0)


@pytest.fixture
def srv() -> Iterator[MockServer]:
    with MockServer() as server:
        yield server


def test_pydantic_model_becomes_one_self_contained_strict_schema() -> None:
    s = as_schema(Person)
    assert s.name == "Person"
    assert s.kind == "pydantic"
    assert s.strict
    assert "$defs" not in s.schema
    address = s.schema["properties"]["address"]
    assert address["properties"] == {"city": {"title": "City", "type": "string"}}
    assert address["additionalProperties"] is False
    assert s.fields == ["name", "address", "tags"]


def test_optional_fields_make_a_schema_not_strict() -> None:
    @dataclass
    class WithDefault:
        a: int
        b: str = "x"

    assert not as_schema(WithDefault).strict
    assert as_schema(Point).strict


def test_json_schema_dict_is_kept_and_not_strict_without_additional_properties() -> None:
    s = as_schema(JSON_SCHEMA)
    assert s.schema == JSON_SCHEMA
    assert s.kind == "json"
    assert not s.strict


@pytest.mark.parametrize("bad", [42, "text", {"description": "no type"}])
def test_what_is_not_a_schema_is_refused_in_one_line(bad: Any) -> None:
    with pytest.raises(LlmError) as info:
        as_schema(bad)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "\n" not in info.value.message


def test_mock_answers_a_valid_instance_for_each_kind(engine: Engine) -> None:
    c = engine.complete_sync("mock", "echo", prompt="Review: great", schema=Sentiment)
    assert isinstance(c.parsed, Sentiment)
    assert json.loads(c.text) == c.parsed.model_dump()
    p = engine.complete_sync("mock", "echo", prompt="Ann", schema=Person).parsed
    assert isinstance(p, Person)
    assert p.address.city == "Ann"
    assert p.tags == ["Ann"]
    pt = engine.complete_sync("mock", "echo", prompt="p", schema=Point).parsed
    assert isinstance(pt, Point)
    d = engine.complete_sync("mock-direct", "reasoning", prompt="q", schema=JSON_SCHEMA)
    assert isinstance(d.parsed, dict)
    assert 1 <= d.parsed["n"] <= 5
    assert d.reasoning  # the reasoning model still reasons first


def test_mock_instances_are_deterministic_and_vary_with_the_prompt() -> None:
    schema = as_schema(Sentiment).schema
    a = [instance(schema, f"row {i}") for i in range(30)]
    assert a == [instance(schema, f"row {i}") for i in range(30)]
    assert len({x["label"] for x in a}) == 3
    assert all(check(x, schema) == [] for x in a)


def test_a_schema_works_through_each_wire_format_of_the_mock(
    engine: Engine, srv: MockServer
) -> None:
    engine.add_provider("anth", adapter="anthropic", base_url=srv.url, model="echo")
    engine.add_provider("oll", adapter="ollama", base_url=srv.url, model="echo")
    engine.set_key("anth", "k")
    for provider in ("anth", "oll"):
        c = engine.complete_sync(provider, prompt="Review: fine", schema=Sentiment)
        assert isinstance(c.parsed, Sentiment), provider
    bodies = [r.body for r in srv.requests]
    assert bodies[0]["output_config"]["format"]["schema"]["required"] == ["label", "score"]
    assert bodies[1]["format"]["required"] == ["label", "score"]


def test_an_answer_that_does_not_validate_is_schema_mismatch_with_raw_text(
    engine: Engine, srv: MockServer
) -> None:
    engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
    srv.queue_reply(MockReply.build('{"label": "meh", "score": 2}'))
    with pytest.raises(LlmError) as info:
        engine.complete_sync("m", prompt="x", schema=Sentiment)
    err = info.value
    assert err.code == ErrorCode.SCHEMA_MISMATCH
    assert err.details["raw"] == '{"label": "meh", "score": 2}'
    assert "label" in err.details["validation"]
    assert "score" in err.details["validation"]
    assert err.details["completion"].text == '{"label": "meh", "score": 2}'
    assert err.details["completion"].parsed is None
    assert len(srv.requests) == 1  # no retry unless asked for


def test_schema_retries_feeds_the_message_back_once(engine: Engine, srv: MockServer) -> None:
    engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
    srv.queue_reply(MockReply.build("not json at all"))
    c = engine.complete_sync("m", prompt="Review: ok", schema=Sentiment, schema_retries=1)
    assert isinstance(c.parsed, Sentiment)
    assert len(srv.requests) == 2
    retry = srv.requests[1].body["messages"]
    assert retry[-2] == {"role": "assistant", "content": "not json at all"}
    assert "not JSON" in retry[-1]["content"]
    assert retry[-1]["role"] == "user"
    assert c.usage is not None
    assert c.usage.input_tokens > 0


def test_fenced_json_is_accepted() -> None:
    s = as_schema(Point)
    assert s.validate('```json\n{"x": 1, "y": 2}\n```') == Point(1, 2)


class _Says(LlmAdapter):
    name = "says"

    def __init__(self, text: str) -> None:
        self.text = text

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        yield BlockStart(0, "text")
        yield TextDelta(0, self.text)
        yield BlockEnd(0, TextBlock(self.text))
        yield Finish.stop()


async def test_stream_ends_with_schema_mismatch_and_keeps_the_text(engine: Engine) -> None:
    engine.register_adapter("says", _Says('{"x": "one"}'))
    events = [e async for e in engine.stream("says", schema=Point, prompt="p")]
    c = assemble(events)
    assert c.text == '{"x": "one"}'
    assert c.error is not None
    assert c.error.code == ErrorCode.SCHEMA_MISMATCH
    good = [e async for e in engine.stream("says", schema=JSON_SCHEMA, prompt="p")]
    assert assemble(good).error is not None  # {"x": ...} lacks the required "n"
    engine.register_adapter("ok", _Says('{"n": 3}'))
    fine = [e async for e in engine.stream("ok", schema=JSON_SCHEMA, prompt="p")]
    assert assemble(fine).ok


def test_tool_arguments_and_answers_are_checked_by_one_validator() -> None:
    """The same schema means the same thing for a typed answer and for tool arguments: both
    go through core/json_schema_check (jsonschema), in the same words."""
    s = as_schema(JSON_SCHEMA)
    assert s.validate('{"n": 2}') == {"n": 2}
    assert check({"n": 2}, JSON_SCHEMA) == []
    with pytest.raises(LlmError, match=r"n: 9 is greater than the maximum of 5"):
        s.validate('{"n": 9}')
    assert check({"n": 9}, JSON_SCHEMA) == ["$.n: 9 is greater than the maximum of 5"]
