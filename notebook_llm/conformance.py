"""The adapter conformance kit: replay recorded bodies and sample requests through a Lua adapter.

Engine-level (no notebook imports); used by ``%adapter test``, the playground widget,
``python -m notebook_llm check-adapter PATH --fixtures DIR [--expected FILE]`` and pytest
(:func:`assert_conforms`).

Response side: a recorded body file (``.sse``, ``.ndjson``, ``.json``; other names are sniffed)
is served to the adapter by an in-process ``httpx.MockTransport``, never the network, with the
content type of its framing and an HTTP status taken from a ``<file>.meta.json`` sidecar
(``{"status": 429, "content_type": ..., "headers": {...}}``) or from the name (``error_401_*``),
else 200. Streams (``.sse``/``.ndjson``) go through the adapter's real ``stream()`` path;
a 200 ``.json`` body goes through ``transform_response`` (the non-stream path). The result is
the event list, :func:`~notebook_llm.validate_stream`'s verdict (rule and position), the
assembled :class:`~notebook_llm.Completion`, the script's ``log()`` lines, and a diff against an
expected result ``{text, reasoning, tool_calls: [{name, args}], usage, finish, error_code}``
when one is given (each key optional; only given keys are compared).

Warnings (:func:`payload_warnings`) catch a script that passes every rule yet loses the answer,
the mistake a truthy JSON-null sentinel caused in kernel scripts (``done = (fr ~= nil)`` read
every chunk as done): each payload of a 200 body is also run through the hook on its own, and
the kit warns when the script reports ``done`` (or a finish) while a later payload still carries
content, when payloads carried content and the script mapped none of it, or when output tokens
were counted but no text, reasoning or tool call came out. A warning names the hook and the
payload number (1-based, ``[DONE]`` not counted); ``check-adapter --strict`` fails on one.

Request side: :func:`request_cases` (text, system, multi-turn, tools, tool results, images) go
through ``transform_request`` (and ``build_headers``) and are captured as the HTTP request the
adapter would send: URL, headers (redacted) and JSON body.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from ._sync import run_sync
from .errors import ErrorCode, LlmError
from .lua.adapter import LuaAdapter
from .lua.contract import map_response
from .lua.runtime import LuaSandbox
from .protocol import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    GenerateOptions,
    ImageBlock,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSchema,
    Usage,
)
from .secrets import redact, redact_headers, redact_obj, register_secret
from .validate import Completion, assemble, validate_stream
from .wire.ndjson import NDJSONDecoder
from .wire.sse import SSEDecoder

__all__ = [
    "CheckReport",
    "FieldDiff",
    "Fixture",
    "FixtureResult",
    "RequestCase",
    "RequestResult",
    "assert_conforms",
    "check_adapter",
    "check_requests",
    "cli_check",
    "collect_events",
    "diff_completion",
    "event_rows",
    "find_fixtures",
    "load_expected",
    "load_fixture",
    "payload_warnings",
    "replay_fixture",
    "request_cases",
    "summarize",
]

Framing = Literal["sse", "ndjson", "json"]
CONTENT_TYPES: dict[str, str] = {
    "sse": "text/event-stream; charset=utf-8",
    "ndjson": "application/x-ndjson",
    "json": "application/json",
}
EXPECTED_KEYS = frozenset({"text", "reasoning", "tool_calls", "usage", "finish", "error_code"})
#: Error codes that mean the adapter itself is at fault (not the provider's recorded answer).
ADAPTER_FAULTS = frozenset(
    {
        ErrorCode.ADAPTER_ERROR,
        ErrorCode.ADAPTER_TIMEOUT,
        ErrorCode.ADAPTER_MEMORY,
        ErrorCode.INVALID_ADAPTER,
        ErrorCode.INVARIANT,
    }
)
_STATUS_IN_NAME = re.compile(r"(?:^|[_.-])(?:error|http|status)[_-]?(\d{3})(?=$|[_.-])")
_SIDECARS = (".meta.json", ".expected.json")


# -------------------------------------------------------------------------------- fixtures


@dataclass
class Fixture:
    """A recorded response body and how to serve it."""

    path: Path
    body: bytes
    framing: Framing
    status: int = 200
    content_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name


def _sniff(path: Path, body: bytes) -> Framing:
    suffix = path.suffix.lower()
    if suffix in (".sse", ".ndjson", ".json"):
        return "ndjson" if suffix == ".ndjson" else ("sse" if suffix == ".sse" else "json")
    head = body.lstrip()[:200]
    if head.startswith((b"data:", b"event:", b":", b"id:")):
        return "sse"
    lines = [ln for ln in body.splitlines() if ln.strip()]
    if len(lines) > 1 and all(ln.lstrip().startswith(b"{") for ln in lines):
        try:
            [json.loads(ln) for ln in lines]
            return "ndjson"
        except ValueError:
            pass
    return "json"


def load_fixture(path: str | Path) -> Fixture:
    """Read a body file and work out its framing, status and content type."""
    p = Path(path)
    try:
        body = p.read_bytes()
    except OSError as exc:
        raise LlmError(
            f"cannot read fixture {p}: {exc.strerror}", ErrorCode.INVALID_OPTIONS
        ) from None
    framing = _sniff(p, body)
    status, ctype, headers = 200, CONTENT_TYPES[framing], {}
    m = _STATUS_IN_NAME.search(p.stem.lower())
    if m:
        status = int(m.group(1))
    meta_path = p.with_name(p.name + ".meta.json")
    if not meta_path.exists():
        meta_path = p.with_suffix(".meta.json")
    if meta_path.exists() and meta_path != p:
        meta = json.loads(meta_path.read_text("utf-8"))
        status = int(meta.get("status", status))
        ctype = str(meta.get("content_type", ctype))
        headers = {str(k): str(v) for k, v in (meta.get("headers") or {}).items()}
    return Fixture(p, body, framing, status, ctype, headers)


def is_recording(path: Path) -> bool:
    """Whether ``path`` is a ``%llm record`` file (JSON lines whose first line is its header)."""
    if path.suffix.lower() != ".jsonl":
        return False
    try:
        with path.open(encoding="utf-8") as fh:
            first = json.loads(fh.readline() or "null")
    except (OSError, ValueError):
        return False
    return isinstance(first, dict) and "notebook_llm_recording" in first


def fixtures_from_recording(path: str | Path) -> list[Fixture]:
    """Each response recorded by ``%llm record`` (e.g. a session against the mock server) as a
    fixture named ``FILE#N``, served with its recorded status and content type."""
    from .record import load_exchanges

    p = Path(path)
    out = []
    for n, exchange in enumerate(load_exchanges(p), 1):
        headers = {k.lower(): v for k, v in exchange.headers.items()}
        ctype = headers.get("content-type", "")
        framing: Framing = (
            "ndjson" if "ndjson" in ctype else "sse" if "event-stream" in ctype else "json"
        )
        out.append(
            Fixture(
                p.with_name(f"{p.name}#{n}"),
                exchange.body,
                framing,
                exchange.status,
                ctype or CONTENT_TYPES[framing],
            )
        )
    return out


