"""The Lua ``http_get`` / ``http_post`` built-ins go through the engine's transport.

The hook yields the request; Python awaits it on the stream's transport (so the event loop runs
on, a Recorder records it and a Replayer answers it) under the hook's wall budget and Stop, and
reads at most ``DEFAULT_LIMITS.max_body_bytes`` decoded bytes of its body.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from notebook_llm import Engine, ErrorCode, LlmError
from notebook_llm.adapters.lua.host import TransportHttp
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox
from notebook_llm.wire.limits import DEFAULT_LIMITS

SSE = (
    b'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)

# transform_request fetches a token and puts what it got in the body: the test reads it back
# from the POST the transport saw.
SCRIPT = """
return { name = "fetcher",
  transform_request = function(r)
    local got = json.decode(http_get("http://auth.test/token"))
    local posted = json.decode(http_post("http://auth.test/echo", '{"x":1}'))
    local req = json.decode(r)
    req.got, req.posted = got, posted
    return json.encode(req)
  end,
  transform_stream_chunk = function(s)
    if s == "[DONE]" then return "" end
    local c = json.decode(s).choices[1]
    return json.encode({ content = c.delta.content or "", done = c.finish_reason ~= nil })
  end }
"""


class Server:
    """A MockTransport that answers the model and the script's own requests."""

    def __init__(self, delay: float = 0.0, token_body: bytes = b'{"token":"t1"}') -> None:
        self.seen: list[tuple[str, str, bytes]] = []
        self.delay = delay
        self.token_body = token_body
        self.token_headers: dict[str, str] = {}
        self.arrived = asyncio.Event()
        #: When set, the token request is answered once this is set (instead of after ``delay``).
        self.gate: asyncio.Event | None = None

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        self.seen.append((request.method, str(request.url), body))
        self.arrived.set()
        if request.url.host == "auth.test":
            if request.url.path == "/token":
                if self.gate is not None:
                    await asyncio.wait_for(self.gate.wait(), 60)
                await asyncio.sleep(self.delay)
                return httpx.Response(200, content=self.token_body, headers=self.token_headers)
            return httpx.Response(201, content=body)
        return httpx.Response(200, content=SSE, headers={"content-type": "text/event-stream"})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


def _engine(server: Server, script: str = SCRIPT, **limits: Any) -> Engine:
    engine = Engine(config_file=False, transport=server.transport())
    adapter = LuaAdapter.from_source(script, name="fetcher", limits=LuaLimits(**limits))
    engine.add_provider("p", adapter=adapter, base_url="http://model.test/v1", model="m")
    return engine


def _model_body(server: Server) -> dict[str, Any]:
    posts = [json.loads(b) for m, u, b in server.seen if "model.test" in u]
    assert len(posts) == 1
    result: dict[str, Any] = posts[0]
    return result


async def test_the_builtins_go_through_the_engines_transport() -> None:
    server = Server()
    completion = await _engine(server).complete("p", prompt="hello")
    assert completion.text == "hi"
    body = _model_body(server)
    assert json.loads(body["got"]["body"]) == {"token": "t1"}
    assert body["got"]["status"] == 200
    assert body["posted"] == {"url": "http://auth.test/echo", "status": 201, "body": '{"x":1}'}
    methods = [(m, u) for m, u, _ in server.seen if "auth.test" in u]
    assert methods == [("GET", "http://auth.test/token"), ("POST", "http://auth.test/echo")]


async def test_the_event_loop_runs_while_a_hook_waits_for_its_request() -> None:
    # The hook's request is answered only after another task of the loop has run five times:
    # a hook that held the loop while it waited would never get its answer (the gate's guard).
    server = Server()
    server.gate = asyncio.Event()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1
            if ticks >= 5:
                server.gate.set()  # type: ignore[union-attr]

    task = asyncio.create_task(ticker())
    try:
        completion = await _engine(server).complete("p", prompt="hello")
    finally:
        task.cancel()
    assert completion.text == "hi"
    assert ticks >= 5


async def test_a_request_is_bounded_by_the_hooks_wall_budget() -> None:
    server = Server(delay=30)
    with pytest.raises(LlmError) as info:
        await _engine(server, wall_seconds=0.3).complete("p", prompt="hello")
    assert info.value.code == ErrorCode.ADAPTER_TIMEOUT
    assert "HTTP calls included" in info.value.message


async def test_a_body_over_the_cap_is_an_error_answer_counted_decoded() -> None:
    big = gzip.compress(b"0" * (DEFAULT_LIMITS.max_body_bytes + 1))
    assert len(big) < 100_000  # small on the wire, over the cap once decoded
    server = Server(token_body=big)
    server.token_headers = {"content-encoding": "gzip"}
    await _engine(server).complete("p", prompt="hello")
    got = _model_body(server)["got"]
    assert "status" not in got
    assert "16 MiB" in got["error"]


