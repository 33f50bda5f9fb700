-- Trusted setup chunk of the notebook_llm Lua sandbox (Lua 5.4). runtime.py runs it once per Lua
-- state, after json.lua and BEFORE any adapter code. It captures every privileged function it
-- needs (debug.sethook, debug.getinfo, string.dump, load, ...) in locals, builds the sandbox
-- environment the adapter runs in, strips the real globals, and returns the entry points Python
-- uses. The Python callables in `cfg` only ever live in upvalues of the closures below: adapter
-- code cannot reach them (no debug library), and they only take and return strings/numbers.
local cfg = ...
local json = cfg.json
local set_keep_order, set_written = cfg.json_control.set_keep_order, cfg.json_control.set_written
local interval = cfg.interval
local max_depth = cfg.max_depth
local DEPTH_MSG = "stack overflow (more than " .. max_depth .. " nested calls)"
local py_check, py_log = cfg.check, cfg.log
local py_hmac, py_sha256, py_b64 = cfg.hmac_sha256_hex, cfg.sha256_hex, cfg.base64_encode
-- lupa pushes arguments and pulls results OUTSIDE any protected call, and an allocation that
-- fails there is a Lua PANIC (abort). So the memory cap must not bite there: Python checks what
-- it pushes against the room left, and lifts the cap for the push when the room is thin; an
-- entry point that finds the state within NEAR_KB of the cap turns it on (py_cap(true)) first
-- and lifts it again before it returns, so that the pulls cannot fail either. Far from the cap
-- (the common case) nothing is switched: no call into Python. A value pushed while the cap was
-- lifted only makes the next allocation fail, inside the protected call (ADAPTER_MEMORY).
local py_cap = cfg.cap
local near_kb = cfg.near_kb

local debug_sethook, debug_getinfo, debug_traceback = debug.sethook, debug.getinfo, debug.traceback
local co_create, co_running, co_resume, co_close = coroutine.create, coroutine.running,
  coroutine.resume, coroutine.close
local co_yield, co_status, co_isyieldable = coroutine.yield, coroutine.status,
  coroutine.isyieldable
local xpcall, pcall, error, type, tostring, load, setmetatable, getmetatable, select, next =
  xpcall, pcall, error, type, tostring, load, setmetatable, getmetatable, select, next
local rawequal = rawequal
local pairs, ipairs = pairs, ipairs
local pack, unpack, concat = table.pack, table.unpack, table.concat
local byte, char, format, gsub, sub = string.byte, string.char, string.format, string.gsub, string.sub
local utf8_len = utf8.len
local raw_collectgarbage = collectgarbage

local TIMEOUT = "notebook_llm: the adapter exceeded its CPU time budget"
local NOMEM = "not enough memory"

-------------------------------------------------------------------------------- CPU budget hook
-- A count hook runs every `interval` VM instructions and asks Python whether this call's budget
-- (per-thread CPU time, excluding time spent in http_get/http_post) is used up. It hands over
-- the number of the payload entry.call_each is at (0 outside it): each payload has a budget of
-- its own, so a stream maps the same way however its bytes were split into network reads. Once it is, the
-- hook switches to firing on EVERY instruction of the thread it runs in and raises each time, so a
-- script that catches the error with pcall and keeps looping still stops at its next instruction.
-- Hooks are per coroutine in Lua 5.4, so coroutine.create/wrap below install it on each new one.
local timed_out = false
local running = false -- inside run(): only there may the hook fire (trusted code is never hooked)
local payload = 0 -- the item entry.call_each is at: Python starts its budget again on a new one
local hot = setmetatable({}, { __mode = "k" })
local handler, run -- forward: exempt from the hook once over budget (they report the timeout)

-- A state holding big strings may copy megabytes in ONE instruction (s .. t, s == t): 10,000 of
-- them between two checks took 23 s for 20 MiB strings. So the hook's interval shrinks as the
-- state grows: above LIGHT_KB, about SPAN_KB / (state size) instructions (at least FINE), so
-- that the bytes such instructions can touch between two checks stay about the same (~0.1 s of
-- copying); and while it is shorter than `interval`, Python is asked only once the CPU clock
-- moved 2 ms (a hook call that does not ask Python costs a few hundred nanoseconds).
local LIGHT_KB, SPAN_KB, FINE = 256, 500000, 10
local function interval_for(kb)
  if kb <= LIGHT_KB then return interval end
  local n = SPAN_KB // kb
  if n < FINE then return FINE end
  if n > interval then return interval end
  return n
