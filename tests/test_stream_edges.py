"""Stream edges found in review: an end marker ends the stream even if the socket stays open;
an error in the middle of a network chunk keeps what was mapped before it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from notebook_llm import Completion, Engine, LuaAdapter, assemble, validate_stream
from notebook_llm.engine.routing.lua_files import builtin_adapters_dir

CHUNK = 'data: {"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":%s}]}\n\n'


class HeldOpen(httpx.AsyncByteStream):
    """Sends ``parts``, then keeps the connection open (never ends)."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part
        await asyncio.sleep(3600)


def engine_with(stream: httpx.AsyncByteStream, script: str | None = None) -> Engine:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=stream
        )
    )
    if script is None:
        adapter = LuaAdapter.from_file(builtin_adapters_dir() / "openai.lua", transport=transport)
    else:
        adapter = LuaAdapter.from_source(script, transport=transport)
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("p", adapter=adapter, base_url="https://api.invalid/v1", model="m")
    return engine


async def test_done_ends_the_stream_although_the_socket_stays_open() -> None:
    body = (CHUNK % ("Hello", "null") + CHUNK % ("", '"stop"') + "data: [DONE]\n\n").encode()
    engine = engine_with(HeldOpen([body]))

    async def run() -> list[object]:
        return [ev async for ev in engine.stream("p", prompt="hi")]

    events = await asyncio.wait_for(run(), 2)  # not the 60 s read timeout
    validate_stream(events)  # type: ignore[arg-type]
    completion = assemble(events)  # type: ignore[arg-type]
    assert completion.text == "Hello"
    assert completion.finish is not None
    assert completion.finish.kind == "stop"


async def test_an_error_mid_chunk_keeps_what_was_mapped_before_it() -> None:
    script = """
    local a = { name = "picky" }
    function a.transform_request(s) return s end
    function a.transform_stream_chunk(line)
      local c = json.decode(line)
      if c.bad then error("cannot handle this chunk") end
      return json.encode({ content = c.text })
    end
    return a
    """
    body = b'data: {"text":"kept "}\n\ndata: {"text":"also kept"}\n\ndata: {"bad":true}\n\n'
    engine = engine_with(HeldOpen([body]), script)
    events = [ev async for ev in engine.stream("p", prompt="hi")]
    validate_stream(events)
    completion = assemble(events)
    assert completion.text == "kept also kept"
    assert completion.error is not None
    assert completion.error.code == "ADAPTER_ERROR"  # the script's own error, not INVARIANT
    assert completion.error.lua_line == 6


async def test_hook_results_other_than_a_bare_object_are_parsed_in_full() -> None:
    # The pipeline reads a result with the C JSON scanner directly; padded, non-object and
    # invalid results must still get json.loads' answer.
    script = """
    local a = { name = "odd" }
    function a.transform_request(s) return s end
    function a.transform_stream_chunk(line)
      local c = json.decode(line)
      if c.pad then return '  {"content":"padded"} \\n' end
      if c.arr then return "[1]" end
      if c.bad then return '{"content": "x"' end
      return json.encode({ content = c.text })
    end
    return a
    """

    async def run(body: bytes) -> Completion:
        engine = engine_with(HeldOpen([body + b"data: [DONE]\n\n"]), script)
        events = [ev async for ev in engine.stream("p", prompt="hi")]
        validate_stream(events)
        return assemble(events)

    done = await run(b'data: {"text":"a "}\n\ndata: {"pad":true}\n\n')
    assert done.text == "a padded"
    for line, says in (
        (b'{"arr":true}', "must return a JSON object"),
        (b'{"bad":true}', "invalid JSON"),
    ):
        failed = await run(b'data: {"text":"kept"}\n\ndata: ' + line + b"\n\n")
        assert failed.text == "kept"
        assert failed.error is not None
        assert failed.error.code == "ADAPTER_ERROR"
        assert says in failed.error.message
