"""The engine is driven by its callers: ``Chat`` runs a turn with the API layer's turn runner
and tells an observer (the one the display hook gives) what happens; the API layer imports no
notebook code."""

from __future__ import annotations

import ast
import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
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
    TextDelta,
)
from notebook_llm.api import observers
from notebook_llm.api.chat import Chat
from notebook_llm.api.observers import TurnObserver
from notebook_llm.api.turn import Turn
from notebook_llm.api.turn_runner import TurnRunner
from notebook_llm.core.cancel import StopSignal
from notebook_llm.core.completion import Completion
from notebook_llm.core.protocol import Message, TextBlock
from notebook_llm.engine.request import Request

PACKAGE = Path(__file__).resolve().parent.parent / "notebook_llm"


class Counted(LlmAdapter):
    """``count`` deltas ``"w0 w1 ..."`` with a short pause after each, then a stop; records
    the thread it streams on."""

    name = "counted"

    def __init__(self, count: int = 5, pause: float = 0.02) -> None:
        self.count = count
        self.pause = pause
        self.threads: set[int] = set()
        self.sent = 0

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        self.threads.add(threading.get_ident())
        self.sent = 0
        yield BlockStart(0, "text")
        text = ""
        for i in range(self.count):
            self.sent += 1
            text += f"w{i} "
            yield TextDelta(0, f"w{i} ")
            await asyncio.sleep(self.pause)
        yield BlockEnd(0, TextBlock(text))
        yield Finish.stop()


class Recorder(TurnObserver):
    """Records every call, with the thread it came on; ``on_event(n)`` runs at the n-th event."""

    def __init__(self, stop: StopSignal, on_event: Callable[[int], None] | None = None) -> None:
        self.stop = stop
        self.on_event = on_event
        self.calls: list[Any] = []
        self.threads: dict[str, set[int]] = {}
        self.events: list[Any] = []

    def _seen(self, what: str) -> None:
        self.threads.setdefault(what, set()).add(threading.get_ident())

    def started(self) -> None:
        self._seen("started")
        self.calls.append("started")

    def waiting(self) -> Any:
        recorder = self

        class Waiting:
            def __enter__(self) -> None:
                recorder.calls.append("waiting")

            def __exit__(self, *exc: object) -> None:
                recorder.calls.append("waited")

        return Waiting()

    def event(self, event: Any) -> None:
        self._seen("event")
        self.events.append(event)
        self.calls.append(("event", event))
        if self.on_event is not None:
            self.on_event(len(self.events))

    def tick(self) -> None:
        self._seen("tick")
        if not self.calls or self.calls[-1] != "tick":
            self.calls.append("tick")

    def confirm(self, call: Any) -> bool:
        self._seen("confirm")
        self.calls.append(("confirm", call.name))
        return True

    def finished(self, completion: Completion) -> None:
        self._seen("finished")
        self.calls.append(("finished", completion))


@pytest.fixture
def engine() -> Engine:
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider("counted", adapter=Counted(), needs_key=False)
    eng.add_provider("long", adapter=Counted(count=400, pause=0.005), needs_key=False)
    return eng


class Hook:
    """A display hook that makes a :class:`Recorder` per turn and keeps it, with what it was
    given; ``on_event`` goes to the next recorders."""

    def __init__(self) -> None:
        self.made: list[tuple[Recorder, dict[str, Any]]] = []
        self.on_event: Callable[[int], None] | None = None

    def __call__(self, engine: Engine, turn: Turn, stop: StopSignal, **kw: Any) -> TurnObserver:
        recorder = Recorder(stop, self.on_event)
        self.made.append((recorder, {"turn": turn, **kw}))
        return recorder


@pytest.fixture
def hook() -> Iterator[Hook]:
    installed = observers._turn_display
    hook = Hook()
    observers.set_turn_display(hook)
    try:
        yield hook
    finally:
        observers.set_turn_display(installed)


def _send(chat: Chat, mode: str, text: str, **kw: Any) -> Completion:
    if mode == "send":
        return chat.send(text, **kw)
    return asyncio.run(chat.asend(text, **kw))


def _shape(calls: list[Any]) -> list[str]:
    """The calls with runs of events squeezed: ['started', 'event', 'finished']."""
    names: list[str] = []
    for call in calls:
        name = call if isinstance(call, str) else call[0]
        if name in ("tick",):
            continue
        if not names or names[-1] != name or name != "event":
            names.append(name)
    return names


