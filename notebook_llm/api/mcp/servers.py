"""The MCP servers of this kernel: what is configured, and the connections in use.

One :class:`McpServers` per process (:func:`mcp_servers`), like the background loop its
connections live on. A server starts on its first use (a turn that offers its tools, or
``%llm mcp restart``) and is kept for the session. It is stopped, and its process reaped:

* when the kernel exits (an ``atexit`` hook stops every server, bounded);
* when its configuration changed or it was removed (noticed whenever the configuration is read:
  each turn that uses MCP tools, and ``%llm mcp``); the next use starts the new one;
* on :meth:`McpServers.restart` / :meth:`McpServers.stop` (``%llm mcp restart NAME``);
* after it crashed or broke the protocol during a call (see
  :mod:`notebook_llm.api.mcp.connection`); the next use starts it again.

Every method that touches a connection runs on the background loop; the public ones can be
awaited from any loop (:func:`on_background`) or called from synchronous code.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ...core.background_loop import is_background_loop, run_sync, submit
from ...core.errors import ErrorCode, LlmError
from .config import ConfigSet, ServerConfig, load_configs, read_settings_file, session_config
from .connection import McpFailure, ServerConnection, ToolInfo, require_sdk

__all__ = ["McpServers", "ServerStatus", "mcp_servers", "on_background"]

T = TypeVar("T")

#: How long the exit hook waits for every server to stop.
EXIT_WAIT = 20.0


async def on_background(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the background loop from any loop; cancelling the caller cancels it
    there (a connection's calls and its runner live on that loop)."""
    if is_background_loop():
        return await coro
    return await asyncio.wrap_future(submit(coro))


@dataclass
class ServerStatus:
    """One configured server as ``%llm mcp`` lists it."""

    name: str
    transport: str
    command: str
    origin: str
    #: ``not started``, ``starting``, ``ready``, ``failed``, ``stopped`` or ``not usable``.
    state: str
    tools: list[ToolInfo] = field(default_factory=list)
    problem: str = ""
    skipped: list[str] = field(default_factory=list)
    junk_lines: int = 0


