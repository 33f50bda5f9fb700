"""Deterministic mock "LLM" models: pure functions from a request to a :class:`MockReply`.

No I/O happens here. The input is always an OpenAI-chat-like request dict (``model``,
``messages``, ``tools``, ``max_tokens``); the server converts Anthropic and Ollama requests
into that shape first.

Tokens (:func:`count_tokens`, :func:`split_tokens`) are a deterministic imitation of what a
BPE tokenizer does, rough but of the right shape: a short word (up to 8 letters) is one token, a
longer word is split into sub-word pieces (common prefixes and suffixes, then pieces of about
four letters: ``Antidisestablishmentarianism`` -> ``Anti|dis|esta|blish|ment|arian|ism``), a run
of digits is split every three digits, and every other non-space character (punctuation,
symbols) is a token of its own. Whitespace is free: it travels with the token after it, so
``"".join(split_tokens(t)) == t`` always holds.
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
    "subwords",
    "tool_arguments",
    "usage_for",
]

FinishReason = Literal["stop", "length", "tool_calls"]

MODELS: dict[str, str] = {
    "echo": "Streams back the last user message exactly, 1-3 tokens per chunk.",
    "reasoning": "Emits reasoning text about the prompt, then echoes the last user message.",
    "tools": "Calls the first offered tool with arguments read off the prompt (a city from "
    "'in Paris', numbers from digits); then reports the tool results.",
    "lorem": "Long lorem-ipsum text (about 2000 tokens); use max_tokens to get finish_reason 'length'.",
}

LOREM_DEFAULT_TOKENS = 2000

_TOKEN_RE = re.compile(r"\s*(?:\w+|[^\w\s])|\s+", re.UNICODE)
_COUNT_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
#: A word of up to this many characters is one token (most English words are).
WHOLE_WORD = 8
_PREFIXES = ("anti", "counter", "inter", "trans", "under", "over", "super", "dis", "con", "pre")
_SUFFIXES = (
    "ization",
    "ation",
    "ition",
    "tion",
    "sion",
    "arian",
    "ment",
    "ness",
    "ship",
    "able",
    "ible",
    "less",
    "ally",
    "ism",
    "ist",
    "ing",
    "ity",
    "ous",
    "ive",
    "ful",
)
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


def _chunks(stem: str, size: int, least: int) -> list[str]:
    """``stem`` in pieces of ``size`` characters; a last piece shorter than ``least`` joins the
    one before it."""
    pieces = [stem[i : i + size] for i in range(0, len(stem), size)]
    if len(pieces) > 1 and len(pieces[-1]) < least:
        pieces[-2:] = [pieces[-2] + pieces[-1]]
    return pieces


def subwords(word: str) -> list[str]:
    """A word (a ``\\w+`` run) as the sub-word tokens of the mock tokenizer (see the module doc)."""
    if len(word) <= WHOLE_WORD:
        return [word] if not word.isdigit() or len(word) <= 3 else _chunks(word, 3, 1)
    if word.isdigit():
        return _chunks(word, 3, 1)
    if not word.isalpha():  # mixed letters and digits: pieces of four
        return _chunks(word, 4, 3)
    head: list[str] = []
    tail: list[str] = []
    stem = word
    lower = word.lower()
    found = True
    while found and len(stem) > WHOLE_WORD:
        found = False
        for prefix in _PREFIXES:
            if lower.startswith(prefix) and len(lower) - len(prefix) >= 4:
                head.append(stem[: len(prefix)])
                stem, lower = stem[len(prefix) :], lower[len(prefix) :]
                found = True
                break
    found = True
    while found and len(stem) > 4:
        found = False
        for suffix in _SUFFIXES:
            if lower.endswith(suffix) and len(lower) - len(suffix) >= 4:
                tail.insert(0, stem[-len(suffix) :])
                stem, lower = stem[: -len(suffix)], lower[: -len(suffix)]
                found = True
                break
    middle = [stem] if len(stem) <= WHOLE_WORD - 2 else _chunks(stem, 4, 3)
    return head + middle + tail


def split_tokens(text: str) -> list[str]:
    """Split ``text`` into one-token pieces (leading whitespace attached); lossless."""
    out: list[str] = []
    for piece in _TOKEN_RE.findall(text):
        word = piece.lstrip()
        if len(word) <= 3 or not (word[0].isalnum() or word[0] == "_"):
            out.append(piece)
            continue
        subs = subwords(word)
        if len(subs) == 1:
            out.append(piece)
        else:
            out.append(piece[: len(piece) - len(word)] + subs[0])
            out.extend(subs[1:])
    return out


def count_tokens(text: str) -> int:
    """Token count of ``text`` by the mock tokenizer (see the module doc)."""
    n = 0
    for token in _COUNT_RE.findall(text):
        n += 1 if len(token) <= 3 else len(subwords(token))
    return n


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
    """The user's last message. A user message without text right after tool results is not a
    new prompt: it carries what the tools gave back that a tool message cannot (an image)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        attachment = (
            i > 0
            and messages[i - 1].get("role") == "tool"
            and not _content_text(message.get("content")).strip()
        )
        if message.get("role") == "user" and not attachment:
            return i
    return -1


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    i = _last_user_index(messages)
    return _content_text(messages[i].get("content")) if i >= 0 else ""


