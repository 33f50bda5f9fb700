"""Three traps a newcomer met writing a Lua adapter by hand, each with its runtime behaviour.

1. A finish reason outside the old fixed list (``complete``) turned a good answer into an error
   titled ``COMPLETE``. Now finish values are read through the vocabulary of finish meanings
   (``complete`` is a stop), and a value outside it ends the answer with a finish of kind
   ``other`` that keeps the answer and the raw value, plus a warning in the kit.
2. OpenAI-style usage keys (``prompt_tokens``) in the unified chunk were dropped without a
   word. Now they are read as the contract's counts; keys the runtime does not read at all are
   named by the kit.
3. A script that read the wrong content field and never said ``done`` was blamed on the network
   (``STREAM_CLOSED``). Now it is the script's ``ADAPTER_ERROR``, naming the field to read.

Each runs the real stream path (the kit's replay: the adapter's ``stream()`` over a transport
that serves the body) and, for the first, the whole engine on the loopback mock server too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from notebook_llm.adapters.lua.finish_vocabulary import finish_meaning, is_progress
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.conformance import replay_fixture
from notebook_llm.conformance.fixtures import Fixture
from notebook_llm.core.errors import ErrorCode
from notebook_llm.core.protocol import Finish, FinishReason, event_from_json

WORDS = [{"word": "HELLO"}, {"word": "ADAPTER"}, {"word": "WORLD"}]


def _body(*lines: object) -> Fixture:
    raw = "".join(json.dumps(x) + "\n" for x in lines).encode()
    return Fixture(Path("shout.ndjson"), raw, "ndjson", 200, "application/x-ndjson")


def _script(chunk_lua: str) -> LuaAdapter:
    source = f"""
local adapter = {{ name = "shout", endpoint = "/shout", stream_format = "ndjson" }}
function adapter.transform_request(raw) return raw end
function adapter.transform_stream_chunk(line)
  local c = json.decode(line)
{chunk_lua}
end
return adapter
"""
    return LuaAdapter.from_source(source, name="shout")


# ---------------------------------------------------------------- 1. finish reasons

FINISH_AS = """
  if c.done then return json.encode({ done = true, finish_reason = c.reason }) end
  return json.encode({ content = c.word .. " " })
"""


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("complete", "stop"),
        ("COMPLETED", "stop"),
        ("truncated", "max-tokens"),
        ("eos_token", "stop"),
    ],
)
def test_1_a_finish_reason_the_vocabulary_knows_keeps_the_answer(reason: str, kind: str) -> None:
    result = replay_fixture(_script(FINISH_AS), _body(*WORDS, {"done": True, "reason": reason}))
    c = result.completion
    assert c.text == "HELLO ADAPTER WORLD "
    assert c.finish is not None
    assert c.finish.kind == kind
    assert c.error is None
    assert result.ok
    assert not result.warnings


def test_1_an_unknown_finish_reason_is_finish_other_with_the_value_and_a_kit_warning() -> None:
    result = replay_fixture(_script(FINISH_AS), _body(*WORDS, {"done": True, "reason": "banana"}))
    c = result.completion
    assert c.text == "HELLO ADAPTER WORLD "
    assert c.finish == FinishReason("other", raw="banana")
    assert c.error is None
    assert result.ok  # not an error: a warning
    assert any("'banana'" in w and "finish 'other'" in w for w in result.warnings), result.warnings


def test_1_finish_other_serialises_and_reads_back_with_its_raw_value() -> None:
    event = Finish(FinishReason("other", raw="pause_turn"))
    assert event.to_dict() == {"type": "finish", "reason": {"kind": "other", "raw": "pause_turn"}}
    assert event_from_json(event.to_json()) == event
    assert FinishReason("other", raw="pause_turn").describe() == "other ('pause_turn')"


def test_1_finish_other_is_shown_as_done_with_its_value_in_the_footer() -> None:
    from notebook_llm.core.completion import Completion
    from notebook_llm.notebook.widgets.present import status_of

    c = Completion(finish=FinishReason("other", raw="pause_turn"))
    assert status_of(c) == "done (finish reason 'pause_turn')"


@pytest.mark.parametrize(
    ("value", "meaning"),
    [
        ("stop", "stop"),
        ("end_turn", "stop"),
        ("COMPLETE", "stop"),
        ("endoftext", "stop"),
        ("max_tokens", "length"),
        ("MAX_TOKENS", "length"),
        ("maxTokens", "length"),
        ("model_length", "length"),
        ("incomplete", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("TOOL_CALL", "tool_calls"),
        ("requires_action", "tool_calls"),
        ("content_filter", "content_filter"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("guardrail_intervened", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("failed", "error"),
        ("pause_turn", None),
        ("FINISH_REASON_UNSPECIFIED", None),
        ("OTHER", None),
        ("x" * 65 + "stop", None),
        ("in_progress", None),
        ("null", None),
    ],
)
def test_1_the_vocabulary_reads_values_by_their_words(value: str, meaning: str | None) -> None:
    assert finish_meaning(value) == meaning


def test_1_progress_values_are_no_finish_at_all() -> None:
    assert is_progress("in_progress")
    assert is_progress("null")
    assert not is_progress("stop")
    # a script passing a progress value on every chunk does not end the answer early
    result = replay_fixture(
        _script(
            """
  if c.done then return json.encode({ done = true, finish_reason = "stop" }) end
  return json.encode({ content = c.word .. " ", finish_reason = "in_progress" })
