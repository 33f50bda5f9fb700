"""Kernel-idiom compatibility suite: scripts written the way HomeAgent kernel scripts are written
run unchanged here and agree with the built-in adapters on every recorded body of their family.

The three scripts in ``tests/kernel_idiom/`` are the project's own (no kernel code is copied);
they use the idioms real kernel scripts rely on: ``pcall(json.decode, raw)``, ``x ~= nil`` and
``x or ""`` on fields that arrive as JSON null (``finish_reason``, ``delta.content``,
``stop_reason``), the flat tool-call shape ``{stream_index, id, type, name, raw_arguments}``,
usage frames with ``"choices": []``, and ``done`` flags. Each is replayed through the conformance
kit next to the built-in adapter of the body's provider, and the two must give the same text,
reasoning, tool calls (name and parsed arguments) and finish, with no kit warning.

The same scripts with nulls decoded to a truthy sentinel (what ``json.decode`` once did) lose
the answer; the kit must say so (warnings test at the end).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.conformance import check_adapter, cli_check, load_fixture, replay_fixture
from notebook_llm.core.completion import Completion
from notebook_llm.notebook.widgets.adapter_view import report_html

HERE = Path(__file__).parent
SCRIPTS = HERE / "kernel_idiom"
WIRE = HERE / "fixtures" / "wire"
ADAPTERS = HERE.parent / "adapters"

#: kernel-idiom script -> the provider folders of its family (each also names the built-in).
FAMILIES: dict[str, list[str]] = {
    "openai_style": ["openai", "deepseek", "groq", "mistral"],
    "anthropic_style": ["anthropic"],
    "ollama_style": ["ollama"],
}


def _bodies(provider: str) -> list[Path]:
    return sorted(
        p
        for p in (WIRE / provider).iterdir()
        if p.suffix in (".sse", ".json", ".ndjson") and load_fixture(p).status < 400
    )


PAIRS = [
    pytest.param(script, provider, body.name, id=f"{script}-{provider}-{body.name}")
    for script, providers in FAMILIES.items()
    for provider in providers
    for body in _bodies(provider)
]


def _args(arguments: str) -> Any:
    return json.loads(arguments) if arguments.strip() else {}


def outcome(completion: Completion) -> dict[str, Any]:
    """What a user sees of an answer: text, reasoning, tool calls, how it finished."""
    return {
        "text": completion.text,
        "reasoning": completion.reasoning,
        "tool_calls": [(c.name, _args(c.arguments)) for c in completion.tool_calls],
        "finish": completion.finish.kind if completion.finish else None,
    }


_cache: dict[str, LuaAdapter] = {}


def adapter(path: Path) -> LuaAdapter:
    key = str(path)
    if key not in _cache:
        _cache[key] = LuaAdapter.from_file(path)
    return _cache[key]


def test_every_family_has_stream_and_whole_bodies() -> None:
    for providers in FAMILIES.values():
        suffixes = {b.suffix for p in providers for b in _bodies(p)}
        assert suffixes & {".sse", ".ndjson"}, providers
    assert len(PAIRS) >= 25


@pytest.mark.parametrize(("script", "provider", "body"), PAIRS)
def test_kernel_idiom_script_agrees_with_the_builtin(script: str, provider: str, body: str) -> None:
    fixture = WIRE / provider / body
    kernel = replay_fixture(adapter(SCRIPTS / f"{script}.lua"), fixture)
    builtin = replay_fixture(adapter(ADAPTERS / f"{provider}.lua"), fixture)
    assert builtin.ok, builtin.problems
    assert kernel.ok, kernel.problems
    # The kernel idiom ends the answer at the finish reason, as the kernel does, so a usage frame
    # sent after it (OpenAI's include_usage) is lost; the kit says so, and only that.
    usage_lost = [w for w in kernel.warnings if "reports token usage" in w]
    assert [w for w in kernel.warnings if w not in usage_lost] == []
    if usage_lost:
        assert builtin.completion.usage is not None
        assert kernel.completion.usage is None
    assert builtin.warnings == []
    assert outcome(kernel.completion) == outcome(builtin.completion)
    assert kernel.completion.text or kernel.completion.reasoning or kernel.completion.tool_calls


# ---------------------------------------------------------------------------- the kit's warnings

OPENAI_STREAM = WIRE / "openai" / "stream_text_include_usage.sse"


def _variant(script: str, old: str, new: str) -> str:
    source = (SCRIPTS / f"{script}.lua").read_text("utf-8")
    assert old in source
    return source.replace(old, new)


def test_sentinel_nulls_end_the_stream_early_and_the_kit_says_where() -> None:
    # The pre-issue-12 decoder: null -> a truthy sentinel, so `done = (fr ~= nil)` is true at once.
    source = _variant(
        "openai_style",
        "pcall(json.decode, raw_chunk)",
        "pcall(json.decode, raw_chunk, {null = json.null})",
    )
    result = replay_fixture(LuaAdapter.from_source(source), OPENAI_STREAM)
    early = [w for w in result.warnings if "reported done" in w]
    assert early, result.warnings
    assert early[0].startswith("transform_stream_chunk, payload 1:")
    assert "payload 2 still carries content" in early[0]


def test_a_stream_script_that_drops_every_token_fails_naming_the_field() -> None:
    # Once a warning (PASS, 1 warning); a body whose text is all dropped is the script's error.
    source = _variant(
        "openai_style", "unified.content = text_of(delta.content)", "unified.content = delta.text"
    )
    result = replay_fixture(LuaAdapter.from_source(source), OPENAI_STREAM)
    assert result.completion.text == ""
    assert not result.ok
    assert result.adapter_fault
    err = result.completion.error
    assert err is not None
    assert err.code == "ADAPTER_ERROR"
    assert err.hook == "transform_stream_chunk"
    assert "`choices[0].delta.content`" in err.message


def test_a_whole_body_mapped_to_nothing_fails_naming_the_field() -> None:
    # A script that reads a field the API does not send: a FAIL, no longer a warning.
    source = _variant(
        "openai_style", "unified.content = text_of(msg.content)", "unified.content = msg.text or ''"
    )
    result = replay_fixture(
        LuaAdapter.from_source(source), WIRE / "openai" / "chat_completion_text.json"
    )
    assert result.completion.text == ""
    assert not result.ok
    err = result.completion.error
    assert err is not None
    assert err.code == "ADAPTER_ERROR"
    assert err.hook == "transform_response"
    assert "`choices[0].message.content`" in err.message


def _sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + (
        b"data: [DONE]\n\n"
    )


def test_an_early_done_passes_the_rules_but_fails_under_strict(tmp_path: Path) -> None:
    # A script whose done flag is set on every chunk keeps the first token and loses the rest:
    # no rule is broken (PASS), but the kit warns, and check-adapter --strict fails.
    source = _variant("openai_style", "unified.done = (fr ~= nil)", "unified.done = true")
    script = tmp_path / "early.lua"
    script.write_text(source, "utf-8")
    body = tmp_path / "two_tokens.sse"
    body.write_bytes(
        _sse(
            {"choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {"content": " world"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        )
    )
    result = replay_fixture(LuaAdapter.from_file(script), body)
    assert result.ok
    assert result.completion.text == "Hello"
    assert result.warnings == [
        "transform_stream_chunk, payload 1: the script reported done (or a finish) here, but "
        "payload 2 still carries content (1 such payload(s) are lost); does it read a field "
        "that arrives as null as set?"
    ]
    lines: list[str] = []
    assert cli_check(str(script), [str(body)], None, out=lines.append) == 0
    assert "PASS" in lines[0]
    assert "1 warning" in lines[0]
    assert "warning: transform_stream_chunk, payload 1" in lines[0]
    assert cli_check(str(script), [str(body)], None, out=lines.append, strict=True) == 1
    assert "--strict" in lines[-1]
    report = check_adapter(LuaAdapter.from_file(script), [body], requests=False)
    assert "warning: transform_stream_chunk, payload 1" in report_html(report)


def test_output_tokens_without_output_are_warned(tmp_path: Path) -> None:
    body = tmp_path / "odd_field.json"
    body.write_text(
        json.dumps(
            {
                "choices": [
                    {"message": {"role": "assistant", "answer": "hi"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
            }
        ),
        "utf-8",
    )
    result = replay_fixture(adapter(SCRIPTS / "openai_style.lua"), body)
    assert result.warnings == [
        "transform_response: 5 output tokens were counted but no text, reasoning or tool call "
        "came out"
    ]


def test_anthropic_whole_body_mapped_to_nothing_fails() -> None:
    source = _variant("anthropic_style", 'block.type == "text"', 'block.type == "txt"')
    result = replay_fixture(
        LuaAdapter.from_source(source), WIRE / "anthropic" / "message_text.json"
    )
    assert not result.ok
    err = result.completion.error
    assert err is not None
    assert "`content[0].text`" in err.message


def test_builtin_adapters_raise_no_warning() -> None:
    for provider in ("openai", "deepseek", "groq", "mistral", "anthropic", "gemini", "ollama"):
        report = check_adapter(
            adapter(ADAPTERS / f"{provider}.lua"), [WIRE / provider], requests=False
        )
        assert report.ok, provider
        assert report.warnings == [], (provider, report.warnings)


# ---------------------------------------------------------------------------- built-ins and nulls

NULL_SCHEMA_REQUEST = {
    "model": "m",
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {
                    "type": "object",
                    "properties": {"x": {"type": ["string", "null"], "default": None}},
                },
            },
        }
    ],
}


@pytest.mark.parametrize(
    "provider",
    ["openai", "deepseek", "github", "groq", "mistral", "anthropic", "gemini", "ollama"],
)
def test_builtin_adapters_send_a_tool_schemas_null_on(provider: str) -> None:
    # The request side decodes with {null = json.null}: a null in a tool schema stays null
    # (with the default decoding it would vanish, changing the schema the model sees).
    from notebook_llm.adapters.lua.runtime import LuaSandbox

    source = (ADAPTERS / f"{provider}.lua").read_text("utf-8")
    out = LuaSandbox(source, name=provider).call(
        "transform_request", json.dumps(NULL_SCHEMA_REQUEST)
    )
    assert '"default":null' in out.replace(" ", "")
