"""Careless calls to the API: ``Chat.send``'s request options and stop signal, the turn runner
on the caller's thread, the request's field types, a refused ``%%llm`` cell, and keyword typos.
Each is refused in one line that says where the value goes, or handled without losing events."""

from __future__ import annotations

import asyncio
import queue
import re
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
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
from notebook_llm.api import observers
from notebook_llm.api.batch import map_prompts
from notebook_llm.api.chat import Chat
from notebook_llm.api.observers import TurnObserver
from notebook_llm.api.turn_runner import _DONE, TurnRunner
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


# ------------------------------------------------------------ the turn runner


class NoStdin(TurnObserver):
    """An observer whose tool-call question fails, as ``input()`` does without a stdin."""

    def confirm(self, call: Any) -> bool:
        raise EOFError("EOF when reading a line")


@pytest.fixture
def no_stdin() -> Iterator[None]:
    installed = observers._turn_display
    observers.set_turn_display(lambda *a, **k: NoStdin())
    try:
        yield
    finally:
        observers.set_turn_display(installed)


def test_a_tool_question_that_fails_on_the_callers_thread_is_the_calls_result(
    no_stdin: None,
) -> None:
    """A blocking run asks its tool questions on the caller's thread; one that raised there
    (``input()`` with no stdin, in a script or a pipe) escaped ``send`` as a bare ``EOFError``
    while the stream went on in the background. It is the call's result instead, as when
    the question fails on the loop's side: the tool is not run and the model is told why."""
    ran: list[int] = []

    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        ran.append(a + b)
        return a + b

    chat = Chat("mock", "tools", tools=[add])
    completion = chat.send("add 1 and 2", confirm=True)
    assert completion.error is None
    assert ran == []
    results = [b for m in completion.transcript if m.role == "user" for b in m.content]
    assert any("the confirmation failed" in getattr(b, "text", "") for b in results), results
    assert any("EOFError" in getattr(b, "text", "") for b in results)


def test_an_interrupt_while_showing_an_event_loses_none_of_the_others() -> None:
    """The caller's thread takes the events off the queue in batches; an interrupt while the
    observer showed one of them dropped the rest of that batch: a hole in the middle of the
    answer kept in the history, and, when the batch held the stream's end, a second's wait
    for a finish that had already come."""

    class InterruptedAtTheSecond(TurnObserver):
        seen = 0

        def event(self, event: Any) -> None:
            self.seen += 1
            if self.seen == 2:
                raise KeyboardInterrupt

    stop = StopSignal()
    runner = TurnRunner(InterruptedAtTheSecond(), stop, "p")
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    words = ["a ", "b ", "c "]
    events = [
        BlockStart(0, "text"),
        *(TextDelta(0, w) for w in words),
        BlockEnd(0, TextBlock("".join(words))),
        Finish.stop(),
    ]
    for item in [*events, _DONE]:  # one batch: all of it arrived while the caller waited
        inbox.put(item)
    ran: Future[None] = Future()
    ran.set_result(None)
    runner._wait(ran, inbox)
    assert runner.events == events
    assert stop.reason == "interrupted"
    completion = runner.partial
    assert completion.text == "a b c "
    assert completion.finish is not None
    assert completion.finish.kind == "stop"


# ------------------------------------------------------------ the request's field types


class Captures(LlmAdapter):
    """Answers "ok" and keeps the options it was given."""

    name = "captures"

    def __init__(self) -> None:
        self.seen: list[GenerateOptions] = []

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        self.seen.append(options)
        yield BlockStart(0, "text")
        yield TextDelta(0, "ok")
        yield BlockEnd(0, TextBlock("ok"))
        yield Finish.stop()


@pytest.fixture
def captures() -> tuple[Engine, Captures]:
    adapter = Captures()
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider("cap", adapter=adapter, needs_key=False)
    return eng, adapter


