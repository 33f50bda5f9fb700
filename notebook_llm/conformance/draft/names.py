"""Key names as evidence: the words of a key, and the few name sets the inference weighs.

Names never decide alone (a body's structure does: where a value sits, when it is set, what it
reads like), but a name is good evidence for or against a reading: ``content`` is likely text,
``id`` never is. Keys are compared by their words (``finishReason``, ``finish_reason`` and
``FINISH-REASON`` are all ``finish reason``), split by hand, without a regex.
"""

from __future__ import annotations

import functools

from ...adapters.lua.finish_vocabulary import value_words

__all__ = [
    "DISCRIMINATORS",
    "NOT_TEXT",
    "REASONING_WORDS",
    "TEXT_NAMES",
    "key_words",
    "norm",
    "reasoning_word",
]

#: Keys whose strings are metadata, never the answer (compared by :func:`norm`).
NOT_TEXT = frozenset(
    {
        "id",
        "model",
        "modelversion",
        "role",
        "type",
        "object",
        "name",
        "signature",
        "thoughtsignature",
        "created",
        "createdat",
        "systemfingerprint",
        "obfuscation",
        "status",
        "url",
        "uri",
        "mimetype",
        "event",
        "eventtype",
        "channel",
        "index",
        "finishmessage",
        "stopsequence",
        "servicetier",
        "inferencegeo",
        "arguments",
        "partialjson",
        "args",
        "input",
        "encrypted",
        "encryptedcontent",
        "redactedthinking",
        "state",
        "kind",
        "error",
        "code",
        "lang",
        "language",
        "timestamp",
        "fingerprint",
        "requestid",
        "responseid",
        "traceid",
        "modality",
        "instructions",
        "prompt",
        "system",
        "user",
        "stop",
        "done",
    }
)
#: Keys likely to hold the answer's text (a prior, not a rule).
TEXT_NAMES = frozenset(
    {
        "content",
        "text",
        "response",
        "output",
        "answer",
        "delta",
        "completion",
        "generatedtext",
        "outputtext",
        "message",
        "token",
        "chunk",
        "value",
        "result",
        "piece",
        "reply",
    }
)
REASONING_WORDS = ("reasoning", "thinking", "thought", "think", "analysis", "reflection")
#: Keys that say which kind of payload (or object) it is.
DISCRIMINATORS = ("type", "event", "eventtype", "kind", "object", "op", "action", "msgtype")


@functools.lru_cache(maxsize=8192)
def norm(key: str) -> str:
    """A key's words joined, lower case: ``finishReason``, ``finish_reason`` -> ``finishreason``
    (a key longer than 200 characters names nothing: ``""``). Keys repeat from payload to
    payload, so the answers are cached."""
    return "".join(key_words(key))


@functools.lru_cache(maxsize=8192)
def _words(key: str) -> tuple[str, ...]:
    return tuple(value_words(key)) if len(key) <= 200 else ()


def key_words(key: str) -> list[str]:
    """A key's words, lower case (``n_in`` -> ``["n", "in"]``, ``inputTokenCount`` ->
    ``["input", "token", "count"]``)."""
    return list(_words(key))


def reasoning_word(text: str) -> bool:
    """Whether ``text`` names reasoning (``reasoning_content``, ``thinking_delta``,
    ``response.reasoning_summary_text.delta``)."""
    n = norm(text[:200])
    return any(w in n for w in REASONING_WORDS)
