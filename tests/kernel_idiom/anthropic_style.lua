-- A kernel-idiom adapter for the Anthropic Messages API, written by notebook_llm's tests in the
-- style scripts for the HomeAgent kernel use (see openai_style.lua): pcall(json.decode, raw),
-- `~= nil` / `or ""` on fields that arrive as null (stop_reason, stop_sequence), the flat
-- tool-call shape with stream_index and raw_arguments, and a `done` flag on message_stop.
local adapter = {}

adapter.name = "kernel_anthropic_style"
adapter.version = "1.0.0"
adapter.endpoint = "/v1/messages"
adapter.headers = { ["anthropic-version"] = "2023-06-01" }

function adapter.transform_request(raw_body)
    local ok, req = pcall(json.decode, raw_body)
    if not ok or req == nil then return raw_body end
    local system = ""
    local messages = {}
    for _, m in ipairs(req.messages or {}) do
        if m.role == "system" then
            system = system .. (m.content or "")
        else
            table.insert(messages, { role = m.role, content = { { type = "text", text = m.content or "" } } })
        end
    end
    local out = {
        model = req.model or "claude-sonnet-4-5",
        max_tokens = req.max_tokens or 4096,
        messages = messages,
        stream = req.stream or false,
    }
    if system ~= "" then out.system = system end
    return json.encode(out)
end

function adapter.transform_response(raw_body)
    local ok, resp = pcall(json.decode, raw_body)
    if not ok or resp == nil then return raw_body end
    local unified = { content = "", finish_reason = resp.stop_reason or "" }
    if resp.usage ~= nil then
        local input = resp.usage.input_tokens or 0
        local output = resp.usage.output_tokens or 0
        unified.token_usage = { prompt = input, completion = output, total = input + output }
    end
    local reasoning = ""
    local calls = {}
    for _, block in ipairs(resp.content or {}) do
        if block.type == "text" then
            unified.content = unified.content .. (block.text or "")
        elseif block.type == "thinking" then
            reasoning = reasoning .. (block.thinking or "")
        elseif block.type == "tool_use" then
            table.insert(calls, { id = block.id or "", type = "function", name = block.name or "", arguments = block.input or {} })
        end
    end
    if reasoning ~= "" then unified.reasoning_content = reasoning end
    if #calls > 0 then unified.tool_calls = calls end
    return json.encode(unified)
end

function adapter.transform_stream_chunk(raw_chunk)
    local ok, ev = pcall(json.decode, raw_chunk)
    if not ok or ev == nil then return "" end
    if ev.type == "message_start" then
        local usage = ev.message ~= nil and ev.message.usage or nil
        if usage == nil then return "" end
        return json.encode({ content = "", done = false, usage = { prompt = usage.input_tokens or 0 } })
    end
    if ev.type == "content_block_start" and ev.content_block ~= nil
        and ev.content_block.type == "tool_use" then
        return json.encode({ content = "", done = false, tool_calls = { {
            stream_index = ev.index or 0,
            id = ev.content_block.id or "",
            type = "function",
            name = ev.content_block.name or "",
            raw_arguments = "",
        } } })
    end
    if ev.type == "content_block_delta" and ev.delta ~= nil then
        local d = ev.delta
        if d.type == "input_json_delta" then
            return json.encode({ content = "", done = false, tool_calls = { {
                stream_index = ev.index or 0,
                raw_arguments = d.partial_json or "",
            } } })
        end
        if d.type == "thinking_delta" then
            return json.encode({ content = "", done = false, reasoning_content = d.thinking or "" })
        end
        return json.encode({ content = d.text or "", done = false })
    end
    if ev.type == "message_delta" then
        local unified = { content = "", done = false }
        if ev.delta ~= nil and ev.delta.stop_reason ~= nil then
            unified.finish_reason = ev.delta.stop_reason
        end
        if ev.usage ~= nil then unified.usage = { completion = ev.usage.output_tokens or 0 } end
        return json.encode(unified)
    end
    if ev.type == "message_stop" then
        return json.encode({ content = "", done = true })
    end
    if ev.type == "error" and ev.error ~= nil then
        return json.encode({ content = "", done = true, error = { message = ev.error.message or "error", code = ev.error.type } })
    end
    return ""
end

return adapter
