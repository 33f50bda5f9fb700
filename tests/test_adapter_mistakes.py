"""Adapter mistakes that get a message saying what happened: a cell-magic line left in a .lua
file, a stream a local server cut short before any answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.conformance import replay_fixture
from notebook_llm.core.errors import LlmError

ROOT = Path(__file__).resolve().parent.parent


def test_a_lua_file_that_starts_with_the_cell_magic_says_to_delete_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = (ROOT / "adapters" / "openai.lua").read_text("utf-8")
    # a short path: Lua shortens a long chunk name in its messages ("...tail/mine.lua:1:")
    monkeypatch.chdir(tmp_path)
    path = Path("mine.lua")
    path.write_text("%%adapter mine\n" + script, "utf-8")
    with pytest.raises(LlmError) as info:
        LuaAdapter.from_file(path)
    err = info.value
    assert err.code == "INVALID_ADAPTER"
    assert "near '%'" in err.message  # Lua's own words are kept
    assert "the first line (%%adapter mine) is the notebook's cell magic" in err.message
    assert "delete it from the file" in err.message
    assert err.lua_line == 1
    # a script with another syntax error gets no such hint
    path.write_text(script + "\nfunctoin broken() end\n", "utf-8")
    with pytest.raises(LlmError) as info:
        LuaAdapter.from_file(path)
    assert "cell magic" not in info.value.message


def test_a_stream_ended_before_any_answer_says_the_server_cut_it(tmp_path: Path) -> None:
    # llama-cpp-python without --interrupt_requests False: the next request cuts the running
    # stream, which ends with [DONE] and no finish reason. Once: "the model returned no content".
    body = tmp_path / "cut.sse"
    body.write_text(
        'data: {"id":"c1","object":"chat.completion.chunk","model":"gemma-3-270m",'
        '"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}\n\n'
        "data: [DONE]\n\n",
        "utf-8",
    )
    result = replay_fixture(ROOT / "adapters" / "openai.lua", body)
    err = result.completion.error
    assert err is not None
    assert err.code == "EMPTY_RESPONSE"
    assert err.retryable
    assert "ended the stream early" in err.message
    assert "--interrupt_requests False" in err.message
    assert "Local models" in err.message
