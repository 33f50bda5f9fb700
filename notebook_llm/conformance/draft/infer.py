"""Inference: where a recorded body keeps the answer, read from its payloads alone.

Every payload is walked once; string, integer, boolean and null leaves and the objects met are
indexed by their *path* (dict keys, ``FIRST`` for the first element of an array of alternatives
such as ``choices``/``candidates``, ``EACH`` for every element of other arrays). From that index:

* **text and reasoning**: each string path is a candidate; a path whose objects carry a reasoning
  marker only sometimes (Gemini's ``thought: true``, a ``type: "thinking"``) is split in two by it.
  Each candidate's values are concatenated in payload order (a path whose successive values each
  extend the previous one is *cumulative*: the draft turns it into deltas), and scored by how much
  the result reads like prose (letters and spaces, length) times a prior on the key's name.
  Reasoning is the best candidate named or marked as reasoning; text the best other one;
* **tool calls**: objects with a ``name`` and arguments (``arguments``/``args``/``input``), also
  under a ``function`` object; argument fragments without a name (Anthropic's ``partial_json``)
  are joined to their call by the payload's ``index``;
* **usage**: integer leaves named like prompt/input, completion/output, total, cache and
  reasoning token counts (durations and times are not counts);
* **finish**: a ``*_reason`` (or ``status``) field; values seen while content still follows are
  progress values, not finishes; synonyms are mapped to the contract's ``stop``/``length``/
  ``tool_calls``;
* **the end**: ``[DONE]``, another sentinel payload, a ``done``-like flag that turns true on the
  last payload, a ``type`` value only the last payload has, the finish field, a key only the last
  payload has, else nothing (the end of the body; a TODO).

What could not be inferred is a TODO in :attr:`Inference.todos`.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ...core.errors import ErrorCode, LlmError
from .framing import Body
from .lua_text import EACH, FIRST, Path, show_path

__all__ = ["Candidate", "Cond", "EndSpec", "Fragment", "Inference", "ToolSpec", "infer", "norm"]

# ---------------------------------------------------------------- names

#: Arrays of alternatives: the draft reads their first element (``choices[1]``).
_ALTERNATIVES = frozenset({"choices", "candidates", "alternatives", "generations"})
_REASONING_WORDS = ("reasoning", "thinking", "thought", "think", "analysis", "reflection")
_TEXT_NAMES = frozenset(
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
    }
)
#: Keys whose strings are metadata, never the answer.
_NOT_TEXT = frozenset(
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
    }
)
_ARG_KEYS = ("arguments", "args", "input", "parameters")
_FRAGMENT_KEYS = frozenset({"partialjson", "argumentsdelta", "argsdelta", "partialarguments"})
_DISCRIMINATORS = ("type", "event", "kind", "object", "status", "state")
_DONE_WORDS = frozenset(
    {
        "done",
        "final",
        "isfinal",
        "finished",
        "isfinished",
        "complete",
        "completed",
        "end",
        "last",
        "islast",
        "stop",
        "eos",
    }
)
_FINISH_PREFIXES = ("", "finish", "stop", "done", "end", "completion", "termination")

#: Wire finish values and what the draft reports for them (the contract's ``finish_reason``).
SYNONYMS: dict[str, str] = {
    **dict.fromkeys(
        (
            "length",
            "max_tokens",
            "max_length",
            "truncated",
            "max_output_tokens",
            "token_limit",
            "max_new_tokens",
            "maxtokens",
        ),
        "length",
    ),
    **dict.fromkeys(
        (
            "stop",
            "end_turn",
            "complete",
            "completed",
            "done",
            "finished",
            "eos",
            "end",
            "stop_sequence",
            "eos_token",
            "finish",
        ),
        "stop",
    ),
    **dict.fromkeys(
        ("tool_calls", "tool_use", "function_call", "tool_call", "tools"), "tool_calls"
    ),
}


def norm(key: str) -> str:
    """A key without case, ``_`` or ``-``: ``finishReason`` and ``finish_reason`` meet."""
    return re.sub(r"[_\-\s]", "", key.lower())


def _reasoning_word(text: str) -> bool:
    n = norm(text)
    return any(w in n for w in _REASONING_WORDS)


def _last_key(path: Path) -> str:
    for step in reversed(path):
        if isinstance(step, str):
            return step
    return ""


def _under(path: Path, prefix: Path) -> bool:
    return len(path) >= len(prefix) and path[: len(prefix)] == prefix


# ---------------------------------------------------------------- the index


@dataclass
class _Index:
    strings: dict[Path, list[tuple[int, str, dict[str, Any] | None]]] = field(default_factory=dict)
    ints: dict[Path, list[tuple[int, int]]] = field(default_factory=dict)
    bools: dict[Path, list[tuple[int, bool]]] = field(default_factory=dict)
    nulls: dict[Path, int] = field(default_factory=dict)
    dicts: dict[Path, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    roots: dict[int, Any] = field(default_factory=dict)


def _walk(index: _Index, pi: int, value: Any) -> None:
    # iterative: a wide or deep payload cannot exhaust the Python stack
    stack: list[tuple[Any, Path, dict[str, Any] | None]] = [(value, (), None)]
    while stack:
        v, path, parent = stack.pop()
        if isinstance(v, dict):
            index.dicts.setdefault(path, []).append((pi, v))
            items = list(v.items())
            for k, x in reversed(items):
                stack.append((x, (*path, str(k)), v))
        elif isinstance(v, list):
            if _last_key(path).lower() in _ALTERNATIVES and path and isinstance(path[-1], str):
                if v:
                    stack.append((v[0], (*path, FIRST), None))
            else:
                for x in reversed(v):
                    stack.append((x, (*path, EACH), None))
        elif isinstance(v, bool):
            index.bools.setdefault(path, []).append((pi, v))
        elif isinstance(v, int):
            index.ints.setdefault(path, []).append((pi, v))
        elif isinstance(v, str):
            index.strings.setdefault(path, []).append((pi, v, parent))
        elif v is None:
            index.nulls[path] = index.nulls.get(path, 0) + 1


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Cond:
    """A condition on the object that holds a value: ``obj[key] == value`` (or ``~=``)."""

    key: str
    value: str | bool
    negate: bool = False

    def show(self) -> str:
        op = "~=" if self.negate else "=="
        return f"{self.key} {op} {self.value!r}"


@dataclass
class Candidate:
    """A place where answer text may be: its path, condition, and what it concatenates to."""

    path: Path
    cond: Cond | None = None
    cumulative: bool = False
    text: str = ""
    score: float = 0.0
    payloads: int = 0
    reasoning_like: bool = False
    #: No text in the body: an empty or null field named like text, taken as a guess.
    guessed: bool = False
    #: Added after each value: the payloads are bare words with no space anywhere.
    separator: str = ""
    #: The values look like whole texts so far, but some rewrite the one before (see _revised).
    revised: bool = False

    def show(self) -> str:
        where = show_path(self.path)
        return where + (f" where {self.cond.show()}" if self.cond else "")


@dataclass
class ToolSpec:
    """Tool-call objects at ``path``; the other paths are relative to such an object."""

    path: Path
    name: Path
    args: Path | None
    id: Path | None = None
    index: Path | None = None
    #: A payload-level key that numbers the call (Anthropic's ``index``).
    index_root: str | None = None
    calls: int = 0


@dataclass
class Fragment:
    """Argument fragments without a name, joined to the call numbered by ``index_root``."""

    path: Path
    index_root: str | None = None


EndKind = Literal["done-sentinel", "sentinel", "flag", "value", "finish", "key", "eof"]


@dataclass
class EndSpec:
    """How the draft knows the answer is complete (see the module doc)."""

    kind: EndKind
    path: Path | None = None
    value: str | bool | None = None
    note: str = ""


@dataclass
class Inference:
    """Everything the draft is written from (see the module doc)."""

    body: Body
    text: Candidate | None = None
    text_candidates: list[Candidate] = field(default_factory=list)
    reasoning: Candidate | None = None
    reasoning_candidates: list[Candidate] = field(default_factory=list)
    usage: dict[str, list[Path]] = field(default_factory=dict)
    derive_completion: bool = False
    finish_paths: list[Path] = field(default_factory=list)
    #: Final wire values seen -> what the draft reports (``None``: passed on as it is).
    finish_values: dict[str, str | None] = field(default_factory=dict)
    progress_values: list[str] = field(default_factory=list)
    end: EndSpec = field(default_factory=lambda: EndSpec("eof"))
    tools: list[ToolSpec] = field(default_factory=list)
    fragments: list[Fragment] = field(default_factory=list)
    #: Non-JSON payloads that are not the end marker (skipped by the draft).
    other_payloads: list[str] = field(default_factory=list)
    error_seen: bool = False
    todos: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- scoring


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


def _name_prior(path: Path, cond: Cond | None) -> float:
    key = norm(_last_key(path))
    if key in _TEXT_NAMES or _reasoning_word(key):
        return 2.0
    return 1.0


def _is_cumulative(values: list[str]) -> bool:
    vals = [v for v in values if v]
    if len(vals) < 2:
        return False
    grew = False
    for a, b in itertools.pairwise(vals):
        if not b.startswith(a):
            return False
        grew = grew or len(b) > len(a)
    return grew


_WORD = re.compile(r"[^\W\d_]{2,}\Z")


def _bare_words(values: list[str]) -> bool:
    """Payloads that are each one word of letters with no space anywhere (``HELLO``, ``WORLD``):
    an API that streams words, not text, so the words need a space between them. Real token
    streams carry their spaces (``" world"``), so they never look like this."""
    vals = [v for v in values if v]
    return len(vals) >= 2 and all(_WORD.match(v) for v in vals)


def _revised(values: list[str]) -> bool:
    """Values that mostly extend the one before but not always: whole texts so far that the
    API sometimes rewrites (a correction). No draft can map that exactly: the stream protocol
    only appends, so the reader is told."""
    vals = [v for v in values if v]
    pairs = [(a, b) for a, b in itertools.pairwise(vals) if a != b]
    grew = sum(1 for a, b in pairs if b.startswith(a))
    return 2 <= grew < len(pairs) and grew * 2 > len(pairs)


def _deltas(values: list[str]) -> str:
    out: list[str] = []
    prev = ""
    for v in values:
        if v.startswith(prev):
            out.append(v[len(prev) :])
        else:
            out.append(v)
        prev = v
    return "".join(out)


# ---------------------------------------------------------------- the steps


def _tool_specs(index: _Index) -> list[ToolSpec]:
    specs: dict[Path, ToolSpec] = {}
    for path, occs in index.dicts.items():
        for pi, d in occs:
            fn = d.get("function")
            spec: ToolSpec | None = None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn.get("name"):
                arg = next((k for k in _ARG_KEYS if k in fn), None)
                spec = ToolSpec(path, ("function", "name"), ("function", arg) if arg else None)
            elif (
                isinstance(d.get("name"), str)
                and d.get("name")
                and any(k in d for k in _ARG_KEYS)
                and _last_key(path) != "function"
            ):
                arg = next(k for k in _ARG_KEYS if k in d)
                spec = ToolSpec(path, ("name",), (arg,))
            if spec is None:
                continue
            have = specs.setdefault(path, spec)
            have.calls += 1
            if have.args is None and spec.args is not None:
                have.args = spec.args
            if "id" in d and isinstance(d.get("id"), str):
                have.id = ("id",)
            if isinstance(d.get("index"), int) and not isinstance(d.get("index"), bool):
                have.index = ("index",)
            root = index.roots.get(pi)
            if (
                have.index is None
                and len(path) > 1
                and isinstance(root, dict)
                and isinstance(root.get("index"), int)
            ):
                have.index_root = "index"
    # a call object inside another (Ollama's tool_calls[*].function) is the outer one's part
    out = [
        s
        for s in specs.values()
        if not any(o is not s and _under(s.path, o.path) for o in specs.values())
    ]
    return out


def _fragments(index: _Index, tools: list[ToolSpec]) -> list[Fragment]:
    out: list[Fragment] = []
    for path, occs in index.strings.items():
        if norm(_last_key(path)) not in _FRAGMENT_KEYS:
            continue
        if any(_under(path, t.path) for t in tools):
            continue
        roots = [index.roots.get(pi) for pi, _, _ in occs]
        numbered = all(isinstance(r, dict) and isinstance(r.get("index"), int) for r in roots)
        out.append(Fragment(path, "index" if numbered else None))
    return out


def _marker(parent: dict[str, Any] | None, leaf: str) -> Cond | None:
    """A reasoning marker on the object holding a string: ``thought: true``, ``type: "thinking"``."""
    if not parent:
        return None
    for k, v in parent.items():
        if k == leaf:
            continue
        if v is True and _reasoning_word(k):
            return Cond(k, True)
        if isinstance(v, str) and norm(k) in _DISCRIMINATORS and _reasoning_word(v):
            return Cond(k, v)
    return None


def _text_candidates(index: _Index, excluded: Iterable[Path]) -> list[Candidate]:
    skip = list(excluded)
    out: list[Candidate] = []
    for path, occs in index.strings.items():
        key = norm(_last_key(path))
        if not path or key in _NOT_TEXT or key.endswith("id") or key.endswith("reason"):
            continue
        if any(_under(path, p) for p in skip):
            continue
        if any(isinstance(s, str) and norm(s) in ("error", "errors") for s in path):
            continue  # an error's message is not the answer
        values = [v for _, v, _ in occs]
        if len({pi for pi, _, _ in occs}) >= 2 and len(set(values)) <= 1:
            continue  # the same value on every payload: metadata (a model name, a role)
        leaf = _last_key(path)
        found = [_marker(p, leaf) for _, _, p in occs]
        markers = Counter(m for m in found if m is not None)
        groups: list[tuple[Cond | None, list[tuple[int, str]], bool]] = []
        if markers and sum(markers.values()) < len(occs):
            top = markers.most_common(1)[0][0]
            inside = [(pi, v) for (pi, v, _), m in zip(occs, found, strict=True) if m == top]
            outside = [(pi, v) for (pi, v, _), m in zip(occs, found, strict=True) if m != top]
            groups.append((top, inside, True))
            groups.append((Cond(top.key, top.value, negate=True), outside, False))
        else:
            groups.append((None, [(pi, v) for pi, v, _ in occs], bool(markers)))
        for cond, items, marked in groups:
            per_payload: dict[int, str] = {}
            for pi, v in items:
                per_payload[pi] = per_payload.get(pi, "") + v
            seq = [per_payload[k] for k in sorted(per_payload)]
            cumulative = _is_cumulative(seq)
            revised = not cumulative and _revised(seq)
            separator = " " if not cumulative and _bare_words(seq) else ""
            text = _deltas(seq) if cumulative else separator.join(seq) + separator
            if not text.strip():
                continue
            reasoning_like = marked or any(isinstance(s, str) and _reasoning_word(s) for s in path)
            score = prose_score(text) * _name_prior(path, cond)
            out.append(
                Candidate(
                    path,
                    cond,
                    cumulative,
                    text,
                    score,
                    len(per_payload),
                    reasoning_like,
                    separator=separator,
                    revised=revised,
                )
            )
    out.sort(key=lambda c: -c.score)
    return out


_USAGE_SKIP = ("time", "duration", "latency", "ephemeral", "audio", "image", "ms", "seconds")


def _usage_role(key: str) -> str | None:
    n = norm(key)
    if any(s in n for s in _USAGE_SKIP) or ("token" not in n and "count" not in n):
        return None
    if any(w in n for w in ("reasoning", "thought", "thinking")):
        return "reasoning_tokens"
    if "cache" in n:
        if "miss" in n:
            return None
        if "creat" in n or "write" in n:
            return "cache_write"
        return "cache_read"
    if "total" in n:
        return "total"
    if "prompt" in n or "input" in n:
        return "prompt"
    if any(w in n for w in ("completion", "output", "candidates", "generated")) or n == "evalcount":
        return "completion"
    return None


def _usage(index: _Index) -> tuple[dict[str, list[Path]], bool]:
    roles: dict[str, list[Path]] = {}
    for path in index.ints:
        if EACH in [s for s in path if not isinstance(s, str)]:
            continue
        role = _usage_role(_last_key(path))
        if role is None:
            continue
        under_details = any(isinstance(s, str) and "details" in norm(s) for s in path[:-1])
        if under_details and role not in ("reasoning_tokens", "cache_read"):
            continue
        roles.setdefault(role, []).append(path)
    derive = "total" in roles and "prompt" in roles
    return roles, derive


def _finish(index: _Index) -> tuple[list[Path], list[tuple[int, str]]]:
    paths: list[Path] = []
    for path in list(index.strings) + list(index.nulls):
        n = norm(_last_key(path))
        reason = n.endswith("reason") and n[: -len("reason")] in _FINISH_PREFIXES
        if (reason or n in ("status", "state")) and path not in paths:
            paths.append(path)
    keep: list[Path] = []
    for path in paths:
        n = norm(_last_key(path))
        if n in ("status", "state"):
            vals = {v.lower() for _, v, _ in index.strings.get(path, [])}
            if not vals & set(SYNONYMS):
                continue
        keep.append(path)
    seen = sorted((pi, v) for path in keep for pi, v, _ in index.strings.get(path, []))
    return keep, seen


def _end(body: Body, index: _Index, inf: Inference) -> EndSpec:
    if body.framing == "json":
        return EndSpec("eof", note="a non-stream body: the whole body is the answer")
    payloads = body.payloads
    texts = [p.text for p in payloads if not p.is_json]
    if "[DONE]" in texts:
        return EndSpec(
            "done-sentinel", value="[DONE]", note='the stream ends with the payload "[DONE]"'
        )
    if not payloads[-1].is_json:
        marker = payloads[-1].text
        return EndSpec("sentinel", value=marker, note="the last payload is the non-JSON marker")
    json_at = [i for i, p in enumerate(payloads) if p.is_json]
    last = json_at[-1]
    if len(json_at) >= 2:
        for path, occs in index.bools.items():
            trues = [pi for pi, v in occs if v]
            if trues == [last] and (
                norm(_last_key(path)) in _DONE_WORDS or any(not v for _, v in occs)
            ):
                return EndSpec(
                    "flag",
                    path,
                    True,
                    f"{show_path(path)} is true on the last payload only",
                )
        root = payloads[last].value
        if isinstance(root, dict):
            for key in _DISCRIMINATORS:
                for k, v in root.items():
                    if norm(k) != key or not isinstance(v, str):
                        continue
                    others = [
                        payloads[i].value.get(k)
                        for i in json_at[:-1]
                        if isinstance(payloads[i].value, dict)
                    ]
                    if others and v not in others:
                        return EndSpec("value", (k,), v, f"only the last payload has {k} = {v!r}")
    if inf.finish_values:
        return EndSpec("finish", note="the body ends after the finish field; no marker follows")
    root = payloads[last].value
    if len(json_at) >= 3 and isinstance(root, dict):
        for k in root:
            if all(
                not (isinstance(payloads[i].value, dict) and k in payloads[i].value)
                for i in json_at[:-1]
            ):
                return EndSpec("key", (k,), None, f"only the last payload has the key {k!r}")
    return EndSpec("eof", note="nothing marks the last payload: the stream just ends")


def infer(body: Body) -> Inference:
    """Read ``body`` (see the module doc); raises ``LlmError`` when it holds no answer."""
    index = _Index()
    for pi, value in body.json_payloads:
        index.roots[pi] = value
        _walk(index, pi, value)
    inf = Inference(body)
    inf.other_payloads = [
        p.text for p in body.payloads if not p.is_json and p.text not in ("[DONE]",)
    ]
    inf.tools = _tool_specs(index)
    inf.fragments = _fragments(index, inf.tools)
    # a call's arguments are not text; its siblings may be (a list of mixed content blocks)
    excluded = [(*t.path, *t.args) for t in inf.tools if t.args] + [f.path for f in inf.fragments]
    cands = _text_candidates(index, excluded)
    inf.reasoning_candidates = [c for c in cands if c.reasoning_like]
    inf.text_candidates = [c for c in cands if not c.reasoning_like]
    inf.text = inf.text_candidates[0] if inf.text_candidates else _empty_text(index, excluded)
    inf.reasoning = inf.reasoning_candidates[0] if inf.reasoning_candidates else None
    if (inf.text is None or inf.text.guessed) and inf.reasoning is None and not inf.tools:
        raise LlmError(
            f"found no answer text, reasoning or tool call in {body.describe()}: is it an error "
            "body or an empty answer? Draft from a successful response that has text",
            ErrorCode.MALFORMED_RESPONSE,
        )
    inf.usage, inf.derive_completion = _usage(index)
    inf.finish_paths, seen = _finish(index)
    content_at = _content_payloads(index, inf)
    last_content = max(content_at) if content_at else -1
    final = {v for pi, v in seen if pi >= last_content}
    for _pi, v in seen:
        if v in final:
            if v not in inf.finish_values:
                mapped = SYNONYMS.get(v.lower())
                inf.finish_values[v] = mapped
        elif v not in inf.progress_values:
            inf.progress_values.append(v)
    inf.end = _end(body, index, inf)
    inf.error_seen = any(
        isinstance(v, dict) and v.get("error") not in (None, False) for _, v in body.json_payloads
    )
    _todos(inf)
    return inf


_EMPTY_TEXT_NAMES = ("content", "text", "response", "output", "answer")


def _empty_text(index: _Index, excluded: list[Path]) -> Candidate | None:
    """No string reads as text: the first empty or null field named like text (a guess)."""
    paths = [p for p, occs in index.strings.items() if not any(v for _, v, _ in occs)]
    paths += list(index.nulls)
    for name in _EMPTY_TEXT_NAMES:
        for path in paths:
            if norm(_last_key(path)) != name or any(_under(path, p) for p in excluded):
                continue
            if any(isinstance(s, str) and _reasoning_word(s) for s in path):
                continue
            return Candidate(path, guessed=True)
    return None


def _content_payloads(index: _Index, inf: Inference) -> set[int]:
    out: set[int] = set()
    for cand in (inf.text, inf.reasoning):
        if cand is not None:
            out.update(pi for pi, v, _ in index.strings.get(cand.path, []) if v)
    for t in inf.tools:
        out.update(pi for pi, _ in index.dicts.get(t.path, []))
    for f in inf.fragments:
        out.update(pi for pi, v, _ in index.strings.get(f.path, []) if v)
    return out


def _todos(inf: Inference) -> None:
    todo = inf.todos.append
    todo("endpoint: the body does not say which URL it came from; set the API's path")
    if not inf.usage:
        todo("usage: this body reports no token counts; map them if the API sends any")
    if not inf.finish_paths:
        todo("finish: no finish field in this body; every answer is reported as a stop")
    if inf.end.kind == "eof" and inf.body.framing != "json" and not inf.finish_values:
        todo(
            "end: nothing marks the last payload, so the draft takes the end of the body as the "
            "end (each payload says finish stop) and a connection cut early reads as complete; "
            "if the API has an end marker, return done = true on it instead"
        )
    if inf.text is not None and inf.text.revised:
        todo(
            f"text: {show_path(inf.text.path)} looks like the whole text so far, but some "
            "payloads rewrite it instead of extending it; the stream only appends, so the draft "
            "joins the values: check what the API means (the last value may be the answer)"
        )
    if inf.text is not None and inf.text.separator:
        todo(
            "text: the payloads are bare words with no space anywhere, so the draft adds a "
            "space after each; check that the API means words"
        )
    if inf.text is not None and inf.text.guessed:
        todo(
            f"text: this body has no answer text; {show_path(inf.text.path)} is empty or null "
            "here and named like text, so the draft reads it: check on a body with text"
        )
    if not inf.tools and not inf.fragments:
        todo("tool calls: none in this body; if the API has them, add their paths to CALLS")
    if inf.body.framing == "sse" and inf.body.event_lines:
        named = [p for p in inf.body.payloads if p.event][:200]  # a sample is enough
        typed = all(
            isinstance(p.value, dict) and any(norm(k) in _DISCRIMINATORS for k in p.value)
            for p in named
            if p.is_json and p.value is not None
        )
        if not typed:
            todo(
                "event: lines: the hook sees only each event's data, and these payloads do "
                "not repeat the event name; check no two events need telling apart"
            )
