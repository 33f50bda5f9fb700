"""MCP in the tool loop: a server's start, a call's round trip, and Stop on a hanging call.

Run: python bench/bench_mcp.py [ROUNDS]

The test fault server (tests/fixtures/mcp/fault_server.py, the SDK's MCPServer over stdio) and
the mock model, in this process. Figures, from one run on this machine as loaded as it is:

* start: the first ``mcp:`` turn's server start (spawn, handshake, tool listing);
* call: one ``echo`` call's round trip (``McpServers.call``), median and max of ROUNDS (20);
* Stop: ``stop.set()`` pressed once the server runs the ``hang`` call (the ``started`` file
  its handler writes), to ``run_tools`` returning ``ABORTED``, and to the server's handler
  seeing the protocol's cancellation (the ``cancelled`` file it writes then), median and max
  of 5, and whether every one was within a second (the promise ``docs/mcp.md`` makes);
* stop and reap: ``McpServers.close()`` with the server running.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULT_SERVER = ROOT / "tests" / "fixtures" / "mcp" / "fault_server.py"


async def main(rounds: int) -> None:
    from notebook_llm import Engine, LlmError, StopSignal, run_tools
    from notebook_llm.api.mcp import servers as servers_module
    from notebook_llm.api.mcp.servers import McpServers

    marks = Path(tempfile.mkdtemp())
    servers = McpServers()
    servers_module._default = servers
    servers.add_server(
        "faults",
        command=sys.executable,
        args=[str(FAULT_SERVER)],
        env={"MARK_DIR": str(marks)},
    )
    engine = Engine()
    started = time.perf_counter()
    await run_tools(engine, "mock", "tools", prompt='Echo "x"', tools=["mcp:faults/echo"])
    first = time.perf_counter() - started

    calls = []
    for i in range(rounds):
        t = time.perf_counter()
        await servers.call("faults", "echo", {"text": str(i)})
        calls.append(time.perf_counter() - t)

    stops, cancels = [], []
    for _ in range(5):
        for name in ("started", "cancelled"):
            (marks / name).unlink(missing_ok=True)
        stop = StopSignal()
        running = asyncio.ensure_future(
            run_tools(
                engine,
                "mock",
                "tools",
                prompt="hang",
                tools=["mcp:faults/hang"],
                stop_signal=stop,
            )
        )
        # Stop is pressed once the server runs the call (its handler writes "started")
        while not (marks / "started").exists():  # noqa: ASYNC110 (a file another process writes)
            await asyncio.sleep(0.001)
        pressed = time.perf_counter()
        stop.set()
        with contextlib.suppress(LlmError):  # ABORTED: the Stop
            await running
        stops.append(time.perf_counter() - pressed)
        while not (marks / "cancelled").exists():  # noqa: ASYNC110 (a file another process writes)
            await asyncio.sleep(0.001)
        cancels.append(time.perf_counter() - pressed)

    t = time.perf_counter()
    await asyncio.to_thread(servers.close)
    closed = time.perf_counter() - t

    def ms(values: list[float]) -> str:
        return f"median {statistics.median(values) * 1e3:.0f} ms, max {max(values) * 1e3:.0f} ms"

    print(f"first mcp: turn (server start, handshake, listing, one call): {first:.2f} s")
    print(f"echo call round trip, {rounds} calls: {ms(calls)}")
    print(f"Stop to run_tools returning ABORTED, 5 runs: {ms(stops)}")
    print(f"Stop to the server seeing notifications/cancelled, 5 runs: {ms(cancels)}")
    within = "yes" if max(stops) < 1.0 and max(cancels) < 1.0 else "NO"
    print(f"Stop within a second (the documented promise), every run: {within}")
    print(f"close() with the server running (stop, reap): {closed:.2f} s")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
