"""Run a piece of Python in a fresh interpreter with a wall-clock limit, for the tests whose
verdict is "it ends at all".

A superlinear regex, an exponential schema walk or a parser that never returns holds the GIL,
so a hang cannot be stopped from inside the test's own process: the case runs in a child,
which is killed at ``limit``. Each caller sets a limit far above what the linear code needs on
a loaded machine, so the verdict does not depend on the machine's speed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: The repository's root: children run there, so ``tests.*`` modules import.
ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, *, limit: float, what: str) -> str:
    """Run ``code`` with ``sys.executable -c`` from the repository root and return its stdout.

    Fails the test if the child is still running after ``limit`` seconds (saying ``what`` was
    running) or ends with a non-zero status (showing the tail of its stderr)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=limit, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} still running after {limit:.0f} s")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
