"""MCP servers in the tool loop, through the official MCP Python SDK (the ``mcp`` extra).

>>> from notebook_llm import mcp                                   # doctest: +SKIP
>>> mcp.add_server("time", command="uvx", args=["mcp-server-time"])  # doctest: +SKIP
>>> await run_tools(engine, "mock", "tools", prompt="Time in UTC?", tools=["mcp:time"])  # doctest: +SKIP

In a cell: ``%%llm PROVIDER --tools mcp:time`` (every tool of ``time``), ``--tools
mcp:git/git_log,summarize`` (one MCP tool and a Python function); ``%llm mcp`` lists the servers
and their tools, ``%llm mcp restart NAME`` restarts one. ``tools=["mcp:time", f]`` works the
same on :func:`~notebook_llm.api.tool_calling.run_tools`, ``Chat`` and ``map``.

Where things are: :mod:`.config` (``[mcp_servers.NAME]``, ``mcpServers`` JSON files, keys by
reference), :mod:`.connection` (one server's session on the background loop, and its failures),
:mod:`.servers` (the process's servers: start on first use, stop on exit, config change,
restart), :mod:`.tools` (``mcp:`` specs, :class:`McpTool`, record and replay),
:mod:`.results` (a result as text and images for the model, capped). The whole story is in
``docs/mcp.md``.
"""

from __future__ import annotations

from pathlib import Path

from ...core.background_loop import run_sync
from .config import ServerConfig
from .connection import McpFailure, ToolInfo
from .servers import McpServers, ServerStatus, mcp_servers
from .tools import McpTool, parse_spec

__all__ = [
    "McpFailure",
    "McpServers",
    "McpTool",
    "ServerConfig",
    "ServerStatus",
    "ToolInfo",
    "add_server",
    "list_tools",
    "load_settings",
    "mcp_servers",
    "parse_spec",
    "remove_server",
    "restart",
    "status",
    "stop",
]


def add_server(
    name: str,
    *,
    command: str | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    url: str | None = None,
    headers: dict[str, str] | None = None,
    tool_timeout: float | None = None,
    startup_timeout: float | None = None,
    max_result_chars: int | None = None,
) -> None:
    """Add a server for this session (it wins over one of the same name in the files).

    A stdio server: ``command``, ``args``, ``env`` (values may be ``$NAME`` references, read
    when it starts), ``cwd``. A Streamable HTTP server: ``url``, ``headers``. It starts on
    first use: ``tools=["mcp:NAME"]`` or ``%%llm ... --tools mcp:NAME``."""
    mcp_servers().add_server(
        name,
        command=command,
        args=args,
        env=env,
        cwd=str(cwd) if cwd is not None else None,
        url=url,
        headers=headers,
        tool_timeout=tool_timeout,
        startup_timeout=startup_timeout,
        max_result_chars=max_result_chars,
    )


def remove_server(name: str) -> None:
    """Forget a server added with :func:`add_server` (stopping it if it runs)."""
    mcp_servers().remove_server(name)


def load_settings(path: str | Path) -> list[str]:
    """Use the servers of an ``mcpServers`` JSON file (Claude Desktop, jupyter-ai's
    ``.jupyter/mcp_settings.json``, VS Code's ``mcp.json``) in this session; their names."""
    return mcp_servers().load_settings(path)


def status() -> list[ServerStatus]:
    """Every configured server and, for those running, their tools (nothing is started)."""
    return mcp_servers().status()


def list_tools(name: str) -> list[ToolInfo]:
    """The tools of server ``name`` as it lists them (name, description, input schema),
    starting it if needed."""
    servers = mcp_servers()
    return run_sync(servers.tools(name))


def restart(name: str) -> None:
    """Stop server ``name``, reaping its process, and start it again."""
    mcp_servers().start_sync(name)


def stop(name: str | None = None) -> None:
    """Stop server ``name`` (every server when ``None``); the next use starts it again."""
    servers = mcp_servers()
    run_sync(servers.stop(name))
    servers.wait_stopped()
