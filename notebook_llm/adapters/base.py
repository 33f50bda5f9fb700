"""The adapter interface: anything that turns ``GenerateOptions`` into protocol events."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator

from ..core.protocol import Event, GenerateOptions, ModelInfo


class LlmAdapter(abc.ABC):
    """Base class of every adapter (Python classes and Lua scripts alike).

    Subclasses implement :meth:`stream` as an async generator yielding protocol events that obey
    the five stream rules. Failures either raise :class:`~notebook_llm.LlmError` or end the stream
    with ``Finish(kind='error'|'aborted')``; the engine turns anything else into an error finish.
    """

    #: Short name used in provider configs and ``%adapter list``.
    name: str = "adapter"
    #: Free-text version shown in listings.
    version: str = ""
    #: Whether :meth:`stream` holds a batch's request slot (:func:`notebook_llm.wire.slots.
    #: request_slot`) around its request, and only there. A batch then prepares the next
    #: prompts while the slots are taken; otherwise it runs only ``concurrency`` at a time.
    takes_request_slot: bool = False

    @abc.abstractmethod
    def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        """Yield the events of one generation."""

    async def list_models(self, provider: str) -> list[ModelInfo]:
        """Models this adapter offers on ``provider`` (empty if unknown)."""
        return []

    async def resolve_model(self, provider: str, model: str | None) -> ModelInfo | None:
        """Details of one model (context window, reasoning efforts), or ``None`` if unknown."""
        return None

    async def aclose(self) -> None:
        """Release resources (HTTP clients, Lua states). Called when the adapter is unloaded."""
        return None
