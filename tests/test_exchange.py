"""The one exchange: every request goes through ``wire/exchange.py``, and every response it reads
is reported to the response watchers (``wire/response_watch.py``).

A stream, a refused request (429), a Lua hook's ``http_get`` and the model list all talk to the
same loopback mock server; the watcher sees each response's status and headers.
"""

from __future__ import annotations

import json

import httpx
import pytest

from notebook_llm import (
    BlockEnd,
    BlockStart,
    Engine,
    ErrorCode,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmError,
    TextBlock,
    TextDelta,
)
from notebook_llm.adapters.codec_adapter import CodecAdapter
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.wire.codec import WireRequest
from notebook_llm.wire.exchange import HttpExchange
from notebook_llm.wire.limits import WireLimits
from notebook_llm.wire.response_watch import notify_response, watching_responses

# transform_request asks the server for its models (a hook's http_get) before the generation.
FETCHING = """
return { name = "fetching",
  transform_request = function(r)
    local got = json.decode(http_get(MODELS))
    local req = json.decode(r)
    req.fetched = got.status
    return json.encode(req)
  end,
  transform_stream_chunk = function(s)
    if s == "[DONE]" then return "" end
    local c = json.decode(s).choices[1]
    if not c then return "" end
    return json.encode({ content = c.delta.content or "", done = c.finish_reason ~= nil })
  end }
"""


def _engine(srv: MockServer, retries: int = 0) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=retries, retry_base=0.01)
    engine.add_provider("local", adapter="openai", base_url=srv.url + "/v1", model="echo")
    return engine


async def test_every_response_is_reported_to_the_watcher() -> None:
    seen: list[tuple[int, str]] = []

    def watch(status: int, headers: httpx.Headers) -> None:
        seen.append((status, headers.get("content-type", "").split(";")[0]))

    with MockServer() as srv:
        engine = _engine(srv, retries=1)
        fetching = LuaAdapter.from_source(
            FETCHING.replace("MODELS", json.dumps(srv.url + "/v1/models")), name="fetching"
        )
        engine.add_provider("hooked", adapter=fetching, base_url=srv.url + "/v1", model="echo")
        srv.inject("rate_limit", seconds=0.01)
        with watching_responses(watch):
            assert (await engine.complete("local", prompt="hi")).text == "hi"  # 429, then 200
            assert await engine.list_models("local")  # GET /v1/models
            assert (await engine.complete("hooked", prompt="hey")).text == "hey"
        assert (await engine.complete("local", prompt="unwatched")).text == "unwatched"
    assert seen == [
        (429, "application/json"),
        (200, "text/event-stream"),
        (200, "application/json"),  # the model list
        (200, "application/json"),  # the hook's http_get
        (200, "text/event-stream"),
    ]


async def test_a_failing_watcher_does_not_break_the_request() -> None:
    calls: list[int] = []

    def broken(status: int, headers: httpx.Headers) -> None:
        calls.append(status)
        raise RuntimeError("a watcher's bug")

    with MockServer() as srv, watching_responses(broken):
        assert (await _engine(srv).complete("local", prompt="still")).text == "still"
    assert calls == [200]


def test_watchers_nest_and_end_with_their_block() -> None:
    outer: list[int] = []
    inner: list[int] = []
    headers = httpx.Headers({"x-ratelimit-remaining-requests": "9"})
    notify_response(200, headers)  # nobody watches: nothing happens
    with watching_responses(lambda s, h: outer.append(s)):
        notify_response(201, headers)
        with watching_responses(lambda s, h: inner.append(s)):
            notify_response(429, headers)
        notify_response(202, headers)
    notify_response(203, headers)
    assert outer == [201, 429, 202]
    assert inner == [429]


