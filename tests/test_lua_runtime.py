"""The Lua sandbox: escapes, limits, error reporting, built-ins, threads."""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

import pytest

from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox
from notebook_llm.core.errors import ErrorCode, LlmError

FAST = LuaLimits(cpu_seconds=0.2, memory_bytes=32 * 1024 * 1024)
#: For the tests of the memory limit and of the stack: the same memory cap with a CPU budget
#: far beyond the work, so the limit under test is the only one that can fire (filling 32 MiB
#: takes about as long as FAST's 0.2 s budget, and a busy machine decided which won).
ROOMY = LuaLimits(cpu_seconds=30.0, memory_bytes=FAST.memory_bytes, wall_seconds=300.0)

RUNNER = """
local M = {name = "runner"}
function M.run(code) return assert(load(code, "=snippet"))() end
function M.echo(x) return x end
return M
"""


@pytest.fixture
def sb() -> LuaSandbox:
    return LuaSandbox(RUNNER, name="runner", limits=FAST)


@pytest.fixture
def roomy() -> LuaSandbox:
    """The runner with :data:`ROOMY` limits: only memory and the stack can stop it."""
    return LuaSandbox(RUNNER, name="runner", limits=ROOMY)


def run(sb: LuaSandbox, code: str) -> Any:
    return sb.call("run", code)


def raises(sb: LuaSandbox, code: str, expected: str = ErrorCode.ADAPTER_ERROR) -> LlmError:
    with pytest.raises(LlmError) as ei:
        run(sb, code)
    assert ei.value.code == expected, str(ei.value)
    assert sb.call("echo", "alive") == "alive"  # the sandbox is still usable
    return ei.value


# ---------------------------------------------------------------------------- escapes


@pytest.mark.parametrize(
    "code",
    [
        "return os.execute('echo pwned')",
        "return os.getenv('HOME')",
        "return os.remove('/tmp/x')",
        "return io.open('/etc/passwd')",
        "return require('os')",
        "return dofile('/etc/passwd')",
        "return loadfile('/etc/passwd')",
        "return debug.getregistry()",
        "return debug.sethook()",
        "return string.dump(print)",
        "return ('').dump(print)",
        "return package.loadlib('libc.so.6', 'system')",
        "return python.eval('1')",
        "return python.builtins",
        "return getmetatable('').__index.dump(print)",
        "return collectgarbage('stop')",
        "return collectgarbage('generational')",
        "return setmetatable('', {})",
        "return _G.os.execute('x')",
        "return getfenv(1)",
    ],
)
def test_escape_attempts_fail(sb: LuaSandbox, code: str) -> None:
    raises(sb, code)


@pytest.mark.parametrize(
    "code",
    [
        "return load(string.char(27) .. 'LuaT\\0\\25\\147\\r\\n\\26\\n')",
        "return load('\\27Lua', 'x', 'b')",
        "return load(function() return nil end)",
    ],
)
def test_load_bytecode_refused(sb: LuaSandbox, code: str) -> None:
    assert run(sb, code) is None  # load returns nil, message


def test_load_text_uses_sandbox_env(sb: LuaSandbox) -> None:
    assert run(sb, "return load('return os.execute')()") is None
    assert run(sb, "return load('return type(json)')()") == "table"


def test_string_metatable_is_protected(sb: LuaSandbox) -> None:
    assert run(sb, "return type(getmetatable('').__index.dump)") == "nil"
    assert run(sb, "local mt = getmetatable(''); mt.__index = nil; return ('x'):upper()") == "X"
    assert run(sb, "getmetatable('').__gc = error; return ('abc'):upper()") == "ABC"


