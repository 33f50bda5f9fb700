"""Where adapters come from by name: built-in scripts, the plugins' adapters, the user's folder.

Precedence for one name: a user file (``<user config dir>/notebook_llm/adapters/*.lua`` or
``$NOTEBOOK_LLM_ADAPTERS_DIR``) > an adapter a plugin ships (``host.add_adapter_source``, see
:mod:`notebook_llm.engine.routing.plugins`) > a built-in script. An adapter loaded in the
session (``engine.load_adapter``, ``%%adapter``) wins over all.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...adapters.base import LlmAdapter
from ...core.errors import ErrorCode, LlmError
from ..providers import user_adapters_dir

#: The package's own folder (``notebook_llm/``).
PACKAGE_DIR = Path(__file__).resolve().parents[2]

#: The starting point of a new adapter (``%adapter new``, the playground).
ADAPTER_TEMPLATE = PACKAGE_DIR / "adapters" / "lua" / "adapter_template.lua"


def builtin_adapters_dir() -> Path:
    """The shipped ``*.lua`` scripts: inside the wheel, or the repository's ``adapters/``."""
    packaged = PACKAGE_DIR / "_builtin_adapters"
    if packaged.is_dir():
        return packaged
    return PACKAGE_DIR.parent / "adapters"


def _lua_files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.lua"))}


class AdapterCatalog:
    """Finds adapters by name; each is loaded once and then cached (hot reload is in place).

    ``plugin_sources`` is the engine's dict of the adapters its plugins ship (a ``.lua`` path,
    an adapter, or a factory of one), read at each lookup."""

    def __init__(self, plugin_sources: Mapping[str, Any] | None = None) -> None:
        self._cache: dict[str, LlmAdapter] = {}
        self._lock = threading.Lock()
        self._plugins: Mapping[str, Any] = plugin_sources if plugin_sources is not None else {}

    def sources(self) -> dict[str, tuple[str, Any]]:
        """name -> (origin, path or what a plugin gave), after precedence."""
        found: dict[str, tuple[str, Any]] = {}
        for name, path in _lua_files(builtin_adapters_dir()).items():
            found[name] = ("built-in", path)
        for name, where in self._plugins.items():
            found[name] = ("plugin", where)
        for name, path in _lua_files(user_adapters_dir()).items():
            found[name] = ("user file", path)
        return found

    def names(self) -> list[str]:
        return sorted(self.sources())

    def __call__(self, name: str) -> LlmAdapter | None:
        with self._lock:
            if name in self._cache:
                return self._cache[name]
            entry = self.sources().get(name)
            if entry is None:
                return None
            origin, where = entry
            adapter = _instantiate(name, origin, where)
            self._cache[name] = adapter
            return adapter


def _instantiate(name: str, origin: str, where: Any) -> LlmAdapter:
    from ...adapters.lua.lua_adapter import LuaAdapter

    if isinstance(where, str | Path) and str(where).endswith(".lua"):
        return LuaAdapter.from_file(Path(where), name=name, origin=origin)
    if isinstance(where, LlmAdapter):
        return where
    if callable(where):
        try:
            made = where()
        except Exception as exc:
            raise LlmError(
                f"the plugin's factory of adapter {name!r} failed: {type(exc).__name__}: {exc}",
                ErrorCode.INVALID_ADAPTER,
                adapter=name,
            ) from None
        if isinstance(made, LlmAdapter):
            return made
    raise LlmError(
        f"the plugin's source of adapter {name!r} is not an LlmAdapter, a factory of one, or a "
        f".lua path: {type(where).__name__}",
        ErrorCode.INVALID_ADAPTER,
        adapter=name,
    )
