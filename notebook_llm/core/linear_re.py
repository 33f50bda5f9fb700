"""Regexes that run in time linear in the text: RE2 (the ``google-re2`` package), for every
pattern that meets untrusted text and is not better written as a scan.

Python's ``re`` backtracks: a pattern with overlapping quantifiers can take minutes on a crafted
or unlucky text, and while it runs it holds the GIL, so neither Stop, the kernel interrupt nor a
deadline can end it. RE2 compiles a pattern to an automaton and never backtracks (no
backreferences, no lookaround: a pattern that needs them is refused when compiled, see
:class:`PatternError`).

RE2's ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII; a pattern that means letters of any
script says ``\\pL`` (or is written as a scan). ``docs/reliability.md`` lists every regex of the
package and why each is linear.
"""

from __future__ import annotations

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
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(str(detail)) from None


def escape(text: str) -> str:
    """``text`` as a literal in an RE2 pattern."""
    escaped: str = re2.escape(text)
    return escaped
