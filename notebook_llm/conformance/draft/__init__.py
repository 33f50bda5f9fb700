"""Draft an adapter from recorded bodies: an API no one ships, working in one command.

:func:`draft_adapter` reads one recorded response body, or several of the same API (SSE with or
without ``event:`` lines, NDJSON, or non-stream JSON bodies; the framing is detected), infers
where the answer is from the bodies' structure, and writes a short commented Lua adapter on the
shipped ``draft_support`` library; then it replays every body through the draft with the
conformance kit, so the draft is known to map what it was drafted from. The steps, one module
each:

* :mod:`.framing` - framing detection and the payloads, exactly as the runtime splits them;
* :mod:`.paths` - the values of a body indexed by path, bounded by the body's size;
* :mod:`.text`, :mod:`.usage`, :mod:`.finish`, :mod:`.tools` - where the text and reasoning,
  the token counts, the finish and the end, and the tool calls are;
* :mod:`.observe` (one body), :mod:`.merge` (several), :mod:`.choices` (the user's picks, the
  questions), :mod:`.basis` (what each mapping rests on, the TODOs, what a body changed), all
  run by :mod:`.infer` into an :class:`~.inference.Inference`;
* :mod:`.request_shape` - ``transform_request`` from a sample request, or a marked default;
* :mod:`.lua_text` - safe (and redacted) Lua literals and comments: the body is untrusted;
* :mod:`.writer` - the Lua script.

Engine-level: no notebook imports. Used by ``python -m notebook_llm draft-adapter`` and
``%adapter draft``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import redact
from ...wire.limits import DEFAULT_LIMITS
from ..fixtures import CONTENT_TYPES, Fixture
from ..report import FixtureResult, summarize
from ..requests import RequestResult
from .framing import Body, parse_body
from .infer import PICK_FIELDS, Inference, Question, infer
from .lua_text import comment_text, lua_str
from .request_shape import default_request, infer_request, request_lua, request_todos
from .writer import write_script

__all__ = [
    "PICK_FIELDS",
    "Draft",
    "Question",
    "cli_draft",
    "draft_adapter",
    "lua_str",
    "parse_body",
    "parse_picks",
]

BodySource = bytes | str | Path


def _adapter_name_ok(name: str) -> bool:
    """A letter or ``_``, then letters, digits, ``_`` and ``-`` (ASCII; no regex needed)."""
    if not name or not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")):
        return False
    return all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in name)


@dataclass
class Draft:
    """A drafted adapter: its source, what was inferred, the TODOs and the kit's verdicts."""

    name: str
    source: str
    inference: Inference
    todos: list[str] = field(default_factory=list)
    #: The kit's replay of the first body through the draft.
    check: FixtureResult | None = None
    #: The replay of every body (the first included), in order.
    checks: list[FixtureResult] = field(default_factory=list)
    requests: list[RequestResult] = field(default_factory=list)
    #: Seconds spent reading the bodies and writing the script (the check not included).
    draft_seconds: float = 0.0
    picks: dict[str, str] = field(default_factory=dict)

    @property
    def questions(self) -> list[Question]:
        """Fields with close candidates (the notebook asks; the CLI says how to pick)."""
        return self.inference.questions

    @property
    def ok(self) -> bool:
        """Every body maps through the draft with no problem and no warning, and the sample
        requests build."""
        checks = self.checks or ([self.check] if self.check is not None else [])
        return (
            bool(checks)
            and all(c.ok and not c.warnings for c in checks)
            and all(r.ok for r in self.requests)
        )

    def summary(self) -> str:
        """What the CLI and the magic print: each mapping with what it rests on, what each
        later body changed, the check, the questions and the TODOs (redacted)."""
        inf = self.inference
        sources = ", ".join(
            f"{lbl} ({b.describe()})" for lbl, b in zip(inf.labels, inf.bodies, strict=False)
        )
        lines = [f"drafted adapter {self.name} from {sources}"]

        def row(what: str, text: str) -> None:
            lines.append(f"  {what:11}{comment_text(text, 160)}")

        for what in ("text", "reasoning", "usage", "finish", "end", "tool calls"):
            m = inf.mappings.get(what)
            row(what, m.show() if m is not None else "none")
        for change in inf.changes:
            row("changed", change)
        for note in inf.notes:
            row("note", note)
        for result in self.checks:
            state = (
                "ok"
                if result.ok and not result.warnings
                else "FAIL"
                if not result.ok
                else "warning"
            )
            row("check", f"{result.fixture}: {state}: {summarize(result.completion)}")
            for problem in result.problems + result.warnings:
                row("", problem)
        if self.requests:
            row(
                "requests",
                f"{sum(r.ok for r in self.requests)}/{len(self.requests)} sample requests build",
            )
        for q in inf.questions:
            row("ask", q.how())
            for option in q.options:
                row("", f"{option.pick}: {option.sample!r}")
        lines.append(f"TODO ({len(self.todos)}):" if self.todos else "TODO: none")
        lines.extend(f"  - {comment_text(t, 200)}" for t in self.todos)
        return redact("\n".join(lines))


