"""%%llm and %llm in an in-process InteractiveShell: options, formats, errors, keys, interrupt."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from waiting import GUARD, until

from notebook_llm import (
    BlockStart,
    Engine,
    Event,
    Finish,
    GenerateOptions,
    LlmAdapter,
    Message,
    TextDelta,
)
from notebook_llm.api.chat import Turn, set_default_engine
from notebook_llm.api.turn_runner import TurnRunner
from notebook_llm.engine.request import Request
from notebook_llm.notebook.magics.llm import HINT, LlmMagics
from notebook_llm.notebook.widgets.present import Presenter
from notebook_llm.notebook.widgets.render import STOPPED_MARK

SECRET = "sk-fake-MAGICSECRET-9876543210"


class RecordingComm(BaseComm):
    def __init__(self, log: list[str], **kwargs: Any) -> None:
        self.log = log
        super().__init__(**kwargs)

    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        self.log.append(json.dumps(data, default=str))


class Endless(LlmAdapter):
    """Streams text forever (until stopped)."""

    name = "endless"

    #: Deltas sent so far (by every instance; the engine fixture resets it).
    sent = 0

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        yield BlockStart(0, "text")
        while True:
            yield TextDelta(0, "more ")
            Endless.sent += 1
            await asyncio.sleep(0.005)
        yield Finish.stop()  # pragma: no cover


@pytest.fixture
def engine() -> Iterator[Engine]:
    Endless.sent = 0
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider("endless", adapter=Endless(), needs_key=False)
    set_default_engine(eng)
    yield eng
    set_default_engine(None)


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    log: list[str] = []
    monkeypatch.setattr(comm, "create_comm", lambda **kw: RecordingComm(log, **kw))
    return log


@pytest.fixture
def shell(engine: Engine, comms: list[str]) -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "notebook_llm")
    magics = ip.magics_manager.registry["LlmMagics"]
    magics.widgets = "always"
    magics.default_provider = None
    magics.default_model = None
    magics._hinted = False
    magics.chats.clear()
    yield ip
    ip.run_line_magic("unload_ext", "notebook_llm")


def run(ip: InteractiveShell, line: str, cell: str | None = None) -> Any:
    with capture_output() as cap:
        if cell is None:
            ip.run_line_magic("llm", line)
        else:
            ip.run_cell_magic("llm", line, cell)
    return cap


def data(cap: Any, mime: str) -> list[Any]:
    return [o.data[mime] for o in cap.outputs if mime in o.data]


def answer(cap: Any) -> str:
    """The answer in the final static output's text/plain (without its footer line)."""
    return str(data(cap, "text/plain")[-1]).split("\n-- ")[0]


def test_load_twice_and_unload(shell: InteractiveShell) -> None:
    shell.run_line_magic("load_ext", "notebook_llm")
    assert isinstance(shell.magics_manager.registry["LlmMagics"], LlmMagics)
    shell.run_line_magic("unload_ext", "notebook_llm")
    assert "llm" not in shell.magics_manager.magics["cell"]
    shell.run_line_magic("load_ext", "notebook_llm")
    assert "llm" in shell.magics_manager.magics["cell"]


def test_default_is_mock_with_one_hint(shell: InteractiveShell) -> None:
    cap = run(shell, "", "hello there")
    assert HINT in cap.stdout
    assert "<p>hello there</p>" in data(cap, "text/html")[-1]
    assert answer(cap) == "hello there"
    assert "mock:echo · done" in data(cap, "text/html")[-1]
    assert HINT not in run(shell, "", "again").stdout


def test_outputs_are_deterministic_and_widget_views_separate(shell: InteractiveShell) -> None:
    first, second = (
        run(shell, "mock:reasoning", "same prompt"),
        run(shell, "mock:reasoning", "same prompt"),
    )
    strip = [
        [{k: v for k, v in o.data.items() if "widget" not in k} for o in c.outputs]
        for c in (first, second)
    ]
    assert strip[0] == strip[1]
    assert not [o for o in first.outputs if "text/plain" not in o.data]  # no widget-only one


def test_use_and_interpolation(shell: InteractiveShell) -> None:
    shell.user_ns["topic"] = "owls"
    run(shell, "use mock:echo")
    cap = run(shell, "-o res", "about {topic} and {unknown} {{topic}}")
    assert answer(cap) == "about owls and {unknown} {topic}"
    assert shell.user_ns["res"].text == "about owls and {unknown} {topic}"
    assert shell.user_ns["_llm"] is shell.user_ns["res"]
    cap = run(shell, "--no-interpolate", "{topic}")
    assert answer(cap) == "{topic}"


