"""The caps on what the wire hands us (``notebook_llm.wire.limits``), counted on decoded bytes:
one SSE event, a whole body, an error body, nested ``Content-Encoding`` and a replayed recording.

Each case runs in a child process against a loopback server in that child, which reports its
peak RSS (``resource.getrusage``) before and after the request: the growth must stay near the
cap, where before one event grew to GB, ``gzip, gzip`` turned 1.8 KB into 2 GB, and a 1 MB gzip
error body peaked at 536 MB. ``python tests/test_wire_limits.py CASE`` prints one case's figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from notebook_llm import Engine, LlmError
from notebook_llm.adapters.lua.lua_adapter import LuaAdapter
from notebook_llm.engine.routing.lua_files import builtin_adapters_dir
from notebook_llm.wire.body import STEP, decoded, read_body, read_error_body
from notebook_llm.wire.limits import DEFAULT_LIMITS, MiB
from notebook_llm.wire.transport import ACCEPT_ENCODING, network_client

CASES = {
    # case: (what the request must end with, the cap that bounds it)
    "event": ("RESPONSE_TOO_LARGE", DEFAULT_LIMITS.max_event_bytes),
    "body": ("RESPONSE_TOO_LARGE", DEFAULT_LIMITS.max_body_bytes),
    "error_body": ("SERVER", DEFAULT_LIMITS.max_error_body_bytes),
    "replay": ("RESPONSE_TOO_LARGE", DEFAULT_LIMITS.max_body_bytes),
}

OPENAI = builtin_adapters_dir() / "openai.lua"


def gzipped(size: int, times: int = 1) -> bytes:
    """``size`` zero bytes gzip-compressed ``times`` times over, made without holding them."""
    out = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [out.compress(bytes(MiB)) for _ in range(size // MiB)]
    data = b"".join(parts) + out.flush()
    for _ in range(times - 1):
        data = _gzip(data)
    return data


def _gzip(data: bytes) -> bytes:
    out = zlib.compressobj(9, zlib.DEFLATED, 31)
    return out.compress(data) + out.flush()


def whole_body_adapter() -> LuaAdapter:
    """The openai script without ``transform_stream_chunk``: its non-stream path."""
    src = OPENAI.read_text("utf-8").replace(
        "\nreturn M", "\nM.transform_stream_chunk = nil\nreturn M"
    )
    return LuaAdapter.from_source(src, name="openai-whole")


async def serve(case: str, bomb: bytes) -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        try:
            if case == "event":  # data: lines with no blank line between them, without end
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                line = b"data: " + b"x" * (64 * 1024) + b"\n"
                while True:
                    writer.write(b"%x\r\n%s\r\n" % (len(line), line))
                    await writer.drain()
            status = b"500 Internal Server Error" if case == "error_body" else b"200 OK"
            coding = b"gzip" if case == "error_body" else b"gzip, gzip"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
                b"content-encoding: " + coding + b"\r\ncontent-length: %d\r\n\r\n" % len(bomb)
            )
            writer.write(bomb)
            await writer.drain()
            await reader.read()
        except ConnectionError:
            pass
        finally:
            writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def child(case: str, bomb_file: str, tmp: str) -> dict[str, object]:
    bomb = Path(bomb_file).read_bytes()  # noqa: ASYNC240 - before anything runs
    server = await serve(case, bomb)
    port = server.sockets[0].getsockname()[1]
    engine = Engine(config_file=False, env_file=False, retries=0)
    adapter = whole_body_adapter() if case in ("body", "replay") else "openai"
    engine.add_provider(
        "p", adapter=adapter, base_url=f"http://127.0.0.1:{port}/v1", model="m", needs_key=False
    )
    before = peak_mib()
    code = message = ""
    try:
        if case == "replay":
            # A recording of such an answer keeps its Content-Encoding (the server ignored the
            # recorder's "identity"); replaying it must stop at the same cap.
            tape = Path(tmp) / "tape.jsonl"
            with engine.recording(tape), contextlib.suppress(LlmError):
                await engine.complete("p", prompt="hi")
            before = peak_mib()
            with engine.replaying(tape):
                await engine.complete("p", prompt="hi")
        else:
            await engine.complete("p", prompt="hi")
    except LlmError as err:
        code, message = str(err.code), err.message
    server.close()
    return {"code": code, "message": message, "before_mib": before, "peak_mib": peak_mib()}


def bomb_for(case: str) -> bytes:
    if case == "error_body":
        return gzipped(1024 * MiB)  # about 1 MB of gzip: 1 GiB decoded
    return gzipped(256 * MiB, times=2)  # a few KB: 256 MiB decoded twice over


def run_case(case: str, tmp: Path) -> dict[str, object]:
    bomb = tmp / f"{case}.bin"
    bomb.write_bytes(bomb_for(case) if case != "event" else b"")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run(
        [sys.executable, __file__, case, str(bomb), str(tmp)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    result["bomb_bytes"] = bomb.stat().st_size
    return result


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_cap_ends_the_request_and_memory_stays_near_it(case: str, tmp_path: Path) -> None:
    code, cap = CASES[case]
    result = run_case(case, tmp_path)
    assert result["code"] == code, result
    if code == "RESPONSE_TOO_LARGE":
        assert "cap (decoded bytes; WireLimits." in str(result["message"])
    growth = float(result["peak_mib"]) - float(result["before_mib"])  # type: ignore[arg-type]
    # Near the cap: the body itself, its copy for the script, decoder windows; not GB.
    assert growth < cap / MiB * 3 + 40, result


def test_a_recorded_body_is_decoded_like_the_networks(tmp_path: Path) -> None:
    """A replayed recording's ``Content-Encoding`` is decoded, within the same caps."""
    result = run_case("replay", tmp_path)
    assert "WireLimits.max_body_bytes" in str(result["message"])


