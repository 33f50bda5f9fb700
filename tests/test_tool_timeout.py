"""``tool_timeout``: the seconds one tool call may run, reached from every way a tool loop
starts: ``run_tools`` (and ``stream_tools``), ``Chat`` (for every turn, or one ``send``),
``map(tools=)``, ``%%llm --tool-timeout``, and the config file's ``[defaults] tool_timeout``.

The tool here blocks until the test releases it, so only the timeout can end its call: the
verdict is which limit ended it (the text the model is told), never how long it took."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from waiting import GUARD

from notebook_llm import Chat, Engine, ErrorCode, LlmError, map, run_tools
from notebook_llm.engine.session import set_default_engine
from notebook_llm.notebook.magics.args import parse_cell_line

#: What the mock model answers after a call of ``hang`` that the timeout of ``s`` ended.
ABANDONED = (
    "Result of hang: tool 'hang' did not finish within {s} s (tool_timeout={s}) and was abandoned"
)


@pytest.fixture
def hang() -> Iterator[Any]:
    """A tool that blocks until the test ends (its thread cannot be killed: it is released)."""
    release = threading.Event()

    def hang(n: int) -> int:
        """Blocks until released."""
        release.wait(GUARD)
        return n

    yield hang
    release.set()


def test_chat_takes_a_tool_timeout_for_every_turn_and_send_for_one(hang: Any) -> None:
    chat = Chat("mock", "tools", tools=[hang], tool_timeout=0.2, live=False)
    assert chat.send("hang 1", display=False).text == ABANDONED.format(s=0.2)
    assert chat.send("hang 2", display=False, tool_timeout=0.3).text == ABANDONED.format(s=0.3)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "10"])
def test_chat_refuses_a_tool_timeout_that_is_not_seconds(bad: Any) -> None:
    with pytest.raises(LlmError) as info:
        Chat("mock", "tools", tool_timeout=bad)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "tool_timeout must be a positive number of seconds" in info.value.message


def test_map_runs_each_rows_tool_loop_with_the_timeout(hang: Any) -> None:
    rows = map(["hang 1", "hang 2"], model="tools", tools=[hang], tool_timeout=0.2, progress=False)
    assert [r.text for r in rows] == [ABANDONED.format(s=0.2)] * 2


def test_map_refuses_a_tool_timeout_without_tools_or_not_seconds(hang: Any) -> None:
    with pytest.raises(LlmError) as info:
        map(["a"], tool_timeout=5, progress=False)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "tool_timeout= goes with tools=" in info.value.message
    with pytest.raises(LlmError) as info:
        map(["a"], tools=[hang], tool_timeout=-1, progress=False)
    assert info.value.code == ErrorCode.INVALID_OPTIONS


async def test_the_config_files_default_applies_where_none_is_given(
    hang: Any, tmp_path: Path
) -> None:
    config = tmp_path / "timeouts.toml"
    config.write_text("[defaults]\ntool_timeout = 0.25\n")
    engine = Engine(config_file=config)
    done = await run_tools(engine, "mock", "tools", prompt="hang 1", tools=[hang])
    assert done.text == ABANDONED.format(s=0.25)
    given = await run_tools(
        engine, "mock", "tools", prompt="hang 1", tools=[hang], tool_timeout=0.2
    )
    assert given.text == ABANDONED.format(s=0.2)  # the call's own wins


@pytest.mark.parametrize("bad", ["0", "-3", '"soon"', "true", "nan"])
def test_a_bad_default_in_the_config_file_is_one_line(tmp_path: Path, bad: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(f"[defaults]\ntool_timeout = {bad}\n")
    with pytest.raises(LlmError) as info:
        Engine(config_file=config)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "[defaults] tool_timeout must be a positive number of seconds" in info.value.message
    assert "\n" not in info.value.message


@pytest.fixture
def ip() -> Iterator[Any]:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "notebook_llm")
    magics = shell.magics_manager.registry["LlmMagics"]
    magics.chats.clear()
    shell.user_ns.pop("_llm", None)
    yield shell
    shell.user_ns.pop("hang", None)
    shell.run_line_magic("unload_ext", "notebook_llm")
    set_default_engine(None)


def test_the_magic_takes_tool_timeout(ip: Any, hang: Any) -> None:
    ip.user_ns["hang"] = hang
    with capture_output():
        ip.run_cell_magic("llm", "mock:tools --tools hang --tool-timeout 0.2", "hang 1")
    assert ip.user_ns["_llm"].text == ABANDONED.format(s=0.2)


def test_the_magic_uses_the_config_files_default(
    ip: Any, hang: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    Path(os.environ["NOTEBOOK_LLM_CONFIG"]).write_text("[defaults]\ntool_timeout = 0.25\n")
    set_default_engine(None)  # the session's engine reads the file again
    ip.user_ns["hang"] = hang
    with capture_output():
        ip.run_cell_magic("llm", "mock:tools --tools hang", "hang 1")
    assert ip.user_ns["_llm"].text == ABANDONED.format(s=0.25)


@pytest.mark.parametrize("bad", ["0", "-2", "nan", "inf", "soon"])
def test_the_magic_refuses_a_tool_timeout_that_is_not_seconds(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_cell_line(f"mock --tools f --tool-timeout {bad}")
    assert parse_cell_line("mock --tools f --tool-timeout 2.5").tool_timeout == 2.5
    assert parse_cell_line("mock --tools f").tool_timeout is None
