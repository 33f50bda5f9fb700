--[[
groq.lua - Groq (base_url https://api.groq.com/openai/v1, endpoint /chat/completions).

OpenAI-compatible. Written to the HomeAgent Lua adapter contract; runs unmodified in any runtime
that implements it. Auth: the runtime's default "Authorization: Bearer <api_key>".

Request (kernel JSON -> Groq): Groq rejects unknown message properties, so reasoning_content
and is_error are removed; max_tokens is sent as max_completion_tokens (max_tokens is
deprecated there); disable_thinking is dropped and reasoning_effort "off" becomes "none" (Qwen
models); other efforts pass through (gpt-oss: low/medium/high). Usage is always reported in
x_groq.usage, so stream_options is not sent.

Stream/response: delta.reasoning (or reasoning_content) -> reasoning_content; content;
tool_calls (OpenAI delta shape, passed through); finish_reason; usage from x_groq.usage or the
top-level usage {prompt, completion, total, cache_read (prompt_tokens_details.cached_tokens),
reasoning_tokens}; an in-stream {"error": ...} -> error; "[DONE]" -> done.

notebook_llm extensions used: the `error` chunk field.
]]

local M = {
  name = "groq",
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
  if present(pd) and present(pd.cached_tokens) then out.cache_read = pd.cached_tokens end
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
    m.reasoning_content = nil
    m.is_error = nil
  end
  if req.max_tokens ~= nil then
    req.max_completion_tokens = req.max_tokens
    req.max_tokens = nil
  end
  req.disable_thinking = nil
  if req.reasoning_effort == "off" then req.reasoning_effort = "none" end
  -- Structured outputs: Groq decodes strictly (strict = true) only on a few models and answers
  -- 400 on the others, while its best-effort json_schema mode is wider: ask for best effort
  -- (notebook_llm validates the answer anyway). extra_body response_format overrides this.
  local rf = req.response_format
  if type(rf) == "table" and rf.type == "json_schema" and type(rf.json_schema) == "table" then
    rf.json_schema.strict = false
  end
  return json.encode(req)
end

function M.transform_response(raw)
  local r = json.decode(raw)
  if present(r.error) then return json.encode({ error = error_of(r.error) }) end
  local out = { content = "" }
  out.token_usage = usage_of(r.usage) or usage_of(present(r.x_groq) and r.x_groq.usage or nil)
  local choice = present(r.choices) and r.choices[1] or nil
  if choice then
    local msg = choice.message
    if present(msg) then
      out.content = text_of(msg.content) or ""
      out.reasoning_content = text_of(msg.reasoning) or text_of(msg.reasoning_content)
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
      local s = text_of(d.reasoning) or text_of(d.reasoning_content)
      if s and s ~= "" then out.reasoning_content = s; any = true end
      s = text_of(d.content)
      if s and s ~= "" then out.content = s; any = true end
      if present(d.tool_calls) then out.tool_calls = d.tool_calls; any = true end
    end
    if present(choice.finish_reason) then out.finish_reason = choice.finish_reason; any = true end
  end
  local u = usage_of(present(c.x_groq) and c.x_groq.usage or nil) or usage_of(c.usage)
  if u then out.usage = u; any = true end
  if not any then return "" end
  return json.encode(out)
end

return M
