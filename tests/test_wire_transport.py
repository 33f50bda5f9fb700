"""The network transport (``notebook_llm.wire.transport``): httpx on ``httpx_aiohttp``'s
``AiohttpTransport`` with the shared SSL context, environment proxies applied by
``NetworkTransport`` (tests/test_proxy.py), aiohttp's failures mapped to the right httpx errors,
and a batch's keep-alive pool."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
import trustme
from waiting import HeldServer

from notebook_llm import Completion, Engine, Finish, LlmError, StopSignal, TextDelta
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.api.batch import amap
from notebook_llm.wire.models import fetch_openai_models
from notebook_llm.wire.transport import (
    MalformedResponse,
    NetworkTransport,
    connection_pool,
    network_transport,
    scoped_client,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def tiny_server(
    handler: Handler, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[int, list[int]]]:
    """A loopback server running ``handler`` per connection; yields its port and a one-item
    list counting the connections it accepted."""
    opened = [0]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened[0] += 1
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ssl_context)
    async with server:
        yield server.sockets[0].getsockname()[1], opened


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One HTTP/1.1 request's body (the request is assumed to carry a Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return await reader.readexactly(length)


async def until(condition: Callable[[], object], seconds: float = 60.0) -> None:
    """Wait until ``condition()`` holds (the machine may be slow: no fixed sleeps)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def response(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def always(answer: bytes) -> Handler:
    """A handler that answers every request on the connection with ``answer``."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(answer)
            await writer.drain()

    return handler


def echoing(before: Callable[[bytes], Awaitable[None]] | None = None) -> Handler:
    """A handler that answers every request on the connection with its own body (or ``ok``),
    once ``before(body)`` is done."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            body = await read_request(reader)
            if before is not None:
                await before(body)
            writer.write(response(body or b"ok"))
            await writer.drain()

    return handler


keep_alive = echoing()


# ------------------------------------------------------------------ the backend itself


async def test_the_transport_and_a_batch_pool_run_on_aiohttp() -> None:
    async with tiny_server(keep_alive) as (port, _):
        url = f"http://127.0.0.1:{port}/"
        async with httpx.AsyncClient(transport=network_transport()) as client:
            resp = await client.post(url, content=b"one")
            assert resp.text == "one"
            assert resp.http_version == "HTTP/1.1"
        async with connection_pool() as pool:
            assert scoped_client() is pool
            assert isinstance(pool._transport, NetworkTransport)
            resp = await pool.post(url, content=b"two")
            assert resp.text == "two"


async def test_keep_alive_reuses_one_connection_and_replaces_one_the_server_closed() -> None:
    closed = [0]

    async def one_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(response(b"once"))  # no "Connection: close": the client keeps it ...
        await writer.drain()  # ... and the server closes it anyway (idle timeout)
        writer.close()
        await writer.wait_closed()
        closed[0] += 1

    async with tiny_server(keep_alive) as (port, opened):
        async with httpx.AsyncClient(transport=network_transport()) as client:
            for i in range(5):
                assert (await client.post(f"http://127.0.0.1:{port}/", content=b"%d" % i)).text
        assert opened[0] == 1
    async with tiny_server(one_answer) as (port, opened):
        async with httpx.AsyncClient(transport=network_transport()) as client:
            for i in range(3):
                resp = await client.get(f"http://127.0.0.1:{port}/")
                assert resp.text == "once"
                await until(lambda i=i: closed[0] == i + 1)  # the server closed it
                await asyncio.sleep(0.01)  # (a few loop turns: the client reads the close)
        assert opened[0] == 3


async def test_large_bodies_both_ways_arrive_whole() -> None:
    # More than the read buffer's high-water mark and the socket's send buffer: reading pauses
    # and resumes, writing waits for the socket to drain.
    big = bytes(range(256)) * 16 * 1024  # 4 MiB

    async def slow_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.2)  # the client's send buffer fills meanwhile
        body = await read_request(reader)
        writer.write(response(body))
        await writer.drain()

    async with (
        tiny_server(slow_echo) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        resp = await client.post(f"http://127.0.0.1:{port}/", content=big)
    assert resp.content == big


async def test_errors_are_httpx_errors() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf")
        await writer.drain()
        writer.transport.abort()

    async with httpx.AsyncClient(transport=network_transport()) as client:
        async with tiny_server(silent) as (port, _):
            with pytest.raises(httpx.ReadTimeout):
                await client.get(f"http://127.0.0.1:{port}/", timeout=httpx.Timeout(5, read=0.1))
        async with tiny_server(hang_up) as (port, _):
            with pytest.raises(httpx.ReadError):
                await client.get(f"http://127.0.0.1:{port}/")
        with pytest.raises(httpx.ConnectError):  # that server is gone: nothing listens there
            await client.get(f"http://127.0.0.1:{port}/")


# ------------------------------------------------------------------ TLS


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


async def test_https_with_the_shared_context_and_verification(ca: trustme.CA) -> None:
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    async with tiny_server(keep_alive, server_ctx) as (port, opened):
        url = f"https://localhost:{port}/"
        async with httpx.AsyncClient(transport=NetworkTransport(ssl_context=trusting)) as client:
            first = await client.post(url, content=b"secret")
            big = bytes(range(256)) * 4096  # 1 MiB: reading pauses and resumes through TLS
            second = await client.post(url, content=big)
        assert first.text == "secret"
        assert second.content == big
        assert opened[0] == 1
        # The default context does not trust the test CA: a clean ConnectError.
        async with httpx.AsyncClient(transport=network_transport()) as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(url)


# ------------------------------------------------------------------ a batch's pool


@pytest.mark.parametrize(("concurrency", "prompts"), [(4, 20), (24, 72)])
async def test_a_batch_opens_one_connection_per_concurrent_request(
    concurrency: int, prompts: int
) -> None:
    # httpx keeps 20 idle connections: at concurrency 24, four were closed after every
    # request and a new TCP connection opened for the next one. (The latency keeps every
    # slot busy: a batch prepares its prompts one at a time, ~2 ms each, and with quick answers
    # it needs fewer connections.)
    # (The server holds its answers until every slot has a request out, then answers freely.)
    with HeldServer() as srv:
        engine = Engine(config_file=False, env_file=False)
        engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
        texts = [f"prompt {i}" for i in range(prompts)]
        batch = asyncio.ensure_future(
            amap(texts, engine=engine, provider="m", concurrency=concurrency, progress=False)
        )
        await until(lambda: len(srv.requests) >= concurrency)
        srv.release()
        results = await asyncio.wait_for(batch, 60)
        assert [r.text for r in results if isinstance(r, Completion)] == texts
        assert srv.connections_opened == concurrency


async def test_a_batch_on_the_backend_reports_transport_faults_per_prompt() -> None:
    with MockServer() as srv:
        engine = Engine(config_file=False, env_file=False, retries=0)
        engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
        srv.inject("disconnect", after=0)
        results = await amap(["a", "b", "c"], engine=engine, provider="m", concurrency=1)
    assert isinstance(results[0], LlmError)
    assert results[0].code == "TRANSPORT"
    assert [r.text for r in results[1:] if isinstance(r, Completion)] == ["b", "c"]


def test_every_request_of_the_engine_goes_through_the_network_transport(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Not only a batch: a stream on the caller's loop, a sync call on the background loop, a
    recording's inner transport and ``list_models`` all go through ``NetworkTransport``."""
    sent: list[str] = []
    handle = NetworkTransport.handle_async_request

    async def spy(self: NetworkTransport, request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return await handle(self, request)

    monkeypatch.setattr(NetworkTransport, "handle_async_request", spy)
    with MockServer(require_key="sk-test") as server:
        monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        engine = Engine(config_file=False, env_file=False, retries=0)

        async def on_callers_loop() -> str:
            return (await engine.complete("openai", "echo", prompt="hi")).text

        assert asyncio.run(on_callers_loop())
        assert len(sent) == 1
        assert engine.complete_sync("openai", "echo", prompt="hi").text
        assert len(sent) == 2
        with engine.recording(tmp_path / "tape.jsonl"):
            assert engine.complete_sync("openai", "echo", prompt="hi").text
        assert len(sent) == 3
        assert asyncio.run(
            fetch_openai_models(server.url + "/v1", provider="local", api_key="sk-test")
        )
        assert sent[-1] == "/v1/models"


def test_a_stopped_stream_has_closed_its_socket_when_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server sees the close without the loop running any further (the caller may block
    it, or end it, right after the stream)."""

    async def stopped_stream(server: MockServer) -> str:
        engine = Engine(config_file=False, env_file=False, retries=0)
        stop = StopSignal()
        loop = asyncio.get_running_loop()
        last: Any = None
        texts = 0
        async for last in engine.stream(
            "openai", "lorem", prompt="x", max_tokens=2000, stop_signal=stop
        ):
            texts += isinstance(last, TextDelta)
            if texts == 3:
                loop.call_soon(stop.set)
        assert isinstance(last, Finish)
        deadline = time.monotonic() + 60  # blocking: the loop does not run while we wait
        while server.open_connections and time.monotonic() < deadline:
            time.sleep(0.01)  # noqa: ASYNC251 - blocking the loop is the point
        return last.reason.kind

    with MockServer(require_key="sk-test", chunk_delay=0.05) as server:
        monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        assert asyncio.run(stopped_stream(server)) == "aborted"
        assert server.open_connections == 0


# ------------------------------------------------------------------ the pool


async def test_a_cancelled_request_gives_its_connection_back() -> None:
    started = asyncio.Event()

    async def late_for_slow(body: bytes) -> None:
        if body == b"slow":
            started.set()
            await asyncio.sleep(10)

    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with (
        tiny_server(echoing(late_for_slow)) as (port, opened),
        httpx.AsyncClient(transport=NetworkTransport(limits)) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        slow = asyncio.ensure_future(client.post(url, content=b"slow"))
        await started.wait()
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        # (the pool timeout is a hang guard: the slot comes back at the cancel, or never)
        resp = await client.post(url, content=b"next", timeout=httpx.Timeout(30, pool=30))
        assert resp.text == "next"
        assert opened[0] == 2  # the cancelled request's connection was closed, not reused


async def test_an_idle_connection_older_than_the_keep_alive_expiry_is_replaced() -> None:
    # An expiry with room for two requests in a row on a busy machine; the wait after them is
    # longer than it, whatever the machine's speed.
    limits = httpx.Limits(keepalive_expiry=1.0)
    async with (
        tiny_server(keep_alive) as (port, opened),
        httpx.AsyncClient(transport=NetworkTransport(limits)) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        assert (await client.post(url, content=b"1")).text == "1"
        assert (await client.post(url, content=b"2")).text == "2"
        assert opened[0] == 1
        await asyncio.sleep(1.5)
        assert (await client.post(url, content=b"3")).text == "3"
        assert opened[0] == 2


async def test_a_malformed_status_line_is_a_remote_protocol_error() -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async with (
        tiny_server(garbage) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        with pytest.raises(MalformedResponse):
            await client.post(f"http://127.0.0.1:{port}/", content=b"x")


# ------------------------------------------------------------------ what aiohttp refuses

CHUNKED_HEAD = (
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: text/event-stream\r\n\r\n"
)
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"Lorem"}}]}\n\n'


def answering(*writes: bytes, pause: float = 0.05) -> Handler:
    """A handler that reads one request and sends ``writes``, each on its own, then waits."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        for data in writes:
            writer.write(data)
            await writer.drain()
            await asyncio.sleep(pause)
        await reader.read()  # until the client closes the connection

    return handler


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def engine_on(port: int) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider(
        "tiny", adapter="openai", base_url=f"http://127.0.0.1:{port}/v1", needs_key=False
    )
    return engine


@pytest.mark.parametrize("alone", [False, True], ids=["with-the-head", "after-a-chunk"])
async def test_a_malformed_chunk_size_line_is_a_malformed_response(alone: bool) -> None:
    # aiohttp's C parser records the error on the connection, not on the body, and the body
    # waited for ever (the idle limit would end it, as a TIMEOUT): the body gets the error.
    writes = (
        (CHUNKED_HEAD + chunk(EVENT), b"zz\r\nxx\r\n") if alone else (CHUNKED_HEAD + b"zz\r\n",)
    )

    async def read_all(url: str) -> None:
        async with (
            httpx.AsyncClient(transport=network_transport()) as client,
            client.stream("POST", url, content=b"x") as r,
        ):
            await r.aread()

    async with tiny_server(answering(*writes)) as (port, _):
        with pytest.raises(MalformedResponse, match="chunk size"):
            await read_all(f"http://127.0.0.1:{port}/")
        run = [ev async for ev in engine_on(port).stream("tiny", "m", prompt="hi")]
    finish = run[-1]
    assert isinstance(finish, Finish)
    err = finish.reason.failure
    assert err is not None
    assert err.code == "MALFORMED_RESPONSE", err
    assert "chunk size" in err.message
    assert "closed the connection" not in err.message
    assert "".join(ev.text for ev in run if isinstance(ev, TextDelta)) == ("Lorem" if alone else "")


async def test_a_body_cut_short_is_still_a_closed_connection() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(CHUNKED_HEAD + chunk(EVENT))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.transport.abort()

    async with tiny_server(cut) as (port, _):
        run = [ev async for ev in engine_on(port).stream("tiny", "m", prompt="hi")]
    err = run[-1].reason.failure  # type: ignore[union-attr]
    assert err is not None
    assert err.code == "TRANSPORT"
    assert "closed the connection before the answer was complete" in err.message


async def test_a_transfer_coding_other_than_chunked_is_refused() -> None:
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ncontent-type: text/event-stream\r\n\r\n"
    async with tiny_server(answering(head + EVENT)) as (port, _):
        with pytest.raises(LlmError) as caught:
            await engine_on(port).complete("tiny", "m", prompt="hi")
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert "Transfer-Encoding" in caught.value.message


async def test_endless_and_huge_response_heads_are_refused() -> None:
    many = b"HTTP/1.1 200 OK\r\n" + b"x-a: b\r\n" * 10_000
    long = b"HTTP/1.1 200 OK\r\nx-a: " + b"b" * 100_000
    for head in (many, long):
        async with tiny_server(answering(head)) as (port, _):
            with pytest.raises(LlmError) as caught:
                await engine_on(port).complete("tiny", "m", prompt="hi")
        assert caught.value.code == "MALFORMED_RESPONSE"
