"""What an MCP server or a recording of one sends is untrusted: a listing read back from a
recording is checked as a live one is, a key a server echoes is hidden wherever its text goes,
and a hostile output schema ends the call with a clear error instead of holding the kernel."""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

import pytest
from mcp_support import (
    FAULT_SERVER,
    fault_server,
    no_servers_left,
    servers,  # noqa: F401 (a fixture)
)
from test_mcp_faults import the_outcome, turn

from notebook_llm import Engine, ErrorCode, LlmError, run_tools
from notebook_llm.api.mcp import servers as servers_module
from notebook_llm.api.mcp.connection import MAX_SCHEMA_CHARS, MAX_SCHEMA_DEPTH
from notebook_llm.api.mcp.servers import McpServers
from notebook_llm.api.mcp.tools import resolve_specs
from notebook_llm.notebook.widgets.final import ToolCallInfo, card_html, card_text
from notebook_llm.notebook.widgets.render import tool_card_html
from tests.child_python import run_python

#: Seconds the child running the hostile-schema call may take: starting the server and one
#: call take a few seconds on a loaded machine; the backtracking check took hours.
LIMIT = 180.0


def _nested(depth: int) -> dict[str, object]:
    schema: dict[str, object] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


async def test_a_recorded_listing_is_checked_as_a_live_one(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fault_server(servers, "faults", tmp_path)
    recording = tmp_path / "run.jsonl"
    engine = Engine()
    with engine.recording(recording):
        await run_tools(engine, "mock", "tools", prompt='Echo "x"', tools=["mcp:faults/echo"])
    servers.close()
    assert no_servers_left()

    # Someone edits the recording: tools whose schemas a live listing would refuse
    planted = {
        "planted_deep": _nested(MAX_SCHEMA_DEPTH + 5),
        "planted_huge": {"type": "object", "description": "x" * (MAX_SCHEMA_CHARS + 1)},
        "planted_none": None,
        "planted_fine": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    edited = []
    for line in recording.read_text().splitlines():
        entry = json.loads(line)
        if str(entry.get("url", "")).endswith("/tools/list"):
            body = json.loads(entry["body"])
            for name, schema in planted.items():
                tool: dict[str, object] = {"name": name, "description": name}
                if schema is not None:
                    tool["inputSchema"] = schema
                body["tools"].insert(0, tool)
            entry["body"] = json.dumps(body)
            line = json.dumps(entry)
        edited.append(line)
    recording.write_text("\n".join(edited) + "\n")
    assert '\\"planted_deep\\"' in recording.read_text()  # in the recorded body (a JSON string)

    monkeypatch.setattr(servers_module, "_default", McpServers())
    replayer = Engine()
    caplog.set_level(logging.WARNING, logger="notebook_llm")
    with replayer.replaying(recording):
        (tools,) = await resolve_specs(["mcp:faults"], replayer)
        names = {t.remote_name for t in tools}
        assert "echo" in names
        assert "planted_fine" in names
        refused = {"planted_deep", "planted_huge", "planted_none"}
        assert not names & refused
        for only in sorted(refused):
            with pytest.raises(LlmError) as missing:
                await resolve_specs([f"mcp:faults/{only}"], replayer)
            assert missing.value.code == ErrorCode.INVALID_OPTIONS
    said = caplog.text
    assert f"nests deeper than {MAX_SCHEMA_DEPTH} levels" in said
    assert f"larger than {MAX_SCHEMA_CHARS:,} characters" in said
    assert "no input schema" in said


async def test_a_recording_nested_past_the_parser_is_a_clear_error(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fault_server(servers, "faults", tmp_path)
    recording = tmp_path / "run.jsonl"
    engine = Engine()
    with engine.recording(recording):
        await run_tools(engine, "mock", "tools", prompt='Echo "x"', tools=["mcp:faults/echo"])
    servers.close()
    lines = recording.read_text().splitlines()
    edited = []
    for line in lines:
        entry = json.loads(line)
        if str(entry.get("url", "")).endswith("/tools/list"):
            entry["body"] = "[" * 200_000 + "]" * 200_000
            line = json.dumps(entry)
        edited.append(line)
    recording.write_text("\n".join(edited) + "\n")
    monkeypatch.setattr(servers_module, "_default", McpServers())
    replayer = Engine()
    with replayer.replaying(recording), pytest.raises(LlmError) as failed:
        await resolve_specs(["mcp:faults"], replayer)
    assert failed.value.code == ErrorCode.MCP_SERVER
    assert "is not JSON" in failed.value.message


async def test_keys_a_server_echoes_are_hidden_in_errors_cards_and_logs(
    servers: McpServers,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config_key = "svc-planted-config-key-0123456789abcdef"  # read through "$SERVICE_TOKEN"
    kernel_key = "sk-planted-kernel-key-0123456789abcdefghij"  # a provider key of the kernel
    monkeypatch.setenv("SERVICE_TOKEN", config_key)
    monkeypatch.setenv("OPENAI_API_KEY", kernel_key)
    caplog.set_level(logging.DEBUG)
    Engine()  # the kernel's provider keys are known from here on

    # 1. a server that prints the config's key to stderr (across a pipe read's 4 KiB
    # boundary) and exits at start: the turn's error line carries its stderr tail
    fault_server(
        servers,
        "dies",
        tmp_path,
        "--exit-at-start",
        env={"STDERR_ECHO": "$SERVICE_TOKEN", "STDERR_PAD": "4080"},
    )
    dead, _ = await turn("anything", ["mcp:dies"])
    assert isinstance(dead, LlmError)
    assert "exited while starting" in dead.message
    messages = [dead.message, str(dead), repr(dead)]

    # 2. a server whose env holds both keys: one tool prints a key to stderr and returns it,
    # another fails with a key in its error text, a third crashes (the stderr tail in the line)
    fault_server(
        servers,
        "leaky",
        tmp_path,
        env={"SERVICE_TOKEN": "$SERVICE_TOKEN", "KERNEL_KEY": "$OPENAI_API_KEY"},
    )
    outcomes = []
    for prompt, tool in (
        ('What is "SERVICE_TOKEN"?', "env_var"),
        ('What is "KERNEL_KEY"?', "env_var"),
        (f'Fail because "{kernel_key} and {config_key}"', "fails"),
        ("crash now", "crash"),
    ):
        done, events = await turn(prompt, [f"mcp:leaky/{tool}"])
        outcome = the_outcome(events)
        outcomes.append(outcome)
        messages += [str(done), repr(done)]  # the answer as shown (its .text is the raw data)
    assert outcomes[0].status == "ok"
    assert outcomes[2].is_error
    assert outcomes[3].is_error
    assert "exited during the call to 'crash'" in outcomes[3].content
    assert "env_var: KERNEL_KEY=" in outcomes[3].content  # the stderr tail, redacted

    # The package's own error line (a server that crashed) is redacted where it is built; a
    # tool's result and error text are the tool's data (the model reads them), shown redacted
    shown = [*messages, outcomes[3].content]
    for o in outcomes:
        info = ToolCallInfo(o.name, "{}", o.content, o.status, o.is_error, o.source)
        shown += [card_html(info), card_text(info)]
        shown.append(tool_card_html(o.name, o.status, "{}", o.content, o.is_error, o.source))
    shown.append(caplog.text)
    servers.close()
    assert no_servers_left()
    for text in shown:
        for key in (config_key, kernel_key):
            assert key not in text
            assert key[:24] not in text
            assert key[-24:] not in text


def test_a_hostile_output_schema_ends_the_call_with_a_clear_error(tmp_path: Path) -> None:
    """A real stdio server lists a tool whose output schema's pattern is ``^(a+)+$`` and
    returns ``{"a": "aaa...b"}`` (100,000 ``a``): checked with Python's ``re`` (the SDK's
    check) this never ends, and nothing can stop it. In a child process with a time limit."""
    code = textwrap.dedent(
        f"""
        import asyncio, sys
        from notebook_llm.api.mcp.servers import McpServers
        from notebook_llm.api.mcp.tools import McpTool

        async def main():
            servers = McpServers()
            servers.add_server(
                "hostile", command=sys.executable, args=[{str(FAULT_SERVER)!r}],
                env={{"MARK_DIR": {str(tmp_path)!r}}},
            )
            try:
                (info,) = [t for t in await servers.tools("hostile")
                           if t["name"] == "hostile_pattern"]
                reply = await McpTool("hostile", info, servers=servers).call({{}})
                print("ERROR" if reply.is_error else "OK", reply.text)
            finally:
                servers.close()

        asyncio.run(main())
        """
    )
    out = run_python(code, limit=LIMIT, what="the call (a backtracking output check?)")
    assert out.startswith("ERROR"), out[-2000:]
    assert "invalid structured content returned by tool hostile_pattern" in out
    assert "does not match" in out or "pattern" in out
    assert len(out) < 2_000  # one line, not the 100,000-character value