def load_fixtures(path: str | Path) -> list[Fixture]:
    """The fixtures in one file: a body file gives one; a recording gives one per response."""
    p = Path(path)
    return fixtures_from_recording(p) if is_recording(p) else [load_fixture(p)]


def find_fixtures(paths: Iterable[str | Path]) -> list[Path]:
    """Files named by ``paths``; a folder gives its body files (not recursive, sorted)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            out.extend(
                f
                for f in sorted(p.iterdir())
                if f.is_file()
                and not f.name.endswith(_SIDECARS)
                and f.suffix.lower() in (".sse", ".ndjson", ".json", ".txt", ".jsonl")
            )
        elif p.exists():
            out.append(p)
        else:
            raise LlmError(f"no such fixture file or folder: {p}", ErrorCode.INVALID_OPTIONS)
    return out


def load_expected(path: str | Path) -> dict[str, dict[str, Any]]:
    """Expected results: ``{fixture file name or stem: {...}}``, or one ``{...}`` for all (``*``)."""
    data = json.loads(Path(path).read_text("utf-8"))
    if not isinstance(data, dict):
        raise LlmError(f"{path}: expected a JSON object", ErrorCode.INVALID_OPTIONS)
    if data and set(data) <= EXPECTED_KEYS:
        return {"*": data}
    return {str(k): dict(v) for k, v in data.items()}


def _expected_for(fixture: Fixture, table: Mapping[str, Mapping[str, Any]] | None) -> Any:
    if table:
        for key in (fixture.name, fixture.path.stem, str(fixture.path), "*"):
            if key in table:
                return table[key]
    sidecar = fixture.path.with_name(fixture.path.stem + ".expected.json")
    if sidecar.exists():
        return json.loads(sidecar.read_text("utf-8"))
    return None


# -------------------------------------------------------------------------------- results


@dataclass
class FieldDiff:
    """One field of the assembled result that differs from the expectation."""

    field: str
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return f"{self.field}: expected {self.expected!r}, got {self.actual!r}"


@dataclass
class FixtureResult:
    """What replaying one fixture through the adapter gave."""

    fixture: str
    framing: str
    status: int
    events: list[Event] = field(default_factory=list)
    completion: Completion = field(default_factory=Completion)
    #: ``None`` if the stream obeys the five rules, else the validator's message.
    verdict: str | None = None
    rule: int | None = None
    position: int | None = None
    #: An error the adapter raised (kept also as the stream's error finish).
    error: LlmError | None = None
    diffs: list[FieldDiff] = field(default_factory=list)
    expected: Mapping[str, Any] | None = None
    logs: list[tuple[str, str]] = field(default_factory=list)
    skipped: str | None = None
    #: Suspicious results that break no rule (see :func:`payload_warnings`); not failures.
    warnings: list[str] = field(default_factory=list)

    @property
    def adapter_fault(self) -> bool:
        """The adapter failed (a Lua error, a limit, bad output), not the recorded provider."""
        err = self.error or self.completion.error
        return err is not None and (err.code in ADAPTER_FAULTS or err.hook is not None)

    @property
    def problems(self) -> list[str]:
        """Why this result is not ok (empty when it is)."""
        if self.skipped:
            return []
        out: list[str] = []
        if self.verdict:
            out.append(self.verdict)
        err = self.error or self.completion.error
        if self.adapter_fault and err is not None:
            out.append(f"adapter error: {err}")
        elif err is not None and self.status < 400 and self.expected is None:
            out.append(f"the stream of a {self.status} response ended with an error: {err}")
        out.extend(str(d) for d in self.diffs)
        return out

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class CheckReport:
    """The whole kit's result for one adapter; ``ok`` when every fixture and request passed."""

    adapter: str
    version: str = ""
    origin: str = ""
    fixtures: list[FixtureResult] = field(default_factory=list)
    requests: list[RequestResult] = field(default_factory=list)
    load_error: LlmError | None = None

    @property
    def ok(self) -> bool:
        return (
            self.load_error is None
            and all(f.ok for f in self.fixtures)
            and all(r.ok for r in self.requests)
        )

    @property
    def warnings(self) -> list[str]:
        """Every fixture's warnings, each prefixed with the fixture's name."""
        return [f"{f.fixture}: {w}" for f in self.fixtures for w in f.warnings]

    def render_text(self, *, events: bool = True) -> str:
        """A plain-text report (what the CLI prints; the notebook's ``text/plain``)."""
        return _render_text(self, events=events)

    def __str__(self) -> str:
        return self.render_text()


