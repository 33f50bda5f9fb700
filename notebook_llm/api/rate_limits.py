"""A batch's rate limits, kept before the provider answers 429: :class:`RateLimits` and the
:class:`RateGate` every request of a batch passes.

Three sources, in this order:

* **Given**: ``map(..., rpm=, tpm=)`` (requests and tokens a minute), or
  ``rate_limits=RateLimits(...)`` for a server whose window is not a minute.
* **Learned**: with no limit given, from what the provider says on each response (the seam
  :mod:`notebook_llm.wire.response_watch`): OpenAI's ``x-ratelimit-limit-requests`` /
  ``-tokens`` and their ``remaining`` / ``reset``, Anthropic's ``anthropic-ratelimit-requests-*``
  / ``-tokens-*`` (and ``-input-tokens-*``). The first response that names a limit installs it,
  counting what the server says is already used; when ``remaining`` falls to what is already in
  flight, the batch waits for the ``reset`` the server gave.
* **After a 429**: the whole batch waits (``Retry-After``, else the reset header, else one
  second), not the one prompt: the engine's retry of that prompt waits with it.

The bucket is aiolimiter's ``AsyncLimiter``: a leaky bucket, which is the algorithm both
OpenAI and Anthropic document for their limits (capacity the per-minute limit, refilled
continuously), asyncio-native, one small class with no dependencies, maintained. (``limits``
and ``pyrate-limiter`` count windows in a storage backend, built for web servers that refuse
requests rather than for a client that waits; their sliding window is not the providers'
bucket.) What no limiter offers is added here, in :class:`RateGate`:

* **A request counts from its start until its answer ends.** Before a request goes out, the
  bucket must have room for it *and for every request still in flight*; its drop enters the
  bucket when its exchange ends. A request therefore reaches the server no earlier than the
  bucket allowed, and is counted no earlier than the server counted it, so however the network
  delays one request against another, the server's bucket of the same size and rate never
  overflows (no 429 with ``rpm=`` set, whatever the machine's speed). The cost: at most as many
  requests in flight as the limit, far more than any ``concurrency``.
* **Weights**: a request weighs 1 in the requests bucket and its estimated tokens (input
  estimate plus ``max_tokens``, as OpenAI counts them) in the tokens bucket
  (:func:`request_weight`, set by the batch for each prompt).
* **Learning and pausing** as above.

The gate is entered by each HTTP request while it holds its batch slot
(:func:`notebook_llm.wire.slots.request_slots` ``gate=``), so the engine's retries are paced
too. Header values are untrusted: each is bounded in length, parsed without a regex, and
checked (finite, positive, capped) before it steers anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from aiolimiter import AsyncLimiter

from ..core.errors import ErrorCode, LlmError
from ..wire.http_errors import retry_after_from_headers

__all__ = [
    "LIMIT_HEADERS",
    "RateGate",
    "RateLimits",
    "parse_reset",
    "rate_limits_of",
    "request_weight",
]

#: The longest wait one header may impose on a batch (seconds): a hostile or broken server
#: cannot park a notebook for hours.
MAX_PAUSE = 120.0
#: A header value longer than this is ignored (no number or duration needs more).
MAX_HEADER_CHARS = 64
#: The largest limit believed from a header (requests or tokens a period).
MAX_LIMIT = 1e12

#: (kind, limit, remaining, reset) header names of each provider; ``reset`` is a duration
#: (OpenAI: ``1s``, ``6m0s``, ``120ms``) or an RFC 3339 time (Anthropic).
LIMIT_HEADERS: tuple[tuple[str, str, str, str], ...] = (
    ("requests", "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
     "x-ratelimit-reset-requests"),
    ("tokens", "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens",
     "x-ratelimit-reset-tokens"),
    ("requests", "anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining",
     "anthropic-ratelimit-requests-reset"),
    ("tokens", "anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining",
     "anthropic-ratelimit-tokens-reset"),
    ("tokens", "anthropic-ratelimit-input-tokens-limit",
     "anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"),
)  # fmt: skip


@dataclass(frozen=True)
class RateLimits:
    """Client-side limits of a batch: ``rpm`` requests and ``tpm`` tokens per ``period``
    seconds (60: a minute, as providers state them; a server whose window is shorter, such as a
    gateway limiting per second, takes its own). ``None``: learn it from the provider's headers.
    ``learn=False``: never learn (only a 429 still pauses the batch)."""

    rpm: float | None = None
    tpm: float | None = None
    period: float = 60.0
    learn: bool = True


def _positive(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise LlmError(f"{name} takes a positive number, not {value!r}", ErrorCode.INVALID_OPTIONS)
    if value <= 0:
        raise LlmError(
            f"{name} must be above 0 (got {value!r}); leave it out to learn the provider's limit",
            ErrorCode.INVALID_OPTIONS,
        )
    return float(value)


def rate_limits_of(rpm: Any = None, tpm: Any = None, rate_limits: Any = None) -> RateLimits:
    """The batch's limits from ``map``'s keywords, each checked (one line on a bad value)."""
    if rate_limits is not None:
        if not isinstance(rate_limits, RateLimits):
            raise LlmError(
                f"rate_limits takes a RateLimits(rpm=, tpm=, period=), not {rate_limits!r}",
                ErrorCode.INVALID_OPTIONS,
            )
        if rpm is not None or tpm is not None:
            raise LlmError("give rpm=/tpm= or rate_limits=, not both", ErrorCode.INVALID_OPTIONS)
        rpm, tpm = rate_limits.rpm, rate_limits.tpm
        period, learn = _positive(rate_limits.period, "period") or 60.0, rate_limits.learn
    else:
        period, learn = 60.0, True
    return RateLimits(_positive(rpm, "rpm"), _positive(tpm, "tpm"), period, learn)


_weight: contextvars.ContextVar[float] = contextvars.ContextVar(
    "notebook_llm_request_weight", default=0.0
)


@contextlib.contextmanager
def request_weight(tokens: float) -> Any:
    """Inside the block, a request weighs ``tokens`` in the tokens bucket (the batch sets it
    around each prompt; the tasks the engine starts for it inherit it)."""
    token = _weight.set(max(0.0, float(tokens)))
    try:
        yield
    finally:
        _weight.reset(token)


def parse_reset(value: str | None, now: float | None = None) -> float | None:
    """Seconds until a limit resets: an OpenAI duration (``1s``, ``6m0s``, ``120ms``,
    ``1h2m3.5s``), a plain number of seconds, or an RFC 3339 time (Anthropic); ``None`` when the
    value is absent, too long or not one of these. Parsed by hand in one pass: no regex meets
    the server's text."""
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > MAX_HEADER_CHARS:
        return None
    seconds = _duration(text)
    if seconds is None and "T" in text:  # an RFC 3339 time
        from datetime import datetime

        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_PAUSE)


