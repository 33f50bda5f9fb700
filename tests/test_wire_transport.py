"""The network transport (``notebook_llm.wire.transport``, ``notebook_llm.wire.http11``): httpx
on notebook_llm's HTTP/1.1 transport (asyncio connections, llhttp), and a batch's keep-alive
pool (issue 16)."""

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
from notebook_llm.wire.http11 import Http11Transport
from notebook_llm.wire.http11_connection import Connection
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


async def test_a_request_on_a_kept_alive_connection_is_sent_before_other_tasks_run() -> None:
    # httpcore's connections took AnyIO locks, which hand the loop back even when free: three
    # times per request, each time behind every other ready task (issue 16).
    ran: list[int] = []
    sent_after: list[int] = []

    write = Connection.write

    def watched(self: Connection, data: bytes) -> None:
        sent_after.append(len(ran))
        write(self, data)

    async def other_task() -> None:
        while True:
            ran.append(1)
            await asyncio.sleep(0)

    async with (
        tiny_server(keep_alive) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        await client.post(url, content=b"connect")
        other = asyncio.ensure_future(other_task())
        await asyncio.sleep(0.01)
        ran.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Connection, "write", watched)
            second = await client.post(url, content=b"reused")
        other.cancel()
    assert second.text == "reused"
    assert sent_after == [0]  # the head and the body, in one write before the other task ran


async def test_the_transport_and_a_batch_pool_run_on_the_http11_transport() -> None:
    async with tiny_server(keep_alive) as (port, _):
        url = f"http://127.0.0.1:{port}/"
        async with httpx.AsyncClient(transport=network_transport()) as client:
            resp = await client.post(url, content=b"one")
            assert resp.text == "one"
            assert resp.http_version == "HTTP/1.1"
            assert isinstance(resp.extensions["network_stream"], Connection)
        async with connection_pool() as pool:
            assert scoped_client() is pool
            resp = await pool.post(url, content=b"two")
            assert isinstance(resp.extensions["network_stream"], Connection)


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


async def test_a_body_that_arrived_in_several_writes_comes_up_as_one_piece() -> None:
    arrived = asyncio.Event()

    async def two_writes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 22\r\n\r\ndata: one\n\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"data: two\n\n")
        await writer.drain()
        await asyncio.sleep(0.2)
        arrived.set()
        await asyncio.sleep(1)

    async with (
        tiny_server(two_writes) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
        client.stream("POST", f"http://127.0.0.1:{port}/", content=b"{}") as resp,
    ):
        await arrived.wait()  # both writes are in; nobody has read the body yet
        pieces = [piece async for piece in resp.aiter_raw()]
    assert pieces == [b"data: one\n\ndata: two\n\n"]


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
    # trips through httpx and the pipeline (a Lua call each).
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
        await read_request(reader)
        writer.write(response(data))
        await writer.drain()

    async with (
        tiny_server(flood) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
        client.stream("POST", f"http://127.0.0.1:{port}/", content=b"{}") as resp,
    ):
        conn = resp.extensions["network_stream"]
        await until(lambda: conn.reading_paused)  # nobody reads
        assert conn.buffered < len(data)  # the rest waits in the socket
        got = b"".join([piece async for piece in resp.aiter_raw()])
        assert got == data
        assert not conn.reading_paused


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