def test_bad_option_prints_usage(shell: InteractiveShell) -> None:
    cap = run(shell, "--bogus", "hi")
    assert "UsageError" in cap.stderr
    assert "usage: %%llm" in cap.stderr
    assert "Traceback" not in cap.stderr + cap.stdout
    cap = run(shell, "frobnicate")
    assert "UsageError" in cap.stderr
    assert "%llm use" in cap.stderr


def test_a_long_option_with_one_dash_says_which_one(shell: InteractiveShell) -> None:
    # once: "invalid float value: 'emperature'" (read as -t emperature)
    cap = run(shell, "mock:echo -temperature 0.2", "hi")
    assert "did you mean --temperature?" in cap.stderr
    assert "emperature'" not in cap.stderr
    cap = run(shell, "mock:echo -max-tokens 5", "hi")
    assert "did you mean --max-tokens?" in cap.stderr
    # a short option with its value attached is still one
    assert answer(run(shell, "mock:echo -t0.2", "fine")) == "fine"


def test_a_typo_next_to_a_defined_name_is_named_in_one_line(shell: InteractiveShell) -> None:
    shell.user_ns["city"] = "Paris"
    cap = run(shell, "mock:echo", "weather in {ctiy}")
    assert answer(cap) == "weather in {ctiy}"  # still sent as written
    notes = [ln for ln in cap.stdout.splitlines() if "did you mean" in ln]
    assert notes == ["{ctiy} is not defined and was sent as written: did you mean {city}?"]
    quiet = run(shell, "mock:echo", 'weather in {city}, JSON {"a": 1}, {zzzzzz}')
    assert "did you mean" not in quiet.stdout
    assert "did you mean" not in run(shell, "mock:echo --no-interpolate", "{ctiy}").stdout


def test_the_mock_hint_is_plain_text() -> None:
    assert "`" not in HINT
    assert "%llm use openai:gpt-4o-mini" in HINT


