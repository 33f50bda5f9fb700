"""Streaming throughput, side by side: notebook_llm vs plain httpx + json.loads vs the openai SDK
vs LiteLLM; and (``--profile``) where notebook_llm's time per chunk goes.

Run: python bench/bench_stream.py [--chunks 20000] [--repeat 11] [--text uniform|varied|both]
                                  [--profile] [--no-litellm]

A loopback server, in a child process (as a real provider is not in the client's process and
its GIL), streams the same body of N OpenAI-style chunks to each client. The clients
take turns, round after round (median per client), so the machine's noise hits all of them
alike; the figures that matter are the ratios (the goal: notebook_llm at most 1.5x the
baseline, never above 1.8x, and the openai SDK at least 8x slower than notebook_llm):

* baseline: ``httpx`` streaming + ``json.loads`` of every ``data:`` payload (no events);
* notebook_llm: ``Engine.stream`` on a provider served by the built-in openai.lua adapter: SSE
  decoder -> ``transform_stream_chunk`` in the sandbox -> ChunkMapper -> validator -> the
  engine's retry and guard layers -> protocol events (what a user's ``async for`` sees);
* the ``openai`` SDK iterating chunks, and LiteLLM's ``acompletion(stream=True)`` (both
  bench-only dependencies: ``pip install notebook_llm[bench]``; a missing one is skipped).
  The openai SDK streams a quarter of the body and LiteLLM (about 0.5-1 ms a chunk) a tenth
  (the same chunks; figures are per chunk), so rounds stay short and there can be many.

``--profile`` times each stage of the pipeline on its own over the same body (see
:func:`profile`): SSE framing, the crossing into Lua, Lua's json.decode, the script's own
logic, the unified chunk's json.encode in Lua, its decode in Python (one json.loads of each
read's results), ChunkMapper, the validator, the HTTP read, and the async layers (the rest of
the end-to-end time).

Bodies: ``uniform`` is the issue's workload (short plain tokens); ``varied`` is LLM-like text
where a fifth of the tokens hold JSON escapes (newlines, quotes, backslashes) or non-ASCII
characters, which the sandbox's json.decode must handle on its slower path.

Also prints the time to load and to reload an adapter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from notebook_llm import Engine, GenerateOptions, LlmAdapter, Message, TextDelta
from notebook_llm.adapters.lua.chunk_mapping import ChunkMapper
from notebook_llm.adapters.lua.hook_results import json_object_output
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaSandbox
from notebook_llm.core.stream_rules import StreamValidator
from notebook_llm.engine.routing.lua_files import builtin_adapters_dir
from notebook_llm.wire.sse import SSEDecoder

#: The goals: notebook_llm / baseline at most this, openai SDK / notebook_llm at least.
PIPELINE_GOAL = 1.5
SDK_GOAL = 8.0
#: The HTTP write size of the loopback server (a network-like pace).
WRITE = 16384

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
            for i in range(0, len(body), WRITE):  # a network-like pace of 16 KiB writes
                self.wfile.write(view[i : i + WRITE])

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _Served:
    """A loopback server in a CHILD process (``--serve``): its work does not share this
    process's GIL with the client being timed, as a real provider's would not."""

    def __init__(self, n: int, text: str) -> None:
        cmd = [sys.executable, __file__, "--serve", str(n), "--text", text]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.server_address = ("127.0.0.1", int(self.proc.stdout.readline()))

    def shutdown(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def serve_elsewhere(n: int, text: str) -> _Served:
    return _Served(n, text)


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


async def run_engine(engine: Engine) -> int:
    n = 0
    async for ev in engine.stream("bench", prompt="hi"):
        if isinstance(ev, TextDelta):
            n += 1
    return n


async def run_read(url: str) -> int:
    """The HTTP read alone: the body's bytes as httpx hands them over (for the profile)."""
    n = 0
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", url, json={"stream": True}) as r,
    ):
        async for chunk in r.aiter_bytes():
            n += len(chunk)
    return n


