"""No piece of a key shows: texts are redacted before they are cut, codes and details of an
in-stream error are redacted, a recording hides what decodes back to the key (JSON, URL and
HTML escapes, base64), and every field a log sink sees is redacted."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.parse
from pathlib import Path

import httpx
import pytest
from waiting import GUARD

from notebook_llm import Engine, Event, Finish, LlmError
from notebook_llm import record as rec
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.core.redaction import REDACTED, redact, redact_obj, register_secret, shorten
from notebook_llm.wire.http_errors import MAX_MESSAGE_CHARS, provider_error_message

#: 27 characters, like the key of the review; registered by each test that needs it.
KEY = "sk-FRAGMENTKEYq7w3e9r1t5y0u"
assert len(KEY) == 27
#: A key with the characters JSON, URLs and HTML escape.
ODD_KEY = "k3y/with+odd=chars&more/9Zq"


@pytest.fixture(autouse=True)
def _keys() -> None:
    register_secret(KEY)
    register_secret(ODD_KEY)


def pieces(secret: str, shortest: int = 6) -> list[str]:
    """Every substring of ``secret`` at least ``shortest`` characters long."""
    return [
        secret[i:j]
        for i in range(len(secret))
        for j in range(i + shortest, len(secret) + 1)
        if j - i < len(secret) or i == 0
    ]


def assert_no_piece(text: str, secret: str = KEY) -> None:
    for piece in pieces(secret):
        assert piece not in text, (piece, text)


# ------------------------------------------------------------------ cut before redacted


@pytest.mark.parametrize("offset", range(MAX_MESSAGE_CHARS - 40, MAX_MESSAGE_CHARS + 5))
def test_a_provider_message_cut_inside_the_key_leaves_no_piece(offset: int) -> None:
    message = "x" * offset + " " + KEY + " and more"
    for body in (json.dumps({"error": {"message": message}}), message, f"<title>{message}</title>"):
        found = provider_error_message(body)
        assert found is not None
        assert len(found) <= MAX_MESSAGE_CHARS
        assert_no_piece(found)


async def test_a_401_echoing_the_key_after_475_characters() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        key = request.headers["authorization"].removeprefix("Bearer ")
        seen.append(key)
        message = "Incorrect API key provided. " + "z" * 447 + key
        return httpx.Response(401, json={"error": {"message": message, "code": "invalid_api_key"}})

    engine = Engine(
        config_file=False, env_file=False, retries=0, transport=httpx.MockTransport(handler)
    )
    engine.add_provider("o", adapter="openai", base_url="http://x.test/v1", model="m", api_key=KEY)
    with pytest.raises(LlmError) as info:
        await asyncio.wait_for(engine.complete("o", prompt="hi"), GUARD)
    assert seen == [KEY]
    err = info.value
    assert err.code == "AUTH"
    assert_no_piece(f"{err!s} {err!r} {err.message} {err.details}")


@pytest.mark.parametrize("cut", range(1, 27))
def test_shorten_redacts_before_it_cuts(cut: int) -> None:
    text = "a" * 40 + KEY
    shortened = shorten(text, 40 + cut)
    assert_no_piece(shortened)
    assert len(shortened) <= 40 + cut


@pytest.mark.parametrize("keep", range(6, 27))
def test_a_text_cut_elsewhere_loses_the_piece_it_kept(keep: int) -> None:
    """The second line: a text cut by someone else (a provider's own truncated echo)."""
    for cut in (
        "echo: " + KEY[:keep],
        "echo: " + KEY[:keep] + "…",
        "echo: " + KEY[:keep] + "... (truncated)",
        KEY[-keep:] + " was the end",
        "…" + KEY[-keep:] + " was the end",
    ):
        assert_no_piece(redact(cut))


def test_short_or_unanchored_pieces_are_left_alone() -> None:
    assert redact("the prefix sk-FRA is short") == "the prefix sk-FRA is short"
    assert redact("sk-FRAGMENTKEY in the middle") == "sk-FRAGMENTKEY in the middle"
    assert redact("nothing here…") == "nothing here…"


# ------------------------------------------------------------------ what decodes to the key


def json_escaped(secret: str, which: str) -> str:
    """``secret`` as it can appear inside a JSON string."""
    if which == "all":
        return "".join(f"\\u{ord(c):04x}" for c in secret)
    if which == "upper":
        return "".join(f"\\u{ord(c):04X}" for c in secret)
    if which == "dash":
        return secret.replace("-", "\\u002d")
    if which == "first":
        return f"\\u{ord(secret[0]):04x}" + secret[1:]
    if which == "slash":
        return secret.replace("/", "\\/")
    raise AssertionError(which)


@pytest.mark.parametrize("which", ["all", "upper", "dash", "first", "slash"])
@pytest.mark.parametrize("secret", [KEY, ODD_KEY])
def test_json_escaped_keys_are_redacted(secret: str, which: str) -> None:
    escaped = json_escaped(secret, which)
    text = '{"message": "bad key ' + escaped + '"}'
    assert json.loads(text)["message"].endswith(secret)  # it does decode to the key
    out = redact(text)
    assert secret not in json.loads(out)["message"]
    assert_no_piece(json.loads(out)["message"], secret)


@pytest.mark.parametrize("secret", [KEY, ODD_KEY])
def test_url_and_html_escaped_keys_are_redacted(secret: str) -> None:
    forms = [
        urllib.parse.quote(secret, safe=""),
        "".join(f"%{b:02X}" for b in secret.encode()),
        "".join(f"%{b:02x}" for b in secret.encode()),
        secret[:5] + "".join(f"%{b:02x}" for b in secret[5:10].encode()) + secret[10:],
        "".join(f"&#{ord(c)};" for c in secret),
        "".join(f"&#x{ord(c):x};" for c in secret),
    ]
    for form in forms:
        out = redact(f"https://x.test/?q={form}&z=1 ")
        assert form not in out, form
        assert secret not in urllib.parse.unquote(out)


@pytest.mark.parametrize("prefix", ["", "u:", "user:", "apikey:", "x"])
@pytest.mark.parametrize("secret", [KEY, ODD_KEY])
def test_base64_of_a_key_is_redacted(prefix: str, secret: str) -> None:
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        token = encode((prefix + secret + "!").encode()).decode()
        out = redact(f"Authorization: Basic {token} seen")
        assert out == f"Authorization: Basic {REDACTED} seen"


@pytest.mark.parametrize("secret", [KEY, ODD_KEY])
def test_hex_of_a_key_is_redacted(secret: str) -> None:
    """The sandbox offers ``tohex``: an adapter that sends the key hex-encoded (a signing
    header) has it hidden too, in either case."""
    for token in (secret.encode().hex(), secret.encode().hex().upper()):
        assert redact(f"x-sig: {token};") == f"x-sig: {REDACTED};"


async def test_a_recording_hides_a_key_sent_hex_encoded(tmp_path: Path) -> None:
    hexed = KEY.encode().hex()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"echo": hexed.upper()})

    path = tmp_path / "hex.jsonl"
    recorder = rec.Recorder(path)
    transport = recorder.transport(httpx.MockTransport(handler))
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(
            "https://x.test/v1/sign?sig2=" + hexed,
            headers={"x-key-hex": hexed},
            json={"signed_with": hexed},
        )
    text = path.read_text(encoding="utf-8")
    assert hexed not in text.lower()
    (exchange,) = [json.loads(line) for line in text.splitlines()[1:]]
    assert exchange["url"] == f"https://x.test/v1/sign?sig2={REDACTED}"
    assert exchange["request"] == {"signed_with": REDACTED}
    assert json.loads(exchange["body"]) == {"echo": REDACTED}


