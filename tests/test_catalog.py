"""The adapter catalog (notebook_llm/engine/routing/catalog.py): reload and overrides are not Lua-specific.

Adapter loading is not in ``engine.py``; the catalog reloads any adapter that keeps
its source and can swap it in place (``Reloadable``), instead of branching on ``LuaAdapter``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from notebook_llm import Engine, Event, Finish, FinishReason, GenerateOptions, LlmAdapter, LlmError
from notebook_llm.engine.routing.catalog import Catalog, Reloadable


class Templated(LlmAdapter):
    """A Python adapter made from a text template, reloadable in place (no Lua)."""

    name = "templated"

    def __init__(self, source: str, path: Path | None = None) -> None:
        self.source = source
        self.origin = "built-in"
        self.path = path
        self.reloads = 0

    def reload(self, source: str | None = None) -> None:
        if source is None:
            assert self.path is not None
            source = self.path.read_text("utf-8")
        self.source = source
        self.reloads += 1

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        yield Finish(FinishReason("stop"))


class Plain(LlmAdapter):
    name = "plain"

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        yield Finish(FinishReason("stop"))


def test_any_reloadable_adapter_is_reloaded_in_place(tmp_path: Path) -> None:
    script = tmp_path / "t.txt"
    script.write_text("v1", "utf-8")
    adapter = Templated("v0", path=script)
    assert isinstance(adapter, Reloadable)
    engine = Engine(config_file=False, env_file=False)
    engine.add_adapter(adapter)
    assert engine.reload_adapter("templated") is adapter
    assert (adapter.source, adapter.reloads) == ("v1", 1)


def test_a_plain_adapter_is_not_reloadable() -> None:
    catalog = Catalog()
    catalog.add(Plain())
    assert not isinstance(Plain(), Reloadable)
    with pytest.raises(LlmError, match="nothing to reload"):
        catalog.reload("plain")


def test_unload_gives_a_replaced_catalog_adapter_back() -> None:
    """A session load over a catalog adapter is an override: unload restores the original
    source in place (the same object, so routes holding it keep working)."""
    catalog = Catalog()
    original = Templated("original")
    catalog.add_resolver(lambda name: original if name == "templated" else None)
    source = (
        'return { name = "templated", transform_request = function(r) return r end,'
        " transform_stream_chunk = function(c) return c end }"
    )
    assert catalog.load(source, name="templated") == "templated"
    assert original.source == source
    assert original.origin == "cell"
    assert catalog.unload("templated") is None
    assert (original.source, original.origin) == ("original", "built-in")
    assert catalog.get("templated") is original
