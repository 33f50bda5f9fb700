"""Request normalisation: a request body of any mock format -> the OpenAI-chat-like dict the
mock models (:mod:`notebook_llm.adapters.mock.models`) take.

OpenAI bodies pass through; Ollama's ``/api/chat`` (object arguments, ``options.num_predict``)
and Anthropic's messages API (``system``, content blocks, ``tool_use``/``tool_result``,
``input_schema``) are converted. Only what the models read is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .frames import Format, dumps

__all__ = ["is_stream", "to_chat_request"]


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b
        )
    return "" if content is None else str(content)


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
                        "arguments": args if isinstance(args, str) else dumps(args),
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
    if isinstance(body.get("format"), Mapping):  # Ollama's structured output: format = schema
        out["response_format"] = _json_schema(body["format"])
    return out


def _json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": dict(schema)}}


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
                fn = {"name": b.get("name", ""), "arguments": dumps(b.get("input", {}))}
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
    fmt = (body.get("output_config") or {}).get("format")  # Anthropic's JSON outputs
    if isinstance(fmt, Mapping) and isinstance(fmt.get("schema"), Mapping):
        out["response_format"] = _json_schema(fmt["schema"])
    return out
