"""Wire formats of the mock server: request normalisation and per-provider renderers.

Three formats are spoken, imitating recorded provider bodies:

* ``"openai"`` - chat completions: SSE ``data: {...}`` chunks, a final ``"choices": []`` usage
  chunk and ``data: [DONE]``; reasoning is streamed as ``delta.reasoning_content`` (DeepSeek style).
* ``"anthropic"`` - messages API: SSE with ``event:`` lines (message_start, content_block_*,
  ping, message_delta with usage and stop_reason, message_stop).
* ``"ollama"`` - ``/api/chat`` NDJSON lines with ``message.content`` / ``message.thinking`` /
  ``message.tool_calls`` and a final ``done: true`` line.

A stream is rendered as a list of :class:`Frame` (one per flushed write), tagged ``start``,
``content`` or ``end`` so that faults can cut or alter it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from .models import MODELS, MockReply, Reasoning, Text, ToolCall, Usage

__all__ = [
    "CONTENT_TYPES",
    "Format",
    "Frame",
    "error_body",
    "error_frame",
    "is_stream",
    "json_body",
    "malformed_frame",
    "models_list",
    "oversized_frame",
    "stream_frames",
    "to_chat_request",
]

Format = Literal["openai", "anthropic", "ollama"]
FrameKind = Literal["start", "content", "end"]
ErrorKind = Literal[
    "model_not_found", "unauthorized", "rate_limit", "server_error", "invalid_request", "not_found"
]

CONTENT_TYPES: dict[Format, str] = {
    "openai": "text/event-stream; charset=utf-8",
    "anthropic": "text/event-stream; charset=utf-8",
    "ollama": "application/x-ndjson",
}

_STOP = {"anthropic": {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}}
_SIGNATURE = "bW9jay1zaWduYXR1cmU="


@dataclass(frozen=True)
class Frame:
    """One write of a stream: raw bytes and where it sits (start / content / end)."""

    data: bytes
    kind: FrameKind


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _sse(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {_dumps(obj)}\n\n".encode()


def _line(obj: Any) -> bytes:
    return (_dumps(obj) + "\n").encode()


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _anthropic_id(call_id: str) -> str:
    return "toolu_" + call_id.removeprefix("call_")


def _args_object(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return {}


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b
        )
    return "" if content is None else str(content)


# ---------------------------------------------------------------------------- requests


def is_stream(fmt: Format, body: Mapping[str, Any]) -> bool:
    """Whether the request asks for streaming (Ollama streams unless ``stream: false``)."""
    return bool(body.get("stream", fmt == "ollama"))


def to_chat_request(fmt: Format, body: Mapping[str, Any]) -> dict[str, Any]:
    """Convert a request body of ``fmt`` into the OpenAI-chat-like dict the models take."""
    if fmt == "openai":
        return dict(body)
    if fmt == "ollama":
        return _from_ollama(body)
    return _from_anthropic(body)


def _from_ollama(body: Mapping[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for m in body.get("messages") or []:
        msg = dict(m)
        calls = []
        for i, tc in enumerate(m.get("tool_calls") or []):
            fn = tc.get("function") or {}
            args = fn.get("arguments", {})
            calls.append(
                {
                    "id": tc.get("id") or f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": fn.get("name", ""),
                        "arguments": args if isinstance(args, str) else _dumps(args),
                    },
                }
            )
        if calls:
            msg["tool_calls"] = calls
        messages.append(msg)
    out: dict[str, Any] = {"model": body.get("model", ""), "messages": messages}
    if body.get("tools"):
        out["tools"] = body["tools"]
    options = body.get("options") or {}
    if isinstance(options.get("num_predict"), int) and options["num_predict"] >= 0:
        out["max_tokens"] = options["num_predict"]
    return out


def _from_anthropic(body: Mapping[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": _block_text(body["system"])})
    for m in body.get("messages") or []:
        role, content = m.get("role", "user"), m.get("content")
        if not isinstance(content, list):
            messages.append({"role": role, "content": _block_text(content)})
            continue
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for b in content:
            kind = b.get("type")
            if kind == "text":
                texts.append(str(b.get("text", "")))
            elif kind == "tool_use":
                fn = {"name": b.get("name", ""), "arguments": _dumps(b.get("input", {}))}
                calls.append({"id": b.get("id", ""), "type": "function", "function": fn})
            elif kind == "tool_result":
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": b.get("tool_use_id", ""),
                        "content": _block_text(b.get("content")),
                    }
                )
        if role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
        elif texts:
            messages.append({"role": role, "content": "\n".join(texts)})
    out: dict[str, Any] = {"model": body.get("model", ""), "messages": messages}
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.get("name", ""),
                "description": t.get("description", ""),
                "parameters": t.get("input_schema") or {},
            },
        }
        for t in body.get("tools") or []
        if isinstance(t, Mapping) and "name" in t
    ]
    if tools:
        out["tools"] = tools
    if isinstance(body.get("max_tokens"), int):
        out["max_tokens"] = body["max_tokens"]
    return out


# ---------------------------------------------------------------------------- streams


def stream_frames(
    fmt: Format, reply: MockReply, *, model: str, usage: Usage, rid: str
) -> list[Frame]:
    """Render ``reply`` as the streamed frames of ``fmt``."""
    if fmt == "openai":
        return _openai_frames(reply, model, usage, rid)
    if fmt == "anthropic":
        return _anthropic_frames(reply, model, usage, rid)
    return _ollama_frames(reply, model, usage)


def _openai_usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _openai_chunk(
    rid: str, model: str, delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }


def _openai_frames(reply: MockReply, model: str, usage: Usage, rid: str) -> list[Frame]:
    first = {"role": "assistant", "content": "", "refusal": None}
    frames = [Frame(_sse(_openai_chunk(rid, model, first)), "start")]
    n_call = 0
    for p in reply.parts:
        if isinstance(p, Text):
            frames.append(Frame(_sse(_openai_chunk(rid, model, {"content": p.text})), "content"))
        elif isinstance(p, Reasoning):
            delta: dict[str, Any] = {"reasoning_content": p.text}
            frames.append(Frame(_sse(_openai_chunk(rid, model, delta)), "content"))
        else:
            head = {
                "index": n_call,
                "id": p.id,
                "type": "function",
                "function": {"name": p.name, "arguments": ""},
            }
            delta = {"content": None, "tool_calls": [head]}
            frames.append(Frame(_sse(_openai_chunk(rid, model, delta)), "content"))
            for piece in p.pieces:
                tc = {"index": n_call, "function": {"arguments": piece}}
                chunk = _openai_chunk(rid, model, {"tool_calls": [tc]})
                frames.append(Frame(_sse(chunk), "content"))
            n_call += 1
    frames.append(Frame(_sse(_openai_chunk(rid, model, {}, reply.finish_reason)), "end"))
    final = _openai_chunk(rid, model, {})
    final["choices"], final["usage"] = [], _openai_usage(usage)
    frames.append(Frame(_sse(final), "end"))
    frames.append(Frame(b"data: [DONE]\n\n", "end"))
    return frames


def _anthropic_frames(reply: MockReply, model: str, usage: Usage, rid: str) -> list[Frame]:
    message: dict[str, Any] = {
        "id": rid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage.prompt_tokens, "output_tokens": 1},
    }
    frames = [
        Frame(_sse({"type": "message_start", "message": message}, "message_start"), "start"),
        Frame(_sse({"type": "ping"}, "ping"), "start"),
    ]
    index = -1
    open_kind: str | None = None

    def close() -> None:
        nonlocal open_kind
        if open_kind == "thinking":
            delta = {"type": "signature_delta", "signature": _SIGNATURE}
            ev = {"type": "content_block_delta", "index": index, "delta": delta}
            frames.append(Frame(_sse(ev, "content_block_delta"), "content"))
        if open_kind is not None:
            ev = {"type": "content_block_stop", "index": index}
            frames.append(Frame(_sse(ev, "content_block_stop"), "content"))
        open_kind = None

    def open_block(kind: str, block: dict[str, Any]) -> None:
        nonlocal index, open_kind
        close()
        index += 1
        open_kind = kind
        ev = {"type": "content_block_start", "index": index, "content_block": block}
        frames.append(Frame(_sse(ev, "content_block_start"), "content"))

    def delta(d: dict[str, Any]) -> None:
        ev = {"type": "content_block_delta", "index": index, "delta": d}
        frames.append(Frame(_sse(ev, "content_block_delta"), "content"))

    for p in reply.parts:
        if isinstance(p, Reasoning):
            if open_kind != "thinking":
                open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            delta({"type": "thinking_delta", "thinking": p.text})
        elif isinstance(p, Text):
            if open_kind != "text":
                open_block("text", {"type": "text", "text": ""})
            delta({"type": "text_delta", "text": p.text})
        else:
            block = {"type": "tool_use", "id": _anthropic_id(p.id), "name": p.name, "input": {}}
            open_block("tool_use", block)
            for piece in ("", *p.pieces):
                delta({"type": "input_json_delta", "partial_json": piece})
    close()
    stop = {"stop_reason": _STOP["anthropic"][reply.finish_reason], "stop_sequence": None}
    out_usage = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}
    ev = {"type": "message_delta", "delta": stop, "usage": out_usage}
    frames.append(Frame(_sse(ev, "message_delta"), "end"))
    frames.append(Frame(_sse({"type": "message_stop"}, "message_stop"), "end"))
    return frames


def _ollama_message(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", **fields}


def _ollama_done(reply: MockReply, model: str, usage: Usage) -> dict[str, Any]:
    return {
        "model": model,
        "created_at": _now_iso(),
        "message": _ollama_message(),
        "done_reason": "length" if reply.finish_reason == "length" else "stop",
        "done": True,
        "total_duration": 1000000,
        "load_duration": 100000,
        "prompt_eval_count": usage.prompt_tokens,
        "prompt_eval_duration": 200000,
        "eval_count": usage.completion_tokens,
        "eval_duration": 700000,
    }


def _ollama_call(call: ToolCall, index: int) -> dict[str, Any]:
    fn = {"index": index, "name": call.name, "arguments": _args_object(call)}
    return {"id": call.id, "function": fn}


def _ollama_frames(reply: MockReply, model: str, usage: Usage) -> list[Frame]:
    frames: list[Frame] = []
    n_call = 0
    for p in reply.parts:
        if isinstance(p, Text):
            msg = _ollama_message(content=p.text)
        elif isinstance(p, Reasoning):
            msg = _ollama_message(thinking=p.text)
        else:
            msg = _ollama_message(tool_calls=[_ollama_call(p, n_call)])
            n_call += 1
        line = {"model": model, "created_at": _now_iso(), "message": msg, "done": False}
        frames.append(Frame(_line(line), "content"))
    frames.append(Frame(_line(_ollama_done(reply, model, usage)), "end"))
    return frames


# ---------------------------------------------------------------------------- bodies


def json_body(
    fmt: Format, reply: MockReply, *, model: str, usage: Usage, rid: str, no_end: bool = False
) -> dict[str, Any]:
    """Render ``reply`` as the non-streaming JSON body of ``fmt``.

    ``no_end=True`` leaves out the finish marker (finish_reason / stop_reason null, done false).
    """
    calls = reply.tool_calls
    if fmt == "openai":
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if reply.text or not calls else None,
            "refusal": None,
            "annotations": [],
        }
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": None if no_end else reply.finish_reason,
        }
        return {
            "id": rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": _openai_usage(usage),
            "service_tier": "default",
            "system_fingerprint": None,
        }
    if fmt == "anthropic":
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            content.append(
                {"type": "thinking", "thinking": reply.reasoning, "signature": _SIGNATURE}
            )
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for c in calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": _anthropic_id(c.id),
                    "name": c.name,
                    "input": _args_object(c),
                }
            )
        return {
            "id": rid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": None if no_end else _STOP["anthropic"][reply.finish_reason],
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
            },
        }
    body = _ollama_done(reply, model, usage)
    msg = _ollama_message(content=reply.text)
    if reply.reasoning:
        msg["thinking"] = reply.reasoning
    if calls:
        msg["tool_calls"] = [_ollama_call(c, i) for i, c in enumerate(calls)]
    body["message"] = msg
    if no_end:
        body["done"] = False
        del body["done_reason"]
    return body


# ---------------------------------------------------------------------------- errors & faults

_OPENAI_ERRORS: dict[str, tuple[int, str, str | None, str]] = {
    "model_not_found": (404, "invalid_request_error", "model_not_found", ""),
    "unauthorized": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided.",
    ),
    "rate_limit": (429, "rate_limit_error", "rate_limit_exceeded", "Rate limit reached (mock)."),
    "server_error": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    "invalid_request": (400, "invalid_request_error", None, "Invalid request."),
    "not_found": (404, "invalid_request_error", None, "Unknown route."),
}
_ANTHROPIC_TYPES = {
    "model_not_found": "not_found_error",
    "unauthorized": "authentication_error",
    "rate_limit": "rate_limit_error",
    "server_error": "api_error",
    "invalid_request": "invalid_request_error",
    "not_found": "not_found_error",
}


def error_body(fmt: Format, kind: ErrorKind, message: str = "") -> tuple[int, dict[str, Any]]:
    """HTTP status and provider-style error body for an error ``kind``."""
    status, typ, code, default = _OPENAI_ERRORS[kind]
    message = message or default
    if fmt == "openai":
        return status, {"error": {"message": message, "type": typ, "param": None, "code": code}}
    if fmt == "anthropic":
        err = {"type": _ANTHROPIC_TYPES[kind], "message": message}
        return status, {"type": "error", "error": err, "request_id": "req_mock"}
    return status, {"error": message}


def error_frame(fmt: Format) -> bytes:
    """An in-stream error event (sent with HTTP 200 after some content)."""
    if fmt == "openai":
        err = {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
        }
        return _sse({"error": err})
    if fmt == "anthropic":
        err = {"type": "overloaded_error", "message": "Overloaded"}
        return _sse({"type": "error", "error": err}, "error")
    return _line({"error": "an error was encountered while running the model: unexpected EOF"})


def malformed_frame(fmt: Format) -> bytes:
    """A frame whose JSON is cut short (invalid)."""
    if fmt == "openai":
        return b'data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"oo\n\n'
    if fmt == "anthropic":
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"oo\n\n'
    return b'{"model":"mock","message":{"role":"assistant","content":"oo\n'


def oversized_frame(fmt: Format, size: int, *, model: str, rid: str) -> bytes:
    """A valid content frame whose JSON data line is ``size`` bytes long (padded with ``x``)."""
    if fmt == "openai":
        line = "data: " + _dumps(_openai_chunk(rid, model, {"content": "\0"}))
        prefix = ""
    elif fmt == "anthropic":
        delta = {"type": "text_delta", "text": "\0"}
        ev = {"type": "content_block_delta", "index": 0, "delta": delta}
        line, prefix = "data: " + _dumps(ev), "event: content_block_delta\n"
    else:
        msg = _ollama_message(content="\0")
        line = _dumps({"model": model, "created_at": _now_iso(), "message": msg, "done": False})
        prefix = ""
    pad = max(size - (len(line.encode()) - len('"\\u0000"') + 2), 0)
    data = line.replace('"\\u0000"', '"' + "x" * pad + '"')
    tail = "\n" if fmt == "ollama" else "\n\n"
    return (prefix + data + tail).encode()


def models_list(fmt: Format) -> dict[str, Any]:
    """``GET /v1/models`` (openai) or ``GET /api/tags`` (ollama) body listing :data:`MODELS`."""
    if fmt == "ollama":
        return {
            "models": [
                {
                    "name": name,
                    "model": name,
                    "modified_at": "2025-01-01T00:00:00Z",
                    "size": 0,
                    "digest": "0" * 64,
                    "details": {"format": "mock", "family": "mock", "parameter_size": "0B"},
                }
                for name in MODELS
            ]
        }
    data = [
        {"id": name, "object": "model", "created": 1700000000, "owned_by": "notebook-llm-mock"}
        for name in MODELS
    ]
    return {"object": "list", "data": data}
