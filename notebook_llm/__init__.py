"""notebook_llm: LLMs and LLM provider adapters in Jupyter.

The engine (``Engine``, the stream protocol, adapters) has no notebook code; the magics and
widgets live in ``notebook_llm.magics`` and ``notebook_llm.widgets`` and are loaded by
``%load_ext notebook_llm``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base_adapter import LlmAdapter
    from .batch import amap
    from .batch import map_prompts as map
    from .cancel import StopSignal
    from .chat import Chat
    from .completion import Completion, assemble
    from .engine import Engine
    from .errors import ErrorCode, LlmError
    from .estimate import CostEstimate, estimate_cost
    from .lua.lua_adapter import LuaAdapter
    from .pricing import set_price
    from .protocol import (
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
    from .registry import AdapterHandle
    from .tools import Tool, as_tool, run_tools, stream_tools, tool
    from .validate import StreamValidator, validate_stream
    from .wire.deadline import Timeouts

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
    "run_tools",
    "set_price",
    "stream_tools",
    "tool",
    "unload_ipython_extension",
    "validate_stream",
]


#: Where each public name lives, imported on first access (PEP 562): ``import notebook_llm`` and
#: ``%load_ext notebook_llm`` load no engine, httpx, lupa or widgets.
_LAZY: dict[str, tuple[str, str]] = {
    "LlmAdapter": (".base_adapter", "LlmAdapter"),
    "amap": (".batch", "amap"),
    "map": (".batch", "map_prompts"),
    "StopSignal": (".cancel", "StopSignal"),
    "Timeouts": (".wire.deadline", "Timeouts"),
    "Chat": (".chat", "Chat"),
    "Engine": (".engine", "Engine"),
    "CostEstimate": (".estimate", "CostEstimate"),
    "estimate_cost": (".estimate", "estimate_cost"),
    "ErrorCode": (".errors", "ErrorCode"),
    "LlmError": (".errors", "LlmError"),
    "LuaAdapter": (".lua.lua_adapter", "LuaAdapter"),
    "set_price": (".pricing", "set_price"),
    "AdapterHandle": (".registry", "AdapterHandle"),
    "Completion": (".completion", "Completion"),
    "StreamValidator": (".validate", "StreamValidator"),
    "assemble": (".completion", "assemble"),
    "validate_stream": (".validate", "validate_stream"),
    **{
        name: (".protocol", name)
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
    **{name: (".tools", name) for name in ("Tool", "as_tool", "run_tools", "stream_tools", "tool")},
}


def __getattr__(name: str) -> Any:
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
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as unload

    unload(ipython)
