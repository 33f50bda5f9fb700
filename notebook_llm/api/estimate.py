"""What a request or a batch will cost, before anything is sent, and the caps that use it.

:func:`estimate_cost` needs no network and no key: it counts the input tokens of each prompt
with a character estimate (:func:`estimate_tokens`: about four characters a token, plus a few
tokens a message, :data:`IMAGE_TOKENS` an image, and the schema's JSON if one is given), takes
``max_tokens`` (else :data:`DEFAULT_OUTPUT_TOKENS`) as each answer's length, and prices both
with :func:`notebook_llm.engine.pricing.price_of`. An estimate is an upper-leaning guess, not a bill:
the provider's tokenizer decides the real counts.

Two caps use it, both through :class:`notebook_llm.api.cost_cap.CostCap` (the cap's rules
live there), both refusing with ``LlmError(BUDGET_EXCEEDED)`` in one line that gives the
estimate, the cap and how to raise it:

* ``map(..., max_cost=USD)`` sends nothing when the estimate is over the cap, and stops sending
  once the cost spent reaches it;
* ``%llm budget USD`` (:class:`~notebook_llm.api.cost_cap.Budget`) caps the session's ``%%llm`` cells: a cell whose
  worst case would take the spent cost over the cap is refused; each answer's cost is added.

A free model (the mock, a server on this machine) passes any cap. A model without a known price
cannot be estimated: a cap then refuses, and says how to set a price
(``notebook_llm.set_price``) or, for ``map``, to run it uncapped (``allow_unpriced=True``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

from ..core.errors import ErrorCode, LlmError
from ..core.protocol import ImageBlock, Message, TextBlock, ToolResultBlock
from ..engine.pricing import Price, cost, price_of
from ..engine.request import Request, TurnOptions, request_of

if TYPE_CHECKING:
    from ..engine.engine import Engine

__all__ = [
    "DEFAULT_OUTPUT_TOKENS",
    "IMAGE_TOKENS",
    "CostEstimate",
    "cap_value",
    "estimate_cost",
    "estimate_request",
    "estimate_tokens",
    "money",
]

#: Output tokens assumed per answer when ``max_tokens`` is not given.
DEFAULT_OUTPUT_TOKENS = 256
#: Input tokens assumed per image (providers charge roughly 250-1,600 depending on size).
IMAGE_TOKENS = 1_000
#: Tokens assumed per message for roles and separators.
MESSAGE_TOKENS = 4


def money(usd: float) -> str:
    """``$0.0012`` below a dollar, ``$12.34`` above, ``<$0.0001`` for less than that."""
    if 0 < usd < 0.00005:
        return "<$0.0001"
    return f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"


def estimate_tokens(text: str) -> int:
    """About four characters a token (the usual rule of thumb for English and code)."""
    return math.ceil(len(text) / 4) if text else 0


def _message_tokens(message: Message) -> int:
    total = MESSAGE_TOKENS
    for block in message.content:
        if isinstance(block, ImageBlock):
            total += IMAGE_TOKENS
        elif isinstance(block, (ToolResultBlock, TextBlock)):
            total += estimate_tokens(block.text)
        else:
            total += estimate_tokens(getattr(block, "text", "") or getattr(block, "arguments", ""))
    return total


def prompt_tokens(prompt: Any, system: str | None = None, schema: Any = None) -> int:
    """The estimated input tokens of one prompt (text, a message or a conversation)."""
    if isinstance(prompt, Message):
        total = _message_tokens(prompt)
    elif isinstance(prompt, Sequence) and not isinstance(prompt, str):
        total = sum(_message_tokens(m) for m in prompt if isinstance(m, Message))
    else:
        total = MESSAGE_TOKENS + estimate_tokens(str(prompt))
    if system:
        total += MESSAGE_TOKENS + estimate_tokens(system)
    if schema is not None:
        from ..core.response_schema import as_schema

        total += estimate_tokens(json.dumps(as_schema(schema).schema))
    return total


@dataclass
class CostEstimate:
    """The estimated cost of sending some prompts (see the module docstring)."""

    prompts: int
    input_tokens: int
    output_tokens: int
    model: str | None
    price: Price | None

    @property
    def usd(self) -> float | None:
        """Dollars, or ``None`` when the model's price is unknown."""
        if self.price is None:
            return None
        from ..core.protocol import TokenUsage

        return cost(TokenUsage(self.input_tokens, self.output_tokens), self.price)

    def __str__(self) -> str:
        amount = money(self.usd) if self.usd is not None else "unknown cost (no price known)"
        return (
            f"~{amount} for {self.prompts:,} prompt{'s' if self.prompts != 1 else ''} "
            f"(~{self.input_tokens:,} input + {self.output_tokens:,} output tokens"
            f"{f' of {self.model}' if self.model else ''})"
        )

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def estimate_cost(
    prompts: Any,
    *,
    provider: str = "mock",
    model: str | None = None,
    engine: Engine | None = None,
    template: str | None = None,
    **options: Unpack[TurnOptions],
) -> CostEstimate:
    """The estimated cost of sending ``prompts`` (one prompt, a list, a pandas Series, or a
    DataFrame with ``template``), without sending anything. ``options``: those of the requests
    (``max_tokens``, ``system``, ``schema`` and ``images`` change the estimate), as ``map``
    takes them."""
    from .dataframes import prompts_of

    if engine is None:
        from ..engine.session import default_engine

        engine = default_engine()
    items = prompts_of(prompts, template)[0] if template or _is_frame(prompts) else None
    if items is None:
        items = [prompts] if isinstance(prompts, str | Message) else list(prompts)
    return estimate_request(request_of(provider, model, options, "estimate_cost"), engine, items)


def estimate_request(
    request: Request, engine: Engine, prompts: Sequence[Any] | None = None
) -> CostEstimate:
    """The estimated cost of ``request``, sent once for each of ``prompts`` (in place of its
    own prompt and messages), or once as it is."""
    if prompts is None:
        prompt = [Message.user(request.prompt)] if request.prompt is not None else []
        prompts = [[*(request.messages or ()), *prompt]]
    images = request.images
    per_image = IMAGE_TOKENS * (len(images) if isinstance(images, list | tuple) else 1)
    extra = per_image if images is not None else 0
    tokens = sum(prompt_tokens(p, request.system, request.schema) + extra for p in prompts)
    out = len(prompts) * (request.max_tokens or DEFAULT_OUTPUT_TOKENS)
    model = request.model
    if model is None:
        try:
            model = engine.provider(request.provider).model
        except LlmError:
            model = None
    return CostEstimate(len(prompts), tokens, out, model, price_of(engine, request.provider, model))


def _is_frame(obj: Any) -> bool:
    return type(obj).__module__.startswith("pandas") and hasattr(obj, "columns")


def cap_value(value: Any, what: str = "max_cost") -> float:
    """``value`` as a cap in dollars: a number, not negative, not NaN (a NaN compares false with
    everything, so it would cap nothing); ``inf`` is allowed and caps nothing, knowingly."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise LlmError(
            f"{what} takes a number of US dollars (e.g. 0.50), not {value!r}",
            ErrorCode.INVALID_OPTIONS,
        )
    if value < 0:
        raise LlmError(
            f"{what} must not be negative (got {value!r}); 0 sends only what is free",
            ErrorCode.INVALID_OPTIONS,
        )
    return float(value) + 0.0  # -0.0 shows as $0.0000
