"""Asking an OpenAI-compatible server which models it serves: ``GET {base_url}/models``.

llama.cpp, vLLM, LM Studio and Ollama's OpenAI endpoint all answer it with OpenAI's list shape,
``{"object": "list", "data": [{"id": ..., "object": "model", ...}]}``, so a provider configured
with nothing but a ``base_url`` can still show its models. One short request through the same
transport as the adapters (so record/replay and tests can stand in for the network); failures
become the same ``LlmError`` codes as a failed generation request.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from ..core.errors import ErrorCode, LlmError
from ..core.protocol import ModelInfo
from ..core.redaction import redact, shorten
from .body import read_body, read_error_body
from .http_errors import error_from_http
from .limits import DEFAULT_LIMITS
from .transport import network_client

__all__ = ["fetch_openai_models", "parse_model_list"]

#: A model list is small and a local server answers at once; do not hold a cell for long.
LIST_TIMEOUT = httpx.Timeout(10.0)


def parse_model_list(doc: Any) -> list[ModelInfo]:
    """The models of an OpenAI-style list body (entries without a string ``id`` are skipped)."""
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return []
    out: list[ModelInfo] = []
    for entry in data:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
            owner = entry.get("owned_by")
            out.append(ModelInfo(entry["id"], description=f"owned by {owner}" if owner else None))
    return out


async def fetch_openai_models(
    base_url: str,
    *,
    provider: str,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[ModelInfo]:
    """``GET {base_url}/models`` and the models it lists; ``LlmError`` when the server fails."""
    url = base_url.rstrip("/") + "/models"
    sent = {"accept": "application/json", **(headers or {})}
    if api_key and not {k.lower() for k in sent} & {"authorization", "x-api-key"}:
        sent["authorization"] = f"Bearer {api_key}"
    try:
        async with (
            network_client(timeout=LIST_TIMEOUT, transport=transport) as client,
            client.stream("GET", url, headers=sent) as response,
        ):
            if response.status_code >= 400:
                raw = await read_error_body(response, DEFAULT_LIMITS.max_error_body_bytes)
            else:
                raw = await read_body(
                    response, DEFAULT_LIMITS.max_body_bytes, "the model list", "max_body_bytes"
                )
    except httpx.TimeoutException as exc:
        raise LlmError(
            f"timed out asking {provider} for its models: {type(exc).__name__}",
            ErrorCode.TIMEOUT,
            provider=provider,
        ) from None
    except httpx.HTTPError as exc:
        raise LlmError(
            f"cannot ask {provider} for its models ({url}): {type(exc).__name__}: "
            f"{redact(str(exc))}",
            ErrorCode.TRANSPORT,
            provider=provider,
        ) from None
    if response.status_code >= 400:
        raise error_from_http(response.status_code, response.headers, raw, provider=provider)
    try:
        doc = json.loads(raw)
    except ValueError:
        raise LlmError(
            f"{provider} answered GET /models with something that is not JSON: "
            f"{shorten(raw[:4096].decode('utf-8', 'replace'), 200)!r}",
            ErrorCode.MALFORMED_RESPONSE,
            provider=provider,
        ) from None
    return parse_model_list(doc)