def test_no_python_object_reachable(sb: LuaSandbox) -> None:
    names = [
        "json",
        "log",
        "http_get",
        "http_post",
        "hmac_sha256_hex",
        "sha256_hex",
        "base64_encode",
        "tohex",
        "print",
        "load",
    ]
    for n in names:
        # every exposed built-in is a plain Lua function/table without a metatable
        assert run(sb, f"return type({n})") in ("function", "table")
        assert run(sb, f"return getmetatable({n}) == nil") is True
    # walk every value reachable from the env: no userdata anywhere
    found = run(
        sb,
        """
        local seen, bad = {}, {}
        local function walk(v, path)
          if type(v) == 'userdata' then bad[#bad+1] = path end
          if type(v) ~= 'table' or seen[v] then return end
          seen[v] = true
          for k, x in pairs(v) do walk(x, path .. '.' .. tostring(k)) end
          local mt = getmetatable(v)
          if type(mt) == 'table' then walk(mt, path .. '<mt>') end
        end
        walk(_G, '_G')
        walk(getmetatable(''), 'strmt')
        return table.concat(bad, ',')
        """,
    )
    assert found == ""


def test_errors_from_builtins_are_strings(sb: LuaSandbox) -> None:
    code = """
    local kinds = {}
    for _, f in ipairs({function() return http_get({}) end, function() return tohex(nil) end,
                        function() return hmac_sha256_hex(1, {}) end,
                        function() return json.decode({}) end,
                        function() return sha256_hex('\\255') end}) do
      local ok, e = pcall(f)
      kinds[#kinds + 1] = type(e)
    end
    return table.concat(kinds, ',')
    """
    assert run(sb, code) == "string,string,string,string,string"


def test_env_vars_unreachable(sb: LuaSandbox) -> None:
    os.environ["NBLLM_SECRET_TEST"] = "hunter2hunter2"
    try:
        assert run(sb, "return os.getenv") is None
        assert run(sb, "return type(os.time())") == "number"
    finally:
        del os.environ["NBLLM_SECRET_TEST"]


def test_error_with_table_value(sb: LuaSandbox) -> None:
    err = raises(sb, "error({code = 42})")
    assert "error object is a table" in err.message
    assert '"code":42' in err.message
    raises(sb, "error()")
    raises(sb, "error(setmetatable({}, {__tostring = function() while true do end end}))")


# ---------------------------------------------------------------------------- limits


def test_string_rep_bomb(roomy: LuaSandbox) -> None:
    raises(roomy, "return #string.rep('x', 1 << 40)", ErrorCode.ADAPTER_ERROR)
    raises(
        roomy, "local s = string.rep('x', 1 << 24) return #(s .. s .. s)", ErrorCode.ADAPTER_MEMORY
    )


def test_table_bomb(roomy: LuaSandbox) -> None:
    raises(roomy, "local t = {} for i = 1, 1e9 do t[i] = {i} end", ErrorCode.ADAPTER_MEMORY)


def test_deep_recursion(roomy: LuaSandbox) -> None:
    err = raises(roomy, "local function f() return 1 + f() end return f()")
    assert "stack overflow" in err.message


def test_infinite_loop_times_out(sb: LuaSandbox) -> None:
    err = raises(sb, "while true do end", ErrorCode.ADAPTER_TIMEOUT)
    assert err.adapter == "runner"
    assert err.hook == "run"


def test_pcall_cannot_swallow_timeout(sb: LuaSandbox) -> None:
    raises(
        sb, "while true do pcall(function() while true do end end) end", ErrorCode.ADAPTER_TIMEOUT
    )
    raises(
        sb,
        "while true do xpcall(function() while true do end end, function() while true do end end) end",
        ErrorCode.ADAPTER_TIMEOUT,
    )
    # swallowing it once and returning normally still reports the timeout
    raises(sb, "pcall(function() while true do end end) return 'ok'", ErrorCode.ADAPTER_TIMEOUT)


def test_gc_metamethod_refused(sb: LuaSandbox) -> None:
    err = raises(sb, "setmetatable({}, {__gc = function() while true do end end}) collectgarbage()")
    assert "__gc" in err.message


def test_xpcall_handler_runs_and_is_budgeted(sb: LuaSandbox) -> None:
    assert (
        run(sb, "return select(2, xpcall(error, function(e) return 'h:' .. e end, 'x', 0))")
        == "h:x"
    )
    assert run(sb, "return xpcall(function(a, b) return a + b end, print, 1, 2)") is True
    raises(
        sb,
        "return xpcall(function() while true do end end, function() while true do end end)",
        ErrorCode.ADAPTER_TIMEOUT,
    )


