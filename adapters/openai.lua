--[[
openai.lua - OpenAI Chat Completions (https://api.openai.com/v1 + /chat/completions).

Written to the HomeAgent Lua adapter contract. Auth: none set here, so the runtime adds
"Authorization: Bearer <api_key>". The hooks come from the shared library lib/openai_compat.lua
(notebook_llm's sandboxed `require`); this file holds what is OpenAI's own.

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
error {message, code} (an in-stream {"error": ...} payload), done (on "[DONE]").

notebook_llm extensions used: the `error` chunk field; `require` of the built-in libraries
openai_compat and adapter_util (lib/; for a kernel without `require`,
`python -m notebook_llm export-adapter NAME` writes this file with them inlined).
]]

local compat = require("openai_compat")

local M = { name = "openai", version = "1.0.0", endpoint = "/chat/completions" }

compat.chat_completions(M, {
  efforts = { off = "none" },
  stream_usage = true,
  -- OpenAI itself sends no reasoning text, but OpenAI-compatible servers (vLLM, LM Studio,
  -- OpenRouter, the notebook_llm mock) put it in reasoning_content or reasoning.
  reasoning = { "reasoning_content", "reasoning" },
})

return M
