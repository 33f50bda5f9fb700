"""Batch throughput: 200 prompts against the mock server with 100 ms latency, concurrency 16.

Ideal wall time is 200 / 16 x 0.1 s = 1.25 s; the target is within 1.25x of that.

    python bench/bench_batch.py [--prompts 200] [--concurrency 16] [--latency 0.1]
                                [--server thread|process]

``thread`` (default) runs the ``MockServer`` in this process, as the tests do; ``process`` runs
``python -m notebook_llm.mock`` in a child process, so the server's work does not share this
process's GIL (closer to a remote provider). A second line measures the scheduler alone: the
same batch through an in-process adapter that only sleeps ``latency`` (no HTTP, no Lua), which
shows how much of the gap is :func:`notebook_llm.batch.amap` itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

from notebook_llm import Completion, Engine, Event, GenerateOptions, LlmAdapter
from notebook_llm.batch import amap, map_prompts
from notebook_llm.mock.direct_adapter import MockAdapter
from notebook_llm.mock.server import MockServer

TARGET = 1.25


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


async def measure(engine: Engine, provider: str, n: int, concurrency: int) -> tuple[float, int]:
    """Wall time of one batch of ``n`` prompts, and how many results are wrong or missing."""
    # Warm-up: load the adapter outside the measurement.
    await amap(["warm-up"] * concurrency, engine=engine, provider=provider, progress=False)
    prompts = [f"prompt number {i}" for i in range(n)]
    start = time.perf_counter()
    results = await amap(
        prompts, engine=engine, provider=provider, concurrency=concurrency, progress=False
    )
    wall = time.perf_counter() - start
    bad = sum(
        1 for i, r in enumerate(results) if not isinstance(r, Completion) or r.text != prompts[i]
    )
    return wall, bad


async def run(n: int, concurrency: int, latency: float, kind: str) -> int:
    ideal = n / concurrency * latency
    engine = Engine(config_file=False, env_file=False)
    with server(kind, latency) as url:
        engine.add_provider("bench", adapter="openai", base_url=url + "/v1", model="echo")
        wall, bad = await measure(engine, "bench", n, concurrency)
        prompts = [f"prompt number {i}" for i in range(n)]
        start = time.perf_counter()
        sync_results = map_prompts(
            prompts, engine=engine, provider="bench", concurrency=concurrency, progress=False
        )
        sync_wall = time.perf_counter() - start
        bad += sum(
            1
            for i, r in enumerate(sync_results)
            if not isinstance(r, Completion) or r.text != prompts[i]
        )
    engine.add_provider("sleepy", adapter=SleepyMock(latency), model="echo")
    s_wall, s_bad = await measure(engine, "sleepy", n, concurrency)
    print(
        f"prompts={n} concurrency={concurrency} latency={latency * 1000:.0f}ms ideal={ideal:.3f}s"
    )
    print(
        f"mock server ({kind}): wall {wall:.3f}s, ratio {wall / ideal:.3f}x "
        f"(target <= {TARGET}x), wrong/missing {bad}"
    )
    print(
        f"notebook_llm.map (sync, as in a notebook): wall {sync_wall:.3f}s, ratio {sync_wall / ideal:.3f}x"
    )
    print(f"scheduler only:       wall {s_wall:.3f}s, ratio {s_wall / ideal:.3f}x, wrong {s_bad}")
    ok = max(wall, sync_wall) / ideal <= TARGET and not bad and not s_bad
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--server", choices=["thread", "process"], default="thread")
    args = parser.parse_args()
    return asyncio.run(run(args.prompts, args.concurrency, args.latency, args.server))


if __name__ == "__main__":
    sys.exit(main())
