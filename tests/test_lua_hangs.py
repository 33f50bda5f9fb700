"""No adapter can hang the kernel.

* Every hang-class case runs in a subprocess under a hard CPU limit (``RLIMIT_CPU``: 30 s above
  its budget and what the process had used before the call): a case that ran on would be killed
  by SIGXCPU and the test would see no result line for it. Each must end with its own error
  code, which says which limit ended it (the budget's ``ADAPTER_TIMEOUT``); the CPU limit is
  only the net for a hang, far enough above the budget that a loaded machine never reaches it
  first (2 s above was reached under load by the vararg cases).
* The Lua port of the pattern matcher (``patterns.lua``) must give what C gives, results and
  errors alike: a differential run on random patterns and subjects.
* A ``StopSignal`` and a SIGINT stop a hook that is inside an exploding pattern; a REAL kernel
  (jupyter_client) is interrupted while a cell's adapter hook spins, and the cell ends with one
  clear line while the kernel lives on.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_llm import Engine, ErrorCode, LlmError, StopSignal
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox

ROOT = Path(__file__).resolve().parents[1]

A, T, M = ErrorCode.ADAPTER_ERROR, ErrorCode.ADAPTER_TIMEOUT, ErrorCode.ADAPTER_MEMORY

#: name -> (hook body, expected code); "OK" when the call must simply return.
CASES: dict[str, tuple[str, str]] = {
    "find": ('local i = string.find(string.rep("a", 40), string.rep("a-", 40) .. "b")', T),
    "match": ('local m = string.match(string.rep("a", 40), string.rep("a*", 40) .. "b")', T),
    "gmatch": (
        'for x in string.gmatch(string.rep("a", 40), ("a?"):rep(40) .. ("a"):rep(40) .. "b")'
        " do end",
        T,
    ),
    "gsub": ('return (string.gsub(string.rep("ab", 30), ("[ab]-"):rep(30) .. "c", "x"))', T),
    "method-call": ('local s = ("a"):rep(50) return (s:find(("a-"):rep(50) .. "b"))', T),
    "balanced": ('return (string.find(string.rep("(", 300000), "%b()"))', T),
    "plain-find": (
        'local s = ("a"):rep(20000000) return (s:find(("a"):rep(10000000) .. "b", 1, true))',
        T,
    ),
    "bounded-calls-in-a-loop": (
        "local s = (' '):rep(1500) while true do s:find('[^\"]*\"') end",
        T,
    ),
    "rep-empty": ('return #string.rep("", 1 << 62) + #string.rep("", 1 << 62, "")', "OK"),
    "rep-huge": ('return (string.rep("x", 1 << 40))', A),
    "rep-big": ('return #string.rep("xy", 40 * 1024 * 1024)', M),
    "format-huge": (
        'local s = ("x"):rep(20 * 1024 * 1024) return #string.format("%s%s%s%q", s, s, s, s)',
        M,
    ),
    "concat-huge-table": (
        'local t = {} for i = 1, 1e8 do t[i] = "0123456789abcdef" end return #table.concat(t)',
        M,
    ),
    "concat-index-function": (
        "local t = setmetatable({}, {__index = function() return 'x' end})"
        " return #table.concat(t, '', 1, 1 << 40)",
        T,
    ),
    "pcall-recursion-tree": ("local function f() pcall(f) pcall(f) end f()", T),
    "close-loop": (
        "do local x <close> = setmetatable({}, {__close = function() while true do end end}) end",
        T,
    ),
    "close-loop-while-unwinding": (
        "local function f() local x <close> = setmetatable({}, {__close = function()"
        " while true do end end}) error('boom') end while true do pcall(f) end",
        T,
    ),
    "gc-loop": ("setmetatable({}, {__gc = function() while true do end end})", A),
    # one VM instruction may be a C call of milliseconds: thousands of them between two count
    # hook checks used to take minutes
    "upper-in-a-loop": ("local s = ('x'):rep(2e7) while true do local t = s:upper() end", T),
    "format-in-a-loop": (
        "local s = ('x'):rep(2e7) while true do local t = string.format('%s', s) end",
        T,
    ),
    "concat-in-a-loop": (
        "local s = ('x'):rep(2e7) while true do local t = table.concat({s}) end",
        T,
    ),
    "dotdot-in-a-loop": ("local s = ('x'):rep(2e7) while true do local t = s .. 'y' end", T),
    "compare-in-a-loop": (
        "local a = ('x'):rep(2e7) local b = ('x'):rep(2e7 - 1) .. 'x'"
        " while true do local t = (a == b) end",
        T,
    ),
    "sort-in-a-loop": (
        "local t = {} for i = 1, 1e6 do t[i] = i end while true do table.sort(t) end",
        T,
    ),
    # "stream-": run as transform_stream_chunk, where json.decode learns shapes and makes prefix
    # builders, and json.encode takes its one-field path: a loop of them still ends in time
    "stream-decode-in-a-loop": (
        'local s = \'{"id":"chatcmpl-0123456789abcdef0123456789","n":1,'
        '"d":{"content":"x"}}\' while true do local t = json.decode(s) end',
        T,
    ),
    "stream-encode-in-a-loop": (
        "while true do local t = json.encode({ content = 'x' }) end",
        T,
    ),
    # ---- every other C function reachable from the sandbox (the audit in docs/reliability.md)
    "table-move-huge": ("table.move({}, 1, 1 << 40, 1)", T),
    "table-move-huge-to-another": ("table.move({}, 1, 1 << 40, 1, {})", T),
    "table-move-huge-backward": ("local t = {} table.move(t, 1, 1 << 40, 2)", T),
    "table-move-wraps": ("table.move({}, 1, math.maxinteger, 2)", A),
    "sha256-in-a-loop": ("local s = ('x'):rep(4e6) while true do sha256_hex(s) end", T),
    "hmac-in-a-loop": ("local s = ('x'):rep(2e6) while true do hmac_sha256_hex(s, s) end", T),
    "base64-in-a-loop": ("local s = ('x'):rep(4e6) while true do base64_encode(s) end", T),
    "tohex-in-a-loop": ("local s = ('x'):rep(4e6) while true do tohex(s) end", T),
    "os-date-huge-format": ("return os.date(('%c'):rep(2e6))", A),
    "os-date-in-a-loop": ("local f = ('%c'):rep(500) while true do os.date(f) end", T),
    "os-time-huge-fields": ("return os.time({year = 1 << 40, month = 1 << 40, day = 1 << 40})", A),
    "load-4MB": (
        "local f, e = load(('goto l ::l:: '):rep(3e5)) if f then return 'loaded' end error(e)",
        A,
    ),
    "load-in-a-loop": ("local src = ('goto l ::l:: '):rep(5000) while true do load(src) end", T),
    "tonumber-in-a-loop": ("local s = ('9'):rep(1e7) while true do tonumber(s) end", T),
    "tonumber-base-in-a-loop": ("local s = ('z'):rep(1e7) while true do tonumber(s, 36) end", T),
    "gsub-%0-in-a-loop": (
        "local s = ('x'):rep(1e5) local r = ('%0'):rep(100) while true do s:gsub('.', r) end",
        T,
    ),
    "gsub-%0-one-call": ("return #string.gsub(('x'):rep(3e5), '.', ('%0'):rep(200))", T),
    "format-width": ("return string.format('%99999d', 1)", A),
    "format-many-items-in-a-loop": (
        "local f = ('%d'):rep(4000) local t = {} for i = 1, 4000 do t[i] = i end"
        " while true do string.format(f, table.unpack(t)) end",
        T,
    ),
    "concat-huge-separator": (
        "local t = {} for i = 1, 1000 do t[i] = 'x' end return #table.concat(t, ('y'):rep(1e6))",
        M,
    ),
    "concat-many-in-a-loop": (
        "local t = {} for i = 1, 1e6 do t[i] = 'x' end while true do table.concat(t) end",
        T,
    ),
    "sort-long-strings-in-a-loop": (
        "local t = {} local p = ('x'):rep(2e5) for i = 1, 150 do t[i] = p .. (150 - i) end"
        " while true do table.sort(t) end",
        T,
    ),
    "sort-with-a-c-comparator-in-a-loop": (
        "local t = {} for i = 1, 1e5 do t[i] = i end while true do table.sort(t, rawequal) end",
        T,
    ),
    "utf8-char-in-a-loop": (
        "local t = {} for i = 1, 1e5 do t[i] = 0x4e2d end"
        " while true do utf8.char(table.unpack(t)) end",
        T,
    ),
    "string-char-in-a-loop": (
        "local t = {} for i = 1, 1e5 do t[i] = 65 end while true do string.char(table.unpack(t)) end",
        T,
    ),
    "string-byte-in-a-loop": ("local s = ('x'):rep(2e5) while true do s:byte(1, -1) end", T),
    "codepoint-in-a-loop": (
        "local s = ('x'):rep(2e5) while true do utf8.codepoint(s, 1, -1) end",
        T,
    ),
    "unpack-in-a-loop": (
        "local t = {} for i = 1, 2e5 do t[i] = i end while true do table.unpack(t) end",
        T,
    ),
    "insert-remove-front-in-a-loop": (
        "local t = {} for i = 1, 1e6 do t[i] = i end"
        " while true do table.insert(t, 1, 0) table.remove(t, 1) end",
        T,
    ),
    "pack-in-a-loop": (
        "local f = ('i8'):rep(1e5) local t = {} for i = 1, 1e5 do t[i] = i end"
        " while true do string.pack(f, table.unpack(t)) end",
        T,
    ),
    "pack-padding-in-a-loop": ("while true do string.pack('c10000000', '') end", T),
    "packsize-in-a-loop": ("local f = ('i16'):rep(1e6) while true do string.packsize(f) end", T),
    "unpack-string-in-a-loop": (
        "local s = ('x'):rep(1e6) local f = ('b'):rep(1e5) while true do string.unpack(f, s) end",
        T,
    ),
    "math-max-in-a-loop": (
        "local t = {} for i = 1, 1e5 do t[i] = i end while true do math.max(table.unpack(t)) end",
        T,
    ),
    "collectgarbage-in-a-loop": (
        "local t = {} for i = 1, 3e5 do t[i] = {} end while true do collectgarbage() end",
        T,
    ),
    "log-in-a-loop": ("local s = ('x'):rep(4e6) while true do log('info', s) end", T),
    "print-in-a-loop": ("local s = ('x'):rep(4e6) while true do print(s, s) end", T),
    "json-encode-big-in-a-loop": ("local s = ('x'):rep(1e7) while true do json.encode(s) end", T),
    "json-decode-big-in-a-loop": (
        "local s = '\"' .. ('x'):rep(1e7) .. '\"' while true do json.decode(s) end",
        T,
    ),
    "stream-json-encode-big-in-a-loop": (
        "local s = ('x'):rep(1e7) while true do json.encode({ content = s }) end",
        T,
    ),
    "dotdot-4MB-in-a-loop": ("local s = ('x'):rep(4e6) while true do local t = s .. 'y' end", T),
    "unpack-5.1-name-in-a-loop": (
        "local t = {} for i = 1, 2e5 do t[i] = i end while true do unpack(t) end",
        T,
    ),
    "table-pack-in-a-loop": (
        "local t = {} for i = 1, 2e5 do t[i] = i end local u = table.unpack"
        " while true do table.pack(u(t)) end",
        T,
    ),
    "vararg-select-in-a-loop": (
        "local function f(...) while true do select(2, ...) end end"
        " local t = {} for i = 1, 2e5 do t[i] = i end f(table.unpack(t))",
        T,
    ),
    "vararg-table-in-a-loop": (
        "local function f(...) while true do local x = {...} end end"
        " local t = {} for i = 1, 2e5 do t[i] = i end f(table.unpack(t))",
        T,
    ),
}

RUNNER = textwrap.dedent(
    """
    import json, math, resource, sys, time
    from notebook_llm.core.errors import LlmError
    from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox

    cases = json.loads(sys.stdin.read())
    for name, (body, budget) in cases.items():
        hook = "transform_stream_chunk" if name.startswith("stream-") else "transform_request"
        src = "return { name = 't', " + hook + " = function(r)\\n" + body + "\\nend }"
        sb = LuaSandbox(src, limits=LuaLimits(cpu_seconds=budget, wall_seconds=300))
        used = resource.getrusage(resource.RUSAGE_SELF)
        used = used.ru_utime + used.ru_stime
        # a hang is killed by SIGXCPU: 30 s of CPU above the budget and what the process used
        limit = math.ceil(used + budget) + 30
        resource.setrlimit(resource.RLIMIT_CPU, (limit, resource.RLIM_INFINITY))
        t0 = time.thread_time()
        try:
            if hook == "transform_stream_chunk":
                _, failed = sb.call_each(hook, ["{}"], parsed=True)
                if failed is not None:
                    raise failed
            else:
                sb.call(hook, "{}")
            code, msg = "OK", ""
        except LlmError as err:
            code, msg = str(err.code), str(err)
        print(json.dumps([name, code, msg, time.thread_time() - t0]), flush=True)
    """
)


#: Every case the CPU budget ends, run again with a patient budget and stopped by a StopSignal
#: 0.2 s in: each must end ABORTED (bench/bench_lua_stop.py prints how long after the Stop).
STOP_RUNNER = textwrap.dedent(
    """
    import json, math, resource, sys, threading, time
    from notebook_llm.core.cancel import StopSignal
    from notebook_llm.core.errors import LlmError
    from notebook_llm.adapters.lua.runtime import LuaLimits, LuaSandbox

    cases = json.loads(sys.stdin.read())
    for name, body in cases.items():
        hook = "transform_stream_chunk" if name.startswith("stream-") else "transform_request"
        src = "return { name = 't', " + hook + " = function(r)\\n" + body + "\\nend }"
        sb = LuaSandbox(src, limits=LuaLimits(cpu_seconds=300, wall_seconds=300))
        stop = StopSignal()
        sb.set_stop(stop)
        fired = []
        def fire():
            time.sleep(0.2)
            fired.append(time.monotonic())
            stop.set("stopped by the test")
        threading.Thread(target=fire, daemon=True).start()
        used = resource.getrusage(resource.RUSAGE_SELF)
        limit = math.ceil(used.ru_utime + used.ru_stime) + 30
        resource.setrlimit(resource.RLIMIT_CPU, (limit, resource.RLIM_INFINITY))
        try:
            if hook == "transform_stream_chunk":
                _, failed = sb.call_each(hook, ["{}"], parsed=True)
                if failed is not None:
                    raise failed
            else:
                sb.call(hook, "{}")
            code = "OK"
        except LlmError as err:
            code = str(err.code)
        print(json.dumps([name, code, time.monotonic() - fired[0] if fired else -1]), flush=True)
    """
)


def run_stop_cases(cases: dict[str, str]) -> dict[str, tuple[str, float]]:
    """name -> (error code, seconds from the Stop to the call's end), in a child process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", STOP_RUNNER],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    out: dict[str, tuple[str, float]] = {}
    for line in proc.stdout.splitlines():
        name, code, latency = json.loads(line)
        out[name] = (code, latency)
    return out


#: The cases stopped by the budget whose loop is not a pattern explosion (those have their own
#: Stop tests below): one per C function class of the audit.
STOP_CASES = [name for name, (_, code) in CASES.items() if code == T and "-in-a-loop" in name]
STOP_CASES += ["table-move-huge", "table-move-huge-backward", "gsub-%0-one-call"]


def test_a_stop_signal_ends_every_c_function_class() -> None:
    cases = {name: CASES[name][0] for name in STOP_CASES}
    got = run_stop_cases(cases)
    missing = [name for name in cases if name not in got]
    assert not missing, f"not stopped (killed by the CPU limit?): {missing}"
    wrong = {name: code for name, (code, _) in got.items() if code != ErrorCode.ABORTED}
    assert not wrong, wrong


#: The CPU budget of a case the budget must end; every other case (a memory, size or script
#: error, or a plain return) gets ``ROOM``, so that what it checks is the only limit that can
#: fire: filling 64 MiB takes about as long as 0.5 s of CPU, and under load the budget won.
CPU_BUDGET, ROOM = 0.5, 10.0


def budget(code: str) -> float:
    return CPU_BUDGET if code == T else ROOM


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[str, str, float]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    bodies = {name: (body, budget(code)) for name, (body, code) in CASES.items()}
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(bodies),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    out: dict[str, tuple[str, str, float]] = {}
    for line in proc.stdout.splitlines():
        name, code, msg, cpu = json.loads(line)
        out[name] = (code, msg, cpu)
    out["__returncode__"] = (str(proc.returncode), proc.stderr[-2000:], 0.0)
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_each_case_ends_within_its_cpu_limit_with_the_right_error(
    results: dict[str, tuple[str, str, float]], name: str
) -> None:
    assert name in results, f"{name} did not end (killed by its CPU limit?): {results}"
    code, msg, _cpu = results[name]
    assert code == CASES[name][1], msg
    if code == T:  # names the hook and the script's line
        hook = "transform_stream_chunk" if name.startswith("stream-") else "transform_request"
        assert f"hook '{hook}'" in msg, msg
        assert "at line 2" in msg, msg


def test_the_runner_process_ended_normally(results: dict[str, tuple[str, str, float]]) -> None:
    assert results["__returncode__"][0] == "0", results["__returncode__"][1]


# ---------------------------------------------------------------- the Lua matcher equals C

DIFF_SCRIPT = r"""
local function show(...)
  local t = {}
  for i = 1, select("#", ...) do local v = select(i, ...); t[i] = type(v) .. ":" .. tostring(v) end
  return table.concat(t, ",")
end
local function try(f, ...)
  local r = table.pack(pcall(f, ...))
  if not r[1] then return "ERR " .. tostring(r[2]) end
  return show(table.unpack(r, 2, r.n))
end
local function each(s, p, init)
  local t = {}
  for a, b in string.gmatch(s, p, init) do
    t[#t + 1] = show(a, b)
    if #t > 50 then break end
  end
  return table.concat(t, ";")
end
return { name = "diff", transform_request = function(req)
  local out = {}
  for _, c in ipairs(json.decode(req)) do
    local s, p, init = c[1], c[2], c[3]
    if init == json.null then init = nil end
    out[#out + 1] = table.concat({
      try(string.find, s, p, init), try(string.find, s, p, init, true),
      try(string.match, s, p, init), try(each, s, p, init),
      try(string.gsub, s, p, "<%0|%1>"), try(string.gsub, s, p, "<%0|%2%%>", 2),
      try(string.gsub, s, p, "%x"), try(string.gsub, s, p, 5, 1),
      try(string.gsub, s, p, function(a, b)
        if a == "a" then return nil end
        return "[" .. tostring(a) .. tostring(b) .. "]"
      end),
      try(string.gsub, s, p, function() return {} end),
      try(string.gsub, s, p, { a = "A", b = false, ab = 7 }),
    }, " | ")
  end
  return json.encode(out)
end }
"""

PIECES = [
    *"abc.x^$%[]",
    "%a", "[ab]", "[^a]", "*", "+", "-", "?", "(", ")", "()", "%1", "%2", "%b()", "%bab",
    "%f[%a]", "%f[^a]", "%d", "[%a_]", "%%", "[]]", "%s", "%b", "%f",
]  # fmt: skip


def test_the_lua_matcher_gives_what_c_gives() -> None:
    rng = random.Random(18)
    cases: list[list[Any]] = []
    for _ in range(1500):
        subject = "".join(rng.choice("aabbc()x 1_%$^") for _ in range(rng.randint(0, 12)))
        pattern = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))
        cases.append([subject, pattern, rng.choice([None, None, 1, 2, -3, 0, 20])])
    c_side = LuaSandbox(DIFF_SCRIPT, limits=LuaLimits(cpu_seconds=30))
    lua_side = LuaSandbox(DIFF_SCRIPT, limits=LuaLimits(cpu_seconds=30))
    lua_side._pattern_probe.force_lua(True)  # every search in Lua, every plain find windowed
    want = json.loads(c_side.call("transform_request", json.dumps(cases)))
    got = json.loads(lua_side.call("transform_request", json.dumps(cases)))
    diffs = [(c, w, g) for c, w, g in zip(cases, want, got, strict=True) if w != g]
    assert not diffs, diffs[:3]