def test_coroutine_loop_times_out(sb: LuaSandbox) -> None:
    raises(
        sb,
        "local co = coroutine.create(function() while true do end end) return coroutine.resume(co)",
        ErrorCode.ADAPTER_TIMEOUT,
    )
    raises(sb, "coroutine.wrap(function() while true do end end)()", ErrorCode.ADAPTER_TIMEOUT)
    raises(
        sb,
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
        ErrorCode.ADAPTER_TIMEOUT,
    )


def test_coroutines_work(sb: LuaSandbox) -> None:
    code = """
    local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end)
    return gen() + gen() + gen()
    """
    assert run(sb, code) == 6


def test_collectgarbage_count_allowed(sb: LuaSandbox) -> None:
    assert isinstance(run(sb, "return collectgarbage('count')"), float)


HOOK_LOOPS = """
local M = {name = "loops"}
function M.build_headers(meta) while true do end end
function M.transform_request(raw) while true do end end
function M.transform_response(raw) local t = {} while true do t[#t % 10 + 1] = raw end end
function M.transform_stream_chunk(line) while true do end end
return M
"""


@pytest.mark.parametrize(
    ("hook", "arg"),
    [
        ("build_headers", {"url": "u", "source": {"name": "x"}}),
        ("transform_request", "{}"),
        ("transform_response", "{}"),
        ("transform_stream_chunk", "{}"),
    ],
)
def test_infinite_loop_in_every_hook(hook: str, arg: Any) -> None:
    sb = LuaSandbox(HOOK_LOOPS, limits=FAST)
    with pytest.raises(LlmError) as ei:
        sb.call(hook, arg)
    assert ei.value.code == ErrorCode.ADAPTER_TIMEOUT
    assert ei.value.hook == hook
    assert ei.value.adapter == "loops"
    assert ei.value.lua_line is not None


def test_infinite_loop_at_top_level() -> None:
    with pytest.raises(LlmError) as ei:
        LuaSandbox("while true do end return {}", name="top", limits=FAST)
    assert ei.value.code == ErrorCode.INVALID_ADAPTER
    assert ei.value.details["cause"] == ErrorCode.ADAPTER_TIMEOUT
    assert ei.value.lua_line == 1


def test_memory_bomb_at_top_level() -> None:
    with pytest.raises(LlmError) as ei:
        LuaSandbox("local t = {} for i = 1, 1e9 do t[i] = i end return {}", limits=ROOMY)
    assert ei.value.code == ErrorCode.INVALID_ADAPTER
    assert ei.value.details["cause"] == ErrorCode.ADAPTER_MEMORY


# ---------------------------------------------------------------------------- load / errors


def test_syntax_error_is_invalid_adapter_with_line() -> None:
    with pytest.raises(LlmError) as ei:
        LuaSandbox("local M = {}\n\nfunction M.x(\nreturn M", name="broken")
    assert ei.value.code == ErrorCode.INVALID_ADAPTER
    assert ei.value.lua_line == 4
    assert ei.value.adapter == "broken"
    assert "broken:4:" in ei.value.message


def test_runtime_error_at_load_and_non_table() -> None:
    with pytest.raises(LlmError) as ei:
        LuaSandbox("local x\nlocal y = x.z\nreturn {}", name="rt")
    assert ei.value.code == ErrorCode.INVALID_ADAPTER
    assert ei.value.lua_line == 2
    with pytest.raises(LlmError) as ei:
        LuaSandbox("return 42", name="num")
    assert ei.value.code == ErrorCode.INVALID_ADAPTER
    assert "table" in ei.value.message


def test_runtime_error_names_adapter_hook_and_line() -> None:
    src = 'local M = {name = "acme"}\nfunction M.transform_request(raw)\n  local x\n  return x.y\nend\nreturn M'
    sb = LuaSandbox(src, name="file")
    with pytest.raises(LlmError) as ei:
        sb.call("transform_request", "{}")
    err = ei.value
    assert err.code == ErrorCode.ADAPTER_ERROR
    assert (err.adapter, err.hook, err.lua_line) == ("acme", "transform_request", 4)
    assert "acme" in err.message
    assert "transform_request" in err.message
    assert "line 4" in err.message


