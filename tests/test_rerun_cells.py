"""Re-running a cell, and the line numbers of ``%%adapter`` cells, as a notebook user meets them.

Re-running a cell is what notebook users do all day: a cell that adds a provider or registers an
adapter must run again and replace what it defined, while a name a plugin owns stays a conflict
shown in one line. An ``%%adapter`` cell's errors name the line the notebook shows (the magic's
own line is line 1), for compile errors and for errors of a running hook alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from notebook_llm import Engine, LlmAdapter
from notebook_llm.core.protocol import (
    BlockEnd,
    BlockStart,
    Event,
    Finish,
    FinishReason,
    GenerateOptions,
    TextBlock,
    TextDelta,
)
from notebook_llm.engine.session import default_engine, set_default_engine


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    """The in-process shell, the extension loaded, a fresh session engine (no user config)."""
    set_default_engine(Engine(config_file=False, env_file=False, retries=0))
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "notebook_llm")
    magics = shell.magics_manager.registry["LlmMagics"]
    magics.default_provider = None
    magics.default_model = None
    yield shell
    shell.run_line_magic("unload_ext", "notebook_llm")
    set_default_engine(None)


class Says(LlmAdapter):
    """A Python adapter answering one fixed text."""

    name = "says"

    def __init__(self, text: str) -> None:
        self.text = text

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        yield BlockStart(0, "text")
        yield TextDelta(0, self.text)
        yield BlockEnd(0, TextBlock(self.text))
        yield Finish(FinishReason("stop"))


def _run(ip: InteractiveShell, code: str) -> tuple[Any, str]:
    with capture_output() as cap:
        result = ip.run_cell(code)
    shown = " ".join(str(o.data.get("text/plain", "")) for o in cap.outputs)
    return result, cap.stdout + cap.stderr + shown


ADD_PROVIDER = """\
from notebook_llm.engine.session import default_engine
default_engine().add_provider("local", adapter="openai", base_url="http://127.0.0.1:{port}/v1",
                              model="m")
"""


def test_rerunning_an_add_provider_cell_replaces_the_provider(ip: InteractiveShell) -> None:
    first, _ = _run(ip, ADD_PROVIDER.format(port=8080))
    again, out = _run(ip, ADD_PROVIDER.format(port=9090))
    assert first.success
    assert again.success, out
    assert "DUPLICATE_ADAPTER" not in out
    assert default_engine().provider("local").base_url == "http://127.0.0.1:9090/v1"


def test_rerunning_a_register_adapter_cell_serves_the_new_adapter(ip: InteractiveShell) -> None:
    ip.user_ns["Says"] = Says
    code = 'default_engine().register_adapter(["mine"], Says({text!r}))'
    ip.user_ns["default_engine"] = default_engine
    assert _run(ip, code.format(text="first"))[0].success
    result, out = _run(ip, code.format(text="second"))
    assert result.success, out
    assert default_engine().complete_sync("mine", prompt="x").text == "second"


def test_rerunning_adapter_cells_and_loads_reloads(ip: InteractiveShell, tmp_path: Any) -> None:
    script = (
        'return { name = "again", version = "%s", transform_request = function(r) return r end,\n'
        "         transform_response = function(r) return r end }\n"
    )
    path = tmp_path / "again_file.lua"
    path.write_text(script % "1")
    for version in ("1", "2"):
        result, out = _run(ip, "%%adapter again\n" + script % version)
        assert result.success
        assert "DUPLICATE" not in out
        assert default_engine().adapter("again").version == version, out
    for _ in range(2):
        assert _run(ip, f"%adapter load {path}")[0].success
        name = default_engine().load_adapter(path)
        assert name == "again"  # the name the script declares


def test_a_plugin_provider_name_is_one_line(ip: InteractiveShell) -> None:
    code = 'from notebook_llm.engine.session import default_engine\ndefault_engine().add_provider("mock", adapter="openai")\n'
    result, out = _run(ip, code)
    assert not result.success
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert lines[0].startswith("LlmError: [DUPLICATE_ADAPTER] provider 'mock' comes from a plugin")
    assert "another name" in lines[0]
    assert "Traceback" not in out
    assert default_engine().adapter_of("mock").name == "mock"  # the built-in still serves it


def test_other_exceptions_keep_their_traceback(ip: InteractiveShell) -> None:
    result, out = _run(ip, "1/0")
    assert not result.success
    assert "Traceback" in out


def test_unload_ext_gives_llm_errors_their_traceback_back(ip: InteractiveShell) -> None:
    ip.run_line_magic("unload_ext", "notebook_llm")
    try:
        code = (
            "from notebook_llm import LlmError, ErrorCode\nraise LlmError('x', ErrorCode.UNKNOWN)"
        )
        _, out = _run(ip, code)
        assert "Traceback" in out
    finally:
        ip.run_line_magic("load_ext", "notebook_llm")


# ------------------------------------------------------------------ line numbers

BROKEN_AT_CELL_LINE_4 = """\
local adapter = { name = "numbered", version = "1" }
function adapter.transform_request(raw)
  return raw +
end
return adapter
"""

HOOK_FAILS_AT_CELL_LINE_9 = """\
local adapter = { name = "boom", version = "1", endpoint = "/chat/completions" }
function adapter.transform_request(raw)
  local req = json.decode(raw)
  return json.encode({ model = req.model, messages = req.messages, stream = req.stream })
end
function adapter.transform_stream_chunk(raw)
  local c = json.decode(raw)
  local missing = nil
  return missing.field
end
function adapter.transform_response(raw) return "" end
return adapter
"""


def test_compile_error_names_the_cells_line(ip: InteractiveShell) -> None:
    # Cell line 1 is "%%adapter"; "end" after the dangling "+" is line 5 of the cell.
    _, out = _run(ip, "%%adapter\n" + BROKEN_AT_CELL_LINE_4)
    assert "line 5" in out
    assert ">    5 | end" in out
    assert "     4 |   return raw +" in out


def test_runtime_error_names_the_cells_line_and_shows_the_code(ip: InteractiveShell) -> None:
    from notebook_llm.adapters.mock.shared import shared_server

    assert _run(ip, "%%adapter boom\n" + HOOK_FAILS_AT_CELL_LINE_9)[0].success
    default_engine().add_provider(
        "boomer", adapter="boom", base_url=shared_server().url + "/v1", model="echo"
    )
    with capture_output() as cap:
        ip.run_cell("%%llm boomer\nhello")
    plain = "\n".join(str(o.data.get("text/plain", "")) for o in cap.outputs)
    html = "\n".join(str(o.data.get("text/html", "")) for o in cap.outputs)
    assert "ADAPTER_ERROR" in plain
    assert "failed at line 10" in plain  # `return missing.field` is line 10 of the cell
    assert ">   10 |   return missing.field" in plain
    assert "     9 |   local missing = nil" in plain
    assert "return missing.field" in html
    assert "background:#fdd" in html


def test_show_numbers_a_cell_adapter_as_the_cell(ip: InteractiveShell) -> None:
    _run(ip, "%%adapter boom\n" + HOOK_FAILS_AT_CELL_LINE_9)
    source = default_engine().adapter("boom").source  # type: ignore[attr-defined]
    assert source.splitlines()[9] == "  return missing.field"  # line 10, as in the cell
    assert source.splitlines()[0].startswith("--")  # the magic's line, a Lua comment
