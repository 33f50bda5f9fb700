"""The mock streams at a reading pace where someone watches, and at once where no one does.

No timing is asserted: the pacer's clock and sleep are replaced, so each test checks the waits
the pacer asks for, which are exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from notebook_llm import Engine
from notebook_llm.adapters.mock import pace
from notebook_llm.adapters.mock.models import count_tokens
from notebook_llm.core.protocol import Event, TextDelta


class FakeClock:
    """``time.monotonic`` and ``asyncio.sleep`` for the pacer: sleeping moves the clock."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    fake = FakeClock()
    monkeypatch.setattr(pace, "_clock", fake.monotonic)
    monkeypatch.setattr(pace, "_sleep", fake.sleep)
    monkeypatch.delenv(pace.PACE_ENV, raising=False)
    yield fake
    pace.set_pace(None)


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> None:
    import notebook_llm.notebook.watching as frontend

    monkeypatch.setattr(frontend, "interactive", lambda: True)


def _engine() -> Engine:
    return Engine(config_file=False, env_file=False, retries=0)


@pytest.mark.parametrize("provider", ["mock", "mock-direct"])
async def test_a_watched_answer_streams_at_the_default_pace(
    clock: FakeClock, watched: None, provider: str
) -> None:
    engine = _engine()
    texts = []
    async for event in engine.stream(provider, "lorem", prompt="go", max_tokens=200):
        if isinstance(event, TextDelta):
            texts.append(event.text)
    tokens = count_tokens("".join(texts))
    assert tokens == 200
    last = count_tokens(texts[-1])
    # each delta is due when the tokens before it have had 1/40 s each
    assert sum(clock.waits) == pytest.approx((tokens - last) / pace.DEFAULT_PACE)
    assert len(clock.waits) == len(texts) - 1
    assert 30 <= pace.DEFAULT_PACE <= 60


@pytest.mark.parametrize("provider", ["mock", "mock-direct"])
async def test_an_unwatched_answer_comes_at_once(clock: FakeClock, provider: str) -> None:
    # pytest: no kernel, no one watching (as nbclient, nbval, scripts and the CLI)
    completion = await _engine().complete(provider, "lorem", prompt="go", max_tokens=200)
    assert count_tokens(completion.text) == 200
    assert clock.waits == []


async def test_the_session_and_the_environment_set_the_pace(
    clock: FakeClock, watched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(pace.PACE_ENV, "10")
    assert pace.watched_pace() == 10
    pace.set_pace(0)
    assert pace.watched_pace() == 0
    completion = await _engine().complete("mock", "lorem", prompt="go", max_tokens=50)
    assert count_tokens(completion.text) == 50
    assert clock.waits == []
    pace.set_pace(None)
    monkeypatch.setenv(pace.PACE_ENV, "not a number")
    assert pace.watched_pace() == pace.DEFAULT_PACE
    with pytest.raises(ValueError, match="tokens per second"):
        pace.set_pace(-1)


async def test_a_slow_consumer_is_not_made_slower(clock: FakeClock) -> None:
    async def deltas() -> AsyncIterator[Event]:
        for _ in range(5):
            yield TextDelta(0, " word")

    seen = []
    async for event in pace.paced(deltas(), 10):
        seen.append(event)
        clock.now += 0.25  # the consumer takes longer than the pace asks for
    assert len(seen) == 5
    assert clock.waits == []


async def test_closing_the_paced_stream_closes_the_one_under_it(clock: FakeClock) -> None:
    closed = []

    async def deltas() -> AsyncIterator[Event]:
        try:
            while True:
                yield TextDelta(0, " word")
        finally:
            closed.append(True)

    stream = pace.paced(deltas(), 40)
    await anext(stream)
    await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    assert closed == [True]


def test_llm_pace_sets_and_shows_the_pace(clock: FakeClock) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "notebook_llm")
    try:
        with capture_output() as cap:
            ip.run_line_magic("llm", "pace 25")
        assert pace.current_pace() == 25
        assert "25 tokens/s" in cap.stdout
        with capture_output() as cap:
            ip.run_line_magic("llm", "pace 0")
        assert "at once" in cap.stdout
        with capture_output() as cap:
            ip.run_line_magic("llm", "pace fast")
        assert cap.stderr.startswith("UsageError: %llm pace takes tokens per second")
        assert pace.current_pace() == 0
        with capture_output() as cap:
            ip.run_line_magic("llm", "help")
        assert "%llm pace" in cap.stdout
    finally:
        ip.run_line_magic("unload_ext", "notebook_llm")


def _kernel_pace(allow_stdin: bool) -> Any:
    """``watched_pace()`` inside a real kernel, for a request sent with ``allow_stdin``:
    ``True`` as JupyterLab, Notebook 7 and VS Code send it, ``False`` as nbclient does."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=300)
    try:
        code = "from notebook_llm.adapters.mock.pace import watched_pace; print(watched_pace())"
        out: list[str] = []

        def keep(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])

        kc.execute_interactive(code, allow_stdin=allow_stdin, output_hook=keep, timeout=60)
        return float("".join(out))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_a_front_end_watches_and_nbclient_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv(pace.PACE_ENV, raising=False)
    assert _kernel_pace(allow_stdin=True) == pace.DEFAULT_PACE
    assert _kernel_pace(allow_stdin=False) == 0
