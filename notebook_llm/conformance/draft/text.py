"""Where a body keeps its answer text and its reasoning: candidates, read from structure.

Every string path of a body is a candidate. Its values are joined in payload order (values that
each extend the one before are *cumulative*: whole texts so far, turned into deltas) and scored
by how much the result reads like prose (letters and spaces, length), times a prior on the key's
name. Two things split a path in two:

* a *marker* on the object holding the string, present only sometimes (Gemini's
  ``thought: true``, a ``type: "thinking"``): the marked strings are reasoning;
* the *payload kind* (the ``type`` an event-typed stream names every payload with): OpenAI's
  Responses API sends text, reasoning and tool-call arguments all as ``delta``, told apart only
  by the event's ``type``; so in such a stream a candidate is read from payloads of its kind
  only (another kind reusing the field cannot leak into the text).

A candidate is reasoning when it is marked, named (``thinking``, ``reasoning_content``) or sent
under a kind that says so. Strings whose join is JSON (streamed tool-call arguments) are not
text: :mod:`.tools` takes them as argument fragments.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ...adapters.lua.finish_vocabulary import finish_meaning, is_progress
from .lua_text import Path, show_path
from .names import DISCRIMINATORS, NOT_TEXT, TEXT_NAMES, key_words, norm, reasoning_word
from .paths import BodyIndex, last_key

__all__ = [
    "Candidate",
    "Cond",
    "PayloadKinds",
    "payload_kinds",
    "prose_score",
    "same_text",
    "text_candidates",
]


@dataclass(frozen=True)
class Cond:
    """A condition on a value: ``holder[key] == value`` (the object holding it) or, with
    ``on_payload``, ``payload[key] == value`` (the payload's kind); ``negate`` for ``~=``."""

    key: str
    value: str | bool
    negate: bool = False
    on_payload: bool = False

    def show(self) -> str:
        op = "~=" if self.negate else "=="
        where = "the payload's " if self.on_payload else ""
        return f"{where}{self.key} {op} {self.value!r}"


@dataclass
class Candidate:
    """A place where answer text may be: its path, condition, and what it joins to."""

    path: Path
    cond: Cond | None = None
    cumulative: bool = False
    text: str = ""
    score: float = 0.0
    payloads: int = 0
    reasoning_like: bool = False
    #: The join parses as JSON: streamed arguments, not text.
    jsonish: bool = False
    #: No text in the body: an empty or null field named like text, taken as a guess.
    guessed: bool = False
    #: Added after each value: the payloads are bare words with no space anywhere.
    separator: str = ""
    #: The values look like whole texts so far, but some rewrite the one before.
    revised: bool = False
    #: In how many of the draft's bodies this candidate was found.
    bodies: int = 1
    #: The text is each payload that is not JSON, whole (plain ``data:`` lines).
    raw: bool = False
    #: One value only: whether they are pieces or whole texts so far cannot be told, so the
    #: draft decides on the stream's second value (``draft.cumulative(true)``).
    undecided: bool = False

    @property
    def key(self) -> tuple[Path, Cond | None]:
        return (self.path, self.cond)

    def show(self) -> str:
        if self.raw:
            return "(each payload that is not JSON)"
        where = show_path(self.path)
        return where + (f" where {self.cond.show()}" if self.cond else "")


@dataclass
class PayloadKinds:
    """The key every payload names its kind with (``type``), and each payload's kind."""

    key: str
    by_payload: dict[int, str]

    @property
    def last(self) -> str | None:
        return self.by_payload[max(self.by_payload)] if self.by_payload else None


#: The most keys of an object read for a reasoning marker (a part or a block has a handful).
_MARKER_KEYS = 16
#: Candidates kept per body, the best: an API has a few; the rest would only cost time.
MAX_CANDIDATES = 64

#: Words of a key that holds a status, not a payload kind.
_STATUS_WORDS = frozenset({"status", "state", "finish", "reason", "stop", "done", "end"})
#: Words of a key that holds a time, an id or a name: values that repeat by chance (a
#: timestamp to the second), never a payload kind.
_NOT_KIND_WORDS = frozenset(
    {"at", "time", "date", "created", "updated", "timestamp", "ts", "id", "model", "name"}
)


def _kind_like(value: str) -> bool:
    """A payload kind is a word or a few (``content-delta``, ``response.output_text.delta``):
    letters, at most two digits (a time, an id or a counter has more)."""
    return any(ch.isalpha() for ch in value) and sum(ch.isdigit() for ch in value) <= 2


def payload_kinds(index: BodyIndex) -> PayloadKinds | None:
    """The payloads' discriminator: a top-level key holding a short word-like string in (nearly)
    every payload, with at least two values that repeat (``type``, ``event``, ``kind``...)."""
    roots = [(pos, v) for pos, v in index.roots.items() if isinstance(v, dict)]
    if len(roots) < 2:
        return None
    seen: dict[str, dict[int, str]] = {}
    for pos, root in roots:
        for k, v in root.items():
            if isinstance(v, str) and 0 < len(v) <= 80 and " " not in v:
                seen.setdefault(str(k), {})[pos] = v
    best: tuple[int, int, str] | None = None
    for key, values in seen.items():
        distinct = len(set(values.values()))
        if len(values) * 10 < len(roots) * 8 or distinct < 2:
            continue
        named = norm(key) in DISCRIMINATORS
        # a key named like a kind may take many values (an event-typed stream has dozens of
        # event types); an unnamed one needs values that repeat, and at least three of them
        # (two may be a status: generating, done)
        if not named and (
            distinct < 3
            or distinct > min(40, len(values) // 2 + 1)
            or set(key_words(key)) & (_STATUS_WORDS | _NOT_KIND_WORDS)
            or not all(_kind_like(v) for v in set(values.values()))
        ):
            continue
        rank = (int(named), len(values), key)
        if best is None or rank > best:
            best = rank
    if best is None:
        return None
    return PayloadKinds(best[2], seen[best[2]])


def prose_score(text: str) -> float:
    """How much ``text`` reads like an answer: long, mostly letters, with spaces between words
    (or CJK characters, which have none). Identifiers, base64 and numbers score near 0."""
    n = len(text)
    if n == 0:
        return 0.0
    letters = spaces = cjk = 0
    for ch in text:
        if ch.isspace():
            spaces += 1
        elif ch.isalpha():
            letters += 1
            if ord(ch) >= 0x2E80:
                cjk += 1
    alpha = (letters + spaces) / n
    wordy = max(min(1.0, spaces / n / 0.08), cjk / n)
    return n * alpha * max(wordy, 0.02)


def same_text(a: str, b: str) -> bool:
    """Whether two joined texts are the same answer (one sent piece by piece, the other whole
    at the end, as TGI's ``generated_text`` or a final summary payload)."""
    a, b = a.strip(), b.strip()
    if not a or not b:
        return False
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return len(short) * 10 >= len(long_) * 9 and short in long_


#: Words of a path that say its values are pieces of the text, not the whole text so far.
_PIECE_WORDS = frozenset({"delta", "deltas", "chunk", "token", "piece", "fragment", "increment"})


def _is_cumulative(values: list[str]) -> bool:
    vals = [v for v in values if v]
    if len(vals) < 2:
        return False
    if len(set(vals)) == 1 and len(vals[0]) >= 4:
        return True  # the whole text, then repeated whole with the finish: nothing was new
    grew = False
    for a, b in itertools.pairwise(vals):
        if not b.startswith(a):
            return False
        grew = grew or len(b) > len(a)
    return grew


def _word(value: str) -> bool:
    """One word: letters, maybe with punctuation around them (``WORLD.``), no digit, no white
    space, and no character of a script written without spaces (CJK: a token stream of such
    text has no spaces either and must not get any)."""
    core = value.strip(".,;:!?\"'()")
    return 0 < len(core) <= 40 and all(ch.isalpha() and ord(ch) < 0x2E80 for ch in core)


def _bare_words(values: list[str]) -> bool:
    """Payloads that are each one word with no space anywhere (``HELLO``, ``WORLD.``): an API
    that streams words, not text, so the words need a space between them. Real token streams
    carry their spaces (``" world"``), so they never look like this for long."""
    vals = [v for v in values if v]
    return len(vals) >= 2 and all(_word(v) for v in vals)


def _revised(values: list[str]) -> bool:
    """Values that mostly extend the one before but not always: whole texts so far that the
    API sometimes rewrites. The stream protocol only appends, so the reader is told."""
    vals = [v for v in values if v]
    pairs = [(a, b) for a, b in itertools.pairwise(vals) if a != b]
    grew = sum(1 for a, b in pairs if b.startswith(a))
    return 2 <= grew < len(pairs) and grew * 2 > len(pairs)


def _deltas(values: list[str]) -> str:
    out: list[str] = []
    prev = ""
    for v in values:
        out.append(v[len(prev) :] if v.startswith(prev) else v)
        prev = v
    return "".join(out)


def _jsonish(text: str) -> bool:
    t = text.strip()
    if not t or t[0] not in "{[":
        return False
    try:
        json.loads(t)
    except ValueError:
        # pieces of several calls' arguments joined: still JSON-looking text
        return t.count('":') >= 1 and t.count(" ") * 4 < len(t)
    return True


def _marker(holder: dict[str, Any] | None, leaf: str) -> Cond | None:
    """A reasoning marker on the object holding a string: ``thought: true``, ``type: "thinking"``.
    Only a small object carries one (a part, a block): a wide one is not read key by key for
    each of its strings, which would cost the square of its width."""
    if not holder or len(holder) > _MARKER_KEYS:
        return None
    for k, v in holder.items():
        if k == leaf:
            continue
        if v is True and reasoning_word(k):
            return Cond(k, True)
        if isinstance(v, str) and norm(k) in DISCRIMINATORS and reasoning_word(v):
            return Cond(k, v)
    return None


def _name_prior(path: Path) -> float:
    key = norm(last_key(path))
    return 2.0 if key in TEXT_NAMES or reasoning_word(key) else 1.0


def _skip_path(path: Path) -> bool:
    key = norm(last_key(path))
    if not path or key in NOT_TEXT or key.endswith("id") or key.endswith("reason"):
        return True
    # an error's message is not the answer
    return any(isinstance(s, str) and norm(s) in ("error", "errors") for s in path)


def _groups(
    occs: list[tuple[int, str, dict[str, Any] | None]],
    leaf: str,
    kinds: PayloadKinds | None,
) -> list[tuple[Cond | None, list[tuple[int, str]], bool]]:
    """The occurrences of one path, split by a reasoning marker or by the payload's kind (a
    marker that is the payload's kind itself is left to the kind split)."""
    found = [_marker(h, leaf) for _, _, h in occs]
    if kinds is not None:
        found = [None if m is not None and m.key == kinds.key else m for m in found]
    markers = Counter(m for m in found if m is not None)
    if markers and sum(markers.values()) < len(occs):
        top = markers.most_common(1)[0][0]
        inside = [(p, v) for (p, v, _), m in zip(occs, found, strict=True) if m == top]
        outside = [(p, v) for (p, v, _), m in zip(occs, found, strict=True) if m != top]
        return [(top, inside, True), (Cond(top.key, top.value, negate=True), outside, False)]
    items = [(p, v) for p, v, _ in occs]
    if kinds is not None:
        by_kind: dict[str, list[tuple[int, str]]] = {}
        for p, v in items:
            if v.strip():
                by_kind.setdefault(kinds.by_payload.get(p, ""), []).append((p, v))
        # each kind its own candidate; text of one kind only is read from that kind only, so
        # that another kind reusing the field (arguments as `delta`) cannot leak into it
        if by_kind and "" not in by_kind:
            return [
                (Cond(kinds.key, kind, on_payload=True), group, reasoning_word(kind))
                for kind, group in by_kind.items()
            ]
    return [(None, items, bool(markers))]


def _not_prose(values: list[str]) -> bool:
    """Values that are hardly answer text whatever their path: each a finish or progress word
    (``natural``, ``MAX``, ``in_progress``: a status set beside the text) or a link."""
    vals = [v for v in values if v.strip()]
    if not vals:
        return False
    if all(v.startswith(("http://", "https://", "data:")) and " " not in v for v in vals):
        return True
    return all(
        len(v) <= 40 and " " not in v.strip() and (finish_meaning(v) or is_progress(v))
        for v in vals
    )


def _status_holder(holder: dict[str, Any] | None) -> bool:
    """An object that reports a status (``{code: 0, message: "Success"}``): its strings are
    the status's words, not the answer."""
    return bool(holder) and isinstance(holder, dict) and "code" in holder and len(holder) <= 8


def text_candidates(
    index: BodyIndex, kinds: PayloadKinds | None, excluded: set[int]
) -> list[Candidate]:
    """Every place of ``index`` that may hold text or reasoning, best first; paths under an
    ``excluded`` path id (tool-call arguments) are left out."""
    out: list[Candidate] = []
    for pid, occs in index.strings.items():
        if any(p in excluded for p in index.table.prefixes(pid)):
            continue
        path = index.path(pid)
        if _skip_path(path):
            continue
        values = [v for _, v, _ in occs]
        payloads = len({p for p, _, _ in occs})
        if (
            payloads >= 2
            and len(set(values)) <= 1
            and (payloads >= 3 or norm(last_key(path)) not in TEXT_NAMES)
        ):
            continue  # the same value on every payload: metadata (a model name, a role)
        # a status word or a link is rarely the answer: it loses to any other candidate (but an
        # answer that is one such word, "Done.", is still found when nothing else is there)
        penalty = 0.05 if _not_prose(values) else 1.0
        status = all(_status_holder(h) for _, _, h in occs)
        for cond, items, marked in _groups(occs, last_key(path), kinds):
            cand = _candidate(path, cond, items, marked)
            if cand is not None:
                cand.score *= penalty * (0.25 if status else 1.0)
                out.append(cand)
    out.sort(key=lambda c: (-c.score, -c.payloads, show_path(c.path)))
    return out[:MAX_CANDIDATES]


def _candidate(
    path: Path, cond: Cond | None, items: list[tuple[int, str]], marked: bool
) -> Candidate | None:
    per_payload: dict[int, str] = {}
    for p, v in items:
        per_payload[p] = per_payload.get(p, "") + v
    seq = [per_payload[k] for k in sorted(per_payload)]
    cumulative = _is_cumulative(seq)
    revised = not cumulative and _revised(seq)
    separator = " " if not cumulative and _bare_words(seq) else ""
    text = _deltas(seq) if cumulative else separator.join(seq) + separator
    if not text.strip():
        return None
    # one value: pieces or whole texts so far? A path named like a piece (delta, chunk,
    # token) says pieces; else the stream's second value decides (in the draft)
    undecided = len([v for v in seq if v]) == 1 and not _PIECE_WORDS & {
        w for s in path if isinstance(s, str) for w in key_words(s)
    }
    reasoning_like = marked or any(isinstance(s, str) and reasoning_word(s) for s in path)
    return Candidate(
        path,
        cond,
        cumulative,
        text,
        prose_score(text) * _name_prior(path),
        len(per_payload),
        reasoning_like,
        jsonish=_jsonish(text),
        separator=separator,
        revised=revised,
        undecided=undecided,
    )


_EMPTY_TEXT_NAMES = ("content", "text", "response", "output", "answer")


def empty_text(index: BodyIndex, excluded: set[int]) -> Candidate | None:
    """No string reads as text: the first empty or null field named like text (a guess)."""
    pids = [p for p, occs in index.strings.items() if not any(v for _, v, _ in occs)]
    pids += list(index.nulls)
    for name in _EMPTY_TEXT_NAMES:
        for pid in pids:
            path = index.path(pid)
            if norm(last_key(path)) != name or any(
                p in excluded for p in index.table.prefixes(pid)
            ):
                continue
            if any(isinstance(s, str) and reasoning_word(s) for s in path):
                continue
            return Candidate(path, guessed=True)
    return None
