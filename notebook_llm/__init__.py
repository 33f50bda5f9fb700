"""notebook_llm: LLMs and LLM provider adapters in Jupyter.

The engine (``Engine``, the stream protocol, adapters) has no notebook code; the magics and
widgets live in ``notebook_llm.magics`` and ``notebook_llm.widgets`` and are loaded by
``%load_ext notebook_llm``.
"""

from __future__ import annotations

from typing import Any

from .adapter import LlmAdapter
from .cancel import StopSignal
from .engine import Engine
from .errors import ErrorCode, LlmError
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
from .validate import Completion, StreamValidator, assemble, validate_stream

__version__ = "0.1.0"

__all__ = [
    "AdapterHandle",
    "Block",
    "BlockEnd",
    "BlockStart",
    "Completion",
    "Engine",
    "ErrorCode",
    "Event",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "ImageBlock",
    "LlmAdapter",
    "LlmError",
    "Message",
    "ModelInfo",
    "ReasoningBlock",
    "ReasoningDelta",
    "StopSignal",
    "StreamValidator",
    "TextBlock",
    "TextDelta",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolResultBlock",
    "ToolSchema",
    "Usage",
    "__version__",
    "assemble",
    "event_from_json",
    "load_ipython_extension",
    "unload_ipython_extension",
    "validate_stream",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext notebook_llm``: register the magics (imported lazily)."""
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload_ipython_extension as unload

    unload(ipython)
