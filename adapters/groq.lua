--[[
groq.lua - Groq (base_url https://api.groq.com/openai/v1, endpoint /chat/completions).

OpenAI-compatible. Written to the HomeAgent Lua adapter contract. Auth: the runtime's default
"Authorization: Bearer <api_key>". The hooks come from the built-in library lib/openai_compat.lua
(notebook_llm's sandboxed `require`); this file holds what is Groq's own.

Request (kernel JSON -> Groq): Groq rejects unknown message properties, so reasoning_content
and is_error are removed; max_tokens is sent as max_completion_tokens (max_tokens is
deprecated there); disable_thinking is dropped and reasoning_effort "off" becomes "none" (Qwen
models); other efforts pass through (gpt-oss: low/medium/high). Usage is always reported in
x_groq.usage, so stream_options is not sent.

Stream/response: delta.reasoning (or reasoning_content) -> reasoning_content; content;
tool_calls (OpenAI delta shape, passed through); finish_reason; usage from x_groq.usage or the
top-level usage {prompt, completion, total, cache_read (prompt_tokens_details.cached_tokens),
reasoning_tokens}; an in-stream {"error": ...} -> error; "[DONE]" -> done.

notebook_llm extensions used: the `error` chunk field; `require` of the built-in libraries
openai_compat and adapter_util (lib/; for a kernel without `require`,
`python -m notebook_llm export-adapter NAME` writes this file with them inlined).
]]

local compat = require("openai_compat")
local schema_of = require("adapter_util").schema_of

local M = { name = "groq", version = "1.0.0", endpoint = "/chat/completions" }

compat.chat_completions(M, {
  max_tokens_field = "max_completion_tokens",
  efforts = { off = "none" },
  reasoning = { "reasoning", "reasoning_content" },
  usage_in = "x_groq",
  request = function(req)
    -- Structured outputs: Groq decodes strictly (strict = true) only on a few models and answers
    -- 400 on the others, while its best-effort json_schema mode is wider: ask for best effort
    -- (notebook_llm validates the answer anyway). extra_body response_format overrides this.
    local schema = schema_of(req)
    if schema then schema.strict = false end
  end,
})

return M
