"""The engine: :class:`~.engine.Engine`, the checked request, the one retry loop, credentials,
provider settings and routing (which adapter answers a provider name, :mod:`.routing`).

It drives adapters and yields protocol events; it knows nothing of notebooks, chats or batches.
``from notebook_llm.engine import Engine`` works as it did when this was one module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import AdapterResolver, Engine, Request

__all__ = ["AdapterResolver", "Engine", "Request"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