if __name__ == "__main__":
    print(json.dumps(asyncio.run(child(sys.argv[1], sys.argv[2], sys.argv[3]))))


# ------------------------------------------------------------------ the bounded decoders


def coded(body: bytes, coding: str, size: int = 16 * 1024) -> httpx.Response:
    """A streamed response with ``body`` as its raw bytes, ``size`` bytes per read."""

    class Pieces(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for start in range(0, len(body), size):
                yield body[start : start + size]

    return httpx.Response(200, headers=[("content-encoding", coding)], stream=Pieces())


async def pieces_of(response: httpx.Response) -> list[bytes]:
    return [piece async for piece in decoded(response)]


TEXT = b"the same words again and again " * 20_000


@pytest.mark.parametrize(
    ("coding", "body"),
    [
        ("gzip", _gzip(TEXT)),
        ("x-gzip", _gzip(TEXT)),
        ("deflate", zlib.compress(TEXT)),
        ("deflate", zlib.compress(TEXT)[2:-4]),  # raw deflate, as some servers send it
        ("gzip, gzip", _gzip(_gzip(TEXT))),
        ("gzip", _gzip(TEXT[:7000]) + _gzip(TEXT[7000:])),  # two gzip members
        ("identity", TEXT),
        ("GZIP , identity", _gzip(TEXT)),
    ],
)
async def test_each_coding_is_decoded_a_step_at_a_time(coding: str, body: bytes) -> None:
    got = await pieces_of(coded(body, coding))
    assert b"".join(got) == TEXT
    if coding != "identity":
        assert max(map(len, got)) <= STEP  # one read never becomes more than a step at once


async def test_one_small_read_of_a_bomb_does_not_expand_at_once() -> None:
    bomb = gzipped(64 * MiB, times=2)  # a few hundred bytes: one read
    got = decoded(coded(bomb, "gzip, gzip", size=len(bomb)))
    first = await anext(got)
    await got.aclose()
    assert len(first) <= STEP


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, gzip, gzip, gzip"])
async def test_codings_we_did_not_ask_for_or_nested_too_deep_are_malformed(coding: str) -> None:
    with pytest.raises(LlmError) as caught:
        await pieces_of(coded(b"\x00" * 10, coding))
    assert caught.value.code == "MALFORMED_RESPONSE"


async def test_a_body_that_is_not_its_coding_is_malformed() -> None:
    with pytest.raises(LlmError) as caught:
        await pieces_of(coded(b"this is not gzip at all", "gzip"))
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert "gzip" in caught.value.message


async def test_the_caps_stop_reading_and_say_which_cap() -> None:
    with pytest.raises(LlmError) as caught:
        await read_body(coded(_gzip(TEXT), "gzip"), 100_000, "the response body", "max_body_bytes")
    assert caught.value.code == "RESPONSE_TOO_LARGE"
    assert "WireLimits.max_body_bytes" in caught.value.message
    error = await read_error_body(coded(_gzip(TEXT), "gzip"), 1000)
    assert error == TEXT[:1000]


def test_the_requests_ask_only_for_what_is_decoded() -> None:
    assert network_client().headers["accept-encoding"] == ACCEPT_ENCODING == "gzip, deflate"