def test_missing_hook_and_bad_return() -> None:
    sb = LuaSandbox("return {f = function() return print end, g = function() return '\\255' end}")
    with pytest.raises(LlmError, match="no function 'nope'"):
        sb.call("nope")
    with pytest.raises(LlmError, match="function"):
        sb.call("f")
    with pytest.raises(LlmError, match="UTF-8"):
        sb.call("g")


def test_meta_and_hooks() -> None:
    src = """
    return {name = "acme", version = "2", headers = {["X-Key"] = "v", N = 5},
            build_headers = function(meta) return {A = meta.url, S = meta.source.name} end,
            transform_request = function(raw) return raw end}
    """
    sb = LuaSandbox(src, name="given")
    assert sb.adapter_name == "acme"
    assert sb.meta() == {
        "name": "acme",
        "version": "2",
        "endpoint": "/chat/completions",
        "headers": {"X-Key": "v", "N": "5"},
    }
    full = LuaSandbox('return {stream_endpoint = "/s/{model}", stream_format = "ndjson", n = 2}')
    assert full.meta()["stream_endpoint"] == "/s/{model}"
    assert full.meta()["stream_format"] == "ndjson"
    assert full.meta()["n"] == 2
    assert full.meta()["endpoint"] == "/chat/completions"
    assert sb.has_hook("build_headers")
    assert sb.has_hook("transform_request")
    assert not sb.has_hook("transform_stream_chunk")
    meta = {
        "url": "https://x/y",
        "method": "POST",
        "body": "{}",
        "api_key": "k",
        "timestamp": 1,
        "source": {"name": "s"},
    }
    assert sb.call("build_headers", meta) == {"A": "https://x/y", "S": "s"}
    assert LuaSandbox("return {}", name="plain").adapter_name == "plain"
    assert sb.clone().call("transform_request", "{}") == "{}"


def test_state_is_per_sandbox() -> None:
    src = "local n = 0 return {inc = function() n = n + 1 return n end}"
    a, b = LuaSandbox(src), LuaSandbox(src)
    assert [a.call("inc"), a.call("inc"), b.call("inc")] == [1, 2, 1]


# ---------------------------------------------------------------------------- built-ins


class FakeHttp:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None]] = []

    def get(self, url: str) -> tuple[int, str]:
        self.calls.append(("GET", url, None))
        return 200, '{"ok":true}'

    def post(self, url: str, body: str) -> tuple[int, str]:
        self.calls.append(("POST", url, body))
        if "fail" in url:
            raise ConnectionError("boom")
        return 201, body


def test_http_envelopes() -> None:
    http = FakeHttp()
    src = """return {g = function(u) return http_get(u) end,
                      p = function(u, b) return http_post(u, b) end}"""
    sb = LuaSandbox(src, http=http)
    assert json.loads(sb.call("g", "https://a/b")) == {
        "url": "https://a/b",
        "status": 200,
        "body": '{"ok":true}',
    }
    assert json.loads(sb.call("p", "https://a/c", "xyz")) == {
        "url": "https://a/c",
        "status": 201,
        "body": "xyz",
    }
    assert json.loads(sb.call("p", "https://fail", "x")) == {
        "url": "https://fail",
        "error": "boom",
        "code": "TRANSPORT",
    }
    assert http.calls[0] == ("GET", "https://a/b", None)


def test_http_time_not_counted() -> None:
    class SlowHttp(FakeHttp):
        def get(self, url: str) -> tuple[int, str]:
            import time

            end = time.thread_time() + 0.3
            while time.thread_time() < end:  # burns CPU inside the bridge
                pass
            return 200, ""

    sb = LuaSandbox(
        "return {g = function() return http_get('u') end}", http=SlowHttp(), limits=FAST
    )
    assert json.loads(sb.call("g"))["status"] == 200


