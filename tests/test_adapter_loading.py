"""Where adapters come from (built-in, a plugin's, user file, session) and hot reload."""

from __future__ import annotations

import os
import subprocess
import sys
import types
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from notebook_llm import Engine, LlmError, LuaAdapter, validate_stream
from notebook_llm.adapters.mock import MockServer
from notebook_llm.engine.routing import lua_files as loader
from notebook_llm.engine.routing import plugins as plugins_mod

ROOT = Path(__file__).resolve().parents[1]

TAGGED = """
local a = {{ name = "{name}", version = "{version}", endpoint = "/chat/completions" }}
function a.transform_request(raw) return raw end
function a.transform_stream_chunk(line)
  if line == "[DONE]" then return json.encode({{ done = true }}) end
  local c = json.decode(line)
  local ch = c.choices and c.choices[1]
  if not ch then return "" end
  return json.encode({{ content = (ch.delta.content or "") ~= "" and "{tag}" or "",
                        finish_reason = ch.finish_reason }})
end
return a
"""


def tagged(name: str, tag: str, version: str = "1") -> str:
    return TAGGED.format(name=name, tag=tag, version=version)


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as srv:
        yield srv


def user_dir() -> Path:
    path = Path(os.environ["NOTEBOOK_LLM_ADAPTERS_DIR"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def plugin_shipping(monkeypatch: pytest.MonkeyPatch, **sources: Any) -> None:
    """An installed plugin (the one entry-point group, ``notebook_llm.plugins``) whose
    ``register(host)`` ships these adapters by name."""

    def register(host: plugins_mod.PluginHost) -> None:
        for name, source in sources.items():
            host.add_adapter_source(name, source)

    module = types.ModuleType("fake_shipping_plugin")
    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_shipping_plugin", module)
    ep = metadata.EntryPoint("shipping", "fake_shipping_plugin", plugins_mod.PLUGIN_GROUP)
    monkeypatch.setattr(
        plugins_mod.metadata,
        "entry_points",
        lambda **kw: [ep] if kw.get("group") == plugins_mod.PLUGIN_GROUP else [],
    )


def answer(engine: Engine, srv: MockServer, adapter: str, provider: str = "p") -> str:
    if provider not in engine.registry.routes():
        engine.add_provider(provider, adapter=adapter, base_url=srv.url + "/v1", model="echo")
    events = []

    async def run() -> None:
        async for ev in engine.stream(provider, prompt="hello world"):
            events.append(ev)

    import asyncio

    asyncio.run(run())
    validate_stream(events)
    from notebook_llm import assemble

    return assemble(events).text


def test_every_builtin_script_is_found_and_loads() -> None:
    engine = Engine(config_file=False)
    for name in [
        "openai",
        "deepseek",
        "anthropic",
        "gemini",
        "mistral",
        "groq",
        "github",
        "ollama",
    ]:
        adapter = engine.adapter(name)
        assert isinstance(adapter, LuaAdapter)
        assert adapter.origin == "built-in"
        assert adapter.name == name


def test_user_file_beats_a_plugins_adapter_beats_builtin(
    monkeypatch: pytest.MonkeyPatch, server: MockServer
) -> None:
    plugged = LuaAdapter.from_source(tagged("openai", "EP"), origin="plugin")
    plugin_shipping(monkeypatch, openai=plugged)
    assert loader.AdapterCatalog({"openai": plugged}).sources()["openai"][0] == "plugin"
    assert answer(Engine(config_file=False), server, "openai").startswith("EP")

    (user_dir() / "openai.lua").write_text(tagged("openai", "USER"))
    catalog = loader.AdapterCatalog()
    assert catalog.sources()["openai"][0] == "user file"
    engine = Engine(config_file=False)
    assert engine.adapter("openai").origin == "user file"  # type: ignore[attr-defined]
    assert answer(engine, server, "openai").startswith("USER")


def test_what_a_plugin_may_ship(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = tmp_path / "viafile.lua"
    script.write_text(tagged("viafile", "F"))
    plugin_shipping(
        monkeypatch,
        viafile=str(script),
        factory=lambda: LuaAdapter.from_source(tagged("factory", "X")),
        broken=42,
    )
    engine = Engine(config_file=False)
    assert engine.adapter("viafile").name == "viafile"
    assert engine.adapter("factory").name == "factory"
    with pytest.raises(LlmError) as info:
        engine.adapter("broken")
    assert info.value.code == "INVALID_ADAPTER"


def test_session_loaded_adapter_wins_and_hot_reloads_routes_in_place(server: MockServer) -> None:
    (user_dir() / "shout.lua").write_text(tagged("shout", "FROM-FILE"))
    engine = Engine(config_file=False)
    assert answer(engine, server, "shout").startswith("FROM-FILE")
    name = engine.load_adapter(tagged("shout", "FROM-CELL", version="2"))
    assert name == "shout"
    adapter = engine.adapter("shout")
    assert (adapter.origin, adapter.version) == ("cell", "2")  # type: ignore[attr-defined]
    assert answer(engine, server, "shout").startswith("FROM-CELL")  # same route, new script


def test_failed_load_keeps_the_previous_version(server: MockServer) -> None:
    engine = Engine(config_file=False)
    engine.load_adapter(tagged("mine", "GOOD"))
    assert answer(engine, server, "mine").startswith("GOOD")
    with pytest.raises(LlmError) as info:
        engine.load_adapter('local a = { name = "mine" }\nfunction a.transform_request(\nreturn a')
    assert info.value.code == "INVALID_ADAPTER"
    assert info.value.lua_line is not None
    assert answer(engine, server, "mine").startswith("GOOD")


def test_reload_adapter_rereads_its_file(tmp_path: Path, server: MockServer) -> None:
    path = tmp_path / "filed.lua"
    path.write_text(tagged("filed", "ONE"))
    engine = Engine(config_file=False)
    assert engine.load_adapter(str(path)) == "filed"
    assert answer(engine, server, "filed").startswith("ONE")
    path.write_text(tagged("filed", "TWO"))
    engine.reload_adapter("filed")
    assert answer(engine, server, "filed").startswith("TWO")
    path.write_text("return 42")
    with pytest.raises(LlmError) as info:
        engine.reload_adapter("filed")
    assert info.value.code == "INVALID_ADAPTER"
    assert answer(engine, server, "filed").startswith("TWO")


def test_unload_removes_the_adapter_and_its_routes(server: MockServer) -> None:
    engine = Engine(config_file=False)
    engine.load_adapter(tagged("temp", "T"))
    answer(engine, server, "temp", provider="tmp-route")
    engine.unload_adapter("temp")
    assert "tmp-route" not in engine.registry.routes()
    with pytest.raises(LlmError) as info:
        engine.unload_adapter("temp")
    assert info.value.code == "NO_ADAPTER"


def test_the_wheel_ships_the_builtin_scripts(tmp_path: Path) -> None:
    out = tmp_path / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("notebook_llm-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    builtins = ROOT / "adapters"
    for script in builtins.rglob("*.lua"):  # the shared libraries of lib/ too
        assert f"notebook_llm/_builtin_adapters/{script.relative_to(builtins).as_posix()}" in names
    assert "notebook_llm/_builtin_adapters/lib/openai_compat.lua" in names
    assert "notebook_llm/adapters/lua/json.lua" in names
    assert "notebook_llm/adapters/lua/sandbox.lua" in names
    assert "notebook_llm/adapters/lua/adapter_template.lua" in names
    assert "notebook_llm/py.typed" in names
    # the live pane's front end: its code and the vendored libraries with their licences
    for name in ("live_view.js", "marked.esm.js", "marked.LICENSE", "dompurify.esm.js"):
        assert f"notebook_llm/notebook/widgets/static/{name}" in names
    assert "notebook_llm/notebook/widgets/static/dompurify.LICENSE" in names


def test_unloading_a_session_override_brings_the_builtin_back(server: MockServer) -> None:
    engine = Engine(config_file=False)
    builtin = engine.adapter("openai")
    engine.load_adapter(tagged("openai", "CUSTOM", version="custom"))
    assert builtin.version == "custom"  # type: ignore[attr-defined]
    engine.unload_adapter("openai")
    assert engine.adapter("openai").origin == "built-in"  # type: ignore[attr-defined]
    assert engine.adapter("openai").version != "custom"
    assert answer(engine, server, "openai").startswith("hello")  # the real openai script again
