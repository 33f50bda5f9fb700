"""Proxies from the environment (``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY``, with
``NO_PROXY``) are honoured by every client notebook_llm opens, as httpx honours them; a
loopback server (Ollama, llama.cpp, the mock) is still reached directly. Before, an explicit
transport turned httpx's proxy handling off and the variables were ignored.

A fake forward proxy on 127.0.0.1 records the request lines it gets and answers one OpenAI
stream; the provider's host (``llm.example``) does not resolve, so an answer proves the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from notebook_llm import Engine, LlmError
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.wire.transport import connection_pool

CHUNK = {
    "id": "c1",
    "object": "chat.completion.chunk",
    "model": "m",
    "choices": [{"index": 0, "delta": {"content": "via proxy"}, "finish_reason": None}],
}
DONE = {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
BODY = f"data: {json.dumps(CHUNK)}\n\ndata: {json.dumps(DONE)}\n\ndata: [DONE]\n\n".encode()


@contextlib.asynccontextmanager
async def fake_proxy() -> AsyncIterator[tuple[str, list[str]]]:
    """A forward proxy that answers every request itself; yields its URL and the request
    lines it got (absolute-form, as a client sends them to a proxy)."""
    seen: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        seen.append(lines[0])
        length = next(
            (int(h.split(":", 1)[1]) for h in lines if h.lower().startswith("content-length:")),
            0,
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            + f"content-length: {len(BODY)}\r\nconnection: close\r\n\r\n".encode()
            + BODY
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", seen


def remote_engine() -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider(
        "remote", adapter="openai", base_url="http://llm.example/v1", model="m", needs_key=False
    )
    return engine


async def test_a_stream_goes_through_the_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with fake_proxy() as (url, seen):
        monkeypatch.setenv("HTTP_PROXY", url)
        answer = await remote_engine().complete("remote", prompt="hi")
        assert answer.text == "via proxy"
        assert seen == ["POST http://llm.example/v1/chat/completions HTTP/1.1"]
        async with connection_pool(4) as pool:  # a batch's pool too
            await pool.get("http://llm.example/v1/models")
        assert seen[-1] == "GET http://llm.example/v1/models HTTP/1.1"


async def test_no_proxy_and_loopback_hosts_are_reached_directly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with fake_proxy() as (url, seen):
        monkeypatch.setenv("HTTPS_PROXY", url)
        monkeypatch.setenv("http_proxy", url)
        monkeypatch.setenv("NO_PROXY", "llm.example")
        with pytest.raises(LlmError):  # straight to llm.example, which does not resolve
            await remote_engine().complete("remote", prompt="hi")
        monkeypatch.delenv("NO_PROXY")
        with MockServer() as server:  # loopback: directly, though no NO_PROXY names it
            engine = Engine(config_file=False, env_file=False, retries=0)
            engine.add_provider(
                "local", adapter="openai", base_url=server.url + "/v1", needs_key=False
            )
            assert (await engine.complete("local", "echo", prompt="hello")).text
            assert len(server.requests) == 1
        assert seen == []


async def test_a_recording_goes_through_the_proxy_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A recording wraps the network transport; the client's own proxy routing never saw it.
    async with fake_proxy() as (url, seen):
        monkeypatch.setenv("HTTP_PROXY", url)
        engine = remote_engine()
        with engine.recording(tmp_path / "rec.jsonl") as recorder:
            answer = await engine.complete("remote", prompt="hi")
        assert answer.text == "via proxy"
        assert seen == ["POST http://llm.example/v1/chat/completions HTTP/1.1"]
        assert [e.path for e in recorder.exchanges] == ["/v1/chat/completions"]
        monkeypatch.setenv("NO_PROXY", "llm.example")
        with engine.recording(tmp_path / "direct.jsonl"), pytest.raises(LlmError):
            await engine.complete("remote", prompt="hi")  # NO_PROXY: straight to llm.example
        assert len(seen) == 1
