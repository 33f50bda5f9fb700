--[[
draft_support.lua - the helpers every drafted adapter shares (a library, not an adapter).

A draft written by `python -m notebook_llm draft-adapter` (or `%adapter draft`) keeps its own
lines to what its API does (which field is the text, the finish, the usage) and loads this with
`local draft = require("draft_support")`. `export-adapter` inlines only the sections a draft uses.

  draft.EACH                      a path step: every element of a list
  draft.get(v, k1, k2, ...)       the value at that path (1 or EACH = the first element), nil if
                                  a step is missing or the value is null
  draft.is_kind(c, kind, value)   whether a payload of kind `kind` is of kind `value` (a whole
                                  body, read like a payload, is of every kind)
  draft.text(v, path, keep)       the strings at `path` (a list of steps, EACH allowed) joined;
                                  only those whose holding object passes keep(holder); nil if none
  draft.where(key, value)         keep functions: holder[key] == value ...
  draft.unless(key, value)        ... or ~= value (Gemini's thought = true marks reasoning)
  draft.marked, draft.unmarked    keep functions: the holder is (not) marked as reasoning
                                  (a true flag or a type/kind naming thinking)
  draft.reasoning_near(v, path)   reasoning where none was seen (a guess): marked strings at
                                  `path`, or a sibling of it named reasoning_content, reasoning
                                  or thinking
  draft.first_choice(c, path)     drop the alternatives at `path` (choices) from a payload that
                                  carries another choice than the first (n > 1)
  draft.cumulative(auto)          a function turning whole-text-so-far values into deltas (auto:
                                  decided on the stream's second value)
  draft.meaning(raw)              a finish value's meaning: "stop", "length", "tool_calls",
                                  "content_filter", "error", or nil (see below)
  draft.finish(raw)               a finish value for the unified chunk: the contract's own word
                                  for stop / length / tool_calls, else the raw value (a content
                                  filter or an error is named by it: SAFETY), nil for none or a
                                  progress value
  draft.usage(v, spec)            {prompt, completion, ...} from the fields spec names
                                  ({ prompt = PATH or { PATH, PATH }, ... }); nil if none
  draft.ends(kind, values, prefix)
                                  whether a payload kind ends the answer: one of `values`, or
                                  `prefix` followed by one word with a finish meaning
                                  (response.completed / response.incomplete / response.failed)
  draft.calls(v, specs, fragments)
                                  tool calls in the kernel's stream shape (see the section)
  draft.guess_calls(v)            tool calls where none was seen (a guess): objects of the
                                  common shapes anywhere in v
  draft.error_in(v)               {message, code, status} of a top-level `error`, or nil
  draft.chunk(out)                a unified chunk as JSON, "" when it holds nothing
  draft.response(out)             a unified chunk as transform_response's JSON
  draft.whole(v)                  a non-stream body read like a stream payload: an object's
                                  `message` is also its `delta`, and a path that finds nothing
                                  finds its last key anywhere in the body
  draft.openai_request(raw)       the kernel's OpenAI-like request sent on as it is (minus the
                                  fields an API would refuse)

The finish vocabulary is notebook_llm's (notebook_llm/adapters/lua/finish_vocabulary.py, where
it is documented; a test keeps the two copies equal): a value is read by its words (split at
_ - . spaces and lower-to-upper case changes), first match wins: progress values (null, none,
in_progress, ...) mean nothing; then error, content_filter, length, tool_calls, stop by the stems
listed in MEANINGS below; a value with the word unspecified / unknown / other means nothing.

Each section starts with a line "--- @section NAME" (and "uses: A, B" for the sections it
needs): export-adapter reads them.
]]

local json, type, ipairs, pairs, select, next = json, type, ipairs, pairs, select, next
local sub, byte, lower = string.sub, string.byte, string.lower
local null = json.null

local draft = {}

--- @section EACH
-- A path step: every element of a list (parts, content blocks).
draft.EACH = { "every element" }

