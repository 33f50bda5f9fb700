"""The Lua ``http_get`` / ``http_post`` built-ins go through the stream's exchange.

The hook yields the request; Python awaits it through the stream's exchange
(``wire/exchange.py``: the engine's transport, so the event loop runs on, a Recorder records it
and a Replayer answers it), under the request's deadline, the hook's wall budget and Stop, and
reads at most the adapter's ``max_body_bytes`` decoded bytes of its body, nested encodings too.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from notebook_llm import Engine, ErrorCode, LlmError, Timeouts
from notebook_llm.adapters.lua.host import TransportHttp
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox
from notebook_llm.wire.exchange import HttpExchange
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
        #: the model's answer is sent after a pause: its wait then meets the request's limits
        self.model_pause = False

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
        if self.model_pause:
            await asyncio.sleep(0.01)
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


async def test_a_request_is_bounded_by_the_streams_deadline() -> None:
    """The hook's request is part of the stream's exchange: the request's deadline (here
    0.5 s) ends it, long before the hook's own 30 s wall budget would; the script gets the
    error answer, and the generation's own request meets the deadline next."""
    server = Server(delay=3600)
    server.model_pause = True
    with pytest.raises(LlmError) as info:
        await _engine(server).complete(
            "p", prompt="hello", timeouts=Timeouts(deadline=0.5, idle=None), retries=0
        )
    assert info.value.code == ErrorCode.TIMEOUT
    assert "passed its deadline" in info.value.message
    got = _model_body(server)["got"]
    assert "status" not in got
    assert "passed its deadline" in got["error"]
    assert got["code"] == ErrorCode.TIMEOUT


async def test_a_body_over_the_cap_is_an_error_answer_counted_decoded() -> None:
    big = gzip.compress(b"0" * (DEFAULT_LIMITS.max_body_bytes + 1))
    assert len(big) < 100_000  # small on the wire, over the cap once decoded
    server = Server(token_body=big)
    server.token_headers = {"content-encoding": "gzip"}
    await _engine(server).complete("p", prompt="hello")
    got = _model_body(server)["got"]
    assert "status" not in got
    assert "16 MiB" in got["error"]
    assert got["code"] == ErrorCode.RESPONSE_TOO_LARGE


async def test_stop_while_a_request_is_on_the_way_gives_up_the_hook_call() -> None:
    server = Server(delay=3600)
    sb = LuaSandbox(
        "return { f = function() local r = http_get('http://auth.test/token') return 'late' end,"
        " g = function() return 'next' end }"
    )
    sb.set_http(TransportHttp(HttpExchange("p", transport=server.transport())))
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
        sb.set_http(TransportHttp(HttpExchange("p", make_transport=make)))
        answer = json.loads(await sb.acall("g"))
    assert "status" not in answer
    assert answer["error"]
    assert answer["code"] == ErrorCode.REPLAY_MISS


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
    sb.set_http(TransportHttp(HttpExchange("p", transport=server.transport())))
    answer = json.loads(await sb.acall(hook))
    if answered:
        assert json.loads(answer["body"]) == {"token": "t1"}
    else:
        assert "C function" in answer["error"]
        assert answer["code"] == ErrorCode.ADAPTER_ERROR
        assert server.seen == []


def test_a_stream_chunk_hook_gets_an_error_answer_and_sends_nothing() -> None:
    sb = LuaSandbox(SCRIPT_CONTEXTS)
    out, err = sb.call_each("transform_stream_chunk", ["x"])
    assert err is None
    assert (
        "only in build_headers, transform_request and transform_response"
        in json.loads(out[0])["error"]
    )
    assert json.loads(out[0])["code"] == ErrorCode.ADAPTER_ERROR


def test_a_bare_yield_in_a_hook_is_still_an_error() -> None:
    with pytest.raises(LlmError) as info:
        LuaSandbox(SCRIPT_CONTEXTS).call("bare_yield")
    assert "yield from outside a coroutine" in info.value.message


def test_a_synchronous_call_without_a_bridge_does_not_reach_the_network() -> None:
    sb = LuaSandbox("return { g = function() return http_get('http://127.0.0.1:9/') end }")
    answer = json.loads(sb.call("g"))
    assert "needs the engine" in answer["error"]
    assert answer["code"] == ErrorCode.TRANSPORT


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


# The child of the memory test: a loopback server answers the model (SSE) and, at /token, a
# body whose Content-Encoding is "gzip, gzip"; a hook's http_get reads it under a 1 MiB cap.
# It prints the rise of the process's peak RSS over the bomb's request, after a warm-up request
# whose body (just under the cap, coded the same way) took every buffer a body within the cap
# needs, so the rise is what the bomb alone costs.
_NESTED_GZIP_CHILD = r"""
import asyncio, http.server, json, resource, sys, threading, zlib
from notebook_llm import Engine
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.wire.limits import MiB, WireLimits

def gzip_of(chunks):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [z.compress(c) for c in chunks]
    out.append(z.flush())
    return b"".join(out)

def nested(size):
    inner = gzip_of(b"a" * (1 << 20) for _ in range(size >> 20)) if size >= 1 << 20 else gzip_of([b"a" * size])
    return gzip_of([inner])

BODIES = {"/small": nested(1000 * 1024), "/bomb": nested(256 << 20)}
SSE = (b'data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
       b"data: [DONE]\n\n")

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_GET(self):
        body = BODIES[self.path]
        self.send_response(200)
        self.send_header("content-encoding", "gzip, gzip")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(SSE)))
        self.end_headers()
        self.wfile.write(SSE)

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_port}"
SCRIPT = '''return { name = "fetcher",
  transform_request = function(r)
    local got = json.decode(http_get(PATH))
    local req = json.decode(r)
    req.status, req.error, req.size = got.status, got.error, got.body and #got.body or -1
    return json.encode(req)
  end,
  transform_stream_chunk = function(s)
    if s == "[DONE]" then return "" end
    local c = json.decode(s).choices[1]
    return json.encode({ content = c.delta.content or "", done = c.finish_reason ~= nil })
  end }'''

async def run(path):
    engine = Engine(config_file=False, env_file=False)
    adapter = LuaAdapter.from_source(
        SCRIPT.replace("PATH", json.dumps(base + path)), name="fetcher",
        wire_limits=WireLimits(max_body_bytes=1 * MiB),
    )
    engine.add_provider("p", adapter=adapter, base_url=base + "/v1", model="m")
    return (await engine.complete("p", prompt="hi")).text

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

assert asyncio.run(run("/small")) == "ok"
before = peak()
assert asyncio.run(run("/bomb")) == "ok"
print(json.dumps({"rise": peak() - before}))
"""


def test_a_nested_gzip_answer_to_http_get_stays_within_the_cap_in_memory() -> None:
    """A hook's ``http_get`` reads through the same capped decoder as a stream: a ``gzip,
    gzip`` body that decodes to 256 MiB, under a 1 MiB cap, raises the peak RSS of the process
    by no more than the cap (httpx's own decoders, which the hooks once read through, decode a
    read whole: the peak rose by the whole nested layer)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _NESTED_GZIP_CHILD],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rise = json.loads(done.stdout.strip().splitlines()[-1])["rise"]
    assert rise <= 1024 * 1024, f"peak RSS rose by {rise / 2**20:.1f} MiB"
