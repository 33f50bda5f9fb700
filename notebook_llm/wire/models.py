"""Asking an OpenAI-compatible server which models it serves: ``GET {base_url}/models``.

llama.cpp, vLLM, LM Studio and Ollama's OpenAI endpoint all answer it with OpenAI's list shape,
``{"object": "list", "data": [{"id": ..., "object": "model", ...}]}``, so a provider configured
with nothing but a ``base_url`` can still show its models. One short request through the
exchange (:mod:`notebook_llm.wire.exchange`), as a generation goes: the same transport (so
record/replay and tests can stand in for the network), caps, time limits and error codes.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from ..core.errors import ErrorCode, LlmError
from ..core.protocol import ModelInfo
from ..core.redaction import shorten
from ..core.timeouts import Timeouts
from .clients import MakeTransport
from .codec import WireRequest
from .exchange import HttpExchange

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
    make_transport: MakeTransport | None = None,
    timeouts: Timeouts | None = None,
) -> list[ModelInfo]:
    """``GET {base_url}/models`` and the models it lists; ``LlmError`` when the server fails.
    ``make_transport`` is the engine's (its recorder or replayer), as for a generation."""
    url = base_url.rstrip("/") + "/models"
    sent = {"accept": "application/json", **(headers or {})}
    if api_key and not {k.lower() for k in sent} & {"authorization", "x-api-key"}:
        sent["authorization"] = f"Bearer {api_key}"
    exchange = HttpExchange(
        provider, timeouts=timeouts, make_transport=make_transport, timeout=LIST_TIMEOUT
    )
    answer = await exchange.fetch(
        WireRequest("GET", url, sent, streaming=False),
        what="the model list",
        doing=f"asking {provider} for its models ({url})",
    )
    try:
        doc = json.loads(answer.body)
    except ValueError:
        raise LlmError(
            f"{provider} answered GET /models with something that is not JSON: "
            f"{shorten(answer.body[:4096].decode('utf-8', 'replace'), 200)!r}",
            ErrorCode.MALFORMED_RESPONSE,
            provider=provider,
        ) from None
    return parse_model_list(doc)