async def test_stop_while_a_request_is_on_the_way_gives_up_the_hook_call() -> None:
    server = Server(delay=3600)
    sb = LuaSandbox(
        "return { f = function() local r = http_get('http://auth.test/token') return 'late' end,"
        " g = function() return 'next' end }"
    )
    sb.set_http(TransportHttp(lambda: (httpx.AsyncClient(transport=server.transport()), True)))
    task = asyncio.create_task(sb.acall("f"))
    await server.arrived.wait()
    task.cancel()  # what a Stop does to the stream's task
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sb.call("g") == "next"  # the sandbox is usable again


async def test_requests_are_recorded_and_replayed_without_the_network(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    server = Server()
    engine = _engine(server)
    with engine.recording(path):
        await engine.complete("p", prompt="hello")
    urls = [json.loads(line).get("url") for line in path.read_text().splitlines()]
    assert "http://auth.test/token" in urls
    assert "http://auth.test/echo" in urls

    reached: list[str] = []

    async def refuse(request: httpx.Request) -> httpx.Response:
        reached.append(str(request.url))
        raise httpx.ConnectError("no network in a replay")

    engine = Engine(config_file=False, transport=httpx.MockTransport(refuse))
    engine.add_provider(
        "p",
        adapter=LuaAdapter.from_source(SCRIPT, name="fetcher"),
        base_url="http://model.test/v1",
        model="m",
    )
    with engine.replaying(path):
        completion = await engine.complete("p", prompt="hello")
    assert completion.text == "hi"
    assert reached == []


async def test_a_request_with_no_recording_is_an_error_answer_during_replay(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    engine = _engine(Server())
    with engine.recording(path):
        await engine.complete("p", prompt="hello")
    other = SCRIPT.replace("http://auth.test/token", "http://auth.test/other")
    sb = LuaSandbox(
        other.replace(
            "return { name",
            "return { g = function() return http_get('http://auth.test/unrecorded') end, name",
        )
    )
    with engine.replaying(path):
        make = engine._make_transport()
        assert make is not None
        sb.set_http(TransportHttp(lambda: (httpx.AsyncClient(transport=make()), True)))
        answer = json.loads(await sb.acall("g"))
    assert "status" not in answer
    assert answer["error"]


SCRIPT_CONTEXTS = """
return {
  in_coroutine = function()
    local co = coroutine.wrap(function() return http_get("http://auth.test/token") end)
    return co()
  end,
  in_pcall = function()
    local ok, r = pcall(http_get, "http://auth.test/token")
    return r
  end,
  in_sort = function()
    local out
    table.sort({2, 1}, function(a, b) out = http_get("http://auth.test/token") return a < b end)
    return out
  end,
  transform_stream_chunk = function(s) return http_get("http://auth.test/token") end,
  bare_yield = function() return coroutine.yield(1) end,
}
"""


@pytest.mark.parametrize(
    ("hook", "answered"),
    [("in_coroutine", True), ("in_pcall", True), ("in_sort", False)],
)
async def test_where_a_hook_may_send_a_request(hook: str, answered: bool) -> None:
    server = Server()
    sb = LuaSandbox(SCRIPT_CONTEXTS)
    sb.set_http(TransportHttp(lambda: (httpx.AsyncClient(transport=server.transport()), True)))
    answer = json.loads(await sb.acall(hook))
    if answered:
        assert json.loads(answer["body"]) == {"token": "t1"}
    else:
        assert "C function" in answer["error"]
        assert server.seen == []


def test_a_stream_chunk_hook_gets_an_error_answer_and_sends_nothing() -> None:
    sb = LuaSandbox(SCRIPT_CONTEXTS)
    out, err = sb.call_each("transform_stream_chunk", ["x"])
    assert err is None
    assert (
        "only in build_headers, transform_request and transform_response"
        in json.loads(out[0])["error"]
    )


def test_a_bare_yield_in_a_hook_is_still_an_error() -> None:
    with pytest.raises(LlmError) as info:
        LuaSandbox(SCRIPT_CONTEXTS).call("bare_yield")
    assert "yield from outside a coroutine" in info.value.message


def test_a_synchronous_call_without_a_bridge_does_not_reach_the_network() -> None:
    sb = LuaSandbox("return { g = function() return http_get('http://127.0.0.1:9/') end }")
    answer = json.loads(sb.call("g"))
    assert "needs the engine" in answer["error"]


async def test_the_engines_stop_ends_a_stream_whose_hook_waits_for_a_request() -> None:
    from notebook_llm import StopSignal

    server = Server(delay=3600)
    engine = _engine(server)
    stop = StopSignal()

    async def press_stop() -> None:
        await server.arrived.wait()
        stop.set("stopped by the test")

    presser = asyncio.create_task(press_stop())
    with pytest.raises(LlmError) as info:
        await asyncio.wait_for(engine.complete("p", prompt="hello", stop_signal=stop), 30)
    await presser
    assert info.value.code == ErrorCode.ABORTED
