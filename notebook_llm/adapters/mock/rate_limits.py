"""The mock server's rate limit: :class:`MockRateLimit`, a provider's limit on requests (and
tokens) per window, with the headers a provider sends and a 429 past it.

It keeps a token bucket, as OpenAI and Anthropic describe theirs: the capacity is the limit,
refilled continuously at limit / window, a request takes one (and its tokens from the tokens
bucket) when it arrives, and one that does not fit is answered 429 with ``Retry-After`` (and
``retry-after-ms``) and takes nothing. Every answer carries the state as the provider would:
OpenAI's ``x-ratelimit-limit-requests`` / ``-remaining-`` / ``-reset-`` (a duration) on the
OpenAI and Ollama routes, Anthropic's ``anthropic-ratelimit-requests-*`` (an RFC 3339 reset
time) on ``/v1/messages``.

``window`` is a minute by default; a test gives a short one so that a batch meets the limit in
a second, not a minute. ``clock`` is ``time.monotonic`` unless a test passes its own.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

__all__ = ["MockRateLimit"]

#: A request fits when the bucket's level plus one is at most the limit plus this much: the
#: float arithmetic of two clocks must not turn an exact fit into a 429.
_EPSILON = 1e-6


@dataclass
class MockRateLimit:
    """``requests`` (and ``tokens``) per ``window`` seconds; see the module docstring."""

    requests: float
    window: float = 60.0
    tokens: float | None = None
    #: Send the limit headers on every answer (``False``: only the 429 says anything).
    headers: bool = True
    clock: Callable[[], float] = time.monotonic
    #: How many requests were answered 429 so far.
    rejected: int = 0
    #: How many requests were let through.
    accepted: int = 0
    _levels: dict[str, float] = field(default_factory=dict)
    _last: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _leak(self, now: float) -> None:
        if self._last is not None:
            elapsed = max(now - self._last, 0.0)
            for kind, limit in self._limits().items():
                level = self._levels.get(kind, 0.0)
                self._levels[kind] = max(level - elapsed * limit / self.window, 0.0)
        self._last = now

    def _limits(self) -> dict[str, float]:
        out = {"requests": float(self.requests)}
        if self.tokens is not None:
            out["tokens"] = float(self.tokens)
        return out

    def admit(self, tokens: float, anthropic: bool) -> tuple[bool, dict[str, str]]:
        """One arriving request of ``tokens``: whether it may go on, and the headers to send."""
        with self._lock:
            now = self.clock()
            self._leak(now)
            weights = {"requests": 1.0, "tokens": float(tokens)}
            limits = self._limits()
            fits = all(
                self._levels.get(kind, 0.0) + min(weights[kind], limit) <= limit + _EPSILON
                for kind, limit in limits.items()
            )
            if fits:
                self.accepted += 1
                for kind, limit in limits.items():
                    self._levels[kind] = self._levels.get(kind, 0.0) + min(weights[kind], limit)
            else:
                self.rejected += 1
            headers = self._headers(anthropic) if self.headers else {}
            if not fits:
                wait = max(
                    (self._levels.get(k, 0.0) + min(weights[k], lim) - lim) * self.window / lim
                    for k, lim in limits.items()
                )
                wait = max(wait, 0.001)
                headers["retry-after"] = str(max(1, math.ceil(wait)))
                headers["retry-after-ms"] = str(math.ceil(wait * 1000))
            return fits, headers

    def _headers(self, anthropic: bool) -> dict[str, str]:
        out: dict[str, str] = {}
        for kind, limit in self._limits().items():
            level = self._levels.get(kind, 0.0)
            remaining = max(math.floor(limit - level + _EPSILON), 0)
            full_in = level * self.window / limit
            if anthropic:
                reset = datetime.now(UTC) + timedelta(seconds=full_in)
                prefix = f"anthropic-ratelimit-{kind}"
                out[f"{prefix}-limit"] = str(int(limit))
                out[f"{prefix}-remaining"] = str(remaining)
                out[f"{prefix}-reset"] = reset.isoformat(timespec="seconds").replace("+00:00", "Z")
            else:
                out[f"x-ratelimit-limit-{kind}"] = str(int(limit))
                out[f"x-ratelimit-remaining-{kind}"] = str(remaining)
                out[f"x-ratelimit-reset-{kind}"] = f"{full_in * 1000:.0f}ms"
        return out
