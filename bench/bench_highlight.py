"""The worst time of each Pygments lexer on adversarial code blocks, and the bound it gets.

Run: python bench/bench_highlight.py [LEXER ...]

For each candidate lexer (``HIGHLIGHT_LEXERS`` of ``notebook_llm/notebook/widgets/safe_html.py``
and the ones left out), every shape of ``tests/test_highlight_bounds.py`` is highlighted (lexed
and formatted, as an answer's block is) at 500, 1,000, 2,000, ... characters, each size in a
child process (a lexer that runs away is killed at 120 s). The bound is the largest size at
which the worst shape took under ``HIGHLIGHT_TARGET_S``; the next size's worst is printed too,
to show how fast it grows. One run, on the machine as loaded as it is: the figures are upper
bounds of what a block costs, and the table at the end is what ``HIGHLIGHT_LEXERS`` holds.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from notebook_llm.notebook.widgets.safe_html import (  # noqa: E402
    HIGHLIGHT_LEXERS,
    HIGHLIGHT_TARGET_S,
)

#: Lexers tried beside the allowed ones (left out when even 500 characters is too slow).
CANDIDATES = sorted(HIGHLIGHT_LEXERS)
SIZES = (500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000)
CHILD_LIMIT = 120.0

_CHILD = """
import sys, time
from pygments import highlight
from tests.test_highlight_bounds import shapes
from notebook_llm.notebook.widgets.safe_html import _FORMATTER, _lexer
lexer = _lexer({name!r})
worst, which = 0.0, ""
for shape, text in shapes({n}).items():
    start = time.perf_counter()
    highlight(text, lexer, _FORMATTER)
    took = time.perf_counter() - start
    if took > worst:
        worst, which = took, shape
print(f"{{worst:.4f}}\\t{{which}}")
"""


def worst_at(name: str, n: int) -> tuple[float, str]:
    code = textwrap.dedent(_CHILD.format(name=name, n=n))
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=CHILD_LIMIT,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return float("inf"), f"still running at {CHILD_LIMIT:.0f} s"
    if done.returncode != 0:
        return float("inf"), done.stderr.strip().splitlines()[-1]
    took, which = done.stdout.strip().split("\t")
    return float(took), which


def main() -> None:
    names = sys.argv[1:] or CANDIDATES
    print(f"target: the worst shape under {HIGHLIGHT_TARGET_S} s")
    print("| lexer | bound (chars) | worst at the bound | worst at twice the bound |")
    print("|---|---|---|---|")
    bounds: dict[str, int] = {}
    for name in names:
        bound, at_bound = 0, (0.0, "")
        beyond = (float("nan"), "-")
        for n in SIZES:
            took, which = worst_at(name, n)
            if took >= HIGHLIGHT_TARGET_S:
                beyond = (took, which)
                break
            bound, at_bound = n, (took, which)
        if bound:
            bounds[name] = bound
        shown = f"{at_bound[0] * 1e3:.0f} ms ({at_bound[1]})" if bound else "-"
        print(
            f"| {name} | {bound or 'left out'} | {shown} | "
            f"{beyond[0] * 1e3:.0f} ms ({beyond[1]}) |",
            flush=True,
        )
    print("HIGHLIGHT_LEXERS = {")
    for name, bound in bounds.items():
        print(f'    "{name}": {bound:_},')
    print("}")


if __name__ == "__main__":
    main()
