"""Events of the tool-calling loop, interleaved with the protocol events of each step.

A tool loop is a sequence of generations ("steps"). ``stream_tools`` yields, in order:
``StepStart(step)``, then that step's protocol events (``BlockStart`` ... ``Finish``), then one
``ToolRun`` per call when it starts and one ``ToolOutcome`` per call when it ends, then the next
``StepStart``... Views render these; each step's protocol events obey the five rules on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ...core.protocol import Event, ImageBlock


@dataclass(slots=True)
class StepStart:
    step: int
    type: Literal["step-start"] = "step-start"

    def to_json(self) -> dict[str, Any]:
        return {"type": "step-start", "step": self.step}


@dataclass(slots=True)
class ToolRun:
    """A tool call is about to run (after confirmation, if asked for). ``source`` says where
    the tool lives: empty for a Python function, ``mcp:NAME`` for a tool of MCP server NAME."""

    call_id: str
    name: str
    arguments: str
    type: Literal["tool-run"] = "tool-run"
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {
            "type": "tool-run",
            "callId": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
        }
        if self.source:
            out["source"] = self.source
        return out


@dataclass(slots=True)
class ToolOutcome:
    """A tool call finished: its result text, or the error it raised, or it was skipped.

    Not :class:`~notebook_llm.core.protocol.ToolResultBlock` (the message block that carries a result
    back to the model): this is the loop telling a view how a run ended. Its JSON ``type`` stays
    ``"tool-result"``. ``images``: what the tool gave back as images (an MCP tool can), which
    the model receives after the results; ``source`` as for :class:`ToolRun`."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    status: Literal["ok", "error", "skipped"] = "ok"
    duration: float = 0.0
    type: Literal["tool-result"] = "tool-result"
    source: str = ""
    images: list[ImageBlock] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "tool-result",
            "callId": self.call_id,
            "name": self.name,
            "content": self.content,
            "isError": self.is_error,
            "status": self.status,
            "duration": self.duration,
        }
        if self.source:
            out["source"] = self.source
        if self.images:
            out["images"] = [image.to_dict() for image in self.images]
        return out


LoopEvent: TypeAlias = Event | StepStart | ToolRun | ToolOutcome
