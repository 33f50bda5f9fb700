"""``%llm mcp``: the configured MCP servers and, for those running, their tools.

A static output (``text/html`` with a ``text/plain`` fallback). What a server says about itself
(tool names, descriptions, its failure line) is untrusted text: names are escaped, descriptions
go through the same Markdown sanitizer as a model's answer (:mod:`.safe_html`), and the plain
text has no control characters. Keys never show: every string passes through ``redact``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...api.mcp.servers import ServerStatus
from ...api.mcp.text import one_line, printable
from ...core.redaction import redact
from .adapter_view import text_table
from .safe_html import clean, isolated, markdown_html, text_html

__all__ = ["McpServerTable"]

#: The most characters of a tool description shown in the listing (the model gets it whole).
DESCRIPTION_CHARS = 300


def _description(tool: dict[str, Any]) -> str:
    text = str(tool.get("description") or tool.get("title") or "")
    first = text.strip().split("\n\n", 1)[0]
    return first if len(first) <= DESCRIPTION_CHARS else first[: DESCRIPTION_CHARS - 1] + "…"


class McpServerTable:
    """The servers (name, transport, command or URL, where configured, state), each running
    server's tools under it, and the entries that could not be read."""

    def __init__(self, rows: Sequence[ServerStatus]) -> None:
        self.rows = list(rows)

    def _state(self, row: ServerStatus) -> str:
        state = row.state
        if row.state == "ready":
            state = f"ready, {len(row.tools)} tool{'s' if len(row.tools) != 1 else ''}"
        return state

    def plain(self) -> str:
        if not self.rows:
            return (
                "no MCP servers are configured: add [mcp_servers.NAME] to config.toml, "
                "%llm mcp load PATH (an mcpServers JSON file), or notebook_llm.mcp.add_server"
            )
        usable = [r for r in self.rows if r.state != "not usable"]
        table = [
            (r.name, r.transport, one_line(r.command, 60), r.origin, self._state(r)) for r in usable
        ]
        lines = [text_table(("server", "transport", "command / url", "from", "state"), table)]
        for row in self.rows:
            if row.problem:
                lines.append(f"{row.name}: {one_line(row.problem, 500)}")
            for tool in row.tools:
                name = one_line(str(tool.get("name", "")), 64)
                lines.append(f"  {row.name}/{name}: {one_line(_description(tool), 120)}")
            for skipped in row.skipped:
                lines.append(f"  {row.name}: not offered: {one_line(skipped, 200)}")
            if row.junk_lines:
                lines.append(f"  {row.name}: wrote {row.junk_lines} non-MCP line(s) to stdout")
        return redact(printable("\n".join(lines)))

    def html(self) -> str:
        if not self.rows:
            return f"<p>{text_html(self.plain())}</p>"
        head = "".join(
            f"<th>{h}</th>" for h in ("server", "transport", "command / url", "from", "state")
        )
        body = []
        for r in self.rows:
            if r.state == "not usable":
                continue
            cells = (r.name, r.transport, one_line(r.command, 80), r.origin, self._state(r))
            body.append(
                "<tr>" + "".join(f"<td>{text_html(printable(c))}</td>" for c in cells) + "</tr>"
            )
        parts = [f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"]
        for r in self.rows:
            if r.problem:
                parts.append(
                    f'<div style="color:#d33"><b>{text_html(printable(r.name))}</b>: '
                    f"{text_html(one_line(r.problem, 500))}</div>"
                )
            if r.tools:
                items = "".join(
                    f"<li><code>{text_html(one_line(str(t.get('name', '')), 64))}</code>: "
                    f"{markdown_html(_description(t))}</li>"
                    for t in r.tools
                )
                parts.append(
                    f"<div><b>{text_html(printable(r.name))}</b> tools:<ul>{items}</ul></div>"
                )
            for skipped in r.skipped:
                parts.append(
                    f"<div>{text_html(printable(r.name))}: not offered: {text_html(one_line(skipped, 200))}</div>"
                )
        return isolated(clean(redact("".join(parts))), "output")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/html": self.html(), "text/plain": self.plain()}

    def __repr__(self) -> str:
        return self.plain()