# -------------------------------------------------------------------------------- replay


def _as_adapter(adapter_or_path: LuaAdapter | str | Path) -> LuaAdapter:
    if isinstance(adapter_or_path, LuaAdapter):
        return adapter_or_path
    text = str(adapter_or_path)
    if isinstance(adapter_or_path, Path) or ("\n" not in text and text.endswith(".lua")):
        return LuaAdapter.from_file(text)
    return LuaAdapter.from_source(text)


def _replica(
    adapter: LuaAdapter,
    transport: httpx.AsyncBaseTransport,
    logs: list[tuple[str, str]],
) -> LuaAdapter:
    """The same script with our transport and log sink (the user's adapter is not touched)."""

    def sink(_name: str, level: str, msg: str) -> None:
        logs.append((level, msg))

    return LuaAdapter(
        adapter.source,
        name=adapter.name,
        path=adapter.path,
        origin=adapter.origin,
        limits=adapter.limits,
        transport=transport,
        log=sink,
    )


def _transport(fixture: Fixture, chunk_size: int | None) -> httpx.MockTransport:
    class _Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            step = chunk_size or max(len(fixture.body), 1)
            for start in range(0, len(fixture.body), step):
                yield fixture.body[start : start + step]

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": fixture.content_type, **fixture.headers}
        return httpx.Response(fixture.status, headers=headers, stream=_Body())

    return httpx.MockTransport(handler)


async def collect_events(
    adapter: LuaAdapter, options: GenerateOptions
) -> tuple[list[Event], LlmError | None]:
    """Every event of ``adapter.stream(options)``, and the ``LlmError`` that ended it, if any."""
    events: list[Event] = []
    try:
        async for event in adapter.stream(options):
            events.append(event)
    except LlmError as err:
        return events, err
    return events, None


