"""The HTTP request a Lua adapter sends.

One stream's request is built here, from the script's own Lua state (so a reload in the middle
cannot pair an old script with a new endpoint):

* ``GenerateOptions`` -> the contract request (:func:`~notebook_llm.adapters.lua.kernel_request.build_request`)
  -> the script's ``transform_request`` -> a JSON body, checked here so that a bad body is the
  script's one-line mistake and not the server's HTTP 400;
* the token limit moved under the provider's ``max_tokens_field`` (a provider setting);
* the URL: ``base_url`` + ``endpoint`` (``stream_endpoint`` when streaming), with the
  ``{model}`` and ``{api_key}`` placeholders URL-quoted;
* the headers: JSON, the script's static ``headers``, the provider's, ``build_headers``; the
  default ``Authorization: Bearer <key>`` only when nothing else carries the key.

The exchange (:mod:`notebook_llm.wire.exchange`) sends it; nothing here touches the network.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any, NamedTuple

from ...core.errors import ErrorCode, LlmError
from ...core.protocol import GenerateOptions
from ...core.redaction import shorten
from .kernel_request import build_request
from .runtime import LuaSandbox

#: The contract's hooks, in the order ``meta["hooks"]`` lists the ones a script defines.
HOOKS = ("build_headers", "transform_request", "transform_response", "transform_stream_chunk")

#: The two names OpenAI-style APIs use for the output token limit.
MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")


class HttpRequest(NamedTuple):
    """One stream's POST: where, with which headers and body, and whether it streams."""

    url: str
    headers: dict[str, str]
    body: str
    streaming: bool


def script_meta(sandbox: LuaSandbox) -> dict[str, Any]:
    """The script's metadata, with ``hooks``: the contract hooks it defines."""
    meta = sandbox.meta()
    meta["hooks"] = [h for h in HOOKS if sandbox.has_hook(h)]
    return meta


async def aprepare_request(
    sandbox: LuaSandbox, options: GenerateOptions, adapter: str, *, stream: bool | None = None
) -> HttpRequest:
    """Run ``transform_request`` in ``sandbox`` and build the URL and headers around its body.
    The hooks are awaited (:meth:`LuaSandbox.acall`): their ``http_get`` / ``http_post`` go
    out on the stream's transport while the loop runs on. ``stream``: ``None`` streams when the
    script can (it has ``transform_stream_chunk``); ``False`` asks for one whole answer (what a
    provider's batch API takes)."""
    meta, streaming, request = _request_of(sandbox, options, stream)
    body = _checked_body(await sandbox.acall("transform_request", request), options, adapter)
    url = request_url(options, meta, streaming, adapter)
    args = _headers_hook_args(meta, options, url, body)
    built = await sandbox.acall("build_headers", args) if args is not None else None
    headers = request_headers(options, meta, streaming, built, adapter)
    return HttpRequest(url, headers, body, streaming)


def _request_of(
    sandbox: LuaSandbox, options: GenerateOptions, stream: bool | None = None
) -> tuple[dict[str, Any], bool, str]:
    # The metadata of this stream's own state: a reload meanwhile cannot pair the old script
    # with the new endpoint or hooks.
    meta = script_meta(sandbox)
    streaming = "transform_stream_chunk" in meta["hooks"]
    if stream is not None:
        streaming = streaming and stream
    if not options.stream and "transform_response" in meta["hooks"]:
        streaming = False  # the caller asked for one whole body, and the script can read one
    elif not options.stream:
        raise LlmError(
            f"adapter {meta.get('name') or options.provider!r} can only stream (it has no "
            "transform_response to read a whole body): ask with streaming (drop --no-stream / "
            "stream=False)",
            ErrorCode.INVALID_OPTIONS,
            provider=options.provider,
        )
    request = build_request(options, stream=streaming)
    return meta, streaming, json.dumps(request, ensure_ascii=False)


def _checked_body(body: Any, options: GenerateOptions, adapter: str) -> str:
    if not isinstance(body, str):
        raise LlmError(
            f"adapter {adapter!r}: transform_request must return a JSON string, got {type(body).__name__}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook="transform_request",
        )
    try:  # a bad body is the script's mistake: say so here, not with the server's HTTP 400
        doc = json.loads(body)
    except ValueError as exc:
        raise LlmError(
            f"adapter {adapter!r}: transform_request returned invalid JSON ({exc}); "
            f"it must return json.encode(...) of the request, got {shorten(body, 60)!r}",
            ErrorCode.ADAPTER_ERROR,
            adapter=adapter,
            hook="transform_request",
        ) from None
    return apply_max_tokens_field(body, doc, options)


