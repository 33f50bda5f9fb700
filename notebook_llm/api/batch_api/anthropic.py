"""Anthropic's Message Batches API.

As documented (docs.anthropic.com, "Batch processing" and the API reference; the shapes used
are kept in ``tests/fixtures/batch/anthropic/`` with their sources):

1. ``POST {messages URL}/batches`` with ``{"requests": [{"custom_id", "params"}, ...]}``, where
   ``params`` is a Messages API body (without ``stream``);
2. poll ``GET .../batches/{id}``: ``processing_status`` is in_progress, canceling or ended;
   ``request_counts`` has processing, succeeded, errored, canceled and expired;
3. once ended, download ``results_url``: one line per request, ``{"custom_id", "result":
   {"type": "succeeded", "message"} | {"type": "errored", "error"} | {"type": "canceled"} |
   {"type": "expired"}}``, in any order.

One batch holds at most 100,000 requests and 256 MB (:data:`LIMITS`). ``custom_id`` must match
``^[a-zA-Z0-9_-]{1,64}$``; the ids this package gives (``r<number>``) do.

``results_url`` comes from the server: the key is sent there only when it is on the same
scheme, host and port as the batches endpoint.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator
from typing import IO, Any

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import shorten
from .http_calls import BatchHttp
from .remote import (
    BatchLimits,
    RemoteBatch,
    RemoteStatus,
    RowOutcome,
    body_bytes,
    counts_of,
    id_of,
    line_object,
    outcomes,
    status_of,
)

__all__ = ["LIMITS", "AnthropicBatches"]

#: The documented limits of one Message Batch: 100,000 requests, 256 MB.
LIMITS = BatchLimits(max_requests=100_000, max_bytes=256 * 1000 * 1000)

STATUSES = frozenset({"in_progress", "canceling", "ended"})
COUNTS = ("processing", "succeeded", "errored", "canceled", "expired")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


class AnthropicBatches:
    """Anthropic's Message Batches for the requests the adapter sends to ``endpoint_url`` (its
    Messages URL, ``https://api.anthropic.com/v1/messages``); see the module docstring."""

    api = "anthropic"
    head = b'{"requests": ['
    separator = b", "
    tail = b"]}"

    def __init__(
        self, provider: str, base_url: str, endpoint_url: str, limits: BatchLimits | None = None
    ) -> None:
        self.provider = provider
        self.batches_url = endpoint_url.rstrip("/") + "/batches"
        self.limits = limits or LIMITS

    def item(self, custom_id: str, body: str) -> bytes:
        head = body_bytes({"custom_id": custom_id})
        return head[:-1] + b', "params": ' + body.encode("utf-8") + b"}"

    async def submit(self, http: BatchHttp, data: IO[bytes], count: int, tag: str) -> RemoteBatch:
        # A Message Batch takes only its requests: no label, so ``tag`` goes nowhere.
        created = await http.post_file(self.batches_url, data, "application/json")
        return RemoteBatch(id_of(created.get("id"), "batch id", self.provider))

    async def find(self, http: BatchHttp, tag: str, since: float) -> RemoteBatch | None:
        """Always ``None``: a Message Batch carries no label of ours, and its list shows no
        request's ``custom_id``, so a batch whose id never reached the store cannot be told
        apart from another of the same size (``docs/batch.md`` says what that costs)."""
        return None

    async def poll(self, http: BatchHttp, remote_id: str) -> RemoteStatus:
        quoted = urllib.parse.quote(remote_id, safe="")
        batch = await http.json("GET", f"{self.batches_url}/{quoted}")
        status = status_of(batch.get("processing_status"), STATUSES, self.provider, remote_id)
        numbers = counts_of(batch.get("request_counts"), COUNTS)
        total = sum(numbers.values())
        results_url = batch.get("results_url")
        fields: dict[str, Any] = {}
        if isinstance(results_url, str) and results_url:
            fields["results_url"] = self._checked_results_url(results_url)
        ended = status == "ended"
        return RemoteStatus(
            ended=ended,
            status=status,
            counts=numbers,
            finished=total - numbers["processing"],
            total=total or None,
            fields=fields,
            error=None,
        )

    def _checked_results_url(self, url: str) -> str:
        """``url`` when it is where the key may go (the batches endpoint's origin)."""
        if _origin(url) != _origin(self.batches_url):
            raise LlmError(
                f"{self.provider}'s batch gave a results_url on another host "
                f"({shorten(url, 120)!r}); the key is sent only to {self.batches_url}",
                ErrorCode.MALFORMED_RESPONSE,
                provider=self.provider,
            )
        return url

    async def results(self, http: BatchHttp, status: RemoteStatus) -> AsyncIterator[RowOutcome]:
        url = status.fields.get("results_url")
        if not isinstance(url, str):
            if status.total:  # ended with requests and nowhere to read them: say so
                raise LlmError(
                    f"{self.provider}'s batch ended without a results_url",
                    ErrorCode.MALFORMED_RESPONSE,
                    provider=self.provider,
                )
            return
        async for outcome in outcomes(http, url, self.outcome):
            yield outcome

    def outcome(self, line: bytes) -> RowOutcome | None:
        """One line of the results (``None``: not a results line)."""
        doc = line_object(line)
        if doc is None:
            return None
        custom_id = doc["custom_id"]
        result = doc.get("result")
        kind = result.get("type") if isinstance(result, dict) else None
        if kind == "succeeded" and isinstance(result, dict):
            return RowOutcome(custom_id, body_bytes(result.get("message")), None, line)
        if kind == "errored" and isinstance(result, dict):
            return RowOutcome(
                custom_id, body_bytes(_error_response(result.get("error"))), None, line
            )
        if kind == "expired":
            error = LlmError(
                "the batch's 24 h window ended before this request ran",
                ErrorCode.BATCH_EXPIRED,
                provider=self.provider,
            )
        elif kind == "canceled":
            error = LlmError(
                "the batch was canceled before this request ran",
                ErrorCode.ABORTED,
                provider=self.provider,
            )
        else:
            error = LlmError(
                f"the batch results line has an unknown result type {shorten(repr(kind), 40)}",
                ErrorCode.MALFORMED_RESPONSE,
                provider=self.provider,
            )
        return RowOutcome(custom_id, None, error, line)


def _error_response(error: Any) -> dict[str, Any]:
    """An errored result's ``error`` as the Messages API's error body (``{"type": "error",
    "error": {"type", "message"}}``, what it documents), for the adapter to map as it maps
    that body. A bare ``{"type", "message"}`` is wrapped the same way."""
    if isinstance(error, dict) and isinstance(error.get("error"), dict):
        return {"type": "error", "error": error["error"]}
    if isinstance(error, dict):
        return {"type": "error", "error": error}
    return {"type": "error", "error": {"type": "api_error", "message": str(error)}}
