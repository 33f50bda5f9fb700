"""One connection of :mod:`notebook_llm.wire.http11`: an :class:`asyncio.Protocol` whose bytes go
straight to an llhttp response parser (``httptools``), and the request head it writes.

A :class:`Connection` serves one request at a time (the transport's pool hands out idle ones
only). Everything the socket brings is fed to the parser at once; the body pieces wait in
:attr:`Connection.body` until the request's stream takes them, all together
(:meth:`Connection.take`: one piece per network read, whatever the server's chunking), and the
socket pauses while 256 KiB lie unread. Whatever makes a connection unfit for another request
(``Connection: close``, HTTP/1.0, bytes nobody asked for, a parse error, the server's close,
the answer to a ``HEAD``) clears :attr:`Connection.reusable`.
"""

from __future__ import annotations

import asyncio
import re
import typing
from collections import deque

import httptools
import httpx

#: Stop reading from the socket while this much body is buffered and unread (back pressure).
READ_HIGH_WATER = 256 * 1024

#: A response head larger than this is refused (h11's limit too): a server that keeps sending
#: headers would otherwise fill memory while every read resets the read timeout. The same holds
#: for the reads of a body that bring no body byte (a chunked body's trailers).
MAX_HEAD = 100 * 1024

#: What a request's method and header names may hold (RFC 9110 tokens), and what a header value
#: must not (control characters but tab): anything else could split the request, so it is
#: refused, as h11 refuses it.
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f]")
_DIGITS = re.compile(rb"[0-9]{1,18}")

#: How a request's body is framed on the wire, from its own headers (:func:`request_head`).
CHUNKED = -1


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: its socket's bytes go straight to the response parser."""

    def __init__(self, loop: asyncio.AbstractEventLoop, origin: tuple[str, str, int]) -> None:
        self.loop = loop
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        # Lines ended by a bare LF, as h11 accepts them (some small servers write them).
        self.parser.set_dangerous_leniencies(lenient_optional_cr_before_lf=True)
        self.eof = False
        self.error: BaseException | None = None  # what the socket or the parser failed with
        self.reading_paused = False
        self.writing_paused = False
        self.waiter: asyncio.Future[None] | None = None  # the task waiting for data
        self.drain_waiter: asyncio.Future[None] | None = None
        self.idle_since = 0.0
        self.in_use = False  # a request owns it: what arrives is that request's answer
        self.reusable = True  # False once anything makes it unfit for another request
        self.closed_here = False  # we closed it: the end of a body is not the server's close
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self.complete = False
        self.until_close = False  # the body ends when the server closes the connection
        self.no_body = False  # the answer to a HEAD request
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.head_size = 0

    # ---------------------------------------------------------------- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.in_use or self.complete:  # bytes nobody asked for: never reuse this one
            self.reusable = False
            return
        in_body, buffered = self.head_done, self.buffered
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("the server switched protocols (not supported)"))
        except httptools.HttpParserError as exc:  # an error raised by a callback comes first
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc}"))
        if not self.head_done:  # all of this read was head: httptools buffers an unfinished
            self._count_head(len(data), "head")  # header line whole, so count what it was given
        elif in_body and not self.complete:
            if self.buffered == buffered:  # no body byte: chunk framing, or trailers (buffered
                self._count_head(len(data), "chunk framing")  # as header lines are)
            else:
                self.head_size = 0
        if self.buffered > READ_HIGH_WATER and not self.reading_paused and self.transport:
            self.transport.pause_reading()
            self.reading_paused = True
        self._wake()

    def eof_received(self) -> bool:
        return False  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.reusable = False
        if exc is not None and self.error is None:
            self.error = exc
        if self.until_close and self.head_done and exc is None and not self.closed_here:
            self.complete = True
        self._wake()
        waiter, self.drain_waiter = self.drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        waiter, self.drain_waiter = self.drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        self.error = self.error or error
        self.close()

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ---------------------------------------------------------------- httptools callbacks

    def on_message_begin(self) -> None:
        if self.head_done:  # a second answer to one request: never reuse this connection
            self._stop_parsing(httpx.RemoteProtocolError("the server sent more than its answer"))

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head_done:  # after the head: a chunked body's trailers, dropped
            self.headers.append((name, value.rstrip(b" \t")))

    def _count_head(self, size: int, what: str) -> None:
        self.head_size += size
        if self.head_size > MAX_HEAD and self.error is None:
            self._fail(httpx.RemoteProtocolError(f"the response {what} is over {MAX_HEAD} bytes"))

    def _stop_parsing(self, error: httpx.RemoteProtocolError) -> typing.NoReturn:
        """Fail the connection with ``error``; raising it from a callback stops the parser
        (``feed_data`` raises ``HttpParserCallbackError``, and ``error`` is what counts)."""
        self._fail(error)
        raise error

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # 100 Continue, 103 Early Hints: the real answer follows
            self.headers = []
            self.reason = b""
            return
        self.status = status
        self.head_done = True
        if self.no_body:
            self.complete = True
            self.reusable = False  # the parser would take the next bytes for this body
            return
        if status not in (204, 304):
            framed = False
            for name, value in self.headers:
                lower = name.lower()
                if lower == b"content-length" or (
                    lower == b"transfer-encoding" and b"chunked" in value.lower()
                ):
                    framed = True
                    break
            self.until_close = not framed

    def on_body(self, body: bytes) -> None:
        if self.head_done and not self.complete:
            self.body.append(body)
            self.buffered += len(body)

    def on_message_complete(self) -> None:
        if not self.head_done:  # the end of a 1xx answer
            return
        self.complete = True
        if not self.parser.should_keep_alive():
            self.reusable = False

    # ---------------------------------------------------------------- for the request

    async def wait(self, limit: float | None) -> None:
        """Until something arrives (bytes, the end, an error); ``TimeoutError`` after
        ``limit`` seconds."""
        self.waiter = self.loop.create_future()
        await _within(self.loop, self.waiter, limit)

    async def drain(self, limit: float | None) -> None:
        """Until the socket's send buffer has room again (as ``StreamWriter.drain``)."""
        self.drain_waiter = self.loop.create_future()
        await _within(self.loop, self.drain_waiter, limit)

    def take(self) -> bytes:
        """Every body piece that arrived since the last call, as one."""
        body = self.body
        piece = body.popleft() if len(body) == 1 else b"".join(body)
        body.clear()
        self.buffered = 0
        if self.reading_paused and self.transport is not None:
            self.transport.resume_reading()
            self.reading_paused = False
        return piece

    def write(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing() or self.error is not None:
            raise httpx.WriteError(str(self.error or "the connection is closed"))
        transport.write(data)

    def start(self, head_only: bool) -> None:
        """Make the connection ready for the answer to a new request."""
        self._reset()
        self.no_body = head_only
        self.in_use = True

    def close(self) -> None:
        """At once, as AnyIO and httpcore do (a TLS close would keep a shutdown handshake
        running on the loop)."""
        self.reusable = False
        self.closed_here = True
        if self.transport is not None:
            self.transport.abort()

    def usable(self, now: float, expiry: float | None) -> bool:
        """Whether an idle connection may take another request."""
        if not self.reusable or self.eof or self.transport is None:
            return False
        if self.transport.is_closing():
            return False
        return expiry is None or now - self.idle_since < expiry

    def get_extra_info(self, info: str) -> typing.Any:
        """For ``response.extensions["network_stream"]``, as httpcore's streams answer."""
        transport = self.transport
        if info == "is_readable":  # an idle connection the server closed or wrote to
            return self.eof or not self.reusable or transport is None or transport.is_closing()
        if transport is None:
            return None
        names = {"client_addr": "sockname", "server_addr": "peername"}
        return transport.get_extra_info(names.get(info, info))


async def _within(
    loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None], limit: float | None
) -> None:
    """Wait for ``waiter``, ``TimeoutError`` after ``limit`` seconds (one timer, no task)."""
    timer = loop.call_later(limit, _expire, waiter) if limit is not None else None
    try:
        await waiter
    finally:
        if timer is not None:
            timer.cancel()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


