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

from ..core.errors import LlmError
from .engine import Engine
from .providers import notice

__all__ = ["default_engine", "set_default_engine"]

_engine: Engine | None = None
_lock = threading.Lock()


def default_engine() -> Engine:
    """The engine shared by the magics, ``Chat``, ``map`` and the CLI (made on first use).

    Public as ``notebook_llm.session_engine()``: what a user binds there (``add_provider``,
    ``load_adapter``, ``set_key``) is what ``%%llm`` sees; an ``Engine()`` of one's own is a
    separate engine."""
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
            _engine.is_session_engine = True
        return _engine


def set_default_engine(engine: Engine | None) -> None:
    """Replace the shared engine (tests; ``None`` makes a fresh one on next use)."""
    global _engine
    with _lock:
        if engine is not None:
            engine.is_session_engine = True
        _engine = engine
