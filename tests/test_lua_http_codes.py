"""The ``code`` of a failed ``http_get`` / ``http_post``: the stable ``ErrorCode`` a script tests.

The error envelope keeps the kernel contract's ``url`` and ``error`` (the message, redacted) and
adds ``code`` (``host.envelope_error``), so a script tells a timeout from a cap from a replay
miss without reading English. Each case below is reached from a Lua hook, which decodes the
string it got with ``json.decode`` and returns the code: loopback servers in a thread (one that
never answers, one that answers), a socket that refuses connections, a recording replayed, the
caps, the wall budget, a call without a transport. The time limits used are far from what the
machine's speed could decide (a server that never answers against a 0.5 s deadline): the tests
assert codes, never durations.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from notebook_llm import ErrorCode, LlmError, Timeouts
from notebook_llm.adapters.lua.host import TransportHttp
from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox
from notebook_llm.wire.exchange import HttpExchange
from notebook_llm.wire.limits import WireLimits
from notebook_llm.wire.tap import Recorder, Replayer

#: ``code_of(url)``: what the hook's ``http_get`` got, decoded in Lua: the code of an error
#: envelope (after checking that it is one: a string ``error``, the same ``url``, no status),
#: or "status N" for an answer. ``post_code_of``: the same for ``http_post``.
SCRIPT = """
local function code(u, got)
  local r = json.decode(got)
  if r.status ~= nil then return "status " .. r.status end
  assert(type(r.error) == "string" and r.error ~= "", "no error message")
  assert(r.url == u, "another url")
  return r.code
end
return {
  code_of = function(u) return code(u, http_get(u)) end,
  post_code_of = function(u) return code(u, http_post(u, '{"x":1}')) end,
  logged = function(a, b)
    log("info", http_get(a))
    log("info", http_get(b))
    return "done"
  end,
  in_sort = function(u)
    local out
    table.sort({2, 1}, function(x, y) out = code(u, http_get(u)) return x < y end)
    return out
  end,
  transform_stream_chunk = function(u) return code(u, http_get(u)) end,
}
"""

#: The count hook never fires in these short hooks: the envelope a hook logs after its wall
#: budget ran out is logged before a budget check could end it (the state stays under the
#: 256 KiB past which the sandbox shortens the interval).
NO_CHECKS = LuaLimits(hook_interval=1_000_000_000)


class Handler(http.server.BaseHTTPRequestHandler):
    """``/big``: 64 KiB; ``/huge``: 6 MiB; anything else: a small JSON object."""

    def log_message(self, *args: Any) -> None:
        pass

    def answer(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        size = {"/big": 64 * 1024, "/huge": 6 * 1024 * 1024}.get(self.path)
        reply = b"x" * size if size else b'{"ok":true}'
        self.send_response(200)
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = answer


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


@pytest.fixture
def server() -> Iterator[str]:
    """A loopback server of :class:`Handler`; its base URL."""
    srv = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}"
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


@pytest.fixture
def silent() -> Iterator[str]:
    """A loopback socket that takes connections (the kernel completes them) and never answers;
    its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.fixture
