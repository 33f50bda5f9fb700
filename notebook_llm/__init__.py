"""notebook_llm: LLMs and LLM provider adapters in Jupyter.

The package is in layers, each a folder, each importing only the ones below it:
``core`` (protocol, errors, redaction) < ``wire`` (HTTP) < ``adapters`` (Lua, mock) <
``engine`` < ``api`` (chat, batch, tool calling) < ``notebook`` (magics, widgets);
``conformance`` is the adapter test kit. ``notebook_llm.__all__`` is the public API, imported
lazily: ``import notebook_llm`` and ``%load_ext notebook_llm`` load no engine, httpx, lupa or
widgets.

This module is also where the layers are joined: it tells the lower layers how to ask whether
a person is watching and how a turn and a batch are shown (the notebook layer's observers,
imported when first used: :mod:`notebook_llm.api.observers`), and keeps the module paths of 0.1 importing (with a warning) for one
release.
"""

from __future__ import annotations

import sys
import warnings
from importlib import import_module
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any, cast

from .api import observers
from .core import audience

if TYPE_CHECKING:
    from importlib.abc import Loader

    from .adapters.base import LlmAdapter
    from .adapters.lua.lua_adapter import LuaAdapter
    from .api.batch import amap
    from .api.batch import map_prompts as map
    from .api.chat import Chat
    from .api.estimate import CostEstimate, estimate_cost
    from .api.tool_calling import Tool, as_tool, run_tools, stream_tools, tool
    from .core.cancel import StopSignal
    from .core.completion import Completion, assemble
    from .core.errors import ErrorCode, LlmError
    from .core.protocol import (
        Block,
        BlockEnd,
        BlockStart,
        Event,
        Finish,
        FinishReason,
        GenerateOptions,
        ImageBlock,
        Message,
        ModelInfo,
        ReasoningBlock,
        ReasoningDelta,
        TextBlock,
        TextDelta,
        TokenUsage,
        ToolCallBlock,
        ToolCallDelta,
        ToolResultBlock,
        ToolSchema,
        Usage,
        event_from_json,
    )
    from .core.stream_rules import StreamValidator, validate_stream
    from .core.timeouts import Timeouts
    from .engine.engine import Engine
    from .engine.pricing import set_price
    from .engine.request import Request
    from .engine.routing.registry import AdapterHandle
    from .engine.session import default_engine as session_engine

__version__ = "0.1.0"

__all__ = [
    "AdapterHandle",
    "Block",
    "BlockEnd",
    "BlockStart",
    "Chat",
    "Completion",
    "CostEstimate",
    "Engine",
    "ErrorCode",
    "Event",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "ImageBlock",
    "LlmAdapter",
    "LlmError",
    "LuaAdapter",
    "Message",
    "ModelInfo",
    "ReasoningBlock",
    "ReasoningDelta",
    "Request",
    "StopSignal",
    "StreamValidator",
    "TextBlock",
    "TextDelta",
    "Timeouts",
    "TokenUsage",
    "Tool",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolResultBlock",
    "ToolSchema",
    "Usage",
    "__version__",
    "amap",
    "as_tool",
    "assemble",
    "estimate_cost",
    "event_from_json",
    "load_ipython_extension",
    "map",
    "mcp",
    "record",
    "run_tools",
    "session_engine",
    "set_price",
    "stream_tools",
    "tool",
    "unload_ipython_extension",
    "validate_stream",
]