--- @section whole
-- Bodies made by draft.whole (weak keys: nothing is kept alive by this).
local WHOLE = setmetatable({}, { __mode = "k" })
draft.WHOLE = WHOLE

-- The string keys of an object, sorted: deep searches visit them in one stable order.
local function sorted_keys(v)
  local keys = {}
  for k in pairs(v) do
    if type(k) == "string" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  return keys
end

-- Every value of `key` anywhere in v, each with the object holding it.
local function deep_values(v, key, out, depth)
  if type(v) ~= "table" or depth > 32 then return out end
  if #v > 0 then
    for _, item in ipairs(v) do deep_values(item, key, out, depth + 1) end
    return out
  end
  for _, k in ipairs(sorted_keys(v)) do
    local x = v[k]
    if k == key and x ~= nil and x ~= null then out[#out + 1] = { x, v } end
    deep_values(x, key, out, depth + 1)
  end
  return out
end
draft.deep_values = deep_values

local function copy(v, depth)
  if type(v) ~= "table" or depth > 32 then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x, depth + 1) end
  if out.delta == nil and type(out.message) == "table" then out.delta = out.message end
  return out
end

function draft.whole(v)
  local out = copy(v, 0)
  if type(out) == "table" then WHOLE[out] = true end
  return out
end

--- @section is_kind  uses: whole
-- Whether payload c, whose kind is `kind`, is of kind `value`; a whole body read like a payload
-- (draft.whole) has no kinds, so it is of every one.
function draft.is_kind(c, kind, value)
  return kind == value or WHOLE[c] == true
end

--- @section get  uses: EACH, whole
function draft.get(v, ...)
  local root, n = v, select("#", ...)
  for i = 1, n do
    if type(v) ~= "table" then v = nil; break end
    local k = select(i, ...)
    if k == draft.EACH then k = 1 end -- a list of one (results[*]): its element
    v = v[k]
  end
  if (v == nil or v == null) and n > 0 and WHOLE[root] then
    local key = select(n, ...)
    local found = type(key) == "string" and deep_values(root, key, {}, 0)[1]
    v = found and found[1]
  end
  if v == null then return nil end
  return v
end

--- @section all  uses: EACH, whole
-- The value at a path without EACH steps, and the object holding it (no table is made: this
-- runs on every payload).
local function single_at(v, path)
  local holder = nil
  for i = 1, #path do
    if type(v) ~= "table" then return nil, nil end
    if path[i] == draft.EACH then return false, nil end -- not a single-value path
    holder = v
    v = v[path[i]]
  end
  if v == null then return nil, nil end
  return v, holder
end
draft.single_at = single_at

