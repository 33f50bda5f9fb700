"""Batch throughput: 200 prompts at concurrency 16 against the mock server, at 500 ms and at
100 ms of latency, in one run.

Sixteen at a time is 13 rounds, the last one half full, so no client can finish before
ceil(200 / 16) x latency: the whole-rounds floor (6.5 s at 500 ms). The goal is within
1.03x of that floor at 500 ms; the 100 ms figure is printed beside it.

    python bench/bench_batch.py [--prompts 200] [--concurrency 16] [--latency 0.5 0.1]
                                [--server process|thread] [--repeat 1] [--profile]

The server: ``python -m notebook_llm.adapters.mock`` in a child process (the default, ``process``), so
its work does not share the client's GIL and CPU time; ``thread`` runs it in this process. For
each prompt it waits ``latency``, then streams the echo model's answer as OpenAI does (six SSE
events, each its own HTTP chunk).

Lines, each run ``--repeat`` times with the clients taking turns (median, and the range):

* ``notebook_llm.amap``: the batch through the built-in openai Lua adapter, with its request
  slots (up to 8 prompts prepared ahead, ``notebook_llm/wire/slots.py``), and the same adapter
  without them (``takes_request_slot = False``: ``concurrency`` workers), side by side;
  ``notebook_llm.map``: from synchronous code, as in a notebook (the background loop).
* ``plain httpx``: an ``httpx.AsyncClient`` and 16 tasks reading each stream to its end without
  parsing it, on ``httpx_aiohttp.AiohttpTransport`` (what notebook_llm's transport is) and on
  httpx's default transport (httpcore, h11).
* ``raw sockets``: no HTTP library, prebuilt requests on keep-alive sockets: the floor this
  server and the loopback set for any client.
* ``scheduler only``: :func:`notebook_llm.api.batch.amap` over an in-process adapter that only
  sleeps ``latency``.

Then the CPU time per request on the loop's thread (``time.process_time``): the whole pipeline
(notebook_llm.amap) next to plain httpx on AiohttpTransport and on httpx's default transport.
``--profile`` runs one more batch under cProfile and prints its CPU time by layer.
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
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.mock.direct_adapter import MockAdapter
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.api.batch import amap, map_prompts
from notebook_llm.engine.routing.lua_files import builtin_adapters_dir
from notebook_llm.wire.transport import shared_ssl_context

#: The goal at the first latency (500 ms): wall time over the whole-rounds floor.
TARGET = 1.03


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
    cmd = [sys.executable, "-m", "notebook_llm.adapters.mock", "--latency", str(latency)]
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
    url: str, n: int, concurrency: int, aiohttp: bool = False
) -> Callable[[], Awaitable[int]]:
    """The batch with a bare ``httpx.AsyncClient``: post, read the stream to its end; on
    httpx's default transport, or (``aiohttp``) on ``httpx_aiohttp.AiohttpTransport``."""
    body = request_bodies(n)
    headers = {"content-type": "application/json", "accept": "text/event-stream"}

    async def run() -> int:
        bad = 0
        todo = iter(range(n))
        from httpx_aiohttp import AiohttpTransport

        transport = AiohttpTransport(verify=shared_ssl_context()) if aiohttp else None
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


