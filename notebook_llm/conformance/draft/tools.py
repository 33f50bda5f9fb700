"""Tool calls: objects that carry a name and arguments, and argument fragments streamed apart.

A *call object* is an object with a non-empty string ``name`` and arguments (``arguments``,
``args``, ``input``, ``parameters``, ``params``), or with a ``function`` object that has them
(OpenAI's shape). Its ``id`` and its number (an ``index`` inside it, or an index-named integer
of the payload, Anthropic's ``index`` and the Responses API's ``output_index``) are read when
present. A call announced again later (the Responses API repeats every call, whole, in
``response.output_item.done`` and ``response.completed``) is recognised by its id and read only
where it first appears. *Argument fragments* are JSON text streamed under another path (Anthropic's
``delta.partial_json``, the Responses API's ``delta`` of ``function_call_arguments.delta``): they
join the call of the same number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .lua_text import Path, show_path
from .names import key_words
from .paths import BodyIndex, last_key
from .text import Candidate, Cond, PayloadKinds

__all__ = ["ARG_KEYS", "Fragment", "ToolSpec", "argument_like", "find_fragments", "find_tools"]

ARG_KEYS = ("arguments", "args", "input", "parameters", "params")
#: Places of calls (and of fragments) a draft maps at most: the ones with the most calls. An
#: API has one or two; a body with thousands of call-like objects is not answering.
MAX_PLACES = 8
_ARG_WORDS = frozenset(
    {
        "arguments",
        "argument",
        "args",
        "partial",
        "json",
        "input",
        "params",
        "parameters",
        "function",
        "tool",
        "call",
    }
)


@dataclass
class ToolSpec:
    """Tool-call objects at ``path``; the other paths are relative to such an object."""

    path: Path
    name: Path
    args: Path | None
    id: Path | None = None
    index: Path | None = None
    #: A payload-level integer that numbers the call (Anthropic's ``index``).
    index_root: str | None = None
    #: Only in payloads of this kind (a call repeated under other kinds is read once).
    cond: Cond | None = None
    calls: int = 0

    def show(self) -> str:
        return show_path(self.path) + (f" where {self.cond.show()}" if self.cond else "")


@dataclass
class Fragment:
    """Argument fragments without a name, joined to the call numbered by ``index_root``."""

    path: Path
    index_root: str | None = None
    cond: Cond | None = None
    #: Each value is whole arguments (a JSON object), not a piece of them.
    whole: bool = False

    def show(self) -> str:
        return show_path(self.path) + (f" where {self.cond.show()}" if self.cond else "")


def argument_like(cand: Candidate) -> bool:
    """Whether a JSON-looking string candidate is streamed tool-call arguments (by its path or
    the kind of payload it comes in), not an answer that happens to be JSON."""
    words = {w for s in cand.path if isinstance(s, str) for w in key_words(s)}
    if cand.cond is not None and cand.cond.on_payload:
        words |= set(key_words(str(cand.cond.value)))
    return cand.jsonish and bool(words & _ARG_WORDS)


def _index_key(root: Any) -> str | None:
    if not isinstance(root, dict):
        return None
    for k, v in root.items():
        if (
            isinstance(v, int)
            and not isinstance(v, bool)
            and {"index", "idx"} & set(key_words(str(k)))
        ):
            return str(k)
    return None


#: Words of a key that may hold a call's name besides ``name`` (``fn``, ``tool``,
#: ``function_name``, ``toolName``), when its value reads like an identifier.
_NAME_WORDS = frozenset({"name", "fn", "func", "function", "tool"})
_ARG_KEY_WORDS = frozenset({"arguments", "args", "parameters", "params", "input"})
#: Words of a key that names a tool setting, not a call (``tool_choice: "auto"``, ``tool_type``).
_NOT_NAME = frozenset({"id", "type", "choice", "choices", "mode", "config", "version"})
#: Words before ``id`` in the key of a call's own id (``call_id``, ``toolUseId``).
_CALL_ID_WORDS = frozenset({"call", "tool", "use", "function"})


def _identifier(value: object) -> bool:
    """A tool's name: 1 to 64 letters, digits, ``_``, ``-``, ``.`` (no space: not prose)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 64
        and value.isascii()
        and all(ch.isalnum() or ch in "_-." for ch in value)
    )


def _arg_key(d: dict[str, Any]) -> str | None:
    found = next((k for k in ARG_KEYS if k in d), None)
    if found is not None:
        return found
    return next(
        (str(k) for k in d if len(str(k)) <= 40 and set(key_words(str(k))) & _ARG_KEY_WORDS),
        None,
    )


def _name_key(d: dict[str, Any]) -> str | None:
    """The key of an object that holds a call's name: ``name``, else a key named like one
    (``fn``, ``tool``, ``function_name``) whose value is an identifier."""
    if isinstance(d.get("name"), str) and d["name"]:
        return "name"
    for k, v in d.items():
        words = set(key_words(str(k))) if len(str(k)) <= 40 else set()
        if words & _NAME_WORDS and not words & (_ARG_KEY_WORDS | _NOT_NAME) and _identifier(v):
            return str(k)
    return None


def _call_shape(d: dict[str, Any], under_function: bool) -> tuple[Path, Path | None] | None:
    fn = d.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn.get("name"):
        arg = _arg_key(fn)
        return ("function", "name"), ("function", arg) if arg else None
    if under_function:
        return None
    name = _name_key(d)
    if name is not None:
        arg = _arg_key(d)
        if arg is not None and arg != name:
            return (name,), (arg,)
    return None


