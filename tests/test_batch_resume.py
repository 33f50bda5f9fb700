"""A batch with a journal survives the death of its process: SIGKILL half way, run it again.

A child process runs ``map`` over 2,000 rows with ``store=`` against a loopback mock server that
lives in the test process (so it counts every request of both runs). The child is killed with
SIGKILL at a point the test decides, never by timing:

* *between writes*: the server answers the first 1,000 requests and holds every later one
  open; once the journal holds those 1,000 rows, the test kills the child;
* *during a write*: the journal's fault-injection point (``BatchStore.write_hook``) kills the
  child inside a write transaction, right after its 1,000th row is written and before the
  transaction (a group of up to ``commit_rows`` rows) is committed.

Then the same call runs again, here. It must return all 2,000 rows; the server must have seen
each row at most twice (once more than needed: a row in flight at the kill is sent again), and
no row the journal had finished may have been sent again.
"""

from __future__ import annotations

import collections
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_llm import Completion, Engine
from notebook_llm.adapters.mock import Fault, MockServer
from notebook_llm.api.batch import map_prompts
from notebook_llm.api.batch_store import BatchStore

ROWS = 2_000
HALF = 1_000
#: The longest the child may take to reach the kill point (a generous wall-clock limit for a
#: hang, not a speed test).
LIMIT_S = 300

CHILD = """
import os, signal, sys
from notebook_llm import Engine
from notebook_llm.api.batch import map_prompts
from notebook_llm.api.batch_store import BatchStore
from notebook_llm.api.batch_store import BatchStore

url, store, mode, half = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
engine = Engine(config_file=False, env_file=False, retries=0)
engine.add_provider("loop", adapter="openai", base_url=url + "/v1", model="echo")
if mode == "during-write":
    writes = [0]

    def kill_in_write(point):
        if point != "row-written":
            return
        writes[0] += 1
        if writes[0] == half:  # the row is written, its transaction not committed
            os.kill(os.getpid(), signal.SIGKILL)

    BatchStore.write_hook = staticmethod(kill_in_write)
map_prompts(
    [f"row {i}" for i in range(int(sys.argv[5]))],
    engine=engine, provider="loop", store=store, concurrency=8, progress=False,
)
print("finished without being killed")
"""


class HaltingServer(MockServer):
    """The mock server, holding every generation request after the first ``halt_after`` open
    (no byte of an answer) until it stops."""

    def __init__(self, halt_after: int | None) -> None:
        super().__init__()
        self.halt_after = halt_after

    def _next_fault(self, header: str | None) -> Fault | None:
        if self.halt_after is not None and len(self.requests) > self.halt_after:
            return Fault("stall", {"after": 0, "seconds": 3600.0})
        return super()._next_fault(header)


@pytest.fixture
def server() -> Iterator[HaltingServer]:
    with HaltingServer(halt_after=None) as srv:
        yield srv


def prompts() -> list[str]:
    return [f"row {i}" for i in range(ROWS)]


def journal_rows(path: Path) -> dict[str, str]:
    """``{prompt: status}`` of the rows the journal holds, read without the package."""
    if not path.exists():
        return {}
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT prompt, status FROM rows").fetchall())
    except sqlite3.OperationalError:  # the child has not created the tables yet
        return {}
    finally:
        conn.close()


def start_child(srv: MockServer, store: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, srv.url, str(store), mode, str(HALF), str(ROWS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_for(condition: object, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not condition():  # type: ignore[operator]
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the child ended before {what}: {proc.returncode}\n{out}\n{err[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the child did not reach {what} within {LIMIT_S} s")
        time.sleep(0.05)


def rerun_and_check(srv: MockServer, store: Path, first_run_sent: collections.Counter[str]) -> None:
    finished_before = {p for p, status in journal_rows(store).items() if status == "done"}
    assert finished_before, "the first run journaled nothing"
    srv.halt_after = None  # type: ignore[attr-defined]
    srv.clear_requests()
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("loop", adapter="openai", base_url=srv.url + "/v1", model="echo")
    results = map_prompts(
        prompts(), engine=engine, provider="loop", store=str(store), concurrency=8, progress=False
    )
    second_run_sent = collections.Counter(_prompt(r.body) for r in srv.requests)
    # Every row comes back, in order.
    assert len(results) == ROWS
    assert [r.text if isinstance(r, Completion) else r for r in results] == prompts()
    # No finished row was sent again...
    assert not finished_before & set(second_run_sent)
    # ...and every row reached the server at most once more than needed.
    total = first_run_sent + second_run_sent
    assert set(total) == set(prompts())
    assert max(total.values()) <= 2
    print(
        f"journaled before the kill: {len(finished_before)}; sent again: "
        f"{sum(1 for n in total.values() if n == 2)}; sent in the second run: "
        f"{sum(second_run_sent.values())}"
    )


def _prompt(body: object) -> str:
    assert isinstance(body, dict)
    return str(body["messages"][-1]["content"])


def test_sigkill_between_writes_then_resume(server: HaltingServer, tmp_path: Path) -> None:
    store = tmp_path / "reviews.sqlite"
    server.halt_after = HALF
    child = start_child(server, store, "between-writes")
    try:
        # The first HALF requests are answered; the child journals each answer as it arrives.
        wait_for(lambda: len(journal_rows(store)) >= HALF, child, f"{HALF} journaled rows")
        child.send_signal(signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=60)  # reaps it and closes its pipes
    assert child.returncode == -signal.SIGKILL
    first_run_sent = collections.Counter(_prompt(r.body) for r in server.requests)
    assert len(journal_rows(store)) == HALF  # nothing after the halt was answered
    rerun_and_check(server, store, first_run_sent)


def test_sigkill_during_a_write_then_resume(server: HaltingServer, tmp_path: Path) -> None:
    store = tmp_path / "reviews.sqlite"
    child = start_child(server, store, "during-write")
    out, err = child.communicate(timeout=LIMIT_S)
    assert child.returncode == -signal.SIGKILL, (out, err[-2000:])
    first_run_sent = collections.Counter(_prompt(r.body) for r in server.requests)
    # The rows of the open transaction are not in the journal: rolled back, not torn; the
    # ones committed before are all there.
    journaled = len(journal_rows(store))
    assert HALF - BatchStore.commit_rows <= journaled < HALF
    conn = sqlite3.connect(store)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    rerun_and_check(server, store, first_run_sent)


def test_a_finished_run_sends_nothing_again(server: MockServer, tmp_path: Path) -> None:
    store = tmp_path / "done.sqlite"
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("loop", adapter="openai", base_url=server.url + "/v1", model="echo")
    rows = [f"row {i}" for i in range(50)]
    first = map_prompts(rows, engine=engine, provider="loop", store=str(store), progress=False)
    server.clear_requests()
    again = map_prompts(rows, engine=engine, provider="loop", store=str(store), progress=False)
    assert server.requests == []
    assert [r.text for r in again] == [r.text for r in first] == rows
