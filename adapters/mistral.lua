--[[
mistral.lua - Mistral AI Chat Completions (https://api.mistral.ai/v1 + /chat/completions).

OpenAI-like. Written to the HomeAgent Lua adapter contract; runs unmodified in any runtime that
implements it. Auth: the runtime's default "Authorization: Bearer <api_key>".

Request (kernel JSON -> Mistral): Mistral refuses unknown fields (422 extra_forbidden), so the
script sends only what it knows: reasoning_content, is_error, disable_thinking,
reasoning_effort and stream_options are removed (Magistral reasons without a switch; use
extra_body for prompt_mode etc., extra keys are passed through as given). Tool call ids must be
9 alphanumerics for Mistral; ids from other providers are passed as they are.

Response/stream: `content` may be a string or an array of chunks: {type = "text", text} ->
content, {type = "thinking", thinking = [{type = "text", text}]} -> reasoning_content. Tool
calls arrive whole (id, full arguments string, often no index); they are passed in OpenAI delta
shape and the mapper matches them by id. usage {prompt, completion, total, cache_read
(usage.num_cached_tokens or prompt_tokens_details.cached_tokens)}.

Unified chunk fields emitted: content, reasoning_content, tool_calls, finish_reason, usage,
error, done ("[DONE]").

notebook_llm extensions used: the `error` chunk field.
]]

local M = {
  name = "mistral",
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

-- content string or chunk array -> text, reasoning (either may be "")
local function split_content(content)
  if type(content) == "string" then return content, "" end
  if not present(content) or type(content) ~= "table" then return "", "" end
  local text, thinking = {}, {}
  for _, chunk in ipairs(content) do
    if chunk.type == "text" and type(chunk.text) == "string" then
      text[#text + 1] = chunk.text
    elseif chunk.type == "thinking" then
      local th = chunk.thinking
      if type(th) == "string" then
        thinking[#thinking + 1] = th
      elseif present(th) then
        for _, t in ipairs(th) do
          if type(t.text) == "string" then thinking[#thinking + 1] = t.text end
        end
      end
    end
  end
  return table.concat(text), table.concat(thinking)
end

local function usage_of(u)
  if not present(u) then return nil end
  local out = { prompt = u.prompt_tokens, completion = u.completion_tokens, total = u.total_tokens }
  local pd = u.prompt_tokens_details
  if present(u.num_cached_tokens) then
    out.cache_read = u.num_cached_tokens
  elseif present(pd) and present(pd.cached_tokens) then
    out.cache_read = pd.cached_tokens
  end
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
  req.disable_thinking = nil
  req.reasoning_effort = nil
  req.stream_options = nil
  -- response_format {type = "json_schema", json_schema = {name, schema, strict}} is Mistral's own
  -- custom structured output field (all models): sent as it is, like image_url parts.
  return json.encode(req)
end

function M.transform_response(raw)
  local r = json.decode(raw)
  if present(r.error) then return json.encode({ error = error_of(r.error) }) end
  if r.object == "error" then return json.encode({ error = { message = text_of(r.message) or "error", code = r.type } }) end
  local out = { content = "", token_usage = usage_of(r.usage) }
  local choice = present(r.choices) and r.choices[1] or nil
  if choice then
    local msg = choice.message
    if present(msg) then
      local text, thinking = split_content(msg.content)
      out.content = text
      if thinking ~= "" then out.reasoning_content = thinking end
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
      local text, thinking = split_content(d.content)
      if thinking ~= "" then out.reasoning_content = thinking; any = true end
      if text ~= "" then out.content = text; any = true end
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
