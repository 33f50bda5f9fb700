"""Redirects followed by the exchange (``wire/exchange.py``), as a Lua hook's ``http_get`` /
``http_post`` asks for them, and a connection reset after the headers.

The exchange follows a redirect itself: each hop is sent without httpx's redirect handling, a
3xx is closed with its body unread and its ``next_request`` sent. httpx's own handling reads
every 3xx body whole through its unbounded decoders before it follows (``response.aread()``),
so a KB of ``Content-Encoding: gzip, gzip`` on a 302 once cost the process hundreds of MiB,
past the decoded-size cap every other body is read under. What httpx's rules
decide stays theirs: the hop limit (``max_redirects``) and its error, a 303 after a POST sent
as a GET, a 307 sent again as it was, a target other than http(s) refused.

The servers are loopback ones in a thread; the memory case runs in a child process that
reports the rise of its own peak RSS (``resource.getrusage``), as tests/test_lua_http.py and
tests/test_wire_limits.py measure the nested-gzip cases.
"""

from __future__ import annotations

import asyncio
import gc
import http.server
import json
import logging
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_llm import Engine, ErrorCode, LlmError
from notebook_llm.adapters.lua.host import TransportHttp
from notebook_llm.wire.codec import WireRequest
from notebook_llm.wire.exchange import HttpExchange
from notebook_llm.wire.response_watch import watching_responses
from notebook_llm.wire.tap import Recorder, Replayer

#: Where each route sends the client: (status, Location).
REDIRECTS = {
    "/loop": (302, "/loop"),
    "/a": (301, "/b"),
    "/b": (302, "/c"),
    "/c": (307, "/echo"),
    "/see-other": (303, "/echo"),
    "/temporary": (307, "/echo"),
    "/elsewhere": (302, "file:///etc/passwd"),
}


class Handler(http.server.BaseHTTPRequestHandler):
    """Answers :data:`REDIRECTS` with their status and an empty body, ``/echo`` with the
    request's method and body; every request is logged on the server."""

    server: Server

    def log_message(self, *args: Any) -> None:
        pass

    def answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.seen.append((self.command, self.path, body))
        if self.path in REDIRECTS:
            status, location = REDIRECTS[self.path]
            self.send_response(status)
            self.send_header("location", location)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        reply = self.command.encode() + b" " + body
        self.send_response(200)
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = answer


class Server(http.server.ThreadingHTTPServer):
    """A loopback server of :class:`Handler` that keeps what it was asked."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        #: (method, path, body) of each request, in the order they arrived.
        self.seen: list[tuple[str, str, bytes]] = []


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


def url(server: Server, path: str) -> str:
    return f"http://127.0.0.1:{server.server_port}{path}"


def hook(method: str, target: str, body: str | None = None) -> dict[str, Any]:
    """What a hook's ``http_get`` / ``http_post`` of ``target`` gets back (its envelope)."""
    return asyncio.run(TransportHttp().request(method, target, body))


# ------------------------------------------------------------------ httpx's rules, kept


def test_a_chain_of_redirects_arrives(server: Server) -> None:
    """A 301, a 302 and a 307 in a row: each hop is sent, the last answer is the hook's."""
    got = hook("GET", url(server, "/a"))
    assert got["status"] == 200, got
    assert got["body"] == "GET "
    assert [path for _, path, _ in server.seen] == ["/a", "/b", "/c", "/echo"]


def test_a_303_after_a_post_is_a_get_and_a_307_posts_again(server: Server) -> None:
    """httpx's rules for the method, through ``next_request``: a 303 turns an ``http_post``
    into a GET without its body, a 307 sends the POST and its body again."""
    got = hook("POST", url(server, "/see-other"), '{"x":1}')
    assert got["status"] == 200, got
    assert got["body"] == "GET "  # no body on the GET
    assert server.seen[-1] == ("GET", "/echo", b"")

    got = hook("POST", url(server, "/temporary"), '{"x":1}')
    assert got["status"] == 200, got
    assert got["body"] == 'POST {"x":1}'
    assert server.seen[-1] == ("POST", "/echo", b'{"x":1}')


