"""Python side of the Lua sandbox built-ins: HTTP, logging, hashing and the CPU budget.

Every callable here is handed to the trusted setup chunk (``sandbox.lua``), which keeps it in an
upvalue and wraps it in a Lua function that checks and converts its arguments first. So these
callables only ever receive ``str`` arguments (UTF-8 checked, binary data as hex) and only return
``str``/``bool``/``None``; they never raise (an exception crossing into Lua would become a Lua
error object carrying a Python object, i.e. a way out of the sandbox).

``http_get`` / ``http_post`` are not callables: the hook yields the request to the sandbox's
caller, which answers it (:class:`TransportHttp` through the stream's exchange, awaited; or an
:class:`HttpBridge` in a synchronous call) and resumes the hook with the envelope.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import httpx

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import redact
from ...wire.codec import WireRequest
from ...wire.exchange import HttpExchange
from ...wire.transport_errors import transport_error

#: The contract's timeout of one ``http_get`` / ``http_post`` (the hook's wall budget bounds it too).
HTTP_TIMEOUT_SECONDS = 30.0
HTTP_TIMEOUT = httpx.Timeout(HTTP_TIMEOUT_SECONDS)

LogCallback = Callable[[str, str], None]

_LEVELS = {
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


@runtime_checkable
class HttpBridge(Protocol):
    """A synchronous stand-in for the network, for :meth:`LuaSandbox.call` (tests, tools that
    run a hook outside the engine). Both return ``(status, body_text)``."""

    def get(self, url: str) -> tuple[int, str]: ...

    def post(self, url: str, body: str) -> tuple[int, str]: ...


def envelope_error(url: str, message: str, code: str) -> dict[str, Any]:
    """The contract's error answer to ``http_get`` / ``http_post``: ``url`` and ``error`` (the
    message, for people) as the kernel contract has them, plus ``code``, the stable
    :class:`~notebook_llm.core.errors.ErrorCode` a script decides on (a timeout, a cap and a
    replay miss differ there, not only in their English)."""
    return {"url": url, "error": message, "code": str(code)}


def failure_code(exc: BaseException) -> str:
    """The ``code`` of the envelope for a hook's request that raised ``exc``.

    An ``LlmError`` (the exchange's: TIMEOUT, RESPONSE_TOO_LARGE, REPLAY_MISS, TRANSPORT, ...)
    keeps its own. An httpx failure gets the code the exchange gives it
    (:func:`~notebook_llm.wire.transport_errors.transport_error`, the one mapping). A URL
    httpx cannot make a request of (``httpx.InvalidURL``, a host IDNA cannot encode: a
    ``ValueError``) is INVALID_REQUEST: the same request never succeeds. An ``OSError`` (a
    socket error a transport or bridge did not wrap) is a connection fault, TRANSPORT.
    Anything else is UNKNOWN.
    """
    if isinstance(exc, LlmError):
        return exc.code
    mapped = transport_error(exc, "http_get")
    if mapped is not None:
        return mapped.code
    if isinstance(exc, httpx.InvalidURL | ValueError):
        return ErrorCode.INVALID_REQUEST
    if isinstance(exc, OSError):
        return ErrorCode.TRANSPORT
    return ErrorCode.UNKNOWN


def refused_url(url: str) -> str | None:
    """Why ``url`` cannot be requested by a hook, or ``None``: it must be an absolute
    ``http://`` or ``https://`` URL with a host.

    httpx refuses the others only when the request is sent (``UnsupportedProtocol``), and the
    exchange maps that, like any failure to reach a server, to TRANSPORT (for a provider's
    ``base_url``, whose hint is "check the network or the base URL"). For a script's own
    argument the failure is the URL's, and no retry changes it: INVALID_REQUEST, decided
    before anything is sent (so a recording, a replay and the network answer it alike).
    """
    try:
        parsed = httpx.URL(url)
    except Exception as exc:  # httpx.InvalidURL: a control character, a bad port, ...
        return f"{type(exc).__name__}: {exc}"
    if parsed.scheme not in ("http", "https"):
        return "only http:// and https:// URLs can be requested"
    if not parsed.host:
        return "the URL has no host"
    return None


class TransportHttp:
    """``http_get`` / ``http_post`` through an exchange, for :meth:`LuaSandbox.acall`.

    The exchange is the stream's own (:mod:`notebook_llm.wire.exchange`): the engine's
    transport, its recorder or its replayer, the request's deadline, and the body read within
    ``WireLimits.max_body_bytes`` decoded bytes, nested ``Content-Encoding`` included, like
    every other body. Without one, a default exchange on the network. Never raises: every
    failure is the contract's ``{"url", "error"}`` envelope, with its ``code``
    (:func:`envelope_error`, :func:`failure_code`).
    """

    def __init__(self, exchange: HttpExchange | None = None) -> None:
        self.exchange = exchange if exchange is not None else HttpExchange("http_get")

    async def request(self, method: str, url: str, body: str | None) -> dict[str, Any]:
        refused = refused_url(url)
        if refused is not None:  # file:///etc/passwd, ftp://..., a relative URL, http://
            return envelope_error(
                url, redact(f"fetching {url} failed: {refused}"), ErrorCode.INVALID_REQUEST
            )
        call = WireRequest(
            method,
            url,
            {"content-type": "application/json"} if body is not None else {},
            None if body is None else body.encode("utf-8"),
        )
        try:
            answer = await self.exchange.fetch(
                call,
                what=f"the answer to {'http_get' if body is None else 'http_post'}",
                refused="answer",
                doing=f"fetching {url}",
                follow_redirects=True,
                socket_timeout=HTTP_TIMEOUT,
            )
        except LlmError as exc:  # a cap, a timeout, a replay without a recording of it
            return envelope_error(url, redact(exc.message), exc.code)
        except Exception as exc:  # a URL httpx cannot encode (an over-long host label), ...
            return envelope_error(url, redact(str(exc)) or type(exc).__name__, failure_code(exc))
        return {"url": url, "status": answer.status, "body": answer.text()}


class Budget:
    """Per-call CPU budget measured in CPU time of the calling thread.

    ``time.thread_time`` (not ``os.clock``/process time): streams run concurrently in several
    threads and each call must only be charged for its own thread's work; blocking in a socket
    costs no CPU time, and the CPU time spent inside the HTTP bridge is subtracted as well.

    A call that maps several stream payloads (``call_each``) charges each payload to a budget
    of its own: the Lua hook hands :meth:`check` the number of the payload it is at, and a new
    number starts the budget (CPU and wall clock) again. So the verdict on a payload does not
    depend on how many others arrived in the same network read. The time between a payload's
    start and the hook's first check inside it (at most one check interval, ~10,000
    instructions) is charged to no one.
    """

    __slots__ = (
        "excluded",
        "interrupted",
        "limit",
        "over",
        "over_wall",
        "payload",
        "signalled",
        "start",
        "stop",
        "stopped",
        "wall_limit",
        "wall_start",
    )

    def __init__(self, limit: float, wall_limit: float = 30.0) -> None:
        self.limit = limit
        #: Wall-clock seconds one call may take, HTTP calls from the script included: the CPU
        #: budget alone would let a script that keeps calling http_get hold its stream forever.
        self.wall_limit = wall_limit
        self.start = 0.0
        self.wall_start = 0.0
        self.excluded = 0.0
        #: The payload being charged (``call_each``'s item number; 0 for a plain call).
        self.payload = 0
        self.over = False
        self.over_wall = False
        #: Asked at every check: True stops the call (the stream's ``StopSignal.is_set``).
        self.stop: Callable[[], bool] | None = None
        #: The call was stopped by ``stop`` / by a kernel interrupt (KeyboardInterrupt) that
        #: arrived while Lua ran in this thread; the sandbox raises ABORTED / re-raises it.
        self.stopped = False
        self.interrupted = False
        self.signalled = False

    def begin(self) -> None:
        self.start = time.thread_time()
        self.wall_start = time.monotonic()
        self.excluded = 0.0
        self.payload = 0
        self.over = False
        self.over_wall = False
        self.stopped = False
        self.interrupted = False
        self.signalled = False

    def interrupt(self) -> None:
        """A KeyboardInterrupt arrived inside a callback: end the call, re-raise it after."""
        self.interrupted = self.stopped = self.over = True

    def wall_exceeded(self) -> bool:
        if not self.over_wall and time.monotonic() - self.wall_start > self.wall_limit:
            self.over_wall = self.over = True
        return self.over_wall

    def check(self, payload: int = 0) -> bool:
        """Called by the count hook: True once this call's (or this payload's) budget is used
        up or it was stopped (sticky). Never raises: a kernel interrupt that lands here
        (SIGINT's handler runs at the next Python instruction of the main thread, i.e. here
        while Lua runs) is recorded; an exception crossing into Lua could be swallowed by the
        script's ``pcall``."""
        try:
            if not self.over:
                now = time.thread_time()
                if payload != self.payload:  # the next payload of call_each: its own budget
                    self.payload = payload
                    self.start = now
                    self.excluded = 0.0
                    self.wall_start = time.monotonic()
                if now - self.start - self.excluded > self.limit:
                    self.over = True
                elif not self.wall_exceeded() and self.stop is not None and self.stop():
                    self.stopped = self.over = True
            return self.over
        except KeyboardInterrupt:
            self.interrupt()
            return True

    def used(self) -> float:
        return time.thread_time() - self.start - self.excluded