class McpServers:
    """The servers of this process (see the module docstring). ``config_path``: the
    ``config.toml`` to read (default: the package's, read again each time)."""

    def __init__(self, config_path: Path | None = None) -> None:
        self._config_path = config_path
        self._lock = threading.Lock()
        self._session: dict[str, ServerConfig] = {}
        self._settings_files: list[Path] = []
        self._connections: dict[str, ServerConnection] = {}
        self._starting: dict[str, asyncio.Future[ServerConnection]] = {}
        self._stopping: set[concurrent.futures.Future[None]] = set()
        self._exit_hook = False

    # ------------------------------------------------------------------ configuration

    def add_server(self, name: str, **table: Any) -> ServerConfig:
        """Add (or replace) a server for this session: ``command``, ``args``, ``env``,
        ``cwd`` or ``url``, ``headers``, and ``tool_timeout``, ``startup_timeout``,
        ``max_result_chars``. It wins over a server of the same name in the files."""
        clean = {k: v for k, v in table.items() if v is not None}
        for key in ("env", "headers"):
            if key in clean:
                clean[key] = dict(clean[key])
        if "args" in clean:
            clean["args"] = list(clean["args"])
        config = session_config(name, clean)
        with self._lock:
            self._session[name] = config
        self.configs()  # a running server of that name with another config is stopped
        return config

    def remove_server(self, name: str) -> None:
        """Forget a server added in the session (it is stopped if it runs)."""
        with self._lock:
            self._session.pop(name, None)
        self.configs()

    def load_settings(self, path: str | Path) -> list[str]:
        """Read an ``mcpServers`` JSON file (Claude Desktop, jupyter-ai, VS Code) for this
        session; the names of its servers. A file that cannot be read is an ``LlmError``."""
        file = Path(path).expanduser().resolve()
        probe = ConfigSet()
        read_settings_file(file, probe)
        if "" in probe.problems:
            raise LlmError(probe.problems[""], ErrorCode.INVALID_OPTIONS)
        with self._lock:
            if file not in self._settings_files:
                self._settings_files.append(file)
        self.configs()
        return sorted([*probe.servers, *probe.problems])

    def configs(self) -> ConfigSet:
        """Every configured server, read now; a server whose configuration changed or was
        removed is stopped (the next use starts the new one)."""
        with self._lock:
            session = dict(self._session)
            files = tuple(self._settings_files)
        found = load_configs(session, files, self._config_path)
        with self._lock:
            stale = [
                (name, conn)
                for name, conn in self._connections.items()
                if found.servers.get(name) != conn.config
            ]
            for name, _conn in stale:
                del self._connections[name]
        for _name, conn in stale:
            self._stop_later(conn)
        return found

    def _config(self, name: str) -> ServerConfig:
        found = self.configs()
        config = found.servers.get(name)
        if config is not None:
            return config
        if name in found.problems:
            raise LlmError(found.problems[name], ErrorCode.MCP_SERVER, details={"server": name})
        known = ", ".join(sorted(found.servers)) or "none"
        where = f" ({found.problems['']})" if "" in found.problems else ""
        raise LlmError(
            f"no MCP server named {name!r} is configured (configured: {known}){where}; add "
            f"[mcp_servers.{name}] to config.toml, load a settings file with %llm mcp load "
            "PATH, or call notebook_llm.mcp.add_server",
            ErrorCode.MCP_SERVER,
            details={"server": name},
        )

    # ------------------------------------------------------------------ connections

    async def connection(self, name: str) -> ServerConnection:
        """The running connection of server ``name``, started if needed (background loop).
        ``LlmError(MCP_SERVER)`` with the server's one line when it cannot start."""
        config = self._config(name)
        with self._lock:
            conn = self._connections.get(name)
            if conn is not None and conn.state == "ready" and conn.config == config:
                return conn
            starting = self._starting.get(name)
        if starting is not None:
            return await asyncio.shield(starting)
        require_sdk()
        future: asyncio.Future[ServerConnection] = asyncio.get_running_loop().create_future()
        with self._lock:
            old = self._connections.pop(name, None)
            self._starting[name] = future
        try:
            if old is not None:
                await old.stop()  # a crashed or broken one: reaped before its successor starts
            fresh = ServerConnection(config)
            self._install_exit_hook()
            await fresh.start()
        except BaseException as exc:
            with self._lock:
                self._starting.pop(name, None)
            if isinstance(exc, asyncio.CancelledError):  # the caller stopped: so do the others
                future.cancel()
                raise
            error = _as_error(exc, name)
            future.set_exception(error)
            future.exception()  # retrieved: nobody else may be waiting
            if error is exc:
                raise
            raise error from None
        with self._lock:
            self._starting.pop(name, None)
            self._connections[name] = fresh
        future.set_result(fresh)
        return fresh

    async def tools(self, name: str) -> list[ToolInfo]:
        """The tools of server ``name`` as it lists them (starting it if needed); any loop."""

        async def listed() -> list[ToolInfo]:
            return list((await self.connection(name)).tools)

        return await on_background(listed())

    async def call(self, name: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool`` of server ``name`` (restarting a server that crashed); any loop.
        The ``CallToolResult`` JSON; :class:`~notebook_llm.api.mcp.connection.McpFailure` or
        ``LlmError(MCP_SERVER)`` when the server fails."""

        async def called() -> dict[str, Any]:
            conn = await self.connection(name)
            return await conn.call(tool, arguments)

        return await on_background(called())

    async def restart(self, name: str) -> ServerConnection:
        """Stop server ``name`` (reaping its process) and start it again; any loop."""

        async def restarted() -> ServerConnection:
            self._config(name)
            with self._lock:
                conn = self._connections.pop(name, None)
            if conn is not None:
                await conn.stop()
            return await self.connection(name)

        return await on_background(restarted())

    async def stop(self, name: str | None = None) -> None:
        """Stop server ``name`` (every server when ``None``) and reap its process; any loop.
        The next use starts it again."""

        async def stopped() -> None:
            with self._lock:
                names = list(self._connections) if name is None else [name]
                conns = [c for n in names if (c := self._connections.pop(n, None)) is not None]
            await asyncio.gather(*(c.stop() for c in conns))

        await on_background(stopped())

    def _stop_later(self, conn: ServerConnection) -> None:
        future = submit(conn.stop())
        with self._lock:
            self._stopping.add(future)
        future.add_done_callback(self._forget_stop)

    def _forget_stop(self, future: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._stopping.discard(future)

    def wait_stopped(self, timeout: float = 30.0) -> None:
        """Wait for the servers being stopped in the background (a changed configuration)."""
        with self._lock:
            pending = list(self._stopping)
        concurrent.futures.wait(pending, timeout=timeout)

    def close(self, timeout: float = EXIT_WAIT) -> None:
        """Stop every server and wait for it (the exit hook; tests)."""
        with self._lock:
            busy = bool(self._connections or self._stopping or self._starting)
        if not busy:
            return
        future = submit(self.stop())
        try:
            future.result(timeout=timeout)
            self.wait_stopped(timeout)
        except (concurrent.futures.TimeoutError, Exception):  # exiting: never hang or raise
            future.cancel()

    def _install_exit_hook(self) -> None:
        if not self._exit_hook:
            self._exit_hook = True
            atexit.register(self.close)

    # ------------------------------------------------------------------ listing

    def status(self) -> list[ServerStatus]:
        """Every configured server, with its tools when it runs (nothing is started)."""
        found = self.configs()
        with self._lock:
            conns = dict(self._connections)
            starting = set(self._starting)
        rows = []
        for name, config in sorted(found.servers.items()):
            conn = conns.get(name)
            state = "starting" if name in starting else conn.state if conn else "not started"
            rows.append(
                ServerStatus(
                    name,
                    config.transport,
                    config.describe(short=True),
                    config.origin,
                    state,
                    list(conn.tools) if conn is not None and conn.state == "ready" else [],
                    (conn.failure or "") if conn is not None else "",
                    list(conn.skipped) if conn is not None else [],
                    conn.junk_lines if conn is not None else 0,
                )
            )
        for name, problem in sorted(found.problems.items()):
            rows.append(
                ServerStatus(name or "(settings)", "", "", "", "not usable", problem=problem)
            )
        return rows

    def start_sync(self, name: str) -> ServerConnection:
        """Start server ``name`` from synchronous code (``%llm mcp restart``)."""
        return run_sync(self.restart(name))


def _as_error(exc: BaseException, name: str) -> BaseException:
    if isinstance(exc, McpFailure):
        return LlmError(str(exc), ErrorCode.MCP_SERVER, details={"server": name})
    return exc


_default: McpServers | None = None
_default_lock = threading.Lock()


def mcp_servers() -> McpServers:
    """The MCP servers of this process (created on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = McpServers()
        return _default
