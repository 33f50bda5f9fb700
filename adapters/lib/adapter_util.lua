--[[
adapter_util.lua - helpers every built-in adapter shares (a library, not an adapter).

Loaded with `local util = require("adapter_util")`: notebook_llm's sandboxed `require` resolves
only the libraries shipped in the built-ins' lib/ folder, runs them in the script's own sandbox
(same CPU and memory limits) and keeps one copy per Lua state. Nothing here keeps state.

  util.null, util.KEEP_NULLS      json.null, and the decode option that keeps nulls as it
  util.present(v)                 v is neither nil nor json.null
  util.text_of(v)                 v if it is a string, else nil
  util.decode_args(args)          tool-call arguments as an object: a JSON string decoded (nulls
                                  kept), a table as it is, anything else {}
  util.data_url(url)              "data:<media>;base64,<data>" -> media, data (nil otherwise)
  util.image_url(part)            the URL of an image_url content part (a string or {url})
  util.content_items(content, text_item, image_item, who)
                                  a message's content (a string, or an array of text and
                                  image_url parts) -> an array of text_item(text) and
                                  image_item(url); "" gives none; another part type is an
                                  error naming the adapter `who`
  util.push_turn(turns, role, key, items)
                                  append items to turns[#turns][key] when that turn has `role`,
                                  else start a new turn {role, [key] = items}; nothing if empty
  util.tool_declarations(tools, schema_key)
                                  OpenAI tools -> {name, description, [schema_key] = parameters}
  util.stop_list(stop)            a stop string as a one-item array, a list as it is
  util.schema_of(req)             the json_schema table of response_format json_schema, or nil
  util.pass_through(req, body, also)
                                  copy the request keys the kernel format does not define (the
                                  extra_body ones; also: a set of more known keys) into body,
                                  where body has no such key yet
  util.response_json(chunk)       a unified stream chunk {content, reasoning_content,
                                  tool_calls, finish_reason, usage} as transform_response JSON
]]

local json, type, pairs, ipairs = json, type, pairs, ipairs

local util = {}

local null = json.null
util.null = null
-- JSON null decodes to nil by default; where values pass through (request bodies, tool
-- arguments) nulls are kept as json.null, so they are sent on as null.
util.KEEP_NULLS = { null = null }
local KEEP_NULLS = util.KEEP_NULLS

function util.present(v)
  return v ~= nil and v ~= null
end

function util.text_of(v)
  if type(v) == "string" then return v end
  return nil
end

function util.decode_args(args)
  if type(args) == "string" and string.find(args, "%S") then return json.decode(args, KEEP_NULLS) end
  if type(args) == "table" and args ~= null then return args end
  return json.object()
end

function util.data_url(url)
  return string.match(url, "^data:([^;,]+);base64,(.*)$")
end

function util.image_url(part)
  local iu = part.image_url
  return type(iu) == "table" and iu.url or iu
end

function util.push_turn(turns, role, key, items)
  if #items == 0 then return end
  local last = turns[#turns]
  if last and last.role == role then
    local into = last[key]
    for _, item in ipairs(items) do into[#into + 1] = item end
  else
    turns[#turns + 1] = { role = role, [key] = items }
  end
end

function util.content_items(content, text_item, image_item, who)
  local items = json.array()
  if type(content) == "string" then
    if content ~= "" then items[1] = text_item(content) end
    return items
  end
  if not util.present(content) then return items end
  for _, part in ipairs(content) do
    if part.type == "text" then
      items[#items + 1] = text_item(part.text)
    elseif part.type == "image_url" then
      items[#items + 1] = image_item(util.image_url(part))
    else
      error(who .. " adapter: unsupported content part type " .. tostring(part.type), 0)
    end
  end
  return items
end

function util.tool_declarations(tools, schema_key)
  local out = json.array()
  for i, t in ipairs(tools) do
    local fn = t["function"] or t
    out[i] = { name = fn.name, description = fn.description, [schema_key] = fn.parameters }
  end
  return out
end

function util.stop_list(stop)
  if type(stop) == "string" then return json.array({ stop }) end
  return stop
end

function util.schema_of(req)
  local rf = req.response_format
  if type(rf) == "table" and rf.type == "json_schema" and type(rf.json_schema) == "table" then
    return rf.json_schema
  end
  return nil
end

-- The keys of the kernel request format; the others came from extra_body.
local KNOWN = {
  model = true, messages = true, stream = true, tools = true, tool_choice = true,
  temperature = true, max_tokens = true, stop = true, reasoning_effort = true,
  disable_thinking = true, stream_options = true, response_format = true,
}

function util.pass_through(req, body, also)
  for k, v in pairs(req) do
    if not KNOWN[k] and not (also and also[k]) and body[k] == nil then body[k] = v end
  end
end

function util.response_json(chunk)
  return json.encode({
    content = chunk.content or "",
    reasoning_content = chunk.reasoning_content,
    tool_calls = chunk.tool_calls,
    finish_reason = chunk.finish_reason,
    token_usage = chunk.usage,
  })
end

return util