"""
        ),
        _body(*WORDS, {"done": True}),
    )
    assert result.completion.text == "HELLO ADAPTER WORLD "
    assert result.completion.finish == FinishReason("stop")


# ---------------------------------------------------------------- 2. usage keys

USAGE_AS = """
  if c.done then return json.encode({ done = true, usage = c.usage }) end
  return json.encode({ content = c.word .. " " })
"""


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
        {"input_tokens": 3, "output_tokens": 5},
        {"prompt": 3, "completion": 5},
        {"prompt_tokens": 99, "prompt": 3, "completion": 5},  # the contract's key wins
    ],
    ids=["openai", "anthropic", "contract", "both"],
)
def test_2_openai_and_anthropic_usage_keys_are_read_as_the_contracts(usage: dict[str, int]) -> None:
    result = replay_fixture(_script(USAGE_AS), _body(*WORDS, {"done": True, "usage": usage}))
    got = result.completion.usage
    assert got is not None
    assert (got.input_tokens, got.output_tokens) == (3, 5)
    assert not result.warnings


def test_2_usage_keys_the_runtime_does_not_read_are_named_by_the_kit() -> None:
    usage = {"n_in": 3, "n_out": 5}
    result = replay_fixture(_script(USAGE_AS), _body(*WORDS, {"done": True, "usage": usage}))
    assert result.completion.usage is None
    named = [w for w in result.warnings if "does not read" in w]
    assert len(named) == 1, result.warnings
    assert "'n_in'" in named[0]
    assert "'n_out'" in named[0]


# ---------------------------------------------------------------- 3. the wrong field, no done


def test_3_a_script_that_reads_the_wrong_field_and_never_says_done_is_named() -> None:
    script = _script('  return json.encode({ content = c.text or "" })')
    result = replay_fixture(script, _body(*WORDS, {"end": "yes"}))
    err = result.completion.error
    assert err is not None
    assert err.code == ErrorCode.ADAPTER_ERROR
    assert err.code != ErrorCode.STREAM_CLOSED
    assert "`word`" in err.message
    assert "should read" in err.message
    assert err.details["field"] == "word"
    assert err.hook == "transform_stream_chunk"


def test_3_a_stream_that_mapped_text_and_was_cut_is_still_the_network() -> None:
    script = _script('  return json.encode({ content = c.word or "" })')
    result = replay_fixture(script, _body(*WORDS))
    err = result.completion.error
    assert err is not None
    assert err.code == ErrorCode.STREAM_CLOSED
    assert result.completion.text == "HELLOADAPTERWORLD"