def _whole_body(adapter: LuaAdapter, fixture: Fixture, logs: list[tuple[str, str]]) -> list[Event]:
    """A 200 non-stream body through ``transform_response`` (the adapter's non-stream path)."""
    sandbox = LuaSandbox(
        adapter.source,
        name=adapter.name,
        chunkname=str(adapter.path) if adapter.path else adapter.name,
        limits=adapter.limits,
        log=lambda level, msg: logs.append((level, msg)),
    )
    out = sandbox.call("transform_response", fixture.body.decode("utf-8", errors="replace"))
    try:
        resp = json.loads(out) if isinstance(out, str) else out
    except json.JSONDecodeError as exc:
        raise LlmError(
            f"adapter {adapter.name!r}: transform_response returned invalid JSON "
            f"({exc.msg} at {exc.pos}): {str(out)[:200]!r}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter.name,
            hook="transform_response",
        ) from None
    if not isinstance(resp, dict):
        raise LlmError(
            f"adapter {adapter.name!r}: transform_response must return a JSON object",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter.name,
            hook="transform_response",
        )
    return map_response(resp, provider="fixture", adapter=adapter.name)


def settle(result: FixtureResult, events: list[Event], error: LlmError | None) -> FixtureResult:
    """Fill ``result`` from a stream's events (an error ends it as an error finish): the
    assembled completion and ``validate_stream``'s verdict with the rule and position."""
    if error is not None:
        result.error = error
        if not events or not isinstance(events[-1], Finish):
            events.append(Finish.error(error))
    result.events = events
    result.completion = assemble(events)
    try:
        validate_stream(events)
    except LlmError as err:
        result.verdict = err.message
        result.rule = err.details.get("rule")
        result.position = err.details.get("position")
    return result


def replay_fixture(
    adapter_or_path: LuaAdapter | str | Path,
    fixture: Fixture | str | Path,
    *,
    expected: Mapping[str, Any] | None = None,
    chunk_size: int | None = None,
) -> FixtureResult:
    """Replay one recorded body through the adapter, without network (see the module doc).

    ``chunk_size`` splits the body into pieces of that many bytes (to exercise incremental
    decoding). Adapter errors are not raised: they are in ``result.error`` and the events end
    with an error ``finish`` as the engine would show it.
    """
    adapter = _as_adapter(adapter_or_path)
    fx = fixture if isinstance(fixture, Fixture) else load_fixture(fixture)
    result = FixtureResult(fx.name, fx.framing, fx.status, expected=expected)
    hooks = adapter.meta.get("hooks", [])
    non_stream = fx.framing == "json" and fx.status < 400
    if non_stream and "transform_response" not in hooks:
        result.skipped = "a non-stream body, and the adapter has no transform_response"
        return result
    if not non_stream and fx.status < 400 and "transform_stream_chunk" not in hooks:
        result.skipped = "a stream body, and the adapter has no transform_stream_chunk"
        return result
    events: list[Event] = []
    error: LlmError | None = None
    if non_stream:
        try:
            events = _whole_body(adapter, fx, result.logs)
        except LlmError as err:
            error = err
    else:
        replica = _replica(adapter, _transport(fx, chunk_size), result.logs)
        events, error = run_sync(collect_events(replica, request_cases()[0].options))
    settle(result, events, error)
    if expected is not None:
        result.diffs = diff_completion(result.completion, expected)
    if fx.status < 400 and not result.adapter_fault:
        # never raises: the replay above already reports what went wrong with this body
        with contextlib.suppress(LlmError):
            result.warnings = payload_warnings(adapter, fx, result.completion)
    return result


# -------------------------------------------------------------------------------- warnings

#: Keys whose non-empty string value is answer content in a provider payload (text, reasoning,
#: tool-call arguments), whatever the API: OpenAI/Mistral/Groq ``content``, ``reasoning``,
#: ``arguments``; Anthropic ``text``, ``thinking``, ``partial_json``; Gemini ``text``; Ollama
#: ``content``, ``thinking``, ``response``.
_CONTENT_KEYS = frozenset(
    {
        "content",
        "text",
        "reasoning",
        "reasoning_content",
        "thinking",
        "partial_json",
        "arguments",
        "response",
    }
)
#: Keys whose non-empty object value is a tool call's arguments (Gemini ``args``, Ollama
#: ``arguments``, Anthropic ``input``), and keys that hold a tool call (its name is content).
_ARGS_KEYS = frozenset({"args", "arguments", "input"})
_CALL_KEYS = frozenset({"function", "functionCall"})