def test_a_redirect_loop_ends_with_too_many_redirects(server: Server) -> None:
    """httpx's hop limit and error, as when httpx followed the redirects itself: 20 redirects
    followed (21 requests), then ``TooManyRedirects`` as a ``TRANSPORT`` error."""
    got = hook("GET", url(server, "/loop"))
    assert "status" not in got, got
    assert got["error"] == (
        f"fetching {url(server, '/loop')} failed: TooManyRedirects: "
        "Exceeded maximum allowed redirects."
    )
    assert len(server.seen) == 21

    exchange = HttpExchange("site")
    with pytest.raises(LlmError) as caught:
        asyncio.run(
            exchange.fetch(
                WireRequest("GET", url(server, "/loop"), {}, None),
                what="the page",
                follow_redirects=True,
            )
        )
    assert caught.value.code == ErrorCode.TRANSPORT
    assert "TooManyRedirects" in caught.value.message


def test_a_redirect_to_a_scheme_other_than_http_is_refused(server: Server) -> None:
    """A ``Location`` of ``file:`` is an error, as httpx refuses it, and nothing is fetched."""
    got = hook("GET", url(server, "/elsewhere"))
    assert "status" not in got, got
    assert "UnsupportedProtocol" in got["error"]
    assert [path for _, path, _ in server.seen] == ["/elsewhere"]


def test_without_following_the_redirect_is_the_answer(server: Server) -> None:
    """A caller that does not follow redirects (the model list) gets the 3xx itself."""
    answer = asyncio.run(
        HttpExchange("site").fetch(
            WireRequest("GET", url(server, "/a"), {}, None), what="the page", refused="answer"
        )
    )
    assert answer.status == 301
    assert answer.headers["location"] == "/b"
    assert [path for _, path, _ in server.seen] == ["/a"]


def test_every_hop_is_recorded_and_a_replay_follows_them(server: Server, tmp_path: Path) -> None:
    """Each hop is a request on the engine's transport: a recorder records the four, and a
    strict replay of them follows the same chain without the server."""
    tape = tmp_path / "tape.jsonl"
    recorder = Recorder(tape)
    request = WireRequest("GET", url(server, "/a"), {}, None)
    recorded = asyncio.run(
        HttpExchange("site", make_transport=recorder.transport).fetch(
            request, what="the page", follow_redirects=True
        )
    )
    assert recorded.body == b"GET "
    assert [(e.path, e.status) for e in recorder.exchanges] == [
        ("/a", 301),
        ("/b", 302),
        ("/c", 307),
        ("/echo", 200),
    ]

    asked = len(server.seen)
    replayer = Replayer(tape, strict=True)
    replayed = asyncio.run(
        HttpExchange("site", make_transport=replayer.transport).fetch(
            request, what="the page", follow_redirects=True
        )
    )
    assert (replayed.status, replayed.body) == (200, b"GET ")
    assert len(server.seen) == asked  # answered from the recording alone
    assert all(e.used for e in replayer.exchanges)


# ------------------------------------------------------------------ a bomb on a 302

