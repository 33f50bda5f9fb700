"""One MCP server in use: its process (stdio) or its HTTP session, through the official SDK.

Which loop owns a session. The SDK is built on anyio: a session lives in task groups and
cancel scopes that must be entered and left by the same task. So each server has one *runner*
task on the package's background loop (:mod:`notebook_llm.core.background_loop`, one loop in a
daemon thread, alive as long as the kernel): it enters ``mcp.Client``, lists the tools, then
waits until it is asked to stop and leaves the client in the same task. Calls come from any
task of that loop (a cell's tool loop runs on the kernel's loop and reaches it through
:meth:`notebook_llm.api.mcp.servers.McpServers.call`). A session therefore outlives the cell
that started it, and a call cancelled from the kernel's loop (Stop, a timeout) is cancelled on
the background loop, where the SDK sends the protocol's ``notifications/cancelled``.

What goes wrong, and the one line it becomes (:class:`McpFailure`, always with the server's name
and the last lines it wrote to stderr):

* it cannot start (no such command, exits at once, no answer within ``startup_timeout``);
* it closes the connection during a call (a crash): the call ends at once, the server is
  stopped and starts again on the next use;
* it writes a line to stdout that is not an MCP message during a call (a ``print``): the
  protocol's stdout is for messages only, so the call ends and the server is restarted on the
  next use (such a line while nothing waits, a banner, is only counted);
* a call that takes longer than ``tool_timeout`` is cancelled.

A stdio server's environment is the SDK's short list (``HOME``, ``LOGNAME``, ``PATH``,
``SHELL``, ``TERM``, ``USER``) plus the ``env`` of its configuration: never the kernel's whole
environment. Its stderr goes to a pipe whose last few KB are kept for the messages above.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import logging
import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...core.errors import ErrorCode, LlmError
from ...core.json_schema_check import check, load_jsonschema
from ...core.redaction import RedactingFilter, redact
from .config import ServerConfig, resolve_values
from .text import one_line, printable

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["McpFailure", "ServerConnection", "ToolInfo", "require_sdk", "schema_problem"]

log = logging.getLogger("notebook_llm.api.tool_calling")

#: The most tools taken from one server, and the pages of its listing read.
MAX_TOOLS = 500
MAX_LIST_PAGES = 20
#: A tool whose input schema is bigger than this (as JSON), or nested deeper, is not offered.
MAX_SCHEMA_CHARS = 100_000
MAX_SCHEMA_DEPTH = 64
#: How long a stop may take: the SDK closes stdin, waits 2 s, then SIGTERM, 2 s, SIGKILL.
STOP_WAIT = 15.0


#: The SDK's loggers that may print what a server sent (a line it could not parse, an error
#: body): redacted like the package's own, and the parse failure's traceback dropped (the
#: call's one line says it).
_SDK_LOGGERS = (
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.client.session",
    "mcp.client.client",
    "mcp.shared.jsonrpc_dispatcher",
)


class _UnparsedLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to parse JSONRPC message")


_quieted = False


def _quiet_sdk_logs() -> None:
    global _quieted
    if not _quieted:
        _quieted = True
        for name in _SDK_LOGGERS:
            logging.getLogger(name).addFilter(RedactingFilter())
        logging.getLogger("mcp.client.stdio").addFilter(_UnparsedLine())


def _warm_validator() -> None:
    """Import ``jsonschema`` in a thread while the server starts: the SDK checks results
    against a tool's output schema with it, and its first import (with the format checkers a
    Jupyter install brings) can take seconds that would otherwise stall the first call."""
    if "jsonschema" not in sys.modules:
        threading.Thread(
            target=_import_validator, name="notebook_llm-mcp-warmup", daemon=True
        ).start()


def _import_validator() -> None:
    with contextlib.suppress(ImportError):
        load_jsonschema()  # with the slow optional format checkers deferred


class McpFailure(Exception):
    """A server failed (see the module docstring); ``str()`` is the one line to show."""


ToolInfo = dict[str, Any]
"""A tool as listed, in the protocol's JSON form: ``name``, ``description``, ``inputSchema``."""


