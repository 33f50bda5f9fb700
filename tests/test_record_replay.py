"""Record/replay: record a run against the mock server, replay it with no server and no key."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from notebook_llm import Engine, LlmError, ToolSchema
from notebook_llm import record as rec
from notebook_llm.adapters.mock import MockServer
from notebook_llm.engine import session
from notebook_llm.wire import transport as wire_transport

KEY = "sk-test-RECORDME-0123456789abcdef"
OTHER_KEY = "sk-test-OTHERKEY-9876543210fedcba"

WEATHER = ToolSchema(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)

PROMPTS = [
    ("echo", "Hello from a recorded run"),
    ("reasoning", "Why is the sky blue?"),
    ("lorem", "Write a paragraph"),
]


@pytest.fixture(autouse=True)
def _session_engine() -> Iterator[None]:
    """``rec.record`` / ``rec.replay`` act on the session engine: a fresh one per test."""
    session.set_default_engine(_new_engine())
    yield
    rec.stop()
    session.set_default_engine(None)


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer(require_key=KEY) as srv:
        yield srv


@pytest.fixture
def openai_on_mock(server: MockServer, monkeypatch: pytest.MonkeyPatch) -> MockServer:
    """The ``openai`` preset pointed at the mock server, with the key it requires."""
    monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return server


def _new_engine() -> Engine:
    return Engine(config_file=False, env_file=False, retries=0)


def _engine() -> Engine:
    return session.default_engine()


async def _run(engine: Engine, provider: str = "openai") -> list[list[dict[str, object]]]:
    """The event JSON of each prompt, plus a tool-call request."""
    runs = []
    for model, prompt in PROMPTS:
        runs.append([ev.to_dict() async for ev in engine.stream(provider, model, prompt=prompt)])
    runs.append(
        [
            ev.to_dict()
            async for ev in engine.stream(
                provider, "tools", prompt="Weather in Paris?", tools=[WEATHER]
            )
        ]
    )
    return runs


async def test_record_then_replay_gives_identical_events_without_key_or_server(
    openai_on_mock: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"

    with rec.record(path) as recorder:
        live = await _run(_engine())
    assert len(recorder.exchanges) == len(PROMPTS) + 1
    assert all(ev_list[-1]["type"] == "finish" for ev_list in live)
    assert all(ev_list[-1]["reason"]["kind"] != "error" for ev_list in live), live
    # The key really was sent (the server demands it) ...
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in openai_on_mock.requests)

    # ... and it is nowhere in the file, nor any auth header.
    text = path.read_text(encoding="utf-8")
    assert KEY not in text
    assert "RECORDME" not in text
    assert "authorization" not in text.lower()
    assert "bearer" not in text.lower()
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0] == {"notebook_llm_recording": 1}
    first = lines[1]
    assert first["method"] == "POST"
    assert first["path"] == "/v1/chat/completions"
    assert first["request"]["model"] == "echo"
    assert first["status"] == 200
    assert "text/event-stream" in first["headers"]["content-type"]
    assert "data: [DONE]" in first["body"]
    assert first["complete"] is True

    openai_on_mock.stop()
    monkeypatch.delenv("OPENAI_API_KEY")
    environ = dict(os.environ)
    with rec.replay(path):
        assert os.environ == environ  # no placeholder key: the engine knows it replays
        replayed = await _run(_engine())
    assert replayed == live
    assert "OPENAI_API_KEY" not in os.environ
    assert _engine().tap is None


async def test_request_without_recording_fails_clearly(
    openai_on_mock: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    with rec.record(path):
        await _engine().complete("openai", "echo", prompt="recorded prompt")
    openai_on_mock.stop()
    monkeypatch.delenv("OPENAI_API_KEY")
    with rec.replay(path) as replayer:
        engine = _engine()
        with pytest.raises(LlmError) as info:
            await engine.complete("openai", "echo", prompt="a prompt nobody recorded")
        assert info.value.code == rec.REPLAY_MISS
        assert "/v1/chat/completions" in info.value.message
        assert "different request body" in info.value.message
        assert replayer.misses == 1
        # the recorded one still answers, also a second time (non-strict)
        for _ in range(2):
            done = await engine.complete("openai", "echo", prompt="recorded prompt")
            assert done.text == "recorded prompt"
    with rec.replay(path, strict=True):
        engine = _engine()
        await engine.complete("openai", "echo", prompt="recorded prompt")
        with pytest.raises(LlmError, match="already used") as info:
            await engine.complete("openai", "echo", prompt="recorded prompt")
        assert info.value.code == rec.REPLAY_MISS


async def test_missing_file_and_unknown_route(tmp_path: Path) -> None:
    with pytest.raises(LlmError) as info:
        rec.start_replay(tmp_path / "nope.jsonl")
    assert info.value.code == "REPLAY_FILE"  # a missing file is not a miss
    path = tmp_path / "empty.jsonl"
    path.write_text('{"notebook_llm_recording": 1}\n', encoding="utf-8")
    with rec.replay(path):
        engine = _engine()
        with pytest.raises(LlmError, match="nothing was recorded") as info:
            await engine.complete("openai", prompt="hi")
        assert info.value.code == rec.REPLAY_MISS


async def test_query_key_is_redacted_and_replay_matches_with_another_key(tmp_path: Path) -> None:
    """A key in the URL (Gemini-style ``?key=``) and in the prompt never lands in the file;
    replay still matches when a different key is used."""
    source = (Path(__file__).parents[1] / "adapters" / "openai.lua").read_text(encoding="utf-8")
    source = source.replace('"/chat/completions"', '"/chat/completions?key={api_key}"', 1)
    assert "{api_key}" in source
    path = tmp_path / "query.json"  # the JSON-array flavour
    prompt = f"summarise: token={KEY} is the word"
    with MockServer() as srv:
        engine = _engine()
        engine.load_adapter(source, name="qkey")
        engine.add_provider("qkey", adapter="qkey", base_url=srv.url + "/v1", api_key=KEY)
        with rec.record(path):
            await engine.complete("qkey", "lorem", prompt=prompt)
        assert srv.requests[0].path == "/v1/chat/completions"
    text = path.read_text(encoding="utf-8")
    assert KEY not in text
    assert "RECORDME" not in text
    data = json.loads(text)
    assert isinstance(data, list)
    assert len(data) == 1
    assert data[0]["url"].endswith("/v1/chat/completions?key=***")
    assert "token=***" in json.dumps(data[0]["request"])

    engine = _new_engine()
    engine.load_adapter(source, name="qkey")
    engine.add_provider("qkey", adapter="qkey", base_url="http://127.0.0.1:9/v1", api_key=OTHER_KEY)
    with rec.replay(path, engine=engine):
        again = await engine.complete("qkey", "lorem", prompt=prompt)
    assert again.text


async def test_response_headers_and_bodies_are_scrubbed(tmp_path: Path) -> None:
    """Credential/cookie response headers are dropped and a key echoed in a body is hidden."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            401,
            headers={
                "content-type": "application/json",
                "set-cookie": "session=abcdef123456",
                "openai-organization": "org-secret",
                "x-request-id": "req_1",
            },
            json={"error": {"message": f"Incorrect API key provided: {OTHER_KEY}"}},
        )

    path = tmp_path / "scrub.jsonl"
    recorder = rec.Recorder(path)
    transport = recorder.transport(httpx.MockTransport(handler))
    async with httpx.AsyncClient(transport=transport) as client:
        resp = await client.post(
            "https://api.example.com/v1/chat?api_key=plainsecret99",
            json={"q": 1},
            headers={"Authorization": f"Bearer {OTHER_KEY}", "x-api-key": "another-secret-42"},
        )
        assert resp.status_code == 401
        assert OTHER_KEY in resp.text  # the caller still sees the real response
    text = path.read_text(encoding="utf-8")
    for secret in (OTHER_KEY, "plainsecret99", "another-secret-42", "abcdef123456", "org-secret"):
        assert secret not in text
    (exchange,) = rec.load_exchanges(path)
    assert exchange.status == 401
    assert exchange.headers == {"content-type": "application/json", "x-request-id": "req_1"}
    assert exchange.url == "https://api.example.com/v1/chat?api_key=***"
    assert b"Incorrect API key provided: ***" in exchange.body


