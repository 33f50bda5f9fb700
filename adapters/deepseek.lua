--[[
deepseek.lua - DeepSeek Chat Completions (https://api.deepseek.com + /chat/completions).

OpenAI-compatible, with chain-of-thought in `reasoning_content` both ways. Written to the
HomeAgent Lua adapter contract; runs unmodified in any runtime that implements it. Auth: the
runtime's default "Authorization: Bearer <api_key>".

Request (kernel JSON -> DeepSeek):
  * assistant turns keep `reasoning_content` (DeepSeek requires it back during tool-call loops
    in thinking mode and ignores it otherwise);
  * the tool-message extension "is_error" is dropped (no such field);
  * disable_thinking -> thinking {type = "disabled"}; reasoning_effort "off"/"none" is not sent
    (DeepSeek's efforts are low/high/max), any other effort is passed through;
  * streaming asks for stream_options.include_usage;
  * a schema (response_format json_schema) -> JSON mode {type = "json_object"} plus the schema
    in the system message (appended to the first one, else a new one; DeepSeek has no schema
    field).

Unified chunk fields emitted: content, reasoning_content, tool_calls (OpenAI delta shape, passed
through), finish_reason, usage {prompt, completion, total, cache_read (prompt_cache_hit_tokens,
else prompt_tokens_details.cached_tokens), cache_miss, reasoning_tokens}, error, done ("[DONE]").

notebook_llm extensions used: the `error` chunk field. Only sandbox built-ins (json.*).
]]

local M = {
  name = "deepseek",
  version = "1.0.0",
  endpoint = "/chat/completions",
}

local null = json.null
-- JSON null decodes to nil by default; where values pass through (request bodies, tool
-- arguments) nulls are kept as json.null, so they are sent on as null.
local KEEP_NULLS = { null = null }

local function present(v)
  return v ~= nil and v ~= null
end

local function text_of(v)
  if type(v) == "string" then return v end
  return nil
end

local function usage_of(u)
  if not present(u) then return nil end
  local out = { prompt = u.prompt_tokens, completion = u.completion_tokens, total = u.total_tokens }
  local pd = u.prompt_tokens_details
  if present(u.prompt_cache_hit_tokens) then
    out.cache_read = u.prompt_cache_hit_tokens
  elseif present(pd) and present(pd.cached_tokens) then
    out.cache_read = pd.cached_tokens
  end
  if present(u.prompt_cache_miss_tokens) then out.cache_miss = u.prompt_cache_miss_tokens end
  local cd = u.completion_tokens_details
  if present(cd) and present(cd.reasoning_tokens) then out.reasoning_tokens = cd.reasoning_tokens end
  return out
end

local function error_of(e)
  if type(e) == "string" then return { message = e } end
  local code = e.code
  if not present(code) then code = e.type end
  return { message = text_of(e.message) or "error", code = present(code) and code or nil }
end

function M.transform_request(raw)
  local req = json.decode(raw, KEEP_NULLS)
  for _, m in ipairs(req.messages) do
    m.is_error = nil
    if m.role ~= "assistant" then m.reasoning_content = nil end
  end
  if req.disable_thinking then req.thinking = { type = "disabled" } end
  req.disable_thinking = nil
  if req.reasoning_effort == "off" or req.reasoning_effort == "none" then req.reasoning_effort = nil end
  if req.stream then req.stream_options = { include_usage = true } end
  -- DeepSeek has JSON mode but no schema field: response_format json_schema becomes
  -- {type = "json_object"} and the schema goes into a system message (DeepSeek wants the word
  -- "json" in the prompt for JSON mode).
  local rf = req.response_format
  if type(rf) == "table" and rf.type == "json_schema" and type(rf.json_schema) == "table" then
    req.response_format = { type = "json_object" }
    local note = "Answer with one json object only, no prose, following this JSON Schema:\n" ..
      json.encode(rf.json_schema.schema)
    local first = req.messages[1]
    if first and first.role == "system" and type(first.content) == "string" then
      first.content = first.content .. "\n\n" .. note
    else
      table.insert(req.messages, 1, { role = "system", content = note })
    end
  end
  return json.encode(req)
end

function M.transform_response(raw)
  local r = json.decode(raw)
  if present(r.error) then return json.encode({ error = error_of(r.error) }) end
  local out = { content = "", token_usage = usage_of(r.usage) }
  local choice = present(r.choices) and r.choices[1] or nil
  if choice then
    local msg = choice.message
    if present(msg) then
      out.content = text_of(msg.content) or ""
      out.reasoning_content = text_of(msg.reasoning_content)
      if present(msg.tool_calls) then
        local calls = json.array()
        for i, tc in ipairs(msg.tool_calls) do
          local fn = tc["function"] or {}
          calls[i] = { id = tc.id, type = "function", name = fn.name, arguments = fn.arguments }
        end
        out.tool_calls = calls
      end
    end
    if present(choice.finish_reason) then out.finish_reason = choice.finish_reason end
  end
  return json.encode(out)
end

function M.transform_stream_chunk(line)
  if line == "[DONE]" then return json.encode({ done = true }) end
  local c = json.decode(line)
  if present(c.error) then return json.encode({ error = error_of(c.error) }) end
  local out, any = {}, false
  local choice = present(c.choices) and c.choices[1] or nil
  if choice then
    local d = choice.delta
    if present(d) then
      local s = text_of(d.reasoning_content)
      if s and s ~= "" then out.reasoning_content = s; any = true end
      s = text_of(d.content)
      if s and s ~= "" then out.content = s; any = true end
      if present(d.tool_calls) then out.tool_calls = d.tool_calls; any = true end
    end
    if present(choice.finish_reason) then out.finish_reason = choice.finish_reason; any = true end
  end
  local u = usage_of(c.usage)
  if u then out.usage = u; any = true end
  if not any then return "" end
  return json.encode(out)
end

return M
