"""``%%adapter`` / ``%adapter`` in an in-process InteractiveShell."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from waiting import until_sync

from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.engine.engine import Engine
from notebook_llm.notebook.magics.adapter_magics import AdapterMagics, CellLogCollector

ROOT = Path(__file__).resolve().parent.parent
WIRE = ROOT / "tests" / "fixtures" / "wire"

V1 = """\
local M = { name = "demo", version = "1", endpoint = "/v1/chat/completions" }
function M.transform_request(raw)
  log("info", "sending a request")
  return raw
end
function M.transform_response(raw)
  return raw
end
return M
"""
V2_BROKEN = V1.replace('version = "1"', 'version = "2"').replace(
    "return raw\n", "return raw +\n", 1
)


@pytest.fixture
def shell() -> Iterator[tuple[InteractiveShell, AdapterMagics, Engine]]:
    sh = InteractiveShell.instance()
    engine = Engine(config_file=False, env_file=False)
    magics = AdapterMagics(sh, engine=engine)
    sh.register_magics(magics)
    yield sh, magics, engine
    magics.close()


def _run(sh: InteractiveShell, line: str, cell: str | None = None) -> list[dict[str, Any]]:
    with capture_output() as cap:
        if cell is None:
            sh.run_line_magic("adapter", line)
        else:
            sh.run_cell_magic("adapter", line, cell)
    return [o.data for o in cap.outputs]


def _plain(outputs: list[dict[str, Any]]) -> str:
    return "\n".join(o.get("text/plain", "") for o in outputs)


def test_cell_loads_then_broken_cell_keeps_previous_version(shell: Any) -> None:
    sh, _, engine = shell
    assert "loaded adapter demo 1" in _plain(_run(sh, "", V1))
    out = _run(sh, "", V2_BROKEN)
    text = _plain(out)
    assert "INVALID_ADAPTER" in text
    # Lua's line (after the dangling "+"), numbered as the cell is (the %%adapter line is 1)
    assert ">    6 | end" in text
    assert "     5 |   return raw +" in text
    assert "kept the previous version (1) of 'demo'" in text
    assert "background:#fdd" in out[0]["text/html"]
    assert engine.adapter("demo").version == "1"
    fixed = V1.replace('version = "1"', 'version = "3"')
    assert "reloaded adapter demo 3" in _plain(_run(sh, "demo", fixed))
    assert engine.adapter("demo").version == "3"


def test_runtime_error_at_load_shows_line(shell: Any) -> None:
    sh, _, _ = shell
    src = 'local t = nil\nlocal x = t.field\nreturn { name = "rt" }\n'
    text = _plain(_run(sh, "rt", src))
    assert "INVALID_ADAPTER" in text
    assert ">    3 | local x = t.field" in text  # line 3 of the cell: %%adapter is line 1
    assert "nothing was registered" in text


def test_list_show_reload_unload(shell: Any, tmp_path: Path) -> None:
    sh, _, engine = shell
    path = tmp_path / "filed.lua"
    path.write_text(V1.replace('"demo"', '"filed"'))
    assert "loaded adapter filed 1" in _plain(_run(sh, f"load {path}"))
    listing = _plain(_run(sh, "list"))
    assert "filed" in listing
    assert "built-in" in listing
    assert "/v1/chat/completions" in listing
    row = next(ln for ln in listing.splitlines() if ln.startswith("openai "))
    assert "openai" in row.split("  ", 1)[1]  # the openai preset route
    shown = _run(sh, "show filed")
    assert "transform_request" in shown[0]["text/plain"]
    assert "<span" in shown[0]["text/html"]  # pygments-highlighted
    path.write_text(V1.replace('"demo"', '"filed"').replace('"1"', '"2"'))
    assert "reloaded adapter filed 2" in _plain(_run(sh, "reload filed"))
    path.write_text("return {")
    text = _plain(_run(sh, "reload"))
    assert "kept the previous version (2)" in text
    assert engine.adapter("filed").version == "2"
    assert "unloaded adapter filed" in _plain(_run(sh, "unload filed"))
    assert "filed" not in engine.adapter_names()


def test_load_as_name(shell: Any) -> None:
    sh, _, engine = shell
    _run(sh, f"load {ROOT / 'adapters' / 'openai.lua'} --as myopenai")
    adapter = engine.adapter("myopenai")
    assert isinstance(adapter, LuaAdapter)
    assert adapter.origin == "file"


def test_new_from_template_and_from_builtin(shell: Any) -> None:
    sh, _, _ = shell
    _run(sh, "new acme")
    cell = sh.rl_next_input
    assert cell.startswith("%%adapter acme\n")
    assert 'name = "acme"' in cell
    body = cell.split("\n", 1)[1]
    assert "loaded adapter acme" in _plain(_run(sh, "acme", body))
    _run(sh, "new myoai --from openai")
    assert 'name = "myoai"' in sh.rl_next_input
    with pytest.raises(UsageError):
        sh.run_line_magic("adapter", "new x --from nosuch")


def test_bad_arguments_give_usage_not_traceback(shell: Any) -> None:
    sh, _, _ = shell
    for line in ("bogus", "load", "show", "test", "watch"):
        result = sh.run_cell(f"%adapter {line}")
        assert isinstance(result.error_in_exec, UsageError), line
    with pytest.raises(UsageError, match="no adapter named"):
        sh.run_line_magic("adapter", "show nosuch")
    assert "%adapter list" in _plain(_run(sh, ""))


def test_test_subcommand_runs_the_kit(shell: Any) -> None:
    sh, magics, _ = shell
    out = _run(sh, f"test openai {WIRE / 'openai'}")
    assert "PASS" in out[0]["text/plain"]
    assert "<table>" in out[0]["text/html"]
    assert magics.last_report.ok
    broken = V1.replace(
        "function M.transform_response(raw)\n  return raw",
        'function M.transform_response(raw)\n  error("bad")',
    )
    _run(sh, "", broken)
    text = _plain(
        _run(sh, f"test demo {WIRE / 'openai' / 'chat_completion_text.json'} --no-requests")
    )
    assert "FAIL" in text
    assert "hook=transform_response" in text


def test_watch_reloads_on_save_and_stops(shell: Any, tmp_path: Path) -> None:
    sh, magics, engine = shell
    path = tmp_path / "w.lua"
    path.write_text(V1.replace('"demo"', '"watched"'))
    _run(sh, f"watch {path} --interval 0.05")
    assert engine.adapter("watched").version == "1"
    time.sleep(0.05)  # a later modification time than v1's, however coarse the clock
    path.write_text(V1.replace('"demo"', '"watched"').replace('"1"', '"9"'))
    watcher = magics.watchers[path.resolve()]
    until_sync(lambda: engine.adapter("watched").version == "9", "the reload of version 9")
    path.write_text("return {")
    until_sync(
        lambda: watcher.reloads >= 2 and watcher.last is not None and "kept" in watcher.last.plain,
        "the failed reload",
    )
    assert watcher.last is not None
    assert "kept the previous version (9)" in watcher.last.plain
    assert engine.adapter("watched").version == "9"
    assert "stopped watching" in _plain(_run(sh, "watch --stop"))
    assert not watcher.thread.is_alive()
    assert not magics.watchers


def test_adapter_logs_show_under_the_cell(shell: Any) -> None:
    sh, _, engine = shell
    _run(sh, "", V1)
    collector = next(
        h
        for h in logging.getLogger("notebook_llm.adapter").handlers
        if isinstance(h, CellLogCollector)
    )
    sh.user_ns["_engine"] = engine
    code = (
        "from notebook_llm.conformance import check_requests\n"
        "_r = check_requests(_engine.adapter('demo'))\n"
    )
    with capture_output() as cap:
        sh.run_cell(code)
    texts = [o.data.get("text/plain", "") for o in cap.outputs]
    assert any("[demo] info: sending a request" in t for t in texts), texts
    # and outside a cell the records wait for the next cell
    logging.getLogger("notebook_llm.adapter.demo").info("between cells")
    with capture_output() as cap:
        sh.run_cell("1")
    assert any("between cells" in o.data.get("text/plain", "") for o in cap.outputs)
    assert collector.level == logging.DEBUG
