"""Batch throughput: 200 prompts against the mock server with 100 ms latency, concurrency 16.

The goal (issue 16) is within 1.10x of the ideal, 200 / 16 x 0.1 s = 1.25 s. Sixteen at a time
is 13 rounds, the last one half full, so no client can finish before ceil(200 / 16) x 0.1 s =
1.3 s: the floor is 1.04x, and the goal leaves 75 ms over 13 rounds for everything else.

    python bench/bench_batch.py [--prompts 200] [--concurrency 16] [--latency 0.1]
                                [--server process|thread] [--repeat 3] [--profile]

The server: ``python -m notebook_llm.mock`` in a child process (the default, ``process``).
A real provider does not run in the client's process, so its work must not share the client's
GIL and show up as the client's CPU time; ``thread`` runs the ``MockServer`` in this process,
as the tests do, for comparison. For each prompt the server waits ``latency``, then streams
the echo model's answer as OpenAI does: six SSE events (the role, two content deltas, the
finish reason, the usage, ``[DONE]``; ~1.4 KB), each its own HTTP chunk written and flushed on
its own, as a provider streams them. It is a Python ``ThreadingHTTPServer`` (one thread per
connection, one GIL), so it answers requests that arrive together one after another; the
``plain httpx`` line shows what that server and the HTTP library allow a client that does
nothing with the answer.

Lines, each run ``--repeat`` times with the clients taking turns (median, and the range):

* ``notebook_llm.amap``: the batch on this script's loop, through the built-in openai Lua
  adapter (with its request slots: up to 8 prompts prepared ahead, see
  ``notebook_llm/wire/slots.py``); ``notebook_llm.map``: the same from synchronous code, as in
  a notebook (on the package's background loop).
* ``plain httpx``: the same requests with an ``httpx.AsyncClient`` and 16 tasks, reading each
  stream to its end without parsing it, on httpx's default transport (AnyIO) and on
  notebook_llm's (:func:`notebook_llm.wire.transport.network_transport`, which a batch uses).
* ``raw sockets``: no HTTP library at all, prebuilt request bytes on ``concurrency``
  keep-alive sockets: the floor this server and the loopback set for any client.
* ``scheduler only``: :func:`notebook_llm.batch.amap` over an in-process adapter that only
  sleeps ``latency`` (no HTTP, no Lua): the batch scheduler's own overhead.

Then the CPU time per request on the loop's thread (``time.process_time``; with ``--server
thread`` it includes the server's), and notebook_llm's own per-request costs measured one
request at a time: a fresh Lua sandbox (one per stream, by design), ``transform_request``, and
``transform_stream_chunk`` on a cold sandbox. ``--profile`` runs one more batch under cProfile
and prints its CPU time by layer (profiled times are inflated, the shares are what counts).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import cProfile
import json
import math
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx

from notebook_llm import Completion, Engine, Event, GenerateOptions, LlmAdapter
from notebook_llm.batch import amap, map_prompts
from notebook_llm.mock.direct_adapter import MockAdapter
from notebook_llm.mock.server import MockServer
from notebook_llm.wire.transport import network_transport

TARGET = 1.10


class SleepyMock(LlmAdapter):
    """The direct mock adapter after a fixed sleep: the batch scheduler's overhead only."""

    name = "sleepy-mock"

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.inner = MockAdapter()

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        await asyncio.sleep(self.latency)
        async for event in self.inner.stream(options):
            yield event


