"""Where adapters come from: built-in scripts, the user's folder, entry points.

Precedence for one name: a user file (``<user config dir>/notebook_llm/adapters/*.lua`` or
``$NOTEBOOK_LLM_ADAPTERS_DIR``) > an entry point (group ``notebook_llm.adapters``) > a built-in
script. An adapter loaded in the session (``engine.load_adapter``, ``%%adapter``) wins over all.
"""

from __future__ import annotations

import logging
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

from ...adapters.base import LlmAdapter
from ...core.errors import ErrorCode, LlmError
from ..providers import user_adapters_dir

log = logging.getLogger("notebook_llm.adapters")

ENTRY_POINT_GROUP = "notebook_llm.adapters"

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
    """Finds adapters by name; each is loaded once and then cached (hot reload is in place)."""

    def __init__(self) -> None:
        self._cache: dict[str, LlmAdapter] = {}
        self._lock = threading.Lock()

    def sources(self) -> dict[str, tuple[str, Any]]:
        """name -> (origin, path or entry point), after precedence."""
        found: dict[str, tuple[str, Any]] = {}
        for name, path in _lua_files(builtin_adapters_dir()).items():
            found[name] = ("built-in", path)
        try:
            eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
        except Exception:  # pragma: no cover - broken metadata of some other package
            eps = ()  # type: ignore[assignment]
        for ep in eps:
            found[ep.name] = ("entry point", ep)
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

    if isinstance(where, Path):
        return LuaAdapter.from_file(where, name=name, origin=origin)
    try:
        obj = where.load()
    except Exception as exc:
        raise LlmError(
            f"entry point {where.value!r} for adapter {name!r} failed to import: {type(exc).__name__}: {exc}",
            ErrorCode.INVALID_ADAPTER,
            adapter=name,
        ) from None
    if isinstance(obj, str | Path) and str(obj).endswith(".lua"):
        return LuaAdapter.from_file(Path(obj), name=name, origin=origin)
    if isinstance(obj, LlmAdapter):
        return obj
    if callable(obj):
        made = obj()
        if isinstance(made, LlmAdapter):
            return made
    raise LlmError(
        f"entry point {where.value!r} for adapter {name!r} is not an LlmAdapter, a factory of one, "
        "or a .lua path",
        ErrorCode.INVALID_ADAPTER,
        adapter=name,
    )
