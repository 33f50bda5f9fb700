"""Sandbox escape attempts through the REAL adapter path.

Each case is a Lua adapter (the built-in openai.lua with one hook wrapped) whose hook attempts an
escape; it is run by ``Engine.stream`` against the mock server. Every attempt must end the stream
with a clear ``LlmError`` code in ``finish`` (never a bare exception, never a hang), the process
survives, and the SAME engine then still serves a normal request. A snippet that gets anywhere
returns a value, which the wrapper turns into an ``ESCAPED: ...`` error that the test rejects.

``tests/test_lua_runtime.py`` covers the same ground directly on ``LuaSandbox`` (no HTTP, no
engine); ``docs/reliability.md`` lists which escape is exercised in which file.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from notebook_llm import Engine, ErrorCode, Event, Finish, LlmError, assemble, validate_stream
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits
from notebook_llm.adapters.mock.server import MockServer

ADAPTERS = Path(__file__).resolve().parent.parent / "adapters"
OPENAI = (ADAPTERS / "openai.lua").read_text("utf-8")
LIMITS = LuaLimits(cpu_seconds=0.2, memory_bytes=32 * 1024 * 1024)
#: For the escapes stopped by something other than the CPU budget (memory, the stack, an
#: error): the same memory cap with a CPU budget far beyond the work, so the limit under test
#: is the only one that can fire. Filling 32 MiB, or a stack, takes about as long as 0.2 s of
#: CPU, and under load the CPU budget used to win that race.
ROOMY = LuaLimits(cpu_seconds=30.0, memory_bytes=LIMITS.memory_bytes, wall_seconds=300.0)
#: A hang guard (seconds of wall clock), never a verdict on speed.
GUARD = 60.0
ENV_SECRET = "nbllm-escape-env-secret-0123456789"

A, T, M = ErrorCode.ADAPTER_ERROR, ErrorCode.ADAPTER_TIMEOUT, ErrorCode.ADAPTER_MEMORY


@dataclass(frozen=True)
class Escape:
    id: str
    hook: str
    code: str  # Lua: returns a value only if the escape worked
    expect: str  # the LlmError code
    message: str  # regex the message must match (the "clear error")
    limits: LuaLimits | None = None  # else LIMITS for a CPU-budget case, ROOMY for the others


HELD = 'error("sandbox held: " .. '  # for tricks the sandbox neutralises without an error

ESCAPES = [
    # ------------------------------------------------------------- files, processes, env
    Escape(
        "os.execute", "transform_request", "return os.execute('touch /tmp/pwned')", A, r"execute"
    ),
    Escape("os.exit", "transform_stream_chunk", "return os.exit(3)", A, r"exit"),
    Escape("os.remove", "transform_request", "return os.remove('/tmp/x')", A, r"remove"),
    Escape("os.getenv", "transform_request", "return os.getenv('NBLLM_ESCAPE')", A, r"getenv"),
    Escape(
        "env-var-scan",
        "transform_request",
        # look for the secret anywhere reachable from the environment (strings only)
        f"""local seen = {{}}
        local function walk(v)
          if type(v) == 'string' and v:find('{ENV_SECRET}', 1, true) then return true end
          if type(v) ~= 'table' or seen[v] then return false end
          seen[v] = true
          for k, x in pairs(v) do if walk(k) or walk(x) then return true end end
          return false
        end
        if walk(_G) then return 'found' end
        {HELD}'no environment variable is reachable')""",
        A,
        r"sandbox held: no environment",
    ),
    Escape("io.open", "transform_request", "return io.open('/etc/passwd'):read('a')", A, r"'io'"),
    Escape("io.popen", "build_headers", "return io.popen('id'):read('a')", A, r"'io'"),
    Escape("require", "transform_request", "return require('os')", A, r"require: no library 'os'"),
    Escape(
        "dofile",
        "transform_stream_chunk",
        "return dofile('/etc/passwd')",
        A,
        r"dofile is not available",
    ),
    Escape(
        "loadfile",
        "transform_request",
        "return loadfile('/etc/passwd')",
        A,
        r"loadfile is not available",
    ),
    Escape(
        "package.loadlib",
        "transform_request",
        "return package.loadlib('libc.so.6', 'system')",
        A,
        r"'package'",
    ),
    Escape(
        "http_get-file-url",
        "transform_request",
        f"""local r = json.decode(http_get('file:///etc/passwd'))
        if r.body and r.body:find('root:') then return r.body end
        {HELD}'http_get cannot read files: ' .. tostring(r.error))""",
        A,
        r"sandbox held: http_get cannot read files",
    ),
    # ------------------------------------------------------------- bytecode, dump, debug
    Escape(
        "load-bytecode",
        "transform_request",
        "return assert(load(string.char(27) .. 'LuaT' .. string.rep('\\0', 40)))()",
        A,
        r"binary chunks are not allowed",
    ),
    Escape(
        "load-mode-b",
        "transform_stream_chunk",
        "return assert(load('return 1', 'x', 'b'))()",
        A,
        r"only text mode",
    ),
    Escape(
        "load-reader-fn",
        "transform_request",
        "return assert(load(function() return nil end))()",
        A,
        r"only source text",
    ),
    Escape(
        "load-env-escape",
        "transform_request",
        "return assert(load('return os.getenv'))()('HOME')",
        A,
        r"call a nil value",
    ),
    Escape("string.dump", "transform_request", "return string.dump(function() end)", A, r"dump"),
    Escape("method-dump", "transform_stream_chunk", "return (''):dump()", A, r"dump"),
    Escape("debug.getregistry", "transform_request", "return debug.getregistry()", A, r"'debug'"),
    Escape(
        "debug.sethook-off", "transform_request", "debug.sethook() while true do end", A, r"'debug'"
    ),
    Escape(
        "debug.getupvalue", "build_headers", "return debug.getupvalue(http_get, 1)", A, r"'debug'"
    ),
    Escape("getfenv", "transform_request", "return getfenv(http_get)", A, r"getfenv"),
    # ------------------------------------------------------------- metatables, gc
    Escape(
        "getmetatable-string-dump",
        "transform_request",
        "return getmetatable('').__index.dump(print)",
        A,
        r"dump",
    ),
    Escape(
        "getmetatable-string-replace",
        "transform_request",
        f"""local mt = getmetatable('')
        mt.__index = {{upper = function() return 'PWNED' end}}
        mt.__add = function() return 'PWNED' end
        if ('x'):upper() == 'PWNED' then return 'hijacked' end
        {HELD}'string metatable is a copy')""",
        A,
        r"sandbox held: string metatable is a copy",
    ),
    Escape(
        "setmetatable-string",
        "transform_request",
        "return setmetatable('', {})",
        A,
        r"table expected",
    ),
    Escape(
        "gc-finalizer-loop",
        "transform_stream_chunk",
        "setmetatable({}, {__gc = function() while true do end end}) collectgarbage()",
        A,
        r"__gc metamethods are not allowed",
    ),
    Escape(
        "collectgarbage-stop",
        "transform_request",
        "return collectgarbage('stop')",
        A,
        r"not allowed",
    ),
    Escape(
        "collectgarbage-generational",
        "transform_request",
        "return collectgarbage('generational')",
        A,
        r"not allowed",
    ),
    # ------------------------------------------------------------- Python through lupa
    Escape(
        "python.eval",
        "transform_request",
        'return python.eval(\'__import__("os").system("id")\')',
        A,
        r"'python'",
    ),
    Escape(
        "python.builtins",
        "transform_stream_chunk",
        "return python.builtins.open('/etc/passwd')",
        A,
        r"'python'",
    ),
    Escape(
        "rawget-python",
        "transform_request",
        "return rawget(_G, 'python').eval('1')",
        A,
        r"index a nil",
    ),
    Escape(
        "load-python",
        "transform_request",
        "return load('return python')().eval('1')",
        A,
        r"index a nil",
    ),
    Escape(
        "bridge-callable-attrs",
        "build_headers",
        # exposed built-ins are Lua closures: indexing them cannot reach a Python object
        "return http_get.__class__",
        A,
        r"index a function value",
    ),
    Escape(
        "bridge-error-object",
        "transform_request",
        # errors raised by the Python side arrive as strings, never as Python exception objects
        f"""local kinds = {{}}
        for _, f in ipairs({{function() return http_get({{}}) end,
                             function() return hmac_sha256_hex({{}}, 1) end,
                             function() return base64_encode(nil) end,
                             function() return sha256_hex('\\255') end,
                             function() return json.decode('{{') end}}) do
          local ok, e = pcall(f)
          if type(e) == 'userdata' then return e end
          kinds[#kinds + 1] = type(e)
        end
        local r = json.decode(http_post('http://127.0.0.1:1/', 'x'))
        if type(r.error) ~= 'string' then return r end
        {HELD}'errors are ' .. table.concat(kinds, ','))""",
        A,
        r"sandbox held: errors are string,string,string,string,string",
    ),
    Escape(
        "userdata-scan",
        "transform_stream_chunk",
        f"""local seen = {{}}
        local function walk(v)
          if type(v) == 'userdata' then return true end
          if type(v) ~= 'table' or seen[v] then return false end
          seen[v] = true
          for k, x in pairs(v) do if walk(k) or walk(x) then return true end end
          local mt = getmetatable(v)
          return type(mt) == 'table' and walk(mt) or false
        end
        if walk(_G) or walk(getmetatable('')) or walk(getmetatable(json.null)) then
          return 'a userdata (Python object) is reachable'
        end
        {HELD}'no userdata reachable')""",
        A,
        r"sandbox held: no userdata reachable",
    ),
    # ------------------------------------------------------------- CPU: one C call that explodes
    # (issue 18: the string library's matcher used to run to its end, ignoring the budget)
    Escape(
        "pattern-find",
        "transform_request",
        'return string.find(string.rep("a", 40), string.rep("a-", 40) .. "b")',
        T,
        r"CPU time budget of 0.2 s at line \d+",
    ),
    Escape(
        "pattern-match-method",
        "transform_stream_chunk",
        'local s = string.rep("a", 40) return s:match(("a*"):rep(40) .. "b")',
        T,
        r"CPU time budget",
    ),
    Escape(
        "pattern-gmatch",
        "transform_response",
        'for x in string.gmatch(string.rep("a", 40), ("a?"):rep(40) .. ("a"):rep(40) .. "b") do'
        " return x end",
        T,
        r"CPU time budget",
    ),
    Escape(
        "pattern-gsub",
        "build_headers",
        'return (string.gsub(string.rep("ab", 30), ("[ab]-"):rep(30) .. "c", "x"))',
        T,
        r"CPU time budget",
    ),
    Escape(
        "rep-empty-huge-count",
        "transform_request",
        f"""local s = string.rep("", 1 << 62) {HELD}'empty rep of ' .. #s)""",
        A,
        r"sandbox held: empty rep of 0",
    ),
    Escape(
        "concat-huge-table",
        "transform_request",
        'local t = {} for i = 1, 1e8 do t[i] = "0123456789abcdef" end return table.concat(t)',
        M,
        r"memory limit",
    ),
    Escape(
        "pcall-recursion-tree",
        "transform_request",
        "local function f() pcall(f) pcall(f) end f()",
        T,
        r"CPU time budget",
    ),
    Escape(
        "close-metamethod-loop",
        "transform_request",
        "do local x <close> = setmetatable({}, {__close = function() while true do end end}) end",
        T,
        r"CPU time budget",
    ),
    # ------------------------------------------------------------- CPU: loops in each hook
    Escape(
        "loop-build_headers", "build_headers", "while true do end", T, r"CPU time budget of 0.2 s"
    ),
    Escape(
        "loop-transform_request", "transform_request", "while true do end", T, r"CPU time budget"
    ),
    Escape(
        "loop-transform_stream_chunk",
        "transform_stream_chunk",
        "while true do end",
        T,
        r"CPU time budget",
    ),
    Escape(
        "loop-transform_response", "transform_response", "while true do end", T, r"CPU time budget"
    ),
    Escape(
        "loop-pcall-swallow",
        "transform_request",
        "while true do pcall(function() while true do end end) end",
        T,
        r"CPU time budget",
    ),
    Escape(
        "loop-xpcall-handler",
        "transform_stream_chunk",
        "xpcall(function() while true do end end, function() while true do end end)",
        T,
        r"CPU time budget",
    ),
    Escape(
        "coroutine-never-ends",
        "transform_request",
        """local co = coroutine.wrap(function() while true do coroutine.yield() end end)
        while true do co() end""",
        T,
        r"CPU time budget",
    ),
    Escape(
        "coroutine-spins",
        "transform_stream_chunk",
        "return coroutine.resume(coroutine.create(function() while true do end end))",
        T,
        r"CPU time budget",
    ),
    Escape(
        "string-find-loop",
        "transform_request",
        "local s = string.rep('a', 1000) while true do s:find('b') end",
        T,
        r"CPU time budget",
    ),
    # ------------------------------------------------------------- memory, stack
    Escape(
        "string.rep-huge", "transform_request", "return string.rep('x', 1 << 40)", A, r"too large"
    ),
    Escape(
        "string-doubling",
        "transform_stream_chunk",
        "local s = 'x' while true do s = s .. s end",
        M,
        r"memory limit of 32 MiB",
    ),
    Escape(
        "table-bomb",
        "transform_request",
        "local t = {} for i = 1, 1e9 do t[i] = {i} end",
        M,
        r"memory limit",
    ),
    Escape(
        "huge-return",
        "transform_request",
        "return string.rep('x', 40 * 1024 * 1024)",
        M,
        r"memory limit",
    ),
    Escape(
        "string.format-width",
        "transform_request",
        "return string.format('%099999999d', 1)",
        A,
        r"invalid conversion",
    ),
    Escape(
        "deep-recursion",
        "transform_request",
        "local function f(n) return 1 + f(n + 1) end return f(1)",
        A,
        r"stack overflow",
    ),
    Escape(
        "recursion-in-coroutine",
        "transform_stream_chunk",
        "local function f() return 1 + f() end return coroutine.wrap(f)()",
        A,
        r"stack overflow",
    ),
    Escape(
        "json-deep-nesting",
        "transform_request",
        "return json.decode(string.rep('[', 100000))",
        A,
        r"json|nest|depth|stack",
    ),
    Escape(
        "error-object-tostring-loop",
        "transform_request",
        "error(setmetatable({}, {__tostring = function() while true do end end}))",
        A,
        r"error object is a table",
    ),
]


