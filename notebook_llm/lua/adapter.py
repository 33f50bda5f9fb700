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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import json.scanner
import re
import threading
import time
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx

from ..base_adapter import LlmAdapter
from ..cancel import current_stop
from ..errors import ErrorCode, LlmError
from ..protocol import Event, GenerateOptions
from ..secrets import redact
from ..wire.http_errors import error_from_http
from ..wire.ndjson import NDJSONDecoder
from ..wire.sse import SSEDecoder
from ..wire.transport import scoped_client, shared_ssl_context
from .contract import ChunkMapper, build_request, map_response
from .runtime import LuaLimits, LuaSandbox

#: The default HTTP timeouts: a slow first token is normal, a silent stream is not.
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=60.0, write=30.0, pool=10.0)
_MAX_ERROR_BODY = 256 * 1024

_ssl_lock = threading.RLock()


def _on_background_loop() -> bool:
    from .._sync import is_background_loop

    return is_background_loop()


_client_on_loop: httpx.AsyncClient | None = None


def _background_client() -> httpx.AsyncClient:
    # One connection pool for every adapter on the long-lived background loop, held by the
    # module so that it is never garbage-collected with open connections.
    global _client_on_loop
    with _ssl_lock:
        if _client_on_loop is None:
            _client_on_loop = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(verify=shared_ssl_context()),
                follow_redirects=False,
            )
        return _client_on_loop