# ---------------------------------------------------------------- the order of the calls


@pytest.mark.parametrize("mode", ["send", "asend"])
def test_chat_tells_its_observer_started_each_event_then_finished(
    engine: Engine, hook: Hook, mode: str
) -> None:
    chat = Chat("counted", engine=engine, max_rate=7.0)
    completion = _send(chat, mode, "hi", fmt="text")
    assert completion.error is None
    [(rec, given)] = hook.made
    expected = ["started", "waiting", "event", "waited", "finished"]
    if mode == "asend":
        expected = ["started", "event", "finished"]  # awaited: no wait loop around it
    assert _shape(rec.calls) == expected
    assert rec.calls[-1] == ("finished", completion)
    assert isinstance(rec.events[0], BlockStart)
    assert isinstance(rec.events[-1], Finish)
    deltas = [e.text for e in rec.events if isinstance(e, TextDelta)]
    assert "".join(deltas) == completion.text == "w0 w1 w2 w3 w4 "
    # what the display hook is given: the turn, how to show it; live=None is left to it
    assert given["turn"].provider == "counted"
    assert given == {**given, "live": None, "max_rate": 7.0, "fmt": "text"}
    assert [m.role for m in chat.messages] == ["user", "assistant"]


def test_display_false_asks_the_hook_for_nothing(engine: Engine, hook: Hook) -> None:
    completion = Chat("counted", engine=engine).send("hi", display=False)
    assert completion.error is None
    assert completion.text == "w0 w1 w2 w3 w4 "
    assert hook.made == []


def test_every_schema_try_gets_an_observer_of_its_own(engine: Engine, hook: Hook) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    completion = Chat("counted", engine=engine).send("hi", schema=schema, schema_retries=2)
    assert completion.error is not None
    assert completion.error.code == "SCHEMA_MISMATCH"
    assert len(hook.made) == 3  # the turn and its two retries, each shown, each finished
    for rec, _given in hook.made:
        assert rec.calls[0] == "started"
        assert rec.calls[-1][0] == "finished"


# ---------------------------------------------------------------- threads and ticks


def test_a_blocking_run_ticks_and_tells_on_the_callers_thread(engine: Engine, hook: Hook) -> None:
    Chat("counted", engine=engine).send("hi")
    [(rec, _given)] = hook.made
    me = threading.get_ident()
    assert "tick" in rec.calls
    # ticks happen while waiting, between the events
    assert rec.calls.index("waiting") < rec.calls.index("tick") < rec.calls.index("waited")
    for what in ("started", "event", "tick", "finished"):
        assert rec.threads[what] == {me}, what
    adapter = engine.adapter_of("counted")
    assert isinstance(adapter, Counted)
    assert me not in adapter.threads  # the stream itself ran on the background loop


def test_a_blocking_runs_tool_question_is_asked_on_the_callers_thread(
    hook: Hook,
) -> None:
    ran: list[int] = []

    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        ran.append(threading.get_ident())
        return a + b

    eng = Engine(config_file=False, env_file=False, retries=0)
    completion = Chat("mock", "tools", engine=eng, tools=[add]).send("add 1 and 2", confirm=True)
    [(rec, _given)] = hook.made
    assert ("confirm", "add") in rec.calls
    assert rec.threads["confirm"] == {threading.get_ident()}
    assert ran  # approved, so it ran
    assert completion.error is None


# ---------------------------------------------------------------- stop


@pytest.mark.parametrize("mode", ["send", "asend"])
def test_stop_through_the_observer_stops_the_stream(engine: Engine, hook: Hook, mode: str) -> None:
    def stop_at_the_third(n: int) -> None:
        if n == 3:
            hook.made[-1][0].stop.set()

    hook.on_event = stop_at_the_third
    chat = Chat("long", engine=engine)
    completion = _send(chat, mode, "go")
    assert completion.finish is not None
    assert completion.finish.kind == "aborted"
    assert completion.error is not None
    assert completion.error.code == "ABORTED"
    assert completion.text.startswith("w0 w1")
    adapter = engine.adapter_of("long")
    assert isinstance(adapter, Counted)
    assert adapter.sent < 400  # it did not run to its end
    assert [m.role for m in chat.messages] == ["user", "assistant"]  # what arrived is kept


