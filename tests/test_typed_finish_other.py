"""A typed answer whose finish is ``other`` (a reason the finish vocabulary cannot classify, a
provider's ``"complete"``) is parsed like one that stopped: nothing says it was cut, so it is
whole. It was returned unparsed with no error, and a typed ``map`` gave a row of empty columns
with an empty error column. An answer cut short (``max-tokens``) is still left unparsed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel

from notebook_llm import Engine, ErrorCode
from notebook_llm.adapters.base import LlmAdapter
from notebook_llm.api.batch import map_prompts
from notebook_llm.core.completion import assemble
from notebook_llm.core.protocol import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    TextBlock,
    TextDelta,
)


class Point(BaseModel):
    x: int
    y: int


class _Ends(LlmAdapter):
    name = "ends"

    def __init__(self, text: str, kind: str) -> None:
        self.text = text
        self.kind = kind

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        yield BlockStart(0, "text")
        yield TextDelta(0, self.text)
        yield BlockEnd(0, TextBlock(self.text))
        yield Finish(FinishReason(self.kind))  # type: ignore[arg-type]


def _engine(text: str, kind: str) -> Engine:
    engine = Engine(config_file=False, retries=0)
    engine.register_adapter("ends", _Ends(text, kind))
    return engine


async def test_an_other_finish_is_parsed() -> None:
    c = await _engine('{"x": 1, "y": 2}', "other").complete("ends", schema=Point, prompt="p")
    assert c.parsed == Point(x=1, y=2)


async def test_an_other_finish_that_does_not_validate_is_a_schema_mismatch() -> None:
    events = [
        e async for e in _engine('{"x": "one"}', "other").stream("ends", schema=Point, prompt="p")
    ]
    c = assemble(events)
    assert c.error is not None
    assert c.error.code == ErrorCode.SCHEMA_MISMATCH
    assert c.text == '{"x": "one"}'


async def test_a_max_tokens_finish_is_still_not_parsed() -> None:
    c = await _engine('{"x": 1, "y": 2}', "max-tokens").complete("ends", schema=Point, prompt="p")
    assert c.parsed is None


@pytest.mark.parametrize(("kind", "filled"), [("other", True), ("max-tokens", False)])
def test_a_typed_map_fills_the_columns_of_an_other_finish(kind: str, filled: bool) -> None:
    import pandas as pd

    frame = map_prompts(
        pd.DataFrame({"text": ["a"]}), template="{text}", provider="ends",
        engine=_engine('{"x": 1, "y": 2}', kind), schema=Point, progress=False,
    )  # fmt: skip
    assert bool(frame.loc[0, "x"] == 1) is filled
    assert (frame.loc[0, "error"] is None) is filled
