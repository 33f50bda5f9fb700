"""The conformance kit: fixture replay, verdicts, diffs, the request side, broken adapters, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from notebook_llm.adapters.lua.lines import lua_line_of
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits
from notebook_llm.conformance import (
    SAMPLE_KEY,
    Fixture,
    assert_conforms,
    check_adapter,
    check_requests,
    cli_check,
    find_fixtures,
    load_expected,
    load_fixture,
    replay_fixture,
    request_cases,
)
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.core.protocol import Event, Finish

ROOT = Path(__file__).resolve().parent.parent
WIRE = ROOT / "tests" / "fixtures" / "wire"
ADAPTERS = ROOT / "adapters"
PROVIDERS = ["openai", "deepseek", "anthropic", "gemini", "mistral", "groq", "ollama"]

OK_SCRIPT = """\
local M = { name = "mini", version = "1" }
function M.transform_request(raw)
  return raw
end
function M.transform_response(raw)
  local r = json.decode(raw)
  return json.encode({ content = r.choices[1].message.content, finish_reason = "stop" })
end
function M.transform_stream_chunk(line)
  if line == "[DONE]" then return json.encode({ done = true }) end
  local c = json.decode(line)
  local ch = c.choices[1]
  if ch == nil then return "" end
  log("debug", "chunk")
  local out = {}
  if type(ch.delta.content) == "string" then out.content = ch.delta.content end
  if ch.finish_reason ~= nil then
    out.finish_reason = ch.finish_reason
  end
  return json.encode(out)
