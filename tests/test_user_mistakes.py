"""Mistakes a user makes early on: a tool that exits, reloading and unloading adapters, keys set
in one place and used in another, bad config and adapter files, recordings, history.

User code (tools, adapters, config files, recordings) must never end or hang the kernel, state
must stay right, and every mistake gets one line that says what to fix.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_llm import (
    BlockEnd,
    BlockStart,
    Chat,
    Completion,
    Engine,
    ErrorCode,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmAdapter,
    LlmError,
    TextBlock,
    TextDelta,
    ToolResultBlock,
)
from notebook_llm.api.tool_calling import run_tools
from notebook_llm.api.tool_calling.tools import Tool


@pytest.fixture
def engine() -> Engine:
    return Engine(config_file=False, env_file=False, retries=0)


@pytest.fixture(autouse=True)
def _fresh_session_engine() -> Iterator[None]:
    """No test leaves its session engine to the next."""
    from notebook_llm.engine.session import set_default_engine

    yield
    set_default_engine(None)


@pytest.fixture
def ip() -> Iterator[Any]:
    """The in-process shell with the extension loaded and default settings (as test_magics)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "notebook_llm")
    magics = shell.magics_manager.registry["LlmMagics"]
    magics.default_provider = None
    magics.default_model = None
    magics.chats.clear()
    yield shell
    shell.run_line_magic("unload_ext", "notebook_llm")


# ------------------------------------------------------------------ 1. sys.exit in a tool


def bye(a: int, b: int) -> int:
    """Leaves."""
    sys.exit(1)


async def abye(a: int, b: int) -> int:
    """Leaves, asynchronously."""
    raise SystemExit("async bye")


def cli_tool(a: int, b: int) -> int:
    """An argparse tool given bad arguments."""
    parser = argparse.ArgumentParser(prog="cli_tool", add_help=False)
    parser.add_argument("--n", type=int, required=True)
    parser.parse_args(["--n", "not-a-number"])
    return 0


def interrupts(a: int, b: int) -> int:
    """Raises KeyboardInterrupt itself."""
    raise KeyboardInterrupt


@pytest.mark.parametrize("fn", [bye, abye, cli_tool, interrupts])
async def test_tool_exit_becomes_the_tools_result(engine: Engine, fn: Any) -> None:
    completion = await asyncio.wait_for(
        run_tools(engine, "mock", "tools", prompt="1 2", tools=[fn]), 60
    )
    block = completion.transcript[1].content[0]
    assert isinstance(block, ToolResultBlock)
    assert block.is_error
    assert block.text.startswith(("SystemExit", "KeyboardInterrupt"))


@pytest.mark.parametrize("fn", [bye, abye])
async def test_tool_invoke_exit_is_an_error_text(fn: Any) -> None:
    text, is_error = await Tool(fn).invoke('{"a": 1, "b": 2}')
    assert is_error
    assert text.startswith("SystemExit")


def test_chat_send_with_exiting_tool_returns(engine: Engine) -> None:
    chat = Chat(provider="mock", model="tools", engine=engine, tools=[bye], live=False)
    completion = chat.send("1 2", display=False)
    assert completion.error is None
    assert any(
        isinstance(b, ToolResultBlock) and b.is_error and "SystemExit" in b.text
        for m in chat.messages
        for b in m.content
    )


async def test_confirm_function_that_exits_is_the_tools_error(engine: Engine) -> None:
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    def leave(call: Any) -> bool:
        sys.exit(3)

    completion = await asyncio.wait_for(
        run_tools(engine, "mock", "tools", prompt="1 2", tools=[add], confirm=leave), 60
    )
    block = completion.transcript[1].content[0]
    assert isinstance(block, ToolResultBlock)
    assert block.is_error
    assert "SystemExit: 3" in block.text


# ------------------------------------------------------------------ 2. unload after reload

LIVE = """
local a = {{ name = "live", version = "{version}", endpoint = "/chat/completions" }}
function a.transform_request(raw) return raw end
function a.transform_stream_chunk(line) return json.encode({{ done = true }}) end
return a
"""


def test_unload_after_reloading_a_file_adapter_removes_it(tmp_path: Path) -> None:
    engine = Engine(config_file=False, env_file=False)
    path = tmp_path / "live.lua"
    path.write_text(LIVE.format(version="0.1"), "utf-8")
    assert engine.load_adapter(path) == "live"
    path.write_text(LIVE.format(version="0.2"), "utf-8")
    engine.load_adapter(path)
    assert engine.adapter("live").version == "0.2"
    engine.unload_adapter("live")
    with pytest.raises(LlmError) as info:
        engine.adapter("live")
    assert info.value.code == ErrorCode.NO_ADAPTER


