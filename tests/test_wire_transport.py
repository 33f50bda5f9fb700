"""The network transport (``notebook_llm.wire.transport``, ``notebook_llm.wire.asyncio_net``):
httpx on an asyncio network backend, and a batch's keep-alive pool (issue 16)."""

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

from notebook_llm import Completion, Engine, Finish, LlmError, StopSignal, TextDelta
from notebook_llm.batch import amap
from notebook_llm.mock.server import MockServer
from notebook_llm.wire.asyncio_net import AsyncioBackend, AsyncioStream
from notebook_llm.wire.models import fetch_openai_models
from notebook_llm.wire.transport import (
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


async def until(condition: Callable[[], object], seconds: float = 10.0) -> None:
    """Wait until ``condition()`` holds (the machine may be slow: no fixed sleeps)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def response(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request on the connection with its own body (or ``ok``)."""
    while True:
        body = await read_request(reader)
        writer.write(response(body or b"ok"))
        await writer.drain()


# ------------------------------------------------------------------ the backend itself


async def test_a_write_and_a_buffered_read_do_not_hand_the_loop_back() -> None:
    # AnyIO's stream yields to the loop on every write that did not wait; with 16 streams in
    # a batch those yields interleave their responses round-robin (issue 16).
    async with tiny_server(keep_alive) as (port, _):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert isinstance(stream, AsyncioStream)
        write = stream.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        with pytest.raises(StopIteration):  # finished without suspending
            write.send(None)
        await until(lambda: stream._protocol.buffered >= 43)  # the answer is buffered
        read = stream.read(65536, timeout=5)
        with pytest.raises(StopIteration) as done:
            read.send(None)
        assert done.value.value.endswith(b"\r\n\r\nhello")
        await stream.aclose()


async def test_a_request_on_a_kept_alive_connection_is_sent_before_other_tasks_run() -> None:
    # httpcore's connections take AnyIO locks, which hand the loop back even when free: three
    # times per request, each time behind every other ready task (issue 16).
    ran: list[int] = []
    sent_after: list[int] = []

    class Watched(AsyncioStream):
        async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
            sent_after.append(len(ran))
            await super().write(buffer, timeout)

    async def other_task() -> None:
        while True:
            ran.append(1)
            await asyncio.sleep(0)

    async with (
        tiny_server(keep_alive) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        first = await client.post(url, content=b"connect")
        stream = first.extensions["network_stream"]
        stream.__class__ = Watched
        other = asyncio.ensure_future(other_task())
        await asyncio.sleep(0.01)
        ran.clear()
        second = await client.post(url, content=b"reused")
        other.cancel()
    assert second.text == "reused"
    assert sent_after  # the headers and the body ...
    assert set(sent_after) == {0}  # ... written before the other task ran once


async def test_the_transport_and_a_batch_pool_run_on_the_asyncio_backend() -> None:
    async with tiny_server(keep_alive) as (port, _):
        url = f"http://127.0.0.1:{port}/"
        async with httpx.AsyncClient(transport=network_transport()) as client:
            resp = await client.post(url, content=b"one")
            assert resp.text == "one"
            assert isinstance(resp.extensions["network_stream"], AsyncioStream)
        async with connection_pool() as pool:
            assert scoped_client() is pool
            resp = await pool.post(url, content=b"two")
            assert isinstance(resp.extensions["network_stream"], AsyncioStream)


async def test_keep_alive_reuses_one_connection_and_replaces_one_the_server_closed() -> None:
    async def one_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(response(b"once"))  # no "Connection: close": the client keeps it ...
        await writer.drain()  # ... and the server closes it anyway (idle timeout)

    async with tiny_server(keep_alive) as (port, opened):
        async with httpx.AsyncClient(transport=network_transport()) as client:
            for i in range(5):
                assert (await client.post(f"http://127.0.0.1:{port}/", content=b"%d" % i)).text
        assert opened[0] == 1
    async with tiny_server(one_answer) as (port, opened):
        async with httpx.AsyncClient(transport=network_transport()) as client:
            for _ in range(3):
                resp = await client.get(f"http://127.0.0.1:{port}/")
                assert resp.text == "once"
                idle = resp.extensions["network_stream"]
                await until(lambda s=idle: s.get_extra_info("is_readable"))  # the close arrived
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


async def test_a_read_returns_everything_that_arrived_since_the_last_one() -> None:
    # SSE events arrive as separate writes; one read hands them to the parser together.
    async def two_writes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for part in (b"data: one\n\n", b"data: two\n\n"):
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.05)
        await asyncio.sleep(1)

    async with tiny_server(two_writes) as (port, _):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert isinstance(stream, AsyncioStream)
        await until(lambda: stream._protocol.buffered == 22)  # both arrived, nobody read
        assert await stream.read(65536) == b"data: one\n\ndata: two\n\n"
        await stream.aclose()


def chunked(*parts: bytes) -> bytes:
    """HTTP/1.1 chunks of ``parts`` (no response head, no end)."""
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
EVENTS = [b"data: %d\n\n" % i for i in range(5)]


async def body_pieces(port: int, seen: list[tuple[float, bytes]] | None = None) -> list[bytes]:
    """The pieces ``aiter_raw`` yields for one POST on notebook_llm's transport."""
    pieces: list[bytes] = []
    async with (
        httpx.AsyncClient(transport=network_transport()) as client,
        client.stream("POST", f"http://127.0.0.1:{port}/", content=b"{}") as resp,
    ):
        async for piece in resp.aiter_raw():
            pieces.append(piece)
            if seen is not None:
                seen.append((time.perf_counter(), piece))
    return pieces


async def test_the_chunks_of_one_read_come_up_as_one_piece() -> None:
    # A provider writes every SSE event as its own HTTP chunk: six chunks in one read were six
    # trips through httpcore, httpx and the pipeline (a Lua call each).
    async def together(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(STREAM_HEAD + chunked(*EVENTS) + b"0\r\n\r\n")
        await writer.drain()

    async with tiny_server(together) as (port, _):
        assert await body_pieces(port) == [b"".join(EVENTS)]


async def test_a_chunk_that_arrives_alone_is_not_held_for_the_next() -> None:
    async def apart(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(STREAM_HEAD + chunked(EVENTS[0]))
        await writer.drain()
        await asyncio.sleep(0.5)
        writer.write(chunked(EVENTS[1], EVENTS[2]) + b"0\r\n\r\n")
        await writer.drain()

    async with tiny_server(apart) as (port, _):
        seen: list[tuple[float, bytes]] = []
        start = time.perf_counter()
        assert await body_pieces(port, seen) == [EVENTS[0], EVENTS[1] + EVENTS[2]]
        assert seen[0][0] - start < 0.4  # the first came before the server's pause ended


async def test_the_chunks_before_a_broken_one_are_kept() -> None:
    async def broken(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(STREAM_HEAD + chunked(EVENTS[0], EVENTS[1]) + b"zz-not-a-size\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async with tiny_server(broken) as (port, _):
        seen: list[tuple[float, bytes]] = []
        with pytest.raises(httpx.RemoteProtocolError):
            await body_pieces(port, seen)
        assert b"".join(piece for _, piece in seen) == EVENTS[0] + EVENTS[1]


async def test_reading_pauses_while_much_is_unread_and_loses_nothing() -> None:
    data = bytes(range(256)) * 8 * 1024  # 2 MiB sent at once

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()
        writer.close()

    async with tiny_server(flood) as (port, _):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert isinstance(stream, AsyncioStream)
        protocol = stream._protocol
        await until(lambda: protocol.reading_paused)  # nobody reads
        assert protocol.buffered < len(data)  # the rest waits in the socket
        got = bytearray()
        while chunk := await stream.read(65536, timeout=5):
            got += chunk
        assert bytes(got) == data
        assert not protocol.reading_paused
        await stream.aclose()


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
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await client.get(f"http://127.0.0.1:{port}/")
        with pytest.raises(httpx.ConnectError):  # that server is gone: nothing listens there
            await client.get(f"http://127.0.0.1:{port}/")


# ------------------------------------------------------------------ TLS


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


async def test_https_through_the_backend(ca: trustme.CA) -> None:
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
        stream: Any = first.extensions["network_stream"]
        assert stream.get_extra_info("ssl_object").version().startswith("TLS")
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
    with MockServer(latency=0.3) as srv:
        engine = Engine(config_file=False, env_file=False)
        engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
        texts = [f"prompt {i}" for i in range(prompts)]
        results = await amap(
            texts, engine=engine, provider="m", concurrency=concurrency, progress=False
        )
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


def test_every_request_of_the_engine_goes_through_the_asyncio_backend(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Not only a batch: a stream on the caller's loop, a sync call on the background loop, a
    recording's inner transport and ``list_models`` all connect through ``AsyncioBackend``."""
    connects: list[str] = []
    connect = AsyncioBackend.connect_tcp

    async def spy(self: AsyncioBackend, host: str, port: int, *args: Any, **kw: Any) -> Any:
        connects.append(host)
        return await connect(self, host, port, *args, **kw)

    monkeypatch.setattr(AsyncioBackend, "connect_tcp", spy)
    with MockServer(require_key="sk-test") as server:
        monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        engine = Engine(config_file=False, env_file=False, retries=0)

        async def on_callers_loop() -> str:
            return (await engine.complete("openai", "echo", prompt="hi")).text

        assert asyncio.run(on_callers_loop())
        assert len(connects) == 1
        assert engine.complete_sync("openai", "echo", prompt="hi").text
        assert len(connects) == 2
        with engine.recording(tmp_path / "tape.jsonl"):
            assert engine.complete_sync("openai", "echo", prompt="hi").text
        assert len(connects) == 3
        assert asyncio.run(
            fetch_openai_models(server.url + "/v1", provider="local", api_key="sk-test")
        )
        assert len(connects) == 4


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
        deadline = time.monotonic() + 5  # blocking: the loop does not run while we wait
        while server.open_connections and time.monotonic() < deadline:
            time.sleep(0.01)  # noqa: ASYNC251 - blocking the loop is the point
        return last.reason.kind

    with MockServer(require_key="sk-test", chunk_delay=0.05) as server:
        monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        assert asyncio.run(stopped_stream(server)) == "aborted"
        assert server.open_connections == 0
