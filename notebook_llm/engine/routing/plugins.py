"""Plugins: how adapters and providers reach an :class:`~notebook_llm.engine.engine.Engine`.

simonw/llm style: a plugin is a module (or any object) with a ``register(host)`` function, and
the built-ins are plugins like any other. ``Engine()`` calls :func:`install_plugins`, which runs

1. the default plugins named in :data:`DEFAULT_PLUGINS` (``notebook_llm.engine.routing.builtin_plugin``:
   the Lua adapter catalog, the built-in providers and the offline ``mock`` / ``mock-direct``
   providers), then
2. every entry point in the group ``notebook_llm.plugins`` (``name = "pkg.mod"`` or
   ``"pkg.mod:register"``) of the installed packages: the ONE entry-point group.

A plugin declares each provider once (:meth:`PluginHost.declare_provider`, a
:class:`~notebook_llm.engine.providers.ProviderConfig`: adapter, base URL, key variable, default
model, prices, capabilities), bound on first use; and ships its adapters by name
(:meth:`PluginHost.add_adapter_source`: a ``.lua`` file, an adapter or a factory of one, loaded
on first use, found after the user's own files and before the shipped scripts). A plugin that
passes an adapter object to ``add_provider`` binds that route at once, and holds it: the
session cannot bind it again.

The default plugins are named by string and imported here, exactly as entry points are, so the
engine never imports a module that imports the engine back (no import cycle), and a third-party
plugin has the same powers as the built-in one. ``host`` is typed by :class:`PluginHost`, the
small part of the engine a plugin may use.

A broken third-party plugin (fails to import, or raises in ``register``) must not break every
engine: it is skipped with one logged line that names it and says what went wrong. A broken
default plugin is a bug in this package, so it raises.

Adapters found by name (built-in ``*.lua``, the user's folder, the plugins' sources) are
resolved lazily by the catalog (:mod:`notebook_llm.engine.routing.lua_files`), which the
``builtin_plugin`` installs.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

from ...adapters.base import LlmAdapter
from ..providers import ProviderConfig

log = logging.getLogger("notebook_llm.engine.routing.plugins")

#: The entry-point group of engine plugins (each names a module or a ``register`` callable).
PLUGIN_GROUP = "notebook_llm.plugins"

#: The plugins every engine installs first, by module name (the same path entry points take).
DEFAULT_PLUGINS: tuple[str, ...] = ("notebook_llm.engine.routing.builtin_plugin",)


#: What ships an adapter: a ``.lua`` file, an adapter, or a function that makes one.
AdapterSource = str | Path | LlmAdapter | Callable[[], LlmAdapter]


class PluginHost(Protocol):
    """What a plugin's ``register(host)`` may call on the engine."""

    #: The adapters the plugins ship, by name (:meth:`add_adapter_source` fills it).
    adapter_sources: dict[str, AdapterSource]

    def declare_provider(self, config: ProviderConfig) -> None:
        """Declare one provider, bound to its route on first use."""
        ...

    def add_adapter_source(self, name: str, source: AdapterSource) -> None:
        """Ship the adapter called ``name`` (loaded on first use)."""
        ...

    def adapter(self, name: str) -> LlmAdapter: ...

    def add_adapter(self, adapter: LlmAdapter, *, name: str | None = None) -> str: ...

    def add_adapter_resolver(self, resolver: Callable[[str], LlmAdapter | None]) -> None: ...

    def add_provider(
        self,
        name: str,
        *,
        adapter: str | LlmAdapter,
        model: str | None = None,
        models: Sequence[str] | None = None,
        needs_key: bool | None = None,
    ) -> object: ...


Register = Callable[[PluginHost], None]


def _register_of(obj: Any) -> Register:
    """``obj`` itself when callable, else its ``register`` attribute (a plugin module)."""
    hook = getattr(obj, "register", None)
    if callable(hook):
        return hook  # type: ignore[no-any-return]
    if callable(obj):
        return obj  # type: ignore[no-any-return]
    raise TypeError(f"{obj!r} has no register(host) function")


def plugins(defaults: Sequence[str] = DEFAULT_PLUGINS) -> Iterator[tuple[str, Register | None]]:
    """``(name, register)`` of the default plugins, then of the entry points; ``register`` is
    ``None`` for an entry point that could not be loaded (already logged)."""
    for name in defaults:
        yield name, _register_of(importlib.import_module(name))
    try:
        eps = metadata.entry_points(group=PLUGIN_GROUP)
    except Exception:  # pragma: no cover - broken metadata of some other package
        eps = ()  # type: ignore[assignment]
    for ep in eps:
        try:
            yield ep.name, _register_of(ep.load())
        except Exception as exc:
            log.warning(
                "plugin %r (%s) skipped: %s: %s; fix or uninstall it",
                ep.name,
                ep.value,
                type(exc).__name__,
                exc,
            )
            yield ep.name, None


def install_plugins(host: PluginHost, defaults: Sequence[str] = DEFAULT_PLUGINS) -> list[str]:
    """Run every plugin's ``register(host)``; returns the names of those that were installed."""
    installed: list[str] = []
    for name, register in plugins(defaults):
        if register is None:
            continue
        if name in defaults:
            register(host)
        else:
            try:
                register(host)
            except Exception as exc:
                log.warning(
                    "plugin %r skipped: register() raised %s: %s; fix or uninstall it",
                    name,
                    type(exc).__name__,
                    exc,
                )
                continue
        installed.append(name)
    return installed
