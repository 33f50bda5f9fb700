"""MCP tools in the tool loop: ``"mcp:NAME"`` and ``"mcp:NAME/TOOL"`` in ``tools=``, and
:class:`McpTool`, which the loop runs like any :class:`~notebook_llm.api.tool_calling.Tool`.

``mcp:NAME`` offers every tool server NAME lists; ``mcp:NAME/TOOL`` offers that one (give it
again for another: ``mcp:git/git_log,mcp:git/git_status``). A tool is offered under the name
the server gives it, with its description and input schema unchanged; a name a provider
would refuse (providers take letters, digits, ``_`` and ``-``, at most 64) is offered with the
other characters as ``_`` and called by its real name.

Record and replay. A listing and each call go through the engine's recording tap as if they
were HTTP exchanges with the made-up host ``mcp.invalid`` (``POST
http://mcp.invalid/NAME/tools/list`` and ``.../NAME/tools/call`` with ``{"name", "arguments"}``;
the response is the protocol's ``CallToolResult`` JSON, or status 502 and ``{"error": line}``
for a server's failure), through the package's one exchange (``wire/exchange.py``: a replayed
answer is read within the same caps as any body). While recording, the tap passes them to the
live server and writes
them (redacted, as every exchange) to the recording; while replaying, the tap answers them
from the recording and no server is started: a replayed notebook needs neither the servers
nor their configuration, nor the SDK.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from ...core.background_loop import run_sync
from ...core.cancel import StopSignal, until_stopped
from ...core.errors import ErrorCode, LlmError
from ...core.redaction import redact
from ...core.timeouts import Timeouts
from ...wire.codec import WireRequest
from ...wire.exchange import HttpExchange
from ..tool_calling.tools import Tool, ToolReply
from .config import DEFAULT_MAX_RESULT_CHARS
from .connection import MAX_TOOLS, McpFailure, ToolInfo, schema_problem
from .results import reply_of
from .servers import McpServers, mcp_servers
from .text import one_line, printable

if TYPE_CHECKING:
    from ...engine.engine import Engine

__all__ = ["MCP_PREFIX", "RECORDING_HOST", "McpTool", "parse_spec", "resolve_specs"]

log = logging.getLogger("notebook_llm.api.tool_calling")

MCP_PREFIX = "mcp:"
#: The host of the exchanges an MCP listing or call is recorded as (``.invalid`` resolves
#: nowhere: nothing is ever sent to it).
RECORDING_HOST = "mcp.invalid"
#: The longest tool description offered to the model (a longer one is cut).
MAX_DESCRIPTION = 16_000
_NAME_LIMIT = 64


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``"mcp:NAME"`` -> ``(NAME, None)``; ``"mcp:NAME/TOOL"`` -> ``(NAME, TOOL)``."""
    if not spec.startswith(MCP_PREFIX):
        raise LlmError(
            f"tool {spec!r} is a string: give a function, or mcp:SERVER for an MCP server's tools",
            ErrorCode.INVALID_OPTIONS,
        )
    server, _, tool = spec[len(MCP_PREFIX) :].partition("/")
    if not server.strip() or (tool == "" and spec.endswith("/")):
        raise LlmError(
            f"{spec!r}: write mcp:SERVER (all its tools) or mcp:SERVER/TOOL",
            ErrorCode.INVALID_OPTIONS,
        )
    return server.strip(), (tool.strip() or None)


def _offered_name(name: str, taken: set[str]) -> str:
    ok = 0 < len(name) <= _NAME_LIMIT and all(
        c.isascii() and (c.isalnum() or c in "_-") for c in name
    )
    base = (
        name
        if ok
        else "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in name)[
            :_NAME_LIMIT
        ]
        or "tool"
    )
    offered, n = base, 1
    while offered in taken:
        n += 1
        offered = f"{base[: _NAME_LIMIT - len(str(n)) - 1]}_{n}"
    taken.add(offered)
    return offered


