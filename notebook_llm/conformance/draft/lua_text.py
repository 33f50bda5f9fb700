"""Safe Lua text from untrusted data: string literals, comment text and paths.

Field names and values in a drafted script come from a recorded body, so they are untrusted:
a key may hold quotes, newlines, ``]]``, NUL or bytes that are not UTF-8, and a body may echo
an API key. Nothing from the body reaches the Lua source except through :func:`lua_str` (a
string literal) or :func:`comment_text` (a line comment): both pass the package's redaction
(known keys, ``key=`` values, URL credentials) and emit printable ASCII only. No library writes
Lua literals for Python, hence these few lines by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.redaction import redact

__all__ = [
    "EACH",
    "FIRST",
    "Path",
    "body_str",
    "comment_text",
    "lua_path",
    "lua_str",
    "sample",
    "show_path",
]

#: Path steps besides dict keys: the first element of an array, or each element of it.
FIRST = 1
EACH = -1
Path = tuple[str | int, ...]


def _ident(step: str) -> bool:
    """A Lua-style identifier (ASCII letter or ``_``, then letters, digits, ``_``): checked by
    hand, as everything here runs on a body's text (no regex over untrusted text)."""
    return (
        bool(step)
        and step.isascii()
        and (step[0].isalpha() or step[0] == "_")
        and all(ch.isalnum() or ch == "_" for ch in step)
    )


def sample(text: str, limit: int) -> str:
    """``text`` redacted (lone surrogates pass too), then cut to ``limit`` characters with ``…``: a
    sample of a value for a report (redacting first, so a key cut in two is still hidden)."""
    text = redact(text)
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def lua_str(value: str) -> str:
    """A Lua string literal holding exactly the UTF-8 bytes of ``value`` redacted (lone
    surrogates kept as their 3-byte forms; a known key or a ``key=`` value is hidden, as in
    every text the package writes). Only printable ASCII is written as itself; every other
    byte is a three-digit decimal escape (so a digit after it cannot extend it), ``"`` and
    ``\\`` are backslash-escaped, so the literal can never end early or span a line."""
    out = ['"']
    for byte in redact(value).encode("utf-8", "surrogatepass"):
        if byte in (0x22, 0x5C):
            out.append("\\" + chr(byte))
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03d}")
    out.append('"')
    return "".join(out)


def comment_text(value: str, limit: int = 80) -> str:
    """``value`` made safe for a ``--`` line comment: printable ASCII only (other characters as
    ``\\x..``/``\\u....`` escapes, so no newline can end the comment), ``]]`` broken up, cut to
    ``limit`` characters; known secrets and ``key=`` values are hidden (``redact``)."""
    text = redact(value)  # a body may echo a key
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(ch if 0x20 <= ord(ch) < 0x7F else f"\\x{ord(ch):02x}" for ch in text)
    text = text.replace("]]", "] ]").replace("[[", "[ [")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def body_str(value: str) -> str:
    """:func:`lua_str` of a string the runtime compares with a *decoded* payload (a key, a
    kind, a value): a lone surrogate (a JSON ``"\\ud800"`` escape) is written as U+FFFD, as the
    runtime's ``json.decode`` reads it."""
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        value = "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in value)
    return lua_str(value)


def show_path(path: Sequence[str | int]) -> str:
    """A path as a reader sees it in a comment: ``choices[1].delta.content``, ``parts[*].text``."""
    out: list[str] = []
    for step in path:
        if isinstance(step, int) and step == EACH:
            out.append("[*]")
        elif isinstance(step, int) and step == FIRST:
            out.append("[1]")
        elif isinstance(step, str) and _ident(step):
            out.append(("." if out else "") + step)
        else:
            out.append("[" + comment_text(repr(step), 40) + "]")
    return comment_text("".join(out) or "(the payload itself)", 120)


def lua_path(path: Sequence[str | int]) -> str:
    """A path as a Lua table: keys as string literals, ``1`` for the first element and ``EACH``
    for every element."""
    parts: list[str] = []
    for step in path:
        if isinstance(step, str):
            parts.append(body_str(step))
        elif step == EACH:
            parts.append("EACH")
        else:
            parts.append(str(int(step)))
    return "{ " + ", ".join(parts) + " }" if parts else "{}"