end
local every = setmetatable({}, { __mode = "k" }) -- coroutine -> its interval, when not `interval`
local last_clock = 0
local os_clock = os.clock

local hook
hook = function()
  if not running then -- a hook left on a thread outside run(): switch it off, never raise
    debug_sethook()
    return
  end
  if not timed_out and every[co_running()] then
    local now = os_clock()
    if now - last_clock < 0.002 then return end
    last_clock = now
  end
  if timed_out or py_check(payload) then
    timed_out = true
    local f = debug_getinfo(2, "f")
    if f and (f.func == handler or f.func == run) then return end
    local co = co_running()
    if not hot[co] then hot[co] = true; debug_sethook(co, hook, "", 1) end
    error(TIMEOUT, 0)
  end
  local co = co_running()
  local want = interval_for(raw_collectgarbage("count"))
  if hot[co] or want ~= (every[co] or interval) then
    hot[co] = nil
    every[co] = want ~= interval and want or nil
    debug_sethook(co, hook, "", want)
  end
  -- Deep recursion: stop it before the stack's growth hits the memory cap (Lua's own
  -- "stack overflow" comes at 1e6 slots, later than 64 MiB of frames).
  if debug_getinfo(max_depth, "l") then error(DEPTH_MSG, 2) end
end

-- The same check for patterns.lua's C calls that may take milliseconds each: one VM instruction
-- may be such a call, and the count hook above only fires every `interval` instructions.
local function check_now()
  if running and (timed_out or py_check(payload)) then
    timed_out = true
    local co = co_running()
    if not hot[co] then hot[co] = true; debug_sethook(co, hook, "", 1) end
    error(TIMEOUT, 0)
  end
end
cfg.pattern_control.set_check(check_now, function(bytes) -- a wrapper makes a big string
  local co = co_running()
  if running and not timed_out and not hot[co] then
    local want = interval_for(raw_collectgarbage("count") + bytes / 1024)
    if want < (every[co] or interval) then
      every[co] = want
      debug_sethook(co, hook, "", want)
    end
  end
end)
local charge = cfg.pattern_control.charge
cfg.json_control.set_charge(charge)

-------------------------------------------------------------------------------- sandbox env
local env = {}
local function deny(what)
  return function() error(what .. " is not available in the notebook_llm sandbox", 2) end
end

local function sb_create(f)
  local co = co_create(f)
  debug_sethook(co, hook, "", interval)
  return co
end

-------------------------------------------------------------------------------- HTTP requests
-- http_get / http_post do not call Python: the hook runs in a coroutine of entry.call's, and the
-- built-in yields the request (HTTP marks it; a script cannot make that table) up to there.
-- Python sends it on the engine's transport, awaiting it on its event loop, and resumes the hook
-- with the answer. A script's own coroutines pass such a yield up and its answer back down
-- (sb_resume). Where no yield can reach entry.call (a stream chunk's hook, or under a C function
-- such as a sort comparator or a gsub replacement), the built-in answers with an error.
local HTTP = {}
local hook_co -- the coroutine of the hook call entry.call is running, if any

local function sb_resume(co, ...)
  local r = pack(co_resume(co, ...))
  while r[1] and r[2] == HTTP and co_status(co) == "suspended" do
    local answer = co_yield(HTTP, r[3], r[4], r[5])
    r = pack(co_resume(co, answer))
  end
  return unpack(r, 1, r.n)
end

-- A script's yield outside its own coroutines stays what it was before hooks ran in one.
local function sb_yield(...)
  if hook_co ~= nil and co_running() == hook_co then
    error("attempt to yield from outside a coroutine", 2)
  end
  return co_yield(...)
end

local function http_request(method, url, body)
  if hook_co == nil or not co_isyieldable() then
    local where = hook_co == nil
      and "here (only in build_headers, transform_request and transform_response)"
      or "inside a function called by a C function (table.sort, string.gsub, a metamethod)"
    -- The envelope of host.envelope_error, code included. ADAPTER_ERROR: the script asked where
    -- the contract gives no network (its own mistake; the same request works in another hook).
    return json.encode(json.object({
      url = url, error = method .. " is not available " .. where, code = "ADAPTER_ERROR",
    }))
  end
  return co_yield(HTTP, method, url, body)
end

local function sb_wrap(f)
  local co = sb_create(f)
  return function(...)
    local r = pack(sb_resume(co, ...))
    if r[1] then return unpack(r, 2, r.n) end
    co_close(co)
    error(r[2], 0)
  end
