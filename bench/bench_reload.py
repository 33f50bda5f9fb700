"""How long loading and hot-reloading an adapter of a few hundred lines takes.

Run: ``python bench/bench_reload.py [PATH.lua ...]`` (default: adapters/anthropic.lua and
adapters/gemini.lua). Prints, per script:

* cold load: the first ``LuaAdapter.from_source`` of a source never seen (compile + run);
* load (cached bytecode): ``from_source`` of the same text again;
* reload (edited source): ``adapter.reload(text)`` with a different version string each time,
  i.e. what ``%%adapter``, the playground and ``%adapter watch`` do on every edit;
* reload (unchanged): ``adapter.reload()`` of the same text;
* engine.load_adapter: the hot-reload path of the magics (existing name, new text).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.engine.engine import Engine

ROOT = Path(__file__).resolve().parent.parent


def _time(fn: Callable[[int], object], n: int) -> tuple[float, float]:
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), min(samples)


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:8.1f} µs"


def bench(path: Path, n: int = 200) -> None:
    source = path.read_text("utf-8")
    lines = source.count("\n")
    print(f"\n{path.name}: {lines} lines, {len(source)} bytes")

    t0 = time.perf_counter()
    adapter = LuaAdapter.from_source(source + "\n-- cold", name=path.stem)
    print(f"  cold load (compile + run)      {_fmt(time.perf_counter() - t0)}")

    med, best = _time(lambda i: LuaAdapter.from_source(source, name=path.stem), n)
    print(f"  load (cached bytecode)         {_fmt(med)} median, {_fmt(best)} best")

    def edited(i: int) -> None:
        adapter.reload(source + f"\n-- edit {i}")

    med, best = _time(edited, n)
    print(f"  reload (edited source)         {_fmt(med)} median, {_fmt(best)} best")

    med, best = _time(lambda i: adapter.reload(source), n)
    print(f"  reload (unchanged source)      {_fmt(med)} median, {_fmt(best)} best")

    engine = Engine(config_file=False, env_file=False)
    engine.load_adapter(source, name=path.stem)
    med, best = _time(lambda i: engine.load_adapter(source + f"\n-- v{i}", name=path.stem), n // 2)
    print(f"  engine.load_adapter (hot)      {_fmt(med)} median, {_fmt(best)} best")


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [
        ROOT / "adapters" / "anthropic.lua",
        ROOT / "adapters" / "gemini.lua",
    ]
    print("Adapter load / hot-reload times (one fresh sandboxed Lua 5.4 state per load)")
    for path in paths:
        bench(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