def escape_source(esc: Escape) -> str:
    """openai.lua with ``esc.hook`` wrapped so that it runs the escape attempt first."""
    body = "\n".join("    " + line for line in esc.code.splitlines())
    src = OPENAI.rstrip()
    assert src.endswith("return M")
    src = src[: -len("return M")]
    if esc.hook == "transform_response":
        src += "M.transform_stream_chunk = nil\n"
    return (
        src
        + f"""
local __orig = M.{esc.hook}
M.{esc.hook} = function(...)
  local function attempt()
{body}
  end
  local got = attempt()
  if got ~= nil then error("ESCAPED: " .. tostring(got), 0) end
  if __orig then return __orig(...) end
  return {{}}
end
return M
"""
    )


@pytest.fixture(scope="module")
def server() -> Iterator[MockServer]:
    with MockServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def engine(server: MockServer) -> Engine:
    """ONE engine for the whole module: every escape runs in it, and it must keep working."""
    eng = Engine(config_file=False, env_file=False, retries=0)
    normal = LuaAdapter.from_source(OPENAI, name="normal", limits=LIMITS)
    eng.add_provider("normal", adapter=normal, base_url=server.url + "/v1", model="echo")
    return eng


async def run_stream(eng: Engine, provider: str, prompt: str) -> tuple[list[Event], float]:
    """The stream's events, and the CPU time this process spent on it (the hook, the engine and
    the in-process mock server): unlike the wall clock, other processes on a busy machine do
    not add to it."""

    async def go() -> list[Event]:
        return [ev async for ev in eng.stream(provider, prompt=prompt)]

    start = time.process_time()
    events = await asyncio.wait_for(go(), GUARD)
    validate_stream(events)
    return events, time.process_time() - start


