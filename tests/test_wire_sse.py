"""SSEDecoder: recorded provider bodies split at every byte offset, spec edge cases, properties."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notebook_llm.core.errors import ErrorCode, LlmError
from notebook_llm.wire.sse import SSEDecoder, SSEEvent

WIRE = Path(__file__).parent / "fixtures" / "wire"
SSE_FILES = sorted(WIRE.glob("*/*.sse"))
# Above this size an all-offsets literal split is O(n^2) whole-body decodes (minutes for the
# 183 KB groq stream); such bodies are checked block by block instead (see _blocks).
LITERAL_LIMIT = 32 * 1024


def decode(*chunks: bytes, max_line_bytes: int = 16 * 1024 * 1024) -> list[SSEEvent]:
    decoder = SSEDecoder(max_line_bytes)
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.flush()


def bytewise(body: bytes) -> list[SSEEvent]:
    return decode(*(body[i : i + 1] for i in range(len(body))))


def _blocks(body: bytes) -> list[bytes]:
    """The body cut right after each blank line, where the decoder state is back to fresh."""
    blocks = [m.group(0) for m in re.finditer(rb".*?(?:\r\n\r\n|\n\n)", body, re.DOTALL)]
    rest = body[sum(map(len, blocks)) :]
    return [*blocks, rest] if rest else blocks


def _ids(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@pytest.fixture(params=SSE_FILES, ids=_ids)
def sse_body(request: pytest.FixtureRequest) -> bytes:
    path: Path = request.param
    return path.read_bytes()


def test_fixtures_present() -> None:
    assert len(SSE_FILES) >= 20
    assert (WIRE / "SOURCES.md").is_file()


def test_every_split_offset_matches_one_shot(sse_body: bytes) -> None:
    reference = decode(sse_body)
    assert reference
    if len(sse_body) <= LITERAL_LIMIT:
        for k in range(len(sse_body) + 1):
            assert decode(sse_body[:k], sse_body[k:]) == reference, k
        return
    # Large body: fresh-state blocks make "split at k" equal to "split the block holding k".
    assert not re.search(rb"(?m)^(id|retry)\b", sse_body)
    blocks = _blocks(sse_body)
    assert b"".join(blocks) == sse_body
    per_block = [decode(block) for block in blocks]
    assert [e for events in per_block for e in events] == reference
    for block, expected in zip(blocks, per_block, strict=True):
        for k in range(len(block) + 1):
            assert decode(block[:k], block[k:]) == expected
    for k in range(0, len(sse_body) + 1, 997):  # plus literal whole-body splits, strided
        assert decode(sse_body[:k], sse_body[k:]) == reference, k


def test_byte_by_byte_matches_one_shot(sse_body: bytes) -> None:
    assert bytewise(sse_body) == decode(sse_body)


def test_data_payloads_are_json_or_done(sse_body: bytes) -> None:
    decoder = SSEDecoder()
    events = decoder.feed(sse_body) + decoder.flush()
    assert decoder.saw_sse
    assert decoder.non_sse_text() is None
    for event in events:
        if event.data == "[DONE]":
            assert event is events[-1]
            continue
        assert isinstance(json.loads(event.data), dict)
        assert "\r" not in event.data
        assert event.id is None
        assert event.retry is None


def test_anthropic_event_names_match_payload_type() -> None:
    events = decode((WIRE / "anthropic" / "stream_text.sse").read_bytes())
    names = [e.event for e in events]
    assert names[0] == "message_start"
    assert names[-1] == "message_stop"
    assert {"ping", "content_block_start", "content_block_delta", "message_delta"} <= set(names)
    for event in events:
        assert json.loads(event.data)["type"] == event.event
    ping = next(e for e in events if e.event == "ping")
    assert ping.data == '{"type": "ping"}'


def test_gemini_crlf_separators() -> None:
    body = (WIRE / "gemini" / "stream_text.sse").read_bytes()
    assert b"\r\n\r\n" in body
    events = decode(body)
    assert len(events) == body.count(b"data: ")
    assert all(e.event == "message" for e in events)
    assert json.loads(events[-1].data)["candidates"][0]["finishReason"] == "STOP"
    # every split of every "\r\n" pair between two chunks is still one line break
    for k in (m.start() + 1 for m in re.finditer(rb"\r\n", body)):
        assert decode(body[:k], body[k:]) == events


def test_openai_style_ends_with_done() -> None:
    for name in ("openai/stream_text_include_usage.sse", "mistral/stream_text.sse"):
        events = decode((WIRE / name).read_bytes())
        assert events[-1].data == "[DONE]"
        assert all(e.event == "message" for e in events)


def _split_inside_chars(body: bytes) -> list[int]:
    """Offsets that fall between two bytes of one multi-byte UTF-8 character."""
    return [k for k in range(1, len(body)) if 0x80 <= body[k] <= 0xBF]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("anthropic/stream_text_multibyte_emoji.sse", " 😄"),
        ("mistral/stream_text_multibyte.sse", " 😊 Let"),
        ("mistral/stream_text_multibyte.sse", "**—nice"),
        ("mistral/stream_text_multibyte.sse", "’s anything else you"),
    ],
)
def test_multibyte_split_inside_character(name: str, expected: str) -> None:
    body = (WIRE / name).read_bytes()
    offsets = _split_inside_chars(body)
    assert offsets
    reference = decode(body)
    texts = [json.dumps(json.loads(e.data), ensure_ascii=False) for e in reference[:-1]]
    assert any(json.dumps(expected, ensure_ascii=False) in t for t in texts)
    for k in offsets:
        events = decode(body[:k], body[k:])
        assert events == reference
        assert "\ufffd" not in "".join(e.data for e in events)


# --- spec edge cases -------------------------------------------------------------------------


@pytest.mark.parametrize("sep", [b"\n", b"\r", b"\r\n"])
def test_line_endings(sep: bytes) -> None:
    body = sep.join([b"event: e", b"data: a", b"data: b", b"", b"data: c", b"", b""])
    expected = [SSEEvent("e", "a\nb"), SSEEvent("message", "c")]
    assert decode(body) == expected
    assert bytewise(body) == expected


def test_cr_at_chunk_end_then_lf_is_one_break() -> None:
    assert decode(b"data: a\r", b"\ndata: b\r", b"\n", b"\r\n") == [SSEEvent(data="a\nb")]
    # a lone "\r" followed by a non-"\n" chunk is itself a break
    assert decode(b"data: a\r", b"\r") == [SSEEvent(data="a")]


def test_field_parsing() -> None:
    body = b": comment\ndata:nospace\ndata:  two spaces\ndata\nunknown: x\nevent: custom\n\n"
    assert decode(body) == [SSEEvent("custom", "nospace\n two spaces\n")]


def test_id_persists_and_retry_is_per_event() -> None:
    body = b"id: 1\nretry: 250\ndata: a\n\ndata: b\n\nid: x\x00y\nretry: 1.5\ndata: c\n\n"
    assert decode(body) == [
        SSEEvent(data="a", id="1", retry=250),
        SSEEvent(data="b", id="1"),
        SSEEvent(data="c", id="1"),
    ]
    decoder = SSEDecoder()
    decoder.feed(b"id:\n\n")
    assert decoder.last_event_id == ""


def test_event_without_data_is_not_dispatched() -> None:
    assert decode(b"event: ping\n\ndata: x\n\n") == [SSEEvent(data="x")]
    assert decode(b"data:\n\n") == [SSEEvent(data="")]


def test_flush_dispatches_pending_event_and_unterminated_line() -> None:
    assert decode(b"data: a\n") == [SSEEvent(data="a")]
    assert decode(b"event: e\ndata: [DONE]") == [SSEEvent("e", "[DONE]")]
    assert decode(b"event: e\n") == []
    assert decode(b"") == []


@pytest.mark.parametrize(
    "chunks",
    [
        (b"\xef\xbb\xbfdata: a\n\n",),
        (b"\xef", b"\xbb", b"\xbf", b"data: a\n\n"),
        (b"\xef\xbb", b"\xbfdata: a\n\n"),
    ],
)
def test_leading_bom_removed(chunks: tuple[bytes, ...]) -> None:
    assert decode(*chunks) == [SSEEvent(data="a")]


def test_only_one_leading_bom_removed() -> None:
    assert decode(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n") == []  # field "\ufeffdata" is unknown
    assert decode(b"data: \xef\xbb\xbfa\n\n") == [SSEEvent(data="\ufeffa")]
    assert decode(b"\xef\xbb") == []


def test_invalid_utf8_is_replaced() -> None:
    assert decode(b"data: a\xffb\n\n") == [SSEEvent(data="a\ufffdb")]
    assert decode(b"data: \xe2\x82\n\n") == [SSEEvent(data="\ufffd")]


def test_empty_chunks_are_ignored() -> None:
    assert decode(b"", b"data: a", b"", b"\n", b"", b"\n") == [SSEEvent(data="a")]


# --- limits --------------------------------------------------------------------------------


def _assert_malformed(excinfo: pytest.ExceptionInfo[LlmError]) -> None:
    assert excinfo.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "exceeds the 16-byte limit" in excinfo.value.message


def test_oversized_line_in_one_chunk() -> None:
    decoder = SSEDecoder(16)
    # The events completed before the over-long line come back first; the error follows.
    events = decoder.feed(b"data: ok\n\n" + b"data: " + b"x" * 20 + b"\n\n")
    assert [e.data for e in events] == ["ok"]
    with pytest.raises(LlmError) as excinfo:
        decoder.flush()
    _assert_malformed(excinfo)
    with pytest.raises(LlmError):
        decoder.feed(b"data: more\n\n")


def test_oversized_line_growing_without_newline() -> None:
    decoder = SSEDecoder(16)
    decoder.feed(b"data: 0123456789")  # exactly 16 bytes: fine
    with pytest.raises(LlmError) as excinfo:
        decoder.feed(b"x")
    _assert_malformed(excinfo)


def test_oversized_unterminated_line_at_flush() -> None:
    decoder = SSEDecoder(1)
    assert decoder.feed(b"\xef\xbb") == []  # could still become a BOM: held back unchecked
    with pytest.raises(LlmError) as excinfo:
        decoder.flush()
    assert excinfo.value.code == ErrorCode.MALFORMED_RESPONSE


def test_line_at_limit_is_accepted() -> None:
    assert decode(b"data: 0123456789\n\n", max_line_bytes=16) == [SSEEvent(data="0123456789")]


def test_invalid_limit() -> None:
    with pytest.raises(ValueError, match="positive"):
        SSEDecoder(0)


def test_twenty_thousand_chunks_decode_as_the_whole_body() -> None:
    # (its speed is measured in bench/, not asserted here)
    body = (WIRE / "groq" / "stream_text.sse").read_bytes()
    chunks = [body[i : i + 9] for i in range(0, len(body), 9)]
    assert len(chunks) >= 20_000
    assert decode(*chunks) == decode(body)


# --- non-SSE bodies ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "gemini/error_400_api_key_invalid_on_stream.json",
        "gemini/error_404_model_not_found_on_stream.json",
    ],
)
def test_json_error_on_stream_is_detected(name: str) -> None:
    body = (WIRE / name).read_bytes()
    for k in range(len(body) + 1):
        decoder = SSEDecoder()
        assert decoder.feed(body[:k]) + decoder.feed(body[k:]) + decoder.flush() == []
        assert not decoder.saw_sse
        assert decoder.non_sse_text() == body.decode()
    assert "error" in json.loads(body.decode())


def test_non_sse_text_with_bom_and_cap() -> None:
    decoder = SSEDecoder(max_non_sse_bytes=5)
    decoder.feed(b"\xef\xbb\xbf")
    decoder.feed(b'{"error": 1}')
    decoder.flush()
    assert decoder.non_sse_text() == '{"err'


def test_non_sse_text_none_for_sse_or_blank() -> None:
    decoder = SSEDecoder()
    decoder.feed(b": keep-alive\n\n")
    decoder.flush()
    assert decoder.saw_sse
    assert decoder.non_sse_text() is None
    blank = SSEDecoder()
    blank.feed(b"\n \n")
    blank.flush()
    assert blank.non_sse_text() is None


# --- property --------------------------------------------------------------------------------

_FRAGMENTS = [
    b"data:", b"data: ", b"event:", b"event: x", b"id:", b"id: 7", b"retry:", b"retry: 30",
    b":", b" ", b"x", b"{}", b"[DONE]", b"\r", b"\n", b"\r\n", b"\xef\xbb\xbf", b"\xf0\x9f\x98",
    b"\x84", b"\xe2\x80\x94", b"\xff", b"\x00", b"data", b"yy:zz",
]  # fmt: skip


def _outcome(chunks: list[bytes], limit: int) -> object:
    try:
        return decode(*chunks, max_line_bytes=limit)
    except LlmError as err:
        return ("error", err.code)


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.binary(max_size=6)), max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    limit=st.sampled_from([4, 12, 64, 16 * 1024 * 1024]),
)
def test_random_splits_equal_one_shot(parts: list[bytes], cuts: list[int], limit: int) -> None:
    body = b"".join(parts)
    offsets = sorted({min(c, len(body)) for c in cuts})
    bounds = [0, *offsets, len(body)]
    chunks = [body[a:b] for a, b in itertools.pairwise(bounds)]
    assert _outcome(chunks, limit) == _outcome([body], limit)


def _data_outcome(chunks: list[bytes], limit: int) -> object:
    decoder = SSEDecoder(limit)
    out: list[str] = []
    try:
        for chunk in chunks:
            out += decoder.feed_data(chunk)
        return out + decoder.flush_data()
    except LlmError as err:
        return (out, "error", err.code)


def _events_data_outcome(chunks: list[bytes], limit: int) -> object:
    decoder = SSEDecoder(limit)
    out: list[str] = []
    try:
        for chunk in chunks:
            out += [e.data for e in decoder.feed(chunk)]
        return out + [e.data for e in decoder.flush()]
    except LlmError as err:
        return (out, "error", err.code)


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.binary(max_size=6)), max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    limit=st.sampled_from([4, 12, 64, 16 * 1024 * 1024]),
)
def test_feed_data_gives_the_data_of_feed(parts: list[bytes], cuts: list[int], limit: int) -> None:
    # feed_data/flush_data (the stream hot path) skip the SSEEvent objects, nothing else.
    body = b"".join(parts)
    offsets = sorted({min(c, len(body)) for c in cuts})
    bounds = [0, *offsets, len(body)]
    chunks = [body[a:b] for a, b in itertools.pairwise(bounds)]
    assert _data_outcome(chunks, limit) == _events_data_outcome(chunks, limit)


def test_feed_data_on_recorded_bodies(sse_body: bytes) -> None:
    assert _data_outcome([sse_body], 16 * 1024 * 1024) == [e.data for e in decode(sse_body)]


_PAIRS = [b"data: {}\n\n", b"data: abcdef\n\n", b"data: \n\n", b"data: x\r\n\r\n", b"\n"]


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(
        st.one_of(st.sampled_from(_PAIRS), st.sampled_from(_FRAGMENTS), st.binary(max_size=4)),
        max_size=40,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    limit=st.sampled_from([4, 12, 64, 16 * 1024 * 1024]),
    max_event=st.sampled_from([None, 0, 3, 6, 64]),
)
def test_feed_data_pairs_path_gives_the_data_of_feed(
    parts: list[bytes], cuts: list[int], limit: int, max_event: int | None
) -> None:
    # feed_data takes whole "data: " + blank-line events in pairs: the same data, the same
    # errors (line and event caps) at the same place as feed.
    body = b"".join(parts)
    offsets = sorted({min(c, len(body)) for c in cuts})
    bounds = [0, *offsets, len(body)]
    # A comment first, in a read of its own: the decoder has seen SSE when the pairs come.
    chunks = [b":\n", *(body[a:b] for a, b in itertools.pairwise(bounds))]

    def run(data_only: bool) -> object:
        decoder = SSEDecoder(limit, max_event_bytes=max_event)
        out: list[str] = []
        try:
            for chunk in chunks:
                if data_only:
                    out += decoder.feed_data(chunk)
                else:
                    out += [e.data for e in decoder.feed(chunk)]
            return out + (decoder.flush_data() if data_only else [e.data for e in decoder.flush()])
        except LlmError as err:
            return (out, "error", err.code)

    assert run(True) == run(False)


@pytest.mark.parametrize("max_event", [3, 6])
def test_feed_data_pairs_path_holds_the_event_cap(max_event: int) -> None:
    def run(data_only: bool) -> object:
        decoder = SSEDecoder(max_event_bytes=max_event)
        out: list[str] = []
        try:
            # the error of the event over the cap is raised by the call after its read
            for chunk in (b": hi\n\n", b"data: x\n\ndata: abcdef\n\ndata: y\n\n", b"\n"):
                out += (
                    decoder.feed_data(chunk) if data_only else [e.data for e in decoder.feed(chunk)]
                )
            return out
        except LlmError as err:
            return (out, "error", err.code)

    got = run(True)
    assert got == run(False)
    if max_event == 6:
        assert got == ["x", "abcdef", "y"]
    else:  # the event over the cap ends the stream, after the one before it
        assert isinstance(got, tuple)
        assert got[:2] == (["x"], "error")
