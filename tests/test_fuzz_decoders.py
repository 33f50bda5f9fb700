"""Property-based fuzzing of the SSE / NDJSON decoders and the chunk -> event mapping.

Random bodies (well-formed and chaotic) are split at random offsets, including inside multi-byte
UTF-8 sequences and between ``\\r`` and ``\\n``, and fed:

* to ``SSEDecoder`` / ``NDJSONDecoder`` directly: the result does not depend on the split, and
  the only exception is ``LlmError``;
* to a real ``LuaAdapter`` (openai.lua for SSE, ollama.lua for NDJSON) through an
  ``httpx.MockTransport`` whose body is an ``httpx.AsyncByteStream`` yielding the pieces: the
  only exception that escapes ``adapter.stream`` is ``LlmError``, every produced stream passes
  ``validate_stream``, and a well-formed body gives exactly its text whatever the split.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notebook_llm import (
    ErrorCode,
    Event,
    Finish,
    GenerateOptions,
    LlmError,
    Message,
    assemble,
    validate_stream,
)
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.adapters.lua.runtime import LuaLimits
from notebook_llm.wire.ndjson import NDJSONDecoder
from notebook_llm.wire.sse import SSEDecoder

ADAPTERS = Path(__file__).resolve().parent.parent / "adapters"
SOURCES = {f: (ADAPTERS / f"{f}.lua").read_text("utf-8") for f in ("openai", "ollama")}
LIMITS = LuaLimits(cpu_seconds=1.0, memory_bytes=64 * 1024 * 1024)
FUZZ = settings(
    deadline=None,
    max_examples=120,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Text rich in multi-byte UTF-8 (2, 3 and 4 bytes) and awkward characters.
MULTIBYTE = 'é€中😀\u2028\u0085\ufeff\x00\r\n"\\'
texts = st.text(
    alphabet=st.one_of(
        st.sampled_from(MULTIBYTE),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=12,
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
eols = st.sampled_from([b"\n", b"\r\n", b"\r"])


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    pieces, prev = [], 0
    for p in [*points, len(body)]:
        if p > prev:
            pieces.append(body[prev:p])
            prev = p
    return pieces


cut_lists = st.lists(st.integers(min_value=0, max_value=10**6), max_size=40)


# ---------------------------------------------------------------------------- bodies


@st.composite
def openai_body(draw: st.DrawFn) -> tuple[bytes, str]:
    """A well-formed OpenAI SSE body (with comments, odd line endings, a BOM) and its text."""
    pieces = draw(st.lists(texts, min_size=1, max_size=8))
    ascii_only = draw(st.booleans())
    eol = draw(eols)
    out = bytearray(b"\xef\xbb\xbf" if draw(st.booleans()) else b"")
    for i, piece in enumerate(pieces):
        if draw(st.booleans()):
            out += b": keep-alive" + eol
        chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": piece}}]}
        data = json.dumps(chunk, ensure_ascii=ascii_only).encode()
        out += b"data: " + data + eol + eol
        if i == 0 and draw(st.booleans()):
            out += b"event: message" + eol + b"id: 1" + eol + b"retry: 10" + eol + eol
    final = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    out += b"data: " + json.dumps(final).encode() + eol + eol
    out += b"data: [DONE]" + eol + eol
    return bytes(out), "".join(pieces)


@st.composite
def ollama_body(draw: st.DrawFn) -> tuple[bytes, str]:
    pieces = draw(st.lists(texts, min_size=1, max_size=8))
    ascii_only = draw(st.booleans())
    out = bytearray()
    for piece in pieces:
        line = {"model": "m", "message": {"role": "assistant", "content": piece}, "done": False}
        out += json.dumps(line, ensure_ascii=ascii_only).encode() + draw(
            st.sampled_from([b"\n", b"\r\n", b"\n\n"])
        )
    out += json.dumps({"model": "m", "done": True, "done_reason": "stop"}).encode()
    if draw(st.booleans()):
        out += b"\n"
    return bytes(out), "".join(pieces)


@st.composite
def chaos_sse(draw: st.DrawFn) -> bytes:
    """Random SSE-ish lines: fields, comments, random JSON (often not a chunk), garbage bytes."""
    eol = draw(eols)
    lines = draw(
        st.lists(
            st.one_of(
                json_values.map(lambda v: b"data: " + json.dumps(v, ensure_ascii=False).encode()),
                st.builds(
                    lambda c: b"data: " + json.dumps({"choices": [{"delta": c}]}).encode(),
                    st.dictionaries(
                        st.sampled_from(["content", "tool_calls", "reasoning_content", "role"]),
                        json_values,
                        max_size=2,
                    ),
                ),
                st.builds(
                    lambda fr, u: (
                        b"data: "
                        + json.dumps(
                            {"choices": [{"delta": {}, "finish_reason": fr}], "usage": u}
                        ).encode()
                    ),
                    st.sampled_from(["stop", "length", "tool_calls", "content_filter", None, 3]),
                    json_values,
                ),
                st.just(b"data: [DONE]"),
                st.just(b""),
                st.just(b": comment"),
                texts.map(lambda t: b"event: " + t.replace("\r", "").replace("\n", "").encode()),
                st.binary(max_size=16),
                texts.map(str.encode),
            ),
            max_size=12,
        )
    )
    return eol.join(lines)


@st.composite
def chaos_ndjson(draw: st.DrawFn) -> bytes:
    lines = draw(
        st.lists(
            st.one_of(
                json_values.map(lambda v: json.dumps(v, ensure_ascii=False).encode()),
                st.builds(
                    lambda m, d: json.dumps({"message": m, "done": d}, ensure_ascii=False).encode(),
                    st.dictionaries(
                        st.sampled_from(["content", "thinking", "tool_calls", "role"]),
                        json_values,
                        max_size=2,
                    ),
                    st.booleans() | json_values,
                ),
                st.binary(max_size=16),
                texts.map(str.encode),
            ),
            max_size=10,
        )
    )
    return b"\n".join(lines)


# ---------------------------------------------------------------------------- decoders


def sse_events(pieces: list[bytes]) -> list[tuple[str, str, str | None]]:
    dec = SSEDecoder()
    out = []
    for p in pieces:
        out += dec.feed(p)
    out += dec.flush()
    return [(e.event, e.data, e.id) for e in out]


def ndjson_lines(pieces: list[bytes]) -> list[str]:
    dec = NDJSONDecoder()
    out = []
    for p in pieces:
        out += dec.feed(p)
    return out + dec.flush()


@FUZZ
@given(st.one_of(openai_body().map(lambda b: b[0]), chaos_sse()), cut_lists)
def test_sse_decoder_split_invariant(body: bytes, cuts: list[int]) -> None:
    try:
        whole = sse_events([body])
    except LlmError:
        return
    assert sse_events(split(body, cuts)) == whole
    assert sse_events([bytes([b]) for b in body]) == whole


@FUZZ
@given(st.one_of(ollama_body().map(lambda b: b[0]), chaos_ndjson()), cut_lists)
def test_ndjson_decoder_split_invariant(body: bytes, cuts: list[int]) -> None:
    whole = ndjson_lines([body])
    assert ndjson_lines(split(body, cuts)) == whole
    assert ndjson_lines([bytes([b]) for b in body]) == whole


@FUZZ
@given(st.binary(max_size=300), cut_lists, st.integers(min_value=1, max_value=64))
def test_decoders_only_raise_llm_error(body: bytes, cuts: list[int], limit: int) -> None:
    for make in (lambda: SSEDecoder(max_line_bytes=limit), lambda: NDJSONDecoder(limit)):
        dec = make()
        codes = []
        try:
            for p in split(body, cuts):
                dec.feed(p)
            dec.flush()
        except LlmError as err:  # nothing else may escape
            codes.append(err.code)
        assert set(codes) <= {ErrorCode.MALFORMED_RESPONSE}


# ---------------------------------------------------------------------------- adapters


class Pieces(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


async def through_adapter(
    fmt: str, pieces: list[bytes], ctype: str
) -> tuple[list[Event], LlmError | None]:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": ctype}, stream=Pieces(pieces))

    adapter = LuaAdapter(
        SOURCES[fmt], name=fmt, limits=LIMITS, transport=httpx.MockTransport(handler)
    )
    options = GenerateOptions(
        provider="fuzz", model="m", messages=[Message.user("hi")], base_url="http://fuzz.test"
    )
    events: list[Event] = []
    try:
        async for ev in adapter.stream(options):  # NOT through the engine: nothing is masked
            events.append(ev)
    except LlmError as err:
        return events, err
    return events, None


def check(fmt: str, pieces: list[bytes], ctype: str) -> tuple[list[Event], LlmError | None]:
    events, err = asyncio.run(asyncio.wait_for(through_adapter(fmt, pieces, ctype), 10))
    if err is not None:
        events = [*events, Finish.error(err)]  # what the engine would emit
        assert err.code != ErrorCode.INVARIANT
    validate_stream(events)
    return events, err


@FUZZ
@given(openai_body(), cut_lists)
def test_openai_adapter_well_formed_any_split(
    body_text: tuple[bytes, str], cuts: list[int]
) -> None:
    body, text = body_text
    events, err = check("openai", split(body, cuts), "text/event-stream")
    done = assemble(events)
    if text:
        assert err is None, err
        assert done.text == text
        assert done.finish is not None
        assert done.finish.kind == "stop"
    else:  # nothing but empty deltas, then finish_reason stop: an empty answer
        assert err is None, err
        assert done.text == ""
        assert done.finish is not None
        assert done.finish.kind == "stop"


@FUZZ
@given(ollama_body(), cut_lists)
def test_ollama_adapter_well_formed_any_split(
    body_text: tuple[bytes, str], cuts: list[int]
) -> None:
    body, text = body_text
    events, err = check("ollama", split(body, cuts), "application/x-ndjson")
    done = assemble(events)
    if text:
        assert err is None, err
        assert done.text == text
        assert done.finish is not None
        assert done.finish.kind == "stop"


@FUZZ
@given(chaos_sse(), cut_lists)
def test_openai_adapter_chaos(body: bytes, cuts: list[int]) -> None:
    whole, _ = check("openai", [body], "text/event-stream")
    parts, _ = check("openai", split(body, cuts), "text/event-stream")
    assert _summary(parts) == _summary(whole)


@FUZZ
@given(chaos_ndjson(), cut_lists)
def test_ollama_adapter_chaos(body: bytes, cuts: list[int]) -> None:
    whole, _ = check("ollama", [body], "application/x-ndjson")
    parts, _ = check("ollama", split(body, cuts), "application/x-ndjson")
    assert _summary(parts) == _summary(whole)


@settings(deadline=None, max_examples=25)
@given(st.binary(max_size=200), cut_lists, st.sampled_from(["openai", "ollama"]))
def test_random_bytes_through_adapters(body: bytes, cuts: list[int], fmt: str) -> None:
    check(
        fmt, split(body, cuts), "text/event-stream" if fmt == "openai" else "application/x-ndjson"
    )


def _summary(events: list[Event]) -> tuple[Any, ...]:
    """Split-independent outcome: text, reasoning, tool calls, finish kind and code."""
    done = assemble(events)
    finish = done.finish
    assert finish is not None
    return (
        done.text,
        done.reasoning,
        [(c.name, c.arguments) for c in done.tool_calls],
        finish.kind,
        finish.failure.code if finish.failure else None,
    )
