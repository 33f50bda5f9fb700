--[[
ollama.lua - Ollama native chat API (base_url http://localhost:11434, endpoint /api/chat).

Written to the HomeAgent Lua adapter contract. No auth header is needed locally; with an API key
configured (a remote/proxied Ollama) the runtime's default Bearer header is sent. Shared helpers
(null handling, tool arguments, images, extra_body pass-through) come from the built-in library
lib/adapter_util.lua (notebook_llm's sandboxed `require`).

notebook_llm extensions used: stream_format = "ndjson" (Ollama streams one JSON object per line,
no "data:" prefix; the runtime also detects application/x-ndjson), the `error` chunk field,
`require` of the built-in library adapter_util (lib/; for a kernel without `require`,
`python -m notebook_llm export-adapter NAME` writes this file with it inlined).

Request (kernel JSON -> /api/chat):
  * content arrays are flattened: text parts joined into `content`, image_url data: URLs ->
    `images` (bare base64). Ollama cannot fetch http(s) image URLs; such a part is an error;
  * assistant reasoning_content -> `thinking`; tool_calls -> {function = {name, arguments =
    object}} (arguments decoded from the JSON string);
  * tool messages -> {role = "tool", content, tool_name} (tool_name looked up from the earlier
    assistant tool_calls by tool_call_id);
  * tools pass through (OpenAI format); tool_choice is dropped (Ollama has none);
  * reasoning_effort -> think: "off"/"none" (or disable_thinking) -> false, "low"/"medium"/"high"
    -> that string (gpt-oss levels), anything else -> true;
  * temperature, max_tokens (num_predict), stop -> options, merged with an extra_body `options`
    table; other extra_body keys (format, keep_alive, ...) pass through;
  * a schema (response_format json_schema) -> format = the schema (structured outputs);
    json_object -> format = "json".

Stream lines (/api/chat): message.content, message.thinking, message.tool_calls (whole calls,
arguments objects; each gets its own stream_index, ids are synthesized by the runtime when
absent), done, done_reason ("length" -> max-tokens), prompt_eval_count / eval_count -> usage,
{"error": "..."} -> error. /api/generate lines (`response`, `thinking` at top level) are read
too, so the same script works when pointed at /api/generate.

Unified chunk fields emitted: content, reasoning_content, tool_calls (kernel shape with
`arguments` object), finish_reason, done, usage {prompt, completion, total}, error.
]]

local M = {
  name = "ollama",
  version = "1.0.0",
  endpoint = "/api/chat",
  stream_format = "ndjson",
}

local util = require("adapter_util")
local KEEP_NULLS, present, text_of = util.KEEP_NULLS, util.present, util.text_of

local function flatten(m, out)
  if type(m.content) == "string" then
    out.content = m.content
    return
  end
  local text, images = {}, json.array()
  if present(m.content) then
    for _, p in ipairs(m.content) do
      if p.type == "text" then
        text[#text + 1] = p.text
      elseif p.type == "image_url" then
        local url = util.image_url(p)
        local _, data = util.data_url(url)
        if not data then error("ollama adapter: images must be data: URLs (Ollama cannot fetch " .. url .. ")") end
        images[#images + 1] = data
      else
        error("ollama adapter: unsupported content part type " .. tostring(p.type))
      end
    end
  end
  out.content = table.concat(text)
  if #images > 0 then out.images = images end
end

function M.transform_request(raw)
  local req = json.decode(raw, KEEP_NULLS)
  local messages, names = json.array(), {}
  for _, m in ipairs(req.messages) do
    local out = { role = m.role }
    if m.role == "tool" then
      out.content = text_of(m.content) or ""
      out.tool_name = names[m.tool_call_id or ""]
    else
      flatten(m, out)
    end
    if m.role == "assistant" then
      if present(m.reasoning_content) then out.thinking = m.reasoning_content end
      if present(m.tool_calls) then
        local calls = json.array()
        for i, tc in ipairs(m.tool_calls) do
          local fn = tc["function"] or {}
          names[tc.id or ""] = fn.name
          calls[i] = { ["function"] = { name = fn.name, arguments = util.decode_args(fn.arguments) } }
        end
        out.tool_calls = calls
      end
    end
    messages[#messages + 1] = out
  end

  local body = { model = req.model, messages = messages, stream = req.stream == true }
  if present(req.tools) and #req.tools > 0 then body.tools = req.tools end
  local options = {}
  if present(req.temperature) then options.temperature = req.temperature end
  if present(req.max_tokens) then options.num_predict = req.max_tokens end
  if present(req.stop) then options.stop = req.stop end
  if type(req.options) == "table" then
    for k, v in pairs(req.options) do options[k] = v end
  end
  if next(options) ~= nil then body.options = options end
  local rf, schema = req.response_format, util.schema_of(req)
  if schema then
    body.format = schema.schema -- Ollama's structured outputs: format = the schema
  elseif type(rf) == "table" and rf.type == "json_object" then
    body.format = "json"
  end
  local effort = req.reasoning_effort
  if req.disable_thinking or effort == "off" or effort == "none" then
    body.think = false
  elseif effort == "low" or effort == "medium" or effort == "high" then
    body.think = effort
  elseif present(effort) then
    body.think = true
  end
  util.pass_through(req, body, { options = true })
  return json.encode(body)
end

-- Per-stream state (one Lua state per stream): numbering of tool calls.
local calls_seen = 0

local function chunk_of(r)
  local out = {}
  if present(r.error) then
    out.error = type(r.error) == "string" and { message = r.error } or r.error
    return out
  end
  local msg = present(r.message) and r.message or nil
  local content = msg and text_of(msg.content) or text_of(r.response)
  local thinking = msg and text_of(msg.thinking) or text_of(r.thinking)
  if content and content ~= "" then out.content = content end
  if thinking and thinking ~= "" then out.reasoning_content = thinking end
  if msg and present(msg.tool_calls) then
    local calls = json.array()
    for _, tc in ipairs(msg.tool_calls) do
      local fn = tc["function"] or {}
      calls_seen = calls_seen + 1
      local args = fn.arguments
      if not present(args) then args = json.object() end
      calls[#calls + 1] = {
        stream_index = calls_seen, id = text_of(tc.id), type = "function", name = fn.name, arguments = args,
      }
    end
    out.tool_calls = calls
  end
  if r.done == true then
    out.done = true
    if present(r.done_reason) then out.finish_reason = r.done_reason end
    if present(r.prompt_eval_count) or present(r.eval_count) then
      local p = present(r.prompt_eval_count) and r.prompt_eval_count or 0
      local c = present(r.eval_count) and r.eval_count or 0
      out.usage = { prompt = p, completion = c, total = p + c }
    end
  end
  return out
end

function M.transform_response(raw)
  local out = chunk_of(json.decode(raw, KEEP_NULLS))
  if out.error then return json.encode({ error = out.error }) end
  return util.response_json(out)
end

function M.transform_stream_chunk(line)
  local out = chunk_of(json.decode(line, KEEP_NULLS))
  if next(out) == nil then return "" end
  return json.encode(out)
end

return M
