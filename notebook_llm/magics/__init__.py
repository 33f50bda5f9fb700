"""IPython magics: ``%%llm`` / ``%llm`` (:mod:`.llm`) and, when present, ``%%adapter`` /
``%adapter`` (:mod:`.adapter`, written separately). ``%load_ext notebook_llm`` calls
:func:`load_ipython_extension`; loading twice is harmless and unloading removes them."""

from __future__ import annotations

from typing import Any

_MAGIC_NAMES = {"line": ("llm", "adapter"), "cell": ("llm", "adapter")}


def _magic_classes() -> list[type[Any]]:
    from .llm import LlmMagics

    classes: list[type[Any]] = [LlmMagics]
    try:  # the %adapter magics are another module; register them when they exist
        from .adapter import AdapterMagics  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        pass
    else:
        classes.append(AdapterMagics)
    return classes


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics (idempotent: a second load replaces the same instances)."""
    for cls in _magic_classes():
        if cls.__name__ not in ipython.magics_manager.registry:
            ipython.register_magics(cls(shell=ipython))
            if hasattr(ipython, "configurables"):
                ipython.configurables.append(ipython.magics_manager.registry[cls.__name__])


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics registered by :func:`load_ipython_extension`."""
    manager = ipython.magics_manager
    for cls in _magic_classes():
        instance = manager.registry.pop(cls.__name__, None)
        if instance is None:
            continue
        for kind, names in instance.magics.items():
            for name in names:
                manager.magics[kind].pop(name, None)
        if hasattr(ipython, "configurables") and instance in ipython.configurables:
            ipython.configurables.remove(instance)