class Host:
    """The Python callables given to one Lua state. Holds no reference to the Lua runtime."""

    def __init__(
        self, name: str, budget: Budget, http: HttpBridge | None, log: LogCallback | None
    ) -> None:
        self.budget = budget
        self.http = http
        self.log_callback = log
        #: Bytes the Lua state may still allocate (set by the sandbox): a result that does not
        #: fit is not handed back (the Lua side then raises "not enough memory").
        self.room: Callable[[], int] = lambda: 1 << 62
        self.set_name(name)

    def set_name(self, name: str) -> None:
        self.name = name
        self.logger = logging.getLogger(f"notebook_llm.adapter.{name}")

    def callables(self) -> dict[str, Callable[..., Any]]:
        return {
            "check": self.budget.check,
            "log": self.log,
            "hmac_sha256_hex": self.hmac_sha256_hex,
            "sha256_hex": self.sha256_hex,
            "base64_encode": self.base64_encode,
        }

    def fits(self, text: str) -> str | None:
        """``text`` if it fits in the room left in the Lua state, else ``None``."""
        return text if len(text) + 4096 <= self.room() else None

    # The built-ins that return a new string: lupa pushes it inside the callback, where a failed
    # allocation would jump over Python's frames, so only a result that fits is handed back.

    def base64_encode(self, data_hex: str) -> str | None:
        return self.fits(base64_encode(data_hex))

    def sha256_hex(self, data_hex: str) -> str | None:
        return self.fits(sha256_hex(data_hex))

    def hmac_sha256_hex(self, key_hex: str, msg_hex: str) -> str | None:
        return self.fits(hmac_sha256_hex(key_hex, msg_hex))

    def log(self, level: str, msg: str) -> None:
        # Its time is the script's (a loop of log calls must meet the budget); the Lua side
        # cuts a message at 16 KiB.
        try:
            # every field a sink sees is redacted: the level string is the script's too
            level, msg = redact(str(level)), redact(str(msg))
            self.logger.log(_LEVELS.get(level.lower(), logging.INFO), "%s", msg)
            if self.log_callback is not None:
                self.log_callback(level, msg)
        except Exception:  # a failing log sink must not break (or escape into) the script
            pass
        except KeyboardInterrupt:
            self.budget.interrupt()

    def sync_answer(self, method: str, url: str, body: str | None) -> dict[str, Any]:
        """The answer to a hook's request in a synchronous call: from the ``HttpBridge`` given
        to the sandbox, else an error (the network is reached only through the engine)."""
        if self.budget.wall_exceeded():
            return envelope_error(
                url,
                f"the adapter call ran out of its {self.budget.wall_limit:g} s",
                ErrorCode.ADAPTER_TIMEOUT,
            )
        if self.http is None:
            # TRANSPORT: nothing can carry the request, which to the script is a network it
            # cannot reach (a script that falls back when offline does the same here). Not
            # ADAPTER_ERROR, as the script did nothing wrong, nor INVALID_REQUEST, as the same
            # request succeeds when the engine runs the hook.
            return envelope_error(
                url,
                f"{method} needs the engine: this hook was called without an HTTP transport",
                ErrorCode.TRANSPORT,
            )
        t0 = time.thread_time()
        try:
            if body is None:
                status, text = self.http.get(url)
            else:
                status, text = self.http.post(url, body)
            return {"url": url, "status": int(status), "body": str(text)}
        except Exception as exc:
            return envelope_error(url, redact(str(exc)) or type(exc).__name__, failure_code(exc))
        except KeyboardInterrupt:
            self.budget.interrupt()
            return envelope_error(url, "interrupted", ErrorCode.ABORTED)
        finally:
            self.budget.excluded += time.thread_time() - t0


# Hash helpers: the Lua wrappers pass every argument hex-encoded so binary strings survive.


def hmac_sha256_hex(key_hex: str, msg_hex: str) -> str:
    try:
        return hmac.new(bytes.fromhex(key_hex), bytes.fromhex(msg_hex), hashlib.sha256).hexdigest()
    except Exception:  # pragma: no cover - the Lua side always sends valid hex
        return ""


def sha256_hex(data_hex: str) -> str:
    try:
        return hashlib.sha256(bytes.fromhex(data_hex)).hexdigest()
    except Exception:  # pragma: no cover
        return ""


def base64_encode(data_hex: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(data_hex)).decode("ascii")
    except Exception:  # pragma: no cover
        return ""
