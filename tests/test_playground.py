"""The adapter playground widget: state after reload, request view, fixture and live runs."""

from __future__ import annotations

from pathlib import Path

from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.conformance import SAMPLE_KEY
from notebook_llm.engine.engine import Engine
from notebook_llm.notebook.widgets.playground import MOCK, AdapterPlayground

ROOT = Path(__file__).resolve().parent.parent
WIRE = ROOT / "tests" / "fixtures" / "wire"


def _playground() -> AdapterPlayground:
    adapter = LuaAdapter.from_file(ROOT / "adapters" / "openai.lua")
    return AdapterPlayground(adapter, fixtures=[WIRE / "openai"])


def test_initial_state_shows_the_transformed_request() -> None:
    pg = _playground()
    assert pg.editor.value == pg.adapter.source
    assert "POST https://provider.example/chat/completions" in pg.request_view.value
    assert "authorization: ***" in pg.request_view.value
    assert SAMPLE_KEY not in pg.request_view.value
    pg.request_choice.value = "tools"
    assert "get_weather" in pg.request_view.value
    assert "stream_text_include_usage.sse" in pg.response_choice.options
    assert MOCK in pg.response_choice.options
    assert pg.widget.children


def test_fixture_run_fills_events_and_result() -> None:
    pg = _playground()
    pg.response_choice.value = "stream_tool_call_args_split.sse"
    pg.run_button.click()
    result = pg.last_result
    assert result is not None
    assert result.ok
    assert "tool-call-delta" in pg.events_view.value
    assert "multiply" in pg.result_view.value
    assert "validate_stream: passes" in pg.result_view.value


def test_failed_reload_keeps_previous_version_and_shows_line() -> None:
    pg = _playground()
    original = pg.adapter.source
    pg.editor.value = original.replace('version = "1.0.0"', 'version = "2"').replace(
        "return M\n", "return M +\n"
    )
    pg.reload_button.click()
    assert "reload failed" in pg.status.value
    assert "INVALID_ADAPTER" in pg.error_panel.value
    assert "return M +" in pg.error_panel.value
    assert "kept the previous version (1.0.0)" in pg.error_panel.value
    assert pg.adapter.source == original
    pg.editor.value = original.replace('version = "1.0.0"', 'version = "2"')
    assert pg.reload()
    assert pg.error_panel.value == ""
    assert pg.adapter.version == "2"
    assert "reloaded openai 2" in pg.status.value


def test_runtime_error_in_hook_shows_in_response_pane() -> None:
    pg = _playground()
    source = pg.adapter.source
    assert source.rstrip().endswith("\nreturn M")
    pg.editor.value = source.rstrip()[: -len("return M")] + (
        'function M.transform_stream_chunk(line)\n  error("boom")\nend\nreturn M\n'
    )
    assert pg.reload()
    pg.response_choice.value = "stream_text_include_usage.sse"
    result = pg.run()
    assert result.error is not None
    assert result.error.hook == "transform_stream_chunk"
    assert "boom" in pg.result_view.value
    assert "hook=transform_stream_chunk" in pg.result_view.value


def test_live_call_to_the_mock_server() -> None:
    pg = _playground()
    pg.response_choice.value = MOCK
    result = pg.run()
    assert result.ok, result.problems
    assert result.completion.text == "Hello!"
    assert "text-delta" in pg.events_view.value


def test_template_and_engine_adapter_by_name() -> None:
    pg = AdapterPlayground()
    assert pg.adapter.name == "playground"
    engine = Engine(config_file=False, env_file=False)
    pg2 = AdapterPlayground("anthropic", engine=engine)
    assert pg2.adapter is engine.adapter("anthropic")
    assert "/v1/messages" in pg2.request_view.value


def test_live_call_to_a_configured_provider() -> None:
    from notebook_llm.adapters.mock import MockServer

    with MockServer() as srv:
        engine = Engine(config_file=False, env_file=False)
        engine.add_provider("local", adapter="openai", base_url=srv.url + "/v1", model="echo")
        pg = AdapterPlayground("openai", engine=engine, provider="local")
        live = [o for o in pg.response_choice.options if "local" in str(o)]
        assert live, pg.response_choice.options
        pg.response_choice.value = live[0]
        result = pg.run()
        assert result.ok, result.problems
        assert result.completion.text  # the sample request's text, echoed by the server
        assert srv.requests
        assert srv.requests[-1].path == "/v1/chat/completions"
        assert "text-delta" in pg.events_view.value