def require_sdk() -> None:
    """``LlmError(INVALID_OPTIONS)`` with the install line when the ``mcp`` extra is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise LlmError(
            "MCP servers need the official MCP SDK, which is not installed ("
            f"{exc.name or exc}): pip install 'notebook-llm[mcp]'",
            ErrorCode.INVALID_OPTIONS,
        ) from None


class StderrTail:
    """What a stdio server writes to stderr: the last ``limit`` bytes, kept for error lines,
    read by a daemon thread from a pipe (each line is also logged at DEBUG, redacted)."""

    def __init__(self, name: str, limit: int = 4096) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._name = name
        self._limit = limit
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self.ended = threading.Event()
        threading.Thread(
            target=self._read, args=(read_fd,), name=f"notebook_llm-mcp-{name}-stderr", daemon=True
        ).start()

    def _read(self, fd: int) -> None:
        # Whole lines are logged (a key cut by a read's boundary would be redacted in neither
        # half); a line longer than the limit is logged in parts of the limit.
        partial = b""
        try:
            while chunk := os.read(fd, 4096):
                with self._lock:
                    self._buffer += chunk
                    del self._buffer[: max(0, len(self._buffer) - self._limit)]
                partial += chunk
                *lines, partial = partial.split(b"\n")
                if len(partial) > self._limit:
                    lines.append(partial)
                    partial = b""
                self._log(lines)
            self._log([partial])
        except OSError:
            pass
        finally:
            os.close(fd)
            self.ended.set()

    def _log(self, lines: list[bytes]) -> None:
        if log.isEnabledFor(logging.DEBUG):
            for line in lines:
                text = line.decode("utf-8", "replace").strip()
                if text:
                    log.debug("mcp server %s: %s", self._name, redact(text))

    def close_writer(self) -> None:
        """Close our copy of the pipe's write end (the server holds its own)."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def tail(self, lines: int = 3, chars: int = 400) -> str:
        """The last few lines, redacted, on one line (``""`` when there are none)."""
        with self._lock:
            text = bytes(self._buffer).decode("utf-8", "replace")
        kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return one_line(redact(" | ".join(kept)), chars)


