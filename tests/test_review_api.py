"""An adversarial review of the API layer after the layers became folders, the turn runner and
the one request object: what a 0.1 user does that changed, each fixed with the test here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from notebook_llm import (
    BlockEnd,
    BlockStart,
    Engine,
    Event,
    Finish,
    GenerateOptions,
    LlmAdapter,
    LlmError,
    StopSignal,
    TextDelta,
)
from notebook_llm.api.chat import Chat
from notebook_llm.core.completion import Completion
from notebook_llm.core.protocol import TextBlock


class SetsTheCallersSignal(LlmAdapter):
    """Streams ``count`` deltas; sets ``signal`` (the caller's own) after the third."""

    name = "sets-signal"

    def __init__(self, count: int = 200) -> None:
        self.count = count
        self.signal: StopSignal | None = None
        self.sent = 0

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        self.sent = 0
        yield BlockStart(0, "text")
        text = ""
        for i in range(self.count):
            self.sent += 1
            text += f"w{i} "
            yield TextDelta(0, f"w{i} ")
            if self.sent == 3 and self.signal is not None:
                self.signal.set()
            await asyncio.sleep(0.005)
        yield BlockEnd(0, TextBlock(text))
        yield Finish.stop()


@pytest.fixture
def adapter() -> SetsTheCallersSignal:
    return SetsTheCallersSignal()


@pytest.fixture
def engine(adapter: SetsTheCallersSignal) -> Engine:
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider("signal", adapter=adapter, needs_key=False)
    return eng


def _send(chat: Chat, mode: str, text: str, **kw: Any) -> Completion:
    if mode == "send":
        return chat.send(text, **kw)
    return asyncio.run(chat.asend(text, **kw))


# ------------------------------------------------------------ Chat.send's request options


@pytest.mark.parametrize("mode", ["send", "asend"])
def test_send_stops_when_the_callers_stop_signal_is_set(
    engine: Engine, adapter: SetsTheCallersSignal, mode: str
) -> None:
    """``Chat(stop_signal=...)`` says "give it to send()"; send took it and ignored it (the
    turn ran to its end). It stops the turn, and what arrived is kept."""
    signal = StopSignal()
    adapter.signal = signal
    chat = Chat("signal", engine=engine)
    completion = _send(chat, mode, "go", display=False, stop_signal=signal)
    assert completion.finish is not None
    assert completion.finish.kind == "aborted"
    assert completion.text.startswith("w0 w1 w2")
    assert adapter.sent < adapter.count
    assert [m.role for m in chat.messages] == ["user", "assistant"]


def test_send_with_a_stop_signal_set_already_sends_nothing(engine: Engine) -> None:
    signal = StopSignal()
    signal.set("not now")
    completion = Chat("signal", engine=engine).send("go", display=False, stop_signal=signal)
    assert completion.error is not None
    assert completion.error.code == "ABORTED"
    assert completion.text == ""


@pytest.mark.parametrize(
    ("key", "value", "hint"),
    [
        ("prompt", "another question", "the text sent is the prompt"),
        ("messages", [], "chat.messages"),
    ],
)
def test_send_refuses_prompt_and_messages_in_one_line(key: str, value: Any, hint: str) -> None:
    """``send(text, prompt=...)`` sent a second user message and answered that one, while the
    history recorded ``text``; ``messages=`` was dropped without a word. Both are refused, as
    ``Chat(prompt=...)`` is."""
    chat = Chat("mock", "echo")
    with pytest.raises(LlmError, match=hint) as info:
        chat.send("hi", display=False, **{key: value})
    assert info.value.code == "INVALID_OPTIONS"
    assert "\n" not in str(info.value)
    assert chat.messages == []
