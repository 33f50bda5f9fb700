"""The Lua adapter contract's request side, in pure Python: ``GenerateOptions`` -> kernel request.

No I/O. :func:`build_request` turns :class:`~notebook_llm.core.protocol.GenerateOptions` into the
contract's *kernel request* JSON (OpenAI-like), the string a script's ``transform_request``
receives. The response side (unified chunks -> events) is :mod:`notebook_llm.adapters.lua.chunk_mapping`.

Decisions (the contract is silent or the reference kernel is wrong):

* Request: ``temperature``, ``max_tokens`` and ``stop`` are sent only when set (the kernel
  defaults them to 0.7/4096; we let the provider's defaults apply, and adapters that need a
  value, like Anthropic's ``max_tokens``, supply their own). ``model`` is omitted when ``None``.
  A tool call whose arguments are empty is sent back as ``"{}"``. Blocks a role cannot carry (an
  image in an assistant turn, a tool call in a user turn, an image inside a tool result) raise
  ``UNSUPPORTED_CONTENT`` rather than being dropped.
* A schema (``GenerateOptions.response_format``) is sent as OpenAI's ``response_format``
  ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``; an image as the
  contract's ``{"type": "image_url", "image_url": {"url": "data:...;base64,..."}}`` part.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import ErrorCode, LlmError
from ...core.protocol import (
    Block,
    GenerateOptions,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = ["build_request"]


def build_request(options: GenerateOptions, *, stream: bool) -> dict[str, Any]:
    """The kernel request JSON (OpenAI-like) for ``options``; see the module docstring."""
    messages: list[dict[str, Any]] = []
    if options.system:
        messages.append({"role": "system", "content": options.system})
    for message in options.messages:
        _append_message(messages, message)
    req: dict[str, Any] = {}
    if options.model is not None:
        req["model"] = options.model
    req["messages"] = messages
    req["stream"] = stream
    if options.tools:
        req["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in options.tools
        ]
        req["tool_choice"] = "auto"
    if options.temperature is not None:
        req["temperature"] = options.temperature
    if options.max_tokens is not None:
        req["max_tokens"] = options.max_tokens
    if options.stop_sequences is not None:
        req["stop"] = list(options.stop_sequences)
    if options.reasoning_effort is not None:
        req["reasoning_effort"] = options.reasoning_effort
        if options.reasoning_effort in ("off", "none"):
            req["disable_thinking"] = True
    if options.response_format is not None:
        # The kernel request is OpenAI-like, so the schema travels in OpenAI's own field; each
        # built-in script maps it to its provider's (extra_body may still override it).
        req["response_format"] = {"type": "json_schema", "json_schema": options.response_format}
    req.update(options.extra_body)
    return req


def _unsupported(block: Block, role: str) -> LlmError:
    return LlmError(
        f"a {block.type} block cannot be sent in a {role} message", ErrorCode.UNSUPPORTED_CONTENT
    )


def _content(blocks: list[Block], role: str) -> str | list[dict[str, Any]]:
    """A user/system ``content``: a string when only text, else an array of parts."""
    if all(isinstance(b, TextBlock) for b in blocks):
        return "".join(b.text for b in blocks if isinstance(b, TextBlock))
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            parts.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            parts.append({"type": "image_url", "image_url": {"url": b.data_url()}})
        else:
            raise _unsupported(b, role)
    return parts


def _append_message(out: list[dict[str, Any]], message: Message) -> None:
    role = message.role
    if role == "assistant":
        out.append(_assistant(message))
        return
    rest: list[Block] = []
    for b in message.content:
        if isinstance(b, ToolResultBlock):
            if any(not isinstance(c, TextBlock) for c in b.content):
                raise LlmError(
                    f"tool result {b.tool_call_id!r} holds non-text content, which the Lua "
                    "adapter contract cannot carry",
                    ErrorCode.UNSUPPORTED_CONTENT,
                )
            tool_msg: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": b.tool_call_id,
                "content": b.text,
            }
            if b.is_error:
                tool_msg["is_error"] = True
            out.append(tool_msg)
        else:
            rest.append(b)
    if rest or not message.content:
        out.append({"role": role, "content": _content(rest, role)})


def _assistant(message: Message) -> dict[str, Any]:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for b in message.content:
        if isinstance(b, TextBlock):
            text.append(b.text)
        elif isinstance(b, ReasoningBlock):
            reasoning.append(b.text)
        elif isinstance(b, ToolCallBlock):
            calls.append(
                {
                    "id": b.id,
                    "type": "function",
                    "function": {
                        "name": b.name,
                        "arguments": b.arguments if b.arguments.strip() else "{}",
                    },
                }
            )
        else:
            raise _unsupported(b, "assistant")
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if reasoning:
        msg["reasoning_content"] = "".join(reasoning)
    if calls:
        msg["tool_calls"] = calls
    return msg
