"""The time markdown-it-py (and the sanitizer) take on adversarial Markdown, by size.

Run: python bench/bench_markdown.py [SIZE ...]   (default: 25000 50000 100000 200000)

Every shape of ``tests/test_markdown_bounds.py`` (runs of each Markdown character, image and
link starts, emphasis, references, nested quotes and lists, many URLs, a realistic answer) is
rendered by ``_MD`` and cleaned, each size in a child process, so the figures show how each
shape grows (linear: twice the size, about twice the time) and which size the worst shape
reaches in about the time a realistic answer of a megabyte would. ``MARKDOWN_MAX_CHARS`` of
``notebook_llm/notebook/widgets/safe_html.py`` is chosen from them. One run, on the machine
as loaded as it is: compare ratios, not absolute times.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (25_000, 50_000, 100_000, 200_000)
CHILD_LIMIT = 600.0

_CHILD = """
import time
from tests.test_markdown_bounds import markdown_shapes
from notebook_llm.notebook.widgets.safe_html import _MD, clean, highlight_budget
for name, text in markdown_shapes({n}).items():
    start = time.perf_counter()
    with highlight_budget():
        clean(_MD.render(text))
    print(f"{{name}}\\t{{time.perf_counter() - start:.3f}}", flush=True)
"""


def times_at(n: int) -> dict[str, float]:
    code = textwrap.dedent(_CHILD.format(n=n))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=CHILD_LIMIT, cwd=ROOT
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    rows = (line.split("\t") for line in done.stdout.splitlines())
    return {name: float(took) for name, took in rows}


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or list(SIZES)
    table = {n: times_at(n) for n in sizes}
    names = list(table[sizes[0]])
    print("| shape | " + " | ".join(f"{n:,} chars" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name in sorted(names, key=lambda s: -table[sizes[-1]][s]):
        print(f"| {name} | " + " | ".join(f"{table[n][name]:.2f} s" for n in sizes) + " |")


if __name__ == "__main__":
    main()