def _echo(text: str) -> list[Part]:
    return [Text(p) for p in _group(split_tokens(text))]


def _reasoning(text: str) -> list[Part]:
    n = count_tokens(text)
    thought = (
        f'The user wrote {n} token{"" if n == 1 else "s"}: "{text}". '
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
        if i % 96 == 95:
            piece += "\n\n"
        out.append(piece)
        count += count_tokens(piece)
        i += 1
    return [Text(p) for p in _group(out)]


_PREPOSITIONS = frozenset(
    [
        "in",
        "for",
        "of",
        "at",
        "to",
        "from",
        "near",
        "into",
        "about",
        "on",
        "around",
        "between",
        "via",
    ]
)
_QUERY_NAMES = re.compile(
    r"(?:^|_)(?:q|query|text|message|prompt|question|content|topic|search|expression|"
    r"sentence|phrase|input|body|description|note|task|request|term)s?(?:$|_)",
    re.IGNORECASE,
)
_LEAD = re.compile(
    r"^\s*(?:(?:please|hey|ok|so|now|and)[\s,]+)*(?:(?:what|how|who|which|where|when|why)"
    r"(?:'s|’s|\s+(?:is|are|was|were|do|does|did|will|would|can|could|should))?|"
    r"(?:can|could|would|will)\s+you(?:\s+please)?|tell\s+me(?:\s+about)?|show\s+me|"
    r"give\s+me|look\s+up|search(?:\s+the\s+web)?(?:\s+for)?|find(?:\s+me)?|get|"
    r"i\s+(?:want|need|would\s+like)(?:\s+to\s+know)?|is|are|do|does)\b[\s,]*",
    re.IGNORECASE,
)
_ARTICLES = re.compile(r"^(?:the|a|an|some|me)\s+", re.IGNORECASE)
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|(?:(?<=\s)|^)\'([^\']+)\'(?=[\s.,!?;:]|$)')
_WORD = re.compile(r"[^\W\d_][\w'’.-]*", re.UNICODE)
_NEGATION = re.compile(r"\b(?:no|not|without|don't|dont|never)\s+(?:\w+\s+){0,2}$", re.I)
_SHORT_WORDS = 8
#: Enum values longer than this are not looked for in a prompt (see ``_Prompt.enum``).
_MAX_ENUM_CHARS = 200