def _carries_content(value: Any, key: str = "", depth: int = 0) -> bool:
    """Whether a decoded payload holds answer content (see ``_CONTENT_KEYS``)."""
    if depth > 32:
        return False
    if isinstance(value, str):
        return bool(value) and key in _CONTENT_KEYS
    if isinstance(value, dict):
        if value and key in _ARGS_KEYS:
            return True
        name = value.get("name")
        named = isinstance(name, str) and bool(name)
        if named and (key in _CALL_KEYS or value.get("type") == "tool_use"):
            return True
        return any(_carries_content(v, str(k), depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_carries_content(v, key, depth + 1) for v in value)
    return False


def _payloads(fixture: Fixture) -> list[str]:
    """A stream body's payloads as the adapter's hook gets them, up to the ``[DONE]`` marker."""
    try:
        if fixture.framing == "ndjson":
            nd = NDJSONDecoder()
            items = nd.feed(fixture.body) + nd.flush()
        else:
            sse = SSEDecoder()
            items = sse.feed_data(fixture.body) + sse.flush_data()
    except LlmError:
        return []
    if "[DONE]" in items:
        items = items[: items.index("[DONE]")]
    return items


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _mapped_content(chunk: Any) -> bool:
    """Whether a unified chunk the script returned holds any answer content."""
    if not isinstance(chunk, dict):
        return False
    for key in ("content", "reasoning_content"):
        if isinstance(chunk.get(key), str) and chunk[key]:
            return True
    return bool(chunk.get("tool_calls")) or bool(chunk.get("tool_call"))


def _reports_done(chunk: Any) -> bool:
    if not isinstance(chunk, dict):
        return False
    finish = chunk.get("finish_reason")
    return chunk.get("done") is True or (isinstance(finish, str) and finish != "")


def payload_warnings(
    adapter: LuaAdapter, fixture: Fixture, completion: Completion | None = None
) -> list[str]:
    """Warnings for a 200 body: the script ended early, dropped everything, or counted output
    tokens without output (see the module doc). Each payload goes through the hook on its own,
    in one fresh Lua state (as one stream would), so payloads after an early ``done`` are seen.
    """
    warnings: list[str] = []
    if fixture.framing == "json":
        hook = "transform_response"
        held = _carries_content(_loads(fixture.body.decode("utf-8", errors="replace")))
        first = 1
        mapped = completion is not None and bool(
            completion.text or completion.reasoning or completion.tool_calls
        )
    else:
        hook = "transform_stream_chunk"
        items = _payloads(fixture)
        sandbox = LuaSandbox(
            adapter.source,
            name=adapter.name,
            chunkname=str(adapter.path) if adapter.path else adapter.name,
            limits=adapter.limits,
            log=lambda _level, _msg: None,
        )
        results, _error = sandbox.call_each(hook, items)  # an error is the replay's to report
        content_at = [i + 1 for i, item in enumerate(items) if _carries_content(_loads(item))]
        held = bool(content_at)
        first = content_at[0] if content_at else 0
        chunks = [_loads(r) if isinstance(r, str) and r else None for r in results]
        mapped = any(_mapped_content(c) for c in chunks)
        done_at = next((i + 1 for i, c in enumerate(chunks) if _reports_done(c)), None)
        later = [i for i in content_at if done_at is not None and i > done_at]
        if later:
            warnings.append(
                f"{hook}, payload {done_at}: the script reported done (or a finish) here, but "
                f"payload {later[0]} still carries content ({len(later)} such payload(s) are "
                "lost); does it read a field that arrives as null as set?"
            )
    if held and not mapped:
        warnings.append(
            f"{hook}, payload {first}: the body carries content from here on, but the script "
            "mapped none of it to text, reasoning or tool calls; does it read a field this API "
            "does not send?"
        )
    usage = completion.usage if completion is not None else None
    if (
        completion is not None
        and usage is not None
        and (usage.output_tokens or 0) > (usage.reasoning_tokens or 0)
        and not (completion.text or completion.reasoning or completion.tool_calls)
        and not (held and not mapped)  # already said
    ):
        warnings.append(
            f"{hook}: {usage.output_tokens} output tokens were counted but no text, reasoning "
            "or tool call came out"
        )
    return warnings


# -------------------------------------------------------------------------------- diff


_USAGE_ALIASES = {
    "input_tokens": "input_tokens",
    "inputTokens": "input_tokens",
    "prompt": "input_tokens",
    "output_tokens": "output_tokens",
    "outputTokens": "output_tokens",
    "completion": "output_tokens",
    "cache_read_tokens": "cache_read_tokens",
    "cacheReadTokens": "cache_read_tokens",
    "cache_write_tokens": "cache_write_tokens",
    "cacheWriteTokens": "cache_write_tokens",
    "reasoning_tokens": "reasoning_tokens",
    "reasoningTokens": "reasoning_tokens",
}


def _tool_calls(completion: Completion) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for call in completion.tool_calls:
        try:
            args: Any = call.args
        except LlmError:
            args = call.arguments
        out.append({"id": call.id, "name": call.name, "args": args})
    return out


def diff_completion(completion: Completion, expected: Mapping[str, Any]) -> list[FieldDiff]:
    """Compare the given keys of ``expected`` with ``completion`` (see the module doc)."""
    diffs: list[FieldDiff] = []
    for key in ("text", "reasoning"):
        if key in expected and expected[key] != getattr(completion, key):
            diffs.append(FieldDiff(key, expected[key], getattr(completion, key)))
    if "tool_calls" in expected:
        actual = _tool_calls(completion)
        want = list(expected["tool_calls"] or [])
        shown = [
            {k: a[k] for k in ("id", "name", "args") if k in w or k != "id"}
            for a, w in zip(actual, want + [{}] * len(actual), strict=False)
        ]
        trimmed = [{k: w[k] for k in ("id", "name", "args") if k in w} for w in want]
        if len(actual) != len(want) or any(
            any(a.get(k) != v for k, v in w.items()) for a, w in zip(actual, trimmed, strict=False)
        ):
            diffs.append(FieldDiff("tool_calls", trimmed, shown))
    if "usage" in expected:
        want_usage = expected["usage"]
        got = completion.usage
        if want_usage is None or got is None:
            if (want_usage is None) != (got is None):
                diffs.append(FieldDiff("usage", want_usage, got.to_json() if got else None))
        else:
            for key, value in want_usage.items():
                attr = _USAGE_ALIASES.get(key)
                if attr is None:
                    diffs.append(FieldDiff(f"usage.{key}", value, "(not a usage field)"))
                elif getattr(got, attr) != value:
                    diffs.append(FieldDiff(f"usage.{key}", value, getattr(got, attr)))
    kind = completion.finish.kind if completion.finish else None
    if "finish" in expected and expected["finish"] != kind:
        diffs.append(FieldDiff("finish", expected["finish"], kind))
    if "error_code" in expected:
        err = completion.error
        code = err.code if err else None
        if expected["error_code"] != code:
            diffs.append(FieldDiff("error_code", expected["error_code"], code))
    return diffs


# -------------------------------------------------------------------------------- the kit


def check_adapter(
    adapter_or_path: LuaAdapter | str | Path,
    fixtures: Sequence[str | Path] = (),
    expected: Mapping[str, Mapping[str, Any]] | str | Path | None = None,
    *,
    requests: bool = True,
    chunk_size: int | None = None,
) -> CheckReport:
    """Run the kit: every fixture (files or folders) and, with ``requests``, every sample request.

    ``expected`` is a table ``{fixture name or stem: expectation}`` or a file of one (see
    :func:`load_expected`). A script that fails to load gives a report with ``load_error``.
    """
    try:
        adapter = _as_adapter(adapter_or_path)
    except LlmError as err:
        name = err.adapter or str(adapter_or_path)[:40]
        return CheckReport(name, load_error=err)
    table = load_expected(expected) if isinstance(expected, str | Path) else expected
    report = CheckReport(adapter.name, adapter.version, adapter.origin)
    for path in find_fixtures(fixtures):
        for fx in load_fixtures(path):
            report.fixtures.append(
                replay_fixture(
                    adapter, fx, expected=_expected_for(fx, table), chunk_size=chunk_size
                )
            )
    if requests:
        report.requests = check_requests(adapter)
    return report


def assert_conforms(
    adapter_or_path: LuaAdapter | str | Path,
    fixture: str | Path,
    expected: Mapping[str, Any] | str | Path | None = None,
    *,
    chunk_size: int | None = None,
) -> FixtureResult:
    """pytest helper: replay ``fixture`` and fail with the readable report unless it conforms.

    ``expected`` is an expectation dict or a JSON file of one. Returns the result for more asserts.
    """
    adapter = _as_adapter(adapter_or_path)
    if isinstance(expected, str | Path):
        table = load_expected(expected)
        fx = load_fixture(fixture)
        want = _expected_for(fx, table)
    else:
        fx = load_fixture(fixture)
        want = expected if expected is not None else _expected_for(fx, None)
    result = replay_fixture(adapter, fx, expected=want, chunk_size=chunk_size)
    if not result.ok:
        report = CheckReport(adapter.name, adapter.version, adapter.origin, fixtures=[result])
        raise AssertionError(report.render_text())
    return result


def cli_check(
    path: str,
    fixtures: list[str],
    expected: str | None,
    *,
    out: Callable[[str], object] | None = None,
    strict: bool = False,
) -> int:
    """``python -m notebook_llm check-adapter``: print the report; 0 if it conforms, else 1.
    With ``strict``, a warning (see :func:`payload_warnings`) fails it too."""
    write = out or (lambda s: sys.stdout.write(s + "\n"))
    try:
        report = check_adapter(Path(path), fixtures, expected)
    except (LlmError, OSError, ValueError) as err:
        write(redact(f"error: {err}"))
        return 1
    write(report.render_text(events=False))
    if strict and report.ok and report.warnings:
        write(f"FAIL under --strict: {len(report.warnings)} warning(s)")
        return 1
    return 0 if report.ok else 1


# -------------------------------------------------------------------------------- requests

#: The key used for sample requests; registered as a secret, so it is shown as ``***``.
SAMPLE_KEY = "sk-conformance-kit-0000"
SAMPLE_BASE_URL = "https://provider.example"
_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
_WEATHER = ToolSchema(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
_NOARGS = ToolSchema(
    "now", "The current time.", {"type": "object", "properties": {}, "required": []}
)


@dataclass
class RequestCase:
    """A representative request: what it exercises and its options."""

    name: str
    description: str
    options: GenerateOptions


def request_cases(model: str = "test-model") -> list[RequestCase]:
    """Text, system, multi-turn, tools, tool results and images (the request side of the kit)."""

    def opts(*messages: Message, **kw: Any) -> GenerateOptions:
        return GenerateOptions(
            provider="conformance",
            model=model,
            messages=list(messages),
            base_url=SAMPLE_BASE_URL,
            api_key=SAMPLE_KEY,
            **kw,
        )

    call = ToolCallBlock("call_1", "get_weather", '{"city": "Paris"}')
    image = Message(
        "user",
        [TextBlock("What is in this image?"), ImageBlock(data=_PIXEL, media_type="image/png")],
    )
    return [
        RequestCase("text", "one user message", opts(Message.user("Hello!"))),
        RequestCase(
            "system",
            "a system prompt, temperature and max_tokens",
            opts(Message.user("Hi"), system="You are terse.", temperature=0.2, max_tokens=256),
        ),
        RequestCase(
            "multi-turn",
            "user, assistant (with reasoning), user",
            opts(
                Message.user("Pick a number."),
                Message("assistant", [ReasoningBlock("Any will do."), TextBlock("7")]),
                Message.user("Double it."),
            ),
        ),
        RequestCase(
            "tools",
            "two tools offered, one with no parameters",
            opts(Message.user("Weather in Paris?"), tools=[_WEATHER, _NOARGS]),
        ),
        RequestCase(
            "tool-results",
            "an assistant tool call and its result",
            opts(
                Message.user("Weather in Paris?"),
                Message("assistant", [call]),
                Message.tool_results([ToolResultBlock.of("call_1", '{"temp_c": 21}')]),
                tools=[_WEATHER],
            ),
        ),
        RequestCase("images", "text and an inline PNG", opts(image)),
    ]


@dataclass
class RequestResult:
    """The HTTP request an adapter made for one :class:`RequestCase` (headers redacted)."""

    case: str
    description: str
    method: str = "POST"
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    #: The body parsed as JSON (or the raw text when it is not JSON), redacted.
    body: Any = None
    error: LlmError | None = None
    logs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def body_json(self) -> str:
        """The body, pretty-printed."""
        if isinstance(self.body, str):
            return self.body
        return json.dumps(self.body, indent=2, ensure_ascii=False)


class _Captured(Exception):
    def __init__(self, request: httpx.Request) -> None:
        super().__init__("captured")
        self.request = request


_HIDDEN_HEADERS = frozenset(
    {"host", "content-length", "accept-encoding", "connection", "user-agent"}
)


async def _capture(adapter: LuaAdapter, options: GenerateOptions) -> httpx.Request | LlmError:
    try:
        async for _ in adapter.stream(options):
            break
    except _Captured as cap:
        return cap.request
    except LlmError as err:
        return err
    return LlmError(
        "the adapter made no HTTP request", ErrorCode.ADAPTER_ERROR, adapter=adapter.name
    )


def check_requests(
    adapter_or_path: LuaAdapter | str | Path, cases: Sequence[RequestCase] | None = None
) -> list[RequestResult]:
    """Run each case through ``transform_request``/``build_headers`` and capture the request."""
    adapter = _as_adapter(adapter_or_path)
    register_secret(SAMPLE_KEY)

    def handler(request: httpx.Request) -> httpx.Response:
        raise _Captured(request)

    results: list[RequestResult] = []
    for case in cases if cases is not None else request_cases():
        result = RequestResult(case.name, case.description)
        replica = _replica(adapter, httpx.MockTransport(handler), result.logs)
        got = run_sync(_capture(replica, case.options))
        if isinstance(got, LlmError):
            result.error = got
        else:
            result.method = got.method
            result.url = redact(str(got.url))
            shown = {k: v for k, v in got.headers.items() if k.lower() not in _HIDDEN_HEADERS}
            result.headers = redact_headers(shown)
            text = got.content.decode("utf-8", errors="replace")
            try:
                result.body = redact_obj(json.loads(text))
            except json.JSONDecodeError:
                result.body = redact(text)
        results.append(result)
    return results


# -------------------------------------------------------------------------------- rendering


def event_rows(events: Sequence[Event]) -> list[tuple[int, str, str, str]]:
    """``(position, type, index, detail)`` per event, for tables."""
    rows: list[tuple[int, str, str, str]] = []
    for pos, ev in enumerate(events):
        index = str(getattr(ev, "index", ""))
        if isinstance(ev, BlockStart):
            detail: str = ev.block_type
        elif isinstance(ev, TextDelta | ReasoningDelta):
            detail = repr(ev.text)
        elif isinstance(ev, ToolCallDelta):
            detail = (f"{ev.name} " if ev.name else "") + f"[{ev.id}] {ev.arguments_delta!r}"
        elif isinstance(ev, BlockEnd):
            detail = json.dumps(ev.block.to_json(), ensure_ascii=False)
        elif isinstance(ev, Usage):
            detail = json.dumps(ev.usage.to_json())
        else:
            reason = ev.reason
            detail = reason.kind + (
                f" [{reason.failure.code}] {reason.failure.message}" if reason.failure else ""
            )
        rows.append((pos, ev.type, index, redact(detail)))
    return rows


def summarize(completion: Completion) -> str:
    """One line: text, reasoning, tool calls, usage and finish of a completion."""
    parts = [f"text {completion.text[:60]!r}" + ("…" if len(completion.text) > 60 else "")]
    if completion.reasoning:
        parts.append(f"reasoning {len(completion.reasoning)} chars")
    for call in _tool_calls(completion):
        parts.append(f"tool {call['name']}({json.dumps(call['args'], ensure_ascii=False)})")
    if completion.usage:
        parts.append(
            f"usage {completion.usage.input_tokens} in / {completion.usage.output_tokens} out"
        )
    finish = completion.finish
    if finish is not None:
        parts.append(
            f"finish {finish.kind}" + (f" [{finish.failure.code}]" if finish.failure else "")
        )
    return redact(", ".join(parts))


def _render_text(report: CheckReport, *, events: bool) -> str:
    lines: list[str] = []
    verdict = "PASS" if report.ok else "FAIL"
    fx_ok = sum(f.ok for f in report.fixtures)
    rq_ok = sum(r.ok for r in report.requests)
    n_warn = len(report.warnings)
    lines.append(
        f"adapter {report.adapter} {report.version} ({report.origin or '?'}): {verdict} - "
        f"{fx_ok}/{len(report.fixtures)} fixtures, {rq_ok}/{len(report.requests)} requests"
        + (f", {n_warn} warning{'s' if n_warn != 1 else ''}" if n_warn else "")
    )
    if report.load_error is not None:
        lines.append(f"  load error: {report.load_error}")
    for f in report.fixtures:
        state = "skipped" if f.skipped else ("ok" if f.ok else "FAIL")
        if f.ok and f.warnings:
            state = "warning"
        lines.append(f"\n[{state}] {f.fixture} ({f.framing}, HTTP {f.status})")
        if f.skipped:
            lines.append(f"  {f.skipped}")
            continue
        lines.append(f"  {summarize(f.completion)}")
        lines.append(
            "  validate_stream: passes"
            if f.verdict is None
            else f"  validate_stream: rule {f.rule} broken at event #{f.position}: {f.verdict}"
        )
        lines.extend(f"  problem: {p}" for p in f.problems if p != f.verdict)
        lines.extend(f"  warning: {w}" for w in f.warnings)
        lines.extend(f"  log {level}: {msg}" for level, msg in f.logs)
        if events:
            lines.extend(
                f"    #{p:<3} {t:16} {i:>3}  {d[:100]}" for p, t, i, d in event_rows(f.events)
            )
    for r in report.requests:
        lines.append(f"\n[{'ok' if r.ok else 'FAIL'}] request {r.case}: {r.description}")
        if r.error is not None:
            lines.append(f"  error: {r.error}")
            continue
        lines.append(f"  {r.method} {r.url}")
        lines.extend(f"  {k}: {v}" for k, v in r.headers.items())
        lines.extend("  " + ln for ln in r.body_json().splitlines())
    return redact("\n".join(lines))