def test_a_keyboard_interrupt_in_a_tick_stops_a_blocking_run(engine: Engine) -> None:
    class Interrupting(TurnObserver):
        ticks = 0

        def tick(self) -> None:
            self.ticks += 1
            if self.ticks == 3:
                raise KeyboardInterrupt

    turn = Turn(Request("long", messages=[Message.user("go")]))
    stop = StopSignal()
    from notebook_llm.api.chat import make_source

    runner = TurnRunner(Interrupting(), stop, "long")
    completion = runner.run_blocking(make_source(engine, turn, stop))
    assert completion.finish is not None
    assert completion.finish.kind == "aborted"
    assert stop.reason == "interrupted"


# ---------------------------------------------------------------- an observer that fails


@pytest.mark.parametrize("mode", ["send", "asend"])
def test_an_observer_that_fails_stops_the_turn_with_its_error(
    engine: Engine, hook: Hook, mode: str
) -> None:
    def broken(n: int) -> None:
        if n == 3:
            raise ValueError("the view broke")

    hook.on_event = broken
    chat = Chat("long", engine=engine)
    completion = _send(chat, mode, "go")
    # not silent: the turn's error says what failed, and the stream was stopped (no more
    # tokens spent on a turn no one can see)
    assert completion.error is not None
    assert completion.error.code == "UNKNOWN"
    assert "showing the turn failed (ValueError: the view broke)" in completion.error.message
    adapter = engine.adapter_of("long")
    assert isinstance(adapter, Counted)
    assert adapter.sent < 400
    [(rec, _given)] = hook.made
    assert len(rec.events) == 3  # told nothing more after it failed...
    assert rec.calls[-1] == ("finished", completion)  # ...but still asked to show the end
    assert chat.last is completion


# ---------------------------------------------------------------- a batch's progress


def test_a_batch_reports_to_the_installed_progress_hook(engine: Engine) -> None:
    from notebook_llm.api.batch import map_prompts

    made: list[int] = []
    seen: list[tuple[int, int, float | None]] = []

    def factory(total: int) -> observers.BatchProgress:
        made.append(total)
        return lambda done, total, spent: seen.append((done, total, spent))

    installed = observers._batch_progress
    observers.set_batch_progress(factory)
    try:
        map_prompts(["a", "b"], engine=engine, provider="counted")  # progress=None: the hook
        assert made == [2]
        assert [(d, t) for d, t, _s in seen] == [(0, 2), (1, 2), (2, 2)]
        assert all(s is None for _d, _t, s in seen)  # no price known for this model
        map_prompts(["a"], engine=engine, provider="counted", progress=False)
        assert made == [2]  # progress=False: the hook is not asked
    finally:
        observers.set_batch_progress(installed)


# ---------------------------------------------------------------- the layer rule


def _imported(path: Path) -> Iterator[str]:
    """Every module an API file imports (anywhere in it, lazy imports included), absolute."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = (
        module.rsplit(".", 1)[0] if path.name != "__init__.py" else module[: -len(".__init__")]
    )
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                yield ".".join([*base, node.module] if node.module else base)
            elif node.module:
                yield node.module


def test_the_api_layer_imports_no_notebook_code() -> None:
    banned = ("notebook_llm.notebook", "IPython", "ipywidgets", "anywidget", "jupyter_ui_poll")
    files = sorted((PACKAGE / "api").rglob("*.py"))
    assert PACKAGE / "api" / "turn_runner.py" in files
    bad = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in files
        for name in _imported(path)
        if name.split(".")[0] in banned or name.startswith(banned[0])
    ]
    assert bad == []
    # the scan does see relative imports (the notebook layer's own files import notebook code)
    present = PACKAGE / "notebook" / "widgets" / "present.py"
    assert any(n.startswith("notebook_llm.notebook") for n in _imported(present))


def test_without_the_notebook_extra_a_turn_says_so_once_and_still_answers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "notebook_llm.notebook.widgets.present", None)
    chat = Chat(provider="mock", model="echo")
    assert chat.send("hello").text == "hello"
    assert chat.send("again").text == "again"
    err = capsys.readouterr().err
    assert err.count("a turn is shown only with the notebook extra") == 1
    assert "pip install 'notebook-llm[notebook]', or pass display=False" in err