_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration(text: str) -> float | None:
    """``6m0s`` / ``120ms`` / ``1.5`` as seconds, else ``None``."""
    try:
        return float(text)
    except ValueError:
        pass
    total, number, i = 0.0, "", 0
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = "ms" if text.startswith("ms", i) else ch
        if unit not in _UNITS or not number:
            return None
        try:
            total += float(number) * _UNITS[unit]
        except ValueError:
            return None
        number, i = "", i + len(unit)
    return None if number else total


def _number(headers: Mapping[str, str], name: str) -> float | None:
    raw = headers.get(name)
    if raw is None or len(raw) > MAX_HEADER_CHARS:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0 or value > MAX_LIMIT:
        return None
    return value


class _Bucket:
    """One limit (requests or tokens): aiolimiter's leaky bucket. The weight of the requests in
    flight is kept by the gate and enters the bucket when each ends (see the module
    docstring)."""

    def __init__(self, limit: float, period: float, learned: bool) -> None:
        self.limit = limit
        self.learned = learned
        self.bucket = AsyncLimiter(limit, period)
        self.drain_per_second = limit / period

    def fits(self, weight: float, in_flight: float) -> bool:
        return self.bucket.has_capacity(in_flight + min(weight, self.limit))

    def wait_hint(self, weight: float) -> float:
        """How long to wait before asking again: the time the bucket takes to drain this
        request's weight (a release wakes the waiters sooner)."""
        return max(min(weight, self.limit) / self.drain_per_second, 0.001)

    async def settle(self, weight: float) -> None:
        """A request ended: its weight enters the bucket (there is room: :meth:`fits` kept the
        bucket's level plus what is in flight under the limit)."""
        weight = min(weight, self.limit)
        if weight > 0 and self.bucket.has_capacity(weight):
            await self.bucket.acquire(weight)


