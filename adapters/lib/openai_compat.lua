--[[
openai_compat.lua - the three hooks of an OpenAI-compatible Chat Completions adapter, built from
a table of the provider's differences (a library, not an adapter).

    local compat = require("openai_compat")
    local M = { name = "my_api", version = "1.0.0", endpoint = "/chat/completions" }
    compat.chat_completions(M, { stream_usage = true })
    return M

chat_completions(M, spec) sets M.transform_request, M.transform_response and
M.transform_stream_chunk and returns M. With an empty spec they do what OpenAI itself wants:

Request (kernel JSON -> body): the tool-message extension is_error and every message's
reasoning_content are removed, disable_thinking is dropped; the rest is sent as it is (nulls
kept). spec fields, all optional:
  keep_reasoning = "assistant"   keep reasoning_content on the messages of that role
  max_tokens_field = "..."       send max_tokens under this name
  efforts = { off = "none" }     reasoning_effort values replaced (false: not sent);
                                 efforts = false: reasoning_effort is never sent
  stream_usage = true            a stream asks for stream_options.include_usage
  drop = { "stream_options" }    more top-level keys that are never sent
  request = function(req)        the provider's own changes, after the above and before
                                 disable_thinking is dropped (it can still read it)

Response / stream chunk: choices[1] message or delta -> content, reasoning_content,
tool_calls (the response's flat {id, type, name, arguments}; a delta's OpenAI shape passed
through), finish_reason; usage {prompt, completion, total, cache_read
(prompt_tokens_details.cached_tokens), reasoning_tokens (completion_tokens_details)}; an
{"error": ...} payload -> error {message, code}; "[DONE]" -> done. spec fields:
  reasoning = { "reasoning_content", "reasoning" }
                                 where reasoning text is read, first string wins (default:
                                 reasoning_content only)
  content = function(content)    content -> text, reasoning (both strings, "" for none), for
                                 APIs whose content is an array of typed chunks
  cache_read = "..."             a top-level usage field read for cache_read before
                                 prompt_tokens_details.cached_tokens
  cache_miss = "..."             a top-level usage field read for cache_miss
  reasoning_tokens = false       no reasoning_tokens in usage
  usage_in = "x_groq"            usage also read from this object: a stream reads it first, a
                                 response after the top-level usage
  object_error = true            a top-level {"object": "error", message, type} response is an
                                 error

The parts are there on their own too, for an API that is compatible on one side only:
compat.request_builder(spec), compat.response_reader(spec), compat.chunk_reader(spec) (each
returns the hook function), compat.usage_reader(spec) (usage object -> unified usage) and
compat.error_of(e).
]]

local util = require("adapter_util")
local json, type, ipairs = json, type, ipairs
local present, text_of, KEEP_NULLS, null = util.present, util.text_of, util.KEEP_NULLS, util.null

local compat = {}

-- usage {prompt, completion, total, cache_read, cache_miss, reasoning_tokens} of an OpenAI
-- usage object, as spec says.
function compat.usage_reader(spec)
  local hit, miss, reasoning = spec.cache_read, spec.cache_miss, spec.reasoning_tokens ~= false
  return function(u)
    if not present(u) then return nil end
    local out = { prompt = u.prompt_tokens, completion = u.completion_tokens, total = u.total_tokens }
    local pd = u.prompt_tokens_details
    if hit and present(u[hit]) then
      out.cache_read = u[hit]
    elseif present(pd) and present(pd.cached_tokens) then
      out.cache_read = pd.cached_tokens
    end
    if miss and present(u[miss]) then out.cache_miss = u[miss] end
    if reasoning then
      local cd = u.completion_tokens_details
      if present(cd) and present(cd.reasoning_tokens) then out.reasoning_tokens = cd.reasoning_tokens end
    end
    return out
  end
end

-- {message, code} of an OpenAI error object (or string).
function compat.error_of(e)
  if type(e) == "string" then return { message = e } end
  local code = e.code
  if not present(code) then code = e.type end
  return { message = text_of(e.message) or "error", code = present(code) and code or nil }
end
local error_of = compat.error_of

-- The kernel request -> the Chat Completions body, as spec says.
function compat.request_builder(spec)
  local keep_role, tokens_field, efforts = spec.keep_reasoning, spec.max_tokens_field, spec.efforts
  local stream_usage, drop, own = spec.stream_usage, spec.drop or {}, spec.request
  return function(raw)
    local req = json.decode(raw, KEEP_NULLS)
    for _, m in ipairs(req.messages) do
      m.is_error = nil
      if not (keep_role and m.role == keep_role) then m.reasoning_content = nil end
    end
    if tokens_field and req.max_tokens ~= nil then
      req[tokens_field] = req.max_tokens
      req.max_tokens = nil
    end
    if own then own(req) end
    req.disable_thinking = nil
    for _, k in ipairs(drop) do req[k] = nil end
    if efforts == false then
      req.reasoning_effort = nil
    elseif efforts then
      local to = efforts[req.reasoning_effort]
      if to ~= nil then req.reasoning_effort = to or nil end
    end
    if stream_usage and req.stream then req.stream_options = { include_usage = true } end
    return json.encode(req)
  end