_HOOKS = ("build_headers", "transform_request", "transform_response", "transform_stream_chunk")


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
    ) -> None:
        self.limits = limits or LuaLimits()
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
        self.loaded_at = 0.0
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
        meta = sandbox.meta()
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
        meta["hooks"] = [h for h in _HOOKS if sandbox.has_hook(h)]
        with self._lock:
            self.source = source
            self._meta = meta
            self.loaded_at = time.time()

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

    def _url(self, options: GenerateOptions, meta: dict[str, Any], streaming: bool) -> str:
        if not options.base_url:
            raise LlmError(
                f"provider {options.provider!r} has no base_url for adapter {self.name!r}",
                ErrorCode.INVALID_OPTIONS,
                provider=options.provider,
            )
        endpoint = str(
            (streaming and meta.get("stream_endpoint"))
            or meta.get("endpoint")
            or "/chat/completions"
        )
        endpoint = endpoint.replace("{model}", urllib.parse.quote(options.model or "", safe=""))
        endpoint = endpoint.replace("{api_key}", urllib.parse.quote(options.api_key or "", safe=""))
        return options.base_url.rstrip("/") + endpoint

    def _headers(
        self,
        sandbox: LuaSandbox,
        options: GenerateOptions,
        meta: dict[str, Any],
        url: str,
        body: str,
        streaming: bool,
    ) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if streaming:
            headers["accept"] = "text/event-stream, application/x-ndjson"
        headers.update({str(k): str(v) for k, v in (meta.get("headers") or {}).items()})
        headers.update(options.headers)
        if "build_headers" in meta["hooks"]:
            built = sandbox.call(
                "build_headers",
                {
                    "url": url,
                    "method": "POST",
                    "body": body,
                    "api_key": options.api_key or "",
                    "timestamp": int(time.time()),
                    "source": {"name": options.provider},
                },
            )
            if built is not None and not isinstance(built, dict):
                raise LlmError(
                    f"adapter {self.name!r}: build_headers must return a table of strings",
                    ErrorCode.ADAPTER_ERROR,
                    adapter=self.name,
                    hook="build_headers",
                )
            headers.update({str(k): str(v) for k, v in (built or {}).items()})
        lower = {k.lower() for k in headers}
        key_in_url = "{api_key}" in str(meta.get("endpoint", "")) + str(
            meta.get("stream_endpoint", "")
        )
        if (
            options.api_key
            and not key_in_url
            and "build_headers" not in meta["hooks"]  # the adapter's own headers carry the key
            and not lower & {"authorization", "x-api-key", "x-goog-api-key"}
        ):
            headers["authorization"] = f"Bearer {options.api_key}"
        return headers

    def _prepare(
        self, sandbox: LuaSandbox, options: GenerateOptions
    ) -> tuple[str, dict[str, str], str, bool]:
        # The metadata of this stream's own state: a reload meanwhile cannot pair the old script
        # with the new endpoint or hooks.
        meta = sandbox.meta()
        meta["hooks"] = [h for h in _HOOKS if sandbox.has_hook(h)]
        streaming = "transform_stream_chunk" in meta["hooks"]
        request = build_request(options, stream=streaming)
        body = sandbox.call("transform_request", json.dumps(request, ensure_ascii=False))
        if not isinstance(body, str):
            raise LlmError(
                f"adapter {self.name!r}: transform_request must return a JSON string, got {type(body).__name__}",
                ErrorCode.ADAPTER_ERROR,
                adapter=self.name,
                hook="transform_request",
            )
        try:  # a bad body is the script's mistake: say so here, not with the server's HTTP 400
            doc = json.loads(body)
        except ValueError as exc:
            raise LlmError(
                f"adapter {self.name!r}: transform_request returned invalid JSON ({exc}); "
                f"it must return json.encode(...) of the request, got {body[:60]!r}",
                ErrorCode.ADAPTER_ERROR,
                adapter=self.name,
                hook="transform_request",
            ) from None
        body = _apply_max_tokens_field(body, doc, options)
        url = self._url(options, meta, streaming)
        headers = self._headers(sandbox, options, meta, url, body, streaming)
        return url, headers, body, streaming

    def _client(self, options: GenerateOptions | None = None) -> tuple[httpx.AsyncClient, bool]:
        """An HTTP client for this stream, and whether the caller owns (must close) it.

        On the package's long-lived background loop (sync calls, magics, batches) one client per
        adapter is reused, so connections are kept alive across requests. On any other loop
        (an ``asyncio.run`` of the user's, a test's loop) the client lives for one stream: a
        pooled connection must not outlive the loop it was opened on.
        """
        make = options.make_transport if options is not None else None  # the engine's, or its tap
        transport = self.transport or (make() if make is not None else None)
        if transport is None:
            pooled = scoped_client()
            if pooled is not None:
                return pooled, False
            if _on_background_loop():
                return _background_client(), False
        transport = transport or httpx.AsyncHTTPTransport(verify=shared_ssl_context())
        client = httpx.AsyncClient(
            transport=transport, timeout=self.timeout, follow_redirects=False
        )
        return client, True

    async def stream(self, options: GenerateOptions) -> AsyncIterator[Event]:
        async with contextlib.aclosing(self.stream_batches(options)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def stream_batches(self, options: GenerateOptions) -> AsyncGenerator[list[Event], None]:
        """The events of :meth:`stream`, one non-empty list per network read.

        The engine iterates this instead of :meth:`stream` (``engine._guarded``): the events of
        one read cross the async layers between adapter and caller once, as a list, and are
        flattened only at the public iterator (issue 16: a third of the per-chunk cost of a
        stream was async-generator hops).
        """
        with self._lock:
            source = self.source
        sandbox = self._sandbox(source)  # one Lua state per stream
        sandbox.set_stop(current_stop())  # a Stop / kernel interrupt ends a running hook
        url, headers, body, streaming = self._prepare(sandbox, options)
        mapper = ChunkMapper(provider=options.provider, adapter=self.name)
        client, owned = self._client(options)
        async with contextlib.AsyncExitStack() as stack:
            if owned:
                await stack.enter_async_context(client)
            with _TransportGuard(options.provider, mapper, len(body)) as guard:
                async with client.stream(
                    "POST", url, content=body.encode("utf-8"), headers=headers, timeout=self.timeout
                ) as response:
                    if response.status_code >= 400:
                        raw = await _read_bounded(response)
                        raise _with_max_tokens_hint(
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
                        raw = await response.aread()
                        whole = self._map_whole(sandbox, raw, options)
                        if whole:
                            yield whole
                        return
                    ctype = response.headers.get("content-type", "")
                    ndjson = sandbox.meta().get("stream_format") == "ndjson" or "ndjson" in ctype
                    pipeline = _Pipeline(sandbox, mapper, ndjson, self.name, len(body))
                    incoming = response.aiter_bytes()  # decodes gzip/br
                    async for chunk in incoming:
                        events = pipeline.feed(chunk)
                        guard.started = guard.started or bool(events)
                        if mapper.finished:  # [DONE] / done: the answer is complete. Read the
                            await _drain(incoming)  # rest first: the consumer stops at finish
                        if events:
                            yield events
                        pipeline.raise_pending()  # after what came before it was yielded
                        if mapper.finished:
                            return
                    events = pipeline.close()
                    guard.started = guard.started or bool(events)
                    if events:
                        yield events
                    pipeline.raise_pending()
                    return
            if guard.tail:  # a transport error after output: keep what arrived
                yield guard.tail

    def _map_whole(self, sandbox: LuaSandbox, raw: bytes, options: GenerateOptions) -> list[Event]:
        text = raw.decode("utf-8", errors="replace")
        try:
            out = sandbox.call("transform_response", text)
        except LlmError as err:
            raise _blame_provider_if_not_json(err, text) from None
        resp = _json_object_output(out, self.name, "transform_response")
        return map_response(resp, provider=options.provider, adapter=self.name)

    def map_body(self, raw: bytes, options: GenerateOptions) -> list[Event]:
        """A whole (non-stream) 200 body's events, mapped as :meth:`stream` maps one (the
        conformance kit's replay), in a fresh Lua state."""
        return self._map_whole(self._sandbox(), raw, options)


class _Pipeline:
    """Framing -> ``transform_stream_chunk`` -> ChunkMapper, for one response body."""

    def __init__(
        self,
        sandbox: LuaSandbox,
        mapper: ChunkMapper,
        ndjson: bool,
        name: str,
        request_chars: int = 0,
    ) -> None:
        self.sandbox = sandbox
        self.request_chars = request_chars
        self.mapper = mapper
        self.name = name
        self.ndjson = ndjson
        self.sse = SSEDecoder() if not ndjson else None
        self.nd = NDJSONDecoder() if ndjson else None
        self.checked_format = False
        #: An error met in the middle of a batch of payloads; raised once the events mapped
        #: before it have been yielded, so nothing that arrived is lost.
        self.pending: LlmError | None = None

    def raise_pending(self) -> None:
        if self.pending is not None:
            err, self.pending = self.pending, None
            raise err

    def _check_ndjson(self, first: str) -> None:
        # A proxy's HTML error page in front of Ollama must not be blamed on the adapter.
        self.checked_format = True
        if first[:1] not in ("{", "["):
            raise LlmError(
                "the response was announced as NDJSON but is not: " + redact(first[:300]),
                ErrorCode.MALFORMED_RESPONSE,
            )

    def feed(self, chunk: bytes) -> list[Event]:
        if self.nd is not None:
            lines = self.nd.feed(chunk)
            if lines and not self.checked_format:
                self._check_ndjson(lines[0])
            return self._payloads(lines)
        assert self.sse is not None
        return self._payloads(self.sse.feed_data(chunk))

    def _payloads(self, payloads: list[str]) -> list[Event]:
        out: list[Event] = []
        try:
            self._map(payloads, out)
        except LlmError as err:
            self.pending = err
        return out

    def _map(self, payloads: list[str], out: list[Event]) -> None:
        if self.mapper.finished or not payloads:
            return
        mapper = self.mapper
        try:
            end = payloads.index("[DONE]")  # the end marker: what follows it is ignored
        except ValueError:
            end = len(payloads)
        items = payloads[:end]
        results, error = self.sandbox.call_each("transform_stream_chunk", items)
        feed = mapper.feed
        for result in results:
            if mapper.finished:
                return
            if not result:  # "" (or nil): the script skipped this payload
                continue
            chunk = _json_object_output(result, self.name, "transform_stream_chunk")
            out.extend(feed(chunk))
            if chunk.get("done") is True:  # the script's own end marker (message_stop, ...)
                out.extend(mapper.finish())
                return
        if error is not None:
            raise _blame_provider_if_not_json(error, items[len(results)])
        if end < len(payloads) and not mapper.finished:
            mapper.mark_end()
            out.extend(mapper.finish())

    def close(self) -> list[Event]:
        if self.nd is not None:
            lines = self.nd.flush()
            if lines and not self.checked_format:
                self._check_ndjson(lines[0])
            out = self._payloads(lines)
        else:
            assert self.sse is not None
            out = self._payloads(self.sse.flush_data())
            if not self.sse.saw_sse and not self.mapper.finished:
                text = (self.sse.non_sse_text() or "").strip()
                if not text:  # an empty 200: retryable, like a stream that gave nothing
                    raise LlmError(
                        after_headers("sent an empty body", self.request_chars),
                        ErrorCode.EMPTY_RESPONSE,
                    )
                raise LlmError(
                    "the response was announced as a stream but is not SSE: " + redact(text[:300]),
                    ErrorCode.MALFORMED_RESPONSE,
                )
        if not self.mapper.finished:
            error, self.pending = self.pending, None
            out.extend(self.mapper.finish(error))
        return out


#: The two names OpenAI-style APIs use for the output token limit.
_MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")


def _apply_max_tokens_field(body: str, doc: Any, options: GenerateOptions) -> str:
    """Put the token limit under the provider's ``max_tokens_field``.

    A provider setting, not a script's: the same ``openai`` adapter talks to OpenAI (which wants
    ``max_completion_tokens``) and to llama.cpp or vLLM (which read only ``max_tokens``). Only a
    body that carries one of the two OpenAI names at the top level is touched, so adapters with
    their own shapes (Gemini's ``generationConfig``, Ollama's ``options``) are left alone.
    """
    field = options.max_tokens_field
    if not field or options.max_tokens is None or not isinstance(doc, dict):
        return body
    found = [name for name in _MAX_TOKENS_FIELDS if name in doc]
    if not found or found == [field]:
        return body
    value = doc[found[0]]
    for name in found:
        del doc[name]
    doc[field] = value
    return json.dumps(doc, ensure_ascii=False)


def _with_max_tokens_hint(err: LlmError, raw: bytes, options: GenerateOptions) -> LlmError:
    """Add what to change to an error that refuses the token-limit field (OpenAI's
    ``unsupported_parameter`` with ``param: "max_tokens"``, or the other name)."""
    if err.status != 400:
        return err
    try:
        error = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        return err
    param = error.get("param") if isinstance(error, dict) else None
    if param not in _MAX_TOKENS_FIELDS:
        return err
    other = _MAX_TOKENS_FIELDS[1 - _MAX_TOKENS_FIELDS.index(param)]
    err.message = (
        f'{err.message} (set max_tokens_field = "{other}" for provider '
        f'{options.provider!r} in config.toml, or add_provider(..., max_tokens_field="{other}"))'
    )
    err.args = (err.message,)
    return err


#: A request body above this many characters (about 1,000 tokens) may not fit the context
#: window of a small local model (llama-cpp-python's server defaults to n_ctx 2048 tokens).
LARGE_REQUEST_CHARS = 4000


def after_headers(what: str, request_chars: int) -> str:
    """The message for a server that accepted a request (HTTP 200) and then failed: it says so
    plainly, and for a large request names the likely cause, the model's context window."""
    message = (
        f"the server accepted the request (HTTP 200) but then {what}; it failed while answering"
    )
    if request_chars >= LARGE_REQUEST_CHARS:
        message += (
            f". The request was large (about {request_chars // 4:,} tokens): it may not fit the "
            "model's context window. Start a new conversation or send less, or give the server "
            "a larger context (llama.cpp: --n_ctx)"
        )
    return message


def _blame_provider_if_not_json(err: LlmError, payload: str) -> LlmError:
    """A hook that failed on a payload that is not JSON: the provider's fault, not the script's."""
    if err.code != ErrorCode.ADAPTER_ERROR:
        return err
    try:
        json.loads(payload)
    except ValueError:
        return LlmError(
            f"the provider sent a body or stream line that is not valid JSON: {redact(payload[:200])!r} "
            f"(the adapter said: {err.message})",
            ErrorCode.MALFORMED_RESPONSE,
            adapter=err.adapter,
            hook=err.hook,
            lua_line=err.lua_line,
        )
    return err


# The C scanner behind json.loads, called directly: a hook's result is almost always a bare
# object that json.encode wrote, and skipping json.loads' wrappers (type checks, the whitespace
# regex) saves a good part of its cost per stream chunk. Anything else returns None and takes
# the full json.loads path, which gives the same value or the error to report.
_scan_once = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))


