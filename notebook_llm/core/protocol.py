"""The stream protocol: events, blocks, messages and request options.

Modelled on deepseek-harness's ``StreamChunk``. Python names are snake_case; every event
serialises with :meth:`to_dict` to the reference JSON shape (camelCase keys and a ``type`` tag),
and with :meth:`to_json` to that shape as JSON text; :func:`event_from_json` is their inverse
(it takes either), so a stream can be saved, replayed and compared.

A stream is a sequence of events obeying five rules (checked by
:func:`notebook_llm.validate_stream`):

1. every ``block-start`` has a matching ``block-end`` (same index, same block type);
2. indexes start at 0 and increase in first-seen order; deltas of one block reuse its index;
3. a delta only arrives while a block of its type is open at that index;
4. at most one ``usage``, and it comes before ``finish``;
5. ``finish`` is last, exactly once; blocks may still be open only if the kind is
   ``error``/``aborted``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .errors import ErrorCode, LlmError

if TYPE_CHECKING:
    from .timeouts import Timeouts

BlockType = Literal["text", "reasoning", "tool-call"]
FinishKind = Literal["stop", "tool-calls", "max-tokens", "error", "aborted"]
Role = Literal["system", "user", "assistant"]


class JsonText:
    """``to_json()``: the object's :meth:`to_dict` as JSON text (what a method of that name is
    expected to return; the dict is :meth:`to_dict`)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> str:
        """The reference JSON shape as a JSON string (``json.loads`` gives :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)


def _mapping(d: Mapping[str, Any] | str) -> Mapping[str, Any]:
    """A ``from_json`` argument: the dict of :meth:`JsonText.to_dict` or its JSON text."""
    if isinstance(d, str):
        try:
            d = json.loads(d)
        except ValueError as exc:
            raise LlmError(f"not JSON: {exc}", ErrorCode.INVALID_OPTIONS) from None
    if not isinstance(d, Mapping):
        raise LlmError(f"expected a JSON object, got {type(d).__name__}", ErrorCode.INVALID_OPTIONS)
    return d


# --------------------------------------------------------------------------------------------
# Blocks


@dataclass(slots=True)
class TextBlock(JsonText):
    text: str
    type: Literal["text"] = field(default="text", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(slots=True)
class ReasoningBlock(JsonText):
    text: str
    type: Literal["reasoning"] = field(default="reasoning", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "reasoning", "text": self.text}


@dataclass(slots=True)
class ToolCallBlock(JsonText):
    """A tool call. ``arguments`` is the raw JSON text; ``args`` is it parsed (``{}`` if empty).

    ``args`` raises ``LlmError(MALFORMED_RESPONSE)`` when ``arguments`` is not a JSON object,
    e.g. when the model's output was cut off by ``max_tokens``.
    """

    id: str
    name: str
    arguments: str = ""
    type: Literal["tool-call"] = field(default="tool-call", init=False)

    @property
    def args(self) -> dict[str, Any]:
        text = self.arguments.strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LlmError(
                f"tool call {self.name!r} ({self.id}) has arguments that are not valid JSON: "
                f"{exc.msg} at position {exc.pos}",
                ErrorCode.MALFORMED_RESPONSE,
            ) from None
        if not isinstance(value, dict):
            raise LlmError(
                f"tool call {self.name!r} ({self.id}) has arguments that are not a JSON object",
                ErrorCode.MALFORMED_RESPONSE,
            )
        return value

    def to_dict(self) -> dict[str, Any]:
        return {"type": "tool-call", "id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(slots=True)
class ImageBlock(JsonText):
    url: str | None = None
    data: str | None = None  # base64
    media_type: str | None = None
    type: Literal["image"] = field(default="image", init=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "image"}
        if self.url is not None:
            out["url"] = self.url
        if self.data is not None:
            out["data"] = self.data
        if self.media_type is not None:
            out["mediaType"] = self.media_type
        return out

    def data_url(self) -> str:
        if self.url is not None:
            return self.url
        return f"data:{self.media_type or 'image/png'};base64,{self.data or ''}"


@dataclass(slots=True)
class ToolResultBlock(JsonText):
    tool_call_id: str
    content: list[Block] = field(default_factory=list)
    is_error: bool = False
    type: Literal["tool-result"] = field(default="tool-result", init=False)

    @classmethod
    def of(cls, tool_call_id: str, text: str, *, is_error: bool = False) -> ToolResultBlock:
        return cls(tool_call_id, [TextBlock(text)], is_error)

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "tool-result",
            "toolCallId": self.tool_call_id,
            "content": [b.to_dict() for b in self.content],
        }
        if self.is_error:
            out["isError"] = True
        return out


Block: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | ImageBlock


def block_from_json(d: Mapping[str, Any] | str) -> Block:
    d = _mapping(d)
    t = d.get("type")
    if t == "text":
        return TextBlock(str(d.get("text", "")))
    if t == "reasoning":
        return ReasoningBlock(str(d.get("text", "")))
    if t == "tool-call":
        return ToolCallBlock(
            str(d.get("id", "")), str(d.get("name", "")), str(d.get("arguments", ""))
        )
    if t == "tool-result":
        return ToolResultBlock(
            str(d.get("toolCallId", "")),
            [block_from_json(b) for b in d.get("content", [])],
            bool(d.get("isError", False)),
        )
    if t == "image":
        return ImageBlock(d.get("url"), d.get("data"), d.get("mediaType"))
    raise LlmError(f"unknown block type {t!r}", ErrorCode.INVALID_OPTIONS)


# --------------------------------------------------------------------------------------------
# Usage and finish


@dataclass(slots=True)
class TokenUsage(JsonText):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens}
        if self.cache_read_tokens is not None:
            out["cacheReadTokens"] = self.cache_read_tokens
        if self.cache_write_tokens is not None:
            out["cacheWriteTokens"] = self.cache_write_tokens
        if self.reasoning_tokens is not None:
            out["reasoningTokens"] = self.reasoning_tokens
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | str) -> TokenUsage:
        d = _mapping(d)
        return cls(
            int(d.get("inputTokens", 0) or 0),
            int(d.get("outputTokens", 0) or 0),
            d.get("cacheReadTokens"),
            d.get("cacheWriteTokens"),
            d.get("reasoningTokens"),
        )

    def __add__(self, other: TokenUsage) -> TokenUsage:
        def opt(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return TokenUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            opt(self.cache_read_tokens, other.cache_read_tokens),
            opt(self.cache_write_tokens, other.cache_write_tokens),
            opt(self.reasoning_tokens, other.reasoning_tokens),
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(slots=True)
class FinishReason(JsonText):
    kind: FinishKind
    failure: LlmError | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.failure is not None:
            out["failure"] = self.failure.to_failure()
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | str) -> FinishReason:
        d = _mapping(d)
        failure = d.get("failure")
        return cls(
            d["kind"],
            LlmError.from_failure(dict(failure)) if isinstance(failure, Mapping) else None,
        )


# --------------------------------------------------------------------------------------------
# Events


@dataclass(slots=True)
class BlockStart(JsonText):
    index: int
    block_type: BlockType
    type: Literal["block-start"] = field(default="block-start", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "block-start", "index": self.index, "blockType": self.block_type}


@dataclass(slots=True)
class TextDelta(JsonText):
    index: int
    text: str
    type: Literal["text-delta"] = field(default="text-delta", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "text-delta", "index": self.index, "text": self.text}


@dataclass(slots=True)
class ReasoningDelta(JsonText):
    index: int
    text: str
    type: Literal["reasoning-delta"] = field(default="reasoning-delta", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "reasoning-delta", "index": self.index, "text": self.text}


@dataclass(slots=True)
class ToolCallDelta(JsonText):
    index: int
    id: str
    arguments_delta: str = ""
    name: str | None = None
    type: Literal["tool-call-delta"] = field(default="tool-call-delta", init=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "tool-call-delta", "index": self.index, "id": self.id}
        if self.name is not None:
            out["name"] = self.name
        out["argumentsDelta"] = self.arguments_delta
        return out


@dataclass(slots=True)
class BlockEnd(JsonText):
    index: int
    block: Block
    type: Literal["block-end"] = field(default="block-end", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "block-end", "index": self.index, "block": self.block.to_dict()}


@dataclass(slots=True)
class Usage(JsonText):
    usage: TokenUsage
    type: Literal["usage"] = field(default="usage", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "usage", "usage": self.usage.to_dict()}


@dataclass(slots=True)
class Finish(JsonText):
    reason: FinishReason
    type: Literal["finish"] = field(default="finish", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "finish", "reason": self.reason.to_dict()}

    @classmethod
    def stop(cls) -> Finish:
        return cls(FinishReason("stop"))

    @classmethod
    def error(cls, err: LlmError) -> Finish:
        return cls(FinishReason("aborted" if err.code == ErrorCode.ABORTED else "error", err))


Event: TypeAlias = (
    BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | Usage | Finish
)


def event_from_json(d: Mapping[str, Any] | str) -> Event:
    """Inverse of ``event.to_dict()`` (and of ``event.to_json()``, its JSON text)."""
    d = _mapping(d)
    try:
        t = d["type"]
        if t == "block-start":
            return BlockStart(int(d["index"]), d["blockType"])
        if t == "text-delta":
            return TextDelta(int(d["index"]), str(d["text"]))
        if t == "reasoning-delta":
            return ReasoningDelta(int(d["index"]), str(d["text"]))
        if t == "tool-call-delta":
            return ToolCallDelta(
                int(d["index"]), str(d["id"]), str(d.get("argumentsDelta", "")), d.get("name")
            )
        if t == "block-end":
            return BlockEnd(int(d["index"]), block_from_json(d["block"]))
        if t == "usage":
            return Usage(TokenUsage.from_json(d["usage"]))
        if t == "finish":
            return Finish(FinishReason.from_json(d["reason"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise LlmError(
            f"malformed event JSON {dict(d)!r}: {exc!r}", ErrorCode.MALFORMED_RESPONSE
        ) from None
    raise LlmError(f"unknown event type {d.get('type')!r}", ErrorCode.MALFORMED_RESPONSE)


# --------------------------------------------------------------------------------------------
# Requests


@dataclass(slots=True)
class Message(JsonText):
    role: Role
    content: list[Block]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", [TextBlock(text)])

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", [TextBlock(text)])

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls("assistant", [TextBlock(text)])

    @classmethod
    def tool_results(cls, results: Sequence[ToolResultBlock]) -> Message:
        return cls("user", list(results))

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": [b.to_dict() for b in self.content]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | str) -> Message:
        d = _mapping(d)
        content = d.get("content", [])
        if isinstance(content, str):
            return cls(d["role"], [TextBlock(content)])
        return cls(d["role"], [block_from_json(b) for b in content])


@dataclass(slots=True)
class ToolSchema(JsonText):
    """A tool offered to the model; ``parameters`` is a JSON Schema object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(slots=True)
