-- A kernel-idiom adapter for Ollama's native API (/api/chat, and /api/generate bodies), written
-- by notebook_llm's tests in the style scripts for the HomeAgent kernel use (see
-- openai_style.lua): one JSON object per NDJSON line, pcall(json.decode, raw), `or ""` on absent
-- fields, the flat tool-call shape, and Ollama's own `done` flag passed through.
local adapter = {}

adapter.name = "kernel_ollama_style"
adapter.version = "1.0.0"
adapter.endpoint = "/api/chat"
adapter.stream_format = "ndjson"
adapter.headers = {}

local calls_seen = 0 -- module-level state lives for one stream

function adapter.transform_request(raw_body)
    local ok, req = pcall(json.decode, raw_body)
    if not ok or req == nil then return raw_body end
    local messages = {}
    for _, m in ipairs(req.messages or {}) do
        table.insert(messages, { role = m.role, content = type(m.content) == "string" and m.content or "" })
    end
    return json.encode({ model = req.model, messages = messages, stream = req.stream or false })
end

local function unified_of(chunk)
    local msg = chunk.message or {}
    local unified = { content = msg.content or chunk.response or "", done = (chunk.done == true) }
    local thinking = msg.thinking or chunk.thinking
    if thinking ~= nil and thinking ~= "" then unified.reasoning_content = thinking end
    if msg.tool_calls ~= nil then
        local calls = {}
        for _, tc in ipairs(msg.tool_calls) do
            local fn = tc["function"] or {}
            table.insert(calls, {
                stream_index = calls_seen,
                id = "call_" .. calls_seen,
                type = "function",
                name = fn.name or "",
                raw_arguments = json.encode(fn.arguments or {}),
            })
            calls_seen = calls_seen + 1
        end
        unified.tool_calls = calls
    end
    if chunk.done == true then
        unified.finish_reason = chunk.done_reason or "stop"
        unified.usage = { prompt = chunk.prompt_eval_count or 0, completion = chunk.eval_count or 0 }
    end
    return unified
end

function adapter.transform_response(raw_body)
    local ok, chunk = pcall(json.decode, raw_body)
    if not ok or chunk == nil then return raw_body end
    local u = unified_of(chunk)
    local out = { content = u.content, finish_reason = u.finish_reason or "", token_usage = u.usage }
    out.reasoning_content = u.reasoning_content
    if u.tool_calls ~= nil then
        out.tool_calls = {}
        for _, c in ipairs(u.tool_calls) do
            local _, args = pcall(json.decode, c.raw_arguments)
            table.insert(out.tool_calls, { id = c.id, type = "function", name = c.name, arguments = args or {} })
        end
    end
    return json.encode(out)
end

function adapter.transform_stream_chunk(raw_chunk)
    local ok, chunk = pcall(json.decode, raw_chunk)
    if not ok or chunk == nil then return "" end
    if chunk.error ~= nil then
        return json.encode({ content = "", done = true, error = { message = tostring(chunk.error) } })
    end
    return json.encode(unified_of(chunk))
end

return adapter
