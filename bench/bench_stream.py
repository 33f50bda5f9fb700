"""Streaming throughput: the openai Lua adapter vs plain httpx + json.loads vs the openai SDK.

Run: python bench/bench_stream.py [--chunks 20000] [--repeat 5] [--text uniform|varied|both]

A loopback server streams the same body of N OpenAI-style chunks to each client. The clients
take turns, round after round (median per client), so the machine's noise hits all of them
alike; the figures that matter are the ratios:

* baseline: ``httpx`` streaming + ``json.loads`` of every ``data:`` payload (no events);
* notebook_llm: ``LuaAdapter`` (openai.lua) -> SSE decoder -> ``transform_stream_chunk`` in the
  sandbox -> ChunkMapper -> protocol events (the whole pipeline an engine stream uses);
* the ``openai`` SDK (``pip install openai``; a bench-only dependency) iterating chunks.

Bodies: ``uniform`` is the issue's workload (short plain tokens); ``varied`` is LLM-like text
where a fifth of the tokens hold JSON escapes (newlines, quotes, backslashes) or non-ASCII
characters, which the sandbox's json.decode shape cache must handle too.

Also prints the time to load and to reload an adapter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
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

VARIED = [
    "Hello",
    " world",
    ",",
    " the",
    " model",
    "\n\n",
    ' "quoted"',
    " café",
    " 😀",
    "```python\n",
    "    x = 1\n",
    " C:\\path",
    " naïve",
    " token",
    ".",
]


def make_body(n: int, text: str = "uniform") -> bytes:
    rng = random.Random(0)
    parts = []
    for i in range(n):
        token = f"tok{i} " if text == "uniform" else rng.choice(VARIED)
        chunk = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1732900000,
            "model": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_0ba0d124f1",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": token},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        text_ = json.dumps(chunk, separators=(",", ":"), ensure_ascii=False)
        parts.append(b"data: " + text_.encode() + b"\n\n")
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


def interleaved(
    clients: list[Callable[[], Coroutine[Any, Any, int]]], repeat: int
) -> list[tuple[float, int]]:
    """Median time of each client, the clients taking turns in every round (after a warm-up)."""
    times: list[list[float]] = [[] for _ in clients]
    counts = [0] * len(clients)
    for round_ in range(repeat + 1):
        for i, make in enumerate(clients):
            t0 = time.perf_counter()
            counts[i] = asyncio.run(make())
            if round_:  # round 0 warms up connections, caches and the allocator
                times[i].append(time.perf_counter() - t0)
    return [(statistics.median(t), c) for t, c in zip(times, counts, strict=True)]


def bench_body(n: int, text: str, repeat: int, adapter: LuaAdapter) -> None:
    body = make_body(n, text)
    server = serve(body)
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    url = base + "/chat/completions"
    names = ["httpx + json.loads", "notebook_llm openai.lua -> events"]
    clients = [lambda: run_baseline(url), lambda: run_adapter(adapter, base)]
    try:
        import openai  # noqa: F401

        names.append("openai SDK")
        clients.append(lambda: run_sdk(base))
    except ImportError:
        print("(openai SDK not installed: pip install openai to compare)")
    print(f"[{text}] {n} chunks, {len(body) / 1e6:.1f} MB body, median of {repeat} rounds")
    rows = interleaved(clients, repeat)
    for name, (t, count) in zip(names, rows, strict=True):
        print(f"  {name:36} {t * 1e6 / n:8.1f} µs/chunk   ({count} items)")
    base_t, lua_t = rows[0][0], rows[1][0]
    print(f"  notebook_llm / httpx+json.loads = {lua_t / base_t:.2f}x   (target <= 2x)")
    if len(rows) > 2:
        print(f"  openai SDK / notebook_llm       = {rows[2][0] / lua_t:.2f}x   (target >= 5x)")
    print()
    server.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--text", choices=["uniform", "varied", "both"], default="both")
    args = ap.parse_args()
    script = builtin_adapters_dir() / "openai.lua"
    adapter = LuaAdapter.from_file(script)
    for text in ("uniform", "varied") if args.text == "both" else (args.text,):
        bench_body(args.chunks, text, args.repeat, adapter)

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
        f"load adapter: {load * 1e3:.2f} ms   reload adapter: {reload * 1e3:.2f} ms  ({len(source.splitlines())} lines)"
    )


if __name__ == "__main__":
    main()
