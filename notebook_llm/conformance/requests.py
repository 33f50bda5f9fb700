"""The request side of the kit: sample requests and the HTTP request an adapter makes for each.

:func:`request_cases` are six representative requests (text, system, multi-turn, tools, tool
results, images). :func:`check_requests` runs each through the script's ``transform_request``
(and ``build_headers``) on a :func:`~.replay.replica` whose transport captures the first request
and answers none, so nothing is sent: the result is the URL, the headers (redacted; the sample
key is a registered secret) and the JSON body the adapter would send.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ..adapters.lua.lua_adapter import LuaAdapter
from ..core.background_loop import run_sync
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import (
    GenerateOptions,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
)
from ..core.redaction import redact, redact_headers, redact_obj, register_secret
from .replay import as_adapter, replica

__all__ = [
    "SAMPLE_BASE_URL",
    "SAMPLE_KEY",
    "RequestCase",
    "RequestResult",
    "check_requests",
    "request_cases",
]

#: The key used for sample requests; registered as a secret, so it is shown as ``***``.
SAMPLE_KEY = "sk-conformance-kit-0000"
SAMPLE_BASE_URL = "https://provider.example"
_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
_WEATHER = ToolSchema(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
_NOARGS = ToolSchema(
    "now", "The current time.", {"type": "object", "properties": {}, "required": []}
)


@dataclass
class RequestCase:
    """A representative request: what it exercises and its options."""

    name: str
    description: str
    options: GenerateOptions


def request_cases(model: str = "test-model") -> list[RequestCase]:
    """Text, system, multi-turn, tools, tool results and images (the request side of the kit)."""

    def opts(*messages: Message, **kw: Any) -> GenerateOptions:
        return GenerateOptions(
            provider="conformance",
            model=model,
            messages=list(messages),
            base_url=SAMPLE_BASE_URL,
            api_key=SAMPLE_KEY,
            **kw,
        )

    call = ToolCallBlock("call_1", "get_weather", '{"city": "Paris"}')
    image = Message(
        "user",
        [TextBlock("What is in this image?"), ImageBlock(data=_PIXEL, media_type="image/png")],
    )
    return [
        RequestCase("text", "one user message", opts(Message.user("Hello!"))),
        RequestCase(
            "system",
            "a system prompt, temperature and max_tokens",
            opts(Message.user("Hi"), system="You are terse.", temperature=0.2, max_tokens=256),
        ),
        RequestCase(
            "multi-turn",
            "user, assistant (with reasoning), user",
            opts(
                Message.user("Pick a number."),
                Message("assistant", [ReasoningBlock("Any will do."), TextBlock("7")]),
                Message.user("Double it."),
            ),
        ),
        RequestCase(
            "tools",
            "two tools offered, one with no parameters",
            opts(Message.user("Weather in Paris?"), tools=[_WEATHER, _NOARGS]),
        ),
        RequestCase(
            "tool-results",
            "an assistant tool call and its result",
            opts(
                Message.user("Weather in Paris?"),
                Message("assistant", [call]),
                Message.tool_results([ToolResultBlock.of("call_1", '{"temp_c": 21}')]),
                tools=[_WEATHER],
            ),
        ),
        RequestCase("images", "text and an inline PNG", opts(image)),
    ]


@dataclass
class RequestResult:
    """The HTTP request an adapter made for one :class:`RequestCase` (headers redacted)."""

    case: str
    description: str
    method: str = "POST"
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    #: The body parsed as JSON (or the raw text when it is not JSON), redacted.
    body: Any = None
    error: LlmError | None = None
    logs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def body_json(self) -> str:
        """The body, pretty-printed."""
        if isinstance(self.body, str):
            return self.body
        return json.dumps(self.body, indent=2, ensure_ascii=False)


class _Captured(Exception):
    def __init__(self, request: httpx.Request) -> None:
        super().__init__("captured")
        self.request = request


_HIDDEN_HEADERS = frozenset(
    {"host", "content-length", "accept-encoding", "connection", "user-agent"}
)


async def _capture(adapter: LuaAdapter, options: GenerateOptions) -> httpx.Request | LlmError:
    try:
        async for _ in adapter.stream(options):
            break
    except _Captured as cap:
        return cap.request
    except LlmError as err:
        return err
    return LlmError(
        "the adapter made no HTTP request", ErrorCode.ADAPTER_ERROR, adapter=adapter.name
    )


def check_requests(
    adapter_or_path: LuaAdapter | str | Path, cases: Sequence[RequestCase] | None = None
) -> list[RequestResult]:
    """Run each case through ``transform_request``/``build_headers`` and capture the request."""
    adapter = as_adapter(adapter_or_path)
    register_secret(SAMPLE_KEY)

    def handler(request: httpx.Request) -> httpx.Response:
        raise _Captured(request)

    results: list[RequestResult] = []
    for case in cases if cases is not None else request_cases():
        result = RequestResult(case.name, case.description)
        runner = replica(adapter, httpx.MockTransport(handler), result.logs)
        got = run_sync(_capture(runner, case.options))
        if isinstance(got, LlmError):
            result.error = got
        else:
            result.method = got.method
            result.url = redact(str(got.url))
            shown = {k: v for k, v in got.headers.items() if k.lower() not in _HIDDEN_HEADERS}
            result.headers = redact_headers(shown)
            text = got.content.decode("utf-8", errors="replace")
            try:
                result.body = redact_obj(json.loads(text))
            except json.JSONDecodeError:
                result.body = redact(text)
        results.append(result)
    return results
