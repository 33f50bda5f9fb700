"""Running an adapter over a recorded body, offline: the kit's harness.

The user's adapter is never touched: :func:`replica` runs the same script with an in-process
``httpx.MockTransport`` that serves the fixture (:func:`body_transport`, optionally in small
pieces to exercise incremental decoding) and a log sink of the kit's. A stream body goes
through the adapter's real ``stream()`` path; a 200 JSON body goes through
:meth:`LuaAdapter.map_body <notebook_llm.adapters.lua.lua_adapter.LuaAdapter.map_body>`, the very mapping
``stream()`` uses for a non-stream answer (the kit once had its own copy, which drifted: it
blamed the script for a body that was not JSON and named a different provider). The result is
the events and the error that ended them; judging them is :mod:`.report`'s job.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from ..adapters.lua.lua_adapter import LuaAdapter
from ..core.background_loop import run_sync
from ..core.errors import LlmError
from ..core.protocol import Event, GenerateOptions
from .fixtures import Fixture

__all__ = ["as_adapter", "body_transport", "collect_events", "replay_events", "replica"]


def as_adapter(adapter_or_path: LuaAdapter | str | Path) -> LuaAdapter:
    """An adapter given as itself, a ``.lua`` path or the script's text."""
    if isinstance(adapter_or_path, LuaAdapter):
        return adapter_or_path
    text = str(adapter_or_path)
    if isinstance(adapter_or_path, Path) or ("\n" not in text and text.endswith(".lua")):
        return LuaAdapter.from_file(text)
    return LuaAdapter.from_source(text)


def replica(
    adapter: LuaAdapter,
    transport: httpx.AsyncBaseTransport,
    logs: list[tuple[str, str]],
) -> LuaAdapter:
    """The same script with our transport and log sink (the user's adapter is not touched)."""

    def sink(_name: str, level: str, msg: str) -> None:
        logs.append((level, msg))

    return LuaAdapter(
        adapter.source,
        name=adapter.name,
        path=adapter.path,
        origin=adapter.origin,
        limits=adapter.limits,
        transport=transport,
        log=sink,
    )


def body_transport(fixture: Fixture, chunk_size: int | None) -> httpx.MockTransport:
    """A transport that answers every request with ``fixture`` (status, headers, body), sent in
    pieces of ``chunk_size`` bytes (the whole body at once when ``None``)."""

    class _Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            step = chunk_size or max(len(fixture.body), 1)
            for start in range(0, len(fixture.body), step):
                yield fixture.body[start : start + step]

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": fixture.content_type, **fixture.headers}
        return httpx.Response(fixture.status, headers=headers, stream=_Body())

    return httpx.MockTransport(handler)


async def collect_events(
    adapter: LuaAdapter, options: GenerateOptions
) -> tuple[list[Event], LlmError | None]:
    """Every event of ``adapter.stream(options)``, and the ``LlmError`` that ended it, if any."""
    events: list[Event] = []
    try:
        async for event in adapter.stream(options):
            events.append(event)
    except LlmError as err:
        return events, err
    return events, None


def replay_events(
    adapter: LuaAdapter,
    fixture: Fixture,
    options: GenerateOptions,
    logs: list[tuple[str, str]],
    *,
    chunk_size: int | None = None,
) -> tuple[list[Event], LlmError | None]:
    """``fixture`` through ``adapter`` as the engine would map it: the events, and the error
    that ended them (not raised). The script's ``log()`` lines go to ``logs``."""
    runner = replica(adapter, body_transport(fixture, chunk_size), logs)
    if fixture.whole_body:
        try:
            return runner.map_body(fixture.body, options), None
        except LlmError as err:
            return [], err
    return run_sync(collect_events(runner, options))
