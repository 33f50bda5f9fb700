"""Python side of the Lua sandbox built-ins: HTTP bridge, logging, hashing and the CPU budget.

Every callable here is handed to the trusted setup chunk (``sandbox.lua``), which keeps it in an
upvalue and wraps it in a Lua function that checks and converts its arguments first. So these
callables only ever receive ``str`` arguments (UTF-8 checked, binary data as hex) and only return
``str``/``bool``/``None``; they never raise (an exception crossing into Lua would become a Lua
error object carrying a Python object, i.e. a way out of the sandbox).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ..secrets import redact

HTTP_TIMEOUT_SECONDS = 30.0

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
    """How ``http_get``/``http_post`` reach the network. Both return ``(status, body_text)``."""

    def get(self, url: str) -> tuple[int, str]: ...

    def post(self, url: str, body: str) -> tuple[int, str]: ...


class HttpxBridge:
    """Default bridge: a shared synchronous ``httpx.Client`` with a 30 s timeout."""

    def __init__(self, timeout: float = HTTP_TIMEOUT_SECONDS) -> None:
        self._timeout = timeout
        self._client: Any = None
        self._lock = threading.Lock()

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(timeout=self._timeout, follow_redirects=True)
            return self._client

    def get(self, url: str) -> tuple[int, str]:
        resp = self._get_client().get(url)
        return resp.status_code, resp.text

    def post(self, url: str, body: str) -> tuple[int, str]:
        resp = self._get_client().post(
            url, content=body.encode("utf-8"), headers={"Content-Type": "application/json"}
        )
        return resp.status_code, resp.text

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


class DisabledHttp:
    """A bridge that refuses every request (``http_get`` returns an error envelope)."""

    def get(self, url: str) -> tuple[int, str]:
        raise RuntimeError("HTTP is disabled for this adapter")

    def post(self, url: str, body: str) -> tuple[int, str]:
        raise RuntimeError("HTTP is disabled for this adapter")


_default_bridge: HttpxBridge | None = None
_default_lock = threading.Lock()


def default_http() -> HttpxBridge:
    """The process-wide default bridge (created on first use)."""
    global _default_bridge
    with _default_lock:
        if _default_bridge is None:
            _default_bridge = HttpxBridge()
        return _default_bridge


class Budget:
    """Per-call CPU budget measured in CPU time of the calling thread.

    ``time.thread_time`` (not ``os.clock``/process time): streams run concurrently in several
    threads and each call must only be charged for its own thread's work; blocking in a socket
    costs no CPU time, and the CPU time spent inside the HTTP bridge is subtracted as well.
    """

    __slots__ = (
        "excluded",
        "interrupted",
        "limit",
        "over",
        "over_wall",
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

    def check(self) -> bool:
        """Called by the count hook: True once this call's budget is used up or it was stopped
        (sticky). Never raises: a kernel interrupt that lands here (SIGINT's handler runs at the
        next Python instruction of the main thread, i.e. here while Lua runs) is recorded; an
        exception crossing into Lua could be swallowed by the script's ``pcall``."""
        try:
            if not self.over:
                if time.thread_time() - self.start - self.excluded > self.limit:
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
        self.set_name(name)

    def set_name(self, name: str) -> None:
        self.name = name
        self.logger = logging.getLogger(f"notebook_llm.adapter.{name}")

    def callables(self) -> dict[str, Callable[..., Any]]:
        return {
            "check": self.budget.check,
            "log": self.log,
            "http_get": self.http_get,
            "http_post": self.http_post,
            "hmac_sha256_hex": hmac_sha256_hex,
            "sha256_hex": sha256_hex,
            "base64_encode": base64_encode,
        }

    def log(self, level: str, msg: str) -> None:
        t0 = time.thread_time()
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
        finally:
            self.budget.excluded += time.thread_time() - t0

    def _http(self, method: str, url: str, body: str | None) -> str:
        if self.budget.wall_exceeded():
            return json.dumps(
                {
                    "url": url,
                    "error": f"the adapter call ran out of its {self.budget.wall_limit:g} s",
                }
            )
        t0 = time.thread_time()
        try:
            bridge = self.http if self.http is not None else default_http()
            if body is None:
                status, text = bridge.get(url)
            else:
                status, text = bridge.post(url, body)
            envelope: dict[str, Any] = {"url": url, "status": int(status), "body": str(text)}
        except Exception as exc:
            envelope = {"url": url, "error": redact(str(exc)) or type(exc).__name__}
        except KeyboardInterrupt:
            self.budget.interrupt()
            envelope = {"url": url, "error": "interrupted"}
        finally:
            self.budget.excluded += time.thread_time() - t0
        try:
            return json.dumps(envelope, ensure_ascii=False)
        except Exception as exc:  # pragma: no cover - str/int only
            return json.dumps({"url": url, "error": f"{method}: {exc}"})

    def http_get(self, url: str) -> str:
        return self._http("GET", url, None)

    def http_post(self, url: str, body: str) -> str:
        return self._http("POST", url, body)


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
