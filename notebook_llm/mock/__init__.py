"""Offline mock LLM: deterministic models behind a loopback OpenAI/Anthropic/Ollama server."""

from .faults import FAULT_HEADER, FAULTS, Fault
from .models import (
    MODELS,
    MockReply,
    Reasoning,
    Text,
    ToolCall,
    UnknownModelError,
    Usage,
    count_tokens,
    generate,
)
from .server import MockServer, RecordedRequest

__all__ = [
    "FAULTS",
    "FAULT_HEADER",
    "MODELS",
    "Fault",
    "MockReply",
    "MockServer",
    "Reasoning",
    "RecordedRequest",
    "Text",
    "ToolCall",
    "UnknownModelError",
    "Usage",
    "count_tokens",
    "generate",
]
