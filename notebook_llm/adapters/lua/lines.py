"""Which Lua line an error points at: the one place that reads ``CHUNK:LINE:`` out of a Lua
message (the sandbox, ``%%adapter`` error views and the playground all ask here)."""

from __future__ import annotations

import re

from ...core.errors import LlmError

#: ``[string "..."]:LINE:``, ``file.lua:LINE:`` or ``=name:LINE:`` at the start of a message.
_ANY_CHUNK = re.compile(r"(?:\"\]|\.lua|^[\w.-]+):(\d+):")


def line_of(message: str, chunkname: str | None = None) -> int | None:
    """The line ``message`` points at. With ``chunkname`` (as given to Lua's ``load``: a leading
    ``=`` or ``@`` is not shown in messages) only that chunk counts, so a line of another chunk
    quoted in the message is not taken for the adapter's."""
    if chunkname is None:
        m = _ANY_CHUNK.search(message)
    else:
        shown = chunkname[1:] if chunkname[:1] in ("=", "@") else chunkname
        m = re.search(re.escape(shown) + r":(\d+):", message)
    return int(m.group(1)) if m else None


def lua_line_of(err: LlmError) -> int | None:
    """The Lua line of an adapter error: its ``lua_line``, else the one its message names."""
    return err.lua_line if err.lua_line is not None else line_of(err.message)


def cell_script(cell: str, magic_line: str = "%%adapter") -> str:
    """The Lua script of a ``%%adapter`` cell, numbered as the cell is: the magic's line (line 1
    of the cell, which IPython does not pass on) becomes a comment, so every line a Lua message,
    an error view or ``%adapter show`` names is the line the notebook shows."""
    return f"-- {magic_line}\n{cell}"


def excerpt(source: str, line: int, context: int = 3) -> list[tuple[int, str, bool]]:
    """``(number, text, is_the_line)`` for ``line`` of ``source`` and ``context`` lines around
    it (an error "near <eof>" names the line after the last: its context is still shown)."""
    lines = source.splitlines()
    first, last = max(1, line - context), min(len(lines), line + context)
    return [(n, lines[n - 1], n == line) for n in range(first, last + 1)]