def test_tohex_stopped_while_building_its_table_is_whole_on_the_next_call() -> None:
    """tohex builds its byte table on first use; a build cut short by the memory limit must not
    leave a partial table behind (bytes missing from it would pass through unconverted)."""
    src = """
    local hog = {}
    return {
      fill = function()
        pcall(function() while true do hog[#hog + 1] = {#hog} end end)
        local built = pcall(tohex, "a")
        hog = {}
        collectgarbage()
        return tostring(built)
      end,
      t = function(x) return tohex(x) end,
    }"""
    sb = LuaSandbox(src, limits=LuaLimits(cpu_seconds=30.0, memory_bytes=2 * 1024 * 1024))
    assert sb.call("fill") == "false"  # the first build ran out of memory
    assert sb.call("t", "AZaz~") == "415a617a7e"


def test_hash_helpers() -> None:
    import base64
    import hashlib
    import hmac

    src = """return {h = function(k, m) return hmac_sha256_hex(k, m) end,
                      s = function(x) return sha256_hex(x) end,
                      b = function(x) return base64_encode(x) end,
                      t = function(x) return tohex(x) end,
                      bin = function() return base64_encode('\\0\\255\\128') end}"""
    sb = LuaSandbox(src)
    assert sb.call("h", "key", "msg") == hmac.new(b"key", b"msg", hashlib.sha256).hexdigest()
    assert sb.call("s", "abc") == hashlib.sha256(b"abc").hexdigest()
    assert sb.call("b", "héllo") == base64.b64encode("héllo".encode()).decode()
    assert sb.call("t", "AZ") == "415a"
    assert sb.call("bin") == base64.b64encode(b"\x00\xff\x80").decode()


def test_log_redacts_and_calls_back(caplog: pytest.LogCaptureFixture) -> None:
    from notebook_llm.core.redaction import register_secret

    register_secret("sk-supersecretvalue123")
    seen: list[tuple[str, str]] = []
    src = """return {name = "logger", f = function()
        log("warn", "key is sk-supersecretvalue123")
        print("a", 1, nil)
      end}"""
    sb = LuaSandbox(src, log=lambda lvl, msg: seen.append((lvl, msg)))
    with caplog.at_level(logging.DEBUG, logger="notebook_llm.adapter.logger"):
        sb.call("f")
    assert seen == [("warn", "key is ***"), ("info", "a\t1\tnil")]
    assert "sk-supersecretvalue123" not in caplog.text
    assert any(r.name == "notebook_llm.adapter.logger" for r in caplog.records)


# ---------------------------------------------------------------------------- threads


