"""Draft an adapter from one recorded body: an API no one ships, working in one command.

:func:`draft_adapter` reads one recorded response body (SSE with or without ``event:`` lines,
NDJSON, or a non-stream JSON body; the framing is detected), infers where the answer is, and
writes a commented Lua adapter in the HomeAgent kernel's idioms; then it replays the body through
the draft with the conformance kit, so the draft is known to map its own body. The steps, one
module each:

* :mod:`.framing` - framing detection and the payloads, exactly as the runtime splits them;
* :mod:`.infer` - where the text, reasoning, usage, finish, end marker and tool calls are;
* :mod:`.request_shape` - ``transform_request`` from a sample request, or a marked default;
* :mod:`.lua_text` - safe Lua literals and comments (the body is untrusted);
* :mod:`.writer` - the Lua script.

Engine-level: no notebook imports. Used by ``python -m notebook_llm draft-adapter`` and
``%adapter draft``.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import ErrorCode, LlmError
from ...wire.limits import DEFAULT_LIMITS
from ..fixtures import CONTENT_TYPES, Fixture
from ..report import FixtureResult, summarize
from ..requests import RequestResult
from .framing import Body, parse_body
from .infer import Inference, infer
from .lua_text import comment_text, lua_str, show_path
from .request_shape import default_request, infer_request, request_lua, request_todos
from .writer import write_script

__all__ = ["Draft", "cli_draft", "draft_adapter", "lua_str", "parse_body"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


@dataclass
class Draft:
    """A drafted adapter: its source, what was inferred, the TODOs and the kit's verdict."""

    name: str
    source: str
    inference: Inference
    todos: list[str] = field(default_factory=list)
    check: FixtureResult | None = None
    requests: list[RequestResult] = field(default_factory=list)
    #: Seconds spent reading the body and writing the script (the check not included).
    draft_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """The draft maps its own body with no problem and no warning, and builds requests."""
        return (
            self.check is not None
            and self.check.ok
            and not self.check.warnings
            and all(r.ok for r in self.requests)
        )

    def summary(self) -> str:
        """What the CLI and the magic print: each inferred choice, the check, the TODOs."""
        inf = self.inference
        lines = [f"drafted adapter {self.name} from {inf.body.describe()}"]

        def row(what: str, text: str) -> None:
            lines.append(f"  {what:11}{comment_text(text, 110)}")

        if inf.text is not None:
            more = (
                f" (picked from {len(inf.text_candidates)} candidates)"
                if len(inf.text_candidates) > 1
                else ""
            )
            cum = ", cumulative -> deltas" if inf.text.cumulative else ""
            row("text", inf.text.show() + cum + more)
        row("reasoning", inf.reasoning.show() if inf.reasoning else "none")
        usage = ", ".join(f"{k} <- {show_path(v[0])}" for k, v in inf.usage.items() if v)
        row("usage", usage or "none")
        finish = ", ".join(f"{v} -> {m or 'passed on'}" for v, m in inf.finish_values.items())
        row(
            "finish",
            (", ".join(show_path(p) for p in inf.finish_paths) + f" ({finish})")
            if inf.finish_paths
            else "none",
        )
        row("end", f"{inf.end.kind}: {inf.end.note}")
        calls = ", ".join(show_path(t.path) for t in inf.tools) + (
            ", fragments " + ", ".join(show_path(f.path) for f in inf.fragments)
            if inf.fragments
            else ""
        )
        row("tool calls", calls.strip(", ") or "none")
        if self.check is not None:
            c = self.check
            state = "ok" if c.ok and not c.warnings else "FAIL" if not c.ok else "warning"
            row("check", f"own body: {state}: {summarize(c.completion)}")
            for problem in c.problems + c.warnings:
                row("", problem)
        if self.requests:
            row(
                "requests",
                f"{sum(r.ok for r in self.requests)}/{len(self.requests)} sample requests build",
            )
        lines.append(f"TODO ({len(self.todos)}):" if self.todos else "TODO: none")
        lines.extend(f"  - {t}" for t in self.todos)
        return "\n".join(lines)