#: Profile rows by layer: the first of these found in a function's file name.
LAYERS = [
    ("notebook_llm/adapters/lua/", "notebook_llm Lua adapter (sandbox, hooks, SSE)"),
    ("notebook_llm/wire/", "notebook_llm wire (SSE framing, body decoding, transport)"),
    ("/aiohttp/", "aiohttp (pool, HTTP/1.1 parsing)"),
    ("/httpx_aiohttp/", "httpx-aiohttp"),
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
        if "aiohttp" in name or "_http_parser" in name:  # llhttp, under aiohttp
            return "aiohttp (pool, HTTP/1.1 parsing)"
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


async def one_latency(args: argparse.Namespace, latency: float) -> tuple[float, int]:
    """Every line at one latency; returns notebook_llm.amap's ratio to the floor and the count
    of wrong results."""
    n, concurrency = args.prompts, args.concurrency
    floor = math.ceil(n / concurrency) * latency
    engine = Engine(config_file=False, env_file=False)
    engine.add_provider("sleepy", adapter=SleepyMock(latency), model="echo")
    prompts = prompts_of(n)
    print(
        f"\nprompts={n} concurrency={concurrency} latency={latency * 1000:.0f}ms "
        f"whole-rounds floor={floor:.3f}s server={args.server} load={os.getloadavg()[0]:.2f}"
    )
    lines: dict[str, list[tuple[float, float, int]]] = collections.defaultdict(list)
    with server(args.server, latency) as url:
        engine.add_provider("bench", adapter="openai", base_url=url + "/v1", model="echo")
        unslotted = LuaAdapter.from_file(builtin_adapters_dir() / "openai.lua")
        unslotted.takes_request_slot = False  # concurrency workers, no prompts prepared ahead
        engine.add_provider("noslots", adapter=unslotted, base_url=url + "/v1", model="echo")

        def batch_of(provider: str) -> Callable[[], Awaitable[int]]:
            async def go() -> int:
                res = await amap(
                    prompts,
                    engine=engine,
                    provider=provider,
                    concurrency=concurrency,
                    progress=False,
                )
                return wrong(list(res), prompts)

            return go

        async def ours_sync() -> int:
            res = map_prompts(
                prompts, engine=engine, provider="bench", concurrency=concurrency, progress=False
            )
            return wrong(list(res), prompts)

        runs = {
            "notebook_llm.amap (request slots)": batch_of("bench"),
            "notebook_llm.amap (no request slots)": batch_of("noslots"),
            "notebook_llm.map (sync, as in a notebook)": ours_sync,
            "plain httpx on AiohttpTransport": plain_httpx(url, n, concurrency, True),
            "plain httpx on its default transport": plain_httpx(url, n, concurrency),
            "raw sockets (no HTTP library)": raw_sockets(url, n, concurrency),
            "scheduler only (no HTTP, no Lua)": batch_of("sleepy"),
        }
        warm = ["warm-up"] * concurrency
        for provider in ("bench", "noslots"):
            await amap(
                warm, engine=engine, provider=provider, concurrency=concurrency, progress=False
            )
        map_prompts(warm, engine=engine, provider="bench", concurrency=concurrency, progress=False)
        for _ in range(args.repeat):
            for name, batch in runs.items():
                lines[name].append(await timed(batch))
        if args.profile:
            await profile_batch(engine, n, concurrency)
    ratios: dict[str, float] = {}
    bad = 0
    for name, results in lines.items():
        walls = sorted(wall for wall, _, _ in results)
        ratios[name] = statistics.median(walls) / floor
        bad += sum(b for _, _, b in results)
        span = f" (runs {walls[0] / floor:.3f}x-{walls[-1] / floor:.3f}x)" if len(walls) > 1 else ""
        print(f"{name:42s} wall {statistics.median(walls):.3f}s = {ratios[name]:.3f}x floor{span}")

    def cpu(name: str) -> float:
        return statistics.median(c for _, c, _ in lines[name]) / n * 1e6

    print(
        f"CPU per request on the loop's thread: ours (the whole pipeline) "
        f"{cpu('notebook_llm.amap (request slots)'):.0f} us, plain httpx on AiohttpTransport "
        f"{cpu('plain httpx on AiohttpTransport'):.0f} us, httpx default "
        f"{cpu('plain httpx on its default transport'):.0f} us"
    )
    slots = ratios["notebook_llm.amap (request slots)"]
    none = ratios["notebook_llm.amap (no request slots)"]
    print(f"request slots: {slots:.3f}x with, {none:.3f}x without (ratio {none / slots:.3f})")
    return ratios["notebook_llm.amap (request slots)"], bad


async def run(args: argparse.Namespace) -> int:
    results = [await one_latency(args, latency) for latency in args.latency]
    first, bad = results[0]
    print(
        f"\nwrong or missing results: {sum(b for _, b in results)}; load {os.getloadavg()[0]:.2f}"
    )
    met = first <= TARGET and not bad
    print(
        f"goal (notebook_llm.amap <= {TARGET:.2f}x the whole-rounds floor at "
        f"{args.latency[0] * 1000:.0f} ms): {first:.3f}x, {'met' if met else 'not met'}"
    )
    return 0 if met else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, nargs="+", default=[0.5, 0.1])
    parser.add_argument("--server", choices=["process", "thread"], default="process")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each line (median)")
    parser.add_argument("--profile", action="store_true", help="cProfile one batch by layer")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
