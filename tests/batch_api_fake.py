"""A loopback server of OpenAI's Batch API and Anthropic's Message Batches, built from the
documented shapes (``tests/fixtures/batch``) and stricter than the mock server: every request
that does not follow the documentation is refused with the provider's 400 error and named in
:attr:`FakeBatchApi.violations`, which a test expects empty.

What it checks, beyond what the mock does:

* the key, as each provider takes it (``Authorization: Bearer``; ``x-api-key`` and an
  ``anthropic-version``), on every call, the results download included;
* content types: the upload is ``multipart/form-data`` with a boundary and exactly the fields
  ``purpose`` (``batch``) and ``file`` (a ``.jsonl`` file name); a batch is created with an
  ``application/json`` body with only the documented keys;
* the input: each line exactly ``{custom_id, method, url, body}`` (``POST``, the batch's
  endpoint, a unique id, a Chat Completions body with ``model`` and ``messages`` that does not
  stream); each Anthropic request exactly ``{custom_id, params}`` with an id of
  ``[a-zA-Z0-9_-]{1,64}`` and ``params`` with ``model``, ``max_tokens`` and ``messages``;
* the limits: at most :attr:`max_requests` requests and :attr:`max_bytes` bytes per batch (the
  documented 50,000 / 200 MB and 100,000 / 256 MB unless a test sets smaller ones).

Answers are the recorded bodies of ``tests/fixtures/wire`` (a chat completion, a message) with
their text replaced by :attr:`FakeBatchApi.answer` of the row's last user message. A batch has
ended at its first read unless :meth:`hold` was called (then at the first read after
:meth:`release`).
"""

from __future__ import annotations

import contextlib
import copy
import email.parser
import email.policy
import itertools
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
BATCH = FIXTURES / "batch"
WIRE = FIXTURES / "wire"

OPENAI_LIMITS = (50_000, 200 * 1000 * 1000)
ANTHROPIC_LIMITS = (100_000, 256 * 1000 * 1000)
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _fixture(path: str) -> Any:
    return json.loads((FIXTURES / path).read_text())


class Refused(Exception):
    """A request the documented API would refuse."""


