--[[
gemini.lua - Google Gemini API (base_url https://generativelanguage.googleapis.com/v1beta).

Written to the HomeAgent Lua adapter contract. Auth: build_headers sets x-goog-api-key
(meta.api_key), so the key never appears in a URL. Shared helpers (null handling, tool
arguments, images, turns, extra_body pass-through) come from the built-in library
lib/adapter_util.lua (notebook_llm's sandboxed `require`).

notebook_llm extensions used:
  * `endpoint` / `stream_endpoint` with the {model} placeholder ("/models/{model}:generateContent",
    "/models/{model}:streamGenerateContent?alt=sse"); a kernel without them cannot reach Gemini;
  * usage.cache_read; the `error` chunk field;
  * `require` of the built-in library adapter_util (lib/; for a kernel without `require`,
    `python -m notebook_llm export-adapter NAME` writes this file with it inlined).

Request (kernel JSON -> generateContent):
  * system messages -> systemInstruction; user/assistant -> contents with roles user/model;
    consecutive turns of one role are merged (all function responses of a parallel call go in
    one turn, as the API requires);
  * image_url parts: data: URLs -> inlineData, other URLs -> fileData (mime type guessed from the
    extension, image/jpeg otherwise);
  * assistant tool_calls -> functionCall parts (args = decoded arguments). The first one of a
    turn carries thoughtSignature "skip_thought_signature_validator", the value Google documents
    for replaying calls whose signature was not kept (the contract has no field for it);
    reasoning_content is not sent back. Ids are sent back only when they came from Gemini
    (ids this script synthesized start with "gemini_");
  * tool messages -> functionResponse parts; the function NAME Gemini requires is looked up from
    the earlier assistant tool_calls of the same request by tool_call_id; response is
    {result = text}, or {error = text} when is_error;
  * tools -> functionDeclarations with parametersJsonSchema (full JSON Schema, so empty
    `properties`, additionalProperties etc. are accepted); tool_choice none/required/named ->
    toolConfig.functionCallingConfig;
  * temperature, max_tokens, stop -> generationConfig; reasoning_effort off/none (or
    disable_thinking) -> thinkingBudget 0, other efforts -> includeThoughts + thinkingBudget
    (low 1024, medium 8192, high 24576); extra_body keys are passed through, and an extra
    generationConfig table is merged into ours;
  * a schema (response_format json_schema) -> generationConfig.responseMimeType
    "application/json" + responseJsonSchema (full JSON Schema, like parametersJsonSchema).

Stream: parts with thought = true -> reasoning_content, other text -> content, functionCall ->
tool call (id from the API, else "gemini_<name>_<n>", unique and stable within a stream),
finishReason -> finish_reason (+ done), promptFeedback.blockReason -> finish_reason (an error
finish), usageMetadata -> usage {prompt = promptTokenCount, completion = candidatesTokenCount +
thoughtsTokenCount (OpenAI semantics: output includes reasoning), total, cache_read =
cachedContentTokenCount, reasoning_tokens = thoughtsTokenCount}.
Vertex AI streamed arguments (streamFunctionCallArguments): a functionCall {name, willContinue}
opens a call, partialArgs {jsonPath, stringValue|numberValue|boolValue|nullValue} fill it, and an
empty functionCall {} (or the finishReason) closes it; the script keeps the pending call in
per-stream state and emits its arguments as one JSON text when closed. jsonPath forms handled:
$.a.b and $.a[0]; string values split over several partialArgs are concatenated.

Unified chunk fields emitted: content, reasoning_content, tool_calls (kernel shape with
`arguments` object, or raw_arguments for Vertex partial args), finish_reason, done, usage, error.
]]

local M = {
  name = "gemini",
  version = "1.0.0",
  endpoint = "/models/{model}:generateContent",
  stream_endpoint = "/models/{model}:streamGenerateContent?alt=sse",
}

local util = require("adapter_util")
local null, KEEP_NULLS, present, text_of = util.null, util.KEEP_NULLS, util.present, util.text_of

local BUDGETS = { minimal = 512, low = 1024, medium = 8192, high = 24576, max = 32768 }
local MIME = { png = "image/png", jpg = "image/jpeg", jpeg = "image/jpeg", gif = "image/gif",
  webp = "image/webp", heic = "image/heic", heif = "image/heif", pdf = "application/pdf" }
local SYNTHETIC = "gemini_"

function M.build_headers(meta)
  return { ["x-goog-api-key"] = meta.api_key or "" }
end

local function image_part(url)
  local media, data = util.data_url(url)
  if media then return { inlineData = { mimeType = media, data = data } } end
  local ext = string.match(string.lower(url), "%.(%w+)$") or string.match(string.lower(url), "%.(%w+)%?")
  return { fileData = { fileUri = url, mimeType = MIME[ext or ""] or "image/jpeg" } }
end

local function text_part(text)
  return { text = text }
end

local function content_parts(content)
  return util.content_items(content, text_part, image_part, "gemini")
end

local decode_args = util.decode_args

local function tool_config(tc, names)
  if tc == "none" then return { functionCallingConfig = { mode = "NONE" } } end
  if tc == "required" or tc == "any" then return { functionCallingConfig = { mode = "ANY" } } end
  if type(tc) == "table" and tc ~= null and tc["function"] then
    return { functionCallingConfig = { mode = "ANY", allowedFunctionNames = json.array({ tc["function"].name }) } }
  end
  return nil
end

function M.transform_request(raw)
  local req = json.decode(raw, KEEP_NULLS)
  local system, contents, names = json.array(), json.array(), {}

  local function push(role, parts) util.push_turn(contents, role, "parts", parts) end

  for _, m in ipairs(req.messages) do
    if m.role == "system" then
      for _, p in ipairs(content_parts(m.content)) do system[#system + 1] = p end
    elseif m.role == "assistant" then
      local parts = content_parts(m.content)
      if present(m.tool_calls) then
        for i, tc in ipairs(m.tool_calls) do
          local fn = tc["function"] or {}
          names[tc.id or ""] = fn.name
          local call = { name = fn.name, args = decode_args(fn.arguments) }
          if type(tc.id) == "string" and string.sub(tc.id, 1, #SYNTHETIC) ~= SYNTHETIC then call.id = tc.id end
          local part = { functionCall = call }
          if i == 1 then part.thoughtSignature = "skip_thought_signature_validator" end
          parts[#parts + 1] = part
        end
      end
      push("model", parts)
    elseif m.role == "tool" then
      local name = names[m.tool_call_id or ""]
      if not name then
        error("gemini adapter: no earlier assistant tool call has id " .. tostring(m.tool_call_id) ..
          "; Gemini needs the function name for a tool result")
      end
      local text = text_of(m.content) or ""
      local resp = { name = name, response = m.is_error and { error = text } or { result = text } }
      if type(m.tool_call_id) == "string" and string.sub(m.tool_call_id, 1, #SYNTHETIC) ~= SYNTHETIC then
        resp.id = m.tool_call_id
      end
      push("user", json.array({ { functionResponse = resp } }))
    else
      push("user", content_parts(m.content))
    end
  end

  local body = { contents = contents }
  if #system > 0 then body.systemInstruction = { parts = system } end
  if present(req.tools) and #req.tools > 0 then
    local decls = util.tool_declarations(req.tools, "parametersJsonSchema")
    body.tools = json.array({ { functionDeclarations = decls } })
    body.toolConfig = tool_config(req.tool_choice)
  end

  local gen = {}
  if present(req.temperature) then gen.temperature = req.temperature end
  if present(req.max_tokens) then gen.maxOutputTokens = req.max_tokens end
  if present(req.stop) then gen.stopSequences = util.stop_list(req.stop) end
  local effort = req.reasoning_effort
  if req.disable_thinking or effort == "off" or effort == "none" then
    gen.thinkingConfig = { thinkingBudget = 0 }
  elseif present(effort) then
    gen.thinkingConfig = { includeThoughts = true, thinkingBudget = BUDGETS[effort] or BUDGETS.medium }
  end
  local schema = util.schema_of(req)
  if schema then
    gen.responseMimeType = "application/json"
    gen.responseJsonSchema = schema.schema
  end
  if type(req.generationConfig) == "table" then
    for k, v in pairs(req.generationConfig) do gen[k] = v end
  end
  if next(gen) ~= nil then body.generationConfig = gen end

  util.pass_through(req, body, { generationConfig = true })
  return json.encode(body)
end

-------------------------------------------------------------------------------- responses

local function usage_of(u)
  if not present(u) then return nil end
  local out = {}
  if present(u.promptTokenCount) then out.prompt = u.promptTokenCount end
  local cand = present(u.candidatesTokenCount) and u.candidatesTokenCount or nil
  local thoughts = present(u.thoughtsTokenCount) and u.thoughtsTokenCount or nil
  if cand or thoughts then out.completion = (cand or 0) + (thoughts or 0) end
  if thoughts then out.reasoning_tokens = thoughts end
  if present(u.totalTokenCount) then out.total = u.totalTokenCount end
  if present(u.cachedContentTokenCount) then out.cache_read = u.cachedContentTokenCount end
  if next(out) == nil then return nil end
  return out
end

local function error_of(e)
  if type(e) == "string" then return { message = e } end
  return {
    message = text_of(e.message) or "error",
    code = present(e.status) and e.status or nil,
    status = type(e.code) == "number" and e.code or nil,
  }
end

-- Per-stream state (one Lua state per stream): call counter and a pending Vertex partial call.
local calls_seen = 0
local pending = nil

local function path_keys(path)
  local keys = {}
  for seg in string.gmatch((string.gsub(path, "^%$", "")), "[^.]+") do
    local name, rest = string.match(seg, "^([^%[]*)(.*)$")
    if name ~= "" then keys[#keys + 1] = name end
    for idx in string.gmatch(rest, "%[(%d+)%]") do keys[#keys + 1] = tonumber(idx) + 1 end
  end
  return keys
end

-- Set `value` at a JSONPath like $.a.b[0] inside root; a string continues an earlier string.
local function set_path(root, path, value)
  local keys = path_keys(path)
  if #keys == 0 then return end
  local node = root
  for i = 1, #keys - 1 do
    local k = keys[i]
    if node[k] == nil then
      node[k] = type(keys[i + 1]) == "number" and json.array() or json.object()
    end
    node = node[k]
  end
  local last = keys[#keys]
  if type(value) == "string" and type(node[last]) == "string" then
    node[last] = node[last] .. value
  else
    node[last] = value
  end
end

local function close_pending(calls)
  if not pending then return end
  calls[#calls + 1] = { stream_index = pending.stream_index, raw_arguments = json.encode(pending.args) }
  pending = nil
end

local function function_call(fc, calls)
  if present(fc.partialArgs) and pending then
    for _, pa in ipairs(fc.partialArgs) do
      local v = pa.stringValue
      if v == nil then v = pa.numberValue end
      if v == nil then v = pa.boolValue end
      if v == nil and pa.nullValue ~= nil then v = null end
      if v ~= nil then set_path(pending.args, pa.jsonPath or "", v) end
    end
    return
  end
  if not present(fc.name) then -- an empty functionCall {} ends a Vertex partial call
    close_pending(calls)
    return
  end
  close_pending(calls)
  calls_seen = calls_seen + 1
  local index = calls_seen
  local id = text_of(fc.id) or (SYNTHETIC .. tostring(fc.name) .. "_" .. index)
  if fc.willContinue == true then
    pending = { stream_index = index, args = json.object() }
    calls[#calls + 1] = { stream_index = index, id = id, type = "function", name = fc.name, raw_arguments = "" }
  else
    calls[#calls + 1] = { stream_index = index, id = id, type = "function", name = fc.name, arguments = decode_args(fc.args) }
  end
end

local function candidate_chunk(r)
  local out = {}
  local cand = present(r.candidates) and r.candidates[1] or nil
  local text, thought, calls = {}, {}, json.array()
  if cand and present(cand.content) and present(cand.content.parts) then
    for _, p in ipairs(cand.content.parts) do
      if present(p.functionCall) then
        function_call(p.functionCall, calls)
      elseif type(p.text) == "string" and p.text ~= "" then
        if p.thought == true then thought[#thought + 1] = p.text else text[#text + 1] = p.text end
      end
    end
  end
  if cand and present(cand.finishReason) then
    close_pending(calls)
    out.finish_reason = cand.finishReason
    out.done = true
  elseif not cand and present(r.promptFeedback) and present(r.promptFeedback.blockReason) then
    out.finish_reason = r.promptFeedback.blockReason
    out.done = true
  end
  if #text > 0 then out.content = table.concat(text) end
  if #thought > 0 then out.reasoning_content = table.concat(thought) end
  if #calls > 0 then out.tool_calls = calls end
  out.usage = usage_of(r.usageMetadata)
  return out
end

function M.transform_response(raw)
  local r = json.decode(raw, KEEP_NULLS)
  if present(r.error) then return json.encode({ error = error_of(r.error) }) end
  return util.response_json(candidate_chunk(r))
end

function M.transform_stream_chunk(line)
  local r = json.decode(line, KEEP_NULLS)
  if present(r.error) then return json.encode({ error = error_of(r.error) }) end
  local out = candidate_chunk(r)
  if next(out) == nil then return "" end
  return json.encode(out)
end

return M
