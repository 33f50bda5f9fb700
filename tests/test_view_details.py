"""Small things a user sees in a cell's output: the conformance kit's tables, one card per tool
call while ``--confirm`` asks, the token count of a stopped answer, "1 step"."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from notebook_llm import BlockStart, Engine, Event, Finish, GenerateOptions, LlmAdapter, TextDelta
from notebook_llm.engine.session import set_default_engine

OPENAI_FIXTURE = (
    Path(__file__).parent / "fixtures" / "wire" / "openai" / "stream_text_include_usage.sse"
)


class Endless(LlmAdapter):
    """Streams text until stopped, and never reports usage (as a stream stopped early)."""

    name = "endless"

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        yield BlockStart(0, "text")
        while True:
            yield TextDelta(0, "more text ")
            await asyncio.sleep(0.005)
        yield Finish.stop()  # pragma: no cover


@pytest.fixture
def shell(comms: list[tuple[str, str]]) -> Iterator[InteractiveShell]:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("endless", adapter=Endless(), needs_key=False)
    set_default_engine(engine)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "notebook_llm")
    magics = ip.magics_manager.registry["LlmMagics"]
    magics.widgets = "always"  # the live view, as in JupyterLab
    magics.default_provider = None
    magics.chats.clear()
    yield ip
    ip.run_line_magic("unload_ext", "notebook_llm")
    set_default_engine(None)


def _plain(cap: Any) -> list[str]:
    return [str(o.data["text/plain"]) for o in cap.outputs if "text/plain" in o.data]


def _html(cap: Any) -> list[str]:
    return [str(o.data["text/html"]) for o in cap.outputs if "text/html" in o.data]


def test_the_kits_tables_read_from_the_left(shell: InteractiveShell) -> None:
    """JupyterLab right-aligns the cells of an HTML output's tables unless told otherwise."""
    with capture_output() as cap:
        shell.run_line_magic("adapter", f"test openai {OPENAI_FIXTURE}")
    html = "\n".join(_html(cap))
    cells = re.findall(r"<t[dh]\b[^>]*>", html)
    assert len(cells) > 8, html[:2000]  # the event table is there
    assert "<td" in html
    for cell in cells:
        assert "text-align:left" in cell, cell


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def test_a_tool_call_waiting_for_confirm_shows_one_card(
    shell: InteractiveShell, comms: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_llm.notebook.widgets.stream_view import StreamView

    seen: dict[str, Any] = {}
    original = StreamView.ask

    def ask(view: StreamView, call: Any, on_answer: Any) -> None:
        original(view, call, on_answer)
        view.flush()
        assert view._question is not None
        seen["question"] = view._question.value
        # every tool card the front end has been sent by now: the pane's, by block id, and
        # any in a widget's value (where the question's card went)
        seen["cards"] = {}
        for kind, text in comms:
            message = json.loads(text) if kind == "comm_msg" else {}
            ops = message.get("content") if isinstance(message, dict) else None
            for op in ops if isinstance(ops, list) else []:
                if op[0] == "=" and "notebook-llm-tool" in op[2]:
                    seen["cards"][f"pane {op[1]}"] = op[2]
            value = str(message.get("state", {}).get("value", ""))
            if "notebook-llm-tool" in value:
                seen["cards"]["a widget's value"] = value
        seen["status"] = [c.status for c in view._cards.values() if c.call_id == call.id]
        view.run_button.click()

    monkeypatch.setattr(StreamView, "ask", ask)
    shell.user_ns["get_weather"] = get_weather
    magics = shell.magics_manager.registry["LlmMagics"]
    with capture_output() as cap:
        await asyncio.wait_for(
            magics.llm_cell_async("mock:tools --tools get_weather --confirm", "Lisbon"), 30
        )
    assert "notebook-llm-tool" not in seen["question"]  # the question is a line, not a card
    assert "get_weather" in seen["question"]
    assert len(seen["cards"]) == 1, seen["cards"]  # the pane's card, once
    assert seen["status"] == ["waiting for you"]  # and the card says what it waits for
    assert "sunny in Lisbon" in "\n".join(_plain(cap))  # Run ran it


def test_a_stopped_answer_keeps_its_token_count(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_llm.notebook.widgets.present import Presenter

    original = Presenter.tick

    def tick(presenter: Presenter) -> None:  # the user clicks Stop once text has streamed
        original(presenter)
        if presenter.view is not None and len(presenter.view.text) > 200:
            presenter.view.stop_button.click()

    monkeypatch.setattr(Presenter, "tick", tick)
    with capture_output() as cap:
        shell.run_cell_magic("llm", "endless -o r", "go")
    completion = shell.user_ns["r"]
    assert completion.error is not None
    assert completion.error.code == "ABORTED"
    assert completion.usage is None  # the provider never counted: the footer estimates
    footer = _plain(cap)[-1].splitlines()[-1]
    found = re.fullmatch(r"-- endless · stopped · ~(\d+) out", footer)
    assert found, footer
    assert int(found.group(1)) >= len(completion.text) // 4  # about four characters a token
    assert f"~{found.group(1)} out" in _html(cap)[-1]


def test_the_step_limit_counts_one_step(shell: InteractiveShell) -> None:
    shell.user_ns["get_weather"] = get_weather
    with capture_output() as cap:
        shell.run_cell_magic("llm", "mock:tools --tools get_weather --max-steps 1 -o r", "Paris")
    message = shell.user_ns["r"].error.message
    assert "after 1 step (max_steps=1)" in message
    assert "1 steps" not in "\n".join(_plain(cap))
