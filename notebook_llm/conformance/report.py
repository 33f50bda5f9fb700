"""Judging a replay and showing the judgement: verdict, diff against an expectation, text.

:func:`settle` turns a replay's events into a :class:`FixtureResult`: the assembled
:class:`~notebook_llm.Completion` and :func:`~notebook_llm.validate_stream`'s verdict (rule and
position); an error that ended the stream becomes its error ``finish``, as the engine shows it.
:func:`diff_completion` compares the given keys of an expectation ``{text, reasoning,
tool_calls: [{name, args}], usage, finish, error_code}`` (each optional) with the completion.
:class:`CheckReport` gathers one adapter's fixture and request results; :func:`render_text` is
the plain-text report the CLI prints (the notebook's HTML view is built from :func:`event_rows`
and :func:`summarize` by ``widgets.adapter_view.report_html``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.completion import Completion, assemble
from ..core.errors import ErrorCode, LlmError
from ..core.protocol import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ..core.redaction import redact, shorten
from ..core.stream_rules import validate_stream
from .requests import RequestResult

__all__ = [
    "ADAPTER_FAULTS",
    "CheckReport",
    "FieldDiff",
    "FixtureResult",
    "diff_completion",
    "event_rows",
    "plural",
    "render_text",
    "settle",
    "summarize",
    "verdict_line",
]

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


# ---------------------------------------------------------------- results


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
    #: Lines about what was (not) checked, e.g. a recording's exchanges made by other adapters.
    notes: list[str] = field(default_factory=list)
    #: ``check-adapter --strict``: a warning fails the check too (see :attr:`passed`).
    strict: bool = False

    @property
    def ok(self) -> bool:
        return (
            self.load_error is None
            and all(f.ok for f in self.fixtures)
            and all(r.ok for r in self.requests)
        )

    @property
    def passed(self) -> bool:
        """The verdict: :attr:`ok`, and under :attr:`strict` no warning either."""
        return self.ok and not (self.strict and self.warnings)

    @property
    def warnings(self) -> list[str]:
        """Every fixture's warnings, each prefixed with the fixture's name."""
        return [f"{f.fixture}: {w}" for f in self.fixtures for w in f.warnings]

    def render_text(self, *, events: bool = True) -> str:
        """A plain-text report (what the CLI prints; the notebook's ``text/plain``)."""
        return render_text(self, events=events)

    def __str__(self) -> str:
        return self.render_text()


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


# ---------------------------------------------------------------- diff


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
                diffs.append(FieldDiff("usage", want_usage, got.to_dict() if got else None))
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


# ---------------------------------------------------------------- rendering


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
            detail = json.dumps(ev.block.to_dict(), ensure_ascii=False)
        elif isinstance(ev, Usage):
            detail = json.dumps(ev.usage.to_dict())
        else:
            reason = ev.reason
            detail = reason.describe() + (
                f" [{reason.failure.code}] {reason.failure.message}" if reason.failure else ""
            )
        rows.append((pos, ev.type, index, redact(detail)))
    return rows


def summarize(completion: Completion) -> str:
    """One line: text, reasoning, tool calls, usage and finish of a completion."""
    parts = [f"text {shorten(completion.text, 61)!r}"]
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
            f"finish {finish.describe()}" + (f" [{finish.failure.code}]" if finish.failure else "")
        )
    return redact(", ".join(parts))


def fixture_state(f: FixtureResult) -> str:
    """A fixture's verdict word in a report: skipped, ok, warning or FAIL (text and HTML)."""
    if f.ok and f.warnings:
        return "warning"
    if f.skipped:
        return "skipped"
    return "ok" if f.ok else "FAIL"


def plural(n: int, word: str) -> str:
    """``1 warning``, ``2 warnings``, ``0 fixtures``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def verdict_line(report: CheckReport) -> str:
    """``adapter NAME VERSION (ORIGIN): PASS - 3/3 fixtures, 6/6 requests, 1 warning``; under
    ``--strict`` a warning makes it ``FAIL (--strict: 1 warning)``."""
    if report.passed:
        verdict = "PASS"
    elif report.ok:
        verdict = f"FAIL (--strict: {plural(len(report.warnings), 'warning')})"
    else:
        verdict = "FAIL"
    fx_ok = sum(f.ok for f in report.fixtures)
    rq_ok = sum(r.ok for r in report.requests)
    n_warn = len(report.warnings)
    return (
        f"adapter {report.adapter} {report.version} ({report.origin or '?'}): {verdict} - "
        f"{fx_ok}/{len(report.fixtures)} fixtures, {rq_ok}/{len(report.requests)} requests"
        + (f", {plural(n_warn, 'warning')}" if n_warn and verdict in ("PASS", "FAIL") else "")
    )


def render_text(report: CheckReport, *, events: bool = True) -> str:
    """The plain-text report: a verdict line, then each fixture and request."""
    lines: list[str] = [verdict_line(report)]
    if report.load_error is not None:
        lines.append(f"  load error: {report.load_error}")
    lines.extend(f"  note: {n}" for n in report.notes)
    if not report.fixtures and report.load_error is None:
        lines.append(
            "  note: no response body was replayed (only the request side was checked): give "
            "recorded bodies, e.g. tests/fixtures/wire/<provider> or a %llm record file"
        )
    for f in report.fixtures:
        state = fixture_state(f)
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
