"""Providers as data: presets, config file, environment, keys."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import ScriptedAdapter
from test_engine import text_stream

from notebook_llm import Engine, LlmError
from notebook_llm.core.redaction import redact

FAKE_KEY = "sk-test-FAKE-0123456789abcdef"


def write_config(text: str) -> Path:
    path = Path(os.environ["NOTEBOOK_LLM_CONFIG"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_presets_exist_for_every_builtin_provider() -> None:
    engine = Engine()
    for name in [
        "openai",
        "deepseek",
        "anthropic",
        "gemini",
        "mistral",
        "groq",
        "github",
        "ollama",
        "mock",
    ]:
        assert name in engine.provider_names()


def test_missing_key_names_the_variable() -> None:
    engine = Engine()
    with pytest.raises(LlmError) as info:
        engine.complete_sync("openai", prompt="hi")
    assert info.value.code == "MISSING_CREDENTIAL"
    assert "OPENAI_API_KEY" in info.value.message
    assert info.value.provider == "openai"


def test_key_from_environment_reaches_adapter_but_never_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_KEY", FAKE_KEY)
    engine = Engine()
    adapter = ScriptedAdapter(text_stream("ok"))
    engine.add_provider("p", adapter=adapter, api_key_env="MY_KEY")
    engine.complete_sync("p", prompt="x")
    opts = adapter.calls[0]
    assert opts.api_key == FAKE_KEY
    assert FAKE_KEY not in repr(opts)
    assert FAKE_KEY not in repr(engine.provider("p"))
    err = LlmError(f"server said: bad key {FAKE_KEY}")
    assert FAKE_KEY not in str(err)
    assert "***" in str(err)
    assert FAKE_KEY not in redact(f"Authorization: Bearer {FAKE_KEY}")


def test_explicit_key_is_secret_in_repr() -> None:
    engine = Engine()
    adapter = ScriptedAdapter(text_stream("ok"))
    engine.add_provider("p", adapter=adapter, api_key=FAKE_KEY)
    assert FAKE_KEY not in repr(engine.provider("p"))
    engine.complete_sync("p", prompt="x")
    assert adapter.calls[0].api_key == FAKE_KEY


def test_session_key_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "env-key-value-123")
    engine = Engine()
    adapter = ScriptedAdapter(text_stream("ok"))
    engine.add_provider("p", adapter=adapter, api_key_env="MY_KEY")
    engine.set_key("p", "session-key-value-456")
    engine.complete_sync("p", prompt="x")
    assert adapter.calls[0].api_key == "session-key-value-456"


def test_env_file_supplies_keys_without_touching_environ(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={FAKE_KEY}\n")
    engine = Engine()
    assert engine.has_key("openai")
    assert "OPENAI_API_KEY" not in os.environ
    assert FAKE_KEY not in redact(f"key is {FAKE_KEY}")


def test_config_file_adds_an_openai_compatible_provider() -> None:
    write_config(
        """
[providers.local]
adapter = "scripted"
base_url = "http://127.0.0.1:9/v1"
model = "tiny"
"""
    )
    engine = Engine()
    adapter = ScriptedAdapter(text_stream("ok"))
    engine.add_adapter(adapter)
    assert engine.complete_sync("local", prompt="x").text == "ok"
    opts = adapter.calls[0]
    assert (opts.base_url, opts.model, opts.api_key) == ("http://127.0.0.1:9/v1", "tiny", None)


def test_config_file_overrides_a_preset_and_env_overrides_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_config('[providers.openai]\nmodel = "from-file"\n')
    engine = Engine()
    assert engine.provider("openai").model == "from-file"
    monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_MODEL", "from-env")
    monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    engine = Engine()
    cfg = engine.provider("openai")
    assert (cfg.model, cfg.base_url) == ("from-env", "http://127.0.0.1:1/v1")


def test_config_file_refuses_keys_and_unknown_fields() -> None:
    write_config('[providers.openai]\napi_key = "sk-nope"\n')
    with pytest.raises(LlmError, match="api_key_env"):
        Engine()
    write_config('[providers.openai]\nmodle = "typo"\n')
    with pytest.raises(LlmError, match="unknown keys"):
        Engine()
    write_config("this is not toml = = =")
    with pytest.raises(LlmError, match="cannot read config file"):
        Engine()


def test_add_provider_by_adapter_name_and_unknown_adapter() -> None:
    engine = Engine()
    with pytest.raises(LlmError) as info:
        engine.add_provider("x", adapter="no-such-adapter")
    assert info.value.code == "NO_ADAPTER"
    engine.add_provider("x", adapter="mock-direct", model="echo")
    assert engine.complete_sync("x", prompt="hey").text == "hey"


def test_add_provider_again_replaces_but_a_plugin_route_is_a_conflict() -> None:
    engine = Engine()
    engine.add_provider("x", adapter="mock-direct", model="echo")
    engine.add_provider("x", adapter="mock-direct", model="reasoning")  # a re-run cell
    assert engine.provider("x").model == "reasoning"
    with pytest.raises(LlmError) as info:
        engine.add_provider("mock", adapter="mock-direct")
    assert info.value.code == "DUPLICATE_ADAPTER"


@pytest.mark.parametrize(
    "text",
    [
        '[providers.openai]\nheaders = "x"\n',
        '[providers.openai]\nmodels = "gpt"\n',
        'defaults = "openai"\n',
        "prices = 3\n",
    ],
)
def test_config_file_with_wrong_types_is_a_clear_error(text: str) -> None:
    write_config(text)
    with pytest.raises(LlmError) as info:
        Engine()
    assert info.value.code == "INVALID_OPTIONS"