class FakeBatchApi:
    """See the module docstring. ``with FakeBatchApi() as fake:``; ``fake.url``."""

    def __init__(
        self,
        *,
        key: str = "sk-fake-batch-key",
        max_requests: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.key = key
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.violations: list[str] = []
        #: (method, path) of every request, in order.
        self.calls: list[tuple[str, str]] = []
        #: The text of an answer, from the row's last user message.
        self.answer: Callable[[str], str] = lambda text: f"answer to {text}"
        #: Changes each answer's body (an OpenAI chat completion, an Anthropic message) before
        #: it is written to the results: a test's hostile usage, a key echoed in it.
        self.edit_body: Callable[[dict[str, Any]], None] = lambda body: None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, dict[str, Any]] = {}
        self._held = False
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeBatchApi:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def hold(self) -> None:
        """Batches keep running (reads answer "in progress") until :meth:`release`."""
        self._held = True

    def release(self) -> None:
        self._held = False

    def created(self, path: str) -> int:
        """How many batches were created at ``path`` (``/v1/batches``, ``/v1/messages/batches``)."""
        return sum(1 for call in self.calls if call == ("POST", path))

    def batch_sizes(self) -> list[int]:
        """The number of requests of each batch created, in order."""
        with self._lock:
            return [len(b["requests"]) for b in self._batches.values()]

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):05d}fake"

    # ------------------------------------------------------------------ checks

    def _require(self, ok: bool, why: str) -> None:
        if not ok:
            raise Refused(why)

    def _limits(self, api: str) -> tuple[int, int]:
        requests, size = OPENAI_LIMITS if api == "openai" else ANTHROPIC_LIMITS
        return self.max_requests or requests, self.max_bytes or size

    def _check_chat_body(self, body: Any, where: str) -> None:
        self._require(isinstance(body, dict), f"{where}: body is not an object")
        self._require(isinstance(body.get("model"), str), f"{where}: body has no model")
        self._require(isinstance(body.get("messages"), list), f"{where}: body has no messages")
        self._require(not body.get("stream"), f"{where}: a batch request must not stream")

    # ------------------------------------------------------------------ OpenAI

    def upload(self, headers: Any, raw: bytes) -> dict[str, Any]:
        self._require(headers.get("Authorization") == f"Bearer {self.key}", "no or wrong key")
        ctype = headers.get("Content-Type", "")
        self._require(
            ctype.startswith("multipart/form-data") and "boundary=" in ctype,
            f"upload content type is {ctype!r}, not multipart/form-data with a boundary",
        )
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode("latin-1") + b"\r\n\r\n" + raw
        )
        parts = {p.get_param("name", header="content-disposition"): p for p in message.iter_parts()}
        self._require(set(parts) == {"purpose", "file"}, f"upload fields are {sorted(parts)}")
        purpose = parts["purpose"].get_payload(decode=True)
        self._require(purpose == b"batch", f"purpose is {purpose!r}, not 'batch'")
        name = parts["file"].get_filename() or ""
        self._require(name.endswith(".jsonl"), f"the file is named {name!r}, not *.jsonl")
        data = parts["file"].get_payload(decode=True)
        assert isinstance(data, bytes)
        max_requests, max_bytes = self._limits("openai")
        self._require(len(data) <= max_bytes, f"the file is {len(data)} bytes, over {max_bytes}")
        lines = [line for line in data.split(b"\n") if line.strip()]
        self._require(0 < len(lines) <= max_requests, f"the file has {len(lines)} requests")
        seen: set[str] = set()
        for n, line in enumerate(lines, start=1):
            doc = json.loads(line)
            self._require(
                isinstance(doc, dict) and set(doc) == {"custom_id", "method", "url", "body"},
                f"line {n} has the keys {sorted(doc) if isinstance(doc, dict) else doc!r}",
            )
            self._require(doc["method"] == "POST", f"line {n}: method {doc['method']!r}")
            self._require(doc["url"] == "/v1/chat/completions", f"line {n}: url {doc['url']!r}")
            cid = doc["custom_id"]
            self._require(isinstance(cid, str) and cid not in seen, f"line {n}: custom_id {cid!r}")
            seen.add(cid)
            self._check_chat_body(doc["body"], f"line {n}")
        file_id = self._id("file-")
        with self._lock:
            self._files[file_id] = data
        answer = _fixture("batch/openai/file_upload.json")
        answer.update(id=file_id, bytes=len(data), filename=name, purpose="batch")
        answer["created_at"] = int(time.time())
        return answer

    def create_openai(self, headers: Any, raw: bytes) -> dict[str, Any]:
        self._require(headers.get("Authorization") == f"Bearer {self.key}", "no or wrong key")
        ctype = headers.get("Content-Type", "")
        self._require(ctype.startswith("application/json"), f"create content type {ctype!r}")
        body = json.loads(raw)
        keys = set(body)
        self._require(
            {"input_file_id", "endpoint", "completion_window"} <= keys
            and keys <= {"input_file_id", "endpoint", "completion_window", "metadata"},
            f"create has the keys {sorted(keys)}",
        )
        self._require(body["completion_window"] == "24h", "completion_window is not 24h")
        self._require(body["endpoint"] == "/v1/chat/completions", "endpoint is not chat")
        with self._lock:
            data = self._files.get(body["input_file_id"])
        self._require(data is not None, "input_file_id names no file")
        assert data is not None
        requests = [json.loads(line) for line in data.split(b"\n") if line.strip()]
        batch = copy.deepcopy(_fixture("batch/openai/batch_validating.json"))
        batch.update(
            id=self._id("batch_"),
            input_file_id=body["input_file_id"],
            created_at=int(time.time()),
            metadata=body.get("metadata"),
        )
        with self._lock:
            self._batches[batch["id"]] = {"api": "openai", "doc": batch, "requests": requests}
        return batch

    def list_openai(self, headers: Any, query: str) -> dict[str, Any]:
        """``GET /v1/batches?limit=&after=``, as ``batch/list.md`` documents it: the list
        object, newest first (the batches as last read)."""
        self._require(headers.get("Authorization") == f"Bearer {self.key}", "no or wrong key")
        params = urllib.parse.parse_qs(query)
        limit = int(params.get("limit", ["20"])[0])
        self._require(1 <= limit <= 100, f"list limit {limit}")
        with self._lock:
            docs = [e["doc"] for e in reversed(self._batches.values()) if e["api"] == "openai"]
        after = params.get("after", [None])[0]
        if after is not None:
            ids = [d["id"] for d in docs]
            self._require(after in ids, f"list after an unknown id {after}")
            docs = docs[ids.index(after) + 1 :]
        page = copy.deepcopy(docs[:limit])
        return {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(docs) > limit,
        }

    def read_openai(self, headers: Any, batch_id: str) -> dict[str, Any]:
        self._require(headers.get("Authorization") == f"Bearer {self.key}", "no or wrong key")
        with self._lock:
            entry = self._batches.get(batch_id)
        self._require(entry is not None and entry["api"] == "openai", f"no batch {batch_id}")
        assert entry is not None
        doc = entry["doc"]
        n = len(entry["requests"])
        if self._held:
            doc.update(status="in_progress", in_progress_at=doc["created_at"])
            doc["request_counts"] = {"total": n, "completed": 0, "failed": 0}
        elif doc["status"] != "completed":
            out = []
            template = _fixture("wire/openai/chat_completion_text.json")
            for req in entry["requests"]:
                body = copy.deepcopy(template)
                body["model"] = req["body"]["model"]
                body["choices"][0]["message"]["content"] = self.answer(_last_user(req["body"]))
                self.edit_body(body)
                out.append(
                    {
                        "id": self._id("batch_req_"),
                        "custom_id": req["custom_id"],
                        "response": {
                            "status_code": 200,
                            "request_id": self._id("req_"),
                            "body": body,
                        },
                        "error": None,
                    }
                )
            file_id = self._id("file-")
            with self._lock:
                self._files[file_id] = b"".join(json.dumps(o).encode() + b"\n" for o in out)
            now = int(time.time())
            doc.update(
                status="completed",
                output_file_id=file_id,
                error_file_id=None,
                in_progress_at=doc["created_at"],
                finalizing_at=now,
                completed_at=now,
            )
            doc["request_counts"] = {"total": n, "completed": n, "failed": 0}
        return dict(doc)

    def file_content(self, headers: Any, file_id: str) -> bytes:
        self._require(headers.get("Authorization") == f"Bearer {self.key}", "no or wrong key")
        with self._lock:
            data = self._files.get(file_id)
        self._require(data is not None, f"no file {file_id}")
        assert data is not None
        return data

    # ------------------------------------------------------------------ Anthropic

    def _check_anthropic_key(self, headers: Any) -> None:
        self._require(headers.get("x-api-key") == self.key, "no or wrong x-api-key")
        self._require(bool(headers.get("anthropic-version")), "no anthropic-version header")

    def create_anthropic(self, headers: Any, raw: bytes) -> dict[str, Any]:
        self._check_anthropic_key(headers)
        ctype = headers.get("Content-Type", "")
        self._require(ctype.startswith("application/json"), f"create content type {ctype!r}")
        max_requests, max_bytes = self._limits("anthropic")
        self._require(len(raw) <= max_bytes, f"the batch is {len(raw)} bytes, over {max_bytes}")
        body = json.loads(raw)
        self._require(set(body) == {"requests"}, f"create has the keys {sorted(body)}")
        requests = body["requests"]
        self._require(
            isinstance(requests, list) and 0 < len(requests) <= max_requests,
            f"the batch has {len(requests)} requests",
        )
        seen: set[str] = set()
        for n, item in enumerate(requests):
            self._require(
                isinstance(item, dict) and set(item) == {"custom_id", "params"},
                f"requests.{n} has the keys {sorted(item)}",
            )
            cid = item["custom_id"]
            self._require(
                isinstance(cid, str) and bool(_CUSTOM_ID.fullmatch(cid)) and cid not in seen,
                f"requests.{n}.custom_id {cid!r}",
            )
            seen.add(cid)
            params = item["params"]
            self._check_chat_body(params, f"requests.{n}.params")
            self._require(
                isinstance(params.get("max_tokens"), int) and params["max_tokens"] >= 1,
                f"requests.{n}.params.max_tokens",
            )
        batch = copy.deepcopy(_fixture("batch/anthropic/batch_in_progress.json"))
        batch["id"] = self._id("msgbatch_")
        batch["request_counts"]["processing"] = len(requests)
        with self._lock:
            self._batches[batch["id"]] = {"api": "anthropic", "doc": batch, "requests": requests}
        return batch

    def read_anthropic(self, headers: Any, batch_id: str) -> dict[str, Any]:
        self._check_anthropic_key(headers)
        with self._lock:
            entry = self._batches.get(batch_id)
        self._require(entry is not None and entry["api"] == "anthropic", f"no batch {batch_id}")
        assert entry is not None
        doc = entry["doc"]
        if not self._held and doc["processing_status"] != "ended":
            template = _fixture("wire/anthropic/message_text.json")
            lines = []
            for req in entry["requests"]:
                message = copy.deepcopy(template)
                message["model"] = req["params"]["model"]
                message["content"][0]["text"] = self.answer(_last_user(req["params"]))
                self.edit_body(message)
                result = {"type": "succeeded", "message": message}
                lines.append({"custom_id": req["custom_id"], "result": result})
            entry["results"] = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
            n = len(lines)
            doc["processing_status"] = "ended"
            doc["request_counts"] = {
                "processing": 0,
                "succeeded": n,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            }
            doc["ended_at"] = "2024-10-08T00:46:47.283392Z"
            doc["results_url"] = f"{self.url}/v1/messages/batches/{batch_id}/results"
        return dict(doc)

    def anthropic_results(self, headers: Any, batch_id: str) -> bytes:
        self._check_anthropic_key(headers)
        with self._lock:
            entry = self._batches.get(batch_id)
        self._require(entry is not None and "results" in entry, f"no results for {batch_id}")
        assert entry is not None
        return bytes(entry["results"])


