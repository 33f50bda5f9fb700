"""Parsing the ``%%llm`` and ``%llm`` lines (separate from handling them).

The line is split shell-style and parsed with IPython's ``magic_arguments`` (argparse). A wrong
option raises ``UsageError`` with a short message; the magic prints it with the usage line.
"""

from __future__ import annotations

import difflib
import keyword
import math
import shlex
from dataclasses import dataclass, field
from typing import Any

from IPython.core import magic_arguments as _ma
from IPython.core.error import UsageError

from ...core.dash_options import option_hint

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
    (("-s", "--system"), {"default": None, "help": "system prompt (quote it)"}),
    (
        ("-t", "--temperature"),
        {"type": float, "default": None, "metavar": "T", "help": "sampling temperature, 0..2"},
    ),
    (
        ("--max-tokens",),
        {"type": int, "default": None, "metavar": "N", "help": "limit on output tokens"},
    ),
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
            "help": "validate the answer into this pydantic model, dataclass or JSON Schema "
            "dict (with -o VAR: VAR.parsed)",
        },
    ),
    (
        ("--schema-retries",),
        {
            "type": int,
            "default": 0,
            "metavar": "N",
            "help": "send an answer that does not fit the schema back with why, up to N times",
        },
    ),
    (
        ("--image",),
        {
            "default": None,
            "metavar": "NAME[,NAME]",
            "help": "send images: a path, bytes, PIL image, Figure or URL from the namespace, "
            "or a path or URL as written",
        },
    ),
    (
        ("--max-steps",),
        {
            "type": int,
            "default": 8,
            "metavar": "N",
            "help": "with --tools: at most N model requests in the tool loop (default 8)",
        },
    ),
    (
        ("--tool-timeout",),
        {
            "type": float,
            "default": None,
            "metavar": "SECONDS",
            "help": "with --tools: seconds one tool call may run before it is abandoned and the "
            "model told so (default: config.toml's [defaults] tool_timeout, else no limit)",
        },
    ),
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
        ("-f", "--format"),
        {
            "default": None,
            "choices": FORMATS,
            "metavar": "FORMAT",
            "help": "show the answer as markdown (default), text, json or code (code: also "
            "offered as the next cell)",
        },
    ),
    (
        ("-o", "--out"),
        {"default": None, "metavar": "VAR", "help": "store the Completion in VAR"},
    ),
    (
        ("--no-stream",),
        {
            "action": "store_true",
            "help": 'ask for one whole answer ("stream": false), shown when it is complete',
        },
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
    tool_timeout: float | None = None


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
        hint = option_hint(shlex.split(line), _LONG_OPTIONS, _VALUED)
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
    if ns.tool_timeout is not None and not (math.isfinite(ns.tool_timeout) and ns.tool_timeout > 0):
        raise UsageError("--tool-timeout takes a positive number of seconds")
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
        ns.tool_timeout,
    )


def _option_form(names: tuple[str, ...], kw: dict[str, Any]) -> str:
    """How an option is written: ``-s, --system SYSTEM``, ``--chat [NAME]``, ``--confirm``."""
    if not names[0].startswith("-"):
        return "PROVIDER[:MODEL]"
    written = ", ".join(names)
    if "action" in kw:
        return written
    metavar = kw.get("metavar") or names[-1].lstrip("-").replace("-", "_").upper()
    return f"{written} [{metavar}]" if kw.get("nargs") == "?" else f"{written} {metavar}"


def usage() -> str:
    """The usage line of ``%%llm``: every option, in the order of the help."""
    parts = []
    for names, kw in _CELL_ARGUMENTS:
        form = _option_form(names[:1], kw)
        parts.append(f"[{form}]")
    return "usage: %%llm " + " ".join(parts) + " [-h]"


def cell_help() -> str:
    """One line for each ``%%llm`` option (``%%llm --help``, and part of ``%llm help``)."""
    rows = [(_option_form(names, kw), str(kw["help"])) for names, kw in _CELL_ARGUMENTS]
    width = max(len(form) for form, _ in rows) + 2
    return "\n".join(
        [
            "%%llm [PROVIDER[:MODEL]] [options]: the cell body is the prompt; {name} in it is "
            "the value of name (--no-interpolate sends braces as written)",
            *(f"  {form:{width}}{text}" for form, text in rows),
            f"  {'-h, --help':{width}}this help",
        ]
    )


def wants_help(line: str) -> bool:
    """``%%llm --help`` / ``%%llm -h``: show the options instead of sending the cell."""
    try:
        words = shlex.split(line)
    except ValueError:
        return False
    return any(w in ("-h", "--help") for w in words)


#: ``%llm COMMAND``: (the arguments, what it does), in the order ``%llm help`` lists them.
LINE_COMMANDS = {
    "use": ("PROVIDER[:MODEL]", "set the session default"),
    "providers": ("", "list providers (never keys)"),
    "models": ("[PROVIDER]", "list a provider's models"),
    "history": ("[NAME]", "show a conversation"),
    "reset": ("[NAME]", "forget a conversation"),
    "key": ("PROVIDER", "enter a key for this session (asked with getpass)"),
    "record": ("PATH | stop", "record provider HTTP exchanges to a file (no keys)"),
    "replay": ("PATH [--strict]", "answer requests from a recording (no key, no network)"),
    "budget": ("[USD | off]", "cap the cost of this session's %%llm cells"),
    "pace": ("[TOKENS_PER_S]", "how fast the mock streams where someone watches (0 = at once)"),
    "mcp": ("[restart NAME | stop [NAME] | load PATH]", "MCP servers and their tools"),
    "help": ("", "this help: the commands, then the %%llm cell options"),
}


def command_usage(command: str) -> str:
    """``usage: %llm reset [NAME]`` of one line command."""
    args = LINE_COMMANDS[command][0]
    return f"usage: %llm {command}{' ' + args if args else ''}"


def line_help() -> str:
    """``%llm help``: every line command, then every ``%%llm`` cell option (one line each)."""
    forms = [f"%llm {c}{' ' + a if a else ''}" for c, (a, _) in LINE_COMMANDS.items()]
    width = max(len(f) for f in forms) + 2
    lines = [
        f"  {form:{width}}{text}"
        for form, (_, text) in zip(forms, LINE_COMMANDS.values(), strict=True)
    ]
    return "%llm commands:\n" + "\n".join(lines) + "\n\n" + cell_help()


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
        close = difflib.get_close_matches(command, list(LINE_COMMANDS), n=1)
        hint = f": did you mean {close[0]}?" if close else ""
        raise UsageError(f"unknown command {command!r}{hint}")
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
        raise UsageError(command_usage(command))
    return command, rest
