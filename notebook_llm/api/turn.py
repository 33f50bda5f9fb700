"""What one turn of a conversation asks for: :class:`Turn` (``%%llm``, ``Chat.send``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.protocol import Message
from ..engine.engine import schema_retries_of

__all__ = ["Turn"]


@dataclass
class Turn:
    """What one generation asks for (the options of ``%%llm`` / ``Chat.send``)."""

    provider: str
    model: str | None = None
    messages: list[Message] = field(default_factory=list)
    system: str | None = None
    tools: list[Callable[..., Any]] = field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    confirm: bool | Callable[..., Any] = False
    max_steps: int = 8
    #: ``schema=``: what the answer must follow (see :mod:`notebook_llm.core.response_schema`).
    schema: Any = None
    #: How many times an answer that does not validate is sent back with the message.
    schema_retries: int = 0
    #: ``images=``: sent with the turn's prompt (see :mod:`notebook_llm.core.images`).
    images: Any = None
    #: The session's cost cap (``%llm budget``), a :class:`notebook_llm.budget.Budget`.
    budget: Any = None

    def __post_init__(self) -> None:
        self.schema_retries = schema_retries_of(self.schema_retries)

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider
