"""Token counts: integers that appear once per answer, paired as input and output.

A body reports its token counts as integers that come *once per answer*: in the final payload(s)
of a stream, in the whole of a non-stream body, or repeated with a growing value (a running
count whose last value is the answer's). Which is the input and which the output is read from
the words of the key and of the objects above it, as evidence, not from a closed list of names:

========================  ==================================================================
input                     prompt, input, in, question, prefill, context, request, sent,
                          query, source, evaluated (``prompt_tokens``, ``n_in``,
                          ``tokens.in``, ``billing.in_tokens``, ``inputTokenCount``)
output                    completion, output, out, generated, generation, gen, candidates,
                          response, answer, decode(d), predicted, sampled, received, new,
                          eval (``eval_count``, ``generation_token_count``, ``n_out``)
total / cache / reasoning total, sum; cache(d) read/hit, creation/write; reasoning, thought(s)
========================  ==================================================================

A count must look like one: a non-negative integer below 10^8 (not a timestamp), under a key
that is not an index, a time or a code, and either named as a count (``token``, ``count``,
``units``, ``n``) or held by an object named like usage (``usage``, ``tokens``, ``billing``,
``metrics``, ``stats``...). When names say nothing, two such integers set once in the final
payload are taken as input then output, in their order: a guess the report says is one.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .lua_text import Path, show_path
from .names import key_words
from .paths import BodyIndex

__all__ = ["ROLES", "Role", "UsageFound", "UsagePath", "find_usage", "usage_role"]

Role = Literal["prompt", "completion", "total", "cache_read", "cache_write", "reasoning_tokens"]
ROLES: tuple[Role, ...] = (
    "prompt",
    "completion",
    "total",
    "cache_read",
    "cache_write",
    "reasoning_tokens",
)
Confidence = Literal["sure", "likely", "guess"]

#: Role words, strongest first (``prompt_tokens`` wins over ``question_tokens``).
_INPUT = (
    "prompt",
    "input",
    "inputs",
    "in",
    "request",
    "req",
    "sent",
    "query",
    "context",
    "source",
    "src",
    "evaluated",
    "processed",
    "prefill",
    "question",
    "read",
)
_OUTPUT = (
    "completion",
    "completions",
    "output",
    "outputs",
    "out",
    "generated",
    "generation",
    "gen",
    "candidates",
    "candidate",
    "response",
    "resp",
    "answer",
    "reply",
    "decode",
    "decoded",
    "predicted",
    "sampled",
    "received",
    "new",
    "eval",
    "written",
)
_TOTAL = frozenset({"total", "sum", "all"})
_REASONING = frozenset({"reasoning", "thought", "thoughts", "thinking"})
_CACHE = frozenset({"cache", "cached"})
_CACHE_WRITE = frozenset({"creation", "create", "created", "write", "written"})
#: Words of a key that say it is a count.
_COUNT = frozenset({"token", "tokens", "tok", "toks", "count", "counts", "units", "n", "num"})
#: Words of an enclosing object that say its integers are token counts.
_USAGE_OBJECT = frozenset(
    {
        "usage",
        "tokens",
        "token",
        "billing",
        "billed",
        "meter",
        "metered",
        "metrics",
        "stats",
        "statistics",
        "counts",
        "consumption",
        "consumed",
        "cost",
        "accounting",
    }
)
#: Words of a key that say it is not a count.
_NOT_COUNT = frozenset(
    {
        "index",
        "idx",
        "seq",
        "sequence",
        "id",
        "created",
        "time",
        "timestamp",
        "ts",
        "ms",
        "ns",
        "us",
        "sec",
        "secs",
        "seconds",
        "duration",
        "latency",
        "elapsed",
        "status",
        "code",
        "version",
        "choice",
        "position",
        "pos",
        "offset",
        "line",
        "port",
        "seed",
        "bytes",
        "size",
        "logprob",
        "logprobs",
        "rank",
        "top",
        "per",
        "rate",
        "second",
        "temperature",
        "audio",
        "image",
        "images",
        "miss",
        "ephemeral",
        "max",
        "limit",
        "remaining",
        "retry",
        "attempt",
        "step",
        "steps",
        "page",
    }
)


def usage_role(path: Path) -> tuple[Role | None, bool]:
    """The role the names give the integer at ``path`` (``None``: they give none), and whether
    they say it is a token count (a count word in the key, or an enclosing object named like
    usage). A key that names something else (an index, a time, a code) has neither."""
    steps = [s for s in path if isinstance(s, str)]
    if not steps:
        return None, False
    leaf = key_words(steps[-1])
    above = [w for s in steps[:-1] for w in key_words(s)]
    if not leaf or any(w in _NOT_COUNT for w in leaf):
        return None, False
    # "n" alone is a count of anything (choices, retries); "n_in" is a count of input
    counted = (leaf != ["n"] and any(w in _COUNT for w in leaf)) or any(
        w in _USAGE_OBJECT for w in above
    )
    details = any("details" in w for w in above)
    for words in (leaf, key_words(steps[-2]) if len(steps) > 1 else []):
        role = _role_of(words)
        if role is not None:
            if details and role not in ("reasoning_tokens", "cache_read", "cache_write"):
                return None, False  # a breakdown of another count (audio, accepted predictions)
            return role, counted
    return None, counted and not details


def _role_of(words: list[str]) -> Role | None:
    ws = set(words)
    if ws & _CACHE:
        if ws & _CACHE_WRITE:
            return "cache_write"
        return "cache_read"
    if ws & _REASONING:
        return "reasoning_tokens"
    if ws & _TOTAL and not ws & set(_INPUT + _OUTPUT):
        return "total"  # a total of the input or of the output (Titan's
        # totalOutputTextTokenCount) is that count, below
    if ws & set(_INPUT):
        return "prompt"
    if ws & set(_OUTPUT):
        return "completion"
    return None


def word_rank(path: Path) -> int:
    """How strongly the key's words name its role: the position of its best role word
    (``prompt`` 0, ``question`` 14); for ranking two fields of one role."""
    words = key_words(str(path[-1])) if path else []
    ranks = [lst.index(w) for lst in (_INPUT, _OUTPUT) for w in words if w in lst]
    return min(ranks, default=99)


@dataclass
class UsagePath:
    """One integer field mapped to a usage role, with what the mapping rests on."""

    path: Path
    role: Role
    confidence: Confidence
    basis: str
    #: The last value seen (for the report).
    value: int = 0


@dataclass
class UsageFound:
    """The usage fields of one body (or of several, merged): role -> paths, best first."""

    roles: dict[Role, list[UsagePath]] = field(default_factory=dict)

    def add(self, found: UsagePath) -> None:
        paths = self.roles.setdefault(found.role, [])
        if all(p.path != found.path for p in paths):
            paths.append(found)
            paths.sort(key=lambda p: word_rank(p.path))

    def mapped(self) -> list[Role]:
        """The roles the draft reads, in the contract's order."""
        return [r for r in ROLES if self.roles.get(r)]

    def show(self) -> str:
        parts = [
            f"{role} <- {show_path(p.path)}" for role in self.mapped() for p in self.roles[role][:1]
        ]
        return ", ".join(parts)


