"""The cost cap holds its promise (what is spent overshoots the cap by about one answer) when a
server reports no usage, reports nonsense, or the first answer is cheap; prices are checked
where they enter; the mock passes any cap; an unpriced model says so and runs when asked to.

The provider here is a Python adapter that plays scripted answers (no network), priced with
``set_price``; each test counts what the adapter was asked for, not what the cap believes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from notebook_llm import Engine, set_price
from notebook_llm.adapters.base import LlmAdapter
from notebook_llm.api.batch import map_prompts
from notebook_llm.api.cost_cap import CostCap, token_count
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.core.protocol import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    GenerateOptions,
    TextBlock,
    TextDelta,
    TokenUsage,
    Usage,
)
from notebook_llm.engine import pricing
from notebook_llm.engine.providers import load_file_config

#: Characters of one answer: about 1,000 tokens by the four-characters rule.
ANSWER = "word " * 800


class Scripted(LlmAdapter):
    """Answers every request with ``ANSWER``; ``usage(n)`` gives the n-th answer's usage event
    (``None``: no usage reported), ``fail(n)`` makes the n-th request fail at once."""

    name = "scripted"

    def __init__(self, usage: Any = None, fail: Any = None, delay: float = 0.0) -> None:
        self.calls = 0
        self.usage = usage or (lambda n: None)
        self.fail = fail or (lambda n: False)
        self.delay = delay

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        self.calls += 1
        n = self.calls
        await asyncio.sleep(self.delay)  # lets the other workers ask the cap meanwhile
        if self.fail(n):
            yield Finish.error(LlmError("the server fell over", ErrorCode.SERVER))
            return
        yield BlockStart(0, "text")
        yield TextDelta(0, ANSWER)
        yield BlockEnd(0, TextBlock(ANSWER))
        usage = self.usage(n)
        if usage is not None:
            yield Usage(usage)
        yield Finish.stop()


@pytest.fixture(autouse=True)
def _session_prices() -> Any:
    saved = dict(pricing._session)
    yield
    pricing._session.clear()
    pricing._session.update(saved)


def _engine(adapter: Scripted) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("paid", adapter=adapter, model="big", needs_key=False)
    return engine


def _map(engine: Engine, n: int, **options: Any) -> list[Any]:
    result: list[Any] = map_prompts(
        [f"prompt {i}" for i in range(n)], engine=engine, provider="paid", progress=False, **options
    )
    return result


def test_answers_without_a_usage_report_are_counted_from_their_text() -> None:
    # 1,000 output tokens at $10 a million: $0.01 an answer, reported by nobody
    set_price("big", 0.0, 10.0)
    # (the estimate, 256 tokens an answer, passes the cap: the answers show it was wrong)
    adapter = Scripted(usage=lambda n: None)
    out = _map(_engine(adapter), 10, max_cost=0.03, concurrency=1)
    assert 3 <= adapter.calls <= 4  # the cap, and one answer over it at most
    assert sum(isinstance(r, LlmError) and r.code == ErrorCode.BUDGET_EXCEEDED for r in out) >= 6


@pytest.mark.parametrize(
    "usage",
    [
        TokenUsage(-1_000_000, -1_000_000),
        TokenUsage(0, 0),
        TokenUsage(2**62, -(2**62)),
    ],
)
def test_token_counts_that_cannot_be_costs_do_not_lower_the_spent_cost(usage: TokenUsage) -> None:
    set_price("big", 0.0, 10.0)
    adapter = Scripted(usage=lambda n: usage)
    _map(_engine(adapter), 10, max_cost=0.03, concurrency=1)
    assert adapter.calls <= 4


def test_a_cheap_or_failed_first_answer_does_not_let_every_worker_go() -> None:
    # every answer is 2,000 tokens at $10 a million: $0.02 each; the first one fails at once
    # (costs nothing), the others are dear; the estimate (256 tokens an answer) passes the cap
    set_price("big", 0.0, 10.0)
    adapter = Scripted(usage=lambda n: TokenUsage(10, 2_000), fail=lambda n: n == 1, delay=0.05)
    _map(_engine(adapter), 16, max_cost=0.06, concurrency=16)
    paid = adapter.calls - 1
    assert paid * 0.02 <= 0.06 + 0.02  # the cap and about one answer; 16 workers would be $0.30


def test_a_cheap_first_answer_does_not_let_every_worker_go() -> None:
    set_price("big", 0.0, 10.0)
    cheap_first = lambda n: TokenUsage(10, 10 if n == 1 else 2_000)  # noqa: E731
    adapter = Scripted(usage=cheap_first, delay=0.05)
    _map(_engine(adapter), 16, max_cost=0.06, concurrency=16)
    assert (adapter.calls - 1) * 0.02 <= 0.06 + 0.02


def test_an_answer_longer_than_thought_slows_the_requests_in_flight() -> None:
    # no max_tokens: the estimate assumes a short answer; the first answer shows 2,000 tokens
    set_price("big", 0.0, 10.0)
    adapter = Scripted(usage=lambda n: TokenUsage(10, 2_000), delay=0.05)
    _map(_engine(adapter), 16, max_cost=0.05, concurrency=16)
    assert adapter.calls * 0.02 <= 0.05 + 0.02


@pytest.mark.parametrize("bad", [float("nan"), -1.0, float("inf")])
def test_set_price_refuses_what_cannot_be_a_price(bad: float) -> None:
    with pytest.raises(ValueError, match="finite number, not negative"):
        set_price("m", bad, 1.0)
    with pytest.raises(ValueError, match="finite number, not negative"):
        set_price("m", 1.0, bad)


@pytest.mark.parametrize("bad", ["nan", "-0.5", "inf", "-inf"])
@pytest.mark.parametrize(
    "table", ["[prices]", '[providers.p]\nadapter = "openai"\n[providers.p.prices]']
)
def test_the_config_file_refuses_what_cannot_be_a_price(
    tmp_path: Path, bad: str, table: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"{table}\nm = [{bad}, 1.0]\n")
    with pytest.raises(LlmError) as err:
        load_file_config(path)
    assert err.value.code == ErrorCode.INVALID_OPTIONS
    assert "finite number, not negative" in err.value.message
    assert "\n" not in err.value.message


def test_token_count_refuses_what_is_not_a_count() -> None:
    assert [token_count(v) for v in (5, 5.0, 0)] == [5, 5, 0]
    for bad in (-1, 1.5, float("nan"), float("inf"), True, "5", None, 10**12):
        assert token_count(bad) is None, bad


# ------------------------------------------------------------------ free and unpriced models


def test_the_readme_map_line_runs_on_the_mock() -> None:
    """``map(df, template="Review: {text}", schema=Sentiment, max_cost=0.50)`` as typed."""
    pd = pytest.importorskip("pandas")
    pydantic = pytest.importorskip("pydantic")

    class Sentiment(pydantic.BaseModel):
        label: str
        score: float

    from notebook_llm import map as map_

    df = pd.DataFrame({"text": ["the soup was cold", "lovely staff", "too loud"]})
    out = map_(df, template="Review: {text}", schema=Sentiment, max_cost=0.50, progress=False)
    assert list(out.columns) == ["label", "score", "error"]
    assert out["error"].isna().all(), out["error"].tolist()
    assert out["label"].notna().all()


def test_a_model_without_a_price_is_refused_with_both_ways_out() -> None:
    adapter = Scripted()
    with pytest.raises(LlmError) as err:
        _map(_engine(adapter), 2, max_cost=1.0)
    assert err.value.code == ErrorCode.BUDGET_EXCEEDED
    assert "set_price" in err.value.message
    assert "allow_unpriced=True" in err.value.message
    assert adapter.calls == 0


def test_allow_unpriced_runs_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    adapter = Scripted()
    engine = _engine(adapter)
    engine.add_provider("other", adapter=adapter, model="unpriced-x", needs_key=False)
    with caplog.at_level(logging.WARNING, logger="notebook_llm.api.batch"):
        for _ in range(2):
            out = map_prompts(
                ["a", "b"],
                engine=engine,
                provider="other",
                max_cost=0.01,
                allow_unpriced=True,
                progress=False,
            )
            assert all(not isinstance(r, LlmError) for r in out)
    told = [r for r in caplog.records if "no price is known" in r.getMessage()]
    assert len(told) == 1
    assert "allow_unpriced" in told[0].getMessage()


def test_a_local_server_is_not_taken_for_free_but_the_mock_and_ollama_are() -> None:
    engine = Engine(config_file=False, env_file=False)
    engine.add_provider(
        "proxy", adapter="openai", base_url="http://127.0.0.1:4000/v1", model="gpt-x"
    )
    cap = CostCap(1.0, engine)
    from notebook_llm.engine.request import Request

    assert cap.price(Request("mock", "echo", prompt="hi")) == (0.0, 0.0)
    assert cap.price(Request("ollama", "llama3.2", prompt="hi")) == (0.0, 0.0)
    with pytest.raises(LlmError, match="set_price"):
        cap.price(Request("proxy", "gpt-x", prompt="hi"))


def test_the_session_budget_counts_answers_that_report_nothing() -> None:
    from notebook_llm.api.cost_cap import Budget
    from notebook_llm.api.turn import Turn
    from notebook_llm.core.completion import Completion
    from notebook_llm.engine.request import Request

    set_price("big", 0.0, 10.0)
    engine = _engine(Scripted())
    budget = Budget(1.0, engine)
    turn = Turn(Request("paid", "big", prompt="hi"))
    budget.add(Completion(blocks=[TextBlock(ANSWER)], usage=None, finish=None), turn)
    assert budget.spent == pytest.approx(0.01, rel=0.01)


def test_the_session_budget_refuses_a_model_without_a_price() -> None:
    from notebook_llm.api.cost_cap import Budget
    from notebook_llm.api.turn import Turn
    from notebook_llm.engine.request import Request

    budget = Budget(1.0, _engine(Scripted()))
    with pytest.raises(LlmError, match="set_price") as err:
        budget.check_turn(Turn(Request("paid", "big", prompt="hi")))
    assert err.value.code == ErrorCode.BUDGET_EXCEEDED
