--[[
openai.lua - OpenAI Chat Completions (https://api.openai.com/v1 + /chat/completions).

Written to the HomeAgent Lua adapter contract; runs unmodified in any runtime that implements
it. Auth: none set here, so the runtime adds "Authorization: Bearer <api_key>".

Request (kernel JSON -> OpenAI):
  * reasoning_content is stripped from messages (OpenAI rejects it), as is our tool-message
    extension "is_error" (OpenAI has no such field; the tool's text says what went wrong);
  * max_tokens is sent as max_tokens, which every OpenAI-compatible server reads (llama.cpp,
    vLLM, Ollama, LM Studio); OpenAI's own API wants max_completion_tokens for its reasoning
    models, so the `openai` provider preset sets max_tokens_field = "max_completion_tokens"
    and notebook_llm renames the field after this hook (a provider setting, not the script's);
  * disable_thinking is dropped; reasoning_effort "off" is sent as OpenAI's "none";
  * streaming asks for stream_options.include_usage so the last chunk carries usage;
  * a schema arrives as response_format {type = "json_schema", json_schema = {name, schema,
    strict}}, OpenAI's own Structured Outputs field, and is sent as it is; images arrive as
    image_url parts (data: URLs), OpenAI's own shape, and are sent as they are.

Unified chunk fields emitted: content, reasoning_content (from delta.reasoning_content or
delta.reasoning, which OpenAI-compatible servers send), tool_calls (OpenAI delta shape, passed through),
finish_reason, usage {prompt, completion, total, cache_read, reasoning_tokens},
error {message, code, status} (an in-stream {"error": ...} payload), done (on "[DONE]").

notebook_llm extensions used: the `error` chunk field. Only sandbox built-ins (json.*).
]]

local M = {
  name = "openai",
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
  req.disable_thinking = nil
  if req.reasoning_effort == "off" then req.reasoning_effort = "none" end
  if req.stream then req.stream_options = { include_usage = true } end
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
      out.reasoning_content = text_of(msg.reasoning_content) or text_of(msg.reasoning)
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
      local s = text_of(d.content)
      if s and s ~= "" then out.content = s; any = true end
      if present(d.tool_calls) then out.tool_calls = d.tool_calls; any = true end
      -- OpenAI itself sends no reasoning text, but OpenAI-compatible servers (vLLM, LM Studio,
      -- OpenRouter, the notebook_llm mock) put it in reasoning_content or reasoning.
      local r = text_of(d.reasoning_content) or text_of(d.reasoning)
      if r and r ~= "" then out.reasoning_content = r; any = true end
    end
    if present(choice.finish_reason) then out.finish_reason = choice.finish_reason; any = true end
  end
  local u = usage_of(c.usage)
  if u then out.usage = u; any = true end
  if not any then return "" end
  return json.encode(out)
end

return M
