"""The mock server's batch APIs: OpenAI's Files API and ``/v1/batches``, and Anthropic's
Message Batches, answered by the mock models, in memory.

Routes (on :class:`~notebook_llm.adapters.mock.server.MockServer`):

* ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}/content``;
* ``POST /v1/batches`` (with its ``metadata``), ``GET /v1/batches/{id}``, and the list,
  ``GET /v1/batches?limit=&after=`` (newest first);
* ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
  ``GET /v1/messages/batches/{id}/results``.

The shapes are the documented ones (the ``tests/fixtures/batch`` bodies). When a batch ends is
the test's choice, so that a run can be stopped between submit and collect and resumed
deterministically: a batch answers "running" to its first ``polls`` reads and has ended at the
next one (:attr:`MockBatches.polls`, 0 by default: ended at the first read; or a
:class:`BatchScript` queued for the next batch with :meth:`MockBatches.queue`). A script can
also fail some input lines (the provider's error for that request), expire the batch after its
first lines (the rest get the documented ``batch_expired`` / ``expired`` results) or fail the
whole batch (OpenAI's ``failed`` status with its ``errors``).

An input the real API would refuse is refused here too, as it would be: a line that is not a
request, a ``custom_id`` used twice, a ``url`` other than the batch's endpoint (OpenAI), a
``custom_id`` outside ``^[a-zA-Z0-9_-]{1,64}$`` (Anthropic).
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import re
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from . import bodies
from .bodies import Format
from .models import UnknownModelError, generate, usage_for

__all__ = ["BatchScript", "MockBatches", "Reply"]

#: What a handler answers: the status, the body, its content type.
Reply = tuple[int, bytes, str]

_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."


@dataclass(frozen=True)
class BatchScript:
    """How the mock runs one batch: ``polls`` reads answered "running" before it has ended;
    the 0-based input lines in ``fail_lines`` fail (an HTTP 500 of the model's API);
    ``expire_after``: only that many first lines run, the batch expires and the rest get the
    expired result; ``fail``: the whole batch fails with this message (OpenAI)."""

    polls: int = 0
    fail_lines: frozenset[int] = frozenset()
    expire_after: int | None = None
    fail: str | None = None


@dataclass
class _Batch:
    id: str
    api: Format
    requests: list[dict[str, Any]]
    script: BatchScript
    endpoint: str = ""
    input_file_id: str = ""
    metadata: dict[str, str] | None = None
    created_at: float = field(default_factory=time.time)
    reads: int = 0
    running: bool = False
    ended: bool = False
    #: OpenAI: output and error file ids; Anthropic: the results lines.
    output_file_id: str | None = None
    error_file_id: str | None = None
    results: bytes = b""
    counts: dict[str, int] = field(default_factory=dict)
    status: str = ""
    errors: list[dict[str, Any]] = field(default_factory=list)


def _json(status: int, obj: Any) -> Reply:
    return status, json.dumps(obj, ensure_ascii=False).encode(), "application/json"


def _error(fmt: Format, kind: bodies.ErrorKind, message: str) -> Reply:
    status, body = bodies.error_body(fmt, kind, message)
    return _json(status, body)


class MockBatches:
    """The batch APIs' state and handlers (see the module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, _Batch] = {}
        self._scripts: deque[BatchScript] = deque()
        #: Reads of a new batch answered "running" before it has ended (see the module doc).
        self.polls = 0

    def queue(self, script: BatchScript) -> None:
        """Run the next batch created as ``script`` says (scripts are used in order)."""
        with self._lock:
            self._scripts.append(script)

    def end_running(self) -> None:
        """Every batch still running ends at its next read."""
        with self._lock:
            for batch in self._batches.values():
                if not batch.ended:
                    batch.script = replace(batch.script, polls=0)

    @property
    def created(self) -> int:
        """How many batches were created so far."""
        with self._lock:
            return len(self._batches)

    def _next_script(self) -> BatchScript:
        with self._lock:
            return self._scripts.popleft() if self._scripts else BatchScript(polls=self.polls)

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}mock"

    # ------------------------------------------------------------------ routing

    def post(self, path: str, content_type: str, raw: bytes) -> Reply | None:
        """The answer to a POST of a batch route, ``None`` when ``path`` is not one."""
        if path == "/v1/files":
            return self._upload(content_type, raw)
        if path == "/v1/batches":
            return self._create_openai(raw)
        if path == "/v1/messages/batches":
            return self._create_anthropic(raw)
        return None

    def get(self, path: str) -> Reply | None:
        """The answer to a GET of a batch route, ``None`` when ``path`` is not one."""
        parts = path.strip("/").split("/")
        if len(parts) == 4 and parts[:2] == ["v1", "files"] and parts[3] == "content":
            return self._file_content(parts[2])
        if len(parts) == 3 and parts[:2] == ["v1", "batches"]:
            return self._read(parts[2], "openai")
        if len(parts) == 4 and parts[:3] == ["v1", "messages", "batches"]:
            return self._read(parts[3], "anthropic")
        if len(parts) == 5 and parts[:3] == ["v1", "messages", "batches"] and parts[4] == "results":
            return self._anthropic_results(parts[3])
        return None

    # ------------------------------------------------------------------ OpenAI

    def _upload(self, content_type: str, raw: bytes) -> Reply:
        if not content_type.lower().startswith("multipart/form-data"):
            return _error("openai", "invalid_request", "Files are uploaded as multipart/form-data.")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
        )
        purpose, name, data = None, None, None
        for part in message.iter_parts():
            field_name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            content = payload if isinstance(payload, bytes) else b""
            if field_name == "purpose":
                purpose = content.decode("utf-8", "replace")
            elif field_name == "file":
                name = part.get_filename()
                data = content
        if purpose != "batch" or data is None:
            return _error(
                "openai", "invalid_request", "A batch input is a file with purpose 'batch'."
            )
        file_id = self._id("file-")
        with self._lock:
            self._files[file_id] = data
        return _json(
            200,
            {
                "id": file_id,
                "object": "file",
                "bytes": len(data),
                "created_at": int(time.time()),
                "filename": name or "upload",
                "purpose": "batch",
            },
        )

    def _file_content(self, file_id: str) -> Reply:
        with self._lock:
            data = self._files.get(file_id)
        if data is None:
            return _error("openai", "not_found", f"No such File object: {file_id}")
        return 200, data, "application/octet-stream"

    def _create_openai(self, raw: bytes) -> Reply:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error("openai", "invalid_request", "The body must be a JSON object.")
        endpoint = body.get("endpoint")
        with self._lock:
            data = self._files.get(str(body.get("input_file_id")))
        if data is None:
            return _error("openai", "invalid_request", "input_file_id names no uploaded file.")
        if body.get("completion_window") != "24h" or endpoint != "/v1/chat/completions":
            return _error(
                "openai",
                "invalid_request",
                "completion_window must be 24h and endpoint /v1/chat/completions.",
            )
        requests, errors = _openai_requests(data, str(endpoint))
        script = self._next_script()
        if script.fail:
            errors = [{"code": "invalid_request", "message": script.fail, "param": None, "line": 1}]
        batch = _Batch(self._id("batch_"), "openai", requests, script, str(endpoint))
        batch.input_file_id = str(body.get("input_file_id"))
        metadata = body.get("metadata")
        if metadata is not None:
            if not (
                isinstance(metadata, dict)
                and len(metadata) <= 16
                and all(
                    isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512
                    for k, v in metadata.items()
                )
            ):
                return _error(
                    "openai",
                    "invalid_request",
                    "metadata is at most 16 pairs of strings (keys 64, values 512 characters).",
                )
            batch.metadata = dict(metadata)
        batch.status = "validating"
        batch.counts = {"total": 0, "completed": 0, "failed": 0}
        if errors:  # refused as a whole, as OpenAI refuses a bad input file
            batch.errors, batch.status, batch.ended = errors, "failed", True
        with self._lock:
            self._batches[batch.id] = batch
        return _json(200, self._openai_object(batch))

    def _openai_object(self, batch: _Batch) -> dict[str, Any]:
        created = int(batch.created_at)
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": created,
            "in_progress_at": None if batch.status == "validating" else created,
            "expires_at": created + 86400,
            "completed_at": int(time.time()) if batch.status == "completed" else None,
            "failed_at": int(time.time()) if batch.status == "failed" else None,
            "expired_at": int(time.time()) if batch.status == "expired" else None,
            "request_counts": dict(batch.counts),
            "metadata": batch.metadata,
        }

    def list_openai(self, query: str) -> Reply:
        """``GET /v1/batches?limit=N&after=ID``: the OpenAI batches, newest first, as the
        documented list object (reading it moves no batch on)."""
        params = urllib.parse.parse_qs(query)
        try:
            limit = int(params.get("limit", ["20"])[0])
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            return _error("openai", "invalid_request", "limit must be between 1 and 100.")
        with self._lock:
            batches = [b for b in reversed(self._batches.values()) if b.api == "openai"]
        after = params.get("after", [None])[0]
        if after is not None:
            ids = [b.id for b in batches]
            batches = batches[ids.index(after) + 1 :] if after in ids else []
        page = batches[:limit]
        return _json(
            200,
            {
                "object": "list",
                "data": [self._openai_object(b) for b in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(batches) > limit,
            },
        )

    # ------------------------------------------------------------------ Anthropic

    def _create_anthropic(self, raw: bytes) -> Reply:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        items = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(items, list) or not items:
            return _error("anthropic", "invalid_request", "requests: a non-empty list is required")
        seen: set[str] = set()
        requests: list[dict[str, Any]] = []
        for n, item in enumerate(items):
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            params = item.get("params") if isinstance(item, dict) else None
            if not isinstance(custom_id, str) or not _ANTHROPIC_ID.fullmatch(custom_id):
                return _error(
                    "anthropic", "invalid_request", f"requests.{n}.custom_id: invalid custom_id"
                )
            if custom_id in seen:
                return _error("anthropic", "invalid_request", f"requests.{n}: duplicate custom_id")
            if not isinstance(params, dict) or params.get("stream"):
                return _error(
                    "anthropic", "invalid_request", f"requests.{n}.params: a non-streaming body"
                )
            seen.add(custom_id)
            requests.append({"custom_id": custom_id, "body": params})
        batch = _Batch(self._id("msgbatch_"), "anthropic", requests, self._next_script())
        batch.status = "in_progress"
        batch.counts = {
            "processing": len(requests),
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        }
        with self._lock:
            self._batches[batch.id] = batch
        return _json(200, self._anthropic_object(batch, ""))

    def _anthropic_object(self, batch: _Batch, base: str) -> dict[str, Any]:
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch.created_at))
        ended = batch.ended
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": batch.status,
            "request_counts": dict(batch.counts),
            "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if ended else None,
            "created_at": created,
            "expires_at": time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(batch.created_at + 86400)
            ),
            "cancel_initiated_at": None,
            "results_url": f"{base}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    def _anthropic_results(self, batch_id: str) -> Reply:
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None or batch.api != "anthropic":
            return _error("anthropic", "not_found", f"No batch {batch_id}")
        if not batch.ended:
            return _error("anthropic", "invalid_request", "The batch has not ended yet.")
        return 200, batch.results, "application/binary"

    # ------------------------------------------------------------------ both

    def _read(self, batch_id: str, api: Format) -> Reply:
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None or batch.api != api:
                return _error(api, "not_found", f"No batch {batch_id}")
            batch.reads += 1
            due = not batch.ended and not batch.running and batch.reads > batch.script.polls
            batch.running = batch.running or due  # one read runs it; others see it running
            if not batch.ended and api == "openai":
                batch.status = "in_progress"
                batch.counts["total"] = len(batch.requests)
        if due:
            self._run(batch)
        if api == "openai":
            return _json(200, self._openai_object(batch))
        return _json(200, self._anthropic_object(batch, self.base_url))

    #: The server's own URL (``results_url`` points at it); set by the server.
    base_url = ""

    def _run(self, batch: _Batch) -> None:
        """Answer every request of ``batch`` as its script says, and end it."""
        script = batch.script
        done: list[tuple[str, dict[str, Any] | None, str | None]] = []  # id, body, failure
        expired: list[str] = []
        for n, req in enumerate(batch.requests):
            if script.expire_after is not None and n >= script.expire_after:
                expired.append(req["custom_id"])
                continue
            if n in script.fail_lines:
                done.append((req["custom_id"], None, "server_error"))
                continue
            done.append((req["custom_id"], req["body"], None))
        if batch.api == "openai":
            self._end_openai(batch, done, expired)
        else:
            self._end_anthropic(batch, done, expired)

    def _end_openai(
        self,
        batch: _Batch,
        done: list[tuple[str, dict[str, Any] | None, str | None]],
        expired: list[str],
    ) -> None:
        out: list[bytes] = []
        err: list[bytes] = []
        for custom_id, body, failure in done:
            status, answer = _answer("openai", body, failure)
            line = {
                "id": self._id("batch_req_"),
                "custom_id": custom_id,
                "response": {"status_code": status, "request_id": self._id("req_"), "body": answer},
                "error": None,
            }
            (out if status == 200 else err).append(json.dumps(line).encode())
        for custom_id in expired:
            line = {
                "id": self._id("batch_req_"),
                "custom_id": custom_id,
                "response": None,
                "error": {"code": "batch_expired", "message": _EXPIRED_MESSAGE},
            }
            err.append(json.dumps(line).encode())
        with self._lock:
            if out:
                batch.output_file_id = self._id("file-")
                self._files[batch.output_file_id] = b"\n".join(out) + b"\n"
            if err:
                batch.error_file_id = self._id("file-")
                self._files[batch.error_file_id] = b"\n".join(err) + b"\n"
            batch.counts = {
                "total": len(batch.requests),
                "completed": len(out),
                "failed": len(err),
            }
            batch.status = "expired" if expired else "completed"
            batch.ended = True

    def _end_anthropic(
        self,
        batch: _Batch,
        done: list[tuple[str, dict[str, Any] | None, str | None]],
        expired: list[str],
    ) -> None:
        lines: list[bytes] = []
        succeeded = errored = 0
        for custom_id, body, failure in done:
            status, answer = _answer("anthropic", body, failure)
            if status == 200:
                succeeded += 1
                result: dict[str, Any] = {"type": "succeeded", "message": answer}
            else:
                errored += 1
                result = {"type": "errored", "error": answer}
            lines.append(json.dumps({"custom_id": custom_id, "result": result}).encode())
        for custom_id in expired:
            lines.append(
                json.dumps({"custom_id": custom_id, "result": {"type": "expired"}}).encode()
            )
        with self._lock:
            batch.results = b"\n".join(lines) + b"\n"
            batch.counts = {
                "processing": 0,
                "succeeded": succeeded,
                "errored": errored,
                "canceled": 0,
                "expired": len(expired),
            }
            batch.status = "ended"
            batch.ended = True


