"""The built-in plugin: what every Engine knows from the start. The adapter catalog (the
shipped Lua scripts and the user's), the built-in providers (:data:`PROVIDERS`: one declaration
each, with its URL, key variable, models and prices) and the offline mock providers. Installed
through the same ``register(host)`` hook as entry-point plugins
(:mod:`notebook_llm.engine.routing.plugins`), so this module never imports the engine."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ...adapters.base import LlmAdapter
from ...core.protocol import Event, GenerateOptions, ModelInfo
from ..providers import ProviderConfig
from .plugins import PluginHost

MOCK_MODELS = ["echo", "reasoning", "tools", "lorem"]

#: The built-in providers, one declaration each: the adapter (a shipped Lua script of that
#: name), base URL, key variable, default model, the models ``%llm models`` shows, prices in US
#: dollars per million tokens (input, output), and what the API can do. Bound to their routes
#: on first use; the config file and the environment may override each field.
PROVIDERS: tuple[ProviderConfig, ...] = (
    ProviderConfig(
        "openai",
        "openai",
        "https://api.openai.com/v1",
        "gpt-4o-mini",
        "OPENAI_API_KEY",
        models=["gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-4.1-mini", "o4-mini"],
        prices={
            "gpt-4o-mini": (0.15, 0.60),
            "gpt-4o": (2.50, 10.00),
            "gpt-4.1": (2.00, 8.00),
            "gpt-4.1-mini": (0.40, 1.60),
            "o4-mini": (1.10, 4.40),
        },
        source="built-in",
        # OpenAI's own API refuses max_tokens for its reasoning models.
        max_tokens_field="max_completion_tokens",
        # Its /models lists every model of the account, most of them not for chat.
        lists_models=False,
    ),
    ProviderConfig(
        "deepseek",
        "deepseek",
        "https://api.deepseek.com",
        "deepseek-chat",
        "DEEPSEEK_API_KEY",
        models=["deepseek-chat", "deepseek-reasoner"],
        prices={"deepseek-chat": (0.27, 1.10), "deepseek-reasoner": (0.55, 2.19)},
        source="built-in",
    ),
    ProviderConfig(
        "anthropic",
        "anthropic",
        "https://api.anthropic.com",
        "claude-sonnet-4-5",
        "ANTHROPIC_API_KEY",
        models=["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"],
        prices={
            "claude-sonnet-4-5": (3.0, 15.0),
            "claude-haiku-4-5": (1.0, 5.0),
            "claude-opus-4-1": (15.0, 75.0),
        },
        source="built-in",
    ),
    ProviderConfig(
        "gemini",
        "gemini",
        "https://generativelanguage.googleapis.com/v1beta",
        "gemini-2.5-flash",
        "GEMINI_API_KEY",
        models=["gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.0-flash"],
        prices={
            "gemini-2.5-flash": (0.30, 2.50),
            "gemini-2.5-pro": (1.25, 10.0),
            "gemini-2.0-flash": (0.10, 0.40),
        },
        source="built-in",
    ),
    ProviderConfig(
        "mistral",
        "mistral",
        "https://api.mistral.ai/v1",
        "mistral-small-latest",
        "MISTRAL_API_KEY",
        models=["mistral-small-latest", "mistral-large-latest", "magistral-medium-latest"],
        prices={"mistral-small-latest": (0.10, 0.30), "mistral-large-latest": (2.00, 6.00)},
        source="built-in",
    ),
    ProviderConfig(
        "groq",
        "groq",
        "https://api.groq.com/openai/v1",
        "llama-3.3-70b-versatile",
        "GROQ_API_KEY",
        models=["llama-3.3-70b-versatile", "openai/gpt-oss-120b", "qwen/qwen3-32b"],
        prices={"llama-3.3-70b-versatile": (0.59, 0.79)},
        source="built-in",
    ),
    ProviderConfig(
        "github",
        "github",
        "https://models.github.ai/inference",
        "openai/gpt-4o-mini",
        "GITHUB_TOKEN",
        models=["openai/gpt-4o-mini", "openai/gpt-4.1", "meta/Llama-3.3-70B-Instruct"],
        prices={"openai/gpt-4o-mini": (0.15, 0.60)},
        source="built-in",
    ),
    ProviderConfig(
        "ollama",
        "ollama",
        "http://127.0.0.1:11434",
        "llama3.2",
        "OLLAMA_API_KEY",
        needs_key=False,
        models=["llama3.2", "qwen3", "gpt-oss:20b"],
        source="built-in",
    ),
)


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
    """Add the adapter catalog, the built-in providers, and the ``mock`` / ``mock-direct``
    providers (no key, no network)."""
    from ...adapters.mock.direct_adapter import MockAdapter
    from .lua_files import AdapterCatalog

    engine.add_adapter_resolver(AdapterCatalog(engine.adapter_sources))
    for provider in PROVIDERS:
        engine.declare_provider(provider)
    direct = MockAdapter()
    engine.add_adapter(direct)
    engine.add_provider(
        "mock-direct", adapter=direct, model="echo", models=MOCK_MODELS, needs_key=False
    )
    mock = LoopbackMock(engine)
    engine.add_adapter(mock)
    engine.add_provider("mock", adapter=mock, model="echo", models=MOCK_MODELS, needs_key=False)
