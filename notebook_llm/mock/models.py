"""Deterministic mock "LLM" models: pure functions from a request to a :class:`MockReply`.

No I/O happens here. The input is always an OpenAI-chat-like request dict (``model``,
``messages``, ``tools``, ``max_tokens``); the server converts Anthropic and Ollama requests
into that shape first.

Token counting (:func:`count_tokens`) is a deterministic approximation: one token per run of
word characters (``\\w+``) and one per other non-space character (punctuation, symbols).
Whitespace is free. :func:`split_tokens` splits text into pieces that each hold exactly one
such token plus the whitespace before it, so ``"".join(split_tokens(t)) == t`` always holds.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .schema_answers import instance, request_schema

__all__ = [
    "MODELS",
    "FinishReason",
    "MockReply",
    "MockTokenCounts",
    "Part",
    "Reasoning",
    "Text",
    "ToolCall",
    "UnknownModelError",
    "apply_max_tokens",
    "count_prompt_tokens",
    "count_tokens",
    "generate",
    "normalize_model",
    "split_tokens",
    "tool_arguments",
    "usage_for",
]

FinishReason = Literal["stop", "length", "tool_calls"]

MODELS: dict[str, str] = {
    "echo": "Streams back the last user message exactly, 1-3 tokens per chunk.",
    "reasoning": "Emits reasoning text about the prompt, then echoes the last user message.",
    "tools": "Calls the first offered tool with arguments taken from the prompt; then reports tool results.",
    "lorem": "Long lorem-ipsum text (about 2000 tokens); use max_tokens to get finish_reason 'length'.",
}

LOREM_DEFAULT_TOKENS = 2000

_TOKEN_RE = re.compile(r"\s*(?:\w+|[^\w\s])|\s+", re.UNICODE)
_COUNT_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")


class UnknownModelError(LookupError):
    """Raised by :func:`generate` for a model id that is not in :data:`MODELS`."""

    def __init__(self, model: str) -> None:
        super().__init__(f"The model `{model}` does not exist")
        self.model = model


@dataclass(frozen=True)
class Reasoning:
    """One streamed piece of reasoning ("thinking") text."""

    text: str


@dataclass(frozen=True)
class Text:
    """One streamed piece of answer text."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call; ``pieces`` is the arguments JSON string as streamed (joined = arguments)."""

    id: str
    name: str
    pieces: tuple[str, ...] = ()

    @property
    def arguments(self) -> str:
        """The full arguments JSON string (possibly truncated by ``max_tokens``)."""
        return "".join(self.pieces)

    @classmethod
    def make(
        cls, name: str, arguments: Mapping[str, Any] | str, *, id: str | None = None
    ) -> ToolCall:
        """Build a tool call, serialising ``arguments`` and splitting it into a few pieces."""
        args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        call_id = id or "call_" + hashlib.sha1(f"{name}:{args}".encode()).hexdigest()[:24]
        return cls(id=call_id, name=name, pieces=tuple(_group(split_tokens(args))))


Part = Reasoning | Text | ToolCall


@dataclass(frozen=True)
class MockTokenCounts:
    """The token counts a mock reply reports, in the providers' wire terms; ``completion_tokens``
    includes ``reasoning_tokens`` (OpenAI convention). Not the protocol's ``TokenUsage`` (what an
    adapter reports) nor its ``Usage`` event: the mock server renders these into wire bodies."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class MockReply:
    """What a mock model answers: ordered parts, a finish reason and (optionally) usage.

    ``usage=None`` means "compute it" (see :func:`usage_for`); the server does that.
    """

    parts: tuple[Part, ...] = ()
    finish_reason: FinishReason = "stop"
    usage: MockTokenCounts | None = None

    @classmethod
    def build(
        cls,
        text: str = "",
        *,
        reasoning: str = "",
        tool_calls: Sequence[ToolCall] = (),
        finish_reason: FinishReason | None = None,
        usage: MockTokenCounts | None = None,
    ) -> MockReply:
        """Script a reply by hand: reasoning, then text, then tool calls (each split in pieces).

        ``finish_reason`` defaults to ``'tool_calls'`` when tool calls are given, else ``'stop'``.
        """
        parts: list[Part] = [Reasoning(p) for p in _group(split_tokens(reasoning))]
        parts += [Text(p) for p in _group(split_tokens(text))]
        parts += list(tool_calls)
        fr: FinishReason = finish_reason or ("tool_calls" if tool_calls else "stop")
        return cls(parts=tuple(parts), finish_reason=fr, usage=usage)

    @property
    def text(self) -> str:
        """All text pieces joined."""
        return "".join(p.text for p in self.parts if isinstance(p, Text))

    @property
    def reasoning(self) -> str:
        """All reasoning pieces joined."""
        return "".join(p.text for p in self.parts if isinstance(p, Reasoning))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls, in order."""
        return [p for p in self.parts if isinstance(p, ToolCall)]

    def repieced(self, size: int = 1) -> MockReply:
        """The same reply with every piece split into ``size``-character pieces (for drip)."""
        parts: list[Part] = []
        for p in self.parts:
            if isinstance(p, ToolCall):
                args = p.arguments
                chunks = tuple(args[i : i + size] for i in range(0, len(args), size))
                parts.append(replace(p, pieces=chunks))
            else:
                parts += [type(p)(p.text[i : i + size]) for i in range(0, len(p.text), size)]
        return replace(self, parts=tuple(parts))


