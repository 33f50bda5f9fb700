"""OpenAI's Batch API: the Files API and ``/v1/batches``, JSON lines in and out.

As documented (platform.openai.com/docs/guides/batch and the API reference; the shapes used are
kept in ``tests/fixtures/batch/openai/`` with their sources):

1. upload the input, one request per line ``{"custom_id", "method": "POST", "url", "body"}``,
   as a file with ``purpose=batch`` (``POST {base}/files``, multipart);
2. ``POST {base}/batches`` ``{"input_file_id", "endpoint", "completion_window": "24h"}``;
3. poll ``GET {base}/batches/{id}``: ``status`` is validating, in_progress, finalizing,
   cancelling (running) or completed, failed, expired, cancelled (ended); ``request_counts``
   has total, completed and failed;
4. download ``GET {base}/files/{output_file_id}/content`` and ``.../{error_file_id}/content``:
   one line per request, ``{"id", "custom_id", "response": {"status_code", "request_id",
   "body"}, "error"}``, in any order. A request the server answered with an HTTP error has its
   status and body in ``response``; one that failed otherwise has ``error: {code, message}``
   (``batch_expired`` for the requests an expired batch never ran).

One input file holds at most 50,000 requests and 200 MB (:data:`LIMITS`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator
from typing import IO, Any

from ...core.errors import ErrorCode, LlmError
from ...core.redaction import shorten
from ...wire.http_errors import error_from_http
from .http_calls import BatchHttp
from .remote import (
    BatchLimits,
    RemoteBatch,
    RemoteStatus,
    RowOutcome,
    body_bytes,
    count_of,
    counts_of,
    id_of,
    line_object,
    optional_id,
    outcomes,
    status_of,
)

__all__ = ["FIND_PAGES", "LIMITS", "TAG_KEY", "OpenAIBatches"]

#: The ``metadata`` key of a batch's tag (:meth:`OpenAIBatches.find`).
TAG_KEY = "notebook_llm_job"
#: The most pages of the batch list read to find a batch by its tag (100 batches a page).
FIND_PAGES = 10

#: The documented limits of one batch input file: 50,000 requests, 200 MB.
LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * 1000 * 1000)

#: The statuses after which a batch changes no more.
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
#: The statuses of a batch that is still at work.
RUNNING = frozenset({"validating", "in_progress", "finalizing", "cancelling"})

_ENDED_WHY = {
    "expired": "the batch expired: it did not finish within its 24 h window",
    "cancelled": "the batch was cancelled",
}


def _quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")


class OpenAIBatches:
    """OpenAI's Batch API at ``base_url`` (``https://api.openai.com/v1``) for the requests the
    adapter sends to ``endpoint_url`` (its chat completions URL); see the module docstring."""

    api = "openai"
    head = b""
    separator = b""
    tail = b""

    def __init__(
        self, provider: str, base_url: str, endpoint_url: str, limits: BatchLimits | None = None
    ) -> None:
        self.provider = provider
        self.root = base_url.rstrip("/")
        #: The endpoint as the batch names it: the path of the adapter's URL.
        self.endpoint = urllib.parse.urlsplit(endpoint_url).path
        self.limits = limits or LIMITS

    def item(self, custom_id: str, body: str) -> bytes:
        # ``body`` is the adapter's JSON text, checked when it was built: put in as it is.
        head = body_bytes({"custom_id": custom_id, "method": "POST", "url": self.endpoint})
        return head[:-1] + b', "body": ' + body.encode("utf-8") + b"}\n"

    async def submit(self, http: BatchHttp, data: IO[bytes], count: int, tag: str) -> RemoteBatch:
        data.seek(0)
        uploaded = await http.upload(
            f"{self.root}/files",
            {"purpose": "batch"},
            "batch_input.jsonl",
            data,
            "application/jsonl",
        )
        file_id = id_of(uploaded.get("id"), "file id", self.provider)
        created = await http.json(
            "POST",
            f"{self.root}/batches",
            {
                "input_file_id": file_id,
                "endpoint": self.endpoint,
                "completion_window": "24h",
                "metadata": {TAG_KEY: tag},
            },
        )
        batch_id = id_of(created.get("id"), "batch id", self.provider)
        return RemoteBatch(batch_id, {"input_file_id": file_id})

    async def find(self, http: BatchHttp, tag: str, since: float) -> RemoteBatch | None:
        """The batch whose ``metadata`` holds ``tag``, from ``GET {base}/batches`` (newest
        first, 100 a page, following ``after``): at most :data:`FIND_PAGES` pages, and no
        further than a page whose batches are all older than ``since`` (less an hour for the
        clocks' difference)."""
        after: str | None = None
        for _ in range(FIND_PAGES):
            query = "?limit=100" + (f"&after={_quoted(after)}" if after else "")
            page = await http.json("GET", f"{self.root}/batches{query}")
            data = page.get("data")
            items = [b for b in data if isinstance(b, dict)] if isinstance(data, list) else []
            for batch in items:
                metadata = batch.get("metadata")
                if isinstance(metadata, dict) and metadata.get(TAG_KEY) == tag:
                    batch_id = id_of(batch.get("id"), "batch id", self.provider)
                    file_id = optional_id(batch.get("input_file_id"), "file id", self.provider)
                    return RemoteBatch(batch_id, {"input_file_id": file_id} if file_id else {})
            created = [count_of(b.get("created_at")) for b in items]
            if not items or page.get("has_more") is not True or max(created) < since - 3600:
                return None
            after = id_of(items[-1].get("id"), "batch id", self.provider)
        return None

    async def poll(self, http: BatchHttp, remote_id: str) -> RemoteStatus:
        batch = await http.json("GET", f"{self.root}/batches/{_quoted(remote_id)}")
        status = status_of(batch.get("status"), ENDED | RUNNING, self.provider, remote_id)
        numbers = counts_of(batch.get("request_counts"), ("total", "completed", "failed"))
        fields = {
            "output_file_id": optional_id(batch.get("output_file_id"), "file id", self.provider),
            "error_file_id": optional_id(batch.get("error_file_id"), "file id", self.provider),
        }
        error = _ENDED_WHY.get(status)
        if status == "failed":
            error = "the batch failed: " + _errors_text(batch.get("errors"))
        return RemoteStatus(
            ended=status in ENDED,
            status=status,
            counts=numbers,
            finished=min(numbers["completed"] + numbers["failed"], numbers["total"]),
            total=numbers["total"] or None,
            fields=fields,
            error=error,
        )

    async def results(self, http: BatchHttp, status: RemoteStatus) -> AsyncIterator[RowOutcome]:
        for key in ("output_file_id", "error_file_id"):
            file_id = status.fields.get(key)
            if not isinstance(file_id, str):
                continue
            url = f"{self.root}/files/{_quoted(file_id)}/content"
            async for outcome in outcomes(http, url, self.outcome):
                yield outcome

    def outcome(self, line: bytes) -> RowOutcome | None:
        """One line of an output or error file (``None``: not a results line)."""
        doc = line_object(line)
        if doc is None:
            return None
        custom_id = doc["custom_id"]
        response = doc.get("response")
        if isinstance(response, dict):
            code = response.get("status_code")
            status = code if isinstance(code, int) and not isinstance(code, bool) else 0
            body = response.get("body")
            if 200 <= status < 300:
                return RowOutcome(custom_id, body_bytes(body), None, line)
            failure = error_from_http(status or 500, {}, body_bytes(body), provider=self.provider)
            request_id = response.get("request_id")
            if failure.request_id is None and isinstance(request_id, str):
                failure.request_id = shorten(request_id, 200)
            return RowOutcome(custom_id, None, failure, line)
        error = doc.get("error")
        if isinstance(error, dict):
            # Not an HTTP error: a body in the Chat Completions error shape, for the adapter to
            # map as it maps one (its code becomes ours: batch_expired -> BATCH_EXPIRED).
            return RowOutcome(custom_id, body_bytes({"error": error}), None, line)
        return RowOutcome(
            custom_id,
            None,
            LlmError(
                "the batch results line has neither a response nor an error",
                ErrorCode.MALFORMED_RESPONSE,
                provider=self.provider,
            ),
            line,
        )


def _errors_text(errors: Any) -> str:
    """The messages of a failed batch's ``errors`` (``{"object": "list", "data": [...]}``)."""
    data = errors.get("data") if isinstance(errors, dict) else None
    messages: list[str] = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        message = item.get("message")
        line = item.get("line")
        text = str(message) if isinstance(message, str) else str(item.get("code") or "error")
        if isinstance(line, int) and not isinstance(line, bool):
            text = f"line {line}: {text}"
        messages.append(text)
        if len(messages) == 3:
            break
    return shorten("; ".join(messages), 500) if messages else "the provider gave no reason"
