"""Engine plugins: built-ins and entry points arrive through the same ``register(host)`` hook."""

from __future__ import annotations

import logging
import sys
import types
from importlib import metadata
from typing import Any

import pytest

from notebook_llm import Engine
from notebook_llm.adapters.mock.direct_adapter import MockAdapter
from notebook_llm.engine.routing import plugins as plugins_mod


def _entry_points(monkeypatch: pytest.MonkeyPatch, **targets: str) -> None:
    eps = [
        metadata.EntryPoint(name, value, plugins_mod.PLUGIN_GROUP)
        for name, value in targets.items()
    ]

    def fake(**kwargs: Any) -> list[metadata.EntryPoint]:
        return eps if kwargs.get("group") == plugins_mod.PLUGIN_GROUP else []

    monkeypatch.setattr(plugins_mod.metadata, "entry_points", fake)


def _module(monkeypatch: pytest.MonkeyPatch, name: str, register: Any) -> None:
    mod = types.ModuleType(name)
    mod.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, mod)


def test_builtins_are_a_default_plugin() -> None:
    assert plugins_mod.DEFAULT_PLUGINS == ("notebook_llm.engine.routing.builtin_plugin",)
    engine = Engine(config_file=False, env_file=False)
    assert engine.complete_sync(provider="mock-direct", prompt="hi").text == "hi"


def test_the_entry_point_group_keeps_its_published_name() -> None:
    """Third-party packages declare ``[project.entry-points."notebook_llm.plugins"]``: moving the
    module into ``engine/routing/`` must not rename the group they register under."""
    assert plugins_mod.PLUGIN_GROUP == "notebook_llm.plugins"


def test_an_entry_point_plugin_adds_a_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    def register(host: plugins_mod.PluginHost) -> None:
        host.add_provider("plugged", adapter=MockAdapter(), model="echo", needs_key=False)

    _module(monkeypatch, "fake_nb_plugin", register)
    _entry_points(monkeypatch, fake="fake_nb_plugin")
    engine = Engine(config_file=False, env_file=False)
    assert engine.complete_sync(provider="plugged", prompt="plugged in").text == "plugged in"


def test_a_broken_plugin_is_skipped_with_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(host: plugins_mod.PluginHost) -> None:
        raise RuntimeError("bad plugin")

    _module(monkeypatch, "fake_boom_plugin", boom)
    _entry_points(monkeypatch, boom="fake_boom_plugin", gone="no_such_module_xyz")
    with caplog.at_level(logging.WARNING, logger="notebook_llm.engine.routing.plugins"):
        engine = Engine(config_file=False, env_file=False)
    assert engine.complete_sync(provider="mock-direct", prompt="ok").text == "ok"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert any("'boom'" in line and "bad plugin" in line for line in lines)
    assert any("'gone'" in line and "ModuleNotFoundError" in line for line in lines)
    assert all("\n" not in line for line in lines)
