"""Issue 13: what a newcomer ran into. Each test reproduces one item of the issue first.

User code (tools, adapters, config files, recordings) must never end or hang the kernel, state
must stay right, and every mistake gets one line that says what to fix.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from notebook_llm import Chat, Engine, ErrorCode, LlmError, ToolResultBlock
from notebook_llm.tools import run_tools
from notebook_llm.tools.core import Tool


@pytest.fixture
def engine() -> Engine:
    return Engine(config_file=False, env_file=False, retries=0)


# ------------------------------------------------------------------ 1. sys.exit in a tool


def bye(a: int, b: int) -> int:
    """Leaves."""
    sys.exit(1)


async def abye(a: int, b: int) -> int:
    """Leaves, asynchronously."""
    raise SystemExit("async bye")


def cli_tool(a: int, b: int) -> int:
    """An argparse tool given bad arguments."""
    parser = argparse.ArgumentParser(prog="cli_tool", add_help=False)
    parser.add_argument("--n", type=int, required=True)
    parser.parse_args(["--n", "not-a-number"])
    return 0


def interrupts(a: int, b: int) -> int:
    """Raises KeyboardInterrupt itself."""
    raise KeyboardInterrupt


@pytest.mark.parametrize("fn", [bye, abye, cli_tool, interrupts])
async def test_tool_exit_becomes_the_tools_result(engine: Engine, fn: Any) -> None:
    completion = await asyncio.wait_for(
        run_tools(engine, "mock", "tools", prompt="1 2", tools=[fn]), 60
    )
    block = completion.transcript[1].content[0]
    assert isinstance(block, ToolResultBlock)
    assert block.is_error
    assert block.text.startswith(("SystemExit", "KeyboardInterrupt"))


@pytest.mark.parametrize("fn", [bye, abye])
async def test_tool_invoke_exit_is_an_error_text(fn: Any) -> None:
    text, is_error = await Tool(fn).invoke('{"a": 1, "b": 2}')
    assert is_error
    assert text.startswith("SystemExit")


def test_chat_send_with_exiting_tool_returns(engine: Engine) -> None:
    chat = Chat(provider="mock", model="tools", engine=engine, tools=[bye], live=False)
    completion = chat.send("1 2", display=False)
    assert completion.error is None
    assert any(
        isinstance(b, ToolResultBlock) and b.is_error and "SystemExit" in b.text
        for m in chat.messages
        for b in m.content
    )


async def test_confirm_function_that_exits_is_the_tools_error(engine: Engine) -> None:
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    def leave(call: Any) -> bool:
        sys.exit(3)

    completion = await asyncio.wait_for(
        run_tools(engine, "mock", "tools", prompt="1 2", tools=[add], confirm=leave), 60
    )
    block = completion.transcript[1].content[0]
    assert isinstance(block, ToolResultBlock)
    assert block.is_error
    assert "SystemExit: 3" in block.text


# ------------------------------------------------------------------ 2. unload after reload

LIVE = """
local a = {{ name = "live", version = "{version}", endpoint = "/chat/completions" }}
function a.transform_request(raw) return raw end
function a.transform_stream_chunk(line) return json.encode({{ done = true }}) end
return a
"""


def test_unload_after_reloading_a_file_adapter_removes_it(tmp_path: Path) -> None:
    engine = Engine(config_file=False, env_file=False)
    path = tmp_path / "live.lua"
    path.write_text(LIVE.format(version="0.1"), "utf-8")
    assert engine.load_adapter(path) == "live"
    path.write_text(LIVE.format(version="0.2"), "utf-8")
    engine.load_adapter(path)
    assert engine.adapter("live").version == "0.2"
    engine.unload_adapter("live")
    with pytest.raises(LlmError) as info:
        engine.adapter("live")
    assert info.value.code == ErrorCode.NO_ADAPTER


def test_unload_after_reload_of_an_override_still_brings_the_builtin_back(tmp_path: Path) -> None:
    engine = Engine(config_file=False, env_file=False)
    original = engine.adapter("openai").version
    path = tmp_path / "openai.lua"
    for version in ("custom-1", "custom-2"):
        path.write_text(LIVE.replace('"live"', '"openai"').format(version=version), "utf-8")
        engine.load_adapter(path)
    engine.unload_adapter("openai")
    assert engine.adapter("openai").version == original
