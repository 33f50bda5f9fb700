"""Response bodies read within the caps of :mod:`notebook_llm.wire.limits`, counted on decoded
bytes (after every ``Content-Encoding``, nested ones included).

:func:`decoded` yields a response's body decoded, in pieces of at most :data:`STEP` bytes;
:func:`read_body` reads a whole body and ends with ``RESPONSE_TOO_LARGE`` past its cap;
:func:`read_error_body` reads an error body up to its cap and drops the rest. The same code reads
the network's bodies and a replayed recording's (a recorded body keeps its ``Content-Encoding``),
so both stop at the same sizes.

Why not httpx's ``aiter_bytes``: its decoders (``httpx._decoders``) decompress each network
read whole (``zlib.decompressobj().decompress(data)`` with no output limit), and a
``Content-Encoding: gzip, gzip`` body runs the second decoder over all of the first one's
output. Deflate expands up to about 1,000 times, so one 16 KiB read can become 16 MB, and twice
nested 16 GB, in one call, before any cap can look at it. Here each coding is a
``zlib.decompressobj`` asked for at most :data:`STEP` bytes at a time (``max_length``, the rest of
its input kept in ``unconsumed_tail``), and the codings are chained piece by piece, so memory
stays within a few steps of the cap whatever the ratio. Only the codings notebook_llm asks for
(``gzip``, ``deflate``; :data:`~notebook_llm.wire.transport.ACCEPT_ENCODING`) are decoded;
``br`` / ``zstd`` / ``compress`` are refused; an unknown token is passed through, as httpx does.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncGenerator, Iterator

import httpx

from ..core.errors import ErrorCode, LlmError
from .limits import MiB

__all__ = ["STEP", "decoded", "read_body", "read_error_body", "too_large"]

#: The most one decoding step hands on: the bound on what a single read can become at once.
STEP = 64 * 1024

#: More codings than this on one body is not a real server's answer.
MAX_CODINGS = 3

_REFUSED = {"br", "zstd", "compress", "x-compress"}


def too_large(what: str, limit: int, setting: str) -> LlmError:
    """The one-line ``RESPONSE_TOO_LARGE`` error of a cap."""
    size = f"{limit / MiB:g} MiB" if limit >= MiB else f"{limit / 1024:g} KiB"
    return LlmError(
        f"{what} is larger than its {size} cap (decoded bytes; WireLimits.{setting})",
        ErrorCode.RESPONSE_TOO_LARGE,
        details={"limit_bytes": limit, "cap": setting},
    )


def _undecodable(coding: str, exc: Exception) -> LlmError:
    return LlmError(
        f"the response body is not valid {coding} data, as its Content-Encoding says ({exc})",
        ErrorCode.MALFORMED_RESPONSE,
    )


class _Zlib:
    """One ``gzip`` or ``deflate`` coding, decoded at most :data:`STEP` bytes per step."""

    __slots__ = ("_coding", "_d", "_head")

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._head = b""  # deflate: the first bytes, until the zlib header is ruled in or out
        self._d: zlib._Decompress | None = (
            zlib.decompressobj(zlib.MAX_WBITS | 16) if coding != "deflate" else None
        )

    def _start_deflate(self, data: bytes) -> bytes:
        # "deflate" is zlib-wrapped per RFC 9110, but some servers send raw deflate (httpx
        # accepts both too): a valid zlib header decides.
        data = self._head + data
        if len(data) < 2:
            self._head = data
            return b""
        zlib_header = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
        self._d = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
        return data

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._d is None:
            data = self._start_deflate(data)
            if self._d is None:
                return
        d = self._d
        try:
            while True:
                out = d.decompress(data, STEP)
                data = d.unconsumed_tail
                if out:
                    yield out
                if d.eof:
                    rest = d.unused_data
                    if self._coding == "deflate" or not rest.strip(b"\0"):
                        return  # trailing bytes after the end: ignored, as httpx does
                    d = self._d = zlib.decompressobj(zlib.MAX_WBITS | 16)  # a next gzip member
                    data = rest
                elif not data and len(out) < STEP:
                    return
        except zlib.error as exc:
            raise _undecodable(self._coding, exc) from None

    def flush(self) -> Iterator[bytes]:
        if self._d is None and self._head:
            yield from self.feed(b"")
        # A body cut before its coding's end is passed on as far as it went (httpx's decoders do
        # the same); the framing above decides whether what arrived is complete.


def _codings(response: httpx.Response) -> list[_Zlib]:
    """The decoders of the response's ``Content-Encoding``, in the order to apply them."""
    names = [
        token.strip().lower()
        for value in response.headers.get_list("content-encoding")
        for token in value.split(",")
    ]
    names = [n for n in names if n and n != "identity"]
    for name in names:
        if name in _REFUSED:
            raise LlmError(
                f"the response body has Content-Encoding {name!r}, which notebook_llm did not "
                "ask for and does not decode (it asks for gzip or deflate)",
                ErrorCode.MALFORMED_RESPONSE,
            )
    known = [n for n in names if n in ("gzip", "x-gzip", "deflate")]
    if len(known) > MAX_CODINGS:
        raise LlmError(
            f"the response body has {len(known)} nested Content-Encodings; at most "
            f"{MAX_CODINGS} are decoded",
            ErrorCode.MALFORMED_RESPONSE,
        )
    return [_Zlib("deflate" if n == "deflate" else "gzip") for n in reversed(known)]


def _through(decoders: list[_Zlib], data: bytes, last: bool) -> Iterator[bytes]:
    """``data`` through every decoder, piece by piece (never more than a step per layer)."""
    if not decoders:
        if data:
            yield data
        return
    first, rest = decoders[0], decoders[1:]
    for piece in first.feed(data):
        yield from _through(rest, piece, False)
    if last:
        for piece in first.flush():
            yield from _through(rest, piece, False)
        yield from _through(rest, b"", True)


async def decoded(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The response's body, decoded, each piece at most :data:`STEP` bytes when it is coded
    (a plain body comes up one network read per piece, as it arrived).

    A response that was read before it got here (one a test's ``httpx.MockTransport`` built from
    ``content=``) was decoded by httpx already: its content comes up as it is.
    """
    try:
        content = response.content
    except httpx.ResponseNotRead:
        pass
    else:
        for start in range(0, len(content), STEP):
            yield content[start : start + STEP]
        return
    decoders = _codings(response)
    if not decoders:
        async for raw in response.aiter_raw():
            if raw:
                yield raw
        return
    async for raw in response.aiter_raw():
        for piece in _through(decoders, raw, False):
            yield piece
    for piece in _through(decoders, b"", True):
        yield piece


async def read_body(response: httpx.Response, limit: int, what: str, setting: str) -> bytes:
    """The whole decoded body; ``RESPONSE_TOO_LARGE`` (:func:`too_large`) once it passes
    ``limit`` bytes, without reading further."""
    buf = bytearray()
    async for piece in decoded(response):
        buf += piece
        if len(buf) > limit:
            raise too_large(what, limit, setting)
    return bytes(buf)


async def read_error_body(response: httpx.Response, limit: int) -> bytes:
    """An error body, decoded, up to ``limit`` bytes (the rest is not read: the provider's
    message is at its start)."""
    buf = bytearray()
    async for piece in decoded(response):
        buf += piece[: limit - len(buf)]
        if len(buf) >= limit:
            break
    return bytes(buf)