class ModelInfo:
    """What ``LlmAdapter.resolve_model`` reports about a model."""

    id: str
    name: str | None = None
    description: str | None = None
    context_window: int | None = None
    default_max_tokens: int | None = None
    reasoning_efforts: list[str] | None = None
    default_reasoning_effort: str | None = None
    input_modalities: list[str] = field(default_factory=lambda: ["text"])


@dataclass(slots=True)
class GenerateOptions:
    """One request, as the engine hands it to an adapter."""

    provider: str
    model: str | None = None
    messages: list[Message] = field(default_factory=list)
    system: str | None = None
    tools: list[ToolSchema] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    #: Stop sequences: the model stops before any of these strings. (A ``StopSignal`` that ends
    #: a running stream is a different thing, always called ``stop_signal``.)
    stop_sequences: list[str] | None = None
    reasoning_effort: str | None = None
    #: The body field that carries ``max_tokens`` for this provider (``max_tokens`` or
    #: ``max_completion_tokens``); ``None`` keeps the adapter's choice.
    max_tokens_field: str | None = None
    #: The JSON Schema the answer must follow, ``{"name", "schema", "strict"}`` (made by
    #: :mod:`notebook_llm.core.response_schema` from ``schema=``); ``None`` for a free-text answer.
    response_format: dict[str, Any] | None = None
    # Extra top-level body keys the provider understands (``extra_body`` in provider config).
    extra_body: dict[str, Any] = field(default_factory=dict)
    # Set by the engine: connection settings of the provider route, for HTTP adapters.
    base_url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    api_key: str | None = field(default=None, repr=False)
    #: Set by the engine: makes the HTTP transport of one stream (the engine's own, or its
    #: recording / replay); ``None`` is the default network transport.
    make_transport: Callable[[], Any] | None = field(default=None, repr=False, compare=False)
    #: The request's time limits (deadline, longest wait for an event); ``None``: the defaults
    #: of :mod:`notebook_llm.wire.deadline`.
    timeouts: Timeouts | None = None
    #: ``False``: ask the server for one whole body (``"stream": false``, the script's
    #: ``transform_response``) instead of a stream; the events are the same. An adapter that
    #: sends no HTTP request has nothing to ask and may ignore it.
    stream: bool = True

    def __repr__(self) -> str:  # never show the key
        return (
            f"GenerateOptions(provider={self.provider!r}, model={self.model!r}, "
            f"messages={len(self.messages)}, tools={len(self.tools or [])}, "
            f"api_key={'***' if self.api_key else None})"
        )
