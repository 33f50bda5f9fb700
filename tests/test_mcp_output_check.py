"""An MCP tool's structured result is checked against its output schema by the package's
validator (RE2 patterns, bounded ``$ref`` steps), not the SDK's (``jsonschema`` with Python's
``re``: a server's ``^(a+)+$`` over its own result held the GIL for hours). The hang cases run
in a child process in ``tests/test_linear_time.py``; here, the verdicts."""

from __future__ import annotations

import types

import pytest

from notebook_llm.api.mcp.connection import ServerConnection

SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x+$"}}}


def _connection() -> ServerConnection:
    c = ServerConnection.__new__(ServerConnection)
    c.output_schemas = {"t": SCHEMA}
    return c


def _result(content: object, is_error: bool = False) -> object:
    return types.SimpleNamespace(is_error=is_error, structured_content=content)


async def test_a_matching_result_passes() -> None:
    await _connection().check_result("t", _result({"a": "xxx"}))


async def test_a_result_that_does_not_match_is_the_calls_failure() -> None:
    with pytest.raises(RuntimeError, match="invalid structured content returned by tool t"):
        await _connection().check_result("t", _result({"a": "y"}))
    with pytest.raises(RuntimeError, match="did not return structured content"):
        await _connection().check_result("t", _result(None))


async def test_an_error_result_and_a_tool_without_schema_are_not_checked() -> None:
    await _connection().check_result("t", _result({"a": "y"}, is_error=True))
    await _connection().check_result("other", _result({"a": "y"}))


async def test_a_schema_that_cannot_run_linearly_is_refused() -> None:
    c = _connection()
    c.output_schemas = {"t": {"type": "string", "pattern": "(a)\\1"}}
    with pytest.raises(RuntimeError, match="cannot run in linear time"):
        await c.check_result("t", _result("aa"))