def draft_adapter(
    body: bytes | str | Path,
    name: str,
    *,
    request: bytes | str | Path | None = None,
    check: bool = True,
) -> Draft:
    """Draft adapter ``name`` from a recorded body (bytes, or a path to the file) and, when
    ``check``, replay the body through the draft (and the sample requests through its
    ``transform_request``). Every failure is one ``LlmError`` line."""
    if not _NAME.match(name or ""):
        raise LlmError(
            f"not an adapter name: {name!r} (letters, digits, _ and -, not starting with a digit)",
            ErrorCode.INVALID_OPTIONS,
        )
    start = time.perf_counter()
    raw, label = _read(body, "body")
    parsed: Body = parse_body(raw, label)
    inf = infer(parsed)
    if request is not None:
        req_raw, req_label = _read(request, "request")
        shape = infer_request(req_raw, req_label)
        req_lua, req_comments = request_lua(shape, req_label)
        todos = [*inf.todos, *request_todos(shape)]
    else:
        req_lua, req_comments = default_request()
        todos = [
            *inf.todos,
            "request: no sample request given; transform_request is an OpenAI-shaped default",
        ]
    source = write_script(inf, name, label, req_lua, req_comments)
    draft = Draft(name, source, inf, todos, draft_seconds=time.perf_counter() - start)
    if check:
        _check(draft, raw, label)
    return draft


def _read(what: bytes | str | Path, kind: str) -> tuple[bytes, str]:
    if isinstance(what, bytes):
        return what, f"the {kind}"
    path = Path(what).expanduser()
    limit = DEFAULT_LIMITS.max_body_bytes
    if path.exists() and not path.is_file():  # a directory, a device, a FIFO (would block)
        raise LlmError(f"the {kind} {path} is not a file", ErrorCode.INVALID_OPTIONS)
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)  # bounded: /dev/zero, a FIFO or a huge file must not hang
    except OSError as exc:
        raise LlmError(
            f"cannot read the {kind} file {path}: {exc.strerror}", ErrorCode.INVALID_OPTIONS
        ) from None
    if len(data) > limit:
        raise LlmError(
            f"{path.name} is over the {limit:,}-byte limit for a body: draft from a shorter "
            "recording",
            ErrorCode.INPUT_TOO_LARGE,
        )
    return data, path.name


def _check(draft: Draft, raw: bytes, label: str) -> None:
    from ...adapters.lua.lua_adapter import LuaAdapter
    from ..kit import replay_fixture
    from ..requests import check_requests

    framing = draft.inference.body.framing
    adapter = LuaAdapter.from_source(draft.source, name=draft.name)
    fixture = Fixture(Path(label), raw, framing, 200, CONTENT_TYPES[framing])
    draft.check = replay_fixture(adapter, fixture)
    draft.requests = check_requests(adapter)


def cli_draft(path: str, name: str, output: str, request: str | None = None) -> int:
    """``python -m notebook_llm draft-adapter PATH --name NAME --output FILE [--request FILE]``:
    write the draft, print what was inferred, the check and the TODOs; 0 when the draft maps
    its own body cleanly, 1 otherwise (the file is written either way)."""
    try:
        draft = draft_adapter(Path(path), name, request=Path(request) if request else None)
    except LlmError as err:
        print(f"error: {err.message}", file=sys.stderr)
        return 1
    out = Path(output).expanduser()
    try:
        out.write_text(draft.source, "utf-8")
    except OSError as exc:
        print(f"error: cannot write {out}: {exc.strerror}", file=sys.stderr)
        return 1
    print(draft.summary())
    print(f"wrote {out}" + (f" ({len(draft.todos)} TODO marked in it)" if draft.todos else ""))
    return 0 if draft.ok else 1
