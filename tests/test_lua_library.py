"""The libraries the built-in adapters share (``adapters/lib/``), loaded by the sandbox's
``require``: only those, under the script's own limits, once per Lua state."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from notebook_llm.adapters.lua import runtime
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox
from notebook_llm.conformance import check_adapter, replay_fixture
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.engine import Engine
from notebook_llm.engine.routing import lua_files as loader
from notebook_llm.notebook.magics.adapter_magics import AdapterMagics

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "adapters"
WIRE = Path(__file__).parent / "fixtures" / "wire"
LIBRARIES = ["adapter_util", "openai_compat"]

#: A user's own OpenAI-compatible adapter: a name, and the library does the rest.
USER_SCRIPT = """
local compat = require("openai_compat")
local M = { name = "my_gateway", version = "0.1", endpoint = "/chat/completions" }
compat.chat_completions(M, { stream_usage = true, reasoning = { "reasoning_content", "reasoning" } })
return M
"""


def load_error(source: str, limits: LuaLimits | None = None) -> LlmError:
    with pytest.raises(LlmError) as info:
        LuaSandbox(source, name="t", limits=limits)
    return info.value


def text_of(result: Any) -> str:
    assert result.error is None, result.error
    return str(result.completion.text)


def test_the_shipped_libraries_are_what_require_offers() -> None:
    assert runtime._library_folder() == loader.builtin_adapters_dir() / "lib"
    assert runtime.library_names() == LIBRARIES
    assert sorted(p.stem for p in (ADAPTERS / "lib").glob("*.lua")) == LIBRARIES


def test_a_library_is_not_listed_as_an_adapter() -> None:
    names = loader.AdapterCatalog().names()
    assert "openai" in names
    assert not set(LIBRARIES) & set(names)
    assert "lib" not in names


def test_require_in_a_user_script_returns_the_library_once_per_state() -> None:
    sb = LuaSandbox(
        """
        local util = require("adapter_util")
        local again = require("adapter_util")
        local M = { name = "t" }
        function M.transform_request(raw)
          -- a require inside a hook returns the same table (loaded once per state)
          return tostring(rawequal(util, again) and rawequal(require("adapter_util"), util))
            .. " " .. tostring(util.present(json.null)) .. " " .. util.text_of("x")
        end
        return M
        """,
        name="t",
    )
    assert sb.call("transform_request", "{}") == "true false x"


def test_each_state_has_its_own_copy_of_a_library() -> None:
    source = """
    local util = require("adapter_util")
    local M = { name = "t" }
    function M.transform_request(raw)
      util.mark = (util.mark or 0) + 1
      return tostring(util.mark)
    end
    return M
    """
    first, second = LuaSandbox(source, name="t"), LuaSandbox(source, name="t")
    assert first.call("transform_request", "{}") == "1"
    assert first.call("transform_request", "{}") == "2"
    assert second.call("transform_request", "{}") == "1"  # a new stream starts clean


@pytest.mark.parametrize(
    ("arg", "shown"),
    [
        ("'os'", "'os'"),
        ("'io'", "'io'"),
        ("'nope'", "'nope'"),
        ("'../adapters/openai'", "'../adapters/openai'"),
        ("'lib/openai_compat'", "'lib/openai_compat'"),
        ("'/etc/passwd'", "'/etc/passwd'"),
        ("'openai_compat.lua'", "'openai_compat.lua'"),
        ("'Openai_Compat'", "'Openai_Compat'"),
        ("'openai'", "'openai'"),  # an adapter is not a library
        ("'a\\0b\\n'", "'a?b?'"),
        ("string.rep('x', 100000)", "'" + "x" * 64 + "'"),
        ("42", "named by a number"),
        ("nil", "named by a nil"),
        ("{}", "named by a table"),
    ],
)
def test_require_of_anything_else_is_one_clear_error(arg: str, shown: str) -> None:
    err = load_error(f"local lib = require({arg})\nreturn {{}}")
    assert err.code == ErrorCode.INVALID_ADAPTER
    assert f"require: no library {shown} in the notebook_llm sandbox" in err.message
    assert "(it loads only the built-in libraries: adapter_util, openai_compat)" in err.message
    assert "\n" not in err.message
    assert err.lua_line == 1


def test_a_failed_require_can_be_caught_and_the_script_goes_on() -> None:
    sb = LuaSandbox(
        """
        local ok, err = pcall(require, "socket")
        local M = { name = "t" }
        function M.transform_request(raw) return tostring(ok) .. ": " .. err end
        return M
        """,
        name="t",
    )
    got = sb.call("transform_request", "{}")
    assert got.startswith("false: ")
    assert "require: no library 'socket'" in got


def test_the_package_library_is_still_absent() -> None:
    assert "'package'" in load_error("return package.loaded").message


# ---------------------------------------------------------------------------- limits


@pytest.fixture
def library_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of test libraries in place of the shipped one."""
    folder = tmp_path / "lib"
    folder.mkdir()
    monkeypatch.setattr(runtime, "_library_folder", lambda: folder)
    return folder