-- Every value at `path` inside v, each with the object holding it: { {value, holder}, ... }.
local function values_at(v, path, i, holder, out)
  if i > #path then
    if v ~= nil and v ~= null then out[#out + 1] = { v, holder } end
    return out
  end
  if type(v) ~= "table" then return out end
  if path[i] == draft.EACH then
    for _, item in ipairs(v) do values_at(item, path, i + 1, v, out) end
  else
    values_at(v[path[i]], path, i + 1, v, out)
  end
  return out
end

function draft.all(v, path)
  local out = values_at(v, path, 1, nil, {})
  if #out == 0 and WHOLE[v] and type(path[#path]) == "string" then
    return deep_values(v, path[#path], {}, 0) -- a non-stream body: the last key anywhere
  end
  return out
end

--- @section text  uses: all
function draft.text(v, path, keep)
  if not WHOLE[v] then -- the common case, a stream payload: a single value, read directly
    local found, holder = single_at(v, path)
    if found ~= false then
      if type(found) == "string" and (keep == nil or keep(holder)) then return found end
      return nil
    end
  end
  local parts = {}
  for _, found in ipairs(draft.all(v, path)) do
    if type(found[1]) == "string" and (keep == nil or keep(found[2])) then
      parts[#parts + 1] = found[1]
    end
  end
  if #parts == 0 then return nil end
  return table.concat(parts)
end

--- @section where
function draft.where(key, value)
  return function(holder) return type(holder) == "table" and holder[key] == value end
end

function draft.unless(key, value)
  return function(holder) return not (type(holder) == "table" and holder[key] == value) end
end

--- @section first_choice
-- Several choices (n > 1) come each in its own payloads, numbered by an `index`: a payload
-- whose list of alternatives at `path` (choices) holds another choice than the first loses
-- that list, so only choice 0 is read as the answer.
function draft.first_choice(c, path)
  local parent = c
  for i = 1, #path - 1 do
    if type(parent) ~= "table" then return end
    parent = parent[path[i]]
  end
  local list = type(parent) == "table" and parent[path[#path]] or nil
  local first = type(list) == "table" and list[1] or nil
  local index = type(first) == "table" and first.index or nil
  if math.type(index) == "integer" and index ~= 0 then parent[path[#path]] = nil end
end

--- @section cumulative
-- Per stream (one Lua state per stream): each value is the whole text so far; return what is new.
-- With `auto` (the draft saw one value only) the stream's second value decides: the whole text
-- so far when it starts with the first (of 4 characters or more), else each value is a piece.
function draft.cumulative(auto)
  local before, decided, whole = "", not auto, true
  return function(s)
    if type(s) ~= "string" then return nil end
    if not decided then
      if s == "" then return s end
      if before == "" then before = s; return s end
      decided = true
      whole = #before >= 4 and sub(s, 1, #before) == before
    end
    if not whole then return s end
    local prev = before
    before = s
    if sub(s, 1, #prev) == prev then return sub(s, #prev + 1) end
    return s
  end
end

--- @section meaning
local PROGRESS = {
  [""] = true, null = true, none = true, ["nil"] = true, ["false"] = true, inprogress = true,
  running = true, pending = true, queued = true, created = true, started = true,
  streaming = true, generating = true, processing = true, partial = true, continue = true,
  continuing = true, active = true, ongoing = true,
}
-- words that make a whole value progress wherever they stand (ALTERNATIVE_STATUS_PARTIAL)
local PROGRESS_WORDS = {
  partial = true, progress = true, running = true, pending = true, queued = true,
  streaming = true, generating = true, processing = true, continuing = true, ongoing = true,
  unfinished = true, ["not"] = true,
}
local NO_MEANING = { unspecified = true, unknown = true, other = true }
-- { meaning, word stems, whole words, whole values }, tried in this order
local MEANINGS = {
  { "error", { "error", "fail", "malformed", "invalid", "exception", "timeout", "cancel", "abort",
    "expire" }, { "err", "timedout" }, {} },
  { "content_filter", { "filter", "safety", "unsafe", "block", "moderat", "recitation", "prohibit",
    "refus", "sensitive", "guardrail", "spii", "policy", "harm", "censor", "copyright", "violat" },
    {}, {} },
  { "length", { "length", "max", "truncat", "incomplete", "limit", "exceed", "overflow", "budget",
    "cutoff" }, { "long", "cut" }, {} },
  { "tool_calls", { "tool", "function" }, {}, { "requiresaction" } },
  { "stop", { "stop", "end", "eos", "eot", "eom", "complete", "done", "finish", "success",
    "succeed", "normal", "natural", "terminat", "halt", "final" }, { "ok" }, {} },
}
draft.MEANINGS = MEANINGS
draft.MAX_VALUE = 64

-- The words of a value, lower case (ASCII letters and digits; a new word at lower-to-upper).
local function words_of(raw)
  local words, word, prev = {}, {}, 0
  for i = 1, #raw do
    local c = byte(raw, i)
    local upper = c >= 65 and c <= 90
    local alnum = upper or (c >= 97 and c <= 122) or (c >= 48 and c <= 57)
    if not alnum then
      if #word > 0 then words[#words + 1] = table.concat(word); word = {} end
    else
      local prev_low_or_digit = (prev >= 97 and prev <= 122) or (prev >= 48 and prev <= 57)
      if upper and prev_low_or_digit and #word > 0 then
        words[#words + 1] = table.concat(word); word = {}
      end
      word[#word + 1] = lower(string.char(c))
    end
    prev = c
  end
  if #word > 0 then words[#words + 1] = table.concat(word) end
  return words
end
draft.words_of = words_of

local function starts(w, stems)
  for _, s in ipairs(stems) do
    if sub(w, 1, #s) == s then return true end
  end
  return false
end

local function member(w, list)
  for _, x in ipairs(list) do
    if w == x then return true end
  end
  return false
end

local function progress_words(words)
  if PROGRESS[table.concat(words)] then return true end
  for _, w in ipairs(words) do
    if PROGRESS_WORDS[w] then return true end
  end
  return false
end

function draft.meaning(raw)
  if type(raw) ~= "string" or #raw > draft.MAX_VALUE then return nil end
  local words = words_of(raw)
  local joined = table.concat(words)
  if progress_words(words) then return nil end
  for _, w in ipairs(words) do
    if NO_MEANING[w] then return nil end
  end
  for _, m in ipairs(MEANINGS) do
    if member(joined, m[4]) then return m[1] end
    for _, w in ipairs(words) do
      if member(w, m[3]) or starts(w, m[2]) then return m[1] end
    end
  end
  return nil
end

function draft.is_progress(raw)
  return type(raw) == "string" and #raw <= draft.MAX_VALUE and progress_words(words_of(raw))
end

--- @section finish  uses: meaning
local CONTRACT = { stop = "stop", length = "length", tool_calls = "tool_calls" }

function draft.finish(raw)
  if type(raw) == "number" then raw = tostring(raw) end
  if type(raw) ~= "string" or draft.is_progress(raw) then return nil end
  return CONTRACT[draft.meaning(raw) or ""] or raw
end

--- @section ends  uses: meaning
-- kind -> whether it is an end event of the family (each kind worked out once per stream)
local family_end = {}

function draft.ends(kind, values, prefix)
  if type(kind) ~= "string" then return false end
  for _, v in ipairs(values) do
    if kind == v then return true end
  end
  if prefix == nil or sub(kind, 1, #prefix) ~= prefix then return false end
  local known = family_end[kind]
  if known == nil then
    local rest = sub(kind, #prefix + 1)
    known = #words_of(rest) == 1 and draft.meaning(rest) ~= nil
    family_end[kind] = known
  end
  return known
end

-- The finish an end event's last word says (response.incomplete -> "length"), or nil.
function draft.end_finish(kind, prefix)
  if type(kind) ~= "string" or prefix == nil or sub(kind, 1, #prefix) ~= prefix then return nil end
  return draft.finish(sub(kind, #prefix + 1))
end

--- @section usage  uses: all, meaning
-- The first integer at any of `paths` (a path, or a list of paths), and the object holding it.
local function number_at(v, paths)
  if type(paths[1]) ~= "table" or paths[1] == draft.EACH then paths = { paths } end
  for _, path in ipairs(paths) do
    local n, holder = single_at(v, path)
    if n == false or (n == nil and WHOLE[v]) then -- a list step, or a whole body: search
      local found = draft.all(v, path)[1]
      n, holder = found and found[1], found and found[2]
    end
    if math.type(n) == "integer" then return n, holder end
    -- a count some APIs send as a string of digits ("27"; at most 8, below 10^8)
    if type(n) == "string" and #n <= 8 and string.find(n, "^%d+$") then
      return math.tointeger(tonumber(n)), holder
    end
  end
  return nil, nil
end

-- The counts a body may add next to the mapped ones, by the words of their keys.
local function extra_field(key)
  local has = {}
  for _, w in ipairs(words_of(key)) do has[w] = true end
  if has.miss then return nil end
  if has.cache or has.cached then
    if has.creation or has.create or has.write or has.written then return "cache_write" end
    return "cache_read"
  end
  if has.reasoning or has.thinking or has.thought or has.thoughts then return "reasoning_tokens" end
  return nil
end

local function extra_counts(obj, out, depth)
  if type(obj) ~= "table" or depth > 3 then return end
  for _, k in ipairs(sorted_keys(obj)) do
    local x = obj[k]
    local field = math.type(x) == "integer" and extra_field(k)
    if field and out[field] == nil then out[field] = x end
    if type(x) == "table" then extra_counts(x, out, depth + 1) end
  end
end

local FIELDS = { "prompt", "completion", "total", "cache_read", "cache_write", "reasoning_tokens" }

-- spec: { prompt = PATH or { PATH, ... }, completion = ..., ... }. Reasoning and cache counts
-- the spec does not name are also read where the named counts are, by their keys' words
-- (output_tokens_details.thinking_tokens): a body may show them when another did not. A total
-- above input + output makes the output total - input (see below).
-- spec -> the first steps of its paths (worked out once): a payload that has none of them holds
-- no count, and is passed over at once (most payloads of a stream are such).
local FIRSTS = setmetatable({}, { __mode = "k" })

local function firsts_of(spec)
  local found = FIRSTS[spec]
  if found then return found end
  found = {}
  for _, paths in pairs(spec) do
    if type(paths[1]) ~= "table" or paths[1] == draft.EACH then paths = { paths } end
    for _, path in ipairs(paths) do found[#found + 1] = path[1] end
  end
  FIRSTS[spec] = found
  return found
end

function draft.usage(v, spec)
  if type(v) ~= "table" then return nil end
  if not WHOLE[v] then
    local any = false
    for _, first in ipairs(firsts_of(spec)) do
      if v[first] ~= nil then any = true; break end
    end
    if not any then return nil end
  end
  local out, holders = {}, {}
  for _, field in ipairs(FIELDS) do
    if spec[field] then
      local n, holder = number_at(v, spec[field])
      out[field] = n
      if holder then holders[#holders + 1] = holder end
    end
  end
  if next(out) == nil then return nil end
  for _, holder in ipairs(holders) do extra_counts(holder, out, 0) end
  -- a total above input + output: the output count leaves a part out (Gemini's thoughts);
  -- the output is then total - input, as OpenAI counts it (reasoning included)
  local p, c, t = out.prompt, out.completion, out.total
  if p and c and t and t > p + c then out.completion = t - p end
  return out
end

--- @section calls  uses: all, get, whole
-- Objects anywhere in v that hold a call as `g` says: its name and its args (args optional
-- with g.optional; g.loose: args and an index, a continuation without the name).
local function objects_holding(v, g, out, depth)
  if type(v) ~= "table" or depth > 16 then return out end
  if #v > 0 then
    for _, item in ipairs(v) do objects_holding(item, g, out, depth + 1) end
    return out
  end
  local named = g.name ~= nil and draft.get(v, table.unpack(g.name)) ~= nil
  local argued = g.args ~= nil and draft.get(v, table.unpack(g.args)) ~= nil
  if (named and (argued or g.args == nil or g.optional)) or (g.loose and argued and v.index ~= nil) then
    out[#out + 1] = { v, nil }
    return out
  end
  for _, k in ipairs(sorted_keys(v)) do objects_holding(v[k], g, out, depth + 1) end
  return out
end
draft.objects_holding = objects_holding

local function at(obj, path)
  if path == nil then return nil end
  local found = draft.all(obj, path)[1]
  return found and found[1]
end

-- spec: { at = PATH to the call objects, name = PATH, args = PATH, id = PATH, index = PATH,
-- index_root = a payload key that numbers the call, when = { KEY, VALUE } the payload's kind };
-- fragments: { { at = PATH, index_root = KEY, when = { KEY, VALUE } } }
local function applies(v, spec)
  return spec.when == nil or draft.get(v, spec.when[1]) == spec.when[2]
end

function draft.calls(v, specs, fragments)
  local calls = {}
  for _, spec in ipairs(specs or {}) do
    local objects = applies(v, spec) and draft.all(v, spec.at) or {}
    if #objects == 0 and WHOLE[v] then -- a non-stream body: such objects anywhere
      objects = objects_holding(v, spec, {}, 0)
    end
    for _, found in ipairs(objects) do
      local obj = found[1]
      if type(obj) == "table" then
        local name, args, id = at(obj, spec.name), at(obj, spec.args), at(obj, spec.id)
        local index = at(obj, spec.index)
        if index == nil and spec.index_root then index = draft.get(v, spec.index_root) end
        if name ~= nil or args ~= nil then -- an id alone is any object's (a message's)
          local call = { type = "function", name = name, id = id, stream_index = index }
          if type(args) == "string" then
            call.raw_arguments = args
          elseif type(args) == "table" and next(args) == nil then
            call.raw_arguments = "" -- an empty object: the arguments may follow in fragments
          elseif type(args) == "table" then
            call.arguments = args
          end
          calls[#calls + 1] = call
        end
      end
    end
  end
  for _, spec in ipairs(fragments or {}) do
    for _, found in ipairs(applies(v, spec) and draft.all(v, spec.at) or {}) do
      if type(found[1]) == "string" and found[1] ~= "" then
        local call = { raw_arguments = found[1] }
        if spec.index_root then call.stream_index = draft.get(v, spec.index_root) end
        calls[#calls + 1] = call
      end
    end
  end
  if #calls == 0 then return nil end
  return calls
end

--- @section error_in
function draft.error_in(v)
  local e = type(v) == "table" and v.error or nil
  if type(e) == "string" and e ~= "" then return { message = e } end
  if type(e) ~= "table" or e == null then return nil end
  local code = e.code
  if type(code) ~= "string" then code = e.type end
  if type(code) ~= "string" then code = e.status end
  return {
    message = type(e.message) == "string" and e.message or "the API reported an error",
    code = type(code) == "string" and code or nil,
    status = math.type(e.code) == "integer" and e.code or nil,
  }
end

--- @section chunk
function draft.chunk(out)
  if out.content == "" then out.content = nil end
  if out.reasoning_content == "" then out.reasoning_content = nil end
  if out.done == false then out.done = nil end
  if next(out) == nil then return "" end
  if out.tool_calls then out.tool_calls = json.array(out.tool_calls) end
  return json.encode(out)
end

--- @section response
function draft.response(out)
  return json.encode({
    content = out.content or "",
    reasoning_content = out.reasoning_content,
    tool_calls = out.tool_calls and json.array(out.tool_calls) or nil,
    finish_reason = out.finish_reason,
    token_usage = out.usage,
    error = out.error,
  })
end

--- @section openai_request
function draft.openai_request(raw)
  local req = json.decode(raw, { null = null })
  for _, m in ipairs(req.messages) do
    m.reasoning_content = nil -- many APIs reject fields they do not know
    m.is_error = nil
  end
  req.disable_thinking = nil
  return json.encode(req)
end

--- @section message_text
-- A kernel message's text: its string content, or the text parts of a content list joined.
function draft.message_text(content)
  if type(content) == "string" then return content end
  local parts = {}
  if type(content) == "table" then
    for _, p in ipairs(content) do
      if type(p) == "table" and p.type == "text" and type(p.text) == "string" then
        parts[#parts + 1] = p.text
      end
    end
  end
  return table.concat(parts)
end

--- @section put
-- t[path[1]][path[2]]... = v, making the tables on the way.
function draft.put(t, path, v)
  for i = 1, #path - 1 do
    if type(t[path[i]]) ~= "table" then t[path[i]] = {} end
    t = t[path[i]]
  end
  t[path[#path]] = v
end

--- @section marked
-- Whether an object is marked as reasoning: a true flag or a type/kind naming thinking.
local REASONING_WORDS = { "reason", "think", "thought", "analysis" }
function draft.marked(holder)
  if type(holder) ~= "table" then return false end
  for k, v in pairs(holder) do
    if type(k) == "string" then
      local key = lower(k)
      local word = (v == true and key)
        or ((key == "type" or key == "kind") and type(v) == "string" and lower(v))
      if word then
        for _, w in ipairs(REASONING_WORDS) do
          if string.find(word, w, 1, true) then return true end
        end
      end
    end
  end
  return false
end

function draft.unmarked(holder)
  return not draft.marked(holder)
end

--- @section reasoning_near  uses: text, marked
-- Reasoning next to text at `path` (none was seen, so a guess): the strings there marked as
-- reasoning, or a sibling of the text named reasoning_content, reasoning or thinking.
local SIBLINGS = { "reasoning_content", "reasoning", "thinking" }
function draft.reasoning_near(v, path)
  local found = draft.text(v, path, draft.marked)
  if found then return found end
  local parent = v -- the object holding the text's field: its siblings are read directly
  for i = 1, #path - 1 do
    if type(parent) ~= "table" or path[i] == draft.EACH then return nil end
    parent = parent[path[i]]
  end
  if type(parent) ~= "table" then return nil end
  for _, name in ipairs(SIBLINGS) do
    local x = parent[name]
    if type(x) == "string" and x ~= "" then return x end
  end
  return nil
end

--- @section guess_calls  uses: calls
-- Tool calls of the common shapes anywhere in v (none was seen, so a guess): objects with
-- function = {name, arguments}, {name, args}, {name, arguments}, {name, input}, functionCall.
local GUESSES = {
  { name = { "function", "name" }, args = { "function", "arguments" }, id = { "id" }, index = { "index" }, loose = true },
  { name = { "name" }, args = { "args" }, id = { "id" } },
  { name = { "name" }, args = { "arguments" }, id = { "id" }, index = { "index" } },
  { name = { "name" }, args = { "input" }, id = { "id" } },
  { name = { "functionCall", "name" }, args = { "functionCall", "args" }, id = { "functionCall", "id" }, optional = true },
}

-- Whether any object in v has a key a guessed call needs (a quick look before the search).
local function has_call_key(v, depth)
  if type(v) ~= "table" or depth > 16 then return false end
  for k, x in pairs(v) do
    if k == "name" or k == "function" or k == "functionCall" then return true end
    if type(x) == "table" and has_call_key(x, depth + 1) then return true end
  end
  return false
end

-- Per stream (one Lua state each): call id -> whether its arguments came. A call repeated
-- whole later (the Responses API does) adds its arguments once if they had not come, else
-- nothing.
local guessed = {}

function draft.guess_calls(v)
  if not has_call_key(v, 0) then return nil end
  for _, g in ipairs(GUESSES) do
    local objects = objects_holding(v, g, {}, 0)
    if #objects > 0 then
      local spec = { at = {}, name = g.name, args = g.args, id = g.id, index = g.index }
      local calls = {}
      for _, found in ipairs(objects) do
        local one = draft.calls(found[1], { spec })
        local call = one and one[1]
        if call then
          local full = call.arguments ~= nil or (call.raw_arguments or "") ~= ""
          local seen = call.id ~= nil and guessed[call.id]
          if seen == nil or not call.id then
            calls[#calls + 1] = call
          elseif seen == false and full then
            calls[#calls + 1] = { id = call.id, arguments = call.arguments, raw_arguments = call.raw_arguments }
          end
          if call.id then guessed[call.id] = guessed[call.id] or full end
        end
      end
      if #calls == 0 then return nil end
      return calls
    end
  end
  return nil
end

--- @section return
return draft
