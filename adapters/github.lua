--[[
github.lua - GitHub Models (base_url https://models.github.ai/inference, /chat/completions).

OpenAI-compatible; model ids look like "openai/gpt-4.1". Written to the HomeAgent Lua adapter
contract; runs unmodified in any runtime that implements it. Auth: the runtime's default
"Authorization: Bearer <api_key>" with a GitHub token (models:read).

Request: reasoning_content and is_error are removed; disable_thinking is dropped and
reasoning_effort "off"/"none" is not sent; streaming asks for stream_options.include_usage.

Stream quirks tolerated: the first chunk may have an empty `choices` list and no `model`
(Azure prompt_filter_results), and the final usage chunk may carry `content: null`; both simply
yield no text. finish_reason "content_filter" is passed on (an error finish, CONTENT_FILTER).

Unified chunk fields emitted: content, reasoning_content (if a model sends one), tool_calls
(OpenAI delta shape, passed through), finish_reason, usage {prompt, completion, total,
cache_read, reasoning_tokens}, error, done ("[DONE]").

notebook_llm extensions used: the `error` chunk field.
]]

local M = {
  name = "github",
  version = "1.0.0",
  endpoint = "/chat/completions",
  headers = { ["X-GitHub-Api-Version"] = "2022-11-28" },
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

-- Schemas (response_format json_schema) and images (image_url parts) are OpenAI's own shapes,
-- which GitHub Models accepts: they are sent as they are.
function M.transform_request(raw)
  local req = json.decode(raw, KEEP_NULLS)
  for _, m in ipairs(req.messages) do
    m.reasoning_content = nil
    m.is_error = nil
  end
  req.disable_thinking = nil
  if req.reasoning_effort == "off" or req.reasoning_effort == "none" then req.reasoning_effort = nil end
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
