"""A draft a learner can read: short, concrete, one short function per hook, the machinery in a
shipped library, and an exported draft that carries only the helpers it calls.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from notebook_llm.__main__ import main
from notebook_llm.adapters.lua import runtime
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.standalone import standalone_source, used_sections
from notebook_llm.conformance import replay_fixture
from notebook_llm.conformance.draft import draft_adapter

ROOT = Path(__file__).resolve().parent.parent
WIRE = ROOT / "tests" / "fixtures" / "wire"
LIBRARY = (ROOT / "adapters" / "lib" / "draft_support.lua").read_text("utf-8")

#: Plain text streams of the recorded families: text, a finish, usage, an end; no tool call.
PLAIN = [
    "openai/stream_text_include_usage.sse",
    "mistral/stream_text.sse",
    "groq/stream_text.sse",
    "ollama/stream_text.ndjson",
    "anthropic/stream_text.sse",
    "gemini/stream_text.sse",
]


@pytest.mark.parametrize("body", PLAIN)
def test_a_plain_text_stream_drafts_under_80_lines_that_the_kit_passes(
    body: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    draft = draft_adapter(WIRE / body, "plain")
    lines = draft.source.splitlines()
    print(f"\n{body}: {len(lines)} lines")
    assert len(lines) < 80, draft.source
    out = tmp_path / "plain.lua"
    out.write_text(draft.source)
    rc = main(["check-adapter", str(out), "--fixtures", str(WIRE / body), "--strict"])
    assert rc == 0, capsys.readouterr().out


@pytest.mark.parametrize("body", PLAIN)
def test_a_draft_reads_concrete_paths_in_one_short_function_per_hook(body: str) -> None:
    source = draft_adapter(WIRE / body, "plain", check=False).source
    functions = re.findall(r"^(?:local )?function ([\w.]+)\(.*?^end$", source, re.S | re.M)
    assert set(functions) >= {"read", "M.transform_stream_chunk", "M.transform_response"}
    for name, text in re.findall(r"^(?:local )?function ([\w.]+)\((.*?)^end$", source, re.S | re.M):
        code = [x for x in text.splitlines() if x.strip() and not x.strip().startswith("--")]
        assert len(code) <= 20, f"{name} has {len(code)} lines of code"
    # the text's path is written out, not looked up in a table of paths
    assert re.search(r'out\.content = text\(c, \{ "[^"]+"', source)
    # no generic machinery in the draft: it is the library's
    assert "local function values_at" not in source
    assert 'require("draft_support")' in source


def test_every_library_function_a_draft_calls_is_documented_in_its_header() -> None:
    header = LIBRARY.split("]]", 1)[0]
    calls: set[str] = set()
    for body in PLAIN:
        source = draft_adapter(WIRE / body, "x", check=False).source
        calls |= set(re.findall(r"draft\.(\w+)", source))
    missing = sorted(c for c in calls if f"draft.{c}" not in header)
    assert not missing, missing


def test_an_exported_draft_inlines_only_the_helpers_it_uses_and_runs_without_require(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = WIRE / "openai" / "stream_text_include_usage.sse"
    draft = draft_adapter(body, "plain", check=False)
    exported = standalone_source(draft.source)
    kept = used_sections(draft.source, LIBRARY)
    assert "function draft.text(" in kept
    assert "function draft.finish(" in kept
    assert "function draft.meaning(" in kept  # what finish uses
    for unused in ("draft.put(", "draft.cumulative(", "draft.ends(", "draft.message_text("):
        assert f"function {unused}" not in kept, unused
    assert len(kept.splitlines()) < len(LIBRARY.splitlines())
    assert kept in exported
    expected = replay_fixture(LuaAdapter.from_source(draft.source, "plain"), body).completion
    monkeypatch.setattr(runtime, "library_code", lambda _name: None)  # require finds nothing
    got = replay_fixture(LuaAdapter.from_source(exported, "plain"), body).completion
    assert got.to_dict() == expected.to_dict()


def test_a_draft_that_uses_more_exports_more() -> None:
    from draft_bodies import Answer, dashscope_like

    cumulative = dashscope_like(Answer(("Hel", "lo ", "there."), "stop", (3, 2)))
    draft = draft_adapter(cumulative, "cum", check=False)
    assert "function draft.cumulative(" in used_sections(draft.source, LIBRARY)