def _scan_object(text: str) -> dict[str, Any] | None:
    if not isinstance(text, str) or text[:1] != "{":
        return None
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError):
        return None
    if end != len(text) or not isinstance(value, dict):
        return None
    return value


def _json_object_output(value: Any, adapter: str, hook: str) -> dict[str, Any]:
    """A hook's result parsed as a JSON object, or ``ADAPTER_ERROR`` saying what was expected."""
    scanned = _scan_object(value)  # the common case, without json.loads' wrappers
    if scanned is not None:
        return scanned
    parsed = _parse_json_output(value, adapter, hook)
    if not isinstance(parsed, dict):
        skip = ' or ""' if hook == "transform_stream_chunk" else ""
        raise LlmError(
            f"adapter {adapter!r}: {hook} must return a JSON object{skip}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook=hook,
        )
    return parsed


def _parse_json_output(value: Any, adapter: str, hook: str) -> Any:
    if isinstance(value, dict | list):
        return value
    if not isinstance(value, str):
        raise LlmError(
            f"adapter {adapter!r}: {hook} must return a JSON string, got {type(value).__name__}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook=hook,
        )
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise LlmError(
            f"adapter {adapter!r}: {hook} returned invalid JSON ({exc.msg} at {exc.pos}): {value[:200]!r}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook=hook,
        ) from None


