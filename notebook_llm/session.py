"""The session: the one default engine that ``%llm``/``%%llm``, ``%adapter``, ``Chat``,
``map``/``amap`` and the command line all use when they are not given an engine.

One engine means one set of session keys (``%llm key P``), loaded adapters, providers and one
retry policy: a key set with a magic works for ``notebook_llm.map(..., provider=P)`` too.

The retry policy is the engine's (``Engine(retries=, retry_base=, retry_cap=)``; two extra tries
by default). Its loop in ``streaming.attempts`` is the only one; ``map(retries=N)`` and
``stream(retries=N)`` set the count for one call, they never add a loop on top, so a failing
prompt is sent at most ``1 + retries`` times.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .engine import Engine, schema_retries_of
from .errors import LlmError
from .protocol import Message
from .providers import notice

__all__ = ["Turn", "default_engine", "set_default_engine"]

_engine: Engine | None = None
_lock = threading.Lock()


def default_engine() -> Engine:
    """The engine shared by the magics, ``Chat``, ``map`` and the CLI (made on first use)."""
    global _engine
    with _lock:
        if _engine is None:
            try:
                _engine = Engine()
            except LlmError as err:
                # A broken config.toml must not break every cell (mock ones too): one line
                # that says what to fix, then the session runs on the built-in presets.
                notice(f"{err.message}; the config file is ignored until you fix it and restart")
                _engine = Engine(config_file=False)
        return _engine


def set_default_engine(engine: Engine | None) -> None:
    """Replace the shared engine (tests; ``None`` makes a fresh one on next use)."""
    global _engine
    with _lock:
        _engine = engine


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
    #: ``schema=``: what the answer must follow (see :mod:`notebook_llm.structured`).
    schema: Any = None
    #: How many times an answer that does not validate is sent back with the message.
    schema_retries: int = 0
    #: ``images=``: sent with the turn's prompt (see :mod:`notebook_llm.images`).
    images: Any = None
    #: The session's cost cap (``%llm budget``), a :class:`notebook_llm.budget.Budget`.
    budget: Any = None

    def __post_init__(self) -> None:
        self.schema_retries = schema_retries_of(self.schema_retries)

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider
