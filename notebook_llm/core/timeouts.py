"""The time limits of one request: :class:`Timeouts` (a deadline and an idle limit).

A plain value the caller sets (``Engine(timeouts=)``, ``complete(..., timeouts=)``); the HTTP
layer enforces it (:mod:`notebook_llm.wire.deadline`). ``None`` turns one limit off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import ErrorCode, LlmError

__all__ = ["DEFAULT_TIMEOUTS", "Timeouts"]


@dataclass(frozen=True)
class Timeouts:
    """The time limits of a request, in seconds (``None``: no limit)."""

    #: The whole request: headers, body, every retry's own attempt (each attempt has its own).
    deadline: float | None = 15 * 60.0
    #: A stream's longest wait for its next event (the first one included).
    idle: float | None = 5 * 60.0

    def __post_init__(self) -> None:
        for name in ("deadline", "idle"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise LlmError(
                    f"Timeouts({name}=...) must be seconds (a number) or None, "
                    f"not {type(value).__name__}",
                    ErrorCode.INVALID_OPTIONS,
                )
            if not (value > 0 and math.isfinite(value)):
                raise LlmError(
                    f"Timeouts({name}=...) must be a positive number of seconds or None "
                    f"(no limit), not {value!r}",
                    ErrorCode.INVALID_OPTIONS,
                )


#: A reasoning model that thinks for several minutes before its first token fits under the idle
#: limit; an answer that streams for a quarter of an hour is cut. Raise both for longer runs.
DEFAULT_TIMEOUTS = Timeouts()