def test_c_errors_under_the_wrappers_still_name_the_function() -> None:
    src = "return { transform_request = function(r)\n local x = string.format('%d', 'x') end }"
    with pytest.raises(LlmError) as info:
        LuaSandbox(src).call("transform_request", "{}")
    # as when Lua calls the C function itself: position prefix and name
    assert "at line 2: adapter:2: bad argument #2 to 'format' (number expected" in str(info.value)


def test_patterns_that_cannot_explode_keep_the_c_path() -> None:
    sb = LuaSandbox("return {}")
    cap = sb._pattern_probe.cap
    # the built-in adapters' patterns: ordinary subjects go to C without even being counted
    assert cap("^data:([^;,]+);base64,(.*)$") >= 500
    assert cap("%S") >= 5000
    # overlapping quantifiers get a small bound: bigger subjects take the Lua matcher
    assert cap("a-" * 20 + "b") < 10


# ---------------------------------------------------------------- stop signals and interrupts

EXPLODE = """return { name = "spin", transform_stream_chunk = function(c) return c end,
  transform_request = function(req)
    log("info", "spinning") return tostring(string.find(string.rep("a", 60), string.rep("a-", 60) .. "b"))
  end }"""
PATIENT = LuaLimits(cpu_seconds=120, wall_seconds=120)


