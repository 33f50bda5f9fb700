"""The exchange: every HTTP request of the package goes through here.

A generation's stream, a whole (non-stream) answer, the model list and a Lua hook's
``http_get`` / ``http_post`` are all one :class:`HttpExchange` each (a stream's hooks share its
exchange). It owns what touches the network, in one place:

* **sending**, on the client :func:`~notebook_llm.wire.clients.open_client` picks: the
  engine's transport, its **recorder or replayer** (``GenerateOptions.make_transport``), a
  batch's pool, or the network; so a recording holds every request and a replay answers them;
* the **status**: a response >= 400 becomes the provider's ``LlmError``
  (:func:`~notebook_llm.wire.http_errors.error_from_http`, which reads ``Retry-After``), and
  every response is reported to :func:`~notebook_llm.wire.response_watch.notify_response`;
* **decoded-size caps** (:mod:`notebook_llm.wire.limits`): every body is read by
  :mod:`notebook_llm.wire.body`, counted on decoded bytes, nested ``Content-Encoding`` included;
  a redirect's body is never read (:meth:`HttpExchange._send` follows the redirects of a caller
  that asks for them, a hook's ``http_get``, hop by hop, instead of httpx);
* the **deadline and idle limit** of the request (:class:`~notebook_llm.wire.deadline.RequestClock`),
  on every wait, a hook's requests included;
* **request slots** (:mod:`notebook_llm.wire.slots`): a batch's limit on requests in flight;
* **framing**: SSE or NDJSON payloads (:mod:`notebook_llm.wire.payloads`), or a whole body;
* **transport failures**, mapped to codes by :func:`~notebook_llm.wire.transport_errors.transport_error`
  and nothing else.

What it does not own is the meaning of the bytes: a :class:`~notebook_llm.wire.codec.Codec`
builds the request and maps payloads to events. Nor does it retry: a retryable error before
the first event is raised, with its code and ``retry_after``, and the engine's one retry loop
(``engine/streaming.py``, ``attempts``) decides. The retry stays there because it must cover
every adapter, Python adapters that send nothing included, and because only the caller knows
whether output was shown already (``complete`` holds it back and may retry later).

Stop: a Stop cancels the task that waits here (``engine/streaming.py``, ``guarded``); every
wait is an ``await`` that the cancellation ends, and the response is closed on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

import httpx

from ..core.errors import LlmError
from ..core.protocol import Event, GenerateOptions
from ..core.timeouts import DEFAULT_TIMEOUTS, Timeouts
from .body import decoded, read_body, read_error_body, too_large
from .clients import MakeTransport, open_client
from .codec import Codec, WireRequest
from .deadline import RequestClock
from .http_errors import error_from_http
from .limits import DEFAULT_LIMITS, WireLimits
from .payloads import StreamFraming
from .response_watch import notify_response
from .slots import request_slot, yield_slot
from .transport_errors import transport_error

__all__ = ["DEFAULT_TIMEOUT", "Answer", "HttpExchange", "drain"]

#: The default HTTP timeouts of one socket operation. No read timeout: a reasoning model may
#: send nothing for minutes before its first token, and a stream's wait for its next event and
#: the request as a whole have their own limits (``GenerateOptions.timeouts``,
#: :mod:`notebook_llm.wire.deadline`), which a trickle of bytes does not reset.
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=10.0)


@dataclass(frozen=True, slots=True)
class Answer:
    """A whole response read by :meth:`HttpExchange.fetch`: its status, headers and decoded body."""

    status: int
    headers: httpx.Headers
    body: bytes
    #: The body's charset (``Content-Type``), else UTF-8.
    encoding: str

    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        try:
            return self.body.decode(self.encoding, "replace")
        except LookupError:  # a charset Python does not know
            return self.body.decode("utf-8", "replace")


@dataclass(slots=True)
class _Answer:
    """Where one generation's answer stands, for the exchange's steps."""

    #: The size of the request body: a large one is named when the server fails after its 200.
    request_chars: int
    #: The server answered with a success status (its headers arrived).
    accepted: bool = False
    #: Events were handed on: a failure now ends the answer instead of being raised.
    started: bool = False
    #: A whole (non-stream) body, mapped once the request's slot is free.
    whole: bytes | None = None
    #: The answer's last events, handed on once the request's slot is free.
    last: list[Event] = field(default_factory=list)


class HttpExchange:
    """The requests of one generation (or one side request), see the module docstring."""

    __slots__ = ("_clock", "_make", "_transport", "limits", "provider", "timeout", "timeouts")

    def __init__(
        self,
        provider: str,
        *,
        timeouts: Timeouts | None = None,
        limits: WireLimits = DEFAULT_LIMITS,
        transport: httpx.AsyncBaseTransport | None = None,
        make_transport: MakeTransport | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        """``provider`` names the server in errors; ``timeouts`` are the request's limits;
        ``transport`` (the adapter's own) or ``make_transport`` (the engine's, its recorder or
        replayer) carry it, else the network; ``timeout`` bounds one socket operation."""
        self.provider = provider
        self.timeouts = timeouts or DEFAULT_TIMEOUTS
        self.limits = limits
        self.timeout = timeout
        self._transport = transport
        self._make = make_transport
        self._clock: RequestClock | None = None

    @classmethod
    def for_options(
        cls,
        options: GenerateOptions,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        limits: WireLimits = DEFAULT_LIMITS,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    ) -> HttpExchange:
        """The exchange of one generation: the engine's transport, tap and time limits."""
        return cls(
            options.provider,
            timeouts=options.timeouts,
            limits=limits,
            transport=transport,
            make_transport=options.make_transport,
            timeout=timeout,
        )

    def _client(self) -> tuple[httpx.AsyncClient, bool]:
        return open_client(self._transport, self._make, self.timeout)

    def clock(self, streaming: bool = False) -> RequestClock:
        """The request's clock, started at the first call (a stream's hooks share it)."""
        if self._clock is None:
            self._clock = RequestClock(self.timeouts, self.provider, streaming)
        return self._clock

    # ------------------------------------------------------------------ a generation

    async def stream(self, codec: Codec) -> AsyncGenerator[list[Event], None]:
        """One generation: ``codec``'s request sent, its answer's events, one non-empty list
        per network read (the last ones after the request's slot is free)."""
        clock = self.clock(streaming=True)  # its deadline covers the hooks' own requests
        request = await codec.request()
        if not request.streaming:
            clock.whole_body()
        answer = _Answer(len(request.body or b""))
        client, owned = self._client()
        async with contextlib.AsyncExitStack() as stack:
            if owned:
                await stack.enter_async_context(client)
            tail: list[Event] | None = None  # the end of an answer a failure cut
            try:
                built = client.build_request(
                    request.method,
                    request.url,
                    content=request.body,
                    headers=dict(request.headers),
                    timeout=self.timeout,
                )
                # Built before it waits for a batch's slot (wire.slots), sent when it has one.
                async with request_slot():
                    response = await clock.run(client.send(built, stream=True))
                    async with contextlib.aclosing(response):
                        await self._refuse_failed(response, clock, codec)
                        answer.accepted = True
                        if request.streaming:
                            reads = self._read_stream(response, request, clock, codec, answer)
                            async with contextlib.aclosing(reads):
                                async for events in reads:
                                    yield events
                        else:
                            answer.whole = await clock.run(
                                read_body(
                                    response,
                                    self.limits.max_body_bytes,
                                    "the response body",
                                    "max_body_bytes",
                                )
                            )
            except BaseException as exc:
                tail = self._cut(exc, codec, answer)
            if tail is not None:  # a failure after output: keep what arrived
                yield tail
                return
        # The exchange is over and its slot free: a batch's next request, ready and waiting for
        # it, goes out before the consumer handles these last events (wire.slots).
        await yield_slot()
        last = answer.last
        if answer.whole is not None:
            last = await codec.whole(answer.whole)
        if last:
            yield last
        codec.raise_pending()

    async def _read_stream(
        self,
        response: httpx.Response,
        request: WireRequest,
        clock: RequestClock,
        codec: Codec,
        answer: _Answer,
    ) -> AsyncGenerator[list[Event], None]:
        """A streamed body's events, one list per network read; the answer's last events are
        left in ``answer.last`` (handed on once the request's slot is free)."""
        ctype = response.headers.get("content-type", "")
        framing = StreamFraming(
            "ndjson" if "ndjson" in ctype else request.framing, self.limits.max_event_bytes
        )
        incoming = clock.paced(decoded(response))
        feed, heard = codec.feed, clock.heard
        async for piece in incoming:
            payloads = framing.feed(piece)
            if not payloads:  # comments, a part of an event
                continue
            heard()  # an event: the idle limit starts again
            events = feed(payloads)
            answer.started = answer.started or bool(events)
            if codec.finished:  # [DONE] / done: the answer is complete. Read the rest of the
                await drain(incoming)  # body: the consumer stops at finish.
                answer.last = events
                return
            if events:
                yield events
            codec.raise_pending()  # after what came before it was yielded
        rest = framing.flush()
        last = feed(rest) if rest else []
        if not codec.finished:
            framing.check_complete(answer.request_chars)
        last += codec.end()
        answer.started = answer.started or bool(last)
        answer.last = last

    def _cut(self, exc: BaseException, codec: Codec, answer: _Answer) -> list[Event]:
        """What ends an answer that ``exc`` cut: after some output, the codec's last events
        (the error in a finish, what arrived kept); before any, ``exc`` raised as its
        ``LlmError``, so the engine may retry it. Anything but a transport failure or an
        ``LlmError`` (cancellation, a bug) is raised as it is."""
        err = transport_error(
            exc, self.provider, accepted=answer.accepted, request_chars=answer.request_chars
        )
        if err is None:
            raise exc
        tail = codec.fail(err) if answer.started else None
        if tail is not None:
            return tail
        if err is exc:
            raise exc
        raise err from None

    async def _refuse_failed(
        self, response: httpx.Response, clock: RequestClock, codec: Codec
    ) -> None:
        """Report the response; raise the provider's error for a status >= 400."""
        notify_response(response.status_code, response.headers)
        if response.status_code < 400:
            return
        raw = await clock.run(read_error_body(response, self.limits.max_error_body_bytes))
        error = error_from_http(response.status_code, response.headers, raw, provider=self.provider)
        raise codec.refine(error, raw)

    # ------------------------------------------------------------------ a side request

    async def fetch(
        self,
        request: WireRequest,
        *,
        what: str,
        refused: Literal["raise", "answer"] = "raise",
        doing: str | None = None,
        follow_redirects: bool = False,
        socket_timeout: httpx.Timeout | None = None,
    ) -> Answer:
        """One whole response (the model list, a hook's ``http_get``), under the same caps,
        clock, recording and error mapping as a generation.

        ``what`` names the body in a cap's error ("the model list"). ``refused="raise"``: a
        status >= 400 raises the provider's ``LlmError``; ``"answer"``: it is returned like any
        other (a script reads its own errors). ``doing`` words the request in transport errors
        ("asking local for its models"); ``socket_timeout`` bounds one socket operation. Raises
        ``LlmError`` only.
        """
        built = httpx.Request(
            request.method, request.url, content=request.body, headers=dict(request.headers)
        )
        return await self.fetch_built(
            built,
            what=what,
            refused=refused,
            doing=doing,
            follow_redirects=follow_redirects,
            socket_timeout=socket_timeout,
        )

    async def fetch_built(
        self,
        request: httpx.Request,
        *,
        what: str,
        refused: Literal["raise", "answer"] = "raise",
        doing: str | None = None,
        follow_redirects: bool = False,
        socket_timeout: httpx.Timeout | None = None,
    ) -> Answer:
        """:meth:`fetch` of a request built with ``httpx.Request`` (a multipart upload, a body
        streamed from a file: what a :class:`WireRequest`'s bytes cannot carry)."""
        async with self._opened(
            request, refused, doing, follow_redirects, socket_timeout
        ) as response:
            clock = self.clock()
            body = await clock.run(
                read_body(response, self.limits.max_body_bytes, what, "max_body_bytes")
            )
            return Answer(
                response.status_code, response.headers, body, response.charset_encoding or "utf-8"
            )

    async def lines(
        self,
        request: httpx.Request,
        *,
        what: str,
        doing: str | None = None,
        socket_timeout: httpx.Timeout | None = None,
    ) -> AsyncGenerator[bytes, None]:
        """The non-empty lines of a JSON-lines download, as they arrive: a body of any size is
        never held whole, each line is capped at ``max_body_bytes`` (the cap of one answer
        body: a line holds one), and each wait for more at the idle limit (the exchange's
        ``timeouts.deadline`` may be ``None`` for a download that takes long)."""
        cap = self.limits.max_body_bytes
        async with self._opened(request, "raise", doing, False, socket_timeout) as response:
            clock = self.clock(streaming=True)
            pending = bytearray()
            async for piece in clock.paced(decoded(response)):
                clock.heard()
                pending += piece
                start = 0
                while (end := pending.find(b"\n", start)) >= 0:
                    if end - start > cap:
                        raise too_large(f"a line of {what}", cap, "max_body_bytes")
                    line = bytes(pending[start:end]).strip()
                    start = end + 1
                    if line:
                        yield line
                del pending[:start]
                if len(pending) > cap:
                    raise too_large(f"a line of {what}", cap, "max_body_bytes")
            last = bytes(pending).strip()
            if last:
                yield last

    @contextlib.asynccontextmanager
    async def _opened(
        self,
        request: httpx.Request,
        refused: Literal["raise", "answer"],
        doing: str | None,
        follow_redirects: bool,
        socket_timeout: httpx.Timeout | None,
    ) -> AsyncIterator[httpx.Response]:
        """``request`` sent on this exchange's client (its redirects followed with
        ``follow_redirects``, :meth:`_send`), its response reported and, with
        ``refused="raise"``, a status >= 400 raised as the provider's error; every failure
        inside the block (the caller's reading included) mapped to its ``LlmError``."""
        clock = self.clock()
        request.extensions.setdefault("timeout", (socket_timeout or self.timeout).as_dict())
        client, owned = self._client()
        accepted = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                if owned:
                    await stack.enter_async_context(client)
                for name, value in client.headers.items():  # as client.build_request merges them
                    request.headers.setdefault(name, value)
                response = await self._send(client, request, clock, follow_redirects)
                async with contextlib.aclosing(response):
                    status = response.status_code
                    if status >= 400 and refused == "raise":
                        raw = await clock.run(
                            read_error_body(response, self.limits.max_error_body_bytes)
                        )
                        raise error_from_http(status, response.headers, raw, provider=self.provider)
                    accepted = status < 400
                    yield response
        except BaseException as exc:
            err = transport_error(exc, self.provider, accepted=accepted, doing=doing)
            if err is None or err is exc:
                raise
            raise err from None

    async def _send(
        self,
        client: httpx.AsyncClient,
        request: httpx.Request,
        clock: RequestClock,
        follow_redirects: bool,
    ) -> httpx.Response:
        """``request`` sent, each response reported; with ``follow_redirects``, each redirect
        closed with its body unread and the request httpx built for it sent, to the response
        that is not a redirect.

        Why not httpx's ``follow_redirects=True``: it reads each redirect's body whole before it
        follows (``response.aread()``), through its own decoders, which have no output limit,
        so a few hundred bytes of ``Content-Encoding: gzip, gzip`` on a 302 become hundreds of
        MiB, past every cap of :mod:`notebook_llm.wire.limits`. A redirect's body is never
        wanted. Sent without following, a redirect comes back with ``next_request``, which
        httpx builds by its own rules (after a 303 or a 302, or a 301 to a POST, a GET without
        a body; after a 307/308 the same request again; ``Authorization`` dropped for another
        origin; a target other than http(s) refused with ``UnsupportedProtocol``), and the hop
        limit is the client's ``max_redirects`` with httpx's error for more
        (``TooManyRedirects``). Each hop is one request on the client's transport, so a
        recorder records it (a redirect's body empty, as it was not read) and a replayer
        answers it; each is awaited within the request's clock, and a Stop cancels the wait.
        """
        hops = 0
        while True:
            response = await clock.run(client.send(request, stream=True, follow_redirects=False))
            notify_response(response.status_code, response.headers)
            following = response.next_request
            if not follow_redirects or not response.has_redirect_location or following is None:
                return response
            await response.aclose()  # unread (its connection is dropped if the body was not empty)
            hops += 1
            if hops > client.max_redirects:
                raise httpx.TooManyRedirects(
                    "Exceeded maximum allowed redirects.", request=following
                )
            request = following


async def drain(body: AsyncIterator[bytes], grace: float = 0.5) -> None:
    """Read what follows the end marker (normally just the end of the body), so the connection
    can be reused and a recording is complete; a server that keeps the stream open after it
    does not hold the caller longer than ``grace`` seconds."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError, LlmError):
        async with asyncio.timeout(grace):
            async for _ in body:
                pass