def refusing() -> Iterator[str]:
    """A loopback port bound but not listening, held for the test: a connection to it is
    refused (no other process can take the port meanwhile); its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def sandbox(exchange: HttpExchange | None = None, **kwargs: Any) -> LuaSandbox:
    sb = LuaSandbox(SCRIPT, name="codes", **kwargs)
    sb.set_http(TransportHttp(exchange))
    return sb


# ------------------------------------------------------------------ the exchange's LlmError


async def test_an_answer_is_not_an_error(server: str) -> None:
    """The control: the same hooks get a status when the request succeeds."""
    sb = sandbox(HttpExchange("codes"))
    assert await sb.acall("code_of", f"{server}/token") == "status 200"
    assert await sb.acall("post_code_of", f"{server}/token") == "status 200"


async def test_a_server_that_never_answers_is_timeout(silent: str) -> None:
    """The request's deadline (0.5 s, the hook's wall budget is 30 s) ends the wait: TIMEOUT."""
    exchange = HttpExchange("codes", timeouts=Timeouts(deadline=0.5, idle=None))
    assert await sandbox(exchange).acall("code_of", f"{silent}/slow") == ErrorCode.TIMEOUT


async def test_a_body_over_the_cap_is_response_too_large(server: str) -> None:
    exchange = HttpExchange("codes", limits=WireLimits(max_body_bytes=1024))
    sb = sandbox(exchange)
    assert await sb.acall("code_of", f"{server}/big") == ErrorCode.RESPONSE_TOO_LARGE
    assert await sb.acall("post_code_of", f"{server}/big") == ErrorCode.RESPONSE_TOO_LARGE
    assert await sb.acall("code_of", f"{server}/small") == "status 200"


async def test_a_refused_connection_is_transport(refusing: str) -> None:
    sb = sandbox(HttpExchange("codes"))
    assert await sb.acall("code_of", f"{refusing}/x") == ErrorCode.TRANSPORT
    assert await sb.acall("post_code_of", f"{refusing}/x") == ErrorCode.TRANSPORT


async def test_a_request_with_no_recording_is_replay_miss(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"

    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"token": "t1"})

    recorder = Recorder(path)
    recorded = HttpExchange("codes", transport=recorder.transport(httpx.MockTransport(answer)))
    assert await sandbox(recorded).acall("code_of", "http://auth.test/token") == "status 200"

    replayed = HttpExchange("codes", transport=Replayer(path).transport())
    sb = sandbox(replayed)
    assert await sb.acall("code_of", "http://auth.test/token") == "status 200"
    assert await sb.acall("code_of", "http://auth.test/other") == ErrorCode.REPLAY_MISS
    assert await sb.acall("code_of", "http://auth.test/token?city=Paris") == ErrorCode.REPLAY_MISS


# ------------------------------------------------------------------ a URL that cannot be requested


@pytest.mark.parametrize(
    "target",
    [
        "file:///etc/passwd",
        "ftp://127.0.0.1/x",
        "javascript:alert(1)",
        "not a url",
        "127.0.0.1:8080/v1",  # no scheme: "127.0.0.1" is not one
        "http://",  # no host
        "http://a\x00b/",  # httpx.InvalidURL
    ],
)
async def test_a_url_that_cannot_be_requested_is_invalid_request(target: str) -> None:
    """Refused before anything is sent, whatever carries the requests (a mock here, which would
    answer any URL): INVALID_REQUEST, never a file's content."""
    sent: list[str] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(200, text="root:x:0:0")

    sb = sandbox(HttpExchange("codes", transport=httpx.MockTransport(answer)))
    assert await sb.acall("code_of", target) == ErrorCode.INVALID_REQUEST
    assert await sb.acall("post_code_of", target) == ErrorCode.INVALID_REQUEST
    assert sent == []


async def test_a_host_that_cannot_be_encoded_is_invalid_request() -> None:
    """A host label over 63 characters passes httpx's URL parser and fails when the transport
    encodes it (IDNA): no name is looked up, and the URL is the fault."""
    target = "http://" + "a" * 70 + ".example/"
    assert await sandbox(HttpExchange("codes")).acall("code_of", target) == (
        ErrorCode.INVALID_REQUEST
    )


def test_the_message_stays_redacted() -> None:
    """The code is added; the message is still passed through ``redact``."""
    from notebook_llm.core.redaction import register_secret

    register_secret("sk-codes-test-0123456789abcdef")
    got = asyncio.run(
        TransportHttp().request("GET", "file:///k?key=sk-codes-test-0123456789abcdef", None)
    )
    assert got["code"] == ErrorCode.INVALID_REQUEST
    assert "sk-codes-test-0123456789abcdef" not in got["error"]
    assert set(got) == {"url", "error", "code"}


# ------------------------------------------------------------------ the sandbox's own envelopes


async def test_the_wall_budget_is_adapter_timeout(silent: str) -> None:
    """The wait for a server that never answers meets the hook's 0.5 s wall budget (the
    request's own deadline is 15 min): ADAPTER_TIMEOUT; a request after it gets the same at
    once. The hook logs both envelopes before the call ends with ADAPTER_TIMEOUT."""
    logs: list[str] = []
    limits = LuaLimits(wall_seconds=0.5, hook_interval=NO_CHECKS.hook_interval)
    sb = sandbox(HttpExchange("codes"), limits=limits, log=lambda level, msg: logs.append(msg))
    with pytest.raises(LlmError) as info:
        await sb.acall("logged", f"{silent}/a", f"{silent}/b")
    assert info.value.code == ErrorCode.ADAPTER_TIMEOUT
    assert [json.loads(m)["code"] for m in logs] == [ErrorCode.ADAPTER_TIMEOUT] * 2