def _name_words(name: str) -> list[str]:
    """``includeForecast`` / ``include_forecast`` -> ``['include', 'forecast']``."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ")
    return [w.lower() for w in spaced.split() if w]


class _Prompt:
    """What a mock model reads off a prompt to fill a tool's arguments (deterministically).

    Candidates for strings, best first: proper nouns after a preposition (``in Paris``,
    ``from New York``), other capitalised phrases not starting the sentence, quoted text.
    Numbers are taken in order of appearance. Each value is used once, so two string
    arguments (``origin``, ``destination``) get two different phrases.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.numbers = _NUMBER_RE.findall(text)
        self.quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
        unquoted = _QUOTED.sub(" ", text)
        after_prep: list[str] = []
        capitalised: list[str] = []
        words = list(_WORD.finditer(unquoted))
        i = 0
        while i < len(words):
            word = words[i].group().rstrip(".")
            if word[:1].isupper() and i > 0:
                j = i
                while j + 1 < len(words) and words[j + 1].group()[:1].isupper():
                    # a capitalised run stays one phrase only when nothing but spaces separate it
                    gap = unquoted[words[j].end() : words[j + 1].start()]
                    if gap.strip():
                        break
                    j += 1
                phrase = unquoted[words[i].start() : words[j].end()].rstrip(".'’")
                before = words[i - 1].group().lower()
                gap = unquoted[words[i - 1].end() : words[i].start()]
                (after_prep if before in _PREPOSITIONS and not gap.strip() else capitalised).append(
                    phrase
                )
                i = j + 1
                continue
            i += 1
        self.proper = after_prep + capitalised
        self.used: set[str] = set()

    def take(self, pool: Sequence[str]) -> str | None:
        for value in pool:
            if value not in self.used:
                self.used.add(value)
                return value
        return None

    def short_phrase(self) -> str:
        """The prompt without its question or request words: ``What's the weather in Paris?``
        -> ``weather in Paris``; at most a few words."""
        core = self.text.strip().splitlines()[0] if self.text.strip() else ""
        core = _LEAD.sub("", core, count=1)
        core = _ARTICLES.sub("", core).strip().rstrip("?!.;:, ")
        words = core.split()
        return " ".join(words[:_SHORT_WORDS]) or self.text.strip()

    def string(self, name: str) -> str:
        if _QUERY_NAMES.search(name):
            return self.take(self.quoted) or self.short_phrase()
        return self.take(self.proper) or self.take(self.quoted) or self.short_phrase()

    def mentions(self, name: str) -> bool | None:
        """Whether the prompt asks for a boolean option by name: True, False (negated), None."""
        for word in _name_words(name):
            if len(word) < 3 or word in ("include", "use", "show", "get", "with", "enable", "is"):
                continue
            m = re.search(rf"\b{re.escape(word)}", self.text, re.IGNORECASE)
            if m:
                return not _NEGATION.search(self.text[: m.start()])
        return None

    def enum(self, values: Sequence[Any]) -> Any:
        for value in values:
            # (a literal search costs the prompt's length times the value's: values past a
            # sentence are not looked for, so the prompt's length alone bounds it)
            if (
                isinstance(value, str)
                and len(value) <= _MAX_ENUM_CHARS
                and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", self.text, re.IGNORECASE)
            ):
                return value
        return _MISSING

    def number(self, schema: Mapping[str, Any], integer: bool) -> Any:
        if not self.numbers:
            return _MISSING
        value = float(self.numbers.pop(0))
        if "minimum" in schema and isinstance(schema["minimum"], int | float):
            value = max(value, float(schema["minimum"]))
        if "maximum" in schema and isinstance(schema["maximum"], int | float):
            value = min(value, float(schema["maximum"]))
        return int(value) if integer or value.is_integer() else value


class _Missing:
    pass


_MISSING: Any = _Missing()


def _schema_type(schema: Mapping[str, Any]) -> str:
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "null")
    if typ is None:
        typ = "object" if "properties" in schema else "string"
    return str(typ)


