"""``python -m notebook_llm export-adapter``: a built-in as one file, its libraries inlined.

The built-ins ``require`` the shipped libraries (``adapters/lib/``), which only notebook_llm's
sandbox provides. The exported file defines its own ``require``, so it runs where there is none:
here, in a sandbox whose ``require`` finds no library at all, and it must map every recorded
body of its provider exactly as the built-in does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from notebook_llm.adapters.lua import runtime
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.standalone import required_libraries, standalone_source
from notebook_llm.conformance import replay_fixture

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "adapters"
WIRE = Path(__file__).parent / "fixtures" / "wire"

#: Each built-in that requires a library, and the recorded bodies of its wire format.
USERS = {
    name: WIRE / ("openai" if name == "github" else name)
    for name in ("openai", "groq", "deepseek", "github", "mistral", "anthropic", "gemini", "ollama")
}


def _bodies(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".sse", ".ndjson", ".json"))


def _mapped(adapter: LuaAdapter, body: Path) -> tuple[object, str | None, list[str]]:
    """All a replay produced (an error by its code: its message names a Lua position, which
    the inlined file moves)."""
    result = replay_fixture(adapter, body)
    c = result.completion
    answer = None if c is None else c.to_dict()
    if isinstance(answer, dict) and result.error is not None:
        answer.pop("error", None)
        answer.pop("finish", None)
    return (answer, result.error and result.error.code, result.warnings)


@pytest.mark.parametrize("name", sorted(USERS))
def test_an_exported_builtin_maps_every_body_as_the_builtin_without_any_require(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (ADAPTERS / f"{name}.lua").read_text("utf-8")
    assert required_libraries(source), f"{name}.lua requires no library any more"
    builtin = LuaAdapter.from_source(source, name)
    expected = {body.name: _mapped(builtin, body) for body in _bodies(USERS[name])}
    assert expected

    exported = standalone_source(source)
    monkeypatch.setattr(runtime, "library_code", lambda _name: None)  # require finds nothing
    with pytest.raises(Exception, match="require: no library"):
        LuaAdapter.from_source(source, name)  # the built-in itself cannot load now
    standalone = LuaAdapter.from_source(exported, name)
    assert {body.name: _mapped(standalone, body) for body in _bodies(USERS[name])} == expected


def test_the_libraries_a_library_requires_come_along_once() -> None:
    source = 'local compat = require("openai_compat")\nlocal u = require "adapter_util"\n'
    assert required_libraries(source) == ["openai_compat", "adapter_util"]
    text = standalone_source(source)
    assert text.count('preload["adapter_util"]') == 1
    assert text.count('preload["openai_compat"]') == 1


def test_a_script_that_requires_nothing_comes_back_unchanged() -> None:
    source = "local M = { name = 'x' }\nreturn M\n"
    assert standalone_source(source) == source
    # a name that is no shipped library is left for the runtime to refuse
    assert standalone_source('local os = require("os")\n') == 'local os = require("os")\n'


def test_the_leading_comment_stays_on_top() -> None:
    source = '--[[\nmy adapter\n]]\nlocal compat = require("openai_compat")\n'
    text = standalone_source(source)
    assert text.startswith("--[[\nmy adapter\n]]\n-- The built-in libraries this script")


def test_the_command_writes_the_file_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    out = tmp_path / "groq_standalone.lua"
    done = subprocess.run(
        [sys.executable, "-m", "notebook_llm", "export-adapter", "groq", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out}")
    assert 'preload["openai_compat"]' in out.read_text("utf-8")
    bad = subprocess.run(
        [sys.executable, "-m", "notebook_llm", "export-adapter", "nosuch"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: cannot read the adapter 'nosuch'")
    assert "Traceback" not in bad.stderr
