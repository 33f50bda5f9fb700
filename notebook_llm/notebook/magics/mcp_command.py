"""``%llm mcp``: list the MCP servers and their tools; restart, stop, or load a settings file.

    %llm mcp                   the configured servers and, for those running, their tools
    %llm mcp restart NAME      stop NAME (reaping its process) and start it again
    %llm mcp stop [NAME]       stop NAME, or every server; the next use starts it again
    %llm mcp load PATH         use an mcpServers JSON file (Claude Desktop, jupyter-ai, VS Code)

The work is :mod:`notebook_llm.api.mcp`'s; this only parses the words and shows the result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from IPython.core.error import UsageError

from ...api.mcp.text import one_line
from ...core.redaction import redact

USAGE = "%llm mcp [restart NAME | stop [NAME] | load PATH]"


def mcp_command(words: Sequence[str], show: Callable[[Any], None]) -> None:
    """Run ``%llm mcp WORDS``; ``show`` displays a rich output (the magic's)."""
    from ...api import mcp
    from ..widgets.mcp_view import McpServerTable

    if not words:
        show(McpServerTable(mcp.status()))
        return
    action, rest = words[0], list(words[1:])
    if action == "restart" and len(rest) == 1:
        mcp.restart(rest[0])
        tools = mcp.list_tools(rest[0])
        names = one_line(", ".join(str(t.get("name", "")) for t in tools[:12]), 400)
        more = f", … ({len(tools)} in all)" if len(tools) > 12 else ""
        print(redact(f"MCP server {rest[0]!r} restarted: {len(tools)} tools ({names}{more})"))
    elif action == "stop" and len(rest) <= 1:
        mcp.stop(rest[0] if rest else None)
        print(f"MCP server {rest[0]!r} stopped" if rest else "every MCP server stopped")
    elif action == "load" and len(rest) == 1:
        loaded = mcp.load_settings(rest[0])
        print(redact(f"MCP servers from {rest[0]}: {', '.join(loaded) or 'none'}"))
    else:
        raise UsageError(USAGE)
