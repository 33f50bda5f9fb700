"""Time from Stop to stopped, for every C function class the sandbox's budget must reach.

Run: python bench/bench_lua_stop.py

Each case of tests/test_lua_hangs.py that the CPU budget ends runs again with a patient budget
(300 s) in a child process; a StopSignal is set 0.2 s into the call, and the figure is the wall
time from ``stop.set()`` to the call's end (``ABORTED``). One run, no repetition: the figures
are upper bounds of what a user waits after pressing Stop, on this machine as loaded as it is.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_lua_hangs import CASES, T, run_stop_cases  # noqa: E402


def main() -> None:
    cases = {name: body for name, (body, code) in CASES.items() if code == T}
    got = run_stop_cases(cases)
    print(f"{len(cases)} cases, Stop set 0.2 s into the call")
    print("| case | ended with | Stop to stopped (ms) |")
    print("|---|---|---|")
    for name in cases:
        code, latency = got.get(name, ("not stopped", -1.0))
        print(f"| {name} | {code} | {latency * 1e3:.1f} |")
    latencies = [lat for _, lat in got.values() if lat >= 0]
    if latencies:
        print(
            f"median {statistics.median(latencies) * 1e3:.1f} ms, "
            f"max {max(latencies) * 1e3:.1f} ms over {len(latencies)} cases"
        )


if __name__ == "__main__":
    main()
