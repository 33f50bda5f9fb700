"""Which MCP servers there are: ``[mcp_servers.NAME]`` tables, ``mcpServers`` JSON files, and
servers added in the session. Reading only: nothing here starts a process or imports the SDK.

In ``config.toml`` (the package's config file, :func:`notebook_llm.engine.providers.config_path`)::

    [mcp_servers.time]                      # a stdio server: a command the kernel starts
    command = "uvx"
    args = ["mcp-server-time", "--local-timezone", "UTC"]

    [mcp_servers.github]
    command = "github-mcp-server"
    args = ["stdio"]
    env = { GITHUB_PERSONAL_ACCESS_TOKEN = "$GITHUB_TOKEN" }   # a reference, never the key
    tool_timeout = 120                      # seconds one call may take (default 60)

    [mcp_servers.docs]                      # a Streamable HTTP server
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "Bearer ${DOCS_TOKEN}" }

    [mcp]
    settings = ["~/.jupyter/mcp_settings.json"]   # mcpServers JSON files, read too

Keys by reference. A value in ``env``, ``headers`` or ``args`` may name environment variables
(``$NAME``, ``${NAME}`` or VS Code's ``${env:NAME}``), read from the environment, then from a
``.env`` file in the working folder, when the server starts. In ``config.toml`` a literal value
that looks like a key (an ``env`` name with KEY, TOKEN, SECRET, PASSWORD, AUTH... in it, a
credential header, or a value shaped like a known key format) is refused with the one line
that fixes it: the config file is shared and copied, so a key must not be written in it. Every
value read through a reference is registered with the redaction, so it never shows in an
output, a log or a recording.

The ``mcpServers`` JSON of Claude Desktop, jupyter-ai (``.jupyter/mcp_settings.json``) and VS Code
(``"servers"``, ``"type": "stdio" | "http"``) is read as it is written by those tools, named by
path (``[mcp] settings`` above, ``%llm mcp load PATH`` or :func:`notebook_llm.mcp.load_settings`),
never found by itself: a settings file inside a cloned folder must not decide what a cell runs.
Those files often hold keys literally; they are used, hidden like any key, and named once in a
notice. Keys those tools use that mean nothing here (``disabled``, ``autoApprove``...) are
ignored, a server with ``"disabled": true`` is skipped, and an SSE server (``"type": "sse"``)
is refused with what to use instead.

Where names collide: a server added in the session wins over ``config.toml``, which wins over
the JSON files (the first listed first).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import SENSITIVE_HEADERS, register_secret
from ...engine.providers import MAX_CONFIG_BYTES, config_path, notice

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_STARTUP_TIMEOUT",
    "DEFAULT_TOOL_TIMEOUT",
    "ConfigSet",
    "ServerConfig",
    "load_configs",
    "read_settings_file",
    "resolve_values",
    "server_config",
]

#: Seconds one tool call may take before it is cancelled (the protocol's cancellation is sent).
DEFAULT_TOOL_TIMEOUT = 60.0
#: Seconds a server has to start and answer the handshake and the tool listing (``uvx`` and
#: ``npx`` may fetch the server first).
DEFAULT_STARTUP_TIMEOUT = 60.0
#: The most characters of one tool result handed to the model; the rest is cut, and said so.
DEFAULT_MAX_RESULT_CHARS = 50_000

Transport = Literal["stdio", "http"]


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server as configured: a stdio command, or a Streamable HTTP URL.

    ``env``, ``headers`` and ``args`` hold values as written, references unexpanded
    (:func:`resolve_values` expands them when the server starts); ``origin`` says where the
    server was defined. Two configs are equal when they would start the same server, which is
    how a changed configuration is noticed. ``repr`` never shows ``env`` or ``headers`` values.
    """

    name: str
    origin: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    #: Written in a file of another tool: literal values that look like keys are used (and
    #: hidden), not refused.
    foreign: bool = field(default=False, compare=False)

    @property
    def transport(self) -> Transport:
        return "http" if self.url is not None else "stdio"

    def describe(self, *, short: bool = False) -> str:
        """The command line or the URL, as written (references, never their values);
        ``short``: the command by its file name (``python``, not the interpreter's path)."""
        if self.url is not None:
            return self.url
        command = self.command or ""
        if short:
            command = Path(command).name or command
        return " ".join([command, *self.args]).strip()

    def __repr__(self) -> str:
        hidden = ", ".join(k for k, _ in (*self.env, *self.headers))
        return (
            f"ServerConfig(name={self.name!r}, {self.transport}: {self.describe()!r}, "
            f"origin={self.origin!r}" + (f", values of {hidden} hidden" if hidden else "") + ")"
        )


@dataclass
class ConfigSet:
    """The servers configured right now, and the problems of the entries that could not be
    read (by server name, or ``""`` for a file as a whole)."""

    servers: dict[str, ServerConfig] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------ key checks

