"""The built-in plugin: what every Engine knows from the start, the adapter catalog and the
offline mock providers. Installed through the same ``register(host)`` hook as entry-point
plugins (:mod:`notebook_llm.engine.routing.plugins`), so this module never imports the engine."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ...adapters.base import LlmAdapter
from ...core.protocol import Event, GenerateOptions, ModelInfo
from .plugins import PluginHost

MOCK_MODELS = ["echo", "reasoning", "tools", "lorem"]


class LoopbackMock(LlmAdapter):
    """The ``mock`` provider: the built-in openai Lua adapter talking to a loopback mock server.

    So the offline default takes exactly the path a real provider takes (request transform,
    HTTP, SSE framing, chunk transform, event mapping). The server starts on first use, on
    127.0.0.1 with a free port, in a daemon thread, shared by the process.
    """

    name = "mock"
    version = "1"

    def __init__(self, engine: PluginHost) -> None:
        self._engine = engine

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        from ...adapters.mock.pace import paced, watched_pace
        from ...adapters.mock.shared import shared_server

        options.base_url = shared_server().url + "/v1"
        # At a reading pace where someone watches the cell, at once elsewhere (mock/pace.py).
        inner = self._engine.adapter("openai").stream(options)
        async for event in paced(inner, watched_pace()):
            yield event

    async def list_models(self, provider: str) -> list[ModelInfo]:
        from ...adapters.mock.direct_adapter import MockAdapter

        return await MockAdapter().list_models(provider)

    async def resolve_model(self, provider: str, model: str | None) -> ModelInfo | None:
        from ...adapters.mock.direct_adapter import MockAdapter

        return await MockAdapter().resolve_model(provider, model)


def register(engine: PluginHost) -> None:
    """Add the adapter catalog, and the ``mock`` / ``mock-direct`` providers (no key, no network)."""
    from ...adapters.mock.direct_adapter import MockAdapter
    from .lua_files import AdapterCatalog

    engine.add_adapter_resolver(AdapterCatalog())
    direct = MockAdapter()
    engine.add_adapter(direct)
    engine.add_provider(
        "mock-direct", adapter=direct, model="echo", models=MOCK_MODELS, needs_key=False
    )
    mock = LoopbackMock(engine)
    engine.add_adapter(mock)
    engine.add_provider("mock", adapter=mock, model="echo", models=MOCK_MODELS, needs_key=False)
