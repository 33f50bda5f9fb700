"""Edge cases of the notebook layer: interrupts of awaited chats, kernels that cannot deliver
clicks to a blocking cell, autoawait off, bad quoting, unwritable recordings, clean unload,
widget comms closed, keys hidden before first use."""

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
from waiting import until

from notebook_llm import (
    BlockStart,
    Engine,
    Event,
    Finish,
    GenerateOptions,
    LlmAdapter,
    TextDelta,
)
from notebook_llm.api.chat import Chat, set_default_engine
from notebook_llm.core.redaction import redact


class Endless(LlmAdapter):
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


class QuietComm(BaseComm):
    """A comm with no front end behind it."""

    def publish_msg(self, msg_type: str, *args: Any, **kwargs: Any) -> None:
        return None


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    monkeypatch.setattr(comm, "create_comm", lambda **kw: QuietComm(**kw))
    Endless.sent = 0
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider("endless", adapter=Endless(), needs_key=False)
    set_default_engine(eng)
    yield eng
    set_default_engine(None)


@pytest.fixture
def shell(engine: Engine) -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "notebook_llm")
    ip.magics_manager.registry["LlmMagics"].widgets = "always"
    yield ip
    ip.run_line_magic("unload_ext", "notebook_llm")


async def test_interrupting_an_awaited_chat_shows_and_keeps_the_partial_answer(
    shell: InteractiveShell,
) -> None:
    chat = Chat("endless", live=True)
    with capture_output() as cap:
        task = asyncio.ensure_future(chat.asend("go"))
        await until(lambda: Endless.sent >= 3, "some streamed text")
        task.cancel()  # a kernel interrupt of the cell that awaits
        with pytest.raises(asyncio.CancelledError):
            await task
    shown = [o.data.get("text/plain", "") for o in cap.outputs]
    assert any(t.startswith("more more") and "[stopped]" in t for t in shown)
    assert chat.last is not None
    assert chat.last.error is not None
    assert chat.last.error.code == "ABORTED"
    assert [m.role for m in chat.messages] == ["user", "assistant"]  # kept in the history


def test_a_blocking_send_in_a_kernel_without_ui_polling_offers_interrupt_instead_of_stop(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_llm.notebook.widgets import present

    class Kernel:  # ipykernel 7 has no do_one_iteration
        pass

    class Shell:
        kernel = Kernel()

    monkeypatch.setattr("notebook_llm.notebook.widgets.kernel_poll._shell", lambda: Shell())
    views: list[Any] = []
    original = present.Presenter.started

    def spy(self: Any) -> None:
        views.append(self.view)
        original(self)

    monkeypatch.setattr(present.Presenter, "started", spy)
    with capture_output():
        Chat("mock", "echo", live=True).send("hello")
    view = views[0]
    assert view.stop_button.layout.display == "none"
    assert "interrupt the kernel" in view._stop_hint.value


def test_autoawait_off_leaves_llm_cells_as_plain_magics(shell: InteractiveShell) -> None:
    from IPython.core.inputtransformer2 import TransformerManager

    from notebook_llm.notebook.magics import async_cell_transformer

    lines = TransformerManager().transform_cell("%%llm\nhi\n").splitlines(keepends=True)
    shell.autoawait = False
    try:
        assert async_cell_transformer(lines) == lines
    finally:
        shell.autoawait = True
    assert "await" in "".join(async_cell_transformer(lines))


def test_unbalanced_quotes_in_llm_give_a_usage_message(shell: InteractiveShell) -> None:
    with capture_output() as cap:
        shell.run_cell_magic("llm", '-s "unterminated', "prompt")
    assert "No closing quotation" in cap.stderr
    assert "Traceback" not in cap.stderr


def test_unbalanced_quotes_in_adapter_are_a_usage_error(shell: InteractiveShell) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="No closing quotation"):  # shown without a traceback
        shell.run_line_magic("adapter", 'load "/tmp/x')


def test_recording_to_an_unwritable_path_is_a_usage_error(shell: InteractiveShell) -> None:
    with capture_output() as cap:
        shell.run_line_magic("llm", "record /proc/no-such-dir/x.jsonl")
    assert "cannot use" in cap.stderr
    assert "Traceback" not in cap.stderr


def test_unload_removes_everything_it_added(shell: InteractiveShell, tmp_path: Path) -> None:
    import logging

    registry = shell.magics_manager.registry
    llm, adapter = registry["LlmMagics"], registry["AdapterMagics"]
    assert shell.configurables.count(llm) == 1
    script = tmp_path / "w.lua"
    script.write_text(
        'return { name = "w", transform_request = function(s) return s end,'
        " transform_stream_chunk = function(s) return s end }"
    )
    with capture_output():
        shell.run_line_magic("adapter", f"watch {script}")
    watchers = list(adapter.watchers.values())
    assert watchers
    shell.run_line_magic("unload_ext", "notebook_llm")
    try:
        assert llm not in shell.configurables
        assert adapter not in shell.configurables
        assert not adapter.watchers
        handlers = logging.getLogger("notebook_llm.adapter").handlers
        assert not any(type(h).__name__ == "CellLogCollector" for h in handlers)
    finally:
        shell.run_line_magic("load_ext", "notebook_llm")


def test_finished_views_close_the_text_widgets_they_no_longer_show(engine: Engine) -> None:
    from notebook_llm.core.protocol import BlockEnd, TextBlock
    from notebook_llm.notebook.widgets.stream_view import StreamView

    view = StreamView("m")
    text = "".join(f"Paragraph {i}.\n\n" for i in range(200))
    for event in [BlockStart(0, "text"), TextDelta(0, text), BlockEnd(0, TextBlock(text))]:
        view.handle(event)
    view.flush()
    assert view.pane.comm is not None
    view.finish(status="done")
    assert view.pane.comm is None  # closed: no comm, no memory held (the text was in it)
    assert view.widget.comm is not None  # the view itself is still displayed


def test_a_key_in_the_environment_is_hidden_before_any_request_used_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-live-NEVERUSED-0123456789abcdef"
    monkeypatch.setenv("MISTRAL_API_KEY", key)
    Engine(config_file=False, env_file=False)
    assert redact(f"the key is {key}") == "the key is ***"


def test_completion_repr_hides_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    from notebook_llm import TextBlock
    from notebook_llm.core.completion import Completion
    from notebook_llm.core.redaction import register_secret

    register_secret("sk-echoed-0123456789abcdef")
    completion = Completion(blocks=[TextBlock("echo: sk-echoed-0123456789abcdef")])
    assert "sk-echoed" not in repr(completion)
    assert (
        json.loads(completion.to_json()) == completion.to_dict()
    )  # the raw data is still there for the caller
