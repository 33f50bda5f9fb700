"""A request's deadline and its idle limit (``notebook_llm.wire.deadline``): servers that stay
within every per-read timeout (a byte every half second, endless ``: keepalive`` comments,
headers two bytes a second) end with a clear TIMEOUT, under limits set per engine or per
request. Loopback servers; short configured limits; a guard fails the test instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from notebook_llm import Engine, Finish, LlmError, TextDelta
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.core.timeouts import DEFAULT_TIMEOUTS, Timeouts

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
GUARD = 60.0  # seconds, a hang guard: without the limits these requests never end

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def event(text: str) -> bytes:
    doc = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(doc)}\n\n".encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@contextlib.asynccontextmanager
async def server(handler: Handler) -> AsyncIterator[int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            await handler(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with srv:
        yield srv.sockets[0].getsockname()[1]


def engine_on(port: int, timeouts: Timeouts | None = None) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0, timeouts=timeouts)
    engine.add_provider(
        "slow", adapter="openai", base_url=f"http://127.0.0.1:{port}/v1", needs_key=False
    )
    return engine


async def trickle_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(HEAD + chunk(event("started")))
    while True:  # one byte of a never-ending line every 0.5 s
        await asyncio.sleep(0.5)
        writer.write(chunk(b"x"))
        await writer.drain()


async def keepalives(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(HEAD + chunk(event("started")))
    while True:
        await asyncio.sleep(0.1)
        writer.write(chunk(b": keepalive\n\n"))
        await writer.drain()


async def trickle_head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    for i in range(0, len(HEAD), 2):  # two bytes a second
        writer.write(HEAD[i : i + 2])
        await writer.drain()
        await asyncio.sleep(1.0)


#: Ten events 0.3 s apart: 3 s in all, past the idle limit below, while no gap comes near it.
WORDS = ("one ", "two ", "three ", "four ", "five ", "six ", "seven ", "eight ", "nine ", "ten")


async def slow_events(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(HEAD)
    for word in WORDS:
        await asyncio.sleep(0.3)
        writer.write(chunk(event(word)))
        await writer.drain()
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    writer.write(chunk(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode()) + b"0\r\n\r\n")
    await writer.drain()
    await reader.read()


async def run(engine: Engine, model: str = "m", **kw: object) -> tuple[str, LlmError | None]:
    async def collect() -> list[object]:
        return [ev async for ev in engine.stream("slow", model, prompt="hi there", **kw)]  # type: ignore[arg-type]

    events = await asyncio.wait_for(collect(), GUARD)
    finish = events[-1]
    assert isinstance(finish, Finish)
    text = "".join(ev.text for ev in events if isinstance(ev, TextDelta))
    return text, finish.reason.failure


@pytest.mark.parametrize(
    ("handler", "limits", "which"),
    [
        (trickle_body, Timeouts(deadline=None, idle=1.5), "no event for 1.5 s"),
        (trickle_body, Timeouts(deadline=2.0, idle=None), "deadline"),
        (keepalives, Timeouts(deadline=None, idle=1.0), "no event for 1 s"),
        (trickle_head, Timeouts(deadline=2.0, idle=None), "deadline"),
        (trickle_head, Timeouts(deadline=None, idle=1.5), "no event for 1.5 s"),
    ],
    ids=["trickle-idle", "trickle-deadline", "keepalive-idle", "head-deadline", "head-idle"],
)
async def test_a_server_inside_every_read_timeout_still_times_out(
    handler: Handler, limits: Timeouts, which: str
) -> None:
    async with server(handler) as port:
        text, err = await run(engine_on(port, limits))
    assert err is not None
    assert err.code == "TIMEOUT", err
    assert which in err.message
    assert "Timeouts(" in err.message  # says what to change
    if handler is not trickle_head:
        assert text == "started"  # what arrived is kept


async def test_the_idle_limit_is_reset_by_each_event_and_a_request_overrides_the_engine() -> None:
    async with server(slow_events) as port:
        # 3 s of events 0.3 s apart: within an idle limit of 2 s (the gaps leave it a margin
        # of more than six times, for a busy machine), past it as a deadline.
        text, err = await run(engine_on(port, Timeouts(deadline=None, idle=2.0)))
        assert err is None
        assert text == "".join(WORDS)
        text, err = await run(
            engine_on(port, Timeouts(deadline=None, idle=2.0)),
            timeouts=Timeouts(deadline=0.8, idle=None),
        )
        with pytest.raises(LlmError) as caught:  # complete (and amap) take it too
            await asyncio.wait_for(
                engine_on(port).complete(
                    "slow", "m", prompt="hi", timeouts=Timeouts(deadline=0.8, idle=None)
                ),
                GUARD,
            )
    assert err is not None
    assert err.code == "TIMEOUT"
    assert "deadline" in err.message
    assert text.startswith("one")
    assert caught.value.code == "TIMEOUT"


def test_the_defaults_suit_a_model_that_thinks_for_minutes() -> None:
    assert DEFAULT_TIMEOUTS.idle is not None
    assert DEFAULT_TIMEOUTS.deadline is not None
    assert DEFAULT_TIMEOUTS.idle >= 120
    assert DEFAULT_TIMEOUTS.deadline >= 2 * DEFAULT_TIMEOUTS.idle


@pytest.mark.parametrize("fault", ["keepalive", "trickle"])
@pytest.mark.parametrize(("fmt", "base"), [("openai", "/v1"), ("anthropic", ""), ("ollama", "")])
async def test_the_mock_servers_silent_faults_end_at_the_idle_limit(
    fault: str, fmt: str, base: str
) -> None:
    with MockServer() as srv:
        engine = Engine(config_file=False, env_file=False, retries=0)
        engine.add_provider(
            "slow",
            adapter=fmt,
            base_url=srv.url + base,
            model="echo",
            needs_key=False,
        )
        srv.inject(fault, after=1, delay=0.1, seconds=30)
        text, err = await run(engine, "echo", timeouts=Timeouts(deadline=None, idle=1.0))
    assert err is not None
    assert err.code == "TIMEOUT", err
    assert "no event for 1 s" in err.message
    assert "hi there".startswith(text)  # what arrived before the silence is kept
