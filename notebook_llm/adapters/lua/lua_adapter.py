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

This module holds the adapter itself (loading, reload, one stream's codec); each step lives
where its job is: the exchange (:mod:`notebook_llm.wire.exchange`, run by
:class:`~notebook_llm.adapters.codec_adapter.CodecAdapter`) does the HTTP, ``lua_codec.py`` is
the script's part of one stream (``provider_request.py`` builds its request,
``hook_results.py`` maps a whole body and hook results).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ...core.cancel import current_stop
from ...core.errors import ErrorCode, LlmError
from ...core.protocol import Event, GenerateOptions
from ...wire.exchange import DEFAULT_TIMEOUT, HttpExchange
from ...wire.limits import DEFAULT_LIMITS, WireLimits
from ..codec_adapter import CodecAdapter
from .hook_results import map_whole_body
from .host import TransportHttp
from .lua_codec import LuaCodec
from .provider_request import script_meta
from .runtime import LuaLimits, LuaSandbox
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


class LuaAdapter(CodecAdapter):
    """An adapter backed by a Lua script (see the module docstring)."""

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

    def codec(self, options: GenerateOptions, exchange: HttpExchange) -> LuaCodec:
        """One stream's codec, in a fresh Lua state whose hooks send their ``http_get`` /
        ``http_post`` through the stream's ``exchange`` and stop on the stream's Stop."""
        with self._lock:
            source = self.source
        sandbox = self._sandbox(source)  # one Lua state per stream
        sandbox.set_stop(current_stop())  # a Stop / kernel interrupt ends a running hook
        sandbox.set_http(TransportHttp(exchange))
        return LuaCodec(sandbox, options, self.name)

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
        sandbox.set_http(TransportHttp(self.exchange(options)))
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