async def serves_normally(eng: Engine, prompt: str = "still alive") -> None:
    events, _ = await run_stream(eng, "normal", prompt)
    assert assemble(events).text == prompt


def test_at_least_twenty_distinct_escapes() -> None:
    assert len({e.id for e in ESCAPES}) == len(ESCAPES) >= 20
    assert {e.hook for e in ESCAPES} == {
        "build_headers",
        "transform_request",
        "transform_stream_chunk",
        "transform_response",
    }


@pytest.mark.parametrize("esc", ESCAPES, ids=lambda e: e.id)
async def test_escape_is_stopped(
    engine: Engine, server: MockServer, esc: Escape, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBLLM_ESCAPE", ENV_SECRET)
    os.environ["NBLLM_ESCAPE_SECRET"] = ENV_SECRET  # also visible to the process for the scan
    try:
        limits = esc.limits or (LIMITS if esc.expect == T else ROOMY)
        adapter = LuaAdapter.from_source(escape_source(esc), name=f"esc-{esc.id}", limits=limits)
        provider = f"esc-{esc.id}"
        engine.add_provider(provider, adapter=adapter, base_url=server.url + "/v1", model="echo")
        events, cpu = await run_stream(engine, provider, "hello")
    finally:
        del os.environ["NBLLM_ESCAPE_SECRET"]
    last = events[-1]
    assert isinstance(last, Finish)
    assert last.reason.kind == "error"
    failure = last.reason.failure
    assert failure is not None
    assert "ESCAPED" not in failure.message, failure.message
    assert failure.code == esc.expect, str(failure)
    assert re.search(esc.message, failure.message), failure.message
    assert failure.hook == esc.hook
    assert failure.adapter == "openai"  # the script's own name, as shown to the user
    assert ENV_SECRET not in str(failure)
    if esc.expect == T:  # the budget cut the hook: the whole stream cost little CPU
        assert cpu < LIMITS.cpu_seconds * 10
    await serves_normally(engine)


async def test_state_poisoning_does_not_outlive_the_stream(
    engine: Engine, server: MockServer
) -> None:
    """A script that wrecks its globals (string.*, json, table.concat) and fails: the next stream
    of the same adapter gets a fresh Lua state."""
    src = OPENAI.rstrip()[: -len("return M")] + (
        """
local __orig = M.transform_request
M.transform_request = function(raw)
  if raw:find('POISON', 1, true) then
    string.format, string.rep, table.concat = nil, nil, nil
    json.encode = function() return 'PWNED' end
    getmetatable('').__index = nil
    error('poisoned', 0)
  end
  return __orig(raw)
end
return M
"""
    )
    adapter = LuaAdapter.from_source(src, name="poison", limits=LIMITS)
    engine.add_provider("poison", adapter=adapter, base_url=server.url + "/v1", model="echo")
    events, _ = await run_stream(engine, "poison", "POISON now")
    last = events[-1]
    assert isinstance(last, Finish)
    assert last.reason.failure is not None
    assert last.reason.failure.code == A
    events, _ = await run_stream(engine, "poison", "clean afterwards")
    assert assemble(events).text == "clean afterwards"


async def test_infinite_loop_at_load_time(engine: Engine) -> None:
    with pytest.raises(LlmError) as ei:
        engine.load_adapter("local M = {name = 'toplevel'}\nwhile true do end\nreturn M")
    # the default limits apply to load_adapter (1 s); the error says why and where
    assert ei.value.code == ErrorCode.INVALID_ADAPTER
    assert ei.value.details["cause"] == T
    assert ei.value.lua_line == 2


async def test_memory_bomb_at_load_time() -> None:
    with pytest.raises(LlmError) as ei:
        LuaAdapter.from_source(
            "local t = {} for i = 1, 1e9 do t[i] = i end return {}", limits=ROOMY
        )
    assert ei.value.code == ErrorCode.INVALID_ADAPTER
    assert ei.value.details["cause"] == M


async def test_the_same_engine_still_serves_after_everything(engine: Engine) -> None:
    # run last (definition order): every escape above ran in this engine and this process
    await serves_normally(engine, "the engine survived every escape attempt")
    completion = await engine.complete("normal", prompt="and complete() too")
    assert completion.text == "and complete() too"


def test_timeout_error_is_clear_through_httpx_timeout_too() -> None:
    """The adapter's HTTP timeout and the Lua CPU budget are separate limits."""
    adapter = LuaAdapter.from_source(OPENAI, limits=LIMITS, timeout=httpx.Timeout(0.5))
    assert adapter.limits.cpu_seconds == 0.2
    assert adapter.timeout.read == 0.5
