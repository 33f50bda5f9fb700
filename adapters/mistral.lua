--[[
mistral.lua - Mistral AI Chat Completions (https://api.mistral.ai/v1 + /chat/completions).

OpenAI-like. Written to the HomeAgent Lua adapter contract. Auth: the runtime's default
"Authorization: Bearer <api_key>". The hooks come from the built-in library lib/openai_compat.lua
(notebook_llm's sandboxed `require`); this file holds what is Mistral's own.

Request (kernel JSON -> Mistral): Mistral refuses unknown fields (422 extra_forbidden), so the
script sends only what it knows: reasoning_content, is_error, disable_thinking,
reasoning_effort and stream_options are removed (Magistral reasons without a switch; use
extra_body for prompt_mode etc., extra keys are passed through as given). Tool call ids must be
9 alphanumerics for Mistral; ids from other providers are passed as they are.

Response/stream: `content` may be a string or an array of chunks: {type = "text", text} ->
content, {type = "thinking", thinking = [{type = "text", text}]} -> reasoning_content. Tool
calls arrive whole (id, full arguments string, often no index); they are passed in OpenAI delta
shape and the mapper matches them by id. usage {prompt, completion, total, cache_read
(usage.num_cached_tokens or prompt_tokens_details.cached_tokens)}. A top-level
{"object": "error", message, type} response is an error. response_format {type =
"json_schema", json_schema = {name, schema, strict}} is Mistral's own custom structured output
field (all models): sent as it is, like image_url parts.

Unified chunk fields emitted: content, reasoning_content, tool_calls, finish_reason, usage,
error, done ("[DONE]").

notebook_llm extensions used: the `error` chunk field; `require` of the built-in libraries
openai_compat and adapter_util (lib/; for a kernel without `require`,
`python -m notebook_llm export-adapter NAME` writes this file with them inlined).
]]

local compat = require("openai_compat")
local present = require("adapter_util").present

local M = { name = "mistral", version = "1.0.0", endpoint = "/chat/completions" }

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

compat.chat_completions(M, {
  efforts = false,
  drop = { "stream_options" },
  content = split_content,
  cache_read = "num_cached_tokens",
  reasoning_tokens = false,
  object_error = true,
})

return M
