-- A kernel-idiom adapter for OpenAI-style chat completions (OpenAI, DeepSeek, Groq, Mistral,
-- GitHub Models), written by notebook_llm's tests in the style scripts for the HomeAgent kernel
-- use: pcall(json.decode, raw), `x ~= nil` and `x or ""` on fields that arrive as null, the flat
-- tool-call shape {stream_index, id, type, name, raw_arguments}, usage frames whose choices are
-- empty, and a `done` flag. It must run unchanged on notebook_llm (tests/test_kernel_idioms.py).
local adapter = {}

adapter.name = "kernel_openai_style"
adapter.version = "1.0.0"
adapter.endpoint = "/chat/completions"
adapter.headers = {}

-- Mistral may send message content as an array of typed parts.
local function text_of(content)
    if type(content) == "string" then return content end
    if type(content) ~= "table" then return "" end
    local out = ""
    for _, part in ipairs(content) do
        if part.type == "text" and part.text ~= nil then out = out .. part.text end
    end
    return out
end

local function usage_of(u)
    if u == nil then return nil end
    return {
        prompt = u.prompt_tokens or 0,
        completion = u.completion_tokens or 0,
        total = u.total_tokens or 0,
    }
end

function adapter.transform_request(raw_body)
    local ok, req = pcall(json.decode, raw_body)
    if not ok or req == nil then return raw_body end
    req.disable_thinking = nil
    for _, msg in ipairs(req.messages or {}) do
        msg.reasoning_content = nil
        msg.is_error = nil
    end
    return json.encode(req)
end

function adapter.transform_response(raw_body)
    local ok, resp = pcall(json.decode, raw_body)
    if not ok or resp == nil then return raw_body end
    local unified = {
        content = "",
        finish_reason = "",
        token_usage = usage_of(resp.usage) or { prompt = 0, completion = 0, total = 0 },
    }
    if resp.choices ~= nil and #resp.choices > 0 then
        local choice = resp.choices[1]
        local msg = choice.message or {}
        unified.content = text_of(msg.content)
        local reasoning = msg.reasoning_content or msg.reasoning
        if reasoning ~= nil and reasoning ~= "" then unified.reasoning_content = reasoning end
        if msg.tool_calls ~= nil then
            local calls = {}
            for _, tc in ipairs(msg.tool_calls) do
                local fn = tc["function"] or {}
                local args = {}
                if fn.arguments ~= nil and fn.arguments ~= "" then
                    local args_ok, decoded = pcall(json.decode, fn.arguments)
                    if args_ok and type(decoded) == "table" then args = decoded end
                end
                table.insert(calls, { id = tc.id or "", type = "function", name = fn.name or "", arguments = args })
            end
            if #calls > 0 then unified.tool_calls = calls end
        end
        unified.finish_reason = choice.finish_reason or ""
    end
    return json.encode(unified)
end

function adapter.transform_stream_chunk(raw_chunk)
    local ok, chunk = pcall(json.decode, raw_chunk)
    if not ok or chunk == nil then return "" end
    local unified = { content = "", done = false }
    -- Groq also puts usage under x_groq; the include_usage frame has "choices": [].
    local usage = chunk.usage or (chunk.x_groq ~= nil and chunk.x_groq.usage or nil)
    if usage ~= nil then unified.usage = usage_of(usage) end
    if chunk.choices == nil or #chunk.choices == 0 then
        if unified.usage == nil then return "" end
        return json.encode(unified)
    end
    local choice = chunk.choices[1]
    local delta = choice.delta or {}
    unified.content = text_of(delta.content)
    local reasoning = delta.reasoning_content or delta.reasoning
    if reasoning ~= nil and reasoning ~= "" then unified.reasoning_content = reasoning end
    if delta.tool_calls ~= nil then
        local calls = {}
        for i, tc in ipairs(delta.tool_calls) do
            local fn = tc["function"] or {}
            table.insert(calls, {
                stream_index = tc.index or (i - 1),
                id = tc.id or "",
                type = "function",
                name = fn.name or "",
                raw_arguments = fn.arguments or "",
            })
        end
        unified.tool_calls = calls
    end
    local fr = choice.finish_reason
    if fr ~= nil then unified.finish_reason = fr end
    unified.done = (fr ~= nil)
    return json.encode(unified)
end

return adapter