end

-- The parser is one C call, and some sources take it quadratic time (4 MB of `goto l ::l::`
-- ran for minutes): a chunk is at most MAX_CHUNK bytes, and its parse is charged.
local MAX_CHUNK = 64 * 1024
local function sb_load(chunk, chunkname, mode, fenv)
  if type(chunk) ~= "string" then
    return nil, "load: only source text strings can be loaded in the sandbox"
  end
  if #chunk > MAX_CHUNK then
    return nil, "load: a chunk is limited to " .. MAX_CHUNK .. " bytes in the sandbox"
  end
  charge(#chunk + (#chunk * #chunk) // 8192)
  if byte(chunk, 1) == 27 then return nil, "load: binary chunks are not allowed in the sandbox" end
  if mode ~= nil and mode ~= "t" and mode ~= "bt" then
    return nil, "load: only text mode is allowed in the sandbox"
  end
  return load(chunk, chunkname, "t", fenv or env)
end

-- xpcall: Lua calls a message handler at the error point, and for an error raised by the count
-- hook that is still inside the hook, where hooks are off: a looping handler would never be
-- stopped. So the script's handler runs after the stack has unwound, under the budget (without
-- the debug library a script cannot tell the difference).
-- pcall: at most MAX_PCALLS nested. Lua's own limit (200 C levels) does not hold inside a
-- coroutine, where hooks run (see entry.call): after an error is caught there, the frames below
-- go on without their C levels counted, so `local function f() pcall(f) pcall(f) end` grew to
-- tens of thousands of levels and took minutes to unwind after its budget ran out.
local MAX_PCALLS = 190
local pcalls = 0
local function leave(...)
  pcalls = pcalls - 1
  return ...
end
local function sb_pcall(f, ...)
  if pcalls >= MAX_PCALLS then return false, "stack overflow (too many nested pcall)" end
  pcalls = pcalls + 1
  return leave(pcall(f, ...))
end

local function sb_xpcall(f, msgh, ...)
  local r = pack(sb_pcall(f, ...))
  if r[1] then return unpack(r, 1, r.n) end
  local ok, v = pcall(msgh, r[2])
  if ok then return false, v end
  return false, v
end

