-- Trusted chunk of the notebook_llm Lua sandbox: string functions that cannot hang the kernel.
--
-- Why: Lua's string.find/match/gmatch/gsub run a backtracking matcher inside ONE C call. The
-- sandbox's CPU budget is enforced by a count hook, which only fires between VM instructions, so
-- a pattern like ("a-"):rep(20) .. "b" ran for minutes and ignored SIGINT. No library offers a
-- step-limited Lua matcher for Lua 5.4 patterns, hence this file (hand-written, kept small).
--
-- Design (chosen by measurement, see docs/reliability.md):
-- * Every pattern gets a cost bound, computed once and cached: the worst-case number of matcher
--   steps as C * N^d for a subject of N - 1 bytes. A quantified item (* + -) whose following
--   item cannot start where it repeats (disjoint character sets, or the end of the pattern)
--   adds N to the cost; any other one multiplies the rest by N; '?' doubles it; %b and
--   back-references add N; an unanchored search multiplies by N (every start).
-- * Under CHEAP_STEPS the C function runs as it is (the fast path: one table lookup, one
--   comparison). Under STEP_LIMIT it runs in C too, and its bound is charged (below). Measured,
--   no C call allowed by STEP_LIMIT took more than ~60 ms.
-- * Otherwise the search runs here, in Lua, as a faithful port of lstrlib.c's matcher (same
--   order of attempts, same errors, same captures), where the count hook (CPU budget, wall
--   budget, stop signal, kernel interrupt) can stop it. Linear parts go back to C: the run of a
--   repeated class, %b, the next start worth trying.
-- * Charging: C calls add their bound (or their input size, for rep/upper/sub/format/
--   table.concat/table.sort/utf8.len...) to a counter; past DEBT_STEPS the sandbox's budget
--   check runs. One VM instruction may be such a call, and the count hook only fires every
--   10,000 instructions: thousands of 20 ms calls in between would add up to minutes.
-- * A plain search (find with plain=true, or a pattern without specials) costs #s * #p in the
--   worst case; over PLAIN_LIMIT it runs in windows, one bounded C call per window.
-- * string.rep with an empty string and separator returns "" at once (C loops n times).
--
-- Run by runtime.py in the real globals before sandbox.lua (it captures what it needs in
-- locals) and loaded WITHOUT debug information, so a C error raised under a wrapper carries no
-- position inside this file. Returns the replacement functions (sandbox.lua installs them in
-- the string, table and utf8 tables) and a control table. The character classes are computed
-- by the C matcher itself (one C call per byte and class, cached), so %a, [%w_], ... mean
-- exactly what they mean in C.
local string, error, pcall, type, tostring, tonumber, math_type, pack, unpack, huge, select =
  string, error, pcall, type, tostring, tonumber, math.type, table.pack, table.unpack, math.huge,
  select
local rawget, rawlen = rawget, rawlen
local c_find, c_match, c_gmatch, c_gsub, c_rep = string.find, string.match, string.gmatch,
  string.gsub, string.rep
local byte, char, sub, concat = string.byte, string.char, string.sub, table.concat

local STEP_LIMIT = 15000000 -- bound on the steps of one C call (<= ~100 ms, measured)
local CHEAP_STEPS = 20000 -- calls bounded by this are not even counted (<= ~0.1 ms)
local DEBT_STEPS = 2000000 -- steps of C calls between two budget checks (~10 ms)
local PLAIN_LIMIT = 1 << 26 -- bytes compared by one plain C search (memchr + memcmp)
local MAXCCALLS = 200 -- lstrlib.c's matchdepth
local MAXCAPTURES = 32

-------------------------------------------------------------------------------- compiling

-- Work done in C calls is charged here: one VM instruction may be a C call of milliseconds, and
-- the count hook only fires every so many instructions. Past DEBT_STEPS, the sandbox's budget
-- check runs (it raises once the budget is used up).
local debt = 0
local budget_check, go_heavy = function() end, function() end
local HEAVY = 1024 * 1024 -- a string this big: the sandbox's hook interval may need to shrink
local function charge(steps)
  debt = debt + steps
  if debt > DEBT_STEPS then
    debt = 0
    budget_check()
  end
end

local SINGLE, OPEN, POS, CLOSE, EOS, BAL, FRONT, BACK, ERR = 1, 2, 3, 4, 5, 6, 7, 8, 9
local Q_STAR, Q_PLUS, Q_MINUS, Q_QUEST = 42, 43, 45, 63

