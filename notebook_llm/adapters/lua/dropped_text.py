"""Text the provider sent that the adapter mapped to nothing: the witness behind that failure.

A script that reads ``c.token`` where the API sends ``c.tok`` breaks none of the stream rules:
it maps every payload to an empty chunk and the answer ends ``stop`` with no blocks, which the
cell would show as an empty answer. :class:`DroppedText` watches the raw payloads of a response
while the adapter has produced no block yet, and remembers the string-valued field paths that
look like answer text (``choices[0].delta.tok``). When the answer ends with no block and no
error, :meth:`DroppedText.failure` turns what it saw into one ``ADAPTER_ERROR`` naming the field
that held the most text, so the cell, ``%adapter test`` and ``check-adapter`` all fail.

What counts as text (a heuristic, tuned to miss rather than to accuse a correct script):

* a non-blank string under a key that carries content in the provider APIs (``content``,
  ``text``, ``reasoning``, ``thinking``, ``partial_json``, ``arguments``, ``response``, ...);
* or, under any other key, a field whose values joined over the payloads have two words (a
  letter, whitespace, a letter): streamed pieces ``"Hello"``, ``" world"`` join to text, while a
  repeated ``id``, ``model``, ``object`` or timestamp never holds a space;
* never the fields that describe the request or the response rather than answer it
  (``_NOT_ANSWER``: ``id``, ``model``, ``role``, ``type``, ``instructions``, ``description``, ...),
  nor anything under ``usage`` or ``error``.

It costs nothing on a working adapter: the pipeline feeds it only the reads after which no block
was open yet, normally none.
"""

from __future__ import annotations

import json
from typing import Any

from ...core.errors import ErrorCode, LlmError
from ...core.protocol import BlockStart, Event, Finish
from ...core.redaction import redact

__all__ = ["CONTENT_KEYS", "DroppedText", "has_block", "has_two_words", "judge_events"]

#: Keys whose non-blank string is answer content (text, reasoning, tool-call arguments),
#: whatever the API: OpenAI/Mistral/Groq ``content``, ``reasoning``, ``arguments``; Anthropic
#: ``text``, ``thinking``, ``partial_json``; Gemini ``text``; Ollama ``content``, ``thinking``,
#: ``response``. The conformance kit's payload warnings read the same set.
CONTENT_KEYS = frozenset(
    {
        "content",
        "text",
        "reasoning",
        "reasoning_content",
        "thinking",
        "partial_json",
        "arguments",
        "response",
    }
)
#: Keys whose value describes the request or the response, never answers it.
_NOT_ANSWER = frozenset(
    {
        "id",
        "object",
        "model",
        "modelVersion",
        "role",
        "type",
        "name",
        "created",
        "created_at",
        "createdAt",
        "finish_reason",
        "finishReason",
        "stop_reason",
        "done_reason",
        "stop_sequence",
        "status",
        "service_tier",
        "system_fingerprint",
        "responseId",
        "instructions",
        "description",
        "system",
        "prompt",
        "input",
        "metadata",
        "user",
        "usage",
        "usageMetadata",
        "error",
        "obfuscation",
        "signature",
        "logprobs",
        # OpenAI's refusal text: no built-in adapter maps it yet, and a refusal-only answer is
        # the model's, not a script's mistake to report
        "refusal",
    }
)
_MAX_DEPTH = 24
_MAX_PAYLOADS = 2000  # past this many payloads with nothing mapped, the verdict is settled


class DroppedText:
    """Field paths of a response's payloads that held answer-like text (see the module doc)."""

    def __init__(self) -> None:
        self._joined: dict[str, list[str]] = {}
        self._content_key: dict[str, bool] = {}
        self._seen = 0

    def feed_payloads(self, payloads: list[str]) -> None:
        """Payload texts as the hook got them (JSON; ``[DONE]`` and non-JSON are ignored)."""
        for text in payloads:
            if self._seen >= _MAX_PAYLOADS:
                return
            self._seen += 1
            try:
                value = json.loads(text)
            except ValueError:
                continue
            self.feed_value(value)

    def feed_value(self, value: Any, path: str = "", key: str = "", depth: int = 0) -> None:
        """One decoded payload (or a whole body)."""
        if depth > _MAX_DEPTH or key in _NOT_ANSWER:
            return
        if isinstance(value, str):
            if value.strip():
                self._joined.setdefault(path, []).append(value)
                self._content_key[path] = key in CONTENT_KEYS
        elif isinstance(value, dict):
            for k, v in value.items():
                k = str(k)
                self.feed_value(v, f"{path}.{k}" if path else k, k, depth + 1)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.feed_value(v, f"{path}[{i}]", key, depth + 1)

    def best(self) -> tuple[str, str] | None:
        """``(path, text)`` of the field that held the most answer-like text, or ``None``."""
        found: list[tuple[int, str, str]] = []
        for path, pieces in self._joined.items():
            joined = "".join(pieces)
            if self._content_key[path] or has_two_words(joined):
                found.append((len(joined), path, joined))
        if not found:
            return None
        _, path, joined = max(found, key=lambda f: (f[0], f[1]))
        return path, joined

    def failure(self, hook: str, *, provider: str | None, adapter: str | None) -> LlmError | None:
        """The error for an answer that ended with no block although payloads held text."""
        best = self.best()
        if best is None:
            return None
        path, joined = best
        sample = redact(joined.strip()[:40]) + ("…" if len(joined.strip()) > 40 else "")
        return LlmError(
            f"the response carried text in `{path}` ({sample!r}) but {hook} mapped none of it "
            "to text, reasoning or tool calls: does the script read a field this API does not "
            "send?",
            ErrorCode.ADAPTER_ERROR,
            provider=provider,
            adapter=adapter,
            hook=hook,
            details={"field": path},
        )


def has_two_words(text: str) -> bool:
    """Whether ``text`` holds two words: a letter, then a gap of characters that are neither
    letters nor digits holding white space (and no ``_`` after its last white space), then a
    letter. What the regex ``[^\\W\\d_][\\W_]*\\s+\\W*[^\\W\\d_]`` finds, in one pass:
    that regex backtracked cubically on a long run of spaces, and the text is the server's."""
    letter_before = False  # the last letter-or-digit was a letter
    space = False  # the gap since it holds white space...
    underscore = False  # ...and a "_" after its last white space
    for ch in text:
        if ch.isalnum():
            is_letter = not ch.isdecimal()
            if is_letter and letter_before and space and not underscore:
                return True
            letter_before, space, underscore = is_letter, False, False
        elif ch.isspace():
            space, underscore = True, False
        elif ch == "_":
            underscore = True
    return False


def judge_events(
    events: list[Event],
    witness: DroppedText,
    hook: str,
    *,
    provider: str | None,
    adapter: str | None,
) -> None:
    """Replace a non-error ``finish`` in ``events`` (an answer with no block) by the witness's
    failure, if it saw text. ``events`` is changed in place."""
    for i, event in enumerate(events):
        if isinstance(event, Finish) and event.reason.kind not in ("error", "aborted"):
            err = witness.failure(hook, provider=provider, adapter=adapter)
            if err is not None:
                events[i] = Finish.error(err)
            return


def has_block(events: list[Event]) -> bool:
    """Whether any block was opened among ``events``."""
    return any(isinstance(e, BlockStart) for e in events)