def once_running(action: Any) -> Any:
    """A sandbox ``log`` callback that does ``action`` (in another thread, a moment later) once
    the hook logs that it is about to spin: the test acts on an event, not after a guessed
    time (the pattern never ends by itself, so a later action still finds it spinning)."""

    def log(level: str, message: str) -> None:
        if message == "spinning":
            timer = threading.Timer(0.1, action)
            timer.daemon = True
            timer.start()

    return log


def test_a_stop_signal_ends_a_hook_inside_an_exploding_pattern() -> None:
    stop = StopSignal()
    sb = LuaSandbox(
        EXPLODE, limits=PATIENT, log=once_running(lambda: stop.set("stopped by the test"))
    )
    sb.set_stop(stop)
    with pytest.raises(LlmError) as info:
        sb.call("transform_request", "{}")
    assert info.value.code == ErrorCode.ABORTED
    assert "hook 'transform_request' was stopped at line 3: stopped by the test" in str(info.value)
    # the sandbox stays usable; a fresh call is stopped again at once (the signal stays set)
    with pytest.raises(LlmError):
        sb.call("transform_request", "{}")


def interrupt_me() -> None:
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """SIGINT handled as a Python process handles it by default (KeyboardInterrupt). A process
    started in the background of a shell without job control inherits SIGINT *ignored*, and so
    does pytest (and its workers) there: the interrupt would never arrive and the hook would
    run into its 120 s budget."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_sigint")
def test_sigint_in_the_main_thread_is_handed_on_as_keyboard_interrupt() -> None:
    sb = LuaSandbox(EXPLODE, limits=PATIENT, log=once_running(interrupt_me))
    with pytest.raises(KeyboardInterrupt):
        sb.call("transform_request", "{}")


def test_a_sigint_handler_that_only_schedules_a_cancel_still_stops_the_hook() -> None:
    """What an async Jupyter cell installs: the handler asks the loop to cancel the cell, which
    cannot happen while the hook runs; the sandbox chains it for the call and stops the hook."""
    calls: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    try:
        sb = LuaSandbox(EXPLODE, limits=PATIENT, log=once_running(interrupt_me))
        with pytest.raises(LlmError) as info:
            sb.call("transform_request", "{}")
        assert info.value.code == ErrorCode.ABORTED
        assert "interrupted" in str(info.value)
        assert calls == [signal.SIGINT]  # the kernel's own handler still ran
        assert signal.getsignal(signal.SIGINT) is not None
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_engine_stop_signal_reaches_a_running_lua_hook() -> None:
    eng = Engine(config_file=False, env_file=False, retries=0)
    adapter = LuaAdapter.from_source(EXPLODE, limits=PATIENT)
    eng.add_provider("spin", adapter=adapter, base_url="http://127.0.0.1:9", model="m")
    stop = StopSignal()
    # A trigger, not a synchronisation: whenever the Stop comes (before the hook or inside its
    # pattern, which never ends by itself), the call ends ABORTED.
    threading.Timer(0.3, lambda: stop.set("stopped by the test")).start()
    with pytest.raises(LlmError) as info:
        eng.complete_sync("spin", prompt="hi", stop_signal=stop)
    assert info.value.code == ErrorCode.ABORTED


# ---------------------------------------------------------------- a real kernel

KERNEL_CELL = """
from notebook_llm import Engine
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits
_e = Engine(config_file=False, env_file=False, retries=0)
_e.add_provider("spin", adapter=LuaAdapter.from_source({src!r},
    limits=LuaLimits(cpu_seconds=300, wall_seconds=300)), base_url="http://127.0.0.1:9", model="m")