def test_unload_after_reload_of_an_override_still_brings_the_builtin_back(tmp_path: Path) -> None:
    engine = Engine(config_file=False, env_file=False)
    original = engine.adapter("openai").version
    path = tmp_path / "openai.lua"
    for version in ("custom-1", "custom-2"):
        path.write_text(LIVE.replace('"live"', '"openai"').format(version=version), "utf-8")
        engine.load_adapter(path)
    engine.unload_adapter("openai")
    assert engine.adapter("openai").version == original


# ------------------------------------------------------------------ 3. one session engine


@pytest.fixture
def session_engine() -> Iterator[Engine]:
    from notebook_llm.engine.session import set_default_engine

    eng = Engine(config_file=False, env_file=False, retries=0)
    set_default_engine(eng)
    yield eng
    set_default_engine(None)


class KeyedAdapter(LlmAdapter):
    """Answers with whether it was given a key (never the key)."""

    name = "keyed"

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        yield BlockStart(0, "text")
        yield TextDelta(0, "with key" if options.api_key else "no key")
        yield BlockEnd(0, TextBlock("with key" if options.api_key else "no key"))
        yield Finish(FinishReason("stop"))


def test_map_uses_the_key_set_with_the_magic(
    session_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    ip: Any,
) -> None:
    import getpass

    import notebook_llm

    session_engine.add_provider("p", adapter=KeyedAdapter(), needs_key=True)
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": "sk-test-0123456789")
    ip.run_line_magic("llm", "key p")
    [result] = notebook_llm.map(["hi"], provider="p", progress=False)
    assert isinstance(result, Completion), result
    assert result.text == "with key"
    assert Chat(provider="p", live=False).engine is session_engine