#: Words of an ``env`` or header name that say it holds a credential.
_KEY_WORDS = frozenset(
    {
        "KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "AUTHORIZATION",
        "BEARER",
        "PAT",
        "COOKIE",
    }
)
#: How keys of well-known services begin.
_KEY_PREFIXES = (
    "sk-",
    "sk_",
    "rk_",
    "pk_live",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "hf_",
    "npm_",
    "pypi-",
)


def _name_words(name: str) -> set[str]:
    """``GITHUB_PERSONAL_ACCESS_TOKEN`` -> ``{"GITHUB", "PERSONAL", "ACCESS", "TOKEN"}``;
    ``apiKey`` -> ``{"API", "KEY", "APIKEY"}``."""
    words: list[str] = []
    current = ""
    for char in name:
        if not char.isalnum():
            if current:
                words.append(current)
            current = ""
        elif char.isupper() and current and current[-1].islower():
            words.append(current)
            current = char
        else:
            current += char
    if current:
        words.append(current)
    upper = [w.upper() for w in words]
    return set(upper) | {"".join(upper)}


def name_holds_key(name: str, *, header: bool = False) -> bool:
    """Whether an ``env`` or header name says its value is a credential."""
    if header and name.lower() in SENSITIVE_HEADERS:
        return True
    return bool(_name_words(name) & _KEY_WORDS)


def value_looks_like_key(value: str) -> bool:
    """Whether a value is shaped like a key: a known prefix, a ``Bearer``/``Basic`` credential,
    or one long word of letters and digits both (no spaces, no slashes: not a path or a URL)."""
    text = value.strip()
    lower = text.lower()
    if lower.startswith(("bearer ", "basic ", "token ")):
        return len(text.split(None, 1)[1].strip()) >= 8
    if text.startswith(_KEY_PREFIXES) and len(text) >= 12:
        return True
    if len(text) < 32 or any(c.isspace() or c in "/\\:@" for c in text):
        return False
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


# ------------------------------------------------------------------------------ references


