"""A body that carries text, mapped to no text at all, fails: in the cell, the kit and the CLI.

The made-up API of these tests streams ``{"c": {"tok": "..."}}``; the buggy script reads
``c.token``. Once that broke no rule: the cell showed an empty answer and the kit said "PASS,
1 warning". Also here: ``check-adapter`` with no fixtures, and a recording's exchanges made by
other adapters (the kit replays only the adapter's own).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from notebook_llm import Engine
from notebook_llm.adapters.lua.dropped_text import DroppedText
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.api.chat import set_default_engine
from notebook_llm.conformance import check_adapter, cli_check, replay_fixture
from notebook_llm.core.errors import LlmError

TOK_SCRIPT = """\
local M = { name = "tokapi", version = "1", endpoint = "/v1/generate" }
function M.transform_request(raw)
  local req = json.decode(raw)
  return json.encode({ prompt = req.messages[#req.messages].content, stream = true })
end
function M.transform_stream_chunk(line)
  if line == "[DONE]" then return json.encode({ done = true }) end
  local c = json.decode(line)
  if c.end_ then return json.encode({ finish_reason = "stop" }) end
  return json.encode({ content = c.choices[1].delta.FIELD or "" })
end
return M
"""
GOOD = TOK_SCRIPT.replace("FIELD", "tok")
BUGGY = TOK_SCRIPT.replace("FIELD", "token")


def _tok_body(*pieces: str) -> bytes:
    lines = [
        json.dumps({"id": "x1", "model": "tok-1", "choices": [{"delta": {"tok": p}}]})
        for p in pieces
    ]
    lines.append(json.dumps({"id": "x1", "model": "tok-1", "end_": True}))
    return b"".join(b"data: " + line.encode() + b"\n\n" for line in lines) + b"data: [DONE]\n\n"


BODY = _tok_body("The", " capital", " of France", " is Paris.")


def _served(source: str, body: bytes) -> LuaAdapter:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return LuaAdapter.from_source(source, transport=httpx.MockTransport(handler))


def _engine(source: str, body: bytes = BODY) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider(
        "tokapi",
        adapter=_served(source, body),
        base_url="http://tok.example",
        model="tok-1",
        needs_key=False,
    )
    return engine


def test_the_engine_fails_a_stream_whose_text_was_all_dropped() -> None:
    with pytest.raises(LlmError) as info:
        _engine(BUGGY).complete_sync("tokapi", "tok-1", prompt="capital?")
    err = info.value
    assert err.code == "ADAPTER_ERROR"
    assert err.hook == "transform_stream_chunk"
    assert "`choices[0].delta.tok`" in err.message
    assert "The capital of France" in err.message  # what the field held
    assert _engine(GOOD).complete_sync("tokapi", "tok-1", prompt="capital?").text == (
        "The capital of France is Paris."
    )


def test_an_empty_answer_stays_an_empty_answer() -> None:
    # No text anywhere in the body (a model that says nothing): not the script's fault.
    body = _tok_body()
    completion = _engine(BUGGY, body).complete_sync("tokapi", "tok-1", prompt="say nothing")
    assert completion.error is None
    assert completion.finish is not None
    assert completion.finish.kind == "stop"
    assert completion.text == ""


def test_the_cell_shows_the_failure_not_an_empty_answer() -> None:
    engine = _engine(BUGGY)
    set_default_engine(engine)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "notebook_llm")
    try:
        magics = ip.magics_manager.registry["LlmMagics"]
        magics._engine = engine
        magics.widgets = "never"
        with capture_output() as cap:
            ip.run_cell_magic("llm", "tokapi:tok-1", "capital?")
        shown = cap.stdout + cap.stderr + "".join(str(o.data) for o in cap.outputs)
        assert "(empty answer)" not in shown
        assert "choices[0].delta.tok" in shown
    finally:
        ip.run_line_magic("unload_ext", "notebook_llm")
        set_default_engine(None)


def test_the_kit_and_the_cli_fail_it_naming_the_field(tmp_path: Path) -> None:
    body = tmp_path / "tok_stream.sse"
    body.write_bytes(BODY)
    script = tmp_path / "tokapi.lua"
    script.write_text(BUGGY, "utf-8")
    result = replay_fixture(LuaAdapter.from_source(BUGGY), body)
    assert not result.ok
    assert any("`choices[0].delta.tok`" in p for p in result.problems), result.problems
    report = check_adapter(script, [body])
    assert not report.ok
    assert report.render_text().startswith("adapter tokapi 1 (file): FAIL")
    out: list[str] = []
    assert cli_check(str(script), [str(body)], None, out=out.append) == 1
    assert "choices[0].delta.tok" in "\n".join(out)
    assert replay_fixture(LuaAdapter.from_source(GOOD), body).ok


def test_a_whole_body_with_dropped_text_fails_too(tmp_path: Path) -> None:
    script = GOOD.replace(
        "return M",
        "function M.transform_response(raw)\n  local r = json.decode(raw)\n"
        '  return json.encode({ content = r.answer.token or "", finish_reason = "stop" })\n'
        "end\nreturn M",
    )
    body = tmp_path / "whole.json"
    body.write_text(json.dumps({"id": "x", "answer": {"tok": "It is Paris."}}), "utf-8")
    result = replay_fixture(LuaAdapter.from_source(script), body)
    assert not result.ok
    err = result.completion.error
    assert err is not None
    assert err.hook == "transform_response"
    assert "`answer.tok`" in err.message


@pytest.mark.parametrize(
    ("payloads", "field"),
    [
        # streamed pieces join to text under any key
        ([{"c": {"tok": "Hel"}}, {"c": {"tok": "lo there"}}], "c.tok"),
        # a content key holds text even as one word
        ([{"choices": [{"delta": {"content": "Paris"}}]}], "choices[0].delta.content"),
        # the longest field wins; ids, models and timestamps never count
        (
            [
                {
                    "id": "a b c",
                    "model": "m 1",
                    "msg": {"t": "short one"},
                    "x": "a much longer text",
                },
            ],
            "x",
        ),
    ],
)
def test_the_witness_names_the_field_that_held_the_text(
    payloads: list[dict[str, object]], field: str
) -> None:
    witness = DroppedText()
    witness.feed_payloads([json.dumps(p) for p in payloads])
    best = witness.best()
    assert best is not None
    assert best[0] == field


def test_the_witness_ignores_metadata() -> None:
    witness = DroppedText()
    witness.feed_payloads(
        [
            json.dumps(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "model": "gpt-4o",
                    "service_tier": "default",
                    "created_at": "2025-01-01T00:00:00Z",
                    "choices": [{"delta": {"role": "assistant"}, "finish_reason": "stop"}],
                    "error": {"message": "not an answer either"},
                }
            )
        ]
        * 3
    )
    assert witness.best() is None


# ------------------------------------------------------------------ check-adapter, no fixtures


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notebook_llm", "check-adapter", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_check_adapter_with_no_fixtures_says_so(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    none = _cli(str(root / "adapters" / "openai.lua"))
    assert none.returncode == 2
    assert "no fixtures" in none.stdout
    assert "--fixtures" in none.stdout
    assert "PASS" not in none.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    got = _cli(str(root / "adapters" / "openai.lua"), "--fixtures", str(empty))
    assert got.returncode == 1
    assert "no body files" in got.stdout
    assert "PASS" not in got.stdout


# ------------------------------------------------------------------ a recording of several adapters


def _recording(tmp_path: Path) -> Path:
    """One exchange made by the tok adapter, then three made by the mock (openai-shaped)."""
    from notebook_llm import record as rec
    from notebook_llm.adapters.mock import MockServer

    path = tmp_path / "session.jsonl"
    engine = Engine(config_file=False, env_file=False)
    with MockServer() as srv, rec.record(path, engine=engine):
        engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1", model="echo")
        for prompt in ("one", "two", "three"):
            engine.complete_sync("m", "echo", prompt=prompt)
    lines = path.read_text("utf-8").splitlines()
    tok = {
        "method": "POST",
        "url": "http://tok.example/v1/generate",
        "path": "/v1/generate",
        "request": {"prompt": "capital?", "stream": True},
        "status": 200,
        "headers": {"content-type": "text/event-stream"},
        "body": BODY.decode(),
    }
    path.write_text("\n".join([lines[0], json.dumps(tok), *lines[1:]]) + "\n", "utf-8")
    return path


def test_only_the_adapters_own_exchanges_are_replayed(tmp_path: Path) -> None:
    path = _recording(tmp_path)
    report = check_adapter(LuaAdapter.from_source(GOOD), [path], requests=False)
    assert report.ok, report.render_text()
    assert len(report.fixtures) == 1
    assert report.fixtures[0].completion.text == "The capital of France is Paris."
    assert report.warnings == []
    text = report.render_text()
    assert "replayed the 1 of 4 exchanges made by adapter tokapi; skipped 3" in text
    # the openai adapter made the other three (through the mock server)
    openai = check_adapter(
        Path(__file__).resolve().parent.parent / "adapters" / "openai.lua", [path], requests=False
    )
    assert openai.ok
    assert len(openai.fixtures) == 3


def test_a_recording_with_none_of_the_adapters_exchanges_is_one_line(tmp_path: Path) -> None:
    path = _recording(tmp_path)
    lines = path.read_text("utf-8").splitlines()
    path.write_text("\n".join([lines[0], *lines[2:]]) + "\n", "utf-8")  # the mock's only
    with pytest.raises(LlmError) as info:
        check_adapter(LuaAdapter.from_source(GOOD), [path], requests=False)
    message = info.value.message
    assert "\n" not in message
    assert "has no exchange made by adapter tokapi" in message
    assert "/v1/chat/completions ×3" in message


@pytest.fixture(autouse=True)
def _no_default_engine() -> Iterator[None]:
    yield
    set_default_engine(None)


def _adapter_magic(line: str, cell: str | None = None) -> tuple[str, str]:
    """Run ``%adapter`` / ``%%adapter`` on a fresh engine: (text/plain, text/html)."""
    from notebook_llm.notebook.magics.adapter_magics import AdapterMagics

    sh = InteractiveShell.instance()
    engine = Engine(config_file=False, env_file=False)
    magics = AdapterMagics(sh, engine=engine)
    sh.register_magics(magics)
    try:
        with capture_output():
            sh.run_cell_magic("adapter", "", cell or GOOD)
        with capture_output() as cap:
            sh.run_line_magic("adapter", line)
    finally:
        magics.close()
    outs = [o.data for o in cap.outputs]
    return (
        "\n".join(o.get("text/plain", "") for o in outs),
        "\n".join(o.get("text/html", "") for o in outs),
    )


def test_adapter_test_fails_a_dropped_field(tmp_path: Path) -> None:
    body = tmp_path / "tok_stream.sse"
    body.write_bytes(BODY)
    text, html = _adapter_magic(f"test tokapi {body} --no-requests", BUGGY)
    assert text.startswith("adapter tokapi 1 (cell): FAIL")
    assert "choices[0].delta.tok" in text
    assert "FAIL" in html


def test_adapter_test_replays_only_the_adapters_exchanges_of_a_recording(tmp_path: Path) -> None:
    path = _recording(tmp_path)
    text, html = _adapter_magic(f"test tokapi {path} --no-requests")
    assert text.startswith("adapter tokapi 1 (cell): PASS - 1/1 fixtures")
    assert "warning" not in text
    assert "skipped 3 made by other adapters" in text
    assert "skipped 3 made by other adapters" in html