#: Where each public name lives, imported on first access (PEP 562).
_LAZY: dict[str, tuple[str, str]] = {
    "LlmAdapter": (".adapters.base", "LlmAdapter"),
    "amap": (".api.batch", "amap"),
    "map": (".api.batch", "map_prompts"),
    "StopSignal": (".core.cancel", "StopSignal"),
    "Timeouts": (".core.timeouts", "Timeouts"),
    "Chat": (".api.chat", "Chat"),
    "Engine": (".engine.engine", "Engine"),
    "CostEstimate": (".api.estimate", "CostEstimate"),
    "estimate_cost": (".api.estimate", "estimate_cost"),
    "ErrorCode": (".core.errors", "ErrorCode"),
    "LlmError": (".core.errors", "LlmError"),
    "LuaAdapter": (".adapters.lua.lua_adapter", "LuaAdapter"),
    "set_price": (".engine.pricing", "set_price"),
    "session_engine": (".engine.session", "default_engine"),
    "Request": (".engine.request", "Request"),
    "AdapterHandle": (".engine.routing.registry", "AdapterHandle"),
    "Completion": (".core.completion", "Completion"),
    "StreamValidator": (".core.stream_rules", "StreamValidator"),
    "assemble": (".core.completion", "assemble"),
    "validate_stream": (".core.stream_rules", "validate_stream"),
    **{
        name: (".core.protocol", name)
        for name in (
            "Block",
            "BlockEnd",
            "BlockStart",
            "Event",
            "Finish",
            "FinishReason",
            "GenerateOptions",
            "ImageBlock",
            "Message",
            "ModelInfo",
            "ReasoningBlock",
            "ReasoningDelta",
            "TextBlock",
            "TextDelta",
            "TokenUsage",
            "ToolCallBlock",
            "ToolCallDelta",
            "ToolResultBlock",
            "ToolSchema",
            "Usage",
            "event_from_json",
        )
    },
    **{
        name: (".api.tool_calling", name)
        for name in ("Tool", "as_tool", "run_tools", "stream_tools", "tool")
    },
}


#: Public modules, by the short name the docs use (``from notebook_llm import record``).
_MODULES: dict[str, str] = {"record": ".api.recording", "mcp": ".api.mcp"}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        module = import_module(_MODULES[name], __name__)
        globals()[name] = module
        return module
    where = _LAZY.get(name)
    if where is None:
        if name in _MOVED_MODULES:  # ``notebook_llm.protocol.Message`` without an import
            return _moved_attribute(name)
        raise AttributeError(f"module 'notebook_llm' has no attribute {name!r}")
    value = getattr(import_module(where[0], __name__), where[1])
    globals()[name] = value  # the next access is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext notebook_llm``: register the magics (imported lazily)."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)


def _someone_watching() -> bool:
    from .notebook.watching import interactive

    return interactive()


def _turn_observer(*args: Any, **kwargs: Any) -> Any:
    try:
        from .notebook.widgets.present import Presenter
    except ImportError as exc:  # installed without the notebook extra: say so once, show nothing
        from .engine.providers import notice

        notice(
            f"a turn is shown only with the notebook extra ({exc.name or exc} is missing): "
            "pip install 'notebook-llm[notebook]', or pass display=False"
        )
        return observers.TurnObserver()
    return Presenter(*args, **kwargs)


def _progress_bar(total: int) -> Any:
    from .notebook.progress import progress_bar

    return progress_bar(total)


# The layers below ask; the notebook layer answers, imported when first asked.
audience.set_watch_check(_someone_watching)
observers.set_turn_display(_turn_observer)
observers.set_batch_progress(_progress_bar)


# -------------------------------------------------------------------------------------------
# The module paths of 0.1, before the layers were folders: ``notebook_llm.<old>`` imports the
# module now at ``notebook_llm.<new>`` (the same module object, so patching either patches
# both), with a DeprecationWarning. They go in the next release. ``notebook_llm.engine`` is a
# package now and still gives ``Engine``; ``notebook_llm.wire`` and ``conformance`` did not move.

#: old path (under ``notebook_llm.``) -> new path; a submodule of an old package follows it.
_MOVED_MODULES: dict[str, str] = {
    "_sync": "core.background_loop",
    "base_adapter": "adapters.base",
    "batch": "api.batch",
    "builtins": "engine.routing.builtin_plugin",
    "cancel": "core.cancel",
    "catalog": "engine.routing.catalog",
    "chat": "api.chat",
    "completion": "core.completion",
    "credentials": "engine.credentials",
    "dash_options": "core.dash_options",
    "errors": "core.errors",
    "estimate": "api.estimate",
    "frames": "api.dataframes",
    "frontend": "notebook.watching",
    "images": "core.images",
    "loop_events": "api.tool_calling.events",
    "lua": "adapters.lua",
    "lua.contract": "adapters.lua.chunk_mapping",
    "lua.http_request": "adapters.lua.provider_request",
    "lua.loader": "engine.routing.lua_files",
    "lua.request": "adapters.lua.kernel_request",
    "lua.response_mapping": "adapters.lua.hook_results",
    "magics": "notebook.magics",
    "mock": "adapters.mock",
    "mock.wire": "adapters.mock.bodies",
    "plugins": "engine.routing.plugins",
    "pricing": "engine.pricing",
    "protocol": "core.protocol",
    "providers": "engine.providers",
    "record": "api.recording",
    "registry": "engine.routing.registry",
    "request_options": "engine.request",
    "secrets": "core.redaction",
    "session": "engine.session",
    "streaming": "engine.streaming",
    "structured": "core.response_schema",
    "tools": "api.tool_calling",
    "tools.core": "api.tool_calling.tools",
    "tools.schema": "api.tool_calling.type_schema",
    "tools.validation": "core.json_schema_check",
    "validate": "core.stream_rules",
    "watch": "notebook.file_watch",
    "widgets": "notebook.widgets",
    "widgets.runner": "api.turn_runner",
}


