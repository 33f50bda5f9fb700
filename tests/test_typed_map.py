"""A DataFrame in one call, and the cost cap: rows fill a template, answers come back as a
DataFrame with the input's index and an error column; an estimate over ``max_cost`` sends
nothing (counted at the mock server), and a running batch stops once the cap is spent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Literal

import pandas as pd
import pytest
from pydantic import BaseModel

import notebook_llm
from notebook_llm import Engine, ErrorCode, LlmError, estimate_cost
from notebook_llm.adapters.base import LlmAdapter
from notebook_llm.adapters.mock import MockServer
from notebook_llm.core.protocol import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    GenerateOptions,
    TextBlock,
)
from notebook_llm.engine import pricing
from notebook_llm.engine.pricing import set_price

map_ = notebook_llm.map


class Sentiment(BaseModel):
    label: Literal["positive", "negative", "neutral"]
    score: float


class FailsOnBad(LlmAdapter):
    """Answers ``{"label": "neutral", "score": 0.5}``; fails for a prompt with "bad" in it."""

    name = "fails-on-bad"

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        if "bad" in options.messages[-1].text:
            raise LlmError("the provider refused this one", ErrorCode.INVALID_REQUEST)
        text = '{"label": "neutral", "score": 0.5}'
        yield BlockStart(0, "text")
        yield BlockEnd(0, TextBlock(text))
        yield Finish.stop()


@pytest.fixture
def srv(monkeypatch: pytest.MonkeyPatch) -> Iterator[MockServer]:
    monkeypatch.setattr(pricing, "_session", {})  # prices set by a test end with it
    with MockServer() as server:
        yield server


@pytest.fixture
def engine(srv: MockServer) -> Engine:
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
    eng.register_adapter("picky", FailsOnBad())
    return eng


REVIEWS = pd.DataFrame(
    {"text": ["great phone", "bad battery", "fine"], "stars": [5, 1, 3]}, index=["a", "b", "c"]
)


def test_dataframe_with_schema_gives_the_fields_and_the_input_index(
    engine: Engine, srv: MockServer
) -> None:
    out = map_(
        REVIEWS,
        template="Review ({stars} stars): {text}",
        schema=Sentiment,
        engine=engine,
        provider="m",
        progress=False,
    )
    assert list(out.columns) == ["label", "score", "error"]
    assert out.index.tolist() == ["a", "b", "c"]
    assert out["error"].tolist() == [None, None, None]
    assert set(out["label"]) <= {"positive", "negative", "neutral"}
    sent = sorted(r.body["messages"][-1]["content"] for r in srv.requests)
    assert sent == [
        "Review (1 stars): bad battery",
        "Review (3 stars): fine",
        "Review (5 stars): great phone",
    ]


def test_a_failed_row_has_its_error_and_empty_fields(engine: Engine) -> None:
    out = map_(
        REVIEWS,
        template="{text}",
        schema=Sentiment,
        engine=engine,
        provider="picky",
        progress=False,
    )
    assert out.loc["b", "error"].startswith("INVALID_REQUEST: the provider refused")
    assert pd.isna(out.loc["b", "label"])
    assert pd.isna(out.loc["b", "score"])
    assert out.loc["a", "label"] == "neutral"
    assert out.loc["a", "error"] is None


def test_without_schema_a_column_of_answers(engine: Engine) -> None:
    out = map_(REVIEWS, template="{text}!", engine=engine, provider="m", progress=False)
    assert out["answer"].tolist() == ["great phone!", "bad battery!", "fine!"]
    assert out.index.tolist() == ["a", "b", "c"]


def test_a_series_of_strings_with_and_without_template(engine: Engine) -> None:
    s = pd.Series(["x", "y"], index=[3, 4], name="text")
    assert map_(s, engine=engine, provider="m", progress=False)["answer"].tolist() == ["x", "y"]
    out = map_(s, template="say {text}", engine=engine, provider="m", progress=False)
    assert out["answer"].tolist() == ["say x", "say y"]
    assert map_(s, template="{}?", engine=engine, provider="m", progress=False)[
        "answer"
    ].tolist() == ["x?", "y?"]


def test_a_template_naming_a_missing_column_sends_nothing(engine: Engine, srv: MockServer) -> None:
    with pytest.raises(LlmError) as info:
        map_(REVIEWS, template="{review}", engine=engine, provider="m", progress=False)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "{review}" in info.value.message
    assert "text, stars" in info.value.message
    assert srv.requests == []


def test_a_list_is_still_a_list(engine: Engine) -> None:
    out = map_(["a", "b"], template="<{}>", engine=engine, provider="m", progress=False)
    assert [r.text for r in out] == ["<a>", "<b>"]


def test_estimate_sends_nothing(engine: Engine, srv: MockServer) -> None:
    set_price("echo", 2.0, 4.0)
    est = estimate_cost(REVIEWS, template="{text}", engine=engine, provider="m", max_tokens=100)
    assert est.prompts == 3
    assert est.output_tokens == 300
    assert est.usd == pytest.approx((est.input_tokens * 2 + 300 * 4) / 1e6)
    assert "3 prompts" in str(est)
    assert srv.requests == []
    assert estimate_cost("hello", engine=engine, provider="m").prompts == 1


def test_an_estimate_over_the_cap_refuses_in_one_line_and_sends_nothing(
    engine: Engine, srv: MockServer
) -> None:
    set_price("echo", 100.0, 100.0)
    rows = pd.DataFrame({"text": [f"review number {i}" for i in range(50)]})
    with pytest.raises(LlmError) as info:
        map_(rows, template="{text}", engine=engine, provider="m", max_cost=0.5, progress=False)
    err = info.value
    assert err.code == ErrorCode.BUDGET_EXCEEDED
    assert "\n" not in err.message
    assert "max_cost=$0.5000" in err.message
    assert "raise max_cost=" in err.message
    assert err.details["estimate"] > 0.5
    assert srv.requests == []  # nothing was sent


def test_a_cap_without_a_price_refuses_and_says_how_to_set_one(
    engine: Engine, srv: MockServer
) -> None:
    with pytest.raises(LlmError, match="set_price"):
        map_(["a"], engine=engine, provider="m", max_cost=1.0, progress=False)
    assert srv.requests == []


def test_a_running_batch_stops_sending_once_the_cap_is_spent(
    engine: Engine, srv: MockServer
) -> None:
    # lorem answers ~2000 tokens: far more than the 256 the estimate assumes without max_tokens
    set_price("lorem", 1.0, 10.0)
    spent: list[float] = []

    class Bar:
        spent: float | None = None

        def __call__(self, done: int, total: int) -> None:
            spent.append(self.spent or 0.0)

    prompts = [f"p{i}" for i in range(10)]
    est = estimate_cost(prompts, engine=engine, provider="m", model="lorem")
    assert est.usd is not None
    assert est.usd < 0.03
    out = map_(
        prompts,
        engine=engine,
        provider="m",
        model="lorem",
        concurrency=1,
        max_cost=0.03,
        progress=Bar(),
    )
    sent = len(srv.requests)
    assert 1 <= sent < 10
    stopped = [r for r in out if isinstance(r, LlmError)]
    assert len(stopped) == 10 - sent
    assert all(r.code == ErrorCode.BUDGET_EXCEEDED for r in stopped)
    assert spent[-1] >= 0.03
    assert spent == sorted(spent)
