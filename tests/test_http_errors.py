"""http_errors: recorded provider error bodies, Retry-After parsing, backoff."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from notebook_llm.core.errors import ErrorCode, code_for_status
from notebook_llm.wire.http_errors import (
    backoff_delay,
    error_from_http,
    parse_retry_after,
    parse_retry_after_ms,
    provider_error_message,
    retry_after_from_headers,
)

WIRE = Path(__file__).parent / "fixtures" / "wire"

# file, status, code, start of the provider message, request id from the body
RECORDED = [
    ("openai/error_401_invalid_api_key.json", 401, ErrorCode.AUTH, "Incorrect API key provided: invalid-*****2345.", None),
    ("openai/error_400_unsupported_parameter.json", 400, ErrorCode.INVALID_REQUEST, "Unsupported parameter: 'stop'", None),
    ("openai/error_404_model_not_found.json", 404, ErrorCode.NOT_FOUND, "The model `non-existent-model` does not exist", None),
    ("anthropic/error_400_invalid_request.json", 400, ErrorCode.INVALID_REQUEST, "messages.0.content.1: unexpected `tool_use_id`", "req_011CYHyk9NPsBYeGbC9LuDNK"),
    ("anthropic/error_401_authentication.json", 401, ErrorCode.AUTH, "invalid x-api-key", "req_011CWdMEehrhsdujMyQ9pChP"),
    ("anthropic/error_404_not_found.json", 404, ErrorCode.NOT_FOUND, "model: this-model-does-not-exist-12345", "req_011CWbziqGSV3t3Ax2Wza1WH"),
    ("anthropic/error_429_rate_limit.json", 429, ErrorCode.RATE_LIMIT, "This request would exceed your organization's rate limit", "req_011CYK5mje9HkutJtmfPzzNC"),
    ("anthropic/error_529_overloaded.json", 529, ErrorCode.SERVER, "Overloaded", None),
    ("deepseek/error_400.json", 400, ErrorCode.INVALID_REQUEST, "No tool output found for tool call call-a.", None),
    ("gemini/error_400_api_key_invalid_on_stream.json", 400, ErrorCode.AUTH, "API key not valid. Please pass a valid API key.", None),
    ("gemini/error_403_permission_denied.json", 403, ErrorCode.AUTH, "Method doesn't allow unregistered callers", None),
    ("gemini/error_404_model_not_found_on_stream.json", 404, ErrorCode.NOT_FOUND, "models/this-model-does-not-exist-12345 is not found", None),
    ("gemini/error_429_resource_exhausted.json", 429, ErrorCode.RATE_LIMIT, "Resource exhausted. Please try again later.", None),
    ("groq/error_400_tool_use_failed.json", 400, ErrorCode.INVALID_REQUEST, "Tool call validation failed", None),
    ("groq/error_404_model_not_found.json", 404, ErrorCode.NOT_FOUND, "The model `non-existent` does not exist", None),
]  # fmt: skip


def test_every_recorded_error_body_is_covered() -> None:
    names = {f"{p.parent.name}/{p.name}" for p in WIRE.glob("*/error_*.json")}
    assert names == {row[0] for row in RECORDED}


@pytest.mark.parametrize(("name", "status", "code", "message", "request_id"), RECORDED)
def test_recorded_error_bodies(
    name: str, status: int, code: str, message: str, request_id: str | None
) -> None:
    body = (WIRE / name).read_bytes()
    extracted = provider_error_message(body)
    assert extracted is not None
    assert extracted.startswith(message)
    assert "{" not in extracted[:1]
    provider = name.split("/")[0]
    err = error_from_http(status, {}, body, provider=provider)
    assert err.code == code
    assert err.status == status
    assert err.provider == provider
    assert err.message == f"HTTP {status} from {provider}: {extracted}"
    assert err.request_id == request_id
    assert err.retry_after is None
    # Gemini wraps the same object in a list on some endpoints
    wrapped = json.dumps([json.loads(body)]).encode()
    assert provider_error_message(wrapped) == extracted


def test_error_types_in_details() -> None:
    body = (WIRE / "anthropic" / "error_429_rate_limit.json").read_bytes()
    err = error_from_http(429, {"retry-after": "17"}, body, provider="anthropic")
    assert err.details == {"error_type": "rate_limit_error"}
    assert err.retry_after == 17.0
    assert err.retryable
    gemini = (WIRE / "gemini" / "error_403_permission_denied.json").read_bytes()
    assert error_from_http(403, {}, gemini).details == {"error_type": "PERMISSION_DENIED"}


def test_anthropic_429_with_headers_case_insensitive() -> None:
    body = (WIRE / "anthropic" / "error_429_rate_limit.json").read_bytes()
    headers = {"Request-Id": "req_header", "Retry-After": "5", "Retry-After-Ms": "4200"}
    err = error_from_http(429, headers, body, provider="anthropic")
    assert err.request_id == "req_header"  # header wins over body
    assert err.retry_after == pytest.approx(4.2)  # retry-after-ms is more precise
    assert err.to_failure()["providerRetryAfterMs"] == 4200


def test_httpx_headers_and_x_request_id() -> None:
    body = (WIRE / "openai" / "error_401_invalid_api_key.json").read_bytes()
    headers = httpx.Headers({"X-Request-ID": "req_abc", "content-type": "application/json"})
    err = error_from_http(401, headers, body, provider="openai")
    assert err.request_id == "req_abc"
    assert not err.retryable
    assert str(err).startswith("[AUTH] HTTP 401 from openai: Incorrect API key provided")


def test_gemini_retry_info_in_body() -> None:
    body = json.dumps(
        {
            "error": {
                "code": 429,
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
                ],
            }
        }
    ).encode()
    err = error_from_http(429, {}, body, provider="gemini")
    assert err.code == ErrorCode.RATE_LIMIT  # RESOURCE_EXHAUSTED is retryable, not QUOTA
    assert err.retry_after == 37.0
    assert error_from_http(429, {"retry-after": "3"}, body).retry_after == 3.0


def test_openai_insufficient_quota_is_quota() -> None:
    body = b'{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}'
    err = error_from_http(429, {}, body, provider="openai")
    assert err.code == ErrorCode.QUOTA
    assert not err.retryable


def test_context_window_code() -> None:
    body = b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}'
    assert error_from_http(400, {}, body).code == ErrorCode.CONTEXT_WINDOW_EXCEEDED


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"error":"model \\"llama9\\" not found, try pulling it first"}', 'model "llama9" not found, try pulling it first'),
        (b'{"object":"error","message":"Invalid model: x","type":"invalid_model","code":"1500"}', "Invalid model: x"),
        (b'{"detail":"Unauthorized"}', "Unauthorized"),
        (b'{"detail":[{"loc":["body","model"],"msg":"field required"},{"msg":"bad temp"}]}', "field required; bad temp"),
        (b'{"detail":{"message":"nested"}}', "nested"),
        (b'{"error":{"type":"overloaded_error"}}', "overloaded_error"),
        (b'[{"error":{"code":400,"message":"wrapped","status":"INVALID_ARGUMENT"}}]', "wrapped"),
        (b'{"unexpected": true}', '{"unexpected": true}'),
        (b"upstream connect error\n  or disconnect", "upstream connect error or disconnect"),
        (b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>", "502 Bad Gateway"),
        (b"{not json", "{not json"),
        ("text as str", "text as str"),
        (b"", None),
        (b"  \n", None),
    ],
)  # fmt: skip
def test_provider_error_message_shapes(body: bytes | str, expected: str | None) -> None:
    assert provider_error_message(body) == expected


def test_long_plain_text_is_truncated() -> None:
    message = provider_error_message(b"x" * 5000)
    assert message is not None
    assert len(message) == 500
    assert message.endswith("…")


def test_empty_body_uses_reason_phrase() -> None:
    assert error_from_http(503, {}, b"").message == "HTTP 503: Service Unavailable"
    err = error_from_http(599, {}, b"")
    assert err.message == "HTTP 599: no response body"
    assert err.code == ErrorCode.SERVER
    assert error_from_http(418, {}, b"").code == "HTTP_418"


def test_code_for_status_gemini_refinements() -> None:
    assert code_for_status(400, '"reason": "API_KEY_INVALID"') == ErrorCode.AUTH
    assert code_for_status(400, "bad field") == ErrorCode.INVALID_REQUEST
    assert code_for_status(429, '"status": "RESOURCE_EXHAUSTED" billing') == ErrorCode.RATE_LIMIT
    assert code_for_status(429, "insufficient_quota") == ErrorCode.QUOTA


# --- Retry-After ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("30", 30.0), (" 0 ", 0.0), ("1.5", 1.5), ("-1", None), ("soon", None), ("", None),
     (None, None), ("nan", None), ("inf", None)],
)  # fmt: skip
def test_parse_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date() -> None:
    now = datetime(2015, 10, 21, 7, 27, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=now) == 60.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 -0000", now=now) == 60.0
    future = datetime.now(UTC).timestamp() + 100
    header = format_datetime(datetime.fromtimestamp(future, UTC), usegmt=True)
    delay = parse_retry_after(header)
    assert delay is not None
    assert 90 <= delay <= 100


def test_parse_retry_after_ms_and_headers() -> None:
    assert parse_retry_after_ms("1500") == 1.5
    assert parse_retry_after_ms("x") is None
    assert parse_retry_after_ms("-5") is None
    assert parse_retry_after_ms(None) is None
    assert retry_after_from_headers({"RETRY-AFTER": "2"}) == 2.0
    assert retry_after_from_headers({"retry-after-ms": "bad", "retry-after": "2"}) == 2.0
    assert retry_after_from_headers({}) is None


# --- backoff --------------------------------------------------------------------------------


def test_backoff_full_jitter_is_capped_exponential() -> None:
    rng = random.Random(7)
    for attempt in range(12):
        ceiling = min(30.0, 0.5 * 2**attempt)
        delays = [backoff_delay(attempt, retry_after=None, rng=rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # full jitter spreads over the whole range
    assert backoff_delay(10_000, retry_after=None, rng=rng) <= 30.0
    assert backoff_delay(-3, retry_after=None, rng=rng) <= 0.5


def test_backoff_honours_retry_after_with_its_own_cap() -> None:
    rng = random.Random(1)
    assert all(backoff_delay(0, retry_after=20.0, rng=rng) == 20.0 for _ in range(50))
    assert backoff_delay(0, retry_after=3600.0, rng=rng) == 120.0
    assert backoff_delay(0, retry_after=3600.0, max_retry_after=10.0, rng=rng) == 10.0
    big = [backoff_delay(8, retry_after=1.0, rng=rng) for _ in range(200)]
    assert all(1.0 <= d <= 30.0 for d in big)
    assert backoff_delay(3, retry_after=0.0, base=1.0, cap=2.0, rng=rng) <= 2.0


def test_backoff_is_deterministic_with_rng() -> None:
    first = [backoff_delay(i, retry_after=None, rng=random.Random(5)) for i in range(5)]
    second = [backoff_delay(i, retry_after=None, rng=random.Random(5)) for i in range(5)]
    assert first == second