def _id_key(d: dict[str, Any]) -> str | None:
    """The key of a call's id: one named the call's id (``call_id``, ``tool_call_id``,
    ``toolUseId``: the id a tool result answers) over a bare ``id`` (the Responses API's item
    id is ``fc_...``, its call id ``call_...``)."""
    for k, v in d.items():
        words = key_words(str(k)) if len(str(k)) <= 40 else []
        named = len(words) >= 2 and words[-1] == "id"
        if named and isinstance(v, str) and v and set(words[:-1]) & _CALL_ID_WORDS:
            return str(k)
    if isinstance(d.get("id"), str) and d["id"]:
        return "id"
    return None


def _own_index_key(d: dict[str, Any]) -> str | None:
    """The key of a call's number inside it: ``index``, ``idx`` and the like."""
    for k, v in d.items():
        words = set(key_words(str(k))) if len(str(k)) <= 40 else set()
        if isinstance(v, int) and not isinstance(v, bool) and words & {"index", "idx"}:
            return str(k)
    return None


@dataclass
class _Seen:
    spec: ToolSpec
    kinds_new: set[str] = field(default_factory=set)
    kinds_repeat: set[str] = field(default_factory=set)


def find_tools(index: BodyIndex, kinds: PayloadKinds | None) -> list[ToolSpec]:
    """The call objects of one body, by path (see the module doc)."""
    found: dict[int, _Seen] = {}
    ids: set[str] = set()
    # a payload's index key, found once per payload: every call object of one payload shares
    # its root, and a root of 20,000 keys scanned again for each of its calls was quadratic
    index_keys: dict[int, str | None] = {}
    occurrences = sorted(
        ((pos, pid, d) for pid, occs in index.dicts.items() for pos, d in occs),
        key=lambda o: (o[0], o[1]),
    )
    for pos, pid, d in occurrences:
        path = index.path(pid)
        shape = _call_shape(d, last_key(path) == "function")
        if shape is None:
            continue
        seen = found.get(pid)
        if seen is None:
            seen = found[pid] = _Seen(ToolSpec(path, shape[0], shape[1]))
        spec = seen.spec
        spec.calls += 1
        if spec.args is None and shape[1] is not None:
            spec.args = shape[1]
        id_key = _id_key(d)
        call_id = d.get(id_key) if id_key else None
        if id_key and (spec.id is None or spec.id == ("id",)):
            spec.id = (id_key,)
        own_index = _own_index_key(d)
        if own_index is not None:
            spec.index = (own_index,)
        if spec.index is None and path and spec.index_root is None:
            if pos not in index_keys:
                index_keys[pos] = _index_key(index.roots.get(pos))
            spec.index_root = index_keys[pos]
        kind = kinds.by_payload.get(pos, "") if kinds is not None else ""
        if call_id and call_id in ids:
            seen.kinds_repeat.add(kind)
        else:
            seen.kinds_new.add(kind)
            if call_id:
                ids.add(call_id)
    out: list[ToolSpec] = []
    paths = {s.spec.path for s in found.values()}
    for seen in found.values():
        spec = seen.spec
        if not seen.kinds_new:
            continue  # every call here was announced before: a repeat
        # a call object inside another (Ollama's tool_calls[*].function) is the outer one's part
        if any(spec.path[:n] in paths for n in range(1, len(spec.path))):
            continue
        if kinds is not None and seen.kinds_repeat and len(seen.kinds_new) == 1:
            (kind,) = seen.kinds_new
            spec.cond = Cond(kinds.key, kind, on_payload=True)
        out.append(spec)
    out.sort(key=lambda s: (-s.calls, len(s.path), show_path(s.path)))
    return sorted(out[:MAX_PLACES], key=lambda s: (len(s.path), show_path(s.path)))


def _fragment_name(key: str) -> bool:
    """A key that holds streamed arguments whatever its value: ``partial_json``,
    ``arguments``, ``args_delta`` (not ``jsonPath``, which addresses a value)."""
    words = set(key_words(key))
    return bool(words & {"arguments", "argument", "args"}) or {"partial", "json"} <= words


def find_fragments(
    index: BodyIndex, kinds: PayloadKinds | None, tools: list[ToolSpec]
) -> list[Fragment]:
    """Argument fragments: strings outside every call object, named like streamed arguments
    (``partial_json``, even when empty) or whose join is JSON sent under a path or a payload
    kind that names arguments, a function or a tool."""
    out: list[Fragment] = []
    call_paths = {t.path for t in tools}
    for pid, occs in index.strings.items():
        if len(out) >= MAX_PLACES:
            break
        path = index.path(pid)
        if not path or any(path[:n] in call_paths for n in range(1, len(path) + 1)):
            continue
        words = {w for s in path if isinstance(s, str) for w in key_words(s)}
        by_kind: dict[str, list[tuple[int, str]]] = {}
        for pos, value, _ in occs:
            kind = kinds.by_payload.get(pos, "") if kinds is not None else ""
            by_kind.setdefault(kind, []).append((pos, value))
        for kind, items in by_kind.items():
            joined = "".join(v for _, v in items)
            kind_words = set(key_words(kind)) if kind else set()
            named = _fragment_name(last_key(path))
            jsonish = joined.strip()[:1] in ("{", "[") and '"' in joined
            if not (named or (jsonish and (words | kind_words) & _ARG_WORDS)):
                continue
            cond = Cond(kinds.key, kind, on_payload=True) if kinds is not None and kind else None
            roots = {_index_key(index.roots.get(pos)) for pos, _ in items}
            root = roots.pop() if len(roots) == 1 else None
            fragment = Fragment(path, root, cond if len(by_kind) > 1 or not named else None)
            fragment.whole = all(_json_object(v) for _, v in items if v)
            out.append(fragment)
    # a place where each value is already the whole arguments repeats what another place
    # streamed in pieces (the Responses API's function_call_arguments.done): read the pieces
    if any(not f.whole for f in out):
        out = [f for f in out if not f.whole]
    return out


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
