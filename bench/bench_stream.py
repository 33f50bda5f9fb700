"""Streaming throughput: the openai Lua adapter vs plain httpx + json.loads vs the openai SDK.

Run: python bench/bench_stream.py [--chunks 20000] [--repeat 3]

A loopback server streams the same body of N OpenAI-style chunks to each client in one run,
so the machine's noise hits all of them alike; the figures that matter are the ratios:

* baseline: ``httpx`` streaming + ``json.loads`` of every ``data:`` payload (no events);
* notebook_llm: ``LuaAdapter`` (openai.lua) -> SSE decoder -> ``transform_stream_chunk`` in the
  sandbox -> ChunkMapper -> protocol events (the whole pipeline an engine stream uses);
* the ``openai`` SDK (``pip install openai``; a bench-only dependency) iterating chunks.

Also prints the time to load and to reload an adapter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
from collections.abc import Callable, Coroutine
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from notebook_llm import GenerateOptions, Message, TextDelta
from notebook_llm.lua.adapter import LuaAdapter
from notebook_llm.lua.loader import builtin_adapters_dir


def make_body(n: int) -> bytes:
    parts = []
    for i in range(n):
        chunk = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1732900000,
            "model": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_0ba0d124f1",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": f"tok{i} "},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        parts.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
    final = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1732900000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}],
    }
    usage = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1732900000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": n + 10},
    }
    parts.append(b"data: " + json.dumps(final).encode() + b"\n\n")
    parts.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def serve(body: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            view = memoryview(body)
            for i in range(0, len(body), 16384):  # a network-like pace of 16 KiB writes
                self.wfile.write(view[i : i + 16384])

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def run_baseline(url: str) -> int:
    n = 0
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", url, json={"stream": True}) as r,
    ):
        async for line in r.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                json.loads(line[6:])
                n += 1
    return n


async def run_adapter(adapter: LuaAdapter, base: str) -> int:
    opts = GenerateOptions(
        provider="bench",
        model="gpt-4o-mini",
        messages=[Message.user("hi")],
        base_url=base,
        api_key="k",
    )
    n = 0
    async for ev in adapter.stream(opts):
        if isinstance(ev, TextDelta):
            n += 1
    return n


async def run_sdk(base: str) -> int:
    import openai

    client = openai.AsyncOpenAI(base_url=base, api_key="k", max_retries=0)
    n = 0
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    async for _chunk in stream:
        n += 1
    await client.close()
    return n


def timed(make: Callable[[], Coroutine[Any, Any, int]], repeat: int) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        count = asyncio.run(make())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), count


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.chunks
    body = make_body(n)
    server = serve(body)
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    url = base + "/chat/completions"
    script = builtin_adapters_dir() / "openai.lua"
    adapter = LuaAdapter.from_file(script)

    print(f"{n} chunks, {len(body) / 1e6:.1f} MB body, median of {args.repeat} runs\n")
    base_t, base_n = timed(lambda: run_baseline(url), args.repeat)
    lua_t, lua_n = timed(lambda: run_adapter(adapter, base), args.repeat)
    rows = [
        ("httpx + json.loads", base_t, base_n),
        ("notebook_llm openai.lua -> events", lua_t, lua_n),
    ]
    try:
        sdk_t, sdk_n = timed(lambda: run_sdk(base), args.repeat)
        rows.append(("openai SDK", sdk_t, sdk_n))
    except ImportError:
        sdk_t = None
        print("(openai SDK not installed: pip install openai to compare)")
    for name, t, count in rows:
        print(f"{name:36} {t * 1e6 / n:8.1f} µs/chunk   ({count} items)")
    print(f"\nnotebook_llm / httpx+json.loads = {lua_t / base_t:.2f}x   (target <= 2x)")
    if sdk_t is not None:
        print(f"openai SDK / notebook_llm       = {sdk_t / lua_t:.2f}x   (target >= 5x)")

    source = Path(script).read_text()
    t0 = time.perf_counter()
    for _ in range(20):
        LuaAdapter.from_source(source, name="openai")
    load = (time.perf_counter() - t0) / 20
    t0 = time.perf_counter()
    for _ in range(20):
        adapter.reload(source)
    reload = (time.perf_counter() - t0) / 20
    print(
        f"\nload adapter: {load * 1e3:.2f} ms   reload adapter: {reload * 1e3:.2f} ms  ({len(source.splitlines())} lines)"
    )
    server.shutdown()


if __name__ == "__main__":
    main()