def test_every_request_of_the_engine_goes_through_the_http11_transport(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Not only a batch: a stream on the caller's loop, a sync call on the background loop, a
    recording's inner transport and ``list_models`` all connect through ``Http11Transport``."""
    connects: list[str] = []
    connect = Http11Transport._connect

    async def spy(self: Http11Transport, origin: Any, *args: Any, **kw: Any) -> Any:
        connects.append(origin[1])
        return await connect(self, origin, *args, **kw)

    monkeypatch.setattr(Http11Transport, "_connect", spy)
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


# ------------------------------------------------------------------ HTTP/1.1 details


async def raw_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request's head and body as they arrived (Content-Length or chunked framing)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            data = await reader.readexactly(size + 2)
            if size == 0:
                return head, body
            body += data[:-2]
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head, await reader.readexactly(length)


async def test_a_header_that_would_split_the_request_is_refused() -> None:
    async with (
        tiny_server(keep_alive) as (port, opened),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        for headers in ({"x-a": "1\r\nx-injected: 2"}, {"x-a": "1\nGET / HTTP/1.1"}):
            with pytest.raises(httpx.LocalProtocolError):
                await client.get(url, headers=headers)
        assert opened[0] == 0  # nothing was sent
        assert (await client.post(url, content=b"fine")).text == "fine"


async def test_a_streamed_request_body_is_sent_chunked_and_arrives_whole() -> None:
    got: list[tuple[bytes, bytes]] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got.append(await raw_request(reader))
        writer.write(response(b"ok"))
        await writer.drain()

    async def parts() -> AsyncIterator[bytes]:
        for part in (b"one ", b"", b"two ", b"three"):
            yield part

    async with (
        tiny_server(record) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        resp = await client.post(f"http://127.0.0.1:{port}/", content=parts())
    assert resp.text == "ok"
    head, body = got[0]
    assert b"transfer-encoding: chunked" in head.lower()
    assert body == b"one two three"


async def test_informational_answers_are_skipped() -> None:
    early_hints = always(
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
        b"HTTP/1.1 201 Created\r\nX-Real: yes\r\nContent-Length: 4\r\n\r\ndone"
    )
    async with (
        tiny_server(early_hints) as (port, opened),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        for _ in range(2):
            resp = await client.post(f"http://127.0.0.1:{port}/", content=b"x")
            assert (resp.status_code, resp.text) == (201, "done")
            assert resp.headers["x-real"] == "yes"
            assert "link" not in resp.headers
        assert opened[0] == 1  # and the connection stays usable


async def test_a_body_without_a_length_ends_with_the_connection() -> None:
    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b" it")
        await writer.drain()
        writer.close()

    async with (
        tiny_server(until_close) as (port, opened),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        for _ in range(2):
            assert (
                await client.post(f"http://127.0.0.1:{port}/", content=b"x")
            ).text == "all of it"
        assert opened[0] == 2


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",  # more than the answer
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 Stale\r\nX-Stale: 1",
    ],
    ids=["connection-close", "http-1.0", "extra-bytes", "part-of-a-second-answer"],
)
async def test_a_connection_the_answer_does_not_keep_alive_is_not_reused(answer: bytes) -> None:
    async with (
        tiny_server(always(answer)) as (port, opened),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        for _ in range(2):
            resp = await client.post(f"http://127.0.0.1:{port}/", content=b"x")
            assert (resp.status_code, resp.reason_phrase, resp.text) == (200, "OK", "ok")
            assert "x-stale" not in resp.headers
        assert opened[0] == 2


async def test_a_head_request_does_not_wait_for_a_body() -> None:
    async def head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            await writer.drain()

    async with (
        tiny_server(head) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        resp = await client.head(f"http://127.0.0.1:{port}/", timeout=5)
        assert (resp.status_code, resp.content) == (200, b"")
        assert resp.headers["content-length"] == "1000"


async def test_trailers_of_a_chunked_body_are_dropped_and_the_body_kept() -> None:
    trailers = always(STREAM_HEAD + chunked(b"ab", b"cd") + b"0\r\nX-Trailer: t\r\n\r\n")
    async with (
        tiny_server(trailers) as (port, opened),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        for _ in range(2):
            resp = await client.post(f"http://127.0.0.1:{port}/", content=b"x")
            assert resp.content == b"abcd"
            assert "x-trailer" not in resp.headers
        assert opened[0] == 1


async def test_an_early_answer_to_a_request_still_being_sent_is_returned() -> None:
    # A server may refuse a large upload at once (413) and close; the answer is what counts.
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 413 Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig")
        await writer.drain()
        writer.transport.abort()

    async with (
        tiny_server(refuse) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        resp = await client.post(f"http://127.0.0.1:{port}/", content=b"x" * (32 * 1024 * 1024))
    assert (resp.status_code, resp.text) == (413, "big")


async def test_the_pool_keeps_to_its_connection_limit_and_times_out_waiting() -> None:
    at_once = [0, 0]  # now, most

    async def slowly(body: bytes) -> None:
        at_once[0] += 1
        at_once[1] = max(at_once)
        await asyncio.sleep(0.05)
        at_once[0] -= 1

    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
    async with (
        tiny_server(echoing(slowly)) as (port, opened),
        httpx.AsyncClient(transport=NetworkTransport(limits)) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        texts = await asyncio.gather(*(client.post(url, content=b"%d" % i) for i in range(8)))
        assert [t.text for t in texts] == [str(i) for i in range(8)]
        assert (opened[0], at_once[1]) == (2, 2)
        async with (
            client.stream("POST", url, content=b"a"),
            client.stream("POST", url, content=b"b"),
        ):
            with pytest.raises(httpx.PoolTimeout):  # both connections are taken
                await client.post(url, content=b"c", timeout=httpx.Timeout(5, pool=0.1))
        assert (await client.post(url, content=b"after")).text == "after"


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
        resp = await client.post(url, content=b"next", timeout=httpx.Timeout(5, pool=1))
        assert resp.text == "next"
        assert opened[0] == 2  # the cancelled request's connection was closed, not reused


async def test_an_idle_connection_older_than_the_keep_alive_expiry_is_replaced() -> None:
    limits = httpx.Limits(keepalive_expiry=0.05)
    async with (
        tiny_server(keep_alive) as (port, opened),
        httpx.AsyncClient(transport=NetworkTransport(limits)) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        assert (await client.post(url, content=b"1")).text == "1"
        assert (await client.post(url, content=b"2")).text == "2"
        assert opened[0] == 1
        await asyncio.sleep(0.1)
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
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(f"http://127.0.0.1:{port}/", content=b"x")


def sent_request(handler_got: list[tuple[bytes, bytes]]) -> Handler:
    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            handler_got.append(await raw_request(reader))
            writer.write(response(b"ok"))
            await writer.drain()

    return record


async def test_the_body_is_framed_as_the_request_headers_say() -> None:
    # The server reads the body by the request's own headers: a body sent otherwise would let
    # its bytes be read as a second request (request smuggling).
    got: list[tuple[bytes, bytes]] = []

    async def parts() -> AsyncIterator[bytes]:
        yield b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

    async with (
        tiny_server(sent_request(got)) as (port, opened),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        read_first = client.build_request("POST", url, content=parts())
        await read_first.aread()  # as a recording does: the streamed body is now bytes
        assert (await client.send(read_first)).text == "ok"
        [(head, body)] = got
        assert b"transfer-encoding: chunked" in head.lower()
        assert body == b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"  # all of it one body
        for headers, content in [
            ({"content-length": "2"}, b"GET /admin"),  # longer than it says
            ({"content-length": "20"}, b"short"),
            ({"content-length": "5", "transfer-encoding": "chunked"}, b"hello"),
            ({"transfer-encoding": "chunked"}, b"hello"),  # httpx adds a Content-Length: both
            ({"transfer-encoding": "gzip, chunked"}, b"hello"),
            ({"content-length": "-1"}, b""),
        ]:
            with pytest.raises(httpx.LocalProtocolError):
                await client.send(
                    client.build_request("POST", url, content=content, headers=headers)
                )
        assert len(got) == 1  # nothing more reached the server
        assert opened[0] == 1


async def test_a_streamed_body_that_breaks_its_content_length_is_cut_and_refused() -> None:
    got: list[tuple[bytes, bytes]] = []

    async def parts() -> AsyncIterator[bytes]:
        yield b"12345"
        yield b"GET /admin HTTP/1.1\r\n\r\n"

    async with (
        tiny_server(sent_request(got)) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        request = client.build_request(
            "POST", url, content=parts(), headers={"content-length": "5"}
        )
        with pytest.raises(httpx.LocalProtocolError):
            await client.send(request)
        assert (await client.post(url, content=b"next")).text == "ok"
    assert [body for _, body in got] == [b"12345", b"next"]  # GET /admin never went out


async def test_request_heads_that_h11_refused_are_refused() -> None:
    async with (
        tiny_server(keep_alive) as (port, opened),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        url = f"http://127.0.0.1:{port}/"
        bad = [
            client.build_request("GËT", url),
            client.build_request("GET", url, headers={"x-a": "one\x01two"}),
            client.build_request("GET", url, headers={"x-a": "del\x7f"}),
        ]
        no_host = client.build_request("GET", url)
        del no_host.headers["host"]
        for request in [*bad, no_host]:
            with pytest.raises(httpx.LocalProtocolError):
                await client.send(request)
        assert opened[0] == 0
        tab = await client.post(url, content=b"x", headers={"x-a": "a\tb"})  # a tab is fine
        assert tab.text == "x"


async def test_an_international_host_name_is_reached_by_its_idna_2008_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Python encodes faß.de as fass.de (IDNA 2003), another domain; httpx's Host header says
    # xn--fa-hia.de, and that is where the connection must go (and its TLS name).
    origins: list[Any] = []

    async def no_network(self: Http11Transport, origin: Any, *args: Any) -> Any:
        origins.append(origin)
        raise httpx.ConnectError("no network in tests")

    monkeypatch.setattr(Http11Transport, "_connect", no_network)
    async with httpx.AsyncClient(transport=network_transport()) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("https://faß.de/")
    assert origins == [("https", "xn--fa-hia.de", 443)]


async def test_a_body_ended_by_the_close_is_not_complete_when_we_closed_it() -> None:
    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n")
        await writer.drain()
        await asyncio.sleep(10)

    transport = network_transport()
    async with (
        tiny_server(endless) as (port, _),
        httpx.AsyncClient(transport=transport) as client,
        client.stream("POST", f"http://127.0.0.1:{port}/", content=b"x") as resp,
    ):
        pieces = resp.aiter_raw()
        assert await anext(pieces) == b"data: 1\n\n"
        await transport.aclose()  # e.g. a connection_pool() block ends under the stream
        with pytest.raises(httpx.RemoteProtocolError):
            await anext(pieces)


@pytest.mark.parametrize(
    ("start", "filler", "error"),
    [
        (b"HTTP/1.1 200 OK\r\n", b"X-Filler: %s\r\n" % (b"y" * 100), "head is over"),
        (b"HTTP/1.1 200 OK\r\nX-Long: ", b"y" * 100, "head is over"),
        (
            STREAM_HEAD + chunked(b"data: 1\n\n") + b"0\r\nX-Trailer: ",
            b"y" * 100,
            "framing is over",
        ),
    ],
    ids=["many-header-lines", "one-endless-header-line", "one-endless-trailer"],
)
async def test_a_response_head_without_end_is_refused_at_its_size_limit(
    start: bytes, filler: bytes, error: str
) -> None:
    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(start)
        for _ in range(100_000):
            writer.write(filler)
            await writer.drain()

    async with (
        tiny_server(endless) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        with pytest.raises(httpx.RemoteProtocolError, match=error):  # post() reads the body
            await client.post(f"http://127.0.0.1:{port}/", content=b"x")


async def test_bare_lf_line_ends_and_trailing_spaces_are_read_as_h11_read_them() -> None:
    async def sloppy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\nX-A: b  \nContent-Length: 2\n\nok")
        await writer.drain()

    async with (
        tiny_server(sloppy) as (port, _),
        httpx.AsyncClient(transport=network_transport()) as client,
    ):
        resp = await client.post(f"http://127.0.0.1:{port}/", content=b"x")
    assert (resp.text, resp.headers["x-a"]) == ("ok", "b")
