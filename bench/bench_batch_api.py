"""The Batch API path's client-side cost: rows through ``map(..., batch_api=True)`` against the
mock server in a child process (OpenAI's Batch API, ended at its first poll), next to the same
rows through a live ``map``, in one run.

    python bench/bench_batch_api.py [--rows 2000 10000]

For each size, one line: the CPU time per row of this process (building each row's body with
the provider's Lua adapter, writing the input, mapping each answer with it, the store), the
wall time, the ratio of its CPU per row to the live path's, the store's size, and the time to
run the same call again once everything is collected (it sends nothing). The server's own work
is in its process, not counted. Wall times depend on the machine's load; the CPU figures and
the ratio are the comparable ones.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from notebook_llm.api.batch import map_prompts
from notebook_llm.api.batch_api import BatchApi
from notebook_llm.engine.engine import Engine


def _server() -> tuple[subprocess.Popen[str], str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "notebook_llm.adapters.mock", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    url = line.strip().split()[-1]
    return child, url


def _measure(engine: Engine, prompts: list[str], **options: object) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = map_prompts(prompts, provider="oa", engine=engine, progress=False, **options)  # type: ignore[arg-type]
    assert [r.text for r in out[:3]] == prompts[:3], out[:3]
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 10000])
    args = parser.parse_args()
    child, url = _server()
    try:
        engine = Engine(config_file=False)
        engine.add_provider("oa", adapter="openai", base_url=url + "/v1", model="echo")
        settings = BatchApi(api="openai", poll_first=0)
        for n in args.rows:
            prompts = [f"row {i}: a short review of a product" for i in range(n)]
            with tempfile.TemporaryDirectory() as folder:
                store = Path(folder) / "batch.sqlite"
                wall, cpu = _measure(engine, prompts, batch_api=settings, store=str(store))
                resume, _ = _measure(engine, prompts, batch_api=settings, store=str(store))
                size = os.path.getsize(store) / 1e6
                live_wall, live_cpu = _measure(
                    engine, prompts, store=str(Path(folder) / "live.sqlite"), concurrency=16
                )
            print(
                f"{n:>7,} rows: batch API {cpu / n * 1000:.2f} ms CPU/row ({wall:.1f} s wall), "
                f"live map {live_cpu / n * 1000:.2f} ms CPU/row ({live_wall:.1f} s wall), "
                f"ratio {cpu / live_cpu:.2f}; store {size:.1f} MB; "
                f"the same call again {resume:.2f} s"
            )
    finally:
        child.terminate()
        child.wait(timeout=30)


if __name__ == "__main__":
    main()