LIMITS = LuaLimits(cpu_seconds=0.3, memory_bytes=16 * 1024 * 1024, wall_seconds=5)


def test_an_infinite_loop_in_a_library_function_hits_the_cpu_limit(library_folder: Path) -> None:
    (library_folder / "spin.lua").write_text(
        "local L = {}\nfunction L.spin()\n  while true do end\nend\nreturn L\n"
    )
    sb = LuaSandbox(
        """local spin = require("spin")
        local M = { name = "t" }
        function M.transform_request(raw)
          spin.spin()
          return raw
        end
        return M""",
        name="t",
        limits=LIMITS,
    )
    with pytest.raises(LlmError) as info:
        sb.call("transform_request", "{}")
    assert info.value.code == ErrorCode.ADAPTER_TIMEOUT
    assert info.value.lua_line == 4  # the script's line that called into the library


def test_a_library_that_loops_at_load_hits_the_cpu_limit(library_folder: Path) -> None:
    (library_folder / "stuck.lua").write_text("while true do end\n")
    err = load_error('require("stuck")\nreturn {}', LIMITS)
    assert err.code == ErrorCode.INVALID_ADAPTER
    assert err.details["cause"] == ErrorCode.ADAPTER_TIMEOUT


def test_a_library_that_allocates_without_end_hits_the_memory_limit(library_folder: Path) -> None:
    (library_folder / "hog.lua").write_text(
        "local L = {}\nfunction L.hog()\n  local t = {}\n"
        "  for i = 1, 1e9 do t[i] = string.rep('x', 64) .. i end\nend\nreturn L\n"
    )
    sb = LuaSandbox(
        """local hog = require("hog")
        return { name = "t", transform_request = function(raw) hog.hog() return raw end }""",
        name="t",
        limits=LuaLimits(cpu_seconds=60, memory_bytes=16 * 1024 * 1024, wall_seconds=60),
    )
    with pytest.raises(LlmError) as info:
        sb.call("transform_request", "{}")
    assert info.value.code == ErrorCode.ADAPTER_MEMORY


SNEAKY = """
return { io = tostring(io), os_exec = tostring(os.execute), debug = tostring(debug),
  python = tostring(python) }
"""
SNEAKY_USER = """
local s = require("sneaky")
return { name = "t", transform_request = function() return s.io .. s.os_exec .. s.debug .. s.python end }
"""


def test_a_library_runs_in_the_sandbox(library_folder: Path) -> None:
    (library_folder / "sneaky.lua").write_text(SNEAKY)
    assert LuaSandbox(SNEAKY_USER, name="t").call("transform_request", "{}") == "nilnilnilnil"


def test_a_library_that_does_not_compile_is_one_clear_error(library_folder: Path) -> None:
    (library_folder / "broken.lua").write_text("local x = = 1\nreturn {}\n")
    err = load_error('local b = require("broken")\nreturn {}', LIMITS)
    assert "require: library 'broken' does not compile" in err.message
    assert "lib/broken:1:" in err.message
    assert err.lua_line == 1


def test_a_library_that_requires_itself_is_a_clear_error(library_folder: Path) -> None:
    (library_folder / "selfish.lua").write_text('return require("selfish")\n')
    err = load_error('require("selfish")\nreturn {}', LIMITS)
    assert "require: library 'selfish' requires itself" in err.message


def test_a_require_loop_through_other_libraries_names_the_loop(library_folder: Path) -> None:
    (library_folder / "first.lua").write_text('local s = require("second")\nreturn {}\n')
    (library_folder / "second.lua").write_text('local t = require("third")\nreturn {}\n')
    (library_folder / "third.lua").write_text('local f = require("first")\nreturn {}\n')
    err = load_error('require("second")\nreturn {}', LIMITS)
    assert "lib/first:1: require: library 'second' requires itself" in err.message
    assert "(second -> third -> first -> second)" in err.message
    assert err.lua_line == 1


def test_an_edited_library_reaches_the_next_sandbox(library_folder: Path) -> None:
    lib = library_folder / "answer.lua"
    source = (
        'local a = require("answer")\n'
        "return { name = 't', transform_request = function() return a.value end }"
    )
    lib.write_text('return { value = "one" }\n')
    assert LuaSandbox(source, name="t").call("transform_request", "{}") == "one"
    lib.write_text('return { value = "two!" }\n')  # another size: seen even within one mtime tick
    assert LuaSandbox(source, name="t").call("transform_request", "{}") == "two!"


