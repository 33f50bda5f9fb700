"""Record/replay covers MCP: listings and calls are recorded (redacted) with the provider's
exchanges, and a replay answers them from the file without starting any server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_support import (
    fault_server,
    no_servers_left,
    server_processes,
    servers,  # noqa: F401 (a fixture)
)

from notebook_llm import Engine, ErrorCode, LlmError, run_tools
from notebook_llm.api.mcp import servers as servers_module
from notebook_llm.api.mcp.servers import McpServers


async def test_a_replayed_turn_starts_no_server(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-passed-to-the-server-0123456789abcdef"
    monkeypatch.setenv("SERVER_API_KEY", secret)
    fault_server(servers, "faults", tmp_path, env={"SERVER_API_KEY": "$SERVER_API_KEY"})
    recording = tmp_path / "run.jsonl"
    engine = Engine()
    prompts = ['Echo "recorded"', 'What is "SERVER_API_KEY"?']
    tools = [["mcp:faults/echo"], ["mcp:faults/env_var"]]
    with engine.recording(recording):
        live = [
            await run_tools(engine, "mock", "tools", prompt=p, tools=t)
            for p, t in zip(prompts, tools, strict=True)
        ]
    assert live[0].text == "Result of echo: recorded"
    text = recording.read_text()
    assert secret not in text  # the key the server echoed is hidden in the file
    urls = {json.loads(line).get("url") for line in text.splitlines()[1:]}
    assert {
        "http://mcp.invalid/faults/tools/list",
        "http://mcp.invalid/faults/tools/call",
    } <= urls
    servers.close()
    assert no_servers_left()

    # a fresh kernel: no server configured at all, no SDK needed
    empty = McpServers()
    monkeypatch.setattr(servers_module, "_default", empty)
    replayer = Engine()
    with replayer.replaying(recording):
        replayed = [
            await run_tools(replayer, "mock", "tools", prompt=p, tools=t)
            for p, t in zip(prompts, tools, strict=True)
        ]
        assert not server_processes()
    assert replayed[0].text == live[0].text
    assert replayed[1].transcript[1].content[0].text == "***"  # as recorded: redacted
    assert empty.status() == []  # nothing configured, nothing started
    # a server the recording does not hold is a replay miss, not a start
    with replayer.replaying(recording), pytest.raises(LlmError) as missed:
        await run_tools(replayer, "mock", "tools", prompt="x", tools=["mcp:other"])
    assert missed.value.code == ErrorCode.REPLAY_MISS
    assert not server_processes()