def test_cli_uses_the_session_engine(
    session_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    from notebook_llm.__main__ import main

    session_engine.add_provider("p", adapter=KeyedAdapter(), needs_key=True)
    session_engine.set_key("p", "sk-test-0123456789")
    assert main(["ask", "-p", "p", "hi"]) == 0
    assert "with key" in capsys.readouterr().out


# ------------------------------------------------------------------ 4. one retry policy


@pytest.mark.parametrize(("engine_retries", "map_retries", "sent"), [(2, None, 3), (2, 1, 2)])
async def test_map_sends_a_failing_prompt_at_most_one_plus_retries_times(
    engine_retries: int, map_retries: int | None, sent: int
) -> None:
    from notebook_llm import amap
    from notebook_llm.adapters.mock import MockServer

    with MockServer() as srv:
        eng = Engine(config_file=False, env_file=False, retries=engine_retries, retry_base=0.001)
        eng.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
        srv.inject("server_error", count=100, status=500)
        [result] = await amap(["x"], engine=eng, provider="m", retries=map_retries, progress=False)
        assert isinstance(result, LlmError)
        assert result.code == ErrorCode.SERVER
        assert len(srv.requests) == sent


# ------------------------------------------------------------------ 5. the key is sent once

SIGNED = """
local a = {{ name = "signed", version = "1", endpoint = "/chat/completions" }}
function a.build_headers(meta) return {{ ["{header}"] = meta.api_key }} end
function a.transform_request(raw) return raw end
function a.transform_stream_chunk(line)
  if line == "[DONE]" then return json.encode({{ done = true }}) end
  local c = json.decode(line)
  local ch = c.choices and c.choices[1]
  if not ch then return "" end
  return json.encode({{ content = ch.delta.content or "", finish_reason = ch.finish_reason }})
end
return a
"""


@pytest.mark.parametrize("header", ["X-Api-Key", "api-key", "X-Custom-Auth"])
async def test_build_headers_alone_carries_the_key(header: str) -> None:
    from notebook_llm.adapters.mock import MockServer

    with MockServer() as srv:
        eng = Engine(config_file=False, env_file=False, retries=0)
        eng.load_adapter(SIGNED.format(header=header))
        eng.add_provider(
            "s", adapter="signed", base_url=srv.url + "/v1", model="echo", api_key="sk-x-123456"
        )
        await eng.complete("s", prompt="hi")
        [request] = [r for r in srv.requests if r.method == "POST"]
        assert request.headers[header.lower()] == "sk-x-123456"
        assert "authorization" not in request.headers


# ------------------------------------------------------------------ 7. Chat errors in a script


def test_chat_error_in_a_plain_script_prints_readable_text(tmp_path: Path) -> None:
    script = tmp_path / "chat_err.py"
    script.write_text(
        "from notebook_llm import Chat, Engine\n"
        "eng = Engine(config_file=False, env_file=False, retries=0)\n"
        "Chat(provider='openai', engine=eng).send('hi')\n",
        "utf-8",
    )
    out = _run_python(script)
    assert "object at 0x" not in out
    assert "LLM error MISSING_CREDENTIAL (openai): no API key" in out


def _run_python(*args: Any) -> str:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    return done.stdout + done.stderr


# ------------------------------------------------------------------ 8. ask exits non-zero


class BrokenAdapter(LlmAdapter):
    name = "broken"

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        yield BlockStart(0, "text")
        raise RuntimeError("the wire broke")


def test_cli_ask_exits_non_zero_with_one_line_on_stderr(
    session_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    from notebook_llm.__main__ import main

    session_engine.add_provider("b", adapter=BrokenAdapter())
    assert main(["ask", "-p", "b", "hi"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: ")
    assert "the wire broke" in err[0]


# ------------------------------------------------------------------ one line: non-UTF-8 adapter


@pytest.fixture
def adapter_shell() -> Iterator[tuple[Any, Any, Engine]]:
    from IPython.core.interactiveshell import InteractiveShell

    from notebook_llm.notebook.magics.adapter_magics import AdapterMagics

    sh = InteractiveShell.instance()
    eng = Engine(config_file=False, env_file=False)
    magics = AdapterMagics(sh, engine=eng)
    sh.register_magics(magics)
    yield sh, magics, eng
    magics.close()


def _latin1_adapter(tmp_path: Path) -> Path:
    path = tmp_path / "latin.lua"
    path.write_bytes(b'local a = { name = "latin", version = "1" }\n-- caf\xe9\nreturn a\n')
    return path


@pytest.mark.parametrize("command", ["load", "watch"])
def test_non_utf8_adapter_file_is_one_line(
    adapter_shell: Any, tmp_path: Path, command: str
) -> None:
    from IPython.core.error import UsageError

    sh, _, _ = adapter_shell
    path = _latin1_adapter(tmp_path)
    with pytest.raises(UsageError) as info:
        sh.run_line_magic("adapter", f"{command} {path}")
    message = str(info.value)
    assert "\n" not in message
    assert f"adapter file {path}" in message
    assert "is not UTF-8 text (byte 0xe9 on line 2): save it as UTF-8" in message


def test_check_adapter_names_the_non_utf8_file(tmp_path: Path) -> None:
    path = _latin1_adapter(tmp_path)
    out = _run_python("-m", "notebook_llm", "check-adapter", path)
    assert f"adapter file {path} is not UTF-8 text" in out
    assert "Traceback" not in out


# ------------------------------------------------------------------ one line: config.toml


@pytest.fixture
def fresh_session() -> Iterator[None]:
    from notebook_llm.engine import providers
    from notebook_llm.engine.session import set_default_engine

    set_default_engine(None)
    providers._noticed.clear()
    yield
    set_default_engine(None)


def _write_config(data: bytes) -> Path:
    import os

    path = Path(os.environ["NOTEBOOK_LLM_CONFIG"])
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            b'[providers.openai]\nmodel = "caf\xe9"\n',
            "is not UTF-8 text (byte 0xe9 on line 2): save it as UTF-8",
        ),
        (
            b"[providers.openai]\nmodel = 5\n",
            "[providers.openai] model must be a string (in quotes), not an integer (5)",
        ),
        (
            b'[providers.x]\nadapter = "openai"\nheaders = { X-Team = 7 }\n',
            "[providers.x] headers must be a table of strings, not a table",
        ),
        (b"[defaults]\nprovider = true\n", "[defaults] provider must be a string"),
    ],
)
def test_bad_config_is_one_line_and_mock_cells_still_run(
    fresh_session: None,
    capsys: pytest.CaptureFixture[str],
    data: bytes,
    line: str,
    ip: Any,
) -> None:
    path = _write_config(data)
    with pytest.raises(LlmError) as info:
        Engine()
    assert str(path) in info.value.message
    assert line in info.value.message
    ip.run_line_magic("llm", "providers")
    result = ip.run_cell_magic("llm", "mock:echo -o answer", "still works")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert line in err[0]
    assert "ignored until you fix it" in err[0]
    assert result is None
    assert ip.user_ns["answer"].text == "still works"


def test_config_variable_naming_a_missing_file_is_warned_of(
    fresh_session: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTEBOOK_LLM_CONFIG", "/nonexistent/notebook_llm.toml")
    Engine()
    assert capsys.readouterr().err.strip() == (
        "notebook_llm: NOTEBOOK_LLM_CONFIG names /nonexistent/notebook_llm.toml, which is not a "
        "file: no config file is used"
    )


# ------------------------------------------------------------------ one line: %llm key, no stdin


def test_llm_key_without_stdin_says_how_to_set_the_key(
    monkeypatch: pytest.MonkeyPatch, ip: Any
) -> None:
    import getpass

    from IPython.core.error import StdinNotImplementedError

    def no_stdin(prompt: str = "") -> str:
        raise StdinNotImplementedError("getpass was called, but this frontend does not support")

    monkeypatch.setattr(getpass, "getpass", no_stdin)
    assert _llm_error_line(ip, "key openai") == (
        "UsageError: %llm key cannot ask for a key here (this front end has no input box): set the "
        "environment variable OPENAI_API_KEY before starting Jupyter, or put OPENAI_API_KEY=... "
        "in a .env file in the notebook's folder"
    )


def _llm_error_line(ip: Any, line: str, cell: str | None = None) -> str:
    """The first stderr line of ``%llm line`` (``%%llm`` with a cell), with no traceback."""
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        if cell is None:
            ip.run_line_magic("llm", line)
        else:
            ip.run_cell_magic("llm", line, cell)
    assert "Traceback" not in cap.stdout + cap.stderr
    return cap.stderr.splitlines()[0] if cap.stderr else ""


# ------------------------------------------------------------------ one line: lone surrogates


def test_interpolated_lone_surrogate_names_the_variable(ip: Any) -> None:
    ip.user_ns["title"] = b"caf\xe9".decode("utf-8", "surrogateescape")
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        ip.run_cell_magic("llm", "mock:echo", "Summarize {title}")
    text = cap.stdout + cap.stderr + " ".join(str(o.data) for o in cap.outputs)
    assert "the variable {title} holds text that is not valid Unicode" in text
    assert "ADAPTER_ERROR" not in text
    assert "transform_request" not in text


async def test_lone_surrogate_in_a_prompt_is_the_callers_error(engine: Engine) -> None:
    with pytest.raises(LlmError) as info:
        await engine.complete("mock", "echo", prompt="bad \udce9 text")
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert info.value.message.startswith(
        "message 1 (user) holds text that is not valid Unicode (a lone surrogate '\\udce9' at "
        "position 4)"
    )


# ------------------------------------------------------------------ one line: invalid request JSON

BAD_BODY = """
local a = { name = "badbody", version = "1", endpoint = "/chat/completions" }
function a.transform_request(raw) return raw:sub(1, -2) .. ",}" end
function a.transform_stream_chunk(line) return json.encode({ done = true }) end
return a
"""


async def test_transform_request_returning_invalid_json_is_the_adapters_error() -> None:
    from notebook_llm.adapters.mock import MockServer

    with MockServer() as srv:
        eng = Engine(config_file=False, env_file=False, retries=0)
        eng.load_adapter(BAD_BODY)
        eng.add_provider("b", adapter="badbody", base_url=srv.url + "/v1", model="echo")
        with pytest.raises(LlmError) as info:
            await eng.complete("b", prompt="hi")
        assert not [r for r in srv.requests if r.method == "POST"]  # nothing was sent
    err = info.value
    assert err.code == ErrorCode.ADAPTER_ERROR
    assert err.hook == "transform_request"
    assert err.message.startswith("adapter 'badbody': transform_request returned invalid JSON")


# ------------------------------------------------------------------ papercuts: adapter names


def test_errors_use_the_file_name_or_the_declared_name(tmp_path: Path) -> None:
    engine = Engine(config_file=False, env_file=False)
    syntax = tmp_path / "syntax.lua"
    syntax.write_text('local a = { name = "syn"\nfunction x(\nreturn a\n', "utf-8")
    notable = tmp_path / "notable.lua"
    notable.write_text("return 5\n", "utf-8")
    messages = []
    for what in (syntax, notable, 'local a = { name = "decl" }\nreturn 5\n'):
        with pytest.raises(LlmError) as info:
            engine.load_adapter(what)
        messages.append(info.value.message)
    assert messages[0].startswith("adapter 'syntax' does not compile: ")
    assert messages[1] == (
        "adapter 'notable': the script must return a table (the adapter), it returned a number"
    )
    assert messages[2].startswith("adapter 'decl': the script must return a table")


def test_a_loaded_adapter_used_as_a_provider_says_how_to_bind_it() -> None:
    engine = Engine(config_file=False, env_file=False)
    engine.load_adapter(LIVE.format(version="1"))
    with pytest.raises(LlmError) as info:
        engine.complete_sync("live", prompt="hi")
    assert info.value.message.startswith(
        "'live' is an adapter, not a provider: bind it to a server first with "
        'engine.add_provider("live", adapter="live", base_url='
    )


# ------------------------------------------------------------------ papercuts: silent settings


@pytest.mark.parametrize(
    ("line", "cell", "expected"),
    [
        ("use mock:nosuchmodel", None, "UsageError: mock has no model 'nosuchmodel'; it has: echo"),
        ("mock -o for", "hi", "UsageError: --out needs a variable name, not the Python keyword"),
        ("mock --new", "hi", "UsageError: --new starts a conversation over: use it with --chat"),
        ("reset nosuch", None, "UsageError: no conversation named 'nosuch' (conversations: "),
    ],
)
def test_settings_are_not_accepted_silently(
    line: str, cell: str | None, expected: str, ip: Any
) -> None:
    assert _llm_error_line(ip, line, cell).startswith(expected)


def test_use_with_an_unlisted_model_says_it_was_not_checked(ip: Any) -> None:
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        ip.run_line_magic("llm", "use openai:gpt-9-imaginary")
        ip.run_line_magic("llm", "use mock:echo")
    assert cap.stdout.splitlines() == [
        "%%llm now uses openai:gpt-9-imaginary (not checked: 'gpt-9-imaginary' is not among the "
        "models listed for openai)",
        "%%llm now uses mock:echo",
    ]


# ------------------------------------------------------------------ papercuts: record and replay


def test_record_and_replay_say_when_they_end_a_session(tmp_path: Path) -> None:
    from notebook_llm import record as rec

    try:
        first = rec.magic_command(["record", str(tmp_path / "a.jsonl")])
        assert first.startswith("recording provider exchanges to ")
        switched = rec.magic_command(["record", str(tmp_path / "b.jsonl")])
        assert switched.startswith(
            f"switched recording: recorded 0 exchanges to {tmp_path / 'a.jsonl'}; now recording "
            f"provider exchanges to {tmp_path / 'b.jsonl'}"
        )
        replaying = rec.magic_command(["replay", str(tmp_path / "b.jsonl")])
        assert replaying.splitlines()[0].startswith(
            f"ended the recording (recorded 0 exchanges to {tmp_path / 'b.jsonl'}); replaying 0 "
        )
        assert replaying.splitlines()[1:] == [
            f"warning: {tmp_path / 'b.jsonl'} holds no exchanges: every request will be a "
            "REPLAY_MISS"
        ]
    finally:
        rec.stop()


def test_replay_file_errors_are_distinct_and_name_the_line(tmp_path: Path) -> None:
    from notebook_llm import record as rec

    with pytest.raises(LlmError) as info:
        rec.start_replay(tmp_path / "missing.jsonl")
    assert info.value.code == ErrorCode.REPLAY_FILE
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"notebook_llm_recording": 1}\n{"method": "POST",\n', "utf-8")
    with pytest.raises(LlmError) as info:
        rec.start_replay(bad)
    assert info.value.code == ErrorCode.REPLAY_FILE
    assert info.value.message.startswith(f"recording {bad}, line 2: not a JSON object (")
    assert rec.active() is None


def test_replay_of_a_file_with_no_header_warns(tmp_path: Path) -> None:
    from notebook_llm import record as rec

    path = tmp_path / "plain.jsonl"
    path.write_text('{"hello": 1}\n', "utf-8")
    try:
        lines = rec.magic_command(["replay", str(path)]).splitlines()
    finally:
        rec.stop()
    assert lines[1:] == [
        f"warning: {path} has no notebook_llm_recording header: is it a recording?",
        f"warning: {path} holds no exchanges: every request will be a REPLAY_MISS",
    ]


# ------------------------------------------------------------------ papercuts: history


def test_history_shows_tool_calls_and_results(ip: Any) -> None:
    from IPython.utils.capture import capture_output

    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    ip.user_ns["add"] = add
    with capture_output():
        ip.run_cell_magic("llm", "mock:tools --tools add --chat hist --new", "add 2 and 40")
    with capture_output() as cap:
        ip.run_line_magic("llm", "history hist")
    lines = cap.stdout.splitlines()
    assert lines[0] == "user: add 2 and 40"
    call = next(line for line in lines if "tool call" in line)
    assert call.startswith("assistant: tool call add({")
    assert '"a": 2' in call or '"b": 2' in call
    assert "tool result add: 42" in lines
    assert lines[-1].startswith("assistant: ")