async def _drain(body: AsyncIterator[bytes], grace: float = 0.5) -> None:
    """Read what follows the end marker (normally just the end of the body), so the connection
    can be reused and a recording is complete; a server that keeps the stream open after it
    does not hold the caller longer than ``grace`` seconds."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(grace):
            async for _ in body:
                pass


async def _read_bounded(response: httpx.Response) -> bytes:
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf += chunk
        if len(buf) > _MAX_ERROR_BODY:
            break
    return bytes(buf)


class _TransportGuard:
    """Map httpx failures to ``LlmError`` at one boundary (the httpx way).

    Before any event was produced the error is raised (so the engine may retry it); after
    output has started, the stream is finished with the error (``tail``) and the partial blocks
    are kept.
    """

    def __init__(self, provider: str, mapper: ChunkMapper, request_chars: int = 0) -> None:
        self.provider = provider
        self.mapper = mapper
        self.request_chars = request_chars
        #: Whether the server answered with a success status (its headers arrived).
        self.accepted = False
        self.started = False
        self.tail: list[Event] | None = None

    def __enter__(self) -> _TransportGuard:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        if exc is None:
            return False
        if isinstance(exc, httpx.TimeoutException):
            err = LlmError(
                f"timed out talking to {self.provider}: {type(exc).__name__}",
                ErrorCode.TIMEOUT,
                provider=self.provider,
            )
        elif isinstance(exc, httpx.HTTPError) and self.accepted:
            # The body was cut: llama.cpp's server does this when generation fails after it
            # has sent its 200 (a prompt over the context window, for one).
            what = "closed the connection before the answer was complete"
            err = LlmError(
                f"{after_headers(what, self.request_chars)} ({type(exc).__name__})",
                ErrorCode.TRANSPORT,
                provider=self.provider,
            )
        elif isinstance(exc, httpx.HTTPError):
            err = LlmError(
                f"connection to {self.provider} failed: {type(exc).__name__}: {redact(str(exc))}",
                ErrorCode.TRANSPORT,
                provider=self.provider,
            )
        elif isinstance(exc, LlmError):
            err = exc
            if err.provider is None:
                err.provider = self.provider
        else:
            return False
        if self.started and not self.mapper.finished:
            self.tail = self.mapper.finish(err)
            return True
        if err is exc:
            return False
        raise err from None


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
