"""A cost cap in US dollars, in one place: ``map(..., max_cost=)`` and ``%llm budget`` use it.

The promise: what is spent overshoots the cap by about one answer at most. Three rules keep it
when the numbers lie or are missing:

* **What was not reported is estimated.** An answer with no usage report, or a stream cut
  short, costs its request's estimated input tokens plus the tokens of the text it received
  (:func:`notebook_llm.api.estimate.estimate_tokens`); a reported count that is not a count
  (negative, not finite, not a whole number) counts as not reported.
* **A request in flight is priced at its worst case** (:meth:`CostCap.reservation`): its
  estimated input plus a full answer of ``max_tokens``, or, when no ``max_tokens`` is given, of
  :data:`FULL_ANSWER_TOKENS` or the longest answer seen so far if longer. One more request goes
  out only while what is spent plus every reservation stays under the cap (the first always
  goes), so one cheap or failed first answer cannot let every worker go at once. A tight cap
  therefore sends one request at a time; a loose one (cheap tokens) keeps every worker busy.
* **Prices are checked** where they enter (:func:`notebook_llm.engine.pricing.checked_price`).

A free model passes any cap: the mock, and Ollama on this machine. Another server on this
machine is not taken for free (a local proxy may forward to a paid API): a free local model is
priced at 0 with ``set_price(model, 0, 0)``. A model with no known price cannot be capped:
the cap refuses it in one line that says how to price it (``notebook_llm.set_price``) or to run
it uncapped (``allow_unpriced=True``); with ``allow_unpriced`` it says so once and its answers
are not counted.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.completion import Completion
from ..core.errors import ErrorCode, LlmError
from ..engine.pricing import Price, price_of
from .estimate import estimate_request, estimate_tokens, money

if TYPE_CHECKING:
    from ..engine.engine import Engine
    from ..engine.request import Request
    from .turn import Turn

__all__ = ["Budget", "CostCap", "Ticket", "token_count"]

log = logging.getLogger("notebook_llm.api.batch")

#: Error codes of a request refused before any model work (nothing to pay for).
_REFUSED_BEFORE_WORK = frozenset(
    {
        ErrorCode.AUTH,
        ErrorCode.QUOTA,
        ErrorCode.RATE_LIMIT,
        ErrorCode.NOT_FOUND,
        ErrorCode.INVALID_OPTIONS,
        ErrorCode.NO_ADAPTER,
        ErrorCode.BUDGET_EXCEEDED,
        ErrorCode.CONTEXT_WINDOW_EXCEEDED,
        ErrorCode.REPLAY_MISS,
        ErrorCode.ABORTED,  # (a request stopped mid-stream holds its partial completion)
    }
)
#: The most tokens one answer is believed to have used (a count past it is not a count).
MAX_TOKENS_PER_ANSWER = 10_000_000
#: The answer a request without ``max_tokens`` is reserved at (a long answer of today's
#: models; the longest answer seen so far if longer).
FULL_ANSWER_TOKENS = 4_096

_told_unpriced: set[tuple[str, str | None]] = set()


def token_count(value: Any) -> int | None:
    """``value`` as a token count, or ``None`` when it cannot be one (negative, NaN, infinite,
    fractional, a bool, absurdly large)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        return None
    count = int(value)
    return count if 0 <= count <= MAX_TOKENS_PER_ANSWER else None


@dataclass(eq=False)
class Ticket:
    """One admitted request: what it was reserved at (released when it is settled)."""

    request: Request
    reserved: float


