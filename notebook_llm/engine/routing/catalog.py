"""The engine's adapters by name: registered, loaded in the session, or found by a resolver.

One job: answer "which adapter is called ``name``" and keep that answer right while adapters are
loaded, hot-reloaded and unloaded in a session. Routes (provider -> adapter) are the
:class:`~notebook_llm.engine.routing.registry.Registry`'s job, keys are :mod:`notebook_llm.engine.credentials`'.

Lookup order for a name: an adapter added or loaded in this session, then the resolvers in the
order they were added (the built-in plugin adds the Lua script catalog of
:mod:`notebook_llm.engine.routing.lua_files`: user file > a plugin's adapter > built-in script); a
resolved adapter is cached.

Reloading is not Lua-specific: any adapter that is :class:`Reloadable` (keeps its ``source``,
``origin`` and ``path`` and can ``reload`` itself in place) is reloaded where it stands, so every
provider route that holds it switches at its next request. The one Lua-specific step is making
a new adapter out of a script (:meth:`Catalog.load`), imported lazily.

Override bookkeeping: a session load over a catalog adapter (built-in, a plugin's or a user
file) remembers the replaced source, and :meth:`Catalog.unload` brings it back instead of
forgetting the name. A reload of a session-loaded file is not an override.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from ...adapters.base import LlmAdapter
from ...core.errors import ErrorCode, LlmError

#: Where catalog adapters come from (``lua_files.py``); a session load over one of these is an
#: override that unload undoes. A reload of a session-loaded file is not.
CATALOG_ORIGINS = frozenset({"built-in", "plugin", "user file"})

#: Resolves an adapter name the engine does not hold yet (built-in Lua, user file, a plugin's).
AdapterResolver = Callable[[str], LlmAdapter | None]


@runtime_checkable
class Reloadable(Protocol):
    """An adapter made from source text that can swap its source in place (``LuaAdapter``)."""

    source: str
    origin: str
    path: Path | None

    def reload(self, source: str | None = None) -> None: ...


class Catalog:
    """Adapters by name for one engine (see the module docstring for the lookup order)."""

    def __init__(self) -> None:
        self._adapters: dict[str, LlmAdapter] = {}
        self._resolvers: list[AdapterResolver] = []
        #: name -> (source, origin, path) of the catalog adapter a session load replaced.
        self._overridden: dict[str, tuple[str, str, Path | None]] = {}

    def know(self, adapter: LlmAdapter) -> None:
        """Make ``adapter`` known by its name unless that name is taken (``register_adapter``)."""
        self._adapters.setdefault(adapter.name, adapter)

    def add(self, adapter: LlmAdapter, *, name: str | None = None) -> str:
        """Make ``adapter`` known by name (session-loaded adapters win over all others)."""
        if not isinstance(adapter, LlmAdapter):
            raise LlmError(f"{adapter!r} is not an LlmAdapter", ErrorCode.INVALID_ADAPTER)
        key = name or adapter.name
        self._adapters[key] = adapter
        return key

    def add_resolver(self, resolver: AdapterResolver) -> None:
        self._resolvers.append(resolver)

    def get(self, name: str) -> LlmAdapter:
        """The adapter called ``name``: session-loaded or registered first, then resolvers."""
        found = self._adapters.get(name)
        if found is not None:
            return found
        for resolver in self._resolvers:
            found = resolver(name)
            if found is not None:
                self._adapters[name] = found
                return found
        raise LlmError(
            f"no adapter named {name!r}; known: {', '.join(sorted(self.names())) or 'none'}",
            ErrorCode.NO_ADAPTER,
        )

    def names(self) -> set[str]:
        names = set(self._adapters)
        for resolver in self._resolvers:
            names.update(getattr(resolver, "names", lambda: [])())
        return names

    def load(
        self, path_or_source: str | Path, *, name: str | None = None, origin: str | None = None
    ) -> str:
        """Load an adapter script from a file path or from source text; returns its name.

        A known :class:`Reloadable` adapter of that name is hot-reloaded in place; a failed load
        keeps the previous version active and raises ``LlmError(INVALID_ADAPTER)``.
        """
        from ...adapters.lua.lua_adapter import (
            LuaAdapter,  # the one script kind today; lazy (lupa, httpx)
        )

        is_path = isinstance(path_or_source, Path) or (
            "\n" not in path_or_source and str(path_or_source).endswith(".lua")
        )
        if is_path:
            new = LuaAdapter.from_file(Path(path_or_source), name=name, origin=origin or "file")
        else:
            new = LuaAdapter.from_source(str(path_or_source), name=name, origin=origin or "cell")
        key = name or new.name
        existing = self._adapters.get(key)
        if existing is None:
            try:
                existing = self.get(key)
            except LlmError:
                existing = None
        if existing is not None and isinstance(existing, Reloadable):
            if key not in self._overridden and existing.origin in CATALOG_ORIGINS:
                # Keep what the session replaces, so unload can bring it back.
                self._overridden[key] = (existing.source, existing.origin, existing.path)
            existing.reload(new.source)
            existing.origin, existing.path = new.origin, new.path
            return key
        self._adapters[key] = new
        return key

    def reload(self, name: str) -> LlmAdapter:
        """Re-read a file-backed adapter (failure keeps the previous version)."""
        adapter = self.get(name)
        if not isinstance(adapter, Reloadable):
            raise LlmError(
                f"adapter {name!r} is not a Lua adapter; nothing to reload",
                ErrorCode.INVALID_ADAPTER,
            )
        adapter.reload()
        return adapter

    def unload(self, name: str) -> LlmAdapter | None:
        """Forget a session-loaded adapter and return it (its routes are the caller's to drop);
        ``None`` when it had replaced a catalog adapter, which is given back in place."""
        original = self._overridden.pop(name, None)
        replaced = self._adapters.get(name)
        if original is not None and replaced is not None and isinstance(replaced, Reloadable):
            source, origin, path = original
            replaced.reload(source)
            replaced.origin, replaced.path = origin, path
            return None
        adapter = self._adapters.pop(name, None)
        if adapter is None:
            raise LlmError(f"no loaded adapter named {name!r}", ErrorCode.NO_ADAPTER)
        return adapter
