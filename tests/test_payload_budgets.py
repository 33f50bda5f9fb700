"""A Lua adapter's CPU budget is charged per stream payload, not per network read.

The payloads of one read go to ``transform_stream_chunk`` in one crossing into Lua
(``LuaSandbox.call_each``), but each payload has a budget of its own: the same body maps to the
same events, and gets the same verdict (within budget, or ``ADAPTER_TIMEOUT`` at the same
payload), however its bytes arrive. Before, one budget covered all the payloads of a read, so
many cheap payloads that came together timed out while the same ones one per read did not.

No verdict here depends on the machine's speed: the budget's clock is replaced by one that moves
a fixed step at each of the sandbox's checks, which the Lua hook makes every ``hook_interval``
VM instructions. So "CPU time" is a count of instructions, the same on every machine.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from unittest import mock

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notebook_llm import Event, Finish, GenerateOptions, Message, TextDelta
from notebook_llm.adapters.lua import host
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits

# Each payload spends `n` loop turns (two VM instructions each) before it maps its text.
BURNER = """
return { name = "burner",
  transform_request = function(r) return r end,
  transform_stream_chunk = function(s)
    if s == "[DONE]" then return "" end
    local c = json.decode(s)
    local x = 0
    for i = 1, c.n do x = x + i end
    return json.encode({ content = c.t, done = c.last == true })
  end }
"""

#: A check every 1,000 instructions, each moving the clock 10 ms: the 1 s budget is about
#: 100,000 instructions of one payload.
LIMITS = LuaLimits(cpu_seconds=1.0, hook_interval=1000)
STEP = 0.01
#: About a tenth of the budget (10,000 instructions and the JSON decoding), and forty times it.
LIGHT = 5_000
HEAVY = 2_000_000


class InstructionClock:
    """Stands in for the ``time`` module of ``adapters/lua/host.py``: its CPU clock moves
    :data:`STEP` at every reading, its wall clock never moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def thread_time(self) -> float:
        self.now += STEP
        return self.now

    def monotonic(self) -> float:
        return 0.0


@contextmanager
def counted_instructions() -> Iterator[None]:
    with mock.patch.object(host, "time", InstructionClock()):
        yield


def body(costs: list[int]) -> bytes:
    """An SSE body: one payload per cost, the last one ending the answer."""
    out = bytearray()
    for i, n in enumerate(costs):
        payload = {"n": n, "t": f"w{i} ", "last": i == len(costs) - 1}
        out += b"data: " + json.dumps(payload).encode() + b"\n\n"
    return bytes(out + b"data: [DONE]\n\n")


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, prev = [], 0
    for p in [*points, len(data)]:
        if p > prev:
            pieces.append(data[prev:p])
            prev = p
    return pieces


class Pieces(httpx.AsyncByteStream):
    """A response body that arrives in the given network reads."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


async def _events(pieces: list[bytes]) -> list[Event]:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Pieces(pieces)
        )

    adapter = LuaAdapter(
        BURNER, name="burner", limits=LIMITS, transport=httpx.MockTransport(answer)
    )
    options = GenerateOptions(
        provider="p", model="m", messages=[Message.user("hi")], base_url="http://p.test"
    )
    return [event async for event in adapter.stream(options)]


def mapped(pieces: list[bytes]) -> tuple[list[str], str | None]:
    """The text deltas and the verdict (the finish's error code, or ``None``) of a body so
    split."""
    with counted_instructions():
        events = asyncio.run(_events(pieces))
    finish = events[-1]
    assert isinstance(finish, Finish)
    failure = finish.reason.failure
    verdict = failure.code if failure is not None else None
    return [e.text for e in events if isinstance(e, TextDelta)], verdict


CHEAP_BODY = body([LIGHT] * 30)  # thirty tenths of the budget: each payload within it
HEAVY_BODY = body([LIGHT] * 5 + [HEAVY] + [LIGHT] * 5)  # the sixth payload is over it
SMALL_BODY = body([LIGHT] * 12)


def test_cheap_payloads_that_arrive_together_stay_within_their_budgets() -> None:
    texts, verdict = mapped([CHEAP_BODY])  # all thirty in one read
    assert verdict is None
    assert texts == [f"w{i} " for i in range(30)]
    assert mapped(split(CHEAP_BODY, list(range(0, len(CHEAP_BODY), 7)))) == (texts, None)


def test_one_expensive_payload_times_out_wherever_it_arrives() -> None:
    texts, verdict = mapped([HEAVY_BODY])
    assert verdict == "ADAPTER_TIMEOUT"
    assert texts == [f"w{i} " for i in range(5)]  # what came before it is kept
    for cut in (0, len(HEAVY_BODY) // 2, len(HEAVY_BODY) - 3):
        assert mapped(split(HEAVY_BODY, [cut])) == (texts, verdict)


def test_a_small_body_split_at_every_byte_maps_the_same() -> None:
    whole = mapped([SMALL_BODY])
    assert whole == ([f"w{i} " for i in range(12)], None)
    for cut in range(1, len(SMALL_BODY)):
        assert mapped([SMALL_BODY[:cut], SMALL_BODY[cut:]]) == whole, cut


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([CHEAP_BODY, HEAVY_BODY]),
    st.lists(st.integers(min_value=0, max_value=10**6), max_size=30),
)
def test_any_split_gives_the_same_events_and_verdict(data: bytes, cuts: list[int]) -> None:
    assert mapped(split(data, cuts)) == mapped([data])