class CostCap:
    """A cap of ``max_cost`` dollars on what the requests it admits spend (module docstring)."""

    def __init__(
        self,
        max_cost: float,
        engine: Engine,
        *,
        what: str = "max_cost",
        allow_unpriced: bool = False,
        tell_unpriced: bool = True,
    ) -> None:
        from .estimate import cap_value

        self.cap = cap_value(max_cost, what)
        self.engine = engine
        self.what = what
        self.allow_unpriced = allow_unpriced
        self.tell_unpriced = tell_unpriced
        self.spent = 0.0
        self._in_flight: list[Ticket] = []
        self._longest_output = FULL_ANSWER_TOKENS
        self._gate: asyncio.Condition | None = None

    # ---------------------------------------------------------------- prices

    def price(self, request: Request) -> Price | None:
        """The request's price: ``(0, 0)`` for a free model; ``None`` for an unpriced one that
        ``allow_unpriced`` lets through (told once); else a refusal (``BUDGET_EXCEEDED``)."""
        found = price_of(self.engine, request.provider, request.model)
        if found is not None:
            return found
        if _is_free(self.engine, request.provider):
            return (0.0, 0.0)
        model = request.model or _default_model(self.engine, request.provider)
        if self.allow_unpriced:
            key = (request.provider, model)
            if self.tell_unpriced and key not in _told_unpriced:
                _told_unpriced.add(key)
                log.warning(
                    "%s: no price is known for %s:%s; its answers run uncapped "
                    "(allow_unpriced=True)",
                    self.what,
                    request.provider,
                    model or "?",
                )
            return None
        raise LlmError(
            f"{self.what}: no price is known for {request.provider}:{model or '?'}, so its cost "
            f'cannot be capped; price it with notebook_llm.set_price("{model or "MODEL"}", '
            "INPUT_USD_PER_M, OUTPUT_USD_PER_M), or run it uncapped with allow_unpriced=True",
            ErrorCode.BUDGET_EXCEEDED,
            provider=request.provider,
        )

    # ---------------------------------------------------------------- estimates

    def check_batch(self, request: Request, prompts: list[Any]) -> None:
        """Refuse (``BUDGET_EXCEEDED``, nothing sent) a batch whose estimate is over the cap."""
        price = self.price(request)
        if price is None:
            return
        estimate = estimate_request(request, self.engine, prompts)
        usd = _usd(estimate.input_tokens, estimate.output_tokens, price)
        if usd > self.cap:
            raise LlmError(
                f"not sent: the estimated cost {money(usd)} ({estimate.prompts:,} prompts, "
                f"~{estimate.input_tokens:,} input + {estimate.output_tokens:,} output tokens) "
                f"is over {self.what}={money(self.cap)}; raise {self.what}=, lower max_tokens= "
                "or send fewer prompts",
                ErrorCode.BUDGET_EXCEEDED,
                provider=request.provider,
                details={"estimate": usd, "max_cost": self.cap},
            )

    def reservation(self, request: Request) -> float:
        """The most one request can cost: its estimated input and a full answer (module doc)."""
        price = self.price(request)
        if price is None:
            return 0.0
        estimate = estimate_request(request, self.engine)
        output = request.max_tokens or self._longest_output
        tries = 1 + (request.schema_retries or 0 if request.schema is not None else 0)
        return tries * _usd(estimate.input_tokens, output, price)

    def check_turn(self, request: Request) -> None:
        """Refuse a turn whose worst case would take what is spent over the cap (a sequential
        cap: ``%llm budget``)."""
        usd = self.reservation(request)
        if self.spent + usd > self.cap:
            raise LlmError(
                f"not sent: this cell's estimated cost {money(usd)} would take the spent "
                f"{money(self.spent)} over the budget of {money(self.cap)}; raise it with "
                f"%llm budget {max(self.cap * 2, self.spent + usd):.2f} (or lower --max-tokens)",
                ErrorCode.BUDGET_EXCEEDED,
                provider=request.provider,
            )

    # ---------------------------------------------------------------- concurrent batches

    async def admit(self, request: Request, stopped: Any = None) -> Ticket | None:
        """Wait until one more request fits under the cap (module docstring); ``None`` once
        what is spent reached it. ``stopped()``: a batch being stopped admits at once (the
        request is then not sent)."""
        if self._gate is None:
            self._gate = asyncio.Condition()
        async with self._gate:
            while True:
                if self.spent >= self.cap and self.spent > 0:  # a cap of 0 lets free ones go
                    return None
                if not self._in_flight or (stopped is not None and stopped()):
                    break
                # priced now, with the longest answer seen so far (an answer may have shown
                # that the ones in flight cost more than thought when they went out)
                committed = sum(self.reservation(t.request) for t in self._in_flight)
                if self.spent + committed + self.reservation(request) <= self.cap:
                    break
                await self._gate.wait()
            ticket = Ticket(request, self.reservation(request))
            self._in_flight.append(ticket)
            return ticket

    async def settle(self, ticket: Ticket, result: Any) -> float:
        """Count what an admitted request cost and free its place; returns the cost."""
        spent = self.add(result, ticket.request)
        assert self._gate is not None
        async with self._gate:
            self._in_flight.remove(ticket)
            self._gate.notify_all()
        return spent

    def refusal(self, provider: str) -> LlmError:
        """The error held by a prompt not sent because the cap was reached."""
        return LlmError(
            f"not sent: the cost spent ({money(self.spent)}) reached {self.what}={money(self.cap)}",
            ErrorCode.BUDGET_EXCEEDED,
            provider=provider,
        )

    # ---------------------------------------------------------------- counting

    def add(self, result: Any, request: Request, price_factor: float = 1.0) -> float:
        """Count what ``result`` (a Completion, or an LlmError that may hold a partial one)
        cost; returns it. ``price_factor``: the share of the price it pays (a batch API's
        answers: half)."""
        usd = self.cost_of(result, request, price_factor)
        self.spent += usd
        return usd

    def cost_of(self, result: Any, request: Request, price_factor: float = 1.0) -> float:
        """What ``result`` cost, by the rules of the module docstring (what was not reported
        estimated, a count that is not one not believed), without counting it."""
        try:
            price = self.price(request)
        except LlmError:
            price = None
        if price is None:
            return 0.0
        input_tokens, output_tokens = self._tokens(result, request)
        self._longest_output = max(self._longest_output, output_tokens)
        return price_factor * _usd(input_tokens, output_tokens, price)

    def estimate(self, request: Request, price_factor: float = 1.0) -> float:
        """One request's estimated cost (its input, and ``max_tokens`` or the usual answer):
        what a batch API's row is reserved at before it is sent (every row of a batch is in
        flight at once; with ``max_tokens`` it is the row's worst case)."""
        price = self.price(request)
        if price is None:
            return 0.0
        estimate = estimate_request(request, self.engine)
        return price_factor * _usd(estimate.input_tokens, estimate.output_tokens, price)

    def _tokens(self, result: Any, request: Request) -> tuple[int, int]:
        completion = result if isinstance(result, Completion) else None
        if isinstance(result, LlmError):
            completion = result.details.get("completion")
            if not isinstance(completion, Completion):
                if result.code in _REFUSED_BEFORE_WORK:
                    return 0, 0
                return estimate_request(request, self.engine).input_tokens, 0
        assert completion is not None
        usage = completion.usage
        reported_in = token_count(usage.input_tokens) if usage is not None else None
        reported_out = token_count(usage.output_tokens) if usage is not None else None
        if reported_in is None or (usage is not None and reported_in == 0):
            reported_in = estimate_request(request, self.engine).input_tokens
        received = completion.text + completion.reasoning
        received += "".join(c.arguments for c in completion.tool_calls)
        estimated_out = estimate_tokens(received)
        if reported_out is None or (reported_out == 0 and received):
            reported_out = estimated_out  # "nothing" for a text that came is not a count
        return reported_in, reported_out

    def note(self) -> str:
        """``spent $0.0012 of $1.00 budget``."""
        return f"spent {money(self.spent)} of {money(self.cap)} budget"