def _headers_hook_args(
    meta: dict[str, Any], options: GenerateOptions, url: str, body: str
) -> dict[str, Any] | None:
    """``build_headers``' argument, or ``None`` when the script has no such hook."""
    if "build_headers" not in meta["hooks"]:
        return None
    return {
        "url": url,
        "method": "POST",
        "body": body,
        "api_key": options.api_key or "",
        "timestamp": int(time.time()),
        "source": {"name": options.provider},
    }


def request_url(
    options: GenerateOptions, meta: dict[str, Any], streaming: bool, adapter: str
) -> str:
    """``base_url`` + the script's endpoint, placeholders filled in."""
    if not options.base_url:
        raise LlmError(
            f"provider {options.provider!r} has no base_url for adapter {adapter!r}",
            ErrorCode.INVALID_OPTIONS,
            provider=options.provider,
        )
    endpoint = str(
        (streaming and meta.get("stream_endpoint")) or meta.get("endpoint") or "/chat/completions"
    )
    endpoint = endpoint.replace("{model}", urllib.parse.quote(options.model or "", safe=""))
    endpoint = endpoint.replace("{api_key}", urllib.parse.quote(options.api_key or "", safe=""))
    return options.base_url.rstrip("/") + endpoint


def request_headers(
    options: GenerateOptions,
    meta: dict[str, Any],
    streaming: bool,
    built: Any,
    adapter: str,
) -> dict[str, str]:
    """The request's headers (see the module docstring for who adds the key); ``built`` is what
    the script's ``build_headers`` returned."""
    headers = {"content-type": "application/json"}
    if streaming:
        headers["accept"] = "text/event-stream, application/x-ndjson"
    headers.update({str(k): str(v) for k, v in (meta.get("headers") or {}).items()})
    headers.update(options.headers)
    if "build_headers" in meta["hooks"]:
        if built is not None and not isinstance(built, dict):
            raise LlmError(
                f"adapter {adapter!r}: build_headers must return a table of strings",
                ErrorCode.ADAPTER_ERROR,
                adapter=adapter,
                hook="build_headers",
            )
        headers.update({str(k): str(v) for k, v in (built or {}).items()})
    lower = {k.lower() for k in headers}
    key_in_url = "{api_key}" in str(meta.get("endpoint", "")) + str(meta.get("stream_endpoint", ""))
    if (
        options.api_key
        and not key_in_url
        and "build_headers" not in meta["hooks"]  # the adapter's own headers carry the key
        and not lower & {"authorization", "x-api-key", "x-goog-api-key"}
    ):
        headers["authorization"] = f"Bearer {options.api_key}"
    return headers


def apply_max_tokens_field(body: str, doc: Any, options: GenerateOptions) -> str:
    """Put the token limit under the provider's ``max_tokens_field``.

    A provider setting, not a script's: the same ``openai`` adapter talks to OpenAI (which wants
    ``max_completion_tokens``) and to llama.cpp or vLLM (which read only ``max_tokens``). Only a
    body that carries one of the two OpenAI names at the top level is touched, so adapters with
    their own shapes (Gemini's ``generationConfig``, Ollama's ``options``) are left alone.
    """
    field = options.max_tokens_field
    if not field or options.max_tokens is None or not isinstance(doc, dict):
        return body
    found = [name for name in MAX_TOKENS_FIELDS if name in doc]
    if not found or found == [field]:
        return body
    value = doc[found[0]]
    for name in found:
        del doc[name]
    doc[field] = value
    return json.dumps(doc, ensure_ascii=False)


def with_max_tokens_hint(err: LlmError, raw: bytes, options: GenerateOptions) -> LlmError:
    """Add what to change to an error that refuses the token-limit field (OpenAI's
    ``unsupported_parameter`` with ``param: "max_tokens"``, or the other name)."""
    if err.status != 400:
        return err
    try:
        error = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        return err
    param = error.get("param") if isinstance(error, dict) else None
    if param not in MAX_TOKENS_FIELDS:
        return err
    other = MAX_TOKENS_FIELDS[1 - MAX_TOKENS_FIELDS.index(param)]
    err.message = (
        f'{err.message} (set max_tokens_field = "{other}" for provider '
        f'{options.provider!r} in config.toml, or add_provider(..., max_tokens_field="{other}"))'
    )
    err.args = (err.message,)
    return err