# ---------------------------------------------------------------------------- tokens


def split_tokens(text: str) -> list[str]:
    """Split ``text`` into one-token pieces (leading whitespace attached); lossless."""
    return _TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    """Approximate token count: word runs plus non-space non-word characters."""
    return len(_COUNT_RE.findall(text))


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(p.get("text", ""))
            for p in content
            if isinstance(p, Mapping) and p.get("type") in ("text", "input_text")
        ]
        return "\n".join(texts)
    return str(content)


def count_prompt_tokens(request: Mapping[str, Any]) -> int:
    """Prompt tokens: tokens of every message's text (+3 per message) and of the tools JSON."""
    total = 0
    for m in request.get("messages") or []:
        if isinstance(m, Mapping):
            total += 3 + count_tokens(_content_text(m.get("content")))
            for tc in m.get("tool_calls") or []:
                total += count_tokens(json.dumps(tc))
    if request.get("tools"):
        total += count_tokens(json.dumps(request["tools"]))
    return total


def usage_for(reply: MockReply, request: Mapping[str, Any]) -> MockTokenCounts:
    """``reply.usage`` if set, else usage counted from the request and the reply's parts."""
    if reply.usage is not None:
        return reply.usage
    reasoning = count_tokens(reply.reasoning)
    completion = reasoning + count_tokens(reply.text)
    completion += sum(count_tokens(c.arguments) for c in reply.tool_calls)
    return MockTokenCounts(count_prompt_tokens(request), completion, reasoning)


def _group(pieces: Sequence[str]) -> list[str]:
    """Group one-token pieces into chunks of 1, 2, 3, 1, 2, 3, ... tokens (deterministic)."""
    out: list[str] = []
    i = size = 0
    while i < len(pieces):
        size = size % 3 + 1
        out.append("".join(pieces[i : i + size]))
        i += size
    return out


def _truncate(reply: MockReply, max_tokens: int) -> MockReply:
    """Cut the reply after ``max_tokens`` tokens; finish_reason becomes 'length' if cut."""
    budget = max_tokens
    parts: list[Part] = []
    for p in reply.parts:
        pieces = p.pieces if isinstance(p, ToolCall) else (p.text,)
        kept: list[str] = []
        for piece in pieces:
            n = count_tokens(piece)
            if n <= budget:
                kept.append(piece)
                budget -= n
                continue
            toks = split_tokens(piece)
            cut: list[str] = []
            used = 0
            for t in toks:
                c = count_tokens(t)
                if used + c > budget:
                    break
                cut.append(t)
                used += c
            if cut:
                kept.append("".join(cut))
            budget = -1
            break
        if isinstance(p, ToolCall):
            parts.append(replace(p, pieces=tuple(kept)))
        elif kept:
            parts.append(type(p)(kept[0]))
        if budget < 0:
            return replace(reply, parts=tuple(parts), finish_reason="length")
    return reply


# ---------------------------------------------------------------------------- models


def _last_user_index(messages: Sequence[Mapping[str, Any]]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return -1


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    i = _last_user_index(messages)
    return _content_text(messages[i].get("content")) if i >= 0 else ""


def _echo(text: str) -> list[Part]:
    return [Text(p) for p in _group(split_tokens(text))]


def _reasoning(text: str) -> list[Part]:
    thought = (
        f'The user wrote {count_tokens(text)} tokens: "{text}". '
        "I will answer by repeating the message back exactly."
    )
    return [Reasoning(p) for p in _group(split_tokens(thought))] + _echo(text)


def _lorem(n_tokens: int) -> list[Part]:
    words = [
        "lorem",
        "ipsum",
        "dolor",
        "sit",
        "amet",
        "consectetur",
        "adipiscing",
        "elit",
        "sed",
        "do",
        "eiusmod",
        "tempor",
        "incididunt",
        "ut",
        "labore",
        "et",
        "dolore",
        "magna",
        "aliqua",
        "ut",
        "enim",
        "ad",
        "minim",
        "veniam",
        "quis",
        "nostrud",
        "exercitation",
        "ullamco",
        "laboris",
        "nisi",
        "ut",
        "aliquip",
        "ex",
        "ea",
        "commodo",
        "consequat",
    ]
    out: list[str] = []
    count = i = 0
    while count < n_tokens:
        w = words[i % len(words)]
        sentence_start = i % 12 == 0
        end = i % 12 == 11
        piece = (" " if out else "") + (w.capitalize() if sentence_start else w)
        if end:
            piece += "."
            count += 1
        if i % 96 == 95:
            piece += "\n\n"
        out.append(piece)
        count += 1
        i += 1
    return [Text(p) for p in _group(out)]


def _schema_value(schema: Any, name: str, text: str, numbers: list[str]) -> Any:
    """A value for one JSON-schema property, filled from the prompt (numbers are consumed)."""
    if not isinstance(schema, Mapping):
        return text
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    typ = schema.get("type", "string")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "string")
    if typ in ("integer", "number"):
        if numbers:
            raw = numbers.pop(0)
            value = float(raw)
            return int(value) if typ == "integer" or value.is_integer() else value
        return 1
    if typ == "boolean":
        return True
    if typ == "array":
        return []
    if typ == "null":
        return None
    if typ == "object":
        return _fill_object(schema, text, numbers)
    return text


