"""Checking streams against the five rules (:class:`StreamValidator`, :func:`validate_stream`).

Folding events into a result lives in :mod:`notebook_llm.core.completion`.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ErrorCode, LlmError
from .protocol import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = ["StreamValidator", "validate_stream"]

_DELTA_BLOCK_TYPE = {
    "text-delta": "text",
    "reasoning-delta": "reasoning",
    "tool-call-delta": "tool-call",
}


class StreamValidator:
    """Incremental checker of the five stream rules; :meth:`check` one event at a time.

    Rules (numbers are used in error messages):

    1. every ``block-start`` has a matching ``block-end`` (same index, same block type);
    2. indexes start at 0 and increase in first-seen order; deltas of one block reuse its index;
    3. a delta only arrives while a block of its type is open at that index;
    4. at most one ``usage``, and it comes before ``finish``;
    5. ``finish`` is last, exactly once; blocks may still be open only if it is error/aborted.
    """

    __slots__ = ("_finished", "_next_index", "_open", "_position", "_usage_seen")

    def __init__(self) -> None:
        self._open: dict[int, str] = {}
        self._next_index = 0
        self._usage_seen = False
        self._finished = False
        self._position = 0

    def _fail(self, rule: int, what: str, event: Event) -> LlmError:
        return LlmError(
            f"stream rule {rule} broken at event #{self._position} ({event.type}): {what}",
            ErrorCode.INVARIANT,
            details={"rule": rule, "position": self._position, "event": event.to_dict()},
        )

    def check(self, event: Event) -> None:
        # The commonest event first: more text for an open text block (one dict lookup).
        if (
            type(event) is TextDelta
            and not self._finished
            and self._open.get(event.index) == "text"
        ):
            self._position += 1
            return
        if self._finished:
            raise self._fail(5, "an event after finish", event)
        t = event.type
        if isinstance(event, BlockStart):
            if event.index != self._next_index:
                raise self._fail(
                    2, f"block-start index {event.index}, expected {self._next_index}", event
                )
            self._open[event.index] = event.block_type
            self._next_index += 1
        elif isinstance(event, TextDelta | ReasoningDelta | ToolCallDelta):
            want = _DELTA_BLOCK_TYPE[t]
            have = self._open.get(event.index)
            if have is None:
                raise self._fail(3, f"{t} for index {event.index}, where no block is open", event)
            if have != want:
                raise self._fail(3, f"{t} for index {event.index}, which is a {have} block", event)
        elif isinstance(event, BlockEnd):
            have = self._open.pop(event.index, None)
            if have is None:
                raise self._fail(1, f"block-end for index {event.index}, which is not open", event)
            if have != event.block.type:
                raise self._fail(
                    1, f"block-end carries a {event.block.type} block for a {have} block", event
                )
        elif isinstance(event, Usage):
            if self._usage_seen:
                raise self._fail(4, "a second usage event", event)
            self._usage_seen = True
        elif isinstance(event, Finish):
            if self._open and event.reason.kind not in ("error", "aborted"):
                raise self._fail(
                    5,
                    f"finish {event.reason.kind!r} with blocks still open: {sorted(self._open)}",
                    event,
                )
            self._finished = True
        else:  # pragma: no cover - defensive: not an event at all
            raise LlmError(f"not a stream event: {event!r}", ErrorCode.INVARIANT)
        self._position += 1

    def close(self) -> None:
        """Call at the end of the stream: checks that ``finish`` arrived."""
        if not self._finished:
            raise LlmError(
                f"stream rule 5 broken: the stream ended after {self._position} events without finish",
                ErrorCode.INVARIANT,
                details={"rule": 5, "position": self._position},
            )

    @property
    def finished(self) -> bool:
        return self._finished


def validate_stream(events: Iterable[Event]) -> list[Event]:
    """Check a complete stream against the five rules; return it as a list.

    Raises ``LlmError(code='INVARIANT')`` naming the broken rule and the event's position.
    """
    validator = StreamValidator()
    out = []
    for event in events:
        validator.check(event)
        out.append(event)
    validator.close()
    return out
