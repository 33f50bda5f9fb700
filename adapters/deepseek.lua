--[[
deepseek.lua - DeepSeek Chat Completions (https://api.deepseek.com + /chat/completions).

OpenAI-compatible, with chain-of-thought in `reasoning_content` both ways. Written to the
HomeAgent Lua adapter contract. Auth: the runtime's default "Authorization: Bearer <api_key>".
The hooks come from the built-in library lib/openai_compat.lua (notebook_llm's sandboxed
`require`); this file holds what is DeepSeek's own.

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

notebook_llm extensions used: the `error` chunk field; `require` of the built-in libraries
openai_compat and adapter_util (lib/; for a kernel without `require`,
`python -m notebook_llm export-adapter NAME` writes this file with them inlined).
]]

local compat = require("openai_compat")
local schema_of = require("adapter_util").schema_of

local M = { name = "deepseek", version = "1.0.0", endpoint = "/chat/completions" }

-- DeepSeek has JSON mode but no schema field: response_format json_schema becomes
-- {type = "json_object"} and the schema goes into a system message (DeepSeek wants the word
-- "json" in the prompt for JSON mode).
local function schema_in_prompt(req)
  local schema = schema_of(req)
  if schema then
    req.response_format = { type = "json_object" }
    local note = "Answer with one json object only, no prose, following this JSON Schema:\n" ..
      json.encode(schema.schema)
    local first = req.messages[1]
    if first and first.role == "system" and type(first.content) == "string" then
      first.content = first.content .. "\n\n" .. note
    else
      table.insert(req.messages, 1, { role = "system", content = note })
    end
  end
end

compat.chat_completions(M, {
  keep_reasoning = "assistant",
  efforts = { off = false, none = false },
  stream_usage = true,
  cache_read = "prompt_cache_hit_tokens",
  cache_miss = "prompt_cache_miss_tokens",
  request = function(req)
    if req.disable_thinking then req.thinking = { type = "disabled" } end
    schema_in_prompt(req)
  end,
})

return M