local ALL = {}
for c = 0, 255 do ALL[c] = true end

local sets = {}
local function set_of(text)
  local set = sets[text]
  if set then return set end
  if text == "." then
    set = ALL
  elseif #text == 1 then
    set = { [byte(text)] = true }
  else
    set = {}
    local pat = "^" .. text
    charge(256 * #pat)
    for c = 0, 255 do
      if c_find(char(c), pat) then set[c] = true end
    end
  end
  sets[text] = set
  return set
end

-- lstrlib.c classEnd: the index after the class starting at i, or nil and the error message.
local function class_end(p, i, lp)
  local c = byte(p, i)
  i = i + 1
  if c == 37 then -- '%'
    if i > lp then return nil, "malformed pattern (ends with '%')" end
    return i + 1
  elseif c == 91 then -- '['
    if byte(p, i) == 94 then i = i + 1 end
    repeat
      if i > lp then return nil, "malformed pattern (missing ']')" end
      local d = byte(p, i)
      i = i + 1
      if d == 37 and i <= lp then i = i + 1 end
    until byte(p, i) == 93
    return i + 1
  end
  return i
end

-- The items of a pattern (its anchor already removed). A malformed part becomes an ERR item:
-- like C, the error is raised only when the matcher reaches it.
local function compile(p)
  local items, lp, i = {}, #p, 1
  while i <= lp do
    local c, it = byte(p, i), nil
    if c == 40 then -- '('
      if byte(p, i + 1) == 41 then it = { k = POS }; i = i + 2 else it = { k = OPEN }; i = i + 1 end
    elseif c == 41 then
      it = { k = CLOSE }; i = i + 1
    elseif c == 36 and i == lp then -- '$' at the end
      it = { k = EOS }; i = i + 1
    elseif c == 37 and byte(p, i + 1) == 98 then -- %b
      if i + 3 > lp then
        it = { k = ERR, msg = "malformed pattern (missing arguments to '%b')" }; i = lp + 1
      else
        it = { k = BAL, probe = "^" .. sub(p, i, i + 3) }; i = i + 4
      end
    elseif c == 37 and byte(p, i + 1) == 102 then -- %f
      i = i + 2
      if byte(p, i) ~= 91 then
        it = { k = ERR, msg = "missing '[' after '%f' in pattern" }; i = lp + 1
      else
        local ep, err = class_end(p, i, lp)
        if not ep then
          it = { k = ERR, msg = err }; i = lp + 1
        else
          it = { k = FRONT, set = set_of(sub(p, i, ep - 1)) }; i = ep
        end
      end
    elseif c == 37 and (byte(p, i + 1) or 0) >= 48 and byte(p, i + 1) <= 57 then -- %0-%9
      it = { k = BACK, l = byte(p, i + 1) - 48 }; i = i + 2
    else
      local ep, err = class_end(p, i, lp)
      if not ep then
        it = { k = ERR, msg = err }; i = lp + 1
      else
        local q, text = byte(p, ep), sub(p, i, ep - 1)
        it = { k = SINGLE, set = set_of(text), text = text, run = "^" .. text .. "*" }
        if q == Q_STAR or q == Q_PLUS or q == Q_MINUS or q == Q_QUEST then
          it.q = q; i = ep + 1
        else
          i = ep
        end
      end
    end
    items[#items + 1] = it
  end
  return items
end

-- The characters the items from k on can start with, or nil if unknown (or possibly empty);
-- the empty set for the end of the pattern (and true as the second value) or a final '$'.
local function first_set(items, k)
  while true do
    local it = items[k]
    if it == nil then return {}, true end
    if it.k == EOS then return {} end
    local kind = it.k
    if kind == SINGLE then
      if it.q == nil or it.q == Q_PLUS then return it.set end
      return nil
    elseif kind ~= OPEN and kind ~= POS and kind ~= CLOSE then
      return nil
    end
    k = k + 1
  end
end

local function disjoint(a, b)
  for c = 0, 255 do
    if a[c] and b[c] then return false end
  end
  return true
end

-- Worst-case steps as C * N^d, N = subject length + 1.
local function bound(items, anchored)
  local C, d = 1, 0
  for k = #items, 1, -1 do
    local it = items[k]
    local kind = it.k
    if kind == SINGLE and (it.q == Q_STAR or it.q == Q_PLUS or it.q == Q_MINUS) then
      local f, at_end = first_set(items, k + 1)
      if f and disjoint(it.set, f) then -- additive: one full try of the rest
        C, d = C + 2, d > 1 and d or 1
        -- The Lua matcher may then skip the tries that fail at once: all but the longest run
        -- (lazy: but the first, when nothing follows, as that one succeeds).
        it.skip = not (it.q == Q_MINUS and at_end)
      else
        C, d = C + 2, d + 1
      end
    elseif kind == SINGLE and it.q == Q_QUEST then
      C = 2 * C + 1
    elseif kind == BAL or kind == BACK then
      C, d = C + 1, d > 1 and d or 1
    else
      C = C + 1
    end
  end
  if not anchored then d = d + 1 end
  return C, d
end

local NOSPECIALS = "[%^%$%*%+%?%.%(%[%%%-]"

-- Per pattern (find/match/gsub key: the pattern; gmatch key: "\0g" .. pattern): the compiled
-- items (false: no specials), the bound's C and d, and the cheap cap: the subject lengths
-- below it cost at most CHEAP_STEPS (the fast path: C at once, nothing counted).
local compiled, coefs, degs, caps, compiled_count = {}, {}, {}, {}, 0
local forced = false

local function remember(key, items, C, d)
  if compiled_count >= 512 then -- a script building patterns from data: start over
    compiled, coefs, degs, caps, compiled_count = {}, {}, {}, {}, 0
  end
  compiled_count = compiled_count + 1
  local cap = 0
  if not forced then
    cap = d == 0 and huge or (CHEAP_STEPS / C) ^ (1 / d) // 1
  end
  compiled[key], coefs[key], degs[key], caps[key] = items, C, d, cap
  return cap
end

local function cap_of(p)
  local cap = caps[p]
  if cap then return cap end
  charge(#p)
  if not c_find(p, NOSPECIALS) then -- a plain search in find, literal items elsewhere
    return remember(p, false, #p + 1, 1)
  end
  local anchored = byte(p) == 94
  local items = compile(anchored and sub(p, 2) or p)
  return remember(p, items, bound(items, anchored))
end

-- gmatch has no anchor ('^' is a plain character there): its own cache key.
local function gmatch_cap(key, p)
  local cap = caps[key]
  if cap then return cap end
  local items = compile(p)
  return remember(key, items, bound(items, false))
end

-- The bound for a subject of n bytes (math.huge: take the Lua matcher).
local function cost(key, n)
  if forced then return huge end
  return coefs[key] * (n + 1) ^ degs[key]
end

-- The compiled items of p's body (as find/match/gsub see it), also for a pattern cap_of()
-- found to have no specials.
local function items_of(p)
  local items = compiled[p]
  if items then return items end
  return compile(byte(p) == 94 and sub(p, 2) or p)
end


-------------------------------------------------------------------------------- the Lua matcher
-- A port of lstrlib.c's match(), max_expand(), min_expand(), start_capture(), end_capture(),
-- matchbalance(), match_capture() and the frontier test, on compiled items. Positions are
-- 1-based; a match result is the position after the match.

local S, SLEN, ITEMS, level, depth = "", 0, {}, 0, 0
local pattern_error -- the last error message raised by the matcher itself
local cinit, clen = {}, {}
local CAP_UNFINISHED, CAP_POSITION = -1, -2

local match

local function fail(msg)
  pattern_error = msg
  error(msg, 0)
end

-- The position after the longest run of item it's characters from si (a linear C call).
local function run_end(si, it)
  if it.set == ALL then return SLEN + 1 end
  local _, e = c_find(S, it.run, si)
  charge(e - si)
  return e + 1
end

local function max_expand(si, it, k)
  local i = run_end(si, it) - si
  if it.skip then return match(si + i, k + 1) end
  while i >= 0 do
    local r = match(si + i, k + 1)
    if r then return r end
    i = i - 1
  end
  return nil
end

local function min_expand(si, it, k)
  if it.skip then return match(run_end(si, it), k + 1) end
  local set = it.set
  while true do
    local r = match(si, k + 1)
    if r then return r end
    if si <= SLEN and set[byte(S, si)] then si = si + 1 else return nil end
  end
end

match = function(si, k)
  if depth == 0 then fail("pattern too complex") end
  depth = depth - 1
  while true do
    local it = ITEMS[k]
    if it == nil then break end
    local kind = it.k
    if kind == SINGLE then
      local q = it.q
      if not (si <= SLEN and it.set[byte(S, si)]) then
        if q == Q_STAR or q == Q_QUEST or q == Q_MINUS then
          k = k + 1
        else
          si = nil; break
        end
      elseif q == nil then
        si, k = si + 1, k + 1
      elseif q == Q_QUEST then
        local r = match(si + 1, k + 1)
        if r then si = r; break end
        k = k + 1
      elseif q == Q_PLUS then
        si = max_expand(si + 1, it, k); break
      elseif q == Q_STAR then
        si = max_expand(si, it, k); break
      else
        si = min_expand(si, it, k); break
      end
    elseif kind == OPEN or kind == POS then
      if level >= MAXCAPTURES then fail("too many captures") end
      level = level + 1
      local l = level
      cinit[l], clen[l] = si, kind == POS and CAP_POSITION or CAP_UNFINISHED
      local r = match(si, k + 1)
      if not r then level = level - 1 end
      si = r; break
    elseif kind == CLOSE then
      local l = level
      while l >= 1 and clen[l] ~= CAP_UNFINISHED do l = l - 1 end
      if l < 1 then fail("invalid pattern capture") end
      clen[l] = si - cinit[l]
      local r = match(si, k + 1)
      if not r then clen[l] = CAP_UNFINISHED end
      si = r; break
    elseif kind == EOS then
      if si ~= SLEN + 1 then si = nil end
      break
    elseif kind == BAL then -- matchbalance, by C: one anchored %b item is a linear scan
      local _, e = c_find(S, it.probe, si)
      charge(e and e - si or SLEN - si)
      if not e then si = nil; break end
      si, k = e + 1, k + 1
    elseif kind == FRONT then
      local prev = si == 1 and 0 or byte(S, si - 1)
      local cur = si <= SLEN and byte(S, si) or 0
      if it.set[prev] or not it.set[cur] then si = nil; break end
      k = k + 1
    elseif kind == BACK then
      local l = it.l
      if l < 1 or l > level or clen[l] == CAP_UNFINISHED then
        fail("invalid capture index %" .. l)
      end
      local len = clen[l]
      if len < 0 or SLEN - si + 1 < len or sub(S, cinit[l], cinit[l] + len - 1) ~= sub(S, si, si + len - 1) then
        si = nil; break
      end
      si, k = si + len, k + 1
    else -- ERR
      fail(it.msg)
    end
  end
  depth = depth + 1
  return si
end

-- The first start >= init (only init itself if anchored) where items match with an end other
-- than lastmatch: returns start, end (the position after the match), or nil.
local function search(s, items, init, anchored, lastmatch)
  S, SLEN, ITEMS = s, #s, items
  -- A first item that must match a character: C finds the starts worth a try.
  local first = items[1]
  local probe, plain
  if not anchored and first and first.k == SINGLE and (first.q == nil or first.q == Q_PLUS)
    and first.set ~= ALL then
    probe, plain = first.text, #first.text == 1
  end
  local a = init
  while a <= SLEN + 1 do
    if probe then
      local from = a
      a = c_find(s, probe, a, plain)
      charge((a or SLEN) - from)
      if not a then return nil end
    end
    level, depth = 0, MAXCCALLS
    local e = match(a, 1)
    if e and e ~= lastmatch then return a, e end
    if anchored then break end
    a = a + 1
  end
  return nil
end

-- The results of the last successful search (lstrlib.c get_onecapture / push_captures), read
-- from the matcher's capture state: capture i of the match [a, e).
local function capture(i, a, e)
  if i > level then
    if i ~= 1 then fail("invalid capture index %" .. i) end
    return sub(S, a, e - 1)
  end
  local len = clen[i]
  if len == CAP_UNFINISHED then fail("unfinished capture") end
  if len == CAP_POSITION then return cinit[i] end
  return sub(S, cinit[i], cinit[i] + len - 1)
end

local function captures(a, e, whole)
  local n = level
  if n == 0 then
    if whole then return sub(S, a, e - 1) end
    return
  end
  if n == 1 then return capture(1, a, e) end
  local r = {}
  for i = 1, n do r[i] = capture(i, a, e) end
  return unpack(r, 1, n)
end

-------------------------------------------------------------------------------- the functions

local function checkint(v, arg, fname)
  local t = type(v)
  local n = v
  if t == "string" then n = tonumber(v) end
  if type(n) ~= "number" then
    error("bad argument #" .. arg .. " to '" .. fname .. "' (number expected, got "
      .. (t == "string" and "string" or t == "nil" and "no value" or t) .. ")", 3)
  end
  if math_type(n) ~= "integer" then
    if n ~= n or n ~= n // 1 or n >= 2 ^ 63 or n < -2 ^ 63 then
      error("bad argument #" .. arg .. " to '" .. fname .. "' (number has no integer representation)", 3)
    end
    n = n // 1 | 0
  end
  return n
end

-- lstrlib.c posrelatI
local function start_of(init, ls, fname)
  if init == nil then return 1 end
  init = checkint(init, 3, fname)
  if init > 0 then return init end
  if init == 0 or init < -ls then return 1 end
  return ls + init + 1
end

local function plain_find(s, p, init)
  local m = #p
  if m == 0 then return init, init - 1 end
  local w = forced and 3 or PLAIN_LIMIT // m
  local last = #s - m + 1 -- the last possible start
  local i = init
  while i <= last do
    charge((w * m + w + m) // 16)
    local j = c_find(sub(s, i, i + w + m - 2), p, 1, true)
    if j then return i + j - 1, i + j + m - 2 end
    i = i + w
  end
  return nil
end

-- Argument checks done here, not by C: this chunk is loaded without debug information (so a C
-- error raised under it carries no "nbllm.patterns" position), which would also make C name
-- the function '?' in its "bad argument" messages.
local function check_str(v, arg, fname)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then return tostring(v) end
  error("bad argument #" .. arg .. " to '" .. fname .. "' (string expected, got "
    .. t .. ")", 3)
end

local function find(s, p, init, plain)
  if type(s) ~= "string" then s = check_str(s, 1, "find") end
  if type(p) ~= "string" then p = check_str(p, 2, "find") end
  if init ~= nil and math_type(init) ~= "integer" then init = checkint(init, 3, "find") end
  if plain then
    local n = #s * #p
    if n <= PLAIN_LIMIT and not forced then
      if n > CHEAP_STEPS then charge(n // 16) end
      return c_find(s, p, init, plain)
    end
  elseif #s < (caps[p] or cap_of(p)) then
    return c_find(s, p, init, plain)
  else
    local steps = cost(p, #s)
    if steps <= STEP_LIMIT then
      charge(steps)
      return c_find(s, p, init, plain)
    end
  end
  local ls = #s
  local i = start_of(init, ls, "find")
  if i > ls + 1 then return nil end
  if plain or compiled[p] == false then return plain_find(s, p, i) end
  local anchored = byte(p) == 94
  local a, e = search(s, items_of(p), i, anchored)
  if not a then return nil end
  return a, e - 1, captures(a, e, false)
end

local function match_(s, p, init)
  if type(s) ~= "string" then s = check_str(s, 1, "match") end
  if type(p) ~= "string" then p = check_str(p, 2, "match") end
  if init ~= nil and math_type(init) ~= "integer" then init = checkint(init, 3, "match") end
  if #s < (caps[p] or cap_of(p)) then return c_match(s, p, init) end
  local steps = cost(p, #s)
  if steps <= STEP_LIMIT then
    charge(steps)
    return c_match(s, p, init)
  end
  local ls = #s
  local i = start_of(init, ls, "match")
  if i > ls + 1 then return nil end
  local anchored = byte(p) == 94
  local a, e = search(s, items_of(p), i, anchored)
  if not a then return nil end
  return captures(a, e, true)
end

local function gmatch(s, p, init)
  if type(s) ~= "string" then s = check_str(s, 1, "gmatch") end
  if type(p) ~= "string" then p = check_str(p, 2, "gmatch") end
  if init ~= nil and math_type(init) ~= "integer" then init = checkint(init, 3, "gmatch") end
  local key = "\0g" .. p
  if #s < (caps[key] or gmatch_cap(key, p)) then return c_gmatch(s, p, init) end
  local steps = cost(key, #s)
  if steps <= STEP_LIMIT then -- the whole iteration's bound, charged up front
    charge(steps)
    return c_gmatch(s, p, init)
  end
  local ls = #s
  local src = start_of(init, ls, "gmatch")
  if src > ls + 1 then src = ls + 2 end
  local items, lastmatch = compiled[key] or compile(p), nil
  local function step()
    local a, e = search(s, items, src, false, lastmatch)
    if not a then
      src = ls + 2
      return
    end
    src, lastmatch = e, e
    return captures(a, e, true)
  end
  return function()
    local r = pack(pcall(step))
    if not r[1] then -- called by the script's for loop: a pattern error gets its position
      error(r[2], r[2] == pattern_error and 2 or 0)
    end
    return unpack(r, 2, r.n)
  end
end

local function add_s(out, repl, a, e)
  local i = 1
  while true do
    local j = c_find(repl, "%", i, true)
    charge((j or #repl) - i)
    if not j then out[#out + 1] = sub(repl, i); return end
    out[#out + 1] = sub(repl, i, j - 1)
    local d = byte(repl, j + 1)
    if d == 37 then
      out[#out + 1] = "%"
    elseif d == 48 then
      out[#out + 1] = sub(S, a, e - 1)
    elseif d and d >= 49 and d <= 57 then
      out[#out + 1] = tostring(capture(d - 48, a, e))
    else
      error("invalid use of '%' in replacement string", 0)
    end
    i = j + 2
  end
end

local function gsub(s, p, repl, max_n)
  if type(s) ~= "string" then s = check_str(s, 1, "gsub") end
  if type(p) ~= "string" then p = check_str(p, 2, "gsub") end
  local tr = type(repl)
  if tr ~= "string" and tr ~= "number" and tr ~= "table" and tr ~= "function" then
    error("bad argument #3 to 'gsub' (string/function/table expected, got "
      .. tr .. ")", 2)
  end
  if max_n ~= nil and math_type(max_n) ~= "integer" then max_n = checkint(max_n, 4, "gsub") end
  -- A replacement string is expanded at every match, %0..%9 copying the match or a capture:
  -- at most (#s + 1) * #repl bytes in all, which the pattern's bound does not count.
  local expand = tr == "string" and (#s + 1) * #repl or 0
  if #s < (caps[p] or cap_of(p)) and expand <= CHEAP_STEPS then
    return c_gsub(s, p, repl, max_n)
  end
  local steps = cost(p, #s) + expand
  if steps <= STEP_LIMIT then
    charge(steps)
    return c_gsub(s, p, repl, max_n)
  end
  local ls = #s
  if max_n == nil then max_n = ls + 1 end
  if tr == "number" then repl, tr = tostring(repl), "string" end
  local anchored = byte(p) == 94
  local items = items_of(p)
  local out, src, lastmatch, n = {}, 1, nil, 0
  while n < max_n do
    local a, e = search(s, items, src, anchored, lastmatch)
    if not a then break end
    out[#out + 1] = sub(s, src, a - 1)
    n = n + 1
    if tr == "string" then
      add_s(out, repl, a, e)
    else
      local v
      if tr == "function" then
        v = repl(captures(a, e, true)) -- the script's function may run searches itself
      else
        v = repl[capture(1, a, e)]
      end
      if not v then
        out[#out + 1] = sub(s, a, e - 1)
      elseif type(v) == "string" or type(v) == "number" then
        out[#out + 1] = tostring(v)
      else
        error("invalid replacement value (a " .. type(v) .. ")", 0)
      end
    end
    src, lastmatch = e, e
    if anchored then break end
  end
  out[#out + 1] = sub(s, src)
  return concat(out), n
end

local function rep(s, n, sep)
  if type(s) ~= "string" then s = check_str(s, 1, "rep") end
  if math_type(n) ~= "integer" then n = checkint(n, 2, "rep") end
  if sep ~= nil and type(sep) ~= "string" then sep = check_str(sep, 3, "rep") end
  -- C loops n times even when every copy is empty: string.rep("", 2^62) never ended.
  if s == "" and (sep == nil or sep == "") then return "" end
  if n > 4096 then -- bytes copied
    local bytes = (#s + (sep and #sep or 0)) * n
    charge(bytes // 16)
    if bytes > HEAVY then go_heavy(bytes) end
  end
  return c_rep(s, n, sep)
end

-- Other C functions whose time grows with their input (a 20 MiB s:upper() takes ~20 ms, and a
-- loop makes thousands of such calls between two count-hook checks): charged by size.
local c_sort, c_concat, c_utf8_len, c_utf8_offset = table.sort, table.concat, utf8.len, utf8.offset
local c_upper, c_lower, c_reverse, c_format, c_sub = string.upper, string.lower, string.reverse,
  string.format, string.sub
local BIG = 65536

-- A merge sort the count hook can stop, for a sort whose C comparisons would take too long in
-- one call: the default order compares strings byte by byte, so n long strings cost
-- n log n times their length inside table.sort.
local function lua_sort(t, n, comp)
  local a, b = {}, {}
  for i = 1, n do a[i] = t[i] end
  local less = comp or function(x, y) return x < y end
  local width = 1
  while width < n do
    local i = 1
    while i <= n do
      local mid, hi = i + width, i + 2 * width
      if mid > n + 1 then mid = n + 1 end
      if hi > n + 1 then hi = n + 1 end
      local l, r, k = i, mid, i
      while l < mid and r < hi do
        if less(a[r], a[l]) then b[k] = a[r]; r = r + 1 else b[k] = a[l]; l = l + 1 end
        k = k + 1
      end
      while l < mid do b[k] = a[l]; l = l + 1; k = k + 1 end
      while r < hi do b[k] = a[r]; r = r + 1; k = k + 1 end
      i = hi
    end
    a, b = b, a
    width = width * 2
  end
  for i = 1, n do t[i] = a[i] end
end

local function sort(t, comp)
  if type(t) == "table" then
    local n = rawlen(t)
    if n > 1 then
      local per = 8 -- a comparator: one call from C per comparison
      if comp == nil then
        local longest = 0
        for i = 1, n do
          local v = rawget(t, i)
          if type(v) == "string" and #v > longest then longest = #v end
        end
        per = longest // 64 + 1
      end
      local levels = 1
      while (1 << levels) < n do levels = levels + 1 end
      local steps = n * levels * per
      if steps > STEP_LIMIT then
        if comp == nil and per > 1 then go_heavy(per * 64) end
        return lua_sort(t, #t, comp)
      end
      if steps > CHEAP_STEPS then charge(steps) end
    end
  end
  return c_sort(t, comp)
end
local function sized(f, div) -- charged by the length of the first argument
  return function(s, ...)
    if type(s) == "string" and #s > BIG then
      charge(#s // div)
      if #s > HEAVY then go_heavy(#s) end
    end
    return f(s, ...) -- a tail call: a C error then names the function (see sandbox.lua)
  end
end
local function format(fmt, ...)
  if type(fmt) == "string" and #fmt > 4096 then charge(#fmt) end
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "string" and #v > BIG then
      charge(#v // 8)
      if #v > HEAVY then go_heavy(#v) end
    end
  end
  return c_format(fmt, ...)
end
local function concat_(t, sep, i, j) -- the parts' sizes are known once it is done
  local a = math_type(i) == "integer" and i or 1
  local b = math_type(j) == "integer" and j or (type(t) == "table" and rawlen(t) or 0)
  if b - a > 4096 then charge(2 * (b - a)) end
  local r = c_concat(t, sep, i, j)
  if #r > BIG then
    charge(#r // 8)
    if #r > HEAVY then go_heavy(0) end
  end
  return r
end

-- C functions whose time grows with a count they are given (elements to move, values to push
-- or read, arguments): charged by that count; table.move runs in windows, so that even
-- table.move({}, 1, 1 << 40, 1), which moves nothing 2^40 times, is stopped by the budget.
local c_move, c_insert, c_remove, c_unpack = table.move, table.insert, table.remove, table.unpack
local c_byte, c_char, c_pack, c_unpack_s, c_packsize = string.byte, string.char, string.pack,
  string.unpack, string.packsize
local c_utf8_char, c_codepoint = utf8.char, utf8.codepoint
local c_max, c_min = math.max, math.min
local rawlen, rawequal = rawlen, rawequal
local MOVE_WINDOW = 1 << 16
local maxinteger = math.maxinteger

local function move(a1, f, e, t, a2)
  c_move(a1, f, f - 1, t, a2) -- the C function's own argument checks, moving nothing
  f, e, t = checkint(f, 2, "move"), checkint(e, 3, "move"), checkint(t, 4, "move")
  if e < f or e - f < MOVE_WINDOW then return c_move(a1, f, e, t, a2) end
  if not (f > 0 or e < maxinteger + f) then
    error("bad argument #3 to 'move' (too many elements to move)", 2)
  end
  local n = e - f + 1
  if t > maxinteger - n + 1 then error("bad argument #4 to 'move' (destination wrap around)", 2) end
  local dest = a2 == nil and a1 or a2
  if t > e or t <= f or (a2 ~= nil and a1 ~= a2) then -- forward, as C does
    local i = f
    while i <= e do
      local j = e - i < MOVE_WINDOW and e or i + MOVE_WINDOW - 1
      charge(2 * (j - i + 1))
      c_move(a1, i, j, t + (i - f), dest)
      i = j + 1
    end
  else -- overlapping, destination after the source: backward
    local j = e
    while j >= f do
      local i = j - f < MOVE_WINDOW and f or j - MOVE_WINDOW + 1
      charge(2 * (j - i + 1))
      c_move(a1, i, j, t + (i - f), dest)
      j = i - 1
    end
  end
  return dest
end

local function count_of(v) -- a table's raw length, for charging (no metamethod runs twice)
  return type(v) == "table" and rawlen(v) or 0
end
local function insert(t, ...)
  if select("#", ...) >= 2 then charge(count_of(t)) end -- shifts the elements after pos
  return c_insert(t, ...)
end
local function remove(t, ...)
  charge(count_of(t))
  return c_remove(t, ...)
end
local function unpack_(t, i, j) -- pushes up to a million values (the stack's limit)
  local a = math_type(i) == "integer" and i or 1
  local b = math_type(j) == "integer" and j or count_of(t)
  if b - a > 4096 then charge(2 * (b - a)) end
  return c_unpack(t, i, j)
end
local function sliced(f, div) -- string.byte, utf8.codepoint: push one value per byte / char
  return function(s, i, j)
    if type(s) == "string" and j ~= nil and #s > 4096 then charge(#s // div) end
    return f(s, i, j)
  end
end
local function counted(f) -- string.char, utf8.char, math.max, math.min: O(number of arguments)
  return function(...)
    local n = select("#", ...)
    if n > 4096 then charge(2 * n) end
    return f(...)
  end
end
local function pack_size(fmt)
  return type(fmt) == "string" and #fmt or 0
end
local function pack_s(fmt, ...)
  charge(pack_size(fmt) + select("#", ...))
  local r = c_pack(fmt, ...)
  if #r > BIG then charge(#r // 16) end -- padding and "c<n>" items write bytes no argument had
  return r
end
local function unpack_s(fmt, s, ...)
  charge(pack_size(fmt) + (type(s) == "string" and #s // 16 or 0))
  return c_unpack_s(fmt, s, ...)
end
local function packsize(fmt)
  charge(pack_size(fmt))
  return c_packsize(fmt)
end

return {
  string = {
    find = find, match = match_, gmatch = gmatch, gsub = gsub, rep = rep,
    upper = sized(c_upper, 8), lower = sized(c_lower, 8), reverse = sized(c_reverse, 8),
    sub = sized(c_sub, 16), format = format,
    byte = sliced(c_byte, 1), char = counted(c_char), pack = pack_s, unpack = unpack_s,
    packsize = packsize,
  },
  table = {
    sort = sort, concat = concat_, move = move, insert = insert, remove = remove,
    unpack = unpack_, pack = counted(table.pack),
  },
  utf8 = {
    len = sized(c_utf8_len, 4), offset = sized(c_utf8_offset, 4), char = counted(c_utf8_char),
    codepoint = sliced(c_codepoint, 1),
  },
  math = { max = counted(c_max), min = counted(c_min) },
}, {
  -- Work of a C call, in matcher steps (~7 ns each): past DEBT_STEPS the budget is checked.
  charge = function(steps) charge(steps) end,
  -- For tests: the largest subject length + 1 the C path takes for a pattern; and a switch that
  -- sends every search to the Lua matcher (to compare it with C).
  cap = cap_of,
  force_lua = function(on)
    compiled, coefs, degs, caps, compiled_count = {}, {}, {}, {}, 0
    forced = on
  end,
  -- sandbox.lua's budget check (raises once the call's budget is used up)
  -- and its switch to fine-grained checks (a big string can make one `..` take milliseconds)
  set_check = function(f, heavy) budget_check, go_heavy = f, heavy end,
}
