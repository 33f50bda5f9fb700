"""Offline mock LLM: deterministic models behind a loopback OpenAI/Anthropic/Ollama server."""

import warnings
from typing import Any

from .faults import FAULT_HEADER, FAULTS, Fault
from .models import (
    MODELS,
    MockReply,
    MockTokenCounts,
    Reasoning,
    Text,
    ToolCall,
    UnknownModelError,
    count_tokens,
    generate,
    split_tokens,
)
from .server import MockServer, RecordedRequest

__all__ = [
    "FAULTS",
    "FAULT_HEADER",
    "MODELS",
    "Fault",
    "MockReply",
    "MockServer",
    "MockTokenCounts",
    "Reasoning",
    "RecordedRequest",
    "Text",
    "ToolCall",
    "UnknownModelError",
    "count_tokens",
    "generate",
    "split_tokens",
]


def __getattr__(name: str) -> Any:
    # ``Usage`` was this class's name until issue 15; it meant a third thing called usage.
    if name == "Usage":
        warnings.warn(
            "notebook_llm.mock.Usage is deprecated: use notebook_llm.mock.MockTokenCounts",
            DeprecationWarning,
            stacklevel=2,
        )
        return MockTokenCounts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
