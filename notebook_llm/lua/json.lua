-- JSON codec of the notebook_llm Lua sandbox (Lua 5.4). Loaded by runtime.py as a trusted chunk
-- BEFORE any adapter code runs; every library function it uses is captured in a local here, so a
-- script that later replaces string.find & co cannot change how JSON is read or written.
--
-- Semantics (see the module docstring of notebook_llm/lua/runtime.py for the rationale):
--   * null decodes to nil, like the reference kernel (a null field is simply absent, so kernel
--     scripts' `x ~= nil` and `x or ""` work); an array with nulls has holes at their positions,
--     and `#` counts up to its last non-null item, as in the kernel. json.decode(s, {null =
--     json.null}) keeps nulls as the sentinel json.null instead (positions and all); json.null
--     encodes to null either way.
--   * decoded arrays / objects carry a marker metatable, so [] re-encodes as [] and {} as {}.
--     json.array(t) / json.object(t) mark tables built by a script.
--   * an UNMARKED table encodes as an array when its keys are exactly 1..n (n >= 1), as an object
--     when all keys are strings, and an unmarked EMPTY table encodes as {} (like the reference
--     kernel). Mixed keys, sparse arrays and non-string keys raise an error instead of losing data.
--   * integers stay integers (Lua 5.4 integer subtype, 2^53+1 is exact); floats stay floats
--     (1.0 encodes as 1.0, 1e300 as 1e+300). NaN and infinities cannot be encoded.
--   * json.decode raises an error (with the byte position) on invalid input.
--   * key order: a decoded object re-encodes with its keys in their original order; keys added
--     later, and objects built by a script, follow in sorted order (stable output). Inside
--     transform_stream_chunk, whose result Python parses, order is not tracked (hot path).
-- Measured in bench/bench_lua_json.py; this pure-Lua codec is the one used (faster than a bridge
-- to Python's json module because building Lua tables from Python costs a bridge call each).

-- The raw debug.getmetatable / debug.setmetatable, passed by runtime.py: they ignore
-- __metatable, which protects the marker metatables from scripts (a script that could reach
-- array_mt could add a __gc finalizer, and finalizers run with the CPU-limit hook off).
local getmetatable, raw_setmetatable = ...
local type, next, rawlen, rawget, setmetatable, error, tostring, tonumber, rawequal =
  type, next, rawlen, rawget, setmetatable, error, tostring, tonumber, rawequal
local math_type, huge = math.type, math.huge
local byte, char, find, format, gsub, sub = string.byte, string.char, string.find, string.format,
  string.gsub, string.sub
local concat, pack, unpack = table.concat, table.pack, table.unpack
local utf8_char, utf8_len = utf8.char, utf8.len

local json = {}

local null = setmetatable({}, {
  __name = "json.null",
  __tostring = function() return "null" end,
  __newindex = function() error("json.null is read-only", 2) end,
  __metatable = "json.null",
})
-- Key order of decoded objects, so that a decoded object re-encodes with its keys in the order
-- they arrived (tool schemas' property order matters to models, and request bodies stay
-- byte-stable for record/replay). Weak keys: an entry goes away with its object.
local key_order = setmetatable({}, { __mode = "k" })
-- Off while a stream chunk is transformed: its output is parsed by Python, where key order
-- means nothing, and this is the hot path (recording the order costs ~20% of a decode).
local keep_order = true
-- While sandbox.lua's call_each runs, the last object text json.encode wrote is noted here
-- (written[1]; one slot, so a hook that encodes in a loop holds nothing more): a hook result
-- equal to it is JSON this encoder wrote, so the batch's results can cross to Python as one
-- JSON array, parsed with one json.loads (see call_each).
local written = nil
local table_sort = table.sort
local array_mt = { __name = "json.array", __metatable = "json.array" }
local object_mt = { __name = "json.object", __metatable = "json.object" }
json.null = null

-- The raw setmetatable is needed to switch a table between the two markers (they hide behind
-- __metatable); any other metatable, and json.null's, must stay where it is.
local function mark(t, mt, what)
  if t == nil then return raw_setmetatable({}, mt) end
  if type(t) ~= "table" then error(what .. " expects a table", 3) end
  if rawequal(t, null) then error(what .. " cannot mark json.null", 3) end
  local old = getmetatable(t)
  if old ~= nil and not rawequal(old, array_mt) and not rawequal(old, object_mt) then
    error(what .. ": the table already has a metatable of its own", 3)
  end
  return raw_setmetatable(t, mt)
end

--- Mark t (default: a new table) as a JSON array; returns t.
function json.array(t) return mark(t, array_mt, "json.array") end

--- Mark t (default: a new table) as a JSON object; returns t.
function json.object(t) return mark(t, object_mt, "json.object") end

function json.is_array(t)
  return type(t) == "table" and rawequal(getmetatable(t), array_mt)
end

function json.is_object(t)
  return type(t) == "table" and rawequal(getmetatable(t), object_mt)
end

-------------------------------------------------------------------------------- encode

local escapes = {
  ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", ["\127"] = "\\u007f",
}
for i = 0, 31 do
  local c = char(i)
  if not escapes[c] then escapes[c] = format("\\u%04x", i) end
end

local function encode_number(x)
  if math_type(x) == "integer" then return format("%d", x) end
  if x ~= x or x == huge or x == -huge then
    error("json.encode: cannot encode " .. tostring(x) .. " (NaN/infinity)", 0)
  end
  local s = format("%.14g", x)
  if tonumber(s) ~= x then s = format("%.17g", x) end
  if not find(s, "[.eEn]") then s = s .. ".0" end -- keep floats floats: 1.0 -> "1.0"
  return s
end

local encode_value -- forward

-- A key JSON can hold: a string, or a number in a table marked as an object.
local function check_key(k, mt)
  local kt = type(k)
  if kt == "number" then
    if not rawequal(mt, object_mt) then
      error("json.encode: table has a numeric key " .. tostring(k) .. " but is not an array"
        .. " (sparse array or mixed keys); use json.object to encode numeric keys as strings", 0)
    end
  elseif kt ~= "string" then
    error("json.encode: cannot use a " .. kt .. " as an object key", 0)
  end
end

-- A string that needs no escaping. One anchored match (one pass of the C matcher) rather than
-- an unanchored search for a special character, which restarts the matcher at every byte:
-- a third of the cost for a short text delta.
local PLAIN = '^[^%c"\\]*$'

-- Escaped key texts, by key: an object's keys repeat from chunk to chunk (bounded, so a script
-- encoding ever new keys does not grow it without end).
local key_texts, nkey_texts = {}, 0
local function quote_key(k)
  local q = k
  if not find(k, PLAIN) then q = gsub(k, '[%c"\\]', escapes) end
  if nkey_texts < 1024 then nkey_texts = nkey_texts + 1; key_texts[k] = q end
  return q
end

-- A checked key of t as the text between its quotes.
local function key_text(t, k)
  if type(k) == "number" then
    k = encode_number(k)
    if rawget(t, k) ~= nil then
      error("json.encode: object has the key " .. k .. " both as a number and as a string", 0)
    end
  end
  return key_texts[k] or quote_key(k)
end

local function encode_table(t, buf, n, depth)
  if depth > 256 then error("json.encode: nested too deeply (or a reference cycle)", 0) end
  local mt = getmetatable(t)
  local kind
  if rawequal(mt, array_mt) then
    kind = "array"
  elseif rawequal(mt, object_mt) then
    kind = "object"
  else
    local len = rawlen(t)
    if len > 0 then
      local count = 0
      for _ in next, t do count = count + 1 end
      if count ~= len then
        error("json.encode: table mixes array items and other keys (or is a sparse array);"
          .. " use json.array/json.object and json.null for holes", 0)
      end
      kind = "array"
    else
      kind = "object"
    end
  end
  if kind == "array" then
    local len = rawlen(t)
    if len == 0 then
      n = n + 1; buf[n] = "[]"
      return n
    end
    n = n + 1; buf[n] = "["
    for i = 1, len do
      if i > 1 then n = n + 1; buf[n] = "," end
      n = encode_value(rawget(t, i), buf, n, depth)
    end
    n = n + 1; buf[n] = "]"
    return n
  end
  if not keep_order then
    -- Hot path (a stream chunk's result, parsed by Python): keys in table order, no key lists.
    n = n + 1; buf[n] = "{"
    local sep = ""
    for k, v in next, t do
      check_key(k, mt)
      k = key_text(t, k)
      local vt = type(v)
      if vt == "string" then -- the common leaves inline: one buffer entry each
        if not find(v, PLAIN) then v = gsub(v, '[%c"\\]', escapes) end
        n = n + 1; buf[n] = sep .. '"' .. k .. '":"' .. v .. '"'
      elseif vt == "boolean" then
        n = n + 1; buf[n] = sep .. '"' .. k .. (v and '":true' or '":false')
      else
        n = n + 1; buf[n] = sep .. '"' .. k .. '":'
        n = encode_value(v, buf, n, depth)
      end
      sep = ","
    end
    n = n + 1; buf[n] = "}"
    return n
  end
  -- Keys in a stable order: first the decoded order (keys still present), then the other keys
  -- sorted, so the same table always encodes to the same text.
  local order = key_order[t]
  local keys, nk = {}, 0
  local seen
  if order then
    seen = {}
    for i = 1, #order do
      local k = order[i]
      if rawget(t, k) ~= nil and not seen[k] then nk = nk + 1; keys[nk] = k; seen[k] = true end
    end
  end
  local extra, ne = nil, 0
  for k in next, t do
    if not (seen and seen[k]) then
      check_key(k, mt)
      extra = extra or {}
      ne = ne + 1; extra[ne] = k
    end
  end
  if ne > 1 and keep_order then
    table_sort(extra, function(a, b)
      local ta, tb = type(a), type(b)
      if ta ~= tb then return ta == "number" end
      return a < b
    end)
  end
  for i = 1, ne do nk = nk + 1; keys[nk] = extra[i] end
  n = n + 1; buf[n] = "{"
  for i = 1, nk do
    local k = keys[i]
    local v = rawget(t, k)
    if i > 1 then n = n + 1; buf[n] = "," end
    n = n + 1; buf[n] = '"'
    n = n + 1; buf[n] = key_text(t, k)
    n = n + 1; buf[n] = '":'
    n = encode_value(v, buf, n, depth)
  end
  n = n + 1; buf[n] = "}"
  return n
end

encode_value = function(v, buf, n, depth)
  local vt = type(v)
  if vt == "string" then
    if not find(v, PLAIN) then v = gsub(v, '[%c"\\]', escapes) end
    n = n + 1; buf[n] = '"'
    n = n + 1; buf[n] = v
    n = n + 1; buf[n] = '"'
    return n
  elseif vt == "table" then
    if rawequal(v, null) then
      n = n + 1; buf[n] = "null"
      return n
    end
    return encode_table(v, buf, n, depth + 1)
  elseif vt == "number" then
    n = n + 1; buf[n] = encode_number(v)
    return n
  elseif vt == "boolean" then
    n = n + 1; buf[n] = v and "true" or "false"
    return n
  elseif vt == "nil" then
    n = n + 1; buf[n] = "null"
    return n
  end
  error("json.encode: cannot encode a value of type " .. vt, 0)
end

--- Encode a Lua value as a JSON text. Raises an error for values JSON cannot represent.
function json.encode(v)
  local vt = type(v)
  if vt == "string" then
    if not find(v, PLAIN) then v = gsub(v, '[%c"\\]', escapes) end
    return '"' .. v .. '"'
  end
  if not keep_order and vt == "table" then
    -- Hot path: the commonest stream chunk result is an object of ONE string field, a plain
    -- text delta ({content = "..."}): written in one concatenation, without the general
    -- encoder's buffer and calls (about half the cost of an encode there). Same text as the
    -- general path: an unmarked or object-marked table, a string key, a string value.
    local mt = getmetatable(v)
    if mt == nil or rawequal(mt, object_mt) then
      local k, x = next(v)
      if type(k) == "string" and type(x) == "string" and next(v, k) == nil then
        k = key_texts[k] or quote_key(k)
        if not find(x, PLAIN) then x = gsub(x, '[%c"\\]', escapes) end
        local r = '{"' .. k .. '":"' .. x .. '"}'
        if written then written[1] = r end
        return r
      end
    end
  end
  local buf = {}
  local n = encode_value(v, buf, 0, 0)
  local r = concat(buf, "", 1, n)
  if written and byte(r, 1) == 123 then written[1] = r end
  return r
end

-------------------------------------------------------------------------------- decode

local function decode_error(s, i, what)
  if i > #s then
    error(format("json.decode: %s at end of input (byte %d)", what, i), 0)
  end
  -- The snippet must stay valid UTF-8 (the message reaches Python): finish a character cut at
  -- its end, and blank out bytes that still do not decode.
  local j = i + 10
  while j < i + 13 and (byte(s, j + 1) or 0) & 0xC0 == 0x80 do j = j + 1 end
  local near = sub(s, i, j)
  if not utf8_len(near) then near = gsub(near, "[\128-\255]", "?") end
  error(format("json.decode: %s at byte %d near %q", what, i, near), 0)
end

local unescape = {
  [34] = '"', [92] = "\\", [47] = "/", [98] = "\b", [102] = "\f", [110] = "\n", [114] = "\r",
  [116] = "\t",
}

local function hex4(s, i)
  local h = sub(s, i, i + 3)
  if #h ~= 4 or find(h, "[^%x]") then decode_error(s, i, "invalid \\u escape") end
  return tonumber(h, 16)
end

-- Slow path of a string that contains escapes. i is the byte after the opening quote.
local function decode_escaped(s, i)
  local parts, np = {}, 0
  while true do
    local j = find(s, '["\\%z\1-\31]', i)
    if not j then decode_error(s, #s + 1, "unterminated string") end
    local c = byte(s, j)
    if c < 32 then decode_error(s, j, "control character in string") end
    if j > i then np = np + 1; parts[np] = sub(s, i, j - 1) end
    if c == 34 then return concat(parts, "", 1, np), j + 1 end
    local e = byte(s, j + 1)
    if e == 117 then -- \uXXXX
      local cp = hex4(s, j + 2)
      i = j + 6
      if cp >= 0xD800 and cp <= 0xDBFF then
        if sub(s, i, i + 1) == "\\u" then
          local lo = hex4(s, i + 2)
          if lo >= 0xDC00 and lo <= 0xDFFF then
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
            i = i + 6
          else
            cp = 0xFFFD
          end
        else
          cp = 0xFFFD
        end
      elseif cp >= 0xDC00 and cp <= 0xDFFF then
        cp = 0xFFFD -- a lone low surrogate cannot be written as UTF-8
      end
      np = np + 1; parts[np] = utf8_char(cp)
    else
      local u = unescape[e]
      if not u then decode_error(s, j, "invalid escape") end
      np = np + 1; parts[np] = u
      i = j + 2
    end
  end
end

local decode_value -- forward
local literals = { null = null, ["true"] = true, ["false"] = false }
-- What JSON null decodes to in the current json.decode call: nil (the default, as in the kernel)
-- or json.null (asked for with {null = json.null}). Set at the start of every call; decoding never
-- calls back into a script, so no other decode can run in between.
local null_value = nil

-- An array with nulls (decoded to nil) has holes; rebuilt here as a table created with all its
-- slots (table.pack), so that `#` gives the position of its last non-null item, as the kernel's
-- arrays do, rather than whichever border the hash part happens to give.
local function with_holes(t, n)
  if n > 100000 then return t end -- beyond what unpack can pass; the positions are kept anyway
  local u = pack(unpack(t, 1, n))
  u.n = nil
  return setmetatable(u, array_mt)
end

local function decode_array(s, i, depth)
  local t, n = setmetatable({}, array_mt), 0
  local _, e = find(s, "^[ \t\r\n]*%]", i)
  if e then return t, e + 1 end
  local holes = false
  while true do
    local v, c
    v, i = decode_value(s, i, depth)
    n = n + 1; t[n] = v
    if v == nil then holes = true end
    _, e, c = find(s, "^[ \t\r\n]*([,%]])", i)
    if not e then decode_error(s, find(s, "[^ \t\r\n]", i) or #s + 1, "expected ',' or ']'") end
    if c == "]" then
      if holes then t = with_holes(t, n) end
      return t, e + 1
    end
    i = e + 1
  end
end

local function decode_object(s, i, depth)
  local t = setmetatable({}, object_mt)
  local _, e = find(s, "^[ \t\r\n]*}", i)
  if e then return t, e + 1 end
  local order, no
  if keep_order then order, no = {}, 0; key_order[t] = order end
  while true do
    local k, v, c
    _, e, k = find(s, '^[ \t\r\n]*"([^"\\%c]*)"[ \t\r\n]*:', i)
    if e then
      i = e + 1
    else -- a key with escapes, or an error
      i = find(s, "[^ \t\r\n]", i)
      if not i or byte(s, i) ~= 34 then decode_error(s, i or #s + 1, "expected a string key") end
      k, i = decode_escaped(s, i + 1)
      i = find(s, "[^ \t\r\n]", i)
      if not i or byte(s, i) ~= 58 then decode_error(s, i or #s + 1, "expected ':'") end
      i = i + 1
    end
    -- Fast path: a plain string, number or literal value and the separator after it, in one
    -- pattern match (the common case in provider chunks); anything else takes the general path.
    local b = byte(s, i)
    e = nil
    if b == 34 then
      _, e, v, c = find(s, '^"([^"\\%c]*)"[ \t\r\n]*([,}])', i)
    elseif b == 45 or (b and b >= 48 and b <= 57) then
      -- The number, then the separator in a second match: one pattern for both would backtrack
      -- through every split of a long digit run when no separator follows (O(n^3) inside one
      -- C call, which the CPU hook cannot interrupt: 2,000 digits took 33 s).
      local ne
      _, ne = find(s, "^-?%d+%.?%d*[eE]?[-+]?%d*", i)
      if ne then _, e, c = find(s, "^[ \t\r\n]*([,}])", ne + 1) end
      if e then
        v = tonumber(sub(s, i, ne))
        if not v then decode_error(s, i, "invalid number") end
      end
    elseif b == 110 or b == 116 or b == 102 then
      local word
      _, e, word, c = find(s, "^(%l+)[ \t\r\n]*([,}])", i)
      if e then
        v = literals[word]
        if v == nil then decode_error(s, i, "unexpected character") end
        if v == null then v = null_value end
      end
    end
    if not e then
      v, i = decode_value(s, i, depth)
      _, e, c = find(s, "^[ \t\r\n]*([,}])", i)
      if not e then decode_error(s, find(s, "[^ \t\r\n]", i) or #s + 1, "expected ',' or '}'") end
    end
    if order and v ~= nil and t[k] == nil then no = no + 1; order[no] = k end
    t[k] = v
    if c == "}" then return t, e + 1 end
    i = e + 1
  end
end

decode_value = function(s, i, depth)
  local c = byte(s, i)
  if c == 32 or c == 10 or c == 13 or c == 9 then
    i = find(s, "[^ \t\r\n]", i)
    c = i and byte(s, i)
  end
  if c == 34 then -- string; fast path when it has no escapes
    local _, e, v = find(s, '^"([^"\\%c]*)"', i)
    if e then return v, e + 1 end
    return decode_escaped(s, i + 1)
  elseif c == 123 then
    if depth >= 256 then decode_error(s, i, "nested too deeply") end
    return decode_object(s, i + 1, depth + 1)
  elseif c == 91 then
    if depth >= 256 then decode_error(s, i, "nested too deeply") end
    return decode_array(s, i + 1, depth + 1)
  elseif c == 45 or (c and c >= 48 and c <= 57) then
    local _, e, num = find(s, "^(-?%d+%.?%d*[eE]?[-+]?%d*)", i)
    local v = e and tonumber(num)
    if not v then decode_error(s, i, "invalid number") end
    return v, e + 1
  elseif c == 116 then
    if sub(s, i, i + 3) == "true" then return true, i + 4 end
  elseif c == 102 then
    if sub(s, i, i + 4) == "false" then return false, i + 5 end
  elseif c == 110 then
    if sub(s, i, i + 3) == "null" then return null_value, i + 4 end
  elseif not c then
    decode_error(s, #s + 1, "unexpected end of input")
  end
  decode_error(s, i, "unexpected character")
end

-------------------------------------------------------------------------------- shapes
-- The stream chunks of one provider come in a few shapes: the same keys, nesting, literals and
-- spacing, only the string and number values differ. In the hot path (stream chunks, where key
-- order is not kept) json.decode learns the shape of a text the general decoder has read: one
-- anchored pattern whose captures are the values, and a builder, compiled from generated code,
-- that makes the tables the general decoder would. A later text of that shape costs one
-- string.find and a few table constructors: about 3x faster than the general decoder
-- (bench/bench_lua_json.py). No parser does this, hence hand-written.
--
-- The general decoder stays the reference. A shape accepts a text only when the general decoder
-- would read it to the same value, and anything else falls back to it:
--   * keys and literals (true/false/null) are matched exactly, whitespace where the learned text
--     had some (any amount, as the general decoder allows); keys with escapes, duplicate keys
--     (a table constructor's order is undefined) and deep or large texts are never learned;
--   * a string value is captured as "([^"%c]*)": when the text holds a backslash, each capture
--     is decoded like decode_escaped does, and one that ends in an escaped quote (an odd run of
--     backslashes: the real string goes on) or holds an invalid escape rejects the text;
--   * a number is captured as ([-%d][-+%d.eE]*) and kept only when the general decoder's greedy
--     number pattern spans all of it (then tonumber gives the same integer or float);
--   * every quantified item is followed by a character outside its class, so a match never
--     backtracks more than linearly (the matcher runs in one C call, out of the CPU hook's reach).
-- A stream whose texts keep missing (e.g. every chunk differs) turns shapes off for a while, so
-- the worst case costs little more than the general decoder. A shape is learned from the second
-- text of its outline (shape_learn_maybe), and from two texts of a shape that share a long
-- prefix it makes a prefix builder, which skips that prefix with one memcmp (shape_split).
local SHAPE_MAX_BYTES = 4096  -- larger texts are not stream chunks worth it
local SHAPE_MAX_CAPTURES = 24 -- Lua allows 32; keeps the matcher's recursion shallow
local SHAPE_MAX_DEPTH = 12
local SHAPE_SLOTS = 6
local shapes, shape_recs, nshapes = {}, {}, 0 -- builders and their records, most recent first
local shape_tries, shape_misses, shape_cooldown = 0, 0, 0
local stat_hits, stat_learned, stat_paused = 0, 0, 0 -- totals, for tests and diagnostics
local stat_prefix = 0 -- hits of a prefix builder (see shape_split)
local compile = load -- captured while the real globals are still there (the sandbox strips them)
local pcall = pcall

local function shape_num(c)
  local _, e = find(c, "^-?%d+%.?%d*[eE]?[-+]?%d*")
  if e == #c then return tonumber(c) end
  return nil
end

local simple_escapes = {
  ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t",
}

-- For texts where shape_decode spelt \" as \q (see there): \q means a quote.
local quote_escapes = setmetatable({ q = '"' }, { __index = simple_escapes })

local function unescape_capture(c, table_, invalid)
  if not find(c, "\\", 1, true) then return c end
  -- An odd run of backslashes at the end: the quote after it was escaped, the string goes on.
  local j = #c
  while byte(c, j) == 92 do j = j - 1 end
  if (#c - j) % 2 == 1 then return nil end
  -- No \u and no invalid escape (looked for at every backslash, paired or not: a false alarm
  -- only means the slow path): one gsub, which pairs backslashes from the left like JSON does.
  if not find(c, invalid) then return (gsub(c, "\\(.)", table_)) end
  if table_ == quote_escapes then c = gsub(c, "\\(.)", { q = '\\"' }) end
  local ok, v, e = pcall(decode_escaped, c .. '"', 1)
  if ok and e == #c + 2 then return v end
  return nil
end

local function shape_str(c) return unescape_capture(c, simple_escapes, '\\[^"\\/bfnrt]') end
local function shape_str_q(c) return unescape_capture(c, quote_escapes, '\\[^"\\/bfnrtq]') end

-- The code of a shape's builder: captures m..nc come from one anchored find; with m > 1,
-- captures 1..m-1 are constants (upvalues), read from a prefix of the text that the builder
-- first checks is there byte for byte (see shape_split).
local function shape_builder(rec, m, prefix, init, values)
  local nc, kinds = rec.nc, rec.kinds
  local head = "local find, num, tonumber, M, OM, AM, P, PRE, INIT"
  for k = 1, m - 1 do head = head .. ", c" .. k end
  local code, nl = { head .. " = ...\nreturn function(s, esc, str, N)\n" }, 1
  local names = {}
  for k = m, nc do names[#names + 1] = "c" .. k end
  local lhs = #names > 0 and "local _, e, " .. concat(names, ", ") or "local _, e"
  nl = nl + 1
  if m > 1 then
    code[nl] = "if find(s, PRE, 1, true) ~= 1 then return nil end\n" .. lhs .. " = find(s, P, INIT)\n"
  else
    code[nl] = lhs .. " = find(s, P)\n"
  end
  nl = nl + 1; code[nl] = "if not e then return nil end\n"
  local strings = {}
  for k = m, nc do
    if kinds[k] == "n" then
      nl = nl + 1; code[nl] = format("c%d = num(c%d) if c%d == nil then return nil end\n", k, k, k)
    elseif kinds[k] == "i" then
      nl = nl + 1; code[nl] = format("c%d = tonumber(c%d)\n", k, k)
    else
      strings[#strings + 1] = format("c%d = str(c%d) if c%d == nil then return nil end\n", k, k, k)
    end
  end
  if #strings > 0 then
    nl = nl + 1; code[nl] = "if esc then\n" .. concat(strings) .. "end\n"
  end
  nl = nl + 1; code[nl] = "return " .. rec.expr .. "\nend\n"
  local chunk = compile(concat(code, "", 1, nl), "=nbllm.json.shape", "t", {})
  if not chunk then return nil end
  local pattern = rec.pattern
  if m > 1 then pattern = "^" .. concat(rec.pat, "", rec.cap_at[m], rec.np) end
  return chunk(find, shape_num, tonumber, setmetatable, object_mt, array_mt, pattern, prefix,
    init, unpack(values or {}, 1, m - 1))
end

--- The builder of the shape of s (a text the general decoder has read), or nil.
local function shape_learn(s)
  local pat, np = { "^" }, 1
  local kinds, nc, cap_at = {}, 0, {}
  local i, depth = 1, 0
  local function lit(x) np = np + 1; pat[np] = gsub(x, "[^%w]", "%%%0") end
  local function ws()
    -- Whitespace where the text had some matches any amount (Anthropic pads its events with a
    -- varying run of spaces); none where it had none.
    local _, e = find(s, "^[ \t\r\n]*", i)
    if e >= i then np = np + 1; pat[np] = "[ \t\r\n]*"; i = e + 1 end
  end
  local function capture(kind, piece)
    nc = nc + 1
    kinds[nc] = kind
    np = np + 1; pat[np] = piece
    cap_at[nc] = np
    return nc <= SHAPE_MAX_CAPTURES and ("c" .. nc) or nil
  end
  local value
  local function members(close, body)
    -- body(): reads one member and returns its code, or nil
    local parts, n = {}, 0
    ws()
    if byte(s, i) == close then
      lit(char(close)); i = i + 1
      return parts, 0
    end
    while true do
      local code = body()
      if not code then return nil end
      n = n + 1; parts[n] = code
      ws()
      local b = byte(s, i)
      if b == 44 then
        lit(","); i = i + 1
      elseif b == close then
        lit(char(close)); i = i + 1
        return parts, n
      else
        return nil
      end
    end
  end
  value = function()
    ws()
    local c = byte(s, i)
    if c == 34 then
      local _, e = find(s, '^"[^"\\%c]*"', i)
      if not e then
        local ok, _, j = pcall(decode_escaped, s, i + 1)
        if not ok then return nil end
        e = j - 1
      end
      i = e + 1
      return capture("s", '"([^"%c]*)"')
    elseif c == 45 or (c and c >= 48 and c <= 57) then
      local _, e = find(s, "^-?%d+%.?%d*[eE]?[-+]?%d*", i)
      if not e then return nil end
      local _, int_end = find(s, "^-?%d+", i)
      i = e + 1
      -- An integer is captured as one (then tonumber reads it as the general decoder does;
      -- a fraction or exponent there fails the match); other numbers take shape_num's check.
      if int_end == e then return capture("i", "(-?%d+)") end
      return capture("n", "([-%d][-+%d.eE]*)")
    elseif c == 123 or c == 91 then
      depth = depth + 1
      if depth > SHAPE_MAX_DEPTH then return nil end
      lit(char(c)); i = i + 1
      local parts, n
      if c == 91 then
        parts, n = members(93, value)
        if not parts then return nil end
        depth = depth - 1
        return "M({" .. concat(parts, ",", 1, n) .. "},AM)"
      end
      local seen = {}
      parts, n = members(125, function()
        ws()
        local _, e, k = find(s, '^"([^"\\%c]*)"', i)
        if not e or seen[k] then return nil end
        seen[k] = true
        lit(sub(s, i, e)); i = e + 1
        ws()
        if byte(s, i) ~= 58 then return nil end
        lit(":"); i = i + 1
        local v = value()
        return v and format("[%q]=%s", k, v)
      end)
      if not parts then return nil end
      depth = depth - 1
      return "M({" .. concat(parts, ",", 1, n) .. "},OM)"
    elseif c == 116 and sub(s, i, i + 3) == "true" then
      lit("true"); i = i + 4
      return "true"
    elseif c == 102 and sub(s, i, i + 4) == "false" then
      lit("false"); i = i + 5
      return "false"
    elseif c == 110 and sub(s, i, i + 3) == "null" then
      lit("null"); i = i + 4
      return "N"
    end
    return nil
  end

  local expr = value()
  if not expr then return nil end
  local _, e = find(s, "^[ \t\r\n]*", i)
  if e ~= #s then return nil end
  np = np + 1; pat[np] = "[ \t\r\n]*$"
  local pattern = concat(pat, "", 1, np)
  -- Already known: the text missed it for a value the shape cannot take (e.g. an escaped quote).
  for k = 1, nshapes do
    if shape_recs[k].pattern == pattern then return nil end
  end

  local rec = { pat = pat, np = np, cap_at = cap_at, kinds = kinds, nc = nc, expr = expr,
    pattern = pattern, tries = 0 }
  local f = shape_builder(rec, 1)
  if not f then return nil end
  return f, rec
end

-- \" inside a string cannot be captured by "([^"%c]*)", so it is spelt \q, in a text that
-- holds no "\q" at all (else it is left alone): backslashes pair from the left (none stands
-- outside a string in JSON, and none in a shape's literal parts), so every string keeps its
-- bounds, and each \q in the captures is exactly a \" of the text (shape_str_q reads it back).
local quote_as_q = { ['"'] = "\\q" }

-- Put builder f and its record r first, moving down the entries before slot k.
local function shape_to_front(k, f, r)
  for j = k, 2, -1 do shapes[j] = shapes[j - 1]; shape_recs[j] = shape_recs[j - 1] end
  shapes[1] = f; shape_recs[1] = r
end

-- Prefix builders. The chunks of one stream mostly repeat their first values (id, object,
-- created, model, ...) and differ in the last ones (the text delta). Once two texts of a shape
-- share a prefix that ends where capture m starts, a second builder checks that prefix with
-- one plain find (memcmp) and matches only the rest of the pattern from there: the pattern
-- matcher, which costs some nanoseconds per byte, no longer walks the prefix. Its values are
-- those of the texts it came from: the shape's match is decided left to right, each item
-- ending at the first byte outside its class, so the same bytes give the same captures, and
-- capture m starting at the same place is checked by the anchored find. A prefix holding a
-- backslash is not used (its strings would need unescaping, and \" is respelt), nor a short
-- one (not worth a second find). A shape makes at most SPLIT_TRIES prefix builders.
local SPLIT_MIN_BYTES, SPLIT_TRIES = 32, 4
local POS_PIECES = { s = '"()[^"%c]*"', i = "()-?%d+", n = "()[-%d][-+%d.eE]*" }

local function shape_split(rec, a, b)
  rec.tries = rec.tries + 1
  local nc, kinds, cap_at = rec.nc, rec.kinds, rec.cap_at
  if nc < 2 then return nil end
  local pp = {}
  for j = 1, rec.np do pp[j] = rec.pat[j] end
  for c = 1, nc do pp[cap_at[c]] = POS_PIECES[kinds[c]] end
  local pos = pack(find(b, concat(pp, "", 1, rec.np)))
  if not pos[1] then return nil end
  -- The last capture m such that a and b agree on everything before it.
  local m, init
  for c = 2, nc do
    local start = pos[c + 2]
    if kinds[c] == "s" then start = start - 1 end -- the piece starts at the opening quote
    if sub(a, 1, start - 1) ~= sub(b, 1, start - 1) then break end
    m, init = c, start
  end
  if not m or init - 1 < SPLIT_MIN_BYTES then return nil end
  local prefix = sub(b, 1, init - 1)
  if find(prefix, "\\", 1, true) then return nil end
  local caps = pack(find(b, rec.pattern))
  local values = {}
  for c = 1, m - 1 do
    local v = caps[c + 2]
    if kinds[c] == "i" then v = tonumber(v) elseif kinds[c] == "n" then v = shape_num(v) end
    values[c] = v
  end
  return shape_builder(rec, m, prefix, init, values)
end

-- A text decoded by the full builder of rec: keep it, and from two such texts make a prefix
-- builder (again once the one made before stopped fitting).
local function shape_full_hit(rec, s)
  if rec.tries >= SPLIT_TRIES then return end
  local last = rec.last
  if last then
    rec.last = nil
    rec.split = shape_split(rec, last, s)
  else
    rec.split = nil
    rec.last = s
  end
end

-- `tried`: the prefix builder json.decode's fast path already tried on this text (and missed).
local function shape_decode(s, tried)
  local esc = find(s, "\\", 1, true) ~= nil
  local str = shape_str
  if esc and find(s, '\\"', 1, true) and not find(s, "\\q", 1, true) then
    s = gsub(s, "\\(.)", quote_as_q)
    str = shape_str_q
  end
  for k = 1, nshapes do
    local rec = shape_recs[k]
    local split = rec.split
    local v = split and split ~= tried and split(s, esc, str, null_value) or nil
    if v == nil then
      v = shapes[k](s, esc, str, null_value)
      if v ~= nil then shape_full_hit(rec, s) end
    else
      stat_prefix = stat_prefix + 1
    end
    if v ~= nil then
      if k > 1 then shape_to_front(k, shapes[k], rec) end
      return v
    end
  end
  return nil
end

-- A shape is learned the second time a text of its outline (its structural characters, the
-- other bytes dropped: one cheap gsub) is read by the general decoder, not the first: a
-- stream's one-off chunks (a role header, the finish, the usage) are then never learned, and
-- a short answer learns nothing it would not use (learning costs about ten decodes).
-- Values holding those characters only make an outline look new once more.
local outlines, noutlines = {}, 0
local learn_skips = 0
local function shape_learn_maybe(s)
  learn_skips = learn_skips + 1
  if nshapes < SHAPE_SLOTS or learn_skips % 4 == 0 then
    local outline = gsub(s, "[^{}%[%]:,]+", "")
    if not outlines[outline] then
      if noutlines >= 64 then outlines, noutlines = {}, 0 end
      outlines[outline] = true
      noutlines = noutlines + 1
      return
    end
    local f, r = shape_learn(s)
    if f then
      stat_learned = stat_learned + 1
      if nshapes < SHAPE_SLOTS then nshapes = nshapes + 1 end
      shape_to_front(nshapes, f, r) -- full: the least recently used one drops out
    end
  end
end

--- Decode a JSON text. Raises an error with the byte position on invalid input.
--- JSON null decodes to nil; with opts = {null = json.null} it decodes to json.null.
function json.decode(s, opts)
  -- The commonest call first, in as few VM instructions as it takes (each costs more under the
  -- sandbox's count hook): a stream chunk that the most recent shape's prefix builder decodes,
  -- without an escaped quote (shape_decode respells those). Anything else goes the long way,
  -- which gives the same value.
  local tried
  if opts == nil and not keep_order and shape_cooldown == 0 and type(s) == "string"
    and #s <= SHAPE_MAX_BYTES then
    local rec = shape_recs[1]
    local split = rec and rec.split
    local esc = split and find(s, "\\", 1, true)
    if split and not (esc and find(s, '\\"', esc, true)) then
      local v = split(s, esc ~= nil, shape_str, nil)
      if v ~= nil then
        null_value = nil
        shape_tries = shape_tries + 1
        stat_hits = stat_hits + 1
        stat_prefix = stat_prefix + 1
        return v
      end
      tried = split
    end
  end
  local st = type(s)
  if st == "number" then
    s = tostring(s) -- as the kernel (its string check converts numbers)
  elseif st ~= "string" then
    error("json.decode: expected a string, got " .. st, 0)
  end
  null_value = nil
  if opts ~= nil then
    if type(opts) ~= "table" or rawequal(opts, null) then
      error("json.decode: the options must be a table such as {null = json.null}, got "
        .. type(opts), 0)
    end
    local want = rawget(opts, "null")
    if want ~= nil then
      if not rawequal(want, null) then
        error("json.decode: the only value the 'null' option takes is json.null", 0)
      end
      null_value = null
    end
  end
  local shaped = false
  if not keep_order and #s <= SHAPE_MAX_BYTES then
    if shape_cooldown > 0 then
      shape_cooldown = shape_cooldown - 1
    else
      shaped = true
      if nshapes > 0 then
        local v = shape_decode(s, tried)
        if v ~= nil then
          shape_tries = shape_tries + 1
          stat_hits = stat_hits + 1
          return v
        end
      end
    end
  end
  if shaped then -- counted before the general decoder runs: invalid texts are misses too
    shape_tries = shape_tries + 1
    shape_misses = shape_misses + 1
    if shape_tries >= 64 then
      -- More misses than hits in the last 64 texts: shapes do not pay here; pause them.
      if shape_misses * 2 > shape_tries then
        shape_cooldown = 1024
        stat_paused = stat_paused + 1
      end
      shape_tries, shape_misses = 0, 0
    end
  end
  local v, i = decode_value(s, 1, 0)
  i = find(s, "[^ \t\r\n]", i)
  if i then decode_error(s, i, "trailing data") end
  if shaped and shape_cooldown == 0 then shape_learn_maybe(s) end
  return v
end


-- The second value is for the trusted sandbox setup only (never given to scripts).
local control = {
  set_keep_order = function(on) keep_order = on end,
  set_written = function(t) written = t end,
  -- texts decoded by a shape, shapes learned, times shapes were paused, prefix builder hits
  stats = function() return stat_hits, stat_learned, stat_paused, stat_prefix end,
}
return json, control
