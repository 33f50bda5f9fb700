"""50 concurrent streams through ONE Lua adapter whose script keeps module-level state.

The script remembers the request's id (from ``transform_request``) and accumulates every content
piece into a module-level buffer and counter; on the finish chunk it appends
``#<id>:<n>:<buffer>``. If two streams shared a Lua state, ids, counts and buffers would mix.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import GUARD, HeldServer, until

from notebook_llm import Engine, Event, Finish, TextDelta, assemble, validate_stream
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.mock.server import MockServer

N = 50
STATEFUL = """
local M = {name = "stateful", endpoint = "/chat/completions"}
local id = nil        -- per stream, set by transform_request
local buf = {}        -- every content piece seen by this stream
local n = 0           -- how many content chunks this stream saw

function M.transform_request(raw)
  local req = json.decode(raw)
  id = req.messages[#req.messages].content:match("^stream (%d+)")
  req.stream_options = {include_usage = true}
  return json.encode(req)
end

function M.transform_stream_chunk(line)
  local c = json.decode(line)
  local choice = c.choices and c.choices[1]
  if not choice then return "" end
  local out = {}
  local piece = choice.delta and choice.delta.content
  if type(piece) == "string" and piece ~= "" then
    n = n + 1
    buf[#buf + 1] = piece
    out.content = piece
  end
  if type(choice.finish_reason) == "string" then
    out.content = (out.content or "") .. "#" .. tostring(id) .. ":" .. n .. ":" .. table.concat(buf)
    out.finish_reason = choice.finish_reason
  end
  if next(out) == nil then return "" end
  return json.encode(out)
end

return M
"""


@pytest.fixture
def srv() -> Iterator[MockServer]:
    with MockServer(chunk_delay=0.01) as server:
        yield server


def prompt_for(i: int) -> str:
    return f"stream {i:02d} " + " ".join(f"w{i}x{j}" for j in range(8 + i % 5))


async def one(eng: Engine, i: int, marks: dict[int, tuple[float, float]]) -> list[Event]:
    events: list[Event] = []
    first = 0.0
    async for ev in eng.stream("s", prompt=prompt_for(i)):
        if not events:
            first = time.perf_counter()
        events.append(ev)
    marks[i] = (first, time.perf_counter())
    return events


async def test_fifty_concurrent_streams_keep_their_own_state() -> None:
    adapter = LuaAdapter.from_source(STATEFUL)
    eng = Engine(config_file=False, env_file=False, retries=0)
    marks: dict[int, tuple[float, float]] = {}
    # The server holds every answer until all fifty requests are in: the streams overlap by
    # construction, not by the luck of the scheduler.
    with HeldServer(chunk_delay=0.01) as srv:
        eng.add_provider("s", adapter=adapter, base_url=srv.url + "/v1", model="echo")
        start = time.perf_counter()
        streams = asyncio.ensure_future(asyncio.gather(*(one(eng, i, marks) for i in range(N))))
        await until(lambda: len(srv.requests) == N, "every stream at the server")
        srv.release()
        results = await asyncio.wait_for(streams, GUARD)
        wall = time.perf_counter() - start
        assert srv.most_requests_at_once == N
    assert len(srv.requests) == N
    for i, events in enumerate(results):
        validate_stream(events)
        last = events[-1]
        assert isinstance(last, Finish)
        assert last.reason.kind == "stop", last.reason
        prompt = prompt_for(i)
        text = assemble(events).text
        deltas = sum(1 for ev in events if isinstance(ev, TextDelta))
        m = re.fullmatch(r"(.*)#(\d+):(\d+):(.*)", text, re.S)
        assert m is not None, text
        assert m.group(1) == prompt  # the streamed text is this stream's own
        assert m.group(2) == f"{i:02d}"  # the id remembered by this stream's state
        assert int(m.group(3)) == deltas - 1  # its own counter (the last delta is the trailer)
        assert m.group(4) == prompt  # its own buffer, nothing from the others
    # how many were in flight between their first and last event (a figure, not a verdict)
    points = sorted([(s, 1) for s, _ in marks.values()] + [(e, -1) for _, e in marks.values()])
    live = peak = 0
    for _, step in points:
        live += step
        peak = max(peak, live)
    print(
        f"\n{N} concurrent Lua streams: {wall:.2f} s wall, peak {peak} in flight"
    )  # figure for docs/reliability.md


async def test_concurrent_streams_in_threads(srv: MockServer) -> None:
    """The same adapter driven from several threads (each with its own loop) at once."""
    adapter = LuaAdapter.from_source(STATEFUL)
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider("s", adapter=adapter, base_url=srv.url + "/v1", model="echo")

    def worker(i: int) -> str:
        return eng.complete_sync("s", prompt=prompt_for(i)).text

    texts = await asyncio.wait_for(
        asyncio.gather(*(asyncio.to_thread(worker, i) for i in range(10))), timeout=30
    )
    for i, text in enumerate(texts):
        prompt = prompt_for(i)
        assert text.startswith(prompt + f"#{i:02d}:")
        assert text.endswith(":" + prompt)


def test_script_file_is_the_same_for_every_stream(tmp_path: Path) -> None:
    path = tmp_path / "stateful.lua"
    path.write_text(STATEFUL)
    adapter = LuaAdapter.from_file(path)
    assert adapter.name == "stateful"
    assert adapter.meta["hooks"] == ["transform_request", "transform_stream_chunk"]
