"""What a replayed request is matched by: method, path, query string and body, not the host.

A hook's ``http_get(".../q?city=Tokyo")`` must not be answered with the recorded ``?city=Paris``
body; the query is compared as a recording stores it (redacted, pairs in sorted order), so a
key in the query (Gemini's ``?key=``) still replays with the placeholder key, and a recording
written before the query was compared (no new field: the query comes from its ``url``) still
replays.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from notebook_llm import Engine, ErrorCode, LlmError
from notebook_llm.core.redaction import register_secret
from notebook_llm.wire.cassette import REPLAY_KEY, canonical_query, load_exchanges
from notebook_llm.wire.tap import Recorder, Replayer

#: A key the recorded run sends in its URL; the replay never sees it.
REAL_KEY = "AIzaSy-real-recording-key-0123456789"


def _answer(request: httpx.Request) -> httpx.Response:
    """A server whose answer names the query it was asked (so a wrong replay shows)."""
    return httpx.Response(200, text=f"answer for {request.url.query.decode()}")


async def _record(path: Path, *urls: str) -> None:
    """Record one GET per URL through a Recorder in front of :func:`_answer`."""
    transport = Recorder(path).transport(httpx.MockTransport(_answer))
    async with httpx.AsyncClient(transport=transport) as client:
        for url in urls:
            (await client.get(url)).raise_for_status()


async def _replay(replayer: Replayer, url: str) -> str:
    async with httpx.AsyncClient(transport=replayer.transport()) as client:
        return (await client.get(url)).text


# ------------------------------------------------------------------ the canonical query


def test_the_canonical_query_ignores_order_and_escape_spelling_and_keeps_blank_values() -> None:
    base = canonical_query("http://h/q?city=New+York&days=3&flag=")
    assert base == canonical_query("http://h/q?flag=&days=3&city=New%20York")
    assert base == canonical_query("https://elsewhere:8443/q?days=3&city=New%20York&flag")
    assert json.loads(base) == [["city", "New York"], ["days", "3"], ["flag", ""]]
    # a value, a name or a repeated parameter that differs is another query
    assert base != canonical_query("http://h/q?city=New+York&days=4&flag=")
    assert base != canonical_query("http://h/q?city=New+York&days=3")
    assert canonical_query("http://h/q?a=1&a=2") != canonical_query("http://h/q?a=1")
    # no query, an empty one and a "?" inside the fragment are all no query
    for url in ("http://h/q", "http://h/q?", "http://h/q#frag?a=1", ""):
        assert canonical_query(url) == ""


def test_a_key_in_the_query_compares_as_the_recording_stores_it() -> None:
    register_secret(REPLAY_KEY)
    recorded = canonical_query(f"https://g.test/v1/m:stream?alt=sse&key={REAL_KEY}")
    assert REAL_KEY not in recorded
    assert recorded == canonical_query(f"https://g.test/v1/m:stream?key={REPLAY_KEY}&alt=sse")
    assert recorded == canonical_query("https://g.test/v1/m:stream?alt=sse&key=***")
    assert recorded != canonical_query(f"https://g.test/v1/m:stream?alt=json&key={REPLAY_KEY}")


# ------------------------------------------------------------------ replay through a Replayer


@pytest.mark.parametrize("strict", [False, True])
async def test_the_same_path_with_another_query_is_a_replay_miss(
    tmp_path: Path, strict: bool
) -> None:
    path = tmp_path / "q.jsonl"
    await _record(path, "http://127.0.0.1:4010/q?city=Paris")
    replayer = Replayer(path, strict=strict)
    for url in (
        "http://127.0.0.1:4010/q?city=Tokyo",
        "http://127.0.0.1:4010/q?city=Paris&city=Tokyo",
        "http://127.0.0.1:4010/q",
    ):
        with pytest.raises(LlmError) as info:
            await _replay(replayer, url)
        assert info.value.code == ErrorCode.REPLAY_MISS
        assert "another query string (recorded: city=Paris)" in info.value.message
    assert replayer.misses == 3
    assert replayer.exchanges[0].used is False  # no miss took the recording
    assert await _replay(replayer, "http://127.0.0.1:4010/q?city=Paris") == (
        "answer for city=Paris"
    )


async def test_each_query_gets_its_own_answer_and_the_host_and_port_do_not_matter(
    tmp_path: Path,
) -> None:
    """Recorded against one loopback port, replayed against another host: each query is
    answered with its own recorded body (the host is not in the key, by design)."""
    path = tmp_path / "two.jsonl"
    await _record(path, "http://127.0.0.1:4010/q?city=Paris", "http://127.0.0.1:4010/q?city=Rome")
    replayer = Replayer(path, strict=True)
    assert await _replay(replayer, "http://127.0.0.1:5999/q?city=Rome") == "answer for city=Rome"
    assert await _replay(replayer, "https://other.example/q?city=Paris") == "answer for city=Paris"


async def test_the_same_query_in_another_order_and_spelling_matches(tmp_path: Path) -> None:
    path = tmp_path / "order.jsonl"
    await _record(path, "http://h.test/search?q=red+fox&page=2&lang=")
    replayer = Replayer(path, strict=True)
    text = await _replay(replayer, "http://h.test/search?lang=&page=2&q=red%20fox")
    assert text == "answer for q=red+fox&page=2&lang="


async def test_a_recording_with_a_secret_key_in_the_query_replays_with_the_placeholder(
    tmp_path: Path,
) -> None:
    """The key sits under a credential name (``key``) and under a plain name (``q``, where
    only its registration hides it): both are ``***`` in the file and match the placeholder."""
    register_secret(REAL_KEY)
    path = tmp_path / "key.json"  # the JSON-array flavour
    await _record(path, f"https://g.test/v1/models/m:streamGenerateContent?alt=sse&key={REAL_KEY}")
    await _record(tmp_path / "plain.jsonl", f"https://g.test/v1/echo?q={REAL_KEY}&n=1")
    for file in (path, tmp_path / "plain.jsonl"):
        assert REAL_KEY not in file.read_text(encoding="utf-8")
    assert load_exchanges(path)[0].url.endswith("?alt=sse&key=***")

    replayer = Replayer(path, strict=True)  # registers REPLAY_KEY as a secret
    url = f"https://g.test/v1/models/m:streamGenerateContent?key={REPLAY_KEY}&alt=sse"
    assert (await _replay(replayer, url)).startswith("answer for alt=sse&key=")
    plain = Replayer(tmp_path / "plain.jsonl", strict=True)
    assert (await _replay(plain, f"https://g.test/v1/echo?n=1&q={REPLAY_KEY}")).startswith(
        "answer for q="
    )
    # the key hides its value, not the other parameters
    with pytest.raises(LlmError) as info:
        await _replay(Replayer(path), url.replace("alt=sse", "alt=json"))
    assert info.value.code == ErrorCode.REPLAY_MISS
    assert REPLAY_KEY not in info.value.message


def _old_exchange(url: str | None, path: str | None, body: str) -> dict[str, Any]:
    """An exchange as recordings have always been written (no field for the query)."""
    exchange: dict[str, Any] = {"method": "GET", "request": None, "status": 200}
    if url is not None:
        exchange["url"] = url
    if path is not None:
        exchange["path"] = path
    exchange.update({"headers": {"content-type": "text/plain"}, "body": body, "complete": True})
    return exchange


async def test_an_old_format_recording_still_replays_by_its_url(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    lines = [
        {"notebook_llm_recording": 1},
        _old_exchange("http://127.0.0.1:33333/q?units=metric&city=Paris", "/q", "paris"),
        _old_exchange("http://127.0.0.1:33333/q?city=Rome&units=metric", None, "rome"),
        # recorded before its parameter name was known to hold a key: redacted on reading
        _old_exchange("https://api.example.com/v1/data?api_key=old-plain-key", "/v1/data", "d"),
        _old_exchange(None, "/plain", "no url"),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    replayer = Replayer(path, strict=True)
    assert await _replay(replayer, "http://localhost:1/q?city=Rome&units=metric") == "rome"
    assert await _replay(replayer, "http://localhost:1/q?city=Paris&units=metric") == "paris"
    new_key = "https://api.example.com/v1/data?api_key=another-plain-key"
    assert await _replay(replayer, new_key) == "d"
    assert await _replay(replayer, "http://x.test/plain") == "no url"
    with pytest.raises(LlmError) as info:
        await _replay(replayer, "http://x.test/plain?page=2")
    assert info.value.code == ErrorCode.REPLAY_MISS
    assert "(recorded: (none))" in info.value.message


async def test_a_different_body_with_the_same_query_still_says_so(tmp_path: Path) -> None:
    """The miss names the part that differs: here the body, not the query."""
    path = tmp_path / "post.jsonl"
    transport = Recorder(path).transport(httpx.MockTransport(_answer))
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post("http://h.test/v1/run?mode=a", json={"n": 1})
    replayer = Replayer(path)
    async with httpx.AsyncClient(transport=replayer.transport()) as client:
        with pytest.raises(LlmError) as info:
            await client.post("http://h.test/v1/run?mode=a", json={"n": 2})
        assert "with this query have a different request body" in info.value.message
        assert (await client.post("http://h.test/v1/run?mode=a", json={"n": 1})).text == (
            "answer for mode=a"
        )


# ------------------------------------------------------------------ through an engine

#: The bug's reproduction: a hook fetches the URL the prompt names; the model's request body is
#: the same whatever the prompt, so only the hook's request tells the runs apart.
HOOK = r"""
local M = {name="q", version="1", endpoint="/chat"}
local url, got
function M.transform_request(raw)
  local req = json.decode(raw)
  url = req.messages[#req.messages].content
  return json.encode({model=req.model, stream=true})
end
function M.build_headers(meta)
  got = json.decode(http_get(url))
  return {["x-got"] = "x"}
end
function M.transform_stream_chunk(raw)
  local c = json.decode(raw)
  if c.done then return json.encode({content="", done=true, finish_reason="stop"}) end
  return json.encode({content=got.body or ("error: " .. got.error)})
end
return M
"""


def _hook_server(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/chat":
        body = b'data: {"t": "main"}\n\ndata: {"done": true}\n\n'
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    return _answer(request)


def _hook_engine(transport: httpx.AsyncBaseTransport) -> Engine:
    engine = Engine(config_file=False, env_file=False, retries=0, transport=transport)
    engine.load_adapter(HOOK)
    engine.add_provider(
        "p", adapter="q", base_url="http://127.0.0.1:4321", model="m", needs_key=False
    )
    return engine


def _no_network(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"replay reached the network: {request.url}")


@pytest.mark.parametrize("strict", [False, True])
async def test_a_hooks_http_get_with_another_query_is_a_miss_not_the_recorded_body(
    tmp_path: Path, strict: bool
) -> None:
    path = tmp_path / "hook.jsonl"
    engine = _hook_engine(httpx.MockTransport(_hook_server))
    with engine.recording(path):
        live = await engine.complete("p", prompt="http://127.0.0.1:4321/q?city=Paris")
    assert live.text == "answer for city=Paris"

    engine = _hook_engine(httpx.MockTransport(_no_network))
    with engine.replaying(path, strict=strict):
        missed = await engine.complete("p", prompt="http://127.0.0.1:4321/q?city=Tokyo")
        assert "answer for" not in missed.text
        assert "no recorded response for GET" in missed.text
        assert "another query string (recorded: city=Paris)" in missed.text
    with engine.replaying(path, strict=strict):
        same = await engine.complete("p", prompt="http://127.0.0.1:9/q?city=Paris")
        assert same.text == "answer for city=Paris"


async def test_an_engine_replays_a_key_in_the_query_with_the_placeholder_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded with a real key in ``?key=``; replayed with no key at all, so the engine
    sends :data:`REPLAY_KEY` in the query (seen by the replayer) and still gets the answer."""
    source = (Path(__file__).parents[1] / "adapters" / "openai.lua").read_text(encoding="utf-8")
    source = source.replace('"/chat/completions"', '"/chat/completions?key={api_key}&alt=sse"', 1)
    assert "{api_key}" in source
    sse = (
        b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )

    def server(request: httpx.Request) -> httpx.Response:
        assert request.url.params["key"] == REAL_KEY
        return httpx.Response(200, content=sse, headers={"content-type": "text/event-stream"})

    path = tmp_path / "gemini-style.jsonl"
    engine = Engine(config_file=False, env_file=False, transport=httpx.MockTransport(server))
    engine.load_adapter(source, name="qkey")
    engine.add_provider("qkey", adapter="qkey", base_url="https://g.test/v1", api_key=REAL_KEY)
    with engine.recording(path):
        assert (await engine.complete("qkey", "m", prompt="hello")).text == "hi"
    assert REAL_KEY not in path.read_text(encoding="utf-8")

    seen: list[str] = []
    find = Replayer.find

    def spy(self: Replayer, request: httpx.Request) -> Any:
        seen.append(str(request.url))
        return find(self, request)

    monkeypatch.setattr(Replayer, "find", spy)
    monkeypatch.delenv("NOTEBOOK_LLM_TEST_UNSET_KEY", raising=False)
    engine = Engine(config_file=False, env_file=False, transport=httpx.MockTransport(_no_network))
    engine.load_adapter(source, name="qkey")
    engine.add_provider(
        "qkey",
        adapter="qkey",
        base_url="https://g.test/v1",
        api_key_env="NOTEBOOK_LLM_TEST_UNSET_KEY",
    )
    with engine.replaying(path, strict=True):
        assert (await engine.complete("qkey", "m", prompt="hello")).text == "hi"
    assert len(seen) == 1
    assert f"key={REPLAY_KEY}" in seen[0]
