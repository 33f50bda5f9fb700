"""Text from an MCP server made safe to print: names, descriptions and messages are untrusted.

HTML output escapes or sanitizes them where it is built (the notebook layer); these helpers
are for plain text (``text/plain`` outputs, error lines, a terminal): no control characters
(an ANSI escape could rewrite a terminal), one line where one line is expected, bounded.
"""

from __future__ import annotations

__all__ = ["one_line", "printable"]


def printable(text: str) -> str:
    """``text`` without control characters (tab and newline kept; others become ``�``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (runs of white space as one space), at most ``limit`` characters."""
    flat = " ".join(printable(text[: limit * 4]).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