# The child of the memory test: a loopback server answers /warm and /bomb with a 302 to /ok
# whose body is "gzip, gzip" (a small one, and under a KB that decodes to 512 MiB), and
# a hook's http_get follows each. It prints what the hook got and the rise of the process's peak
# RSS over the bomb's request, after the warm-up took whatever a redirect followed costs.
_REDIRECT_BOMB_CHILD = r"""
import asyncio, http.server, json, resource, threading, zlib
from notebook_llm import Engine
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter

def gzip_of(chunks):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [z.compress(c) for c in chunks]
    out.append(z.flush())
    return b"".join(out)

MiB = 1 << 20
BOMB = gzip_of([gzip_of(bytes(MiB) for _ in range(512))])
BODIES = {"/warm": gzip_of([gzip_of([b"a" * 1024])]), "/bomb": BOMB}
SSE = (b'data: {"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
       b"data: [DONE]\n\n")
got = []  # what the hook's http_get got, as the model request carried it

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_GET(self):
        if self.path == "/ok":
            self.send_response(200)
            self.send_header("content-length", "4")
            self.end_headers()
            self.wfile.write(b"fine")
            return
        body = BODIES[self.path]
        self.send_response(302)
        self.send_header("location", "/ok")
        self.send_header("content-encoding", "gzip, gzip")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["content-length"])))
        got.append({k: req.get(k) for k in ("status", "body", "error")})
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
    req.status, req.error, req.body = got.status, got.error, got.body
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
        SCRIPT.replace("PATH", json.dumps(base + path)), name="fetcher"
    )
    engine.add_provider("p", adapter=adapter, base_url=base + "/v1", model="m")
    return (await engine.complete("p", prompt="hi")).text

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

assert asyncio.run(run("/warm")) == "ok"
before = peak()
assert asyncio.run(run("/bomb")) == "ok"
print(json.dumps({"rise": peak() - before, "bomb_bytes": len(BOMB), "got": got}))
"""


def test_a_bomb_on_a_302_is_not_read_on_the_way_to_the_200() -> None:
    """A 302 whose body is under a KB of ``gzip, gzip`` that decodes to 512 MiB is
    followed to its 200 and the peak RSS rises by less than the 16 MiB body cap plus a margin:
    a redirect's body is never read (httpx's redirect handling read it whole: the peak rose by
    the bomb and more)."""
    done = subprocess.run(
        [sys.executable, "-c", _REDIRECT_BOMB_CHILD],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["got"] == [
        {"status": 200, "body": "fine", "error": None},
        {"status": 200, "body": "fine", "error": None},
    ], result
    assert result["bomb_bytes"] < 4096  # the wire bytes are few: the decoded size is the threat
    rise = result["rise"]
    assert rise < 32 * 1024 * 1024, f"peak RSS rose by {rise / 2**20:.1f} MiB"


# ------------------------------------------------------------------ a reset after the headers


def test_a_reset_after_the_headers_is_a_transport_error_and_nothing_is_left_unretrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The stream ends with ``TRANSPORT``, and no future is left holding the reset's exception
    for asyncio to complain of ("Future exception was never retrieved", on stderr after every
    reset: the watch on the connection's ``closed`` future in wire/transport.py had made
    aiohttp create it, and nothing read it).

    The server, on the test's loop, sends a 200 SSE head and resets the connection (an RST:
    ``SO_LINGER`` 0, then close) once the exchange has reported the head, so the reset comes
    after the headers whatever the machine's speed."""
    handled: list[dict[str, Any]] = []
    failed: list[tuple[str, str]] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: handled.append(context))
        headed = asyncio.Event()

        async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.partition(b":")[2])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            await writer.drain()
            await headed.wait()
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()

        server = await asyncio.start_server(reset, "127.0.0.1", 0)
        async with server:
            engine = Engine(config_file=False, env_file=False, retries=0)
            port = server.sockets[0].getsockname()[1]
            engine.add_provider(
                "o", adapter="openai", base_url=f"http://127.0.0.1:{port}/v1", needs_key=False
            )
            with watching_responses(lambda status, _: headed.set()):
                try:
                    await engine.complete("o", "m", prompt="hi")
                except LlmError as exc:  # kept as text: its traceback holds the connection
                    failed.append((str(exc.code), exc.message))

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(run())
        for _ in range(3):  # the connection's objects sit in reference cycles
            gc.collect()
    assert len(failed) == 1, failed
    code, message = failed[0]
    assert code == ErrorCode.TRANSPORT, message
    assert "closed the connection before the answer was complete" in message
    assert [c.get("message") for c in handled] == []
    assert [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()] == []
