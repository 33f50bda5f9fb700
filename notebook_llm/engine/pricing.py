"""Model prices, for the cost shown in the live view's footer.

Prices are US dollars per million tokens, ``(input, output)``. Lookup order, first hit wins:

1. prices set in this session with :func:`set_price` (for one provider, then for any provider);
2. the provider's own table (``ProviderConfig.prices``: presets and ``[providers.X] prices``);
3. the config file's top-level ``[prices]`` table;
4. the small built-in table :data:`BUILTIN_PRICES` below.

An unknown model has no price and the view shows no cost (never a made-up one). A price is a
pair of finite, non-negative numbers (:func:`checked_price`): ``set_price`` and the config file
refuse anything else, and a table that holds one anyway (a provider made in code) is ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.protocol import TokenUsage
from .providers import price_problem

if TYPE_CHECKING:
    from .engine import Engine

#: (input, output) US dollars per million tokens.
Price = tuple[float, float]

#: A few common models not covered by the provider presets.
BUILTIN_PRICES: dict[str, Price] = {
    "mistral-small-latest": (0.10, 0.30),
    "mistral-large-latest": (2.00, 6.00),
    "llama-3.3-70b-versatile": (0.59, 0.79),
    "openai/gpt-4o-mini": (0.15, 0.60),
    "gemini-2.0-flash": (0.10, 0.40),
}

_session: dict[tuple[str | None, str], Price] = {}


def checked_price(pair: Any) -> Price:
    """``pair`` as a :data:`Price`; ``ValueError`` (saying why) when it is not one."""
    problem = price_problem(pair)
    if problem is not None:
        raise ValueError(problem)
    return (float(pair[0]) + 0.0, float(pair[1]) + 0.0)


def set_price(
    model: str, input_per_million: float, output_per_million: float, *, provider: str | None = None
) -> None:
    """Set the price of ``model`` (optionally only on ``provider``) for this session; a NaN,
    infinite or negative price is refused (``ValueError``)."""
    _session[(provider, model)] = checked_price((input_per_million, output_per_million))


def price_for(
    model: str | None, provider: str | None = None, engine: Engine | None = None
) -> Price | None:
    """The price of ``model`` on ``provider``, or ``None`` when unknown."""
    if not model:
        return None
    for key in ((provider, model), (None, model)):
        if key in _session:
            return _session[key]
    if engine is not None and provider:
        try:
            table = engine.provider(provider).prices
        except Exception:  # an unknown provider simply has no price
            table = {}
        if model in table and price_problem(table[model]) is None:
            return table[model]
        found = engine.file_config.prices.get(model)
        if found is not None and price_problem(found) is None:
            return found
    return BUILTIN_PRICES.get(model)


def price_of(engine: Engine, provider: str, model: str | None) -> Price | None:
    """The price used for a turn's cost: ``model``, or the provider's default model when it is
    ``None`` (``None`` if unknown). Widgets and ``Chat`` both ask here (no upward import)."""
    if model is None:
        try:
            model = engine.provider(provider).model
        except Exception:  # an unknown provider simply has no price
            return None
    return price_for(model, provider, engine)


def cost(usage: TokenUsage, price: Price) -> float:
    """Dollars for ``usage`` at ``price`` (reasoning tokens are part of the output tokens)."""
    # a count a server sent that is not one (negative, NaN) costs nothing rather than less
    tokens_in = usage.input_tokens if _is_count(usage.input_tokens) else 0
    tokens_out = usage.output_tokens if _is_count(usage.output_tokens) else 0
    return (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def format_cost(dollars: float) -> str:
    """A cost as people read it: two significant digits below a cent (``$0.00021``), a floor
    below a hundredth of a cent (``<$0.0001``), cents from a cent (``$0.13``), and ``$0`` for
    nothing. Four fixed decimals once printed most single turns as ``$0.0000``."""
    if dollars <= 0:
        return "$0"
    if dollars < 0.0001:
        return "<$0.0001"
    if dollars < 0.01:
        return f"${dollars:.2g}"  # never in exponent form from 1e-4 up
    return f"${dollars:,.2f}"
