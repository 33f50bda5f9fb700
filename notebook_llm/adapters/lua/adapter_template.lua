--[[
{{NAME}}.lua - a new notebook_llm adapter, started from the commented template.

An adapter is a Lua script that RETURNS A TABLE. notebook_llm (and any runtime implementing the
HomeAgent adapter contract) calls the functions in that table to translate between its own
OpenAI-like JSON and your provider's API. Edit the cell and re-run it: the adapter hot-reloads,
and a mistake keeps the previous working version and points at the Lua line.

Test it without a network:   %adapter test {{NAME}} path/to/recorded_stream.sse
See the request it sends:    %adapter test {{NAME}}          (the request-side checks)

The sandbox: the Lua 5.4 standard library minus os, io, debug, package and bytecode loading
(`require` loads only the built-in libraries), plus these built-ins:
  json.encode(v) / json.decode(s)   JSON null decodes to nil (the field is absent), as in the
                                    HomeAgent kernel: test fields with `~= nil` or `x or ""`.
                                    json.decode(s, {null = json.null}) keeps nulls as json.null
                                    (for values you pass on); json.null encodes to null;
                                    json.array() makes a table encode as [] even when empty;
                                    decode raises on bad input (pcall(json.decode, s) catches it)
  log(level, msg)                   "debug" | "info" | "warn" | "error"; shown under the cell that
                                    ran the call and sent to Python logging
  http_get(url) / http_post(url, body)  return a JSON string {"url","status","body"} or
                                    {"url","error","code"}; code is stable (TIMEOUT,
                                    RESPONSE_TOO_LARGE, TRANSPORT, ...): test it, not error
  sha256_hex, hmac_sha256_hex(key, msg), base64_encode, tohex   for signing adapters
  require("openai_compat")          the built-in adapters' shared code: for an OpenAI-compatible
                                    API, compat.chat_completions(M, spec) writes all three hooks
                                    (see openai.lua); require("adapter_util"): their helpers
Each call has a CPU budget (1 s) and the state a memory cap (64 MiB): an endless loop ends with
ADAPTER_TIMEOUT instead of hanging the notebook.
]]

local M = {
  -- The name providers use (`adapter = "{{NAME}}"` in config.toml, or add_provider(adapter=...)).
  name = "{{NAME}}",
  version = "0.1.0",
  -- Appended to the provider's base_url. May contain {model} and {api_key} (URL-quoted).
  endpoint = "/chat/completions",
  -- stream_endpoint = "/models/{model}:stream",  -- used instead of endpoint when streaming
  -- stream_format = "ndjson",                     -- for APIs that stream one JSON per line
  -- Extra headers sent with every request. The key rule: if the script has build_headers,
  -- only the headers it returns carry the key (nothing is added). Otherwise, unless these
  -- headers set Authorization (or x-api-key / x-goog-api-key) or the endpoint holds {api_key},
  -- "Authorization: Bearer <api key>" is added.
  headers = {},
}

--[[ Optional: headers computed per request (signatures, custom auth).
meta = {url, method, body, api_key, timestamp, source = {name = <provider>}}
With this hook, no "Authorization: Bearer" is added: put the key in the headers you return.
function M.build_headers(meta)
  return { ["x-api-key"] = meta.api_key }
end
]]

--[[ REQUIRED. raw: the request as a JSON string, OpenAI-like:
  {model, messages = [{role = "system"|"user"|"assistant"|"tool", content = <string or
   [{type="text", text} | {type="image_url", image_url={url}}]>, reasoning_content?,
   tool_calls? = [{id, type="function", function={name, arguments=<JSON string>}}],
   tool_call_id? (role "tool")}],
   stream = true|false, tools? (OpenAI format), tool_choice?, temperature?, max_tokens?, stop?,
   reasoning_effort?, disable_thinking?, ...extra body keys}
Return the body to POST, as a JSON string. ]]
function M.transform_request(raw)
  -- Nulls kept as json.null: the body is passed on, and a tool schema's null must stay null.
  local req = json.decode(raw, { null = json.null })
  -- Example edits: providers that reject fields they don't know.
  req.disable_thinking = nil
  for _, m in ipairs(req.messages) do
    m.reasoning_content = nil
  end
  return json.encode(req)
end

--[[ REQUIRED unless you only stream. raw: the whole (non-stream) response body.
Return a JSON string:
  {content, reasoning_content?, finish_reason? ("stop" | "length" | "tool_calls" | ...),
   token_usage? = {prompt, completion, total},
   tool_calls? = [{id, type = "function", name, arguments = <object>}],
   error? = {message, code?, status?}} ]]
function M.transform_response(raw)
  local r = json.decode(raw)
  if r.error ~= nil then
    return json.encode({ error = { message = tostring(r.error.message or r.error) } })
  end
  local choice = r.choices[1]
  local out = { content = choice.message.content or "", finish_reason = choice.finish_reason }
  if r.usage ~= nil then
    out.token_usage = {
      prompt = r.usage.prompt_tokens,
      completion = r.usage.completion_tokens,
      total = r.usage.total_tokens,
    }
  end
  return json.encode(out)
end

--[[ Optional (present = the adapter streams). line: one SSE `data:` payload (or one NDJSON
line). Return "" to skip it, or a JSON string with any of:
  {content, reasoning_content, done = true, finish_reason,
   tool_calls = [{index, id, type = "function", function = {name, arguments = <fragment>}}],
   tool_call = {id, name, arguments},  usage = {prompt, completion, total, cache_read,
   reasoning_tokens},  error = {message, code, status}}
Tool-call fragments with the same index (or stream_index, or id) are joined. Module-level
variables are per stream, so you may keep state between chunks. The SSE end marker "[DONE]"
never reaches this function: the runtime ends the stream itself. ]]
function M.transform_stream_chunk(line)
  local c = json.decode(line)
  local choice = c.choices and c.choices[1] or nil -- usage-only chunks have choices = []
  local out, any = {}, false
  if choice and choice.delta ~= nil then
    local d = choice.delta
    if type(d.content) == "string" and d.content ~= "" then
      out.content = d.content
      any = true
    end
    if d.tool_calls ~= nil then
      out.tool_calls = d.tool_calls
      any = true
    end
  end
  if choice and choice.finish_reason ~= nil then -- null (absent) until the last chunk
    out.finish_reason = choice.finish_reason
    any = true
  end
  if c.usage ~= nil then
    out.usage = { prompt = c.usage.prompt_tokens, completion = c.usage.completion_tokens }
    any = true
  end
  if not any then
    return "" -- nothing for us in this chunk (e.g. a role-only delta)
  end
  return json.encode(out)
end

return M
