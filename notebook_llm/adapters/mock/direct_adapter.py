"""A Python adapter over the mock models: no HTTP, no Lua.

It is the smallest complete example of a Python adapter (subclass :class:`LlmAdapter`, yield
protocol events) and serves the ``mock-direct`` provider. The default ``mock`` provider goes
through the built-in openai Lua adapter and the loopback mock server instead, so the offline
default takes the same path as a real provider.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Literal

from ...core.errors import ErrorCode, LlmError
from ...core.protocol import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    ModelInfo,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from ..base import LlmAdapter
from ..lua.kernel_request import build_request
from . import models as mock_models
from .pace import paced, watched_pace

_FINISH: dict[str, FinishReason] = {
    "stop": FinishReason("stop"),
    "length": FinishReason("max-tokens"),
    "tool_calls": FinishReason("tool-calls"),
}


class MockAdapter(LlmAdapter):
    """Deterministic offline models: ``echo``, ``reasoning``, ``tools``, ``lorem``."""

    name = "mock-direct"
    version = "1"

    def __init__(self, *, delay: float = 0.0) -> None:
        #: Seconds to sleep between pieces (0 = just yield control to the loop).
        self.delay = delay

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        # At a reading pace where someone watches the cell, at once elsewhere (mock/pace.py).
        async for event in paced(self._events(options), watched_pace()):
            yield event

    async def _events(self, options: GenerateOptions) -> AsyncIterator[Event]:
        request = build_request(options, stream=True)
        try:
            reply = mock_models.generate(request)
        except mock_models.UnknownModelError as exc:
            raise LlmError(
                f"{exc} (mock models: {', '.join(mock_models.MODELS)})",
                ErrorCode.NOT_FOUND,
                status=404,
                provider=options.provider,
            ) from None
        usage = reply.usage or mock_models.usage_for(reply, request)
        index: dict[str, int] = {}
        texts: dict[int, list[str]] = {}
        calls: dict[str, int] = {}
        next_index = 0
        for part in reply.parts:
            await asyncio.sleep(self.delay)
            if isinstance(part, mock_models.ToolCall):
                if part.id not in calls:
                    calls[part.id] = next_index
                    yield BlockStart(next_index, "tool-call")
                    next_index += 1
                i = calls[part.id]
                for n, piece in enumerate(part.pieces):
                    yield ToolCallDelta(i, part.id, piece, part.name if n == 0 else None)
                yield BlockEnd(i, ToolCallBlock(part.id, part.name, part.arguments))
                continue
            kind: Literal["text", "reasoning"] = (
                "reasoning" if isinstance(part, mock_models.Reasoning) else "text"
            )
            if kind not in index:
                index[kind] = next_index
                texts[next_index] = []
                yield BlockStart(next_index, kind)
                next_index += 1
            i = index[kind]
            texts[i].append(part.text)
            yield ReasoningDelta(i, part.text) if kind == "reasoning" else TextDelta(i, part.text)
        for name, i in index.items():
            text = "".join(texts[i])
            yield BlockEnd(i, ReasoningBlock(text) if name == "reasoning" else TextBlock(text))
        yield Usage(
            TokenUsage(
                usage.prompt_tokens,
                usage.completion_tokens,
                reasoning_tokens=usage.reasoning_tokens or None,
            )
        )
        yield Finish(_FINISH[reply.finish_reason])

    async def list_models(self, provider: str) -> list[ModelInfo]:
        return [ModelInfo(m, description=d) for m, d in mock_models.MODELS.items()]

    async def resolve_model(self, provider: str, model: str | None) -> ModelInfo | None:
        if model not in mock_models.MODELS:
            return None
        efforts = ["low", "medium", "high"] if model == "reasoning" else None
        return ModelInfo(
            model,
            description=mock_models.MODELS[model],
            context_window=128_000,
            default_max_tokens=4096,
            reasoning_efforts=efforts,
            default_reasoning_effort="medium" if efforts else None,
        )
