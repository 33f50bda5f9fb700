"""The finish vocabulary has two copies: Python's (``finish_vocabulary.py``, which the runtime
and the drafter read) and Lua's (``draft_support.lua``, which drafted adapters read). Both must
give every value the same meaning, and say the same values are progress."""

from __future__ import annotations

import json

import pytest

from notebook_llm.adapters.lua.finish_vocabulary import (
    MEANING_WORDS,
    PROGRESS,
    PROGRESS_WORDS,
    finish_meaning,
    is_progress,
)
from notebook_llm.adapters.lua.runtime import LuaSandbox

SCRIPT = """
local draft = require("draft_support")
local M = { name = "vocab" }
function M.transform_request(raw)
  local out = {}
  for i, v in ipairs(json.decode(raw)) do
    out[i] = { draft.meaning(v) or "none", draft.is_progress(v) }
  end
  return json.encode(out)
end
return M
"""

#: Values real APIs send, values made of every stem, and values that trap a reader.
VALUES = [
    "stop",
    "end_turn",
    "COMPLETE",
    "eos_token",
    "MAX_TOKENS",
    "maxTokens",
    "model_length",
    "max_length",
    "truncated",
    "incomplete",
    "tool_use",
    "TOOL_CALL",
    "requires_action",
    "content_filter",
    "SAFETY",
    "CONTENT_FILTERED",
    "MALFORMED_FUNCTION_CALL",
    "failed",
    "pause_turn",
    "FINISH_REASON_UNSPECIFIED",
    "in_progress",
    "null",
    "",
    "not_finished",
    "ALTERNATIVE_STATUS_PARTIAL",
    "ALTERNATIVE_STATUS_FINAL",
    "ALTERNATIVE_STATUS_TRUNCATED_FINAL",
    "ALTERNATIVE_STATUS_CONTENT_FILTER",
    "FINISH",
    "LENGTH",
    "stop_sequence",
    "x" * 70,
    "ÉNDE",
]
VALUES += [stem for _, stems, _, _ in MEANING_WORDS for stem in stems]
VALUES += [w for _, _, words, _ in MEANING_WORDS for w in words]
VALUES += sorted(PROGRESS) + [f"STATUS_{w.upper()}" for w in sorted(PROGRESS_WORDS)]


def test_the_lua_copy_gives_every_value_the_pythons_meaning() -> None:
    got = json.loads(LuaSandbox(SCRIPT, name="vocab").call("transform_request", json.dumps(VALUES)))
    want = [[finish_meaning(v) or "none", is_progress(v)] for v in VALUES]
    assert dict(zip(VALUES, map(tuple, got), strict=True)) == dict(
        zip(VALUES, map(tuple, want), strict=True)
    )


@pytest.mark.parametrize(
    ("value", "meaning"),
    [
        ("ALTERNATIVE_STATUS_FINAL", "stop"),
        ("ALTERNATIVE_STATUS_TRUNCATED_FINAL", "length"),
        ("ALTERNATIVE_STATUS_CONTENT_FILTER", "content_filter"),
        ("ALTERNATIVE_STATUS_PARTIAL", None),
        ("not_finished", None),
    ],
)
def test_status_values_are_read_by_their_words(value: str, meaning: str | None) -> None:
    assert finish_meaning(value) == meaning


def test_a_value_with_a_progress_word_is_progress() -> None:
    assert is_progress("not_finished")
    assert is_progress("ALTERNATIVE_STATUS_PARTIAL")
    assert not is_progress("ALTERNATIVE_STATUS_FINAL")
