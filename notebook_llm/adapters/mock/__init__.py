"""Offline mock LLM: deterministic models behind a loopback OpenAI/Anthropic/Ollama server."""

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
from .rate_limits import MockRateLimit
from .server import MockServer, RecordedRequest

__all__ = [
    "FAULTS",
    "FAULT_HEADER",
    "MODELS",
    "Fault",
    "MockRateLimit",
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