def test_concurrent_sandboxes_in_threads() -> None:
    src = """return {f = function(s)
        local d = json.decode(s) local x = 0 for i = 1, 20000 do x = x + i end
        d.sum = x return json.encode(d) end,
      loop = function() while true do end end}"""
    errors: list[BaseException] = []
    results: list[Any] = []

    def worker(i: int) -> None:
        try:
            sb = LuaSandbox(src, name=f"t{i}", limits=FAST)
            for j in range(50):
                out = json.loads(sb.call("f", json.dumps({"i": i, "j": j})))
                assert out == {"i": i, "j": j, "sum": 200010000}
            with pytest.raises(LlmError) as ei:
                sb.call("loop")
            assert ei.value.code == ErrorCode.ADAPTER_TIMEOUT
            results.append(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(results) == list(range(6))


def test_json_marker_metatables_cannot_be_given_a_finalizer() -> None:
    # A __gc finalizer runs with the CPU-limit hook off: reaching json's marker metatables
    # must not be a way to plant one.
    script = """
    return { transform_request = function(s)
      local mt = getmetatable(json.array())
      if type(mt) == "table" then mt.__gc = function() while true do end end end
      local t = json.array(); t = nil; collectgarbage()
      return type(mt)
    end, transform_stream_chunk = function(s) return s end }
    """
    sb = LuaSandbox(script, name="gc")
    assert sb.call("transform_request", "{}") == "string"  # a protected name, not the table
    assert sb.call("transform_request", "{}") == "string"


def test_replacing_json_encode_in_a_script_does_not_break_the_runtime() -> None:
    script = """
    json.encode = function() return "not json" end
    json.decode = nil
    return { name = "rude", transform_request = function(s) return s end,
             transform_stream_chunk = function(s) return {content = "x"} end }
    """
    sb = LuaSandbox(script, name="rude")
    assert sb.meta()["name"] == "rude"
    assert sb.call("transform_stream_chunk", "{}") == {"content": "x"}  # encoded by our codec


def test_json_array_and_object_still_mark_decoded_tables() -> None:
    sb = LuaSandbox(
        "return { transform_request = function(s) local t = json.decode(s);"
        " return json.encode(json.object(json.array(t))) end,"
        " transform_stream_chunk = function(s) return s end }",
        name="mark",
    )
    assert sb.call("transform_request", "[]") == "{}"


def test_http_calls_count_against_a_wall_clock_budget() -> None:
    import time as _time

    from notebook_llm.adapters.lua.runtime import LuaLimits

    calls: list[str] = []

    class SlowHttp:
        def get(self, url: str) -> tuple[int, str]:
            calls.append(url)
            _time.sleep(0.3)
            return 200, "ok"

        def post(self, url: str, body: str) -> tuple[int, str]:  # pragma: no cover
            return self.get(url)

    script = """
    return { transform_request = function(s)
      while true do http_get("http://127.0.0.1:9/slow") end
    end, transform_stream_chunk = function(s) return s end }
    """
    sb = LuaSandbox(script, name="slowhttp", http=SlowHttp(), limits=LuaLimits(wall_seconds=1.0))
    with pytest.raises(LlmError) as info:
        sb.call("transform_request", "{}")
    assert info.value.code == "ADAPTER_TIMEOUT"
    assert "time budget of 1 s" in info.value.message
    # Each request takes at least 0.3 s, so at most four of them start within the 1 s budget,
    # however slow the machine: the loop was cut by the wall budget (not by the CPU budget,
    # which a loop that waits on the network hardly uses).
    assert 1 <= len(calls) <= 4


def test_call_each_returns_what_succeeded_before_a_failure() -> None:
    sb = LuaSandbox(
        "return { transform_request = function(s) return s end,"
        " transform_stream_chunk = function(s) if s == 'bad' then error('no') end"
        " if s == 'skip' then return nil end return s:upper() end }",
        name="each",
    )
    assert sb.call_each("transform_stream_chunk", ["a", "skip", "b"]) == (["A", "", "B"], None)
    results, error = sb.call_each("transform_stream_chunk", ["a", "bad", "c"])
    assert results == ["A"]
    assert error is not None
    assert error.code == "ADAPTER_ERROR"
    assert error.lua_line == 1


def test_call_each_results_holding_nul_bytes_or_numbers_come_back_whole() -> None:
    # Results cross to Python joined with NUL bytes; one that holds a NUL itself, or is not a
    # string, must make Python read them one by one instead of splitting them wrongly.
    sb = LuaSandbox(
        "return { transform_request = function(s) return s end,"
        " transform_stream_chunk = function(s) if s == 'n' then return 5 end"
        " if s == 'z' then return 'a\\0b' end return s end }",
        name="nul",
    )
    assert sb.call_each("transform_stream_chunk", ["x", "z", "", "y"]) == (
        ["x", "a\0b", "", "y"],
        None,
    )
    assert sb.call_each("transform_stream_chunk", ["x", "n", "y"]) == (["x", 5, "y"], None)
    assert sb.call_each("transform_stream_chunk", []) == ([], None)
    assert sb.call_each("transform_stream_chunk", [""]) == ([""], None)


def test_error_messages_quoting_a_cut_character_reach_python_as_text() -> None:
    sb = LuaSandbox(
        "return { transform_request = function(s) return s end,"
        " transform_stream_chunk = function(s) return json.decode(s) end }",
        name="cut",
    )
    with pytest.raises(LlmError) as info:
        sb.call("transform_stream_chunk", "\ufffd\ufffd\ufffd")
    assert info.value.code == "ADAPTER_ERROR"
    assert "json.decode" in info.value.message


# ---------------------------------------------------------------------------- trusted code vs
# script metamethods (found in review): converting a result reads the script's tables, and a
# table comparison can call a script's __eq.


def test_converting_a_result_runs_under_the_budget_and_the_sandbox_stays_usable() -> None:
    # 30^5 leaves: the conversion to JSON alone is far over 0.2 s of CPU.
    sb = LuaSandbox(RUNNER, name="runner", limits=LuaLimits(0.2, 512 * 1024 * 1024))
    with pytest.raises(LlmError) as info:
        run(
            sb,
            "local t = {} for i = 1, 30 do t[i] = i end"
            " for d = 1, 4 do local n = {} for i = 1, 30 do n[i] = t end t = n end return t",
        )
    assert info.value.code == ErrorCode.ADAPTER_TIMEOUT
    for _ in range(3):  # the over-budget hook does not stick to later calls
        assert sb.call("echo", "alive") == "alive"
        assert run(sb, "return {x = json.null, y = {}}") == {"x": None, "y": {}}


def test_a_result_too_big_to_convert_is_a_memory_error() -> None:
    # The CPU budget is not the limit under test: converting reads every byte (and is charged).
    sb = LuaSandbox(RUNNER, name="runner", limits=LuaLimits(cpu_seconds=5, memory_bytes=32 << 20))
    raises(
        sb,
        "local s = string.rep('x', 1024 * 1024) local t = {} for i = 1, 40 do t[i] = s end"
        " return t",
        ErrorCode.ADAPTER_MEMORY,
    )


def test_eq_metamethods_on_a_result_are_never_called(sb: LuaSandbox) -> None:
    # A table comparison in trusted code would call them (outside the budget, or lying about
    # being json.null): the codec compares with rawequal.
    out = run(
        sb,
        "local loop = setmetatable({}, {__eq = function() while true do end end})"
        " local liar = setmetatable({}, {__eq = function() return true end})"
        " return {a = liar, b = loop, c = json.array({liar})}",
    )
    assert out == {"a": {}, "b": {}, "c": [{}]}


def test_json_markers_cannot_take_over_null_or_a_foreign_metatable(sb: LuaSandbox) -> None:
    assert "cannot mark json.null" in raises(sb, "json.array(json.null)").message
    assert "cannot mark json.null" in raises(sb, "json.object(json.null)").message
    assert "metatable of its own" in raises(sb, "json.array(setmetatable({}, {}))").message
    # the markers themselves can be switched, and null is still null afterwards
    assert run(sb, "return json.encode(json.array(json.object({})))") == "[]"
    assert (
        run(sb, "return tostring(json.null) .. tostring(json.is_array(json.null))") == "nullfalse"
    )


def test_a_number_key_and_the_same_string_key_are_refused(sb: LuaSandbox) -> None:
    err = raises(sb, 'return json.encode(json.object({[1] = "n", ["1"] = "s"}))')
    assert "both as a number and as a string" in err.message


def test_call_each_keeps_the_results_before_a_table_holding_invalid_utf8() -> None:
    sb = LuaSandbox(
        "return { transform_request = function(s) return s end,"
        " transform_stream_chunk = function(s) if s == 'bad' then return {t = '\\255'} end"
        " return {t = s} end }",
        name="utf8",
    )
    results, error = sb.call_each("transform_stream_chunk", ["a", "b", "bad", "c"])
    assert [json.loads(r) for r in results] == [{"t": "a"}, {"t": "b"}]
    assert error is not None
    assert error.code == ErrorCode.ADAPTER_ERROR
    assert "not valid UTF-8" in error.message


def test_call_each_parsed_hands_back_what_json_encode_wrote_as_dicts() -> None:
    sb = LuaSandbox(
        """return { transform_request = function(s) return s end,
        transform_stream_chunk = function(s)
          if s == 'skip' then return nil end
          if s == 'empty' then return "" end
          if s == 'none' then return json.encode({}) end
          if s == 'own' then return '{"content":"mine"}' end
          if s == 'arr' then return json.encode(json.array({ 1 })) end
          if s == 'null' then return json.encode(json.null) end
          if s == 'tbl' then return { content = "table" } end
          if s == 'bad' then error('no') end
          if s == 'cut' then return json.encode({ content = "\\xff" }) end
          return json.encode({ ['k"' .. s] = s .. "\\n" })
        end }""",
        name="parsed",
    )
    hook = "transform_stream_chunk"
    items = ["a", "skip", "b", "empty", "none", "tbl", "a"]
    assert sb.call_each(hook, items, parsed=True) == (
        [{'k"a': "a\n"}, "", {'k"b': "b\n"}, "", {}, {"content": "table"}, {'k"a': "a\n"}],
        None,
    )
    # without parsed, the same results as text
    assert sb.call_each(hook, ["a", "skip"]) == (['{"k\\"a":"a\\n"}', ""], None)
    # a text the script wrote itself, or JSON that is not an object, is left to Python's
    # checks with its own message: the whole batch comes back as text
    for odd, text in (("own", '{"content":"mine"}'), ("arr", "[1]"), ("null", "null")):
        assert sb.call_each(hook, ["a", odd], parsed=True) == (['{"k\\"a":"a\\n"}', text], None)
    results, error = sb.call_each(hook, ["a", "bad", "b"], parsed=True)
    assert results == [{'k"a': "a\n"}]
    assert error is not None
    assert error.code == "ADAPTER_ERROR"
    results, error = sb.call_each(hook, ["a", "cut"], parsed=True)
    assert results == [{'k"a': "a\n"}]
    assert error is not None
    assert "not valid UTF-8" in error.message


def test_call_each_parsed_falls_back_to_the_texts_if_the_array_does_not_parse() -> None:
    # The array is the encoder's own output and always parses; were it ever not to, the texts
    # must still come back (each then checked by the caller with its own message), not raise.
    sb = LuaSandbox(
        "return { transform_stream_chunk = function(s) return json.encode({ a = s }) end }",
        name="fallback",
    )
    real = sb._entry_call_each

    def broken(*args: Any) -> Any:
        result = list(real(*args))
        result[6] = result[6][:-1]  # the array loses its closing bracket
        return tuple(result)

    sb._entry_call_each = broken
    assert sb.call_each("transform_stream_chunk", ["x", "y"], parsed=True) == (
        ['{"a":"x"}', '{"a":"y"}'],
        None,
    )


# ---------------------------------------------------------------- wrapped C functions: results

WRAPPED = r"""
local out = {}
-- table.move in windows, both directions and to another table, against the expected layout
local t = {} for i = 1, 200000 do t[i] = i end
table.move(t, 1, 150000, 50001)            -- overlapping, backward
out.backward = t[50001] == 1 and t[200000] == 150000 and t[50000] == 50000
local u = {} for i = 1, 200000 do u[i] = i end
table.move(u, 50001, 200000, 1)            -- overlapping, forward
out.forward = u[1] == 50001 and u[150000] == 200000 and u[150001] == 150001
local v = table.move(u, 1, 100000, 3, {})  -- to another table, returned
out.other = v[3] == 50001 and v[100002] == 150000 and v[1] == nil
-- the Lua merge sort (long strings, and a comparator): same order as table.sort's
local p = ("x"):rep(300000)
local s = {} for i = 1, 60 do s[i] = p .. string.char(65 + (i * 7) % 26) .. i end
table.sort(s)
local ok = true
for i = 2, #s do if s[i - 1] > s[i] then ok = false end end
out.sorted_long = ok
local n = {} for i = 1, 200000 do n[i] = (i * 7919) % 200003 end
table.sort(n, function(a, b) return a > b end)
ok = true
for i = 2, #n do if n[i - 1] < n[i] then ok = false end end
out.sorted_desc = ok
out.hex = tohex(("\1\255"):rep(40000)) == ("01ff"):rep(40000)
out.gsub = select(2, ("ab"):rep(30000):gsub("a", ("%0"):rep(10))) == 30000
out.load_limit = select(2, load(("x = 1 "):rep(20000))) or "loaded"
out.date = pcall(os.date, ("%Y"):rep(600))
return out
"""


def test_wrapped_c_functions_still_give_what_c_gives() -> None:
    src = "return { f = function() " + WRAPPED + " end }"
    sb = LuaSandbox(src, limits=LuaLimits(cpu_seconds=20, wall_seconds=300))
    out = sb.call("f")
    assert out == {
        "backward": True,
        "forward": True,
        "other": True,
        "sorted_long": True,
        "sorted_desc": True,
        "hex": True,
        "gsub": True,
        "load_limit": "load: a chunk is limited to 65536 bytes in the sandbox",
        "date": False,
    }
