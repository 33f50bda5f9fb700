"""Costs are shown with a meaningful precision: never ``$0.0000`` for a turn that cost something."""

from __future__ import annotations

import pytest

from notebook_llm.core.protocol import TokenUsage
from notebook_llm.engine.pricing import cost, format_cost


@pytest.mark.parametrize(
    ("dollars", "shown"),
    [
        (0.0, "$0"),
        (0.0000012, "<$0.0001"),
        (0.0001, "$0.0001"),
        (0.000215, "$0.00021"),
        (0.0012, "$0.0012"),
        (0.0099, "$0.0099"),
        (0.01, "$0.01"),
        (0.1234, "$0.12"),
        (1.5, "$1.50"),
        (1234.5, "$1,234.50"),
    ],
)
def test_format_cost(dollars: float, shown: str) -> None:
    assert format_cost(dollars) == shown


def test_a_small_turn_is_not_zero() -> None:
    # 14 in / 13 out at gpt-4o-mini's price: $0.0000099 once printed as $0.0000
    amount = cost(TokenUsage(14, 13), (0.15, 0.60))
    assert format_cost(amount) == "<$0.0001"
    amount = cost(TokenUsage(339, 58), (0.59, 0.79))
    assert format_cost(amount) == "$0.00025"
