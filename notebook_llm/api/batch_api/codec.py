"""The provider's own adapter as a batch API's codec: each row's request body, and each answer
as a :class:`~notebook_llm.core.completion.Completion`.

No second request builder: a row's body is what the provider's Lua adapter builds for that row
(``transform_request``, asked for a whole answer, :mod:`notebook_llm.adapters.lua.whole_body`),
from the options the engine would give it (:meth:`Engine.request_options`: the provider's
settings, the model, the schema as the provider's structured-output field, images). An answer
is mapped by the adapter's ``transform_response``, as a non-streamed answer is, then assembled,
and a typed answer (``schema=``) is validated as ``complete`` validates it; usage is the
provider's. So a row answered through a batch and the same row answered live give the same
``Completion``.

What a batch API cannot do is refused here, in one line each: tools (a batch answers each row
once: there is no turn to run a tool and answer again), ``schema_retries`` (no second try),
and a provider without a batch API.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...adapters.lua.lua_adapter import LuaAdapter
from ...adapters.lua.provider_request import HttpRequest
from ...adapters.lua.whole_body import WholeBodyCodec
from ...core.completion import Completion, assemble
from ...core.errors import ErrorCode, LlmError
from ...core.protocol import GenerateOptions, Message
from ...engine.engine import Engine
from ...engine.request import Request
from ...engine.routing.builtin_plugin import LoopbackMock

__all__ = ["API_NAMES", "KNOWN_BATCH_APIS", "RowCodec", "batch_api_of", "prompt_fields"]

#: Why a batch API is refused tools: the one line of ``map(tools=..., batch_api=...)`` and of
#: a request with tools in a batch.
NO_TOOLS_IN_BATCHES = (
    "batch_api does not run tools: a batch answers each row once, with no turn to run a tool "
    "and answer again; map without batch_api to use tools"
)

#: The batch APIs this package speaks.
API_NAMES = ("openai", "anthropic")

#: The providers whose servers have a batch API, and which (``batch_api=True`` picks it). Any
#: other provider on a Lua adapter may name one (``batch_api="openai"``): a server that
#: implements OpenAI's ``/v1/batches``, a gateway, a test's loopback server.
KNOWN_BATCH_APIS = {"openai": "openai", "anthropic": "anthropic", "mock": "openai"}


def batch_api_of(provider: str, choice: Any) -> str:
    """The batch API of ``provider`` for ``batch_api=choice`` (``True`` or an API's name), or
    ``LlmError(INVALID_OPTIONS)`` in one line naming the providers that have one."""
    if isinstance(choice, str):
        if choice in API_NAMES:
            return choice
        raise LlmError(
            f"batch_api={choice!r} is not a batch API this package speaks: "
            f"use {' or '.join(repr(n) for n in API_NAMES)}, or True",
            ErrorCode.INVALID_OPTIONS,
        )
    if choice is not True:
        raise LlmError(
            f"batch_api takes True or the name of a batch API, not {choice!r}",
            ErrorCode.INVALID_OPTIONS,
        )
    api = KNOWN_BATCH_APIS.get(provider)
    if api is None:
        raise LlmError(
            f"provider {provider!r} has no batch API: batch_api=True works with "
            f"{', '.join(KNOWN_BATCH_APIS)}; for a server that implements one, name it "
            '(batch_api="openai" or batch_api="anthropic")',
            ErrorCode.INVALID_OPTIONS,
            provider=provider,
        )
    return api


def check_batchable(request: Request) -> None:
    """Refuse what a batch API cannot do with this request (see the module docstring)."""
    if request.tools:
        raise LlmError(NO_TOOLS_IN_BATCHES, ErrorCode.INVALID_OPTIONS, provider=request.provider)
    if request.schema_retries:
        raise LlmError(
            "schema_retries does not apply to batch_api: each row is answered once; an answer "
            "that does not validate keeps its SCHEMA_MISMATCH (retry_failed=True sends it again)",
            ErrorCode.INVALID_OPTIONS,
            provider=request.provider,
        )


def prompt_fields(prompt: Any) -> dict[str, Any]:
    """A row's prompt as a request's fields: a string, a ``Message`` or a list of them (what
    ``map`` takes); anything else (a number from a DataFrame) as its text."""
    if isinstance(prompt, str):
        return {"prompt": prompt, "messages": None}
    if isinstance(prompt, Message):
        return {"prompt": None, "messages": [prompt]}
    if isinstance(prompt, list | tuple) and all(isinstance(m, Message) for m in prompt):
        return {"prompt": None, "messages": list(prompt)}
    return {"prompt": str(prompt), "messages": None}


class RowCodec:
    """Rows of one ``map`` call to request bodies, answers to completions (see the module
    docstring), through the adapter of ``request.provider`` on ``engine``."""

    def __init__(self, engine: Engine, request: Request, api: str | None = None) -> None:
        check_batchable(request)
        #: The batch API to speak: ``api``, else the provider's own (:func:`batch_api_of`).
        self.api = batch_api_of(request.provider, api or True)
        self.engine = engine
        self.request = request
        adapter = engine.adapter_of(request.provider)
        self._base_url: str | None = None
        if isinstance(adapter, LoopbackMock):
            # The ``mock`` provider is the openai adapter talking to the loopback mock server.
            from ...adapters.mock.shared import shared_server

            adapter = engine.adapter("openai")
            self._base_url = shared_server().url + "/v1"
        if not isinstance(adapter, LuaAdapter):
            raise LlmError(
                f"provider {request.provider!r} runs on adapter {adapter.name!r}, which cannot "
                "build a batch row (a batch API needs a Lua adapter: openai, anthropic or one "
                "of yours)",
                ErrorCode.INVALID_OPTIONS,
                provider=request.provider,
            )
        self.adapter = adapter
        #: The options of a placeholder row: the provider's URL, headers and transport.
        self.options = self._options(replace(request, prompt=".", messages=None))
        self._codec: WholeBodyCodec = adapter.whole_body_codec(self.options)
        self.model = self.options.model

    def _options(self, request: Request) -> GenerateOptions:
        _, options = self.engine.request_options(request)
        if self._base_url is not None:
            options.base_url = self._base_url
        return options

    async def endpoint(self) -> HttpRequest:
        """The URL and headers (the key as the adapter sends it) of the provider's endpoint,
        from a placeholder row: what the batch API's own calls need."""
        return await self._codec.request(self.options)

    async def body(self, prompt: Any) -> str:
        """The JSON body of one row, as the adapter builds it."""
        options = self._options(replace(self.request, **prompt_fields(prompt)))
        return (await self._codec.request(options)).body

    def completion(self, answer: bytes) -> Completion:
        """One answer body as a completion: mapped by the adapter, assembled, and validated
        against the schema when there is one. A failed answer (an error body, an answer that
        does not validate) is a completion whose ``error`` says why."""
        completion = assemble(self._codec.events(answer, self.options))
        completion.provider = self.request.provider
        completion.model = self.model
        if self.request.schema is not None and completion.error is None:
            from ...core.response_schema import parse_into

            parse_into(completion, self.request.schema)
        return completion