class McpTool(Tool):
    """One tool of an MCP server, run by the tool loop (see the module docstring).

    ``name`` is what the model calls it, ``remote_name`` the server's name for it, ``source``
    ``mcp:SERVER`` (what a tool card shows). Calling it from Python (``tool(city="Paris")``)
    runs it once and returns a :class:`~notebook_llm.api.tool_calling.tools.ToolReply`.
    """

    def __init__(
        self,
        server: str,
        info: ToolInfo,
        *,
        name: str | None = None,
        engine: Engine | None = None,
        servers: McpServers | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    ) -> None:
        self.server = server
        self.remote_name = str(info.get("name", ""))
        self.name = name or self.remote_name
        description = str(info.get("description") or info.get("title") or "")
        if len(description) > MAX_DESCRIPTION:
            description = description[: MAX_DESCRIPTION - 1] + "…"
        self.description = description
        schema = info.get("inputSchema")
        self.parameters = schema if isinstance(schema, dict) else {"type": "object"}
        self.source = MCP_PREFIX + server
        self.fn = self
        self._hints = {}  # arguments go to the server as the model wrote them
        self._engine = engine
        self._servers = servers
        self.max_result_chars = max_result_chars

    def __repr__(self) -> str:
        return f"McpTool({self.source}/{self.remote_name}, name={self.name!r})"

    def with_overrides(self, *, name: str | None = None, description: str | None = None) -> McpTool:
        info = {
            "name": self.remote_name,
            "description": self.description if description is None else description,
            "inputSchema": self.parameters,
        }
        return McpTool(
            self.server,
            info,
            name=name or self.name,
            engine=self._engine,
            servers=self._servers,
            max_result_chars=self.max_result_chars,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> ToolReply:
        if args:
            raise TypeError(f"{self!r} takes keyword arguments only")
        return run_sync(self.call(kwargs))

    async def call(self, kwargs: dict[str, Any]) -> ToolReply:
        """Call the tool on the server; the server's failure is the call's error text (the
        kernel and the other calls go on)."""
        body = {"name": self.remote_name, "arguments": kwargs}
        servers = self._servers or mcp_servers()

        async def live() -> tuple[int, Any]:
            try:
                return 200, await servers.call(self.server, self.remote_name, kwargs)
            except (McpFailure, LlmError) as exc:
                return 502, {"error": exc.message if isinstance(exc, LlmError) else str(exc)}

        status, result = await _exchange(self._engine, self.server, "tools/call", body, live)
        if status != 200 or not isinstance(result, dict):
            error = result.get("error") if isinstance(result, dict) else None
            return ToolReply(str(error or f"MCP call failed (status {status})"), is_error=True)
        return reply_of(result, max_chars=self.max_result_chars, tool=self.remote_name)


async def _exchange(
    engine: Engine | None,
    server: str,
    what: str,
    body: dict[str, Any],
    live: Callable[[], Awaitable[tuple[int, Any]]],
) -> tuple[int, Any]:
    """``live()``, or through the engine's recording tap when it has one (recorded, or answered
    from the recording without calling ``live``)."""
    tap = engine.tap if engine is not None else None
    if tap is None:
        return await live()

    async def handler(request: httpx.Request) -> httpx.Response:
        status, payload = await live()
        return httpx.Response(status, json=payload)

    url = f"http://{RECORDING_HOST}/{urllib.parse.quote(server, safe='')}/{what}"
    # Through the exchange, as every request: a replayed answer is read within the same caps
    # (decoded bytes) as any body. No deadline of its own: the server's calls have theirs.
    exchange = HttpExchange(
        f"mcp:{server}",
        timeouts=Timeouts(deadline=None, idle=None),
        make_transport=lambda: tap.transport(httpx.MockTransport(handler)),
    )
    sent = json.dumps(body, ensure_ascii=False).encode("utf-8")
    answer = await exchange.fetch(
        WireRequest("POST", url, {"content-type": "application/json"}, sent, streaming=False),
        what=f"the recorded answer of {url}",
        refused="answer",
    )
    try:
        return answer.status, json.loads(answer.body)
    except (ValueError, RecursionError):  # a recording nested past the parser's depth
        return 502, {"error": f"the recording of {url} is not JSON"}


async def _until_stopped(work: Awaitable[Any], stop: StopSignal | None) -> Any:
    """``await work``, ended by ``stop`` (``LlmError(ABORTED)``): a server that starts slowly
    must not hold a turn its user stopped."""
    if stop is None:
        return await work
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(until_stopped(stop))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    if task not in done:
        raise LlmError(stop.reason, ErrorCode.ABORTED)
    return task.result()


async def _listing(
    server: str, engine: Engine | None, servers: McpServers, stop: StopSignal | None
) -> list[ToolInfo]:
    async def live() -> tuple[int, Any]:
        try:
            return 200, {"tools": await servers.tools(server)}
        except LlmError as exc:
            if exc.code != ErrorCode.MCP_SERVER:
                raise
            return 502, {"error": exc.message}

    status, payload = await _until_stopped(_exchange(engine, server, "tools/list", {}, live), stop)
    tools = payload.get("tools") if isinstance(payload, dict) else None
    if status != 200 or not isinstance(tools, list):
        error = payload.get("error") if isinstance(payload, dict) else None
        raise LlmError(
            str(error or f"MCP server {server!r}: its tool listing failed (status {status})"),
            ErrorCode.MCP_SERVER,
            details={"server": server},
        )
    return _offered(server, tools)


def _offered(server: str, tools: list[Any]) -> list[ToolInfo]:
    """The tools of a listing that may be offered: a listing read back from a recording is
    checked as a live one is (``schema_problem``: the input schema's depth and size; at most
    ``MAX_TOOLS``), since a recording is a file anyone may have written. Those left out are
    logged, one line each."""
    kept: list[ToolInfo] = []
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        problem = schema_problem(tool)
        if problem:
            log.warning(
                "MCP server %r: tool %s is not offered: %s",
                server,
                redact(one_line(printable(tool["name"]), 64)),
                problem,
            )
        elif len(kept) < MAX_TOOLS:
            kept.append(tool)
    return kept


async def resolve_specs(
    specs: Sequence[str],
    engine: Engine | None,
    stop: StopSignal | None = None,
    servers: McpServers | None = None,
) -> list[list[Tool]]:
    """The tools of each ``mcp:`` spec, in order (each server listed once, started if needed,
    or read from the recording when the engine replays). ``LlmError`` (``MCP_SERVER``, or
    ``INVALID_OPTIONS`` for a spec that is wrong) when one cannot be used."""
    servers = servers or mcp_servers()
    parsed = [parse_spec(spec) for spec in specs]
    replaying = engine is not None and engine.is_replaying
    configs = servers.configs().servers if not replaying else {}
    listings: dict[str, list[ToolInfo]] = {}
    for server, _ in parsed:
        if server not in listings:
            listings[server] = await _listing(server, engine, servers, stop)
    offered: dict[str, dict[str, str]] = {}
    for server, tools in listings.items():
        taken: set[str] = set()
        offered[server] = {str(t["name"]): _offered_name(str(t["name"]), taken) for t in tools}
    groups: list[list[Tool]] = []
    for server, only in parsed:
        tools = listings[server]
        if only is not None:
            tools = [t for t in tools if t["name"] == only]
            if not tools:
                names = ", ".join(str(t["name"]) for t in listings[server]) or "none"
                raise LlmError(
                    f"MCP server {server!r} has no tool {only!r} (its tools: {names})",
                    ErrorCode.INVALID_OPTIONS,
                    details={"server": server},
                )
        config = configs.get(server)
        limit = config.max_result_chars if config is not None else DEFAULT_MAX_RESULT_CHARS
        groups.append(
            [
                McpTool(
                    server,
                    info,
                    name=offered[server][str(info["name"])],
                    engine=engine,
                    servers=servers,
                    max_result_chars=limit,
                )
                for info in tools
            ]
        )
    return groups