def _moved_to(name: str) -> str | None:
    """The new full name of an old module path ``name`` (``None``: not an old path)."""
    prefix = __name__ + "."
    if not name.startswith(prefix):
        return None
    parts = name[len(prefix) :].split(".")
    for n in range(len(parts), 0, -1):
        new = _MOVED_MODULES.get(".".join(parts[:n]))
        if new is not None:
            return ".".join([__name__, new, *parts[n:]])
    return None


def _moved_attribute(name: str) -> ModuleType:
    """``notebook_llm.<old>`` read as an attribute: in 0.1 a submodule was one once anything had
    imported it, so code that reads ``notebook_llm.errors.LlmError`` after ``import notebook_llm``
    worked. It imports the old path, with the warning at the caller's line."""
    old = f"{__name__}.{name}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = import_module(old)
    warnings.warn(_moved_message(old, module.__name__), DeprecationWarning, stacklevel=3)
    return module


def _moved_message(old: str, new: str) -> str:
    return f"{old} moved to {new} (the old path goes in the next release)"


class _MovedModuleFinder:
    """Answers an old module path with the module at its new path.

    A plain class, not an ``importlib.abc`` one: importing ``importlib.abc`` loads
    ``importlib.resources`` and ``pathlib``, which ``import notebook_llm`` otherwise does not.
    """

    def __init__(self) -> None:
        self._own_specs: dict[str, ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        new = _moved_to(fullname)
        if new is None:
            return None
        from importlib.util import find_spec

        found = find_spec(new)  # imports the new path's parents, not the module
        if found is None:
            return None
        # A package for a package, so that ``python -m notebook_llm.mock`` finds its
        # ``__main__``; ``origin`` is the file, for runpy's ``sys.argv[0]`` and ``__file__``.
        return ModuleSpec(
            fullname,
            cast("Loader", self),
            origin=found.origin,
            loader_state=new,
            is_package=found.submodule_search_locations is not None,
        )

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = str(spec.loader_state)
        warnings.warn(
            _moved_message(spec.name, new),
            DeprecationWarning,
            # 2: the line with the import (warnings skips importlib's own frames)
            stacklevel=2,
        )
        module = import_module(new)
        self._own_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already imported. importlib has just
        set its ``__spec__`` to the old path's; it gets its own back."""
        own = self._own_specs.pop(str(module.__spec__.name if module.__spec__ else ""), None)
        if own is not None:
            module.__spec__ = own

    def get_code(self, fullname: str) -> CodeType | None:
        """The code of the module at the new path: what ``python -m <old path>`` runs (runpy
        asks the loader for it instead of importing the module)."""
        new = _moved_to(fullname)
        if new is None:
            raise ImportError(f"{fullname} is not a moved module", name=fullname)
        from importlib.util import find_spec

        found = find_spec(new)
        get_code = getattr(found.loader, "get_code", None) if found is not None else None
        if get_code is None:
            raise ImportError(f"no code object available for {new}", name=fullname)
        if fullname.endswith(".__main__"):  # ``python -m``: shown, as for the user's own code
            old = fullname.rpartition(".")[0]
            warnings.warn_explicit(
                _moved_message(old, new.rpartition(".")[0]),
                DeprecationWarning,
                f"python -m {old}",
                1,
                module="__main__",
            )
        code: CodeType | None = get_code(new)
        return code


# One finder, also after ``importlib.reload(notebook_llm)`` (``%autoreload``), whose class is a
# new object each time: the one left by an earlier load is replaced, not kept beside it.
sys.meta_path[:] = [
    f
    for f in sys.meta_path
    if not (type(f).__name__ == _MovedModuleFinder.__name__ and type(f).__module__ == __name__)
]
sys.meta_path.insert(0, _MovedModuleFinder())
