"""Checking streams against the five rules, and folding events into a :class:`Completion`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .errors import ErrorCode, LlmError
from .protocol import (
    Block,
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishReason,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)

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
            details={"rule": rule, "position": self._position, "event": event.to_json()},
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


# --------------------------------------------------------------------------------------------


@dataclass
class Completion:
    """The result of a generation, folded from its events."""

    blocks: list[Block] = field(default_factory=list)
    #: Token counts as the provider reported them; ``None`` when it reported none (some
    #: OpenAI-compatible servers send no usage in streams): never zeros standing in for unknown.
    usage: TokenUsage | None = None
    finish: FinishReason | None = None
    events: list[Event] = field(default_factory=list, repr=False)
    provider: str | None = None
    model: str | None = None
    #: Per-step completions when this is the result of a tool loop (see ``run_tools``).
    steps: list[Completion] = field(default_factory=list, repr=False)
    #: Messages of the tool loop (assistant turns and tool results), for history.
    transcript: list[Message] = field(default_factory=list, repr=False)

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.blocks if isinstance(b, TextBlock))

    @property
    def reasoning(self) -> str:
        return "".join(b.text for b in self.blocks if isinstance(b, ReasoningBlock))

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        return [b for b in self.blocks if isinstance(b, ToolCallBlock)]

    @property
    def error(self) -> LlmError | None:
        if self.finish is not None and self.finish.kind in ("error", "aborted"):
            return self.finish.failure or LlmError(
                "the stream ended with an error", ErrorCode.UNKNOWN
            )
        return None

    @property
    def ok(self) -> bool:
        return self.error is None

    def message(self) -> Message:
        """This completion as an assistant message, for the next turn of a conversation."""
        return Message(
            "assistant", [b for b in self.blocks if not isinstance(b, TextBlock) or b.text]
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "blocks": [b.to_json() for b in self.blocks],
            "usage": self.usage.to_json() if self.usage else None,
            "finish": self.finish.to_json() if self.finish else None,
        }

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        from .secrets import redact

        finish = self.finish.kind if self.finish else None
        usage = self.usage if self.usage is not None else "<usage not reported>"
        return redact(
            f"Completion(text={self.text[:200]!r}{'...' if len(self.text) > 200 else ''}, "
            f"tool_calls={[t.name for t in self.tool_calls]}, usage={usage}, finish={finish!r}, "
            f"provider={self.provider!r}, model={self.model!r})"
        )


def assemble(events: Iterable[Event]) -> Completion:
    """Fold events into a :class:`Completion`, tolerating bad input.

    Deltas for a block that never started still count (a block is opened for them); a block that
    never ended is built from its deltas; a ``block-end`` wins over accumulated deltas; blocks are
    ordered by index; a second ``usage`` is merged field by field, the later value winning.
    """
    parts: dict[int, dict[str, Any]] = {}
    done: dict[int, Block] = {}
    usage: TokenUsage | None = None
    finish: FinishReason | None = None
    seen: list[Event] = []
    for ev in events:
        seen.append(ev)
        if isinstance(ev, BlockStart):
            parts.setdefault(
                ev.index, {"type": ev.block_type, "text": [], "id": None, "name": None}
            )
        elif isinstance(ev, TextDelta | ReasoningDelta):
            kind = "text" if isinstance(ev, TextDelta) else "reasoning"
            p = parts.setdefault(ev.index, {"type": kind, "text": [], "id": None, "name": None})
            p["text"].append(ev.text)
        elif isinstance(ev, ToolCallDelta):
            p = parts.setdefault(
                ev.index, {"type": "tool-call", "text": [], "id": None, "name": None}
            )
            p["text"].append(ev.arguments_delta)
            p["id"] = p["id"] or ev.id
            p["name"] = p["name"] or ev.name
        elif isinstance(ev, BlockEnd):
            done[ev.index] = ev.block
        elif isinstance(ev, Usage):
            usage = ev.usage if usage is None else _merge_usage(usage, ev.usage)
        elif isinstance(ev, Finish):
            finish = ev.reason
    blocks: list[Block] = []
    for index in sorted(set(parts) | set(done)):
        if index in done:
            blocks.append(done[index])
            continue
        p = parts[index]
        text = "".join(p["text"])
        if p["type"] == "text":
            blocks.append(TextBlock(text))
        elif p["type"] == "reasoning":
            blocks.append(ReasoningBlock(text))
        else:
            blocks.append(ToolCallBlock(p["id"] or f"call_{index}", p["name"] or "", text))
    return Completion(blocks=blocks, usage=usage, finish=finish, events=seen)


def _merge_usage(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    return TokenUsage(
        b.input_tokens or a.input_tokens,
        b.output_tokens or a.output_tokens,
        b.cache_read_tokens if b.cache_read_tokens is not None else a.cache_read_tokens,
        b.cache_write_tokens if b.cache_write_tokens is not None else a.cache_write_tokens,
        b.reasoning_tokens if b.reasoning_tokens is not None else a.reasoning_tokens,
    )
