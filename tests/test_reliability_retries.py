"""Engine retries against the mock server: capped exponential backoff with full jitter,
``Retry-After`` honoured, a configurable count, non-retryable codes not retried; the number of
requests the server received is counted every time."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from notebook_llm import Engine, ErrorCode, Event, Finish, StopSignal, assemble, validate_stream
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.core.errors import RETRYABLE_CODES
from notebook_llm.wire.http_errors import backoff_delay

ADAPTERS = Path(__file__).resolve().parent.parent / "adapters"
PROMPT = "retry me please"
GUARD = 60.0  # seconds of wall clock: a hang guard, never a verdict on speed


@pytest.fixture
def srv() -> Iterator[MockServer]:
    with MockServer() as server:
        yield server


def make_engine(
    srv: MockServer,
    *,
    retries: int = 2,
    base: float = 0.01,
    cap: float = 0.05,
    seed: int | None = None,
    read: float = 2.0,  # a wide margin over the normal gaps between chunks, on a busy machine
) -> Engine:
    eng = Engine(config_file=False, env_file=False, retries=retries, retry_base=base, retry_cap=cap)
    if seed is not None:
        eng._rng = random.Random(seed)
    ad = LuaAdapter.from_file(ADAPTERS / "openai.lua", timeout=httpx.Timeout(5.0, read=read))
    eng.add_provider("p", adapter=ad, base_url=srv.url + "/v1", model="echo")
    return eng


async def drain(eng: Engine, **kw: object) -> tuple[list[Event], float]:
    async def go() -> list[Event]:
        return [ev async for ev in eng.stream("p", prompt=PROMPT, **kw)]  # type: ignore[arg-type]

    start = time.perf_counter()
    events = await asyncio.wait_for(go(), GUARD)
    validate_stream(events)
    return events, time.perf_counter() - start


def finish_of(events: list[Event]) -> Finish:
    last = events[-1]
    assert isinstance(last, Finish)
    return last


def waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The delays the engine logged before each retry (``retrying ... waiting %.2fs``)."""
    out = []
    for rec in caplog.records:
        if rec.name == "notebook_llm.engine.engine" and rec.msg.startswith("retrying"):
            assert isinstance(rec.args, tuple)
            out.append(float(rec.args[4]))
    return out


# ---------------------------------------------------------------------------- count


@pytest.mark.parametrize("retries", [0, 1, 3, 5])
async def test_configurable_count_gives_up(srv: MockServer, retries: int) -> None:
    eng = make_engine(srv, retries=retries, base=0.001, cap=0.002)
    srv.inject("server_error", count=retries + 5, status=503)
    events, _ = await drain(eng)
    failure = finish_of(events).reason.failure
    assert failure is not None
    assert failure.code == ErrorCode.SERVER
    assert len(srv.requests) == retries + 1


@pytest.mark.parametrize("fails", [1, 2, 4])
async def test_recovers_within_count(srv: MockServer, fails: int) -> None:
    eng = make_engine(srv, retries=4, base=0.001, cap=0.002)
    srv.inject("server_error", count=fails, status=502)
    events, _ = await drain(eng)
    assert finish_of(events).reason.kind == "stop"
    assert assemble(events).text == PROMPT
    assert len(srv.requests) == fails + 1
    # nothing from the failed attempts leaked into the stream
    assert sum(1 for ev in events if isinstance(ev, Finish)) == 1


@pytest.mark.parametrize(
    ("fault", "params"),
    [
        ("rate_limit", {"seconds": 0}),
        ("server_error", {"status": 500}),
        ("disconnect", {"after": 0}),
        ("stall", {"after": 0, "seconds": 3600}),  # only the read timeout ends it
        ("error_event", {"after": 0}),  # an in-stream server error before any output
    ],
)
async def test_each_retryable_fault_is_retried(
    srv: MockServer, fault: str, params: dict[str, float]
) -> None:
    eng = make_engine(srv, retries=1)
    srv.inject(fault, **params)
    events, _ = await drain(eng)
    assert finish_of(events).reason.kind == "stop"
    assert len(srv.requests) == 2


# ---------------------------------------------------------------------------- not retried


@pytest.mark.parametrize(
    ("fault", "params", "code"),
    [
        ("unauthorized", {}, ErrorCode.AUTH),
        ("server_error", {"status": 400}, ErrorCode.INVALID_REQUEST),
        ("server_error", {"status": 404}, ErrorCode.NOT_FOUND),
        ("server_error", {"status": 403}, ErrorCode.AUTH),
        ("malformed", {"after": 0}, ErrorCode.MALFORMED_RESPONSE),
        ("wrong_format", {}, ErrorCode.MALFORMED_RESPONSE),
    ],
)
async def test_non_retryable_not_retried(
    srv: MockServer, fault: str, params: dict[str, float], code: str
) -> None:
    eng = make_engine(srv, retries=3)
    srv.inject(fault, count=4, **params)
    events, _ = await drain(eng)
    failure = finish_of(events).reason.failure
    assert failure is not None
    assert failure.code == code
    if code not in RETRYABLE_CODES:
        assert not failure.retryable
    assert len(srv.requests) == 1


async def test_unknown_model_not_retried(srv: MockServer) -> None:
    eng = make_engine(srv, retries=3)
    events, _ = await drain(eng, model="no-such-model")
    failure = finish_of(events).reason.failure
    assert failure is not None
    assert failure.code == ErrorCode.NOT_FOUND
    assert len(srv.requests) == 1


