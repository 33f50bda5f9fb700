"""How an answer ends: the finish field, and what marks the last payload of a stream.

**The finish field** is found by its behaviour: in a stream, a short word-like string that is
empty (absent, null, or a progress value such as ``in_progress``) while content still comes and
set at the end; in a non-stream body, a status field of the whole body. Its name (``reason``,
``finish``, ``stop``, ``status``, ``state``, ``end``, ``done``...) and whether its value has a
meaning in the vocabulary of finish meanings (:mod:`notebook_llm.adapters.lua.finish_vocabulary`)
are the evidence that tells it from an id or a model name set in the last payload. Its values
are then mapped by meaning, so a value first seen in another body (``length`` after ``stop``)
still maps.

**The end of a stream**, in order: ``[DONE]``; another non-JSON last payload; a flag that turns
true on the last payload (``done``, ``is_end``, any boolean); the payload kind only the last
payload has (``message_stop``, ``response.completed``), with its *alternatives* (the same
prefix and a word of the vocabulary: ``response.incomplete``, ``response.failed``); a scalar
only the last payload has (an integer ``status: 2``); the finish field itself; a key only the
last payload has; else nothing (the end of the body; a TODO).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ...adapters.lua.finish_vocabulary import FinishMeaning, finish_meaning, is_progress
from .framing import Body
from .lua_text import EACH, Path, show_path
from .names import DISCRIMINATORS, key_words, norm
from .paths import BodyIndex, last_key
from .text import PayloadKinds

__all__ = ["EndSpec", "FinishField", "end_family", "find_end", "find_finish"]

Confidence = Literal["sure", "likely", "guess"]

#: Words of a key that say it holds how the answer ended.
_FINISH_WORDS = frozenset(
    {"finish", "reason", "stop", "status", "state", "end", "done", "termination", "outcome"}
)
#: Words of a flag that says the answer is complete (``done``, ``is_end``, ``isFinal``).
_DONE_WORDS = frozenset(
    {"done", "final", "finished", "complete", "completed", "end", "last", "stop", "eos", "over"}
)
#: Keys whose strings are never a finish (an id, a name, a role, the answer itself).
_NOT_FINISH = frozenset(
    {
        "id",
        "model",
        "role",
        "name",
        "object",
        "url",
        "uri",
        "version",
        "signature",
        "stopsequence",
        "finishmessage",
        "message",
        "description",
        "text",
        "content",
        "servicetier",
        "language",
        "lang",
        "mimetype",
        "systemfingerprint",
    }
)


@dataclass
class FinishField:
    """A field that says how the answer ended, with the values seen."""

    path: Path
    confidence: Confidence
    basis: str
    #: Values set at the end of the answer, in order, each once.
    values: list[str] = field(default_factory=list)
    #: Values seen while content still came (not finishes).
    progress: list[str] = field(default_factory=list)
    score: float = 0.0
    #: Set on the last payload of a body (a status of the whole answer, not of one of its
    #: parts: the Responses API's ``item.status`` completes before the answer does).
    at_end: bool = False

    def meanings(self) -> dict[str, FinishMeaning | None]:
        return {v: finish_meaning(v) for v in self.values}


EndKind = Literal["done-sentinel", "sentinel", "flag", "kind", "value", "finish", "key", "eof"]


@dataclass
class EndSpec:
    """How the draft knows the answer is complete (see the module doc)."""

    kind: EndKind
    path: Path | None = None
    value: str | bool | int | None = None
    note: str = ""
    #: For ``kind``: the prefix its alternatives share (``response.``), or None.
    family: str | None = None
    #: For ``kind``: other values seen ending other bodies (``response.incomplete``).
    also: list[str] = field(default_factory=list)

    @property
    def values(self) -> list[str]:
        """Every value that ends the answer (``kind``/``value``/``sentinel``)."""
        first = [str(self.value)] if self.value is not None else []
        return first + [v for v in self.also if v not in first]


def _word_like(value: str) -> bool:
    return 0 < len(value) <= 40 and value.count(" ") <= 2 and sum(ch.isdigit() for ch in value) < 3


def find_finish(
    index: BodyIndex,
    kinds: PayloadKinds | None,
    content_at: set[int],
    excluded: set[int],
    stream: bool,
) -> list[FinishField]:
    """The finish fields of one body, best first (see the module doc)."""
    last_content = max(content_at) if content_at else -1
    last = max(index.roots) if index.roots else -1
    out: list[FinishField] = []
    pids = set(index.strings) | set(index.nulls)
    for pid in pids:
        path = index.path(pid)
        key = norm(last_key(path))
        if (
            not path
            or pid in excluded
            or key in _NOT_FINISH
            or key.endswith("id")
            or (kinds is not None and path == (kinds.key,))
            or (norm(str(path[0])) in DISCRIMINATORS and len(path) == 1)
            or not index.single(pid)
        ):
            continue
        occs = index.strings.get(pid, [])
        if any(not _word_like(v) for _, v, _ in occs if v):
            continue
        found = _judge(path, occs, bool(index.nulls.get(pid)), last_content, stream)
        if found is not None:
            found.at_end = not stream or any(pos == last and v for pos, v, _ in occs)
            out.append(found)
    out.sort(key=lambda f: (-f.score, -f.at_end, len(f.path), show_path(f.path)))
    return out


def _judge(
    path: Path,
    occs: Sequence[tuple[int, str, object]],
    nulls: bool,
    last_content: int,
    stream: bool,
) -> FinishField | None:
    named = any(w in _FINISH_WORDS for w in key_words(last_key(path)))
    final: list[str] = []
    progress: list[str] = []
    for pos, v, _ in occs:
        if not v or is_progress(v) or (stream and pos < last_content):
            if v and v not in progress:
                progress.append(v)
        elif v not in final:
            final.append(v)
    if not final:
        return None
    meaningful = any(finish_meaning(v) is not None for v in final)
    if not (named or meaningful):
        return None
    if stream and set(final) & set(progress):
        return None  # the same value while content came and at the end: not how it ended
    score = 2.0 * named + 2.0 * meaningful + (1.0 if nulls or progress else 0.0)
    if stream:
        empty = "null" if nulls else "absent" if not progress else "a progress value"
        basis = f"{empty} while content came, {', '.join(map(repr, final))} at the end"
    else:
        basis = f"a status of the whole body ({', '.join(map(repr, final))})"
    basis += "; named like a finish" if named else "; its value has a finish meaning"
    confidence: Confidence = "sure" if named and meaningful else "likely"
    return FinishField(path, confidence, basis, final, progress, score)


# ---------------------------------------------------------------- the end of a stream


def end_family(value: str) -> str | None:
    """The prefix an end event's alternatives share: ``response.`` for ``response.completed``
    (alternatives ``response.incomplete``, ``response.failed``), ``message_`` for
    ``message_stop``; ``None`` when the value's last word has no finish meaning."""
    cut = max(
        value.rfind("."), value.rfind("_"), value.rfind("-"), value.rfind(":"), value.rfind("/")
    )
    if cut <= 0 or cut == len(value) - 1:
        return None
    if finish_meaning(value[cut + 1 :]) is None:
        return None
    return value[: cut + 1]