end

-- text, reasoning of a message or delta: spec.content, else content and the first string of
-- the reasoning fields.
local function text_reader(spec)
  local split = spec.content
  if split then return function(m) return split(m.content) end end
  local fields = spec.reasoning or { "reasoning_content" }
  local first, second = fields[1], fields[2]
  return function(m)
    local r = text_of(m[first])
    if r == nil and second then r = text_of(m[second]) end
    return text_of(m.content), r
  end
end

-- The tool calls of a response message, flat {id, type, name, arguments}.
local function tool_calls_of(calls)
  local out = json.array()
  for i, tc in ipairs(calls) do
    local fn = tc["function"] or {}
    out[i] = { id = tc.id, type = "function", name = fn.name, arguments = fn.arguments }
  end
  return out
end

-- A Chat Completions response -> the unified response, as spec says.
function compat.response_reader(spec)
  local usage_of, texts, usage_in, object_error = compat.usage_reader(spec), text_reader(spec),
    spec.usage_in, spec.object_error
  local split = spec.content ~= nil
  return function(raw)
    local r = json.decode(raw)
    if present(r.error) then return json.encode({ error = error_of(r.error) }) end
    if object_error and r.object == "error" then
      return json.encode({ error = { message = text_of(r.message) or "error", code = r.type } })
    end
    local out = { content = "", token_usage = usage_of(r.usage) }
    if usage_in and out.token_usage == nil then
      out.token_usage = usage_of(present(r[usage_in]) and r[usage_in].usage or nil)
    end
    local choice = present(r.choices) and r.choices[1] or nil
    if choice then
      local msg = choice.message
      if present(msg) then
        local text, reasoning = texts(msg)
        out.content = text or ""
        if not split or reasoning ~= "" then out.reasoning_content = reasoning end
        if present(msg.tool_calls) then out.tool_calls = tool_calls_of(msg.tool_calls) end
      end
      if present(choice.finish_reason) then out.finish_reason = choice.finish_reason end
    end
    return json.encode(out)
  end
end

-- One stream payload -> one unified chunk ("" when it holds nothing), as spec says.
-- The hot path of a stream (one call per payload): present() and the text reader are written
-- out inline, each field is read once, so a text delta costs few VM instructions.
function compat.chunk_reader(spec)
  local usage_of, usage_in = compat.usage_reader(spec), spec.usage_in
  local split = spec.content
  local fields = spec.reasoning or { "reasoning_content" }
  local first, second = fields[1], fields[2]
  local decode, encode = json.decode, json.encode
  return function(line)
    if line == "[DONE]" then return encode({ done = true }) end
    local c = decode(line)
    local e = c.error
    if e ~= nil and e ~= null then return encode({ error = error_of(e) }) end
    local out, any = {}, false
    local choices = c.choices
    local choice = choices ~= nil and choices ~= null and choices[1] or nil
    if choice then
      local d = choice.delta
      if d ~= nil and d ~= null then
        local text, reasoning
        if split then
          text, reasoning = split(d.content)
        else
          text, reasoning = d.content, d[first]
          if type(text) ~= "string" then text = nil end
          if reasoning ~= nil and type(reasoning) ~= "string" then reasoning = nil end
          if reasoning == nil and second then
            reasoning = d[second]
            if reasoning ~= nil and type(reasoning) ~= "string" then reasoning = nil end
          end
        end
        if reasoning and reasoning ~= "" then out.reasoning_content = reasoning; any = true end
        if text and text ~= "" then out.content = text; any = true end
        local calls = d.tool_calls
        if calls ~= nil and calls ~= null then out.tool_calls = calls; any = true end
      end
      local finish = choice.finish_reason
      if finish ~= nil and finish ~= null then out.finish_reason = finish; any = true end
    end
    local u
    if usage_in then
      local x = c[usage_in]
      u = usage_of(x ~= nil and x ~= null and x.usage or nil)
    end
    if u == nil then
      u = c.usage
      if u ~= nil and u ~= null then u = usage_of(u) else u = nil end
    end
    if u then out.usage = u; any = true end
    if not any then return "" end
    return encode(out)
  end
end

function compat.chat_completions(M, spec)
  M.transform_request = compat.request_builder(spec)
  M.transform_response = compat.response_reader(spec)
  M.transform_stream_chunk = compat.chunk_reader(spec)
  return M
end

return compat
