"""Rate limits before the 429: a batch against a loopback server that keeps a provider's limit.

The server (the mock with ``MockRateLimit``) keeps a token bucket of N requests per window, as
OpenAI and Anthropic describe theirs, and answers 429 past it. The window is one second so a
batch meets the limit many times in a few seconds; the client is told the same window
(``RateLimits(period=1.0)``). No verdict depends on the machine's speed: the gate counts a
request from before it is sent until its answer ended, so however slowly or unevenly requests
travel, the server's bucket of the same size never overflows (see ``api/rate_limits.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from notebook_llm import Completion, Engine, LlmError
from notebook_llm.adapters.mock import MockRateLimit, MockServer
from notebook_llm.api.batch import amap
from notebook_llm.api.rate_limits import RateGate, RateLimits, parse_reset, rate_limits_of

ROWS = 16
LIMIT = 4  # requests per second at the server


def engine_for(srv: MockServer, retries: int) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=retries, retry_base=0.01)
    engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
    return engine


@pytest.fixture
def limited() -> Iterator[MockServer]:
    with MockServer(rate_limit=MockRateLimit(requests=LIMIT, window=1.0)) as srv:
        yield srv


def prompts() -> list[str]:
    return [f"row {i}" for i in range(ROWS)]


async def test_with_rpm_set_the_batch_meets_no_429(limited: MockServer) -> None:
    results = await amap(
        prompts(),
        engine=engine_for(limited, retries=0),  # a 429 would be a failed row
        provider="m",
        concurrency=8,
        progress=False,
        rate_limits=RateLimits(rpm=LIMIT, period=1.0, learn=False),
    )
    assert limited.rate_limit is not None
    print(f"429 answers with rpm set: {limited.rate_limit.rejected}")
    assert limited.rate_limit.rejected == 0
    assert [r.text for r in results if isinstance(r, Completion)] == prompts()


async def test_without_limits_the_server_does_answer_429() -> None:
    """The control: the same batch with no limit and nothing learned meets the server's 429s
    (so the test above is not passing because the server never refuses). The server's clock
    stands still here, so its bucket never refills and the verdict does not depend on how fast
    the requests travel: the rows past the first ``LIMIT`` are refused."""
    frozen = MockRateLimit(requests=LIMIT, window=1.0, clock=lambda: 0.0)
    with MockServer(rate_limit=frozen) as limited:
        results = await amap(
            prompts(),
            engine=engine_for(limited, retries=0),
            provider="m",
            concurrency=8,
            progress=False,
            rate_limits=RateLimits(learn=False),
        )
    assert limited.rate_limit is not None
    assert limited.rate_limit.rejected == ROWS - LIMIT
    assert any(isinstance(r, LlmError) and r.code == "RATE_LIMIT" for r in results)


async def test_with_nothing_set_it_learns_the_limit_and_loses_no_row(limited: MockServer) -> None:
    """No rpm: the first responses' headers teach the limit. Only the requests sent before
    any response arrived can meet a 429 (at most ``concurrency``); each is sent again after
    the whole batch waited, and no row is lost."""
    concurrency = 8
    results = await amap(
        prompts(),
        engine=engine_for(limited, retries=2),
        provider="m",
        concurrency=concurrency,
        progress=False,
        rate_limits=RateLimits(period=1.0),
    )
    assert limited.rate_limit is not None
    rejected = limited.rate_limit.rejected
    print(f"429 answers with nothing set: {rejected} (of {ROWS} rows, concurrency {concurrency})")
    assert rejected <= concurrency
    assert [r.text for r in results if isinstance(r, Completion)] == prompts()


async def test_one_429_pauses_the_whole_batch() -> None:
    gate = RateGate(RateLimits())
    gate.observe(429, httpx.Headers({"retry-after-ms": "40000"}))
    state = gate.state()
    assert state.rate_limited == 1
    assert 30 < state.waiting <= 40
    started = asyncio.get_running_loop().time()

    async def one() -> None:
        async with gate.passage():
            pass

    task = asyncio.ensure_future(one())
    await asyncio.sleep(0.05)
    assert not task.done()  # waiting for the pause to end, like every other request
    gate.paused_until = started  # the pause is over
    async with gate._condition():
        gate._condition().notify_all()
    await asyncio.wait_for(task, 60)


def test_learned_limits_come_from_openai_and_anthropic_headers() -> None:
    async def go() -> None:
        gate = RateGate()
        gate.observe(
            200,
            httpx.Headers(
                {
                    "x-ratelimit-limit-requests": "500",
                    "x-ratelimit-remaining-requests": "499",
                    "x-ratelimit-reset-requests": "120ms",
                    "x-ratelimit-limit-tokens": "30000",
                    "x-ratelimit-remaining-tokens": "29000",
                    "x-ratelimit-reset-tokens": "2s",
                }
            ),
        )
        state = gate.state()
        assert (state.rpm, state.tpm, state.learned) == (500, 30000, True)
        assert "500 rpm / 30,000 tpm (learned)" in str(state)
        other = RateGate()
        other.observe(
            200,
            httpx.Headers(
                {
                    "anthropic-ratelimit-requests-limit": "50",
                    "anthropic-ratelimit-requests-remaining": "49",
                    "anthropic-ratelimit-requests-reset": "2030-01-01T00:00:00Z",
                }
            ),
        )
        assert other.state().rpm == 50

    asyncio.run(go())


def test_hostile_limit_headers_steer_nothing() -> None:
    async def go() -> None:
        gate = RateGate()
        gate.observe(
            429,
            httpx.Headers(
                {
                    "x-ratelimit-limit-requests": "nan",
                    "x-ratelimit-limit-tokens": "-5",
                    "retry-after": "99999999",
                }
            ),
        )
        state = gate.state()
        assert (state.rpm, state.tpm) == (None, None)
        assert state.waiting <= 120  # one header cannot park a notebook for a day

    asyncio.run(go())


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1s", 1.0), ("6m0s", 120.0), ("120ms", 0.12), ("1.5", 1.5), ("1h", 120.0)],
)
def test_reset_durations(value: str, seconds: float) -> None:
    assert parse_reset(value) == pytest.approx(seconds)  # capped at two minutes


@pytest.mark.parametrize("value", ["", "s", "1x", "1" * 100, "--", "1s2"])
def test_reset_garbage_is_ignored(value: str) -> None:
    assert parse_reset(value) is None


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"rpm": 0}, "rpm must be above 0"),
        ({"tpm": "fast"}, "tpm takes a positive number"),
        ({"rpm": float("inf")}, "rpm takes a positive number"),
        ({"rpm": 5, "rate_limits": RateLimits(rpm=5)}, "not both"),
        ({"rate_limits": {"rpm": 5}}, "rate_limits takes a RateLimits"),
    ],
)
def test_bad_limits_are_one_line(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(LlmError, match=words) as info:
        rate_limits_of(**kwargs)
    assert info.value.code == "INVALID_OPTIONS"
    assert "\n" not in str(info.value)