def test_one_stop_sequence_string_is_one_sequence(captures: tuple[Engine, Captures]) -> None:
    """``stop_sequences="END"`` was sent as ``["E", "N", "D"]``: the model stopped at the
    first E, N or D. A string is the one sequence it says (as providers take it too)."""
    engine, adapter = captures
    engine.complete_sync("cap", prompt="x", stop_sequences="END")
    engine.complete_sync("cap", prompt="x", stop_sequences=(s for s in ["A", "B"]))
    assert [o.stop_sequences for o in adapter.seen] == [["END"], ["A", "B"]]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"prompt": "x", "temperature": "0.2"}, "temperature= takes a number, not str '0.2'"),
        ({"prompt": "x", "max_tokens": "5"}, "max_tokens= takes a number, not str '5'"),
        ({"prompt": 123}, "prompt= takes a str, not int 123"),
        ({"prompt": "x", "system": ["be brief"]}, "system= takes a str, not list"),
        ({"messages": "hi"}, "messages= takes a list of Message (one text is prompt=)"),
        ({"messages": ["hi"]}, "item 0 of messages= takes a Message, not str 'hi'"),
        ({"prompt": "x", "tools": [print]}, "Python functions: run_tools, or Chat(tools=...)"),
        ({"prompt": "x", "extra_body": [("seed", 1)]}, "extra_body= takes a dict"),
        ({"prompt": "x", "stop_sequences": [1]}, "item 0 of stop_sequences= takes a str"),
    ],
)
def test_a_field_of_the_wrong_type_is_one_line_before_anything_is_sent(
    captures: tuple[Engine, Captures], options: dict[str, Any], says: str
) -> None:
    """These failed inside the engine or the adapter with a bare ``TypeError`` or
    ``AttributeError`` (or ``ADAPTER_ERROR`` for a number as the prompt); the request says
    what the field takes when it is built."""
    engine, adapter = captures
    with pytest.raises(LlmError) as info:
        engine.complete_sync("cap", **options)
    assert info.value.code == "INVALID_OPTIONS"
    assert says in info.value.message
    assert "\n" not in str(info.value)
    assert adapter.seen == []


def test_numbers_of_other_kinds_still_pass(captures: tuple[Engine, Captures]) -> None:
    """A max_tokens from a DataFrame is a numpy integer, not an ``int``."""
    np = pytest.importorskip("numpy")
    engine, adapter = captures
    engine.complete_sync("cap", prompt="x", max_tokens=np.int64(5), temperature=np.float32(0.5))
    assert adapter.seen[0].max_tokens == 5


# ------------------------------------------------------------ %%llm


@pytest.fixture
def shell() -> Iterator[Any]:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "notebook_llm")
    magics = ip.magics_manager.registry["LlmMagics"]
    magics.widgets = "never"
    yield ip
    ip.user_ns.pop("_llm", None)
    ip.user_ns.pop("failed", None)
    ip.run_line_magic("unload_ext", "notebook_llm")


@pytest.mark.parametrize("run_cell", ["blocking", "async"])
def test_a_cell_refused_before_it_ran_leaves_its_error_in_llm_not_the_last_answer(
    shell: Any, run_cell: str
) -> None:
    """A bad option now fails when the request is built, before the turn runs: the cell
    showed the error but left ``_llm`` (and ``--out``) holding the previous cell's answer, so
    the next cell read a stale answer as this one's. They hold this cell's failure, as in 0.1."""
    from IPython.utils.capture import capture_output

    magics = shell.magics_manager.registry["LlmMagics"]
    with capture_output():
        shell.run_cell_magic("llm", "mock:echo", "the first answer")
    assert shell.user_ns["_llm"].text == "the first answer"
    with capture_output() as cap:
        if run_cell == "blocking":
            shell.run_cell_magic("llm", "mock:echo --temperature 5 --out failed", "again")
        else:
            asyncio.run(magics.llm_cell_async("mock:echo --temperature 5 --out failed", "again"))
    assert any("temperature must be within 0..2" in str(o.data) for o in cap.outputs)
    for name in ("_llm", "failed"):
        completion = shell.user_ns[name]
        assert completion.text == ""
        assert completion.error is not None
        assert completion.error.code == "INVALID_OPTIONS"


# ------------------------------------------------------------ typos name the right keyword


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (
            lambda: Chat("mock", "echo").send("hi", display=False, max_step=3),
            "did you mean max_steps",
        ),
        (
            lambda: Chat("mock", "echo").send("hi", display=False, confrim=True),
            "did you mean confirm?",
        ),
        (lambda: map_prompts(["a"], provider="mock", concurency=2), "did you mean concurrency?"),
        (lambda: map_prompts(["a"], provider="mock", max_cots=1.0), "did you mean max_cost?"),
    ],
)
def test_a_typo_of_a_turn_or_batch_keyword_names_that_keyword(call: Any, says: str) -> None:
    """The close-match check knew only the request's fields: ``send(max_step=3)`` suggested
    ``max_tokens``, ``send(confrim=True)`` and ``map(concurency=2)`` suggested nothing."""
    with pytest.raises(TypeError, match=says) as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("prompt", "the text sent is the prompt"),
        ("messages", "the history is chat.messages"),
        ("images", "give it to send()"),
        ("stop_signal", "give it to send()"),
    ],
)
def test_what_chat_refuses_points_where_it_goes_and_send_agrees(key: str, why: str) -> None:
    """Chat(prompt=) must not send the user to send(prompt=), which refuses it too."""
    from notebook_llm import Chat, LlmError, StopSignal

    value: object = StopSignal() if key == "stop_signal" else "x"
    if key == "messages":
        value = []
    with pytest.raises(LlmError, match=re.escape(f"{key}= is not a Chat setting: {why}")):
        Chat(provider="mock", model="echo", live=False, **{key: value})
