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
local table_insert, table_remove = table.insert, table.remove
local pcall = pcall
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
    -- A key found in key_texts is a string (only string keys go there); another key takes
    -- the general path, which adds it.
    local mt = getmetatable(v)
    if mt == nil or rawequal(mt, object_mt) then
      local k, x = next(v)
      local q = key_texts[k]
      if q and type(x) == "string" and next(v, k) == nil then
        if #x > BIG then charge(#x // 2) end
        if not find(x, PLAIN) then x = gsub(x, '[%c"\\]', escapes) end
        local r = '{"' .. q .. '":"' .. x .. '"}'
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

-------------------------------------------------------------------------------- templates
-- The payloads of one stream come in a few shapes: the same keys, nesting, literals and
-- spacing, and mostly the same values too; only a text delta (and perhaps a counter) changes.
-- In the hot path (stream chunks, where key order is not kept) json.decode learns such a shape
-- as DATA: the text split into constant pieces and the few values that changed between two
-- texts of that shape, and a tree saying where each value goes. A later text of that shape
-- costs one comparison of its constant prefix, one anchored string.find up to its last changed
-- value (the captures are the changed values), one comparison of the constant suffix, and a
-- fixed loop that makes the tables from the learned lists. No code is generated: the lists are
-- read by one function (template_decode), and the pattern is a plain argument of string.find,
-- like the decoder's own patterns. No JSON library does this (a learned template of a stream's
-- payloads), hence hand-written.
--
-- The general decoder stays the reference: a template accepts a text only when the general
-- decoder would read it to the same value, and anything else falls back to it.
--   * Every constant piece (keys, structure, whitespace, true/false/null, values that did not
--     change) is matched byte for byte, so it decodes to the value it decoded to when learned.
--   * A changed string is captured as [^"%c]* (with no backslash in the text: [#-\255 !]*, the
--     same class as the decoder's); when the text holds a backslash, a capture is unescaped as
--     decode_escaped does, and one that ends in an odd run of backslashes (the string goes on)
--     or holds an invalid escape sends the text to the general decoder.
--   * A changed integer is captured as (-?%d+), any other number as ([-%d][-+%d.eE]*) and kept
--     only when the decoder's own number pattern spans the whole capture.
--   * Every quantified item is followed by a character outside its class (a quote after a
--     string, a comma, bracket or space after a number), so a match never backtracks more than
--     linearly: the matcher runs in one C call, out of the CPU hook's reach, on at most
--     T_MAX_BYTES bytes.
--   * Keys with escapes, duplicate keys, arrays holding null, deep or big texts are never
--     learned.
-- A shape is learned from the second text of its outline (the text with every value blanked
-- out), so a stream's one-off payloads (the role header, the finish, the usage) cost nothing
-- more than the general decoder. Texts that keep missing pause the templates for a while.
local T_MAX_BYTES = 4096 -- larger texts are not stream chunks worth it
local T_MAX_VALUES = 64 -- scalar values in a learned text
local T_MAX_CAPTURES = 24 -- changed values and padding in a template (Lua allows 32 captures)
local T_MAX_DEPTH = 12
local T_KEEP = 4 -- templates kept, most recent first
local T_MISSES, T_PAUSE = 16, 256 -- after this many misses in a row, no template for a while
local templates, ntemplates = {}, 0
local hits, learned, pauses = 0, 0, 0 -- totals, for tests and diagnostics (control.stats)
local pending = nil -- the record of the last text whose outline had no template yet
local misses, paused = 0, 0
-- Texts the hot path decodes before it learns any shape (set by the sandbox: control.set_warmup).
-- Learning a shape costs more than many texts read through it save, and a sandbox lives for one
-- request: a short answer (a map row: a dozen payloads) would pay the learning and never the gain
-- (it cost a map row about 2 ms of CPU, 1.4x). A long stream loses the first few texts' gain only.
local warmup = 0
-- The templates' hot path is open (key order not kept, not paused, a template to try): one
-- upvalue for json.decode to test, set again by rehot() wherever one of the three changes
-- (and on json.decode's other path, should the CPU hook have stopped a change half way).
local hot = false
local function rehot() hot = not keep_order and paused == 0 and ntemplates > 0 end

local simple_escapes = {
  ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t",
}
-- A text holding \" is read with each \" spelt \q (see template_decode): a string capture can
-- then hold an escaped quote. \q means a quote in its captures.
local QUOTE_AS_Q, Q_AS_QUOTE = { ['"'] = "\\q" }, { q = '\\"' }
local quote_escapes = setmetatable({ q = '"' }, { __index = simple_escapes })

-- A captured string's value (quoted: the text was spelt with \q), or nil to leave the text to
-- the general decoder.
local function unescape_capture(c, quoted)
  if not find(c, "\\", 1, true) then return c end
  -- An odd run of backslashes at the end: the quote after it was escaped, the string goes on.
  local j = #c
  while byte(c, j) == 92 do j = j - 1 end
  if (#c - j) % 2 == 1 then return nil end
  -- Without \u (or an invalid escape: a false alarm only means the slow path), one gsub, which
  -- pairs backslashes from the left as JSON does.
  if quoted then
    if not find(c, '\\[^"\\/bfnrtq]') then return (gsub(c, "\\(.)", quote_escapes)) end
    c = gsub(c, "\\(.)", Q_AS_QUOTE)
  elseif not find(c, '\\[^"\\/bfnrt]') then
    return (gsub(c, "\\(.)", simple_escapes))
  end
  local ok, v, e = pcall(decode_escaped, c .. '"', 1)
  if ok and e == #c + 2 then return v end
  return nil
end

local NUMBER = "^-?%d+%.?%d*[eE]?[-+]?%d*"
local function number_capture(c)
  local _, e = find(c, NUMBER)
  if e == #c then return tonumber(c) end
  return nil
end

-- The record of s, a text the general decoder has just read: the pieces between its scalar
-- values (lits[1..n+1]), each value's kind ("s" string, "i" integer, "n" other number), raw
-- text and decoded value, and the tree of tables (see lay_out) whose sources are value numbers;
-- or nil when s is not worth learning.
local function learn(s)
  local lits, nl, piece = {}, 0, {}
  local np = 0
  local kinds, raws, vals, nv = {}, {}, {}, 0
  local i, depth, over = 1, 0, false
  local function lit(x) np = np + 1; piece[np] = x end
  local function slot(kind, raw, v)
    nv = nv + 1
    if nv > T_MAX_VALUES then over = true end
    nl = nl + 1; lits[nl] = concat(piece, "", 1, np); np = 0
    kinds[nv], raws[nv], vals[nv] = kind, raw, v
    return nv
  end
  -- A run of whitespace is a value too (kind "w", in no table): padding that changes from
  -- text to text (Anthropic pads its events with a run of spaces) is matched as any run.
  local function ws()
    local _, e = find(s, "^[ \t\r\n]*", i)
    if e >= i then slot("w", sub(s, i, e)); i = e + 1 end
  end
  -- A value's source: a value number, false (a literal, its value in `const`), or a node.
  local value
  value = function()
    ws()
    local c = byte(s, i)
    if c == 34 then
      local _, e, raw = find(s, '^"([^"\\%c]*)"', i)
      local v = raw
      if not e then
        local ok, x, j = pcall(decode_escaped, s, i + 1)
        if not ok then return nil end
        v, e, raw = x, j - 1, sub(s, i + 1, j - 2)
      end
      i = e + 1
      lit('"')
      local n = slot("s", raw, v)
      lit('"')
      return n
    elseif c == 45 or (c and c >= 48 and c <= 57) then
      local _, e = find(s, NUMBER, i)
      if not e then return nil end
      local raw = sub(s, i, e)
      local _, int_end = find(s, "^-?%d+", i)
      i = e + 1
      return slot(int_end == e and "i" or "n", raw, tonumber(raw))
    elseif c == 116 or c == 102 or c == 110 then
      local _, e, word = find(s, "^(%l+)", i)
      local v = literals[word]
      if v == nil then return nil end
      lit(word); i = e + 1
      return false, v
    elseif c == 123 or c == 91 then
      depth = depth + 1
      if depth > T_MAX_DEPTH then return nil end
      lit(char(c)); i = i + 1
      local close = c == 123 and 125 or 93
      local node = { mt = c == 123 and object_mt or array_mt, keys = {}, src = {}, const = {}, n = 0 }
      local seen = {}
      ws()
      if byte(s, i) == close then
        lit(char(close)); i = i + 1
        depth = depth - 1
        return node
      end
      while true do
        local n = node.n + 1
        if c == 123 then
          ws()
          local _, e, k = find(s, '^"([^"\\%c]*)"', i)
          if not e or seen[k] then return nil end
          seen[k] = true
          lit(sub(s, i, e)); i = e + 1
          ws()
          if byte(s, i) ~= 58 then return nil end
          lit(":"); i = i + 1
          node.keys[n] = k
        else
          node.keys[n] = n
        end
        local src, v = value()
        if src == nil then return nil end
        if src == false and v == null and c == 91 then return nil end -- holes: general path
        node.src[n], node.const[n] = src, v
        node.n = n
        ws()
        local b = byte(s, i)
        if b == 44 then
          lit(","); i = i + 1
        elseif b == close then
          lit(char(close)); i = i + 1
          depth = depth - 1
          return node
        else
          return nil
        end
      end
    end
    return nil
  end
  local root = value()
  if type(root) ~= "table" then return nil end
  ws()
  if i <= #s or over then return nil end
  nl = nl + 1; lits[nl] = concat(piece, "", 1, np)
  local outline = {}
  for k = 1, nv do outline[k] = lits[k] .. "\1" .. kinds[k] end
  outline[nv + 1] = lits[nl]
  return { lits = lits, kinds = kinds, raws = raws, vals = vals, nv = nv, root = root,
    outline = concat(outline, "\1", 1, nv + 1) }
end

-- Where a template's values are, in its `vals` array: the captures first (1..T_MAX_CAPTURES),
-- then what JSON null decodes to in this call, then the constants and the tables made so far.
local NULL_SLOT = T_MAX_CAPTURES + 1

-- The tables of rec's tree, children before their parent (post-order), as the template's
-- parallel lists: each table's marker, member keys, the slot of each member's value (with and
-- without the members that are null), the slot the table itself goes to, and its size (the
-- number of members that are not null).
-- How template_decode makes a table of m members (see there): an object of 1 to 8 members or
-- an array of 1 to 4 items by a constructor of that many fields (an array's as -m), any other
-- by the general loop (0).
local OPS_MAX_OBJECT, OPS_MAX_ARRAY = 8, 4
local function op_of(mt, m)
  if mt == object_mt then return m <= OPS_MAX_OBJECT and m or 0 end
  return m <= OPS_MAX_ARRAY and -m or 0
end

local function lay_out(rec, cap)
  local vals, nv = {}, NULL_SLOT
  local t = { vals = vals, mts = {}, keys = {}, srcs = {}, keys_all = {}, srcs_all = {},
    slots = {}, sizes = {}, ops = {}, ops_all = {}, nn = 0 }
  local function slot_of(v)
    nv = nv + 1; vals[nv] = v
    return nv
  end
  local function visit(node)
    local keys, srcs, keys_all, srcs_all, size = {}, {}, {}, {}, 0
    for i = 1, node.n do
      local x, where = node.src[i], nil
      if type(x) == "table" then
        where = visit(x)
      elseif x and cap[x] then
        where = cap[x]
      else
        local v = x and rec.vals[x] or node.const[i]
        where = v == null and NULL_SLOT or slot_of(v)
      end
      keys_all[i], srcs_all[i] = node.keys[i], where
      if where ~= NULL_SLOT then
        size = size + 1
        keys[size], srcs[size] = node.keys[i], where
      end
    end
    local j = t.nn + 1
    t.nn = j
    local where = slot_of(false)
    t.mts[j], t.keys[j], t.srcs[j], t.slots[j] = node.mt, keys, srcs, where
    t.keys_all[j], t.srcs_all[j] = keys_all, srcs_all
    t.sizes[j] = node.mt == object_mt and size or 0
    t.ops[j], t.ops_all[j] = op_of(node.mt, size), op_of(node.mt, node.n)
    return where
  end
  visit(rec.root)
  return t
end

-- A literal text for a pattern: the magic characters escaped (the others match themselves,
-- which is the matcher's quickest case).
local function literal(x) return (gsub(x, "[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

-- A template from a record and which of its values change (changed[k]), or nil: the constant
-- prefix (compared as a string), the pattern of the rest up to the last changed value (each
-- changed value one capture), and the constant suffix after it (compared as a string).
local function template_of(rec, changed)
  local cap, nc, pieces = {}, 0, 0
  local nums, strs = {}, {}
  local pre, fast, slow = { rec.lits[1] }, { "^" }, { "^" }
  local part = pre
  for k = 1, rec.nv do
    if changed[k] then
      if part ~= pre then
        local text = literal(concat(part))
        fast[#fast + 1] = text; slow[#slow + 1] = text
      end
      part = {}
      local kind = rec.kinds[k]
      pieces = pieces + 1 -- each one a level of the matcher's recursion
      if pieces > T_MAX_CAPTURES then return nil end
      if kind ~= "w" then
        nc = nc + 1
        cap[k] = nc
      end
      if kind == "w" then
        fast[#fast + 1] = "[ \t\r\n]*"; slow[#slow + 1] = "[ \t\r\n]*"
      elseif kind == "s" then
        strs[#strs + 1] = nc
        fast[#fast + 1] = "([#-\255 !]*)"; slow[#slow + 1] = '([^"%c]*)'
      else
        nums[#nums + 1], nums[#nums + 2] = nc, kind == "i"
        local p = kind == "i" and "(-?%d+)" or "([-%d][-+%d.eE]*)"
        fast[#fast + 1] = p; slow[#slow + 1] = p
      end
    else
      part[#part + 1] = rec.raws[k]
    end
    part[#part + 1] = rec.lits[k + 1]
  end
  local t = lay_out(rec, cap)
  t.outline, t.base, t.changed, t.nc, t.nums, t.strs = rec.outline, rec, changed, nc, nums, strs
  t.has_nums = #nums > 0
  t.prefix = concat(pre)
  t.exact = part == pre -- nothing changes: the text is the prefix
  if not t.exact then
    t.fast, t.slow, t.suffix = concat(fast), concat(slow), concat(part)
  end
  return t
end

-- The value of s through a template, or nil (then the general decoder reads it).
local function template_decode(s, esc)
  -- An escaped quote would end a string capture: the text is read with each \" spelt \q
  -- (backslashes paired from the left, as JSON does), unless it holds a \q of its own.
  local quoted = false
  if esc and find(s, '\\"', 1, true) then
    if find(s, "\\q", 1, true) then return nil end
    s = gsub(s, "\\(.)", QUOTE_AS_Q)
    quoted = true
  end
  for j = 1, ntemplates do
    local t = templates[j]
    local prefix, nc = t.prefix, t.nc
    local vals = t.vals
    local ok
    if t.exact then
      ok = s == prefix
    elseif sub(s, 1, #prefix) == prefix then
      local pattern = esc and t.slow or t.fast
      local _, e, c1, c2, c3, c4 = find(s, pattern, #prefix + 1)
      if e and sub(s, e + 1) == t.suffix then
        if nc == 1 then
          vals[1] = c1
        else
          vals[1], vals[2], vals[3], vals[4] = c1, c2, c3, c4
          if nc > 4 then
            local r = pack(find(s, pattern, #prefix + 1))
            for c = 5, nc do vals[c] = r[c + 2] end
          end
        end
        ok = true
        if t.has_nums then
          local nums = t.nums
          for k = 1, #nums, 2 do
          local c = nums[k]
          local v
            if nums[k + 1] then v = tonumber(vals[c]) else v = number_capture(vals[c]) end
            if v == nil then return nil end
            vals[c] = v
          end
        end
        if esc then
          local strs = t.strs
          for k = 1, #strs do
            local c = strs[k]
            local v = unescape_capture(vals[c], quoted)
            if v == nil then return nil end
            vals[c] = v
          end
        end
      end
    end
    if ok then
      -- The tables, children first. Each is made by one constructor with a field per member
      -- where its size has a branch below (a table of that size, its hash part sized by the
      -- constructor, and no loop: the fewest VM instructions, each of which pays the CPU
      -- hook), else sized and filled by a loop.
      local keys, srcs, ops = t.keys, t.srcs, t.ops -- without the null members
      if null_value ~= nil then
        vals[NULL_SLOT] = null_value
        keys, srcs, ops = t.keys_all, t.srcs_all, t.ops_all
      end
      local mts, slots = t.mts, t.slots
      local node
      for n = 1, t.nn do
        local k, src, op = keys[n], srcs[n], ops[n]
        if op == 1 then
          node = { [k[1]] = vals[src[1]] }
        elseif op == 2 then
          node = { [k[1]] = vals[src[1]], [k[2]] = vals[src[2]] }
        elseif op < 0 then
          if op == -1 then
            node = { vals[src[1]] }
          elseif op == -2 then
            node = { vals[src[1]], vals[src[2]] }
          elseif op == -3 then
            node = { vals[src[1]], vals[src[2]], vals[src[3]] }
          else
            node = { vals[src[1]], vals[src[2]], vals[src[3]], vals[src[4]] }
          end
        elseif op == 0 then
          -- A table with room for its members, so that filling it does not grow it step by
          -- step: a constructor's named fields size its hash part, and fields set to nil are
          -- not stored (Lua 5.4), so it starts empty.
          local size = t.sizes[n]
          if size <= 2 then
            node = {}
          elseif size <= 4 then
            node = { a = nil, b = nil, c = nil } -- room for 4
          elseif size <= 8 then
            node = { a = nil, b = nil, c = nil, d = nil, e = nil } -- room for 8
          else
            node = {}
          end
          for i = 1, #k do node[k[i]] = vals[src[i]] end
        elseif op <= 4 then
          if op == 3 then
            node = { [k[1]] = vals[src[1]], [k[2]] = vals[src[2]], [k[3]] = vals[src[3]] }
          else
            node = { [k[1]] = vals[src[1]], [k[2]] = vals[src[2]], [k[3]] = vals[src[3]],
              [k[4]] = vals[src[4]] }
          end
        elseif op <= 6 then
          if op == 5 then
            node = { [k[1]] = vals[src[1]], [k[2]] = vals[src[2]], [k[3]] = vals[src[3]],
              [k[4]] = vals[src[4]], [k[5]] = vals[src[5]] }
          else
            node = { [k[1]] = vals[src[1]], [k[2]] = vals[src[2]], [k[3]] = vals[src[3]],
              [k[4]] = vals[src[4]], [k[5]] = vals[src[5]], [k[6]] = vals[src[6]] }
          end
        elseif op == 7 then
          node = { [k[1]] = vals[src[1]], [k[2]] = vals[src[2]], [k[3]] = vals[src[3]],
            [k[4]] = vals[src[4]], [k[5]] = vals[src[5]], [k[6]] = vals[src[6]],
            [k[7]] = vals[src[7]] }
        else
          node = { [k[1]] = vals[src[1]], [k[2]] = vals[src[2]], [k[3]] = vals[src[3]],
            [k[4]] = vals[src[4]], [k[5]] = vals[src[5]], [k[6]] = vals[src[6]],
            [k[7]] = vals[src[7]], [k[8]] = vals[src[8]] }
        end
        setmetatable(node, mts[n])
        vals[slots[n]] = node
      end
      return node
    end
  end
  return nil
end

-- After the general decoder read s (in the hot path): learn its shape, as the module says.
local function learn_after(s)
  local rec = learn(s)
  if not rec then return end
  for j = 1, ntemplates do
    local t = templates[j]
    if t.outline == rec.outline then -- a value the template holds constant has changed
      local base, changed, more = t.base, {}, false
      for k = 1, rec.nv do
        changed[k] = t.changed[k] or rec.raws[k] ~= base.raws[k]
        if changed[k] and not t.changed[k] then more = true end
      end
      if more then
        local nt = template_of(base, changed)
        if nt then
          templates[j] = nt
          learned = learned + 1
        else -- count first, then one C call: stopped in between, the list is still sound
          ntemplates = ntemplates - 1
          table_remove(templates, j)
        end
      end
      return
    end
  end
  if not (pending and pending.outline == rec.outline) then
    pending = rec
    return
  end
  local changed = {}
  for k = 1, rec.nv do changed[k] = rec.raws[k] ~= pending.raws[k] end
  local t = template_of(pending, changed)
  pending = nil
  if not t then return end
  -- One C call, then the count (the CPU hook may stop the script at any instruction here, and
  -- the next decode must find a sound list).
  table_insert(templates, 1, t)
  templates[T_KEEP + 1] = nil
  if ntemplates < T_KEEP then ntemplates = ntemplates + 1 end
  learned = learned + 1
end

-- The general decoder on s (esc: s holds a backslash); then, when learning, its shape.
local function decode_general(s, esc, learning)
  if esc then
    STR, KEY, STR_NEXT, LIT_NEXT, SEP_NEXT, STR_LAST = unpack(SLOW, 1, 6)
  else
    STR, KEY, STR_NEXT, LIT_NEXT, SEP_NEXT, STR_LAST = unpack(FAST, 1, 6)
  end
  local v, i = decode_value(s, 1, 0)
  i = find(s, "[^ \t\r\n]", i)
  if i then decode_error(s, i, "trailing data") end
  if learning then
    learn_after(s)
    rehot()
  end
  return v
end

--- Decode a JSON text. Raises an error with the byte position on invalid input.
--- JSON null decodes to nil; with opts = {null = json.null} it decodes to json.null.
function json.decode(s, opts)
  -- The hot path first (a stream payload a template reads): the fewest VM instructions before
  -- the template, each one paying the CPU hook. The same checks as below, in another order.
  if hot and opts == nil and type(s) == "string" and #s <= T_MAX_BYTES then
    null_value = nil
    local esc = find(s, "\\", 1, true)
    local v = template_decode(s, esc)
    if v ~= nil then
      misses, hits = 0, hits + 1
      return v
    end
    misses = misses + 1
    if misses > T_MISSES then
      misses, paused, pauses = 0, T_PAUSE, pauses + 1
      hot = false
    end
    return decode_general(s, esc, true)
  end
  local st = type(s)
  if st == "number" then
    s = tostring(s) -- as the kernel (its string check converts numbers)
  elseif st ~= "string" then
    error("json.decode: expected a string, got " .. st, 0)
  end
  null_value = nil
  if #s > BIG then charge(#s) end
  local esc = find(s, "\\", 1, true)
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
  local learning = false
  if not keep_order and #s <= T_MAX_BYTES then
    if warmup > 0 then
      warmup = warmup - 1
    elseif paused > 0 then
      paused = paused - 1
    else
      if ntemplates > 0 then
        local v = template_decode(s, esc)
        if v ~= nil then
          misses, hits = 0, hits + 1
          return v
        end
      end
      misses = misses + 1
      if misses > T_MISSES then misses, paused, pauses = 0, T_PAUSE, pauses + 1 end
      learning = true
    end
    rehot()
  end
  return decode_general(s, esc, learning)
end

-- The second value is for the trusted sandbox setup only (never given to scripts).
local control = {
  set_keep_order = function(on) keep_order = on; rehot() end,
  set_written = function(t) written = t end,
  set_charge = function(f) charge = f end,
  set_warmup = function(n) warmup = n end,
  stats = function() return hits, learned, pauses end,
}
return json, control