def _usd(input_tokens: int, output_tokens: int, price: Price) -> float:
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


def _default_model(engine: Engine, provider: str) -> str | None:
    try:
        model: str | None = engine.provider(provider).model
    except Exception:  # an unknown provider has no model
        return None
    return model


def _is_free(engine: Engine, provider: str) -> bool:
    """The mock, or Ollama serving from this machine. Any other server on this machine is not
    taken for free (a local proxy may forward to a paid API): price its model at 0 with
    ``set_price(model, 0, 0)``."""
    try:
        config = engine.provider(provider)
    except Exception:  # an unknown provider is not known to be free
        return False
    adapter = (
        config.adapter if isinstance(config.adapter, str) else getattr(config.adapter, "name", "")
    )
    if config.name == "mock" or str(adapter).startswith("mock"):
        return True
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(config.base_url or "").hostname or "").lower()
    except ValueError:
        return False
    local = host in ("localhost", "::1") or host.startswith("127.")
    return local and adapter == "ollama"


class Budget:
    """The session's cost cap for ``%%llm`` cells (``%llm budget USD``): a
    :class:`~notebook_llm.api.cost_cap.CostCap` asked once per cell."""

    def __init__(self, cap: float, engine: Engine) -> None:
        self._cap = CostCap(cap, engine, what="a budget")
        self.cap = self._cap.cap
        self.engine = engine

    @property
    def spent(self) -> float:
        return self._cap.spent

    @spent.setter
    def spent(self, value: float) -> None:
        self._cap.spent = value

    def check_turn(self, turn: Turn) -> None:
        """Refuse a turn whose worst case (a full answer) would take the spent cost over the
        cap, or whose model has no price."""
        self._cap.check_turn(turn.request)

    def add(self, completion: Completion, turn: Turn) -> None:
        """Count what a finished turn cost (estimated where the provider reported nothing)."""
        self._cap.add(completion, turn.request)

    def note(self) -> str:
        """The footer's part: ``spent $0.0012 of $1.00 budget``."""
        return self._cap.note()
