"""Docstring parsing for tool schemas: the description and per-parameter descriptions.

Three common styles are understood, and may be mixed:

* Google: an ``Args:`` (or ``Arguments:`` / ``Parameters:`` / ``Attributes:``) section with
  ``name (type): text`` lines, continuation lines indented further;
* NumPy: a ``Parameters`` (or ``Attributes``) header underlined with dashes, ``name : type``
  lines, the text indented below;
* Sphinx/reST: ``:param name: text`` or ``:param type name: text`` fields.

The description is the text before the first section (summary and further paragraphs).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["ParsedDocstring", "parse_docstring"]

_GOOGLE_PARAM_HEADERS = {"args", "arguments", "parameters", "params", "attributes", "keyword args"}
# Each pattern below is matched against one line, anchored, with no two quantifiers that can
# take the same characters: linear in the line (docs/reliability.md).
_GOOGLE_ITEM = re.compile(r"^\*{0,2}(\w+)(?:\s*\(([^)]*)\))?\s*:\s*(.*)$")
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_SPHINX_PARAM_WORDS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})
_SPHINX_FIELD = re.compile(r"^:\w[^:]*:")


@dataclass(slots=True)
class ParsedDocstring:
    """What :func:`parse_docstring` found: ``description`` and ``params`` (name -> text)."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def _join(lines: list[str]) -> str:
    """Join continuation lines; blank lines become paragraph breaks."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join(" ".join(p) for p in paragraphs if p)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split a docstring into its description and parameter descriptions.

    >>> p = parse_docstring('''Add two numbers.
    ...
    ...     Args:
    ...         a: The first one.
    ...         b (int): The second
    ...             one.
    ...     ''')
    >>> p.description, p.params
    ('Add two numbers.', {'a': 'The first one.', 'b': 'The second one.'})
    """
    if not doc:
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    out = ParsedDocstring()
    intro: list[str] = []
    in_intro = True
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        # NumPy section: a header line underlined with dashes.
        if stripped and _UNDERLINE.match(nxt):
            in_intro = False
            header = stripped.lower()
            i += 2
            body: list[str] = []
            while i < len(lines) and not (
                lines[i].strip()
                and i + 1 < len(lines)
                and _UNDERLINE.match(lines[i + 1])
                and _indent(lines[i]) == 0
            ):
                body.append(lines[i])
                i += 1
            if header in _GOOGLE_PARAM_HEADERS or header in {"other parameters"}:
                _numpy_items(body, out.params)
            continue
        # Google section: "Args:" at the left margin.
        header_match = _GOOGLE_HEADER.match(line)
        if header_match and _indent(line) == 0:
            in_intro = False
            header = header_match.group(1).strip().lower()
            i += 1
            body = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > 0):
                body.append(lines[i])
                i += 1
            if header in _GOOGLE_PARAM_HEADERS:
                _google_items(body, out.params)
            continue
        # Sphinx fields.
        if _SPHINX_FIELD.match(stripped):
            in_intro = False
            param = _sphinx_param(stripped)
            i += 1
            text = [param[1]] if param else []
            while i < len(lines) and lines[i].strip() and _indent(lines[i]) > 0:
                text.append(lines[i])
                i += 1
            if param:
                out.params[param[0]] = _join(text)
            continue
        if in_intro:
            intro.append(line)
        i += 1
    out.description = _join(intro)
    return out


def _sphinx_param(line: str) -> tuple[str, str] | None:
    """``(name, text)`` of a ``:param [type] name: text`` line, or ``None``. Split by hand: a
    regex for "a keyword, maybe a type, the name" had three quantifiers over the same spaces
    and backtracked cubically on a long line with no second colon."""
    head, colon, text = line[1:].partition(":")
    words = head.split()
    if not colon or len(words) < 2 or words[0] not in _SPHINX_PARAM_WORDS:
        return None
    if head[:1].isspace() or not head[len(words[0]) :][:1].isspace():
        return None  # the keyword right after the colon, then white space
    name = words[-1]
    if not all(ch.isalnum() or ch == "_" for ch in name):
        return None
    return name, text.lstrip()


def _google_items(body: list[str], params: dict[str, str]) -> None:
    base = min((_indent(b) for b in body if b.strip()), default=0)
    name: str | None = None
    text: list[str] = []
    for line in body:
        if line.strip() and _indent(line) == base:
            if name:
                params[name] = _join(text)
            m = _GOOGLE_ITEM.match(line.strip())
            name, text = (m.group(1), [m.group(3)]) if m else (None, [])
        elif name:
            text.append(line)
    if name:
        params[name] = _join(text)


def _numpy_items(body: list[str], params: dict[str, str]) -> None:
    base = min((_indent(b) for b in body if b.strip()), default=0)
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        for n in names:
            params[n] = _join(text)

    for line in body:
        if line.strip() and _indent(line) == base:
            flush()
            head = line.strip().split(":", 1)[0]
            names = [n.strip().lstrip("*") for n in head.split(",") if n.strip()]
            text = []
        elif names:
            text.append(line)
    flush()