def _openai_requests(
    data: bytes, endpoint: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The requests of an OpenAI batch input file, and the errors that refuse it."""
    requests: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            line = None
        why = None
        if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
            why = "Each line must be a JSON object with a body."
        elif not isinstance(line.get("custom_id"), str) or line["custom_id"] in seen:
            why = "Each line needs a custom_id that no other line has."
        elif line.get("method") != "POST" or line.get("url") != endpoint:
            why = f"Each line must POST to the batch's endpoint {endpoint}."
        elif line["body"].get("stream"):
            why = "Streaming is not supported in a batch."
        if why is not None:
            return [], [{"code": "invalid_request", "message": why, "param": None, "line": n}]
        seen.add(line["custom_id"])
        requests.append({"custom_id": line["custom_id"], "body": line["body"]})
    if not requests:
        return [], [{"code": "empty_file", "message": "The file has no requests.", "line": None}]
    return requests, []


def _answer(fmt: Format, body: dict[str, Any] | None, failure: str | None) -> tuple[int, Any]:
    """The mock model's answer to one request: the status and the JSON body (an error body
    for a failed line or an unknown model)."""
    if failure is not None or body is None:
        status, error = bodies.error_body(fmt, "server_error")
        return status, error
    request = bodies.to_chat_request(fmt, body)
    try:
        reply = generate(request)
    except UnknownModelError as e:
        status, error = bodies.error_body(fmt, "model_not_found", f"model: {e.model}")
        return status, error
    usage = usage_for(reply, request)
    rid = f"msg_batch{time.monotonic_ns()}" if fmt == "anthropic" else "chatcmpl-batch"
    return 200, bodies.json_body(fmt, reply, model=str(body.get("model", "")), usage=usage, rid=rid)
