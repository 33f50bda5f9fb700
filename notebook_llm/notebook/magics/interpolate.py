"""Safe ``{name}`` interpolation of prompts from the user namespace.

Rules (documented for users in ``%%llm?``):

* ``{name}``, ``{name.attr}``, ``{name[0]}``, ``{name['key']}`` and chains of these
  (``{df.columns[0]}``) are replaced by ``str()`` of the value found in the namespace.
* Anything else in braces is left exactly as written: a brace group is only replaced when it is
  a field of the forms above *and* it resolves. ``{x}`` with no variable ``x``, ``{"a": 1}``,
  ``\\frac{a}{b}``, ``{ x }`` (spaces), ``f"{x!r}"`` and ``{x:>3}`` are all kept unchanged,
  so prompts containing code, JSON or LaTeX work as they are.
* Escape: ``{{name}}`` (doubled braces around a field that *would* resolve) gives the literal
  text ``{name}``. Doubled braces around anything else are left as they are (Jinja templates
  such as ``{{ user }}`` stay intact).
* A field that does not resolve but is one typo away from a defined name (``{ctiy}`` next to
  ``city``) is still sent as written; :func:`near_misses` finds it, so the magic can say
  "did you mean {city}?" in one line (``difflib``, close matches only).
* No code is ever evaluated: fields are parsed by a small resolver that only does namespace
  lookup, ``getattr`` of public attributes (no leading underscore), and indexing with an integer
  or string literal. No calls, no operators. Properties run as attribute access normally does.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from ...core.errors import ErrorCode, LlmError

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_STEP = rf"(?:\.{_NAME}|\[-?\d+\]|\['[^'\\\]]*'\]|\[\"[^\"\\\]]*\"\])"
_FIELD = rf"{_NAME}{_STEP}*"
# ``{{field}}`` (escape) or ``{field}``; the doubled form is tried first.
_PATTERN = re.compile(rf"\{{\{{({_FIELD})\}}\}}|\{{({_FIELD})\}}")
_STEP_RE = re.compile(rf"\.({_NAME})|\[(-?\d+)\]|\['([^'\\\]]*)'\]|\[\"([^\"\\\]]*)\"\]")

_MISSING = object()


def resolve(field: str, namespace: Mapping[str, Any]) -> Any:
    """The value a field names, or the module-private ``_MISSING`` sentinel if it does not
    resolve (unknown name, private attribute, missing key/index, any exception on access)."""
    m = re.match(_NAME, field)
    if m is None or m.group(0) not in namespace:
        return _MISSING
    value = namespace[m.group(0)]
    for step in _STEP_RE.finditer(field, m.end()):
        attr, index, skey, dkey = step.groups()
        try:
            if attr is not None:
                if attr.startswith("_"):
                    return _MISSING
                value = getattr(value, attr)
            elif index is not None:
                value = value[int(index)]
            else:
                value = value[skey if skey is not None else dkey]
        except Exception:
            return _MISSING
    return value


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """Replace the fields of ``text`` that resolve in ``namespace`` (see the module rules)."""
    if "{" not in text:
        return text

    def replace(m: re.Match[str]) -> str:
        escaped, field = m.group(1), m.group(2)
        if escaped is not None:
            return (
                "{" + escaped + "}" if resolve(escaped, namespace) is not _MISSING else m.group(0)
            )
        value = resolve(field, namespace)
        if value is _MISSING:
            return m.group(0)
        try:
            shown = str(value)
        except Exception:
            return m.group(0)
        try:
            shown.encode("utf-8")
        except UnicodeEncodeError as exc:  # e.g. text decoded with errors="surrogateescape"
            raise LlmError(
                f"the variable {{{field}}} holds text that is not valid Unicode (a lone "
                f"surrogate {shown[exc.start]!r} at position {exc.start}): clean it first, e.g. "
                "with .encode('utf-8', 'replace').decode()",
                ErrorCode.INVALID_OPTIONS,
            ) from None
        return shown

    return _PATTERN.sub(replace, text)


def fields(text: str, namespace: Mapping[str, Any]) -> list[str]:
    """The fields of ``text`` that would be replaced (for a dry-run display)."""
    return [
        m.group(2)
        for m in _PATTERN.finditer(text)
        if m.group(2) and resolve(m.group(2), namespace) is not _MISSING
    ]


#: Names every IPython namespace has: never suggested.
_SHELL_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})


def near_misses(text: str, namespace: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, suggestion)`` for each ``{field}`` left as written whose name is a close match
    of a defined name: ``{ctiy}`` with ``city`` defined -> ``("ctiy", "city")``; a field whose
    name is defined (``{city.nope}``) or matches nothing close is not listed."""
    if "{" not in text:
        return []
    names = [n for n in namespace if not n.startswith("_") and n not in _SHELL_NAMES]
    out: list[tuple[str, str]] = []
    for m in _PATTERN.finditer(text):
        field = m.group(2)
        if not field or resolve(field, namespace) is not _MISSING:
            continue
        base = re.match(_NAME, field)
        if base is None or base.group(0) in namespace:
            continue
        close = difflib.get_close_matches(base.group(0), names, n=1, cutoff=0.75)
        if close and (field, close[0] + field[base.end() :]) not in out:
            out.append((field, close[0] + field[base.end() :]))
    return out