def test_redact_obj_hides_keys_used_as_names() -> None:
    assert redact_obj({KEY: 1, "n": [KEY]}) == {REDACTED: 1, "n": [REDACTED]}


async def test_a_recording_hides_what_decodes_to_the_key(tmp_path: Path) -> None:
    escaped = json_escaped(KEY, "dash")
    sse = (
        'data: {"choices":[{"delta":{"content":"' + escaped + '"}}]}\n\n'
        'data: {"choices":[{"delta":{"content":"' + json_escaped(ODD_KEY, "slash") + '"}}]}\n\n'
        "data: [DONE]\n\n"
    ).encode()
    binary = b"\xff\xfe binary " + KEY.encode() + b" \x00"

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/bin"):
            return httpx.Response(200, content=binary)
        return httpx.Response(
            200,
            content=sse,
            headers={
                "content-type": "text/event-stream",
                "x-echo": urllib.parse.quote(KEY, safe="").replace("F", "%46"),
            },
        )

    path = tmp_path / "escaped.jsonl"
    recorder = rec.Recorder(path)
    transport = recorder.transport(httpx.MockTransport(handler))
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(
            "https://x.test/v1/chat/completions?x=" + urllib.parse.quote(KEY),
            json={"m": "token " + KEY},
        )
        await client.get("https://x.test/bin")
    text = path.read_text(encoding="utf-8")
    decoded = json.dumps([json.loads(line) for line in text.splitlines()], ensure_ascii=False)
    for secret in (KEY, ODD_KEY):
        assert secret not in text
        assert secret not in decoded
        assert secret not in urllib.parse.unquote(text)
    exchanges = rec.load_exchanges(path)
    for exchange in exchanges:
        body = exchange.body.decode("latin-1")
        for secret in (KEY, ODD_KEY):
            assert secret not in body
            for line in body.splitlines():
                if line.startswith("data: {"):
                    assert secret not in json.dumps(json.loads(line[6:]), ensure_ascii=False)
    assert exchanges[1].body.startswith(b"\xff\xfe binary ")


# ------------------------------------------------------------------ in-stream error codes

CODE_IS_THE_KEY = """
local M = {name = "codekey"}
local KEY = "?"
function M.build_headers(meta)
  KEY = meta.api_key
  return {["x-api-key"] = meta.api_key}
end
function M.transform_request(raw) return raw end
function M.transform_stream_chunk(line)
  if line == "a" then
    return json.encode({error = {message = "failed", code = KEY, details = KEY}})
  elseif line == "b" then
    return json.encode({error = {message = "failed", type = string.lower(KEY), status = 500}})
  elseif line == "c" then
    return json.encode({finish_reason = KEY})
  elseif line == "d" then
    return json.encode({error = {message = "failed", code = "<b>not a code</b> at all"}})
  end
  return ""
end
return M
"""