def find_end(
    body: Body,
    index: BodyIndex,
    kinds: PayloadKinds | None,
    finish: list[FinishField],
) -> EndSpec:
    """What marks the last payload of one body (see the module doc)."""
    if body.framing == "json":
        return EndSpec("eof", note="a non-stream body: the whole body is the answer")
    payloads = body.payloads
    if "[DONE]" in (p.text for p in payloads if not p.is_json):
        return EndSpec(
            "done-sentinel", value="[DONE]", note='the stream ends with the payload "[DONE]"'
        )
    if not payloads[-1].is_json:
        return EndSpec(
            "sentinel", value=payloads[-1].text, note="the last payload is a non-JSON marker"
        )
    json_at = sorted(index.roots)
    if not json_at:
        return EndSpec("eof", note="no JSON payload")
    finished = any(f.values for f in finish)
    last = json_at[-1]
    if len(json_at) >= 2:
        for pid, occs in index.bools.items():
            trues = [p for p, v in occs if v]
            path = index.path(pid)
            if trues == [last] and (
                any(not v for _, v in occs) or set(key_words(last_key(path))) & _DONE_WORDS
            ):
                return EndSpec(
                    "flag", path, True, f"{show_path(path)} is true on the last payload only"
                )
        if kinds is not None:
            value = kinds.by_payload.get(last)
            before = {v for p, v in kinds.by_payload.items() if p != last}
            # a kind that says nothing of an end (a `ping` that happens to come last) is no end
            # marker when a finish field already says how the answer ended
            says_end = finish_meaning(value or "") is not None or bool(
                set(key_words(value or "")) & _DONE_WORDS
            )
            if value is not None and value not in before and (says_end or not finished):
                family = end_family(value)
                alt = f" (and the other ends {family}*)" if family else ""
                return EndSpec(
                    "kind",
                    (kinds.key,),
                    value,
                    f"only the last payload has {kinds.key} = {value!r}{alt}",
                    family,
                )
        scalars: list[tuple[int, dict[int, str | int]]] = [
            (pid, {p: v for p, v in occs}) for pid, occs in index.ints.items()
        ]
        scalars += [(pid, {p: v for p, v, _ in occs}) for pid, occs in index.strings.items()]
        for pid, values in scalars:
            spec = _last_only_value(index.path(pid), values, last, len(json_at))
            if spec is not None:
                return spec
    if any(f.values for f in finish):
        return EndSpec("finish", note="the body ends after the finish field; no marker follows")
    root = index.roots.get(last)
    if len(json_at) >= 3 and isinstance(root, dict):
        for k in root:
            if all(
                not (isinstance(index.roots.get(p), dict) and k in index.roots[p])
                for p in json_at[:-1]
            ):
                return EndSpec("key", (str(k),), None, f"only the last payload has the key {k!r}")
    return EndSpec("eof", note="nothing marks the last payload: the stream just ends")


def _last_only_value(
    path: Path, values: dict[int, str | int], last: int, payloads: int
) -> EndSpec | None:
    """A scalar on every payload, named like a status, whose value on the last payload is new
    (iFlytek Spark's ``header.status``: 0, 1, ..., 2)."""
    if EACH in [s for s in path if isinstance(s, int)] or len(values) < payloads:
        return None
    if not any(w in _FINISH_WORDS for w in key_words(last_key(path))) or last not in values:
        return None
    end = values[last]
    if any(v == end for p, v in values.items() if p != last):
        return None
    if isinstance(end, str) and not _word_like(end):
        return None
    return EndSpec(
        "value", path, end, f"{show_path(path)} = {end!r} on the last payload only (a status)"
    )