async def test_error_after_output_not_retried(srv: MockServer) -> None:
    eng = make_engine(srv, retries=3)
    srv.inject("disconnect", after=1)
    events, _ = await drain(eng)
    failure = finish_of(events).reason.failure
    assert failure is not None
    assert failure.code == ErrorCode.TRANSPORT
    assert failure.retryable
    assert assemble(events).text  # output was shown, so no retry
    assert len(srv.requests) == 1


# ---------------------------------------------------------------------------- timing


async def test_retry_after_is_honoured(srv: MockServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="notebook_llm.engine.engine")
    eng = make_engine(srv, retries=2, base=0.001, cap=0.002)
    srv.inject("rate_limit", count=2, seconds=0.3)
    events, elapsed = await drain(eng)
    assert finish_of(events).reason.kind == "stop"
    assert len(srv.requests) == 3
    assert waits(caplog) == [pytest.approx(0.3, abs=0.006)] * 2
    assert elapsed >= 0.6


async def test_retry_after_beats_the_backoff_cap(
    srv: MockServer, caplog: pytest.LogCaptureFixture
) -> None:
    """``retry_cap`` bounds our own backoff, not the wait the server asked for."""
    caplog.set_level(logging.INFO, logger="notebook_llm.engine.engine")
    eng = make_engine(srv, retries=1, base=0.01, cap=0.02)
    srv.inject("rate_limit", seconds=0.4)
    events, elapsed = await drain(eng)
    assert finish_of(events).reason.kind == "stop"
    assert elapsed >= 0.4
    assert waits(caplog)[0] >= 0.4


async def test_backoff_is_capped_exponential_with_jitter(
    srv: MockServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="notebook_llm.engine.engine")
    base, cap, n = 0.004, 0.02, 6
    eng = make_engine(srv, retries=n, base=base, cap=cap, seed=1234)
    srv.inject("server_error", count=n, status=503)  # 503 without Retry-After
    events, _ = await drain(eng)
    assert finish_of(events).reason.kind == "stop"
    assert len(srv.requests) == n + 1
    got = waits(caplog)
    assert len(got) == n
    # exactly the documented schedule for this seed (full jitter in [0, min(cap, base*2^k)])
    rng = random.Random(1234)
    want = [backoff_delay(k, retry_after=None, base=base, cap=cap, rng=rng) for k in range(n)]
    assert got == [pytest.approx(w, abs=0.006) for w in want]
    for k, delay in enumerate(got):
        assert 0 <= delay <= min(cap, base * 2**k) + 0.005


def test_backoff_delay_distribution() -> None:
    rng = random.Random(5)
    for attempt in range(12):
        ceiling = min(2.0, 0.1 * 2**attempt)
        samples = [
            backoff_delay(attempt, retry_after=None, base=0.1, cap=2.0, rng=rng) for _ in range(400)
        ]
        assert all(0 <= s <= ceiling for s in samples)
        assert max(samples) > ceiling * 0.9  # full jitter reaches the ceiling ...
        assert min(samples) < ceiling * 0.1  # ... and near zero
        assert len(set(samples)) > 300  # jitter: no two clients retry in lockstep
    # Retry-After is a floor, itself capped at max_retry_after
    assert backoff_delay(0, retry_after=5.0, base=0.1, cap=2.0, rng=rng) == 5.0
    assert backoff_delay(0, retry_after=9999.0, base=0.1, cap=2.0, rng=rng) == 120.0
    assert backoff_delay(10**6, retry_after=None, base=0.1, cap=2.0, rng=rng) <= 2.0


async def test_jitter_differs_between_engines(
    srv: MockServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="notebook_llm.engine.engine")
    for _ in range(2):
        eng = make_engine(srv, retries=3, base=0.01, cap=0.04)
        srv.inject("server_error", count=3, status=500)
        await drain(eng)
    got = waits(caplog)
    assert len(got) == 6
    assert got[:3] != got[3:]


async def test_parallel_streams_retry_independently(srv: MockServer) -> None:
    eng = make_engine(srv, retries=2, base=0.001, cap=0.002)
    srv.inject("rate_limit", count=5, seconds=0)
    results = await asyncio.gather(*(drain(eng) for _ in range(5)))
    assert all(finish_of(ev).reason.kind == "stop" for ev, _ in results)
    assert len(srv.requests) == 10


async def test_stop_during_backoff_wait(srv: MockServer) -> None:
    """BUG (notebook_llm/engine/engine.py ``Engine.stream``, the ``await asyncio.sleep(delay)`` of the
    retry loop): the stop signal is only attached to the task inside ``streaming.guarded``, so a
    ``stop.set()`` while the engine sleeps out a ``Retry-After`` does nothing until the sleep
    ends (up to 120 s). Expected: the stream ends ``aborted`` promptly."""
    eng = make_engine(srv, retries=1)
    srv.inject("rate_limit", seconds=100)  # longer than the hang guard of drain()
    stop = StopSignal()
    asyncio.get_running_loop().call_later(0.2, stop.set)  # a trigger: any moment will do
    events, _ = await drain(eng, stop_signal=stop)
    assert finish_of(events).reason.kind == "aborted"
    assert len(srv.requests) == 1