def draft_adapter(
    body: BodySource | Sequence[BodySource],
    name: str,
    *,
    request: BodySource | None = None,
    check: bool = True,
    picks: dict[str, str] | None = None,
) -> Draft:
    """Draft adapter ``name`` from one recorded body or several of the same API (bytes, or paths
    to the files) and, when ``check``, replay every body through the draft (and the sample
    requests through its ``transform_request``). ``picks`` (``{"text": PATH, ...}``) chooses
    between candidates the bodies leave open. Every failure is one ``LlmError`` line."""
    if not _adapter_name_ok(name or ""):
        raise LlmError(
            f"not an adapter name: {name!r} (letters, digits, _ and -, not starting with a digit)",
            ErrorCode.INVALID_OPTIONS,
        )
    sources = [body] if isinstance(body, bytes | str | Path) else list(body)
    if not sources:
        raise LlmError("no body to draft from: give a recorded body", ErrorCode.INVALID_OPTIONS)
    start = time.perf_counter()
    raws: list[tuple[bytes, str]] = []
    parsed: list[Body] = []
    for n, src in enumerate(sources):
        raw, label = _read(src, "body")
        if label == "the body" and len(sources) > 1:
            label = f"body {n + 1}"
        raws.append((raw, label))
        parsed.append(parse_body(raw, label))
    framings = {b.framing == "json" for b in parsed}
    if len(framings) > 1:
        raise LlmError(
            "the bodies mix a stream and a non-stream body: draft a stream adapter from stream "
            "bodies, a non-stream one from JSON bodies",
            ErrorCode.INVALID_OPTIONS,
        )
    labels = [label for _, label in raws]
    inf = infer(parsed, labels, picks)
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
    source = write_script(inf, name, labels, req_lua, req_comments)
    draft = Draft(
        name, source, inf, todos, draft_seconds=time.perf_counter() - start, picks=dict(picks or {})
    )
    if check:
        _check(draft, raws)
    return draft


def parse_picks(items: Sequence[str]) -> dict[str, str]:
    """``["text=choices[1].delta.content", ...]`` (the CLI's ``--pick``) as a dict; a malformed
    item is one ``LlmError`` line."""
    out: dict[str, str] = {}
    for item in items:
        field_name, sep, path = item.partition("=")
        if not sep or not field_name.strip() or not path.strip():
            raise LlmError(
                f"--pick {item!r}: write FIELD=PATH, e.g. --pick text=choices[1].delta.content "
                f"(fields: {', '.join(PICK_FIELDS)})",
                ErrorCode.INVALID_OPTIONS,
            )
        out[field_name.strip()] = path.strip()
    return out


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
    # a file name's undecodable bytes (surrogate escapes) shown as replacement characters
    name = path.name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if len(data) > limit:
        raise LlmError(
            f"{name} is over the {limit:,}-byte limit for a body: draft from a shorter recording",
            ErrorCode.INPUT_TOO_LARGE,
        )
    return data, name


def _check(draft: Draft, raws: list[tuple[bytes, str]]) -> None:
    from ...adapters.lua.lua_adapter import LuaAdapter
    from ..kit import replay_fixture
    from ..requests import check_requests

    adapter = LuaAdapter.from_source(draft.source, name=draft.name)
    for (raw, label), body in zip(raws, draft.inference.bodies, strict=True):
        fixture = Fixture(Path(label), raw, body.framing, 200, CONTENT_TYPES[body.framing])
        draft.checks.append(replay_fixture(adapter, fixture))
    draft.check = draft.checks[0]
    draft.requests = check_requests(adapter)


def cli_draft(
    paths: str | Sequence[str],
    name: str,
    output: str,
    request: str | None = None,
    picks: Sequence[str] = (),
) -> int:
    """``python -m notebook_llm draft-adapter BODY [BODY ...] --name NAME --output FILE
    [--request FILE] [--pick FIELD=PATH ...]``: write the draft, print what was inferred (and
    what each later body changed), the check, the close calls and the TODOs; 0 when the draft
    maps every body cleanly, 1 otherwise (the file is written either way)."""
    files = [paths] if isinstance(paths, str) else list(paths)
    try:
        draft = draft_adapter(
            [Path(p) for p in files],
            name,
            request=Path(request) if request else None,
            picks=parse_picks(picks),
        )
    except LlmError as err:
        print(redact(f"error: {err.message}"), file=sys.stderr)
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
