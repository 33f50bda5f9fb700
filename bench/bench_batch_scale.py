"""A batch at scale: 10^4 and 10^5 rows through the mock, with a journal on disk.

For each size, a fresh child process runs ``notebook_llm.amap`` over a generator of prompts
(a streamed input: nothing of it is held) with ``store=`` against the mock server (the echo
model, OpenAI's wire format, through the built-in openai Lua adapter), then runs the same call
again: the resume of a finished run, which must send nothing. Printed per size:

* CPU per row (``time.process_time`` of the child over the run: the loop, the adapter, the
  journal) and rows per second;
* the child's peak RSS (``ru_maxrss``): it should not grow with the rows;
* the journal's size on disk (the database and its WAL);
* the resume's wall time and how many rows it sent (0).

A first line runs the smaller size without a store, as ``map`` ran before journals, for the
CPU per row to compare with.

    python bench/bench_batch_scale.py [--sizes 10000 100000] [--concurrency 16]

The server: ``python -m notebook_llm.adapters.mock`` in its own process, so its CPU time is not
the client's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import asyncio, json, os, resource, sys, time
from notebook_llm import Engine
from notebook_llm.api.batch import amap

url, store, rows, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
engine = Engine(config_file=False, env_file=False, retries=0)
engine.add_provider("m", adapter="openai", base_url=url + "/v1", model="echo")


class Watch:
    run = None

    def attach(self, run):
        Watch.run = run

    def __call__(self, done, total):
        pass


def prompts():
    return (f"Classify support ticket number {i}: my order has not arrived yet" for i in range(rows))


async def once():
    kw = {"store": store} if store != "-" else {}
    cpu, wall = time.process_time(), time.perf_counter()
    out = await amap(prompts(), engine=engine, provider="m", concurrency=concurrency,
                     progress=Watch(), **kw)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    status = Watch.run.status()
    return cpu, wall, status.done, status.done - status.resumed, status.failed, out


async def main():
    cpu, wall, done, sent, failed, out = await once()
    report = {"cpu": cpu, "wall": wall, "done": done, "sent": sent, "failed": failed}
    if store != "-":
        r_cpu, r_wall, r_done, r_sent, _, _ = await once()
        report.update(resume_wall=r_wall, resume_sent=r_sent, resume_done=r_done)
    report["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(report))


asyncio.run(main())
"""


def mock_server() -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "notebook_llm.adapters.mock"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().split()[-1]


def run_child(url: str, store: str, rows: int, concurrency: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, store, str(rows), str(concurrency)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    server, url = mock_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = run_child(url, "-", args.sizes[0], args.concurrency)
            print(
                f"{args.sizes[0]:>7,} rows, no store : {1000 * base['cpu'] / base['done']:.2f} ms "
                f"CPU/row, {base['done'] / base['wall']:,.0f} rows/s, peak RSS "
                f"{base['rss_mb']:.0f} MB (results held in memory)"
            )
            rss: list[float] = []
            for rows in args.sizes:
                store = Path(tmp) / f"run-{rows}.sqlite"
                r = run_child(url, str(store), rows, args.concurrency)
                rss.append(r["rss_mb"])
                print(
                    f"{rows:>7,} rows, store    : {1000 * r['cpu'] / r['done']:.2f} ms CPU/row "
                    f"({r['cpu'] / base['cpu'] * base['done'] / r['done']:.2f}x no store), "
                    f"{r['done'] / r['wall']:,.0f} rows/s, peak RSS {r['rss_mb']:.0f} MB, "
                    f"store {size_of(store) / 1e6:.1f} MB, {int(r['failed'])} failed; resume of "
                    f"the finished run: {r['resume_wall']:.2f} s, {int(r['resume_sent'])} sent"
                )
                os.remove(store)
            if len(rss) > 1:
                print(f"peak RSS, largest over smallest size: {rss[-1] / rss[0]:.2f}x")
    finally:
        server.terminate()
        server.wait(5)


if __name__ == "__main__":
    main()