@contextlib.contextmanager
def server(kind: str, latency: float) -> Iterator[str]:
    """The base URL of a mock server with ``latency``, in this process or a child process."""
    if kind == "thread":
        with MockServer(latency=latency) as srv:
            yield srv.url
        return
    cmd = [sys.executable, "-m", "notebook_llm.mock", "--latency", str(latency)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().split()[-1]
    finally:
        proc.terminate()
        proc.wait(5)


def prompts_of(n: int) -> list[str]:
    return [f"prompt number {i}" for i in range(n)]


def request_bodies(n: int) -> list[bytes]:
    """The OpenAI streaming request body of each prompt, as the clients without an adapter send
    it."""
    return [
        json.dumps(
            {"model": "echo", "stream": True, "messages": [{"role": "user", "content": p}]}
        ).encode()
        for p in prompts_of(n)
    ]


def wrong(results: list[object], prompts: list[str]) -> int:
    """How many results are missing or not the echo of their prompt."""
    return sum(
        1
        for r, p in zip(results, prompts, strict=True)
        if not isinstance(r, Completion) or r.text != p
    )


async def timed(run: Callable[[], Awaitable[int]]) -> tuple[float, float, int]:
    """Wall time, CPU time of this process, and the count of wrong results of one batch."""
    cpu = time.process_time()
    start = time.perf_counter()
    bad = await run()
    return time.perf_counter() - start, time.process_time() - cpu, bad


def plain_httpx(
    url: str, n: int, concurrency: int, ours: bool = False
) -> Callable[[], Awaitable[int]]:
    """The batch with a bare ``httpx.AsyncClient``: post, read the stream to its end; on
    httpx's default transport, or (``ours``) on notebook_llm's."""
    body = request_bodies(n)
    headers = {"content-type": "application/json", "accept": "text/event-stream"}

    async def run() -> int:
        bad = 0
        todo = iter(range(n))
        transport = network_transport() if ours else None
        async with httpx.AsyncClient(transport=transport) as client:

            async def worker() -> None:
                nonlocal bad
                for i in todo:
                    async with client.stream(
                        "POST", url + "/v1/chat/completions", content=body[i], headers=headers
                    ) as resp:
                        data = b"".join([part async for part in resp.aiter_bytes()])
                    bad += not data.endswith(b"data: [DONE]\n\n")

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return bad

    return run


def raw_sockets(url: str, n: int, concurrency: int) -> Callable[[], Awaitable[int]]:
    """The batch with no HTTP library: ``concurrency`` keep-alive sockets, each writing
    prebuilt request bytes and reading until the end of the chunked answer. What the server
    and the loopback allow a client that costs (almost) nothing."""
    host, port = url.removeprefix("http://").split(":")
    requests = []
    for body in request_bodies(n):
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        requests.append(head.encode() + body)

    async def run() -> int:
        bad = 0
        todo = iter(range(n))

        async def worker() -> None:
            nonlocal bad
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                for i in todo:
                    writer.write(requests[i])
                    data = b""
                    while not data.endswith(b"\r\n0\r\n\r\n"):
                        more = await reader.read(65536)
                        if not more:
                            raise ConnectionError("the server closed the connection")
                        data += more
                    bad += b"data: [DONE]" not in data
            finally:
                writer.close()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return bad

    return run


def per_request_costs(url: str) -> tuple[float, float, float]:
    """notebook_llm's own CPU per request, in ms (median of 50): a fresh sandbox, preparing
    the request (transform_request & co), and the chunk transform of an echo answer's stream
    on a cold sandbox."""
    from notebook_llm import Message
    from notebook_llm.lua.http_request import prepare_request
    from notebook_llm.lua.loader import builtin_adapters_dir
    from notebook_llm.lua.lua_adapter import LuaAdapter

    adapter = LuaAdapter.from_file(builtin_adapters_dir() / "openai.lua")
    options = GenerateOptions(
        provider="bench",
        model="echo",
        messages=[Message.user("prompt number 7")],
        base_url=url + "/v1",
        api_key="k",
    )
    _, _, body, _ = prepare_request(adapter._sandbox(), options, adapter.name)
    text = httpx.post(url + "/v1/chat/completions", content=body).text
    payloads = [ln[6:] for ln in text.splitlines() if ln.startswith("data: ")]
    payloads = [p for p in payloads if p != "[DONE]"]
    made, prepared, chunks = [], [], []
    for _ in range(50):
        t0 = time.perf_counter()
        sandbox = adapter._sandbox()
        t1 = time.perf_counter()
        prepare_request(sandbox, options, adapter.name)
        t2 = time.perf_counter()
        sandbox.call_each("transform_stream_chunk", payloads)
        t3 = time.perf_counter()
        made.append(t1 - t0)
        prepared.append(t2 - t1)
        chunks.append(t3 - t2)
    return (
        statistics.median(made) * 1e3,
        statistics.median(prepared) * 1e3,
        statistics.median(chunks) * 1e3,
    )


#: Profile rows by layer: the first of these found in a function's file name.
LAYERS = [
    ("notebook_llm/lua/", "notebook_llm Lua adapter (sandbox, hooks, SSE)"),
    ("notebook_llm/wire/", "notebook_llm wire (SSE framing, HTTP/1.1 transport)"),
    ("notebook_llm/", "notebook_llm engine, batch, validator"),
    ("/httpx/", "httpx (client, models)"),
    ("/httpcore/", "httpcore (pool, HTTP/1.1)"),
    ("/h11/", "h11 (HTTP/1.1 parsing)"),
    ("/anyio/", "anyio, sniffio"),
    ("/sniffio/", "anyio, sniffio"),
    ("/asyncio/", "asyncio event loop"),
    ("selectors.py", "asyncio event loop"),
]


def layer_of(where: tuple[str, int, str]) -> str:
    filename, _, name = where
    if filename == "~":  # a builtin: lupa's calls into Lua, sockets, the poll
        if "poll" in name:
            return "(idle in epoll)"
        if "lupa" in name or "_lupa" in name:
            return "notebook_llm Lua adapter (sandbox, hooks, SSE)"
        if "httptools" in name:  # llhttp, under notebook_llm's transport
            return "notebook_llm wire (SSE framing, HTTP/1.1 transport)"
        if "socket" in name:
            return "socket send/recv"
        return "other builtins"
    for needle, layer in LAYERS:
        if needle in filename:
            return layer
    return "other Python"


async def profile_batch(engine: Engine, n: int, concurrency: int) -> None:
    prompts = prompts_of(n)
    profiler = cProfile.Profile()
    profiler.enable()
    await amap(prompts, engine=engine, provider="bench", concurrency=concurrency, progress=False)
    profiler.disable()
    per_layer: collections.Counter[str] = collections.Counter()
    for where, row in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        per_layer[layer_of(where)] += row[2]  # own time
    idle = per_layer.pop("(idle in epoll)", 0.0)
    busy = sum(per_layer.values())
    print(f"profile of one batch (cProfile; own time per request, {idle / n * 1e3:.2f} ms idle):")
    for layer, seconds in per_layer.most_common():
        print(f"  {layer:48s} {seconds / n * 1e3:6.3f} ms  {seconds / busy:6.1%}")
    print(f"  {'total (profiled)':48s} {busy / n * 1e3:6.3f} ms")


async def run(args: argparse.Namespace) -> int:
    n, concurrency, latency = args.prompts, args.concurrency, args.latency
    ideal = n / concurrency * latency
    floor = math.ceil(n / concurrency) * latency
    engine = Engine(config_file=False, env_file=False)
    engine.add_provider("sleepy", adapter=SleepyMock(latency), model="echo")
    prompts = prompts_of(n)
    print(
        f"prompts={n} concurrency={concurrency} latency={latency * 1000:.0f}ms "
        f"ideal={ideal:.3f}s (whole rounds: {floor:.3f}s = {floor / ideal:.3f}x) "
        f"server={args.server} load={os.getloadavg()[0]:.2f}"
    )
    lines: dict[str, list[tuple[float, float, int]]] = collections.defaultdict(list)
    with server(args.server, latency) as url:
        engine.add_provider("bench", adapter="openai", base_url=url + "/v1", model="echo")

        async def ours() -> int:
            res = await amap(
                prompts, engine=engine, provider="bench", concurrency=concurrency, progress=False
            )
            return wrong(list(res), prompts)

        async def ours_sync() -> int:
            res = map_prompts(
                prompts, engine=engine, provider="bench", concurrency=concurrency, progress=False
            )
            return wrong(list(res), prompts)

        async def sleepy() -> int:
            res = await amap(
                prompts, engine=engine, provider="sleepy", concurrency=concurrency, progress=False
            )
            return wrong(list(res), prompts)

        runs = {
            "notebook_llm.amap": ours,
            "notebook_llm.map (sync, as in a notebook)": ours_sync,
            "plain httpx (no parsing, no events)": plain_httpx(url, n, concurrency),
            "plain httpx on notebook_llm's transport": plain_httpx(url, n, concurrency, True),
            "raw sockets (no HTTP library)": raw_sockets(url, n, concurrency),
            "scheduler only (no HTTP, no Lua)": sleepy,
        }
        # Warm-up: adapters loaded, connections of the background loop's client open.
        warm = ["warm-up"] * concurrency
        await amap(warm, engine=engine, provider="bench", concurrency=concurrency, progress=False)
        map_prompts(warm, engine=engine, provider="bench", concurrency=concurrency, progress=False)
        for _ in range(args.repeat):
            for name, batch in runs.items():
                lines[name].append(await timed(batch))
        costs = per_request_costs(url)
        if args.profile:
            await profile_batch(engine, n, concurrency)
    ratios: dict[str, float] = {}
    bad = 0
    for name, results in lines.items():
        walls = sorted(wall for wall, _, _ in results)
        ratios[name] = statistics.median(walls) / ideal
        bad += sum(b for _, _, b in results)
        span = f" (runs {walls[0] / ideal:.3f}x-{walls[-1] / ideal:.3f}x)" if len(walls) > 1 else ""
        goal = f"  goal <= {TARGET:.2f}x" if name.startswith("notebook_llm") else ""
        print(
            f"{name:42s} wall {statistics.median(walls):.3f}s = {ratios[name]:.3f}x ideal"
            f"{span}{goal}"
        )
    cpu = statistics.median(c for _, c, _ in lines["notebook_llm.amap"]) / n
    raw_cpu = statistics.median(c for _, c, _ in lines["plain httpx (no parsing, no events)"]) / n
    our_cpu = statistics.median(c for _, c, _ in lines["plain httpx on notebook_llm's transport"])
    busy = cpu * concurrency / latency
    print(
        f"CPU per request on the loop's thread: notebook_llm {cpu * 1e3:.2f} ms, plain httpx "
        f"{raw_cpu * 1e3:.2f} ms ({our_cpu / n * 1e3:.2f} ms on notebook_llm's transport); "
        f"{concurrency} in flight keep it {busy:.0%} busy per {latency * 1000:.0f} ms round"
    )
    print(
        f"  notebook_llm's Lua per request: fresh sandbox {costs[0]:.2f} ms, request "
        f"{costs[1]:.2f} ms, chunk transform (cold shapes) {costs[2]:.2f} ms"
    )
    print(f"wrong or missing results: {bad}; load at the end {os.getloadavg()[0]:.2f}")
    ok = max(ratios["notebook_llm.amap"], ratios["notebook_llm.map (sync, as in a notebook)"])
    met = ok <= TARGET and not bad
    print(f"goal (both notebook_llm lines <= {TARGET:.2f}x): {'met' if met else 'not met'}")
    return 0 if met else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--server", choices=["process", "thread"], default="process")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each line (median)")
    parser.add_argument("--profile", action="store_true", help="cProfile one batch by layer")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