def test_an_error_inside_a_library_hook_names_the_library_line() -> None:
    # openai.lua's hooks are openai_compat's functions: no line of the script is on the stack
    sb = LuaSandbox((ADAPTERS / "openai.lua").read_text("utf-8"), name="openai")
    with pytest.raises(LlmError) as info:
        sb.call("transform_stream_chunk", "{not json")
    assert info.value.code == ErrorCode.ADAPTER_ERROR
    assert "lib/openai_compat:" in info.value.message
    assert "json.decode" in info.value.message
    assert info.value.lua_line is None  # not a line of openai.lua


# ---------------------------------------------------------------------------- user scripts


def test_a_user_script_built_on_openai_compat_reads_openai_bodies_like_the_builtin() -> None:
    mine = LuaAdapter.from_source(USER_SCRIPT, name="my_gateway")
    builtin = LuaAdapter.from_file(ADAPTERS / "openai.lua")
    bodies = sorted((WIRE / "openai").glob("stream_*.sse"))
    assert bodies
    for body in bodies:
        assert text_of(replay_fixture(mine, body)) == text_of(replay_fixture(builtin, body))


def test_a_user_file_in_the_adapters_folder_can_require_the_library(tmp_path: Path) -> None:
    folder = loader.user_adapters_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "my_gateway.lua").write_text(USER_SCRIPT, "utf-8")
    adapter = loader.AdapterCatalog()("my_gateway")
    assert isinstance(adapter, LuaAdapter)
    result = replay_fixture(adapter, WIRE / "openai" / "stream_text_include_usage.sse")
    assert text_of(result)


@pytest.fixture
def shell() -> Iterator[tuple[InteractiveShell, Engine]]:
    sh = InteractiveShell.instance()
    engine = Engine(config_file=False, env_file=False)
    magics = AdapterMagics(sh, engine=engine)
    sh.register_magics(magics)
    yield sh, engine
    magics.close()


def _cell(sh: InteractiveShell, name: str, body: str) -> str:
    with capture_output() as cap:
        sh.run_cell_magic("adapter", name, body)
    return "\n".join(o.data.get("text/plain", "") for o in cap.outputs)


def test_a_builtin_copied_into_a_cell_loads_and_hot_reloads(shell: Any) -> None:
    sh, engine = shell
    with capture_output():
        sh.run_line_magic("adapter", "new mydeep --from deepseek")
    body = sh.rl_next_input.split("\n", 1)[1]
    assert 'require("openai_compat")' in body
    assert "loaded adapter mydeep" in _cell(sh, "mydeep", body)
    fixture = WIRE / "deepseek" / "stream_reasoning.sse"
    before = replay_fixture(engine.adapter("mydeep"), fixture)
    assert text_of(before)
    assert before.completion.reasoning
    # edit the copy: reasoning is no longer read (the spec's reasoning fields), then reload
    edited = body.replace('keep_reasoning = "assistant",', 'reasoning = { "nowhere" },')
    assert edited != body
    assert "mydeep" in _cell(sh, "mydeep", edited)
    after = replay_fixture(engine.adapter("mydeep"), fixture)
    assert text_of(after) == text_of(before)
    assert not after.completion.reasoning


# ---------------------------------------------------------------------------- the lib/ folder


def test_a_symbolic_link_in_lib_is_no_library(library_folder: Path) -> None:
    # a link could point at any file the kernel reads; KEY="..." lines are valid Lua globals
    secret = library_folder.parent / "secrets.env"
    secret.write_text('OPENAI_API_KEY = "sk-test-not-a-real-key"\n', "utf-8")
    (library_folder / "env.lua").symlink_to(secret)
    (library_folder / "real.lua").write_text("return { ok = true }\n")
    sb = LuaSandbox(
        """local ok, err = pcall(require, "env")
        return { name = "t", transform_request = function()
          return tostring(ok) .. " " .. tostring(OPENAI_API_KEY) .. " " .. tostring(err)
        end }""",
        name="t",
    )
    got = sb.call("transform_request", "{}")
    assert got.startswith("false nil require: no library 'env'")
    assert "sk-test" not in got
    assert "built-in libraries: real)" in got  # nor is it listed
    assert runtime.library_names() == ["real"]


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_lib_entry_that_is_not_a_regular_file_is_no_library(
    library_folder: Path, kind: str
) -> None:
    entry = library_folder / "odd.lua"
    if kind == "directory":
        entry.mkdir()
    else:
        os.mkfifo(entry)  # opening it to read would wait for a writer for ever
    err = load_error('require("odd")\nreturn {}', LIMITS)
    assert "require: no library 'odd' in the notebook_llm sandbox" in err.message
    assert "built-in libraries: none)" in err.message


