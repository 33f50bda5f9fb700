"""A draft for a stream that has no end marker and no finish field: the end of the body is its
end, as the API means, so the kit passes the draft on its own body and on another one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from notebook_llm import ErrorCode, LlmError
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.conformance.draft import draft_adapter
from notebook_llm.conformance.fixtures import CONTENT_TYPES, Fixture
from notebook_llm.conformance.kit import replay_fixture


def ndjson(*texts: str) -> bytes:
    return "".join(json.dumps({"t": t, "n": i}) + "\n" for i, t in enumerate(texts)).encode()


def sse(*texts: str) -> bytes:
    return "".join(f"data: {json.dumps({'piece': {'t': t}})}\n\n" for t in texts).encode()


def test_a_stream_that_just_ends_drafts_a_passing_adapter() -> None:
    for body, other, framing in (
        (ndjson("Hello ", "there, ", "friend."), ndjson("Good ", "bye."), "ndjson"),
        (sse("Hello ", "there, ", "friend."), sse("Good ", "bye."), "sse"),
    ):
        draft = draft_adapter(body, "plain")
        assert draft.inference.end.kind == "eof"
        assert draft.check is not None
        assert draft.ok, draft.summary()
        assert draft.check.completion.text == "Hello there, friend."
        assert draft.check.completion.finish.kind == "stop"
        assert any("end" in t and "cut" in t for t in draft.todos)  # the trade-off is said
        adapter = LuaAdapter.from_source(draft.source, name="plain")
        fixture = Fixture(Path("b"), other, framing, 200, CONTENT_TYPES[framing])
        result = replay_fixture(adapter, fixture)
        assert result.ok
        assert not result.warnings
        assert result.completion.text == "Good bye."


def test_a_body_path_that_is_not_a_file_or_too_big_is_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (Path("/dev/zero"), fifo, tmp_path):
        with pytest.raises(LlmError) as info:
            draft_adapter(path, "x")
        assert info.value.code == ErrorCode.INVALID_OPTIONS
        assert "not a file" in info.value.message
    big = tmp_path / "big.sse"
    with big.open("wb") as f:
        f.truncate(40 * 2**20)  # sparse: 40 MB of zeros, nothing written
    with pytest.raises(LlmError) as info:
        draft_adapter(big, "x")
    assert info.value.code == ErrorCode.INPUT_TOO_LARGE


def test_a_cumulative_text_that_is_rewritten_is_a_todo() -> None:
    values = ["Hello", "Hello world", "Hi world", "Hi world!", "Hi world! Bye."]
    body = b"".join(json.dumps({"output": v}).encode() + b"\n" for v in values)
    body += b'{"output": "Hi world! Bye.", "done": true}\n'
    draft = draft_adapter(body, "rewrites")
    assert any("rewrite" in t for t in draft.todos), draft.todos
    # a true cumulative stream is not flagged
    grows = ["Hel", "Hello", "Hello wor", "Hello world."]
    body = b"".join(json.dumps({"output": v}).encode() + b"\n" for v in grows)
    draft = draft_adapter(body + b'{"output": "Hello world.", "done": true}\n', "grows")
    assert not any("rewrite" in t for t in draft.todos)
    assert draft.check is not None
    assert draft.check.completion.text == "Hello world."


def test_a_key_echoed_in_the_body_is_not_written_into_the_draft() -> None:
    from notebook_llm.core.redaction import register_secret

    register_secret("sk-live-REVIEW-7f3a9c")
    lines = [
        {"text": "sk-live-REVIEW-7f3a9c is what you sent"},
        {"text": " and https://x/?key=AIzaREVIEW998877 too."},
        {"done": True},
    ]
    body = b"".join(json.dumps(o).encode() + b"\n" for o in lines)
    draft = draft_adapter(body, "echoes")
    assert draft.ok
    for shown in (draft.source, draft.summary()):
        assert "REVIEW-7f3a9c" not in shown
        assert "AIzaREVIEW998877" not in shown
