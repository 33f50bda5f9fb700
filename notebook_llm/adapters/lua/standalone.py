"""A script with the shipped libraries it requires written into it, for a runtime that has no
``require`` (the HomeAgent kernel; any other runtime of the contract).

The built-in adapters share their code through notebook_llm's sandboxed ``require``
(``adapters/lib/``). :func:`standalone_source` makes one self-contained file of a script: after
its leading comment it defines a local ``require`` that answers the names of the libraries the
script uses (and the ones those use), each library's text the body of a function, run once on
first ``require``, as Lua's own ``package.preload`` does. The script itself is not changed, so
its line numbers move by the length of what was put in; a script that requires nothing comes
back unchanged. ``python -m notebook_llm export-adapter NAME`` writes it.

Written here rather than with a Lua bundler (luacc, lua-amalgamate...): those are Lua programs
that read files, which the sandbox does not allow, and this is one string template.
"""

from __future__ import annotations

import re

from ...core.errors import ErrorCode, LlmError
from .runtime import library_names, library_text

__all__ = ["required_libraries", "standalone_source"]

#: ``require("name")``, ``require 'name'`` and the like with a literal name.
# (white space on one side of the optional "(" only: two adjacent \s* backtracked quadratically
# on "require" followed by a long run of spaces)
_REQUIRE = re.compile(r"""\brequire\s*(?:\(\s*)?(["'])([A-Za-z_][A-Za-z0-9_]*)\1""")

#: A leading long comment (``--[[ ... ]]``, ``--[==[ ... ]==]``), kept at the top.
_HEADER = re.compile(r"\A(\s*--\[(=*)\[.*?\]\2\][^\n]*\n)", re.DOTALL)


def required_libraries(source: str) -> list[str]:
    """The shipped libraries ``source`` requires, with the ones they require, each once, in
    the order they are first named."""
    shipped = set(library_names())
    order: list[str] = []
    pending = [m.group(2) for m in _REQUIRE.finditer(source)]
    while pending:
        name = pending.pop(0)
        if name in order or name not in shipped:
            continue
        order.append(name)
        text = library_text(name) or ""
        pending.extend(m.group(2) for m in _REQUIRE.finditer(text))
    return order


def standalone_source(source: str) -> str:
    """``source`` with the shipped libraries it requires inlined (unchanged if it requires
    none). A library that cannot be read is one ``INVALID_ADAPTER`` line."""
    names = required_libraries(source)
    if not names:
        return source
    parts = [
        "-- The built-in libraries this script requires, inlined by notebook_llm",
        "-- (python -m notebook_llm export-adapter) for a runtime without its `require`.",
        "local require",
        "do",
        "  local preload, loaded = {}, {}",
    ]
    for name in names:
        text = library_text(name)
        if text is None:
            raise LlmError(
                f"the built-in library {name!r} cannot be read (adapters/lib/{name}.lua)",
                ErrorCode.INVALID_ADAPTER,
            )
        parts += [f'  preload["{name}"] = function(...)', text.rstrip("\n"), "  end"]
    parts += [
        "  require = function(name)",
        "    if loaded[name] == nil then",
        "      local open = preload[name]",
        "      if open == nil then",
        '        error("require: no library \'" .. tostring(name) .. "\' in this file", 2)',
        "      end",
        "      loaded[name] = open(name)",
        "    end",
        "    return loaded[name]",
        "  end",
        "end",
        "",
    ]
    header = _HEADER.match(source)
    head, body = (header.group(1), source[header.end() :]) if header else ("", source)
    return head + "\n".join(parts) + "\n" + body