@dataclass
class RateState:
    """What the progress view shows of the limits."""

    rpm: float | None
    tpm: float | None
    learned: bool
    waiting: float  # seconds the batch still waits (a 429 or an empty bucket), 0 when not
    rate_limited: int  # 429 answers so far
    remaining_requests: float | None
    remaining_tokens: float | None

    def __str__(self) -> str:
        parts: list[str] = []
        src = "learned" if self.learned else "set"
        if self.rpm is not None:
            parts.append(f"{self.rpm:,.0f} rpm")
        if self.tpm is not None:
            parts.append(f"{self.tpm:,.0f} tpm")
        text = f"{' / '.join(parts)} ({src})" if parts else "no limit known"
        if self.waiting > 0:
            text += f", waiting {self.waiting:.1f} s"
        if self.rate_limited:
            text += f", {self.rate_limited} x 429"
        return text


class RateGate:
    """The send gate of one batch (see the module docstring): :meth:`passage` around each HTTP
    request, :meth:`observe` on each response."""

    def __init__(self, limits: RateLimits | None = None) -> None:
        self.limits = limits or RateLimits()
        self.period = self.limits.period
        self.requests: _Bucket | None = None
        self.tokens: _Bucket | None = None
        if self.limits.rpm is not None:
            self.requests = _Bucket(self.limits.rpm, self.period, learned=False)
        if self.limits.tpm is not None:
            self.tokens = _Bucket(self.limits.tpm, self.period, learned=False)
        self.paused_until = 0.0  # loop time
        self.rate_limited = 0
        #: What is in flight now (requests, and their tokens), whatever buckets there are.
        self.flying_requests = 0.0
        self.flying_tokens = 0.0
        self.remaining: dict[str, float] = {}
        self._changed: asyncio.Condition | None = None
        self._pending_levels: dict[str, float] = {}

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    # ------------------------------------------------------------------ sending

    @contextlib.asynccontextmanager
    async def passage(self) -> AsyncIterator[None]:
        """Wait until the limits let one more request go, hold its place while it runs."""
        weight = _weight.get()
        await self._admit(weight)
        try:
            yield
        finally:
            await self._release(weight)

    async def _admit(self, weight: float) -> None:
        loop = asyncio.get_running_loop()
        changed = self._condition()
        while True:
            await self._apply_learned()
            wait = self.paused_until - loop.time()
            if wait <= 0:
                blocked = [
                    (bucket, w)
                    for bucket, w, flying in (
                        (self.requests, 1.0, self.flying_requests),
                        (self.tokens, weight, self.flying_tokens),
                    )
                    if bucket is not None and not bucket.fits(w, flying)
                ]
                if not blocked:
                    self.flying_requests += 1.0
                    self.flying_tokens += weight
                    return
                wait = max(b.wait_hint(w) for b, w in blocked)
            async with changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), min(wait, MAX_PAUSE))

    async def _release(self, weight: float) -> None:
        """The request ended: it leaves the flight and enters the buckets there are now (a
        bucket learned while it flew counts it too)."""
        self.flying_requests = max(self.flying_requests - 1.0, 0.0)
        self.flying_tokens = max(self.flying_tokens - weight, 0.0)
        if self.requests is not None:
            await self.requests.settle(1.0)
        if self.tokens is not None:
            await self.tokens.settle(weight)
        changed = self._condition()
        async with changed:
            changed.notify_all()

    # ------------------------------------------------------------------ learning

    def observe(self, status: int, headers: httpx.Headers) -> None:
        """One response (the :mod:`~notebook_llm.wire.response_watch` observer): learn the
        limits it states, and pause the whole batch on a 429."""
        limits: dict[str, tuple[float, float | None, float | None]] = {}
        for kind, limit_name, remaining_name, reset_name in LIMIT_HEADERS:
            limit = _number(headers, limit_name)
            if limit is None or limit < 1 or kind in limits:
                continue
            remaining = _number(headers, remaining_name)
            limits[kind] = (limit, remaining, parse_reset(headers.get(reset_name)))
        loop = asyncio.get_running_loop()
        for kind, (limit, remaining, reset) in limits.items():
            if remaining is not None:
                self.remaining[kind] = remaining
            self._learn(kind, limit, remaining)
            flying = self.flying_requests if kind == "requests" else self.flying_tokens
            # Slow down before the limit: the server has less room left than what is in flight
            # here (this response's own request, counted there already, included) and one more.
            if remaining is not None and reset is not None and remaining < flying:
                self.paused_until = max(self.paused_until, loop.time() + reset)
        if status == 429:
            self.rate_limited += 1
            pause = retry_after_from_headers(headers)
            if pause is None:
                resets = [reset for _, _, reset in limits.values() if reset]
                pause = max(resets) if resets else 1.0
            pause = min(max(pause, 0.0), MAX_PAUSE)
            self.paused_until = max(self.paused_until, loop.time() + pause)

    def _learn(self, kind: str, limit: float, remaining: float | None) -> None:
        """Install a limit the server stated (unless the caller set one, or learning is off),
        and note how much of it the server says is used already."""
        if not self.limits.learn:
            return
        current = self.requests if kind == "requests" else self.tokens
        if current is not None and (not current.learned or current.limit == limit):
            return
        bucket = _Bucket(limit, self.period, learned=True)
        flying = self.flying_requests if kind == "requests" else self.flying_tokens
        if kind == "requests":
            self.requests = bucket
        else:
            self.tokens = bucket
        if remaining is not None:
            # Used at the server, less what is in flight here (it enters the bucket as each
            # request ends; one that had not reached the server yet was not in `remaining`).
            self._pending_levels[kind] = max(limit - remaining - flying, 0.0)

    async def _apply_learned(self) -> None:
        """Fill a newly learned bucket with what the server said was used (async: aiolimiter's
        acquire; there is room, the bucket is new)."""
        while self._pending_levels:
            kind, used = self._pending_levels.popitem()
            bucket = self.requests if kind == "requests" else self.tokens
            if bucket is not None and used > 0:
                amount = min(used, bucket.limit)
                if bucket.bucket.has_capacity(amount):
                    await bucket.bucket.acquire(amount)

    # ------------------------------------------------------------------ showing

    def state(self) -> RateState:
        """The limits as the progress view shows them."""
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:
            now = time.monotonic()  # the loop's clock is monotonic
        learned = any(b is not None and b.learned for b in (self.requests, self.tokens))
        return RateState(
            self.requests.limit * 60 / self.period if self.requests else None,
            self.tokens.limit * 60 / self.period if self.tokens else None,
            learned,
            max(self.paused_until - now, 0.0),
            self.rate_limited,
            self.remaining.get("requests"),
            self.remaining.get("tokens"),
        )