def request_head(request: httpx.Request) -> tuple[bytes, int]:
    """The request line and headers, and how the body is framed by them: its ``Content-Length``,
    or :data:`CHUNKED`. Refuses (``httpx.LocalProtocolError``, as h11 does) what could split
    the request or make the server read its body differently from how it is sent."""

    def refuse(what: str) -> httpx.LocalProtocolError:
        return httpx.LocalProtocolError(what, request=request)

    try:
        method = request.method.encode("ascii")
    except UnicodeEncodeError:
        raise refuse(f"invalid request method {request.method!r}") from None
    target = request.url.raw_path
    if not _TOKEN.fullmatch(method) or not target or _BAD_TARGET.search(target):
        raise refuse(f"invalid request line: {method!r} {target!r}")
    lines = [method, b" ", target, b" HTTP/1.1\r\n"]
    host = False
    lengths: set[bytes] = set()
    codings: list[bytes] = []
    for name, raw_value in request.headers.raw:
        value = raw_value.strip(b" \t")
        if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
            raise refuse(f"invalid header: {name!r}")
        lower = name.lower()
        if lower == b"host":
            host = True
        elif lower == b"content-length":
            lengths.add(value)
        elif lower == b"transfer-encoding":
            codings.append(value.lower())
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"\r\n")
    if not host:
        raise refuse("the request has no Host header")
    if codings:
        if lengths or codings != [b"chunked"]:
            raise refuse("only 'Transfer-Encoding: chunked', without Content-Length, is sent")
        return b"".join(lines), CHUNKED
    if len(lengths) > 1 or (lengths and not _DIGITS.fullmatch(next(iter(lengths)))):
        raise refuse(f"invalid Content-Length: {sorted(lengths)!r}")
    return b"".join(lines), int(next(iter(lengths))) if lengths else 0