async def test_replay_streams_in_pieces(tmp_path: Path) -> None:
    body = "".join(f'data: {{"n": {i}}}\n\n' for i in range(20)) + "data: [DONE]\n\n"
    path = tmp_path / "hand.jsonl"
    path.write_text(
        json.dumps(
            {
                "method": "POST",
                "url": "https://api.example.com/v1/x",
                "path": "/v1/x",
                "request": {"a": 1},
                "status": 200,
                "headers": {"content-type": "text/event-stream"},
                "body": body,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    replayer = rec.Replayer(path, chunk_delay=0.001)
    async with (
        httpx.AsyncClient(transport=replayer.transport()) as client,
        client.stream("POST", "http://elsewhere:1/v1/x", json={"a": 1}) as resp,
    ):
        pieces = [chunk async for chunk in resp.aiter_raw()]
    assert len(pieces) == 21
    assert b"".join(pieces).decode() == body
    assert "1 of 1" in replayer.describe()


async def test_stopped_stream_is_recorded_as_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "partial.jsonl"
    with MockServer(chunk_delay=0.02) as srv:
        engine = _engine()
        engine.add_provider("m", adapter="openai", base_url=srv.url + "/v1")
        with rec.record(path):
            agen = engine.stream("m", "lorem", prompt="long text please")
            async for ev in agen:
                if ev.to_dict()["type"] == "text-delta":
                    break
            await agen.aclose()  # type: ignore[attr-defined]
    exchanges = rec.load_exchanges(path)
    assert len(exchanges) == 1
    assert exchanges[0].complete is False


def test_magic_command_api(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    assert rec.magic_command("record") == "not recording or replaying"
    msg = rec.magic_command(f"record {path}")
    assert "recording provider exchanges to" in msg
    assert "no keys" in msg
    assert isinstance(rec.active(), rec.Recorder)
    assert _engine().tap is rec.active()
    assert rec.magic_command("record").startswith("recording to")
    assert rec.magic_command("record stop") == f"recorded 0 exchanges to {path}"
    assert _engine().tap is None
    assert "replaying 0 recorded exchanges" in rec.magic_command(["replay", str(path), "--strict"])
    assert rec.magic_command("replay").startswith("replaying")
    assert rec.magic_command("stop").startswith("stopped replaying")
    for bad in ["", "record a b", "frobnicate", "record x --strict"]:
        with pytest.raises(ValueError, match="usage"):
            rec.magic_command(bad)


def test_starting_one_session_stops_the_other(tmp_path: Path) -> None:
    rec.start_recording(tmp_path / "a.jsonl")
    (tmp_path / "b.jsonl").write_text("", encoding="utf-8")
    rec.start_replay(tmp_path / "b.jsonl")
    assert isinstance(rec.active(), rec.Replayer)
    rec.stop()
    assert rec.active() is None
    assert _engine().tap is None
    assert rec.stop() == ""


# ------------------------------------------------------------------ transport per engine


def _module_state() -> dict[str, object]:
    """Every module-level value of the record/replay modules (and the transport module)."""
    from notebook_llm.wire import cassette, tap

    return {
        f"{mod.__name__}.{name}": value
        for mod in (rec, cassette, tap, wire_transport)
        for name, value in vars(mod).items()
        if not name.startswith("__")
    }


async def test_two_engines_one_replaying_one_live_at_the_same_time(
    openai_on_mock: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    recorder_engine = _new_engine()
    with recorder_engine.recording(path):
        await recorder_engine.complete("openai", "echo", prompt="recorded prompt")
    live = _new_engine()
    replaying = _new_engine()
    before = len(openai_on_mock.requests)
    with replaying.replaying(path, strict=True):
        assert replaying.is_replaying
        assert not live.is_replaying
        replayed, fresh = await asyncio.gather(
            replaying.complete("openai", "echo", prompt="recorded prompt"),
            live.complete("openai", "echo", prompt="a new prompt"),
        )
        # The live engine reached the server; the replaying one did not (strict: one answer).
        assert len(openai_on_mock.requests) == before + 1
        with pytest.raises(LlmError) as info:
            await replaying.complete("openai", "echo", prompt="a new prompt")
        assert info.value.code == rec.REPLAY_MISS
    assert replayed.text == "recorded prompt"
    assert fresh.text == "a new prompt"
    assert replaying.tap is None


async def test_replay_needs_no_key_in_the_environment(
    openai_on_mock: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    engine = _new_engine()
    with engine.recording(path):
        await engine.complete("openai", "echo", prompt="hello")
    monkeypatch.delenv("OPENAI_API_KEY")
    openai_on_mock.stop()
    fresh = _new_engine()
    with pytest.raises(LlmError) as info:  # not replaying: the key check stands
        await fresh.complete("openai", "echo", prompt="hello")
    assert info.value.code == "MISSING_CREDENTIAL"
    environ = dict(os.environ)
    with fresh.replaying(path):
        assert (await fresh.complete("openai", "echo", prompt="hello")).text == "hello"
    assert dict(os.environ) == environ


async def test_recording_and_replay_change_no_module_state(
    openai_on_mock: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    for gone in ("_active", "_previous_factory", "_placeholder_vars", "_state_lock"):
        assert not hasattr(rec, gone)
    for gone in ("_factory", "use_transport", "current_transport", "reset_transport"):
        assert not hasattr(wire_transport, gone)
    engine = _new_engine()
    before = _module_state()
    environ = dict(os.environ)
    with engine.recording(path):
        assert _module_state() == before
        await engine.complete("openai", "echo", prompt="hello")
    with rec.record(tmp_path / "session.jsonl"):  # the session API too
        await _engine().complete("openai", "echo", prompt="hello")
        assert _module_state() == before
    with rec.replay(path):
        assert _module_state() == before
    assert _module_state() == before
    assert dict(os.environ) == environ


async def test_engine_transport_is_used_and_wrapped_by_a_recording(tmp_path: Path) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        body = (
            'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
            'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
            "data: [DONE]\n\n"
        )
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    engine = Engine(
        config_file=False, env_file=False, retries=0, transport=httpx.MockTransport(handler)
    )
    engine.add_provider("fake", adapter="openai", base_url="http://fake/v1", needs_key=False)
    assert (await engine.complete("fake", "m", prompt="x")).text == "hi"
    with engine.recording(tmp_path / "r.jsonl") as recorder:
        assert (await engine.complete("fake", "m", prompt="x")).text == "hi"
    assert seen == ["/v1/chat/completions"] * 2
    assert len(recorder.exchanges) == 1
