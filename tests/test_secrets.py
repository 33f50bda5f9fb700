"""No API key ever shows: a recognisable fake key is set for EVERY provider variable, errors are
provoked (401s that echo the key, adapters that put the key into error()/log()), and reprs, logs,
error messages, finish events and the conformance kit's request display are scanned for it."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import KEY_VARS
from waiting import GUARD

from notebook_llm import Engine, Event, Finish, GenerateOptions, LlmError, Message, assemble
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.mock.server import MockServer
from notebook_llm.conformance import (
    CheckReport,
    RequestCase,
    check_requests,
    render_text,
)
from notebook_llm.engine.providers import PRESETS

ADAPTERS = Path(__file__).resolve().parent.parent / "adapters"
#: provider -> path of its generation route on the mock server (others get a 404)
MOCK_PATH = {
    "openai": "/v1",
    "deepseek": "/v1",
    "mistral": "/v1",
    "groq": "/v1",
    "github": "/v1",
    "anthropic": "",
    "ollama": "",
    "gemini": "/v1beta",
}


def fake_key(var: str) -> str:
    return f"sk-LEAKCHECK-{var.lower().replace('_', '')}-7f3a9c1e5b"


KEYS = {var: fake_key(var) for var in KEY_VARS}
MARKER = "LEAKCHECK"  # appears in every fake key; must appear nowhere


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for var, value in KEYS.items():
        monkeypatch.setenv(var, value)
    return KEYS


@pytest.fixture
def srv() -> Iterator[MockServer]:
    with MockServer(require_key="the-right-key-not-yours") as server:
        yield server


def assert_clean(*things: object) -> None:
    for thing in things:
        text = thing if isinstance(thing, str) else f"{thing!r} {thing!s}"
        assert MARKER not in text, text
        for key in KEYS.values():
            assert key not in text
            assert key[4:] not in text  # not even without the sk- prefix


def event_dump(events: list[Event]) -> str:
    return json.dumps([ev.to_dict() for ev in events], default=str) + repr(events)


async def drain(eng: Engine, provider: str, **kw: object) -> list[Event]:
    async def go() -> list[Event]:
        return [ev async for ev in eng.stream(provider, prompt="hi", **kw)]  # type: ignore[arg-type]

    return await asyncio.wait_for(go(), GUARD)


@pytest.mark.parametrize("provider", sorted(PRESETS))
async def test_every_provider_401_is_clean(
    keys: dict[str, str],
    srv: MockServer,
    provider: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    name = provider.upper()
    monkeypatch.setenv(f"NOTEBOOK_LLM_{name}_BASE_URL", srv.url + MOCK_PATH[provider])
    eng = Engine(config_file=False, env_file=False, retries=0)
    assert eng.has_key(provider)
    events = await drain(eng, provider)
    last = events[-1]
    assert isinstance(last, Finish)
    assert last.reason.failure is not None
    failure = last.reason.failure
    assert failure.code in ("AUTH", "NOT_FOUND", "INVALID_REQUEST")
    # the key did go out (so the test means something) ...
    sent = srv.requests[-1].headers
    var = PRESETS[provider].api_key_env
    assert var is not None
    assert KEYS[var] in json.dumps(sent) or (provider == "ollama" and not sent.get("authorization"))
    # ... and shows nowhere
    assert_clean(
        event_dump(events),
        failure,
        failure.to_failure(),
        eng.provider(provider),
        eng.key_hint(provider),
        caplog.text,
        assemble(events),
    )
    with pytest.raises(LlmError) as ei:
        await eng.complete(provider, prompt="hi")
    assert_clean(ei.value, ei.value.details, ei.value.to_failure())


async def test_provider_echoing_the_key_is_redacted(
    keys: dict[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenAI really does echo (part of) a bad key: 'Incorrect API key provided: sk-...'."""
    caplog.set_level(logging.DEBUG)

    def handler(request: httpx.Request) -> httpx.Response:
        auth = request.headers.get("authorization", "") + request.headers.get("x-api-key", "")
        key = auth.removeprefix("Bearer ")
        body = {
            "error": {
                "message": f"Incorrect API key provided: {key}. Find yours at https://x/?key={key}",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }
        return httpx.Response(401, json=body, headers={"x-request-id": "req_1", "x-echo": key})

    eng = Engine(
        config_file=False, env_file=False, retries=0, transport=httpx.MockTransport(handler)
    )
    for provider in ("openai", "anthropic", "deepseek", "groq", "mistral", "github"):
        events = await drain(eng, provider)
        last = events[-1]
        assert isinstance(last, Finish)
        assert last.reason.failure is not None
        assert last.reason.failure.code == "AUTH"
        assert "Incorrect API key provided: ***" in last.reason.failure.message
        assert_clean(event_dump(events), last.reason.failure)
    assert_clean(caplog.text)


SPILLER = """
local M = {name = "spiller"}
local KEY
function M.build_headers(meta)
  KEY = meta.api_key
  log("warn", "building headers with key " .. meta.api_key)
  print("print also sees", meta.api_key)
  return {["x-api-key"] = meta.api_key}
end
function M.transform_request(raw) return raw end
function M.transform_stream_chunk(line)
  error("refusing chunk, my key is " .. KEY)
end
return M
"""


async def test_adapter_putting_the_key_into_log_and_error(
    keys: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = keys["OPENAI_API_KEY"]
    seen: list[tuple[str, str, str]] = []
    with MockServer() as srv:
        adapter = LuaAdapter.from_source(SPILLER, log=lambda *a: seen.append(a))
        eng = Engine(config_file=False, env_file=False, retries=0)
        eng.add_provider(
            "spill",
            adapter=adapter,
            base_url=srv.url + "/v1",
            model="echo",
            api_key_env="OPENAI_API_KEY",
        )
        events = await drain(eng, "spill")
        assert srv.requests[-1].headers["x-api-key"] == key
    last = events[-1]
    assert isinstance(last, Finish)
    assert last.reason.failure is not None
    assert "my key is" in last.reason.failure.message
    assert len(seen) == 2
    assert_clean(event_dump(events), last.reason.failure, seen, caplog.text)


async def test_key_in_stream_error_event_is_redacted(keys: dict[str, str]) -> None:
    key = keys["ANTHROPIC_API_KEY"]
    body = (
        b'event: error\ndata: {"type":"error","error":{"type":"authentication_error",'
        b'"message":"invalid x-api-key ' + key.encode() + b'"}}\n\n'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    adapter = LuaAdapter.from_file(
        ADAPTERS / "anthropic.lua", transport=httpx.MockTransport(handler)
    )
    eng = Engine(config_file=False, env_file=False, retries=0)
    eng.add_provider(
        "a", adapter=adapter, base_url="http://x.test", model="m", api_key_env="ANTHROPIC_API_KEY"
    )
    events = await drain(eng, "a")
    last = events[-1]
    assert isinstance(last, Finish)
    assert last.reason.failure is not None
    assert_clean(event_dump(events))


QUERY_KEY = """
local M = {name = "querykey", endpoint = "/v1beta/models/{model}:streamGenerateContent?alt=sse&key={api_key}"}
function M.transform_request(raw) return raw end
function M.transform_stream_chunk(line) return "" end
return M
"""


@pytest.mark.parametrize(
    ("source", "header"),
    [
        ((ADAPTERS / "openai.lua").read_text(), "authorization"),
        ((ADAPTERS / "anthropic.lua").read_text(), "x-api-key"),
        ((ADAPTERS / "gemini.lua").read_text(), "x-goog-api-key"),
        (QUERY_KEY, None),
    ],
    ids=["bearer", "x-api-key", "gemini", "query-key"],
)
def test_conformance_request_display_redacts(
    keys: dict[str, str], source: str, header: str | None
) -> None:
    key = keys["OPENAI_API_KEY"]
    case = RequestCase(
        "leak",
        "our key instead of the kit's sample key",
        GenerateOptions(
            provider="p",
            model="m",
            messages=[Message.user("hi")],
            base_url="https://provider.example",
            api_key=key,
        ),
    )
    adapter = LuaAdapter.from_source(source)
    results = check_requests(adapter, [case]) + check_requests(adapter)
    for r in results:
        assert r.ok, r.error
        lowered = {k.lower(): v for k, v in r.headers.items()}
        if header is not None:
            assert lowered[header] == "***"
        else:
            assert "key=***" in r.url
        assert_clean(r.url, r.headers, r.body_json(), r)
        assert "sk-conformance-kit-0000" not in r.url + json.dumps(r.headers)
    report = CheckReport(adapter.name, adapter.version, adapter.origin, requests=results)
    assert_clean(render_text(report, events=True), report.render_text())


def test_reprs_never_show_keys(keys: dict[str, str]) -> None:
    key = keys["OPENAI_API_KEY"]
    opts = GenerateOptions(provider="p", model="m", messages=[], api_key=key)
    eng = Engine(config_file=False, env_file=False)
    eng.set_key("openai", keys["GROQ_API_KEY"])
    eng.add_provider("direct", adapter="openai", base_url="http://x", api_key=key)
    assert_clean(
        opts,
        eng.provider("openai"),
        eng.provider("direct"),
        eng.credentials._session_keys,
        LlmError(f"failed with {key}", "AUTH"),
        LlmError("x", "AUTH", details={"k": 1}).to_failure(),
    )


def test_a_key_in_an_endpoint_url_is_hidden_in_httpx_logs_and_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging
    import urllib.parse

    from notebook_llm.core.redaction import redact, register_secret

    key = "sk-LEAKCHECK/with+chars=="
    register_secret(key)
    quoted = urllib.parse.quote(key, safe="")
    assert quoted not in redact(f"https://x.invalid/v1/{quoted}/chat")
    with caplog.at_level(logging.INFO, logger="httpx"):
        logging.getLogger("httpx").info(
            'HTTP Request: %s %s "%s"',
            "POST",
            f"https://x.invalid/m?key={quoted}",
            "HTTP/1.1 200 OK",
        )
    assert caplog.records
    assert quoted not in caplog.text
    assert key not in caplog.text
