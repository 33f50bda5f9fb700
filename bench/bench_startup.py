"""Start-up cost: ``%load_ext notebook_llm``, and a first ``%%llm mock:echo`` cell to its first token.

    python bench/bench_startup.py [--runs 7]

Each run is a FRESH Python process (imports are what is measured, and a warm process has them
cached): it starts an IPython ``InteractiveShell`` and runs one empty cell (not timed: "on top
of a running IPython", whose first cell compiles IPython's own tokenizer), then times

* ``%load_ext notebook_llm`` (goal: under 100 ms; it starts the background warm-up of
  ``notebook_llm/notebook/magics/warmup.py``, which is not part of this figure);
* a first ``%%llm mock:echo`` cell, from ``run_cell`` to the first ``TextDelta`` the engine
  makes, in two kinds of processes: one that runs it 1 s after ``%load_ext`` (a cell typed or
  run by hand: the warm-up has loaded the engine, httpx, lupa, the openai.lua bytecode and the
  mock server by then; goal: under 50 ms over the server's latency), and one that runs it at
  once (Run All: the cell waits for the warm-up and shares its work). ``--no-warmup`` measures
  with the warm-up turned off (``NOTEBOOK_LLM_WARMUP=0``), as the cell was before it;
* a second such cell (warm: what every later cell costs);
* the mock server's own latency: a plain ``httpx`` POST of the same request to the same server,
  timed to its first ``data:`` line (median of 20, on a warm connection).

The first token is caught without importing anything before the clock starts: an import hook
wraps ``TextDelta.__init__`` when ``notebook_llm.core.protocol`` is first imported (by the cell).
The parent prints the median of each figure over the runs, beside its goal.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

LOAD_EXT_GOAL_MS = 100.0
FIRST_CELL_GOAL_MS = 50.0  # over the server's own latency

CHILD = r"""
import contextlib, importlib.abc, importlib.util, io, json, sys, time

first: list[float] = []

class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "notebook_llm.core.protocol":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            init = module.TextDelta.__init__
            def timed(self, *a, **k):
                if not first:
                    first.append(time.perf_counter())
                init(self, *a, **k)
            module.TextDelta.__init__ = timed
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Hook())

from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("pass")  # a running IPython has run a cell: its cell tokenizer is compiled
out = {}
t0 = time.perf_counter()
shell.run_line_magic("load_ext", "notebook_llm")
out["load_ext"] = time.perf_counter() - t0
out["modules_after_load_ext"] = sorted(
    m for m in ("httpx", "lupa", "ipywidgets", "notebook_llm.engine.engine") if m in sys.modules
)
time.sleep(PAUSE)

def cell(prompt):
    first.clear()
    sink = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        shell.run_cell("%%llm mock:echo\n" + prompt)
    done = time.perf_counter()
    if not first:
        raise SystemExit("no token arrived: " + sink.getvalue()[-500:])
    return first[0] - t0, done - t0

out["first_cell_token"], out["first_cell_total"] = cell("hello there")
out["second_cell_token"], out["second_cell_total"] = cell("hello again")

import httpx
from notebook_llm.adapters.mock.shared import shared_server

url = shared_server().url + "/v1/chat/completions"
body = {"model": "echo", "stream": True, "messages": [{"role": "user", "content": "hello again"}]}
lat = []
with httpx.Client() as client:
    for _ in range(21):
        t0 = time.perf_counter()
        with client.stream("POST", url, json=body) as r:
            seen = False
            for line in r.iter_lines():
                if not seen and line.startswith("data: "):
                    lat.append(time.perf_counter() - t0)
                    seen = True
out["server_latency"] = statistics.median(lat[1:])
print("RESULT " + json.dumps(out))
"""


def run_child(pause: float, warmup: bool = True) -> dict[str, object]:
    env = dict(os.environ)
    env["NOTEBOOK_LLM_WARMUP"] = "1" if warmup else "0"
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    # An installed package has its bytecode compiled (pip does it at install time): let the
    # warm-up run write it, so no run measures compiling the sources.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(
        [sys.executable, "-c", f"import statistics\nPAUSE = {pause!r}\n" + CHILD],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, object] = json.loads(line[7:])
            return result
    raise SystemExit(f"the child failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-warmup", action="store_true", help="NOTEBOOK_LLM_WARMUP=0")
    args = parser.parse_args()
    warm = not args.no_warmup
    run_child(0.0, warm)  # warm-up run: writes the bytecode caches, warms the OS file cache
    typed = [run_child(1.0, warm) for _ in range(args.runs)]
    at_once = [run_child(0.0, warm) for _ in range(args.runs)]

    def med(runs: list[dict[str, object]], key: str) -> float:
        return statistics.median(float(r[key]) for r in runs) * 1e3  # type: ignore[arg-type]

    load = med(typed + at_once, "load_ext")
    latency = med(typed + at_once, "server_latency")
    first = med(typed, "first_cell_token")
    first_now = med(at_once, "first_cell_token")
    second = med(typed, "second_cell_token")
    loaded = typed[-1]["modules_after_load_ext"]
    over = first - latency
    print(
        f"median of {args.runs} fresh processes per row (IPython already running in each); "
        f"warm-up {'on' if warm else 'OFF'}"
    )
    print(
        f"  %load_ext notebook_llm          {load:8.1f} ms   "
        f"(goal < {LOAD_EXT_GOAL_MS:.0f} ms: {'met' if load < LOAD_EXT_GOAL_MS else 'NOT met'})"
    )
    print(f"    heavy modules loaded by it:   {', '.join(loaded) or 'none'}")  # type: ignore[arg-type]
    print(f"  mock server's own latency       {latency:8.1f} ms   (httpx POST to first data line)")
    print(
        f"  first %%llm mock:echo cell      {first:8.1f} ms to its first token, 1 s after "
        f"%load_ext   ({over:+.1f} ms over the server; goal < +{FIRST_CELL_GOAL_MS:.0f} ms: "
        f"{'met' if over < FIRST_CELL_GOAL_MS else 'NOT met'})"
    )
    print(
        f"  first cell, right after it      {first_now:8.1f} ms to its first token   "
        "(Run All: waits for the warm-up, shares its work)"
    )
    print(
        f"  second %%llm mock:echo cell     {second:8.1f} ms to its first token   "
        f"({second / latency:.1f}x the server's latency)"
    )
    return 0 if load < LOAD_EXT_GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(main())
