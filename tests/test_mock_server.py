"""The loopback mock server, observed by a real HTTP client (httpx)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from waiting import until_sync

from notebook_llm.adapters.mock import FAULT_HEADER, FAULTS, MockReply, MockServer, ToolCall
from notebook_llm.adapters.mock.server import RecordedRequest

PROMPT = "Hello,  world!\n\tÜnïcödé 🎉 ok?"
ROUTES = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "ollama": "/api/chat"}


@pytest.fixture
def srv() -> Iterator[MockServer]:
    with MockServer() as server:
        yield server


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5.0) as c:
        yield c


def body(
    fmt: str, model: str = "echo", text: str = PROMPT, stream: bool = True, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "stream": stream,
    }
    if fmt == "anthropic":
        out.setdefault("max_tokens", 1000)
    out.update(extra)
    return out


def sse_data(raw: str) -> list[str]:
    return [line[len("data: ") :] for line in raw.split("\n") if line.startswith("data: ")]


def openai_chunks(raw: str) -> list[dict[str, Any]]:
    """Parse an OpenAI SSE body strictly: JSON chunks, then exactly one trailing [DONE]."""
    assert raw.endswith("data: [DONE]\n\n")
    data = sse_data(raw)
    assert data[-1] == "[DONE]"
    assert raw.count("\n\n") == len(data)
    chunks = [json.loads(d) for d in data[:-1]]
    for c in chunks[:-1]:
        assert c["object"] == "chat.completion.chunk"
        assert len(c["choices"]) == 1
        assert "delta" in c["choices"][0]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["total_tokens"] > 0
    return chunks


def openai_text(chunks: list[dict[str, Any]], key: str = "content") -> str:
    return "".join(c["choices"][0]["delta"].get(key) or "" for c in chunks if c["choices"])


def anthropic_events(raw: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in raw.strip("\n").split("\n\n"):
        ev, data = block.split("\n")
        assert ev.startswith("event: ")
        payload = json.loads(data.removeprefix("data: "))
        assert payload["type"] == ev.removeprefix("event: ")
        events.append((payload["type"], payload))
    return events


def anthropic_text(events: list[tuple[str, dict[str, Any]]], kind: str = "text_delta") -> str:
    key = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}[
        kind
    ]
    return "".join(
        p["delta"][key]
        for t, p in events
        if t == "content_block_delta" and p["delta"]["type"] == kind
    )


def ollama_lines(raw: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.splitlines()]


def post(
    client: httpx.Client, srv: MockServer, fmt: str, payload: dict[str, Any], **kw: Any
) -> httpx.Response:
    return client.post(srv.url + ROUTES[fmt], json=payload, **kw)


def drain(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    into: list[bytes],
    timeout: httpx.Timeout | None = None,
) -> None:
    """Stream a POST and collect the raw body bytes into ``into`` (kept if reading fails)."""
    kw: dict[str, Any] = {"timeout": timeout} if timeout else {}
    with client.stream("POST", url, json=payload, **kw) as r:
        assert r.status_code == 200
        for data in r.iter_raw():
            into.append(data)


# ------------------------------------------------------------------------------------ routes


def test_openai_stream_echo(srv: MockServer, client: httpx.Client) -> None:
    r = post(client, srv, "openai", body("openai", stream_options={"include_usage": True}))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    chunks = openai_chunks(r.text)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert openai_text(chunks) == PROMPT
    assert len(chunks) > 5
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2])
    assert chunks[-1]["usage"]["completion_tokens"] > 0


def test_openai_json_echo(srv: MockServer, client: httpx.Client) -> None:
    r = post(client, srv, "openai", body("openai", stream=False))
    doc = r.json()
    assert doc["object"] == "chat.completion"
    assert doc["choices"][0]["message"] == {
        "role": "assistant",
        "content": PROMPT,
        "refusal": None,
        "annotations": [],
    }
    assert doc["choices"][0]["finish_reason"] == "stop"
    assert (
        doc["usage"]["total_tokens"]
        == doc["usage"]["prompt_tokens"] + doc["usage"]["completion_tokens"]
    )
    alias = client.post(srv.url + "/chat/completions", json=body("openai", stream=False))
    assert alias.json()["choices"][0]["message"]["content"] == PROMPT


def test_anthropic_stream_and_json_echo(srv: MockServer, client: httpx.Client) -> None:
    events = anthropic_events(post(client, srv, "anthropic", body("anthropic")).text)
    types = [t for t, _ in events]
    assert types[:2] == ["message_start", "ping"]
    assert types[-2:] == ["message_delta", "message_stop"]
    assert anthropic_text(events) == PROMPT
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert events[-2][1]["usage"]["output_tokens"] > 0
    doc = post(client, srv, "anthropic", body("anthropic", stream=False)).json()
    assert doc["content"] == [{"type": "text", "text": PROMPT}]
    assert doc["stop_reason"] == "end_turn"


def test_ollama_stream_and_json_echo(srv: MockServer, client: httpx.Client) -> None:
    r = post(
        client, srv, "ollama", {"model": "echo", "messages": [{"role": "user", "content": PROMPT}]}
    )
    assert r.headers["content-type"] == "application/x-ndjson"
    lines = ollama_lines(r.text)
    assert "".join(x["message"]["content"] for x in lines) == PROMPT
    assert [x["done"] for x in lines] == [False] * (len(lines) - 1) + [True]
    assert lines[-1]["done_reason"] == "stop"
    assert lines[-1]["prompt_eval_count"] > 0
    assert lines[-1]["eval_count"] > 0
    doc = post(client, srv, "ollama", body("ollama", stream=False)).json()
    assert doc["message"]["content"] == PROMPT
    assert doc["done"] is True


def test_reasoning_all_formats(srv: MockServer, client: httpx.Client) -> None:
    chunks = openai_chunks(post(client, srv, "openai", body("openai", "reasoning", "Why?")).text)
    assert "Why?" in openai_text(chunks, "reasoning_content")
    assert openai_text(chunks) == "Why?"
    assert chunks[-1]["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    events = anthropic_events(
        post(client, srv, "anthropic", body("anthropic", "reasoning", "Why?")).text
    )
    assert "Why?" in anthropic_text(events, "thinking_delta")
    assert anthropic_text(events) == "Why?"
    blocks = [p["content_block"]["type"] for t, p in events if t == "content_block_start"]
    assert blocks == ["thinking", "text"]
    lines = ollama_lines(post(client, srv, "ollama", body("ollama", "reasoning", "Why?")).text)
    assert "Why?" in "".join(x["message"].get("thinking", "") for x in lines)
    doc = post(client, srv, "openai", body("openai", "reasoning", "Why?", stream=False)).json()
    assert "Why?" in doc["choices"][0]["message"]["reasoning_content"]


TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        },
    },
}


def test_openai_tools_round_trip(srv: MockServer, client: httpx.Client) -> None:
    first = body("openai", "tools", "add 2 and 40", tools=[TOOL])
    chunks = openai_chunks(post(client, srv, "openai", first).text)
    calls = [
        tc
        for c in chunks
        if c["choices"]
        for tc in c["choices"][0]["delta"].get("tool_calls") or []
    ]
    assert calls[0]["function"]["name"] == "add"
    assert len(calls) > 3
    args = "".join(tc["function"]["arguments"] for tc in calls)
    assert json.loads(args) == {"a": 2, "b": 40}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    call = {
        "id": calls[0]["id"],
        "type": "function",
        "function": {"name": "add", "arguments": args},
    }
    messages = [
        *first["messages"],
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "42"},
    ]
    second = post(client, srv, "openai", {**first, "messages": messages, "stream": False}).json()
    assert second["choices"][0]["finish_reason"] == "stop"
    assert "42" in second["choices"][0]["message"]["content"]


def test_anthropic_tools_round_trip(srv: MockServer, client: httpx.Client) -> None:
    tool = {"name": "add", "input_schema": TOOL["function"]["parameters"]}
    first = body("anthropic", "tools", "add 2 and 40", tools=[tool])
    events = anthropic_events(post(client, srv, "anthropic", first).text)
    start = next(p["content_block"] for t, p in events if t == "content_block_start")
    assert start["type"] == "tool_use"
    assert start["id"].startswith("toolu_")
    assert json.loads(anthropic_text(events, "input_json_delta")) == {"a": 2, "b": 40}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    messages = [
        *first["messages"],
        {"role": "assistant", "content": [{**start, "input": {"a": 2, "b": 40}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": start["id"], "content": "42"}],
        },
    ]
    doc = post(client, srv, "anthropic", {**first, "messages": messages, "stream": False}).json()
    assert doc["stop_reason"] == "end_turn"
    assert "42" in doc["content"][0]["text"]


def test_ollama_tools_round_trip(srv: MockServer, client: httpx.Client) -> None:
    first = body("ollama", "tools", "add 2 and 40", tools=[TOOL])
    lines = ollama_lines(post(client, srv, "ollama", first).text)
    (call,) = next(x["message"]["tool_calls"] for x in lines if x["message"].get("tool_calls"))
    assert call["function"]["arguments"] == {"a": 2, "b": 40}
    messages = [
        *first["messages"],
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_name": "add", "content": "42"},
    ]
    doc = post(client, srv, "ollama", {**first, "messages": messages, "stream": False}).json()
    assert "42" in doc["message"]["content"]


def test_lorem_max_tokens_length(srv: MockServer, client: httpx.Client) -> None:
    chunks = openai_chunks(post(client, srv, "openai", body("openai", "lorem", max_tokens=30)).text)
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 30
    doc = post(
        client, srv, "anthropic", body("anthropic", "lorem", max_tokens=30, stream=False)
    ).json()
    assert doc["stop_reason"] == "max_tokens"
    doc = post(
        client, srv, "ollama", body("ollama", "lorem", stream=False, options={"num_predict": 30})
    ).json()
    assert (doc["done_reason"], doc["eval_count"]) == ("length", 30)
    full = post(client, srv, "openai", body("openai", "lorem", stream=False)).json()
    assert full["usage"]["completion_tokens"] >= 2000


def test_unknown_model_404(srv: MockServer, client: httpx.Client) -> None:
    r = post(client, srv, "openai", body("openai", "x"))
    assert r.status_code == 404
    assert r.json() == {
        "error": {
            "message": "The model `x` does not exist",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    assert (
        post(client, srv, "anthropic", body("anthropic", "x")).json()["error"]["type"]
        == "not_found_error"
    )
    assert "not found" in post(client, srv, "ollama", body("ollama", "x")).json()["error"]


def test_model_lists_and_bad_routes(srv: MockServer, client: httpx.Client) -> None:
    ids = [m["id"] for m in client.get(srv.url + "/v1/models").json()["data"]]
    assert ids == ["echo", "reasoning", "tools", "lorem"]
    names = [m["name"] for m in client.get(srv.url + "/api/tags").json()["models"]]
    assert names == ids
    assert client.get(srv.url + "/nope").status_code == 404
    assert client.post(srv.url + "/v1/nope", json={}).status_code == 404
    bad = client.post(srv.url + "/v1/chat/completions", content=b"{not json")
    assert bad.status_code == 400


def test_streaming_is_incremental(srv: MockServer, client: httpx.Client) -> None:
    srv.chunk_delay = 0.03
    t0 = time.monotonic()
    with client.stream(
        "POST", srv.url + ROUTES["openai"], json=body("openai", text="a b c d e f g h")
    ) as r:
        lines = r.iter_lines()
        next(lines)
        first = time.monotonic() - t0
        rest = list(lines)
    total = time.monotonic() - t0
    assert "data: [DONE]" in rest
    assert first < total - 0.1


def test_latency(srv: MockServer, client: httpx.Client) -> None:
    srv.latency = 0.2
    t0 = time.monotonic()
    post(client, srv, "openai", body("openai", stream=False))
    assert time.monotonic() - t0 >= 0.2


def test_queue_reply(srv: MockServer, client: httpx.Client) -> None:
    call = ToolCall.make("lookup", {"q": "x"}, id="call_abc")
    srv.queue_reply(MockReply.build("scripted text", reasoning="thinking hard", tool_calls=[call]))
    srv.queue_reply(MockReply.build("second"))
    chunks = openai_chunks(post(client, srv, "openai", body("openai", "any-model-name")).text)
    assert openai_text(chunks) == "scripted text"
    assert openai_text(chunks, "reasoning_content") == "thinking hard"
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    doc = post(client, srv, "anthropic", body("anthropic", stream=False)).json()
    assert doc["content"] == [{"type": "text", "text": "second"}]
    doc = post(client, srv, "anthropic", body("anthropic", stream=False)).json()
    assert doc["content"][0]["text"] == PROMPT  # queue empty: the model again


def test_require_key(client: httpx.Client) -> None:
    with MockServer(require_key="sekret") as srv:
        r = post(client, srv, "openai", body("openai"))
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "invalid_api_key"
        r = post(client, srv, "anthropic", body("anthropic"), headers={"x-api-key": "wrong"})
        assert (r.status_code, r.json()["error"]["type"]) == (401, "authentication_error")
        assert client.get(srv.url + "/v1/models").status_code == 401
        ok = post(client, srv, "openai", body("openai"), headers={"Authorization": "Bearer sekret"})
        assert ok.status_code == 200
        ok = post(client, srv, "anthropic", body("anthropic"), headers={"x-api-key": "sekret"})
        assert ok.status_code == 200


def test_requests_recorded(srv: MockServer, client: httpx.Client) -> None:
    post(client, srv, "openai", body("openai"), headers={"X-Test": "1"})
    client.get(srv.url + "/api/tags")
    reqs = srv.requests
    assert [(r.method, r.path) for r in reqs] == [
        ("POST", "/v1/chat/completions"),
        ("GET", "/api/tags"),
    ]
    assert isinstance(reqs[0], RecordedRequest)
    assert reqs[0].headers["x-test"] == "1"
    assert reqs[0].body["messages"][0]["content"] == PROMPT
    srv.clear_requests()
    assert srv.requests == []


def test_stop_is_idempotent_and_frees_port() -> None:
    srv = MockServer().start()
    port = srv.port
    srv.stop()
    srv.stop()
    with socket.create_server(("127.0.0.1", port)):
        pass


# ------------------------------------------------------------------------------------ faults


def test_fault_names() -> None:
    assert set(FAULTS) == {
        "disconnect", "stall", "malformed", "rate_limit", "server_error", "unauthorized",
        "no_end", "drip", "oversized_line", "wrong_format", "error_event", "keepalive",
        "trickle",
    }  # fmt: skip
    with pytest.raises(ValueError, match="unknown fault"):
        MockServer().inject("bogus")


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "ollama"])
def test_disconnect(srv: MockServer, client: httpx.Client, fmt: str) -> None:
    srv.inject("disconnect")
    received: list[bytes] = []
    with pytest.raises(httpx.RemoteProtocolError):
        drain(client, srv.url + ROUTES[fmt], body(fmt), received)
    received_bytes = b"".join(received)
    assert received_bytes.startswith((b"data: {", b"event: ", b"{"))
    assert b"[DONE]" not in received_bytes
    assert b"message_stop" not in received_bytes
    assert b'"done":true' not in received_bytes
    assert post(client, srv, fmt, body(fmt)).status_code == 200  # next request is fine


def test_disconnect_non_stream(srv: MockServer, client: httpx.Client) -> None:
    srv.inject("disconnect")
    with pytest.raises(httpx.RemoteProtocolError):
        post(client, srv, "openai", body("openai", stream=False))


def test_stall_read_timeout_and_fast_stop(client: httpx.Client) -> None:
    srv = MockServer().start()
    try:
        srv.inject("stall", seconds=3600)
        timeout = httpx.Timeout(5.0, read=0.5)
        got: list[bytes] = []
        with pytest.raises(httpx.ReadTimeout):
            drain(client, srv.url + ROUTES["openai"], body("openai"), got, timeout)
        assert b"".join(got).startswith(b"data: {")
        # other requests are served meanwhile
        assert post(client, srv, "openai", body("openai", stream=False)).status_code == 200
        handlers = list(srv._handlers)  # the stalled one among them
        assert handlers
    finally:
        srv.stop()
    # stop() woke the handler in its hour-long stall: it ends (the guard is a hang guard)
    until_sync(lambda: not any(t.is_alive() for t in handlers), "the stalled handler to end")


def test_stall_header_then_completes(srv: MockServer, client: httpx.Client) -> None:
    r = post(
        client, srv, "openai", body("openai"), headers={FAULT_HEADER: "stall; seconds=0.2; after=1"}
    )
    assert openai_text(openai_chunks(r.text)) == PROMPT
    assert r.elapsed.total_seconds() >= 0.2


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "ollama"])
def test_malformed(srv: MockServer, client: httpx.Client, fmt: str) -> None:
    r = post(client, srv, fmt, body(fmt), headers={FAULT_HEADER: "malformed"})
    assert r.status_code == 200
    lines = sse_data(r.text) if fmt != "ollama" else r.text.splitlines()
    bad = []
    for line in lines:
        if line == "[DONE]":
            continue
        try:
            json.loads(line)
        except ValueError:
            bad.append(line)
    assert len(bad) == 1
    assert lines.index(bad[0]) not in (0, len(lines) - 1)


def test_rate_limit(srv: MockServer, client: httpx.Client) -> None:
    srv.inject("rate_limit", count=2, seconds=3)
    for fmt in ("openai", "anthropic"):
        r = post(client, srv, fmt, body(fmt))
        assert r.status_code == 429
        assert r.headers["retry-after"] == "3"
    assert r.json()["error"]["type"] == "rate_limit_error"
    assert post(client, srv, "openai", body("openai")).status_code == 200
    r = post(client, srv, "openai", body("openai"), headers={FAULT_HEADER: "rate_limit"})
    assert (r.status_code, r.headers["retry-after"]) == (429, "1")
    assert r.json()["error"]["type"] == "rate_limit_error"


def test_server_error_and_unauthorized(srv: MockServer, client: httpx.Client) -> None:
    r = post(client, srv, "openai", body("openai"), headers={FAULT_HEADER: "server_error"})
    assert (r.status_code, r.json()["error"]["type"]) == (500, "server_error")
    r = post(
        client,
        srv,
        "anthropic",
        body("anthropic"),
        headers={FAULT_HEADER: "server_error; status=529"},
    )
    assert (r.status_code, r.json()["error"]["type"]) == (529, "api_error")
    r = post(client, srv, "anthropic", body("anthropic"), headers={FAULT_HEADER: "unauthorized"})
    assert (r.status_code, r.json()["error"]["type"]) == (401, "authentication_error")
    r = post(client, srv, "openai", body("openai"), headers={FAULT_HEADER: "nonsense"})
    assert r.status_code == 400


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "ollama"])
def test_no_end(srv: MockServer, client: httpx.Client, fmt: str) -> None:
    srv.inject("no_end")
    r = post(client, srv, fmt, body(fmt))
    assert r.status_code == 200
    text = r.text
    assert "[DONE]" not in text
    assert "message_stop" not in text
    assert 'stop_reason":"end_turn' not in text
    assert '"done":true' not in text
    if fmt == "openai":
        chunks = [json.loads(d) for d in sse_data(text)]
        assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
        assert openai_text(chunks) == PROMPT
    doc = post(client, srv, fmt, body(fmt, stream=False), headers={FAULT_HEADER: "no_end"}).json()
    assert doc.get("done") in (False, None)
    assert doc.get("stop_reason") is None
    assert all(c["finish_reason"] is None for c in doc.get("choices", []))


def test_drip(srv: MockServer, client: httpx.Client) -> None:
    srv.inject("drip", delay=0.001)
    chunks = openai_chunks(post(client, srv, "openai", body("openai", text="drip drop")).text)
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks[1:-2]]
    assert pieces == list("drip drop")
    r = post(
        client,
        srv,
        "anthropic",
        body("anthropic", stream=False),
        headers={FAULT_HEADER: "drip; delay=0.001"},
    )
    assert r.json()["content"][0]["text"] == PROMPT


def test_oversized_line(srv: MockServer, client: httpx.Client) -> None:
    srv.inject("oversized_line")  # default 20 MiB
    r = post(client, srv, "openai", body("openai"))
    lines = r.text.split("\n")
    big = max(lines, key=len)
    assert len(big.encode()) == 20 * 1024 * 1024
    assert json.loads(big.removeprefix("data: "))["choices"][0]["delta"]["content"].startswith(
        "xxx"
    )
    assert lines[-3] == "data: [DONE]"
    r = post(
        client,
        srv,
        "anthropic",
        body("anthropic"),
        headers={FAULT_HEADER: "oversized_line; size=5000"},
    )
    assert max(len(line) for line in r.text.split("\n")) == 5000
    anthropic_events(r.text)  # still valid
    r = post(
        client, srv, "ollama", body("ollama"), headers={FAULT_HEADER: "oversized_line; size=5000"}
    )
    assert max(len(line) for line in r.text.split("\n")) == 5000


def test_wrong_format(srv: MockServer, client: httpx.Client) -> None:
    r = post(client, srv, "openai", body("openai"), headers={FAULT_HEADER: "wrong_format"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.text.startswith("<html")
    assert "data:" not in r.text


def test_error_event(srv: MockServer, client: httpx.Client) -> None:
    srv.inject("error_event", count=3)
    raw = post(client, srv, "openai", body("openai")).text
    data = [json.loads(d) for d in sse_data(raw)]
    assert "[DONE]" not in raw
    assert data[-1]["error"]["type"] == "server_error"
    assert openai_text(data[:-1])
    events = anthropic_events(post(client, srv, "anthropic", body("anthropic")).text)
    assert events[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    assert anthropic_text(events)
    assert "message_stop" not in [t for t, _ in events]
    lines = ollama_lines(post(client, srv, "ollama", body("ollama")).text)
    assert "error" in lines[-1]


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Each write the mock server's handler makes to its socket, in order."""
    from notebook_llm.adapters.mock import server as mock_server

    seen: list[bytes] = []
    setup = mock_server._Handler.setup

    def recording_setup(self: Any) -> None:
        setup(self)
        write = self.wfile.write

        def record(data: bytes) -> Any:
            seen.append(bytes(data))
            return write(data)

        self.wfile.write = record

    monkeypatch.setattr(mock_server._Handler, "setup", recording_setup)
    return seen


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "ollama"])
def test_a_streams_last_chunk_and_its_end_go_in_one_write(
    srv: MockServer, client: httpx.Client, writes: list[bytes], fmt: str
) -> None:
    # A client then reads both at once, whatever the load: the batch's test of when the last
    # read is mapped (test_request_slots) relies on it.
    raw = post(client, srv, fmt, body(fmt)).content
    last = writes[-1]
    assert last.endswith(b"\r\n0\r\n\r\n")
    assert last.removesuffix(b"\r\n0\r\n\r\n").split(b"\r\n", 1)[1] in raw  # a whole chunk


def test_a_cut_stream_sends_no_end(
    srv: MockServer, client: httpx.Client, writes: list[bytes]
) -> None:
    srv.inject("disconnect")
    with pytest.raises(httpx.RemoteProtocolError):
        post(client, srv, "openai", body("openai"))
    assert not any(w.endswith(b"0\r\n\r\n") for w in writes)