def test_formats(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = run(shell, "mock -f json", '```json\n{"a": [1, 2]}\n```')
    assert '```json\n{\n  "a": [\n    1,\n    2\n  ]\n}\n```' in data(cap, "text/plain")[-1]
    assert '<code class="language-json">' in data(cap, "text/html")[-1]  # highlighted
    offered: list[str] = []
    monkeypatch.setattr(shell, "set_next_input", lambda text, replace=False: offered.append(text))
    run(shell, "mock -f code", "```python\nprint(1)\n```")
    assert offered == ["print(1)"]
    cap = run(shell, "mock -f text", "plain *text*")
    assert answer(cap) == "plain *text*"
    assert '<pre style="white-space:pre-wrap">plain *text*</pre>' in data(cap, "text/html")[-1]
    cap = run(shell, "mock -f json", "not json")
    assert any("MALFORMED_RESPONSE" in t for t in data(cap, "text/plain"))


def test_missing_key_shows_a_box_not_a_traceback(shell: InteractiveShell) -> None:
    cap = run(shell, "openai", "hi")
    (box,) = [t for t in data(cap, "text/plain") if "MISSING_CREDENTIAL" in t]
    assert "OPENAI_API_KEY" in box
    assert "Traceback" not in cap.stdout + cap.stderr


def test_key_never_shown(
    shell: InteractiveShell,
    comms: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr("getpass.getpass", lambda prompt="": SECRET)
    monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens
    caps = [run(shell, "key openai"), run(shell, "openai", "hi"), run(shell, "providers")]
    shell.user_ns["k"] = SECRET
    caps.append(run(shell, "mock", "echo {k} please"))
    caps.append(run(shell, f"mock -s {SECRET}", "x"))
    text = " ".join(c.stdout + c.stderr + json.dumps([o.data for o in c.outputs]) for c in caps)
    assert "key for openai set" in text
    assert "TRANSPORT" in text or "error" in text.lower()
    assert SECRET not in text
    assert not [m for m in comms if SECRET in m]
    assert SECRET not in caplog.text
    assert SECRET not in repr(shell.user_ns["_llm"])


def test_chat_memory(shell: InteractiveShell) -> None:
    run(shell, "mock --chat", "first")
    run(shell, "mock --chat", "second")
    history = run(shell, "history").stdout
    assert "user: first" in history
    assert "assistant: second" in history
    run(shell, "mock --chat --new", "third")
    assert "first" not in run(shell, "history").stdout
    run(shell, "reset")
    assert "empty" in run(shell, "history").stdout
    run(shell, "mock --chat other", "x")
    assert "user: x" in run(shell, "history other").stdout


def test_tools_show_the_calls(shell: InteractiveShell) -> None:
    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    shell.user_ns["add"] = add
    cap = run(shell, "mock:tools --tools add -o r", "add 1 and 2")
    assert shell.user_ns["r"].tool_calls or shell.user_ns["r"].steps
    assert "Traceback" not in cap.stderr
    assert "UsageError" in run(shell, "mock --tools nope", "x").stderr


def test_an_interrupt_stops_the_stream_and_keeps_the_text(engine: Engine, comms: list[str]) -> None:
    interrupted = [False]

    def poll() -> None:  # a kernel interrupt, once some text has streamed
        if Endless.sent >= 3 and not interrupted[0]:
            interrupted[0] = True
            raise KeyboardInterrupt

    turn = Turn(Request("endless", messages=[Message.user("go")]))
    ip = InteractiveShell.instance()
    with capture_output() as cap:
        presenter = Presenter(engine, turn, live=True, poll=poll)
        from notebook_llm.api.chat import make_source

        runner = TurnRunner(presenter, presenter.stop, turn.provider, turn.model)
        completion = runner.run_blocking(make_source(engine, turn, presenter.stop))
        presenter.finished(completion)
    assert ip is not None
    assert completion.finish is not None
    assert completion.finish.kind == "aborted"
    assert completion.text.startswith("more")
    assert answer(cap).endswith(STOPPED_MARK)
    assert "endless · stopped" in data(cap, "text/plain")[-1]


def test_stop_button(engine: Engine, comms: list[str]) -> None:
    turn = Turn(Request("endless", messages=[Message.user("go")]))
    presenter: Presenter

    def poll() -> None:
        assert presenter.view is not None
        if len(presenter.view.text) > 20:
            presenter.view.stop_button.click()

    from notebook_llm.api.chat import make_source

    with capture_output() as cap:
        presenter = Presenter(engine, turn, live=True, poll=poll)
        runner = TurnRunner(presenter, presenter.stop, turn.provider, turn.model)
        completion = runner.run_blocking(make_source(engine, turn, presenter.stop))
        presenter.finished(completion)
    assert completion.finish is not None
    assert completion.finish.kind == "aborted"
    assert "endless · stopped" in data(cap, "text/plain")[-1]


# ------------------------------------------------------------------ async %%llm cells (Stop in ipykernel 7)


def test_async_cell_transformer_rewrites_only_a_plain_llm_cell() -> None:
    from IPython.core.inputtransformer2 import TransformerManager

    from notebook_llm.notebook.magics import async_cell_transformer

    code = TransformerManager().transform_cell('%%llm mock:echo -s "a)b"\nHi {x} )\n')
    out = "".join(async_cell_transformer(code.splitlines(keepends=True)))
    assert out.startswith(
        "await get_ipython().magics_manager.registry['LlmMagics'].llm_cell_async("
    )
    assert "'mock:echo -s \"a)b\"', 'Hi {x} )\\n'" in out
    other = TransformerManager().transform_cell("x = 1\nprint(x)\n")
    assert async_cell_transformer(other.splitlines(keepends=True)) == other.splitlines(
        keepends=True
    )
    adapter_cell = TransformerManager().transform_cell("%%adapter\nreturn {}\n")
    assert "await" not in "".join(async_cell_transformer(adapter_cell.splitlines(keepends=True)))


def test_transformer_is_installed_only_in_a_kernel_that_dispatches_comms(
    shell: InteractiveShell,
) -> None:
    from notebook_llm.notebook.magics import async_cell_transformer

    # A terminal InteractiveShell has no kernel: %%llm stays a plain blocking magic.
    assert async_cell_transformer not in shell.input_transformers_post


def test_async_cell_path_gives_the_same_answer(shell: InteractiveShell) -> None:
    from notebook_llm.notebook.magics import async_cell_transformer

    shell.input_transformers_post.append(async_cell_transformer)
    try:
        shell.user_ns["who"] = "Ada"
        with capture_output() as cap:
            result = shell.run_cell("%%llm mock:echo -o answer\nHello {who}!\n")
        assert result.success, result.error_in_exec
        assert shell.user_ns["answer"].text == "Hello Ada!"
        assert any("Hello Ada!" in t for t in data(cap, "text/plain"))
    finally:
        shell.input_transformers_post.remove(async_cell_transformer)


async def test_async_cell_interrupted_keeps_partial_text_marked_stopped(
    shell: InteractiveShell,
) -> None:
    import asyncio

    magics = shell.magics_manager.registry["LlmMagics"]
    with capture_output() as cap:
        task = asyncio.ensure_future(magics.llm_cell_async("endless", "go"))
        await until(lambda: Endless.sent >= 3, "some streamed text")
        task.cancel()  # what ipykernel does to an async cell on a kernel interrupt
        # the cell ends normally, not with CancelledError (the guard: an endless stream)
        await asyncio.wait_for(task, GUARD)
    completion = shell.user_ns["_llm"]
    assert completion.error is not None
    assert completion.error.code == "ABORTED"
    assert completion.text.startswith("more more")
    assert any("[stopped]" in t for t in data(cap, "text/plain"))


# ------------------------------------------------------------------ %llm record / replay


def test_record_then_replay_with_the_magics(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_llm.adapters.mock import MockServer

    path = tmp_path / "session.jsonl"
    key = "sk-test-MAGICREC-0123456789"
    with MockServer(require_key=key) as srv:
        monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", srv.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", key)
        engine = Engine(config_file=False, env_file=False, retries=0)
        set_default_engine(engine)
        assert "recording" in str(run(shell, f"record {path}").stdout)
        live = run(shell, "openai:echo", "Recorded hello")
        run(shell, "record stop")
    monkeypatch.delenv("OPENAI_API_KEY")
    assert key not in path.read_text()
    replay_engine = Engine(config_file=False, env_file=False, retries=0)
    set_default_engine(replay_engine)
    assert "replaying" in str(run(shell, f"replay {path}").stdout)
    replayed = run(shell, "openai:echo", "Recorded hello")
    run(shell, "replay stop")

    def answers(cap: Any) -> list[str]:
        return [t for t in data(cap, "text/plain") if not t.startswith("adapter log:")]

    assert answers(replayed) == answers(live)
    assert any("Recorded hello" in t for t in answers(replayed))
    bad = run(shell, "replay")  # status, not an error
    assert "UsageError" not in bad.stderr


# ------------------------------------------------------------------ --confirm: Run / Skip buttons


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def _click_when_asked(asked: list[Any], button: str) -> None:
    await until(lambda: asked, "the Run / Skip question")
    view = asked[-1]
    assert view.confirm_bar.layout.display is None  # the question is shown
    {"Run": view.run_button, "Skip": view.skip_button, "Stop": view.stop_button}[button].click()


@pytest.mark.parametrize(("button", "ran"), [("Run", True), ("Skip", False), ("Stop", False)])
async def test_confirm_waits_for_run_or_skip_in_the_widget(
    shell: InteractiveShell, button: str, ran: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_llm.notebook.widgets.stream_view import StreamView

    asked: list[Any] = []
    original = StreamView.ask

    def spy(view: StreamView, call: Any, on_answer: Any) -> None:
        asked.append(view)
        original(view, call, on_answer)

    monkeypatch.setattr(StreamView, "ask", spy)
    shell.user_ns["get_weather"] = get_weather
    magics = shell.magics_manager.registry["LlmMagics"]
    with capture_output() as cap:
        clicker = asyncio.ensure_future(_click_when_asked(asked, button))
        await asyncio.wait_for(
            magics.llm_cell_async("mock:tools --tools get_weather --confirm", "Lisbon"), 10
        )
        await clicker
    assert asked[-1].confirm_bar.layout.display == "none"  # taken down after the answer
    completion = shell.user_ns["_llm"]
    answer = "\n".join(data(cap, "text/plain"))
    if ran:
        assert "sunny in Lisbon" in answer
    elif button == "Skip":
        assert "sunny in Lisbon" not in answer
        assert "declined" in completion.transcript[1].content[0].text
    else:  # Stop while the question is open: nothing runs and the turn ends stopped
        assert "sunny in Lisbon" not in answer
        assert completion.error is not None
        assert completion.error.code == "ABORTED"


def test_reasoning_is_kept_collapsed_in_the_saved_output(shell: InteractiveShell) -> None:
    cap = run(shell, "mock:reasoning", "Is 17 prime?")
    html = data(cap, "text/html")[-1]
    assert '<details class="notebook-llm-reasoning"><summary>Reasoning</summary>' in html
    assert "<details open" not in html
    assert "The user wrote" in html
    assert html.count("Reasoning") == 1
    assert "</details><p>Is 17 prime?</p>" in html
    assert answer(cap).endswith("\nIs 17 prime?")  # after the reasoning, once


def test_a_named_chat_keeps_its_tools_for_later_turns(shell: InteractiveShell) -> None:
    shell.user_ns["get_weather"] = get_weather
    run(shell, "mock:tools --chat trip --new --tools get_weather", "Lisbon")
    chat = shell.magics_manager.registry["LlmMagics"].chats["trip"]
    assert [t.__name__ for t in chat.tools] == ["get_weather"]
    run(shell, "mock:tools --chat trip", "and tomorrow?")
    assert [t.__name__ for t in chat.tools] == ["get_weather"]
    run(shell, "mock:echo", "a one-off turn")  # no --chat: nothing carried over
    assert [t.__name__ for t in chat.tools] == ["get_weather"]