def _references(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, NAME)`` of each ``$NAME``, ``${NAME}`` and ``${env:NAME}`` in ``text``
    (a linear scan: the text is a config value, but no regex is needed to read it)."""
    found: list[tuple[int, int, str]] = []
    i = 0
    while i < len(text):
        if text[i] != "$":
            i += 1
            continue
        if text.startswith("${", i):
            end = text.find("}", i + 2)
            if end < 0:
                break
            inner = text[i + 2 : end]
            name = inner[4:] if inner.startswith("env:") else inner
            if _is_name(name):
                found.append((i, end + 1, name))
            i = end + 1
            continue
        j = i + 1
        while j < len(text) and (text[j].isalnum() or text[j] == "_"):
            j += 1
        if _is_name(text[i + 1 : j]):
            found.append((i, j, text[i + 1 : j]))
        i = max(j, i + 1)
    return found


def _is_name(name: str) -> bool:
    return bool(name) and not name[0].isdigit() and all(c.isalnum() or c == "_" for c in name)


def has_reference(text: str) -> bool:
    return bool(_references(text))


def resolve_values(
    config: ServerConfig, lookup: Mapping[str, str] | None = None
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """``(env, headers, args)`` of ``config`` with every reference replaced by its value.

    ``lookup`` defaults to the environment, then a ``.env`` file in the working folder. Each
    value read through a reference is registered as a secret, and so is a literal value of a
    file of another tool that looks like a key. A reference to a variable that is not set is
    an ``LlmError(MISSING_CREDENTIAL)`` naming the variable and the server, never a value.
    """
    source = lookup if lookup is not None else _environment()

    def expand(text: str, what: str) -> str:
        out: list[str] = []
        last = 0
        for start, end, name in _references(text):
            value = source.get(name)
            if not value:
                raise LlmError(
                    f"MCP server {config.name!r}: {what} refers to ${name}, which is not set; set "
                    f"the environment variable {name} (or put {name}=... in a .env file) and run "
                    "the cell again",
                    ErrorCode.MISSING_CREDENTIAL,
                    details={"server": config.name, "variable": name},
                )
            register_secret(value)
            out.append(text[last:start] + value)
            last = end
        out.append(text[last:])
        return "".join(out)

    def literal_key(name: str, value: str, header: bool) -> None:
        if not has_reference(value) and (
            name_holds_key(name, header=header) or value_looks_like_key(value)
        ):
            credential = value.split(None, 1)[-1] if header else value
            register_secret(credential)
            register_secret(value)

    env = {}
    for name, value in config.env:
        literal_key(name, value, header=False)
        env[name] = expand(value, f"env {name}")
    headers = {}
    for name, value in config.headers:
        literal_key(name, value, header=True)
        headers[name] = expand(value, f"header {name}")
    args = [expand(a, "an argument") for a in config.args]
    return env, headers, args


def _environment() -> dict[str, str]:
    from ...engine.credentials import read_env_file

    merged = dict(read_env_file(Path(".env")))
    merged.update(os.environ)
    return merged


# ------------------------------------------------------------------------------ building


class _Refused(ValueError):
    """One entry that cannot be used; the message names what to fix."""


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Refused(f"{what} must be a list of strings")
    return tuple(value)


def _table(value: Any, what: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _Refused(f'{what} must be a table of strings (NAME = "value")')
    return tuple(sorted(value.items()))


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86_400:
        raise _Refused(f"{what} must be a number of seconds above 0 (at most a day)")
    return float(value)


def _checked_literals(config: ServerConfig) -> None:
    """Refuse a key written in the file (``config.toml`` and session servers' checks)."""
    for name, value in config.env:
        if has_reference(value):
            continue
        if name_holds_key(name) or value_looks_like_key(value):
            raise _Refused(
                f"env {name} holds a value written in the file where a key belongs; write "
                f'{name} = "${name}" and set the environment variable {name} (or put '
                f"{name}=... in a .env file): a key is never written in a config file"
            )
    for name, value in config.headers:
        if not has_reference(value) and (
            name_holds_key(name, header=True) or value_looks_like_key(value)
        ):
            raise _Refused(
                f'header {name} holds a credential written in the file; write it as "Bearer '
                '${TOKEN_VARIABLE}" with the key in an environment variable or a .env file'
            )
    for value in config.args:
        if not has_reference(value) and value_looks_like_key(value):
            raise _Refused(
                "an argument looks like a key written in the file; pass it in env = { NAME = "
                '"$VARIABLE" } instead (arguments show in process lists)'
            )


def server_config(
    name: str, table: Mapping[str, Any], origin: str, *, foreign: bool = False
) -> ServerConfig:
    """One server from its table (TOML, JSON or keywords); ``ValueError`` saying what to fix."""
    if not name or any(c in name for c in "/,: \t\n") or not name.isprintable():
        raise _Refused(
            f"{name!r} is not a usable server name (no spaces, slashes, commas or colons)"
        )
    kind = table.get("type", table.get("transport"))
    if kind is not None and not isinstance(kind, str):
        raise _Refused("type must be a string")
    kind = (kind or "").lower().replace("_", "-")
    if kind == "sse":
        raise _Refused(
            "SSE servers (type sse) are not supported: use the server's Streamable HTTP "
            "endpoint (type http, often the same URL ending in /mcp)"
        )
    if kind not in ("", "stdio", "http", "streamable-http", "streamablehttp"):
        raise _Refused(f"type {kind!r} is not a transport: use stdio or http")
    known = {
        "type",
        "transport",
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "headers",
        "tool_timeout",
        "startup_timeout",
        "max_result_chars",
    }
    unknown = sorted(set(table) - known)
    if unknown and not foreign:
        raise _Refused(f"unknown keys {unknown}; allowed: {sorted(known - {'transport'})}")
    command, url = table.get("command"), table.get("url")
    if (command is None) == (url is None):
        raise _Refused('give either command = "..." (a stdio server) or url = "..." (HTTP)')
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise _Refused("command must be a program name or path")
    if url is not None and (
        not isinstance(url, str) or not url.lower().startswith(("http://", "https://"))
    ):
        raise _Refused("url must be an http:// or https:// URL")
    cwd = table.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise _Refused("cwd must be a folder path")
    limit = table.get("max_result_chars", DEFAULT_MAX_RESULT_CHARS)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1_000 <= limit <= 10_000_000:
        raise _Refused("max_result_chars must be a whole number from 1000 to 10000000")
    stdio_only = [k for k in ("args", "env", "cwd") if table.get(k)]
    if url is not None and stdio_only:
        raise _Refused(f"{', '.join(stdio_only)} apply to stdio servers, not to a url")
    if command is not None and table.get("headers"):
        raise _Refused("headers apply to HTTP servers (url), not to a command")
    config = ServerConfig(
        name=name,
        origin=origin,
        command=command,
        args=_strings(table.get("args", []), "args"),
        env=_table(table.get("env", {}), "env"),
        cwd=str(Path(cwd).expanduser()) if cwd else None,
        url=url,
        headers=_table(table.get("headers", {}), "headers"),
        tool_timeout=_seconds(table.get("tool_timeout", DEFAULT_TOOL_TIMEOUT), "tool_timeout"),
        startup_timeout=_seconds(
            table.get("startup_timeout", DEFAULT_STARTUP_TIMEOUT), "startup_timeout"
        ),
        max_result_chars=limit,
        foreign=foreign,
    )
    if not foreign:
        _checked_literals(config)
    return config


# ------------------------------------------------------------------------------ files


def _read_bounded(path: Path) -> str:
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise _Refused(f"it is {size:,} bytes, more than a settings file can be")
    with path.open("rb") as fh:
        raw = fh.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise _Refused("it is more than a settings file can be")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _Refused("it is not UTF-8 text") from None


def read_settings_file(path: Path, into: ConfigSet) -> None:
    """Add the servers of an ``mcpServers`` (or VS Code ``servers``) JSON file to ``into``,
    after those already there; a file that cannot be read is one problem, a bad entry one
    problem under its name."""
    path = path.expanduser()
    where = str(path)
    try:
        data = json.loads(_read_bounded(path))
    except FileNotFoundError:
        into.problems.setdefault("", f"MCP settings file {where} does not exist")
        return
    except (OSError, _Refused) as exc:
        into.problems.setdefault("", f"cannot read MCP settings file {where}: {exc}")
        return
    except RecursionError:
        into.problems.setdefault("", f"MCP settings file {where} is nested too deeply to read")
        return
    except ValueError as exc:
        into.problems.setdefault("", f"MCP settings file {where} is not JSON: {exc}")
        return
    servers = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        into.problems.setdefault(
            "", f"MCP settings file {where} has no mcpServers (or servers) object"
        )
        return
    literal_keys: list[str] = []
    for name, table in servers.items():
        if name in into.servers or name in into.problems:
            continue
        if not isinstance(table, dict):
            into.problems[name] = f"{where}: server {name!r} must be an object"
            continue
        if table.get("disabled") is True:
            continue
        try:
            config = server_config(str(name), table, where, foreign=True)
        except _Refused as exc:
            into.problems[name] = f"{where}: server {name!r}: {exc}"
            continue
        literal_keys += [
            f"{name} {k}"
            for k, v in (*config.env, *config.headers)
            if not has_reference(v) and (name_holds_key(k, header=True) or value_looks_like_key(v))
        ]
        into.servers[str(name)] = config
    if literal_keys:
        notice(
            f"{where} has keys written in the file ({', '.join(literal_keys[:4])}); they are "
            "used and hidden from every output, but ${env:NAME} references keep them out of it"
        )


def _read_config_toml(path: Path, into: ConfigSet) -> list[Path]:
    """Add the ``[mcp_servers.NAME]`` tables of ``config.toml`` to ``into``; the JSON files its
    ``[mcp] settings`` names."""
    try:
        if not path.is_file():
            return []
        data = tomllib.loads(_read_bounded(path))
    except (OSError, _Refused, tomllib.TOMLDecodeError) as exc:
        into.problems.setdefault("", f"cannot read config file {path}: {exc}")
        return []
    except RecursionError:
        into.problems.setdefault("", f"config file {path} is nested too deeply to read")
        return []
    tables = data.get("mcp_servers", {})
    if not isinstance(tables, dict):
        into.problems.setdefault("", f"{path}: [mcp_servers] must hold tables")
        tables = {}
    for name, table in tables.items():
        if name in into.servers:
            continue
        if not isinstance(table, dict):
            into.problems[name] = f"{path}: [mcp_servers.{name}] must be a table"
            continue
        try:
            into.servers[name] = server_config(name, table, str(path))
        except _Refused as exc:
            into.problems[name] = f"{path}: [mcp_servers.{name}]: {exc}"
    section = data.get("mcp", {})
    files = section.get("settings", []) if isinstance(section, dict) else None
    if isinstance(files, str):
        files = [files]
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        into.problems.setdefault("", f"{path}: [mcp] settings must be a list of JSON file paths")
        return []
    return [Path(f).expanduser() for f in files]


def load_configs(
    session: Mapping[str, ServerConfig] = {},
    settings_files: tuple[Path, ...] = (),
    path: Path | None = None,
) -> ConfigSet:
    """Every configured server: ``session`` ones, then ``config.toml``'s (``path``, default
    :func:`~notebook_llm.engine.providers.config_path`), then the JSON files it names, then
    ``settings_files`` (loaded in the session). Never raises for a bad file or entry: each is
    a problem of the set."""
    found = ConfigSet(servers=dict(session))
    files = _read_config_toml(path or config_path(), found)
    for file in [*files, *settings_files]:
        read_settings_file(file, found)
    return found


def session_config(name: str, table: Mapping[str, Any]) -> ServerConfig:
    """A server added from Python (``notebook_llm.mcp.add_server``): the file rules, but a
    literal value is allowed (it is in the kernel's memory, not in a file) and hidden."""
    try:
        config = server_config(name, table, "this session", foreign=True)
    except _Refused as exc:
        raise LlmError(f"MCP server {name!r}: {exc}", ErrorCode.INVALID_OPTIONS) from None
    return replace(config, foreign=True)
