"""What one turn of a conversation asks for: :class:`Turn` (``%%llm``, ``Chat.send``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.protocol import Message
from ..engine.request import Request
from .tool_calling.loop import ToolSpec

__all__ = ["Turn"]


@dataclass(frozen=True)
class Turn:
    """One generation of a conversation: its :class:`~notebook_llm.engine.request.Request`
    (the history with this turn's message, and every option) and what the API layer adds
    around a request: the Python tool functions, their confirmation, the step limit, the
    tool calls' timeout, the images to show and the session's budget."""

    request: Request
    #: The functions the model may call, and ``"mcp:SERVER"`` specs (the tool loop runs them;
    #: the request has no ``tools``).
    tools: Sequence[ToolSpec] = ()
    #: ``False``, ``True`` (ask through the view's Run/Skip) or a ``confirm(call)`` of its own.
    confirm: bool | Callable[..., Any] = False
    max_steps: int = 8
    #: Seconds one tool call may run before it is abandoned and the model told so (``None``:
    #: the config file's ``[defaults] tool_timeout``, else no limit).
    tool_timeout: float | None = None
    #: ``images=``: already in the last message of the request; kept to show as thumbnails.
    images: Any = None
    #: The session's cost cap (``%llm budget``), a :class:`notebook_llm.api.estimate.Budget`.
    budget: Any = None

    @property
    def provider(self) -> str:
        return self.request.provider

    @property
    def model(self) -> str | None:
        return self.request.model

    @property
    def messages(self) -> Sequence[Message]:
        """The history and this turn's message."""
        return self.request.messages or ()

    @property
    def schema(self) -> Any:
        return self.request.schema

    @property
    def schema_retries(self) -> int:
        return self.request.schema_retries

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider
