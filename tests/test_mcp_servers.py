"""Real MCP servers in the tool loop, with the offline mock model: mcp-server-time and
mcp-server-git (from PyPI) over stdio, the SDK's MCPServer over Streamable HTTP on loopback.

Each test starts real processes; every one of them is gone when the test ends."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import (
    HttpServer,
    fault_server,
    no_servers_left,
    server_processes,
    servers,  # noqa: F401 (a fixture)
    wait_until,
)

from notebook_llm import Chat, Engine, LlmError, map, run_tools
from notebook_llm.api.mcp.servers import McpServers
from notebook_llm.api.tool_calling.events import ToolOutcome, ToolRun


def outcomes(events: list[object]) -> list[ToolOutcome]:
    return [e for e in events if isinstance(e, ToolOutcome)]


async def test_mcp_server_time_over_stdio(servers: McpServers) -> None:  # noqa: F811
    servers.add_server(
        "time",
        command=sys.executable,
        args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
    )
    events: list[object] = []
    done = await run_tools(
        Engine(),
        "mock",
        "tools",
        prompt="What time is it in UTC?",
        tools=["mcp:time/get_current_time"],
        on_event=events.append,
    )
    (run,) = [e for e in events if isinstance(e, ToolRun)]
    assert (run.name, run.source, json.loads(run.arguments)) == (
        "get_current_time",
        "mcp:time",
        {"timezone": "UTC"},
    )
    (outcome,) = outcomes(events)
    assert outcome.status == "ok"
    assert outcome.source == "mcp:time"
    assert json.loads(outcome.content)["timezone"] == "UTC"  # the server's own answer
    assert done.text.startswith("Result of get_current_time: {")
    assert len(server_processes("mcp_server_time")) == 1  # kept for the session
    servers.close()
    assert no_servers_left()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A temporary git repository with one commit."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "notes.txt").write_text("hello\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "add the notes"], check=True)
    return repo


async def test_mcp_server_git_over_stdio_on_a_temporary_repository(
    servers: McpServers,  # noqa: F811
    repo: Path,
) -> None:
    servers.add_server(
        "git", command=sys.executable, args=["-m", "mcp_server_git", "--repository", str(repo)]
    )
    events: list[object] = []
    done = await run_tools(
        Engine(),
        "mock",
        "tools",
        prompt=f'Show the git log of "{repo}"',
        tools=["mcp:git/git_log"],
        on_event=events.append,
    )
    (outcome,) = outcomes(events)
    assert outcome.status == "ok", outcome.content
    assert "add the notes" in outcome.content
    assert outcome.source == "mcp:git"
    assert "add the notes" in done.text
    servers.close()
    assert no_servers_left()


async def test_an_mcp_server_over_streamable_http_on_loopback(
    servers: McpServers,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = "mcp-http-test-token-0123456789abcdef"
    http = HttpServer(env={"MCP_TEST_TOKEN": token})
    try:
        monkeypatch.setenv("MCP_TEST_TOKEN", token)
        servers.add_server(
            "remote", url=http.url, headers={"Authorization": "Bearer ${MCP_TEST_TOKEN}"}
        )
        events: list[object] = []
        done = await run_tools(
            Engine(),
            "mock",
            "tools",
            prompt='Echo "over HTTP"',
            tools=["mcp:remote/echo"],
            on_event=events.append,
        )
        (outcome,) = outcomes(events)
        assert (outcome.status, outcome.content, outcome.source) == (
            "ok",
            "over HTTP",
            "mcp:remote",
        )
        assert done.text == "Result of echo: over HTTP"
        # without the header the server refuses the connection: the one line says so
        servers.add_server("anonymous", url=http.url)
        with pytest.raises(LlmError) as failed:
            await run_tools(Engine(), "mock", "tools", prompt="x", tools=["mcp:anonymous"])
        assert f"MCP server 'anonymous': could not connect to {http.url}" in str(failed.value)
        assert token not in str(failed.value)
    finally:
        servers.close()
        http.close()


async def test_all_tools_of_a_server_mixed_with_a_python_function(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
) -> None:
    fault_server(servers, "faults", tmp_path)

    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    offered: list[str] = []
    engine = Engine()
    done = await run_tools(
        engine,
        "mock",
        "tools",
        prompt='Echo "mixed"',
        tools=["mcp:faults/echo", shout],
    )
    assert done.text == "Result of echo: mixed"
    from notebook_llm.api.tool_calling.loop import resolve_tools

    offered = [t.name for t in await resolve_tools(["mcp:faults", shout], engine)]
    assert {"echo", "hang", "crash", "junk", "huge", "fails", "env_var", "shout"} <= set(offered)


def test_chat_and_map_take_mcp_tools(servers: McpServers, tmp_path: Path) -> None:  # noqa: F811
    fault_server(servers, "faults", tmp_path)
    chat = Chat("mock", "tools", tools=["mcp:faults/echo"], live=False)
    completion = chat.send('Echo "from a chat"')
    assert completion.error is None
    assert completion.text == "Result of echo: from a chat"
    results = map(
        ['Echo "one"', 'Echo "two"'],
        provider="mock",
        model="tools",
        tools=["mcp:faults/echo"],
        progress=False,
    )
    assert [r.text for r in results] == ["Result of echo: one", "Result of echo: two"]
    assert len(server_processes()) == 1  # one server for the chat and the whole batch
    servers.close()
    assert no_servers_left()


async def test_structured_content_and_images_reach_the_model(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
) -> None:
    fault_server(servers, "faults", tmp_path)
    engine = Engine()
    events: list[object] = []
    done = await run_tools(
        engine,
        "mock",
        "tools",
        prompt="Draw the picture",
        tools=["mcp:faults/picture"],
        on_event=events.append,
    )
    (outcome,) = outcomes(events)
    assert len(outcome.images) == 1
    assert outcome.images[0].media_type == "image/png"
    assert "[image 1: image/png" in outcome.content
    # the image went to the model as an image, after the tool results, in the same turn
    results = done.transcript[1]
    assert [b.type for b in results.content] == ["tool-result", "image"]
    weather = await run_tools(
        engine, "mock", "tools", prompt="Forecast for Lisbon", tools=["mcp:faults/forecast"]
    )
    assert json.loads(weather.text.removeprefix("Result of forecast: ")) == {
        "city": "Lisbon",
        "days": [{"day": 1, "sky": "sunny"}],
    }


async def test_input_schemas_go_to_the_model_unchanged(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
) -> None:
    fault_server(servers, "faults", tmp_path)
    listed = {t["name"]: t for t in await servers.tools("faults")}
    from notebook_llm.api.tool_calling.loop import resolve_tools

    (tool,) = await resolve_tools(["mcp:faults/forecast"], Engine())
    assert tool.schema.parameters == listed["forecast"]["inputSchema"]
    assert tool.schema.description == listed["forecast"]["description"]


async def test_a_key_in_the_kernels_environment_is_not_in_a_servers_unless_configured(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="notebook_llm.api.tool_calling")
    secret = "sk-kernel-env-secret-0123456789abcdefXYZ"
    monkeypatch.setenv("KERNEL_ONLY_API_KEY", secret)
    fault_server(servers, "plain", tmp_path)
    fault_server(servers, "given", tmp_path, env={"KERNEL_ONLY_API_KEY": "$KERNEL_ONLY_API_KEY"})
    engine = Engine()
    prompt = 'What is "KERNEL_ONLY_API_KEY"?'
    plain = await run_tools(engine, "mock", "tools", prompt=prompt, tools=["mcp:plain/env_var"])
    assert plain.text == "Result of env_var: (unset)"
    path_seen = await run_tools(
        engine, "mock", "tools", prompt='What is "PATH"?', tools=["mcp:plain/env_var"]
    )
    assert path_seen.text != "Result of env_var: (unset)"  # the minimal PATH is there
    given = await run_tools(engine, "mock", "tools", prompt=prompt, tools=["mcp:given/env_var"])
    assert secret in given.text  # what the tool returned goes to the model...
    from notebook_llm.core.redaction import redact

    assert secret not in redact(given.text)  # ...and is hidden from everything shown
    # the server's stderr is logged (DEBUG), the key hidden there too
    assert wait_until(lambda: "env_var: KERNEL_ONLY_API_KEY=***" in caplog.text)
    assert secret not in caplog.text
