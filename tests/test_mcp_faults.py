"""A server that fails never takes the kernel or the other tools with it.

For each fault (exits at start, crashes mid-call, hangs and is stopped, hangs past
``tool_timeout``, writes junk to stdout, returns a huge result, returns ``isError``): the call
(or the turn, for a server that cannot start) ends with one clear line naming the server and
what happened, with its stderr tail where it has one; the next turn works; and no server
process is left behind.

The waits here are bounded by generous limits (``asyncio.wait_for``, :func:`wait_until`): what
they wait for is an event (a call that ends, a process that exits, a file the server writes
when the protocol's cancellation reaches it), never a speed."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest
from mcp_support import (
    fault_server,
    no_servers_left,
    server_processes,
    servers,  # noqa: F401 (a fixture)
    wait_until,
)
from waiting import until

from notebook_llm import Engine, ErrorCode, LlmError, StopSignal, run_tools
from notebook_llm.api.mcp.servers import McpServers
from notebook_llm.api.tool_calling.events import ToolOutcome, ToolRun

#: The most any one turn here may take before the test fails instead of hanging.
LIMIT = 120.0


async def turn(prompt: str, tools: list[object], **options: object) -> tuple[object, list[object]]:
    """One tool-loop turn with the mock model: ``(completion or LlmError, events)``."""
    events: list[object] = []
    try:
        done: object = await asyncio.wait_for(
            run_tools(
                Engine(),
                "mock",
                "tools",
                prompt=prompt,
                tools=tools,
                on_event=events.append,
                **options,  # type: ignore[arg-type]
            ),
            LIMIT,
        )
    except LlmError as err:
        done = err
    return done, events


def the_outcome(events: list[object]) -> ToolOutcome:
    (outcome,) = [e for e in events if isinstance(e, ToolOutcome)]
    return outcome


async def the_next_turn_works(name: str) -> None:
    """The kernel answers the next cell: the same server (started again if it had to be) and
    a plain generation."""
    done, _ = await turn('Echo "still here"', [f"mcp:{name}/echo"])
    assert getattr(done, "text", done) == "Result of echo: still here"
    plain = await Engine().complete("mock", "echo", prompt="and the model")
    assert plain.text == "and the model"


async def test_a_server_that_exits_at_start(servers: McpServers, tmp_path: Path) -> None:  # noqa: F811
    fault_server(servers, "dies", tmp_path, "--exit-at-start")
    done, events = await turn("anything", ["mcp:dies"])
    assert isinstance(done, LlmError)
    assert done.code == ErrorCode.MCP_SERVER
    assert "\n" not in done.message
    assert "MCP server 'dies': exited while starting" in done.message
    assert "the database is missing" in done.message  # its stderr tail
    assert events == []  # refused before the first step: nothing was sent
    assert no_servers_left()
    fault_server(servers, "ok", tmp_path)
    await the_next_turn_works("ok")
    servers.close()
    assert no_servers_left()


async def test_a_command_that_does_not_exist(servers: McpServers) -> None:  # noqa: F811
    servers.add_server("missing", command="/nonexistent/mcp-server-binary")
    done, _ = await turn("anything", ["mcp:missing"])
    assert isinstance(done, LlmError)
    assert done.code == ErrorCode.MCP_SERVER
    assert done.message.startswith("MCP server 'missing': could not start: the command was not")


async def test_a_server_that_never_answers_the_handshake(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
) -> None:
    fault_server(servers, "mute", tmp_path, "--mute", startup_timeout=2)
    done, _ = await turn("anything", ["mcp:mute"])
    assert isinstance(done, LlmError)
    assert done.code == ErrorCode.MCP_SERVER
    assert "MCP server 'mute': did not start within 2 s (startup_timeout)" in done.message
    assert no_servers_left()
    # Stop while a server starts: the turn ends aborted and the process is reaped
    fault_server(servers, "mute", tmp_path, "--mute")  # startup_timeout: the default, 60 s
    stop = StopSignal()
    presser = threading.Thread(
        target=lambda: wait_until(lambda: bool(server_processes("--mute"))) and stop.set()
    )
    presser.start()
    with pytest.raises(LlmError) as stopped:
        await asyncio.wait_for(
            run_tools(Engine(), "mock", "tools", prompt="x", tools=["mcp:mute"], stop_signal=stop),
            LIMIT,
        )
    presser.join()
    assert stopped.value.code == ErrorCode.ABORTED
    assert no_servers_left()


async def test_a_crash_in_the_middle_of_a_call(servers: McpServers, tmp_path: Path) -> None:  # noqa: F811
    fault_server(servers, "crashy", tmp_path)
    done, events = await turn("crash now", ["mcp:crashy/crash"])
    outcome = the_outcome(events)
    assert outcome.status == "error"
    assert "\n" not in outcome.content
    assert "MCP server 'crashy': exited during the call to 'crash'" in outcome.content
    assert "about to crash: simulated fault" in outcome.content  # its stderr tail
    # the tool's failure is the call's, not the loop's: the model got it and answered
    assert getattr(done, "error", "x") is None
    assert no_servers_left()  # reaped, not a zombie
    await the_next_turn_works("crashy")  # started again on the next use
    servers.close()
    assert no_servers_left()


async def test_stop_cancels_a_hanging_call_and_sends_the_protocols_cancellation(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Stop, pressed while the server runs the call, ends the turn ``ABORTED`` and sends the
    protocol's cancellation, which cancels the call's handler in the live server.

    Stop is pressed once the server's handler has begun (the ``started`` file it writes before
    its first await), not at the loop's ``ToolRun`` event: at that event the request may not
    have reached the server yet, and a call cancelled before the server saw it has nothing to
    cancel there (on a busy machine that made this test fail now and then). How fast Stop
    ends a call (the user's promise: within a second) is measured in ``bench/bench_mcp.py``."""
    fault_server(servers, "slow", tmp_path)
    stop = StopSignal()
    running = asyncio.ensure_future(
        run_tools(
            Engine(), "mock", "tools", prompt="hang", tools=["mcp:slow/hang"], stop_signal=stop
        )
    )
    await until(
        lambda: (tmp_path / "started").exists() or running.done(), "the server to begin the call"
    )
    assert not running.done()
    stop.set()  # the Stop button, pressed while the call runs at the server
    with pytest.raises(LlmError) as stopped:
        await asyncio.wait_for(running, LIMIT)
    assert stopped.value.code == ErrorCode.ABORTED
    # the server got notifications/cancelled, and its handler was cancelled, in a live process
    assert wait_until(lambda: (tmp_path / "cancel-notices").exists())
    assert wait_until(lambda: (tmp_path / "cancelled").exists())
    assert len(server_processes()) == 1
    await the_next_turn_works("slow")
    servers.close()
    assert no_servers_left()


