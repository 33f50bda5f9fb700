"""Which Lua line an error points at: the one place that reads ``CHUNK:LINE:`` out of a Lua
message (the sandbox, ``%%adapter`` error views and the playground all ask here)."""

from __future__ import annotations

import re

from ..errors import LlmError

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
