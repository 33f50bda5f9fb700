"""Which MCP servers are configured: ``[mcp_servers.NAME]`` in config.toml, ``mcpServers`` JSON
files, session servers; keys by reference, never written in config.toml. No server starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from notebook_llm import ErrorCode, LlmError
from notebook_llm.api.mcp.config import (
    ServerConfig,
    load_configs,
    name_holds_key,
    resolve_values,
    value_looks_like_key,
)
from notebook_llm.api.mcp.servers import McpServers
from notebook_llm.core.redaction import redact


def config_file(text: str) -> Path:
    path = Path(os.environ["NOTEBOOK_LLM_CONFIG"])
    path.write_text(text)
    return path


def test_stdio_and_http_servers_from_config_toml() -> None:
    config_file(
        """
[mcp_servers.time]
command = "uvx"
args = ["mcp-server-time", "--local-timezone", "UTC"]
tool_timeout = 30

[mcp_servers.github]
command = "github-mcp-server"
args = ["stdio"]
env = { GITHUB_PERSONAL_ACCESS_TOKEN = "$GITHUB_TOKEN", LOG_LEVEL = "debug" }
cwd = "~"

[mcp_servers.docs]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
"""
    )
    found = load_configs()
    assert found.problems == {}
    time, github, docs = found.servers["time"], found.servers["github"], found.servers["docs"]
    assert (time.transport, time.describe(), time.tool_timeout) == (
        "stdio",
        "uvx mcp-server-time --local-timezone UTC",
        30.0,
    )
    assert dict(github.env)["GITHUB_PERSONAL_ACCESS_TOKEN"] == "$GITHUB_TOKEN"
    assert github.cwd == str(Path.home())
    assert (docs.transport, docs.describe()) == ("http", "https://mcp.example.com/mcp")


@pytest.mark.parametrize(
    ("entry", "fix"),
    [
        ('env = { GITHUB_TOKEN = "ghp_0123456789abcdefghij" }', 'GITHUB_TOKEN = "$GITHUB_TOKEN"'),
        ('env = { API_KEY = "hunter2hunter2" }', 'API_KEY = "$API_KEY"'),
        ('env = { SETTING = "sk-0123456789abcdefghijklmnop" }', 'SETTING = "$SETTING"'),
        ('args = ["--token", "github_pat_0123456789abcdef"]', "arguments show in process lists"),
    ],
)
def test_a_key_written_in_config_toml_is_refused_with_the_fix(entry: str, fix: str) -> None:
    config_file(f'[mcp_servers.s]\ncommand = "server"\n{entry}\n')
    found = load_configs()
    assert "s" not in found.servers
    problem = found.problems["s"]
    assert fix in problem
    for secret in ("ghp_0123", "hunter2", "sk-0123", "github_pat_0123"):
        assert secret not in problem  # the line names the key, never shows it


def test_a_credential_header_written_in_config_toml_is_refused() -> None:
    config_file(
        '[mcp_servers.s]\nurl = "https://x/mcp"\nheaders = { Authorization = "Bearer abcdefgh1234" }\n'
    )
    assert "Bearer ${TOKEN_VARIABLE}" in load_configs().problems["s"]


def test_plain_settings_are_not_mistaken_for_keys() -> None:
    for name, value in [
        ("LOG_LEVEL", "debug"),
        ("PATH_PREFIX", "/usr/local/bin"),
        ("PWD", "/tmp"),
        ("URL", "https://example.com/some/long/path/0123456789"),
    ]:
        assert not name_holds_key(name), name
        assert not value_looks_like_key(value), value
    assert name_holds_key("apiKey")
    assert name_holds_key("x-api-key", header=True)
    assert value_looks_like_key("Bearer 0123456789abcdef")


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ('command = "a"\nurl = "http://b"', "either command"),
        ("args = []", "either command"),
        ('url = "ftp://x"', "http:// or https://"),
        ('command = "a"\nheaders = { X = "1" }', "headers apply to HTTP servers"),
        ('url = "http://x"\nenv = { A = "1" }', "env apply to stdio servers"),
        ('command = "a"\ntool_timeout = 0', "tool_timeout must be a number"),
        ('command = "a"\ncolour = "red"', "unknown keys ['colour']"),
        ('command = "a"\nargs = "--x"', "args must be a list of strings"),
    ],
)
def test_a_bad_entry_is_one_problem_and_the_others_are_kept(entry: str, problem: str) -> None:
    config_file(f'[mcp_servers.bad]\n{entry}\n\n[mcp_servers.good]\ncommand = "ok"\n')
    found = load_configs()
    assert problem in found.problems["bad"]
    assert "good" in found.servers


def test_mcp_servers_json_of_claude_desktop_vs_code_and_jupyter_ai(tmp_path: Path) -> None:
    claude = tmp_path / "claude_desktop_config.json"
    claude.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "filesystem": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                    },
                    "off": {"command": "x", "disabled": True},
                    "remote": {"type": "http", "url": "https://mcp.example.com/mcp"},
                    "legacy": {"type": "sse", "url": "https://old.example.com/sse"},
                    "cline": {"command": "y", "autoApprove": [], "timeout": 60},
                }
            }
        )
    )
    vscode = tmp_path / "mcp.json"
    vscode.write_text(
        json.dumps(
            {
                "inputs": [],
                "servers": {
                    "filesystem": {"type": "stdio", "command": "other"},
                    "git": {"type": "stdio", "command": "uvx", "args": ["mcp-server-git"]},
                },
            }
        )
    )
    config_file(f'[mcp]\nsettings = ["{claude}"]\n')
    found = load_configs(settings_files=(vscode,))
    assert set(found.servers) == {"filesystem", "remote", "cline", "git"}
    assert found.servers["filesystem"].command == "npx"  # the first file listed wins
    assert found.servers["remote"].transport == "http"
    assert "SSE servers (type sse) are not supported" in found.problems["legacy"]


def test_literal_keys_in_a_json_file_are_used_hidden_and_named_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "ghp_literalkeyinjson0123456789"
    settings = tmp_path / "mcp_settings.json"
    settings.write_text(
        json.dumps({"mcpServers": {"gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": secret}}}})
    )
    found = load_configs(settings_files=(settings,))
    assert "gh GITHUB_TOKEN" in capsys.readouterr().err
    config = found.servers["gh"]
    assert secret not in repr(config)
    env, _, _ = resolve_values(config, lookup={})
    assert env["GITHUB_TOKEN"] == secret
    assert secret not in redact(f"the key is {secret}")


def test_references_are_read_when_the_server_starts_and_hidden() -> None:
    config = ServerConfig(
        "s",
        "here",
        command="srv",
        args=("--user", "${env:USER_NAME}"),
        env=(("TOKEN", "$MY_TOKEN"), ("PLAIN", "1")),
    )
    token = "tok-0123456789abcdef-reference"
    env, _, args = resolve_values(config, lookup={"MY_TOKEN": token, "USER_NAME": "ada"})
    assert env == {"TOKEN": token, "PLAIN": "1"}
    assert args == ["--user", "ada"]
    assert token not in redact(f"echoed: {token}")
    with pytest.raises(LlmError) as missing:
        resolve_values(config, lookup={"USER_NAME": "ada"})
    assert missing.value.code == ErrorCode.MISSING_CREDENTIAL
    assert "env TOKEN refers to $MY_TOKEN, which is not set" in missing.value.message


def test_references_come_from_a_dot_env_file_too(tmp_path: Path) -> None:
    token = "dotenv-token-0123456789abcdef"
    (tmp_path / ".env").write_text(f"FROM_DOTENV={token}\n")  # the working folder's
    config = ServerConfig("s", "here", command="srv", env=(("T", "${FROM_DOTENV}"),))
    env, _, _ = resolve_values(config)
    assert env == {"T": token}
    assert "FROM_DOTENV" not in os.environ  # read, never copied into the environment


def test_session_servers_win_and_a_changed_config_is_noticed() -> None:
    config_file('[mcp_servers.s]\ncommand = "from-file"\n')
    servers = McpServers()
    assert servers.configs().servers["s"].command == "from-file"
    servers.add_server("s", command="from-session")
    assert servers.configs().servers["s"].command == "from-session"
    servers.remove_server("s")
    assert servers.configs().servers["s"].command == "from-file"


def test_an_unknown_server_names_the_configured_ones() -> None:
    config_file('[mcp_servers.time]\ncommand = "t"\n')
    with pytest.raises(LlmError) as unknown:
        McpServers()._config("tiem")
    assert unknown.value.code == ErrorCode.MCP_SERVER
    assert "no MCP server named 'tiem' is configured (configured: time)" in unknown.value.message


def test_a_settings_file_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    servers = McpServers()
    with pytest.raises(LlmError, match="does not exist"):
        servers.load_settings(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(LlmError, match="is not JSON"):
        servers.load_settings(bad)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LlmError, match="nested too deeply to read"):
        servers.load_settings(deep)


def test_without_the_sdk_the_line_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from notebook_llm.core.background_loop import run_sync

    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the mcp extra were not installed
    servers = McpServers()
    servers.add_server("s", command="server")
    with pytest.raises(LlmError) as missing:
        run_sync(servers.tools("s"))
    assert missing.value.code == ErrorCode.INVALID_OPTIONS
    assert "pip install 'notebook-llm[mcp]'" in missing.value.message