-- setmetatable: no __gc. Finalizers run with hooks off (a looping __gc would hang the process).
local raw_setmetatable, rawget = setmetatable, rawget
local function sb_setmetatable(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("__gc metamethods are not allowed in the sandbox", 2)
  end
  return raw_setmetatable(t, mt)
end

local gc_allowed = { count = true, collect = true, step = true, isrunning = true }
-- A full collection or a big step is one C call whose time grows with the state: the budget
-- is checked after it (a loop of them is then stopped like any other).
local function gc_done(...)
  check_now()
  return ...
end
local function sb_collectgarbage(opt, ...)
  opt = opt or "collect"
  if not gc_allowed[opt] then
    error("collectgarbage('" .. tostring(opt) .. "') is not allowed in the sandbox", 2)
  end
  if opt == "collect" or opt == "step" then return gc_done(raw_collectgarbage(opt, ...)) end
  return raw_collectgarbage(opt, ...)
end

-- tonumber reads a numeral in time linear in its length, in one C call: charged.
local raw_tonumber = tonumber
local function sb_tonumber(v, ...)
  if type(v) == "string" and #v > 4096 then charge(#v // 4) end
  return raw_tonumber(v, ...)
end

-- os.date: strftime once per conversion of the format, in one C call; no real format is long.
local raw_date = os.date
local MAX_DATE_FORMAT = 1024
local function sb_date(fmt, ...)
  if type(fmt) == "string" and #fmt > MAX_DATE_FORMAT then
    error("bad argument #1 to 'date' (format longer than " .. MAX_DATE_FORMAT .. " bytes)", 2)
  end
  if type(fmt) == "string" then charge(#fmt * 30) end -- ~0.2 us a conversion
  return raw_date(fmt, ...)
end

local function text(what, s)
  if type(s) == "number" then s = tostring(s) end
  if type(s) ~= "string" then error(what .. " expected a string, got " .. type(s), 3) end
  if #s > 65536 then charge(#s // 4) end
  if not utf8_len(s) then error(what .. " expected UTF-8 text", 3) end
  return s
end

-- Built on first use: its 512 C calls are a real part of a fresh sandbox's cost, and
-- most scripts never sign or hash anything. Kept only once whole: a build stopped by the
-- CPU or memory limit must not leave a partial table for the next call.
local hexmap
local HEX_WINDOW = 32768
local function tohex(s)
  if type(s) ~= "string" then error("tohex expected a string, got " .. type(s), 2) end
  if not hexmap then
    local m = {}
    for i = 0, 255 do m[char(i)] = format("%02x", i) end
    hexmap = m
  end
  if #s <= HEX_WINDOW then return (gsub(s, ".", hexmap)) end
  -- One C gsub over megabytes cannot be stopped: windows of HEX_WINDOW bytes, each charged.
  local parts = {}
  for i = 1, #s, HEX_WINDOW do
    charge(HEX_WINDOW * 4)
    parts[#parts + 1] = gsub(sub(s, i, i + HEX_WINDOW - 1), ".", hexmap)
  end
  return concat(parts)
end

-- A log line is cut at MAX_LOG bytes: the Python side (redaction, the sink) costs time per byte.
local MAX_LOG = 16 * 1024
local function sb_log(level, msg, ...)
  if msg == nil and select("#", ...) == 0 then level, msg = "info", level end
  level, msg = tostring(level), tostring(msg)
  if #level > 64 then level = sub(level, 1, 64) end
  if #msg > MAX_LOG then msg = sub(msg, 1, MAX_LOG) .. " ... (" .. #msg .. " bytes)" end
  if not utf8_len(msg) then msg = gsub(msg, "[\128-\255]", "?") end
  if not utf8_len(level) then level = "info" end
  py_log(level, msg)
end

local function sb_print(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do parts[i] = tostring((select(i, ...))) end
  sb_log("info", table.concat(parts, "\t"))
end

for _, k in ipairs({ "assert", "error", "ipairs", "next", "pairs", "pcall", "rawequal", "rawget",
  "rawlen", "rawset", "select", "setmetatable", "getmetatable", "tonumber", "tostring", "type",
  "xpcall", "_VERSION" }) do
  env[k] = _G[k]
end
env.print = sb_print
env.pcall = sb_pcall
env.xpcall = sb_xpcall
env.setmetatable = sb_setmetatable
env.load = sb_load
env.loadstring = sb_load -- Lua 5.1 / gopher-lua compatibility
env.unpack = cfg.safe_string.table.unpack -- Lua 5.1 compatibility (the charged one)
env.collectgarbage = sb_collectgarbage
env.dofile, env.loadfile = deny("dofile"), deny("loadfile")

-------------------------------------------------------------------------------- require
-- require(name) loads a library shipped with the built-in adapters (their lib/ folder) and
-- nothing else: a name is a plain identifier, never a path. Python hands back the library's
-- bytecode, compiled by runtime.py from the shipped file (a script still cannot load any), and
-- it runs here, in the script's env, under the budget of the call that requires it. A library
-- is loaded once per state (package.loaded's job).
local py_require = cfg.require
local find = string.find
local loaded, loading, lib_source = {}, {}, {}
-- For a loop's message: the library whose top level is running, and who required each one.
-- Both count only while loading[name] == runs (a load stopped by a limit leaves them stale).
local current, required_by = nil, {}
local runs = 0 -- run() counts its calls: a require an earlier call left unfinished is not a loop
local function no_library(what)
  local _, names = py_require("")
  error("require: no library " .. what .. " in the notebook_llm sandbox (it loads only the " ..
    "built-in libraries: " .. (names or "none") .. ")", 3)
end
env.require = function(name)
  if type(name) ~= "string" then no_library("named by a " .. type(name)) end
  local lib = loaded[name]
  if lib ~= nil then return lib end
  if #name > 64 or not find(name, "^[a-z_][a-z0-9_]*$") then
    no_library("'" .. (gsub(sub(name, 1, 64), "[%c'\128-\255]", "?")) .. "'")
  end
  if loading[name] == runs then
    local via, at = {}, current -- back from the library that asks, to `name`
    while at ~= nil and at ~= name and loading[at] == runs and #via < 16 do
      via[#via + 1] = at
      at = required_by[at]
    end
    local chain = name
    for i = #via, 1, -1 do chain = chain .. " -> " .. via[i] end
    chain = #via > 0 and (" (" .. chain .. " -> " .. name .. ")") or ""
    error("require: library '" .. name .. "' requires itself" .. chain, 2)
  end
  local code, why = py_require(name)
  if code == false then
    if why == nil then error(NOMEM, 0) end
    error("require: " .. why, 2)
  end
  if code == nil then no_library("'" .. name .. "'") end
  local fn, err = load(code, "=lib/" .. name, "b", env)
  if not fn then error("require: library '" .. name .. "' does not load: " .. tostring(err), 2) end
  lib_source[debug_getinfo(fn, "S").source] = true
  required_by[name] = (current ~= nil and loading[current] == runs) and current or nil
  loading[name] = runs
  local outer = current
  current = name
  local ok, v = pcall(fn, name)
  current = outer
  loading[name] = nil
  if not ok then error(v, 0) end
  if v == nil then v = true end
  loaded[name] = v
  return v
end
env.coroutine = {
  create = sb_create, wrap = sb_wrap, resume = sb_resume, yield = sb_yield,
  status = coroutine.status, running = co_running, isyieldable = coroutine.isyieldable,
  close = co_close,
}
string.dump = nil -- the real table is the one strings index; no bytecode can be produced
-- String, table and utf8 functions that the budget can stop (patterns.lua); trusted code above
-- and json.lua keep the C functions.
-- Called from the wrappers, a C function's "bad argument" error names it '?': the handler below
-- puts the name back.
local c_names = {}
for lib, fns in next, cfg.safe_string do
  for k, v in next, fns do
    c_names[_G[lib][k]] = k
    _G[lib][k] = v
  end
end
env.string = string
table.getn = function(t) return #t end
table.maxn = table.maxn or function(t)
  local m = 0
  for k in next, t do if type(k) == "number" and k > m then m = k end end
  return m
end
env.table = table
math.pow = math.pow or function(a, b) return a ^ b end
math.mod = math.mod or math.fmod
env.math = math
env.utf8 = utf8
env.os = { time = os.time, date = sb_date, clock = os.clock, difftime = os.difftime }
env.tonumber = sb_tonumber
-- Scripts get their own copy of the json table: replacing json.encode in a script must not
-- change the codec this trusted code uses to hand results back to Python.
local script_json = {}
for k, v in next, json do script_json[k] = v end
env.json = script_json
env.log = sb_log
-- A Python callable's result is pushed by lupa inside the callback, where a failed allocation
-- would jump over Python's frames: Python hands back only a result that fits in the room left
-- (with a margin), else nil, which raises "not enough memory" here.
local function host(f, ...)
  local r = f(...)
  if r == nil then error(NOMEM, 0) end
  return r
end
env.http_get = function(url) return http_request("GET", text("http_get", url)) end
env.http_post = function(url, body)
  return http_request("POST", text("http_post", url), text("http_post", body == nil and "" or body))
end
-- The Python side takes time per byte too (hex decoding, hashing): charged, so that a loop of
-- them over megabytes is stopped at the budget's next check.
env.hmac_sha256_hex = function(key, msg)
  key, msg = tohex(text("hmac_sha256_hex", key)), tohex(text("hmac_sha256_hex", msg))
  charge(#key + #msg)
  return host(py_hmac, key, msg)
end
env.sha256_hex = function(s)
  s = tohex(text("sha256_hex", s))
  charge(#s)
  return host(py_sha256, s)
end
env.base64_encode = function(s)
  if type(s) ~= "string" then error("base64_encode expected a string, got " .. type(s), 2) end
  s = tohex(s)
  charge(#s)
  return host(py_b64, s)
end
env.tohex = tohex
env._G = env

-- The real string metatable: `getmetatable("")` returns a harmless copy, and it cannot be replaced
-- (setmetatable only accepts tables; debug.setmetatable is gone).
getmetatable("").__metatable = { __index = string }

-------------------------------------------------------------------------------- calls
local adapter
local chunk_source
local MARK = {}

local function describe(e)
  local t = type(e)
  if t == "string" then return e end
  if t == "table" then
    local ok, s = pcall(json.encode, e)
    if ok then return "error object is a table: " .. sub(s, 1, 500) end
    local ok2, s2 = pcall(tostring, e)
    return "error object is a table" .. (ok2 and type(s2) == "string" and (": " .. s2) or "")
  end
  if t == "nil" then return "error(nil) was raised" end
  return "error object is a " .. t .. ": " .. tostring(e)
end

-- An error raised by a C function under patterns.lua's wrappers (no debug information there)
-- lacks what Lua gives it when the script calls the function itself: the "chunk:line:" prefix,
-- and the name in "bad argument ... to '?'". Put both back, from the script's frame.
local function as_if_called_by_the_script(e)
  local c, wrapper = debug_getinfo(3, "Sf"), debug_getinfo(4, "S")
  if not (c and c.what == "C" and wrapper and wrapper.source == "=?") then return e end
  local name = c_names[c.func]
  if name then e = gsub(e, "^(bad argument #%d+ to )'%?'", "%1'" .. name .. "'", 1) end
  for level = 5, 250 do
    local info = debug_getinfo(level, "Sl")
    if not info then break end
    if info.source == chunk_source or lib_source[info.source] then
      local at = info.short_src .. ":" .. info.currentline .. ": "
      -- (an error the trusted code raised with a level already names the place)
      if info.currentline > 0 and sub(e, 1, #at) ~= at then e = at .. e end
      break
    end
    if info.source ~= "=?" then break end
  end
  return e
end

handler = function(e)
  if type(e) == "string" and e ~= TIMEOUT and e ~= NOMEM and not timed_out then
    e = as_if_called_by_the_script(e)
  end
  local line, lib_at
  for level = 2, 200 do
    local info = debug_getinfo(level, "Sl")
    if not info then break end
    if info.source == chunk_source and info.currentline and info.currentline > 0 then
      line = info.currentline
      break
    end
    if not lib_at and lib_source[info.source] and info.currentline > 0 then
      lib_at = info.short_src .. ":" .. info.currentline .. ": "
    end
  end
  local kind = "error"
  if timed_out or e == TIMEOUT then
    kind = "timeout"
  elseif e == NOMEM then
    kind = "memory"
  end
  local ok, msg = pcall(describe, e)
  if not ok then msg = "(unprintable error object)" end
  -- A hook that is a library's function (no line of the script below it): say where in the
  -- library, unless the message does already.
  if not line and lib_at and kind == "error" and not find(msg, "^lib/[%w_]+:%d+: ") then
    msg = lib_at .. msg
  end
  -- A message may quote a payload cut in the middle of a UTF-8 character: Python needs text.
  if not utf8_len(msg) then msg = gsub(msg, "[\128-\255]", "?") end
  local tb = debug_traceback(nil, 2)
  if not utf8_len(tb) then tb = gsub(tb, "[\128-\255]", "?") end
  return { [MARK] = true, kind = kind, msg = msg, line = line, tb = tb }
end

-- Run fn(...) under the budget. Returns status, value, line, traceback where status is
-- "ok" | "timeout" | "memory" | "error" (value is the first result, or the message).
run = function(fn, ...)
  runs = runs + 1
  timed_out = false
  running = true
  payload = 0
  pcalls = 0
  local want = interval_for(raw_collectgarbage("count")) -- e.g. a big response body
  every[co_running()] = want ~= interval and want or nil
  debug_sethook(hook, "", want)
  local r = pack(xpcall(fn, handler, ...))
  running = false
  debug_sethook() -- this thread stops checking; the next run() installs the hook again
  hot[co_running()] = nil
  if timed_out then
    local e = r[2]
    local line = (not r[1] and type(e) == "table" and e[MARK]) and e.line or nil
    return "timeout", TIMEOUT, line, nil
  end
  if r[1] then return "ok", r[2], nil, nil end
  local e = r[2]
  if type(e) == "table" and e[MARK] then return e.kind, e.msg, e.line, e.tb end
  if e == NOMEM then return "memory", NOMEM, nil, nil end
  local text = tostring(e) -- "error in error handling", C stack overflow, ...
  if not utf8_len(text) then text = gsub(text, "[\128-\255]", "?") end
  return "error", text, nil, nil
end

local function convert(status, v, line, tb)
  if status ~= "ok" then return status, v, line, tb end
  local t = type(v)
  if t == "string" then
    if not utf8_len(v) then return "error", "returned a string that is not valid UTF-8" end
    return "ok", v
  elseif t == "table" then
    if rawequal(v, json.null) then return "ok", nil end
    local ok, s = pcall(json.encode, v)
    if not ok and s == NOMEM then error(NOMEM, 0) end -- a limit, not a conversion problem
    if ok then
      if not utf8_len(s) then return "error", "returned a table holding a string that is not valid UTF-8" end
      return "json", s
    end
    return "error", "returned a table that cannot be converted to JSON: " .. tostring(s)
  elseif t == "number" or t == "boolean" or t == "nil" then
    return "ok", v
  end
  return "error", "returned a " .. t .. " value, which cannot be passed to Python"
end

-- convert() for a hook's results inside run(): a result that cannot pass to Python is an error
-- raised there. Returns "ok" or "json" and the value.
local function converted(...)
  local st, v = convert("ok", ...)
  if st == "error" then error(v, 0) end
  return st, v
end

local entry = {}

--- Load and run the adapter chunk (bytecode made by runtime.py from the script's source).
function entry.load(code, chunkname)
  local fn, err = load(code, chunkname, "bt", env)
  if not fn then return "syntax", err end
  chunk_source = debug_getinfo(fn, "S").source
  local status, v, line, tb = run(fn)
  if status ~= "ok" then return status, v, line, tb end
  if type(v) ~= "table" then
    return "invalid", "the script must return a table (the adapter), it returned a " .. type(v)
  end
  adapter = v
  return "ok"
end

local function call_hook(name, ...)
  local fn = adapter[name]
  if type(fn) ~= "function" then error("the adapter has no function '" .. name .. "'", 0) end
  return fn(...)
end

-- Resume the hook call's coroutine: "http", method, url, body when it asks for a request, else
-- status, value, line, traceback (status "ok"/"json" with the value on success).
local call_kind = "ok"
local function step(...)
  local co = hook_co
  local r = pack(co_resume(co, ...))
  if r[1] and r[2] == HTTP and co_status(co) == "suspended" then
    return "http", r[3], r[4], r[5]
  end
  hook_co = nil
  running = false
  if not r[1] then return "error", tostring(r[2]) end -- cannot happen: run() catches
  local status, v, line, tb = r[2], r[3], r[4], r[5]
  if status == "ok" then return call_kind, v end
  return status, v, line, tb
end

--- Call adapter[name](...) under the budget; returns status, value, line, traceback, or
--- "http", method, url, body: the hook waits for that request's answer (entry.resume).
function entry.call(name, ...)
  set_keep_order(name ~= "transform_stream_chunk")
  if hook_co ~= nil then co_close(hook_co) end -- a call Python gave up on
  call_kind = "ok"
  -- The result is converted inside run(), under the budget: converting reads the script's tables.
  hook_co = co_create(function(...)
    return run(function(...)
      local value
      call_kind, value = converted(call_hook(name, ...))
      return value
    end, ...)
  end)
  return step(...)
end

--- Hand the waiting hook call the answer to its request (the envelope's JSON text).
function entry.resume(answer)
  if hook_co == nil then return "error", "no hook call is waiting for an answer" end
  running = true
  return step(answer)
end

--- Give up the waiting hook call (Stop while its request was on the way): its coroutine is
--- closed, which runs its pending to-be-closed variables under the budget.
function entry.abandon()
  if hook_co == nil then return "ok" end
  local co = hook_co
  hook_co = nil
  running = true
  co_close(co)
  running = false
  return "ok"
end

--- Call adapter[name](item) for each item of an array, each under its own budget, in ONE
--- crossing into Lua (the stream payloads of one network read: one crossing instead of one per
--- payload; the hook tells Python which item runs, which starts that item's budget). Returns status, value,
--- line, traceback, results, count, joined, array: results[1..count] belong to the items that
--- succeeded (a string, "" for nil), count + 1 is the item that failed when status is not "ok".
--- When all results are strings they also come joined (the 7th value), so that one string
--- crosses to Python instead of one per result:
---   * with `as_array`, and when every result is "" or the object text json.encode wrote last
---     (the common case: `return json.encode(out)`, or a table result), as one JSON array (the 8th
---     value is then true): Python parses the batch with one json.loads instead of one parse per
---     result. Nothing else may go in: a text the script wrote itself is checked by Python
---     alone, with its own error message;
---   * else with NUL bytes between them (Python checks the parts add up to count: a result
---     that holds a NUL itself sends it back to the table).
function entry.call_each(name, items, as_array)
  set_keep_order(name ~= "transform_stream_chunk")
  local results, count, strings, blanks = {}, 0, true, false
  local written = as_array and {} or nil -- written[1]: json.encode's last object text
  local function each()
    local fn = adapter[name]
    if type(fn) ~= "function" then error("the adapter has no function '" .. name .. "'", 0) end
    -- The loop runs once per payload, each VM instruction paying the CPU hook: the common
    -- result (a string, the text json.encode wrote last) takes the fewest branches.
    local list, out = items, results
    for i = 1, #list do
      payload = i
      local v = fn(list[i])
      if type(v) == "string" then -- the common result, checked here without two more calls
        if not utf8_len(v) then error("returned a string that is not valid UTF-8", 0) end
        if v == "" then
          blanks = true
        elseif written and v ~= written[1] then
          written = nil
          set_written(nil)
        end
      else
        local _
        _, v = converted(v)
        if v == nil or v == "" then
          v, blanks = "", true
        elseif written and v ~= written[1] then
          written = nil
          set_written(nil)
          if type(v) ~= "string" then strings = false end
        elseif type(v) ~= "string" then
          strings = false
        end
      end
      out[i] = v
      count = i
    end
  end
  set_written(written)
  local status, v, line, tb = run(each)
  set_written(nil)
  if written then
    local parts = results
    if blanks then
      parts = {}
      for i = 1, count do
        local r = results[i]
        parts[i] = r == "" and '""' or r
      end
    end
    return status, v, line, tb, results, count, "[" .. concat(parts, ",", 1, count) .. "]", true
  end
  return status, v, line, tb, results, count, strings and concat(results, "\0", 1, count) or nil,
    false
end

local function field(name)
  local v = adapter[name]
  if v == nil or rawequal(v, json.null) then return nil end
  return v
end

--- The adapter's metadata as a JSON string (name, version, endpoint, headers, hooks).
function entry.meta()
  local function get()
    local hooks = {}
    for _, h in ipairs({ "build_headers", "transform_request", "transform_response",
      "transform_stream_chunk" }) do
      if type(adapter[h]) == "function" then hooks[#hooks + 1] = h end
    end
    local headers = field("headers")
    if headers ~= nil and type(headers) ~= "table" then error("'headers' must be a table", 0) end
    local h = json.object()
    for k, v in pairs(headers or {}) do h[tostring(k)] = tostring(v) end
    -- every other top-level string/number/boolean field too (stream_endpoint, stream_format, ...)
    local extra = json.object()
    for k, v in pairs(adapter) do
      local vt = type(v)
      if type(k) == "string" and (vt == "string" or vt == "number" or vt == "boolean") then
        extra[k] = v
      end
    end
    return json.encode(json.object({
      name = field("name"), version = field("version"), endpoint = field("endpoint"),
      headers = h, hooks = json.array(hooks), extra = extra,
    }))
  end
  return convert(run(get))
end

--- Whether adapter[name] is a function.
function entry.has(name)
  return convert(run(function() return type(adapter[name]) == "function" end))
end

--- Counters of json.decode's templates (hits, learned, paused), for tests and diagnostics.
entry.json_stats = cfg.json_control.stats

local KEEP_NULL = { null = json.null }

--- Decode trusted JSON (call arguments built by Python) into marked tables.
function entry.decode(s)
  set_keep_order(true) -- arguments keep their key order (tool schemas), whatever ran before
  return json.decode(s, KEEP_NULL) -- Python's None stays json.null: the value passes as it is
end

-- Every entry point runs with the memory cap on, and near the cap lifts it before it returns
-- (see py_cap).
-- The results stay in fixed locals: no table is built between the call and the lift.
local function capped(f)
  return function(...)
    if raw_collectgarbage("count") > near_kb then py_cap(true) end
    local ok, a, b, c, d, e, g, h, i = pcall(f, ...)
    if raw_collectgarbage("count") > near_kb then py_cap(false) end
    if not ok then
      if a == NOMEM then return "memory", NOMEM end
      return "error", type(a) == "string" and a or "error in the sandbox"
    end
    return a, b, c, d, e, g, h, i
  end
end
for _, k in ipairs({ "load", "call", "call_each", "meta", "has", "resume", "abandon" }) do
  entry[k] = capped(entry[k])
end
local raw_decode = entry.decode
entry.decode = function(s) -- its result is a table, or the failure as status and message
  if raw_collectgarbage("count") > near_kb then py_cap(true) end
  local ok, v = pcall(raw_decode, s)
  if raw_collectgarbage("count") > near_kb then py_cap(false) end
  if ok then return v end
  return nil, v == NOMEM and "memory" or "error", v
end

-- Strip the real globals: nothing below is reachable from the sandbox env anyway, but lupa's
-- `python` table and the debug/io/os/package libraries must not survive in the state either.
for _, k in ipairs({ "python", "debug", "io", "os", "package", "require", "dofile", "loadfile",
  "load", "collectgarbage" }) do
  _G[k] = nil
end
return entry