@pytest.mark.parametrize("line", ["a", "b", "c", "d"])
async def test_an_error_code_that_is_the_key_is_redacted(line: str) -> None:
    body = f"data: {line}\n\n".encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    adapter = LuaAdapter.from_source(CODE_IS_THE_KEY, transport=httpx.MockTransport(handler))
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("c", adapter=adapter, base_url="http://x.test", model="m", api_key=KEY)
    events: list[Event] = await asyncio.wait_for(
        _drain(engine.stream("c", prompt="hi")),
        10,  # type: ignore[arg-type]
    )
    last = events[-1]
    assert isinstance(last, Finish)
    dump = json.dumps([e.to_json() for e in events], default=str) + repr(events)
    if line == "c":
        # a finish reason outside the vocabulary of finish meanings: finish 'other', its raw
        # value kept, and redacted
        assert last.reason.kind == "other"
        assert last.reason.raw
        for form in (KEY, KEY.upper(), KEY.lower()):
            assert_no_piece(dump + last.reason.describe(), form)
        return
    failure = last.reason.failure
    assert failure is not None
    everything = f"{dump} {failure!s} {failure!r} {failure.code} {failure.details}"
    for form in (KEY, KEY.upper(), KEY.lower()):
        assert_no_piece(everything, form)
    assert failure.code.replace("_", "").replace(".", "").replace("-", "").isalnum()


async def _drain(stream: object) -> list[Event]:
    return [ev async for ev in stream]  # type: ignore[attr-defined]


# ------------------------------------------------------------------ log sinks

LOGGER = """
local M = {name = "levels"}
function M.build_headers(meta)
  log(meta.api_key, "message " .. meta.api_key)
  log("warn" .. meta.api_key, meta.api_key)
  log(42, {})
  return {}
end
function M.transform_request(raw) return raw end
function M.transform_stream_chunk(line) return "" end
return M
"""


async def test_every_field_a_log_sink_sees_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[tuple[object, ...]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"", headers={"content-type": "text/event-stream"})

    adapter = LuaAdapter.from_source(
        LOGGER, log=lambda *a: seen.append(a), transport=httpx.MockTransport(handler)
    )
    engine = Engine(config_file=False, env_file=False, retries=0)
    engine.add_provider("l", adapter=adapter, base_url="http://x.test", model="m", api_key=KEY)
    caplog.set_level("DEBUG")
    await asyncio.wait_for(_drain(engine.stream("l", prompt="hi")), GUARD)
    assert len(seen) >= 2
    assert_no_piece(repr(seen) + caplog.text)


async def test_the_error_type_and_request_id_a_provider_echoes_are_redacted() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        key = request.headers["authorization"].removeprefix("Bearer ")
        body = {"error": {"message": "no", "type": key, "code": key.upper()}, "request_id": key}
        return httpx.Response(401, json=body, headers={"x-request-id": "id-" + key})

    engine = Engine(
        config_file=False, env_file=False, retries=0, transport=httpx.MockTransport(handler)
    )
    engine.add_provider("o", adapter="openai", base_url="http://x.test/v1", model="m", api_key=KEY)
    with pytest.raises(LlmError) as info:
        await asyncio.wait_for(engine.complete("o", prompt="hi"), GUARD)
    err = info.value
    everything = f"{err!s} {err!r} {err.code} {err.details} {err.request_id}"
    for form in (KEY, KEY.upper()):
        assert_no_piece(everything, form)


def test_every_logger_of_the_package_is_redacted() -> None:
    """A new ``getLogger("notebook_llm....")`` must join the filtered list: a filter on a parent
    does not see a child's records."""
    import ast
    from pathlib import Path

    from notebook_llm.core.redaction import FILTERED_LOGGERS

    package = Path(__file__).resolve().parent.parent / "notebook_llm"
    named = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) == "getLogger"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).startswith("notebook_llm")
            ):
                named.add(node.args[0].value)
    assert named
    assert named <= set(FILTERED_LOGGERS), sorted(named - set(FILTERED_LOGGERS))


def test_a_secret_that_is_the_hex_of_another_keeps_every_spelling() -> None:
    first = "Zk3pQ9vLm2Xa"
    second = first.encode().hex()
    register_secret(first)
    register_secret(second)
    basic = base64.b64encode(f"user:{second}".encode()).decode()
    assert redact(f"Basic {basic} x") == f"Basic {REDACTED} x"
    assert redact(json_escaped(second, "all")) == REDACTED
    assert redact(second[:10] + "…") == REDACTED + "…"


def test_the_hex_of_a_key_read_with_surrogateescape_is_its_original_bytes() -> None:
    key = b"ab12cd\x80ef34gh".decode("utf-8", "surrogateescape")
    register_secret(key)
    original = b"ab12cd\x80ef34gh".hex()
    assert redact(f"sig {original} end") == f"sig {REDACTED} end"