def _once_per_answer(occs: list[tuple[int, int]], final_from: int, stream: bool) -> str | None:
    """Why these occurrences are a per-answer count (``None``: they are not one): set in the
    final payloads only, set once, or a running count that only grows."""
    if not stream:
        return "in the body"
    positions = [p for p, _ in occs]
    values = [v for _, v in occs]
    if min(positions) >= final_from:
        return "set at the end"
    if len(set(positions)) <= 2:
        return "set once per answer"
    if all(a <= b for a, b in itertools.pairwise(values)):
        return "a running count (the last value is the answer's)"
    return None


def find_usage(index: BodyIndex, final_from: int, stream: bool) -> UsageFound:
    """The usage fields of one body. ``final_from``: the first payload position that counts
    as the end of the answer (the last one with content)."""
    found = UsageFound()
    groups: dict[Path, list[tuple[Path, int]]] = {}
    for pid, occs in index.ints.items():
        path = index.path(pid)
        if not index.single(pid):
            continue  # counts are never per element of a list (a list of one is the answer's)
        values = [v for _, v in occs]
        if min(values) < 0 or max(values) >= 10**8:
            continue
        role, counted = usage_role(path)
        named = "named" if _role_of(key_words(str(path[-1]))) else "named by its object"
        why = _once_per_answer(occs, final_from, stream)
        if role is not None and counted:
            # a count named as one may be repeated on every payload: the last value is the
            # answer's (the runtime merges usage frames field by field, the later one winning)
            why = why or "reported on several payloads (the last value is the answer's)"
            found.add(UsagePath(path, role, "sure", f"{named} as a count, {why}", values[-1]))
            continue
        if why is None:
            continue
        if role is not None and (why != "a running count (the last value is the answer's)"):
            found.add(UsagePath(path, role, "likely", f"{named}, {why}", values[-1]))
        elif role is None and (counted or why == "set at the end" or not stream):
            groups.setdefault(path[:-1], []).append((path, values[-1]))
    for pid, socc in index.strings.items():
        path = index.path(pid)
        counts = _digit_counts(socc)
        if counts is None or not index.single(pid):
            continue
        role, counted = usage_role(path)
        if role is not None and counted:  # a count sent as a string: only when named as one
            basis = "named as a count, sent as a string of digits"
            found.add(UsagePath(path, role, "sure", basis, counts[-1]))
    if "prompt" not in found.roles and "completion" not in found.roles:
        _pair_by_order(found, groups)
    return found


def _digit_counts(occs: Sequence[tuple[int, str, object]]) -> list[int] | None:
    """The values of a string field when every one is a count written in digits (``"27"``,
    at most 8 of them, as an integer count is below 10^8); else ``None``."""
    out = []
    for _, v, _ in occs:
        if not (0 < len(v) <= 8 and v.isascii() and v.isdigit()):
            return None
        out.append(int(v))
    return out


def _pair_by_order(found: UsageFound, groups: dict[Path, list[tuple[Path, int]]]) -> None:
    """No named count: two integers of one object set once at the end, taken as input then
    output (a guess)."""
    for parent, members in groups.items():
        usable = [
            (p, v) for p, v in members if not any(w in _NOT_COUNT for w in key_words(str(p[-1])))
        ]
        if len(usable) != 2:
            continue
        where = show_path(parent) if parent else "the payload"
        (first, v1), (second, v2) = usable
        basis = f"two unnamed integers of {where}, set once at the end: input then output by order"
        found.add(UsagePath(first, "prompt", "guess", basis, v1))
        found.add(UsagePath(second, "completion", "guess", basis, v2))
        return
