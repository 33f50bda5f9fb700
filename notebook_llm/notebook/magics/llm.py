"""The ``%%llm`` cell magic and the ``%llm`` line magic.

Settings are traitlets (``%config LlmMagics.default_provider = "openai"``, or
``c.LlmMagics.default_model = ...`` in an IPython config file). Errors never raise a traceback
out of the magic: a wrong option prints a short usage message, a failed request shows an error
box (the cell itself succeeds, so ``Run all`` continues; use ``--out`` and check ``.error`` to
act on failures). Anything shown passes through ``redact``.
"""

from __future__ import annotations

import getpass
import sys
from typing import TYPE_CHECKING, Any

from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from traitlets import Bool, CaselessStrEnum, Float, Unicode

from ...core.errors import LlmError
from ...core.redaction import redact
from . import args as margs
from . import warmup
from .interpolate import interpolate, near_misses

if TYPE_CHECKING:
    # The engine (httpx), the chat and the widgets (ipywidgets) are imported on the first
    # %%llm, not by %load_ext, so that loading the extension stays fast.
    from ...api.chat import Chat
    from ...core.completion import Completion
    from ...core.protocol import Message
    from ...engine.engine import Engine

HINT = (
    "Using the offline mock provider. Choose a real one with: %llm use openai:gpt-4o-mini "
    "(or %%llm openai); %llm providers lists them."
)


