"""What the MCP tests share: the fault server, a fresh set of servers per test, a loopback
HTTP server, and the count of this process's child processes (no server may be left behind)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_llm.api.mcp import servers as servers_module
from notebook_llm.api.mcp.servers import McpServers

FAULT_SERVER = Path(__file__).parent / "fixtures" / "mcp" / "fault_server.py"


def child_processes() -> list[tuple[int, str, str]]:
    """``(pid, state, command line)`` of every child of this process, zombies included."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == me:
            found.append((int(entry.name), fields[0], cmdline))
    return found


def server_processes(marker: str = "") -> list[tuple[int, str, str]]:
    """The children that are MCP servers of these tests (``marker`` in their command line)."""
    return [
        p
        for p in child_processes()
        if ("fault_server" in p[2] or "mcp_server" in p[2] or "mcp-server" in p[2])
        and "--http" not in p[2]  # the loopback HTTP server a test runs itself
        and marker in p[2]
    ]


def wait_until(check: object, limit: float = 60.0) -> bool:
    """Poll ``check()`` until it is true or ``limit`` seconds pass (a generous bound: what is
    awaited is a process ending or a file appearing, never a speed)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(check())  # type: ignore[operator]


def no_servers_left(limit: float = 60.0) -> bool:
    return wait_until(lambda: not server_processes(), limit)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[McpServers]:
    """A fresh set of MCP servers as the process's own, stopped (and reaped) after the test."""
    fresh = McpServers()
    monkeypatch.setattr(servers_module, "_default", fresh)
    yield fresh
    fresh.close()


def fault_server(
    servers: McpServers, name: str, mark_dir: Path, *args: str, **table: object
) -> None:
    """Add the fault server as ``name`` (stdio)."""
    env = dict(table.pop("env", {}) or {})  # type: ignore[call-overload]
    env.setdefault("MARK_DIR", str(mark_dir))
    servers.add_server(
        name, command=sys.executable, args=[str(FAULT_SERVER), *args], env=env, **table
    )


class HttpServer:
    """The fault server over Streamable HTTP on loopback (a free port), as a subprocess."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(FAULT_SERVER), "--http"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("PORT "), line
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
