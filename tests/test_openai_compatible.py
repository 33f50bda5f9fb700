"""The built-in ``openai`` adapter against an OpenAI-compatible server.

A loopback HTTP server plays the server: it records every request and answers with scripted
bodies, among them llama.cpp's own recorded ones (``fixtures/llamacpp/``, see SOURCES.md there)
and OpenAI's recorded 400 (``fixtures/wire/openai/error_400_unsupported_parameter.json``). The
same behaviours are checked against a real llama.cpp server in ``tests/interop/``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from notebook_llm import Chat, Engine, LlmError
from notebook_llm.core.errors import ErrorCode
from notebook_llm.notebook.widgets.render import EMPTY_ANSWER, USAGE_NOT_REPORTED, ViewStats
from notebook_llm.notebook.widgets.stream_view import StreamView

FIXTURES = Path(__file__).parent / "fixtures"
LLAMACPP = FIXTURES / "llamacpp"
OPENAI_400 = FIXTURES / "wire" / "openai" / "error_400_unsupported_parameter.json"

Reply = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class Loopback:
    """A scripted OpenAI-compatible server: ``replies`` answer POSTs in turn (the last repeats)."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    models: Any = None

    @property
    def posts(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST"]


def sse_reply(body: bytes, status: int = 200, ctype: str = "text/event-stream") -> Reply:
    def reply(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return reply


def cut_reply(first: bytes) -> Reply:
    """200 headers with chunked encoding, ``first`` as one chunk, then the connection drops."""

    def reply(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()
        if first:
            h.wfile.write(f"{len(first):x}\r\n".encode() + first + b"\r\n")
        h.wfile.flush()
        h.connection.shutdown(socket.SHUT_RDWR)
        h.close_connection = True

    return reply


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    doc = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gemma-3-270m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(doc).encode() + b"\r\n\r\n"


TEXT_STREAM = chunk({"role": "assistant"}) + chunk({"content": "Hi"}) + chunk({}, "stop")
TEXT_STREAM += b"data: [DONE]\r\n\r\n"


@pytest.fixture
def server() -> Iterator[Loopback]:
    state = Loopback(replies=[sse_reply(TEXT_STREAM)])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _record(self, body: dict[str, Any] | None) -> None:
            state.seen.append(Seen(self.command, self.path, dict(self.headers), body))

        def do_GET(self) -> None:
            self._record(None)
            if self.path != "/v1/models" or state.models is None:
                sse_reply(b'{"detail":"Not Found"}', 404, "application/json")(self)
                return
            sse_reply(json.dumps(state.models).encode(), 200, "application/json")(self)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            self._record(json.loads(raw))
            index = min(len(state.posts) - 1, len(state.replies) - 1)
            state.replies[index](self)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def local(server: Loopback, **kw: Any) -> Engine:
    engine = Engine(config_file=False, env_file=False, retry_base=0.01)
    engine.add_provider("local", adapter="openai", base_url=server.url, model="gemma-3-270m", **kw)
    return engine


# ------------------------------------------------------------------ 1. the max-tokens field


def test_an_openai_compatible_provider_gets_max_tokens(server: Loopback) -> None:
    local(server).complete_sync("local", prompt="hi", max_tokens=8)
    body = server.posts[0].body
    assert body is not None
    assert body["max_tokens"] == 8
    assert "max_completion_tokens" not in body


def test_the_openai_preset_gets_max_completion_tokens(
    server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000")
    monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", server.url)
    Engine(config_file=False, env_file=False).complete_sync("openai", prompt="hi", max_tokens=8)
    body = server.posts[0].body
    assert body is not None
    assert body["max_completion_tokens"] == 8
    assert "max_tokens" not in body


def test_max_tokens_field_is_set_per_provider_in_add_provider(server: Loopback) -> None:
    local(server, max_tokens_field="max_completion_tokens").complete_sync(
        "local", prompt="hi", max_tokens=8
    )
    body = server.posts[0].body
    assert body is not None
    assert (body.get("max_completion_tokens"), body.get("max_tokens")) == (8, None)


def test_max_tokens_field_is_set_per_provider_in_the_config_file(
    server: Loopback, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[providers.local]\nadapter = "openai"\nbase_url = "{server.url}"\n'
        'model = "m"\nmax_tokens_field = "max_completion_tokens"\n'
        '[providers.openai]\nmax_tokens_field = "max_tokens"\n',
        encoding="utf-8",
    )
    engine = Engine(config_file=config, env_file=False)
    assert engine.provider("openai").max_tokens_field == "max_tokens"  # the file beats the preset
    engine.complete_sync("local", prompt="hi", max_tokens=8)
    body = server.posts[0].body
    assert body is not None
    assert (body.get("max_completion_tokens"), body.get("max_tokens")) == (8, None)


def test_a_bad_max_tokens_field_in_the_config_file_is_one_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[providers.x]\nadapter = "openai"\nmax_tokens_field = 3\n', "utf-8")
    with pytest.raises(LlmError) as info:
        Engine(config_file=config, env_file=False)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "max_tokens_field must be a field name" in info.value.message


def test_openais_recorded_unsupported_parameter_400(server: Loopback) -> None:
    # The recorded body refuses `stop`: a plain INVALID_REQUEST, not retried, no field hint.
    server.replies = [sse_reply(OPENAI_400.read_bytes(), 400, "application/json")]
    with pytest.raises(LlmError) as info:
        local(server).complete_sync("local", prompt="hi", stop_sequences=["x"])
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert "Unsupported parameter: 'stop'" in info.value.message
    assert "max_tokens_field" not in info.value.message
    assert len(server.posts) == 1


def test_a_refused_max_tokens_field_says_which_setting_to_change(server: Loopback) -> None:
    # The recorded body's shape with the parameter OpenAI refuses for its reasoning models
    # (its documented message for `max_tokens`).
    refusal = json.loads(OPENAI_400.read_text("utf-8"))
    refusal["error"]["param"] = "max_tokens"
    refusal["error"]["message"] = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead."
    )
    server.replies = [sse_reply(json.dumps(refusal).encode(), 400, "application/json")]
    with pytest.raises(LlmError) as info:
        local(server).complete_sync("local", prompt="hi", max_tokens=8)
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert "set max_tokens_field = \"max_completion_tokens\" for provider 'local'" in str(
        info.value
    )


# ------------------------------------------------------------------ 2. the model list


def test_list_models_asks_the_server(server: Loopback) -> None:
    from notebook_llm.core.background_loop import run_sync

    server.models = json.loads((LLAMACPP / "models.json").read_text("utf-8"))
    found = run_sync(local(server).list_models("local"))
    assert [m.id for m in found] == ["gemma-3-270m"]
    assert [s.path for s in server.seen] == ["/v1/models"]


def test_list_models_falls_back_to_the_configured_list_when_the_server_cannot_say(
    server: Loopback,
) -> None:
    from notebook_llm.core.background_loop import run_sync

    engine = local(server, models=["a", "b"])
    assert [m.id for m in run_sync(engine.list_models("local"))] == ["a", "b"]  # 404
    bare = local(server)
    with pytest.raises(LlmError) as info:
        run_sync(bare.list_models("local"))
    assert info.value.code == ErrorCode.NOT_FOUND


def test_the_openai_preset_keeps_its_curated_list(
    server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_llm.core.background_loop import run_sync

    monkeypatch.setenv("NOTEBOOK_LLM_OPENAI_BASE_URL", server.url)
    found = run_sync(Engine(config_file=False, env_file=False).list_models("openai"))
    assert "gpt-4o-mini" in [m.id for m in found]
    assert server.seen == []


# ------------------------------------------------------------------ 3. the empty answer


def test_an_empty_answer_is_finish_stop_with_empty_text_and_is_not_retried(
    server: Loopback,
) -> None:
    server.replies = [sse_reply((LLAMACPP / "stream_empty_answer.sse").read_bytes())]
    done = local(server).complete_sync("local", prompt="hi")
    assert (done.text, done.finish and done.finish.kind) == ("", "stop")
    assert len(server.posts) == 1


@pytest.mark.parametrize(
    "body",
    [
        b"data: [DONE]\r\n\r\n",
        # llama.cpp's stream cut short by a newer request: a role chunk, then [DONE].
        (LLAMACPP / "stream_interrupted.sse").read_bytes(),
    ],
    ids=["done-only", "llamacpp-interrupted"],
)
def test_a_body_without_any_chunk_is_still_empty_response(server: Loopback, body: bytes) -> None:
    server.replies = [sse_reply(body)]
    with pytest.raises(LlmError) as info:
        local(server).complete_sync("local", prompt="hi")
    assert info.value.code == ErrorCode.EMPTY_RESPONSE
    assert len(server.posts) == 3  # retryable: two retries


# ------------------------------------------------------------------ 4. failures after the 200


def test_an_empty_200_body_says_so_plainly(server: Loopback) -> None:
    server.replies = [sse_reply(b"")]
    engine = local(server)
    engine.retries = 0
    with pytest.raises(LlmError) as info:
        engine.complete_sync("local", prompt="hi")
    assert info.value.code == ErrorCode.EMPTY_RESPONSE
    assert "accepted the request (HTTP 200) but then sent an empty body" in info.value.message
    assert "context window" not in info.value.message  # a small request


def test_an_empty_200_body_after_a_large_request_suggests_the_context_window(
    server: Loopback,
) -> None:
    server.replies = [sse_reply(b"")]
    engine = local(server)
    engine.retries = 0
    with pytest.raises(LlmError) as info:
        engine.complete_sync("local", prompt="word " * 2000)
    assert "context window" in info.value.message
    assert "--n_ctx" in info.value.message


def test_a_body_cut_after_the_200_says_so_plainly(server: Loopback) -> None:
    server.replies = [cut_reply(b"")]
    engine = local(server)
    engine.retries = 0
    with pytest.raises(LlmError) as info:
        engine.complete_sync("local", prompt="word " * 2000)
    assert info.value.code == ErrorCode.TRANSPORT
    assert "closed the connection before the answer was complete" in info.value.message
    assert "context window" in info.value.message


def test_a_body_cut_mid_answer_keeps_the_partial_text(server: Loopback) -> None:
    server.replies = [cut_reply(chunk({"role": "assistant"}) + chunk({"content": "Hel"}))]
    with pytest.raises(LlmError) as info:
        local(server).complete_sync("local", prompt="hi")
    assert "closed the connection before the answer was complete" in info.value.message
    assert info.value.details["completion"].text == "Hel"


# ------------------------------------------------------------------ 5. usage not reported


def test_missing_usage_is_none_not_zeros(server: Loopback) -> None:
    server.replies = [sse_reply((LLAMACPP / "stream_text.sse").read_bytes())]
    done = local(server, prices={"gemma-3-270m": (1.0, 1.0)}).complete_sync("local", prompt="hi")
    assert done.text
    assert done.usage is None
    assert "usage=<usage not reported>" in repr(done)


def test_the_footer_says_usage_not_reported_and_shows_no_cost() -> None:
    stats = ViewStats(output_tokens=12, cost=0.5, status="done")  # estimated: no usage event
    assert stats.line() == USAGE_NOT_REPORTED
    streaming = ViewStats(output_tokens=12)
    assert streaming.line() == "~12 out"  # while streaming, the running estimate
    reported = ViewStats(input_tokens=3, output_tokens=4, estimated=False, cost=0.5, status="done")
    assert reported.line() == "3 in · 4 out · $0.50"


def test_the_view_says_empty_answer(server: Loopback) -> None:
    server.replies = [sse_reply((LLAMACPP / "stream_empty_answer.sse").read_bytes())]
    chat = Chat("local", engine=local(server), live=False)
    InteractiveShell.instance()  # display() needs a shell to publish to
    with capture_output() as cap:
        done = chat.send("hi")
    assert done.error is None
    plain = [o.data["text/plain"] for o in cap.outputs if "text/plain" in o.data]
    assert len(plain) == 1  # one static output: the answer line, then the footer
    answer, footer = plain[0].split("\n")
    assert answer == EMPTY_ANSWER
    assert footer.startswith("-- local")
    assert footer.endswith(USAGE_NOT_REPORTED)


def test_the_live_footer_says_usage_not_reported_with_no_cost(server: Loopback) -> None:
    server.replies = [sse_reply((LLAMACPP / "stream_text.sse").read_bytes())]
    engine = local(server)
    events = engine.complete_sync("local", prompt="hi").events
    view = StreamView("local:gemma-3-270m", price=(1.0, 2.0))
    for event in events:
        view.handle(event)
    view.flush()
    assert "~" in view.stats_text  # while streaming: the running estimate
    view.finish(status="done")
    assert USAGE_NOT_REPORTED in view.stats_text
    assert "$" not in view.stats_text
    assert " 0 in" not in view.stats_text


def test_the_static_footer_says_usage_not_reported_only_for_a_finished_answer() -> None:
    from notebook_llm.notebook.widgets.final import footer_line

    assert footer_line("local", "done", None, 0.5) == f"local · done · {USAGE_NOT_REPORTED}"
    failed = footer_line("local", "error SERVER", None, None, finished=False)
    assert failed == "local · error SERVER"