def _fill_object(schema: Mapping[str, Any], text: str, numbers: list[str]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    names = list(props) + [r for r in schema.get("required") or [] if r not in props]
    return {n: _schema_value(props.get(n), n, text, numbers) for n in names}


def tool_arguments(tool: Mapping[str, Any], text: str) -> dict[str, Any]:
    """Arguments for an OpenAI-format tool, filled from the prompt ``text``.

    Every declared (and every required) property gets a value: strings the prompt text, integers
    and numbers the next number found in the prompt (else 1), booleans ``true``, enums their first
    value, arrays ``[]``, objects are filled recursively.
    """
    fn = tool.get("function", tool)
    params = fn.get("parameters") or fn.get("input_schema") or {}
    return _fill_object(params, text, _NUMBER_RE.findall(text))


def _tools(request: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> list[Part]:
    text = _last_user_text(messages)
    tools = [t for t in request.get("tools") or [] if isinstance(t, Mapping)]
    if not tools:
        return _echo("(no tools were offered) " + text)
    last_user = _last_user_index(messages)
    results = [m for m in messages[last_user + 1 :] if m.get("role") == "tool"]
    if results:
        names: dict[str, str] = {}
        for m in messages:
            for tc in m.get("tool_calls") or []:
                if isinstance(tc, Mapping):
                    names[str(tc.get("id"))] = str((tc.get("function") or {}).get("name", ""))
        lines = []
        for m in results:
            name = names.get(str(m.get("tool_call_id"))) or m.get("name") or m.get("tool_name")
            lines.append(f"Result of {name or 'tool'}: {_content_text(m.get('content'))}")
        return _echo("\n".join(lines))
    tool = tools[0]
    name = str(tool.get("function", tool).get("name", "tool"))
    args = json.dumps(tool_arguments(tool, text))
    digest = hashlib.sha1(json.dumps(list(messages), sort_keys=True, default=str).encode())
    return [ToolCall.make(name, args, id="call_" + digest.hexdigest()[:24])]


def _max_tokens(request: Mapping[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = request.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def normalize_model(model: str) -> str:
    """Strip an Ollama-style ``:latest`` tag: ``'echo:latest'`` -> ``'echo'``."""
    return model.removesuffix(":latest")


def generate(request: Mapping[str, Any]) -> MockReply:
    """Run the mock model named by ``request['model']``; raises :class:`UnknownModelError`."""
    model = normalize_model(str(request.get("model", "")))
    messages = [m for m in request.get("messages") or [] if isinstance(m, Mapping)]
    parts: Iterable[Part]
    schema = request_schema(request)
    if schema is not None and model in ("echo", "reasoning", "lorem"):
        # A schema is asked for: a deterministic valid instance, as JSON text.
        text = _last_user_text(messages)
        answer = _echo(json.dumps(instance(schema, text), ensure_ascii=False))
        thought = [p for p in _reasoning(text) if isinstance(p, Reasoning)]
        parts = [*(thought if model == "reasoning" else []), *answer]
    elif model == "echo":
        parts = _echo(_last_user_text(messages))
    elif model == "reasoning":
        parts = _reasoning(_last_user_text(messages))
    elif model == "tools":
        parts = _tools(request, messages)
    elif model == "lorem":
        parts = _lorem(LOREM_DEFAULT_TOKENS)
    else:
        raise UnknownModelError(model)
    parts = tuple(parts)
    finish: FinishReason = "tool_calls" if any(isinstance(p, ToolCall) for p in parts) else "stop"
    reply = MockReply(parts=parts, finish_reason=finish)
    limit = _max_tokens(request)
    return reply if limit is None else _truncate(reply, limit)


def apply_max_tokens(reply: MockReply, request: Mapping[str, Any]) -> MockReply:
    """Truncate a (scripted) reply to the request's ``max_tokens`` if it has one."""
    limit = _max_tokens(request)
    return reply if limit is None else _truncate(reply, limit)