@magics_class
class LlmMagics(Magics):
    """``%%llm`` (a prompt cell) and ``%llm`` (session commands)."""

    default_provider = Unicode(
        None, allow_none=True, help="provider used when a cell names none"
    ).tag(config=True)
    default_model = Unicode(None, allow_none=True, help="model used when a cell names none").tag(
        config=True
    )
    default_format = CaselessStrEnum(
        list(margs.FORMATS), "markdown", help="how answers are shown"
    ).tag(config=True)
    widgets = CaselessStrEnum(
        ["auto", "always", "never"],
        "auto",
        help="live widget view: auto = where a person watches (not in nbclient/papermill runs)",
    ).tag(config=True)
    max_rate = Float(20.0, help="live view updates per second, at most").tag(config=True)
    hint = Bool(True, help="say once that the mock provider is used when none was chosen").tag(
        config=True
    )

    def __init__(self, shell: Any = None, engine: Engine | None = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self._engine = engine
        self.chats: dict[str, Chat] = {}
        self._hinted = False
        #: ``%llm budget USD``: the cost cap of this session's cells (``None``: no cap).
        self.budget: Any = None

    @property
    def engine(self) -> Engine:
        from ...engine.session import default_engine

        return self._engine or default_engine()

    # ------------------------------------------------------------------ entry point

    @no_var_expand
    @line_cell_magic
    def llm(self, line: str, cell: str | None = None) -> None:
        """%%llm [PROVIDER[:MODEL]] [options] (cell body = prompt); %llm COMMAND (see %llm help)."""
        warmup.wait()  # a cell right after %load_ext shares the warm-up's work, not races it
        try:
            if cell is None:
                self._line(line)
            elif margs.wants_help(line):
                print(margs.cell_help())
            else:
                self._cell(line, cell)
        except UsageError as exc:
            usage = margs.usage() if cell is not None else _line_usage(line, str(exc))
            print(f"UsageError: {redact(str(exc))}\n{usage}".rstrip("\n"), file=sys.stderr)
        except LlmError as exc:
            self._show(_error_box(exc))

    def _show(self, obj: Any) -> None:
        from ..widgets.present import show_output

        show_output(obj)

    # ------------------------------------------------------------------ %%llm

    def _resolve_target(self, provider: str | None, model: str | None) -> tuple[str, str | None]:
        if provider is not None:
            return provider, model
        file_config = self.engine.file_config
        chosen = self.default_provider or file_config.default_provider
        if chosen:
            return chosen, model or self.default_model or (
                file_config.default_model if not self.default_provider else None
            )
        if self.hint and not self._hinted:
            self._hinted = True
            print(HINT)
        return "mock", model or "echo"

    def _tools(self, names: list[str]) -> list[Any]:
        ns = self.shell.user_ns if self.shell is not None else {}
        found = []
        for name in names:
            if name.startswith("mcp:"):  # an MCP server's tools, resolved when the turn runs
                found.append(name)
                continue
            fn = ns.get(name)
            if not callable(fn):
                raise UsageError(
                    f"--tools: {name!r} is not a function in the namespace (MCP tools: mcp:SERVER)"
                )
            found.append(fn)
        return found

    def _schema(self, name: str | None) -> Any:
        if name is None:
            return None
        ns = self.shell.user_ns if self.shell is not None else {}
        if name not in ns:
            raise UsageError(f"--schema: {name!r} is not in the namespace (define the model first)")
        from ...core.response_schema import as_schema

        try:
            return as_schema(ns[name])
        except LlmError as exc:
            raise UsageError(f"--schema {name}: {exc.message}") from None

    def _images(self, names: list[str]) -> list[Any] | None:
        """``--image``: values from the namespace; a name that is not there but reads as a path
        or a URL is used as written."""
        if not names:
            return None
        ns = self.shell.user_ns if self.shell is not None else {}
        found = []
        for name in names:
            if name in ns:
                found.append(ns[name])
            elif "/" in name or "." in name:
                found.append(name)
            else:
                raise UsageError(f"--image: {name!r} is not in the namespace")
        return found

    def _prepare(self, line: str, cell: str) -> tuple[Chat, str, Any, dict[str, Any]]:
        opts = margs.parse_cell_line(line)
        ns = self.shell.user_ns if self.shell is not None else {}
        prompt = interpolate(cell, ns) if opts.interpolate else cell
        if opts.interpolate:
            for field, guess in near_misses(cell, ns):
                print(
                    f"{{{field}}} is not defined and was sent as written: did you mean {{{guess}}}?"
                )
        # The cell's trailing newline is not part of the question.
        prompt = prompt.rstrip("\n")
        system = interpolate(opts.system, ns) if opts.system and opts.interpolate else opts.system
        if not prompt.strip():
            raise UsageError("the cell is empty: the cell body is the prompt")
        provider, model = self._resolve_target(opts.provider, opts.model)
        tools = self._tools(opts.tools)
        chat = self._chat_for(opts.chat, opts.new, provider, model)
        chat.provider, chat.model = provider, model
        if system is not None:
            chat.system = system
        if tools or opts.chat is None:  # a named chat keeps its tools until others are given
            chat.tools = tools
        chat.live = {"always": True, "never": False}.get(self.widgets) if opts.stream else False
        chat.max_rate = self.max_rate
        kwargs = {
            "fmt": opts.format or self.default_format,
            "temperature": opts.temperature,
            "max_tokens": opts.max_tokens,
            "reasoning_effort": opts.reasoning,
            "max_steps": opts.max_steps,
            "tool_timeout": opts.tool_timeout,
            "confirm": self._confirm_for(opts.confirm),
            "schema": self._schema(opts.schema),
            "schema_retries": opts.schema_retries,
            "images": self._images(opts.images),
            "budget": self.budget,
        }
        if not opts.stream:  # --no-stream: one whole body; the default stays the engine's
            kwargs["stream"] = False
        return chat, prompt, opts, kwargs

    def _confirm_for(self, wanted: bool) -> Any:
        """``--confirm``: ``True`` (ask with the Run/Skip buttons, or input()), or, where no one
        can answer (a headless run: nbclient, nbconvert, papermill), a function that skips
        every call, said once in one line, instead of waiting forever."""
        if not wanted:
            return None
        from ..watching import in_kernel, interactive

        if not in_kernel() or interactive():
            return True
        print(
            "--confirm: this run has no front end to answer (a headless run), so each tool call "
            "is skipped; run the cell in Jupyter to approve calls",
            file=sys.stderr,
        )
        return _skip_call

    def _store(self, opts: Any, completion: Completion) -> None:
        ns = self.shell.user_ns if self.shell is not None else {}
        ns["_llm"] = completion
        if opts.out:
            ns[opts.out] = completion

    def _refused(self, opts: Any, chat: Chat, exc: LlmError) -> None:
        """A turn refused before it ran (a bad option, the budget): ``_llm`` (and ``--out``)
        hold a completion with that error, as for a turn that failed, not the last cell's."""
        from ...core.completion import Completion
        from ...core.protocol import FinishReason

        failed = Completion(provider=chat.provider, model=chat.model)
        failed.finish = FinishReason("error", exc)
        self._store(opts, failed)

    def _cell(self, line: str, cell: str) -> None:
        chat, prompt, opts, kwargs = self._prepare(line, cell)
        try:
            completion = chat.send(prompt, **kwargs)
        except LlmError as exc:
            self._refused(opts, chat, exc)
            raise
        self._store(opts, completion)

    async def llm_cell_async(self, line: str, cell: str) -> None:
        """``%%llm`` as an async cell (see :func:`notebook_llm.notebook.magics.async_cell_transformer`).

        The stream runs on the kernel's own loop while the cell awaits, so ipykernel dispatches
        the Stop button's comm messages during the cell; a kernel interrupt cancels the cell's
        task, which stops the stream and keeps the partial answer, marked as stopped.
        """
        warmup.wait()
        if margs.wants_help(line):
            print(margs.cell_help())
            return
        try:
            chat, prompt, opts, kwargs = self._prepare(line, cell)
            try:
                completion = await chat.asend(prompt, interruptible=True, **kwargs)
            except LlmError as exc:
                self._refused(opts, chat, exc)
                raise
            self._store(opts, completion)
        except UsageError as exc:
            print(f"UsageError: {redact(str(exc))}\n{margs.usage()}", file=sys.stderr)
        except LlmError as exc:
            self._show(_error_box(exc))

    def _chat_for(self, name: str | None, new: bool, provider: str, model: str | None) -> Chat:
        from ...api.chat import Chat

        if name is None:  # a one-off turn: no memory
            return Chat(provider, model, engine=self.engine)
        chat = self.chats.get(name)
        if chat is None:
            chat = self.chats[name] = Chat(provider, model, engine=self.engine)
        elif new:
            chat.reset()
        return chat

    # ------------------------------------------------------------------ %llm

    def _line(self, line: str) -> None:
        command, rest = margs.parse_line(line)
        if command == "help":
            print(margs.line_help())
        elif command == "use":
            provider, model = margs.split_target(rest[0])
            if provider is None:
                raise UsageError(margs.command_usage("use"))
            self.engine.provider(provider)  # raises NO_ADAPTER for an unknown name
            note = self._check_model(provider, model) if model else ""
            self.default_provider, self.default_model = provider, model
            print(
                f"%%llm now uses {provider}:{model or self.engine.provider(provider).model}{note}"
            )
        elif command == "providers":
            self._show(_ProviderTable(self.engine))
        elif command == "models":
            self._models(rest[0] if rest else (self.default_provider or "mock"))
        elif command == "history":
            self._history(self._named_chat(rest))
        elif command == "reset":
            name = self._named_chat(rest)
            if name in self.chats:
                self.chats[name].reset()
            print(f"conversation {name!r} reset")
        elif command == "key":
            self._key(rest[0])
        elif command == "budget":
            self._budget(rest[0] if rest else None)
        elif command == "pace":
            self._pace(rest[0] if rest else None)
        elif command == "mcp":
            from .mcp_command import mcp_command

            mcp_command(rest, self._show)
        elif command in ("record", "replay"):
            from ...api.recording import magic_command

            try:
                print(magic_command([command, *rest]))
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            except OSError as exc:
                raise UsageError(
                    f"cannot use {rest[0] if rest else 'that file'}: {exc.strerror}"
                ) from None

    def _pace(self, value: str | None) -> None:
        from ...adapters.mock.pace import current_pace, set_pace

        if value is not None:
            try:
                set_pace(float(value))
            except ValueError:
                raise UsageError(
                    f"%llm pace takes tokens per second, 0 or more (0 = at once), not {value!r}"
                ) from None
        pace = current_pace()
        shown = "at once" if pace == 0 else f"at {pace:g} tokens/s"
        print(f"the mock streams {shown} where someone watches the cell (always at once headless)")

    def _check_model(self, provider: str, model: str) -> str:
        """Refuse a model the provider's adapter says it does not have; otherwise a note on
        how far the name was checked (a preset's short list is not the provider's word)."""
        from ...core.background_loop import run_sync

        try:
            listed = run_sync(self.engine._ensure_route(provider).list_models(provider))
        except Exception:  # no key, no network: the choice stands, unchecked
            listed = []
        ids = [m.id for m in listed]
        if ids and model not in ids:
            raise UsageError(f"{provider} has no model {model!r}; it has: {', '.join(ids)}")
        if ids:
            return ""
        suggested = self.engine.provider(provider).models
        if model in suggested:
            return ""
        if suggested:
            return f" (not checked: {model!r} is not among the models listed for {provider})"
        return f" (not checked: {provider} cannot list its models)"

    def _models(self, provider: str) -> None:
        from ...core.background_loop import run_sync

        models = run_sync(self.engine.list_models(provider))
        if not models:
            print(f"{provider}: no model list available")
        for info in models:
            print(redact(f"{info.id}" + (f"  {info.description}" if info.description else "")))

    def _named_chat(self, rest: list[str]) -> str:
        """The conversation ``%llm history`` / ``%llm reset`` act on: the one named (which must
        exist: a typo is said, for both the same way), else the default one (empty or not)."""
        if not rest:
            return margs.DEFAULT_CHAT
        name = rest[0]
        if name not in self.chats:
            known = ", ".join(sorted(self.chats)) or "none yet"
            raise UsageError(f"no conversation named {name!r} (conversations: {known})")
        return name

    def _history(self, name: str) -> None:
        chat = self.chats.get(name)
        if chat is None or not chat.messages:
            print(f"conversation {name!r} is empty")
            return
        names: dict[str, str] = {}
        for message in chat.messages:
            for line in _history_lines(message, names):
                print(redact(line))

    def _budget(self, value: str | None) -> None:
        from ...api.cost_cap import Budget

        if value is None:
            print(self.budget.note() if self.budget is not None else "no budget set")
            return
        if value.lower() in ("off", "none"):
            self.budget = None
            print("budget off: cells are not capped")
            return
        try:
            cap = float(value.lstrip("$"))
        except ValueError:
            raise UsageError(f"%llm budget takes an amount in USD or off, not {value!r}") from None
        try:
            budget = Budget(cap, self.engine)  # refuses NaN and negative caps
        except LlmError as err:
            raise UsageError(err.message) from None
        spent = self.budget.spent if self.budget is not None else 0.0
        self.budget = budget
        self.budget.spent = spent
        print(f"budget: {self.budget.note()} (this session's %%llm cells)")

    def _key(self, provider: str) -> None:
        config = self.engine.provider(provider)
        try:
            key = getpass.getpass(f"API key for {provider} (kept in memory for this session): ")
        except (StdinNotImplementedError, EOFError):
            # nbconvert/nbclient/papermill: the front end cannot ask for input.
            var = config.api_key_env or f"{provider.upper()}_API_KEY"
            raise UsageError(
                f"%llm key cannot ask for a key here (this front end has no input box): set the "
                f"environment variable {var} before starting Jupyter, or put {var}=... in a .env "
                "file in the notebook's folder"
            ) from None
        if not key.strip():
            print("no key entered; nothing changed")
            return
        self.engine.set_key(config.name, key.strip())
        print(f"key for {provider} set for this session")


def _line_usage(line: str, error: str) -> str:
    """What follows a ``%llm`` line's error: its command's usage when the command is known
    (nothing when the error is that usage), else every command (``%llm help``'s first part)."""
    command = line.split(maxsplit=1)[0] if line.strip() else ""
    if command in margs.LINE_COMMANDS:
        usage = margs.command_usage(command)
        if usage.removeprefix("usage: ") in error:
            return ""
        return usage + "   (%llm help: every command and option)"
    return margs.line_help().split("\n\n", 1)[0]


def _skip_call(call: Any) -> bool:
    """The ``--confirm`` answer of a headless run: skip (the model is told it was declined)."""
    return False


def _history_lines(message: Message, names: dict[str, str]) -> list[str]:
    """``%llm history`` lines of one message: its text, then each tool call (name and
    arguments) and tool result (which call, and what it returned); ``names`` maps call ids to
    tool names across messages."""
    from ...core.protocol import ToolCallBlock, ToolResultBlock

    lines = [f"{message.role}: {message.text}"] if message.text else []
    for block in message.content:
        if isinstance(block, ToolCallBlock):
            names[block.id] = block.name
            lines.append(f"{message.role}: tool call {block.name}({block.arguments or '{}'})")
        elif isinstance(block, ToolResultBlock):
            name = names.get(block.tool_call_id, block.tool_call_id)
            status = "error" if block.is_error else "result"
            lines.append(f"tool {status} {name}: {_short(block.text)}")
    if not lines:
        lines.append(f"{message.role}: {', '.join(b.type for b in message.content)}")
    return lines


def _error_box(exc: LlmError) -> Any:
    from ..widgets.render import ErrorBox

    return ErrorBox(exc)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _ProviderTable:
    """``%llm providers``: name, adapter, default model, key state (never the key)."""

    def __init__(self, engine: Engine) -> None:
        self.rows: list[tuple[str, str, str, str]] = []
        for name in engine.provider_names():
            try:
                config = engine.provider(name)
                key = (
                    ("set" if engine.has_key(name) else "not set")
                    if config.needs_key
                    else "not needed"
                )
                self.rows.append((name, config.adapter, config.model or "", key))
            except LlmError as exc:
                self.rows.append((name, "?", "", f"error: {exc.code}"))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        header = ("provider", "adapter", "default model", "key")
        md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        md += [
            "| " + " | ".join(f"`{c}`" if i < 3 and c else c for i, c in enumerate(r)) + " |"
            for r in self.rows
        ]
        from ..widgets.adapter_view import text_table

        plain = text_table(header, self.rows)
        return {"text/markdown": redact("\n".join(md)), "text/plain": redact(plain)}
