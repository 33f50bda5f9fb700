"""The values of a recorded body indexed by their path, in time and memory bounded by its size.

A *path* is how a value is reached from the top of a payload: dict keys, :data:`FIRST` for the
first element of an array of alternatives (``choices``, ``candidates``) and :data:`EACH` for
every element of any other array. Every payload of a body is walked once, iteratively (no
recursion to exhaust), and each value met is filed under its path:

* paths are *interned* in one :class:`PathTable` shared by the bodies of a draft: a node of the
  walk carries a small integer, never a copy of its path, so a body of a million array elements
  costs a million integers, not a million tuples as long as the path (the tuple of a path is
  built once, when a caller asks for it);
* at most :data:`MAX_PATHS` distinct paths are told apart (a body with more, such as an object
  of 20,000 keys, has the rest of its values skipped: no API keeps its answer there), and at most
  :data:`MAX_VALUES` values of one body are read (the walk stops there and says so); so the
  work and memory of every later step is bounded by the size of the input;
* a question about paths (is this value under that one?) is a lookup of the path's prefixes in
  a set, never a comparison of every pair of paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .lua_text import EACH, FIRST, Path

__all__ = [
    "ALTERNATIVES",
    "MAX_PATHS",
    "MAX_VALUES",
    "ROOT",
    "BodyIndex",
    "PathTable",
    "index_body",
    "last_key",
    "other_choice",
]

#: Distinct paths told apart across a draft's bodies (real APIs use a few dozen).
MAX_PATHS = 4096
#: Values (leaves and objects) read from one body; a longer body is read up to there.
MAX_VALUES = 200_000
#: Arrays of alternatives, read at their first element (``choices[1]``).
ALTERNATIVES = frozenset({"choices", "candidates", "alternatives", "generations"})

ROOT = 0


class PathTable:
    """Interned paths: each distinct path one integer, its parent's integer and its last step."""

    def __init__(self) -> None:
        self._parent: list[int] = [-1]
        self._step: list[str | int] = [""]
        self._children: dict[tuple[int, str | int], int] = {}
        self._paths: dict[int, Path] = {ROOT: ()}
        #: Whether some value was skipped because the table was full.
        self.full = False

    def child(self, pid: int, step: str | int) -> int | None:
        """The id of ``pid``'s path extended by ``step``; ``None`` when the table is full."""
        key = (pid, step)
        found = self._children.get(key)
        if found is not None:
            return found
        if len(self._parent) >= MAX_PATHS:
            self.full = True
            return None
        new = len(self._parent)
        self._parent.append(pid)
        self._step.append(step)
        self._children[key] = new
        return new

    def step(self, pid: int) -> str | int:
        """The last step of ``pid``'s path (``""`` for the root)."""
        return self._step[pid]

    def path(self, pid: int) -> Path:
        """The path of ``pid`` as a tuple of steps (built once per path)."""
        found = self._paths.get(pid)
        if found is not None:
            return found
        steps: list[str | int] = []
        p = pid
        while p != ROOT:
            steps.append(self._step[p])
            p = self._parent[p]
        out: Path = tuple(reversed(steps))
        self._paths[pid] = out
        return out

    def find(self, path: Path) -> int | None:
        """The id of ``path`` if it is in the table."""
        pid = ROOT
        for step in path:
            found = self._children.get((pid, step))
            if found is None:
                return None
            pid = found
        return pid

    def prefixes(self, pid: int) -> list[int]:
        """``pid`` and the ids of every path it extends, up to the root (excluded)."""
        out = []
        while pid != ROOT:
            out.append(pid)
            pid = self._parent[pid]
        return out


@dataclass
class BodyIndex:
    """One body's values by path id (occurrences in payload order; payloads by position)."""

    table: PathTable
    #: string leaves: (payload, value, the object holding it)
    strings: dict[int, list[tuple[int, str, dict[str, Any] | None]]] = field(default_factory=dict)
    ints: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    bools: dict[int, list[tuple[int, bool]]] = field(default_factory=dict)
    #: payload positions where the path held null
    nulls: dict[int, list[int]] = field(default_factory=dict)
    dicts: dict[int, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    roots: dict[int, Any] = field(default_factory=dict)
    #: Values read; whether the walk stopped at MAX_VALUES.
    values: int = 0
    truncated: bool = False
    #: Ids of EACH steps whose list held more than one element somewhere.
    multi: set[int] = field(default_factory=set)

    def path(self, pid: int) -> Path:
        return self.table.path(pid)

    def single(self, pid: int) -> bool:
        """Whether every list on the way to ``pid`` held one element at most (a list of one,
        watsonx's ``results[*]``, holds the answer's own counts and finish)."""
        table = self.table
        return not any(table.step(p) == EACH and p in self.multi for p in table.prefixes(pid))


def last_key(path: Path) -> str:
    """The last dict key of a path (``""`` if it has none)."""
    for step in reversed(path):
        if isinstance(step, str):
            return step
    return ""


def other_choice(alternatives: list[Any]) -> bool:
    """Whether a list of alternatives holds another choice than the first: with several
    choices (``n > 1``) a stream sends each in its own payloads, numbered by an ``index``
    that is not 0 (the drafts read choice 0 only; ``draft.first_choice`` in Lua)."""
    first = alternatives[0] if alternatives else None
    index = first.get("index") if isinstance(first, dict) else None
    return isinstance(index, int) and not isinstance(index, bool) and index != 0


def _walk(index: BodyIndex, pos: int, value: Any) -> None:
    table = index.table
    stack: list[tuple[Any, int, dict[str, Any] | None]] = [(value, ROOT, None)]
    while stack:
        if index.values >= MAX_VALUES:
            index.truncated = True
            return
        index.values += 1
        v, pid, holder = stack.pop()
        # what may still be pushed: every pushed value is counted when popped, so the stack
        # never holds more than the values left to read
        room = MAX_VALUES - index.values - len(stack)
        if isinstance(v, dict):
            index.dicts.setdefault(pid, []).append((pos, v))
            pushed: list[tuple[Any, int, dict[str, Any] | None]] = []
            for k, x in v.items():
                if len(pushed) >= room:
                    index.truncated = True
                    break
                child = table.child(pid, str(k))
                if child is not None:
                    pushed.append((x, child, v))
            stack.extend(reversed(pushed))
        elif isinstance(v, list):
            step = table.step(pid)
            if isinstance(step, str) and step.lower() in ALTERNATIVES:
                child = table.child(pid, FIRST)
                if child is not None and v and not other_choice(v):
                    stack.append((v[0], child, None))
            else:
                child = table.child(pid, EACH)
                if child is not None:
                    if len(v) > 1:
                        index.multi.add(child)
                    if len(v) > room:
                        index.truncated = True
                    stack.extend((x, child, None) for x in reversed(v[: max(room, 0)]))
        elif isinstance(v, bool):
            index.bools.setdefault(pid, []).append((pos, v))
        elif isinstance(v, int):
            index.ints.setdefault(pid, []).append((pos, v))
        elif isinstance(v, str):
            index.strings.setdefault(pid, []).append((pos, v, holder))
        elif v is None:
            index.nulls.setdefault(pid, []).append(pos)


def index_body(table: PathTable, payloads: list[tuple[int, Any]]) -> BodyIndex:
    """Index the JSON payloads ``(position, value)`` of one body (see the module doc)."""
    index = BodyIndex(table)
    for pos, value in payloads:
        if index.truncated:
            break
        index.roots[pos] = value
        _walk(index, pos, value)
    return index
