"""The kit's entry points: one fixture, a whole check, a pytest assert and the CLI.

:func:`replay_fixture` replays one body (:mod:`.replay`), judges it (:mod:`.report`) and adds
:mod:`.payloads`' warnings; :func:`check_adapter` does that for every fixture file or folder and
adds the request probes (:mod:`.requests`); :func:`assert_conforms` and :func:`cli_check` wrap
it for pytest and ``python -m notebook_llm check-adapter``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..adapters.lua.lua_adapter import LuaAdapter
from ..core.errors import ErrorCode, LlmError
from ..core.redaction import redact
from .fixtures import (
    Fixture,
    expected_for,
    find_fixtures,
    is_recording,
    load_expected,
    load_fixture,
    load_fixtures,
)
from .payloads import payload_warnings
from .recordings import select_exchanges
from .replay import as_adapter, replay_events
from .report import CheckReport, FixtureResult, diff_completion, settle
from .requests import check_requests, request_cases

__all__ = ["assert_conforms", "check_adapter", "cli_check", "replay_fixture"]


def replay_fixture(
    adapter_or_path: LuaAdapter | str | Path,
    fixture: Fixture | str | Path,
    *,
    expected: Mapping[str, Any] | None = None,
    chunk_size: int | None = None,
) -> FixtureResult:
    """Replay one recorded body through the adapter, without network (see :mod:`notebook_llm.conformance`).

    ``chunk_size`` splits the body into pieces of that many bytes (to exercise incremental
    decoding). Adapter errors are not raised: they are in ``result.error`` and the events end
    with an error ``finish`` as the engine would show it.
    """
    adapter = as_adapter(adapter_or_path)
    fx = fixture if isinstance(fixture, Fixture) else load_fixture(fixture)
    result = FixtureResult(fx.name, fx.framing, fx.status, expected=expected)
    hooks = adapter.meta.get("hooks", [])
    if fx.whole_body and "transform_response" not in hooks:
        result.skipped = "a non-stream body, and the adapter has no transform_response"
        return result
    if not fx.whole_body and fx.status < 400 and "transform_stream_chunk" not in hooks:
        result.skipped = "a stream body, and the adapter has no transform_stream_chunk"
        return result
    options = request_cases()[0].options
    events, error = replay_events(adapter, fx, options, result.logs, chunk_size=chunk_size)
    settle(result, events, error)
    if expected is not None:
        result.diffs = diff_completion(result.completion, expected)
    if fx.status < 400 and not result.adapter_fault:
        # never raises: the replay above already reports what went wrong with this body
        with contextlib.suppress(LlmError):
            result.warnings = payload_warnings(adapter, fx, result.completion)
    return result


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
        adapter = as_adapter(adapter_or_path)
    except LlmError as err:
        name = err.adapter or str(adapter_or_path)[:40]
        return CheckReport(name, load_error=err)
    table = load_expected(expected) if isinstance(expected, str | Path) else expected
    report = CheckReport(adapter.name, adapter.version, adapter.origin)
    paths = find_fixtures(fixtures)
    if fixtures and not paths:
        raise LlmError(
            f"no body files (.sse, .ndjson, .json, .jsonl) in {', '.join(map(str, fixtures))}",
            ErrorCode.INVALID_OPTIONS,
        )
    if not paths and not requests:
        raise LlmError(
            "nothing to check: give recorded bodies (files or folders) or drop --no-requests",
            ErrorCode.INVALID_OPTIONS,
        )
    for path in paths:
        loaded = load_fixtures(path)
        if is_recording(path):
            chosen = select_exchanges(adapter, loaded)
            if chosen.skipped:
                note = chosen.note(path.name, adapter.name)
                if not chosen.own and len(paths) == 1:
                    raise LlmError(note, ErrorCode.INVALID_OPTIONS)
                report.notes.append(note)
            loaded = chosen.own
        for fx in loaded:
            report.fixtures.append(
                replay_fixture(adapter, fx, expected=expected_for(fx, table), chunk_size=chunk_size)
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
    adapter = as_adapter(adapter_or_path)
    if isinstance(expected, str | Path):
        table = load_expected(expected)
        fx = load_fixture(fixture)
        want = expected_for(fx, table)
    else:
        fx = load_fixture(fixture)
        want = expected if expected is not None else expected_for(fx, None)
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
    """``python -m notebook_llm check-adapter``: print the report; 0 if it conforms, else 1,
    and 2 when no fixture was given (a check of nothing is not a pass). With ``strict``, a
    warning (see :func:`payload_warnings`) fails it too, and the verdict line says so."""
    write = out or (lambda s: sys.stdout.write(s + "\n"))
    try:
        report = check_adapter(Path(path), fixtures, expected)
    except (LlmError, OSError, ValueError) as err:
        write(redact(f"error: {err}"))
        return 1
    if not fixtures and report.load_error is None:
        write(
            "error: no fixtures: give recorded response bodies with --fixtures FILE_OR_DIR "
            "(.sse, .ndjson, .json, or a %llm record .jsonl; the built-in adapters' are in "
            "tests/fixtures/wire/<provider>)"
        )
        return 2
    report.strict = strict
    write(report.render_text(events=False))
    return 0 if report.passed else 1
