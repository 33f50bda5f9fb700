"""The response seam: every HTTP response's status and headers reach the observer of its context."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from notebook_llm import Engine, LlmError
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.wire.response_watch import notify_response, watching_responses


def test_nobody_watching_is_a_no_op() -> None:
    notify_response(200, httpx.Headers({"x": "1"}))  # nothing installed: nothing happens


def test_observer_sees_status_and_headers_only_inside_its_block() -> None:
    seen: list[tuple[int, str | None]] = []
    with watching_responses(lambda s, h: seen.append((s, h.get("x-a")))):
        notify_response(429, httpx.Headers({"x-a": "b"}))
    notify_response(200, httpx.Headers({"x-a": "c"}))
    assert seen == [(429, "b")]


def test_a_failing_observer_is_logged_and_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    def bad(status: int, headers: httpx.Headers) -> None:
        raise RuntimeError("observer bug")

    with caplog.at_level(logging.WARNING), watching_responses(bad):
        notify_response(200, httpx.Headers())
    assert "observer failed" in caplog.text


async def test_each_task_tree_sees_its_own_responses() -> None:
    a: list[int] = []
    b: list[int] = []

    async def run(store: list[int], status: int) -> None:
        with watching_responses(lambda s, h: store.append(s)):
            await asyncio.sleep(0)
            await asyncio.gather(asyncio.create_task(_report(status)))

    await asyncio.gather(run(a, 201), run(b, 202))
    assert (a, b) == ([201], [202])


async def _report(status: int) -> None:
    notify_response(status, httpx.Headers())


async def test_the_lua_adapter_reports_every_response_including_a_429() -> None:
    with MockServer() as srv:
        engine = Engine(config_file=False, env_file=False, retries=0)
        engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
        seen: list[int] = []
        with watching_responses(lambda s, h: seen.append(s)):
            ok = await engine.complete(prompt="hi", provider="m")
            srv.inject("rate_limit", seconds=0)
            with pytest.raises(LlmError, match=r"RATE_LIMIT|Rate limit"):
                await engine.complete(prompt="hi", provider="m")
    assert ok.text == "hi"
    assert seen == [200, 429]