end
return M
"""


def _broken(hook: str, body: str) -> str:
    """OK_SCRIPT with ``hook`` replaced by a function whose 2nd line is ``body``."""
    lines = OK_SCRIPT.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"function M.{hook}("))
    end = next(i for i in range(start, len(lines)) if lines[i] == "end")
    new = [lines[start], body, "end"]
    return "\n".join(lines[:start] + new + lines[end + 1 :]) + "\n"


def _line(source: str, text: str) -> int:
    """The 1-based number of the first line of ``source`` containing ``text``."""
    return next(n for n, ln in enumerate(source.splitlines(), 1) if text in ln)


# ------------------------------------------------------------------------------ built-ins


@pytest.mark.parametrize("provider", PROVIDERS)
def test_builtin_adapter_conforms_on_every_recorded_body(provider: str) -> None:
    report = check_adapter(ADAPTERS / f"{provider}.lua", [WIRE / provider])
    assert report.fixtures, provider
    assert report.ok, report.render_text()
    assert len(report.requests) == len(request_cases())
    assert all(f.verdict is None for f in report.fixtures)


def test_replay_gives_events_verdict_and_completion() -> None:
    r = replay_fixture(ADAPTERS / "openai.lua", WIRE / "openai" / "stream_tool_call_args_split.sse")
    assert r.ok
    assert r.events[0].type == "block-start"
    assert r.events[-1].type == "finish"
    assert r.completion.finish is not None
    assert r.completion.finish.kind == "tool-calls"
    assert [c.name for c in r.completion.tool_calls] == ["multiply"]


def test_split_body_gives_the_same_completion() -> None:
    fx = WIRE / "anthropic" / "stream_text_multibyte_emoji.sse"
    whole = replay_fixture(ADAPTERS / "anthropic.lua", fx)
    split = replay_fixture(ADAPTERS / "anthropic.lua", fx, chunk_size=1)
    assert split.ok
    assert split.completion.text == whole.completion.text
    assert "😄" in split.completion.text


def test_error_fixture_status_from_name() -> None:
    fx = load_fixture(WIRE / "openai" / "error_401_invalid_api_key.json")
    assert (fx.status, fx.framing) == (401, "json")
    r = replay_fixture(ADAPTERS / "openai.lua", fx)
    assert r.ok
    assert r.completion.error is not None
    assert r.completion.error.code == ErrorCode.AUTH


def test_sidecar_status_and_sniffed_framing(tmp_path: Path) -> None:
    body = tmp_path / "weird.txt"
    body.write_bytes((WIRE / "openai" / "error_404_model_not_found.json").read_bytes())
    (tmp_path / "weird.txt.meta.json").write_text(json.dumps({"status": 404}))
    fx = load_fixture(body)
    assert (fx.status, fx.framing) == (404, "json")
    sse = tmp_path / "s.txt"
    sse.write_bytes(b'data: {"a":1}\n\n')
    assert load_fixture(sse).framing == "sse"
    nd = tmp_path / "n.txt"
    nd.write_bytes(b'{"a":1}\n{"b":2}\n')
    assert load_fixture(nd).framing == "ndjson"
    assert [p.name for p in find_fixtures([tmp_path])] == ["n.txt", "s.txt", "weird.txt"]


# ------------------------------------------------------------------------------ expected


def test_expected_match_and_diff(tmp_path: Path) -> None:
    fx = WIRE / "openai" / "stream_tool_call_args_split.sse"
    good = {
        "text": "",
        "tool_calls": [{"name": "multiply", "args": {"a": 1231, "b": 2331}}],
        "finish": "tool-calls",
        "usage": {"input_tokens": 54},
    }
    assert_conforms(ADAPTERS / "openai.lua", fx, good)
    bad = {**good, "text": "hello", "finish": "stop", "tool_calls": [{"name": "add", "args": {}}]}
    r = replay_fixture(ADAPTERS / "openai.lua", fx, expected=bad)
    assert {d.field for d in r.diffs} == {"text", "finish", "tool_calls"}
    with pytest.raises(AssertionError, match="finish: expected 'stop', got 'tool-calls'"):
        assert_conforms(ADAPTERS / "openai.lua", fx, bad)
    table = tmp_path / "expected.json"
    table.write_text(json.dumps({"stream_tool_call_args_split": bad}))
    assert load_expected(table) == {"stream_tool_call_args_split": bad}
    report = check_adapter(ADAPTERS / "openai.lua", [fx], table, requests=False)
    assert not report.ok
    single = tmp_path / "one.json"
    single.write_text(json.dumps(good))
    assert load_expected(single) == {"*": good}


def test_usage_expected_in_camel_case() -> None:
    fx = WIRE / "openai" / "stream_tool_call_args_split.sse"
    r = replay_fixture(ADAPTERS / "openai.lua", fx, expected={"usage": {"inputTokens": 1}})
    assert [d.field for d in r.diffs] == ["usage.inputTokens"]


# ------------------------------------------------------------------------------ requests


def test_request_side_shows_json_with_redacted_headers() -> None:
    results = check_requests(ADAPTERS / "anthropic.lua")
    assert [r.case for r in results] == [
        "text",
        "system",
        "multi-turn",
        "tools",
        "tool-results",
        "images",
    ]
    assert all(r.ok for r in results)
    assert results[0].url == "https://provider.example/v1/messages"
    assert results[0].headers["x-api-key"] == "***"
    assert results[1].body["system"] == "You are terse."
    text = check_adapter(ADAPTERS / "anthropic.lua").render_text()
    assert SAMPLE_KEY not in text
    assert '"type": "image"' in text


def test_bearer_header_is_redacted() -> None:
    r = check_requests(ADAPTERS / "openai.lua")[0]
    assert r.headers["authorization"] == "***"
    assert r.body["messages"] == [{"role": "user", "content": "Hello!"}]


# ------------------------------------------------------------------------------ broken adapters

STREAM = WIRE / "openai" / "stream_text_include_usage.sse"
WHOLE = WIRE / "openai" / "chat_completion_text.json"


def test_syntax_error_points_at_the_line() -> None:
    report = check_adapter(OK_SCRIPT.replace("return raw\n", "return raw +\n"))
    assert not report.ok
    err = report.load_error
    assert err is not None
    assert err.code == ErrorCode.INVALID_ADAPTER
    assert lua_line_of(err) == 4
    assert "load error" in report.render_text()


def test_error_in_transform_request() -> None:
    src = _broken("transform_request", '  error("no requests today")')
    results = check_requests(src)
    err = results[0].error
    assert err is not None
    line = _line(src, "no requests today")
    assert (err.code, err.hook, err.lua_line) == (
        ErrorCode.ADAPTER_ERROR,
        "transform_request",
        line,
    )
    assert "no requests today" in err.message
    assert err.adapter == "mini"


def test_error_in_transform_stream_chunk() -> None:
    src = _broken("transform_stream_chunk", "  local x = nil; return x.y")
    r = replay_fixture(src, STREAM)
    assert not r.ok
    assert r.adapter_fault
    assert r.error is not None
    line = _line(src, "return x.y")
    assert (r.error.hook, r.error.lua_line) == ("transform_stream_chunk", line)
    assert r.events[-1].type == "finish"
    assert any("adapter error" in p for p in r.problems)


def test_error_in_transform_response() -> None:
    src = _broken("transform_response", "  error({})")
    r = replay_fixture(src, WHOLE)
    assert r.error is not None
    assert (r.error.code, r.error.hook, r.error.lua_line) == (
        ErrorCode.ADAPTER_ERROR,
        "transform_response",
        _line(src, "error({})"),
    )


def test_error_in_build_headers() -> None:
    src = OK_SCRIPT.replace(
        "return M\n", 'function M.build_headers(meta)\n  error("no signing key")\nend\nreturn M\n'
    )
    err = check_requests(src)[0].error
    assert err is not None
    assert (err.hook, err.lua_line) == ("build_headers", _line(src, "no signing key"))
    assert "no signing key" in err.message


def test_invalid_json_returned() -> None:
    src = _broken("transform_stream_chunk", '  return "{not json"')
    r = replay_fixture(src, STREAM)
    assert r.error is not None
    assert r.error.code == ErrorCode.ADAPTER_ERROR
    assert r.error.hook == "transform_stream_chunk"
    assert "invalid JSON" in r.error.message


def test_infinite_loop_is_adapter_timeout() -> None:
    src = _broken("transform_stream_chunk", "  while true do end")
    adapter = LuaAdapter.from_source(src, limits=LuaLimits(cpu_seconds=0.2))
    r = replay_fixture(adapter, STREAM)
    assert r.error is not None
    assert r.error.code == ErrorCode.ADAPTER_TIMEOUT
    assert r.error.hook == "transform_stream_chunk"
    assert not r.ok


def test_logs_are_collected_per_fixture() -> None:
    r = replay_fixture(OK_SCRIPT, STREAM)
    assert r.ok, r.problems
    assert ("debug", "chunk") in r.logs


def test_stream_only_adapter_skips_whole_bodies() -> None:
    src = OK_SCRIPT.replace("function M.transform_response(raw)", "function M._unused(raw)")
    r = replay_fixture(src, WHOLE)
    assert r.skipped
    assert r.ok


def test_fixture_object_can_be_built_by_hand(tmp_path: Path) -> None:
    fx = Fixture(
        tmp_path / "x.sse",
        b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n',
        "sse",
    )
    fx.content_type = "text/event-stream"
    r = replay_fixture(OK_SCRIPT, fx, expected={"text": "hi", "finish": "stop"})
    assert r.ok, r.problems


# ------------------------------------------------------------------------------ CLI


def test_cli_check_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_check(str(ADAPTERS / "openai.lua"), [str(WIRE / "openai")], None) == 0
    assert "PASS" in capsys.readouterr().out


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notebook_llm", "check-adapter", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_exit_status_0_and_1(tmp_path: Path) -> None:
    ok = _cli(str(ADAPTERS / "openai.lua"), "--fixtures", str(WIRE / "openai"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS" in ok.stdout
    broken = tmp_path / "broken.lua"
    broken.write_text(_broken("transform_stream_chunk", "  return nil + 1"))
    bad = _cli(str(broken), "--fixtures", str(STREAM))
    assert bad.returncode == 1
    assert "transform_stream_chunk" in bad.stdout
    expected = tmp_path / "exp.json"
    expected.write_text(json.dumps({"text": "nope"}))
    diff = _cli(
        str(ADAPTERS / "openai.lua"), "--fixtures", str(STREAM), "--expected", str(expected)
    )
    assert diff.returncode == 1
    assert "text: expected 'nope'" in diff.stdout
    missing = _cli(str(tmp_path / "nope.lua"), "--fixtures", str(STREAM))
    assert missing.returncode == 1


def test_a_recording_of_a_mock_session_is_a_set_of_fixtures(tmp_path: Path) -> None:
    from notebook_llm import Engine
    from notebook_llm import record as rec
    from notebook_llm.adapters.mock import MockServer
    from notebook_llm.conformance import check_adapter, fixtures_from_recording
    from notebook_llm.engine.routing.lua_files import builtin_adapters_dir

    path = tmp_path / "session.jsonl"
    engine = Engine(config_file=False, env_file=False)
    with MockServer() as srv, rec.record(path, engine=engine):
        engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
        engine.complete_sync("m", "echo", prompt="recorded for the kit")
        engine.complete_sync("m", "reasoning", prompt="think first")
    fixtures = fixtures_from_recording(path)
    assert [f.framing for f in fixtures] == ["sse", "sse"]
    report = check_adapter(builtin_adapters_dir() / "openai.lua", [path], requests=False)
    assert report.ok, report.render_text()
    assert [r.completion.text for r in report.fixtures] == ["recorded for the kit", "think first"]
    assert report.fixtures[1].completion.reasoning  # the reasoning model's thinking came through


def test_cli_strict_fails_on_warnings_only(tmp_path: Path) -> None:
    # An adapter whose done flag is set on every chunk: first token kept, the rest lost.
    early = tmp_path / "early.lua"
    early.write_text(
        "local M = { name = 'early' }\n"
        "function M.transform_request(raw) return raw end\n"
        "function M.transform_stream_chunk(line)\n"
        "  local ok, c = pcall(json.decode, line)\n"
        "  if not ok or c == nil or c.choices == nil or #c.choices == 0 then return '' end\n"
        "  return json.encode({ content = c.choices[1].delta.content or '', done = true })\n"
        "end\n"
        "return M\n"
    )
    body = tmp_path / "two_tokens.sse"
    body.write_text(
        'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
        'data: {"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}]}\n\n'
        "data: [DONE]\n\n"
    )
    lenient = _cli(str(early), "--fixtures", str(body))
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert "warning: transform_stream_chunk, payload 1" in lenient.stdout
    strict = _cli(str(early), "--fixtures", str(body), "--strict")
    assert strict.returncode == 1
    # the verdict line itself says FAIL (it once said PASS, then exited 1)
    first = strict.stdout.splitlines()[0]
    assert "FAIL (--strict: 1 warning)" in first
    assert "PASS" not in first
    clean = _cli(str(ADAPTERS / "openai.lua"), "--fixtures", str(WIRE / "openai"), "--strict")
    assert clean.returncode == 0, clean.stdout


# ---------------------------------------------------------------- one whole-body mapping


def _whole_bodies(tmp_path: Path) -> list[Path]:
    """Every recorded 200 JSON body, and a proxy's HTML page served as a 200 JSON body."""
    bodies = sorted(p for p in WIRE.glob("*/*.json") if load_fixture(p).whole_body)
    page = tmp_path / "proxy_page.json"
    page.write_text("<html><title>502 Bad Gateway</title></html>", "utf-8")
    return [*bodies, page]