async def run_litellm(base: str) -> int:
    import litellm

    n = 0
    stream = await litellm.acompletion(
        model="openai/gpt-4o-mini",
        api_base=base,
        api_key="k",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
    )
    async for _chunk in stream:
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


def bench_engine(base: str) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("bench", adapter="openai", base_url=base, model="gpt-4o-mini", api_key="k")
    return engine


def bench_body(n: int, text: str, repeat: int, litellm: bool) -> None:
    body = make_body(n, text)
    server = serve_elsewhere(n, text)
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    url = base + "/chat/completions"
    engine = bench_engine(base)
    # The SDK costs ~15x more per chunk: it streams a quarter of the body (the same chunks), so
    # a round stays short and the cheap clients get many rounds on a noisy machine.
    small = max(500, n // 4)
    small_server = serve_elsewhere(small, text)
    small_base = f"http://127.0.0.1:{small_server.server_address[1]}/v1"
    names = ["httpx + json.loads (no events)", "notebook_llm Engine.stream (openai.lua)"]
    clients = [lambda: run_baseline(url), lambda: run_engine(engine)]
    sizes = [n, n]
    try:
        import openai  # noqa: F401

        names.append(f"openai SDK ({small} chunks)")
        clients.append(lambda: run_sdk(small_base))
        sizes.append(small)
    except ImportError:
        print("(openai SDK not installed: pip install openai to compare)")
    print(f"[{text}] {n} chunks, {len(body) / 1e6:.1f} MB body, median of {repeat} rounds")
    measured = interleaved(clients, repeat)
    if any(count < size for (_, count), size in zip(measured, sizes, strict=True)):
        raise SystemExit("a client did not read the whole stream")
    # Per content chunk of the body (the counts only check that each client read them all).
    rows = [(t, size) for (t, _), size in zip(measured, sizes, strict=True)]
    small_server.shutdown()
    if litellm:
        rows += litellm_rows(n, text, repeat, names)
    base_t = rows[0][0] / rows[0][1]
    ours = rows[1][0] / rows[1][1]
    print("  | client | µs per chunk | vs raw |")
    print("  |---|---|---|")
    for i, (name, (t, count)) in enumerate(zip(names, rows, strict=True)):
        per = t / count
        note = ""
        if i >= 2:
            note = f" ({per / ours:.1f}x slower than us)"
        print(f"  | {name} | {per * 1e6:,.2f} | {per / base_t:.2f}x{note} |")
    ratio = ours / base_t
    verdict = "met" if ratio <= PIPELINE_GOAL else "NOT met"
    print(
        f"  notebook_llm / httpx+json.loads = {ratio:.2f}x   (goal <= {PIPELINE_GOAL}x: {verdict})"
    )
    if len(rows) > 2:
        sdk = rows[2][0] / rows[2][1] / ours
        verdict = "met" if sdk >= SDK_GOAL else "NOT met"
        print(f"  openai SDK / notebook_llm       = {sdk:.2f}x   (goal >= {SDK_GOAL}x: {verdict})")
    print()
    server.shutdown()


def litellm_rows(n: int, text: str, repeat: int, names: list[str]) -> list[tuple[float, int]]:
    """LiteLLM on a tenth of the body (it is ~100x slower), as (seconds, chunks) per chunk."""
    # Offline: LiteLLM's price table from its own package, not fetched from GitHub.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        print("(LiteLLM not installed: pip install litellm to compare)")
        return []
    litellm.suppress_debug_info = True
    small = max(200, n // 10)
    server = serve_elsewhere(small, text)
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        rows = interleaved([lambda: run_litellm(base)], max(1, repeat // 4))
    finally:
        server.shutdown()
    names.append(f"LiteLLM ({small} chunks)")
    return [(t, small) for t, _count in rows]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--text", choices=["uniform", "varied", "both"], default="both")
    ap.add_argument("--profile", action="store_true", help="the per-stage breakdown only")
    ap.add_argument("--no-litellm", action="store_true", help="skip LiteLLM (slow)")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the child server process
    args = ap.parse_args()
    if args.serve:
        served = serve(make_body(args.serve, args.text))
        print(served.server_address[1], flush=True)
        threading.Event().wait()
        return
    texts = ("uniform", "varied") if args.text == "both" else (args.text,)
    if args.profile:
        for text in texts:
            profile(args.chunks, text, args.repeat)
        return
    for text in texts:
        bench_body(args.chunks, text, args.repeat, not args.no_litellm)

    script = builtin_adapters_dir() / "openai.lua"
    adapter = LuaAdapter.from_file(script)
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


# ---------------------------------------------------------------------------- --profile

#: A script that returns nothing: what remains is the crossing into Lua and back, per payload.
_CALL_ONLY = """
return { name = "call-only", transform_request = function(r) return r end,
  transform_stream_chunk = function(line) return "" end }
"""
#: The same, decoding each payload: the difference is Lua's json.decode.
_DECODE_ONLY = """
return { name = "decode-only", transform_request = function(r) return r end,
  transform_stream_chunk = function(line) local c = json.decode(line) return "" end }
"""
#: Put before openai.lua: its json.encode returns a constant (what the script's logic costs
#: without the encode; the full script minus this is the encode). A global, so that the
#: openai_compat library, required after it, encodes with it too.
_NO_ENCODE = 'json = setmetatable({ encode = function() return "{}" end }, { __index = json })\n'


def _best(times: list[float]) -> float:
    # The fastest round: each stage is a small, CPU-bound loop, and on a shared machine the
    # other rounds only add someone else's work (the side-by-side table uses medians).
    return min(times)


def profile(n: int, text: str, repeat: int) -> None:
    """Each stage of the pipeline on its own, in µs per chunk (fastest of interleaved rounds).

    The Lua stages are differences between scripts run by the real sandbox on the real
    payload batches (one ``call_each`` per 16 KiB read, as the adapter does): a script that
    returns "" (the crossing), one that only decodes, openai.lua with its encode stubbed, and
    openai.lua itself, each with ``parsed=True`` as the pipeline calls it (so the full script's
    figure holds Python's one json.loads per read, which is timed on its own and taken out of
    the encode's). The Python stages run on the real outputs of the stage before. The HTTP
    read and ``LuaAdapter.stream`` / ``Engine.stream`` end to end run over loopback; the async
    layers are what end to end costs beyond the sum of the stages and the read.
    """
    body = make_body(n, text)
    pieces = [body[i : i + WRITE] for i in range(0, len(body), WRITE)]
    source = (builtin_adapters_dir() / "openai.lua").read_text()
    boxes = {
        "call": LuaSandbox(_CALL_ONLY, name="call-only"),
        "decode": LuaSandbox(_DECODE_ONLY, name="decode-only"),
        "logic": LuaSandbox(_NO_ENCODE + source, name="openai"),
        "full": LuaSandbox(source, name="openai"),
    }
    batches: list[list[str]] = []
    dec = SSEDecoder()
    for piece in pieces:
        batches.append([p for p in dec.feed_data(piece) if p != "[DONE]"])
    results: list[Any] = []
    arrays: list[str] = []  # each read's results as the one JSON array Python parses
    for batch in batches:
        texts = boxes["full"].call_each("transform_stream_chunk", batch)[0]
        arrays.append("[" + ",".join(t or '""' for t in texts) + "]")
        results.extend(texts)
    results = [r for r in results if r]
    chunks = [json_object_output(r, "openai", "transform_stream_chunk") for r in results]
    mapper = ChunkMapper(provider="bench", adapter="openai")
    events: list[Any] = []
    for chunk in chunks:
        events.extend(mapper.feed(chunk))
    events.extend(mapper.finish())

    def sse() -> None:
        d = SSEDecoder()
        for piece in pieces:
            d.feed_data(piece)
        d.flush_data()

    def lua(kind: str) -> Callable[[], None]:
        box = boxes[kind]

        def run() -> None:
            for batch in batches:  # as LuaCodec calls it
                box.call_each("transform_stream_chunk", batch, parsed=True)

        return run

    def py_decode() -> None:
        for text in arrays:
            json.loads(text)

    def chunk_mapper() -> None:
        m = ChunkMapper(provider="bench", adapter="openai")
        for chunk in chunks:
            m.feed(chunk)
        m.finish()

    def validator() -> None:
        v = StreamValidator()
        for ev in events:
            v.check(ev)

    layers_engine = Engine(config_file=False, env_file=False, retries=0)
    layers_engine.add_provider("layers", adapter=_PreMade(events, batches), model="m")

    async def layers() -> int:
        n = 0
        async for _ in layers_engine.stream("layers", prompt="hi"):
            n += 1
        return n

    server = serve_elsewhere(n, text)
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    url = base + "/chat/completions"
    engine = bench_engine(base)
    sync_stages: list[tuple[str, Callable[[], None]]] = [
        ("sse", sse),
        ("call", lua("call")),
        ("decode", lua("decode")),
        ("logic", lua("logic")),
        ("full", lua("full")),
        ("py_decode", py_decode),
        ("mapper", chunk_mapper),
        ("validator", validator),
    ]
    async_stages: list[tuple[str, Callable[[], Coroutine[Any, Any, int]]]] = [
        ("layers", layers),
        ("read", lambda: run_read(url)),
        ("baseline", lambda: run_baseline(url)),
        ("engine", lambda: run_engine(engine)),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in sync_stages + async_stages}
    for round_ in range(repeat + 1):
        for name, fn in sync_stages:
            t0 = time.perf_counter()
            fn()
            if round_:
                times[name].append(time.perf_counter() - t0)
        for name, make in async_stages:
            t0 = time.perf_counter()
            asyncio.run(make())
            if round_:
                times[name].append(time.perf_counter() - t0)
    server.shutdown()
    us = {name: _best(t) * 1e6 / n for name, t in times.items()}
    stages = [
        ("SSE framing (SSEDecoder.feed_data)", us["sse"]),
        ("Lua call (call_each crossing, per payload)", us["call"]),
        ("Lua json.decode of the payload", us["decode"] - us["call"]),
        ("openai.lua's own logic", us["logic"] - us["decode"]),
        ("Lua json.encode of the unified chunk", us["full"] - us["logic"] - us["py_decode"]),
        ("Python decode of the unified chunks (1/read)", us["py_decode"]),
        ("ChunkMapper.feed", us["mapper"]),
        ("StreamValidator.check", us["validator"]),
        ("async layers, adapter to caller (no HTTP)", us["layers"] - us["validator"]),
        ("HTTP read (httpx aiter_bytes, loopback)", us["read"]),
    ]
    accounted = sum(v for _, v in stages)
    print(f"[{text}] profile: {n} chunks, µs per chunk, fastest of {repeat} interleaved rounds")
    for name, value in stages:
        print(f"  {name:44} {value:7.2f}")
    print(f"  {'sum of the stages':44} {accounted:7.2f}")
    print(f"  {'Engine.stream end to end':44} {us['engine']:7.2f}")
    print(f"  {'baseline httpx + json.loads':44} {us['baseline']:7.2f}")
    print(f"  ratio Engine.stream / baseline = {us['engine'] / us['baseline']:.2f}x")
    print()


class _PreMade(LlmAdapter):
    """The events of the real stream, pre-made, in the real per-read batches: Engine.stream over
    it is the async layers' cost (and the validator's) without HTTP or Lua. An engine that
    knows no batches takes them one by one from ``stream``."""

    name = "pre-made"

    def __init__(self, events: list[Any], batches: list[list[str]]) -> None:
        sizes = [len(b) for b in batches if b]
        self.parts: list[list[Any]] = []
        i = 0
        for size in sizes:
            self.parts.append(events[i : i + size])
            i += size
        if i < len(events):
            self.parts.append(events[i:])

    async def stream_batches(self, options: GenerateOptions) -> AsyncIterator[list[Any]]:
        for part in self.parts:
            yield part

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Any]:
        async for part in self.stream_batches(options):
            for event in part:
                yield event


if __name__ == "__main__":
    main()
