"""Rendering a mock reply the way each provider sends it: streamed frames and JSON bodies.

* ``"openai"`` - chat completions: SSE ``data: {...}`` chunks, a final ``"choices": []`` usage
  chunk and ``data: [DONE]``; reasoning is streamed as ``delta.reasoning_content`` (DeepSeek style).
* ``"anthropic"`` - messages API: SSE with ``event:`` lines (message_start, content_block_*,
  ping, message_delta with usage and stop_reason, message_stop).
* ``"ollama"`` - ``/api/chat`` NDJSON lines with ``message.content`` / ``message.thinking`` /
  ``message.tool_calls`` and a final ``done: true`` line.

:func:`stream_frames` renders a stream, :func:`json_body` the non-streaming body and
:func:`models_list` the model listing. The per-provider pieces (an OpenAI chunk, an Ollama
message, ...) are also used by :mod:`.error_bodies` to build faulty frames.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..models import MODELS, MockReply, MockTokenCounts, Reasoning, Text, ToolCall
from .frames import Format, Frame, ndjson_line, now_iso, sse_event

__all__ = [
    "json_body",
    "models_list",
    "ollama_message",
    "openai_chunk",
    "stream_frames",
]

_STOP = {"anthropic": {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}}
_SIGNATURE = "bW9jay1zaWduYXR1cmU="


def _anthropic_id(call_id: str) -> str:
    return "toolu_" + call_id.removeprefix("call_")


def _args_object(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return {}


# ---------------------------------------------------------------------------- streams


def stream_frames(
    fmt: Format, reply: MockReply, *, model: str, usage: MockTokenCounts, rid: str
) -> list[Frame]:
    """Render ``reply`` as the streamed frames of ``fmt``."""
    if fmt == "openai":
        return _openai_frames(reply, model, usage, rid)
    if fmt == "anthropic":
        return _anthropic_frames(reply, model, usage, rid)
    return _ollama_frames(reply, model, usage)


def _openai_usage(usage: MockTokenCounts) -> dict[str, Any]:
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


def openai_chunk(
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


def _openai_frames(reply: MockReply, model: str, usage: MockTokenCounts, rid: str) -> list[Frame]:
    first = {"role": "assistant", "content": "", "refusal": None}
    frames = [Frame(sse_event(openai_chunk(rid, model, first)), "start")]
    n_call = 0
    for p in reply.parts:
        if isinstance(p, Text):
            frames.append(
                Frame(sse_event(openai_chunk(rid, model, {"content": p.text})), "content")
            )
        elif isinstance(p, Reasoning):
            delta: dict[str, Any] = {"reasoning_content": p.text}
            frames.append(Frame(sse_event(openai_chunk(rid, model, delta)), "content"))
        else:
            head = {
                "index": n_call,
                "id": p.id,
                "type": "function",
                "function": {"name": p.name, "arguments": ""},
            }
            delta = {"content": None, "tool_calls": [head]}
            frames.append(Frame(sse_event(openai_chunk(rid, model, delta)), "content"))
            for piece in p.pieces:
                tc = {"index": n_call, "function": {"arguments": piece}}
                chunk = openai_chunk(rid, model, {"tool_calls": [tc]})
                frames.append(Frame(sse_event(chunk), "content"))
            n_call += 1
    frames.append(Frame(sse_event(openai_chunk(rid, model, {}, reply.finish_reason)), "end"))
    final = openai_chunk(rid, model, {})
    final["choices"], final["usage"] = [], _openai_usage(usage)
    frames.append(Frame(sse_event(final), "end"))
    frames.append(Frame(b"data: [DONE]\n\n", "end"))
    return frames


def _anthropic_frames(
    reply: MockReply, model: str, usage: MockTokenCounts, rid: str
) -> list[Frame]:
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
        Frame(sse_event({"type": "message_start", "message": message}, "message_start"), "start"),
        Frame(sse_event({"type": "ping"}, "ping"), "start"),
    ]
    index = -1
    open_kind: str | None = None

    def close() -> None:
        nonlocal open_kind
        if open_kind == "thinking":
            delta = {"type": "signature_delta", "signature": _SIGNATURE}
            ev = {"type": "content_block_delta", "index": index, "delta": delta}
            frames.append(Frame(sse_event(ev, "content_block_delta"), "content"))
        if open_kind is not None:
            ev = {"type": "content_block_stop", "index": index}
            frames.append(Frame(sse_event(ev, "content_block_stop"), "content"))
        open_kind = None

    def open_block(kind: str, block: dict[str, Any]) -> None:
        nonlocal index, open_kind
        close()
        index += 1
        open_kind = kind
        ev = {"type": "content_block_start", "index": index, "content_block": block}
        frames.append(Frame(sse_event(ev, "content_block_start"), "content"))

    def delta(d: dict[str, Any]) -> None:
        ev = {"type": "content_block_delta", "index": index, "delta": d}
        frames.append(Frame(sse_event(ev, "content_block_delta"), "content"))

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
    frames.append(Frame(sse_event(ev, "message_delta"), "end"))
    frames.append(Frame(sse_event({"type": "message_stop"}, "message_stop"), "end"))
    return frames


def ollama_message(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", **fields}


def _ollama_done(reply: MockReply, model: str, usage: MockTokenCounts) -> dict[str, Any]:
    return {
        "model": model,
        "created_at": now_iso(),
        "message": ollama_message(),
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


def _ollama_frames(reply: MockReply, model: str, usage: MockTokenCounts) -> list[Frame]:
    frames: list[Frame] = []
    n_call = 0
    for p in reply.parts:
        if isinstance(p, Text):
            msg = ollama_message(content=p.text)
        elif isinstance(p, Reasoning):
            msg = ollama_message(thinking=p.text)
        else:
            msg = ollama_message(tool_calls=[_ollama_call(p, n_call)])
            n_call += 1
        line = {"model": model, "created_at": now_iso(), "message": msg, "done": False}
        frames.append(Frame(ndjson_line(line), "content"))
    frames.append(Frame(ndjson_line(_ollama_done(reply, model, usage)), "end"))
    return frames


# ---------------------------------------------------------------------------- bodies


def json_body(
    fmt: Format,
    reply: MockReply,
    *,
    model: str,
    usage: MockTokenCounts,
    rid: str,
    no_end: bool = False,
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
    msg = ollama_message(content=reply.text)
    if reply.reasoning:
        msg["thinking"] = reply.reasoning
    if calls:
        msg["tool_calls"] = [_ollama_call(c, i) for i, c in enumerate(calls)]
    body["message"] = msg
    if no_end:
        body["done"] = False
        del body["done_reason"]
    return body


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
