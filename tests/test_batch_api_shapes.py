"""The documented and recorded batch API bodies (``tests/fixtures/batch``, see its SOURCES.md)
read by the batch API code: each status as the provider means it, each results line as the
row's answer or the provider's error (mapped by the adapter), and what a hostile server sends
refused before it steers anything."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from notebook_llm.api.batch_api.anthropic import AnthropicBatches
from notebook_llm.api.batch_api.codec import RowCodec
from notebook_llm.api.batch_api.http_calls import BatchHttp
from notebook_llm.api.batch_api.openai import OpenAIBatches
from notebook_llm.api.batch_api.remote import RemoteStatus, RowOutcome
from notebook_llm.core.completion import Completion
from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.engine.engine import Engine
from notebook_llm.engine.request import Request
from notebook_llm.wire.limits import WireLimits

BATCH = Path(__file__).parent / "fixtures" / "batch"
OPENAI_BASE = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"


def _lines(name: str) -> list[bytes]:
    return [line for line in (BATCH / name).read_bytes().splitlines() if line.strip()]


def _http(answer: Callable[[httpx.Request], httpx.Response], **kw: Any) -> BatchHttp:
    return BatchHttp("p", {"authorization": "Bearer k"}, lambda: httpx.MockTransport(answer), **kw)


def _json_answer(body: Any) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(200, json=body)


async def _poll(speaker: Any, body: Any) -> RemoteStatus:
    async with _http(_json_answer(body)) as http:
        status: RemoteStatus = await speaker.poll(http, "batch_abc123")
        return status


def _fixture(name: str) -> Any:
    return json.loads((BATCH / name).read_text())


def _codec(adapter: str) -> RowCodec:
    engine = Engine(config_file=False)
    base = OPENAI_BASE if adapter == "openai" else "https://api.anthropic.com"
    engine.add_provider("p", adapter=adapter, base_url=base, model="m", needs_key=False)
    return RowCodec(engine, Request("p"), adapter)


def _result(codec: RowCodec, outcome: RowOutcome | None) -> Completion | LlmError:
    assert outcome is not None
    if outcome.body is None:
        assert outcome.error is not None
        return outcome.error
    completion = codec.completion(outcome.body)
    return completion.error or completion


# ---------------------------------------------------------------------------- OpenAI


def test_openai_statuses_read_as_documented() -> None:
    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    validating = asyncio.run(_poll(speaker, _fixture("openai/batch_validating.json")))
    assert (validating.ended, validating.status, validating.total) == (False, "validating", None)
    completed = asyncio.run(_poll(speaker, _fixture("openai/batch_completed.json")))
    assert completed.ended
    assert completed.error is None
    assert completed.counts == {"total": 100, "completed": 95, "failed": 5}
    assert (completed.finished, completed.total) == (100, 100)
    assert completed.fields == {"output_file_id": "file-cvaTdG", "error_file_id": "file-HOWS94"}
    failed = asyncio.run(_poll(speaker, _fixture("openai/batch_failed.json")))
    assert failed.ended
    assert failed.error == "the batch failed: line 3: Each line must be a JSON object."


def test_openai_results_lines_become_the_rows_answers_and_errors() -> None:
    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    codec = _codec("openai")
    answers = {}
    for line in _lines("openai/output.jsonl"):
        outcome = speaker.outcome(line)
        result = _result(codec, outcome)
        assert isinstance(result, Completion)
        assert outcome is not None
        answers[outcome.custom_id] = (result.text, result.usage)
    assert answers["request-1"][0] == "Hello! How can I assist you today?"
    assert answers["request-2"][0] == "Hello."
    assert answers["request-3"][0] == "2 + 2 equals 4."
    usage = answers["request-2"][1]
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (22, 2)
    for line in _lines("openai/errors_expired.jsonl"):
        error = _result(codec, speaker.outcome(line))
        assert isinstance(error, LlmError)
        assert error.code == ErrorCode.BATCH_EXPIRED
        assert "completion window expired" in error.message


def test_openai_lines_around_recorded_bodies() -> None:
    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    codec = _codec("openai")
    ok_line, error_line = _lines("openai/recorded_bodies.jsonl")
    ok = _result(codec, speaker.outcome(ok_line))
    assert isinstance(ok, Completion)
    assert ok.text.startswith("Hello! I'm just a computer program")
    error = _result(codec, speaker.outcome(error_line))
    assert isinstance(error, LlmError)
    assert (error.code, error.status) == (ErrorCode.INVALID_REQUEST, 400)
    assert "Unsupported parameter: 'stop'" in error.message
    assert error.request_id == "req_rec2"


def test_an_openai_row_is_a_documented_input_line() -> None:
    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    documented = json.loads(_lines("openai/input.jsonl")[0])
    line = speaker.item("request-1", json.dumps(documented["body"]))
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line) == documented


# ---------------------------------------------------------------------------- Anthropic


def test_anthropic_statuses_read_as_documented() -> None:
    speaker = AnthropicBatches("p", "https://api.anthropic.com", ANTHROPIC_URL)
    running = asyncio.run(_poll(speaker, _fixture("anthropic/batch_in_progress.json")))
    assert (running.ended, running.status, running.finished, running.total) == (
        False,
        "in_progress",
        0,
        2,
    )
    ended = asyncio.run(_poll(speaker, _fixture("anthropic/batch_ended.json")))
    assert ended.ended
    assert (ended.finished, ended.total) == (4, 4)
    assert ended.counts["succeeded"] == 4
    assert ended.fields["results_url"].endswith("/msgbatch_01GgqTz9XzriGNHzTSGZsJJ8/results")


def test_anthropic_results_lines_become_the_rows_answers_and_errors() -> None:
    speaker = AnthropicBatches("p", "https://api.anthropic.com", ANTHROPIC_URL)
    codec = _codec("anthropic")
    texts = {}
    for line in _lines("anthropic/results.jsonl"):
        outcome = speaker.outcome(line)
        result = _result(codec, outcome)
        assert isinstance(result, Completion)
        assert outcome is not None
        texts[outcome.custom_id] = result.text
    assert texts["my-first-request"].startswith("Hello! How can I assist you today?")
    assert texts["my-second-request"].startswith("Hello again!")
    ok, errored, expired, canceled = (
        _result(codec, speaker.outcome(line)) for line in _lines("anthropic/recorded_bodies.jsonl")
    )
    assert isinstance(ok, Completion)
    assert ok.text.startswith("Hello! As an AI language model")
    assert ok.usage is not None
    assert ok.usage.output_tokens == 35
    assert isinstance(errored, LlmError)
    assert errored.code == ErrorCode.INVALID_REQUEST
    assert "unexpected `tool_use_id` found in `tool_result` blocks" in errored.message
    assert isinstance(expired, LlmError)
    assert expired.code == ErrorCode.BATCH_EXPIRED
    assert isinstance(canceled, LlmError)
    assert canceled.code == ErrorCode.ABORTED


def test_an_anthropic_batch_is_the_documented_request_body() -> None:
    speaker = AnthropicBatches("p", "https://api.anthropic.com", ANTHROPIC_URL)
    params = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}
    body = (
        speaker.head
        + speaker.item("a-1", json.dumps(params))
        + speaker.separator
        + speaker.item("a-2", json.dumps(params))
        + speaker.tail
    )
    assert json.loads(body) == {
        "requests": [{"custom_id": "a-1", "params": params}, {"custom_id": "a-2", "params": params}]
    }


# ---------------------------------------------------------------------------- hostile servers


def test_a_results_url_on_another_host_never_gets_the_key() -> None:
    speaker = AnthropicBatches("p", "https://api.anthropic.com", ANTHROPIC_URL)
    body = _fixture("anthropic/batch_ended.json")
    body["results_url"] = "https://attacker.example/collect"
    with pytest.raises(LlmError) as info:
        asyncio.run(_poll(speaker, body))
    assert info.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "another host" in info.value.message


@pytest.mark.parametrize("bad", [-5, True, 10**12, 3.5, "7", None])
def test_counts_that_are_not_counts_count_nothing(bad: Any) -> None:
    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    body = _fixture("openai/batch_completed.json")
    body["request_counts"] = {"total": bad, "completed": bad, "failed": 5}
    status = asyncio.run(_poll(speaker, body))
    assert status.counts == {"total": 0, "completed": 0, "failed": 5}
    assert status.finished == 0  # never more than the total


@pytest.mark.parametrize("bad", ["../../files/x", "a b", "", "x" * 300, 12, None])
def test_an_unusable_id_from_the_server_is_refused(bad: Any) -> None:
    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    body = _fixture("openai/batch_completed.json")
    body["output_file_id"] = bad
    if bad is None:  # null is allowed: no output file
        assert asyncio.run(_poll(speaker, body)).fields["output_file_id"] is None
        return
    if bad == "../../files/x":  # an id with slashes is quoted into one path segment
        assert asyncio.run(_poll(speaker, body)).fields["output_file_id"] == bad
        return
    with pytest.raises(LlmError) as info:
        asyncio.run(_poll(speaker, body))
    assert info.value.code == ErrorCode.MALFORMED_RESPONSE


def test_a_file_id_with_slashes_stays_one_path_segment() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(200, content=b"")

    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    status = RemoteStatus(True, "completed", {}, 0, None, {"output_file_id": "../../x"})

    async def collect() -> list[RowOutcome]:
        async with _http(answer) as http:
            return [o async for o in speaker.results(http, status)]

    assert asyncio.run(collect()) == []
    assert seen == ["/v1/files/..%2F..%2Fx/content"]


def test_an_unknown_status_is_refused() -> None:
    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    body = _fixture("openai/batch_completed.json")
    body["status"] = "<script>"
    with pytest.raises(LlmError) as info:
        asyncio.run(_poll(speaker, body))
    assert info.value.code == ErrorCode.MALFORMED_RESPONSE


def test_a_results_line_over_the_body_cap_ends_the_download() -> None:
    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    status = RemoteStatus(True, "completed", {}, 0, None, {"output_file_id": "file-1"})
    huge = b'{"custom_id": "x", "response": {"body": "' + b"a" * 5000 + b'"}}\n'

    async def collect() -> None:
        http = _http(
            lambda r: httpx.Response(200, content=huge), limits=WireLimits(max_body_bytes=1024)
        )
        async with http:
            async for _ in speaker.results(http, status):
                pass

    with pytest.raises(LlmError) as info:
        asyncio.run(collect())
    assert info.value.code == ErrorCode.RESPONSE_TOO_LARGE


def test_lines_that_are_not_results_are_skipped() -> None:
    speaker = OpenAIBatches("p", OPENAI_BASE, OPENAI_BASE + "/chat/completions")
    for line in (b"not json", b"[1, 2]", b'{"custom_id": 5}', b'{"no": "id"}'):
        assert speaker.outcome(line) is None
    anthropic = AnthropicBatches("p", "https://api.anthropic.com", ANTHROPIC_URL)
    weird = anthropic.outcome(b'{"custom_id": "a", "result": {"type": "exploded"}}')
    assert weird is not None
    assert weird.error is not None
    assert weird.error.code == ErrorCode.MALFORMED_RESPONSE
