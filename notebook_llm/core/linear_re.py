"""Regexes that run in time linear in the text: RE2 (the ``google-re2`` package), for every
pattern that meets untrusted text and is not better written as a scan.

Python's ``re`` backtracks: a pattern with overlapping quantifiers can take minutes on a crafted
or unlucky text, and while it runs it holds the GIL, so neither Stop, the kernel interrupt nor a
deadline can end it. RE2 compiles a pattern to an automaton and never backtracks (no
backreferences, no lookaround: a pattern that needs them is refused when compiled, see
:class:`PatternError`).

Text holding lone surrogates (a JSON ``"\\ud800"`` escape, a file name's undecodable bytes
read with ``surrogateescape``) cannot be encoded as UTF-8, which RE2 needs: such text is
matched with each lone surrogate read as U+FFFD (one code point for one, so every offset stays
right), and what a match returns (groups, the text :meth:`sub` keeps) is cut from the text as
given, surrogates included. A pattern's own lone surrogates are read as U+FFFD too.

RE2's ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII; a pattern that means letters of any
script says ``\\pL`` (or is written as a scan). ``docs/reliability.md`` lists every regex of the
package and why each is linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

import re2

__all__ = ["LinearPattern", "PatternError", "compile_linear", "escape"]

#: RE2's memory for one compiled pattern (its default, 8 MiB, is too small for the redaction
#: pattern that spells a long key every way it can be escaped).
MAX_PATTERN_MEMORY = 64 << 20


class PatternError(ValueError):
    """A pattern RE2 cannot run (a backreference, a lookaround, bad syntax, too large)."""


class LinearPattern(Protocol):
    """What the package uses of a compiled RE2 pattern (the ``re.Pattern`` methods)."""

    def search(self, text: str, pos: int = ..., endpos: int = ...) -> Any: ...
    def match(self, text: str, pos: int = ..., endpos: int = ...) -> Any: ...
    def fullmatch(self, text: str, pos: int = ..., endpos: int = ...) -> Any: ...
    def finditer(self, text: str, pos: int = ..., endpos: int = ...) -> Any: ...
    def sub(self, repl: Any, text: str, count: int = ...) -> str: ...


def compile_linear(pattern: str, *, ignore_case: bool = False, dot_all: bool = False) -> Any:
    """``pattern`` compiled by RE2 (same methods as a ``re.Pattern``); :class:`PatternError`
    when RE2 cannot run it."""
    options = re2.Options()
    options.log_errors = False  # a refused pattern is our exception, not a line on stderr
    options.max_mem = MAX_PATTERN_MEMORY
    options.case_sensitive = not ignore_case
    options.dot_nl = dot_all
    try:
        return _Linear(re2.compile(_encodable(pattern), options))
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(str(detail)) from None


def escape(text: str) -> str:
    """``text`` as a literal in an RE2 pattern."""
    escaped: str = re2.escape(_encodable(text))
    return escaped


#: One lone surrogate (one character class: linear in the text).
_SURROGATE = re.compile("[\ud800-\udfff]")
_NULL_SPAN = (-1, -1)


def _encodable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, a character of the same length
    (``text`` itself when it holds none: the common case costs one ``isascii`` or one scan)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


class _Linear:
    """A compiled RE2 pattern that also takes text holding lone surrogates (see the module
    docstring): RE2 runs on :func:`_encodable` text, the matches it returns read the text as
    given. Text without surrogates goes straight to RE2."""

    __slots__ = ("_re",)

    def __init__(self, compiled: Any) -> None:
        self._re = compiled

    @property
    def pattern(self) -> str:
        return str(self._re.pattern)

    @property
    def groups(self) -> int:
        return int(self._re.groups)

    @property
    def groupindex(self) -> Any:
        return self._re.groupindex

    def _run(self, method: str, text: str, pos: int | None, endpos: int | None) -> Any:
        clean = _encodable(text)
        found = getattr(self._re, method)(clean, pos, endpos)
        return found if found is None or clean is text else _Match(found, text)

    def search(self, text: str, pos: int | None = None, endpos: int | None = None) -> Any:
        return self._run("search", text, pos, endpos)

    def match(self, text: str, pos: int | None = None, endpos: int | None = None) -> Any:
        return self._run("match", text, pos, endpos)

    def fullmatch(self, text: str, pos: int | None = None, endpos: int | None = None) -> Any:
        return self._run("fullmatch", text, pos, endpos)

    def finditer(self, text: str, pos: int | None = None, endpos: int | None = None) -> Any:
        clean = _encodable(text)
        found = self._re.finditer(clean, pos, endpos)
        return found if clean is text else (_Match(m, text) for m in found)

    def subn(self, repl: str | Callable[[Any], str], text: str, count: int = 0) -> tuple[str, int]:
        clean = _encodable(text)
        if clean is text:
            done: tuple[str, int] = self._re.subn(repl, text, count)
            return done
        pieces: list[str] = []
        end = made = 0
        for m in self.finditer(text):
            if count and made >= count:
                break
            pieces.append(text[end : m.start()])
            pieces.append(repl(m) if callable(repl) else m.expand(repl))
            end = m.end()
            made += 1
        pieces.append(text[end:])
        return "".join(pieces), made

    def sub(self, repl: str | Callable[[Any], str], text: str, count: int = 0) -> str:
        return self.subn(repl, text, count)[0]


#: A group reference in a replacement template (the package's own text, never untrusted).
_TEMPLATE_REF = re.compile(r"\\(?:g<([^>]*)>|([1-9][0-9]?)|(\\))")


class _Match:
    """An RE2 match over :func:`_encodable` text whose groups are cut from the original text
    (same offsets)."""

    __slots__ = ("_m", "_text")

    def __init__(self, m: Any, text: str) -> None:
        self._m = m
        self._text = text

    @property
    def string(self) -> str:
        return self._text

    @property
    def re(self) -> Any:
        return self._m.re

    def _index(self, group: int | str) -> int:
        return self._m.re.groupindex[group] if isinstance(group, str) else group

    def span(self, group: int | str = 0) -> tuple[int, int]:
        span: tuple[int, int] = self._m.span(self._index(group))
        return span

    def start(self, group: int | str = 0) -> int:
        return self.span(group)[0]

    def end(self, group: int | str = 0) -> int:
        return self.span(group)[1]

    def __getitem__(self, group: int | str) -> str | None:
        span = self.span(group)
        return None if span == _NULL_SPAN else self._text[span[0] : span[1]]

    def group(self, *groups: int | str) -> Any:
        found = tuple(self[g] for g in groups or (0,))
        return found[0] if len(found) == 1 else found

    def groups(self, default: Any = None) -> tuple[Any, ...]:
        found = (self[g] for g in range(1, self._m.re.groups + 1))
        return tuple(default if g is None else g for g in found)

    def groupdict(self, default: Any = None) -> dict[str, Any]:
        return {
            name: default if self[i] is None else self[i]
            for name, i in self._m.re.groupindex.items()
        }

    def expand(self, template: str) -> str:
        """``template`` with ``\\N``, ``\\g<N>``, ``\\g<name>`` replaced by groups and ``\\\\`` by a
        backslash (the templates the package writes; other escapes are kept as written)."""

        def one(ref: Any) -> str:
            if ref.group(3):
                return "\\"
            name = ref.group(1) if ref.group(1) is not None else ref.group(2)
            return self[int(name) if name.isdigit() else name] or ""

        return _TEMPLATE_REF.sub(one, template)
