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
from notebook_llm.core.redaction import redact
from notebook_llm.engine.pricing import price_of
from notebook_llm.engine.providers import ProviderConfig
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


def test_a_plugin_declares_a_provider_in_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """One ``ProviderConfig`` says everything about the provider: its adapter (shipped by the
    same plugin, made on first use), URL, key variable, default model, models and prices."""
    made: list[str] = []

    def make() -> MockAdapter:
        made.append("acme")
        adapter = MockAdapter()
        adapter.name = "acme"
        return adapter

    def register(host: plugins_mod.PluginHost) -> None:
        host.add_adapter_source("acme", make)
        host.declare_provider(
            ProviderConfig(
                "acme",
                "acme",
                "https://api.acme.test/v1",
                "echo",
                "ACME_KEY",
                models=["echo", "lorem"],
                prices={"echo": (1.0, 2.0)},
            )
        )

    _module(monkeypatch, "fake_acme_plugin", register)
    _entry_points(monkeypatch, acme="fake_acme_plugin")
    monkeypatch.setenv("ACME_KEY", "sk-acme-0123456789abcdefXYZ")
    engine = Engine(config_file=False, env_file=False)
    assert made == []  # declared, not loaded
    assert "acme" in engine.provider_names()
    config = engine.provider("acme")
    assert (config.base_url, config.model, config.api_key_env) == (
        "https://api.acme.test/v1",
        "echo",
        "ACME_KEY",
    )
    assert config.source == "plugin"
    assert price_of(engine, "acme", None) == (1.0, 2.0)
    assert engine.complete_sync("acme", prompt="declared").text == "declared"
    assert made == ["acme"]
    assert redact("key sk-acme-0123456789abcdefXYZ") == "key ***"  # known before any use


def test_every_builtin_provider_is_one_declaration() -> None:
    from notebook_llm.engine.routing.builtin_plugin import PROVIDERS
    from notebook_llm.engine.routing.lua_files import builtin_adapters_dir

    engine = Engine(config_file=False, env_file=False)
    declared = engine.declarations()
    scripts = {p.stem for p in builtin_adapters_dir().glob("*.lua")}
    assert {p.name for p in PROVIDERS} == scripts == set(declared) - {"mock", "mock-direct"}
    assert (
        declared["mock"].models
        == declared["mock-direct"].models
        == ["echo", "reasoning", "tools", "lorem"]
    )
    for provider in PROVIDERS:
        assert all((provider.base_url, provider.api_key_env, provider.model)), provider.name
        assert declared[provider.name].adapter == provider.name  # its own shipped script
    # the prices once in a table of their own are their providers' now, and still priced
    assert price_of(engine, "groq", None) == (0.59, 0.79)
    assert price_of(engine, "gemini", "gemini-2.0-flash") == (0.10, 0.40)
    engine.add_provider("my-groq", adapter="mock-direct", model="llama-3.3-70b-versatile")
    assert price_of(engine, "my-groq", None) == (0.59, 0.79)  # the model's price, any provider
