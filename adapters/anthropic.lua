--[[
anthropic.lua - Anthropic Messages API (https://api.anthropic.com + /v1/messages).

Written to the HomeAgent Lua adapter contract. Auth: build_headers sets x-api-key
(meta.api_key) and anthropic-version 2023-06-01. Shared helpers (null handling, tool arguments,
images, turns, extra_body pass-through) come from the built-in library lib/adapter_util.lua
(notebook_llm's sandboxed `require`).

Request (kernel JSON -> Messages API):
  * system messages are joined into the top-level `system` string;
  * max_tokens is required by the API: 4096 when the request has none;
  * user image_url parts -> image blocks (data: URLs as base64 sources, others as url sources);
  * assistant tool_calls -> tool_use blocks with `input` the decoded arguments object;
    reasoning_content is NOT sent back (Anthropic needs the thinking block's signature, which
    the contract does not carry);
  * tool messages -> tool_result blocks in a user message; consecutive messages of one role are
    merged (the API wants alternating turns, and all results of a parallel call in one turn);
  * tools -> {name, description, input_schema}; tool_choice auto/none/required/named mapped;
  * stop -> stop_sequences; reasoning_effort low/medium/high (or any other non-off value) ->
    thinking {type = "enabled", budget_tokens = 2048/8192/16384}; max_tokens is raised above
    the budget when needed and temperature is dropped (thinking requires the default);
  * a schema (response_format json_schema) -> output_config.format {type = "json_schema",
    schema} (Anthropic's generally available JSON outputs; the answer is a text block of JSON),
    every object given additionalProperties = false, which the API requires;
  * other top-level keys (extra_body: top_k, metadata, ...) are passed through.

Stream (SSE events; the payload's own "type" is used, so the event: line is not needed):
  message_start usage, content_block_start (text / thinking / tool_use), text_delta,
  thinking_delta, signature_delta (skipped), input_json_delta, message_delta (stop_reason,
  usage), message_stop -> done, ping -> "", error -> error field. A tool call's stream_index is
  the content block index, so no per-stream state is needed at all (stateless is safer than the
  block-index table the contract's notes suggest, and equivalent).

Unified chunk fields emitted: content, reasoning_content, tool_calls (kernel shape
{stream_index, id, type, name, raw_arguments}), finish_reason, usage {prompt, completion,
cache_read, cache_write, reasoning_tokens}, error {message, code}, done.
Usage: `prompt` is input_tokens + cache_read_input_tokens + cache_creation_input_tokens (the
whole prompt, like OpenAI's prompt_tokens); Anthropic's input_tokens alone excludes the cache.

notebook_llm extensions used: the `error` chunk field, usage.cache_write, `require` of the
built-in library adapter_util (lib/; for a kernel without `require`,
`python -m notebook_llm export-adapter NAME` writes this file with it inlined).
]]

local M = {
  name = "anthropic",
  version = "1.0.0",
  endpoint = "/v1/messages",
}

local util = require("adapter_util")
local null, KEEP_NULLS, present, text_of = util.null, util.KEEP_NULLS, util.present, util.text_of

local BUDGETS = { minimal = 1024, low = 2048, medium = 8192, high = 16384, max = 32768 }

function M.build_headers(meta)
  return { ["x-api-key"] = meta.api_key or "", ["anthropic-version"] = "2023-06-01" }
end

local function image_block(url)
  local media, data = util.data_url(url)
  if media then
    return { type = "image", source = { type = "base64", media_type = media, data = data } }
  end
  return { type = "image", source = { type = "url", url = url } }
end

local function text_block(text)
  return { type = "text", text = text }
end

local function user_blocks(content)
  return util.content_items(content, text_block, image_block, "anthropic")
end

local function assistant_blocks(m)
  local blocks = json.array()
  local text = text_of(m.content)
  if text and text ~= "" then blocks[1] = { type = "text", text = text } end
  if type(m.content) == "table" and m.content ~= null then
    for _, b in ipairs(user_blocks(m.content)) do blocks[#blocks + 1] = b end
  end
  if present(m.tool_calls) then
    for _, tc in ipairs(m.tool_calls) do
      local fn = tc["function"] or {}
      local args = fn.arguments
      local input = args == null and null or util.decode_args(args)
      blocks[#blocks + 1] = { type = "tool_use", id = tc.id, name = fn.name, input = input }
    end
  end
  return blocks
end

local function tool_choice_of(tc)
  if tc == "auto" then return { type = "auto" } end
  if tc == "none" then return { type = "none" } end
  if tc == "required" or tc == "any" then return { type = "any" } end
  if type(tc) == "table" and tc ~= null then
    local fn = tc["function"]
    if fn then return { type = "tool", name = fn.name } end
    return tc
  end
  return nil
end

-- Anthropic's JSON outputs require additionalProperties = false on every object.
local function closed(schema)
  if type(schema) ~= "table" or schema == null then return schema end
  for k, v in pairs(schema) do
    if type(v) == "table" then schema[k] = closed(v) end
  end
  if schema.type == "object" and schema.additionalProperties == nil then
    schema.additionalProperties = false
  end
  return schema
end

function M.transform_request(raw)
  local req = json.decode(raw, KEEP_NULLS)
  local body = { model = req.model, max_tokens = present(req.max_tokens) and req.max_tokens or 4096 }
  local system, messages = {}, json.array()

  local function push(role, blocks) util.push_turn(messages, role, "content", blocks) end

  for _, m in ipairs(req.messages) do
    if m.role == "system" then
      if type(m.content) == "string" then
        system[#system + 1] = m.content
      else
        for _, part in ipairs(m.content) do
          if part.type == "text" then system[#system + 1] = part.text end
        end
      end
    elseif m.role == "assistant" then
      push("assistant", assistant_blocks(m))
    elseif m.role == "tool" then
      local result = { type = "tool_result", tool_use_id = m.tool_call_id, content = text_of(m.content) or "" }
      if m.is_error then result.is_error = true end
      push("user", json.array({ result }))
    else
      push("user", user_blocks(m.content))
    end
  end
  if #system > 0 then body.system = table.concat(system, "\n\n") end
  body.messages = messages
  if req.stream then body.stream = true end

  if present(req.tools) and #req.tools > 0 then
    body.tools = util.tool_declarations(req.tools, "input_schema")
    body.tool_choice = tool_choice_of(req.tool_choice)
  end
  if present(req.temperature) then body.temperature = req.temperature end
  if present(req.stop) then body.stop_sequences = util.stop_list(req.stop) end

  local effort = req.reasoning_effort
  if present(effort) and effort ~= "off" and effort ~= "none" and not req.disable_thinking then
    local budget = BUDGETS[effort] or BUDGETS.medium
    if body.max_tokens <= budget then body.max_tokens = budget + body.max_tokens end
    body.thinking = { type = "enabled", budget_tokens = budget }
    body.temperature = nil
  end

  local schema = util.schema_of(req)
  if schema then
    local config = type(req.output_config) == "table" and req.output_config or {}
    config.format = { type = "json_schema", schema = closed(schema.schema) }
    body.output_config = config
  end

  util.pass_through(req, body)
  return json.encode(body)
end

local function usage_of(u)
  if not present(u) then return nil end
  local out = {}
  local input = u.input_tokens
  if present(input) then
    local cr = present(u.cache_read_input_tokens) and u.cache_read_input_tokens or 0
    local cw = present(u.cache_creation_input_tokens) and u.cache_creation_input_tokens or 0
    out.prompt = input + cr + cw
  end
  if present(u.cache_read_input_tokens) then out.cache_read = u.cache_read_input_tokens end
  if present(u.cache_creation_input_tokens) then out.cache_write = u.cache_creation_input_tokens end
  if present(u.output_tokens) then out.completion = u.output_tokens end
  local od = u.output_tokens_details
  if present(od) and present(od.thinking_tokens) then out.reasoning_tokens = od.thinking_tokens end
  return out
end

local function error_of(e)
  if type(e) == "string" then return { message = e } end
  return { message = text_of(e.message) or "error", code = present(e.type) and e.type or nil }
end

function M.transform_response(raw)
  local r = json.decode(raw, KEEP_NULLS)
  if r.type == "error" or present(r.error) then return json.encode({ error = error_of(r.error or {}) }) end
  local text, thinking, calls = {}, {}, json.array()
  for _, b in ipairs(r.content or {}) do
    if b.type == "text" then
      text[#text + 1] = b.text
    elseif b.type == "thinking" then
      thinking[#thinking + 1] = b.thinking
    elseif b.type == "tool_use" then
      calls[#calls + 1] = { id = b.id, type = "function", name = b.name, arguments = b.input }
    end
  end
  local out = { content = table.concat(text), token_usage = usage_of(r.usage) }
  if #thinking > 0 then out.reasoning_content = table.concat(thinking) end
  if #calls > 0 then out.tool_calls = calls end
  if present(r.stop_reason) then out.finish_reason = r.stop_reason end
  return json.encode(out)
end

local function non_empty(s)
  return type(s) == "string" and s ~= ""
end

function M.transform_stream_chunk(line)
  local ev = json.decode(line)
  local t = ev.type
  if t == "content_block_delta" then
    local d = ev.delta
    if d.type == "text_delta" and non_empty(d.text) then
      return json.encode({ content = d.text })
    elseif d.type == "thinking_delta" and non_empty(d.thinking) then
      return json.encode({ reasoning_content = d.thinking })
    elseif d.type == "input_json_delta" and non_empty(d.partial_json) then
      return json.encode({ tool_calls = json.array({ { stream_index = ev.index, raw_arguments = d.partial_json } }) })
    end
    return ""
  elseif t == "content_block_start" then
    local b = ev.content_block
    if b.type == "tool_use" then
      local call = { stream_index = ev.index, id = b.id, type = "function", name = b.name, raw_arguments = "" }
      return json.encode({ tool_calls = json.array({ call }) })
    elseif b.type == "text" and non_empty(b.text) then
      return json.encode({ content = b.text })
    elseif b.type == "thinking" and non_empty(b.thinking) then
      return json.encode({ reasoning_content = b.thinking })
    end
    return ""
  elseif t == "message_start" then
    local u = usage_of(ev.message and ev.message.usage)
    if u then return json.encode({ usage = u }) end
    return ""
  elseif t == "message_delta" then
    local out = { usage = usage_of(ev.usage) }
    if ev.delta and present(ev.delta.stop_reason) then out.finish_reason = ev.delta.stop_reason end
    return json.encode(out)
  elseif t == "message_stop" then
    return json.encode({ done = true })
  elseif t == "error" then
    return json.encode({ error = error_of(ev.error or {}) })
  end
  return "" -- ping, content_block_stop, signature_delta, unknown future events
end

return M
