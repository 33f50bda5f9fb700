"""Command line: ``notebook-llm`` (or ``python -m notebook_llm``) with a command: ``demo``,
``ask``, ``providers``, ``check-adapter``, ``draft-adapter`` or ``export-adapter``;
``COMMAND --help`` for its options."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Sequence

from .core.dash_options import option_hint
from .core.errors import ErrorCode, LlmError
from .core.protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolSchema,
    Usage,
)
from .engine.engine import Engine
from .engine.session import default_engine

WEATHER = ToolSchema(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def _colour() -> bool:
    """Colour only for a person at a terminal: not when piped or redirected, and never with
    ``NO_COLOR`` set to anything (https://no-color.org)."""
    return not os.environ.get("NO_COLOR") and sys.stdout.isatty()


def _sgr(code: str) -> str:
    """An ANSI style (``"1"`` bold, ``"2"`` dim, ``"0"`` reset), or nothing without colour."""
    return f"\033[{code}m" if _colour() else ""


def _plain(text: str) -> str:
    """Docstring text for ``--help``: reST ``literals`` without their backticks."""
    return re.sub(r"``(.+?)``", r"\1", text)


def _dash_hint(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """ "did you mean --max-tokens?" for a long option typed with one dash or misspelt (see
    :mod:`notebook_llm.core.dash_options`), over every option of every subcommand."""
    parsers = [parser]
    for action in parser._actions:  # argparse keeps its subparsers here (no public accessor)
        if isinstance(action, argparse._SubParsersAction):
            parsers.extend(action.choices.values())
    long_options: list[str] = []
    valued: list[str] = []
    for p in parsers:
        for option, action in p._option_string_actions.items():
            if option.startswith("--"):
                long_options.append(option)
            if action.nargs != 0:
                valued.append(option)
    return option_hint(argv, long_options, valued)


async def _print_stream(
    engine: Engine, provider: str, model: str | None, prompt: str, **kw: object
) -> LlmError | None:
    """Print the stream; the error it ended with (failed or aborted), else ``None``."""
    out = sys.stdout
    thinking = False
    failure: LlmError | None = None
    async for ev in engine.stream(provider, model, prompt=prompt, **kw):  # type: ignore[arg-type]
        if isinstance(ev, BlockStart) and ev.block_type == "reasoning":
            out.write(_sgr("2") + "[thinking] ")
            thinking = True
        elif isinstance(ev, BlockStart) and ev.block_type == "text" and thinking:
            out.write(_sgr("0") + "\n")
            thinking = False
        elif isinstance(ev, BlockStart) and ev.block_type == "tool-call":
            out.write("\n[tool call] ")
        elif isinstance(ev, (ReasoningDelta, TextDelta)):
            out.write(ev.text)
        elif isinstance(ev, ToolCallDelta):
            out.write(f"{ev.name}(" if ev.name else "")
            out.write(ev.arguments_delta)
        elif isinstance(ev, BlockEnd) and ev.block.type == "tool-call":
            out.write(")")
        elif isinstance(ev, Usage):
            u = ev.usage
            out.write(f"{_sgr('0')}\n  · {u.input_tokens} in / {u.output_tokens} out tokens")
        elif isinstance(ev, Finish):
            reason = ev.reason
            failure = reason.failure
            extra = f" [{failure.code}] {failure.message}" if failure else ""
            out.write(f"  · finish: {reason.kind}{extra}\n")
        out.flush()
    return failure


def _prog() -> str:
    """The name the command was run by, for its usage lines: ``notebook-llm`` (the console
    script) or ``python -m notebook_llm``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "notebook-llm" if name.startswith("notebook-llm") else "python -m notebook_llm"


def _demo(args: argparse.Namespace) -> int:
    engine = default_engine()
    print("notebook_llm demo: the offline mock provider through the openai Lua adapter and a")
    print("loopback server (no key, no network). In Jupyter: %load_ext notebook_llm, then %%llm.\n")
    runs: list[tuple[str, str, dict[str, object]]] = [
        ("echo", "Hello from notebook_llm! Every piece of this streamed back.", {}),
        ("reasoning", "Why is the sky blue?", {}),
        ("tools", "What is the weather in Paris?", {"tools": [WEATHER]}),
        ("lorem", "Write a lot.", {"max_tokens": 30}),
    ]
    for model, prompt, kw in runs:
        print(f"{_sgr('1')}%%llm mock:{model}{_sgr('0')}  {prompt}")
        asyncio.run(_print_stream(engine, "mock", model, prompt, **kw))
        print()
    return 0


def _ask_target(engine: Engine, args: argparse.Namespace) -> tuple[str, str | None, list[str]]:
    """The provider, model and prompt words of ``ask``.

    ``-p`` takes ``PROVIDER`` or ``PROVIDER:MODEL`` (as ``%%llm`` does). Without ``-p``, a first
    word that names a provider (``openai``, ``mock:reasoning``) chooses it, as on a ``%%llm``
    line; a quoted prompt is one word, so ``ask "openai hi"`` sends it as written."""
    words = list(args.prompt)
    target = args.provider
    if target is None and words:
        first, _, _ = words[0].partition(":")
        if first in engine.provider_names():
            target = words.pop(0)
    provider, _, model = (target or "mock").partition(":")
    if model and args.model is not None:
        raise LlmError(
            f"the model is given twice ({target} and -m {args.model}): give one",
            ErrorCode.INVALID_OPTIONS,
        )
    return provider, model or args.model, words


def _ask(args: argparse.Namespace) -> int:
    engine = default_engine()
    provider, model, words = _ask_target(engine, args)
    prompt = " ".join(words) or sys.stdin.read()
    failure = asyncio.run(
        _print_stream(
            engine,
            provider,
            model,
            prompt,
            system=args.system,
            max_tokens=args.max_tokens,
        )
    )
    if failure is not None:  # the answer ended in an error: say so on stderr, exit non-zero
        print(f"error: {failure}", file=sys.stderr)
        return 130 if failure.code == "ABORTED" else 1
    return 0


#: What the offline providers' adapters are (the README's provider table says the same).
_ADAPTER_NOTES = {
    "mock": "the openai Lua adapter against a loopback mock server",
    "mock-direct": "Python, no HTTP: the mock models' events directly",
}


def _providers(args: argparse.Namespace) -> int:
    engine = default_engine()
    for name in engine.provider_names():
        cfg = engine.provider(name)
        key = (
            "no key needed"
            if not cfg.needs_key
            else ("key set" if engine.has_key(name) else f"needs {cfg.api_key_env}")
        )
        note = _ADAPTER_NOTES.get(name)
        line = f"{name:12} adapter={cfg.adapter:10} model={cfg.model or '-':28} {key}"
        print(line + (f"  ({note})" if note else ""))
    return 0


def _add_draft_adapter(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``draft-adapter PATH --name NAME --output FILE [--request FILE]``."""
    draft = sub.add_parser(
        "draft-adapter", help="draft a Lua adapter from one recorded response body"
    )
    draft.add_argument("path", help="a recorded body: SSE, NDJSON or a non-stream JSON body")
    draft.add_argument("--name", required=True, help="the adapter's name")
    draft.add_argument("--output", required=True, help="the .lua file to write")
    draft.add_argument("--request", default=None, help="a sample request body of that API")
    draft.set_defaults(run=_draft_adapter)


def _draft_adapter(args: argparse.Namespace) -> int:
    from .conformance.draft import cli_draft

    return cli_draft(args.path, args.name, args.output, args.request)


def _add_export_adapter(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``export-adapter NAME_OR_PATH [--output FILE]``."""
    export = sub.add_parser(
        "export-adapter",
        help="write an adapter as one file, the built-in libraries it requires inlined "
        "(for a runtime without notebook_llm's require)",
    )
    export.add_argument(
        "adapter", help="a built-in adapter's name (openai, groq...) or a .lua path"
    )
    export.add_argument("--output", "-o", default=None, help="the .lua file to write (else stdout)")
    export.set_defaults(run=_export_adapter)


def _export_adapter(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .adapters.lua.standalone import standalone_source
    from .engine.routing.lua_files import builtin_adapters_dir

    given = Path(args.adapter)
    path = given if given.suffix == ".lua" else builtin_adapters_dir() / f"{args.adapter}.lua"
    try:
        source = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read the adapter {args.adapter!r} ({path}): {exc}", file=sys.stderr)
        return 1
    text = standalone_source(source)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, "utf-8")
    except OSError as exc:
        print(f"error: cannot write {args.output}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.output} ({len(text.splitlines())} lines)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=_prog(), description=_plain(__doc__ or ""))
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("demo", help="stream a few answers from the offline mock provider")
    ask = sub.add_parser(
        "ask",
        help="ask one question and stream the answer",
        description="Ask one question and stream the answer: ask [PROVIDER[:MODEL]] PROMPT... "
        "(a first word that names a provider chooses it, as on a %%llm line; quote the whole "
        "prompt to send it as written; no prompt: read it from stdin).",
    )
    ask.add_argument("prompt", nargs="*", help="[PROVIDER[:MODEL]] and the prompt's words")
    ask.add_argument(
        "-p", "--provider", default=None, help="PROVIDER or PROVIDER:MODEL (default: mock)"
    )
    ask.add_argument("-m", "--model", default=None, help="the model (default: the provider's)")
    ask.add_argument("-s", "--system", default=None, help="a system prompt")
    ask.add_argument("--max-tokens", type=int, default=None, help="limit on output tokens")
    sub.add_parser("providers", help="list providers and whether their key is set")
    check = sub.add_parser("check-adapter", help="run the conformance kit on a Lua adapter")
    check.add_argument("path")
    check.add_argument(
        "--fixtures", action="append", default=[], help="a file or folder of recorded bodies"
    )
    check.add_argument("--expected", default=None, help="JSON file of expected results per fixture")
    check.add_argument(
        "--strict",
        action="store_true",
        help="also fail on warnings (an early done; reasoning or usage mapped to nothing)",
    )
    _add_draft_adapter(sub)
    _add_export_adapter(sub)
    words = list(sys.argv[1:] if argv is None else argv)
    hint = _dash_hint(parser, words)
    if hint is not None:
        parser.error(hint)  # usage and the one line, exit status 2 (as argparse's own errors)
    args = parser.parse_args(words)
    try:
        if getattr(args, "run", None) is not None:
            return int(args.run(args))
        if args.command == "ask":
            return _ask(args)
        if args.command == "providers":
            return _providers(args)
        if args.command == "check-adapter":
            from .conformance import cli_check

            return cli_check(args.path, args.fixtures, args.expected, strict=args.strict)
        return _demo(args)
    except LlmError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `... | head` closed the pipe: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
