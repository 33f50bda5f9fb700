-- JSON codec of the notebook_llm Lua sandbox (Lua 5.4). Loaded by runtime.py as a trusted chunk
-- BEFORE any adapter code runs; every library function it uses is captured in a local here, so a
-- script that later replaces string.find & co cannot change how JSON is read or written.
--
-- Semantics (see the module docstring of notebook_llm/adapters/lua/runtime.py for the rationale):
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
-- Work on big strings is charged to the sandbox's budget (set_charge): the C calls below read a
-- string of megabytes in one VM instruction, between two checks of the count hook.
local charge = function() end
local BIG = 65536

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
-- means nothing, and this is the hot path (recording the order is a real part of a decode).
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
  if #k > BIG then charge(#k // 2) end
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
        if #v > BIG then charge(#v // 2) end
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
    if #v > BIG then charge(#v // 2) end
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
    if #v > BIG then charge(#v // 2) end
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
        if #x > BIG then charge(#x // 2) end
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
  local b = byte(s, i)
  if b == 93 then return t, i + 1 end
  local _, e
  if b == 32 or b == 10 or b == 13 or b == 9 then
    _, e = find(s, "^[ \t\r\n]*%]", i)
    if e then return t, e + 1 end
  end
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

-- Objects take one anchored find per member in the common case: a plain string or literal
-- value, the separator after it, and the NEXT member's key and colon, in one match (a stream
-- chunk is mostly such members, and each C call costs more than the bytes it reads). Numbers
-- take two, since one pattern for a number and what follows would backtrack through every split
-- of a long digit run when nothing follows (O(n^3) in one C call, out of the CPU hook's reach).
-- Anything else (nested values, escapes, the last member, invalid input) takes the general path.
-- Each quantified item is followed by a character outside its class: no match backtracks.
local WS = "[ \t\r\n]*"
local NUM = "^(-?%d+%.?%d*[eE]?[-+]?%d*)"
local SEP = "^" .. WS .. "([,}])"
-- The patterns that read plain string contents, for a class of characters. For a text without
-- a backslash (one memchr finds out) the class is a range that leaves out the quote and the
-- control characters, which the matcher tests about twice as fast as [^"\\%c]; a control
-- character then fails the match, and the general path reports it.
local function string_patterns(class)
  local str = '"(' .. class .. '*)"'
  local next_key = WS .. "," .. WS .. str .. WS .. ":" .. WS .. "()"
  return "^" .. str, "^" .. WS .. str .. WS .. ":" .. WS .. "()", "^" .. str .. next_key,
    "^(%l+)" .. next_key, "^" .. next_key, "^" .. str .. WS .. "}"
end
local SLOW = pack(string_patterns('[^"\\%c]'))
local FAST = pack(string_patterns("[#-\255 !]"))
local LIT_LAST = "^(%l+)" .. WS .. "}"
-- Set by json.decode for the text it reads (it never calls back into a script, so no other
-- decode runs in between).
local STR, KEY, STR_NEXT, LIT_NEXT, SEP_NEXT, STR_LAST = unpack(SLOW, 1, 6)

-- The key at i (a plain one, or with escapes), and the position of its value; or an error.
local function member_key(s, i)
  local _, _, k, v = find(s, KEY, i)
  if k then return k, v end
  i = find(s, "[^ \t\r\n]", i)
  if not i or byte(s, i) ~= 34 then decode_error(s, i or #s + 1, "expected a string key") end
  k, i = decode_escaped(s, i + 1)
  i = find(s, "[^ \t\r\n]", i)
  if not i or byte(s, i) ~= 58 then decode_error(s, i or #s + 1, "expected ':'") end
  return k, find(s, "[^ \t\r\n]", i + 1) or #s + 1
end

local function decode_object(s, i, depth)
  local t = setmetatable({}, object_mt)
  local b = byte(s, i)
  if b == 125 then return t, i + 1 end
  local _, e
  if b == 32 or b == 10 or b == 13 or b == 9 then
    _, e = find(s, "^[ \t\r\n]*}", i)
    if e then return t, e + 1 end
  end
  local order, no
  if keep_order then order, no = {}, 0; key_order[t] = order end
  local k
  k, i = member_key(s, i)
  while true do
    -- k: this member's key; i: where its value starts
    local b = byte(s, i)
    local v, nk, ni, c
    if b == 34 then
      _, _, v, nk, ni = find(s, STR_NEXT, i)
      if not nk then -- the last member?
        _, e, v = find(s, STR_LAST, i)
        if e then
          if order and t[k] == nil then no = no + 1; order[no] = k end
          t[k] = v
          return t, e + 1
        end
      end
    elseif b == 110 or b == 116 or b == 102 then
      local word
      _, _, word, nk, ni = find(s, LIT_NEXT, i)
      if not word then -- the last member?
        _, e, word = find(s, LIT_LAST, i)
        if e then
          v = literals[word]
          if v == nil then decode_error(s, i, "unexpected character") end
          if v == null then v = null_value end
          if order and v ~= nil and t[k] == nil then no = no + 1; order[no] = k end
          t[k] = v
          return t, e + 1
        end
      end
      if word then
        v = literals[word]
        if v == nil then decode_error(s, i, "unexpected character") end
        if v == null then v = null_value end
      end
    elseif b == 45 or (b and b >= 48 and b <= 57) then
      local ne, num
      _, ne, num = find(s, NUM, i)
      if ne then
        _, _, nk, ni = find(s, SEP_NEXT, ne + 1)
        if nk then
          v = tonumber(num)
          if not v then decode_error(s, i, "invalid number") end
        else -- the last member, or something other than a plain key next
          v = tonumber(num)
          if not v then decode_error(s, i, "invalid number") end
          i = ne + 1
          _, e, c = find(s, SEP, i)
          if not e then decode_error(s, find(s, "[^ \t\r\n]", i) or #s + 1, "expected ',' or '}'") end
          if order and v ~= nil and t[k] == nil then no = no + 1; order[no] = k end
          t[k] = v
          if c == "}" then return t, e + 1 end
          k, i = member_key(s, e + 1)
          goto continue
        end
      end
    end
    if nk then -- the fast path read this member and the next key
      if order and v ~= nil and t[k] == nil then no = no + 1; order[no] = k end
      t[k] = v
      k, i = nk, ni
    else
      v, i = decode_value(s, i, depth)
      _, e, c = find(s, SEP, i)
      if not e then decode_error(s, find(s, "[^ \t\r\n]", i) or #s + 1, "expected ',' or '}'") end
      if order and v ~= nil and t[k] == nil then no = no + 1; order[no] = k end
      t[k] = v
      if c == "}" then return t, e + 1 end
      k, i = member_key(s, e + 1)
    end
    ::continue::
  end
end

decode_value = function(s, i, depth)
  local c = byte(s, i)
  if c == 32 or c == 10 or c == 13 or c == 9 then
    i = find(s, "[^ \t\r\n]", i)
    c = i and byte(s, i)
  end
  if c == 34 then -- string; fast path when it has no escapes
    local _, e, v = find(s, STR, i)
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

--- Decode a JSON text. Raises an error with the byte position on invalid input.
--- JSON null decodes to nil; with opts = {null = json.null} it decodes to json.null.
function json.decode(s, opts)
  local st = type(s)
  if st == "number" then
    s = tostring(s) -- as the kernel (its string check converts numbers)
  elseif st ~= "string" then
    error("json.decode: expected a string, got " .. st, 0)
  end
  null_value = nil
  if #s > BIG then charge(#s) end
  if find(s, "\\", 1, true) then
    STR, KEY, STR_NEXT, LIT_NEXT, SEP_NEXT, STR_LAST = unpack(SLOW, 1, 6)
  else
    STR, KEY, STR_NEXT, LIT_NEXT, SEP_NEXT, STR_LAST = unpack(FAST, 1, 6)
  end
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
  local v, i = decode_value(s, 1, 0)
  i = find(s, "[^ \t\r\n]", i)
  if i then decode_error(s, i, "trailing data") end
  return v
end

-- The second value is for the trusted sandbox setup only (never given to scripts).
local control = {
  set_keep_order = function(on) keep_order = on end,
  set_written = function(t) written = t end,
  set_charge = function(f) charge = f end,
}
return json, control