async def test_a_call_past_tool_timeout_is_cancelled(servers: McpServers, tmp_path: Path) -> None:  # noqa: F811
    fault_server(servers, "slow", tmp_path, tool_timeout=1)
    done, events = await turn("hang", ["mcp:slow/hang"])
    outcome = the_outcome(events)
    assert outcome.status == "error"
    assert outcome.content == (
        "MCP server 'slow': tool 'hang' did not answer within 1 s (tool_timeout); the call was "
        "cancelled"
    )
    assert getattr(done, "error", "x") is None
    # the protocol's cancellation reached the server (recorded as it arrives: on a busy machine
    # the second may pass before the call's handler has begun, and then there is no handler
    # to cancel, only the request)
    assert wait_until(lambda: (tmp_path / "cancel-notices").exists())
    await the_next_turn_works("slow")
    servers.close()
    assert no_servers_left()


async def test_the_loops_own_tool_timeout_cancels_an_mcp_call_too(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``tool_timeout=`` of the loop (``run_tools``, ``Chat``, ``map``, ``%%llm
    --tool-timeout``) ends an MCP call that the server's own, longer limit would let run, and
    the protocol's cancellation is sent for it."""
    fault_server(servers, "slow", tmp_path, tool_timeout=LIMIT * 2)
    done, events = await turn("hang", ["mcp:slow/hang"], tool_timeout=1)
    outcome = the_outcome(events)
    assert outcome.status == "error"
    assert (
        outcome.content
        == "tool 'hang' did not finish within 1 s (tool_timeout=1) and was abandoned"
    )
    assert getattr(done, "error", "x") is None
    assert wait_until(lambda: (tmp_path / "cancel-notices").exists())
    await the_next_turn_works("slow")
    servers.close()
    assert no_servers_left()


async def test_junk_on_stdout_ends_the_call(servers: McpServers, tmp_path: Path) -> None:  # noqa: F811
    # a long tool_timeout: the call must end because of the junk, not of the timeout
    fault_server(servers, "noisy", tmp_path, tool_timeout=LIMIT * 2)
    done, events = await turn("junk", ["mcp:noisy/junk"])
    outcome = the_outcome(events)
    assert outcome.status == "error"
    assert "\n" not in outcome.content
    assert outcome.content.startswith(
        "MCP server 'noisy': wrote a line to stdout that is not an MCP message "
        "('hello from a stray print') during the call"
    )
    assert getattr(done, "error", "x") is None
    assert no_servers_left()  # the broken server was stopped and reaped
    await the_next_turn_works("noisy")
    servers.close()
    assert no_servers_left()


async def test_a_huge_result_is_capped_and_says_so(servers: McpServers, tmp_path: Path) -> None:  # noqa: F811
    fault_server(servers, "big", tmp_path, max_result_chars=1000)
    _done, events = await turn("huge", ["mcp:big/huge"])
    outcome = the_outcome(events)
    assert outcome.status == "ok"
    assert outcome.content.startswith("x" * 1000 + "\n[… tool 'huge' returned 2,000,000 characters")
    assert "only the first 1,000 are shown (max_result_chars)" in outcome.content
    assert len(outcome.content) < 1200
    await the_next_turn_works("big")
    servers.close()
    assert no_servers_left()


async def test_an_is_error_result_is_the_tools_error_not_the_loops(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
) -> None:
    fault_server(servers, "failing", tmp_path)
    done, events = await turn('Fail with "disk full"', ["mcp:failing/fails"])
    outcome = the_outcome(events)
    assert outcome.status == "error"
    assert outcome.is_error
    assert "the tool failed: disk full" in outcome.content
    assert getattr(done, "error", "x") is None  # the loop went on: the model answered
    assert "the tool failed: disk full" in getattr(done, "text", "")
    assert len(server_processes()) == 1  # a tool's error is not the server's failure
    await the_next_turn_works("failing")
    servers.close()
    assert no_servers_left()


async def test_confirm_asks_before_each_mcp_call(servers: McpServers, tmp_path: Path) -> None:  # noqa: F811
    fault_server(servers, "asked", tmp_path)
    asked: list[str] = []

    def decline(call: object) -> bool:
        asked.append(getattr(call, "name", ""))
        return False

    _done, events = await turn('Echo "x"', ["mcp:asked/echo"], confirm=decline)
    outcome = the_outcome(events)
    assert asked == ["echo"]
    assert (outcome.status, outcome.source) == ("skipped", "mcp:asked")
    assert not [e for e in events if isinstance(e, ToolRun)]  # never run


def test_restart_and_config_change_reap_the_old_process(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
) -> None:
    fault_server(servers, "kept", tmp_path)
    servers.start_sync("kept")
    (first,) = server_processes()
    servers.start_sync("kept")  # %llm mcp restart kept
    (second,) = server_processes()
    assert second[0] != first[0]
    # a changed configuration stops the running server when it is next read
    fault_server(servers, "kept", tmp_path, "--changed")
    servers.wait_stopped()
    assert no_servers_left()
    servers.start_sync("kept")
    assert "--changed" in server_processes()[0][2]
    servers.remove_server("kept")
    servers.wait_stopped()
    assert no_servers_left()


def test_the_exit_hook_stops_every_server(tmp_path: Path) -> None:
    """A kernel that exits takes its servers with it (the atexit hook), here a child process
    that starts a server which ignores its stdin closing, then exits; the server's pid must be
    gone afterwards (without the hook it would live on, orphaned)."""
    import os
    import signal
    import subprocess

    from mcp_support import FAULT_SERVER

    script = f"""
import os, sys
from notebook_llm import mcp
mcp.add_server("s", command=sys.executable, args=[{str(FAULT_SERVER)!r}, "--linger"])
mcp.restart("s")
me = os.getpid()
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            stat = open(f"/proc/{{entry}}/stat").read()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) == me:
            print(entry, flush=True)
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=LIMIT, check=True
    )
    (pid,) = proc.stdout.split()
    try:
        assert wait_until(lambda: not Path(f"/proc/{pid}").exists())
    finally:
        if Path(f"/proc/{pid}").exists():  # the test failed: do not leave it behind either
            os.kill(int(pid), signal.SIGKILL)