class Bridge:
    """A synchronous ``HttpBridge``: each GET takes ``pause`` seconds, or raises ``raises``."""

    def __init__(self, pause: float = 0.0, raises: BaseException | None = None) -> None:
        self.pause = pause
        self.raises = raises

    def get(self, url: str) -> tuple[int, str]:
        time.sleep(self.pause)
        if self.raises is not None:
            raise self.raises
        return 200, "{}"

    def post(self, url: str, body: str) -> tuple[int, str]:
        return self.get(url)


def test_the_wall_budget_of_a_synchronous_call_is_adapter_timeout() -> None:
    """The first request (0.3 s) outlasts the 0.2 s budget, so the next one is refused (the
    first is answered, unless the machine took the whole budget before it was asked)."""
    logs: list[str] = []
    sb = LuaSandbox(
        SCRIPT,
        http=Bridge(pause=0.3),
        limits=LuaLimits(wall_seconds=0.2, hook_interval=NO_CHECKS.hook_interval),
        log=lambda level, msg: logs.append(msg),
    )
    with pytest.raises(LlmError) as info:
        sb.call("logged", "http://a.test/", "http://b.test/")
    assert info.value.code == ErrorCode.ADAPTER_TIMEOUT
    first, second = (json.loads(m) for m in logs)
    assert first.get("status") == 200 or first["code"] == ErrorCode.ADAPTER_TIMEOUT
    assert second["code"] == ErrorCode.ADAPTER_TIMEOUT


def test_a_kernel_interrupt_during_a_request_is_aborted() -> None:
    logs: list[str] = []
    sb = LuaSandbox(
        SCRIPT,
        http=Bridge(raises=KeyboardInterrupt()),
        limits=NO_CHECKS,
        log=lambda level, msg: logs.append(msg),
    )
    with pytest.raises(KeyboardInterrupt):
        sb.call("logged", "http://a.test/", "http://b.test/")
    # the hook logs the envelope; its next request ends the call (the interrupt is re-raised)
    assert [json.loads(m)["code"] for m in logs] == [ErrorCode.ABORTED]


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (ConnectionError("boom"), ErrorCode.TRANSPORT),
        (httpx.ConnectTimeout("slow"), ErrorCode.TIMEOUT),
        (LlmError("no recording", ErrorCode.REPLAY_MISS), ErrorCode.REPLAY_MISS),
        (ValueError("bad url"), ErrorCode.INVALID_REQUEST),
        (RuntimeError("a bug"), ErrorCode.UNKNOWN),
    ],
)
def test_a_bridge_failure_has_the_code_of_what_it_raised(raised: Exception, code: str) -> None:
    sb = LuaSandbox(SCRIPT, http=Bridge(raises=raised))
    assert sb.call("code_of", "http://a.test/") == code


def test_a_call_without_a_transport_is_transport() -> None:
    """Nothing can carry the request (a synchronous call with no bridge): to the script, a
    network it cannot reach."""
    assert LuaSandbox(SCRIPT).call("code_of", "http://127.0.0.1:9/") == ErrorCode.TRANSPORT


def test_a_stream_chunk_hook_gets_adapter_error() -> None:
    """No request can be sent from ``transform_stream_chunk``: the script's mistake."""
    out, err = sandbox().call_each("transform_stream_chunk", ["http://a.test/"])
    assert err is None
    assert out == [ErrorCode.ADAPTER_ERROR]


async def test_a_request_under_a_c_function_gets_adapter_error() -> None:
    sent: list[str] = []

    async def answer(request: httpx.Request) -> httpx.Response:  # pragma: no cover
        sent.append(str(request.url))
        return httpx.Response(200)

    sb = sandbox(HttpExchange("codes", transport=httpx.MockTransport(answer)))
    assert await sb.acall("in_sort", "http://a.test/") == ErrorCode.ADAPTER_ERROR
    assert sent == []


async def test_an_answer_too_big_for_the_lua_state_is_response_too_large(server: str) -> None:
    """6 MiB is under the exchange's body cap (16 MiB) but not under the room a 4 MiB state
    has left."""
    sb = sandbox(HttpExchange("codes"), limits=LuaLimits(memory_bytes=4 * 1024 * 1024))
    assert await sb.acall("code_of", f"{server}/huge") == ErrorCode.RESPONSE_TOO_LARGE
