"""Parsing the ``%%llm`` and ``%llm`` lines (separate from handling them).

The line is split shell-style and parsed with IPython's ``magic_arguments`` (argparse). A wrong
option raises ``UsageError`` with a short message; the magic prints it with the usage line.
"""

from __future__ import annotations

import keyword
import shlex
from dataclasses import dataclass, field
from typing import Any

from IPython.core import magic_arguments as _ma
from IPython.core.error import UsageError

from ...core.dash_options import single_dash_long_option

# IPython's magic_arguments is untyped: use it through Any-typed names.
argument: Any = _ma.argument
magic_arguments: Any = _ma.magic_arguments
parse_argstring: Any = _ma.parse_argstring

FORMATS = ("markdown", "text", "code", "json")
DEFAULT_CHAT = "default"


_CELL_ARGUMENTS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (
        ("target",),
        {
            "nargs": "?",
            "default": None,
            "help": "PROVIDER or PROVIDER:MODEL (default: the session default, else mock)",
        },
    ),
    (
        (
            "-s",
            "--system",
        ),
        {"default": None, "help": "system prompt (quote it)"},
    ),
    (
        (
            "-t",
            "--temperature",
        ),
        {"type": float, "default": None, "help": "sampling temperature, 0..2"},
    ),
    (("--max-tokens",), {"type": int, "default": None, "help": "limit on output tokens"}),
    (
        ("--reasoning",),
        {"default": None, "metavar": "EFFORT", "help": "reasoning effort, e.g. low, medium, high"},
    ),
    (
        ("--tools",),
        {
            "default": None,
            "metavar": "F,G",
            "help": "functions from the namespace the model may call, and MCP tools: "
            "mcp:SERVER (all its tools) or mcp:SERVER/TOOL",
        },
    ),
    (("--confirm",), {"action": "store_true", "help": "ask before each tool call runs"}),
    (
        ("--schema",),
        {
            "default": None,
            "metavar": "NAME",
            "help": "a pydantic model, dataclass or JSON Schema dict from the namespace: the "
            "answer is validated into it (with -o VAR: VAR.parsed)",
        },
    ),
    (
        ("--schema-retries",),
        {
            "type": int,
            "default": 0,
            "metavar": "N",
            "help": "send an answer that does not fit the schema back, with why, up to N times",
        },
    ),
    (
        ("--image",),
        {
            "default": None,
            "metavar": "NAME[,NAME]",
            "help": "images from the namespace (a path, bytes, PIL image, matplotlib Figure or "
            "URL; a path or URL may be written directly)",
        },
    ),
    (("--max-steps",), {"type": int, "default": 8, "help": "tool loop step limit"}),
    (
        ("--chat",),
        {
            "nargs": "?",
            "const": DEFAULT_CHAT,
            "default": None,
            "metavar": "NAME",
            "help": "continue a conversation",
        },
    ),
    (("--new",), {"action": "store_true", "help": "start the conversation over (with --chat)"}),
    (
        (
            "-f",
            "--format",
        ),
        {"default": None, "choices": FORMATS, "help": "how to show the answer"},
    ),
    (
        (
            "-o",
            "--out",
        ),
        {"default": None, "metavar": "VAR", "help": "store the Completion in VAR"},
    ),
    (
        ("--no-stream",),
        {"action": "store_true", "help": "no live view: show only the final result"},
    ),
    (("--no-interpolate",), {"action": "store_true", "help": "send {braces} as written"}),
]


def _llm_cell(line: str) -> None:
    """%%llm [PROVIDER[:MODEL]] [options]  — the cell body is the prompt.

    Prompt interpolation: {name}, {name.attr}, {name[0]} are replaced by values from the
    namespace; braces that name no variable are left as written; {{name}} gives a literal {name}.
    """


def _build(fn: Any) -> Any:
    """Apply the ``magic_arguments`` decorators to ``fn`` (in the order listed above)."""
    for args, kwargs in reversed(_CELL_ARGUMENTS):
        fn = argument(*args, **kwargs)(fn)
    return magic_arguments()(fn)


llm_cell: Any = _build(_llm_cell)


@dataclass
class CellArgs:
    """The parsed ``%%llm`` line."""

    provider: str | None
    model: str | None
    system: str | None
    temperature: float | None
    max_tokens: int | None
    reasoning: str | None
    tools: list[str]
    confirm: bool
    max_steps: int
    chat: str | None
    new: bool
    format: str | None
    out: str | None
    stream: bool
    interpolate: bool
    schema: str | None = None
    images: list[str] = field(default_factory=list)
    schema_retries: int = 0


def split_target(target: str | None) -> tuple[str | None, str | None]:
    """``"openai:gpt-4o"`` → ``("openai", "gpt-4o")``; the model may contain more colons
    (``ollama:gpt-oss:20b``)."""
    if not target:
        return None, None
    provider, _, model = target.partition(":")
    return provider or None, model or None