def _last_user(body: dict[str, Any]) -> str:
    for message in reversed(body["messages"]):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeBatchApi

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return data
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self, api: str, step: Callable[[], Any]) -> None:
        try:
            result = step()
        except Refused as why:
            self.fake.violations.append(f"{self.command} {self.path}: {why}")
            error: dict[str, Any]
            if api == "anthropic":
                error = {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": str(why)},
                }
            else:
                error = {
                    "error": {
                        "message": str(why),
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                }
            return self._send(400, json.dumps(error).encode(), "application/json")
        if isinstance(result, bytes):
            return self._send(200, result, "application/octet-stream")
        return self._send(200, json.dumps(result).encode(), "application/json")

    def do_POST(self) -> None:
        fake = self.fake
        raw = self._body()
        fake.calls.append(("POST", self.path))
        if self.path == "/v1/files":
            return self._answer("openai", lambda: fake.upload(self.headers, raw))
        if self.path == "/v1/batches":
            return self._answer("openai", lambda: fake.create_openai(self.headers, raw))
        if self.path == "/v1/messages/batches":
            return self._answer("anthropic", lambda: fake.create_anthropic(self.headers, raw))
        return self._answer("openai", lambda: fake._require(False, "unknown route"))

    def do_GET(self) -> None:
        fake = self.fake
        fake.calls.append(("GET", self.path))
        path, _, query = self.path.partition("?")
        parts = path.strip("/").split("/")
        with contextlib.suppress(IndexError):
            if parts == ["v1", "batches"]:
                return self._answer("openai", lambda: fake.list_openai(self.headers, query))
            if parts[:2] == ["v1", "batches"] and len(parts) == 3:
                return self._answer("openai", lambda: fake.read_openai(self.headers, parts[2]))
            if parts[:2] == ["v1", "files"] and parts[3] == "content":
                return self._answer("openai", lambda: fake.file_content(self.headers, parts[2]))
            if parts[:3] == ["v1", "messages", "batches"] and len(parts) == 4:
                return self._answer(
                    "anthropic", lambda: fake.read_anthropic(self.headers, parts[3])
                )
            if parts[:3] == ["v1", "messages", "batches"] and parts[4] == "results":
                return self._answer(
                    "anthropic", lambda: fake.anthropic_results(self.headers, parts[3])
                )
        return self._answer("openai", lambda: fake._require(False, "unknown route"))