def _from_prompt(schema: Any, name: str, prompt: _Prompt) -> Any:
    """A value the prompt gives for one property, or ``_MISSING``."""
    if not isinstance(schema, Mapping):
        return prompt.string(name)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return prompt.enum(schema["enum"])
    typ = _schema_type(schema)
    if typ in ("integer", "number"):
        return prompt.number(schema, typ == "integer")
    if typ == "boolean":
        said = prompt.mentions(name)
        return _MISSING if said is None else said
    if typ == "string":
        taken = prompt.take(prompt.quoted if _QUERY_NAMES.search(name) else prompt.proper)
        return _MISSING if taken is None else taken
    if typ == "array":
        raw_items = schema.get("items")
        items: Mapping[str, Any] = raw_items if isinstance(raw_items, Mapping) else {}
        if _schema_type(items) == "string" and not items.get("enum"):
            found = [p for p in prompt.proper if p not in prompt.used] or [
                q for q in prompt.quoted if q not in prompt.used
            ]
            prompt.used.update(found)
            return found or _MISSING
        if _schema_type(items) in ("integer", "number") and prompt.numbers:
            integer = _schema_type(items) == "integer"
            found = []
            while prompt.numbers:
                found.append(prompt.number(items, integer))
            return found
        return _MISSING
    if typ == "object":  # optional: only what the prompt gives
        props = schema.get("properties") or {}
        given = {n: _from_prompt(v, n, prompt) for n, v in props.items()}
        return {n: v for n, v in given.items() if v is not _MISSING} or _MISSING
    return _MISSING


def _schema_value(schema: Any, name: str, prompt: _Prompt) -> Any:
    """A value for a property that must be given: from the prompt, else the default, else a
    plausible stand-in of its type."""
    value = _from_prompt(schema, name, prompt)
    if value is not _MISSING:
        return value
    if not isinstance(schema, Mapping):
        return prompt.short_phrase()
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    typ = _schema_type(schema)
    if typ in ("integer", "number"):
        low = schema.get("minimum")
        return low if isinstance(low, int | float) else 1
    if typ == "boolean":
        return False
    if typ == "array":
        return []
    if typ == "null":
        return None
    if typ == "object":
        return _fill_object(schema, prompt)
    return prompt.string(name)


def _fill_object(schema: Mapping[str, Any], prompt: _Prompt) -> dict[str, Any]:
    """An object's arguments: every required property, then the optional ones the prompt gives
    a value for. A schema with no ``required`` list treats all its properties as required."""
    props = schema.get("properties") or {}
    listed = schema.get("required")
    required = list(props) if listed is None else [str(r) for r in listed]
    names = [n for n in props if n in required] + [r for r in required if r not in props]
    out: dict[str, Any] = {n: _schema_value(props.get(n), n, prompt) for n in names}
    for n in props:
        if n not in out:
            value = _from_prompt(props[n], n, prompt)
            if value is not _MISSING:
                out[n] = value
    # the schema's order, as a model writes them
    order: dict[str, int] = {}
    for n in [*props, *required]:
        order.setdefault(n, len(order))
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


def tool_arguments(tool: Mapping[str, Any], text: str) -> dict[str, Any]:
    """Arguments for an OpenAI-format (or Anthropic ``input_schema``) tool, filled from the
    prompt ``text`` the way a model would, and deterministically.

    Every required property gets a value; an optional one only when the prompt gives it. Strings:
    a proper noun after ``in/for/of/at/from/to...`` (``"What's the weather in Paris?"`` ->
    ``"Paris"``), another capitalised phrase or quoted text, else a short phrase of the prompt
    (for ``query``/``text``-like names: quoted text, else that phrase). Numbers: the digits of
    the prompt in order, clamped to ``minimum``/``maximum``. Enums: the value the prompt names,
    else the default, else the first. Booleans: named in the prompt (``"... without forecast"``
    is false), else the default, else false. Arrays of strings: the proper nouns; arrays of
    numbers: the prompt's numbers. Objects are filled recursively.
    """
    fn = tool.get("function", tool)
    params = fn.get("parameters") or fn.get("input_schema") or {}
    return _fill_object(params, _Prompt(text))


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