async def test_a_whole_body_is_read_under_the_exchange_cap() -> None:
    """``fetch`` (the model list's and the hooks' path) stops at the exchange's body cap, with
    the one-line RESPONSE_TOO_LARGE error, and maps a refused request to the provider's error."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/big":
            return httpx.Response(200, content=b"x" * 5000)
        return httpx.Response(429, json={"error": {"message": "slow down"}})

    exchange = HttpExchange(
        "p", transport=httpx.MockTransport(answer), limits=WireLimits(max_body_bytes=4096)
    )
    with pytest.raises(LlmError) as info:
        await exchange.fetch(WireRequest("GET", "http://x.test/big"), what="the thing")
    assert info.value.code == ErrorCode.RESPONSE_TOO_LARGE
    assert "the thing is larger than its 4 KiB cap" in info.value.message
    with pytest.raises(LlmError) as info:
        await exchange.fetch(WireRequest("GET", "http://x.test/limited"), what="the thing")
    assert info.value.code == ErrorCode.RATE_LIMIT
    assert "slow down" in info.value.message
    answered = await exchange.fetch(
        WireRequest("GET", "http://x.test/limited"), what="the thing", refused="answer"
    )
    assert answered.status == 429
    assert json.loads(answered.text()) == {"error": {"message": "slow down"}}


async def test_transport_failures_are_mapped_in_one_place() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("nobody listens")

    exchange = HttpExchange("p", transport=httpx.MockTransport(refuse))
    with pytest.raises(LlmError) as info:
        await exchange.fetch(
            WireRequest("GET", "http://x.test/models"),
            what="the model list",
            doing="asking p for its models",
        )
    assert info.value.code == ErrorCode.TRANSPORT
    assert info.value.message == ("asking p for its models failed: ConnectError: nobody listens")
    assert info.value.provider == "p"


class LinesCodec:
    """A Python codec for a made-up API: POST ``{"prompt"}``, answered with JSON lines
    ``{"t": piece}`` and a last ``{"end": true}``. It knows no socket and no status."""

    def __init__(self, options: GenerateOptions) -> None:
        self.options = options
        self.text: list[str] = []
        self.finished = False

    async def request(self) -> WireRequest:
        prompt = self.options.messages[-1].text
        body = json.dumps({"prompt": prompt}).encode()
        return WireRequest("POST", f"{self.options.base_url}/lines", {}, body, True, "ndjson")

    def feed(self, payloads: list[str]) -> list[Event]:
        out: list[Event] = []
        for line in payloads:
            doc = json.loads(line)
            if doc.get("end"):
                return out + self.end()
            if not self.text:
                out.append(BlockStart(0, "text"))
            self.text.append(doc["t"])
            out.append(TextDelta(0, doc["t"]))
        return out

    def raise_pending(self) -> None:
        return None

    def end(self) -> list[Event]:
        self.finished = True
        closed = [BlockEnd(0, TextBlock("".join(self.text)))] if self.text else []
        return [*closed, Finish(FinishReason("stop"))]

    async def whole(self, body: bytes) -> list[Event]:
        raise AssertionError("a streaming API")

    def fail(self, error: LlmError) -> list[Event] | None:
        self.finished = True
        return [Finish.error(error)]

    def refine(self, error: LlmError, body: bytes) -> LlmError:
        return error


class LinesAdapter(CodecAdapter):
    name = "lines"

    def codec(self, options: GenerateOptions, exchange: HttpExchange) -> LinesCodec:
        return LinesCodec(options)


async def test_a_python_adapter_can_be_a_codec_and_gets_what_the_exchange_gives() -> None:
    sent: list[httpx.Request] = []

    async def api(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        prompt = json.loads(await request.aread())["prompt"]
        if prompt == "busy":
            return httpx.Response(503, json={"error": {"message": "try later"}})
        lines = [json.dumps({"t": w + " "}) for w in prompt.split()] + ['{"end": true}']
        return httpx.Response(
            200,
            headers={"content-type": "application/x-ndjson"},
            content="\n".join(lines).encode(),
        )

    engine = Engine(
        config_file=False, env_file=False, retries=0, transport=httpx.MockTransport(api)
    )
    engine.add_provider("lines", adapter=LinesAdapter(), base_url="http://lines.test", model="m")
    statuses: list[int] = []
    with watching_responses(lambda status, headers: statuses.append(status)):
        completion = await engine.complete("lines", prompt="two words")
        assert completion.text == "two words "
        with pytest.raises(LlmError) as info:  # the status, mapped by the exchange
            await engine.complete("lines", prompt="busy")
    assert info.value.code == ErrorCode.SERVER
    assert "try later" in info.value.message
    assert statuses == [200, 503]
    assert [r.url.path for r in sent] == ["/lines", "/lines"]
