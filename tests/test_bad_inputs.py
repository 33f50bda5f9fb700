"""Bad files give one line, never a traceback: the config file, recordings, ``.env`` files,
conformance fixtures and their sidecars, adapter files. Whatever the file holds, the error is an
``LlmError`` with a stable code (or, for files that are only read for convenience, one line on
stderr and the file ignored)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_llm import Engine, ErrorCode, LlmError
from notebook_llm import record as rec
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter, read_adapter_file
from notebook_llm.conformance.fixtures import expected_for, load_expected, load_fixture
from notebook_llm.engine import session
from notebook_llm.engine.credentials import read_env_file
from notebook_llm.engine.providers import MAX_CONFIG_BYTES, load_file_config

DEEP = 100_000

# ------------------------------------------------------------------ config.toml

BAD_CONFIGS = {
    "deep-array": "x = " + "[" * DEEP + "]" * DEEP + "\n",
    "deep-inline-table": "x = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n",
    "deep-dotted-table": "[providers." + ".".join(["a"] * 20_000) + "]\n",
    "deep-in-extra-body": '[providers.p]\nadapter = "openai"\nextra_body = {a = '
    + "[" * DEEP
    + "]" * DEEP
    + "}\n",
    "binary": "\x00\x01\x02\xfe garbage \x7f\n",
    "nul-in-string": 'x = "a\x00b"\n',
    "providers-int": "providers = 3\n",
    "providers-array": "providers = [1, 2]\n",
    "provider-array": "[[providers.p]]\nadapter = 'openai'\n",
    "provider-string": "[providers]\np = 'openai'\n",
    "defaults-string": "defaults = 'openai'\n",
    "defaults-provider-int": "[defaults]\nprovider = 3\n",
    "defaults-model-table": "[defaults.model]\nx = 1\n",
    "prices-array": "prices = [1, 2]\n",
    "price-short": "[prices]\nm = [1]\n",
    "price-strings": "[prices]\nm = ['a', 'b']\n",
    "price-table": "[prices.m]\na = 1\n",
    "headers-int": "[providers.p]\nadapter = 'openai'\nheaders = 3\n",
    "headers-int-value": "[providers.p]\nadapter = 'openai'\nheaders = {a = 1}\n",
    "headers-nested": "[providers.p]\nadapter = 'openai'\nheaders = {a = {b = 'c'}}\n",
    "header-newline": "[providers.p]\nadapter = 'openai'\nheaders = {a = \"x\\r\\nEvil: 1\"}\n",
    "header-bad-name": "[providers.p]\nadapter = 'openai'\nheaders = {\"a b\" = 'x'}\n",
    "extra-body-date": "[providers.p]\nadapter = 'openai'\nextra_body = {when = 1979-05-27}\n",
    "extra-body-nan": "[providers.p]\nadapter = 'openai'\nextra_body = {t = nan}\n",
    "extra-body-array": "[providers.p]\nadapter = 'openai'\nextra_body = [1]\n",
    "models-string": "[providers.p]\nadapter = 'openai'\nmodels = 'm'\n",
    "models-ints": "[providers.p]\nadapter = 'openai'\nmodels = [1, 2]\n",
    "needs-key-string": "[providers.p]\nadapter = 'openai'\nneeds_key = 'yes'\n",
    "adapter-int": "[providers.p]\nadapter = 3\n",
    "adapter-date": "[providers.p]\nadapter = 1979-05-27\n",
    "base-url-int": "[providers.p]\nadapter = 'openai'\nbase_url = 8080\n",
    "base-url-not-http": "[providers.p]\nadapter = 'openai'\nbase_url = 'localhost:8080'\n",
    "provider-prices-array": "[providers.p]\nadapter = 'openai'\nprices = [1, 2]\n",
    "provider-price-bool": "[providers.p]\nadapter = 'openai'\nprices = {m = [true, 1]}\n",
    "max-tokens-field-int": "[providers.p]\nadapter = 'openai'\nmax_tokens_field = 3\n",
    "unknown-key": "[providers.p]\nadapter = 'openai'\nmystery = 1\n",
    "api-key-in-file": "[providers.p]\nadapter = 'openai'\napi_key = 'sk-x'\n",
    "not-toml": "this is not = = toml [\n",
    "duplicate-key": "a = 1\na = 2\n",
    "huge": "# " + "x" * (MAX_CONFIG_BYTES + 10) + "\n",
}


@pytest.fixture
def fresh_session() -> Iterator[None]:
    session.set_default_engine(None)
    yield
    session.set_default_engine(None)


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_a_bad_config_file_is_one_line(tmp_path: Path, name: str) -> None:
    path = tmp_path / "config.toml"
    text = BAD_CONFIGS[name]
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(LlmError) as info:
        load_file_config(path)
    err = info.value
    assert err.code == ErrorCode.INVALID_OPTIONS
    assert str(path) in err.message
    assert "\n" not in err.message
    assert len(err.message) < 2_000


@pytest.mark.parametrize("name", ["deep-array", "deep-dotted-table", "binary", "header-newline"])
async def test_a_bad_config_file_is_ignored_by_the_session_and_mock_still_works(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fresh_session: None,
    name: str,
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(BAD_CONFIGS[name], encoding="utf-8")
    monkeypatch.setenv("NOTEBOOK_LLM_CONFIG", str(path))
    engine = session.default_engine()
    completion = await engine.complete("mock", prompt="hello")
    assert completion.text
    err = capsys.readouterr().err
    assert "the config file is ignored until you fix it" in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_non_utf8_and_odd_paths_as_config(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"[defaults]\nmodel = '\xe9'\n")
    with pytest.raises(LlmError) as info:
        load_file_config(bad)
    assert "not UTF-8" in info.value.message
    assert load_file_config(tmp_path).providers == {}  # a folder: no config


def test_a_good_config_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "\ufeff" * 0
        + '[defaults]\nprovider = "p"\n[providers.p]\nadapter = "openai"\n'
        + 'base_url = "http://localhost:1/v1"\nheaders = {"X-Team" = "a b"}\n'
        + 'extra_body = {a = [1, {b = "c"}], t = true}\n',
        encoding="utf-8",
    )
    config = load_file_config(path)
    assert config.default_provider == "p"
    assert config.providers["p"]["headers"] == {"X-Team": "a b"}


# ------------------------------------------------------------------ recordings

GOOD = {
    "method": "POST",
    "url": "https://x.test/v1/chat",
    "path": "/v1/chat",
    "request": {"a": 1},
    "status": 200,
    "headers": {"content-type": "application/json"},
    "body": "{}",
    "complete": True,
}

BAD_EXCHANGES = {
    "headers-list": {"headers": ["content-type", "application/json"]},
    "headers-string": {"headers": "content-type: application/json"},
    "header-value-object": {"headers": {"a": {"b": 1}}},
    "header-value-list": {"headers": {"a": [1]}},
    "status-string": {"status": "two hundred"},
    "status-bool": {"status": True},
    "status-float": {"status": 200.5},
    "status-out-of-range": {"status": 99_999},
    "status-negative": {"status": -1},
    "body-number": {"body": 5},
    "body-object": {"body": {"a": 1}},
    "body-lone-surrogate": {"body": "\ud800"},
    "body-base64-bad": {"body_base64": "%%%not base64%%%"},
    "body-base64-number": {"body_base64": 5},
    "method-number": {"method": 5},
    "method-null": {"method": None},
    "method-odd": {"method": "PO ST\r\n"},
    "url-number": {"url": 5, "path": None},
    "url-not-a-url": {"url": "http://[::1", "path": None},
    "path-list": {"path": ["/v1"]},
    "complete-string": {"complete": "yes"},
    "request-text-number": {"request_text": 5},
}


def _write(path: Path, *lines: object) -> None:
    text = json.dumps({"notebook_llm_recording": 1}) + "\n"
    text += "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("name", sorted(BAD_EXCHANGES))
def test_a_wrong_field_in_a_recording_is_replay_file_with_the_line(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / "r.jsonl"
    broken = {**GOOD, **BAD_EXCHANGES[name]}
    if name == "request-text-number":
        del broken["request"]
    _write(path, GOOD, broken)
    with pytest.raises(LlmError) as info:
        rec.load_exchanges(path)
    assert info.value.code == ErrorCode.REPLAY_FILE
    assert "line 3" in info.value.message
    assert "\n" not in info.value.message


@pytest.mark.parametrize(
    "line",
    [
        "[" * DEEP + "]" * DEEP,
        '{"method": "POST", "x": ' + "[" * DEEP + "]" * DEEP + "}",
        '{"method": "POST", "request": ' + '{"a": ' * 900 + "1" + "}" * 900 + "}",
        '{"method": "POST", "request": ' + "[" * 990 + "]" * 990 + "}",
        "{not json",
        '"just a string"' + "x",
    ],
    ids=["deep", "deep-field", "deep-request-900", "deep-request-990", "not-json", "trailing"],
)
def test_a_bad_line_is_replay_file_with_its_number(tmp_path: Path, line: str) -> None:
    path = tmp_path / "r.jsonl"
    _write(path, GOOD, line)
    failure: LlmError | None = None
    exchanges: list[rec.Exchange] = []
    try:
        exchanges = rec.load_exchanges(path)
    except LlmError as err:
        failure = err
    if failure is not None:
        assert failure.code == ErrorCode.REPLAY_FILE
        assert "line 3" in failure.message
    else:  # a nesting Python can still compare is a valid (if odd) recording
        assert len(exchanges) == 2
        for exchange in exchanges:
            exchange.match_key()


def test_a_deep_array_recording_and_non_utf8(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * DEEP + "]" * DEEP, encoding="utf-8")
    with pytest.raises(LlmError) as info:
        rec.load_exchanges(deep)
    assert info.value.code == ErrorCode.REPLAY_FILE
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b'{"notebook_llm_recording": 1}\n\xff\xfe\x00garbage\n')
    with pytest.raises(LlmError) as info:
        rec.load_exchanges(binary)
    assert info.value.code == ErrorCode.REPLAY_FILE
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    with pytest.raises(LlmError) as info:
        rec.load_exchanges(folder)
    assert info.value.code == ErrorCode.REPLAY_FILE


def test_a_recording_with_a_bom_or_a_line_separator_in_a_string_still_loads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ok.jsonl"
    odd = {**GOOD, "body": "a\u2028b\x1cc\x85d"}
    text = "\ufeff" + json.dumps({"notebook_llm_recording": 1}) + "\n"
    text += json.dumps(odd, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    (exchange,) = rec.load_exchanges(path)
    assert exchange.body == "a\u2028b\x1cc\x85d".encode()


async def test_replaying_a_bad_recording_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    _write(path, {**GOOD, "headers": ["x"]})
    engine = Engine(config_file=False, env_file=False)
    with pytest.raises(LlmError) as info, engine.replaying(path):
        await engine.complete("openai", prompt="hi")
    assert info.value.code == ErrorCode.REPLAY_FILE
    assert "line 2" in info.value.message


# ------------------------------------------------------------------ .env files


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe\x00\x01 binary",
        b"OPENAI_API_KEY=sk-\xe9\n",
        b"=novalue\n'unterminated\nexport\n" * 50,
        b"A=" + b"x" * (2 * 1024 * 1024),
        b"\x00" * 1000,
    ],
    ids=["binary", "latin1", "unparsable", "huge", "nul"],
)
def test_a_bad_env_file_is_ignored_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = tmp_path / ".env"
    path.write_bytes(content)
    values = read_env_file(path)
    assert isinstance(values, dict)
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) <= 1
    assert "Traceback" not in err
    Engine(config_file=False, env_file=path)  # an engine still starts


def test_an_env_file_that_is_a_folder_or_good(tmp_path: Path) -> None:
    assert read_env_file(tmp_path) == {}
    good = tmp_path / ".env"
    good.write_text("\ufeffGOOD_KEY=abcdef123456\nbroken line\nOTHER=1\n", encoding="utf-8")
    assert read_env_file(good) == {"GOOD_KEY": "abcdef123456", "OTHER": "1"}


# ------------------------------------------------------------------ conformance fixtures


@pytest.mark.parametrize(
    "meta",
    [
        "not json",
        "[1, 2]",
        '{"status": "x"}',
        '{"status": 7}',
        '{"status": true}',
        '{"headers": [1]}',
        '{"headers": {"a": 1}}',
        '{"content_type": 5}',
        "[" * DEEP + "]" * DEEP,
    ],
)
def test_a_bad_fixture_sidecar_is_one_line(tmp_path: Path, meta: str) -> None:
    body = tmp_path / "x.sse"
    body.write_text("data: {}\n\n", encoding="utf-8")
    (tmp_path / "x.sse.meta.json").write_text(meta, encoding="utf-8")
    with pytest.raises(LlmError) as info:
        load_fixture(body)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    assert "x.sse.meta.json" in info.value.message


def test_a_fixture_body_of_deep_lines_is_still_a_fixture(tmp_path: Path) -> None:
    body = tmp_path / "deep.txt"
    body.write_text(("{" + '"a":[' * 5000 + "]" * 5000 + "}\n") * 2, encoding="utf-8")
    assert load_fixture(body).framing == "json"


@pytest.mark.parametrize(
    "expected", ["nope", "[1]", '{"a.sse": 3}', "[" * DEEP + "]" * DEEP, "\xff"]
)
def test_bad_expected_results_are_one_line(tmp_path: Path, expected: str) -> None:
    path = tmp_path / "expected.json"
    path.write_bytes(expected.encode("latin-1"))
    with pytest.raises(LlmError) as info:
        load_expected(path)
    assert info.value.code == ErrorCode.INVALID_OPTIONS
    body = tmp_path / "a.sse"
    body.write_text("data: {}\n\n", encoding="utf-8")
    (tmp_path / "a.expected.json").write_bytes(expected.encode("latin-1"))
    fixture = load_fixture(body)
    if expected.startswith(("[1]", '{"a')):
        return
    with pytest.raises(LlmError):
        expected_for(fixture, None)


# ------------------------------------------------------------------ adapter files


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe\x00 not lua",
        b"\x1bLua binary chunk",
        b"return " + b"{" * DEEP + b"}" * DEEP,
        b"return " + b"(" * DEEP + b"1" + b")" * DEEP,
        b"local M = {name = 'x'}\n" + b"-- " + b"x" * 100 + b"\n",
        b"",
    ],
    ids=["binary", "bytecode", "deep-table", "deep-parens", "no-return", "empty"],
)
def test_a_bad_adapter_file_is_one_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.lua"
    path.write_bytes(content)
    with pytest.raises(LlmError) as info:
        LuaAdapter.from_source(read_adapter_file(path))
    assert "\n" not in info.value.message.strip() or len(info.value.message) < 2_000
