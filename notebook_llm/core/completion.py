"""What a generation produced: :class:`Completion`, folded from its events by :func:`assemble`.

The completion layer sits right above the protocol (``protocol -> completion -> engine``): it
imports only :mod:`notebook_llm.core.protocol`, :mod:`notebook_llm.core.errors` and
:mod:`notebook_llm.core.redaction`, so the engine, the tool loop, ``Chat``, the widgets and the
conformance kit can all return or show a ``Completion`` without importing each other.

:func:`assemble` is deliberately tolerant (it folds any event list, even one that breaks the
five rules, so a view can always show what arrived); checking the rules is
:mod:`notebook_llm.core.stream_rules`'s job.
"""

from __future__ import annotations

import json
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

__all__ = ["Completion", "assemble"]


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
    #: With ``schema=``: the answer validated into the schema's type (a pydantic model, a
    #: dataclass, or a dict for a JSON Schema); ``None`` without a schema or when it failed
    #: (then ``error`` is ``SCHEMA_MISMATCH`` and ``text`` is the raw answer).
    parsed: Any = field(default=None, repr=False)

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

    def to_dict(self) -> dict[str, Any]:
        """Blocks, usage and finish in the reference JSON shape, as a dict."""
        return {
            "blocks": [b.to_dict() for b in self.blocks],
            "usage": self.usage.to_dict() if self.usage else None,
            "finish": self.finish.to_dict() if self.finish else None,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def __str__(self) -> str:
        """The answer's text, redacted as :meth:`__repr__` is (``print(completion)`` reaches a
        cell or a log; ``completion.text`` is the text as the model sent it)."""
        from .redaction import redact

        return redact(self.text)

    def __repr__(self) -> str:
        from .redaction import redact, shorten

        finish = self.finish.kind if self.finish else None
        usage = self.usage if self.usage is not None else "<usage not reported>"
        return redact(
            f"Completion(text={shorten(self.text, 200, '...')!r}, "
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
