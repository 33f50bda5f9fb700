"""The vocabulary of finish meanings: what a provider's own finish value means.

APIs name the end of an answer in their own words: ``stop``, ``end_turn``, ``COMPLETE``,
``eos_token``, ``max_tokens``, ``MAX_TOKENS``, ``model_length``, ``truncated``, ``incomplete``,
``tool_use``, ``SAFETY``, ``RECITATION``, ``failed``... Rather than a closed list of values, a
value is read by its *words* (split at ``_``, ``-``, ``.``, spaces and lower-to-upper case
changes), so a value never seen before still has a meaning when its words say it. Five
meanings, checked in this order (the first that matches wins, so ``incomplete`` is a length
and not a stop, ``MALFORMED_FUNCTION_CALL`` an error and not a tool call):

==================  ========================================================================
``progress``        not a finish at all: ``""``, ``null``, ``none``, ``in_progress``,
                    ``running``, ``pending``... (a field that says the answer goes on);
                    also any value with one of the words ``partial``, ``running``,
                    ``not``... (``ALTERNATIVE_STATUS_PARTIAL``, ``not_finished``)
``error``           a word starting ``error``, ``fail``, ``malformed``, ``invalid``,
                    ``exception``, ``timeout``, ``cancel``, ``abort``, ``expire``
``content_filter``  ``filter``, ``safety``/``unsafe``, ``block``, ``moderat``,
                    ``recitation``, ``prohibit``, ``refus``, ``sensitive``, ``guardrail``,
                    ``spii``, ``policy``, ``harm``, ``censor``, ``copyright``, ``violat``
``length``          ``length``, ``max``, ``truncat``, ``incomplete``, ``limit``, ``exceed``,
                    ``overflow``, ``budget``, ``cutoff``; the words ``long``, ``cut``
``tool_calls``      ``tool``, ``function``; ``requires_action``
``stop``            ``stop``, ``end``, ``eos``, ``eot``, ``eom``, ``complete``, ``done``,
                    ``finish``, ``success``/``succeed``, ``normal``, ``natural``, ``terminat``,
                    ``halt``, ``final``; the word ``ok``
==================  ========================================================================

A value with the word ``unspecified``/``unknown``/``other`` (``FINISH_REASON_UNSPECIFIED``), or
none of these words (``pause_turn``, ``LANGUAGE``, ``unload``), has no meaning: the runtime ends
such an answer with a finish of kind ``other`` that keeps the answer and the raw value, never
an error. Values over :data:`MAX_VALUE` characters are not read (no finish value is that long).

The drafted adapters' Lua library (``adapters/lib/draft_support.lua``, ``draft.finish``) holds
the same table; a test keeps the two in step. Written by hand: the vocabulary *is* the design
(no library names finish reasons across APIs), and a scan of a few dozen characters needs no
regex.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "MAX_VALUE",
    "MEANING_WORDS",
    "PROGRESS",
    "PROGRESS_WORDS",
    "FinishMeaning",
    "finish_meaning",
    "is_progress",
    "value_words",
]

FinishMeaning = Literal["stop", "length", "tool_calls", "content_filter", "error"]

#: A value longer than this is not read (a sentence, a pasted body): it has no meaning.
MAX_VALUE = 64

#: Values (words joined, lower case) that say the answer goes on.
PROGRESS = frozenset(
    {
        "",
        "null",
        "none",
        "nil",
        "false",
        "inprogress",
        "running",
        "pending",
        "queued",
        "created",
        "started",
        "streaming",
        "generating",
        "processing",
        "partial",
        "continue",
        "continuing",
        "active",
        "ongoing",
    }
)

#: Words that make a whole value say the answer goes on, wherever they stand in it
#: (``ALTERNATIVE_STATUS_PARTIAL``, ``not_finished``, ``STILL_RUNNING``).
PROGRESS_WORDS = frozenset(
    {
        "partial",
        "progress",
        "running",
        "pending",
        "queued",
        "streaming",
        "generating",
        "processing",
        "continuing",
        "ongoing",
        "unfinished",
        "not",
    }
)

#: Words that make a value meaningless on purpose (``FINISH_REASON_UNSPECIFIED``).
NO_MEANING = frozenset({"unspecified", "unknown", "other"})

#: Per meaning, in the order they are tried: (word stems, whole words, whole joined values).
MEANING_WORDS: tuple[
    tuple[FinishMeaning, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...
] = (
    (
        "error",
        (
            "error",
            "fail",
            "malformed",
            "invalid",
            "exception",
            "timeout",
            "cancel",
            "abort",
            "expire",
        ),
        ("err", "timedout"),
        (),
    ),
    (
        "content_filter",
        (
            "filter",
            "safety",
            "unsafe",
            "block",
            "moderat",
            "recitation",
            "prohibit",
            "refus",
            "sensitive",
            "guardrail",
            "spii",
            "policy",
            "harm",
            "censor",
            "copyright",
            "violat",
        ),
        (),
        (),
    ),
    (
        "length",
        (
            "length",
            "max",
            "truncat",
            "incomplete",
            "limit",
            "exceed",
            "overflow",
            "budget",
            "cutoff",
        ),
        ("long", "cut"),
        (),
    ),
    ("tool_calls", ("tool", "function"), (), ("requiresaction",)),
    (
        "stop",
        (
            "stop",
            "end",
            "eos",
            "eot",
            "eom",
            "complete",
            "done",
            "finish",
            "success",
            "succeed",
            "normal",
            "natural",
            "terminat",
            "halt",
            "final",
        ),
        ("ok",),
        (),
    ),
)


def value_words(raw: str) -> list[str]:
    """``raw``'s words, lower case: split at every character that is not an ASCII letter or
    digit, and where a lower-case letter or digit is followed by an upper-case one
    (``maxTokens``). ASCII only, as the Lua copy reads bytes."""
    words: list[str] = []
    word: list[str] = []
    prev = ""
    for ch in raw:
        if not (ch.isascii() and ch.isalnum()):
            if word:
                words.append("".join(word))
                word = []
        else:
            if ch.isupper() and (prev.islower() or prev.isdigit()) and word:
                words.append("".join(word))
                word = []
            word.append(ch.lower())
        prev = ch
    if word:
        words.append("".join(word))
    return words


def _progress_words(words: list[str]) -> bool:
    return "".join(words) in PROGRESS or any(w in PROGRESS_WORDS for w in words)


def is_progress(raw: str) -> bool:
    """Whether ``raw`` says the answer goes on (``""``, ``null``, ``in_progress``,
    ``not_finished``, ``ALTERNATIVE_STATUS_PARTIAL``...)."""
    return len(raw) <= MAX_VALUE and _progress_words(value_words(raw))


def finish_meaning(raw: str) -> FinishMeaning | None:
    """What the finish value ``raw`` means (see the module doc), or ``None``: a progress value,
    a value too long to read, or one whose words name none of the meanings."""
    if len(raw) > MAX_VALUE:
        return None
    words = value_words(raw)
    joined = "".join(words)
    if _progress_words(words) or any(w in NO_MEANING for w in words):
        return None
    for meaning, stems, exact, whole in MEANING_WORDS:
        if joined in whole:
            return meaning
        for w in words:
            if w in exact or w.startswith(stems):
                return meaning
    return None
