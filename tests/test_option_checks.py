"""Options checked before anything is sent: ``schema_retries`` (each retry pays for another
answer) and ``Timeouts`` (a limit of 0, a negative or NaN one would end every request at once or
never). Each bad value is one ``INVALID_OPTIONS`` line; ``Timeouts`` is public API."""

from __future__ import annotations

import math
from typing import Any

import pytest

import notebook_llm
from notebook_llm import Engine, ErrorCode, LlmError, Timeouts
from notebook_llm.engine.request import Request


@pytest.mark.parametrize("bad", ["abc", "2", 2.5, -1, 6, 10**9, True, [1]])
async def test_complete_refuses_a_bad_schema_retries_in_one_line(bad: Any) -> None:
    engine = Engine()
    with pytest.raises(LlmError) as info:
        await engine.complete(
            "mock-direct", "echo", prompt="hi", schema={"type": "object"}, schema_retries=bad
        )
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "schema_retries" in info.value.message
    assert "\n" not in info.value.message


@pytest.mark.parametrize("bad", ["x", -1, 99])
def test_a_request_refuses_a_bad_schema_retries(bad: Any) -> None:
    with pytest.raises(LlmError) as info:
        Request("mock", schema_retries=bad)
    assert info.value.code == ErrorCode.INVALID_OPTIONS


def test_good_schema_retries_pass() -> None:
    assert Request("mock", schema_retries=None).schema_retries == 0  # type: ignore[arg-type]
    assert Request("mock", schema_retries=5).schema_retries == 5


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "60", True])
@pytest.mark.parametrize("name", ["deadline", "idle"])
def test_timeouts_refuse_what_is_not_a_positive_number_of_seconds(name: str, bad: Any) -> None:
    with pytest.raises(LlmError) as info:
        Timeouts(**{name: bad})
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert f"Timeouts({name}=" in info.value.message


def test_timeouts_are_public_and_take_none_for_no_limit() -> None:
    assert "Timeouts" in notebook_llm.__all__
    assert Timeouts(deadline=None, idle=None).deadline is None
    assert Timeouts(deadline=0.5, idle=3).idle == 3