import logging
class _Tell(logging.Handler):  # the hook's log("info", "spinning"): it is about to spin
    def emit(self, record):
        print("SPINNING", flush=True)
_spin_log = logging.getLogger("notebook_llm.adapter.spin")
_spin_log.setLevel(logging.INFO)
_spin_log.addHandler(_Tell())
try:
    {call}
except BaseException as err:
    print("ENDED", type(err).__name__, getattr(err, "code", ""), flush=True)
"""


@pytest.fixture(scope="module")
def kernel() -> Iterator[tuple[Any, Any]]:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    km, kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=300)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.parametrize(
    "call",
    ['_e.complete_sync("spin", prompt="hi")', 'await _e.complete("spin", prompt="hi")'],
    ids=["blocking-cell", "async-cell"],
)
def test_a_kernel_interrupt_stops_a_spinning_hook(kernel: tuple[Any, Any], call: str) -> None:
    km, kc = kernel
    msg_id = kc.execute(KERNEL_CELL.format(src=EXPLODE, call=call))
    texts: list[str] = []
    while not any("SPINNING" in t for t in texts):  # the hook is inside the pattern
        msg = kc.get_iopub_msg(timeout=120)
        if msg["msg_type"] == "stream":
            texts.append(msg["content"]["text"])
    km.interrupt_kernel()
    started = time.monotonic()
    while True:  # without the fix: no reply for minutes (the CPU budget is 300 s)
        reply = kc.get_shell_msg(timeout=90)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    elapsed = time.monotonic() - started
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            break
        if msg["msg_type"] == "stream":
            texts.append(msg["content"]["text"])
    output = "".join(texts)
    assert "ENDED LlmError ABORTED" in output, output
    print(f"cell ended {elapsed:.2f} s after the interrupt")
    alive = kc.execute_interactive("print(6 * 7)", timeout=30)
    assert alive["content"]["status"] == "ok"


@pytest.mark.usefixtures("python_sigint")
@pytest.mark.parametrize(
    "body",
    [
        "table.move({}, 1, 1 << 40, 1)",
        "local s = ('x'):rep(4e6) while true do sha256_hex(s) end",
        "local s = ('9'):rep(1e7) while true do tonumber(s) end",
    ],
)
def test_sigint_reaches_c_functions_of_every_kind(body: str) -> None:
    sb = LuaSandbox(
        'return { transform_request = function(r) log("info", "spinning") ' + body + " end }",
        limits=PATIENT,
        log=once_running(interrupt_me),
    )
    with pytest.raises(KeyboardInterrupt):
        sb.call("transform_request", "{}")
