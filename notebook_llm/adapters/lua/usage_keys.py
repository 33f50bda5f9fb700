"""The keys a unified chunk's ``usage`` (or a response's ``token_usage``) may use.

The contract names the counts ``{prompt, completion, total, cache_read, cache_write,
reasoning_tokens}`` (``cache_miss`` is accepted and ignored: it is part of ``prompt``). A script
that passes a provider's usage object on as it is (``usage = c.usage``) writes OpenAI's or
Anthropic's names instead; those are accepted too, as the same counts, so no count is dropped
without a word. Any other key is ignored by the runtime, and the conformance kit names it in a
warning (:func:`unknown_usage_keys`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["USAGE_ALIASES", "USAGE_FIELDS", "unknown_usage_keys", "usage_field"]

#: The contract's own usage keys.
USAGE_FIELDS = ("prompt", "completion", "total", "cache_read", "cache_write", "reasoning_tokens")

#: Other names of the same counts, accepted as they are: OpenAI's (``prompt_tokens``...) and
#: Anthropic's (``input_tokens``...).
USAGE_ALIASES: dict[str, str] = {
    "prompt_tokens": "prompt",
    "input_tokens": "prompt",
    "completion_tokens": "completion",
    "output_tokens": "completion",
    "total_tokens": "total",
    "cache_read_input_tokens": "cache_read",
    "cached_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}

#: Keys accepted and ignored on purpose (part of another count, or not a count).
_IGNORED = frozenset({"cache_miss"})


def usage_field(key: str) -> str | None:
    """The contract's usage field ``key`` stands for, or ``None`` if it is not a usage key."""
    if key in USAGE_FIELDS:
        return key
    return USAGE_ALIASES.get(key)


def unknown_usage_keys(frame: Mapping[str, Any]) -> list[str]:
    """The keys of a usage frame that the runtime ignores (neither a contract key, an accepted
    alias nor ``cache_miss``), in their order."""
    return [str(k) for k in frame if usage_field(str(k)) is None and str(k) not in _IGNORED]