def _as_json(events: list[Event]) -> list[dict[str, object]]:
    return [e.to_dict() for e in events]


@pytest.mark.parametrize("provider", [*PROVIDERS, "github"])
def test_the_kit_maps_a_whole_body_exactly_as_the_adapter_does(
    provider: str, tmp_path: Path
) -> None:
    """The kit replays a 200 JSON body with the adapter's own non-stream mapping
    (``LuaAdapter._map_whole``), for every recorded body (other providers' too, which exercise
    the error paths). Its old copy of that mapping had drifted: it named the provider
    ``fixture`` and blamed the script (ADAPTER_ERROR) for a body that is not JSON."""
    adapter = LuaAdapter.from_file(ADAPTERS / f"{provider}.lua")
    options = request_cases()[0].options
    bodies = _whole_bodies(tmp_path)
    assert len(bodies) >= 10
    for body in bodies:
        fixture = load_fixture(body)
        try:
            want = adapter._map_whole(adapter._sandbox(), fixture.body, options)
        except LlmError as err:
            want = [Finish.error(err)]
        got = replay_fixture(adapter, fixture).events
        assert _as_json(got) == _as_json(want), body.name


def test_a_non_json_whole_body_is_blamed_on_the_provider(tmp_path: Path) -> None:
    page = tmp_path / "proxy_page.json"
    page.write_text("<html><title>502 Bad Gateway</title></html>", "utf-8")
    result = replay_fixture(ADAPTERS / "openai.lua", page)
    assert result.error is not None
    assert result.error.code == ErrorCode.MALFORMED_RESPONSE
    assert result.error.message.startswith("the provider sent a body")
