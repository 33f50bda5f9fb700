--[[
github.lua - GitHub Models (base_url https://models.github.ai/inference, /chat/completions).

OpenAI-compatible; model ids look like "openai/gpt-4.1". Written to the HomeAgent Lua adapter
contract. Auth: the runtime's default "Authorization: Bearer <api_key>" with a GitHub token
(models:read). The hooks come from the built-in library lib/openai_compat.lua (notebook_llm's
sandboxed `require`); this file holds what is GitHub Models' own.

Request: reasoning_content and is_error are removed; disable_thinking is dropped and
reasoning_effort "off"/"none" is not sent; streaming asks for stream_options.include_usage.
Schemas (response_format json_schema) and images (image_url parts) are OpenAI's own shapes,
which GitHub Models accepts: they are sent as they are.

Stream quirks tolerated: the first chunk may have an empty `choices` list and no `model`
(Azure prompt_filter_results), and the final usage chunk may carry `content: null`; both simply
yield no text. finish_reason "content_filter" is passed on (an error finish, CONTENT_FILTER).

Unified chunk fields emitted: content, reasoning_content (if a model sends one), tool_calls
(OpenAI delta shape, passed through), finish_reason, usage {prompt, completion, total,
cache_read, reasoning_tokens}, error, done ("[DONE]").

notebook_llm extensions used: the `error` chunk field; `require` of the built-in libraries
openai_compat and adapter_util (lib/; for a kernel without `require`,
`python -m notebook_llm export-adapter NAME` writes this file with them inlined).
]]

local compat = require("openai_compat")

local M = {
  name = "github",
  version = "1.0.0",
  endpoint = "/chat/completions",
  headers = { ["X-GitHub-Api-Version"] = "2022-11-28" },
}

compat.chat_completions(M, {
  efforts = { off = false, none = false },
  stream_usage = true,
})

return M
