"""NDJSONDecoder: recorded Ollama bodies split at every byte offset, edge cases, properties."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.wire.ndjson import NDJSONDecoder

WIRE = Path(__file__).parent / "fixtures" / "wire"
NDJSON_FILES = sorted(WIRE.glob("*/*.ndjson"))


def decode(*chunks: bytes, max_line_bytes: int = 16 * 1024 * 1024) -> list[str]:
    decoder = NDJSONDecoder(max_line_bytes)
    lines: list[str] = []
    for chunk in chunks:
        lines += decoder.feed(chunk)
    return lines + decoder.flush()


@pytest.fixture(params=NDJSON_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def ndjson_body(request: pytest.FixtureRequest) -> bytes:
    path: Path = request.param
    return path.read_bytes()


def test_fixtures_present() -> None:
    assert len(NDJSON_FILES) >= 3


def test_one_shot_lines_are_json_objects(ndjson_body: bytes) -> None:
    lines = decode(ndjson_body)
    assert len(lines) == ndjson_body.count(b"\n")
    objects = [json.loads(line) for line in lines]
    assert all(isinstance(o, dict) for o in objects)
    assert objects[-1]["done"] is True
    assert all(o["done"] is False for o in objects[:-1])


def test_every_split_offset_matches_one_shot(ndjson_body: bytes) -> None:
    reference = decode(ndjson_body)
    for k in range(len(ndjson_body) + 1):
        assert decode(ndjson_body[:k], ndjson_body[k:]) == reference, k


def test_byte_by_byte_matches_one_shot(ndjson_body: bytes) -> None:
    chunks = [ndjson_body[i : i + 1] for i in range(len(ndjson_body))]
    assert decode(*chunks) == decode(ndjson_body)


def test_multibyte_split_inside_emoji() -> None:
    body = (WIRE / "ollama" / "stream_text_multibyte.ndjson").read_bytes()
    start = body.index("😊".encode())
    for k in range(start + 1, start + 4):  # inside the 4-byte character
        lines = decode(body[:k], body[k:])
        contents = [json.loads(line)["message"]["content"] for line in lines]
        assert " 😊" in contents
        assert "".join(contents) == "Hello there! How can I help you today? 😊"


def test_thinking_stream_fields() -> None:
    lines = decode((WIRE / "ollama" / "generate_stream_thinking.ndjson").read_bytes())
    objects = [json.loads(line) for line in lines]
    assert any(o.get("thinking") for o in objects)
    assert objects[-1]["done_reason"] == "stop"


def test_crlf_blank_lines_whitespace_and_bom() -> None:
    body = b'\xef\xbb\xbf{"a":1}\r\n\r\n  \n\t{"b":2}  \r\n{"c":3}'
    assert decode(body) == ['{"a":1}', '{"b":2}', '{"c":3}']
    assert decode(*(body[i : i + 1] for i in range(len(body)))) == decode(body)
    assert decode(b"x\n\xef\xbb\xbfy\n") == ["x", "\ufeffy"]  # only a leading BOM is removed


def test_invalid_utf8_is_replaced() -> None:
    assert decode(b"a\xffb\n") == ["a\ufffdb"]


def test_empty_body() -> None:
    assert decode() == []
    assert decode(b"", b"\n\n") == []


def test_oversized_line() -> None:
    with pytest.raises(LlmError) as excinfo:
        decode(b"0123456789abcdefX\n", max_line_bytes=16)
    assert excinfo.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "16-byte limit" in excinfo.value.message
    decoder = NDJSONDecoder(16)
    decoder.feed(b"0123456789abcdef")
    with pytest.raises(LlmError) as excinfo:
        decoder.feed(b"X")
    assert excinfo.value.code == ErrorCode.MALFORMED_RESPONSE
    assert decode(b"0123456789abcdef\n", max_line_bytes=16) == ["0123456789abcdef"]


def test_invalid_limit() -> None:
    with pytest.raises(ValueError, match="positive"):
        NDJSONDecoder(0)


def _outcome(chunks: list[bytes], limit: int) -> object:
    try:
        return decode(*chunks, max_line_bytes=limit)
    except LlmError as err:
        return ("error", err.code)


_FRAGMENTS = [b"{}", b'{"a": 1}', b" ", b"\r", b"\n", b"\r\n", b"\xef\xbb\xbf", b"\xf0\x9f\x98"]


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.binary(max_size=6)), max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    limit=st.sampled_from([4, 12, 16 * 1024 * 1024]),
)
def test_random_splits_equal_one_shot(parts: list[bytes], cuts: list[int], limit: int) -> None:
    body = b"".join(parts)
    offsets = sorted({min(c, len(body)) for c in cuts})
    bounds = [0, *offsets, len(body)]
    chunks = [body[a:b] for a, b in itertools.pairwise(bounds)]
    assert _outcome(chunks, limit) == _outcome([body], limit)


def test_an_over_long_line_is_worded_alike_by_both_decoders() -> None:
    """SSE and NDJSON report an over-long line through one helper (``wire/framing.py``): same
    code, same details, the message naming each one's format."""
    from notebook_llm.wire.sse import SSEDecoder

    errors = {}
    for kind, decoder in (("NDJSON", NDJSONDecoder(16)), ("SSE", SSEDecoder(16))):
        with pytest.raises(LlmError) as excinfo:
            decoder.feed(b"data: 0123456789abcdefX")
        errors[kind] = excinfo.value
    for kind, err in errors.items():
        assert err.code == ErrorCode.MALFORMED_RESPONSE
        assert err.details == {"max_line_bytes": 16, "line_bytes": 23}
        assert err.message.startswith(f"{kind} line of at least 23 bytes exceeds the 16-byte limit")
    assert errors["SSE"].message.endswith("not a valid event stream")
    assert errors["NDJSON"].message.endswith("not a valid JSON-lines stream")
