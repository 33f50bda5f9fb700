"""The batch's progress: the status a view reads (rows, failures, pace, ETA, cost, limits), the
notebook's view (live line, latest errors, Stop, one static summary at the end)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from notebook_llm import Engine, ErrorCode, Event, GenerateOptions, LlmAdapter, LlmError, StopSignal
from notebook_llm.adapters.mock.direct_adapter import MockAdapter
from notebook_llm.api.batch import amap
from notebook_llm.api.observers import BatchStatus
from notebook_llm.notebook.progress import BatchView


class Slow(LlmAdapter):
    """Echo after a wait it is told to end; ``bad`` prompts fail."""

    name = "slow"

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.inner = MockAdapter()

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        text = options.messages[-1].text
        if text.startswith("bad"):
            raise LlmError("refused <b>bold</b>", ErrorCode.INVALID_REQUEST, status=400)
        if text.startswith("wait"):
            await self.go.wait()
        async for event in self.inner.stream(options):
            yield event


class Watch:
    """A caller's progress object that attaches to the run and records statuses."""

    def __init__(self) -> None:
        self.run: Any = None
        self.seen: list[tuple[int, int]] = []
        self.two_done = asyncio.Event()

    def attach(self, run: Any) -> None:
        self.run = run

    def __call__(self, done: int, total: int) -> None:
        self.seen.append((done, total))
        if done >= 2:
            self.two_done.set()


def engine_with(adapter: LlmAdapter) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("s", adapter=adapter, model="echo", prices={"echo": (1.0, 2.0)})
    return engine


async def test_the_status_counts_rows_failures_cost_and_limits() -> None:
    watch = Watch()
    await amap(["a", "bad 1", "b", "bad 2"], engine=engine_with(Slow()), provider="s",
               progress=watch, rpm=600)  # fmt: skip
    status: BatchStatus = watch.run.status()
    assert (status.done, status.failed, status.total, status.finished) == (4, 2, 4, True)
    assert status.spent is not None
    assert status.spent > 0
    assert "600 rpm (set)" in status.rate_limits
    line = status.line()
    assert "4/4 rows" in line
    assert "2 failed" in line
    assert "spent" in line
    assert [pos for pos, _ in watch.run.errors()] == [1, 3]


async def test_stop_from_a_view_ends_cleanly_and_keeps_what_is_done() -> None:
    adapter = Slow()
    watch = Watch()
    stop = StopSignal()
    task = asyncio.ensure_future(
        amap(
            ["a", "b", "wait 1", "wait 2"],
            engine=engine_with(adapter),
            provider="s",
            progress=watch,
            stop_signal=stop,
            concurrency=4,
        )
    )
    await asyncio.wait_for(watch.two_done.wait(), 60)
    assert [r.text for _, r in watch.run.latest()] == ["a", "b"]  # inspectable while it runs
    watch.run.stop("enough")
    results = await asyncio.wait_for(task, 60)
    assert [r.text for r in results[:2]] == ["a", "b"]
    assert all(isinstance(r, LlmError) and r.code == "ABORTED" for r in results[2:])


class FakeHandle:
    def __init__(self) -> None:
        self.updates: list[dict[str, str]] = []

    def update(self, data: dict[str, str], raw: bool = False) -> None:
        self.updates.append(data)


async def test_the_view_shows_the_line_and_errors_then_one_static_summary(
    comms: list[tuple[str, str]],
) -> None:
    handle = FakeHandle()
    shown: list[Any] = []

    def display(obj: Any, display_id: bool = False) -> FakeHandle:
        shown.append(obj)
        return handle

    view = BatchView(3, display)
    lines: list[str] = []
    original = view._draw

    def draw(force: bool = False) -> None:
        original(force=True)
        lines.append(view.line.value + view.rows.value)

    view._draw = draw  # type: ignore[method-assign]
    await amap(["x", "bad <script>", "y"], engine=engine_with(Slow()), provider="s",
               progress=view)  # fmt: skip
    assert any("1 failed" in line for line in lines)
    assert any("latest errors" in line and "&lt;b&gt;bold&lt;/b&gt;" in line for line in lines)
    assert not any("<script>" in line for line in lines)
    (summary,) = handle.updates
    assert "3/3 rows, 1 failed" in summary["text/plain"]
    assert "<pre>" in summary["text/html"]
    assert view.closed
    # The Stop button is shown only where its click can reach the batch (the kernel's loop).
    assert view.stop_button.layout.display is None