def _version() -> str:
    try:
        return importlib.metadata.version("notebook-llm")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def _describe_error(exc: BaseException) -> str:
    exc = _leaf(exc)
    if isinstance(exc, FileNotFoundError):
        return f"the command was not found ({exc.filename or exc})"
    if isinstance(exc, PermissionError):
        return f"the command cannot be run ({exc.strerror or exc})"
    text = one_line(redact(str(exc)), 200)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests (counted without recursion, stopping past ``limit``)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return depth
        deepest = max(deepest, depth)
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def schema_problem(info: ToolInfo) -> str:
    """Why a listed tool is not offered (its input schema missing, nested deeper than
    :data:`MAX_SCHEMA_DEPTH` or larger than :data:`MAX_SCHEMA_CHARS` as JSON), or ``""``.
    The same for a live listing and one read back from a recording."""
    schema = info.get("inputSchema")
    if not isinstance(schema, dict):
        return "no input schema"
    if _depth(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        return f"its input schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError):
        return "its input schema is not JSON"
    if size > MAX_SCHEMA_CHARS:
        return f"its input schema is larger than {MAX_SCHEMA_CHARS:,} characters"
    return ""


class ServerConnection:
    """One server, started once and kept until :meth:`stop` (see the module docstring).

    Every coroutine here runs on the background loop."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.name = config.name
        #: ``starting``, ``ready``, ``failed`` or ``stopped``.
        self.state = "starting"
        self.failure: str | None = None
        self.tools: list[ToolInfo] = []
        #: Each tool's output schema, as listed (what its structured results are checked by).
        self.output_schemas: dict[str, Any] = {}
        #: Tools the server lists that are not offered, with why.
        self.skipped: list[str] = []
        self.server_name: str | None = None
        #: Lines the server wrote to stdout that were not MCP messages, and the last one.
        self.junk_lines = 0
        self.last_junk = ""
        self._client: Client | None = None
        self._stderr: StderrTail | None = None
        self._runner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._broken = asyncio.Event()
        self._broken_reason = ""
        self._in_flight = 0
        self._tasks: set[asyncio.Task[Any]] = set()  # calls left to finish their cancellation

    # ------------------------------------------------------------------ lines

    def _line(self, what: str) -> str:
        tail = self._stderr.tail() if self._stderr is not None else ""
        text = f"MCP server {self.name!r}: {what}"
        return text + (f" (its stderr: {tail})" if tail else "")

    # ------------------------------------------------------------------ starting

    async def start(self) -> None:
        """Start the server and list its tools; :class:`McpFailure` if it cannot."""
        _quiet_sdk_logs()
        _warm_validator()
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._runner = asyncio.ensure_future(self._run(self._ready))
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.config.startup_timeout)
        except TimeoutError:
            await self._end_runner()
            self._fail(
                f"did not start within {self.config.startup_timeout:g} s (startup_timeout): "
                "no answer to the handshake"
            )
        except McpFailure as exc:
            await self._end_runner()
            self.state, self.failure = "failed", str(exc)
            raise
        except asyncio.CancelledError:
            await self._end_runner()
            self.state = "stopped"
            raise
        self.state = "ready"

    def _fail(self, what: str) -> None:
        self.state, self.failure = "failed", self._line(what)
        raise McpFailure(self.failure)

    async def _run(self, ready: asyncio.Future[None]) -> None:
        """The runner: the SDK client is entered and left here, in this one task."""
        from mcp import Client
        from mcp.types import Implementation

        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = Client(
                    transport,
                    message_handler=self._on_message,
                    client_info=Implementation(name="notebook_llm", version=_version()),
                )
                await stack.enter_async_context(client)
                # Results are checked against a tool's output schema by our validator, not the
                # SDK's (see check_result): an instance attribute, found before the method
                client.session.validate_tool_result = self.check_result  # type: ignore[method-assign]
                if self._stderr is not None:
                    self._stderr.close_writer()  # spawned: the server holds its own copy
                info = client.server_info
                self.server_name = info.name if info is not None else None
                await self._list_tools(client)
                self._client = client
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                if isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(McpFailure(self._start_failure(exc)))
            if not isinstance(exc, Exception):
                raise
            log.debug("MCP server %s ended: %s", self.name, _describe_error(exc))
        finally:
            self._client = None
            if self._stderr is not None:
                self._stderr.close_writer()
            if self.state != "failed":
                self.state = "stopped"

    def _start_failure(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        code = getattr(leaf, "code", None)
        if code == -32000 or (self._stderr is not None and self._stderr.ended.is_set()):
            return self._line("exited while starting, before it answered the handshake")
        if self.config.url is not None:
            return self._line(
                f"could not connect to {redact(self.config.url)}: {_describe_error(leaf)}"
            )
        return self._line(f"could not start: {_describe_error(leaf)}")

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        """The SDK transport for the configuration (references expanded here, at start)."""
        env, headers, args = resolve_values(self.config)
        if self.config.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            host = httpx2.URL(self.config.url).host
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=headers,
                    # the SDK's own defaults: a response stream may stay open for minutes
                    timeout=httpx2.Timeout(30.0, read=300.0),
                    # a loopback server is reached directly, never through a proxy
                    trust_env=host not in ("127.0.0.1", "localhost", "::1"),
                )
            )
            return streamable_http_client(self.config.url, http_client=http)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        self._stderr = StderrTail(self.name)
        params = StdioServerParameters(
            command=self.config.command or "", args=args, env=env, cwd=self.config.cwd
        )
        return stdio_client(params, errlog=self._stderr.writer)

    async def _list_tools(self, client: Client) -> None:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                info = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
                if isinstance(info.get("outputSchema"), dict):
                    self.output_schemas[str(info.get("name"))] = info["outputSchema"]
                problem = self._schema_problem(info)
                if problem:
                    self.skipped.append(f"{printable(tool.name)[:64]}: {problem}")
                elif len(tools) < MAX_TOOLS:
                    tools.append(
                        {
                            k: info[k]
                            for k in ("name", "title", "description", "inputSchema")
                            if k in info
                        }
                    )
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = tools

    @staticmethod
    def _schema_problem(info: ToolInfo) -> str:
        return schema_problem(info)

    async def check_result(self, name: str, result: Any) -> None:
        """A result's structured content against the tool's output schema, in place of the
        SDK's check: that one runs ``jsonschema`` with Python's ``re`` for ``pattern`` (a
        server's ``^(a+)+$`` over its own result holds the GIL for hours: the kernel, Stop and
        every deadline wait) and follows ``$ref`` without a bound (``A0 = anyOf[A1, A1]``...:
        2^depth steps) or to another document (it fetches the URL, with no timeout). Ours
        (:func:`notebook_llm.core.json_schema_check.check`) runs patterns on RE2, bounds
        ``$ref`` steps by the value's size and the schema's size and depth, fetches nothing,
        and checks ``uniqueItems`` in one pass.
        A result that does not fit is the call's failure (``RuntimeError``, as the SDK's)."""
        if getattr(result, "is_error", False):
            return
        schema = self.output_schemas.get(name)
        if schema is None:
            return
        content = getattr(result, "structured_content", None)
        if content is None:
            raise RuntimeError(
                f"tool {name} has an output schema but did not return structured content"
            )
        problems = check(content, schema)
        if problems:
            raise RuntimeError(f"invalid structured content returned by tool {name}: {problems[0]}")

    # ------------------------------------------------------------------ messages

    async def _on_message(self, message: Any) -> None:
        """The SDK's message handler: server notifications, and transport errors (a line on
        stdout that is not a JSON-RPC message arrives here as an exception)."""
        if not isinstance(message, Exception):
            return
        self.junk_lines += 1
        errors = getattr(message, "errors", None)
        sample = ""
        if callable(errors):
            with contextlib.suppress(Exception):
                sample = str(errors()[0].get("input", ""))
        self.last_junk = one_line(redact(printable(sample or str(message))), 80)
        if self._in_flight and not self._broken.is_set():
            self._broken_reason = self._line(
                f"wrote a line to stdout that is not an MCP message ({self.last_junk!r}) during "
                "the call; a server's stdout is for protocol messages only (log to stderr). "
                "The server was stopped and starts again on the next use"
            )
            self._broken.set()

    # ------------------------------------------------------------------ calls

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool``; the ``CallToolResult`` in its JSON form. An ``isError`` result is a
        result (the tool's error); :class:`McpFailure` is the server's failure (see the module
        docstring). Cancelling the caller cancels the call (the protocol's cancellation is
        sent)."""
        client = self._client
        if client is None or self.state != "ready":
            raise McpFailure(self.failure or self._line("is not running"))
        self._in_flight += 1
        work = asyncio.ensure_future(client.call_tool(tool, arguments))
        self._tasks.add(work)
        work.add_done_callback(self._tasks.discard)
        broken = asyncio.ensure_future(self._broken.wait())
        try:
            done, _ = await asyncio.wait(
                {work, broken},
                timeout=self.config.tool_timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            self._in_flight -= 1
            broken.cancel()
            if not work.done():
                work.cancel()  # Stop, timeout or a broken server: the SDK sends the cancel
        if work in done:
            return await self._result(tool, work)
        if self._broken.is_set():
            self._retire()
            raise McpFailure(self._broken_reason)
        raise McpFailure(
            self._line(
                f"tool {tool!r} did not answer within {self.config.tool_timeout:g} s "
                "(tool_timeout); the call was cancelled"
            )
        )

    async def _exited(self) -> bool:
        """Whether a server whose connection closed has exited: its stderr pipe ends when it
        does (waited for a moment, as the pipe's end arrives after stdout's)."""
        if self._stderr is None:
            return False
        for _ in range(20):
            if self._stderr.ended.is_set():
                return True
            await asyncio.sleep(0.05)
        return False

    async def _result(self, tool: str, work: asyncio.Task[Any]) -> dict[str, Any]:
        try:
            result = work.result()
        except asyncio.CancelledError:
            raise McpFailure(self._line(f"the call to {tool!r} was cancelled")) from None
        except Exception as exc:
            leaf = _leaf(exc)
            code = getattr(leaf, "code", None)
            if code == -32000:  # CONNECTION_CLOSED: the process died, or its stdout closed
                self._retire()
                what = "exited" if await self._exited() else "closed the connection"
                raise McpFailure(
                    self._line(
                        f"{what} during the call to {tool!r}; it starts again on the next use"
                    )
                ) from None
            if isinstance(code, int):  # a JSON-RPC error: the server refused this call
                message = one_line(redact(printable(str(leaf))), 300)
                return {
                    "content": [
                        {"type": "text", "text": f"the server refused the call: {message}"}
                    ],
                    "isError": True,
                }
            raise McpFailure(
                self._line(f"the call to {tool!r} failed: {_describe_error(leaf)}")
            ) from None
        dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped

    def _retire(self) -> None:
        """After a crash or a broken stream: stop this connection (its runner reaps the
        process); the next use starts a new one."""
        self.state = "failed"
        self.failure = self.failure or self._broken_reason or self._line("stopped after a failure")
        self._stop.set()

    # ------------------------------------------------------------------ stopping

    async def stop(self) -> None:
        """Stop the server and reap its process (bounded: see :data:`STOP_WAIT`)."""
        self._stop.set()
        await self._end_runner(graceful=True)
        if self.state != "failed":
            self.state = "stopped"

    async def _end_runner(self, graceful: bool = False) -> None:
        runner = self._runner
        if runner is None or runner.done():
            return
        if not graceful:
            runner.cancel()
        done, _ = await asyncio.wait({runner}, timeout=STOP_WAIT)
        if not done:
            runner.cancel()
            await asyncio.wait({runner}, timeout=STOP_WAIT)
