"""Command line: ``python -m notebook_llm demo | ask | check-adapter | draft-adapter | providers``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from .engine import Engine
from .errors import LlmError
from .protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolSchema,
    Usage,
)
from .session import default_engine

WEATHER = ToolSchema(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


async def _print_stream(
    engine: Engine, provider: str, model: str | None, prompt: str, **kw: object
) -> LlmError | None:
    """Print the stream; the error it ended with (failed or aborted), else ``None``."""
    out = sys.stdout
    thinking = False
    failure: LlmError | None = None
    async for ev in engine.stream(provider, model, prompt=prompt, **kw):  # type: ignore[arg-type]
        if isinstance(ev, BlockStart) and ev.block_type == "reasoning":
            out.write("\033[2m[thinking] ")
            thinking = True
        elif isinstance(ev, BlockStart) and ev.block_type == "text" and thinking:
            out.write("\033[0m\n")
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
            out.write(f"\033[0m\n  · {u.input_tokens} in / {u.output_tokens} out tokens")
        elif isinstance(ev, Finish):
            reason = ev.reason
            failure = reason.failure
            extra = f" [{failure.code}] {failure.message}" if failure else ""
            out.write(f"  · finish: {reason.kind}{extra}\n")
        out.flush()
    return failure


def _demo(args: argparse.Namespace) -> int:
    engine = default_engine()
    print("notebook_llm demo: the offline `mock` provider through the openai Lua adapter and a")
    print("loopback server (no key, no network). In Jupyter: %load_ext notebook_llm, then %%llm.\n")
    runs: list[tuple[str, str, dict[str, object]]] = [
        ("echo", "Hello from notebook_llm! Every piece of this streamed back.", {}),
        ("reasoning", "Why is the sky blue?", {}),
        ("tools", "What is the weather in Paris?", {"tools": [WEATHER]}),
        ("lorem", "Write a lot.", {"max_tokens": 30}),
    ]
    for model, prompt, kw in runs:
        print(f"\033[1m%%llm mock:{model}\033[0m  {prompt}")
        asyncio.run(_print_stream(engine, "mock", model, prompt, **kw))
        print()
    return 0


def _ask(args: argparse.Namespace) -> int:
    engine = default_engine()
    prompt = " ".join(args.prompt) or sys.stdin.read()
    failure = asyncio.run(
        _print_stream(
            engine,
            args.provider,
            args.model,
            prompt,
            system=args.system,
            max_tokens=args.max_tokens,
        )
    )
    if failure is not None:  # the answer ended in an error: say so on stderr, exit non-zero
        print(f"error: {failure}", file=sys.stderr)
        return 130 if failure.code == "ABORTED" else 1
    return 0


def _providers(args: argparse.Namespace) -> int:
    engine = default_engine()
    for name in engine.provider_names():
        cfg = engine.provider(name)
        key = (
            "no key needed"
            if not cfg.needs_key
            else ("key set" if engine.has_key(name) else f"needs {cfg.api_key_env}")
        )
        print(f"{name:12} adapter={cfg.adapter:10} model={cfg.model or '-':28} {key}")
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m notebook_llm", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("demo", help="stream a few answers from the offline mock provider")
    ask = sub.add_parser("ask", help="ask one question and stream the answer")
    ask.add_argument("prompt", nargs="*")
    ask.add_argument("-p", "--provider", default="mock")
    ask.add_argument("-m", "--model", default=None)
    ask.add_argument("-s", "--system", default=None)
    ask.add_argument("--max-tokens", type=int, default=None)
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
        help="also fail on warnings (an early done, content mapped to nothing)",
    )
    _add_draft_adapter(sub)
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
