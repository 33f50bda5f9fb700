"""Which exchanges of a ``%llm record`` file an adapter made: the ones the kit replays through it.

A recording holds every provider's exchanges of a session (the mock's, the user's adapter's,
...), and it does not name the adapter that made each one. An exchange is judged the adapter's
when its request could have come from the script:

* its URL path ends with the script's ``endpoint`` or ``stream_endpoint`` (``{model}`` and
  ``{api_key}`` match any segment; a ``base_url`` may add a prefix such as ``/openai/v1``);
* and its JSON body has every top-level key the script puts in its simplest request (the
  kit's ``text`` probe, minus the streaming flags), so two APIs that share a path
  (``/chat/completions``) but not a body shape are told apart.

An exchange whose request was not JSON (or when the probe fails) is judged by its path alone.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..adapters.lua.lua_adapter import LuaAdapter
from ..core.linear_re import compile_linear, escape
from .fixtures import Fixture
from .requests import check_requests, request_cases

__all__ = ["Selection", "select_exchanges"]

_STREAM_KEYS = frozenset({"stream", "stream_options"})


@dataclass
class Selection:
    """The adapter's exchanges of one recording, and a word on the others."""

    own: list[Fixture] = field(default_factory=list)
    skipped: list[Fixture] = field(default_factory=list)

    def note(self, recording: str, adapter: str) -> str:
        """One line: how many exchanges were replayed and where the skipped ones went."""
        total = len(self.own) + len(self.skipped)
        where = Counter(_where(f) for f in self.skipped)
        to = ", ".join(f"{w} ×{n}" if n > 1 else w for w, n in where.most_common(3))
        if len(where) > 3:
            to += ", …"
        if not self.own:
            return (
                f"{recording} has no exchange made by adapter {adapter}: its {total} "
                f"exchange{'s' if total != 1 else ''} went to {to}; record a session that "
                f"calls a provider using {adapter}"
            )
        return (
            f"{recording}: replayed the {len(self.own)} of {total} exchanges made by adapter "
            f"{adapter}; skipped {len(self.skipped)} made by other adapters (to {to})"
        )


def _where(fx: Fixture) -> str:
    parts = urlsplit(fx.url)
    return f"{parts.netloc}{parts.path}" if parts.netloc else parts.path or "?"


def _endpoint_pattern(endpoint: str) -> Any:
    """The paths an endpoint template (``/models/{model}:stream``) stands for, as an RE2
    pattern: a recording's path is the file's, and two ``[^/]*`` in a row backtrack
    polynomially in Python's ``re``."""
    path = endpoint.split("?", 1)[0]
    pieces = re.split(r"(\{model\}|\{api_key\})", path)
    body = "".join("[^/]*" if p in ("{model}", "{api_key}") else escape(p) for p in pieces)
    return compile_linear(f"{body}/?$")


def _probe_keys(adapter: LuaAdapter) -> frozenset[str] | None:
    """The top-level body keys of the script's simplest request, or ``None`` if unknown."""
    try:
        result = check_requests(adapter, request_cases()[:1])[0]
    except Exception:  # the request side is checked (and reported) on its own
        return None
    if result.error is not None or not isinstance(result.body, dict):
        return None
    return frozenset(result.body) - _STREAM_KEYS


def select_exchanges(adapter: LuaAdapter, fixtures: Sequence[Fixture]) -> Selection:
    """Split a recording's fixtures into the adapter's and the others (see the module doc)."""
    endpoints = {
        str(adapter.meta.get(key))
        for key in ("endpoint", "stream_endpoint")
        if adapter.meta.get(key)
    } or {"/chat/completions"}
    patterns = [_endpoint_pattern(e) for e in endpoints]
    keys = _probe_keys(adapter)
    out = Selection()
    for fx in fixtures:
        path = urlsplit(fx.url).path if fx.url else ""
        mine = not path or any(p.search(path) for p in patterns)
        if mine and keys is not None and isinstance(fx.request, dict):
            mine = keys <= set(fx.request)
        (out.own if mine else out.skipped).append(fx)
    return out