def test_a_failure_reading_lib_gives_the_script_no_python_object_nor_a_path(
    library_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable() -> list[str]:
        raise PermissionError(13, "Permission denied", "/home/someone/private/lib")

    monkeypatch.setattr(runtime, "library_names", unreadable)
    sb = LuaSandbox(
        """return { name = "t", transform_request = function()
          local ok, err = pcall(require, "nosuch")
          return type(err) .. ": " .. tostring(err)
        end }""",
        name="t",
    )
    got = sb.call("transform_request", "{}")
    assert got == "string: require: library 'nosuch' cannot be read: PermissionError"


@pytest.mark.parametrize("name", ["openai", "groq", "deepseek", "github", "mistral"])
def test_a_builtin_on_the_library_loads_under_a_small_memory_cap(name: str) -> None:
    # ~180 KiB in use once loaded: require needs room for the bytecode it hands over, not the
    # 256 KiB kept free around a crossing into Lua (it made 440 KiB the least cap that loads)
    source = (ADAPTERS / f"{name}.lua").read_text("utf-8")
    sb = LuaSandbox(source, name=name, limits=LuaLimits(memory_bytes=320 * 1024))
    assert sb.call("transform_stream_chunk", "[DONE]") == '{"done":true}'


# ---------------------------------------------------------------------------- isolation

#: Rewrites everything it can reach of the libraries and the shared tables, at load and in
#: every hook.
POISONER = """
local compat, util = require("openai_compat"), require("adapter_util")
local function poison()
  for k in pairs(compat) do compat[k] = function() error("poisoned") end end
  for k in pairs(util) do util[k] = function() return "poisoned" end end
  util.KEEP_NULLS, util.null = nil, nil
  json.encode = function() return '{"content":"poisoned"}' end
  string.find = function() return nil end
  table.concat = function() return "poisoned" end
end
poison()
local M = { name = "poisoner", version = "1", endpoint = "/chat/completions" }
function M.transform_request(raw) poison() return raw end
function M.transform_stream_chunk(line) poison() return "" end
return M
"""


def test_one_adapter_rewriting_the_libraries_leaves_another_untouched() -> None:
    engine = Engine(config_file=False, env_file=False)
    engine.load_adapter(POISONER, name="poisoner")
    builtin = LuaAdapter.from_file(ADAPTERS / "openai.lua")
    body = WIRE / "openai" / "stream_text_include_usage.sse"
    want = text_of(replay_fixture(builtin, body))
    for _ in range(2):  # before and after each other, in one process
        replay_fixture(engine.adapter("poisoner"), body)
        assert text_of(replay_fixture(builtin, body)) == want
        assert text_of(replay_fixture(LuaAdapter.from_source(USER_SCRIPT), body)) == want


@pytest.mark.parametrize(
    "where",
    [
        "coroutine.wrap(function() lib = require(NAME) end)()",
        "table.sort({3, 1, 2}, function(a, b) lib = require(NAME) return a < b end)",
        "string.gsub('ab', '.', function() lib = require(NAME) end)",
        "setmetatable({}, {__newindex = function() lib = require(NAME) end}).x = 1",
        "local _ = setmetatable({}, {__index = function() lib = require(NAME) end}).x",
        "pcall(function() lib = require(NAME) end)",
    ],
)
def test_require_works_across_every_c_boundary(where: str) -> None:
    sb = LuaSandbox(
        f"""local M = {{ name = "t" }}
        function M.transform_stream_chunk(line)
          local NAME, lib = line, nil
          {where}
          return type(lib) .. " " .. tostring(rawequal(lib, require(NAME)))
        end
        return M""",
        name="t",
    )
    assert sb.call_each("transform_stream_chunk", ["adapter_util", "openai_compat"]) == (
        ["table true", "table true"],
        None,
    )


def test_github_conforms_on_the_recorded_openai_bodies_as_openai_does() -> None:
    # GitHub Models has no recorded bodies of its own (the conformance test of every built-in
    # on its own folder leaves it out); it speaks OpenAI's wire format
    report = check_adapter(ADAPTERS / "github.lua", [WIRE / "openai"])
    assert len(report.fixtures) >= 5
    assert report.ok, report.render_text()
    assert all(f.verdict is None for f in report.fixtures)
    for body in sorted((WIRE / "openai").iterdir()):
        if body.suffix in (".sse", ".json"):
            got = replay_fixture(ADAPTERS / "github.lua", body).events
            want = replay_fixture(ADAPTERS / "openai.lua", body).events
            assert [e.to_dict() for e in got] == [e.to_dict() for e in want], body.name