_LONG_OPTIONS = [n for names, _ in _CELL_ARGUMENTS for n in names if n.startswith("--")]
_VALUED = [
    n
    for names, kw in _CELL_ARGUMENTS
    if names[0].startswith("-") and "action" not in kw and kw.get("nargs") != "?"
    for n in names
]


def parse_cell_line(line: str) -> CellArgs:
    """Parse the ``%%llm`` line; raises ``UsageError`` for a wrong option (a long option typed
    with one dash, ``-temperature``, is named as such, not read as ``-t emperature``)."""
    try:
        hint = single_dash_long_option(shlex.split(line), _LONG_OPTIONS, _VALUED)
    except ValueError:
        hint = None  # parse_argstring below says what is wrong with the quoting
    if hint is not None:
        raise UsageError(hint)
    try:
        ns: Any = parse_argstring(llm_cell, line)
    except ValueError as exc:  # shlex: "No closing quotation"
        raise UsageError(f"cannot parse the %%llm line: {exc}") from None
    provider, model = split_target(ns.target)
    if ns.out is not None and not ns.out.isidentifier():
        raise UsageError(f"--out needs a variable name, not {ns.out!r}")
    if ns.out is not None and keyword.iskeyword(ns.out):
        raise UsageError(f"--out needs a variable name, not the Python keyword {ns.out!r}")
    if ns.new and ns.chat is None:
        raise UsageError("--new starts a conversation over: use it with --chat [NAME]")
    if ns.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    if not 0 <= ns.schema_retries <= 5 or (ns.schema_retries and ns.schema is None):
        raise UsageError("--schema-retries N (0 to 5) goes with --schema NAME")
    tools = [t.strip() for t in (ns.tools or "").split(",") if t.strip()]
    return CellArgs(
        provider,
        model,
        ns.system,
        ns.temperature,
        ns.max_tokens,
        ns.reasoning,
        tools,
        ns.confirm,
        ns.max_steps,
        ns.chat,
        ns.new,
        ns.format,
        ns.out,
        not ns.no_stream,
        not ns.no_interpolate,
        ns.schema,
        [i.strip() for i in (ns.image or "").split(",") if i.strip()],
        ns.schema_retries,
    )


def usage() -> str:
    """The short usage of ``%%llm`` (``%%llm?`` shows the full help)."""
    return (
        "usage: %%llm [PROVIDER[:MODEL]] [-s SYSTEM] [-t TEMPERATURE] [--max-tokens N] "
        "[--reasoning EFFORT] [--tools F,G] [--confirm] [--schema NAME [--schema-retries N]] "
        "[--image NAME[,NAME]] "
        "[--chat [NAME]] [--new] "
        "[-f markdown|text|code|json] [-o VAR] [--no-stream] [--no-interpolate]"
    )


LINE_COMMANDS = {
    "use": "use PROVIDER[:MODEL]   set the session default",
    "providers": "providers              list providers (never keys)",
    "models": "models [PROVIDER]      list a provider's models",
    "history": "history [NAME]         show a conversation",
    "reset": "reset [NAME]           forget a conversation",
    "key": "key PROVIDER           enter a key for this session (asked with getpass)",
    "record": "record PATH | stop      record provider HTTP exchanges to a file (no keys)",
    "replay": "replay PATH [--strict]  answer requests from a recording (no key, no network)",
    "budget": "budget [USD | off]      cap the cost of this session's %%llm cells",
    "pace": "pace [TOKENS_PER_S]     how fast the mock streams where someone watches (0 = at once)",
    "mcp": "mcp [restart NAME | stop [NAME] | load PATH]  MCP servers and their tools",
}


def line_help() -> str:
    """The help text of the ``%llm`` line magic."""
    return "%llm commands:\n" + "\n".join(f"  %llm {v}" for v in LINE_COMMANDS.values())


def parse_line(line: str) -> tuple[str, list[str]]:
    """``%llm COMMAND ARGS...`` → ``(command, args)``; raises ``UsageError`` when wrong."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot parse {line!r}: {exc}") from None
    if not words:
        return "help", []
    command, rest = words[0], words[1:]
    if command in ("help", "-h", "--help"):
        return "help", []
    if command not in LINE_COMMANDS:
        raise UsageError(f"unknown command {command!r}")
    limits = {
        "use": (1, 1),
        "providers": (0, 0),
        "models": (0, 1),
        "history": (0, 1),
        "reset": (0, 1),
        "key": (1, 1),
        "record": (0, 1),
        "replay": (0, 2),
        "budget": (0, 1),
        "pace": (0, 1),
        "mcp": (0, 2),
    }
    low, high = limits[command]
    if not low <= len(rest) <= high:
        raise UsageError(LINE_COMMANDS[command])
    return command, rest
