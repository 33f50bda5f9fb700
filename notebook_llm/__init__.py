"""notebook_llm: LLMs and LLM provider adapters in Jupyter.

The package is in layers, each a folder, each importing only the ones below it:
``core`` (protocol, errors, redaction) < ``wire`` (HTTP) < ``adapters`` (Lua, mock) <
``engine`` < ``api`` (chat, batch, tool calling) < ``notebook`` (magics, widgets);
``conformance`` is the adapter test kit. ``notebook_llm.__all__`` is the public API, imported
lazily: ``import notebook_llm`` and ``%load_ext notebook_llm`` load no engine, httpx, lupa or
widgets.

This module is also where the layers are joined: it tells the lower layers how to ask whether
a person is watching and how a turn and a batch are shown (the notebook layer's observers,
imported when first used: :mod:`notebook_llm.api.observers`). It changes nothing else in the
interpreter: no import hook, no warning filter.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .api import observers
from .core import audience

if TYPE_CHECKING:
    from .adapters.base import LlmAdapter
    from .adapters.codec_adapter import CodecAdapter
    from .adapters.lua.lua_adapter import LuaAdapter
    from .api.batch import amap
    from .api.batch import map_prompts as map
    from .api.batch_api import BatchApi
    from .api.chat import Chat
    from .api.estimate import CostEstimate, estimate_cost
    from .api.rate_limits import RateLimits
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
    from .engine.providers import ProviderConfig
    from .engine.request import Request
    from .engine.routing.registry import AdapterHandle
    from .engine.session import default_engine as session_engine
    from .wire.codec import WireRequest

__version__ = "0.1.0"

__all__ = [
    "AdapterHandle",
    "BatchApi",
    "Block",
    "BlockEnd",
    "BlockStart",
    "Chat",
    "CodecAdapter",
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
    "ProviderConfig",
    "RateLimits",
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
    "WireRequest",
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
    "CodecAdapter": (".adapters.codec_adapter", "CodecAdapter"),
    "ProviderConfig": (".engine.providers", "ProviderConfig"),
    "WireRequest": (".wire.codec", "WireRequest"),
    "amap": (".api.batch", "amap"),
    "map": (".api.batch", "map_prompts"),
    "BatchApi": (".api.batch_api", "BatchApi"),
    "RateLimits": (".api.rate_limits", "RateLimits"),
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
