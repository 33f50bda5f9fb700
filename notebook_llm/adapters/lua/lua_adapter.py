"""``LuaAdapter``: runs a script written to the HomeAgent adapter contract as an ``LlmAdapter``.

Per stream: a fresh sandboxed Lua state (so module-level state in a script is per-stream and
concurrent streams never share one), ``GenerateOptions`` -> contract request JSON ->
``transform_request`` -> POST ``base_url + endpoint`` -> SSE or NDJSON framing ->
``transform_stream_chunk`` per payload -> :class:`ChunkMapper` -> protocol events. Non-streaming
scripts (no ``transform_stream_chunk``) go through ``transform_response`` to the same events.

Extensions to the contract (documented in the README):

* ``endpoint`` may contain ``{model}`` and ``{api_key}`` (URL-quoted) placeholders;
* ``stream_endpoint`` is used instead of ``endpoint`` when streaming (Gemini's two URLs);
* ``stream_format = "ndjson"`` selects NDJSON framing (also chosen for an
  ``application/x-ndjson`` response);
* the default ``Authorization: Bearer <key>`` is not added when the script has a
  ``build_headers`` hook (its headers are the only ones that carry the key), sets
  ``Authorization``, ``x-api-key`` or ``x-goog-api-key`` in ``headers``, or puts ``{api_key}`` in
  the URL.

This module holds the adapter itself (loading, reload, the stream's steps in order); each step
lives where its job is: ``provider_request.py`` builds the request and picks the HTTP client,
``stream_pipeline.py`` turns a streamed body into events, ``hook_results.py`` maps a whole
body, hook results and transport failures.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ...core.cancel import current_stop
from ...core.errors import ErrorCode, LlmError
from ...core.protocol import Event, GenerateOptions
from ...core.timeouts import DEFAULT_TIMEOUTS
from ...wire.body import decoded, read_body, read_error_body
from ...wire.deadline import RequestClock
from ...wire.http_errors import error_from_http
from ...wire.limits import DEFAULT_LIMITS, WireLimits
from ...wire.response_watch import notify_response
from ...wire.slots import request_slot, yield_slot
from ..base import LlmAdapter
from .chunk_mapping import ChunkMapper
from .hook_results import TransportGuard, amap_whole_body, map_whole_body
from .host import TransportHttp
from .provider_request import (
    DEFAULT_TIMEOUT,
    HttpRequest,
    aprepare_request,
    open_client,
    script_meta,
    with_max_tokens_hint,
)
from .runtime import LuaLimits, LuaSandbox
from .stream_pipeline import StreamPipeline, drain
from .whole_body import WholeBodyCodec

__all__ = ["DEFAULT_TIMEOUT", "AdapterInfo", "LuaAdapter", "declared_name", "read_adapter_file"]


@dataclass
class AdapterInfo:
    """What ``%adapter list`` shows about a Lua adapter."""

    name: str
    version: str
    endpoint: str
    origin: str
    path: str | None


class LuaAdapter(LlmAdapter):
    """An adapter backed by a Lua script (see the module docstring)."""

    takes_request_slot = True

    def __init__(
        self,
        source: str,
        *,
        name: str | None = None,
        path: Path | None = None,
        origin: str = "source",
        limits: LuaLimits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        log: Callable[[str, str, str], None] | None = None,
        wire_limits: WireLimits = DEFAULT_LIMITS,
    ) -> None:
        self.limits = limits or LuaLimits()
        #: The caps on what one response may hand this adapter (decoded bytes).
        self.wire_limits = wire_limits
        self.transport = transport
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.path = path
        self.origin = origin
        #: ``log(adapter_name, level, message)`` receives the script's ``log()`` calls.
        self.log_sink = log
        self._given_name = name
        self._lock = threading.Lock()
        self.source = ""
        self._meta: dict[str, Any] = {}
        self._load(source)

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> LuaAdapter:
        """Load ``path``; the adapter's name is the script's ``name`` or the file's base name."""
        p = Path(path).expanduser()
        source = read_adapter_file(p)
        if kwargs.get("name") is None:  # name=None (the magics) means: the script's or the file's
            kwargs["name"] = p.stem
        kwargs.setdefault("origin", "file")
        return cls(source, path=p, **kwargs)

    @classmethod
    def from_source(cls, source: str, name: str | None = None, **kwargs: Any) -> LuaAdapter:
        """Load a script given as text (a notebook cell, a string)."""
        return cls(source, name=name, **kwargs)

    def _sandbox(self, source: str | None = None) -> LuaSandbox:
        text = self.source if source is None else source
        # Errors name the adapter as the user knows it, even when the script does not compile:
        # the given name, else the declared one, else the file's base name.
        label = self._given_name or declared_name(text) or (self.path.stem if self.path else None)
        return LuaSandbox(
            text,
            name=label,
            chunkname=f"@{self.path}" if self.path else f"={label or 'adapter'}",
            limits=self.limits,
            log=self._on_log,
        )

    def _on_log(self, level: str, message: str) -> None:
        if self.log_sink is not None:
            self.log_sink(self.name, level, message)

    def _load(self, source: str) -> None:
        sandbox = self._sandbox(source)  # raises INVALID_ADAPTER with the Lua line
        meta = script_meta(sandbox)
        for hook in ("transform_request",):
            if not sandbox.has_hook(hook):
                raise LlmError(
                    f"adapter {meta.get('name') or self._given_name!r} has no {hook} function",
                    ErrorCode.INVALID_ADAPTER,
                    adapter=meta.get("name") or self._given_name,
                )
        if not (
            sandbox.has_hook("transform_stream_chunk") or sandbox.has_hook("transform_response")
        ):
            raise LlmError(
                f"adapter {meta.get('name') or self._given_name!r} needs transform_stream_chunk "
                "or transform_response",
                ErrorCode.INVALID_ADAPTER,
            )
        with self._lock:
            self.source = source
            self._meta = meta

    def reload(self, source: str | None = None) -> None:
        """Replace the script (from ``source``, or re-read the file). On failure the previous
        version stays active and ``LlmError(INVALID_ADAPTER)`` says why (Lua message and line)."""
        if source is None:
            if self.path is None:
                raise LlmError(
                    f"adapter {self.name!r} was not loaded from a file", ErrorCode.INVALID_ADAPTER
                )
            source = read_adapter_file(self.path)
        self._load(source)

    @property
    def name(self) -> str:  # type: ignore[override]
        return str(self._meta.get("name") or self._given_name or "adapter")

    @property
    def version(self) -> str:  # type: ignore[override]
        return str(self._meta.get("version") or "")

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self._meta)

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            self.name,
            self.version,
            str(self._meta.get("endpoint", "")),
            self.origin,
            str(self.path) if self.path else None,
        )

    def __repr__(self) -> str:
        return f"<LuaAdapter {self.name} {self.version} ({self.origin})>"

    # ------------------------------------------------------------------ requests

    async def _prepare(self, sandbox: LuaSandbox, options: GenerateOptions) -> HttpRequest:
        """This stream's URL, headers and body (:func:`~.provider_request.aprepare_request`: the
        hooks' ``http_get`` / ``http_post`` on the stream's transport)."""
        return await aprepare_request(sandbox, options, self.name)

    def _client(self, options: GenerateOptions | None = None) -> tuple[httpx.AsyncClient, bool]:
        """An HTTP client for this stream, and whether the caller owns (must close) it
        (:func:`~.provider_request.open_client`)."""
        return open_client(self.transport, options, self.timeout)

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        async with contextlib.aclosing(self.stream_batches(options)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def stream_batches(self, options: GenerateOptions) -> AsyncGenerator[list[Event], None]:
        """The events of :meth:`stream`, one non-empty list per network read.

        The engine iterates this instead of :meth:`stream` (``streaming.guarded``): the events of
        one read cross the async layers between adapter and caller once, as a list, and are
        flattened only at the public iterator.

        Every wait on the network is within the request's time limits (``options.timeouts``,
        :mod:`notebook_llm.wire.deadline`), and every body within the caps of
        ``self.wire_limits`` (:mod:`notebook_llm.wire.body`), counted on decoded bytes.
        """
        with self._lock:
            source = self.source
        sandbox = self._sandbox(source)  # one Lua state per stream
        sandbox.set_stop(current_stop())  # a Stop / kernel interrupt ends a running hook
        # The hooks' http_get / http_post: on this stream's transport (recorded, replayed), awaited
        sandbox.set_http(TransportHttp(lambda: self._client(options), timeout=self.timeout))
        url, headers, body, streaming = await self._prepare(sandbox, options)
        mapper = ChunkMapper(provider=options.provider, adapter=self.name)
        client, owned = self._client(options)
        caps = self.wire_limits
        clock = RequestClock(options.timeouts or DEFAULT_TIMEOUTS, options.provider, streaming)
        pipeline: StreamPipeline | None = None
        whole: bytes | None = None  # a non-streamed body, mapped after the exchange
        last: list[Event] = []  # the answer's final events, handed over after the exchange
        async with contextlib.AsyncExitStack() as stack:
            if owned:
                await stack.enter_async_context(client)
            with TransportGuard(options.provider, mapper, len(body)) as guard:
                request = client.build_request(
                    "POST", url, content=body.encode("utf-8"), headers=headers, timeout=self.timeout
                )
                # Built before it waits for a batch's slot (wire.slots), sent when it has one.
                async with request_slot():
                    response = await clock.run(client.send(request, stream=True))
                    notify_response(response.status_code, response.headers)
                    async with contextlib.aclosing(response):
                        if response.status_code >= 400:
                            raw = await clock.run(
                                read_error_body(response, caps.max_error_body_bytes)
                            )
                            raise with_max_tokens_hint(
                                error_from_http(
                                    response.status_code,
                                    response.headers,
                                    raw,
                                    provider=options.provider,
                                ),
                                raw,
                                options,
                            )
                        guard.accepted = True
                        if not streaming:
                            whole = await clock.run(
                                read_body(
                                    response,
                                    caps.max_body_bytes,
                                    "the response body",
                                    "max_body_bytes",
                                )
                            )
                        else:
                            ctype = response.headers.get("content-type", "")
                            ndjson = (
                                sandbox.meta().get("stream_format") == "ndjson" or "ndjson" in ctype
                            )
                            pipeline = StreamPipeline(
                                sandbox, mapper, ndjson, self.name, len(body), caps
                            )
                            incoming = clock.paced(decoded(response))
                            heard = 0
                            async for piece in incoming:
                                events = pipeline.feed(piece)
                                if pipeline.payloads != heard:  # an event, not a comment
                                    heard = pipeline.payloads
                                    clock.heard()
                                guard.started = guard.started or bool(events)
                                if mapper.finished:  # [DONE] / done: the answer is complete.
                                    await drain(incoming)  # Read the rest: the consumer stops
                                    last = events  # at finish
                                    break
                                if events:
                                    yield events
                                pipeline.raise_pending()  # after what came before it was yielded
                            else:
                                last = pipeline.close()
                                guard.started = guard.started or bool(last)
            if guard.tail:  # a transport error after output: keep what arrived
                yield guard.tail
                return
        # The exchange is over and its slot free: a batch's next request, ready and waiting for
        # it, goes out before the consumer handles these last events (wire.slots).
        await yield_slot()
        if whole is not None:
            with guard:  # the same mapping of errors as during the exchange
                last = await amap_whole_body(
                    sandbox, whole, provider=options.provider, adapter=self.name
                )
            if guard.tail:
                last += guard.tail
        if last:
            yield last
        if pipeline is not None:
            pipeline.raise_pending()

    def whole_body_codec(self, options: GenerateOptions) -> WholeBodyCodec:
        """A codec of whole answers on one fresh Lua state of this script
        (:mod:`.whole_body`): the non-streamed request of a set of options, and the events of
        an answer body. ``options`` supply the transport of the hooks' ``http_get`` /
        ``http_post`` (the engine's, recorded or replayed). ``LlmError(INVALID_ADAPTER)`` when
        the script cannot read a whole answer (it has no ``transform_response``)."""
        with self._lock:
            source = self.source
        sandbox = self._sandbox(source)
        if not sandbox.has_hook("transform_response"):
            raise LlmError(
                f"adapter {self.name!r} reads only streamed answers (it has no "
                "transform_response), so it cannot read a whole answer",
                ErrorCode.INVALID_ADAPTER,
                adapter=self.name,
            )
        sandbox.set_stop(current_stop())
        sandbox.set_http(TransportHttp(lambda: self._client(options), timeout=self.timeout))
        return WholeBodyCodec(sandbox, self.name)

    def _map_whole(self, sandbox: LuaSandbox, raw: bytes, options: GenerateOptions) -> list[Event]:
        return map_whole_body(sandbox, raw, provider=options.provider, adapter=self.name)

    def map_body(self, raw: bytes, options: GenerateOptions) -> list[Event]:
        """A whole (non-stream) 200 body's events, mapped as :meth:`stream` maps one (the
        conformance kit's replay), in a fresh Lua state."""
        return self._map_whole(self._sandbox(), raw, options)


def read_adapter_file(path: Path) -> str:
    """The text of an adapter script; a file that cannot be read or is not UTF-8 is one
    ``LlmError(INVALID_ADAPTER)`` line naming the file (and the line of the bad byte)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LlmError(
            f"cannot read adapter file {path}: {exc.strerror}", ErrorCode.INVALID_ADAPTER
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise LlmError(
            f"adapter file {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line "
            f"{line}): save it as UTF-8",
            ErrorCode.INVALID_ADAPTER,
        ) from None


def declared_name(source: str) -> str | None:
    """The ``name = "..."`` a script declares, read without running it (for messages)."""
    m = re.search(r'\bname\s*=\s*"([^"]+)"', source)
    return m.group(1) if m else None
